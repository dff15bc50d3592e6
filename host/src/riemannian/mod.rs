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
//! - [`metrics`]: the metrics: a constant one, the logistic regression's Fisher information, the
//!   random network's Hessian made positive definite by SoftAbs, and its SoftAbs'd diagonal.
//! - [`integrator`]: the generalized (implicit) leapfrog with fixed-point solves to a tolerance
//!   and a reversibility check of every step.
//! - [`transition`]: one RMHMC transition with exact Metropolis–Hastings.
//! - [`timed`]: a metric that counts and clocks its own work, for the output.

pub mod integrator;
pub mod metrics;
pub mod timed;
pub mod transition;

use nalgebra::{Cholesky, DMatrix, DVector, Dyn};

pub use integrator::{GeneralizedLeapfrog, StepFailure, Trajectory};
pub use metrics::{ConstantMetric, LogisticFisher, NetworkDiagonalSoftAbs, NetworkSoftAbs};
pub use timed::{MetricWork, Timed};
pub use transition::{Divergence, Rmhmc, RmhmcCounts, RmhmcTransition};

/// A position-dependent metric `G(q)`: what a model or surrogate offers when it can supply
/// Riemannian-manifold HMC with a metric (an object-safe trait, so the sampler can hold any
/// metric as `&dyn RiemannianMetric`).
pub trait RiemannianMetric: Sync {
    /// The dimension `d` of the points.
    fn dim(&self) -> usize;

    /// The metric at `q`, factored, with what its derivatives need cached. `None` where `G(q)`
    /// is not positive definite or not finite (a failed Cholesky factorization): the dynamics
    /// then end the trajectory as divergent, never panic or carry a NaN on.
    fn at(&self, q: &[f64]) -> Option<Box<dyn MetricAt + '_>>;

    /// `out ≈ G(q) x` without factoring `G(q)`, for a metric where that costs much less than
    /// [`at`](Self::at) (the logistic Fisher information: O(N·d) against O(N·d²); the network
    /// Hessian: O(s·d) against O(s·d²)). `false`, leaving `out` alone, for a metric with no such
    /// product (the default). It may be an approximation (the network metric's is its
    /// Hessian's, which SoftAbs changes where an eigenvalue is small): the generalized leapfrog
    /// uses it only to find where the solution of its position equation lies, and accepts a
    /// solution only by the residual under the metric [`at`](Self::at) evaluates there.
    fn product(&self, _q: &[f64], _x: &[f64], _out: &mut [f64]) -> bool {
        false
    }
}

/// A metric evaluated at one point `q`. The expensive parts (the factorization) are done once
/// by [`RiemannianMetric::at`]; the methods apply them.
pub trait MetricAt {
    /// `G(q)` as a dense matrix.
    fn matrix(&self) -> DMatrix<f64>;

    /// `out = G(q)⁻¹ p`.
    fn solve(&self, p: &[f64], out: &mut [f64]);

    /// `out = L z` for a square root `L Lᵀ = G(q)` (the Cholesky factor, or `Q diag(√g)` for a
    /// metric held as an eigen-decomposition): `p = L z` with standard normal `z` is a draw of
    /// `p ~ N(0, G(q))`.
    fn factor_times(&self, z: &[f64], out: &mut [f64]);

    /// `log det G(q)`.
    fn log_det(&self) -> f64;

    /// `outᵢ = tr(G⁻¹ ∂ᵢG)`, so `∇(½ log det G) = ½ out`. Evaluated only where a step ends, as
    /// it is the dearest part of a metric (O(N·d²) for the Fisher information).
    fn trace_derivatives(&self, out: &mut [f64]);

    /// `outᵢ = uᵀ ∂ᵢG u`; with `u = G⁻¹p` this is `νᵢ`, the kinetic energy's force
    /// `∂ᵢ(½ pᵀG⁻¹p) = −½ νᵢ`.
    fn quadratic_derivatives(&self, u: &[f64], out: &mut [f64]);

    /// The derivative of the velocity `G(q)⁻¹p` with respect to `q`, given `v = G(q)⁻¹p`: the
    /// matrix whose column `k` is `−G⁻¹ ∂ₖG v`, where a metric has it for O(d²) (the network's
    /// diagonal, from the derivatives it holds anyway); `None` (the default) elsewhere. The
    /// position solve's Newton correction uses it (see [`integrator`]).
    fn velocity_derivative(&self, _v: &[f64]) -> Option<DMatrix<f64>> {
        None
    }
}

/// A dense symmetric positive definite matrix held as its Cholesky factorization.
#[derive(Clone, Debug)]
pub struct DenseFactor {
    cholesky: Cholesky<f64, Dyn>,
    log_det: f64,
}

impl DenseFactor {
    /// Factors `g`; `None` if it has a non-finite entry or is not positive definite.
    pub fn new(g: DMatrix<f64>) -> Option<Self> {
        if !g.iter().all(|x| x.is_finite()) {
            return None;
        }
        let cholesky = Cholesky::new(g)?;
        let log_det = 2.0
            * cholesky
                .l_dirty()
                .diagonal()
                .iter()
                .map(|x| x.ln())
                .sum::<f64>();
        log_det.is_finite().then_some(Self { cholesky, log_det })
    }

    /// `G⁻¹ p`.
    pub fn solve(&self, p: &[f64], out: &mut [f64]) {
        let x = self.cholesky.solve(&DVector::from_column_slice(p));
        out.copy_from_slice(x.as_slice());
    }

    /// `L z` with the lower Cholesky factor `L`.
    pub fn factor_times(&self, z: &[f64], out: &mut [f64]) {
        let x = self.cholesky.l() * DVector::from_column_slice(z);
        out.copy_from_slice(x.as_slice());
    }

    /// `log det G`.
    pub fn log_det(&self) -> f64 {
        self.log_det
    }

    /// The factorization.
    pub fn cholesky(&self) -> &Cholesky<f64, Dyn> {
        &self.cholesky
    }
}

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
