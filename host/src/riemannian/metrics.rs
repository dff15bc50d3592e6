//! The metrics: a constant one (which makes the generalized leapfrog the ordinary one), the
//! Fisher information of logistic regression, and the random network's Hessian, made positive
//! definite by SoftAbs, whole or its diagonal.
//!
//! # Why SoftAbs for the network's Hessian, not a jitter floor
//!
//! A surrogate's Hessian is indefinite wherever the network bends the wrong way (far from the
//! training states, or where it has overfitted), and by an amount nobody knows in advance. A
//! jitter floor `H + δI` is positive definite only where the most negative eigenvalue is above
//! `−δ`, so it still fails somewhere (each failure a rejected proposal), and clamping the
//! eigenvalues at a floor makes `G` non-differentiable, which the implicit solves of the
//! generalized leapfrog and its derivatives `∂ᵢG` do not tolerate. SoftAbs (Betancourt 2013)
//! maps every eigenvalue `λ` to `λ coth(αλ) ≥ 1/α`: smooth, positive definite everywhere, and
//! `≈ |λ|` once `|λ| ≫ 1/α`, so on a convex problem it is the Hessian itself. Its price, an
//! O(d³) symmetric eigen-decomposition per point, is of the order of the Cholesky factorization
//! a metric needs anyway. The diagonal metric applies the same map to each diagonal entry.

use nalgebra::{DMatrix, DVector, Dyn, SymmetricEigen};
use shmc_core::Network;
use shmc_core::fastmath::softplus_logistic;

use super::{DenseFactor, MetricAt, RiemannianMetric};
use crate::models::logistic::LogisticRegression;
use crate::{Error, Result};

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

/// The Fisher information of logistic regression plus the prior precision,
/// `G(β) = Xᵀ diag(π(1−π)) X + I/σ²` with `π = σ(Xβ)`: the expected Hessian of `U`, positive
/// definite everywhere, the journal paper's metric for RMHMC. Its derivatives are
/// `∂ᵢG = Xᵀ diag(π(1−π)(1−2π) x·ᵢ) X`.
///
/// Costs O(N·d²) per point (the Gram matrix, and the `N` solves of `tr(G⁻¹∂ᵢG)`): the metric
/// work that makes exact RMHMC slower than HMC per effective sample in the paper.
#[derive(Clone, Debug)]
pub struct LogisticFisher {
    /// The design, `N × d`.
    x: DMatrix<f64>,
    precision: f64,
}

impl LogisticFisher {
    /// The Fisher metric of `model` (it copies the design into a column-major matrix).
    pub fn new(model: &LogisticRegression) -> Self {
        let data = model.data();
        Self {
            x: DMatrix::from_row_slice(data.n, data.p, &data.x),
            precision: 1.0 / model.prior_variance(),
        }
    }
}

struct FisherAt<'a> {
    x: &'a DMatrix<f64>,
    factor: DenseFactor,
    matrix: DMatrix<f64>,
    /// `π(1−π)(1−2π)` per row.
    third: DVector<f64>,
}

impl RiemannianMetric for LogisticFisher {
    fn dim(&self) -> usize {
        self.x.ncols()
    }

    fn at(&self, q: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        let z = &self.x * DVector::from_column_slice(q);
        let mut root = DVector::zeros(z.len());
        let mut third = DVector::zeros(z.len());
        for (n, &zn) in z.iter().enumerate() {
            let (_, pi) = softplus_logistic(zn);
            let w = pi * (1.0 - pi);
            third[n] = w * (1.0 - 2.0 * pi);
            root[n] = w.sqrt();
        }
        let mut scaled = self.x.clone();
        for mut column in scaled.column_iter_mut() {
            column.component_mul_assign(&root);
        }
        // An explicit transpose and `*`, which runs matrixmultiply's blocked gemm (`tr_mul`
        // runs one dot product per entry, several times slower at N = 100 000).
        let mut matrix = scaled.transpose() * &scaled;
        for k in 0..matrix.nrows() {
            matrix[(k, k)] += self.precision;
        }
        let factor = DenseFactor::new(matrix.clone())?;
        Some(Box::new(FisherAt {
            x: &self.x,
            factor,
            matrix,
            third,
        }))
    }
}

impl MetricAt for FisherAt<'_> {
    fn matrix(&self) -> DMatrix<f64> {
        self.matrix.clone()
    }
    fn solve(&self, p: &[f64], out: &mut [f64]) {
        self.factor.solve(p, out);
    }
    fn factor_times(&self, z: &[f64], out: &mut [f64]) {
        self.factor.factor_times(z, out);
    }
    fn log_det(&self) -> f64 {
        self.factor.log_det()
    }

    /// `Σₙ π(1−π)(1−2π)ₙ (xₙᵀG⁻¹xₙ) xₙᵢ`, with every `xₙᵀG⁻¹xₙ` from one gemm `X G⁻¹`.
    fn trace_derivatives(&self, out: &mut [f64]) {
        let mut b = self.x * self.factor.cholesky().inverse();
        b.component_mul_assign(self.x);
        let mut weights = b.column_sum();
        weights.component_mul_assign(&self.third);
        out.copy_from_slice(self.x.tr_mul(&weights).as_slice());
    }

    /// `Σₙ π(1−π)(1−2π)ₙ (xₙ·u)² xₙᵢ`.
    fn quadratic_derivatives(&self, u: &[f64], out: &mut [f64]) {
        let mut t = self.x * DVector::from_column_slice(u);
        t.iter_mut()
            .zip(self.third.iter())
            .for_each(|(tn, w)| *tn = w * *tn * *tn);
        out.copy_from_slice(self.x.tr_mul(&t).as_slice());
    }
}

/// `(g(λ), g'(λ))` for SoftAbs, `g(λ) = λ coth(αλ)`: at least `1/α`, `≈ |λ|` for `|αλ| ≫ 1`.
/// Near 0 from the series `x coth x = 1 + x²/3 − x⁴/45 + 2x⁶/945` (`x = αλ`), whose next term
/// is below 10⁻¹⁴ for `|x| < 0.05`; beyond, `g' = coth x − x/sinh² x`, which loses at most
/// three digits to cancellation there.
fn softabs(lambda: f64, alpha: f64) -> (f64, f64) {
    let x = alpha * lambda;
    if x.abs() < 0.05 {
        let x2 = x * x;
        let g = (1.0 + x2 / 3.0 - x2 * x2 / 45.0 + 2.0 * x2 * x2 * x2 / 945.0) / alpha;
        let dg = 2.0 * x / 3.0 - 4.0 * x * x2 / 45.0 + 12.0 * x * x2 * x2 / 945.0;
        (g, dg)
    } else {
        let coth = 1.0 / x.tanh();
        let sinh = x.sinh();
        (lambda * coth, coth - x / (sinh * sinh))
    }
}

/// The checked SoftAbs regularization `α`.
fn check_alpha(alpha: f64) -> Result<f64> {
    if alpha.is_finite() && alpha > 0.0 {
        Ok(alpha)
    } else {
        Err(Error::invalid(format!(
            "the SoftAbs regularization must be finite and positive, got {alpha}"
        )))
    }
}

/// The random network's Hessian mapped by SoftAbs, `G(q) = Q diag(λ coth(αλ)) Qᵀ` where
/// `∇²z(q) = Q diag(λ) Qᵀ`: the journal paper's RNS-RMHMC metric, made positive definite
/// everywhere (see the module's note on why SoftAbs). Derivatives go through the eigenbasis,
/// `∂ᵢG = Q (J ∘ Qᵀ∂ᵢ∇²z Q) Qᵀ` with `Jₐᵦ = (gₐ − gᵦ)/(λₐ − λᵦ)` (`g'(λₐ)` on the diagonal),
/// so both contractions the dynamics need are `tr(M ∂ᵢ∇²z)` for one matrix `M`, which the
/// network computes for every `i` in O(s·d²) ([`Network::hessian_derivative_trace`]).
#[derive(Clone, Copy, Debug)]
pub struct NetworkSoftAbs<'a> {
    network: &'a Network<Dyn, Dyn>,
    alpha: f64,
}

impl<'a> NetworkSoftAbs<'a> {
    /// The metric of `network` with SoftAbs regularization `alpha` (eigenvalues are floored
    /// smoothly at `1/alpha`; Betancourt uses `α = 10⁶` for a near-exact `|λ|`, smaller values
    /// smooth more).
    pub fn new(network: &'a Network<Dyn, Dyn>, alpha: f64) -> Result<Self> {
        Ok(Self {
            network,
            alpha: check_alpha(alpha)?,
        })
    }
}

struct SoftAbsAt<'a> {
    network: &'a Network<Dyn, Dyn>,
    q: Vec<f64>,
    vectors: DMatrix<f64>,
    /// `g(λ)` per eigenvalue.
    values: DVector<f64>,
    /// The divided differences `J`.
    divided: DMatrix<f64>,
}

impl RiemannianMetric for NetworkSoftAbs<'_> {
    fn dim(&self) -> usize {
        self.network.dim()
    }

    fn at(&self, q: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        let d = self.dim();
        let mut h = DMatrix::zeros(d, d);
        self.network.hessian(q, h.as_mut_slice());
        if !h.iter().all(|x| x.is_finite()) {
            return None;
        }
        let eigen = SymmetricEigen::new(h);
        let lambda = eigen.eigenvalues;
        let (mut values, mut slopes) = (DVector::zeros(d), DVector::zeros(d));
        for k in 0..d {
            (values[k], slopes[k]) = softabs(lambda[k], self.alpha);
        }
        if !values.iter().all(|g| g.is_finite() && *g > 0.0) {
            return None;
        }
        let divided = DMatrix::from_fn(d, d, |a, b| {
            let gap = lambda[a] - lambda[b];
            // Below this gap the divided difference would lose more digits to cancellation than
            // the derivative at the midpoint is off by (O(gap²)).
            if gap.abs() > 1e-5 * (1.0 / self.alpha + lambda[a].abs() + lambda[b].abs()) {
                (values[a] - values[b]) / gap
            } else {
                softabs(0.5 * (lambda[a] + lambda[b]), self.alpha).1
            }
        });
        Some(Box::new(SoftAbsAt {
            network: self.network,
            q: q.to_vec(),
            vectors: eigen.eigenvectors,
            values,
            divided,
        }))
    }
}

impl SoftAbsAt<'_> {
    /// `outᵢ = tr(Q C Qᵀ ∂ᵢ∇²z)` for the eigenbasis coefficients `C`.
    fn traced(&self, coefficients: &DMatrix<f64>, out: &mut [f64]) {
        let m = &self.vectors * coefficients * self.vectors.transpose();
        self.network
            .hessian_derivative_trace(&self.q, m.as_slice(), out);
    }
}

impl MetricAt for SoftAbsAt<'_> {
    fn matrix(&self) -> DMatrix<f64> {
        &self.vectors * DMatrix::from_diagonal(&self.values) * self.vectors.transpose()
    }
    fn solve(&self, p: &[f64], out: &mut [f64]) {
        let mut c = self.vectors.tr_mul(&DVector::from_column_slice(p));
        c.component_div_assign(&self.values);
        out.copy_from_slice((&self.vectors * c).as_slice());
    }
    fn factor_times(&self, z: &[f64], out: &mut [f64]) {
        let c = DVector::from_iterator(
            z.len(),
            z.iter()
                .zip(self.values.iter())
                .map(|(zk, g)| zk * g.sqrt()),
        );
        out.copy_from_slice((&self.vectors * c).as_slice());
    }
    fn log_det(&self) -> f64 {
        self.values.iter().map(|g| g.ln()).sum()
    }
    /// `tr(G⁻¹∂ᵢG) = Σₐ (Jₐₐ/gₐ)(Qᵀ∂ᵢ∇²z Q)ₐₐ`.
    fn trace_derivatives(&self, out: &mut [f64]) {
        let c = DMatrix::from_diagonal(&self.divided.diagonal().component_div(&self.values));
        self.traced(&c, out);
    }
    /// `uᵀ∂ᵢG u = Σₐᵦ ũₐ ũᵦ Jₐᵦ (Qᵀ∂ᵢ∇²z Q)ₐᵦ` with `ũ = Qᵀu`.
    fn quadratic_derivatives(&self, u: &[f64], out: &mut [f64]) {
        let ut = self.vectors.tr_mul(&DVector::from_column_slice(u));
        let c = self.divided.component_mul(&(&ut * ut.transpose()));
        self.traced(&c, out);
    }
}

/// The diagonal of the random network's Hessian, each entry mapped by SoftAbs,
/// `G(q) = diag(g(∂ᵢ²z))`: the journal paper's RNS-RMHMC metric for the PDE problem (section
/// 5.2), where a dense metric's O(d³) per point buys little. Positive everywhere, at least
/// `1/α`; `∂ₖG = diag(g'(∂ᵢ²z) ∂ₖ∂ᵢ²z)`.
#[derive(Clone, Copy, Debug)]
pub struct NetworkDiagonalSoftAbs<'a> {
    network: &'a Network<Dyn, Dyn>,
    alpha: f64,
}

impl<'a> NetworkDiagonalSoftAbs<'a> {
    /// The diagonal metric of `network` with SoftAbs regularization `alpha`.
    pub fn new(network: &'a Network<Dyn, Dyn>, alpha: f64) -> Result<Self> {
        Ok(Self {
            network,
            alpha: check_alpha(alpha)?,
        })
    }
}

struct DiagonalAt<'a> {
    network: &'a Network<Dyn, Dyn>,
    q: Vec<f64>,
    values: Vec<f64>,
    slopes: Vec<f64>,
}

impl RiemannianMetric for NetworkDiagonalSoftAbs<'_> {
    fn dim(&self) -> usize {
        self.network.dim()
    }

    fn at(&self, q: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        let d = self.dim();
        let mut h = vec![0.0; d * d];
        self.network.hessian(q, &mut h);
        let (values, slopes): (Vec<f64>, Vec<f64>) =
            (0..d).map(|k| softabs(h[k * d + k], self.alpha)).unzip();
        if !values.iter().all(|g| g.is_finite() && *g > 0.0)
            || !slopes.iter().all(|s| s.is_finite())
        {
            return None;
        }
        Some(Box::new(DiagonalAt {
            network: self.network,
            q: q.to_vec(),
            values,
            slopes,
        }))
    }
}

impl DiagonalAt<'_> {
    /// `outᵢ = Σₐ cₐ ∂ᵢ∂ₐ²z` for the diagonal coefficients `c`.
    fn traced(&self, c: impl Iterator<Item = f64>, out: &mut [f64]) {
        let m = DMatrix::from_diagonal(&DVector::from_iterator(self.values.len(), c));
        self.network
            .hessian_derivative_trace(&self.q, m.as_slice(), out);
    }
}

impl MetricAt for DiagonalAt<'_> {
    fn matrix(&self) -> DMatrix<f64> {
        DMatrix::from_diagonal(&DVector::from_column_slice(&self.values))
    }
    fn solve(&self, p: &[f64], out: &mut [f64]) {
        for ((o, pk), g) in out.iter_mut().zip(p).zip(&self.values) {
            *o = pk / g;
        }
    }
    fn factor_times(&self, z: &[f64], out: &mut [f64]) {
        for ((o, zk), g) in out.iter_mut().zip(z).zip(&self.values) {
            *o = zk * g.sqrt();
        }
    }
    fn log_det(&self) -> f64 {
        self.values.iter().map(|g| g.ln()).sum()
    }
    fn trace_derivatives(&self, out: &mut [f64]) {
        self.traced(
            self.slopes.iter().zip(&self.values).map(|(s, g)| s / g),
            out,
        );
    }
    fn quadratic_derivatives(&self, u: &[f64], out: &mut [f64]) {
        self.traced(self.slopes.iter().zip(u).map(|(s, uk)| s * uk * uk), out);
    }
}
