//! Precomputed grids over a domain of interest: grid HMC's force map and sparse-grid HMC's
//! Smolyak interpolant (the precomputing paper; METHODS.md section 5).
//!
//! Both need, first, the box they cover: [`Domain`].

pub mod domain;
mod exact;

pub use domain::Domain;

#[cfg(test)]
mod tests;
