//! Gaussian targets with known answers, for checking samplers and surrogates.
//!
//! - [`ConjugateGaussian`]: the illustrative example of the precomputing (grid HMC) paper,
//!   section 3.1: `y_i | μ ~ N(μ, Σ)` with known `Σ` and a conjugate prior `μ ~ N(μ0, Σ0)`, whose
//!   `U` and `∇U` are the paper's eqs. 3.1–3.2 and whose posterior is Gaussian in closed form
//!   ([`ConjugateGaussian::posterior_mean`], [`ConjugateGaussian::posterior_covariance`]). The
//!   paper says only "bivariate, known covariance, conjugate prior"; [`ConjugateGaussian::simulate`]
//!   fills in the rest with our own choices: `N = 100` points (the paper's size for its other
//!   2-D examples), true mean `(1, −1)`, `Σ` with unit variances and correlation 0.8 (so the
//!   posterior is visibly tilted), prior `N(0, I)`.
//! - [`CorrelatedGaussian`]: the 32-dimensional target of the random-bases (RNS-HMC) journal
//!   paper, section 4 (Fig. 3, after Rasmussen 2003): zero mean, covariance with eigenvector
//!   `(1, …, 1)/√d` of eigenvalue 1 and all other eigenvalues 0.01 (31 confined directions and
//!   one ten times wider). Its precision is `100 I − 99 · 11ᵀ/d`, so `U(q) = ½ qᵀΣ⁻¹q` and
//!   `∇U` cost O(d) instead of O(d²).
//!
//! Neither type is a generic dense Gaussian: the conjugate one keeps the paper's data-based
//! form (so tests can compare it with the closed-form posterior) and the correlated one exists
//! for its O(d) structure.

use nalgebra::{DMatrix, DVector};
use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::{Potential, random::fill_standard_normal};

use super::{ModelEntry, ModelOption};
use crate::model::{Generative, Simulated, indexed_names};
use crate::{Error, Model, Result};

/// The registry's entry: the precomputing paper's 2-D Gaussian mean, its points simulated.
pub const CONJUGATE_ENTRY: ModelEntry = ModelEntry {
    name: "gaussian-conjugate",
    description: "2-D Gaussian mean with known covariance and a conjugate prior (precomputing paper)",
    parameters: "mu.1, mu.2",
    options: &[
        ModelOption::value("n", "N", "100 points"),
        ModelOption::value("data_seed", "SEED", "1: the simulated data's seed"),
    ],
    build: |spec| {
        let n = spec.get("n")?.unwrap_or(ConjugateGaussian::DEFAULT_N);
        // The 2 × n normals, their image and its transpose.
        crate::memory::check(
            &format!("the {n} simulated 2-D points"),
            "n",
            crate::memory::f64s([n, 2, 3]),
            spec.memory_limit,
        )?;
        Ok(Box::new(ConjugateGaussian::simulate(
            n,
            spec.get("data_seed")?.unwrap_or(1),
        )?))
    },
    small: Some(|_| "N 100"),
};

/// The registry's entry: the journal paper's correlated Gaussian.
pub const CORRELATED_ENTRY: ModelEntry = ModelEntry {
    name: "gaussian-32",
    description: "correlated Gaussian: eigenvalue 1 along (1,..,1), 0.01 across (journal paper)",
    parameters: "q.1 .. q.d",
    options: &[ModelOption::value("d", "D", "32")],
    build: |spec| {
        let d = spec.get("d")?.unwrap_or(CorrelatedGaussian::JOURNAL_DIM);
        crate::memory::check(
            &format!("a {d}-dimensional Gaussian's parameters and chain state"),
            "d",
            crate::memory::dimension(d),
            spec.memory_limit,
        )?;
        Ok(Box::new(CorrelatedGaussian::new(
            d,
            CorrelatedGaussian::JOURNAL_VARIANCE_ALONG,
            CorrelatedGaussian::JOURNAL_VARIANCE_ACROSS,
        )?))
    },
    small: Some(|_| "d 32"),
};

/// The inverse of a symmetric positive-definite matrix, or an error naming `what`.
fn spd_inverse(matrix: &DMatrix<f64>, what: &str) -> Result<DMatrix<f64>> {
    let d = matrix.nrows();
    if matrix.ncols() != d {
        return Err(Error::invalid(format!(
            "{what} is {}×{}, expected square",
            matrix.nrows(),
            matrix.ncols()
        )));
    }
    if matrix.iter().any(|v| !v.is_finite()) {
        return Err(Error::invalid(format!("{what} has a non-finite entry")));
    }
    let scale = matrix.amax();
    if (matrix - matrix.transpose()).amax() > 1e-12 * scale {
        return Err(Error::invalid(format!("{what} is not symmetric")));
    }
    let cholesky = nalgebra::Cholesky::new(matrix.clone())
        .ok_or_else(|| Error::invalid(format!("{what} is not positive definite")))?;
    let inverse = cholesky.inverse();
    // Exactly symmetric, so U's quadratic forms are too.
    Ok((&inverse + inverse.transpose()) * 0.5)
}

/// `y_i | μ ~ N(μ, Σ)` with known `Σ` and prior `μ ~ N(μ0, Σ0)`: the precomputing paper's
/// illustrative example, with `U` exactly as its eq. 3.1 (constant included).
#[derive(Clone, Debug)]
pub struct ConjugateGaussian {
    /// The dimension `d`.
    dim: usize,
    /// The number of observations `N`, as a float.
    count: f64,
    /// The data mean `ȳ`.
    data_mean: Vec<f64>,
    /// `Σ⁻¹`, row-major `d × d`.
    noise_precision: Vec<f64>,
    /// `μ0`.
    prior_mean: Vec<f64>,
    /// `Σ0⁻¹`, row-major `d × d`.
    prior_precision: Vec<f64>,
    /// `½ Σ_i (y_i − ȳ)ᵀ Σ⁻¹ (y_i − ȳ)`, the part of eq. 3.1 that does not depend on `μ`.
    scatter: f64,
}

impl ConjugateGaussian {
    /// The default number of observations for [`ConjugateGaussian::simulate`].
    pub const DEFAULT_N: usize = 100;
    /// The mean `μ` the default data are simulated from.
    pub const TRUE_MEAN: [f64; 2] = [1.0, -1.0];
    /// The default known data covariance `Σ`: unit variances, correlation 0.8.
    pub const NOISE_COVARIANCE: [[f64; 2]; 2] = [[1.0, 0.8], [0.8, 1.0]];
    /// The default prior mean `μ0`.
    pub const PRIOR_MEAN: [f64; 2] = [0.0, 0.0];
    /// The default prior covariance `Σ0`.
    pub const PRIOR_COVARIANCE: [[f64; 2]; 2] = [[1.0, 0.0], [0.0, 1.0]];

    /// The posterior given observations `y` (one per row, `N × d`), the known data covariance
    /// `Σ` (`d × d`) and the prior `N(μ0, Σ0)`. Fails on empty or non-finite data, mismatched
    /// sizes, or a covariance that is not symmetric positive definite.
    pub fn new(
        y: &DMatrix<f64>,
        noise_covariance: &DMatrix<f64>,
        prior_mean: &DVector<f64>,
        prior_covariance: &DMatrix<f64>,
    ) -> Result<Self> {
        let (count, dim) = y.shape();
        if count == 0 || dim == 0 {
            return Err(Error::invalid(
                "conjugate Gaussian model needs at least one observation of dimension ≥ 1",
            ));
        }
        if y.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid(
                "conjugate Gaussian model: an observation is not finite",
            ));
        }
        if noise_covariance.nrows() != dim
            || prior_covariance.nrows() != dim
            || prior_mean.len() != dim
        {
            return Err(Error::invalid(format!(
                "conjugate Gaussian model: observations have dimension {dim} but Σ is {}×{}, \
                 μ0 has {} entries and Σ0 is {}×{}",
                noise_covariance.nrows(),
                noise_covariance.ncols(),
                prior_mean.len(),
                prior_covariance.nrows(),
                prior_covariance.ncols()
            )));
        }
        if prior_mean.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid("conjugate Gaussian model: μ0 is not finite"));
        }
        let noise_precision = spd_inverse(noise_covariance, "data covariance Σ")?;
        let prior_precision = spd_inverse(prior_covariance, "prior covariance Σ0")?;
        let data_mean = y.row_mean().transpose();
        let mut scatter = 0.0;
        for row in y.row_iter() {
            let r = row.transpose() - &data_mean;
            scatter += 0.5 * r.dot(&(&noise_precision * &r));
        }
        let row_major = |m: DMatrix<f64>| m.transpose().as_slice().to_vec();
        Ok(Self {
            dim,
            count: count as f64,
            data_mean: data_mean.as_slice().to_vec(),
            noise_precision: row_major(noise_precision),
            prior_mean: prior_mean.as_slice().to_vec(),
            prior_precision: row_major(prior_precision),
            scatter,
        })
    }

    /// The default bivariate setting (the `const`s above) with `n` observations
    /// `y_i = TRUE_MEAN + L z_i`, `L Lᵀ = Σ`, standard normal `z_i` from a PCG-64 seeded with
    /// `seed`. Fails if `n == 0`.
    pub fn simulate(n: usize, seed: u64) -> Result<Self> {
        let sigma = DMatrix::from_fn(2, 2, |i, j| Self::NOISE_COVARIANCE[i][j]);
        let prior_cov = DMatrix::from_fn(2, 2, |i, j| Self::PRIOR_COVARIANCE[i][j]);
        let prior_mean = DVector::from_column_slice(&Self::PRIOR_MEAN);
        let l = nalgebra::Cholesky::new(sigma.clone())
            .ok_or_else(|| Error::invalid("NOISE_COVARIANCE is not positive definite"))?
            .unpack();
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut z = DMatrix::zeros(2, n);
        fill_standard_normal(&mut rng, z.as_mut_slice());
        let mut y = (l * z).transpose();
        for mut row in y.row_iter_mut() {
            row[0] += Self::TRUE_MEAN[0];
            row[1] += Self::TRUE_MEAN[1];
        }
        Self::new(&y, &sigma, &prior_mean, &prior_cov)
    }

    /// The closed-form posterior precision `N Σ⁻¹ + Σ0⁻¹` (the Hessian of `U`).
    pub fn posterior_precision(&self) -> DMatrix<f64> {
        let d = self.dim;
        DMatrix::from_row_slice(d, d, &self.noise_precision) * self.count
            + DMatrix::from_row_slice(d, d, &self.prior_precision)
    }

    /// The closed-form posterior covariance `(N Σ⁻¹ + Σ0⁻¹)⁻¹`.
    pub fn posterior_covariance(&self) -> DMatrix<f64> {
        nalgebra::Cholesky::new(self.posterior_precision())
            .expect("a sum of positive-definite matrices is positive definite")
            .inverse()
    }

    /// The closed-form posterior mean `(N Σ⁻¹ + Σ0⁻¹)⁻¹ (N Σ⁻¹ ȳ + Σ0⁻¹ μ0)` (the minimizer of
    /// `U`).
    pub fn posterior_mean(&self) -> DVector<f64> {
        let d = self.dim;
        let a = DMatrix::from_row_slice(d, d, &self.noise_precision);
        let b = DMatrix::from_row_slice(d, d, &self.prior_precision);
        let rhs = a * DVector::from_column_slice(&self.data_mean) * self.count
            + b * DVector::from_column_slice(&self.prior_mean);
        nalgebra::Cholesky::new(self.posterior_precision())
            .expect("a sum of positive-definite matrices is positive definite")
            .solve(&rhs)
    }

    /// Eq. 3.1 and, when `grad` is given, eq. 3.2: `U = S + ½ N (μ−ȳ)ᵀΣ⁻¹(μ−ȳ) +
    /// ½ (μ−μ0)ᵀΣ0⁻¹(μ−μ0)`, `∇U = N Σ⁻¹(μ−ȳ) + Σ0⁻¹(μ−μ0)`.
    fn evaluate(&self, q: &[f64], mut grad: Option<&mut [f64]>) -> f64 {
        let d = self.dim;
        let mut u = self.scatter;
        for i in 0..d {
            let (a_row, b_row) = (
                &self.noise_precision[i * d..(i + 1) * d],
                &self.prior_precision[i * d..(i + 1) * d],
            );
            let (mut av, mut bw) = (0.0, 0.0);
            for j in 0..d {
                av += a_row[j] * (q[j] - self.data_mean[j]);
                bw += b_row[j] * (q[j] - self.prior_mean[j]);
            }
            u += 0.5
                * (self.count * av * (q[i] - self.data_mean[i]) + bw * (q[i] - self.prior_mean[i]));
            if let Some(g) = grad.as_deref_mut() {
                g[i] = self.count * av + bw;
            }
        }
        u
    }
}

impl Potential for ConjugateGaussian {
    fn dim(&self) -> usize {
        self.dim
    }

    fn value(&self, q: &[f64]) -> f64 {
        self.evaluate(q, None)
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        self.evaluate(q, Some(grad))
    }
}

impl Model for ConjugateGaussian {
    fn parameter_names(&self) -> Vec<String> {
        indexed_names("mu", self.dim)
    }

    fn generative(&self) -> Option<&dyn Generative> {
        Some(self)
    }
}

/// `μ ~ N(μ0, Σ0)`, then as many observations as this model has, `y_i ~ N(μ, Σ)`, with this
/// model's `Σ`, `μ0` and `Σ0`; from the stream, in order: the `d` normals behind `μ`, then the
/// observations' normals, observation by observation.
impl Generative for ConjugateGaussian {
    fn simulate(&self, seed: u64) -> Result<Simulated> {
        let d = self.dim;
        let covariance =
            |precision: &[f64], what| spd_inverse(&DMatrix::from_row_slice(d, d, precision), what);
        let noise = covariance(&self.noise_precision, "data covariance Σ")?;
        let prior = covariance(&self.prior_precision, "prior covariance Σ0")?;
        let factor = |m: &DMatrix<f64>| {
            nalgebra::Cholesky::new(m.clone())
                .map(|c| c.unpack())
                .ok_or_else(|| Error::invalid("a covariance is not positive definite"))
        };
        let (noise_factor, prior_factor) = (factor(&noise)?, factor(&prior)?);
        let prior_mean = DVector::from_column_slice(&self.prior_mean);
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut z = DVector::zeros(d);
        fill_standard_normal(&mut rng, z.as_mut_slice());
        let mu = &prior_mean + prior_factor * z;
        let n = self.count as usize;
        let mut e = DMatrix::zeros(d, n);
        fill_standard_normal(&mut rng, e.as_mut_slice());
        let mut y = noise_factor * e;
        for mut column in y.column_iter_mut() {
            column += &mu;
        }
        Ok(Simulated {
            truth: mu.as_slice().to_vec(),
            posterior: Box::new(Self::new(&y.transpose(), &noise, &prior_mean, &prior)?),
        })
    }
}

/// A zero-mean Gaussian whose covariance has eigenvector `(1, …, 1)/√d` with eigenvalue
/// `variance_along` and every orthogonal direction eigenvalue `variance_across`.
///
/// With `u = 1/√d`, `Σ = λ∥ uuᵀ + λ⊥ (I − uuᵀ)` and `Σ⁻¹ = I/λ⊥ + (1/λ∥ − 1/λ⊥) 11ᵀ/d`, so with
/// `s = Σ_i q_i`: `U(q) = ½ (‖q‖²/λ⊥ + (1/λ∥ − 1/λ⊥) s²/d)` and
/// `∇U = q/λ⊥ + (1/λ∥ − 1/λ⊥)(s/d) 1`, both O(d).
#[derive(Clone, Debug)]
pub struct CorrelatedGaussian {
    /// The dimension `d`.
    dim: usize,
    /// `λ∥`, the variance along `(1, …, 1)`.
    variance_along: f64,
    /// `λ⊥`, the variance across it.
    variance_across: f64,
    /// `1/λ⊥`.
    inv_across: f64,
    /// `(1/λ∥ − 1/λ⊥)/d`.
    coupling: f64,
}

impl CorrelatedGaussian {
    /// The journal paper's dimension.
    pub const JOURNAL_DIM: usize = 32;
    /// The journal paper's variance along `(1, …, 1)`.
    pub const JOURNAL_VARIANCE_ALONG: f64 = 1.0;
    /// The journal paper's variance in the other 31 directions.
    pub const JOURNAL_VARIANCE_ACROSS: f64 = 0.01;

    /// The Gaussian in dimension `dim ≥ 1` with the two variances, which must be positive
    /// and finite.
    pub fn new(dim: usize, variance_along: f64, variance_across: f64) -> Result<Self> {
        if dim == 0 {
            return Err(Error::invalid("correlated Gaussian needs dimension ≥ 1"));
        }
        for (name, v) in [("along", variance_along), ("across", variance_across)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::invalid(format!(
                    "correlated Gaussian: variance {name} (1,…,1) is {v}, expected positive"
                )));
            }
        }
        let inv_across = variance_across.recip();
        Ok(Self {
            dim,
            variance_along,
            variance_across,
            inv_across,
            coupling: (variance_along.recip() - inv_across) / dim as f64,
        })
    }

    /// The journal paper's target: `d = 32`, eigenvalue 1 along `(1, …, 1)`, 0.01 across.
    pub fn journal() -> Self {
        Self::new(
            Self::JOURNAL_DIM,
            Self::JOURNAL_VARIANCE_ALONG,
            Self::JOURNAL_VARIANCE_ACROSS,
        )
        .expect("the journal settings are valid")
    }

    /// The covariance `Σ = λ⊥ I + (λ∥ − λ⊥) 11ᵀ/d` as a dense matrix (for tests and reports).
    pub fn covariance(&self) -> DMatrix<f64> {
        let d = self.dim;
        let off = (self.variance_along - self.variance_across) / d as f64;
        DMatrix::from_fn(d, d, |i, j| {
            off + if i == j { self.variance_across } else { 0.0 }
        })
    }
}

impl Potential for CorrelatedGaussian {
    fn dim(&self) -> usize {
        self.dim
    }

    fn value(&self, q: &[f64]) -> f64 {
        let (mut sum, mut sq) = (0.0, 0.0);
        for &x in q {
            sum += x;
            sq += x * x;
        }
        0.5 * (self.inv_across * sq + self.coupling * sum * sum)
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let (mut sum, mut sq) = (0.0, 0.0);
        for &x in q {
            sum += x;
            sq += x * x;
        }
        let shift = self.coupling * sum;
        for (g, &x) in grad.iter_mut().zip(q) {
            *g = self.inv_across * x + shift;
        }
        0.5 * (self.inv_across * sq + self.coupling * sum * sum)
    }
}

impl Model for CorrelatedGaussian {
    fn parameter_names(&self) -> Vec<String> {
        indexed_names("q", self.dim)
    }

    fn generative(&self) -> Option<&dyn Generative> {
        Some(self)
    }
}

/// No data: the "posterior" is this Gaussian itself and the truth one exact draw from it,
/// `Σ^{1/2} z` with `Σ^{1/2} = √λ⊥ I + (√λ∥ − √λ⊥) 11ᵀ/d`, from `d` standard normals.
impl Generative for CorrelatedGaussian {
    fn simulate(&self, seed: u64) -> Result<Simulated> {
        let mut z = vec![0.0; self.dim];
        fill_standard_normal(&mut Pcg64::seed_from_u64(seed), &mut z);
        let (along, across) = (self.variance_along.sqrt(), self.variance_across.sqrt());
        let shift = (along - across) * z.iter().sum::<f64>() / self.dim as f64;
        Ok(Simulated {
            truth: z.iter().map(|v| across * v + shift).collect(),
            posterior: Box::new(self.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Central-difference step; U is quadratic, so the differences are exact up to rounding.
    const H: f64 = 1e-5;
    /// Relative tolerance for gradients against central differences.
    const FD_TOL: f64 = 1e-6;

    /// Central-difference gradient of `model` at `q`.
    fn fd_gradient(model: &impl Potential, q: &[f64]) -> Vec<f64> {
        (0..q.len())
            .map(|i| {
                let (mut up, mut down) = (q.to_vec(), q.to_vec());
                up[i] += H;
                down[i] -= H;
                (model.value(&up) - model.value(&down)) / (2.0 * H)
            })
            .collect()
    }

    /// `|∇U − FD| ≤ FD_TOL · max(|FD|, 1)` in every component.
    fn assert_gradient_matches(model: &impl Potential, q: &[f64]) {
        let mut grad = vec![0.0; q.len()];
        model.value_and_gradient(q, &mut grad);
        let fd = fd_gradient(model, q);
        for i in 0..q.len() {
            assert!(
                (grad[i] - fd[i]).abs() <= FD_TOL * fd[i].abs().max(1.0),
                "i = {i}: {} vs {}",
                grad[i],
                fd[i]
            );
        }
    }

    /// Deterministic, irregular test points in dimension `d`; the last lies mostly along
    /// `(1, …, 1)`, where the two terms of the correlated Gaussian's gradient nearly cancel.
    fn points(d: usize) -> Vec<Vec<f64>> {
        let mut points: Vec<Vec<f64>> = (0..3)
            .map(|k| {
                (0..d)
                    .map(|i| ((i * 7 + k * 13) as f64 * 0.61).sin() * (k + 1) as f64 * 0.4)
                    .collect()
            })
            .collect();
        points.push(
            (0..d)
                .map(|i| 0.6 + 0.05 * (i as f64 * 1.3).sin())
                .collect(),
        );
        points
    }

    #[test]
    fn conjugate_gradient_matches_central_differences() {
        let model = ConjugateGaussian::simulate(ConjugateGaussian::DEFAULT_N, 3).unwrap();
        for q in points(2) {
            assert_gradient_matches(&model, &q);
        }
    }

    #[test]
    fn conjugate_value_and_gradient_value_equals_value() {
        let model = ConjugateGaussian::simulate(20, 4).unwrap();
        for q in points(2) {
            let mut grad = [0.0; 2];
            assert_eq!(model.value_and_gradient(&q, &mut grad), model.value(&q));
        }
    }

    #[test]
    fn conjugate_potential_equals_paper_sum_over_data() {
        // Eq. 3.1 term by term, in dimension 3 with a non-diagonal prior.
        let y = DMatrix::from_fn(9, 3, |i, j| ((i * 3 + j) as f64 * 0.9).cos() + j as f64);
        let sigma = DMatrix::from_row_slice(3, 3, &[2.0, 0.3, 0.1, 0.3, 1.0, -0.2, 0.1, -0.2, 0.5]);
        let mu0 = DVector::from_column_slice(&[0.5, -0.5, 1.0]);
        let sigma0 = DMatrix::from_row_slice(3, 3, &[4.0, 1.0, 0.0, 1.0, 3.0, 0.5, 0.0, 0.5, 2.0]);
        let model = ConjugateGaussian::new(&y, &sigma, &mu0, &sigma0).unwrap();
        let (a, b) = (sigma.try_inverse().unwrap(), sigma0.try_inverse().unwrap());
        for q in points(3) {
            let mu = DVector::from_column_slice(&q);
            let mut direct = 0.5 * (&mu - &mu0).dot(&(&b * (&mu - &mu0)));
            for row in y.row_iter() {
                let r = row.transpose() - &mu;
                direct += 0.5 * r.dot(&(&a * &r));
            }
            let u = model.value(&q);
            assert!((u - direct).abs() <= 1e-12 * direct, "{u} vs {direct}");
        }
    }

    #[test]
    fn conjugate_minimum_and_hessian_are_the_closed_form_posterior() {
        let model = ConjugateGaussian::simulate(ConjugateGaussian::DEFAULT_N, 5).unwrap();
        let mean = model.posterior_mean();
        let precision = model.posterior_precision();
        // ∇U vanishes at the closed-form mean…
        let mut grad = [0.0; 2];
        model.value_and_gradient(mean.as_slice(), &mut grad);
        let scale = precision.amax() * mean.amax();
        assert!(
            grad.iter().all(|g| g.abs() <= 1e-12 * scale),
            "∇U = {grad:?}"
        );
        // …and U grows away from it.
        let u0 = model.value(mean.as_slice());
        for q in points(2) {
            let p: Vec<f64> = q
                .iter()
                .zip(mean.iter())
                .map(|(a, m)| m + 0.1 * a)
                .collect();
            assert!(model.value(&p) > u0);
        }
        // The Hessian, by central differences of ∇U, equals N Σ⁻¹ + Σ0⁻¹.
        for j in 0..2 {
            let (mut up, mut down) = (mean.clone(), mean.clone());
            up[j] += H;
            down[j] -= H;
            let (mut g_up, mut g_down) = ([0.0; 2], [0.0; 2]);
            model.value_and_gradient(up.as_slice(), &mut g_up);
            model.value_and_gradient(down.as_slice(), &mut g_down);
            for i in 0..2 {
                let h = (g_up[i] - g_down[i]) / (2.0 * H);
                let want = precision[(i, j)];
                assert!(
                    (h - want).abs() <= FD_TOL * precision.amax(),
                    "H[{i},{j}] = {h} vs {want}"
                );
            }
        }
        // The covariance is the precision's inverse.
        let identity = model.posterior_covariance() * precision;
        assert!((identity - DMatrix::identity(2, 2)).amax() < 1e-12);
    }

    #[test]
    fn conjugate_constructor_validates() {
        let y = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 3.0, 4.0]);
        let eye = DMatrix::identity(2, 2);
        let zero = DVector::zeros(2);
        assert!(ConjugateGaussian::new(&y, &eye, &zero, &eye).is_ok());
        assert!(ConjugateGaussian::new(&DMatrix::zeros(0, 2), &eye, &zero, &eye).is_err());
        assert!(ConjugateGaussian::new(&y, &DMatrix::identity(3, 3), &zero, &eye).is_err());
        assert!(ConjugateGaussian::new(&y, &eye, &DVector::zeros(3), &eye).is_err());
        let not_pd = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
        assert!(ConjugateGaussian::new(&y, &not_pd, &zero, &eye).is_err());
        let not_sym = DMatrix::from_row_slice(2, 2, &[1.0, 0.1, 0.0, 1.0]);
        assert!(ConjugateGaussian::new(&y, &eye, &zero, &not_sym).is_err());
        let mut bad = y.clone();
        bad[(1, 1)] = f64::INFINITY;
        assert!(ConjugateGaussian::new(&bad, &eye, &zero, &eye).is_err());
        assert!(ConjugateGaussian::simulate(0, 1).is_err());
    }

    #[test]
    fn correlated_gradient_matches_central_differences() {
        let model = CorrelatedGaussian::journal();
        for q in points(32) {
            assert_gradient_matches(&model, &q);
        }
    }

    #[test]
    fn correlated_value_and_gradient_value_equals_value() {
        let model = CorrelatedGaussian::journal();
        for q in points(32) {
            let mut grad = [0.0; 32];
            assert_eq!(model.value_and_gradient(&q, &mut grad), model.value(&q));
        }
    }

    #[test]
    fn correlated_potential_equals_dense_quadratic_form() {
        let model = CorrelatedGaussian::journal();
        let precision = model.covariance().try_inverse().unwrap();
        // The closed form of the precision the O(d) code relies on: 100 I − 99 · 11ᵀ/32.
        let closed = DMatrix::from_fn(32, 32, |i, j| {
            -99.0 / 32.0 + if i == j { 100.0 } else { 0.0 }
        });
        assert!((&precision - closed).amax() < 1e-9);
        for q in points(32) {
            let v = DVector::from_column_slice(&q);
            let dense = 0.5 * v.dot(&(&precision * &v));
            let u = model.value(&q);
            assert!((u - dense).abs() <= 1e-10 * dense, "{u} vs {dense}");
            let mut grad = [0.0; 32];
            model.value_and_gradient(&q, &mut grad);
            let dense_grad = &precision * &v;
            for i in 0..32 {
                assert!((grad[i] - dense_grad[i]).abs() <= 1e-9 * dense_grad.amax());
            }
        }
    }

    #[test]
    fn correlated_covariance_has_the_journal_spectrum() {
        let cov = CorrelatedGaussian::journal().covariance();
        let ones = DVector::from_element(32, 1.0 / 32.0_f64.sqrt());
        assert!(
            (&cov * &ones - &ones).amax() < 1e-14,
            "(1,…,1) has eigenvalue 1"
        );
        let mut eigenvalues: Vec<f64> = cov.symmetric_eigenvalues().iter().copied().collect();
        eigenvalues.sort_by(f64::total_cmp);
        assert!((eigenvalues[31] - 1.0).abs() < 1e-12);
        assert!(eigenvalues[..31].iter().all(|e| (e - 0.01).abs() < 1e-12));
    }

    #[test]
    fn correlated_constructor_validates() {
        assert!(CorrelatedGaussian::new(0, 1.0, 0.01).is_err());
        assert!(CorrelatedGaussian::new(4, 0.0, 0.01).is_err());
        assert!(CorrelatedGaussian::new(4, 1.0, f64::NAN).is_err());
        let model = CorrelatedGaussian::new(3, 2.0, 0.5).unwrap();
        assert_eq!(model.parameter_names(), ["q.1", "q.2", "q.3"]);
    }
}
