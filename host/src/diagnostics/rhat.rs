//! The rank-normalized split R̂ of Vehtari et al. (2021): the larger of the split R̂ of the
//! rank-normalized draws (sensitive to chains disagreeing in location) and of the rank-normalized
//! draws folded about their median (sensitive to chains disagreeing in scale).
//!
//! The split R̂ of `M` chains of `N` draws is `√((N−1)/N + B/(N·W))` with `W` the mean of the
//! within-chain variances and `B/N` the variance of the chain means (both with `n − 1`), as in
//! ArviZ's `_rhat` and posterior's `rhat_basic`. One chain is split into two halves and diagnosed
//! like posterior and Stan do; ArviZ 0.23 returns NaN for a single chain instead.

use super::draws::{Draws, mean, variance};
use super::rank::Ranked;
use super::workspace::ScoreTable;

/// The rank-normalized split R̂: `max(bulk R̂, folded R̂)`. Near 1 for chains that agree; Stan's
/// and ArviZ's threshold for trusting a run is 1.01. NaN unless there are at least 4 finite,
/// not all equal draws per chain.
pub fn rhat(draws: &Draws) -> f64 {
    if !draws.is_diagnosable() {
        return f64::NAN;
    }
    let ranked = Ranked::new(draws);
    let mut table = ScoreTable::default();
    let bulk = ranked.bulk_scores(&mut table);
    rank_rhat(&ranked, &bulk, draws.split_draws(), &mut table)
}

/// The rank-normalized R̂ from precomputed split-layout bulk scores (split chains of `half`
/// draws).
pub(super) fn rank_rhat(ranked: &Ranked, bulk: &[f64], half: usize, table: &mut ScoreTable) -> f64 {
    let bulk = basic_rhat(bulk, half);
    let folded = basic_rhat(&ranked.folded_scores(table), half);
    if bulk.is_nan() || folded.is_nan() {
        f64::NAN
    } else {
        bulk.max(folded)
    }
}

/// The (non-split) potential scale reduction of chain-major `values` in chains of `draws`.
fn basic_rhat(values: &[f64], draws: usize) -> f64 {
    let chains: Vec<&[f64]> = values.chunks_exact(draws).collect();
    let means: Vec<f64> = chains.iter().map(|c| mean(c)).collect();
    let within = mean(&chains.iter().map(|c| variance(c)).collect::<Vec<_>>());
    let between = draws as f64 * variance(&means);
    let n = draws as f64;
    ((between / within + n - 1.0) / n).sqrt()
}

#[cfg(test)]
mod tests {
    use super::super::reference::{EXPECTED_A, EXPECTED_B, EXPECTED_C};
    use super::super::reference::{SET_A, SET_B, SET_C};
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64;
    use shmc_core::random::fill_standard_normal;

    #[test]
    fn rhat_matches_arviz() {
        let cases = [
            ("A", rhat(&Draws::new(&SET_A).unwrap()), EXPECTED_A.rhat),
            ("B", rhat(&Draws::new(&SET_B).unwrap()), EXPECTED_B.rhat),
            ("C", rhat(&Draws::new(&SET_C).unwrap()), EXPECTED_C.rhat),
        ];
        for (set, got, expected) in cases {
            assert!(
                (got - expected).abs() <= 1e-6 * expected,
                "set {set}: R̂ {got}, ArviZ {expected}"
            );
        }
    }

    /// AR(1) chains `x_t = ρ x_{t−1} + √(1−ρ²) ε_t` (unit marginal variance) of `n` draws;
    /// chain `c` starts at `offsets[c]` instead of in the stationary distribution.
    fn ar1_chains(seed: u64, n: usize, rho: f64, offsets: &[f64]) -> Vec<Vec<f64>> {
        let mut rng = Pcg64::seed_from_u64(seed);
        let scale = (1.0 - rho * rho).sqrt();
        offsets
            .iter()
            .map(|&start| {
                let mut noise = vec![0.0; n];
                fill_standard_normal(&mut rng, &mut noise);
                let mut x = start;
                noise
                    .iter()
                    .map(|&e| {
                        x = rho * x + scale * e;
                        x
                    })
                    .collect()
            })
            .collect()
    }

    /// Four stationary AR(1) chains (ρ = 0.5) of 5000 draws: R̂ − 1 is of order 1/ESS; over 100
    /// seeds (tried once) the largest R̂ was 1.0015, so 1.01 has a wide margin.
    #[test]
    fn rhat_is_near_one_for_mixed_chains() {
        let chains = ar1_chains(3, 5000, 0.5, &[0.0; 4]);
        let value = rhat(&Draws::new(&chains).unwrap());
        assert!(value < 1.01, "R̂ = {value}");
    }

    /// AR(1) chains (ρ = 0.9, autocorrelation time 19) started at ±5 marginal standard deviations
    /// and stopped after 40 draws have not forgotten their start: the first halves sit far from
    /// the second and the two groups of chains far from each other. Over 100 seeds (tried once)
    /// the smallest R̂ was 1.37, far above 1.05.
    #[test]
    fn rhat_flags_chains_started_apart() {
        let chains = ar1_chains(5, 40, 0.9, &[-5.0, -5.0, 5.0, 5.0]);
        let value = rhat(&Draws::new(&chains).unwrap());
        assert!(value > 1.05, "R̂ = {value}");
    }

    /// Chains with the same location but different scales fool the bulk R̂ only; the folded R̂
    /// catches them.
    #[test]
    fn folded_rhat_catches_scale_differences() {
        let mut rng = Pcg64::seed_from_u64(9);
        let chains: Vec<Vec<f64>> = [1.0, 1.0, 1.0, 10.0]
            .iter()
            .map(|&sd| {
                let mut x = vec![0.0; 1000];
                fill_standard_normal(&mut rng, &mut x);
                x.iter().map(|v| sd * v).collect()
            })
            .collect();
        let draws = Draws::new(&chains).unwrap();
        let ranked = Ranked::new(&draws);
        let mut table = ScoreTable::default();
        let bulk = basic_rhat(&ranked.bulk_scores(&mut table), draws.split_draws());
        let value = rhat(&draws);
        assert!(bulk < 1.01, "bulk R̂ = {bulk}");
        assert!(value > 1.05, "R̂ = {value}");
    }

    #[test]
    fn rhat_is_nan_for_constant_or_short_draws() {
        assert!(rhat(&Draws::new(&[[2.0; 10], [2.0; 10]]).unwrap()).is_nan());
        assert!(rhat(&Draws::new(&[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]).unwrap()).is_nan());
    }
}
