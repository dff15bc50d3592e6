//! The banana-shaped posterior of the precomputing (grid HMC) paper, section 4.2.
//!
//! Data `y_i ~ N(β1 + β2², σ_y²)` with `σ_y = 2`, prior `β ~ N(0, σ_β² I)` with `σ_β = 1`, so
//! (paper eq. 4.1)
//!
//! `U(β) = Σ_i (y_i − β1 − β2²)² / (2σ_y²) + (β1² + β2²) / (2σ_β²)`.
//!
//! The likelihood sees `β` only through `m = β1 + β2²`, and the paper generates its 100 points
//! with `m = 1`; [`Banana::simulate`] does the same (`y_i = 1 + 2 z_i`, standard normal `z_i`
//! from a seeded PCG-64), so it simulates from any `β` on that parabola, for example
//! `β = (1, 0)` or `β = (0, 1)`; which one is immaterial. The paper does not give its random
//! numbers, so the data (and the exact posterior) depend on the seed.
//!
//! The sum over the data is kept as sufficient statistics, `Σ (y_i − m)² = S + N (ȳ − m)²` with
//! `S = Σ (y_i − ȳ)²`, so `U` equals eq. 4.1 exactly (constant included) at O(1) cost.
//!
//! [`SummedBanana`] is the same posterior written as eq. 4.1 and 4.2 write it, summed over the
//! data point by point at O(N) per evaluation: what a user who codes the paper's model (or
//! writes it in Stan) pays for each `U` and `∇U`. Grid HMC saves exactly that cost, so
//! `shmc bench grid` measures it on both forms; a grid lookup cannot beat an O(1) formula.

use nalgebra::{DMatrix, DVector};
use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::{Potential, random::fill_standard_normal};

use super::{ModelEntry, ModelOption};
use crate::metric::{DenseFactor, MetricAt, RiemannianMetric};
use crate::model::{Generative, Simulated, indexed_names};
use crate::{Error, Model, Result};

/// The registry's entry: the precomputing paper's banana, its 100 points simulated.
pub const ENTRY: ModelEntry = ModelEntry {
    name: "banana",
    description: "banana-shaped posterior: y ~ N(b1 + b2^2, 2^2), b ~ N(0, I) (precomputing paper)",
    parameters: "beta.1, beta.2",
    options: &[
        ModelOption::value("n", "N", "100 points"),
        ModelOption::value("data_seed", "SEED", "1: the simulated data's seed"),
    ],
    build: |spec| {
        let n = spec.get("n")?.unwrap_or(Banana::PAPER_N);
        crate::memory::check(
            &format!("the banana's {n} simulated points"),
            "n",
            crate::memory::f64s([n]),
            spec.memory_limit,
        )?;
        Ok(Box::new(Banana::simulate(
            n,
            spec.get("data_seed")?.unwrap_or(1),
        )?))
    },
    small: Some(|_| "N 100"),
};

/// The banana-shaped posterior of `β = (β1, β2)`.
#[derive(Clone, Debug)]
pub struct Banana {
    /// The number of data points `N`, as a float.
    count: f64,
    /// The data mean `ȳ`.
    mean: f64,
    /// `Σ (y_i − ȳ)²`.
    scatter: f64,
}

impl Banana {
    /// The data standard deviation `σ_y` (paper: 2).
    pub const SIGMA_Y: f64 = 2.0;
    /// The prior standard deviation `σ_β` of each coefficient (paper: 1).
    pub const SIGMA_BETA: f64 = 1.0;
    /// The value of `β1 + β2²` the data are simulated with (paper: 1).
    pub const TRUE_MEAN: f64 = 1.0;
    /// The paper's number of data points.
    pub const PAPER_N: usize = 100;

    /// The posterior given the data `y`. Fails if `y` is empty or has a non-finite entry.
    pub fn new(y: &[f64]) -> Result<Self> {
        check_data(y)?;
        let count = y.len() as f64;
        let mean = y.iter().sum::<f64>() / count;
        let scatter = y.iter().map(|v| (v - mean) * (v - mean)).sum();
        Ok(Self {
            count,
            mean,
            scatter,
        })
    }

    /// `n` data points `y_i = TRUE_MEAN + SIGMA_Y · z_i` with standard normal `z_i` drawn from a
    /// PCG-64 seeded with `seed` (the paper uses `n = 100`). Fails if `n == 0`.
    pub fn simulate(n: usize, seed: u64) -> Result<Self> {
        Self::new(&simulated_data(n, seed))
    }

    /// The posterior's Fisher metric.
    pub fn fisher(&self) -> BananaFisher {
        BananaFisher {
            scale: self.count / (Self::SIGMA_Y * Self::SIGMA_Y),
        }
    }
}

/// Fails if `y` is empty or has a non-finite entry, naming the entry.
fn check_data(y: &[f64]) -> Result<()> {
    if y.is_empty() {
        return Err(Error::invalid("banana model needs at least one data point"));
    }
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(format!(
            "banana model: data point {} is not finite",
            i + 1
        )));
    }
    Ok(())
}

/// The data [`Banana::simulate`] and [`SummedBanana::simulate`] share.
fn simulated_data(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut y = vec![0.0; n];
    fill_standard_normal(&mut rng, &mut y);
    for v in &mut y {
        *v = Banana::TRUE_MEAN + Banana::SIGMA_Y * *v;
    }
    y
}

impl Potential for Banana {
    fn dim(&self) -> usize {
        2
    }

    fn value(&self, q: &[f64]) -> f64 {
        let m = q[0] + q[1] * q[1];
        let r = self.mean - m;
        (self.scatter + self.count * r * r) / (2.0 * Self::SIGMA_Y * Self::SIGMA_Y)
            + (q[0] * q[0] + q[1] * q[1]) / (2.0 * Self::SIGMA_BETA * Self::SIGMA_BETA)
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let m = q[0] + q[1] * q[1];
        let r = self.mean - m;
        let inv_var_y = 1.0 / (Self::SIGMA_Y * Self::SIGMA_Y);
        let inv_var_beta = 1.0 / (Self::SIGMA_BETA * Self::SIGMA_BETA);
        // ∂U/∂m = −N (ȳ − m) / σ_y², and ∂m/∂β = (1, 2 β2).
        let dm = -self.count * r * inv_var_y;
        grad[0] = dm + q[0] * inv_var_beta;
        grad[1] = 2.0 * q[1] * dm + q[1] * inv_var_beta;
        0.5 * (self.scatter + self.count * r * r) * inv_var_y
            + 0.5 * (q[0] * q[0] + q[1] * q[1]) * inv_var_beta
    }
}

impl Model for Banana {
    fn parameter_names(&self) -> Vec<String> {
        indexed_names("beta", 2)
    }

    fn generative(&self) -> Option<&dyn Generative> {
        Some(self)
    }

    fn riemannian_metric(&self, _start: &[f64]) -> Option<Box<dyn RiemannianMetric + '_>> {
        Some(Box::new(self.fisher()))
    }
}

/// The banana's posterior in the paper's own form: `U` (eq. 4.1) and `−∇U` (eq. 4.2) summed
/// over the data points one by one, O(N) per evaluation, as a user codes the model from the
/// paper. Equal to [`Banana`] on the same data to rounding; it exists so that a benchmark can
/// price an exact evaluation at what the paper's (and a Stan user's) model costs. [`Banana`]
/// stays the model everywhere else.
#[derive(Clone, Debug)]
pub struct SummedBanana {
    /// The data points `y_i`.
    y: Vec<f64>,
}

impl SummedBanana {
    /// The posterior given the data `y`. Fails if `y` is empty or has a non-finite entry.
    pub fn new(y: &[f64]) -> Result<Self> {
        check_data(y)?;
        Ok(Self { y: y.to_vec() })
    }

    /// The data of [`Banana::simulate`]`(n, seed)`, kept point by point. Fails if `n == 0`.
    pub fn simulate(n: usize, seed: u64) -> Result<Self> {
        Self::new(&simulated_data(n, seed))
    }
}

impl Potential for SummedBanana {
    fn dim(&self) -> usize {
        2
    }

    fn value(&self, q: &[f64]) -> f64 {
        let m = q[0] + q[1] * q[1];
        let squares: f64 = self.y.iter().map(|y| (y - m) * (y - m)).sum();
        squares / (2.0 * Banana::SIGMA_Y * Banana::SIGMA_Y)
            + (q[0] * q[0] + q[1] * q[1]) / (2.0 * Banana::SIGMA_BETA * Banana::SIGMA_BETA)
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let m = q[0] + q[1] * q[1];
        let (mut residuals, mut squares) = (0.0, 0.0);
        for y in &self.y {
            let r = y - m;
            residuals += r;
            squares += r * r;
        }
        let inv_var_y = 1.0 / (Banana::SIGMA_Y * Banana::SIGMA_Y);
        let inv_var_beta = 1.0 / (Banana::SIGMA_BETA * Banana::SIGMA_BETA);
        // Eq. 4.2: −∂U/∂β = Σ (y_i − m) / σ_y² · (1, 2 β2) − β / σ_β².
        let dm = -residuals * inv_var_y;
        grad[0] = dm + q[0] * inv_var_beta;
        grad[1] = 2.0 * q[1] * dm + q[1] * inv_var_beta;
        0.5 * squares * inv_var_y + 0.5 * (q[0] * q[0] + q[1] * q[1]) * inv_var_beta
    }
}

impl Model for SummedBanana {
    fn parameter_names(&self) -> Vec<String> {
        indexed_names("beta", 2)
    }
}

/// The Fisher metric of the banana, `G = (N/σ_y²) J Jᵀ + I/σ_β²` with `J = ∂m/∂β = (1, 2β₂)`:
/// position dependent, positive definite, with `∂₂G = (N/σ_y²) [[0, 2], [2, 8β₂]]`. The
/// banana's curvature turns with `β₂`, which is what RMHMC's metric is for (Girolami &
/// Calderhead's own example).
#[derive(Clone, Copy, Debug)]
pub struct BananaFisher {
    /// `N/σ_y²`.
    scale: f64,
}

struct BananaAt {
    factor: DenseFactor,
    matrix: DMatrix<f64>,
    derivative: DMatrix<f64>,
}

impl RiemannianMetric for BananaFisher {
    fn dim(&self) -> usize {
        2
    }
    fn at(&self, q: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        let (c, b) = (self.scale, q[1]);
        let prior = 1.0 / (Banana::SIGMA_BETA * Banana::SIGMA_BETA);
        let matrix = DMatrix::from_row_slice(
            2,
            2,
            &[c + prior, 2.0 * c * b, 2.0 * c * b, 4.0 * c * b * b + prior],
        );
        let derivative = DMatrix::from_row_slice(2, 2, &[0.0, 2.0 * c, 2.0 * c, 8.0 * c * b]);
        Some(Box::new(BananaAt {
            factor: DenseFactor::new(matrix.clone())?,
            matrix,
            derivative,
        }))
    }
}

impl MetricAt for BananaAt {
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
    fn trace_derivatives(&self, out: &mut [f64]) {
        let inv = self.factor.cholesky().inverse();
        out[0] = 0.0;
        out[1] = (inv * &self.derivative).trace();
    }
    fn quadratic_derivatives(&self, u: &[f64], out: &mut [f64]) {
        let u = DVector::from_column_slice(u);
        out[0] = 0.0;
        out[1] = u.dot(&(&self.derivative * &u));
    }
}

/// `β ~ N(0, σ_β² I)`, then as many points as this model has, `y_i ~ N(β1 + β2², σ_y²)`; from
/// the stream, in order: `β1`, `β2`, then the data's standard normals.
impl Generative for Banana {
    fn simulate(&self, seed: u64) -> Result<Simulated> {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut beta = [0.0; 2];
        fill_standard_normal(&mut rng, &mut beta);
        beta.iter_mut().for_each(|b| *b *= Self::SIGMA_BETA);
        let mut y = vec![0.0; self.count as usize];
        fill_standard_normal(&mut rng, &mut y);
        let m = beta[0] + beta[1] * beta[1];
        y.iter_mut().for_each(|v| *v = m + Self::SIGMA_Y * *v);
        Ok(Simulated {
            truth: beta.to_vec(),
            posterior: Box::new(Self::new(&y)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Central-difference step; the O(H²) truncation error is ~1e-10 relative here.
    const H: f64 = 1e-5;
    /// Relative tolerance for gradients against central differences.
    const FD_TOL: f64 = 1e-6;

    const POINTS: [[f64; 2]; 4] = [[0.0, 0.0], [0.5, 0.7], [-1.3, 1.4], [2.0, -3.0]];

    #[test]
    fn gradient_matches_central_differences() {
        let model = Banana::simulate(Banana::PAPER_N, 1).unwrap();
        for q in POINTS {
            crate::models::fd_check::assert_gradient_matches_central_differences(
                &model, &q, H, FD_TOL,
            );
        }
    }

    #[test]
    fn value_and_gradient_value_equals_value() {
        let model = Banana::simulate(Banana::PAPER_N, 2).unwrap();
        for q in POINTS {
            let mut grad = [0.0; 2];
            let v = model.value_and_gradient(&q, &mut grad);
            assert!((v - model.value(&q)).abs() <= 1e-14 * v.abs());
        }
    }

    #[test]
    fn potential_equals_paper_sum_over_data() {
        // Eq. 4.1 summed point by point, against the sufficient-statistic form.
        let y: Vec<f64> = (0..37)
            .map(|i| 1.0 + 2.0 * ((i as f64) * 0.77).sin())
            .collect();
        let model = Banana::new(&y).unwrap();
        for q in POINTS {
            let m = q[0] + q[1] * q[1];
            let direct = y.iter().map(|v| (v - m) * (v - m) / 8.0).sum::<f64>()
                + 0.5 * (q[0] * q[0] + q[1] * q[1]);
            let u = model.value(&q);
            assert!((u - direct).abs() <= 1e-12 * direct, "{u} vs {direct}");
        }
    }

    /// The paper's form and the sufficient statistics agree to rounding: `U` to a few ulps of
    /// its value, each gradient entry to a few ulps of the sum of its terms' magnitudes (the
    /// scale of the rounding in a sum whose terms cancel).
    #[test]
    fn the_paper_form_equals_the_sufficient_statistics_on_random_points() {
        use shmc_core::random::uniform;
        let stats = Banana::simulate(Banana::PAPER_N, 3).unwrap();
        let summed = SummedBanana::simulate(Banana::PAPER_N, 3).unwrap();
        let mut rng = Pcg64::seed_from_u64(11);
        for _ in 0..500 {
            let q = [8.0 * uniform(&mut rng) - 4.0, 8.0 * uniform(&mut rng) - 4.0];
            let (mut g, mut h) = ([0.0; 2], [0.0; 2]);
            let u = stats.value_and_gradient(&q, &mut g);
            let v = summed.value_and_gradient(&q, &mut h);
            assert!((u - v).abs() <= 1e-13 * u, "U {u} vs {v} at {q:?}");
            assert_eq!(v, summed.value(&q));
            let m = q[0] + q[1] * q[1];
            let terms = summed.y.iter().map(|y| (y - m).abs()).sum::<f64>() / 4.0;
            let scale = [terms + q[0].abs(), 2.0 * q[1].abs() * terms + q[1].abs()];
            for k in 0..2 {
                assert!(
                    (g[k] - h[k]).abs() <= 1e-13 * scale[k],
                    "∂U/∂β{} {} vs {} at {q:?}",
                    k + 1,
                    g[k],
                    h[k]
                );
            }
        }
    }

    #[test]
    fn simulation_is_seeded_and_plausible() {
        let a = Banana::simulate(Banana::PAPER_N, 7).unwrap();
        let b = Banana::simulate(Banana::PAPER_N, 7).unwrap();
        let c = Banana::simulate(Banana::PAPER_N, 8).unwrap();
        assert_eq!(a.mean, b.mean);
        assert_ne!(a.mean, c.mean);
        // ȳ ~ N(1, 0.2²): four standard errors; the sample variance near σ_y² = 4.
        assert!((a.mean - 1.0).abs() < 0.8, "ȳ = {}", a.mean);
        let var = a.scatter / 99.0;
        assert!((2.5..6.0).contains(&var), "s² = {var}");
    }

    #[test]
    fn constructor_validates() {
        assert!(Banana::new(&[]).is_err());
        assert!(Banana::new(&[1.0, f64::NAN]).is_err());
        assert!(Banana::simulate(0, 1).is_err());
        assert!(SummedBanana::new(&[]).is_err());
        assert!(SummedBanana::new(&[1.0, f64::INFINITY]).is_err());
        assert!(SummedBanana::simulate(0, 1).is_err());
        assert_eq!(
            Banana::new(&[1.0]).unwrap().parameter_names(),
            ["beta.1", "beta.2"]
        );
    }
}
