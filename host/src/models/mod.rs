//! The built-in models. Each implements [`crate::Model`], the same path a user's own model takes.

pub mod banana;
pub mod beta_binomial;
pub mod gaussian;
pub mod gp_hyper;
pub mod logistic;
pub mod probit;
