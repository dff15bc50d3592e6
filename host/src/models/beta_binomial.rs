//! The beta-binomial overdispersion model of the VHMC paper's first experiment (section 4.1), taken
//! from Albert, *Bayesian Computation with R* (2nd ed., Springer 2009), chapter 5.
//!
//! City `j` reports `y_j` deaths among `n_j` people at risk, and
//! `y_j ~ BetaBinomial(n_j, K, η)`: `p(y_j | η, K) = C(n_j, y_j) B(Kη + y_j, K(1−η) + n_j − y_j) /
//! B(Kη, K(1−η))`, with mean rate `η` and precision `K`. The prior is Albert's improper
//! `p(η, K) ∝ 1/(η(1−η)) · 1/(1+K)²`.
//!
//! Sampling runs on `θ1 = logit η`, `θ2 = log K`. The Jacobian `η(1−η) · K` cancels the `η(1−η)`
//! of the prior, so `log p(θ) = Σ_j log f_j + θ2 − 2 log(1 + e^θ2) + const` (Albert's
//! `betabinexch`). The VHMC paper writes `x2 = logit(K)`, a slip: `K > 0` is unbounded above and
//! the book uses `log K`. `U = −log p` omits the constant `Σ_j log C(n_j, y_j)`.
//!
//! The counts are integers, so each beta-function ratio splits into gamma ratios:
//! `log B(a + y, b + r) − log B(a, b) = log (a)_y − [log Γ(K+n) − log Γ(b+r)] + [log Γ(K) − log Γ(b)]`
//! with `a = Kη`, `b = K(1−η)`, `r = n − y` and `(x)_m = Γ(x+m)/Γ(x)`. Each bracket is a gamma
//! ratio over the small side's share (`a + y`, `a`), so two `log Γ` values of size 10⁵ (one city
//! has `n = 53 637`) are never subtracted: `U` and `∇U` agree with a 40-digit evaluation to
//! about 1e-14 relative.
//! Short rising factorials are summed term by term; the rest use the Stirling series of the
//! *difference* `log Γ(x+m) − log Γ(x)` written with `ln_1p` (and `ψ` likewise), shifted up by
//! the recurrence below argument 10. No special-function library is needed. Cost: O(number of
//! cities).
//!
//! The default data are the 20-city stomach-cancer counts of Missouri (Albert's data set
//! `cancermortality`, R package LearnBayes), [`CANCER_MORTALITY_Y`] and [`CANCER_MORTALITY_N`].

use rand::SeedableRng;
use rand_distr::{Beta, Binomial, Distribution};
use rand_pcg::Pcg64;
use shmc_core::Potential;
use shmc_core::random::uniform_open;

use super::ModelEntry;
use crate::model::{Generative, Simulated};
use crate::{Error, Model, Result};

/// The registry's entry: the 20 cities' cancer mortality, embedded.
pub const ENTRY: ModelEntry = ModelEntry {
    name: "beta-binomial",
    description: "beta-binomial overdispersion, 20-city cancer mortality (VHMC paper; Albert ch. 5)",
    parameters: "logit_eta, log_K",
    options: &[],
    build: |_| Ok(Box::new(BetaBinomial::cancer_mortality())),
    small: Some(|_| "20 cities"),
};

/// Deaths from stomach cancer `y_j` in the 20 largest cities of Missouri: the `y` column of
/// `cancermortality` (Albert 2009, R package LearnBayes), in the package's order.
pub const CANCER_MORTALITY_Y: [u64; 20] =
    [0, 0, 2, 0, 1, 1, 0, 2, 1, 3, 0, 1, 1, 1, 54, 0, 0, 1, 3, 0];

/// People at risk `n_j` in the same 20 cities: the `n` column of `cancermortality`.
pub const CANCER_MORTALITY_N: [u64; 20] = [
    1083, 855, 3461, 657, 1208, 1025, 527, 1668, 583, 582, 917, 857, 680, 917, 53637, 874, 395,
    581, 588, 383,
];

/// Rising factorials with at most this many terms are summed term by term.
const DIRECT_TERMS: u64 = 16;

/// The Stirling series is used from this argument up; smaller arguments are shifted up by the
/// recurrence `Γ(x+1) = x Γ(x)`. At 10 the series truncated after its `B₁₆` term errs by < 1e-17.
const STIRLING_MIN: f64 = 10.0;

/// The prior on the mean rate `η` (the prior on `K`, `1/(1+K)²`, is proper and always the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RatePrior {
    /// Albert's improper `1/(η(1−η))`, flat in `logit η`: the paper's model, which has no
    /// generative form (no prior to draw `η` from).
    Albert,
    /// `η ~ Uniform(0, 1)`, density `η(1−η)` in `logit η`: a proper prior, the one
    /// [`Generative::simulate`] draws from and gives its posteriors.
    Uniform,
}

/// The beta-binomial posterior on `(logit η, log K)`.
#[derive(Clone, Debug)]
pub struct BetaBinomial {
    /// Deaths per city.
    y: Vec<u64>,
    /// People at risk per city.
    n: Vec<u64>,
    /// The prior on `η`.
    rate_prior: RatePrior,
}

impl BetaBinomial {
    /// The model for counts `y_j` out of `n_j`. Fails unless both vectors have the same,
    /// non-zero length and every `y_j ≤ n_j`.
    pub fn new(y: Vec<u64>, n: Vec<u64>) -> Result<Self> {
        if y.is_empty() {
            return Err(Error::invalid(
                "beta-binomial model needs at least one group",
            ));
        }
        if y.len() != n.len() {
            return Err(Error::invalid(format!(
                "beta-binomial model: {} counts y but {} sizes n",
                y.len(),
                n.len()
            )));
        }
        if let Some(j) = y.iter().zip(&n).position(|(y, n)| y > n) {
            return Err(Error::invalid(format!(
                "beta-binomial model: group {} has y = {} > n = {}",
                j + 1,
                y[j],
                n[j]
            )));
        }
        Ok(Self {
            y,
            n,
            rate_prior: RatePrior::Albert,
        })
    }

    /// The model on Albert's 20-city cancer-mortality data.
    pub fn cancer_mortality() -> Self {
        Self {
            y: CANCER_MORTALITY_Y.to_vec(),
            n: CANCER_MORTALITY_N.to_vec(),
            rate_prior: RatePrior::Albert,
        }
    }

    /// The same counts with the prior `rate_prior` on `η`.
    pub fn with_rate_prior(self, rate_prior: RatePrior) -> Self {
        Self { rate_prior, ..self }
    }
}

impl Default for BetaBinomial {
    /// [`BetaBinomial::cancer_mortality`].
    fn default() -> Self {
        Self::cancer_mortality()
    }
}

impl Potential for BetaBinomial {
    fn dim(&self) -> usize {
        2
    }

    fn value(&self, q: &[f64]) -> f64 {
        let mut grad = [0.0; 2];
        self.value_and_gradient(q, &mut grad)
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let (t1, t2) = (q[0], q[1]);
        // η and 1 − η without cancellation on either side.
        let (eta, one_minus_eta) = if t1 >= 0.0 {
            let e = (-t1).exp();
            (1.0 / (1.0 + e), e / (1.0 + e))
        } else {
            let e = t1.exp();
            (e / (1.0 + e), 1.0 / (1.0 + e))
        };
        let k = t2.exp();
        let (a, b) = (k * eta, k * one_minus_eta);

        let mut log_lik = 0.0;
        // ∂/∂a and ∂/∂b of Σ_j log f_j.
        let (mut da, mut db) = (0.0, 0.0);
        for (&y, &n) in self.y.iter().zip(&self.n) {
            let (value, d_a, d_b) = ln_beta_binomial_ratio(a, y, b, n - y);
            log_lik += value;
            da += d_a;
            db += d_b;
        }
        // log(K / (1+K)²) = θ2 − 2 softplus(θ2); its derivative is 1 − 2σ(θ2) = −tanh(θ2/2).
        let softplus = t2.max(0.0) + (-t2.abs()).exp().ln_1p();
        let log_prior = t2 - 2.0 * softplus;

        // a = K η, b = K (1−η): ∂a/∂θ1 = −∂b/∂θ1 = K η (1−η); ∂a/∂θ2 = a, ∂b/∂θ2 = b.
        grad[0] = -(a * one_minus_eta * (da - db));
        grad[1] = -(a * da + b * db - (0.5 * t2).tanh());
        // The uniform prior's log η(1−η) = −(softplus(θ1) + softplus(−θ1)), slope 1 − 2η.
        let log_rate_prior = match self.rate_prior {
            RatePrior::Albert => 0.0,
            RatePrior::Uniform => {
                grad[0] -= one_minus_eta - eta;
                -(t1.abs() + 2.0 * (-t1.abs()).exp().ln_1p())
            }
        };
        -(log_lik + log_prior + log_rate_prior)
    }
}

impl Model for BetaBinomial {
    fn parameter_names(&self) -> Vec<String> {
        vec!["logit_eta".into(), "log_K".into()]
    }

    fn generative(&self) -> Option<&dyn Generative> {
        Some(self)
    }
}

/// With the proper [`RatePrior::Uniform`] whatever this model's prior (Albert's has nothing to
/// draw `η` from): `η ~ U(0, 1)`, `K ~ 1/(1+K)²` (`K = V/(1−V)`, `V ~ U(0, 1)`), then per group
/// of this model's sizes `n_j`, `p_j ~ Beta(Kη, K(1−η))` and `y_j ~ Binomial(n_j, p_j)`. From
/// the stream, in order: `η`, `V`, then each group's `p_j` and `y_j`.
impl Generative for BetaBinomial {
    fn simulate(&self, seed: u64) -> Result<Simulated> {
        let mut rng = Pcg64::seed_from_u64(seed);
        let (eta, v) = (uniform_open(&mut rng), uniform_open(&mut rng));
        let k = v / (1.0 - v);
        let beta = Beta::new(k * eta, k * (1.0 - eta))
            .map_err(|e| Error::invalid(format!("beta-binomial simulation: {e}")))?;
        let y = self
            .n
            .iter()
            .map(|&n| {
                let p = beta.sample(&mut rng).clamp(0.0, 1.0);
                Binomial::new(n, p)
                    .map(|binomial| binomial.sample(&mut rng))
                    .map_err(|e| Error::invalid(format!("beta-binomial simulation: {e}")))
            })
            .collect::<Result<Vec<u64>>>()?;
        Ok(Simulated {
            truth: vec![(eta / (1.0 - eta)).ln(), (v / (1.0 - v)).ln()],
            posterior: Box::new(Self {
                y,
                n: self.n.clone(),
                rate_prior: RatePrior::Uniform,
            }),
        })
    }
}

/// `log B(a + y, b + r) − log B(a, b)` for `a, b > 0` and counts `y, r`, with its partial
/// derivatives in `a` and `b`.
///
/// Two exact rewritings, chosen by which cancels less. With `K = a + b`, `n = y + r` and `(s, c)`
/// the side with the smaller `a + y` or `b + r`, `(l, lc)` the other:
/// - `log (s)_c − [log Γ(K+n) − log Γ(l+lc)] + [log Γ(K) − log Γ(l)]`: gamma ratios shifted by
///   the small side's share, so its terms are of size `(s + c)·log K`. Near the posterior's
///   bulk (`a = Kη` of a few units) that is tiny and the value is accurate to 10⁻¹⁴.
/// - `log (a)_y + log (b)_r − log (K)_n`: rising factorials over the data's counts, terms of size
///   `n·log K` whatever `K` is. Used once `s + c > n`, where the first form would cancel terms
///   of size `K` (the binomial limit the posterior's `log K` tail reaches).
fn ln_beta_binomial_ratio(a: f64, y: u64, b: f64, r: u64) -> (f64, f64, f64) {
    let swap = a + y as f64 > b + r as f64;
    let ((s, c), (l, lc)) = if swap {
        ((b, r), (a, y))
    } else {
        ((a, y), (b, r))
    };
    if s + c as f64 > (y + r) as f64 {
        let (va, sa) = ln_rising(a, y);
        let (vb, sb) = ln_rising(b, r);
        let (vk, sk) = ln_rising(a + b, y + r);
        return (va + vb - vk, sa - sk, sb - sk);
    }
    let (v1, s1) = ln_rising(s, c);
    let (v2, x2, m2) = ln_gamma_ratio(l + lc as f64, s + c as f64);
    let (v3, x3, m3) = ln_gamma_ratio(l, s);
    let value = v1 - v2 + v3;
    let d_small = s1 - m2 + m3;
    let d_large = x3 - x2;
    if swap {
        (value, d_large, d_small)
    } else {
        (value, d_small, d_large)
    }
}

/// `(log (x)_m, d/dx log (x)_m)` for `x > 0`, where `(x)_m = Γ(x+m)/Γ(x) = x (x+1) ⋯ (x+m−1)`:
/// that is `log Γ(x+m) − log Γ(x)` and `ψ(x+m) − ψ(x)`.
fn ln_rising(x: f64, m: u64) -> (f64, f64) {
    if m > DIRECT_TERMS {
        let (value, dx, _) = ln_gamma_ratio(x, m as f64);
        return (value, dx);
    }
    let (mut value, mut slope) = (0.0, 0.0);
    for i in 0..m {
        let xi = x + i as f64;
        value += xi.ln();
        slope += xi.recip();
    }
    (value, slope)
}

/// `(log Γ(x+m) − log Γ(x), ψ(x+m) − ψ(x), ψ(x+m))` for `x > 0` and real `m ≥ 0`: the log
/// gamma ratio and its partial derivatives in `x` and `m`.
fn ln_gamma_ratio(x: f64, m: f64) -> (f64, f64, f64) {
    let (mut value, mut dx, mut dm) = (0.0, 0.0, 0.0);
    // Shift into the Stirling range with Γ(x+1) = x Γ(x) applied to both arguments.
    let mut x = x;
    while x < STIRLING_MIN {
        let z = x + m;
        value -= (m / x).ln_1p();
        dx += x.recip() - z.recip();
        dm -= z.recip();
        x += 1.0;
    }
    // log Γ(z) = (z − ½) log z − z + ½ log 2π + S(z) and ψ(z) = log z − 1/(2z) − T(z); for
    // z = x + m the differences are, with log(z/x) = ln_1p(m/x):
    let z = x + m;
    let log_ratio = (m / x).ln_1p();
    let log_z = z.ln();
    value += (x - 0.5) * log_ratio + m * (log_z - 1.0) + stirling_tail(z) - stirling_tail(x);
    dx += log_ratio - 0.5 / z + 0.5 / x - digamma_tail(z) + digamma_tail(x);
    dm += log_z - 0.5 / z - digamma_tail(z);
    (value, dx, dm)
}

/// `S(z) = Σ_{k=1..8} B_{2k} / (2k (2k−1) z^{2k−1})`, the tail of Stirling's series for
/// `log Γ(z)`, for `z ≥ 10`.
fn stirling_tail(z: f64) -> f64 {
    let w = (z * z).recip();
    let s = 1.0 / 12.0
        + w * (-1.0 / 360.0
            + w * (1.0 / 1260.0
                + w * (-1.0 / 1680.0
                    + w * (1.0 / 1188.0
                        + w * (-691.0 / 360_360.0
                            + w * (1.0 / 156.0 + w * (-3617.0 / 122_400.0)))))));
    s / z
}

/// `T(z) = Σ_{k=1..8} B_{2k} / (2k z^{2k})`, the tail of the asymptotic series for `ψ(z)`, for
/// `z ≥ 10`.
fn digamma_tail(z: f64) -> f64 {
    let w = (z * z).recip();
    w * (1.0 / 12.0
        + w * (-1.0 / 120.0
            + w * (1.0 / 252.0
                + w * (-1.0 / 240.0
                    + w * (1.0 / 132.0
                        + w * (-691.0 / 32_760.0 + w * (1.0 / 12.0 + w * (-3617.0 / 8160.0))))))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Central differences with step `H` are accurate to O(H²) ≈ 1e-10 relative here.
    const H: f64 = 1e-5;
    /// Relative tolerance for gradients against central differences.
    const FD_TOL: f64 = 1e-6;

    fn points() -> [[f64; 2]; 4] {
        [[-6.8, 7.6], [-7.5, 5.0], [-5.0, 10.0], [-2.0, 1.0]]
    }

    /// `log Γ(x)` for `x ≥ ½` by Lanczos' approximation (g = 7, 9 terms): a method independent
    /// of the Stirling series above, accurate to about 1e-15 relative.
    fn lanczos_ln_gamma(x: f64) -> f64 {
        const C: [f64; 9] = [
            0.9999999999998099,
            676.5203681218851,
            -1259.1392167224028,
            771.3234287776531,
            -176.6150291621406,
            12.507343278686905,
            -0.13857109526572012,
            9.984369578019572e-6,
            1.5056327351493116e-7,
        ];
        assert!(x >= 0.5);
        let x = x - 1.0;
        let mut sum = C[0];
        for (i, c) in C.iter().enumerate().skip(1) {
            sum += c / (x + i as f64);
        }
        let t = x + 7.5;
        0.5 * std::f64::consts::TAU.ln() + (x + 0.5) * t.ln() - t + sum.ln()
    }

    /// Reference values of `log Γ` and `ψ` computed with mpmath at 30 digits.
    const REFERENCE: [(f64, f64, f64); 11] = [
        (0.001, 6.907178885383853, -1000.5755719318103),
        (0.5, 0.5723649429247001, -1.9635100260214235),
        (1.0, 0.0, -0.5772156649015329),
        (1.5, -0.12078223763524522, 0.03648997397857652),
        (2.0, 0.0, 0.42278433509846713),
        (3.7, 1.4280723266653879, 1.1671535393615113),
        (9.99, 12.779315214350193, 2.250700372831201),
        (10.0, 12.801827480081469, 2.251752589066721),
        (25.3, 55.74618118358459, 3.210911380182536),
        (1000.0, 5905.220423209181, 6.907255195648812),
        (53637.5, 530470.5489685391, 10.889994407434413),
    ];

    /// `|got − want| ≤ 1e-12 · max(|want|, 1)`.
    fn assert_close(got: f64, want: f64, what: &str) {
        assert!(
            (got - want).abs() <= 1e-12 * want.abs().max(1.0),
            "{what}: {got} vs {want}"
        );
    }

    /// As `log K → ∞` the beta-binomial tends to the binomial: `U` must approach the binomial
    /// potential plus the prior's `log K` slope, not lose the likelihood to cancellation.
    #[test]
    fn large_k_tends_to_the_binomial_limit() {
        let model = BetaBinomial::cancer_mortality();
        let eta: f64 = 0.001;
        let t1 = (eta / (1.0 - eta)).ln();
        let binomial: f64 = CANCER_MORTALITY_Y
            .iter()
            .zip(&CANCER_MORTALITY_N)
            .map(|(&y, &n)| -(y as f64 * eta.ln() + (n - y) as f64 * (1.0 - eta).ln()))
            .sum();
        for t2 in [20.0, 40.0, 60.0, 200.0] {
            let mut g = [0.0; 2];
            let u = model.value_and_gradient(&[t1, t2], &mut g);
            // Prior: −(θ2 − 2 softplus(θ2)) → θ2; the likelihood's correction is O(n²/K).
            let expected = binomial + t2;
            assert!(
                (u - expected).abs() < 1e-6 * expected,
                "θ2 = {t2}: U {u} vs {expected}"
            );
            assert!((g[1] - 1.0).abs() < 1e-3, "θ2 = {t2}: ∂U/∂θ2 = {}", g[1]);
        }
    }

    #[test]
    fn gamma_ratio_matches_reference_log_gamma_and_digamma() {
        // Every pair x ≤ z of reference arguments, m = z − x (m = 0 checks ψ(x) itself), covering
        // the shifted and unshifted Stirling paths and, for integer m, the direct sums.
        let mut integer_pairs = 0;
        for &(x, lg_x, psi_x) in &REFERENCE {
            for &(z, lg_z, psi_z) in &REFERENCE {
                if z < x {
                    continue;
                }
                let m = z - x;
                let (v, dx, dm) = ln_gamma_ratio(x, m);
                assert_close(v, lg_z - lg_x, &format!("log Γ({z}) − log Γ({x})"));
                assert_close(dx, psi_z - psi_x, &format!("ψ({z}) − ψ({x})"));
                assert_close(dm, psi_z, &format!("ψ({z})"));
                if m.fract() == 0.0 {
                    let (v, s) = ln_rising(x, m as u64);
                    assert_close(v, lg_z - lg_x, &format!("log ({x})_{m}"));
                    assert_close(s, psi_z - psi_x, &format!("slope of log ({x})_{m}"));
                    integer_pairs += 1;
                }
            }
        }
        assert!(integer_pairs >= 15, "only {integer_pairs} integer pairs");
    }

    #[test]
    fn ln_rising_stirling_branch_matches_direct_sums() {
        for &x in &[1e-3, 0.37, 2.0, 9.5, 10.0, 123.4, 2.0e4] {
            for &m in &[17u64, 40, 1000, 53637] {
                let (mut v_ref, mut s_ref) = (0.0, 0.0);
                for i in 0..m {
                    v_ref += (x + i as f64).ln();
                    s_ref += (x + i as f64).recip();
                }
                let (v, s) = ln_rising(x, m);
                assert_close(v, v_ref, &format!("log ({x})_{m}"));
                assert_close(s, s_ref, &format!("slope of log ({x})_{m}"));
            }
        }
    }

    #[test]
    fn lanczos_reference_is_accurate() {
        for &(x, lg, _) in REFERENCE.iter().filter(|r| r.0 >= 0.5) {
            let got = lanczos_ln_gamma(x);
            assert!(
                (got - lg).abs() <= 1e-13 * lg.abs().max(1.0),
                "{x}: {got} vs {lg}"
            );
        }
    }

    #[test]
    fn potential_matches_direct_lgamma_formula() {
        // −[Σ_j log B(Kη + y_j, K(1−η) + n_j − y_j) − log B(Kη, K(1−η))] − θ2 + 2 log(1 + e^θ2)
        let model = BetaBinomial::cancer_mortality();
        let ln_beta =
            |a: f64, b: f64| lanczos_ln_gamma(a) + lanczos_ln_gamma(b) - lanczos_ln_gamma(a + b);
        // Points keep Kη ≥ ½, where the Lanczos reference is valid.
        for &[t1, t2] in &[[-6.8_f64, 7.6_f64], [-5.0, 8.0], [-3.0, 5.0], [-1.0, 2.0]] {
            let eta = 1.0 / (1.0 + (-t1).exp());
            let k = t2.exp();
            let mut log_p = t2 - 2.0 * t2.exp().ln_1p();
            let mut scale = 0.0;
            for (&y, &n) in CANCER_MORTALITY_Y.iter().zip(&CANCER_MORTALITY_N) {
                let (y, n) = (y as f64, n as f64);
                let top = ln_beta(k * eta + y, k * (1.0 - eta) + n - y);
                let bottom = ln_beta(k * eta, k * (1.0 - eta));
                log_p += top - bottom;
                scale += lanczos_ln_gamma(k + n).abs();
            }
            let u = model.value(&[t1, t2]);
            // The direct formula cancels terms of size `scale`; allow 1e-14 of that.
            assert!(
                (u + log_p).abs() <= 1e-14 * scale,
                "θ = ({t1}, {t2}): U = {u}, direct = {}",
                -log_p
            );
        }
    }

    #[test]
    fn potential_and_gradient_match_high_precision_reference() {
        // (θ, U, ∂U/∂θ1, ∂U/∂θ2) on the cancer data from mpmath at 40 digits (log of its beta
        // function, derivatives by central differences with step 1e-20).
        const CASES: [([f64; 2], f64, f64, f64); 4] = [
            (
                [-6.8, 7.6],
                571.3802086425628,
                0.3512273343907919,
                0.057321226149586,
            ),
            (
                [-5.0, 10.0],
                722.4432333613585,
                234.31577605791085,
                50.8022442822845,
            ),
            (
                [-2.0, 1.0],
                594.9156810864355,
                22.849411709803313,
                18.060522839519198,
            ),
            (
                [-7.5, 3.0],
                600.8209875544658,
                -11.221233295346096,
                -10.11339398586771,
            ),
        ];
        let model = BetaBinomial::cancer_mortality();
        for (q, u, g1, g2) in CASES {
            let mut grad = [0.0; 2];
            let value = model.value_and_gradient(&q, &mut grad);
            assert!((value - u).abs() <= 1e-13 * u, "U({q:?}) = {value} vs {u}");
            for (got, want) in grad.into_iter().zip([g1, g2]) {
                assert!(
                    (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                    "∇U({q:?}): {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn albert_posterior_mode_is_stationary() {
        // Albert (2009), section 5.4: laplace(betabinexch, c(-7, 6), cancermortality) gives the
        // mode (−6.819793, 7.576111), found by Nelder–Mead (R's optim default), which stops
        // about 1e-3 short of the mode: the gradient there is small but not zero.
        let model = BetaBinomial::cancer_mortality();
        let mut grad = [0.0; 2];
        model.value_and_gradient(&[-6.819793, 7.576111], &mut grad);
        assert!(grad.iter().all(|g| g.abs() < 0.05), "gradient {grad:?}");
        // …and it is not stationary a little way off.
        model.value_and_gradient(&[-6.7, 7.576111], &mut grad);
        assert!(grad[0].abs() > 1.0, "gradient {grad:?}");
    }

    #[test]
    fn gradient_matches_central_differences() {
        for prior in [RatePrior::Albert, RatePrior::Uniform] {
            let model = BetaBinomial::cancer_mortality().with_rate_prior(prior);
            for q in points() {
                crate::models::fd_check::assert_gradient_matches_central_differences(
                    &model, &q, H, FD_TOL,
                );
            }
        }
    }

    #[test]
    fn uniform_rate_prior_adds_log_eta_one_minus_eta() {
        let albert = BetaBinomial::cancer_mortality();
        let uniform = albert.clone().with_rate_prior(RatePrior::Uniform);
        for q in points() {
            let eta = 1.0 / (1.0 + (-q[0]).exp());
            let want = albert.value(&q) - (eta * (1.0 - eta)).ln();
            assert!((uniform.value(&q) - want).abs() <= 1e-12 * want.abs().max(1.0));
        }
    }

    #[test]
    fn simulated_counts_fit_their_groups_and_repeat() {
        let base = BetaBinomial::cancer_mortality();
        let a = base.simulate(3).unwrap();
        let b = base.simulate(3).unwrap();
        assert_eq!(a.truth, b.truth);
        let mut grad = [0.0; 2];
        let u = a.posterior.value_and_gradient(&a.truth, &mut grad);
        assert_eq!(u, b.posterior.value(&a.truth));
        assert!(u.is_finite() && grad.iter().all(|g| g.is_finite()));
    }

    #[test]
    fn value_and_gradient_value_equals_value() {
        let model = BetaBinomial::new(vec![3, 0, 7], vec![10, 4, 40]).unwrap();
        for q in points() {
            let mut grad = [0.0; 2];
            assert_eq!(model.value_and_gradient(&q, &mut grad), model.value(&q));
            assert!(grad.iter().all(|g| g.is_finite()));
        }
    }

    #[test]
    fn constructor_validates() {
        assert!(BetaBinomial::new(vec![], vec![]).is_err());
        assert!(BetaBinomial::new(vec![1, 2], vec![3]).is_err());
        assert!(BetaBinomial::new(vec![4], vec![3]).is_err());
        assert!(BetaBinomial::new(vec![3], vec![3]).is_ok());
        let names = BetaBinomial::default().parameter_names();
        assert_eq!(names, ["logit_eta", "log_K"]);
    }
}
