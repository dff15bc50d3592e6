//! Bayesian probit regression, the running example of the variational-HMC paper (section 4.2):
//!
//! `P(yᵢ = 1 | θ) = Φ(xᵢ·θ)`, prior `θ ~ N(0, σ² I)` with σ² = 100, so with `tᵢ = (2yᵢ − 1) xᵢ·θ`
//!
//! `U(θ) = −Σᵢ log Φ(tᵢ) + ‖θ‖²/(2σ²)`, `∇U(θ) = −Σᵢ (2yᵢ − 1) λ(tᵢ) xᵢ + θ/σ²`,
//!
//! where `λ(t) = φ(t)/Φ(t)` is the inverse Mills ratio.
//!
//! # Numerics
//! Both `log Φ(t)` and `λ(t)` come from the scaled complementary error function
//! `erfcx(u) = e^{u²} erfc(u)`, which never underflows:
//!
//! - `t < 0`, `u = −t/√2`: `Φ(t) = ½ e^{−t²/2} erfcx(u)`, so `log Φ(t) = −t²/2 + log(½ erfcx(u))`
//!   and `λ(t) = √(2/π) / erfcx(u)`. Both stay exact however negative `t` is (`λ(t) ≈ −t` far out)
//!   instead of turning into `log 0` and `0/0`.
//! - `t ≥ 0`: `Φ(t) = 1 − Q` with the small tail `Q = ½ e^{−t²/2} erfcx(t/√2)`, so
//!   `log Φ(t) = log1p(−Q)` keeps full relative accuracy when `Q` is tiny.
//!
//! `erfcx` is W. J. Cody's rational Chebyshev approximation (Math. Comp. 23, 1969, 631–637; the
//! coefficients of his SPECFUN routine CALERF), accurate to about 1e-16 relative. The standard
//! library has no `erfc`, and `libm` is not a dependency of this crate.
//!
//! # The simulated data set
//! The paper simulates N = 10 000 observations with d = 5 "from the model" and says no more.
//! [`ProbitRegression::simulate`] reads that literally: the true `θ` is drawn from the prior
//! `N(0, 100 I)`, the covariates `xᵢ` are independent standard normal vectors (no intercept
//! column), and `yᵢ ~ Bernoulli(Φ(xᵢ·θ))`.
//!
//! # Segments
//! The row sum is taken in segments of 1024 rows added in order: the model is a [`RowSum`], so
//! chains in lockstep share one pass over the data and get exactly what `value` returns.

use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::Potential;
use shmc_core::linalg::{axpy, dot};
use shmc_core::random::{fill_standard_normal, uniform};

use super::{ModelEntry, regression, regression_options};
use crate::data::Dataset;
use crate::model::{Generative, Simulated, indexed_names};
use crate::row_sum::{self, Need, Query, RowSum};
use crate::{Error, Model, Result};

/// The registry's entry: the VHMC paper's probit regression, simulated (N = 10⁴, d = 5) or
/// from a data file.
pub const ENTRY: ModelEntry = ModelEntry {
    name: "probit",
    description: "Bayesian probit regression, prior N(0, 100 I); simulated as in the VHMC paper, or from a data file",
    parameters: "theta.1 .. theta.d",
    options: regression_options!("10000 rows when simulated", "5 features when simulated"),
    build: |spec| {
        regression(
            spec,
            (10_000, 5),
            ProbitRegression::DEFAULT_PRIOR_VARIANCE,
            ProbitRegression::simulate,
            ProbitRegression::new,
            ProbitRegression::data,
        )
    },
    small: Some(|spec| {
        spec.set("n", 100);
        spec.set("d", 3);
        "N 100, d 3"
    }),
};

/// Bayesian probit regression with a `N(0, σ² I)` prior on the coefficients.
#[derive(Clone, Debug)]
pub struct ProbitRegression {
    data: Dataset,
    /// `2yᵢ − 1`: the sign that turns `xᵢ·θ` into `tᵢ`.
    signs: Vec<f64>,
    prior_variance: f64,
    true_theta: Option<Vec<f64>>,
}

impl ProbitRegression {
    /// The paper's prior variance σ² = 100.
    pub const DEFAULT_PRIOR_VARIANCE: f64 = 100.0;

    /// The model for `data`, one coefficient per column (add an intercept column to the data
    /// first if one is wanted), with the prior `N(0, prior_variance · I)`.
    pub fn new(data: Dataset, prior_variance: f64) -> Result<Self> {
        super::check_regression("probit regression", &data, prior_variance)?;
        let signs = data.y.iter().map(|&y| 2.0 * y - 1.0).collect();
        Ok(Self {
            data,
            signs,
            prior_variance,
            true_theta: None,
        })
    }

    /// A data set simulated from the model, as in the variational-HMC paper (`n = 10 000`,
    /// `d = 5` there), with prior `N(0, 100 I)`.
    ///
    /// The true `θ` is a draw from the prior, every `xᵢ` is `N(0, I_d)` and
    /// `yᵢ ~ Bernoulli(Φ(xᵢ·θ))`. From `Pcg64::seed_from_u64(seed)` the draws are, in order: the
    /// `d` standard normals behind `θ`, `X` row by row, then one uniform per response.
    pub fn simulate(n: usize, d: usize, seed: u64) -> Result<Self> {
        if n == 0 || d == 0 {
            return Err(Error::invalid(format!(
                "the simulation needs n ≥ 1 and d ≥ 1, got n = {n}, d = {d}"
            )));
        }
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut theta = vec![0.0; d];
        fill_standard_normal(&mut rng, &mut theta);
        let sd = Self::DEFAULT_PRIOR_VARIANCE.sqrt();
        theta.iter_mut().for_each(|v| *v *= sd);
        let mut x = vec![0.0; n * d];
        fill_standard_normal(&mut rng, &mut x);
        let y = x
            .chunks_exact(d)
            .map(|row| {
                let p = normal_cdf(dot(row, &theta));
                if uniform(&mut rng) < p { 1.0 } else { 0.0 }
            })
            .collect();
        let data = Dataset::new(x, y, n, d, indexed_names("x", d))?;
        let mut model = Self::new(data, Self::DEFAULT_PRIOR_VARIANCE)?;
        model.true_theta = Some(theta);
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
    pub fn true_theta(&self) -> Option<&[f64]> {
        self.true_theta.as_deref()
    }

    /// Segment `index`'s partial sums at `theta` into `record` (`1 + d` numbers): the rows one
    /// after the other, `−log Φ(tᵢ)` into the value and, if `GRAD`, `−(2yᵢ − 1) λ(tᵢ) xᵢ` into
    /// the gradient.
    fn segment_query<const GRAD: bool>(&self, index: usize, theta: &[f64], record: &mut [f64]) {
        let d = self.data.p;
        let start = index * SEGMENT_ROWS;
        let end = (start + SEGMENT_ROWS).min(self.data.n);
        let (value, grad) = record
            .split_first_mut()
            .expect("a record holds 1 + d numbers");
        if GRAD {
            grad.fill(0.0);
        }
        let mut u = 0.0;
        for (row, &sign) in self.data.x[start * d..end * d]
            .chunks_exact(d)
            .zip(&self.signs[start..end])
        {
            let t = sign * dot(row, theta);
            let (log_cdf, mills) = log_cdf_and_mills::<GRAD>(t);
            u -= log_cdf;
            if GRAD {
                axpy(-sign * mills, row, grad);
            }
        }
        *value = u;
    }
}

/// Rows per segment of the row sum: at N = 10 000 (the paper's simulation) ten segments for the
/// threads of a shared pass to balance, each long enough that adding its partial gradient
/// (`d` additions) costs nothing beside its rows.
const SEGMENT_ROWS: usize = 1024;

impl Potential for ProbitRegression {
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
}

/// The row sum in segments of 1024 rows; the prior `‖θ‖²/(2σ²)` is the rest. Each
/// query takes a segment's rows in turn (the segment, 80 kB at d = 10, stays in the L2 cache):
/// the per-row work (`erfcx`, a logarithm) outweighs reading the row.
impl RowSum for ProbitRegression {
    fn segments(&self) -> usize {
        self.data.n.div_ceil(SEGMENT_ROWS)
    }

    fn segment(&self, index: usize, queries: &[Query<'_>], out: &mut [f64]) {
        let d = self.data.p;
        for (query, record) in queries.iter().zip(out.chunks_exact_mut(1 + d)) {
            assert_eq!(query.point.len(), d, "θ has the wrong dimension");
            if query.need.gradient() {
                self.segment_query::<true>(index, query.point, record);
            } else {
                self.segment_query::<false>(index, query.point, record);
            }
        }
    }

    fn rows(&self) -> usize {
        self.data.n
    }

    fn rows_gradient(&self, theta: &[f64], rows: &[usize], grad: &mut [f64]) {
        let d = self.data.p;
        grad.fill(0.0);
        for &i in rows {
            let row = &self.data.x[i * d..(i + 1) * d];
            let sign = self.signs[i];
            let (_, mills) = log_cdf_and_mills::<true>(sign * dot(row, theta));
            axpy(-sign * mills, row, grad);
        }
    }

    fn finish(&self, theta: &[f64], need: Need, value: &mut f64, grad: &mut [f64]) {
        let precision = 1.0 / self.prior_variance;
        if need.gradient() {
            axpy(precision, theta, grad);
        }
        if need.value() {
            *value += 0.5 * precision * dot(theta, theta);
        }
    }
}

impl Model for ProbitRegression {
    fn parameter_names(&self) -> Vec<String> {
        indexed_names("theta", self.data.p)
    }

    fn row_sum(&self) -> Option<&dyn RowSum> {
        Some(self)
    }

    fn notes(&self) -> Vec<String> {
        self.data.describe("theta")
    }

    fn generative(&self) -> Option<&dyn Generative> {
        Some(self)
    }
}

/// The covariates stay this model's; the coefficients are drawn from its prior and the responses
/// through this model's link (see [`super::simulate_responses`]).
impl Generative for ProbitRegression {
    fn simulate(&self, seed: u64) -> Result<Simulated> {
        let (beta, data) =
            super::simulate_responses(&self.data, self.prior_variance, seed, normal_cdf);
        let mut posterior = Self::new(data, self.prior_variance)?;
        posterior.true_theta = Some(beta.clone());
        Ok(Simulated {
            truth: beta,
            posterior: Box::new(posterior),
        })
    }
}

/// `√(2/π)`.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// `(log Φ(t), φ(t)/Φ(t))`; the ratio is computed only if `MILLS` (0 otherwise).
#[inline]
fn log_cdf_and_mills<const MILLS: bool>(t: f64) -> (f64, f64) {
    if t < 0.0 {
        let scaled = erfcx(-t * std::f64::consts::FRAC_1_SQRT_2);
        let log_cdf = -0.5 * t * t + (0.5 * scaled).ln();
        (log_cdf, if MILLS { SQRT_2_OVER_PI / scaled } else { 0.0 })
    } else {
        let tail = 0.5 * (-0.5 * t * t).exp() * erfcx(t * std::f64::consts::FRAC_1_SQRT_2);
        let log_cdf = (-tail).ln_1p();
        let mills = if MILLS {
            (-0.5 * t * t).exp() / (2.0 * std::f64::consts::PI).sqrt() / (1.0 - tail)
        } else {
            0.0
        };
        (log_cdf, mills)
    }
}

/// `Φ(t)`, for the simulation.
fn normal_cdf(t: f64) -> f64 {
    let scaled = erfcx(t.abs() * std::f64::consts::FRAC_1_SQRT_2);
    let tail = 0.5 * (-0.5 * t * t).exp() * scaled;
    if t < 0.0 { tail } else { 1.0 - tail }
}

/// `p(x)` by Horner's rule, coefficients from the highest degree down.
#[inline]
fn horner(coefficients: &[f64], x: f64) -> f64 {
    coefficients.iter().fold(0.0, |acc, &c| acc * x + c)
}

/// The scaled complementary error function `e^{x²} erfc(x)` for `x ≥ 0` (Cody 1969).
///
/// Three rational approximations: for `x ≤ 0.46875`, `erf(x) = x R₁(x²)` and
/// `erfcx = e^{x²}(1 − erf)`; for `x ≤ 4`, `erfcx = R₂(x)`; beyond, `erfcx =
/// (1/√π − R₃(1/x²)/x²)/x`, which tends to `1/(√π x)` without underflow.
fn erfcx(x: f64) -> f64 {
    debug_assert!(x >= 0.0 || x.is_nan(), "erfcx is evaluated at x ≥ 0 only");
    // Cody's coefficients, highest degree first.
    const ERF_NUM: [f64; 5] = [
        1.857_777_061_846_031_5e-1,
        3.161_123_743_870_565_5,
        1.138_641_541_510_501_6e2,
        3.774_852_376_853_02e2,
        3.209_377_589_138_469_4e3,
    ];
    const ERF_DEN: [f64; 5] = [
        1.0,
        2.360_129_095_234_412_2e1,
        2.440_246_379_344_441_7e2,
        1.282_616_526_077_372_3e3,
        2.844_236_833_439_171e3,
    ];
    const MID_NUM: [f64; 9] = [
        2.153_115_354_744_038_3e-8,
        5.641_884_969_886_701e-1,
        8.883_149_794_388_377,
        6.611_919_063_714_163e1,
        2.986_351_381_974_001e2,
        8.819_522_212_417_69e2,
        1.712_047_612_634_070_7e3,
        2.051_078_377_826_071_6e3,
        1.230_339_354_797_997_2e3,
    ];
    const MID_DEN: [f64; 9] = [
        1.0,
        1.574_492_611_070_983_5e1,
        1.176_939_508_913_125e2,
        5.371_811_018_620_099e2,
        1.621_389_574_566_690_3e3,
        3.290_799_235_733_459_7e3,
        4.362_619_090_143_247e3,
        3.439_367_674_143_721_6e3,
        1.230_339_354_803_749_5e3,
    ];
    const TAIL_NUM: [f64; 6] = [
        1.631_538_713_730_209_7e-2,
        3.053_266_349_612_323_6e-1,
        3.603_448_999_498_044_5e-1,
        1.257_817_261_112_292_6e-1,
        1.608_378_514_874_227_5e-2,
        6.587_491_615_298_378e-4,
    ];
    const TAIL_DEN: [f64; 6] = [
        1.0,
        2.568_520_192_289_822,
        1.872_952_849_923_460_4,
        5.279_051_029_514_285e-1,
        6.051_834_131_244_132e-2,
        2.335_204_976_268_691_8e-3,
    ];
    const FRAC_1_SQRT_PI: f64 = 0.564_189_583_547_756_3;
    if x <= 0.468_75 {
        let w = x * x;
        let erf = x * horner(&ERF_NUM, w) / horner(&ERF_DEN, w);
        w.exp() * (1.0 - erf)
    } else if x <= 4.0 {
        horner(&MID_NUM, x) / horner(&MID_DEN, x)
    } else {
        let w = 1.0 / (x * x);
        (FRAC_1_SQRT_PI - w * horner(&TAIL_NUM, w) / horner(&TAIL_DEN, w)) / x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_gradient_is_the_full_gradient_in_parts() {
        let model = ProbitRegression::simulate(3000, 5, 4).unwrap();
        crate::row_sum::assert_rows_gradient_adds_up(&model, &[0.3, -0.2, 0.5, 0.1, -0.4]);
    }

    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs()
    }

    /// `erfc` values to 17 significant digits (mpmath at 30 digits).
    #[test]
    fn erfcx_matches_reference_erfc_values() {
        let cases = [
            (0.1, 0.887_537_083_981_715),
            (0.46875, 0.507_386_526_782_062),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_13),
            (2.0, 4.677_734_981_047_266e-3),
            (4.0, 1.541_725_790_028_002e-8),
            (5.0, 1.537_459_794_428_034_8e-12),
            (10.0, 2.088_487_583_762_545e-45),
        ];
        for (x, erfc) in cases {
            let got = erfcx(x) * (-x * x).exp();
            assert!(rel(got, erfc) < 1e-14, "erfc({x}) = {got}, want {erfc}");
        }
        // Far out erfcx(x) = 1/(√π x) · (1 − 1/(2x²) + 3/(4x⁴) − …).
        let x = 1e3;
        let w = 1.0 / (2.0 * x * x);
        let series = (1.0 - w + 3.0 * w * w) / (std::f64::consts::PI.sqrt() * x);
        assert!(rel(erfcx(x), series) < 1e-15);
        assert!(erfcx(1e300) > 0.0);
    }

    #[test]
    fn log_cdf_and_mills_ratio_are_accurate_in_both_tails() {
        // (t, log Φ(t), φ(t)/Φ(t)) from mpmath at 40 digits.
        let cases = [
            (-1e4, -50_000_010.129_278_91, 10_000.000_099_999_998),
            (-200.0, -20_006.217_280_898_19, 200.004_999_750_031_24),
            (-40.0, -804.608_442_013_753_8, 40.024_968_847_207_26),
            (-3.0, -6.607_726_221_510_349, 3.283_098_654_930_436_5),
            (-0.5, -1.175_911_761_593_618_6, 1.141_077_770_368_064_5),
            (1.0, -0.172_753_779_023_449_9, 0.287_599_970_939_178_4),
            (3.0, -1.350_809_964_748_193_8e-3, 4.437_839_042_125_664e-3),
            (8.0, -6.220_960_574_271_786e-16, 5.052_271_083_536_895e-15),
        ];
        for (t, want_log, want_mills) in cases {
            let (log_cdf, mills) = log_cdf_and_mills::<true>(t);
            assert!(
                rel(log_cdf, want_log) < 1e-14,
                "log Φ({t}) = {log_cdf}, want {want_log}"
            );
            assert!(
                rel(mills, want_mills) < 1e-14,
                "λ({t}) = {mills}, want {want_mills}"
            );
            assert_eq!(log_cdf_and_mills::<false>(t).0, log_cdf);
        }
        assert_eq!(log_cdf_and_mills::<true>(60.0), (0.0, 0.0));
        assert!(log_cdf_and_mills::<true>(-1e200).0 == f64::NEG_INFINITY);
    }

    #[test]
    fn log_cdf_and_mills_are_continuous_across_the_branches() {
        // t = 0 (sign switch) and |t| = 0.46875·√2, 4·√2 (Cody's interval ends).
        for edge in [
            0.0,
            0.468_75 * std::f64::consts::SQRT_2,
            4.0 * std::f64::consts::SQRT_2,
        ] {
            for t in [edge, -edge] {
                let below = log_cdf_and_mills::<true>(t - 1e-12);
                let above = log_cdf_and_mills::<true>(t + 1e-12);
                assert!(
                    rel(below.0, above.0) < 1e-10,
                    "log Φ jumps at {t}: {below:?} {above:?}"
                );
                assert!(
                    rel(below.1, above.1) < 1e-10,
                    "λ jumps at {t}: {below:?} {above:?}"
                );
            }
        }
    }

    fn small_model(scale: f64) -> ProbitRegression {
        let (n, d) = (60, 4);
        let mut rng = Pcg64::seed_from_u64(9);
        let mut x = vec![0.0; n * d];
        fill_standard_normal(&mut rng, &mut x);
        x.iter_mut().for_each(|v| *v *= scale);
        let y = (0..n)
            .map(|_| if uniform(&mut rng) < 0.5 { 1.0 } else { 0.0 })
            .collect();
        let data = Dataset::new(x, y, n, d, indexed_names("x", d)).unwrap();
        ProbitRegression::new(data, 3.0).unwrap()
    }

    #[test]
    fn gradient_matches_central_differences_including_large_z() {
        // Random labels: about half the |t| are far in the left tail when the scale is large.
        for (scale, theta) in [
            (1.0, vec![0.3, -0.2, 0.5, 0.1]),
            (1.0, vec![2.0, -1.5, 1.0, 3.0]),
            (30.0, vec![0.8, -1.1, 0.4, 0.9]),
        ] {
            let model = small_model(scale);
            let largest = (0..model.data.n)
                .map(|i| dot(model.data.row(i), &theta).abs())
                .fold(0.0, f64::max);
            let mut grad = vec![0.0; 4];
            let u = model.value_and_gradient(&theta, &mut grad);
            assert!(u.is_finite() && grad.iter().all(|g| g.is_finite()));
            for j in 0..4 {
                let h = 1e-6 * (1.0 + theta[j].abs());
                let (mut plus, mut minus) = (theta.clone(), theta.clone());
                plus[j] += h;
                minus[j] -= h;
                let fd = (model.value(&plus) - model.value(&minus)) / (2.0 * h);
                assert!(
                    (fd - grad[j]).abs() < 1e-6 * (1.0 + grad[j].abs()),
                    "scale {scale} (max |z| {largest:.0}), coordinate {j}: finite difference \
                     {fd}, gradient {}",
                    grad[j]
                );
            }
            if scale > 1.0 {
                assert!(
                    largest > 100.0,
                    "the test must reach the far tails: {largest}"
                );
            }
        }
    }

    #[test]
    fn value_and_gradient_value_equals_value() {
        let model = small_model(5.0);
        let theta = [0.4, -0.7, 1.2, 0.05];
        let mut grad = [0.0; 4];
        let fused = model.value_and_gradient(&theta, &mut grad);
        assert_eq!(fused.to_bits(), model.value(&theta).to_bits());
    }

    #[test]
    fn simulation_follows_the_documented_design() {
        let model = ProbitRegression::simulate(10_000, 5, 11).unwrap();
        let again = ProbitRegression::simulate(10_000, 5, 11).unwrap();
        assert_eq!(model.data(), again.data());
        let data = model.data();
        assert_eq!((data.n, data.p, model.dim()), (10_000, 5, 5));
        let theta = model.true_theta().unwrap();
        // E[y] = E Φ(xᵢ·θ): the observed rate against the mean probability.
        let p_mean = (0..data.n)
            .map(|i| normal_cdf(dot(data.row(i), theta)))
            .sum::<f64>()
            / data.n as f64;
        let rate = data.positives() as f64 / data.n as f64;
        assert!((rate - p_mean).abs() < 4.0 * (0.25 / data.n as f64).sqrt());
        let sd = (data.x.iter().map(|v| v * v).sum::<f64>() / data.x.len() as f64).sqrt();
        assert!((sd - 1.0).abs() < 0.02, "sd of X {sd}");
        // The posterior mode is near the truth: the gradient there is small next to N.
        let mut grad = vec![0.0; 5];
        model.value_and_gradient(theta, &mut grad);
        let mut at_zero = vec![0.0; 5];
        model.value_and_gradient(&[0.0; 5], &mut at_zero);
        assert!(dot(&grad, &grad) < 0.01 * dot(&at_zero, &at_zero));
        assert_eq!(model.parameter_names()[4], "theta.5");
    }

    #[test]
    fn constructors_reject_bad_settings() {
        let data = small_model(1.0).data;
        assert!(ProbitRegression::new(data.clone(), 0.0).is_err());
        assert!(ProbitRegression::new(data, f64::NAN).is_err());
        assert!(ProbitRegression::simulate(0, 5, 1).is_err());
        assert!(ProbitRegression::simulate(10, 0, 1).is_err());
    }
}
