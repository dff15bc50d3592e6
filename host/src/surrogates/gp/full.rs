//! The full Gaussian process: the covariance of all `n` training values, `K = σ_f²(C + δI) +
//! σ_n²I` with `C` the states' correlations, factorized by Cholesky (faer): `O(n³)` to fit,
//! `O(n²)` memory, and a predictive mean with a centre at every state, `O(n·d)` per gradient.
//!
//! Evidence: `−log p(ỹ) = ½ rᵀα + Σ log Lᵢᵢ + (n/2) log 2π` with `r = ỹ − m`, `α = K⁻¹r`,
//! `K = LLᵀ`; its gradient `½ tr(W ∂K/∂θ)` with `W = K⁻¹ − ααᵀ` (Rasmussen & Williams, eq. 5.9).

use faer::linalg::solvers::{DenseSolveCore, Solve};
use faer::{Mat, Side};

use super::hyper::{Evidence, Hyper, NUGGET};
use super::kernel::{Predictor, correlation, inverse_squares};
use crate::surrogates::states::TrainingSet;

/// The bytes a full GP on `n` states in dimension `d` holds while it fits (`None` on
/// overflow): the covariance, its Cholesky factor and its inverse (`3n²`), and `n(d + 4)` for
/// the positions, values and solves.
pub(super) fn bytes(n: usize, d: usize) -> Option<u128> {
    let n = n as u128;
    let square = n.checked_mul(n)?.checked_mul(3)?;
    let rows = n.checked_mul((d as u128).checked_add(4)?)?;
    square.checked_add(rows)?.checked_mul(8)
}

/// The evidence of the standardized values `values` of `states`.
pub(super) struct FullEvidence<'a> {
    pub states: &'a TrainingSet,
    pub values: &'a [f64],
}

/// A covariance, its Cholesky factor, and `α = K⁻¹r` for the residual `r`: shared with the
/// GP on gradients too ([`super::derivative`]), whose covariance is larger but whose evidence
/// has the same form.
pub(super) struct Factors {
    pub covariance: Mat<f64>,
    pub llt: faer::linalg::solvers::Llt<f64>,
    pub alpha: Vec<f64>,
}

impl Factors {
    /// `covariance` factorized and `α` for `residual`; `None` when it does not factorize.
    pub fn of(covariance: Mat<f64>, residual: &[f64]) -> Option<Self> {
        let llt = covariance.llt(Side::Lower).ok()?;
        let r = Mat::<f64>::from_fn(residual.len(), 1, |i, _| residual[i]);
        let alpha = llt.solve(&r);
        let alpha = (0..alpha.nrows()).map(|i| alpha[(i, 0)]).collect();
        Some(Self {
            covariance,
            llt,
            alpha,
        })
    }

    /// `−log p(r) = ½ rᵀα + Σ log Lᵢᵢ + (N/2) log 2π`.
    pub fn negative_log_evidence(&self, residual: &[f64]) -> f64 {
        let n = residual.len();
        let l = self.llt.L();
        let fit: f64 = residual.iter().zip(&self.alpha).map(|(r, a)| r * a).sum();
        let log_det: f64 = (0..n).map(|i| l[(i, i)].ln()).sum();
        0.5 * fit + log_det + 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln()
    }

    /// `W = K⁻¹ − ααᵀ`: the evidence's gradient is `½ tr(W ∂K/∂θ)`.
    pub fn adjoint(&self) -> Mat<f64> {
        let n = self.alpha.len();
        let mut w = self.llt.inverse();
        for j in 0..n {
            for i in 0..n {
                w[(i, j)] -= self.alpha[i] * self.alpha[j];
            }
        }
        w
    }
}

impl FullEvidence<'_> {
    /// `K = σ_f²(C + δI) + σ_n²I`.
    pub fn covariance(&self, hyper: &Hyper) -> Mat<f64> {
        let n = self.states.len();
        let inverse = inverse_squares(&hyper.lengths);
        let mut k = Mat::<f64>::zeros(n, n);
        for j in 0..n {
            k[(j, j)] = hyper.signal * (1.0 + NUGGET) + hyper.noise;
            for i in j + 1..n {
                let c = hyper.signal
                    * correlation(self.states.position(i), self.states.position(j), &inverse);
                k[(i, j)] = c;
                k[(j, i)] = c;
            }
        }
        k
    }

    /// The factors at `hyper`; `None` when the covariance does not factorize.
    fn factor(&self, hyper: &Hyper) -> Option<Factors> {
        let residual: Vec<f64> = self.values.iter().map(|y| y - hyper.mean).collect();
        Factors::of(self.covariance(hyper), &residual)
    }
}

impl Evidence for FullEvidence<'_> {
    fn count(&self) -> usize {
        Hyper::count(self.states.dim())
    }

    /// The predictive mean at `hyper`, in units of `U` (`shift`, `scale`: the standardization);
    /// `None` when the covariance does not factorize.
    fn posterior(&self, hyper: &Hyper, shift: f64, scale: f64) -> Option<Predictor> {
        let factors = self.factor(hyper)?;
        let n = self.states.len();
        let centres = (0..n)
            .flat_map(|i| self.states.position(i).to_vec())
            .collect();
        let weights = factors
            .alpha
            .iter()
            .map(|a| scale * hyper.signal * a)
            .collect();
        Predictor::new(
            centres,
            weights,
            hyper.lengths.clone(),
            shift + scale * hyper.mean,
        )
        .ok()
    }

    fn negative_log_evidence(&self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let hyper = Hyper::at(theta);
        let Some(f) = self.factor(&hyper) else {
            grad.fill(0.0);
            return f64::INFINITY;
        };
        let residual: Vec<f64> = self.values.iter().map(|y| y - hyper.mean).collect();
        let value = f.negative_log_evidence(&residual);
        let w = f.adjoint();
        self.gradient(&hyper, &f, &w, grad);
        value
    }
}

impl FullEvidence<'_> {
    /// `½ tr(W ∂K/∂θ)` for every hyperparameter, and `−Σα` for the mean.
    fn gradient(&self, hyper: &Hyper, f: &Factors, w: &Mat<f64>, grad: &mut [f64]) {
        let (n, d) = (self.values.len(), self.states.dim());
        let inverse = inverse_squares(&hyper.lengths);
        grad.fill(0.0);
        let (mut trace, mut weighted) = (0.0, 0.0);
        for j in 0..n {
            trace += w[(j, j)];
            weighted += w[(j, j)] * f.covariance[(j, j)];
            let xj = self.states.position(j);
            for i in j + 1..n {
                // Both triangles: ½ · 2.
                let t = w[(i, j)] * f.covariance[(i, j)];
                weighted += 2.0 * t;
                let xi = self.states.position(i);
                for k in 0..d {
                    let dx = xi[k] - xj[k];
                    grad[k] += t * dx * dx * inverse[k];
                }
            }
        }
        // ∂K/∂log σ_f = 2σ_f²(C + δI) = 2(K − σ_n²I); ∂K/∂log σ_n = 2σ_n²I.
        grad[d] = weighted - hyper.noise * trace;
        grad[d + 1] = hyper.noise * trace;
        grad[d + 2] = -f.alpha.iter().sum::<f64>();
    }
}
