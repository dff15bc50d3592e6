//! `shmc`: the host side of surrogate-accelerated Hamiltonian Monte Carlo, as a library.
//!
//! The no_std core ([`shmc_core`]) holds the algorithms; this crate adds what needs an operating
//! system: models over data files, a multi-chain driver with warmup, diagnostics, Stan-compatible
//! CSV output, the HTML report and UM-Bridge. The `shmc` command line and the papers' benchmarks
//! are another crate (`shmc-cli`) on top of this one: a program that only samples compiles no
//! argument parser, progress bar or signal handler.
//!
//! The layers import one way, each only from those before it: [`models`] (with [`data`],
//! [`metric`] (the Riemannian metric a model may offer),
//! [`optimize`], [`whitening`] (the Laplace approximation as a change of variables) and
//! [`row_sum`], the capability to share a pass over the data) →
//! [`surrogates`] (what a trained surrogate is, and its kinds) → [`sampler`] (the chains, which
//! drive any surrogate) → [`output`] → [`sbc`] (simulation-based calibration of any sampler)
//! and [`report`] (a run's files as one HTML page) → [`api`] (the short way in: [`Sampler`]).
//! Below them all: [`random`] (the seeded streams), [`records`] (what the sampler writes and
//! the output and report read), [`diagnostics`], [`error`], [`memory`]
//! (allocations sized before they are made), [`plot`] (the look of every SVG plot).
//! [`umbridge`]'s protocol and client sit below the models (a served model is a model), and
//! [`serve`], the server that serves them, above.
//!
//! # Your own model
//! Implement [`shmc_core::Potential`] (`U` and `∇U` on the unconstrained space, Jacobians
//! included) and [`Model`] (parameter names), then run a [`Sampler`] on it (or, to stream the
//! draws as they are made, call [`sampler::sample`] with sinks of your own); see
//! `examples/linear_regression.rs`.

pub mod api;
pub mod batch;
pub mod data;
pub mod diagnostics;
pub mod digest;
pub mod error;
pub mod memory;
pub mod metric;
pub mod model;
pub mod models;
pub mod optimize;
pub mod output;
pub mod pde;
pub mod plot;
pub mod posteriordb;
pub mod random;
pub mod records;
pub mod report;
pub mod riemannian;
pub mod row_sum;
pub mod sampler;
pub mod sbc;
pub mod serve;
pub mod surrogates;
pub mod umbridge;
pub mod whitening;

pub use api::{Fit, Sampler};
pub use error::{Error, Result};
pub use model::{FnModel, Generative, Levels, Model, Simulated};
pub use shmc_core as core;
