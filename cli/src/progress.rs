//! Per-chain progress bars on stderr, shown only on a terminal, unless quiet, and only once a
//! run has lasted a second (short runs stay silent).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bars of a run.
pub struct Progress {
    multi: MultiProgress,
    bars: Vec<ProgressBar>,
    start: Instant,
    enabled: bool,
    shown: AtomicBool,
}

impl Progress {
    /// Bars for `chains` chains of `total` iterations each.
    pub fn new(chains: usize, total: usize, quiet: bool) -> Self {
        let enabled = !quiet && std::io::stderr().is_terminal();
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::hidden());
        let style = ProgressStyle::with_template(
            "chain {prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed} elapsed, {eta} left)",
        )
        .expect("static template")
        .progress_chars("=> ");
        let bars = (1..=chains)
            .map(|c| {
                let bar = multi.add(ProgressBar::new(total as u64));
                bar.set_style(style.clone());
                bar.set_prefix(c.to_string());
                bar
            })
            .collect();
        Self {
            multi,
            bars,
            start: Instant::now(),
            enabled,
            shown: AtomicBool::new(false),
        }
    }

    /// Records that `chain` (1-based) finished `done` iterations, of which `warmup` are warmup.
    pub fn update(&self, chain: usize, done: usize, warmup: usize) {
        if !self.enabled {
            return;
        }
        if !self.shown.load(Ordering::Relaxed) && self.start.elapsed().as_secs_f64() > 1.0 {
            self.shown.store(true, Ordering::Relaxed);
            self.multi.set_draw_target(ProgressDrawTarget::stderr());
        }
        if let Some(bar) = self.bars.get(chain - 1) {
            bar.set_position(done as u64);
            if done == warmup + 1 || done == 1 {
                bar.set_message(if done <= warmup { "warmup" } else { "sampling" });
            }
        }
    }

    /// Removes the bars.
    pub fn finish(&self) {
        for bar in &self.bars {
            bar.finish_and_clear();
        }
    }
}
