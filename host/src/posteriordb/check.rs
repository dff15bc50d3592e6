//! A sampler's draws against a posterior's reference draws, parameter by parameter, by the
//! rules a reader of posteriordb's comparisons expects: the mean within [`Z`] combined Monte
//! Carlo standard errors of the reference's, the sd within [`Z`] standard errors of its noise,
//! split R̂ at most [`RHAT`], bulk and tail ESS at least [`ESS`].

use serde::Serialize;

use super::Reference;
use crate::diagnostics::ParameterSummary;

/// How many combined standard errors a mean or an sd may be off.
pub const Z: f64 = 4.0;

/// The largest split R̂ of a converged run.
pub const RHAT: f64 = 1.01;

/// The smallest bulk and tail ESS of a usable run (CmdStan's rule of thumb).
pub const ESS: f64 = 400.0;

/// One parameter's comparison.
#[derive(Clone, Debug, Serialize)]
pub struct ParameterCheck {
    /// The parameter (CmdStan's name).
    pub name: String,
    /// The draws' mean.
    pub mean: f64,
    /// The reference's mean.
    pub reference_mean: f64,
    /// How far the means are apart, in combined Monte Carlo standard errors.
    pub z: f64,
    /// The draws' sd over the reference's.
    pub sd_ratio: f64,
    /// How far the log of the sd ratio is from 0, in its standard errors.
    pub sd_z: f64,
    /// Split R̂ of the draws.
    pub rhat: f64,
    /// Bulk ESS of the draws.
    pub ess_bulk: f64,
    /// Tail ESS of the draws.
    pub ess_tail: f64,
    /// The rules the draws break: `missing` (no draws of this parameter), `mean`, `sd`,
    /// `rhat`, `ess_bulk`, `ess_tail`.
    pub failures: Vec<&'static str>,
}

/// Every parameter's comparison, in the draws' column order.
#[derive(Clone, Debug, Serialize)]
pub struct Checks {
    /// One per reference parameter.
    pub parameters: Vec<ParameterCheck>,
}

impl Checks {
    /// Whether every parameter passed every rule.
    pub fn passed(&self) -> bool {
        self.parameters.iter().all(|p| p.failures.is_empty())
    }

    /// The parameters that broke a rule.
    pub fn failed(&self) -> impl Iterator<Item = &ParameterCheck> {
        self.parameters.iter().filter(|p| !p.failures.is_empty())
    }

    /// The failed parameter furthest off (by the larger of its mean's and sd's deviation,
    /// then by R̂), for a one-line verdict.
    pub fn worst(&self) -> Option<&ParameterCheck> {
        let badness = |p: &ParameterCheck| (p.z.abs().max(p.sd_z.abs()), p.rhat);
        self.failed().max_by(|a, b| {
            badness(a)
                .partial_cmp(&badness(b))
                .unwrap_or(std::cmp::Ordering::Equal)
        })
    }

    /// The smallest bulk and tail ESS over the parameters.
    pub fn min_ess(&self) -> f64 {
        self.parameters
            .iter()
            .map(|p| p.ess_bulk.min(p.ess_tail))
            .fold(f64::INFINITY, f64::min)
    }

    /// The largest split R̂ over the parameters.
    pub fn max_rhat(&self) -> f64 {
        self.parameters
            .iter()
            .map(|p| p.rhat)
            .fold(f64::NAN, f64::max)
    }
}

/// The draws summarized in `summary` against `reference`, for each of the reference's
/// parameters (the draws' others — transformed parameters, generated quantities the reference
/// lacks — are not compared).
pub fn check(summary: &[ParameterSummary], reference: &Reference) -> Checks {
    let expected = reference.summary();
    let mut order: Vec<(usize, usize)> = (0..expected.len())
        .map(|r| {
            let at = summary.iter().position(|s| s.name == expected[r].name);
            (at.unwrap_or(usize::MAX), r)
        })
        .collect();
    order.sort_unstable();
    let parameters = order
        .into_iter()
        .map(|(at, r)| match summary.get(at) {
            Some(drawn) => compare(drawn, &expected[r], reference.kurtosis(r)),
            None => missing(&expected[r]),
        })
        .collect();
    Checks { parameters }
}

/// One parameter's rules; `kurtosis` is the reference's, which sets the sd's noise.
fn compare(drawn: &ParameterSummary, expected: &ParameterSummary, kurtosis: f64) -> ParameterCheck {
    let z = (drawn.mean - expected.mean) / drawn.mcse_mean.hypot(expected.mcse_mean);
    let sd_ratio = drawn.sd / expected.sd;
    // The variance of a log sd estimate from n independent draws is (kurtosis - 1) / (4 n);
    // the bulk ESS stands in for n.
    let excess = (kurtosis - 1.0).max(0.0) / 4.0;
    let sd_se = (excess * (1.0 / drawn.ess_bulk + 1.0 / expected.ess_bulk)).sqrt();
    let sd_z = sd_ratio.ln() / sd_se;
    let rules = [
        ("mean", z.abs() <= Z),
        ("sd", sd_z.abs() <= Z),
        ("rhat", drawn.rhat <= RHAT),
        ("ess_bulk", drawn.ess_bulk >= ESS),
        ("ess_tail", drawn.ess_tail >= ESS),
    ];
    ParameterCheck {
        name: drawn.name.clone(),
        mean: drawn.mean,
        reference_mean: expected.mean,
        z,
        sd_ratio,
        sd_z,
        rhat: drawn.rhat,
        ess_bulk: drawn.ess_bulk,
        ess_tail: drawn.ess_tail,
        // A NaN breaks its rule: each test above is false for it.
        failures: rules
            .iter()
            .filter(|(_, ok)| !ok)
            .map(|(rule, _)| *rule)
            .collect(),
    }
}

/// A reference parameter the draws do not have.
fn missing(expected: &ParameterSummary) -> ParameterCheck {
    ParameterCheck {
        name: expected.name.clone(),
        mean: f64::NAN,
        reference_mean: expected.mean,
        z: f64::NAN,
        sd_ratio: f64::NAN,
        sd_z: f64::NAN,
        rhat: f64::NAN,
        ess_bulk: f64::NAN,
        ess_tail: f64::NAN,
        failures: vec!["missing"],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::summarize;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    /// `chains` chains of `n` independent draws of N(mu, sd²), under the name `x`.
    fn normal_chains(chains: usize, n: usize, mu: f64, sd: f64, seed: u64) -> Vec<Vec<Vec<f64>>> {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
        (0..chains)
            .map(|_| {
                let draws = (0..n)
                    .map(|_| {
                        let z: f64 = StandardNormal.sample(&mut rng);
                        mu + sd * z
                    })
                    .collect();
                vec![draws]
            })
            .collect()
    }

    fn reference() -> Reference {
        Reference {
            names: vec!["x".into()],
            chains: normal_chains(10, 1000, 1.0, 2.0, 1),
        }
    }

    #[test]
    fn draws_of_the_reference_distribution_pass_and_others_fail_by_name() {
        let names = ["x".to_string()];
        let good = summarize(&names, &normal_chains(4, 1000, 1.0, 2.0, 2));
        let checks = check(&good, &reference());
        assert!(checks.passed(), "{checks:?}");
        // A mean shifted by 0.5 sd (6-7 combined MCSE at these sizes) and an sd 20% small.
        let shifted = summarize(&names, &normal_chains(4, 1000, 2.0, 2.0, 2));
        assert_eq!(
            check(&shifted, &reference()).parameters[0].failures,
            ["mean"]
        );
        let narrow = summarize(&names, &normal_chains(4, 1000, 1.0, 1.6, 2));
        assert_eq!(check(&narrow, &reference()).parameters[0].failures, ["sd"]);
        // Two chains apart: R̂ and the mean break.
        let mut apart = normal_chains(4, 1000, 1.0, 2.0, 3);
        apart[0][0].iter_mut().for_each(|x| *x += 3.0);
        let failures = &check(&summarize(&names, &apart), &reference()).parameters[0].failures;
        assert!(failures.contains(&"rhat"), "{failures:?}");
        let other = summarize(&["y".to_string()], &normal_chains(4, 1000, 1.0, 2.0, 2));
        assert_eq!(
            check(&other, &reference()).parameters[0].failures,
            ["missing"]
        );
    }

    #[test]
    fn few_draws_fail_the_ess_rules() {
        let few = summarize(&["x".to_string()], &normal_chains(2, 150, 1.0, 2.0, 4));
        let failures = &check(&few, &reference()).parameters[0].failures;
        assert!(
            failures.contains(&"ess_bulk") && failures.contains(&"ess_tail"),
            "{failures:?}"
        );
    }
}
