//! Stan's windowed warmup: a fast initial buffer for the step size alone, then slow windows
//! of doubling length that estimate the diagonal mass matrix, then a terminal buffer for the
//! step size under the final metric (Stan reference manual, "HMC algorithm parameters").
//! Also the initial step-size heuristic and the regularized variance estimator Stan uses.

use shmc_core::{DiagonalMetric, Dyn, Dynamics, State, leapfrog, metric::Metric};

/// Stan's defaults: 75 initial, 50 terminal, 25 for the first slow window.
const INIT_BUFFER: usize = 75;
const TERM_BUFFER: usize = 50;
const BASE_WINDOW: usize = 25;

/// The iterations at which a slow window ends, for `warmup` warmup iterations. Empty when
/// the warmup is too short to adapt a metric (fewer than 20 iterations, as in Stan).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowSchedule {
    /// First iteration of the first slow window.
    pub start: usize,
    /// One past the last iteration of each slow window, increasing.
    pub ends: Vec<usize>,
}

impl WindowSchedule {
    /// Stan's schedule for `warmup` iterations.
    pub fn new(warmup: usize) -> Self {
        if warmup < 20 {
            return Self {
                start: warmup,
                ends: Vec::new(),
            };
        }
        let (init, term, base) = if INIT_BUFFER + TERM_BUFFER + BASE_WINDOW > warmup {
            let init = warmup * 15 / 100;
            let term = warmup / 10;
            (init, term, warmup - init - term)
        } else {
            (INIT_BUFFER, TERM_BUFFER, BASE_WINDOW)
        };
        let last = warmup - term;
        let mut ends = Vec::new();
        let mut begin = init;
        let mut size = base;
        while begin < last {
            // A window that would leave less than its double before the terminal buffer
            // absorbs the rest. Checked: near `usize::MAX` iterations the double overflows,
            // and a wrapped sum would never reach `last` (the list would grow forever). As
            // the windows double, there are at most 64 of them.
            let end = match size.checked_mul(3).and_then(|s| begin.checked_add(s)) {
                Some(after_next) if after_next <= last => begin + size,
                _ => last,
            };
            ends.push(end);
            begin = end;
            size = size.saturating_mul(2);
        }
        Self { start: init, ends }
    }

    /// Whether iteration `i` (0-based) feeds the metric estimate.
    pub fn in_slow_window(&self, i: usize) -> bool {
        i >= self.start && self.ends.last().is_some_and(|&end| i < end)
    }

    /// Whether a slow window ends after iteration `i`.
    pub fn window_ends_at(&self, i: usize) -> bool {
        self.ends.contains(&(i + 1))
    }
}

/// Welford's running mean and variance per coordinate.
#[derive(Clone, Debug)]
pub struct VarianceEstimator {
    count: usize,
    mean: Vec<f64>,
    m2: Vec<f64>,
}

impl VarianceEstimator {
    /// An empty estimator for dimension `dim`.
    pub fn new(dim: usize) -> Self {
        Self {
            count: 0,
            mean: vec![0.0; dim],
            m2: vec![0.0; dim],
        }
    }

    /// Adds one draw.
    pub fn add(&mut self, x: &[f64]) {
        self.count += 1;
        let n = self.count as f64;
        for ((m, s), &xi) in self.mean.iter_mut().zip(&mut self.m2).zip(x) {
            let delta = xi - *m;
            *m += delta / n;
            *s += delta * (xi - *m);
        }
    }

    /// Stan's regularized estimate `n/(n+5)·var + 10⁻³·5/(n+5)`, shrunk towards a small
    /// constant so that a short window cannot produce a degenerate metric.
    pub fn regularized_variance(&self) -> Vec<f64> {
        let n = self.count as f64;
        self.m2
            .iter()
            .map(|s| {
                let var = if self.count > 1 { s / (n - 1.0) } else { 1.0 };
                (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))
            })
            .collect()
    }

    /// Forgets every draw.
    pub fn reset(&mut self) {
        self.count = 0;
        self.mean.fill(0.0);
        self.m2.fill(0.0);
    }
}

/// Stan's step-size heuristic: from `step_size`, double or halve until the acceptance of one
/// leapfrog step from `state` crosses 0.8. Draws momenta from `rng`.
pub fn initial_step_size<Dy: Dynamics + ?Sized, R: rand::Rng + ?Sized>(
    state: &State<Dyn>,
    dynamics: &Dy,
    metric: &DiagonalMetric<Dyn>,
    mut step_size: f64,
    rng: &mut R,
) -> f64 {
    let dim = state.position.len();
    let (mut q, mut p, mut g) = (vec![0.0; dim], vec![0.0; dim], vec![0.0; dim]);
    let mut log_accept = |eps: f64, rng: &mut R| {
        q.copy_from_slice(state.position.as_slice());
        g.copy_from_slice(state.gradient.as_slice());
        metric.draw_momentum(rng, &mut p);
        let h0 = state.potential + metric.kinetic(&p);
        let u1 = leapfrog(dynamics, metric, eps, 1, &mut q, &mut p, &mut g);
        let h1 = u1 + metric.kinetic(&p);
        if h1.is_finite() {
            h0 - h1
        } else {
            f64::NEG_INFINITY
        }
    };
    let threshold = 0.8f64.ln();
    let up = log_accept(step_size, rng) > threshold;
    for _ in 0..100 {
        let next = if up { step_size * 2.0 } else { step_size / 2.0 };
        if !(1e-10..=1e7).contains(&next) {
            break;
        }
        let crossed = (log_accept(next, rng) > threshold) != up;
        if crossed {
            // Keep the last step size on the safe side of the threshold.
            return if up { step_size } else { next };
        }
        step_size = next;
    }
    step_size
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_schedule_matches_stan() {
        // Stan with 1000 warmup: windows end at 100, 150, 250, 450, 950.
        let schedule = WindowSchedule::new(1000);
        assert_eq!(schedule.start, 75);
        assert_eq!(schedule.ends, vec![100, 150, 250, 450, 950]);
        assert!(!schedule.in_slow_window(74));
        assert!(schedule.in_slow_window(75));
        assert!(!schedule.in_slow_window(950));
        assert!(schedule.window_ends_at(99));
    }

    #[test]
    fn the_longest_warmup_has_few_windows() {
        // 18e18 iterations overflowed `end + 2 * size` and the loop pushed windows forever.
        for warmup in [18_000_000_000_000_000_000, usize::MAX] {
            let schedule = WindowSchedule::new(warmup);
            assert!(schedule.ends.len() <= usize::BITS as usize, "{warmup}");
            assert!(schedule.ends.windows(2).all(|w| w[0] < w[1]), "{warmup}");
            assert_eq!(*schedule.ends.last().unwrap(), warmup - TERM_BUFFER);
        }
    }

    #[test]
    fn short_warmup_uses_proportional_buffers() {
        let schedule = WindowSchedule::new(100);
        assert_eq!(schedule.start, 15);
        assert_eq!(*schedule.ends.last().unwrap(), 90);
        assert!(WindowSchedule::new(10).ends.is_empty());
    }

    #[test]
    fn regularized_variance_shrinks_towards_small_constant() {
        let mut est = VarianceEstimator::new(1);
        for x in [1.0, 3.0, 5.0, 7.0, 9.0] {
            est.add(&[x]);
        }
        // var = 10, n = 5: 0.5·10 + 0.5·1e-3.
        assert!((est.regularized_variance()[0] - (5.0 + 0.0005)).abs() < 1e-12);
    }
}
