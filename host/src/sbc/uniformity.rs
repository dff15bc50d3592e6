//! Are the ranks uniform? Pearson's χ² test on binned ranks per parameter, and one verdict over
//! all parameters with the multiple-testing correction said out loud.
//!
//! Ranks take the `L + 1` values `0..=L`. They are binned into `B` bins of (nearly) equal
//! width, `B` chosen so every bin expects at least [`MIN_EXPECTED`] ranks (at most
//! [`MAX_BINS`]); a bin's expected count is exact under uniformity (its share of the `L + 1`
//! values), so unequal bins cost nothing. The statistic `Σ (O − E)² / E` is χ² with `B − 1`
//! degrees of freedom under the null; its upper tail is the p-value.

use statrs::distribution::{ChiSquared, ContinuousCDF};

use crate::{Error, Result};

/// The most bins: Talts et al. use 20 for their rank histograms.
pub const MAX_BINS: usize = 20;
/// The fewest ranks a bin is expected to hold, so the χ² approximation holds (the usual rule
/// asks for 5; 10 keeps the tail accurate at the small p-values a verdict turns on).
pub const MIN_EXPECTED: usize = 10;
/// The family-wise level of the overall verdict.
pub const ALPHA: f64 = 0.05;

/// The bins for `replications` ranks in `0..=max_rank`: `B` bins, `B` as large as
/// [`MIN_EXPECTED`] (in the narrowest bin) and [`MAX_BINS`] allow and no more than the `L + 1`
/// rank values; rank `r` falls in bin `⌊r B / (L + 1)⌋`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bins {
    /// `B`.
    pub count: usize,
    /// `L`, the largest rank.
    pub max_rank: usize,
}

impl Bins {
    /// The bins for `replications` ranks in `0..=max_rank`; an error (naming the setting) if
    /// there are too few replications for two bins or too few kept draws for two rank values.
    pub fn new(replications: usize, max_rank: usize) -> Result<Self> {
        if replications < 2 * MIN_EXPECTED {
            return Err(Error::setting(
                "replications",
                format!(
                    "must be at least {} for the uniformity test ({MIN_EXPECTED} ranks expected \
                     in each of at least 2 bins), got {replications}",
                    2 * MIN_EXPECTED
                ),
            ));
        }
        if max_rank == 0 {
            return Err(Error::setting(
                "thin",
                "keeps no more than one draw per replication: ranks need at least two (more \
                 draws, or a smaller thinning)",
            ));
        }
        // The most bins whose narrowest, ⌊(L+1)/B⌋ values wide, still expects enough ranks.
        let values = max_rank + 1;
        let count = (2..=MAX_BINS.min(values))
            .rev()
            .find(|&b| (values / b) * replications >= MIN_EXPECTED * values)
            .unwrap_or(2);
        Ok(Self { count, max_rank })
    }

    /// The bin of rank `r`.
    pub fn of(&self, r: usize) -> usize {
        r * self.count / (self.max_rank + 1)
    }

    /// How many of the `L + 1` rank values bin `b` holds.
    pub fn width(&self, b: usize) -> usize {
        let values = self.max_rank + 1;
        // The values r with ⌊r B / (L+1)⌋ = b are those from ⌈b (L+1) / B⌉ on.
        let start = |b: usize| (b * values).div_ceil(self.count);
        start(b + 1) - start(b)
    }

    /// The probability of bin `b` under uniform ranks.
    pub fn probability(&self, b: usize) -> f64 {
        self.width(b) as f64 / (self.max_rank + 1) as f64
    }
}

/// One parameter's test.
#[derive(Clone, Debug, PartialEq)]
pub struct Uniformity {
    /// The ranks counted per bin.
    pub counts: Vec<usize>,
    /// Pearson's statistic.
    pub chi_squared: f64,
    /// Its degrees of freedom, `B − 1`.
    pub degrees_of_freedom: usize,
    /// `P(χ²_{B−1} ≥ statistic)`.
    pub p_value: f64,
}

/// The χ² test of `ranks` (each in `0..=bins.max_rank`) against uniformity.
pub fn chi_squared_test(ranks: &[usize], bins: Bins) -> Uniformity {
    let mut counts = vec![0; bins.count];
    for &r in ranks {
        counts[bins.of(r)] += 1;
    }
    let n = ranks.len() as f64;
    let chi_squared = counts
        .iter()
        .enumerate()
        .map(|(b, &observed)| {
            let expected = n * bins.probability(b);
            (observed as f64 - expected).powi(2) / expected
        })
        .sum();
    let degrees_of_freedom = bins.count - 1;
    let p_value = ChiSquared::new(degrees_of_freedom as f64)
        .expect("at least one degree of freedom")
        .sf(chi_squared);
    Uniformity {
        counts,
        chi_squared,
        degrees_of_freedom,
        p_value,
    }
}

/// The verdict over all parameters: uniformity is rejected if any parameter's test rejects at
/// level `α / m` (Bonferroni over the `m` parameters, which keeps the chance of a false alarm
/// below `α` however the parameters' ranks depend on each other).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    /// The family-wise level `α`.
    pub alpha: f64,
    /// The number of tests `m`.
    pub tests: usize,
    /// `min(1, m · min p)`: the Bonferroni-adjusted smallest p-value.
    pub adjusted_p: f64,
}

impl Verdict {
    /// The verdict on `tests` at level [`ALPHA`].
    pub fn new(tests: &[Uniformity]) -> Self {
        let smallest = tests.iter().map(|t| t.p_value).fold(1.0, f64::min);
        Self {
            alpha: ALPHA,
            tests: tests.len(),
            adjusted_p: (smallest * tests.len() as f64).min(1.0),
        }
    }

    /// Whether the ranks pass: no parameter's test rejects after the correction.
    pub fn uniform(&self) -> bool {
        self.adjusted_p >= self.alpha
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_partition_the_rank_values_and_expect_enough_in_each() {
        for (replications, max_rank) in [(100, 99), (200, 249), (1000, 30), (25, 3), (57, 1)] {
            let bins = Bins::new(replications, max_rank).unwrap();
            let widths: usize = (0..bins.count).map(|b| bins.width(b)).sum();
            assert_eq!(widths, max_rank + 1);
            for r in 0..=max_rank {
                let b = bins.of(r);
                assert!(b < bins.count);
                // Bin b holds exactly `width(b)` values: count them directly.
                let members = (0..=max_rank).filter(|&s| bins.of(s) == b).count();
                assert_eq!(members, bins.width(b));
            }
            let least = (0..bins.count)
                .map(|b| bins.probability(b))
                .fold(1.0, f64::min);
            assert!(least * replications as f64 >= MIN_EXPECTED as f64 - 1e-9);
        }
        assert_eq!(Bins::new(200, 999).unwrap().count, MAX_BINS);
        assert!(Bins::new(19, 99).is_err());
        assert!(Bins::new(100, 0).is_err());
    }

    #[test]
    fn perfectly_flat_ranks_have_statistic_zero_and_p_one() {
        let bins = Bins::new(100, 99).unwrap();
        let ranks: Vec<usize> = (0..100).collect();
        let test = chi_squared_test(&ranks, bins);
        assert_eq!(test.counts, vec![10; 10]);
        assert_eq!(test.chi_squared, 0.0);
        assert_eq!(test.degrees_of_freedom, 9);
        assert!((test.p_value - 1.0).abs() < 1e-12);
    }

    #[test]
    fn statistic_and_p_value_match_a_hand_computation() {
        // Two bins (ranks 0..=1), 30 ranks: 20 zeros and 10 ones. E = 15 each, so
        // χ² = 2 · 25/15 = 10/3 on 1 degree of freedom: p = erfc(√(5/3)) = 0.067889...
        let mut ranks = vec![0; 20];
        ranks.extend([1; 10]);
        let test = chi_squared_test(&ranks, Bins::new(30, 1).unwrap());
        assert!((test.chi_squared - 10.0 / 3.0).abs() < 1e-12);
        assert!(
            (test.p_value - 0.067_889_154_861_829_03).abs() < 1e-12,
            "{}",
            test.p_value
        );
    }

    #[test]
    fn verdict_applies_bonferroni() {
        let with_p = |p_value| Uniformity {
            counts: vec![],
            chi_squared: 0.0,
            degrees_of_freedom: 1,
            p_value,
        };
        let verdict = Verdict::new(&[with_p(0.5), with_p(0.02), with_p(0.9)]);
        assert!((verdict.adjusted_p - 0.06).abs() < 1e-15);
        assert!(verdict.uniform(), "0.02 · 3 ≥ 0.05");
        assert!(!Verdict::new(&[with_p(0.01), with_p(0.9)]).uniform());
    }
}
