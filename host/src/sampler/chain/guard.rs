//! The guard of surrogate-driven warmup: a surrogate that proposes badly makes the chain stand
//! still, and adaptation cannot cure that. The sign is the gap between the two acceptances of
//! its trajectories: under its own Hamiltonian (what the step size is adapted to, so near the
//! target) and under the exact one (what the chain gets). When the exact acceptance collapses,
//! absolutely or to a small fraction of the surrogate's own, the chain goes back to exact HMC
//! for good (and says so).

use std::collections::VecDeque;

pub use crate::sampler::proposer::Collapse;

/// Surrogate proposals the acceptance is averaged over.
pub const WINDOW: usize = 50;

/// The mean exact acceptance below which the surrogate has collapsed whatever its own.
pub const COLLAPSED: f64 = 0.05;

/// The fraction of its own acceptance below which the surrogate's exact acceptance has
/// collapsed. A surrogate worth proposing with keeps a good part of it: exact 0.6 to 0.9 at an
/// own 0.8 in the papers' runs, and 0.25 for a 50-D logistic fit from only 80 states, whose long
/// cheap trajectories still pay. One whose forces point away from the posterior keeps a tenth
/// to a fifth (a negated 4-D Gaussian with up to 20 steps: 0.09 and 0.15 of 0.78), its accepted
/// moves short ones that go nowhere.
pub const WORST_RATIO: f64 = 0.2;

/// The acceptance of the latest surrogate proposals.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    /// `(exact, own)` acceptance of each recent surrogate proposal.
    recent: VecDeque<(f64, f64)>,
}

impl Guard {
    /// Records a surrogate proposal's exact and own acceptance probabilities; returns the
    /// window's means when a full window has collapsed (the iteration is the caller's).
    pub fn observe(&mut self, exact: f64, own: f64) -> Option<(f64, f64)> {
        if self.recent.len() == WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back((exact, own));
        let n = self.recent.len() as f64;
        let (sum_exact, sum_own) = self
            .recent
            .iter()
            .fold((0.0, 0.0), |(a, b), (e, o)| (a + e, b + o));
        let (exact, own) = (sum_exact / n, sum_own / n);
        let collapsed = exact < COLLAPSED.max(WORST_RATIO * own);
        (self.recent.len() == WINDOW && collapsed).then_some((exact, own))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapses_only_on_a_full_window_of_low_acceptance() {
        let mut guard = Guard::default();
        for _ in 0..WINDOW - 1 {
            assert_eq!(
                guard.observe(0.0, 0.0),
                None,
                "a partial window never collapses"
            );
        }
        // Nothing accepted at all, even by the surrogate's own dynamics: collapsed.
        assert_eq!(guard.observe(0.0, 0.0), Some((0.0, 0.0)));

        // Exact 0.1 where the surrogate's own dynamics accept 0.8: collapsed (0.1 < 0.2 · 0.8).
        let mut wrong = Guard::default();
        let verdicts: Vec<_> = (0..WINDOW).map(|_| wrong.observe(0.1, 0.8)).collect();
        assert!(verdicts[..WINDOW - 1].iter().all(Option::is_none));
        let (exact, own) = verdicts[WINDOW - 1].unwrap();
        assert!((exact - 0.1).abs() < 1e-12 && (own - 0.8).abs() < 1e-12);

        // Exact 0.2 of an own 0.8 is a usable surrogate; so is a low own acceptance matched by
        // the exact one (a step size still adapting), down to the absolute floor.
        let mut usable = Guard::default();
        assert!((0..2 * WINDOW).all(|_| usable.observe(0.2, 0.8).is_none()));
        let mut adapting = Guard::default();
        assert!((0..2 * WINDOW).all(|_| adapting.observe(0.06, 0.06).is_none()));
        let mut floor = Guard::default();
        assert!(
            (0..WINDOW)
                .filter_map(|_| floor.observe(0.04, 0.04))
                .count()
                == 1
        );
    }
}
