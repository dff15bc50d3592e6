//! One chain from start to finish, in the order it lives:
//!
//! 1. **start** ([`start`]): a finite initial point, the method's surrogate machinery, Stan's
//!    first step size;
//! 2. **exact warmup**: exact HMC adapting the step size and metric ([`adaptation`]) while the
//!    method collects states, until its surrogate is fitted and proposes (RMHMC: its own
//!    kernel adapting its step size, the whole warmup);
//! 3. **training**: the fits and online updates, timed apart from the iterations they end;
//! 4. **surrogate warmup**: the rest of warmup on surrogate trajectories judged by the exact
//!    `U`, adapting on the surrogate's own acceptance ([`leapfrog`]), back to exact HMC for
//!    good if the exact acceptance collapses ([`guard`]);
//! 5. **sampling**: the kept draws, with step size, metric, trajectory lengths and surrogate
//!    fixed, until the draws are done or every chain together reaches the target ESS.
//!
//! Each transition runs a [`kernel::Kernel`], chosen for the method when the chain starts: one
//! while the chain is exact and, for some methods, another while the surrogate proposes. HMC's
//! leapfrog ([`leapfrog`]), NUTS on the surrogate with delayed acceptance ([`delayed_nuts`]),
//! `k` HMC transitions on the surrogate per exact judgement ([`surrogate_transitions`]), or
//! RMHMC's generalized leapfrog under a position-dependent metric ([`generalized`]: RMHMC
//! throughout; RNS-RMHMC once its surrogate proposes). The chain around the kernel counts,
//! writes rows, adapts, learns and checkpoints.
//!
//! Each row goes to the chain's sink as soon as it is made, so an interrupted run keeps every
//! finished draw. After warmup the chain saves a checkpoint through its sink from time to time
//! ([`super::checkpoint`]); a chain resumed from one skips to sampling and goes on exactly as it
//! would have.
//!
//! NUTS is not one of these phases: nuts-rs adapts and transitions in its own loop (the
//! sampler's `nuts` module), which shares only the start ([`start`]) and the outlets. It saves
//! no checkpoint: a resumed NUTS chain starts again, with the same draws.

mod adaptation;
pub mod checkpoint;
mod delayed_nuts;
mod generalized;
mod guard;
mod kernel;
mod leapfrog;
mod learning;
mod mlda;
mod registry;
pub(super) mod start;
mod surrogate_transitions;
#[cfg(test)]
mod test_targets;
mod work;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rand_pcg::Pcg64;
use shmc_core::{DiagonalMetric, Dyn, Exact, Hmc, HmcConfig, Potential, State, Transition};

pub use delayed_nuts::{MAX_DEPTH, tree_depth};
pub use guard::{Collapse, WINDOW as COLLAPSE_WINDOW};
pub use learning::Recorder;
pub use work::{KernelWork, RiemannianReport};

use self::adaptation::Adaptation;
use self::checkpoint::{Checkpoint, Due, Resumed};
use self::guard::Guard;
use self::kernel::{Ctx, Outcome};
use self::registry::Kernels;
use super::config::{Init, SampleConfig};
use super::fitted::Precomputed;
use super::method::StepSize;
use super::proposer::{ForResume, Proposer, SurrogateReport};
use super::target_ess::{EssMonitor, Verdict};
use super::warmup::initial_step_size;
use super::{ChainResult, DrawSink, InverseMetric, Phase, SAMPLER_COLUMNS};
use crate::random::chain_rng;
use crate::{Error, Model, Result};

/// How a chain proposes at the moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Exact HMC.
    Exact,
    /// The surrogate proposes (if the method has one that is ready).
    Surrogate,
}

/// Where a chain's rows and progress go, and what may stop it early.
pub struct Outlets<'b> {
    /// The chain's rows.
    pub sink: &'b mut dyn DrawSink,
    /// `progress(chain, iterations_done)` after every iteration.
    pub progress: &'b (dyn Fn(usize, usize) + Sync),
    /// Set to stop every chain after its current iteration.
    pub interrupt: &'b AtomicBool,
    /// The run's target ESS, checked by all chains together, if there is one.
    pub monitor: Option<&'b EssMonitor>,
}

/// Runs chain `chain` (1-based) to completion or until it is interrupted, proposing with
/// `precomputed` if a surrogate was fitted before sampling; from `resumed`'s checkpoint if
/// given.
pub fn run_chain<M: Model + ?Sized>(
    model: &M,
    config: &SampleConfig,
    precomputed: Option<&Precomputed>,
    chain: usize,
    outlets: Outlets<'_>,
    resumed: Option<&Resumed>,
) -> Result<ChainResult> {
    let exact: &(dyn Potential + Sync) = &model;
    // A resumed chain proposes with the surrogate it saved, as with one fitted before sampling.
    let saved = resumed
        .and_then(|r| r.surrogate.as_ref())
        .map(|surrogate| Precomputed {
            surrogate: Arc::clone(surrogate),
            evaluations: 0,
            seconds: 0.0,
            training: None,
            scale: f64::NAN,
            holdout_gradient_error: f64::NAN,
        });
    let precomputed = saved.as_ref().or(precomputed);
    let mut c = Chain::start(model, exact, config, precomputed, chain, outlets, resumed)?;
    c.exact_warmup()?;
    c.surrogate_warmup()?;
    c.end_warmup()?;
    c.sampling()?;
    c.finish()
}

/// Leaves the target-ESS check when dropped (chain `.1` of the run's monitor `.0`).
pub(super) struct Leave<'b>(pub(super) Option<&'b EssMonitor>, pub(super) usize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        if let Some(monitor) = self.0 {
            monitor.leave(self.1);
        }
    }
}

/// A chain's state between iterations.
struct Chain<'b, 'o, M: Model + ?Sized> {
    model: &'b M,
    exact: &'b (dyn Potential + Sync),
    config: &'b SampleConfig,
    number: usize,
    rng: Pcg64,
    state: State<Dyn>,
    metric: DiagonalMetric<Dyn>,
    hmc: Hmc<Dyn>,
    proposer: Option<Box<dyn Proposer + 'b>>,
    /// Whether the surrogate may propose (it does once it is fitted), or the guard sent the
    /// chain back to exact HMC.
    mode: Mode,
    /// `Ũ` at the current state, while the surrogate proposes (for its own acceptance).
    proposal_value: f64,
    /// HMC's adaptation of the step size and metric, for a method whose exact phase is HMC.
    adaptation: Option<Adaptation>,
    /// The method's transition kernels, exact and proposing.
    kernels: Kernels<'b>,
    /// Whether the latest transition ran the proposing kernel (the one its statistic adapts).
    ran_proposing: bool,
    guard: Guard,
    collapse: Option<Collapse>,
    /// The surrogate's acceptance against the states it had learned from.
    learning: Recorder,
    result: ChainResult,
    row: Vec<f64>,
    outlets: Outlets<'o>,
    /// Takes the chain out of the target-ESS check however it ends (an error or a panic
    /// included), so that the other chains never wait for it.
    _leave: Leave<'o>,
    /// Iterations done, warmup included.
    done: usize,
    /// Seconds spent fitting and learning, which the phase clocks leave out.
    training_seconds: f64,
    /// Where the chain started.
    start: Vec<f64>,
    /// When the next checkpoint is due.
    due: Due,
    /// Whether the chain was resumed from a checkpoint (its warmup is behind it).
    resumed: bool,
    /// Whether sampling is over (all draws made, or the target ESS reached).
    finished: bool,
    /// When and where sampling began, while it runs (a checkpoint counts it so far).
    sampling_clock: Option<(usize, Instant, f64)>,
    /// Whether the chain's fitted surrogate was saved with a checkpoint (by this run or the
    /// one it resumes).
    saved_surrogate: bool,
    /// The surrogate's report saved with a resumed chain's checkpoint: the proposer rebuilt
    /// from the saved surrogate knows nothing of how it was fitted.
    saved_report: Option<SurrogateReport>,
    /// The states the surrogate had learned from, saved with a resumed chain's checkpoint (the
    /// rebuilt proposer cannot tell either).
    saved_learned: Option<usize>,
}

impl<'b, 'o, M: Model + ?Sized> Chain<'b, 'o, M> {
    /// The initial point, the surrogate machinery (a method may move the random start to
    /// where it knows the posterior is), the method's kernels and the first step size; or the
    /// chain `resumed` left off.
    fn start(
        model: &'b M,
        exact: &'b (dyn Potential + Sync),
        config: &'b SampleConfig,
        precomputed: Option<&Precomputed>,
        number: usize,
        outlets: Outlets<'o>,
        resumed: Option<&Resumed>,
    ) -> Result<Self> {
        let dim = model.dim();
        let mut rng = chain_rng(config.seed, number);
        let metric = DiagonalMetric::new(nalgebra::DVector::from_element(dim, 1.0))?;
        let mut state = match resumed {
            Some(r) => start::restored_state(&r.checkpoint, dim)?,
            None => start::initial_state(exact, &config.init, number, &mut rng)?,
        };
        let proposer = start::proposer(
            &config.method,
            config.warmup,
            exact,
            state.position.as_slice(),
            precomputed,
        )?;
        if let (Init::Random { .. }, Some(phase), None) =
            (&config.init, proposer.as_deref(), resumed)
            && let Some(q) = phase.initial_position(&mut rng)
        {
            let moved = State::new(nalgebra::DVector::from_vec(q), &Exact(exact))?;
            if start::finite(&moved) {
                state = moved;
            }
        }
        let start = match resumed {
            Some(r) => r.checkpoint.start.clone(),
            None => state.position.as_slice().to_vec(),
        };
        let kernels = Kernels::for_method(model, config, &start, proposer.as_deref())?;
        let names = model.parameter_names().len();
        let hmc = Hmc::new(
            Dyn(dim),
            HmcConfig {
                step_size: 1.0,
                steps: config.steps,
                max_energy_error: config.max_energy_error,
            },
        )?;
        let mut chain = Self {
            model,
            exact,
            config,
            number,
            rng,
            state,
            metric,
            hmc,
            proposer,
            mode: Mode::Surrogate,
            proposal_value: f64::NAN,
            adaptation: None,
            kernels,
            ran_proposing: false,
            guard: Guard::default(),
            collapse: None,
            learning: Recorder::new(config.warmup),
            result: ChainResult::new(number, names, config.draws),
            row: Vec::with_capacity(SAMPLER_COLUMNS.len() + names),
            _leave: Leave(outlets.monitor, number),
            outlets,
            done: 0,
            training_seconds: 0.0,
            start,
            due: Due::new(Instant::now()),
            resumed: false,
            finished: false,
            sampling_clock: None,
            saved_surrogate: resumed.is_some_and(|r| r.checkpoint.saved_surrogate),
            saved_report: None,
            saved_learned: None,
        };
        match resumed {
            Some(resumed) => chain.restore(resumed)?,
            None => chain.begin()?,
        }
        Ok(chain)
    }

    /// Readies a new chain's first transition: what the state caches of the proposal, and for
    /// a method whose exact phase runs on the Euclidean step size, Stan's first step size, the
    /// surrogate's trajectory lengths for it and HMC's adaptation.
    fn begin(&mut self) -> Result<()> {
        if self.proposing() {
            self.refresh();
        }
        // RMHMC never runs HMC's leapfrog: it has no HMC step size or Euclidean metric to find.
        if !self.kernels.euclidean() {
            return Ok(());
        }
        let step_size = match self.config.step_size {
            StepSize::Fixed(eps) => eps,
            StepSize::Adapt { .. } => self.find_step_size(1.0),
        };
        self.hmc.config.step_size = step_size;
        if self.proposing() {
            self.hmc.config.steps = self.surrogate_steps();
        }
        let dim = self.model.dim();
        self.adaptation = Adaptation::new(self.config, step_size, dim, self.proposing())?;
        Ok(())
    }

    /// Exact HMC until the surrogate proposes (for exact HMC, the whole warmup; for RMHMC, its
    /// own kernel the whole warmup).
    fn exact_warmup(&mut self) -> Result<()> {
        let clock = self.clock();
        while self.done < self.config.warmup && !self.proposing() {
            let Some((t, stat)) = self.iterate()? else {
                break;
            };
            self.adapt(stat)?;
            self.observe(&t)?;
        }
        self.lap(Phase::ExactWarmup, clock);
        Ok(())
    }

    /// The rest of warmup on surrogate trajectories (or exact ones after a collapse).
    fn surrogate_warmup(&mut self) -> Result<()> {
        let clock = self.clock();
        while self.done < self.config.warmup {
            let proposed = self.proposing();
            let Some((t, stat)) = self.iterate()? else {
                break;
            };
            if proposed && let Some(means) = self.guard.observe(t.accept_prob, stat) {
                self.fall_back(means)?;
            }
            self.adapt(stat)?;
            self.observe(&t)?;
        }
        self.lap(Phase::SurrogateWarmup, clock);
        Ok(())
    }

    /// Fixes what sampling uses: the final step size (set by the last adaptation), the
    /// trajectory lengths for it, and tells the sink.
    fn end_warmup(&mut self) -> Result<()> {
        if self.resumed {
            return Ok(()); // its file already holds the adaptation
        }
        if self.proposing() {
            self.hmc.config.steps = self.surrogate_steps();
        }
        self.result.warmup_seconds =
            self.result.phases.iter().map(|p| p.seconds).sum::<f64>() + self.training_seconds;
        if self.done < self.config.warmup {
            return Ok(()); // interrupted: there is no adaptation to report
        }
        // After the last adaptation: the kernel is fixed from here on for every kept draw.
        self.result.transitions = self.kernels.end_warmup();
        if let Some(chosen) = self.result.transitions.filter(|c| c.measured.is_some()) {
            self.outlets.sink.transitions_chosen(&chosen)?;
        }
        self.outlets.sink.adaptation(
            self.step_size(),
            &InverseMetric::Diagonal(self.metric.inv_mass().to_vec()),
        )?;
        self.checkpoint(true)
    }

    /// The kept draws, until they are done, the run's target ESS is reached, or the run is
    /// interrupted.
    fn sampling(&mut self) -> Result<()> {
        let clock = self.clock();
        self.sampling_clock = Some(clock);
        let end = self.config.warmup + self.config.draws;
        self.finished |= self.done >= end;
        while !self.finished {
            if self.iterate()?.is_none() {
                break;
            }
            self.finished = self.done >= end;
            if let Some(monitor) = self.outlets.monitor
                && self.result.kept().is_multiple_of(monitor.every())
                && monitor.block_done(self.number, &self.result, self.outlets.interrupt)
                    == Verdict::Stop
            {
                self.finished = true;
            }
            if !self.finished && self.due.tick(Instant::now) {
                self.checkpoint(false)?;
            }
        }
        self.sampling_clock = None;
        self.lap(Phase::Sampling, clock);
        self.result.sampling_seconds = self.result.phase(Phase::Sampling).seconds;
        // Interrupted during warmup, a chain has nothing to resume from: it starts again.
        if self.done >= self.config.warmup {
            self.checkpoint(false)?;
        }
        Ok(())
    }

    /// The chain's result, handed to its sink.
    fn finish(mut self) -> Result<ChainResult> {
        self.result.phases.push(super::PhaseReport {
            phase: Phase::Training,
            iterations: 0,
            seconds: self.training_seconds,
        });
        self.result.step_size = self.step_size();
        self.result.inv_mass = self.metric.inv_mass().to_vec();
        self.result.riemannian = self.kernels.riemannian();
        if let Some(phase) = self.proposer.take() {
            let mut report = self
                .saved_report
                .take()
                .unwrap_or_else(|| phase.report().clone());
            report.collapse = self.collapse;
            report.learning = self.learning.take_points();
            self.result.surrogate = Some(report);
            self.result.trained = phase.into_surrogate().map(Arc::from);
        }
        self.outlets.sink.finish(&self.result)?;
        Ok(self.result)
    }

    /// Puts the chain where `resumed`'s checkpoint left it (the state was restored by
    /// [`Self::start`]): past warmup, with its adapted kernel, its random stream and the kept
    /// rows made before.
    fn restore(&mut self, resumed: &Resumed) -> Result<()> {
        let c = &resumed.checkpoint;
        let problem = c
            .run_problem(self.number, self.model.dim(), self.config)
            .or_else(|| {
                (c.kept != resumed.rows.len()).then(|| {
                    format!(
                        "chain {}: its checkpoint counts {} kept draws, its file {}",
                        self.number,
                        c.kept,
                        resumed.rows.len()
                    )
                })
            });
        if let Some(problem) = problem {
            return Err(Error::invalid(problem));
        }
        self.rng = c.rng.clone();
        self.metric = DiagonalMetric::new(nalgebra::DVector::from_column_slice(&c.inv_mass))?;
        self.hmc.config.step_size = c.step_size;
        self.hmc.config.steps = c.steps;
        self.mode = if c.exact_for_good {
            Mode::Exact
        } else {
            Mode::Surrogate
        };
        self.proposal_value = c.proposal_value;
        self.collapse = c.collapse;
        if let Some(report) = c.riemannian {
            self.kernels.restore(report);
        }
        // A checkpoint from before `W:S` ran one `k` throughout: the setting's sampling `k`.
        self.result.transitions = match c.transitions {
            Some(chosen) => {
                self.kernels.restore_sampling(chosen);
                Some(chosen)
            }
            None => self.kernels.end_warmup(),
        };
        self.saved_report = c.surrogate.clone();
        self.saved_learned = c.learned;
        if let Some(learning) = &c.learning {
            self.learning = learning.clone();
        }
        self.adaptation = None;
        let result = &mut self.result;
        result.warmup_evaluations = c.warmup_evaluations;
        result.sampling_evaluations = c.sampling_evaluations;
        result.warmup_divergences = c.warmup_divergences;
        result.warmup_seconds = c.warmup_seconds;
        result.phases = c.phases.clone();
        for row in &resumed.rows {
            result.record(row);
        }
        self.training_seconds = c.training_seconds;
        self.done = c.done;
        self.finished = c.finished;
        self.resumed = true;
        (self.outlets.progress)(self.number, self.done);
        Ok(())
    }

    /// Saves the chain's checkpoint through its sink, with its fitted surrogate when
    /// `with_surrogate` (once, when warmup ends: it is fixed from then on). A method whose
    /// proposal no saved surrogate rebuilds saves none: its chain would start again.
    fn checkpoint(&mut self, with_surrogate: bool) -> Result<()> {
        let surrogate = match self.proposer.as_deref().map(|p| p.for_resume()) {
            Some(ForResume::Impossible) => return Ok(()),
            Some(ForResume::Save(surrogate)) if with_surrogate => Some(surrogate),
            _ => None,
        };
        let report = self
            .saved_report
            .clone()
            .or_else(|| self.proposer.as_deref().map(|p| p.report().clone()));
        let checkpoint = Checkpoint {
            chain: self.number,
            done: self.done,
            kept: self.result.kept(),
            finished: self.finished,
            position: self.state.position.as_slice().to_vec(),
            potential: self.state.potential,
            gradient: self.state.gradient.as_slice().to_vec(),
            proposal_value: self.proposal_value,
            start: self.start.clone(),
            rng: self.rng.clone(),
            step_size: self.hmc.config.step_size,
            inv_mass: self.metric.inv_mass().to_vec(),
            steps: self.hmc.config.steps,
            saved_surrogate: surrogate.is_some() || self.saved_surrogate,
            exact_for_good: self.mode == Mode::Exact,
            collapse: self.collapse,
            surrogate: report,
            riemannian: self.kernels.riemannian(),
            warmup_evaluations: self.result.warmup_evaluations,
            sampling_evaluations: self.result.sampling_evaluations,
            warmup_divergences: self.result.warmup_divergences,
            phases: {
                let mut phases = self.result.phases.clone();
                phases.extend(
                    self.sampling_clock
                        .map(|clock| self.phase_so_far(Phase::Sampling, clock)),
                );
                phases
            },
            training_seconds: self.training_seconds,
            warmup_seconds: self.result.warmup_seconds,
            learning: Some(self.learning.clone()),
            learned: self.learned(),
            transitions: self.result.transitions,
        };
        self.outlets.sink.checkpoint(&checkpoint, surrogate)?;
        self.saved_surrogate = checkpoint.saved_surrogate;
        self.due.saved(Instant::now());
        Ok(())
    }

    /// The states the surrogate has learned from ([`Proposer::learned`]), if there is one.
    fn learned(&self) -> Option<usize> {
        self.saved_learned
            .or_else(|| self.proposer.as_deref().map(|p| p.learned()))
    }

    /// Whether the surrogate proposes now.
    fn proposing(&self) -> bool {
        self.mode == Mode::Surrogate
            && self
                .proposer
                .as_deref()
                .is_some_and(|p| p.proposal().is_some())
    }

    /// The step size of the kernel that runs now.
    fn step_size(&self) -> f64 {
        let own = self.kernels.peek(self.proposing()).step_size();
        own.unwrap_or(self.hmc.config.step_size)
    }

    /// Whether the MH step judges with the surrogate itself (VHMC's published rule).
    fn approximate(&self) -> bool {
        self.proposer.as_deref().is_some_and(|p| p.approximate())
    }

    /// One transition of the kernel that runs now, counted, written when kept (or when warmup
    /// is saved) and reported; `None` once the run is interrupted. Returns the transition and
    /// the acceptance statistic adaptation learns from.
    fn iterate(&mut self) -> Result<Option<(Transition, f64)>> {
        if self.outlets.interrupt.load(Ordering::Relaxed) {
            self.result.interrupted = true;
            return Ok(None);
        }
        let warmup = self.done < self.config.warmup;
        let proposed = self.proposing();
        let step_size = self.step_size();
        let ctx = Ctx {
            exact: self.exact,
            proposer: self.proposer.as_deref().filter(|_| proposed),
            state: &mut self.state,
            proposal_value: &mut self.proposal_value,
            rng: &mut self.rng,
            hmc: &mut self.hmc,
            metric: &self.metric,
            warmup,
            counts: self.result.evaluations(warmup),
        };
        let Outcome {
            transition: t,
            stat,
            depth,
        } = self.kernels.get(proposed).transition(ctx)?;
        self.ran_proposing = proposed;
        if proposed && let Some(states) = self.learned() {
            self.learning.observe(self.done + 1, states, t.accept_prob);
        }
        if let Some(proposer) = self.proposer.as_deref() {
            let outside = proposer.take_outside();
            self.result.evaluations(warmup).record_outside(outside);
        }
        if warmup {
            self.result.warmup_divergences += usize::from(t.divergent);
        }
        if !warmup || self.config.save_warmup {
            self.write_row(&t, step_size, depth, warmup)?;
        }
        self.done += 1;
        (self.outlets.progress)(self.number, self.done);
        Ok(Some((t, stat)))
    }

    /// Writes the row of transition `t` (kept, unless it is a saved warmup iteration's).
    fn write_row(
        &mut self,
        t: &Transition,
        step_size: f64,
        depth: u32,
        warmup: bool,
    ) -> Result<()> {
        self.row.clear();
        self.row.extend_from_slice(&[
            -self.state.potential,
            t.accept_prob,
            step_size,
            f64::from(depth),
            f64::from(t.steps),
            f64::from(u8::from(t.divergent)),
            t.energy,
        ]);
        self.model
            .write_parameters(self.state.position.as_slice(), &mut self.row);
        self.outlets.sink.draw(&self.row)?;
        if !warmup {
            self.result.record(&self.row);
        }
        Ok(())
    }

    /// Adapts the step size and metric to warmup iteration `done − 1`'s acceptance `stat`;
    /// after a new metric, finds the step size again for it and the trajectory lengths.
    fn adapt(&mut self, stat: f64) -> Result<()> {
        let kernel = self.kernels.get(self.ran_proposing);
        if kernel.adapt(self.done - 1, self.config.warmup, stat) {
            return Ok(());
        }
        let Some(adaptation) = self.adaptation.as_mut() else {
            return Ok(());
        };
        let mut step_size = self.hmc.config.step_size;
        let changed = adaptation.update(
            self.done - 1,
            stat,
            self.state.position.as_slice(),
            &mut self.metric,
            &mut step_size,
        )?;
        if changed.metric {
            step_size = self.find_step_size(step_size);
            if let Some(adaptation) = self.adaptation.as_mut() {
                adaptation.restart(step_size);
            }
        }
        self.hmc.config.step_size = step_size;
        if changed.metric && self.proposing() {
            self.hmc.config.steps = self.surrogate_steps();
        }
        Ok(())
    }

    /// Lets the method learn from the warmup transition `t` (collecting states, fitting,
    /// online updates); when its proposal changes, refreshes what the state caches of it, and
    /// when the surrogate starts proposing, sets its trajectory lengths.
    fn observe(&mut self, t: &Transition) -> Result<()> {
        let Some(phase) = self.proposer.as_deref_mut() else {
            return Ok(());
        };
        let was_proposing = self.mode == Mode::Surrogate && phase.proposal().is_some();
        let clock = Instant::now();
        let changed = phase.observe(
            self.exact,
            self.done - 1,
            self.config.warmup,
            &self.state,
            t.accepted,
            &mut self.rng,
        )?;
        self.training_seconds += clock.elapsed().as_secs_f64();
        if changed && self.mode == Mode::Surrogate {
            self.refresh();
            if !was_proposing {
                self.hmc.config.steps = self.surrogate_steps();
                if let Some(adaptation) = self.adaptation.as_mut() {
                    adaptation.propose_with(true, self.hmc.config.step_size)?;
                }
            }
        }
        Ok(())
    }

    /// Back to exact HMC for good after the surrogate's exact acceptance collapsed (`means`:
    /// exact and own): the exact gradient, the exact phase's trajectories, and a step size
    /// found for them.
    fn fall_back(&mut self, (acceptance, own_acceptance): (f64, f64)) -> Result<()> {
        self.collapse = Some(Collapse {
            iteration: self.done - 1,
            acceptance,
            own_acceptance,
        });
        self.mode = Mode::Exact;
        self.refresh();
        self.hmc.config.steps = self.config.steps;
        if let Some(adaptation) = self.adaptation.as_mut() {
            let step_size = initial_step_size(
                &self.state,
                &Exact(self.exact),
                &self.metric,
                self.hmc.config.step_size,
                &mut self.rng,
            );
            adaptation.propose_with(false, step_size)?;
            self.hmc.config.step_size = step_size;
        }
        Ok(())
    }

    /// Re-evaluates what the state caches of the dynamics after it changed: the proposal
    /// gradient and `Ũ` (under the approximate rule `Ũ` is the level the MH step compares
    /// against, so it replaces `U`).
    fn refresh(&mut self) {
        let proposal = self
            .proposer
            .as_deref()
            .filter(|_| self.mode == Mode::Surrogate)
            .and_then(|p| p.proposal());
        match proposal {
            Some(proposal) if self.approximate() => self.state.refresh(&Exact(proposal)),
            Some(proposal) => {
                self.state.refresh_gradient(&Exact(proposal));
                self.proposal_value = proposal.value(self.state.position.as_slice());
            }
            None => self.state.refresh_gradient(&Exact(self.exact)),
        }
    }

    /// Stan's step-size heuristic from `from`, on what proposes: under a surrogate, on its own
    /// Hamiltonian (the heuristic, like adaptation, measures integration error).
    fn find_step_size(&mut self, from: f64) -> f64 {
        let proposal = self
            .proposer
            .as_deref()
            .filter(|_| self.proposing())
            .and_then(|p| p.proposal());
        match proposal {
            Some(proposal) => {
                let mut own = self.state.clone();
                if !self.approximate() {
                    own.potential = self.proposal_value;
                }
                initial_step_size(&own, &Exact(proposal), &self.metric, from, &mut self.rng)
            }
            None => initial_step_size(
                &self.state,
                &Exact(self.exact),
                &self.metric,
                from,
                &mut self.rng,
            ),
        }
    }

    /// The surrogate's trajectory lengths for the current step size and metric.
    fn surrogate_steps(&mut self) -> shmc_core::Steps {
        let (steps, inv_mass, step_size) = (
            self.config.steps,
            self.metric.inv_mass().to_vec(),
            self.hmc.config.step_size,
        );
        match self.proposer.as_deref_mut() {
            Some(phase) => phase.trajectory(steps, &inv_mass, step_size),
            None => steps,
        }
    }

    /// The start of a phase: iterations done so far, the wall clock, and training time so far.
    fn clock(&self) -> (usize, Instant, f64) {
        (self.done, Instant::now(), self.training_seconds)
    }

    /// Records the phase that began at `clock`, without the training it contained (a resumed
    /// chain's warmup phases, which it skips, are in its checkpoint).
    fn lap(&mut self, phase: Phase, clock: (usize, Instant, f64)) {
        if !(self.resumed && self.done == clock.0) {
            let report = self.phase_so_far(phase, clock);
            self.result.phases.push(report);
        }
    }

    /// The phase that began at `clock`, up to now.
    fn phase_so_far(
        &self,
        phase: Phase,
        (done, start, training): (usize, Instant, f64),
    ) -> super::PhaseReport {
        let seconds = start.elapsed().as_secs_f64() - (self.training_seconds - training);
        super::PhaseReport {
            phase,
            iterations: self.done - done,
            seconds: seconds.max(0.0),
        }
    }
}
