//! SGLD, stochastic-gradient Langevin dynamics (Welling & Teh 2011), the baseline the VHMC
//! paper compares against, as one chain of the driver (like NUTS: its own loop, the same
//! outlets, so files, progress, interruption and the target ESS work unchanged).
//!
//! Iteration `t` (from 0, warmup included) draws a minibatch `B` of `n` rows without
//! replacement and moves
//!
//! `q ← q − (ε_t/2) ĝ(q) + √ε_t ξ`, `ξ ~ N(0, I)`, `ĝ = (N/n) Σ_{i∈B} ∇ℓᵢ(q) + ∇(prior)`,
//!
//! with `ε_t = a (b + t)^(−γ)`. There is no Metropolis–Hastings step (it would need the exact
//! `U`, a pass over all rows), so the draws carry the discretization's and the gradient
//! noise's bias: APPROXIMATE inference, labelled so wherever the method prints. The bias
//! vanishes only as `ε_t → 0`, where the chain also stops moving.
//!
//! Sampler columns: `accept_stat__` 1 (every step is taken), `stepsize__` `ε_t`,
//! `treedepth__` 0, `n_leapfrog__` 1, `divergent__` 0; `lp__` and `energy__` would each need
//! the exact `U` and are NaN. No exact gradient is counted: a minibatch gradient costs `n/N`
//! of one. A chain whose state stops being finite (a step size too large for the posterior)
//! fails with an error naming the iteration. Warmup rows are the burn-in and are reported as
//! the exact-warmup phase (there is no surrogate); nothing adapts.

use std::sync::atomic::Ordering;
use std::time::Instant;

use rand_pcg::Pcg64;
use shmc_core::Potential;
use shmc_core::random::{fill_standard_normal, uniform_below};

use super::chain::start::initial_state;
use super::chain::{Leave, Outlets};
use super::config::SampleConfig;
use super::method::SgldSettings;
use super::target_ess::Verdict;
use super::{ChainResult, DrawSink, InverseMetric, Phase, PhaseReport, SAMPLER_COLUMNS};
use crate::random::chain_rng;
use crate::row_sum::{Need, RowSum};
use crate::{Error, Model, Result};

/// Runs chain `number` (1-based) of SGLD with `sgld` on `model` (a row-sum model: the driver's
/// validation refuses others) to completion, until the run's target ESS is reached, or until it
/// is interrupted. The start is drawn as HMC's is, from the chain's own stream, which then
/// draws the minibatches and the noise: the same seed gives the same draws.
pub(super) fn run_chain<M: Model + ?Sized>(
    model: &M,
    config: &SampleConfig,
    sgld: &SgldSettings,
    number: usize,
    outlets: Outlets<'_>,
) -> Result<ChainResult> {
    let sum = model
        .row_sum()
        .ok_or_else(SgldSettings::refusal_without_rows)?;
    let potential: &(dyn Potential + Sync) = &model;
    let mut rng = chain_rng(config.seed, number);
    let start = initial_state(potential, &config.init, number, &mut rng)?;
    let mut q = start.position.as_slice().to_vec();
    let d = q.len();
    let mut langevin = Langevin::new(sum, sgld.batch, d);
    let names = model.parameter_names().len();
    let mut row = Vec::with_capacity(SAMPLER_COLUMNS.len() + names);
    let mut result = ChainResult::new(number, names, config.draws);
    let _leave = Leave(outlets.monitor, number);
    let total = config.warmup + config.draws;
    let mut done = 0;
    let mut clock = Instant::now();
    if config.warmup == 0 {
        outlets
            .sink
            .adaptation(sgld.step_size(0), &InverseMetric::Diagonal(vec![1.0; d]))?;
    }
    while done < total {
        if outlets.interrupt.load(Ordering::Relaxed) {
            result.interrupted = true;
            break;
        }
        let warmup = done < config.warmup;
        let eps = sgld.step_size(done);
        langevin.step(&mut q, eps, &mut rng);
        if q.iter().any(|x| !x.is_finite()) {
            return Err(left_finite_numbers(number, done, eps));
        }
        let counts = if warmup {
            &mut result.warmup_evaluations
        } else {
            &mut result.sampling_evaluations
        };
        counts.iterations += 1;
        if !warmup || config.save_warmup {
            row.clear();
            row.extend_from_slice(&[f64::NAN, 1.0, eps, 0.0, 1.0, 0.0, f64::NAN]);
            model.write_parameters(&q, &mut row);
            outlets.sink.draw(&row)?;
            if !warmup {
                result.record(&row);
            }
        }
        done += 1;
        (outlets.progress)(number, done);
        if done == config.warmup {
            result.warmup_seconds = lap(&mut result, Phase::ExactWarmup, done, &mut clock);
            outlets
                .sink
                .adaptation(sgld.step_size(done), &InverseMetric::Diagonal(vec![1.0; d]))?;
        }
        if !warmup
            && let Some(monitor) = outlets.monitor
            && result.kept().is_multiple_of(monitor.every())
            && monitor.block_done(number, &result, outlets.interrupt) == Verdict::Stop
        {
            break;
        }
    }
    finish(result, config, sgld, done, &mut clock, d, outlets.sink)
}

/// The error of a chain whose state stopped being finite at iteration `done`, taken with step
/// size `eps`.
fn left_finite_numbers(number: usize, done: usize, eps: f64) -> Error {
    Error::invalid(format!(
        "chain {number}: sgld left the finite numbers at iteration {done} (step size \
         {eps:.3e}): the step size is too large for this posterior"
    ))
}

/// Ends a chain that stopped after `done` iterations: times the phase it stopped in (since
/// `clock`), records the step size it would take next and its unit metric, and hands the result
/// to the sink.
fn finish(
    mut result: ChainResult,
    config: &SampleConfig,
    sgld: &SgldSettings,
    done: usize,
    clock: &mut Instant,
    d: usize,
    sink: &mut dyn DrawSink,
) -> Result<ChainResult> {
    if done < config.warmup {
        result.warmup_seconds = lap(&mut result, Phase::ExactWarmup, done, clock);
    } else {
        let kept = done - config.warmup;
        result.sampling_seconds = lap(&mut result, Phase::Sampling, kept, clock);
    }
    result.step_size = sgld.step_size(done);
    result.inv_mass = vec![1.0; d];
    sink.finish(&result)?;
    Ok(result)
}

/// The Langevin dynamics of one chain: the minibatches drawn from the row sum, and the
/// buffers a step reuses (no allocation per iteration).
struct Langevin<'a> {
    sum: &'a dyn RowSum,
    /// All the rows: a partial Fisher–Yates shuffle of this permutation draws each minibatch
    /// without replacement in O(n).
    order: Vec<usize>,
    /// The minibatch size `n` (at most the rows `N`).
    batch: usize,
    /// `N/n`, the minibatch gradient's weight.
    scale: f64,
    grad: Vec<f64>,
    noise: Vec<f64>,
}

impl<'a> Langevin<'a> {
    /// The dynamics on `sum` with minibatches of `batch` rows (all of them if fewer), in `d`
    /// dimensions.
    fn new(sum: &'a dyn RowSum, batch: usize, d: usize) -> Self {
        let rows = sum.rows();
        let batch = batch.min(rows);
        Self {
            sum,
            order: (0..rows).collect(),
            batch,
            scale: rows as f64 / batch as f64,
            grad: vec![0.0; d],
            noise: vec![0.0; d],
        }
    }

    /// One move `q ← q − (ε/2) ĝ(q) + √ε ξ`, on a minibatch drawn from `rng` before the noise.
    fn step(&mut self, q: &mut [f64], eps: f64, rng: &mut Pcg64) {
        let rows = self.order.len();
        for k in 0..self.batch {
            let j = k + uniform_below(rng, (rows - k) as u64) as usize;
            self.order.swap(k, j);
        }
        self.sum
            .rows_gradient(q, &self.order[..self.batch], &mut self.grad);
        self.grad.iter_mut().for_each(|g| *g *= self.scale);
        self.sum.finish(q, Need::Gradient, &mut 0.0, &mut self.grad);
        fill_standard_normal(rng, &mut self.noise);
        let root = eps.sqrt();
        for ((x, g), z) in q.iter_mut().zip(&self.grad).zip(&self.noise) {
            *x += -0.5 * eps * g + root * z;
        }
    }
}

/// Records a phase of `iterations` that began at `clock`, restarts the clock, and returns the
/// phase's seconds.
fn lap(result: &mut ChainResult, phase: Phase, iterations: usize, clock: &mut Instant) -> f64 {
    let seconds = clock.elapsed().as_secs_f64();
    result.phases.push(PhaseReport {
        phase,
        iterations,
        seconds,
    });
    *clock = Instant::now();
    seconds
}
