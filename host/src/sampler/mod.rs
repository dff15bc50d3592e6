//! The multi-chain sampler driver: chains at once, one thread each (in [`lockstep`] over the
//! data when the model allows), each with its own reproducible random stream, Stan-style
//! warmup, and draws streamed to a [`DrawSink`] as they are made.
//!
//! ```no_run
//! # use shmc::{Model, sampler::{sample, SampleConfig, NullSink, DrawSink}};
//! # fn demo(model: &dyn Model) -> shmc::Result<()> {
//! let config = SampleConfig { chains: 4, draws: 2000, seed: 42, ..SampleConfig::default() };
//! let sinks: Vec<Box<dyn DrawSink>> = (0..config.chains).map(|_| Box::new(NullSink) as _).collect();
//! let run = sample(model, &config, sinks, &|_, _| {}, None)?;
//! for p in run.summary() { println!("{} {:.3} ± {:.3}", p.name, p.mean, p.sd); }
//! # Ok(()) }
//! ```

pub mod auto;
mod chain;
mod checked;
mod config;
mod fitted;
mod laplace_training;
pub mod lockstep;
mod method;
mod methods;
mod multilevel;
mod nuts;
mod proposer;
mod sgld;
mod surrogate_settings;
mod target_ess;
pub mod trajectory;
pub mod transitions;
mod variational;
pub mod warmup;
mod whitened;

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use chain::checkpoint::{self, Checkpoint, Resumed};
pub use chain::{
    COLLAPSE_WINDOW, Collapse, KernelWork, MAX_DEPTH as SURROGATE_MAX_DEPTH, Recorder,
    RiemannianReport,
};
pub use config::{Init, MassMatrix, SampleConfig};
pub use method::{
    MIN_LAPLACE_STATES, Method, NutsSettings, RmhmcSettings, SgldSettings, StepSize, VhmcSettings,
};
pub use methods::{METHODS, MethodEntry};
pub use multilevel::MldaSettings;
pub use proposer::{Precompute, SurrogateReport};
pub use surrogate_settings::{SurrogateSettings, TrainFrom};
pub use target_ess::{EssCheck, check_ess};
pub use trajectory::SurrogateSteps;
pub use transitions::Transitions;
pub use variational::PILOT_STATES;

use crate::diagnostics::{ParameterSummary, summarize};
pub use crate::records::{Evaluations, LearningPoint, MIN_SUMMARY_DRAWS, SAMPLER_COLUMNS};
use crate::surrogates::Surrogate;
use crate::whitening::Laplace;
use crate::{Error, Model, Result};
use target_ess::EssMonitor;

/// The text of a panic's payload (a `&str` or `String` message, as `panic!` makes them).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// The inverse mass matrix a chain's warmup ends with, as its file reports it.
#[derive(Clone, Debug, PartialEq)]
pub enum InverseMetric {
    /// Its diagonal (Stan's `diag_e`).
    Diagonal(Vec<f64>),
    /// The whole matrix (Stan's `dense_e`): a diagonal one in the standard coordinates of the
    /// Laplace approximation, seen on the model's parameters ([`MassMatrix::Laplace`]).
    Dense(nalgebra::DMatrix<f64>),
}

/// Where a chain's rows go as they are made (a CSV file, or nowhere).
pub trait DrawSink: Send {
    /// The adaptation's result, once warmup ends.
    fn adaptation(&mut self, step_size: f64, inverse_metric: &InverseMetric) -> Result<()>;
    /// The surrogate transitions `auto` chose at the end of warmup (before the adaptation's
    /// result), so that the run's files say which `W:S` reruns its draws.
    fn transitions_chosen(&mut self, _chosen: &transitions::Chosen) -> Result<()> {
        Ok(())
    }
    /// One row: the sampler columns then the parameters.
    fn draw(&mut self, row: &[f64]) -> Result<()>;
    /// The end of the chain: its timing, costs, and whether it was interrupted.
    fn finish(&mut self, chain: &ChainResult) -> Result<()>;
    /// The chain stopped with the error `message` and writes nothing more; a file says so, so
    /// that the rows before the failure are never taken for a finished chain.
    fn failed(&mut self, _message: &str) -> Result<()> {
        Ok(())
    }
    /// The chain's state after warmup, to resume from (see [`checkpoint`]): once when warmup
    /// ends, with the fitted surrogate to save if the chain has one of its own, then from time
    /// to time while sampling, without. Every row drawn before it was given to [`Self::draw`]
    /// first. A sink that keeps no files has nothing to resume and ignores it.
    fn checkpoint(
        &mut self,
        _checkpoint: &checkpoint::Checkpoint,
        _surrogate: Option<&dyn Surrogate>,
    ) -> Result<()> {
        Ok(())
    }
}

/// A sink that keeps nothing (the driver keeps the draws in memory anyway).
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink;

impl DrawSink for NullSink {
    fn adaptation(&mut self, _: f64, _: &InverseMetric) -> Result<()> {
        Ok(())
    }
    fn draw(&mut self, _: &[f64]) -> Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &ChainResult) -> Result<()> {
        Ok(())
    }
}

/// The phases of a chain, in the order it lives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Exact HMC adapting step size and metric, collecting states for the surrogate.
    ExactWarmup,
    /// Fitting the surrogate and learning online (during warmup).
    Training,
    /// The rest of warmup on surrogate proposals judged by the exact `U`.
    SurrogateWarmup,
    /// The kept draws.
    Sampling,
}

impl Phase {
    /// The phase's name in the output.
    pub fn name(self) -> &'static str {
        match self {
            Phase::ExactWarmup => "exact warmup",
            Phase::Training => "training",
            Phase::SurrogateWarmup => "surrogate warmup",
            Phase::Sampling => "sampling",
        }
    }
}

/// What one phase of a chain took.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseReport {
    /// The phase.
    pub phase: Phase,
    /// Its iterations (training has none of its own: it happens inside warmup's).
    pub iterations: usize,
    /// Its wall time in seconds (the warmup phases without the training they contain).
    pub seconds: f64,
}

/// One chain's kept draws and statistics.
#[derive(Clone, Debug)]
pub struct ChainResult {
    /// The chain's number, from 1.
    pub chain: usize,
    /// `columns[k][i]`: sampler column `k` (see [`SAMPLER_COLUMNS`]) then parameter columns, at
    /// kept draw `i`.
    pub columns: Vec<Vec<f64>>,
    /// The step size after warmup.
    pub step_size: f64,
    /// The diagonal of the inverse mass matrix after warmup.
    pub inv_mass: Vec<f64>,
    /// Seconds spent in warmup.
    pub warmup_seconds: f64,
    /// Seconds spent making kept draws.
    pub sampling_seconds: f64,
    /// Divergent transitions during warmup.
    pub warmup_divergences: usize,
    /// Evaluations during warmup.
    pub warmup_evaluations: Evaluations,
    /// Evaluations while making kept draws.
    pub sampling_evaluations: Evaluations,
    /// The surrogate's cost and fit, for the surrogate methods.
    pub surrogate: Option<SurrogateReport>,
    /// The trained surrogate the chain ended with (VHMC: its learned part, without the Laplace
    /// blend), to save for later runs.
    pub trained: Option<Arc<dyn Surrogate>>,
    /// RMHMC's step size, work and failures, for the RMHMC methods.
    pub riemannian: Option<RiemannianReport>,
    /// Whether the run was interrupted before all draws were made.
    pub interrupted: bool,
    /// Each phase's iterations and time, in the order they ran.
    pub phases: Vec<PhaseReport>,
    /// The surrogate transitions it ran, warmup's and sampling's, for a method that runs them.
    pub transitions: Option<transitions::Chosen>,
}

impl ChainResult {
    pub(crate) fn new(chain: usize, parameters: usize, draws: usize) -> Self {
        Self {
            chain,
            // Each its own capacity: `vec![Vec::with_capacity(draws); n]` would clone the
            // first, and a clone of an empty vector has none, so all but one column would grow
            // by reallocating and copying as the draws come.
            columns: (0..SAMPLER_COLUMNS.len() + parameters)
                .map(|_| Vec::with_capacity(draws))
                .collect(),
            step_size: f64::NAN,
            inv_mass: Vec::new(),
            warmup_seconds: 0.0,
            sampling_seconds: 0.0,
            warmup_divergences: 0,
            warmup_evaluations: Evaluations::default(),
            sampling_evaluations: Evaluations::default(),
            surrogate: None,
            trained: None,
            riemannian: None,
            interrupted: false,
            phases: Vec::new(),
            transitions: None,
        }
    }

    /// The seconds and iterations of `phase` (zero if the chain never ran it).
    pub fn phase(&self, phase: Phase) -> PhaseReport {
        self.phases.iter().filter(|p| p.phase == phase).fold(
            PhaseReport {
                phase,
                iterations: 0,
                seconds: 0.0,
            },
            |a, p| PhaseReport {
                phase,
                iterations: a.iterations + p.iterations,
                seconds: a.seconds + p.seconds,
            },
        )
    }

    /// The counts of warmup's evaluations (`warmup`) or sampling's.
    fn evaluations(&mut self, warmup: bool) -> &mut Evaluations {
        if warmup {
            &mut self.warmup_evaluations
        } else {
            &mut self.sampling_evaluations
        }
    }

    fn record(&mut self, row: &[f64]) {
        for (column, &x) in self.columns.iter_mut().zip(row) {
            column.push(x);
        }
    }

    /// The number of kept draws.
    pub fn kept(&self) -> usize {
        self.columns.first().map_or(0, Vec::len)
    }

    /// The draws of parameter `p` (0-based, after the sampler columns).
    pub fn parameter(&self, p: usize) -> &[f64] {
        &self.columns[SAMPLER_COLUMNS.len() + p]
    }

    /// The mean acceptance statistic of the kept draws.
    pub fn mean_accept_stat(&self) -> f64 {
        mean(&self.columns[1])
    }

    /// The number of divergent kept draws.
    pub fn divergences(&self) -> usize {
        self.columns[5].iter().filter(|&&d| d != 0.0).count()
    }
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// A finished (or interrupted) run.
#[derive(Clone, Debug)]
pub struct Run {
    /// The parameter names, in column order.
    pub names: Vec<String>,
    /// One result per chain, in chain order.
    pub chains: Vec<ChainResult>,
    /// Wall-clock seconds for the whole run (a precomputation included).
    pub wall_seconds: f64,
    /// What fitting the surrogate before sampling cost, if one was (a grid over a box known
    /// in advance, shared by every chain); reported apart from sampling.
    pub precompute: Option<Precompute>,
    /// With a target ESS: the last check of it (whether it was reached, after how many draws).
    pub target_ess: Option<EssCheck>,
    /// What finding the Laplace approximation cost (the MAP search and its Hessian), for a run
    /// with the Laplace mass matrix ([`MassMatrix::Laplace`]); reported apart from sampling.
    pub laplace: Option<Precompute>,
    /// The level `laplace` and `precompute` evaluated the model at
    /// ([`SampleConfig::design_level`]); `None`: the model itself.
    pub design_level: Option<usize>,
}

impl Run {
    /// Whether any chain was interrupted.
    pub fn interrupted(&self) -> bool {
        self.chains.iter().any(|c| c.interrupted)
    }

    /// The chains a summary uses and the draws each contributes: every chain with at least
    /// [`MIN_SUMMARY_DRAWS`] kept draws (an interrupted run's queued chains may have none), cut
    /// to the draws they all finished. A finished run uses every chain and every draw.
    pub fn summarized(&self) -> (Vec<&ChainResult>, usize) {
        let chains: Vec<&ChainResult> = self
            .chains
            .iter()
            .filter(|c| c.kept() >= MIN_SUMMARY_DRAWS)
            .collect();
        let kept = chains.iter().map(|c| c.kept()).min().unwrap_or(0);
        (chains, kept)
    }

    /// Per-parameter summaries (mean, sd, MCSE, quantiles, bulk/tail ESS, R̂) over the chains
    /// and draws of [`Run::summarized`].
    pub fn summary(&self) -> Vec<ParameterSummary> {
        let (chains, kept) = self.summarized();
        let draws: Vec<Vec<Vec<f64>>> = chains
            .iter()
            .map(|c| {
                (0..self.names.len())
                    .map(|p| c.parameter(p)[..kept].to_vec())
                    .collect()
            })
            .collect();
        summarize(&self.names, &draws)
    }

    /// Each chain's kept draws of parameter `p` (0-based), in chain order.
    pub fn series(&self, p: usize) -> Vec<&[f64]> {
        self.chains.iter().map(|c| c.parameter(p)).collect()
    }

    /// The chains' step sizes after warmup, their geometric mean (step sizes scale
    /// multiplicatively, and dual averaging adapts their logarithm).
    pub fn step_size(&self) -> f64 {
        let logs: f64 = self.chains.iter().map(|c| c.step_size.ln()).sum();
        (logs / self.chains.len() as f64).exp()
    }

    /// The mean acceptance statistic over all kept draws.
    pub fn mean_accept_stat(&self) -> f64 {
        let (sum, n) = self.chains.iter().fold((0.0, 0usize), |(s, n), c| {
            (s + c.columns[1].iter().sum::<f64>(), n + c.kept())
        });
        sum / n as f64
    }

    /// Every exact and surrogate evaluation of the run: every chain's, warmup and sampling
    /// together, and those made before the chains started (the Laplace approximation's MAP
    /// search and Hessian, a surrogate precomputed for all chains), counted as exact gradients
    /// (they are fused value-and-gradient calls).
    pub fn evaluations(&self) -> Evaluations {
        let mut total = Evaluations::default();
        // On a design level those were the level's evaluations, not the model's.
        let before = [&self.laplace, &self.precompute].into_iter().flatten();
        for before in before.filter(|_| self.design_level.is_none()) {
            total.exact_gradients += before.evaluations;
        }
        for c in &self.chains {
            for e in [&c.warmup_evaluations, &c.sampling_evaluations] {
                total.iterations += e.iterations;
                total.exact_gradients += e.exact_gradients;
                total.exact_values += e.exact_values;
                total.surrogate_gradients += e.surrogate_gradients;
            }
        }
        total
    }

    /// Divergent kept draws over all chains.
    pub fn divergences(&self) -> usize {
        self.chains.iter().map(ChainResult::divergences).sum()
    }

    /// The longest chain's sampling time (chains run in parallel).
    pub fn sampling_seconds(&self) -> f64 {
        self.chains
            .iter()
            .map(|c| c.sampling_seconds)
            .fold(0.0, f64::max)
    }
}

/// Runs chain `chain` (1-based) of `run_chain` with a model that panics (a user's, on input it
/// did not expect) stopping the chain with an error instead of taking the process down; the
/// rows written stay as they are.
fn run_caught<M: Model + ?Sized>(
    model: &M,
    config: &SampleConfig,
    precomputed: Option<&fitted::Precomputed>,
    chain: usize,
    outlets: chain::Outlets<'_>,
    resumed: Option<&Resumed>,
) -> Result<ChainResult> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &config.method {
        Method::Nuts(settings) => nuts::run_chain(model, config, settings, chain, outlets),
        Method::Sgld(settings) => sgld::run_chain(model, config, settings, chain, outlets),
        _ => chain::run_chain(model, config, precomputed, chain, outlets, resumed),
    }))
    .unwrap_or_else(|payload| {
        Err(Error::invalid(format!(
            "chain {chain}: the model panicked: {}",
            panic_message(payload.as_ref())
        )))
    })
}

/// A chain's `result`, which, if it failed, stops the other chains and is recorded in its sink.
fn stop_on_failure(
    result: Result<ChainResult>,
    sink: &mut dyn DrawSink,
    stop: &AtomicBool,
) -> Result<ChainResult> {
    if let Err(error) = &result {
        stop.store(true, Ordering::Relaxed);
        // The chain's error is what the caller hears of; a sink that cannot record it as well
        // (the disk that failed the chain) adds nothing to it.
        let _ = sink.failed(&error.to_string());
    }
    result
}

/// Runs `run(chain, sink)` for every chain (numbered from 1) on a thread of its own, so that
/// all chains run at once whatever the number of cores (the target-ESS check needs every
/// chain's draws: a chain queued behind another would leave it waiting), and returns their
/// results in chain order (the first error in chain order, if any).
fn on_own_threads<F>(sinks: Vec<Box<dyn DrawSink>>, run: F) -> Result<Vec<ChainResult>>
where
    F: Fn(usize, &mut dyn DrawSink) -> Result<ChainResult> + Sync,
{
    std::thread::scope(|scope| {
        let handles: Vec<_> = sinks
            .into_iter()
            .enumerate()
            .map(|(i, mut sink)| {
                let run = &run;
                scope.spawn(move || run(i + 1, sink.as_mut()))
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(i, handle)| {
                handle.join().unwrap_or_else(|payload| {
                    Err(Error::invalid(format!(
                        "chain {}: {}",
                        i + 1,
                        panic_message(payload.as_ref())
                    )))
                })
            })
            .collect()
    })
}

/// Runs `config.chains` chains of `config.method` (NUTS included) on `model` at once, one
/// thread and one sink per chain: in lockstep over the data (see [`lockstep`]) if `config.lockstep`, there are two
/// chains or more and the model is a [`RowSum`](crate::row_sum::RowSum).
///
/// `progress(chain, iterations_done)` is called after every iteration; setting `interrupt`
/// stops every chain after its current iteration, with every finished draw kept. A failure the
/// model records ([`Model::failure`]) stops them the same way and is returned as
/// [`Error::ModelFailed`]; the sinks keep the draws made before it.
pub fn sample<M: Model + ?Sized>(
    model: &M,
    config: &SampleConfig,
    sinks: Vec<Box<dyn DrawSink>>,
    progress: &(dyn Fn(usize, usize) + Sync),
    interrupt: Option<&AtomicBool>,
) -> Result<Run> {
    config.validate(model)?;
    run_chains(model, config, &[], sinks, progress, interrupt)
}

/// Goes on with a run that stopped, as [`sample`] would have gone on: each chain `k` from
/// `resumed[k − 1]`'s checkpoint if it has one (its sink already holds the rows before it and
/// takes the rest), else from its first iteration (a chain stopped in warmup, which makes the
/// same draws again). The run's draws are those of an uninterrupted run, bit for bit.
pub fn resume<M: Model + ?Sized>(
    model: &M,
    config: &SampleConfig,
    resumed: &[Option<Resumed>],
    sinks: Vec<Box<dyn DrawSink>>,
    progress: &(dyn Fn(usize, usize) + Sync),
    interrupt: Option<&AtomicBool>,
) -> Result<Run> {
    config.validate(model)?;
    resume_validated(model, config, resumed, sinks, progress, interrupt)
}

/// [`resume`] on settings already checked against the model ([`SampleConfig::validate`]).
pub(crate) fn resume_validated<M: Model + ?Sized>(
    model: &M,
    config: &SampleConfig,
    resumed: &[Option<Resumed>],
    sinks: Vec<Box<dyn DrawSink>>,
    progress: &(dyn Fn(usize, usize) + Sync),
    interrupt: Option<&AtomicBool>,
) -> Result<Run> {
    if resumed.len() != config.chains {
        return Err(Error::invalid(format!(
            "{} chains to resume for a run of {}",
            resumed.len(),
            config.chains
        )));
    }
    run_chains(model, config, resumed, sinks, progress, interrupt)
}

/// [`sample`] on checked settings, each chain from its checkpoint in `resumed` if there is one.
fn run_chains<M: Model + ?Sized>(
    model: &M,
    config: &SampleConfig,
    resumed: &[Option<Resumed>],
    sinks: Vec<Box<dyn DrawSink>>,
    progress: &(dyn Fn(usize, usize) + Sync),
    interrupt: Option<&AtomicBool>,
) -> Result<Run> {
    if sinks.len() != config.chains {
        return Err(Error::invalid(format!(
            "{} output sinks for {} chains",
            sinks.len(),
            config.chains
        )));
    }
    let never = AtomicBool::new(false);
    let interrupt = interrupt.unwrap_or(&never);
    // The chains stop on `stop`: set by the caller's interrupt or a failure the model records
    // (see `Model::failure`), passed on after every iteration, or by a chain that failed, so
    // that the others end cleanly (their files say they were interrupted) instead of running on
    // to a result that is thrown away.
    let stop = AtomicBool::new(interrupt.load(Ordering::Relaxed));
    // The chains tell their ids; the caller hears each chain's place in this run, from 1.
    let progress = |id: usize, done: usize| {
        progress(id + 1 - config.chain_id, done);
        if interrupt.load(Ordering::Relaxed) || model.failure().is_some() {
            stop.store(true, Ordering::Relaxed);
        }
    };
    let checked = checked::Checked::new(model);
    let start = std::time::Instant::now();
    // The design (the Laplace approximation, a surrogate fitted before sampling) is evaluated
    // on the design level if the run names one, the draws always on the model.
    let level = config.design_model(model)?;
    let level = level.as_deref().map(checked::Checked::new);
    let design: &dyn Model = match &level {
        Some(level) => level,
        None => &checked,
    };
    let laplace = laplace_metric(design, config)?;
    let whitened = laplace
        .as_deref()
        .map(|laplace| whitened::Whitened::new(&checked, laplace));
    let design_whitened = laplace
        .as_deref()
        .map(|laplace| whitened::Whitened::new(design, laplace));
    let model: &dyn Model = match &whitened {
        Some(whitened) => whitened,
        None => &checked,
    };
    let design: &dyn Model = match &design_whitened {
        Some(whitened) => whitened,
        None => design,
    };
    let (config, sinks) = match &laplace {
        Some(laplace) => (
            Cow::Owned(in_standard_coordinates(config, laplace)),
            reporting_dense_metrics(sinks, laplace),
        ),
        None => (Cow::Borrowed(config), sinks),
    };
    check_checkpoints(model, &config, resumed)?;
    let precomputed = precompute(design, &config)?;
    let monitor = ess_monitor(model, &config);
    let chains = Chains {
        config: &config,
        precomputed: precomputed.as_ref(),
        resumed,
        progress: &progress,
        stop: &stop,
        monitor: monitor.as_ref(),
    }
    .run(model, sinks);
    // A chain that stopped on the failure may have failed in turn (no finite start, a
    // surrogate that cannot train on NaN): the model's own account is the one to give.
    if let Some(failure) = model.failure() {
        return Err(Error::ModelFailed(failure));
    }
    let chains = chains?;
    Ok(Run {
        names: model.parameter_names(),
        chains,
        wall_seconds: start.elapsed().as_secs_f64(),
        precompute: precomputed.map(|p| before_sampling(p.evaluations, p.seconds)),
        target_ess: monitor.and_then(|m| m.last_check()),
        laplace: laplace.map(|l| before_sampling(l.evaluations(), l.seconds())),
        design_level: config.design_level,
    })
}

/// The Laplace approximation the chains run on under the Laplace mass matrix ([`find_laplace`]),
/// or none under the diagonal one.
fn laplace_metric(model: &dyn Model, config: &SampleConfig) -> Result<Option<Arc<Laplace>>> {
    match config.mass_matrix() {
        MassMatrix::Laplace => match find_laplace(model, config) {
            Ok(laplace) => Ok(Some(Arc::new(laplace))),
            // A served model's lost connection is the failure to report, not its effect.
            Err(e) => Err(model.failure().map_or(e, Error::ModelFailed)),
        },
        MassMatrix::Diagonal | MassMatrix::LowRank => Ok(None),
    }
}

/// The Laplace approximation for a run with the Laplace mass matrix: the MAP searched from the
/// given initial values, or from the origin.
fn find_laplace(model: &dyn Model, config: &SampleConfig) -> Result<Laplace> {
    let start = match &config.init {
        Init::Values(values) => values.clone(),
        Init::Random { .. } => vec![0.0; model.dim()],
    };
    // The Hessian's gradient columns are one batch: on every instance of a served model.
    let found = crate::batch::spread(model.concurrency(), || Laplace::find(model, &start))?;
    found.map_err(|e| {
        Error::setting(
            "metric",
            format!("laplace needs the Laplace approximation at the MAP, which failed: {e}"),
        )
    })
}

/// `config` with its initial values moved into the standard coordinates of `laplace`, where the
/// chains run (random ones are drawn there, around the mode).
fn in_standard_coordinates(config: &SampleConfig, laplace: &Laplace) -> SampleConfig {
    let mut config = config.clone();
    if let Init::Values(q) = &config.init {
        let mut z = vec![0.0; q.len()];
        laplace.coordinates(q, &mut z);
        config.init = Init::Values(z);
    }
    config
}

/// `sinks` for chains that run in the standard coordinates of `laplace`: each reports the
/// inverse mass matrix adapted there as the dense one it is on the model's parameters.
fn reporting_dense_metrics(
    sinks: Vec<Box<dyn DrawSink>>,
    laplace: &Arc<Laplace>,
) -> Vec<Box<dyn DrawSink>> {
    sinks
        .into_iter()
        .map(|sink| {
            Box::new(whitened::DenseAdaptation::new(sink, Arc::clone(laplace))) as Box<dyn DrawSink>
        })
        .collect()
}

/// The surrogate fitted once for every chain before sampling, if the method fits one then. A
/// failure the model records while it is fitted is the error to report, not the fit's.
fn precompute(model: &dyn Model, config: &SampleConfig) -> Result<Option<fitted::Precomputed>> {
    let precomputed = match config.method.surrogate() {
        Some(settings) => fitted::precompute(settings, model),
        None => Ok(None),
    };
    if let Some(failure) = model.failure() {
        return Err(Error::ModelFailed(failure));
    }
    precomputed
}

/// The chains' shared check of the run's target ESS, if it has one.
fn ess_monitor(model: &dyn Model, config: &SampleConfig) -> Option<EssMonitor> {
    config.target_ess.map(|target| {
        EssMonitor::new(
            target,
            config.ess_check_every,
            config.chains,
            model.parameter_names().len(),
        )
    })
}

/// What the chains of a run share: their settings, the surrogate fitted before sampling, the
/// checkpoints they resume from, where their progress goes, and what stops them.
struct Chains<'a> {
    config: &'a SampleConfig,
    precomputed: Option<&'a fitted::Precomputed>,
    resumed: &'a [Option<Resumed>],
    progress: &'a (dyn Fn(usize, usize) + Sync),
    stop: &'a AtomicBool,
    monitor: Option<&'a EssMonitor>,
}

impl Chains<'_> {
    /// Runs every chain on `model` at once, one sink each: in lockstep over the data if
    /// `config.lockstep`, there are two chains or more, the method makes passes over the data to
    /// share and the model is a [`RowSum`](crate::row_sum::RowSum); else on threads of their own.
    fn run(&self, model: &dyn Model, sinks: Vec<Box<dyn DrawSink>>) -> Result<Vec<ChainResult>> {
        let config = self.config;
        // SGLD never evaluates the whole row sum: there is no pass over the data to share.
        let shares_passes = !matches!(config.method, Method::Sgld(_));
        let lockstep = if config.lockstep && config.chains >= 2 && shares_passes {
            lockstep::Lockstep::new(model, config.chains)
        } else {
            None
        };
        match lockstep {
            Some(lockstep) => lockstep.run(sinks, |member, chain, sink| {
                self.run_one(member, chain, sink)
            }),
            None => on_own_threads(sinks, |chain, sink| self.run_one(model, chain, sink)),
        }
    }

    /// Runs the `chain`th chain of this run (1-based; its id counts on from
    /// [`SampleConfig::chain_id`]) on `model` (a lockstep member, or the model itself) into
    /// `sink`, from its checkpoint if it has one; if it fails, the other chains stop.
    fn run_one<M: Model + ?Sized>(
        &self,
        model: &M,
        chain: usize,
        sink: &mut dyn DrawSink,
    ) -> Result<ChainResult> {
        let id = self.config.chain_id + chain - 1;
        let outlets = chain::Outlets {
            sink: &mut *sink,
            progress: self.progress,
            interrupt: self.stop,
            monitor: self.monitor,
        };
        let resumed = self.resumed.get(chain - 1).and_then(Option::as_ref);
        let result = run_caught(model, self.config, self.precomputed, id, outlets, resumed);
        stop_on_failure(result, sink, self.stop)
    }
}

/// Refuses a resumed chain whose checkpoint is broken ([`Checkpoint::problem`]; its reader
/// checked already, a caller that built it did not) or whose saved `U` is not `model`'s at its
/// saved position ([`Checkpoint::potential_problem`]); under an approximate acceptance rule the
/// state holds the surrogate's value instead, which the model cannot check.
fn check_checkpoints(
    model: &dyn Model,
    config: &SampleConfig,
    resumed: &[Option<Resumed>],
) -> Result<()> {
    for r in resumed.iter().flatten() {
        let c = &r.checkpoint;
        let problem = c.problem(model.dim()).or_else(|| {
            (!config.method.approximate())
                .then(|| c.potential_problem(model))
                .flatten()
        });
        if let Some(problem) = problem {
            return Err(Error::invalid(format!("{}: {problem}", r.path.display())));
        }
    }
    Ok(())
}

/// A computation made once before sampling, as the run reports it.
fn before_sampling(evaluations: u64, seconds: f64) -> Precompute {
    Precompute {
        evaluations,
        seconds,
        before_sampling: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::logistic::LogisticRegression;

    /// Every column holds the run's draws without reallocating as they are kept.
    #[test]
    fn every_column_of_a_chain_result_has_room_for_all_its_draws() {
        let result = ChainResult::new(1, 3, 500);
        assert_eq!(result.columns.len(), SAMPLER_COLUMNS.len() + 3);
        for column in &result.columns {
            assert!(column.capacity() >= 500, "{}", column.capacity());
        }
    }

    /// Given initial values are moved to the chains' coordinates (the mode is their origin, and
    /// the chains report them back unchanged); random ones stay as they are, to be drawn there.
    #[test]
    fn initial_values_move_into_the_laplace_coordinates() {
        let model = LogisticRegression::simulate(500, 3, 4).unwrap();
        let laplace = Laplace::find(&model, &[0.0; 3]).unwrap();
        let q = vec![0.3, -0.2, 1.1];
        for (init, expected) in [
            (
                Init::Values(laplace.mode().to_vec()),
                Some(laplace.mode().to_vec()),
            ),
            (Init::Values(q.clone()), Some(q)),
            (Init::Random { radius: 2.0 }, None),
        ] {
            let config = SampleConfig {
                init: init.clone(),
                ..SampleConfig::default()
            };
            let moved = in_standard_coordinates(&config, &laplace);
            match (moved.init, expected) {
                (Init::Values(z), Some(q)) => {
                    let mut back = vec![0.0; 3];
                    laplace.position(&z, &mut back);
                    for (b, e) in back.iter().zip(&q) {
                        assert!((b - e).abs() < 1e-12, "{back:?} vs {q:?}");
                    }
                    if q == laplace.mode() {
                        assert!(z.iter().all(|x| x.abs() < 1e-12), "{z:?}");
                    }
                }
                (moved, None) => assert_eq!(moved, init),
                (moved, expected) => panic!("{moved:?} for {expected:?}"),
            }
        }
    }
}
