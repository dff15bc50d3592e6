//! The per-parameter summary table of a run (the columns of Stan's `stansummary` and ArviZ's
//! `az.summary`), the MCSE of the mean, and a min/median/max digest of many ESS values.
//!
//! Each parameter's draws are sorted once; the sort yields the quantiles, the bulk ranks and (by
//! a merge) the folded ranks. Parameters are summarized in parallel (rayon), each worker reusing
//! its FFT plans and normal scores; the result does not depend on the number of threads.

use rayon::prelude::*;
use serde::Serialize;

use super::DiagnosticsError;
use super::draws::{Draws, mean, variance};
use super::ess::{geyer_ess, scores_ess, tail_ess};
use super::quantile::quantile_sorted;
use super::rank::Ranked;
use super::rhat::rank_rhat;
use super::workspace::Workspace;

/// One row of the summary table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParameterSummary {
    /// The parameter's name.
    pub name: String,
    /// Mean of all draws.
    pub mean: f64,
    /// Standard deviation of all draws (divisor `N − 1`).
    pub sd: f64,
    /// Monte Carlo standard error of the mean, [`mcse_mean`].
    pub mcse_mean: f64,
    /// 5 % quantile (type 7).
    pub q5: f64,
    /// Median (type 7).
    pub q50: f64,
    /// 95 % quantile (type 7).
    pub q95: f64,
    /// Rank-normalized bulk ESS, [`super::ess_bulk`].
    pub ess_bulk: f64,
    /// Tail ESS, [`super::ess_tail`].
    pub ess_tail: f64,
    /// Rank-normalized split R̂, [`super::rhat`].
    pub rhat: f64,
}

/// Summaries of every parameter, `chains[c][p]` holding the draws of parameter `p` in chain `c`.
///
/// Degenerate input gives NaN, as in Stan: with fewer than 4 draws per chain, a non-finite draw
/// or constant draws, `mcse_mean`, `ess_bulk`, `ess_tail` and `rhat` are NaN (mean, sd and
/// quantiles are still computed, or NaN if a draw is NaN); with no chains or no draws every
/// number is NaN.
///
/// # Panics
///
/// If a chain does not hold exactly one series per name or the chains differ in length: those
/// are bugs in the caller. [`try_summarize`] returns them as errors instead.
pub fn summarize(names: &[String], chains: &[Vec<Vec<f64>>]) -> Vec<ParameterSummary> {
    try_summarize(names, chains).unwrap_or_else(|e| panic!("summarize: {e}"))
}

/// [`summarize`], reporting inconsistent shapes as errors instead of panicking.
pub fn try_summarize(
    names: &[String],
    chains: &[Vec<Vec<f64>>],
) -> Result<Vec<ParameterSummary>, DiagnosticsError> {
    check_shape(names.len(), chains)?;
    Ok(names
        .par_iter()
        .enumerate()
        .map_init(Workspace::new, |workspace, (p, name)| {
            let series: Vec<&[f64]> = chains.iter().map(|c| c[p].as_slice()).collect();
            match Draws::new(&series) {
                Ok(draws) => summarize_parameter(name, &draws, workspace),
                Err(_) => nan_summary(name),
            }
        })
        .collect())
}

/// Every chain holds `parameters` series, all of one length.
fn check_shape(parameters: usize, chains: &[Vec<Vec<f64>>]) -> Result<(), DiagnosticsError> {
    let expected = chains.first().and_then(|c| c.first()).map_or(0, Vec::len);
    for (chain, series) in chains.iter().enumerate() {
        if series.len() != parameters {
            return Err(DiagnosticsError::ParameterCount {
                chain,
                expected: parameters,
                found: series.len(),
            });
        }
        if let Some(found) = series.iter().map(Vec::len).find(|&len| len != expected) {
            return Err(DiagnosticsError::UnequalChainLengths {
                chain,
                expected,
                found,
            });
        }
    }
    Ok(())
}

/// A row of NaNs.
fn nan_summary(name: &str) -> ParameterSummary {
    ParameterSummary {
        name: name.to_owned(),
        mean: f64::NAN,
        sd: f64::NAN,
        mcse_mean: f64::NAN,
        q5: f64::NAN,
        q50: f64::NAN,
        q95: f64::NAN,
        ess_bulk: f64::NAN,
        ess_tail: f64::NAN,
        rhat: f64::NAN,
    }
}

/// One row: moments and quantiles always, ESS/R̂/MCSE when the draws are diagnosable.
fn summarize_parameter(name: &str, draws: &Draws, workspace: &mut Workspace) -> ParameterSummary {
    let values = draws.values();
    let mut row = nan_summary(name);
    if values.is_empty() {
        return row;
    }
    row.mean = mean(values);
    row.sd = variance(values).sqrt();
    if values.iter().any(|x| x.is_nan()) {
        return row;
    }
    let ranked = Ranked::new(draws);
    row.q5 = quantile_sorted(ranked.sorted(), 0.05);
    row.q50 = quantile_sorted(ranked.sorted(), 0.5);
    row.q95 = quantile_sorted(ranked.sorted(), 0.95);
    if !draws.is_diagnosable() {
        return row;
    }
    let bulk = ranked.bulk_scores(&mut workspace.scores);
    row.rhat = rank_rhat(&ranked, &bulk, draws.split_draws(), &mut workspace.scores);
    row.ess_bulk = scores_ess(draws, bulk, workspace);
    row.ess_tail = tail_ess(draws, &ranked, workspace);
    row.mcse_mean = row.sd / geyer_ess(&draws.split(), workspace).sqrt();
    row
}

/// The Monte Carlo standard error of the mean, `sd/√ESS` with the sd of all draws and the ESS of
/// the untransformed split chains ([`super::ess_mean`]), as posterior's `mcse_mean` and ArviZ's
/// `method="mean"` compute it. NaN under the conditions of [`super::ess`].
pub fn mcse_mean(draws: &Draws) -> f64 {
    if !draws.is_diagnosable() {
        return f64::NAN;
    }
    variance(draws.values()).sqrt() / super::ess_mean(draws).sqrt()
}

/// The smallest, median and largest of a set of ESS values (typically one per parameter).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EssSummary {
    /// The smallest ESS: the papers' efficiency measure is this per second.
    pub min: f64,
    /// The median ESS (type 7: the mean of the middle two for an even count).
    pub median: f64,
    /// The largest ESS.
    pub max: f64,
}

/// Min, median and max of the non-NaN `values` (NaN marks a parameter whose ESS is undefined,
/// e.g. a constant one); `None` if no value is left.
pub fn ess_summary(values: &[f64]) -> Option<EssSummary> {
    let mut kept: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    kept.sort_unstable_by(f64::total_cmp);
    Some(EssSummary {
        min: *kept.first()?,
        median: quantile_sorted(&kept, 0.5),
        max: *kept.last()?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::reference::{EXPECTED_A, EXPECTED_B, EXPECTED_C, Expected};
    use super::super::reference::{SET_A, SET_B, SET_C};
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64;
    use shmc_core::random::fill_standard_normal;

    /// `chains[c][p]` with parameter 0 from `set`, for [`summarize`].
    fn as_run<const N: usize>(set: &[[f64; N]; 4]) -> Vec<Vec<Vec<f64>>> {
        set.iter().map(|chain| vec![chain.to_vec()]).collect()
    }

    fn relative_error(got: f64, expected: f64) -> f64 {
        ((got - expected) / expected).abs()
    }

    fn check_row<const N: usize>(set: &[[f64; N]; 4], expected: &Expected) {
        let row = &summarize(&["x".to_owned()], &as_run(set))[0];
        for (name, got, want) in [
            ("ess_bulk", row.ess_bulk, expected.ess_bulk),
            ("ess_tail", row.ess_tail, expected.ess_tail),
            ("rhat", row.rhat, expected.rhat),
            ("mcse_mean", row.mcse_mean, expected.mcse_mean),
        ] {
            assert!(
                relative_error(got, want) < 1e-6,
                "{name}: {got} vs ArviZ {want}"
            );
        }
        let draws = Draws::new(set).unwrap();
        assert!(relative_error(mcse_mean(&draws), expected.mcse_mean) < 1e-6);
    }

    /// The summary's ESS, R̂ and MCSE columns agree with ArviZ to 1e-6 on the reference sets.
    #[test]
    fn summary_matches_arviz() {
        check_row(&SET_A, &EXPECTED_A);
        check_row(&SET_B, &EXPECTED_B);
        check_row(&SET_C, &EXPECTED_C);
    }

    /// Mean, sd and quantiles of set A against numpy (`x.mean()`, `x.std(ddof=1)`,
    /// `np.quantile(x, [.05, .5, .95])` on the 80 draws, numpy 2.4.6).
    #[test]
    fn summary_moments_and_quantiles_match_numpy() {
        let row = &summarize(&["x".to_owned()], &as_run(&SET_A))[0];
        let expected = [
            (row.mean, 0.051_647_499_999_999_98),
            (row.sd, 1.074_386_672_958_877_4),
            (row.q5, -1.448_015),
            (row.q50, -0.110_35),
            (row.q95, 2.034_184_999_999_999_5),
        ];
        for (got, want) in expected {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
    }

    #[test]
    fn degenerate_parameters_give_nan_diagnostics() {
        let names = ["constant".to_owned(), "short".to_owned()];
        let chains = vec![vec![vec![3.0; 3], vec![1.0, 2.0, 3.0]]; 2];
        let rows = summarize(&names, &chains);
        assert_eq!(rows[0].mean, 3.0);
        assert_eq!(rows[0].sd, 0.0);
        assert_eq!(rows[1].q50, 2.0);
        for row in &rows {
            assert!(row.ess_bulk.is_nan() && row.ess_tail.is_nan());
            assert!(row.rhat.is_nan() && row.mcse_mean.is_nan());
        }
        let empty = summarize(&names, &[]);
        assert!(empty.iter().all(|r| r.mean.is_nan() && r.rhat.is_nan()));
    }

    #[test]
    fn inconsistent_shapes_are_errors() {
        let names = ["a".to_owned(), "b".to_owned()];
        let missing = vec![vec![vec![1.0; 10]]];
        assert_eq!(
            try_summarize(&names, &missing),
            Err(DiagnosticsError::ParameterCount {
                chain: 0,
                expected: 2,
                found: 1
            })
        );
        let ragged = vec![
            vec![vec![1.0; 10], vec![1.0; 10]],
            vec![vec![1.0; 10], vec![1.0; 9]],
        ];
        assert_eq!(
            try_summarize(&names, &ragged),
            Err(DiagnosticsError::UnequalChainLengths {
                chain: 1,
                expected: 10,
                found: 9
            })
        );
    }

    #[test]
    fn ess_summary_skips_nan_and_takes_the_middle() {
        let digest = ess_summary(&[400.0, f64::NAN, 100.0, 250.0, 1000.0]).unwrap();
        assert_eq!(
            digest,
            EssSummary {
                min: 100.0,
                median: 325.0,
                max: 1000.0
            }
        );
        assert_eq!(ess_summary(&[f64::NAN]), None);
    }

    /// Times the acceptance-size summary (4 chains × 5000 draws × 60 parameters); run with
    /// `cargo test -p shmc --release summarize_timing -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing, not a check"]
    fn summarize_timing() {
        let mut rng = Pcg64::seed_from_u64(1);
        let names: Vec<String> = (0..60).map(|p| format!("theta[{p}]")).collect();
        let chains: Vec<Vec<Vec<f64>>> = (0..4)
            .map(|_| {
                (0..60)
                    .map(|_| {
                        let mut x = vec![0.0; 5000];
                        fill_standard_normal(&mut rng, &mut x);
                        x
                    })
                    .collect()
            })
            .collect();
        let start = std::time::Instant::now();
        let rows = summarize(&names, &chains);
        let elapsed = start.elapsed();
        println!("summarize 4 x 5000 x 60: {elapsed:?}");
        assert_eq!(rows.len(), 60);
    }
}
