//! The full Gaussian process on gradients too (derivative observations, as Rasmussen 2003
//! does): each of the `n` training states contributes its value `ỹᵢ` and its `d` partial
//! derivatives `∂ỹᵢ/∂xₐ`, `N = n(d + 1)` observations of one GP, since differentiation is
//! linear. Under the SE-ARD kernel, with `r = xᵢ − xⱼ`, `sₐ = rₐ/ℓₐ²` and `c = k(xᵢ, xⱼ)`:
//! `cov(f(xᵢ), f(xⱼ)) = c`, `cov(f(xᵢ), ∂_b f(xⱼ)) = c s_b`, `cov(∂ₐf(xᵢ), f(xⱼ)) = −c sₐ` and
//! `cov(∂ₐf(xᵢ), ∂_b f(xⱼ)) = c (δₐ_b/ℓₐ² − sₐ s_b)`. Each state tells the fit `d + 1` numbers
//! for one exact evaluation, so far fewer states fit as well; the price is the covariance's
//! size, `O((n(d+1))³)` to fit and `O((n(d+1))²)` memory. The predictive mean keeps one centre
//! per state (with a slope, [`Predictor::with_slopes`]): `O(n·d)` per gradient still.
//!
//! One noise `σ_n²` on values and derivatives alike, so `θ` keeps its layout and start
//! ([`Hyper`]): both are exact evaluations of the same model, and the noise is a regularizer
//! the fit drives towards zero on them, not a measurement error of either kind to be told
//! apart. The nugget scales with each observation's prior variance (`σ_f²` for a value,
//! `σ_f²/ℓₐ²` for a derivative), so it conditions both kinds alike.
//!
//! The evidence has the full GP's form ([`Factors`]); the mean `m` enters the values alone.

use faer::Mat;

use super::full::{self, Factors};
use super::hyper::{Evidence, Hyper, NUGGET, Standardized};
use super::kernel::{Predictor, correlation, inverse_squares};
use crate::surrogates::states::TrainingSet;
use crate::{Error, Result};

/// The bytes the full GP on gradients too holds while it fits, for `n` states in dimension
/// `d` (`None` on overflow): the full GP's on `n(d + 1)` observations.
pub(super) fn bytes(n: usize, d: usize) -> Option<u128> {
    full::bytes(n.checked_mul(d.checked_add(1)?)?, d)
}

/// The observations: the standardized values `y`, then each state's gradient in the same
/// units (`∇U / scale`), state by state; an error naming the first state whose gradient is
/// missing or not finite.
pub(super) fn observations(states: &TrainingSet, y: &Standardized) -> Result<Vec<f64>> {
    let mut out = y.values.clone();
    for i in 0..states.len() {
        let gradient = states.gradient(i).ok_or_else(|| {
            Error::setting(
                "gp_gradients",
                format!("needs every training state's gradient; state {i} has none"),
            )
        })?;
        if gradient.iter().any(|g| !g.is_finite()) {
            return Err(Error::invalid(format!(
                "training state {i} has a non-finite gradient"
            )));
        }
        out.extend(gradient.iter().map(|g| g / y.scale));
    }
    Ok(out)
}

/// The evidence of the values and gradients `observations` of `states`.
pub(super) struct GradientEvidence<'a> {
    pub states: &'a TrainingSet,
    pub observations: &'a [f64],
}

/// One pair of distinct states `i`, `j` at some hyperparameters: `c = k(xᵢ, xⱼ)`,
/// `r = xᵢ − xⱼ` and `sₐ = rₐ/ℓₐ²`.
struct Pair {
    c: f64,
    r: Vec<f64>,
    s: Vec<f64>,
}

impl GradientEvidence<'_> {
    /// The row of state `i`'s derivative `a` (its value's row is `i`).
    fn slope_row(&self, i: usize, a: usize) -> usize {
        let d = self.states.dim();
        self.states.len() + i * d + a
    }

    fn pair(&self, i: usize, j: usize, signal: f64, inverse: &[f64]) -> Pair {
        let (xi, xj) = (self.states.position(i), self.states.position(j));
        let r: Vec<f64> = xi.iter().zip(xj).map(|(a, b)| a - b).collect();
        let s = r.iter().zip(inverse).map(|(r, i)| r * i).collect();
        let c = signal * correlation(xi, xj, inverse);
        Pair { c, r, s }
    }

    /// The joint covariance of the values and derivatives, with the noise and the nugget: its
    /// lower triangle alone (the upper is left zero), which is all the Cholesky factorization
    /// and the evidence's gradient read. Each entry is written down its column (faer's
    /// matrices are column-major): a pair's cross blocks go to the lower side, where the row
    /// of the later state's value or derivatives is the larger.
    pub fn covariance(&self, hyper: &Hyper) -> Mat<f64> {
        let (n, d) = (self.states.len(), self.states.dim());
        let inverse = inverse_squares(&hyper.lengths);
        let size = self.observations.len();
        let mut k = Mat::<f64>::zeros(size, size);
        let prior = hyper.signal * (1.0 + NUGGET);
        for j in 0..n {
            k[(j, j)] = prior + hyper.noise;
            for a in 0..d {
                let p = self.slope_row(j, a);
                k[(p, p)] = prior * inverse[a] + hyper.noise;
            }
            for i in j + 1..n {
                let pair = self.pair(i, j, hyper.signal, &inverse);
                self.fill_pair(&mut k, i, j, &pair, &inverse);
            }
        }
        k
    }

    /// A pair `i > j`'s entries below the diagonal: `cov(fᵢ, f_j) = c`, `cov(∂_b f_j, fᵢ) =
    /// c s_b`, `cov(∂ₐfᵢ, f_j) = −c sₐ` and `cov(∂ₐfᵢ, ∂_b f_j) = c (δₐ_b/ℓₐ² − sₐ s_b)`.
    fn fill_pair(&self, k: &mut Mat<f64>, i: usize, j: usize, pair: &Pair, inverse: &[f64]) {
        let Pair { c, s, .. } = pair;
        let (di, dj) = (self.slope_row(i, 0), self.slope_row(j, 0));
        k[(i, j)] = *c;
        for a in 0..s.len() {
            k[(dj + a, i)] = c * s[a];
            k[(di + a, j)] = -c * s[a];
        }
        for b in 0..s.len() {
            for a in 0..s.len() {
                let delta = if a == b { inverse[a] } else { 0.0 };
                k[(di + a, dj + b)] = c * (delta - s[a] * s[b]);
            }
        }
    }

    /// The observations less the mean: `ỹᵢ − m` for the values, the derivatives as they are.
    fn residual(&self, hyper: &Hyper) -> Vec<f64> {
        let n = self.states.len();
        let mut r = self.observations.to_vec();
        r[..n].iter_mut().for_each(|y| *y -= hyper.mean);
        r
    }

    fn factor(&self, hyper: &Hyper) -> Option<Factors> {
        Factors::of(self.covariance(hyper), &self.residual(hyper))
    }
}

impl Evidence for GradientEvidence<'_> {
    fn count(&self) -> usize {
        Hyper::count(self.states.dim())
    }

    /// The predictive mean at `hyper`, in units of `U`: each state a centre with weight
    /// `σ_f² αᵢ` and slope `σ_f² βᵢ ⊙ ℓ⁻²` (`β`: `K⁻¹r`'s derivative rows), scaled back.
    /// `None` when the covariance does not factorize.
    fn posterior(&self, hyper: &Hyper, shift: f64, scale: f64) -> Option<Predictor> {
        let f = self.factor(hyper)?;
        let (n, d) = (self.states.len(), self.states.dim());
        let inverse = inverse_squares(&hyper.lengths);
        let factor = scale * hyper.signal;
        let centres = (0..n)
            .flat_map(|i| self.states.position(i).to_vec())
            .collect();
        let weights = f.alpha[..n].iter().map(|a| factor * a).collect();
        let slopes = (0..n * d)
            .map(|p| factor * f.alpha[n + p] * inverse[p % d])
            .collect();
        Predictor::new(
            centres,
            weights,
            hyper.lengths.clone(),
            shift + scale * hyper.mean,
        )
        .ok()?
        .with_slopes(slopes)
        .ok()
    }

    fn negative_log_evidence(&self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let hyper = Hyper::at(theta);
        let Some(f) = self.factor(&hyper) else {
            grad.fill(0.0);
            return f64::INFINITY;
        };
        let value = f.negative_log_evidence(&self.residual(&hyper));
        let w = f.adjoint();
        grad.fill(0.0);
        self.length_gradient(&hyper, &w, grad);
        let d = self.states.dim();
        // Σ W∘K over the whole symmetric matrix from its lower triangle, down each column.
        let (mut trace, mut weighted) = (0.0, 0.0);
        for q in 0..w.ncols() {
            trace += w[(q, q)];
            weighted += w[(q, q)] * f.covariance[(q, q)];
            for p in q + 1..w.nrows() {
                weighted += 2.0 * w[(p, q)] * f.covariance[(p, q)];
            }
        }
        // ∂K/∂log σ_f = 2(K − σ_n²I); ∂K/∂log σ_n = 2σ_n²I; ½ tr(W ·) of each.
        grad[d] = weighted - hyper.noise * trace;
        grad[d + 1] = hyper.noise * trace;
        grad[d + 2] = -f.alpha[..self.states.len()].iter().sum::<f64>();
        value
    }
}

impl GradientEvidence<'_> {
    /// Adds `½ tr(W ∂K/∂log ℓₖ)` to `grad[k]`. With `tₖ = rₖ sₖ` (`∂c/∂log ℓₖ = c tₖ`) and
    /// `∂sₐ/∂log ℓₖ = −2sₐδₐₖ`, a pair's block contributes `tₖ Σ W∘K` plus
    /// `2c (sₖ(W_{∂ₖ,f} − W_{f,∂ₖ}) − Wₖₖ/ℓₖ² + sₖ Σ_b s_b W_{k b} + sₖ Σₐ sₐ W_{a k})`; a
    /// state's own block, where only the derivatives' variances `σ_f²(1 + δ)/ℓₐ²` depend on
    /// the length scales, `−σ_f²(1 + δ) W_{kk}/ℓₖ²`.
    fn length_gradient(&self, hyper: &Hyper, w: &Mat<f64>, grad: &mut [f64]) {
        let (n, d) = (self.states.len(), self.states.dim());
        let inverse = inverse_squares(&hyper.lengths);
        let prior = hyper.signal * (1.0 + NUGGET);
        for j in 0..n {
            for k in 0..d {
                let p = self.slope_row(j, k);
                grad[k] -= prior * inverse[k] * w[(p, p)];
            }
            for i in j + 1..n {
                let pair = self.pair(i, j, hyper.signal, &inverse);
                self.add_pair(i, j, &pair, &inverse, w, grad);
            }
        }
    }

    /// A pair's contribution to [`Self::length_gradient`] (both of its blocks: `½ · 2`).
    fn add_pair(
        &self,
        i: usize,
        j: usize,
        pair: &Pair,
        inverse: &[f64],
        w: &Mat<f64>,
        grad: &mut [f64],
    ) {
        let d = inverse.len();
        let Pair { c, r, s } = pair;
        let (di, dj) = (self.slope_row(i, 0), self.slope_row(j, 0));
        // Σ W∘K over the block, and the s-weighted row and column sums of its W_{∂,∂} part,
        // read down W's columns (column-major; W is symmetric, so `W_{i,∂_b j}` is read as
        // `W_{∂_b j,i}`): across them, at d = 10 every read was a cache line of its own.
        let mut block = w[(i, j)] * c;
        let (mut rows, mut columns) = (vec![0.0; d], vec![0.0; d]);
        for a in 0..d {
            block += c * s[a] * (w[(dj + a, i)] - w[(di + a, j)]);
        }
        for b in 0..d {
            for a in 0..d {
                let wab = w[(di + a, dj + b)];
                let delta = if a == b { inverse[a] } else { 0.0 };
                block += wab * c * (delta - s[a] * s[b]);
                rows[a] += s[b] * wab;
                columns[b] += s[a] * wab;
            }
        }
        for k in 0..d {
            let cross = s[k] * (w[(di + k, j)] - w[(dj + k, i)]) - inverse[k] * w[(di + k, dj + k)]
                + s[k] * (rows[k] + columns[k]);
            grad[k] += r[k] * s[k] * block + 2.0 * c * cross;
        }
    }
}
