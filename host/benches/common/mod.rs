//! What the host's benches share.

use std::time::{Duration, Instant};

/// The fastest of `reps` runs of `f`: the least disturbed by other processes.
pub fn best_of(reps: usize, mut f: impl FnMut()) -> Duration {
    (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .expect("at least one repetition")
}
