//! The general-purpose sampler the all-in row is measured against, in the same process: NUTS
//! from `nuts-rs`, the Rust crate that nutpie wraps, with nutpie's protocol (diagonal mass matrix
//! adapted from draws and gradients, 4 chains × (1000 warmup + 5000 draws), all at once) but
//! Stan's step size, fixed after warmup where nutpie jitters it.
//!
//! It is the sampler's own NUTS ([`Method::Nuts`], what `shmc sample --method nuts` runs) through
//! the same driver as the other rows, calling the model's own fused `U`/`∇U` kernel: nutpie's
//! sampler with this project's gradient, a harder baseline than nutpie itself, which evaluates a
//! compiled PyMC graph (on the LR simulation that gradient costs ~3× ours). Run on the same
//! machine in the same process, its ratio to the all-in row does not depend on which machine the
//! bench runs on.

use std::time::Instant;

use super::figures::{Recorder, take};
use shmc::sampler::{DrawSink, MassMatrix, Method, NutsSettings, Run, SampleConfig, sample};
use shmc::{Model, Result};

/// What a NUTS run left: the run itself, and when each kept draw was made.
#[derive(Clone, Debug)]
pub struct NutsRun {
    /// The chains' kept draws and costs.
    pub run: Run,
    /// `finished[chain][i]`: seconds from the start until kept draw `i` was made, so that the
    /// time to any number of draws can be read off after the run.
    pub finished: Vec<Vec<f64>>,
}

impl NutsRun {
    /// Each chain's kept draws of parameter `p`, in chain order.
    pub fn series(&self, p: usize) -> Vec<&[f64]> {
        self.run.series(p)
    }

    /// Gradient evaluations per iteration, warmup included.
    pub fn gradients_per_draw(&self) -> f64 {
        let e = self.run.evaluations();
        e.exact_gradients as f64 / e.iterations as f64
    }
}

/// Runs `chains` NUTS chains of `warmup + draws` iterations on `model` with mass matrix
/// `metric`, all at once, each from a uniform draw on `(−2, 2)` per coordinate as Stan starts
/// (in the Laplace approximation's coordinates with its metric).
pub fn run_nuts(
    model: &dyn Model,
    metric: MassMatrix,
    chains: usize,
    (warmup, draws): (usize, usize),
    seed: u64,
) -> Result<NutsRun> {
    let config = SampleConfig {
        chains,
        warmup,
        draws,
        seed,
        metric,
        method: Method::Nuts(NutsSettings::default()),
        ..SampleConfig::default()
    };
    let start = Instant::now();
    let (sinks, handles): (Vec<Box<dyn DrawSink>>, Vec<_>) = (0..chains)
        .map(|_| {
            let (recorder, handle) = Recorder::new(start, 0);
            (Box::new(recorder) as Box<dyn DrawSink>, handle)
        })
        .unzip();
    let run = sample(model, &config, sinks, &|_, _| {}, None)?;
    let finished = handles.iter().map(|h| take(h).finished).collect();
    Ok(NutsRun { run, finished })
}
