//! Precomputed grids over a domain of interest: grid HMC's force map and sparse-grid HMC's
//! Smolyak interpolant (the precomputing paper; docs/methods.md section 5), two kinds of
//! [`Surrogate`](super::Surrogate).
//!
//! Both replace the exact `∇U` in the leapfrog by something read off a table that was filled once
//! inside a box [`Domain`]. Outside the box there is no table: a grid's
//! [`Surrogate::contains`](super::Surrogate::contains) is its box, and the sampler's
//! [`Fallback`](super::Fallback) hands every other point to the exact potential (the paper's
//! eq. 3.11):
//!
//! ```text
//! Û(q) = Ũ(q) if q ∈ D, U(q) otherwise
//! ```
//!
//! - [`ForceGrid`] (naive grid HMC): `U` and `∇U` at every cell centre of a uniform grid,
//!   piecewise constant. Cost and memory grow as `(extent/h)ᵈ`, so only a few dimensions.
//! - [`SparseGrid`] (sparse-grid HMC): a piecewise-linear hierarchical interpolant of `U` on a
//!   Clenshaw–Curtis sparse grid, regular or refined adaptively where the surpluses are large;
//!   its gradient drives the leapfrog. Point counts grow as `N (log N)^(d−1)`.
//!
//! A grid is fitted from the exact potential, not from states: [`GridFitter`] chooses the box
//! (Laplace, the states' bounding box, or given) and fills the grid.
//!
//! # Still exact
//! Used as the proposal of [`shmc_core::Surrogate`] (the Metropolis–Hastings step judges with
//! the exact `U`), a grid costs acceptance rate but not correctness: each leapfrog half-kick
//! `p ← p − ε/2 ∇Û(q)` is a shear that moves `p` by an amount depending on `q` alone, and each
//! drift `q ← q + ε M⁻¹ p` one depending on `p` alone, so the trajectory map is volume
//! preserving and, with the momentum flipped, its own inverse, whatever (even discontinuous)
//! position-only force `∇Û` is (the paper's Appendix A). Only the "complete" variant, which also
//! accepts with `Û`, is approximate: it samples `∝ exp(−Û)`, within `KL ≤ 2‖U − Û‖∞` of the
//! target (Theorem 5.1); [`SparseGrid::kl_bound_estimate`] gives the estimate to label it with.
//!
//! # Memory
//! Both builders take a memory limit in bytes and count their storage with checked arithmetic
//! before allocating or evaluating anything, so a grid that cannot fit is an error stating the
//! bytes it would need, not an abort.
//!
//! # Files
//! Both save through [`super::file`] under their kinds' names ([`FORCE_GRID_KIND`],
//! [`SPARSE_GRID_KIND`]), every float exact ([`super::exact_floats`]), so a loaded grid gives
//! bit-identical values and gradients.

pub mod domain;
pub mod fitter;
pub mod force_grid;
pub mod sparse_grid;

use std::time::Instant;

use serde::{Deserialize, Serialize};

pub use domain::Domain;

use crate::{Error, Result};

/// An error naming the first entry of `entries` (the `what` of a grid read from a file) that is
/// not finite: a grid is built only where the model is finite, so a NaN or an infinity in a
/// file was put there by something else, and would reach a trajectory as a NaN force.
fn all_finite(what: &str, entries: &[f64]) -> Result<()> {
    match entries.iter().position(|x| !x.is_finite()) {
        Some(k) => Err(Error::invalid(format!(
            "{what} entry {} of {} is {}: a grid holds finite numbers",
            k + 1,
            entries.len(),
            entries[k]
        ))),
        None => Ok(()),
    }
}
pub use fitter::{DomainChoice, GridFitter, GridKind};
pub use force_grid::{ForceGrid, Interpolation};
pub use sparse_grid::{AdaptiveOptions, AdaptiveStop, Construction, SparseGrid};

/// The kind name of a force grid in a surrogate file.
pub const FORCE_GRID_KIND: &str = "force-grid";
/// The kind name of a sparse grid in a surrogate file.
pub const SPARSE_GRID_KIND: &str = "sparse-grid";

/// What filling a grid cost: the exact evaluations (the expensive part, the thing a grid must
/// pay back in cheaper trajectories) and the wall time they took.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Precomputation {
    /// Calls into the exact potential.
    pub evaluations: u64,
    /// Wall-clock seconds of the construction (evaluations in parallel).
    #[serde(with = "crate::surrogates::exact_floats")]
    pub seconds: f64,
}

impl Precomputation {
    fn since(start: Instant, evaluations: u64) -> Self {
        Self {
            evaluations,
            seconds: start.elapsed().as_secs_f64(),
        }
    }
}

#[cfg(test)]
mod tests;
