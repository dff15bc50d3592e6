//! What a chain saves so that a killed or interrupted run can go on where it stopped, and the
//! draws it goes on to make are the ones an uninterrupted run makes, bit for bit.
//!
//! A chain that has finished warmup saves a [`Checkpoint`] through its sink: once when warmup
//! ends, then about every [`EVERY`] of sampling, when it is interrupted and when it finishes.
//! It holds everything the next iteration depends on: the position with the `U`, gradient and
//! surrogate value cached there (saved, not computed again: a fused and a value-only evaluation
//! may differ in the last bit), the random stream's state, the adapted step size, metric
//! and trajectory lengths, whether the surrogate proposes, and the counts and times so far. The
//! fitted surrogate is saved beside it once, in its own file format, which rebuilds it bit for
//! bit. A surrogate precomputed before sampling is not saved: the run precomputes it again,
//! identically.
//!
//! A chain killed during warmup has no checkpoint: it starts again from its first iteration,
//! and being seeded, makes the same draws.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};
use shmc_core::{Potential, Steps};

use super::learning::Recorder;
use super::work::RiemannianReport;
use crate::sampler::proposer::{Collapse, SurrogateReport};
use crate::sampler::transitions::Chosen;
use crate::sampler::{Evaluations, PhaseReport, SampleConfig};
use crate::surrogates::{Surrogate, exact_floats};

/// How often a sampling chain saves its checkpoint: a killed run makes again at most this much
/// of its work when resumed.
pub const EVERY: Duration = Duration::from_secs(1);

/// How often, at most, [`Due`] reads the clock once iterations are cheap.
const LOOK_EVERY: Duration = Duration::from_millis(5);

/// The most iterations [`Due`] lets pass between two reads of the clock.
const MOST_STRIDE: u32 = 1 << 12;

/// When a sampling chain's next checkpoint is due ([`EVERY`] after the last), found without
/// reading the clock every iteration: a read costs some 20 ns in a virtual machine, a tenth
/// of a whole iteration of a cheap model (grid HMC on a 2-D posterior). The clock is read every
/// `stride` iterations; the stride doubles while reads come less than [`LOOK_EVERY`] apart (up
/// to [`MOST_STRIDE`]) and drops to 1 when one comes later, so a model whose iterations take
/// milliseconds still reads it every iteration, and a checkpoint is late by at most about
/// [`LOOK_EVERY`] (by one stride's iterations, once, if they suddenly slow down).
#[derive(Clone, Copy, Debug)]
pub(super) struct Due {
    /// When the latest checkpoint was saved.
    saved_at: Instant,
    /// When the clock was last read.
    looked_at: Instant,
    /// Iterations since then.
    since: u32,
    /// Iterations between reads.
    stride: u32,
}

impl Due {
    /// A checkpoint just saved at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Self {
            saved_at: now,
            looked_at: now,
            since: 0,
            stride: 1,
        }
    }

    /// A checkpoint was saved at `now`.
    pub(super) fn saved(&mut self, now: Instant) {
        self.saved_at = now;
        self.looked_at = now;
        self.since = 0;
    }

    /// Counts an iteration; whether the next checkpoint is due, asking `now` for the time only
    /// every `stride` iterations. Inlined into the sampling loop: most iterations only count,
    /// which costs less than the call would.
    #[inline]
    pub(super) fn tick(&mut self, now: impl FnOnce() -> Instant) -> bool {
        self.since += 1;
        if self.since < self.stride {
            return false;
        }
        self.look(now())
    }

    /// The clock read `now` at the end of a stride: the next stride, and whether the next
    /// checkpoint is due.
    #[inline(never)]
    fn look(&mut self, now: Instant) -> bool {
        self.stride = if now.duration_since(self.looked_at) < LOOK_EVERY {
            (self.stride * 2).min(MOST_STRIDE)
        } else {
            1
        };
        self.looked_at = now;
        self.since = 0;
        now.duration_since(self.saved_at) >= EVERY
    }
}

/// A chain's state between two iterations after warmup.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The chain's number, from 1.
    pub chain: usize,
    /// Iterations done, warmup included.
    pub done: usize,
    /// Kept draws made (and written before this checkpoint).
    pub kept: usize,
    /// Whether the chain had finished sampling (all its draws, or the run's target ESS).
    pub finished: bool,
    /// Where the chain is.
    #[serde(with = "exact_floats::vec")]
    pub position: Vec<f64>,
    /// `U` there.
    #[serde(with = "exact_floats")]
    pub potential: f64,
    /// The proposal's gradient there (NaN where RMHMC left it unknown).
    #[serde(with = "exact_floats::vec")]
    pub gradient: Vec<f64>,
    /// The surrogate's `Ũ` there, while it proposes (its own acceptance is measured from it).
    #[serde(with = "exact_floats")]
    pub proposal_value: f64,
    /// Where the chain started (a metric frozen at the start is computed there again).
    #[serde(with = "exact_floats::vec")]
    pub start: Vec<f64>,
    /// The random stream, as the next iteration finds it.
    pub rng: Pcg64,
    /// HMC's adapted step size.
    #[serde(with = "exact_floats")]
    pub step_size: f64,
    /// The adapted diagonal of the inverse mass matrix.
    #[serde(with = "exact_floats::vec")]
    pub inv_mass: Vec<f64>,
    /// The trajectory lengths sampling uses.
    #[serde(with = "StepsRecord")]
    pub steps: Steps,
    /// Whether the chain's fitted surrogate was saved beside the checkpoint (it proposes with
    /// it).
    pub saved_surrogate: bool,
    /// Whether the guard sent the chain back to exact HMC for good.
    pub exact_for_good: bool,
    /// Why it did.
    pub collapse: Option<Collapse>,
    /// The surrogate's cost and fit.
    pub surrogate: Option<SurrogateReport>,
    /// RMHMC's step size and work.
    pub riemannian: Option<RiemannianReport>,
    /// Evaluations during warmup.
    pub warmup_evaluations: Evaluations,
    /// Evaluations while making kept draws.
    pub sampling_evaluations: Evaluations,
    /// Divergent transitions during warmup.
    pub warmup_divergences: usize,
    /// Each phase's iterations and time so far.
    pub phases: Vec<PhaseReport>,
    /// Seconds spent fitting and learning.
    #[serde(with = "exact_floats")]
    pub training_seconds: f64,
    /// Seconds spent in warmup.
    #[serde(with = "exact_floats")]
    pub warmup_seconds: f64,
    /// The surrogate's learning curve so far (absent from checkpoints written before shmc
    /// recorded it: a resumed chain's curve then starts at the checkpoint).
    #[serde(default)]
    pub learning: Option<Recorder>,
    /// The states the surrogate had learned from (fixed after warmup), for a surrogate method.
    #[serde(default)]
    pub learned: Option<usize>,
    /// The surrogate transitions fixed when warmup ended (`auto`'s choice among them), so that
    /// a resumed chain goes on with the same kernel (absent from checkpoints written before
    /// shmc had `W:S` or `auto`: their chains ran one `k` throughout, which the settings give).
    #[serde(default)]
    pub transitions: Option<Chosen>,
}

impl Checkpoint {
    /// The first thing wrong with this checkpoint for a model of `dim` parameters, as
    /// `field: what`, or `None`. A chain takes its checkpoint on trust once it runs: a NaN
    /// position makes NaN draws, a negative step size runs backwards, and neither stops it. So a
    /// checkpoint is read like any input: a finite position, start and `U` of the model's
    /// length, a gradient of that length (NaN throughout where RMHMC left it unknown), a
    /// positive finite step size, metric and trajectory lengths.
    pub fn problem(&self, dim: usize) -> Option<String> {
        let lengths = [
            ("position", self.position.len()),
            ("gradient", self.gradient.len()),
            ("start", self.start.len()),
            ("inv_mass", self.inv_mass.len()),
        ];
        if let Some((field, n)) = lengths.iter().find(|(_, n)| *n != dim) {
            return Some(format!(
                "{field}: {n} entries for a model of {dim} parameters"
            ));
        }
        let finite = |x: f64| x.is_finite();
        let positive = |x: f64| x.is_finite() && x > 0.0;
        let unknown = self.gradient.iter().all(|g| g.is_nan());
        let riemannian = self.riemannian.map(|r| r.step_size);
        entry("position", &self.position, finite)
            .or_else(|| entry("start", &self.start, finite))
            .or_else(|| scalar("potential", Some(self.potential), finite))
            .or_else(|| (!unknown).then(|| entry("gradient", &self.gradient, finite))?)
            .or_else(|| scalar("step_size", Some(self.step_size), positive))
            .or_else(|| entry("inv_mass", &self.inv_mass, positive))
            .or_else(|| scalar("riemannian.step_size", riemannian, positive))
            .or_else(|| steps_problem(self.steps))
            .or_else(|| {
                let zero = self
                    .transitions
                    .filter(|c| c.warmup == 0 || c.sampling == 0)?;
                Some(format!(
                    "transitions: {} has a k of 0 (each is at least 1)",
                    zero.setting()
                ))
            })
    }

    /// Why this checkpoint of chain `chain` cannot be this run's (`config`'s), if it cannot:
    /// another chain's, counts that do not add up (iterations other than warmup plus kept
    /// draws, more kept draws than the run makes), a metric of another dimension `dim`, or a
    /// chain marked finished short of its draws in a run with no target ESS to stop it early.
    /// Read before any file is cut back to the checkpoint, so a refusal leaves them as they were.
    pub fn run_problem(&self, chain: usize, dim: usize, config: &SampleConfig) -> Option<String> {
        let (warmup, draws) = (config.warmup, config.draws);
        if self.chain != chain
            || self.kept > draws
            || self.done != warmup.saturating_add(self.kept)
            || self.inv_mass.len() != dim
        {
            return Some(format!(
                "chain {chain}: its checkpoint (chain {}, {} iterations, {} kept draws, a metric \
                 of {} entries) does not fit this run ({warmup} warmup iterations, {draws} \
                 draws, {dim} parameters)",
                self.chain,
                self.done,
                self.kept,
                self.inv_mass.len()
            ));
        }
        if self.finished && self.kept < draws && config.target_ess.is_none() {
            return Some(format!(
                "chain {chain}: its checkpoint says the chain finished after {} of its {draws} \
                 draws, which only a target ESS does, and this run has none",
                self.kept
            ));
        }
        None
    }

    /// Whether `model`'s `U` at the saved position is the saved one (the state was saved, not
    /// computed again, so only the last bits of a fused and a value-only evaluation may differ);
    /// `field: what` if not: the checkpoint is another model's or data set's, or was edited.
    /// One evaluation of `U`.
    pub fn potential_problem(&self, model: &dyn Potential) -> Option<String> {
        let u = model.value(&self.position);
        let close = (u - self.potential).abs() <= 1e-9 * u.abs().max(1.0);
        (!close).then(|| {
            format!(
                "potential: {:?} is not the model's U at the saved position ({u:?}): the \
                 checkpoint is another model's or data set's, or was edited",
                self.potential
            )
        })
    }
}

/// What is wrong with the first entry of `xs` that is not `ok`, if any.
fn entry(field: &str, xs: &[f64], ok: impl Fn(f64) -> bool) -> Option<String> {
    let i = xs.iter().position(|&x| !ok(x))?;
    Some(format!("{field}[{i}]: {:?} is {}", xs[i], wanted(&ok)))
}

/// What is wrong with `x`, if it is there and not `ok`.
fn scalar(field: &str, x: Option<f64>, ok: impl Fn(f64) -> bool) -> Option<String> {
    let x = x.filter(|&x| !ok(x))?;
    Some(format!("{field}: {x:?} is {}", wanted(&ok)))
}

/// How a value fails `ok`: the two checks differ in whether 1 or -1 passes.
fn wanted(ok: &impl Fn(f64) -> bool) -> &'static str {
    if ok(-1.0) {
        "not a finite number"
    } else {
        "not a positive number"
    }
}

/// What is wrong with trajectory lengths `steps`, if anything.
fn steps_problem(steps: Steps) -> Option<String> {
    let (low, high) = match steps {
        Steps::Fixed(n) | Steps::Jittered(n) => (n, n),
        Steps::Between(low, high) => (low, high),
    };
    (low == 0 || low > high).then(|| format!("steps: {steps:?} is no range of leapfrog steps"))
}

/// A chain to resume: its checkpoint, the kept rows written up to it (sampler columns then
/// parameters, as [`crate::sampler::DrawSink::draw`] received them), and its saved surrogate.
#[derive(Clone, Debug)]
pub struct Resumed {
    /// The chain's state.
    pub checkpoint: Checkpoint,
    /// The file it was read from, for what a check of it says.
    pub path: PathBuf,
    /// The kept rows before the checkpoint.
    pub rows: Vec<Vec<f64>>,
    /// The fitted surrogate the chain proposed with, if it saved one.
    pub surrogate: Option<Arc<dyn Surrogate>>,
}

/// `Steps` as the checkpoint writes it (the core has no serde).
#[derive(Serialize, Deserialize)]
#[serde(remote = "Steps")]
pub(crate) enum StepsRecord {
    Fixed(u32),
    Jittered(u32),
    Between(u32, u32),
}

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::*;
    use crate::random::chain_rng;

    /// Runs [`Due`] over iterations of `cost` each from a checkpoint at time 0 until the next is
    /// due (at most `most` iterations): when it came due, and how often it read the clock.
    fn first_due(cost: Duration, most: u32) -> (Option<Duration>, u32) {
        let start = Instant::now();
        let mut due = Due::new(start);
        let (mut elapsed, mut reads) = (Duration::ZERO, 0);
        for _ in 0..most {
            elapsed += cost;
            if due.tick(|| {
                reads += 1;
                start + elapsed
            }) {
                return (Some(elapsed), reads);
            }
        }
        (None, reads)
    }

    /// Cheap iterations read the clock rarely and are checkpointed at most [`LOOK_EVERY`] late;
    /// slow ones read it every iteration and are checkpointed at the first iteration past
    /// [`EVERY`]; in between, on time too.
    #[test]
    fn checkpoints_come_on_time_without_reading_the_clock_every_iteration() {
        let cheap = Duration::from_nanos(300);
        let iterations = (EVERY.as_nanos() / cheap.as_nanos()) as u32 * 2;
        let (when, reads) = first_due(cheap, iterations);
        let when = when.expect("a checkpoint within two seconds of cheap iterations");
        assert!(
            when >= EVERY && when <= EVERY + LOOK_EVERY + cheap * MOST_STRIDE,
            "{when:?}"
        );
        assert!(reads < 2000, "{reads} reads of the clock");
        let slow = Duration::from_millis(7);
        let (when, reads) = first_due(slow, 1000);
        assert_eq!(
            when,
            Some(slow * 143),
            "the first multiple of 7 ms from 1 s"
        );
        assert_eq!(reads, 143);
        for cost in [Duration::from_micros(40), Duration::from_micros(900)] {
            let (when, _) = first_due(cost, 10_000_000);
            let when = when.expect("a checkpoint");
            assert!(
                when >= EVERY && when <= EVERY + LOOK_EVERY * 2,
                "{cost:?}: {when:?}"
            );
        }
    }

    /// The random stream reads back as it was written, whatever its 128-bit state.
    #[test]
    fn the_random_stream_round_trips_through_json() {
        for (seed, stream) in [(1, 1), (4, 1), (4, 2), (u64::MAX, 7)] {
            let mut rng = chain_rng(seed, stream);
            for _ in 0..1000 {
                rng.next_u64();
                let text = serde_json::to_string(&rng).unwrap();
                let mut back: rand_pcg::Pcg64 = serde_json::from_str(&text).unwrap();
                assert_eq!(back.next_u64(), rng.clone().next_u64(), "{text}");
            }
        }
    }
}
