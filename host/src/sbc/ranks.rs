//! From one replication's posterior draws to the numbers calibration looks at: the rank of the
//! true parameters among the thinned draws, and the effective sample size that decides the
//! thinning.

use crate::diagnostics::{Draws, ess_bulk, ess_tail};

/// Each chain's kept draws of each reported parameter: `chains[chain][parameter][i]`.
pub type ChainDraws = [Vec<Vec<f64>>];

/// The draws a thinning by `thin` keeps from a chain of `draws`: the last of every complete
/// block of `thin`, so `⌊draws / thin⌋` of them.
pub fn kept_per_chain(draws: usize, thin: usize) -> usize {
    draws / thin
}

/// The rank of `truth[p]` among the thinned draws of parameter `p`, for every `p`: how many of
/// them lie below it, so a rank in `0..=L` with `L` the thinned draws over all chains. If the
/// draws come from the exact posterior of data simulated from `truth`, and are independent,
/// every rank is uniform on `0..=L`.
pub fn ranks(chains: &ChainDraws, truth: &[f64], thin: usize) -> Vec<usize> {
    truth
        .iter()
        .enumerate()
        .map(|(p, &t)| {
            chains
                .iter()
                .map(|chain| {
                    chain[p]
                        .iter()
                        .skip(thin - 1)
                        .step_by(thin)
                        .filter(|&&x| x < t)
                        .count()
                })
                .sum()
        })
        .collect()
}

/// The smallest effective sample size over the parameters, bulk and tail alike (the rank
/// statistic depends on the whole distribution, not only its centre); 0 where it cannot be
/// measured (a chain that never moved).
pub fn min_ess(chains: &ChainDraws) -> f64 {
    let parameters = chains.first().map_or(0, Vec::len);
    (0..parameters)
        .map(|p| {
            let series: Vec<&[f64]> = chains.iter().map(|c| c[p].as_slice()).collect();
            match Draws::new(&series) {
                Ok(draws) => ess_bulk(&draws).min(ess_tail(&draws)),
                Err(_) => f64::NAN,
            }
        })
        .map(|e| if e.is_nan() { 0.0 } else { e })
        .fold(f64::INFINITY, f64::min)
}

/// The thinning that leaves about one effective draw per kept draw, given the smallest ESS per
/// draw measured: `⌈1 / ess_per_draw⌉`, and 1 when draws are more than independent (antithetic
/// HMC). `None` if `ess_per_draw` is not positive.
pub fn thin_for(ess_per_draw: f64) -> Option<usize> {
    (ess_per_draw > 0.0).then(|| (1.0 / ess_per_draw.min(1.0)).ceil() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_count_the_thinned_draws_below_the_truth_over_all_chains() {
        // Two chains, one parameter; thinning by 2 keeps the 2nd and 4th draw of each.
        let chains = vec![
            vec![vec![5.0, 0.0, 5.0, 1.0, 0.0]],
            vec![vec![0.0, 3.0, 0.0, -1.0]],
        ];
        assert_eq!(ranks(&chains, &[2.0], 2), vec![3]);
        assert_eq!(ranks(&chains, &[-5.0], 2), vec![0]);
        assert_eq!(ranks(&chains, &[9.0], 1), vec![9]);
        assert_eq!(kept_per_chain(5, 2) + kept_per_chain(4, 2), 4);
    }

    #[test]
    fn thinning_leaves_one_effective_draw_per_kept_draw() {
        assert_eq!(thin_for(0.25), Some(4));
        assert_eq!(thin_for(0.3), Some(4));
        assert_eq!(thin_for(1.7), Some(1));
        assert_eq!(thin_for(0.0), None);
        assert_eq!(thin_for(f64::NAN), None);
    }

    #[test]
    fn a_chain_that_never_moves_has_no_ess() {
        let stuck = vec![vec![vec![1.0; 50]]];
        assert_eq!(min_ess(&stuck), 0.0);
        // 400 independent normals: an ESS near 400 (its sd is about 10 % of that).
        let mut moving = vec![0.0; 400];
        shmc_core::random::fill_standard_normal(
            &mut <rand_pcg::Pcg64 as rand::SeedableRng>::seed_from_u64(1),
            &mut moving,
        );
        let ess = min_ess(&[vec![moving]]);
        assert!((250.0..560.0).contains(&ess), "{ess}");
    }
}
