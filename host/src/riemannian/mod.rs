//! Riemannian-manifold HMC (Girolami & Calderhead 2011) and its surrogate-accelerated form,
//! RNS-RMHMC (the journal paper's section 3.4; docs/methods.md section 6).
//!
//! The Hamiltonian is `H(q, p) = U(q) + ½ log det G(q) + ½ pᵀG(q)⁻¹p` with a position-dependent
//! metric `G`. The metric is a capability of its own ([`RiemannianMetric`]), separate from the
//! [`Potential`](shmc_core::Potential): a model or surrogate offers one when it can, and the
//! dynamics take the potential and the metric separately, so RNS-RMHMC can pair the surrogate's
//! potential and Hessian metric in the dynamics with the exact `U` in the Metropolis–Hastings
//! step.
//!
//! - [`metrics`]: the surrogate's metrics: the random network's Hessian made positive definite
//!   by SoftAbs, and its SoftAbs'd diagonal (a model's own metrics live with the model).
//! - [`integrator`]: the generalized (implicit) leapfrog with fixed-point solves to a tolerance
//!   and a reversibility check of every step.
//! - [`transition`]: one RMHMC transition with exact Metropolis–Hastings.
//! - [`timed`]: a metric that counts and clocks its own work, for the output.

pub mod integrator;
pub mod metrics;
pub mod timed;
pub mod transition;

pub use integrator::{GeneralizedLeapfrog, StepFailure, Trajectory};
pub use metrics::{NetworkDiagonalSoftAbs, NetworkSoftAbs};
pub use timed::{MetricWork, Timed};
pub use transition::{Divergence, Rmhmc, RmhmcCounts, RmhmcTransition};

// The capability the samplers here run on: a model's (or a surrogate's) metric, defined with
// the models.
pub use crate::metric::{ConstantMetric, DenseFactor, MetricAt, RiemannianMetric};

/// The largest difference between two vectors with coordinate `k` weighted by `weight[k]`:
/// the norm the fixed-point solves and the reversibility check compare with, in the metric's
/// units (positions weighted by `√Gₖₖ`, momenta by `1/√Gₖₖ`; see [`integrator`]).
fn max_weighted_difference(a: &[f64], b: &[f64], weight: &[f64]) -> f64 {
    let mut m = 0.0f64;
    for ((x, y), w) in a.iter().zip(b).zip(weight) {
        let d = (x - y).abs() * w;
        // A NaN difference counts as infinitely large, so no test of `< tolerance` passes it.
        if d.is_nan() {
            return f64::INFINITY;
        }
        m = m.max(d);
    }
    m
}

#[cfg(test)]
mod tests;
