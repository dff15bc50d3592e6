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

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::sampler::{ChainResult, DrawSink, Method, NutsSettings, Run, SampleConfig, sample};
use crate::{Model, Result};

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
        let (gradients, iterations) = self.run.chains.iter().fold((0, 0), |(g, i), c| {
            let (w, s) = (&c.warmup_evaluations, &c.sampling_evaluations);
            (
                g + w.exact_gradients + s.exact_gradients,
                i + w.iterations + s.iterations,
            )
        });
        gradients as f64 / iterations as f64
    }
}

/// A sink that notes when each kept draw was made (the bench saves no warmup draws, so every
/// row is a kept one).
struct Clock {
    start: Instant,
    finished: Arc<Mutex<Vec<f64>>>,
}

impl DrawSink for Clock {
    fn adaptation(&mut self, _: f64, _: &[f64]) -> Result<()> {
        Ok(())
    }
    fn draw(&mut self, _: &[f64]) -> Result<()> {
        let at = self.start.elapsed().as_secs_f64();
        self.finished
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(at);
        Ok(())
    }
    fn finish(&mut self, _: &ChainResult) -> Result<()> {
        Ok(())
    }
}

/// Runs `chains` NUTS chains of `warmup + draws` iterations on `model`, all at once, each from a
/// uniform draw on `(−2, 2)` per coordinate as Stan starts.
pub fn run_nuts(
    model: &dyn Model,
    chains: usize,
    warmup: usize,
    draws: usize,
    seed: u64,
) -> Result<NutsRun> {
    let config = SampleConfig {
        chains,
        warmup,
        draws,
        seed,
        method: Method::Nuts(NutsSettings::default()),
        ..SampleConfig::default()
    };
    let start = Instant::now();
    let times: Vec<Arc<Mutex<Vec<f64>>>> = (0..chains)
        .map(|_| Arc::new(Mutex::new(Vec::with_capacity(draws))))
        .collect();
    let sinks = times
        .iter()
        .map(|finished| {
            Box::new(Clock {
                start,
                finished: Arc::clone(finished),
            }) as Box<dyn DrawSink>
        })
        .collect();
    let run = sample(model, &config, sinks, &|_, _| {}, None)?;
    let finished = times
        .iter()
        .map(|t| std::mem::take(&mut *t.lock().unwrap_or_else(PoisonError::into_inner)))
        .collect();
    Ok(NutsRun { run, finished })
}
