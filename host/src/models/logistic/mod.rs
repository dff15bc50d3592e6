//! Bayesian logistic regression, the RNS-HMC paper's main test bed (the LR simulation, Bank
//! Marketing, a9a):
//!
//! `U(β) = Σᵢ [log(1 + exp(xᵢ·β)) − yᵢ xᵢ·β] + ‖β‖²/(2σ²)`,
//! `∇U(β) = Σᵢ (σ(xᵢ·β) − yᵢ) xᵢ + β/σ²`,
//!
//! with `yᵢ ∈ {0, 1}`, the logistic function `σ` and the prior `β ~ N(0, σ² I)` (σ² = 100 in
//! the papers).
//!
//! # The kernel
//! At the paper's N = 10⁵ rows and d = 50 the design matrix is 40 MB, far beyond the L1 and L2
//! caches, so an evaluation streams `X` and reading it once is the floor. The model keeps a
//! copy of `X` in blocks of 16 rows stored column by column ([`kernel`]): a block's 16 dot
//! products, losses, residuals and gradient terms are lane-wise vector arithmetic with no
//! horizontal sums, in the widest vector instructions the processor has (chosen at run time,
//! the same bits on any of them). The row-major [`Dataset`] stays for the row-by-row users
//! (minibatch gradients, the Fisher metric, simulation); the copy doubles the memory `X` takes.
//!
//! `(log(1 + e^z), σ(z))` come from one `a = e^−|z|`, inlined branch-free `exp` and `log1p`
//! (the library ones are calls that block vectorization). `value` skips the gradient terms and
//! `gradient` the loss sums; the summation order is fixed, so `value` and
//! `value_and_gradient` return bit-identical energies.
//!
//! # Segments
//! The blocks are grouped into segments of 1024 rows, each summed on its own and the segments
//! added in order: the model is a [`RowSum`], so chains in lockstep share one read of `X`. A
//! block then serves every chain's `β` while it is in the L1 cache, and a shared pass returns
//! exactly what `value`, `gradient` and `value_and_gradient` return.

mod fisher;
mod kernel;

use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::Potential;
use shmc_core::fastmath::logistic;
use shmc_core::linalg::{axpy, dot};
use shmc_core::random::{fill_standard_normal, uniform};

use super::{ModelEntry, regression, regression_options};
use crate::data::Dataset;
use crate::metric::RiemannianMetric;
use crate::model::{Generative, Simulated, indexed_names};
use crate::row_sum::{self, Need, Query, RowSum};
use crate::{Error, Model, Result};
pub use fisher::LogisticFisher;
use kernel::Blocked;

/// The registry's entry: the papers' logistic regression, simulated (N = 10⁵, d = 50) or
/// from a data file.
pub const ENTRY: ModelEntry = ModelEntry {
    name: "logistic",
    description: "Bayesian logistic regression, prior N(0, 100 I); simulated as in the papers, or from a data file",
    parameters: "beta.1 .. beta.d",
    options: regression_options!("100000 rows when simulated", "50 features when simulated"),
    build: |spec| {
        regression(
            spec,
            (100_000, 50),
            LogisticRegression::DEFAULT_PRIOR_VARIANCE,
            LogisticRegression::simulate,
            LogisticRegression::new,
            LogisticRegression::data,
        )
    },
    small: Some(|spec| {
        spec.set("n", 100);
        spec.set("d", 3);
        "N 100, d 3"
    }),
};

/// Rows per segment of the row sum (64 blocks): at N = 10⁵ that is 98 segments, enough for the
/// threads of a shared pass to balance their shares, while adding a segment's partial gradient
/// (`d` additions) is nothing beside its `2 · 1024 · d` multiply-adds.
const SEGMENT_ROWS: usize = 64 * kernel::ROWS;

/// Queries one block serves while it is in the L1 cache; more queries take the segment again
/// (from the L2 cache), eight at a time, so the per-query lane sums stay in the L1 and L2
/// caches.
const QUERY_GROUP: usize = 8;

/// Bayesian logistic regression with a `N(0, σ² I)` prior on the coefficients.
#[derive(Clone, Debug)]
pub struct LogisticRegression {
    data: Dataset,
    blocked: Blocked,
    prior_variance: f64,
    true_beta: Option<Vec<f64>>,
}

impl LogisticRegression {
    /// The papers' prior variance σ² = 100.
    pub const DEFAULT_PRIOR_VARIANCE: f64 = 100.0;

    /// The model for `data`, one coefficient per column (add an intercept column to the data
    /// first if one is wanted), with the prior `N(0, prior_variance · I)`.
    pub fn new(data: Dataset, prior_variance: f64) -> Result<Self> {
        super::check_regression("logistic regression", &data, prior_variance)?;
        Ok(Self {
            blocked: Blocked::new(&data.x, &data.y, data.p),
            data,
            prior_variance,
            true_beta: None,
        })
    }

    /// The RNS-HMC paper's simulated data set with `n` rows and `d` coefficients, prior
    /// `N(0, 100 I)`; the paper uses `n = 100 000`, `d = 50`.
    ///
    /// `X = (0.1·1, X₁)`: the first column is the constant 0.1 and the other `d − 1` entries of
    /// every row are independent `N(0, 0.01)` (sd 0.1); the true `β` has independent `U[0, 1]`
    /// entries and `yᵢ ~ Bernoulli(σ(xᵢ·β))`. From `Pcg64::seed_from_u64(seed)` the draws are,
    /// in order: the normal part of `X` row by row, then `β`, then one uniform per response.
    pub fn simulate(n: usize, d: usize, seed: u64) -> Result<Self> {
        if n == 0 || d == 0 {
            return Err(Error::invalid(format!(
                "the simulation needs n ≥ 1 and d ≥ 1, got n = {n}, d = {d}"
            )));
        }
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut normals = vec![0.0; n * (d - 1)];
        fill_standard_normal(&mut rng, &mut normals);
        let mut x = Vec::with_capacity(n * d);
        for i in 0..n {
            x.push(0.1);
            x.extend(
                normals[i * (d - 1)..(i + 1) * (d - 1)]
                    .iter()
                    .map(|v| 0.1 * v),
            );
        }
        let beta: Vec<f64> = (0..d).map(|_| uniform(&mut rng)).collect();
        let y = x
            .chunks_exact(d)
            .map(|row| {
                let p = logistic(dot(row, &beta));
                if uniform(&mut rng) < p { 1.0 } else { 0.0 }
            })
            .collect();
        let mut names = vec!["const".to_string()];
        names.extend(indexed_names("x", d - 1));
        let data = Dataset::new(x, y, n, d, names)?;
        let mut model = Self::new(data, Self::DEFAULT_PRIOR_VARIANCE)?;
        model.true_beta = Some(beta);
        Ok(model)
    }

    /// The data the model was built from.
    pub fn data(&self) -> &Dataset {
        &self.data
    }

    /// The prior variance σ².
    pub fn prior_variance(&self) -> f64 {
        self.prior_variance
    }

    /// The coefficients the data were simulated with, for a simulated model.
    pub fn true_beta(&self) -> Option<&[f64]> {
        self.true_beta.as_deref()
    }

    /// The rows of segment `index`: `start..end`.
    fn segment_range(&self, index: usize) -> (usize, usize) {
        let start = index * SEGMENT_ROWS;
        (start, (start + SEGMENT_ROWS).min(self.data.n))
    }
}

impl Potential for LogisticRegression {
    fn dim(&self) -> usize {
        self.data.p
    }

    fn value(&self, q: &[f64]) -> f64 {
        row_sum::evaluate(self, q, Need::Value, &mut [])
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        assert_eq!(
            grad.len(),
            self.data.p,
            "the gradient buffer has the wrong dimension"
        );
        row_sum::evaluate(self, q, Need::ValueAndGradient, grad)
    }

    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        assert_eq!(
            grad.len(),
            self.data.p,
            "the gradient buffer has the wrong dimension"
        );
        row_sum::evaluate(self, q, Need::Gradient, grad);
    }
}

/// The row sum in segments of 1024 rows; the prior `‖β‖²/(2σ²)` is the rest.
impl RowSum for LogisticRegression {
    fn segments(&self) -> usize {
        self.data.n.div_ceil(SEGMENT_ROWS)
    }

    fn segment(&self, index: usize, queries: &[Query<'_>], out: &mut [f64]) {
        let (start, end) = self.segment_range(index);
        let width = 1 + self.data.p;
        for (group, out) in queries
            .chunks(QUERY_GROUP)
            .zip(out.chunks_mut(QUERY_GROUP * width))
        {
            self.blocked.pass(start, end, group, out);
        }
    }

    fn rows(&self) -> usize {
        self.data.n
    }

    fn rows_gradient(&self, beta: &[f64], rows: &[usize], grad: &mut [f64]) {
        let d = self.data.p;
        grad.fill(0.0);
        for &i in rows {
            let row = &self.data.x[i * d..(i + 1) * d];
            let sigmoid = logistic(dot(row, beta));
            axpy(sigmoid - self.data.y[i], row, grad);
        }
    }

    fn finish(&self, beta: &[f64], need: Need, value: &mut f64, grad: &mut [f64]) {
        let precision = 1.0 / self.prior_variance;
        if need.gradient() {
            axpy(precision, beta, grad);
        }
        if need.value() {
            *value += 0.5 * precision * dot(beta, beta);
        }
    }
}

impl Model for LogisticRegression {
    fn parameter_names(&self) -> Vec<String> {
        indexed_names("beta", self.data.p)
    }

    fn row_sum(&self) -> Option<&dyn RowSum> {
        Some(self)
    }

    fn riemannian_metric(&self, _start: &[f64]) -> Option<Box<dyn RiemannianMetric + '_>> {
        Some(Box::new(LogisticFisher::new(self)))
    }

    fn notes(&self) -> Vec<String> {
        self.data.describe("beta")
    }

    fn generative(&self) -> Option<&dyn Generative> {
        Some(self)
    }
}

/// The covariates stay this model's; the coefficients are drawn from its prior and the responses
/// through this model's link (see [`super::simulate_responses`]).
impl Generative for LogisticRegression {
    fn simulate(&self, seed: u64) -> Result<Simulated> {
        let (beta, data) =
            super::simulate_responses(&self.data, self.prior_variance, seed, logistic);
        let mut posterior = Self::new(data, self.prior_variance)?;
        posterior.true_beta = Some(beta.clone());
        Ok(Simulated {
            truth: beta,
            posterior: Box::new(posterior),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_gradient_is_the_full_gradient_in_parts() {
        let model = LogisticRegression::simulate(3000, 5, 4).unwrap();
        crate::row_sum::assert_rows_gradient_adds_up(&model, &[0.3, -0.2, 0.5, 0.1, -0.4]);
    }

    /// A random data set with `N(0, scale²)` features and fair-coin responses.
    fn random_data(n: usize, d: usize, scale: f64, seed: u64) -> Dataset {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut x = vec![0.0; n * d];
        fill_standard_normal(&mut rng, &mut x);
        x.iter_mut().for_each(|v| *v *= scale);
        let y = (0..n)
            .map(|_| if uniform(&mut rng) < 0.5 { 1.0 } else { 0.0 })
            .collect();
        Dataset::new(x, y, n, d, indexed_names("x", d)).unwrap()
    }

    fn random_point(d: usize, scale: f64, seed: u64) -> Vec<f64> {
        let mut q = vec![0.0; d];
        fill_standard_normal(&mut Pcg64::seed_from_u64(seed), &mut q);
        q.iter_mut().for_each(|v| *v *= scale);
        q
    }

    /// The textbook two-pass evaluation: all of `z = Xβ` first, then the sums, with the
    /// library `exp` and `ln_1p`.
    fn naive(data: &Dataset, sigma2: f64, beta: &[f64]) -> (f64, Vec<f64>) {
        let z: Vec<f64> = (0..data.n)
            .map(|i| data.row(i).iter().zip(beta).map(|(x, b)| x * b).sum())
            .collect();
        let mut u = beta.iter().map(|b| b * b).sum::<f64>() / (2.0 * sigma2);
        let mut grad: Vec<f64> = beta.iter().map(|b| b / sigma2).collect();
        for (i, &zi) in z.iter().enumerate() {
            let softplus = if zi > 0.0 {
                zi + (-zi).exp().ln_1p()
            } else {
                zi.exp().ln_1p()
            };
            u += softplus - data.y[i] * zi;
            let sigmoid = 1.0 / (1.0 + (-zi).exp());
            for (g, x) in grad.iter_mut().zip(data.row(i)) {
                *g += (sigmoid - data.y[i]) * x;
            }
        }
        (u, grad)
    }

    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs().max(1e-300)
    }

    #[test]
    fn gradient_matches_central_differences() {
        let model = LogisticRegression::new(random_data(37, 6, 1.0, 1), 4.0).unwrap();
        let q = random_point(6, 0.7, 2);
        let mut grad = vec![0.0; 6];
        model.value_and_gradient(&q, &mut grad);
        let mut only = vec![0.0; 6];
        model.gradient(&q, &mut only);
        assert_eq!(grad, only);
        let h = 1e-5;
        for j in 0..6 {
            let (mut plus, mut minus) = (q.clone(), q.clone());
            plus[j] += h;
            minus[j] -= h;
            let fd = (model.value(&plus) - model.value(&minus)) / (2.0 * h);
            assert!(
                (fd - grad[j]).abs() < 1e-6 * (1.0 + grad[j].abs()),
                "coordinate {j}: finite difference {fd}, gradient {}",
                grad[j]
            );
        }
    }

    #[test]
    fn value_and_gradient_value_equals_value() {
        // n and d not multiples of the block or the 4-row groups, so every tail runs.
        let model = LogisticRegression::new(random_data(203, 7, 1.0, 3), 100.0).unwrap();
        for seed in 0..5 {
            let q = random_point(7, 1.0, 10 + seed);
            let mut grad = vec![0.0; 7];
            let fused = model.value_and_gradient(&q, &mut grad);
            assert_eq!(fused.to_bits(), model.value(&q).to_bits(), "seed {seed}");
        }
    }

    #[test]
    fn vector_instructions_change_no_bit() {
        // Padded last blocks (n not a multiple of 16), several segments, every need at once.
        // The pass this processor runs is compared bit for bit with the baseline build of the
        // same arithmetic (multiply-adds fused or not as here), and the unfused sums with the
        // fused ones to a few roundings.
        let fused = kernel::fused_multiply_add();
        for (n, d) in [(1037, 13), (2100, 50), (5, 3)] {
            let model = LogisticRegression::new(random_data(n, d, 1.0, n as u64), 100.0).unwrap();
            let points: Vec<Vec<f64>> = (0..3).map(|k| random_point(d, 0.5, k)).collect();
            let needs = [Need::Value, Need::Gradient, Need::ValueAndGradient];
            let queries: Vec<Query<'_>> = points
                .iter()
                .zip(needs)
                .map(|(point, need)| Query { point, need })
                .collect();
            for start in (0..n).step_by(SEGMENT_ROWS) {
                let end = (start + SEGMENT_ROWS).min(n);
                let record = 3 * (1 + d);
                let (mut wide, mut baseline, mut unfused) =
                    (vec![0.0; record], vec![0.0; record], vec![0.0; record]);
                model.blocked.pass(start, end, &queries, &mut wide);
                if fused {
                    let blocked = &model.blocked;
                    blocked.pass_baseline::<true>(start, end, &queries, &mut baseline);
                } else {
                    let blocked = &model.blocked;
                    blocked.pass_baseline::<false>(start, end, &queries, &mut baseline);
                }
                model
                    .blocked
                    .pass_baseline::<false>(start, end, &queries, &mut unfused);
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&wide),
                    bits(&baseline),
                    "n = {n}, d = {d}, rows {start}.."
                );
                let scale = wide.iter().map(|v| v.abs()).fold(0.0, f64::max);
                for (w, u) in wide.iter().zip(&unfused) {
                    assert!((w - u).abs() <= 1e-13 * scale, "{w} vs unfused {u}");
                }
            }
        }
    }

    #[test]
    fn fused_pass_matches_naive_two_pass_reference() {
        // Moderate and huge |z| (up to thousands: the exponential's clamp and both branches).
        for (n, d, scale, sigma2) in [
            (1037, 13, 1.0, 100.0),
            (300, 50, 1.0, 2.0),
            (129, 3, 300.0, 100.0),
        ] {
            let data = random_data(n, d, scale, n as u64);
            let model = LogisticRegression::new(data.clone(), sigma2).unwrap();
            let q = random_point(d, 1.0, d as u64);
            let mut grad = vec![0.0; d];
            let u = model.value_and_gradient(&q, &mut grad);
            let (u_ref, g_ref) = naive(&data, sigma2, &q);
            assert!(rel(u, u_ref) < 1e-10, "n = {n}, d = {d}: U {u} vs {u_ref}");
            let g_norm = g_ref.iter().map(|g| g.abs()).fold(0.0, f64::max);
            for (j, (g, r)) in grad.iter().zip(&g_ref).enumerate() {
                assert!(
                    (g - r).abs() < 1e-10 * g_norm,
                    "n = {n}, d = {d}, coordinate {j}: {g} vs {r}"
                );
            }
        }
    }

    #[test]
    fn simulation_follows_the_paper_and_is_reproducible() {
        let (n, d) = (4000, 6);
        let model = LogisticRegression::simulate(n, d, 42).unwrap();
        let again = LogisticRegression::simulate(n, d, 42).unwrap();
        assert_eq!(model.data(), again.data());
        assert_ne!(
            model.data().x,
            LogisticRegression::simulate(n, d, 43).unwrap().data().x
        );
        let data = model.data();
        assert_eq!((data.n, data.p, model.dim()), (n, d, d));
        assert!((0..n).all(|i| data.row(i)[0] == 0.1));
        let rest: Vec<f64> = (0..n).flat_map(|i| data.row(i)[1..].to_vec()).collect();
        let sd = (rest.iter().map(|v| v * v).sum::<f64>() / rest.len() as f64).sqrt();
        assert!((sd - 0.1).abs() < 0.003, "sd of X1 {sd}");
        let beta = model.true_beta().unwrap();
        assert!(beta.iter().all(|b| (0.0..1.0).contains(b)));
        // E[y] = E σ(xᵢ·β): compare the observed rate with the mean probability.
        let p_mean = (0..n)
            .map(|i| logistic(dot(data.row(i), beta)))
            .sum::<f64>()
            / n as f64;
        let rate = data.positives() as f64 / n as f64;
        assert!(
            (rate - p_mean).abs() < 4.0 * (0.25 / n as f64).sqrt(),
            "{rate} vs {p_mean}"
        );
        assert_eq!(model.prior_variance(), 100.0);
        assert_eq!(
            model.parameter_names(),
            vec!["beta.1", "beta.2", "beta.3", "beta.4", "beta.5", "beta.6"]
        );
    }

    #[test]
    fn constructors_reject_bad_settings() {
        let data = random_data(5, 2, 1.0, 0);
        assert!(LogisticRegression::new(data.clone(), 0.0).is_err());
        assert!(LogisticRegression::new(data.clone(), f64::INFINITY).is_err());
        assert!(LogisticRegression::new(data, -1.0).is_err());
        let empty = Dataset::new(vec![], vec![], 0, 2, indexed_names("x", 2)).unwrap();
        assert!(LogisticRegression::new(empty, 1.0).is_err());
        assert!(LogisticRegression::simulate(0, 5, 1).is_err());
        assert!(LogisticRegression::simulate(5, 0, 1).is_err());
    }
}
