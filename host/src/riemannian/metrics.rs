//! The random network's Hessian as a metric, made positive definite by SoftAbs, whole or its
//! diagonal.
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

use std::cell::{Cell, OnceCell};

use nalgebra::{DMatrix, DMatrixView, DVector, Dyn, SymmetricEigen};
use shmc_core::{Network, Nodes};

use super::{DenseFactor, MetricAt, RiemannianMetric};
use crate::{Error, Result};

/// Where `αλ` reaches this, SoftAbs is the identity in double precision: `coth 20 − 1 =
/// 8.5·10⁻¹⁸`, below half an ulp of 1, so `g(λ) = λ` and `g'(λ) = 1` exactly. A Hessian whose
/// eigenvalues all reach `SATURATION/α` is therefore its own metric, which the network metric
/// recognizes by one Cholesky factorization (of `H − (SATURATION/α) I`) instead of an
/// eigen-decomposition, and whose derivatives it then contracts in O(s·d) per vector.
const SATURATION: f64 = 20.0;

/// `(g(λ), g'(λ))` for SoftAbs, `g(λ) = λ coth(αλ)`: at least `1/α`, `≈ |λ|` for `|αλ| ≫ 1`,
/// and exactly `(λ, 1)` from `αλ = SATURATION` on. Near 0 from the series
/// `x coth x = 1 + x²/3 − x⁴/45 + 2x⁶/945` (`x = αλ`), whose next term is below 10⁻¹⁴ for
/// `|x| < 0.05`; beyond, `g' = coth x − x/sinh² x`, which loses at most three digits to
/// cancellation there.
fn softabs(lambda: f64, alpha: f64) -> (f64, f64) {
    let x = alpha * lambda;
    if x >= SATURATION {
        (lambda, 1.0)
    } else if x.abs() < 0.05 {
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

/// The checked shift of a network metric's Hessian.
fn check_shift(shift: f64) -> Result<f64> {
    if shift.is_finite() {
        Ok(shift)
    } else {
        Err(Error::invalid(format!(
            "a network metric's shift must be finite, got {shift}"
        )))
    }
}

/// An additive network seen through the rank-one form of its Hessian,
/// `∇²z = Σᵢ cᵢ wᵢwᵢᵀ` and `∂ₖ∇²z = Σᵢ c'ᵢ wᵢₖ wᵢwᵢᵀ` ([`Network::unit_curvatures`]): the
/// Hessian is one matrix product, `tr(M ∂ₖ∇²z) = Σᵢ c'ᵢ (wᵢᵀMwᵢ) wᵢₖ` another, and
/// `uᵀ∂ₖ∇²z u = Σᵢ c'ᵢ (wᵢ·u)² wᵢₖ` two matrix-vector products, O(s·d) where the network's
/// own loops ([`Network::hessian_derivative_trace`]) take O(s·d²). It works on the network's
/// own weights `W` (`d × s`, a column per unit), `Wᵀ` being a strided view of them: a metric
/// is made per transition, and a copy of the weights per transition cost more than its
/// evaluations saved.
#[derive(Clone, Copy, Debug)]
struct RankOne<'a> {
    network: &'a Network<Dyn, Dyn>,
}

/// The curvature coefficients of a rank-one Hessian at a point: `cᵢ = vᵢ a''(xᵢ)` (the
/// Hessian's) and `c'ᵢ = vᵢ a'''(xᵢ)` (its derivatives').
struct Curvatures {
    second: DVector<f64>,
    third: DVector<f64>,
}

impl<'a> RankOne<'a> {
    /// The rank-one form of `network`; `None` for radial units (they have none).
    fn new(network: &'a Network<Dyn, Dyn>) -> Option<Self> {
        matches!(network.nodes(), Nodes::Additive(_)).then_some(Self { network })
    }

    /// `W`, a column per unit.
    fn weights(&self) -> &'a DMatrix<f64> {
        self.network.weights()
    }

    /// `Σᵢ cᵢ xᵢ wᵢᵀ` for the columns `xᵢ` of `x` (`d × s`): `x diag(c) Wᵀ`, by one matrix
    /// product (matrixmultiply's blocked gemm, which reads `Wᵀ` through strides).
    fn outer(&self, x: &DMatrix<f64>, c: &DVector<f64>) -> DMatrix<f64> {
        let w = self.weights();
        let (d, s) = w.shape();
        let mut scaled = x.clone();
        for (mut column, ci) in scaled.column_iter_mut().zip(c.iter()) {
            column *= *ci;
        }
        scaled * DMatrixView::from_slice_with_strides(w.as_slice(), s, d, d, 1)
    }

    /// The coefficients at `q`.
    fn curvatures(&self, q: &[f64]) -> Curvatures {
        let s = self.network.hidden();
        let (mut second, mut third) = (DVector::zeros(s), DVector::zeros(s));
        self.network
            .unit_curvatures(q, second.as_mut_slice(), third.as_mut_slice());
        Curvatures { second, third }
    }

    /// `Σᵢ cᵢ wᵢwᵢᵀ = W diag(c) Wᵀ`.
    fn hessian(&self, c: &DVector<f64>) -> DMatrix<f64> {
        self.outer(self.weights(), c)
    }

    /// `Σᵢ cᵢ wᵢ = W c`.
    fn combine(&self, c: &DVector<f64>, out: &mut [f64]) {
        out.copy_from_slice((self.weights() * c).as_slice());
    }

    /// `(wᵢ·u)ᵢ = Wᵀu`.
    fn project(&self, u: &[f64]) -> DVector<f64> {
        self.weights().tr_mul(&DVector::from_column_slice(u))
    }

    /// `outₖ = tr(M ∂ₖ∇²z) = Σᵢ c'ᵢ (wᵢᵀMwᵢ) wᵢₖ` for a symmetric `M`: every `wᵢᵀMwᵢ` from
    /// one matrix product `M W`.
    fn traced(&self, third: &DVector<f64>, m: &DMatrix<f64>, out: &mut [f64]) {
        let weights = self.weights();
        let mw = m * weights;
        let forms = DVector::from_iterator(
            third.len(),
            weights
                .column_iter()
                .zip(mw.column_iter())
                .zip(third.iter())
                .map(|((w, mw), c)| c * w.dot(&mw)),
        );
        self.combine(&forms, out);
    }

    /// `outₖ = uᵀ∂ₖ∇²z u = Σᵢ c'ᵢ (wᵢ·u)² wᵢₖ`.
    fn along(&self, third: &DVector<f64>, u: &[f64], out: &mut [f64]) {
        let mut t = self.project(u);
        t.iter_mut()
            .zip(third.iter())
            .for_each(|(ti, c)| *ti = c * *ti * *ti);
        self.combine(&t, out);
    }

    /// `∇²z(q) x = W (c ∘ Wᵀx)`, without forming the Hessian: O(s·d).
    fn hessian_times(&self, q: &[f64], x: &[f64], out: &mut [f64]) {
        let mut t = self.project(x);
        t.component_mul_assign(&self.curvatures(q).second);
        self.combine(&t, out);
    }
}

/// The derivatives of a network's Hessian at one point: the rank-one form's coefficients, or
/// (radial units) the point, for the network's own O(s·d²) contraction.
enum Derivatives<'a> {
    RankOne {
        rank_one: &'a RankOne<'a>,
        third: DVector<f64>,
    },
    General {
        network: &'a Network<Dyn, Dyn>,
        q: Vec<f64>,
    },
}

impl Derivatives<'_> {
    /// `outₖ = tr(M ∂ₖ∇²z)` for a symmetric `M`.
    fn traced(&self, m: &DMatrix<f64>, out: &mut [f64]) {
        match self {
            Derivatives::RankOne { rank_one, third } => rank_one.traced(third, m, out),
            Derivatives::General { network, q } => {
                network.hessian_derivative_trace(q, m.as_slice(), out)
            }
        }
    }

    /// `outₖ = uᵀ∂ₖ∇²z u`.
    fn along(&self, u: &[f64], out: &mut [f64]) {
        match self {
            Derivatives::RankOne { rank_one, third } => rank_one.along(third, u, out),
            Derivatives::General { .. } => {
                let u = DVector::from_column_slice(u);
                self.traced(&(&u * u.transpose()), out);
            }
        }
    }
}

/// The network's Hessian at `q` plus `shift` times the identity, and its derivatives there.
fn hessian_at<'a>(
    network: &'a Network<Dyn, Dyn>,
    rank_one: Option<&'a RankOne<'a>>,
    shift: f64,
    q: &[f64],
) -> (DMatrix<f64>, Derivatives<'a>) {
    let (mut h, derivatives) = match rank_one {
        Some(rank_one) => {
            let c = rank_one.curvatures(q);
            let h = rank_one.hessian(&c.second);
            let third = c.third;
            (h, Derivatives::RankOne { rank_one, third })
        }
        None => {
            let d = network.dim();
            let mut h = DMatrix::zeros(d, d);
            network.hessian(q, h.as_mut_slice());
            let q = q.to_vec();
            (h, Derivatives::General { network, q })
        }
    };
    for k in 0..h.nrows() {
        h[(k, k)] += shift;
    }
    (h, derivatives)
}

/// The random network's Hessian mapped by SoftAbs, `G(q) = Q diag(λ coth(αλ)) Qᵀ` where
/// `∇²z(q) = Q diag(λ) Qᵀ`: the journal paper's RNS-RMHMC metric, made positive definite
/// everywhere (see the module's note on why SoftAbs).
///
/// Where every eigenvalue reaches `SATURATION/α` (on a convex problem, nearly everywhere the
/// chain goes) SoftAbs leaves the Hessian as it is, `G = ∇²z` exactly: the metric is then
/// factored by Cholesky and `νₖ = uᵀ∂ₖ∇²z u` costs O(s·d) for additive units (the rank-one
/// form). Elsewhere the derivatives go through the eigenbasis, `∂ᵢG = Q (J ∘ Qᵀ∂ᵢ∇²z Q) Qᵀ`
/// with `Jₐᵦ = (gₐ − gᵦ)/(λₐ − λᵦ)` (`g'(λₐ)` on the diagonal), so both contractions the
/// dynamics need are `tr(M ∂ᵢ∇²z)` for one matrix `M`, O(s·d²) for all `i`.
#[derive(Clone, Debug)]
pub struct NetworkSoftAbs<'a> {
    network: &'a Network<Dyn, Dyn>,
    alpha: f64,
    /// Added to the Hessian's diagonal before SoftAbs (see [`Self::shifted`]).
    shift: f64,
    /// Additive units' rank-one layout (`None`: radial units, the network's own loops).
    rank_one: Option<RankOne<'a>>,
}

impl<'a> NetworkSoftAbs<'a> {
    /// The metric of `network` with SoftAbs regularization `alpha` (eigenvalues are floored
    /// smoothly at `1/alpha`; Betancourt uses `α = 10⁶` for a near-exact `|λ|`, smaller values
    /// smooth more).
    pub fn new(network: &'a Network<Dyn, Dyn>, alpha: f64) -> Result<Self> {
        Ok(Self {
            network,
            alpha: check_alpha(alpha)?,
            shift: 0.0,
            rank_one: RankOne::new(network),
        })
    }

    /// The metric of `½ shift ‖q‖² + z(q)`, the network plus a quadratic (an anchored
    /// surrogate's, [`crate::surrogates::anchored`]): SoftAbs of `∇²z + shift·I`, with the same
    /// derivatives. An error if `shift` is not finite.
    pub fn shifted(self, shift: f64) -> Result<Self> {
        Ok(Self {
            shift: check_shift(shift)?,
            ..self
        })
    }

    /// The same metric computed by the network's general O(s·d²) loops, as radial units are:
    /// what the rank-one form is tested against.
    #[cfg(test)]
    pub(crate) fn general(network: &'a Network<Dyn, Dyn>, alpha: f64) -> Result<Self> {
        Ok(Self {
            rank_one: None,
            ..Self::new(network, alpha)?
        })
    }
}

/// The network metric where SoftAbs leaves the Hessian unchanged: `G = ∇²z`.
struct HessianAt<'a> {
    matrix: DMatrix<f64>,
    factor: DenseFactor,
    derivatives: Derivatives<'a>,
}

struct SoftAbsAt<'a> {
    derivatives: Derivatives<'a>,
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
        let (h, derivatives) = hessian_at(self.network, self.rank_one.as_ref(), self.shift, q);
        if !h.iter().all(|x| x.is_finite()) {
            return None;
        }
        let mut shifted = h.clone();
        for k in 0..d {
            shifted[(k, k)] -= SATURATION / self.alpha;
        }
        if shifted.cholesky().is_some() {
            let factor = DenseFactor::new(h.clone())?;
            return Some(Box::new(HessianAt {
                matrix: h,
                factor,
                derivatives,
            }));
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
            derivatives,
            vectors: eigen.eigenvectors,
            values,
            divided,
        }))
    }

    /// The Hessian's product, O(s·d) for additive units: `G`'s wherever SoftAbs leaves the
    /// Hessian unchanged, which is where the solves that use it end on a convex problem.
    fn product(&self, q: &[f64], x: &[f64], out: &mut [f64]) -> bool {
        let Some(rank_one) = &self.rank_one else {
            return false;
        };
        rank_one.hessian_times(q, x, out);
        for (o, xk) in out.iter_mut().zip(x) {
            *o += self.shift * xk;
        }
        true
    }
}

impl MetricAt for HessianAt<'_> {
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
    /// `tr(G⁻¹∂ᵢ∇²z)`.
    fn trace_derivatives(&self, out: &mut [f64]) {
        self.derivatives
            .traced(&self.factor.cholesky().inverse(), out);
    }
    fn quadratic_derivatives(&self, u: &[f64], out: &mut [f64]) {
        self.derivatives.along(u, out);
    }
}

impl SoftAbsAt<'_> {
    /// `outᵢ = tr(Q C Qᵀ ∂ᵢ∇²z)` for the eigenbasis coefficients `C`.
    fn traced(&self, coefficients: &DMatrix<f64>, out: &mut [f64]) {
        let m = &self.vectors * coefficients * self.vectors.transpose();
        self.derivatives.traced(&m, out);
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
///
/// For additive units the full Hessian is never formed: the diagonal is `Σᵢ cᵢ wᵢ∘wᵢ`, O(s·d)
/// per point in one pass over the weights ([`Network::hessian_diagonal`]), which is all the
/// position solves' iterations evaluate. The dynamics contract the derivatives only where a
/// step ends, but there a dozen times or more (the momentum solves of the next step and of the
/// reversibility check, every iteration), so from the third contraction on the point forms
/// `Eⱼₖ = ∂ₖ∂ⱼ²z = Σᵢ c'ᵢ wᵢⱼ² wᵢₖ` by one matrix product and every contraction, `Σⱼ mⱼ Eⱼₖ`,
/// is then O(d²); `E` also gives the velocity's derivative for the position solve's Newton
/// correction. Radial units go through the network's general loops.
#[derive(Clone, Debug)]
pub struct NetworkDiagonalSoftAbs<'a> {
    network: &'a Network<Dyn, Dyn>,
    alpha: f64,
    /// Added to the Hessian's diagonal before SoftAbs (see [`Self::shifted`]).
    shift: f64,
    /// Additive units' rank-one form with the squared weights `W∘W` (`d × s`).
    rank_one: Option<(RankOne<'a>, DMatrix<f64>)>,
}

impl<'a> NetworkDiagonalSoftAbs<'a> {
    /// The diagonal metric of `network` with SoftAbs regularization `alpha`.
    pub fn new(network: &'a Network<Dyn, Dyn>, alpha: f64) -> Result<Self> {
        Ok(Self {
            network,
            alpha: check_alpha(alpha)?,
            shift: 0.0,
            rank_one: RankOne::new(network).map(|r| (r, r.weights().map(|w| w * w))),
        })
    }

    /// The diagonal metric of `½ shift ‖q‖² + z(q)`, the network plus a quadratic (an anchored
    /// surrogate's): `diag(g(∂ᵢ²z + shift))`, with the same derivatives. An error if `shift`
    /// is not finite.
    pub fn shifted(self, shift: f64) -> Result<Self> {
        Ok(Self {
            shift: check_shift(shift)?,
            ..self
        })
    }

    /// The same metric computed from the full Hessian and the network's general O(s·d²)
    /// loops, as radial units are: what the O(s·d) path is tested against.
    #[cfg(test)]
    pub(crate) fn general(network: &'a Network<Dyn, Dyn>, alpha: f64) -> Result<Self> {
        Ok(Self {
            rank_one: None,
            ..Self::new(network, alpha)?
        })
    }
}

/// The derivatives of the diagonal of a network's Hessian at one point.
enum DiagonalDerivatives<'a> {
    RankOne {
        rank_one: &'a RankOne<'a>,
        squared: &'a DMatrix<f64>,
        third: DVector<f64>,
        /// Contractions made so far, by the network's one-pass loop.
        direct: Cell<u32>,
        /// `E`, formed by the third contraction (or the velocity derivative).
        derivative: OnceCell<DMatrix<f64>>,
    },
    General {
        network: &'a Network<Dyn, Dyn>,
        q: Vec<f64>,
    },
}

struct DiagonalAt<'a> {
    derivatives: DiagonalDerivatives<'a>,
    values: Vec<f64>,
    slopes: Vec<f64>,
}

impl RiemannianMetric for NetworkDiagonalSoftAbs<'_> {
    fn dim(&self) -> usize {
        self.network.dim()
    }

    fn at(&self, q: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        let d = self.dim();
        let (diagonal, derivatives) = match &self.rank_one {
            Some((rank_one, squared)) => {
                let (mut diagonal, mut third) =
                    (vec![0.0; d], DVector::zeros(self.network.hidden()));
                self.network
                    .hessian_diagonal(q, &mut diagonal, third.as_mut_slice());
                let derivatives = DiagonalDerivatives::RankOne {
                    rank_one,
                    squared,
                    third,
                    direct: Cell::new(0),
                    derivative: OnceCell::new(),
                };
                (diagonal, derivatives)
            }
            None => {
                let mut h = vec![0.0; d * d];
                self.network.hessian(q, &mut h);
                let diagonal = (0..d).map(|k| h[k * d + k]).collect();
                let network = self.network;
                let q = q.to_vec();
                (diagonal, DiagonalDerivatives::General { network, q })
            }
        };
        let (values, slopes): (Vec<f64>, Vec<f64>) = diagonal
            .iter()
            .map(|h| softabs(h + self.shift, self.alpha))
            .unzip();
        if !values.iter().all(|g| g.is_finite() && *g > 0.0)
            || !slopes.iter().all(|s| s.is_finite())
        {
            return None;
        }
        Some(Box::new(DiagonalAt {
            derivatives,
            values,
            slopes,
        }))
    }
}

impl DiagonalDerivatives<'_> {
    /// `E`, formed on the first call (additive units only).
    fn matrix(&self) -> Option<&DMatrix<f64>> {
        match self {
            DiagonalDerivatives::RankOne {
                rank_one,
                squared,
                third,
                derivative,
                ..
            } => Some(derivative.get_or_init(|| rank_one.outer(squared, third))),
            DiagonalDerivatives::General { .. } => None,
        }
    }
}

impl DiagonalAt<'_> {
    /// `outₖ = Σⱼ cⱼ ∂ₖ∂ⱼ²z` for the diagonal coefficients `c`. The first two contractions at a
    /// point run the network's O(s·d) loop; from the third on (a point where a step ends, whose
    /// momentum solves contract a dozen times) `E` is formed once and each costs O(d²). A point
    /// that only ends the reversibility check's step is contracted twice and never forms it.
    fn traced(&self, c: impl Iterator<Item = f64>, out: &mut [f64]) {
        let c = DVector::from_iterator(self.values.len(), c);
        match &self.derivatives {
            DiagonalDerivatives::RankOne {
                rank_one,
                third,
                direct,
                derivative,
                ..
            } => {
                if derivative.get().is_none() && direct.get() < 2 {
                    direct.set(direct.get() + 1);
                    rank_one.network.hessian_diagonal_derivative(
                        third.as_slice(),
                        c.as_slice(),
                        out,
                    );
                } else if let Some(e) = self.derivatives.matrix() {
                    out.copy_from_slice(e.tr_mul(&c).as_slice());
                }
            }
            DiagonalDerivatives::General { network, q } => {
                let m = DMatrix::from_diagonal(&c);
                network.hessian_derivative_trace(q, m.as_slice(), out);
            }
        }
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
    /// `−(g'ⱼ vⱼ / gⱼ) Eⱼₖ`, O(d²) from `E` (additive units).
    fn velocity_derivative(&self, v: &[f64]) -> Option<DMatrix<f64>> {
        let e = self.derivatives.matrix()?;
        let mut out = e.clone();
        for (j, mut row) in out.row_iter_mut().enumerate() {
            row *= -self.slopes[j] * v[j] / self.values[j];
        }
        Some(out)
    }
}
