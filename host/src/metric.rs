//! The Riemannian metric a model (or a surrogate) may offer: `G(q)`, positive definite at every
//! point, for Riemannian-manifold HMC ([`crate::riemannian`]). A capability of the model layer,
//! beside the potential: [`crate::Model::riemannian_metric`] hands one out, and the samplers run
//! on whatever metric they are given. Here are the two traits and the pieces any metric uses: a
//! dense factorization and a constant metric (which makes the generalized leapfrog the ordinary
//! one); the logistic regression's Fisher information lives with that model, the network's
//! SoftAbs'd Hessian with the Riemannian samplers.

use nalgebra::{Cholesky, DMatrix, DVector, Dyn};

use crate::error::{Error, Result};

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
    /// position solve's Newton correction uses it (see [`crate::riemannian::integrator`]).
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

/// A constant metric `G = M`: the generalized leapfrog is then the ordinary leapfrog with mass
/// matrix `M` (no derivatives, so both implicit equations are solved in one iteration), which is
/// what tests hold the implicit integrator to.
#[derive(Clone, Debug)]
pub struct ConstantMetric {
    matrix: DMatrix<f64>,
    factor: DenseFactor,
}

impl ConstantMetric {
    /// The metric `M`; an error if `M` is not square, symmetric and positive definite.
    pub fn new(matrix: DMatrix<f64>) -> Result<Self> {
        if !matrix.is_square() || (&matrix - matrix.transpose()).amax() > 1e-12 * matrix.amax() {
            return Err(Error::invalid(
                "a constant metric must be a symmetric square matrix",
            ));
        }
        let factor = DenseFactor::new(matrix.clone())
            .ok_or_else(|| Error::invalid("a constant metric must be positive definite"))?;
        Ok(Self { matrix, factor })
    }
}

struct ConstantAt<'a>(&'a ConstantMetric);

impl MetricAt for ConstantAt<'_> {
    fn matrix(&self) -> DMatrix<f64> {
        self.0.matrix.clone()
    }
    fn solve(&self, p: &[f64], out: &mut [f64]) {
        self.0.factor.solve(p, out);
    }
    fn factor_times(&self, z: &[f64], out: &mut [f64]) {
        self.0.factor.factor_times(z, out);
    }
    fn log_det(&self) -> f64 {
        self.0.factor.log_det()
    }
    fn trace_derivatives(&self, out: &mut [f64]) {
        out.fill(0.0);
    }
    fn quadratic_derivatives(&self, _: &[f64], out: &mut [f64]) {
        out.fill(0.0);
    }
}

impl RiemannianMetric for ConstantMetric {
    fn dim(&self) -> usize {
        self.matrix.nrows()
    }
    fn at(&self, _: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        Some(Box::new(ConstantAt(self)))
    }
}
