//! Bayesian independent component analysis, the VHMC paper's 25-D experiment: observations
//! `xₙ = A sₙ` mix `k` independent super-Gaussian sources by an unknown matrix; the unmixing
//! matrix `W` (ideally `A⁻¹`) has the likelihood `p(xₙ | W) = |det W| Πᵢ p((W xₙ)ᵢ)` and a
//! `N(0, σ² I)` prior on its entries:
//!
//! `U(W) = −N log|det W| − Σₙ Σᵢ log p((W xₙ)ᵢ) + ‖W‖²_F/(2σ²)`,
//! `∇U(W) = −N W⁻ᵀ + Σₙ tanh(W xₙ) xₙᵀ + W/σ²`,
//!
//! with the hyperbolic secant source density `p(s) = 1/(π cosh s)` (super-Gaussian: heavier
//! tails than a normal, so the sources are identifiable), `−log p(s) = log cosh s + log π`. The
//! parameters are `W`'s entries row by row. A singular `W` has `U = +∞`, a wall between the
//! posterior's modes (rows permuted or negated give the same likelihood), so a chain started at
//! the MAP stays in its mode.
//!
//! The MEG data the paper uses are not available: [`Ica::simulate`] draws sources from the
//! secant density and mixes them by a known matrix. `U` is a sum over rows (each row's term
//! takes its share `−log|det W|`), so the model is a [`RowSum`] and SGLD can use minibatches.

use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::Potential;
use shmc_core::random::{fill_standard_normal, uniform_open};

use crate::row_sum::{self, Need, Query, RowSum};
use crate::{Error, Model, Result};

/// Rows per segment of the row sum.
const SEGMENT_ROWS: usize = 1024;

/// Bayesian ICA with secant sources and a Gaussian prior on the unmixing matrix.
#[derive(Clone, Debug)]
pub struct Ica {
    /// Sources (and observed channels) `k`.
    k: usize,
    /// Observations, `N × k` row by row.
    x: Vec<f64>,
    prior_variance: f64,
    /// The mixing matrix the data were simulated with, row by row.
    mixing: Vec<f64>,
}

impl Ica {
    /// The paper's prior sd σ = 100.
    pub const DEFAULT_PRIOR_VARIANCE: f64 = 1e4;

    /// `n` observations of `k` secant sources mixed by `A = I + 0.3 G` (`G` standard normal,
    /// drawn first from `Pcg64::seed_from_u64(seed)`, then the sources row by row).
    pub fn simulate(n: usize, k: usize, seed: u64) -> Result<Self> {
        if n == 0 || k == 0 {
            return Err(Error::invalid(format!(
                "the ICA simulation needs n ≥ 1 and k ≥ 1, got n = {n}, k = {k}"
            )));
        }
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut mixing = vec![0.0; k * k];
        fill_standard_normal(&mut rng, &mut mixing);
        for (i, a) in mixing.iter_mut().enumerate() {
            *a = 0.3 * *a + if i % (k + 1) == 0 { 1.0 } else { 0.0 };
        }
        // The secant law's CDF is (2/π) atan(eˢ): s = log tan(πu/2).
        let mut x = vec![0.0; n * k];
        let mut s = vec![0.0; k];
        for row in x.chunks_exact_mut(k) {
            for si in &mut s {
                *si = (std::f64::consts::FRAC_PI_2 * uniform_open(&mut rng))
                    .tan()
                    .ln();
            }
            for (i, xi) in row.iter_mut().enumerate() {
                *xi = (0..k).map(|j| mixing[i * k + j] * s[j]).sum();
            }
        }
        Ok(Self {
            k,
            x,
            prior_variance: Self::DEFAULT_PRIOR_VARIANCE,
            mixing,
        })
    }

    /// The number of observations `N`.
    pub fn n(&self) -> usize {
        self.x.len() / self.k
    }

    /// The mixing matrix `A` the data were simulated with, row by row (the true unmixing
    /// matrix is its inverse).
    pub fn mixing(&self) -> &[f64] {
        &self.mixing
    }

    /// `log|det W|` and `W⁻ᵀ` (row by row), or `None` if `W` is singular.
    fn log_det_and_inverse_transpose(&self, w: &[f64]) -> Option<(f64, Vec<f64>)> {
        let k = self.k;
        let matrix = DMatrix::from_row_slice(k, k, w);
        let lu = matrix.lu();
        let det = lu.determinant();
        if det == 0.0 || !det.is_finite() {
            return None;
        }
        let inverse = lu.try_inverse()?;
        // Row i of W⁻ᵀ is column i of W⁻¹.
        let mut inv_t = vec![0.0; k * k];
        for i in 0..k {
            for j in 0..k {
                inv_t[i * k + j] = inverse[(j, i)];
            }
        }
        Some((det.abs().ln(), inv_t))
    }

    /// Rows `rows` (an iterator of indices) at `w`: `Σ log cosh((W xₙ)ᵢ)` into the returned
    /// value and, if `grad` is not empty, `Σ tanh(W xₙ) xₙᵀ` added into it.
    fn source_terms(&self, w: &[f64], rows: impl Iterator<Item = usize>, grad: &mut [f64]) -> f64 {
        let k = self.k;
        let mut value = 0.0;
        for n in rows {
            let xn = &self.x[n * k..(n + 1) * k];
            for i in 0..k {
                let s: f64 = w[i * k..(i + 1) * k]
                    .iter()
                    .zip(xn)
                    .map(|(a, b)| a * b)
                    .sum();
                value += log_cosh(s);
                if !grad.is_empty() {
                    let t = s.tanh();
                    for (g, xj) in grad[i * k..(i + 1) * k].iter_mut().zip(xn) {
                        *g += t * xj;
                    }
                }
            }
        }
        value
    }
}

/// `log cosh s`, without overflow: `|s| + log1p(e^{−2|s|}) − log 2`.
fn log_cosh(s: f64) -> f64 {
    let a = s.abs();
    a + (-2.0 * a).exp().ln_1p() - std::f64::consts::LN_2
}

impl Potential for Ica {
    fn dim(&self) -> usize {
        self.k * self.k
    }

    fn value(&self, q: &[f64]) -> f64 {
        row_sum::evaluate(self, q, Need::Value, &mut [])
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        row_sum::evaluate(self, q, Need::ValueAndGradient, grad)
    }
}

/// Segments of 1024 rows, each row's term `−log|det W| + Σᵢ log cosh((W xₙ)ᵢ) + k log π`; the
/// prior is the rest. A singular `W` makes every segment's value `+∞` (and its gradient NaN):
/// a rejected proposal, never a crash.
impl RowSum for Ica {
    fn segments(&self) -> usize {
        self.n().div_ceil(SEGMENT_ROWS)
    }

    fn segment(&self, index: usize, queries: &[Query<'_>], out: &mut [f64]) {
        let d = self.dim();
        let start = index * SEGMENT_ROWS;
        let end = (start + SEGMENT_ROWS).min(self.n());
        let rows = (end - start) as f64;
        for (query, record) in queries.iter().zip(out.chunks_exact_mut(1 + d)) {
            let (value, grad) = record.split_first_mut().expect("1 + d numbers");
            let Some((log_det, inv_t)) = self.log_det_and_inverse_transpose(query.point) else {
                *value = f64::INFINITY;
                grad.fill(f64::NAN);
                continue;
            };
            let need_grad = query.need.gradient();
            if need_grad {
                for (g, m) in grad.iter_mut().zip(&inv_t) {
                    *g = -rows * m;
                }
            }
            let grad_out: &mut [f64] = if need_grad { grad } else { &mut [] };
            let sources = self.source_terms(query.point, start..end, grad_out);
            *value = sources + rows * (self.k as f64 * std::f64::consts::PI.ln() - log_det);
        }
    }

    fn rows(&self) -> usize {
        self.n()
    }

    fn rows_gradient(&self, point: &[f64], rows: &[usize], grad: &mut [f64]) {
        match self.log_det_and_inverse_transpose(point) {
            Some((_, inv_t)) => {
                let count = rows.len() as f64;
                for (g, m) in grad.iter_mut().zip(&inv_t) {
                    *g = -count * m;
                }
                self.source_terms(point, rows.iter().copied(), grad);
            }
            None => grad.fill(f64::NAN),
        }
    }

    fn finish(&self, point: &[f64], need: Need, value: &mut f64, grad: &mut [f64]) {
        let precision = 1.0 / self.prior_variance;
        if need.gradient() {
            for (g, w) in grad.iter_mut().zip(point) {
                *g += precision * w;
            }
        }
        if need.value() {
            *value += 0.5 * precision * point.iter().map(|w| w * w).sum::<f64>();
        }
    }
}

impl Model for Ica {
    fn parameter_names(&self) -> Vec<String> {
        let k = self.k;
        (0..k * k)
            .map(|i| format!("W.{}.{}", i / k + 1, i % k + 1))
            .collect()
    }

    fn row_sum(&self) -> Option<&dyn RowSum> {
        Some(self)
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "ICA: {} simulated observations of {} secant sources mixed by a known matrix (the \
             paper's MEG data are not available)",
            self.n(),
            self.k
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point near the true unmixing matrix, off it, where every term has a gradient.
    fn point(model: &Ica) -> Vec<f64> {
        let k = model.k;
        let a = DMatrix::from_row_slice(k, k, model.mixing());
        let inverse = a.try_inverse().unwrap();
        (0..k * k)
            .map(|i| inverse[(i / k, i % k)] + 0.05 * ((i as f64) * 0.7).sin())
            .collect()
    }

    #[test]
    fn gradient_matches_central_differences() {
        let model = Ica::simulate(300, 5, 2).unwrap();
        let q = point(&model);
        crate::models::fd_check::assert_gradient_matches_central_differences(
            &model, &q, 1e-6, 1e-6,
        );
    }

    #[test]
    fn rows_gradient_is_the_full_gradient_in_parts() {
        let model = Ica::simulate(2500, 5, 2).unwrap();
        crate::row_sum::assert_rows_gradient_adds_up(&model, &point(&model));
    }

    #[test]
    fn a_singular_matrix_is_an_infinite_potential() {
        let model = Ica::simulate(50, 2, 1).unwrap();
        assert_eq!(model.value(&[1.0, 2.0, 2.0, 4.0]), f64::INFINITY);
    }
}
