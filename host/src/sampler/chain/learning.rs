//! The learning curve of a surrogate method: the acceptance of its proposals against the states
//! it had learned from ([`LearningPoint`]). During warmup the surrogate may still learn (ARNS-HMC
//! online, VHMC by score matching) and the step size adapts, so its proposals are averaged in
//! windows; in sampling it is fixed, so all of sampling's proposals make one point.
//!
//! A window's point is the mean acceptance probability of its proposals, not their accepted
//! share: the probability is the less noisy estimate of the same rate.

use serde::{Deserialize, Serialize};

use crate::records::LearningPoint;
use crate::surrogates::exact_floats;

/// Warmup windows per chain at most: enough for a curve, few enough for one line of a file.
const POINTS: usize = 40;

/// The fewest proposals a warmup window averages, so that a short warmup's points are not noise.
const MIN_WINDOW: usize = 10;

/// The proposals of the window being filled.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Window {
    #[serde(with = "exact_floats")]
    sum: f64,
    point: LearningPoint,
    sampling: bool,
}

impl Window {
    /// Counts a proposal made at `iteration` by a surrogate that had learned from `states`
    /// states, accepted with probability `acceptance`.
    fn add(&mut self, iteration: usize, states: usize, acceptance: f64) {
        self.sum += acceptance;
        self.point.iteration = iteration;
        self.point.states = states;
        self.point.proposals += 1;
    }
}

/// Collects a chain's learning curve as its surrogate proposes (saved with a checkpoint, so that
/// a resumed chain's curve is an uninterrupted one's).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Recorder {
    warmup: usize,
    window: usize,
    open: Option<Window>,
    points: Vec<LearningPoint>,
}

impl Recorder {
    /// A recorder for a chain of `warmup` warmup iterations.
    pub fn new(warmup: usize) -> Self {
        Self {
            warmup,
            window: warmup.div_ceil(POINTS).max(MIN_WINDOW),
            open: None,
            points: Vec::new(),
        }
    }

    /// Records a surrogate proposal made at `iteration` (1-based, warmup included) by a
    /// surrogate that had learned from `states` states, accepted with probability `acceptance`.
    #[inline]
    pub fn observe(&mut self, iteration: usize, states: usize, acceptance: f64) {
        let sampling = iteration > self.warmup;
        // Sampling's proposals all go to its one open window: counted here, inlined into the
        // chain's iteration (a call and the general path below cost more than the counting).
        if sampling && let Some(window) = self.open.as_mut().filter(|w| w.sampling) {
            window.add(iteration, states, acceptance);
            return;
        }
        self.observe_opening(iteration, states, acceptance, sampling);
    }

    /// [`Recorder::observe`] where a window may open or close.
    #[inline(never)]
    fn observe_opening(
        &mut self,
        iteration: usize,
        states: usize,
        acceptance: f64,
        sampling: bool,
    ) {
        if self.open.is_some_and(|w| w.sampling != sampling) {
            self.close();
        }
        let window = self.open.get_or_insert(Window {
            sum: 0.0,
            point: LearningPoint {
                iteration,
                states,
                proposals: 0,
                acceptance: f64::NAN,
            },
            sampling,
        });
        window.add(iteration, states, acceptance);
        if !sampling && window.point.proposals == self.window {
            self.close();
        }
    }

    fn close(&mut self) {
        if let Some(Window { sum, mut point, .. }) = self.open.take() {
            point.acceptance = sum / point.proposals as f64;
            self.points.push(point);
        }
    }

    /// The curve, the window being filled included (a warmup cut short by a collapse or an
    /// interruption, or sampling).
    pub fn take_points(&mut self) -> Vec<LearningPoint> {
        self.close();
        std::mem::take(&mut self.points)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_is_averaged_in_windows_and_sampling_in_one_point() {
        // 100 warmup iterations: windows of 10 proposals (the least a window takes).
        let mut recorder = Recorder::new(100);
        // Exact HMC for 30 iterations, then the surrogate proposes, learning one state each
        // iteration from 120, and accepts with probability 0.5 then 0.9.
        for i in 31..=100 {
            recorder.observe(i, 120 + i - 31, if i <= 60 { 0.5 } else { 0.9 });
        }
        for i in 101..=150 {
            recorder.observe(i, 189, 0.75);
        }
        let points = recorder.take_points();
        assert_eq!(points.len(), 8, "{points:?}");
        assert_eq!(
            points[0],
            LearningPoint {
                iteration: 40,
                states: 129,
                proposals: 10,
                acceptance: 0.5
            }
        );
        assert!((points[6].acceptance - 0.9).abs() < 1e-12);
        assert_eq!(
            points[7],
            LearningPoint {
                iteration: 150,
                states: 189,
                proposals: 50,
                acceptance: 0.75
            }
        );
        assert!(recorder.take_points().is_empty());
    }

    #[test]
    fn a_partial_window_is_kept_and_long_warmups_get_at_most_forty_points() {
        let mut recorder = Recorder::new(1000);
        for i in 1..=1000 {
            recorder.observe(i, i, 1.0);
        }
        assert_eq!(recorder.take_points().len(), POINTS);
        let mut cut = Recorder::new(1000);
        for i in 1..=30 {
            cut.observe(i, 0, 0.25);
        }
        let points = cut.take_points();
        assert_eq!(points.len(), 2);
        assert_eq!((points[1].iteration, points[1].proposals), (30, 5));
    }
}
