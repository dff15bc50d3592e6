//! The short way to sample a model of your own: a [`Sampler`] built from the model and the few
//! settings a run needs, run with the draws kept in memory ([`Fit`]), and written as CmdStan
//! CSVs when asked.
//!
//! ```no_run
//! use shmc::sampler::{Method, NutsSettings};
//! use shmc::Sampler;
//! # fn demo(model: &dyn shmc::Model) -> shmc::Result<()> {
//! let fit = Sampler::new(model)
//!     .method(Method::Nuts(NutsSettings::default()))
//!     .chains(4)
//!     .warmup(1000)
//!     .draws(1000)
//!     .seed(42)
//!     .run()?;
//! print!("{}", fit.summary_table());
//! let beta_1 = fit.draws("beta.1"); // one slice per chain
//! fit.write_cmdstan("output")?; // output/model-1.csv ... as `shmc sample` writes them
//! # Ok(()) }
//! ```
//!
//! It is [`sampler::sample`] underneath, with the same defaults as `shmc sample` (4 chains,
//! 1000 warmup and 1000 kept draws, exact HMC, seed 1). Who streams draws as they are made
//! (to a file of their own, a database) calls `sample` with sinks of their own instead.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::diagnostics::ParameterSummary;
use crate::output::{CsvHeader, CsvSink, RunTotals, chain_path, format_summary};
use crate::sampler::{
    self, ChainResult, DrawSink, InverseMetric, MassMatrix, Method, Run, SampleConfig,
};
use crate::{Error, Model, Result};

/// A sampling run to be made: the model and its settings. Each setter returns the sampler, so a
/// run is one expression; [`Sampler::run`] makes it.
pub struct Sampler<'m, M: ?Sized> {
    model: &'m M,
    config: SampleConfig,
    name: String,
    progress: Option<Progress<'m>>,
}

/// Told `(chain, iterations done)` (chains counted from 1, warmup included) as chains advance,
/// from the chains' threads.
type Progress<'m> = Box<dyn Fn(usize, usize) + Sync + 'm>;

impl<'m, M: Model + ?Sized> Sampler<'m, M> {
    /// A run on `model` with `shmc sample`'s defaults, its files named `model`.
    pub fn new(model: &'m M) -> Self {
        Self {
            model,
            config: SampleConfig::default(),
            name: "model".into(),
            progress: None,
        }
    }

    /// The sampler (default: exact HMC).
    pub fn method(mut self, method: Method) -> Self {
        self.config.method = method;
        self
    }

    /// The number of chains, run at once (default 4).
    pub fn chains(mut self, chains: usize) -> Self {
        self.config.chains = chains;
        self
    }

    /// Warmup iterations per chain (default 1000).
    pub fn warmup(mut self, warmup: usize) -> Self {
        self.config.warmup = warmup;
        self
    }

    /// Kept draws per chain (default 1000; with a target ESS, the most).
    pub fn draws(mut self, draws: usize) -> Self {
        self.config.draws = draws;
        self
    }

    /// The seed every chain's stream comes from (default 1): the same seed, the same draws.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = seed;
        self
    }

    /// The mass matrix (default: diagonal, adapted in warmup); [`MassMatrix::Laplace`] takes
    /// the Hessian at the MAP, for correlated or badly scaled posteriors.
    pub fn metric(mut self, metric: MassMatrix) -> Self {
        self.config.metric = metric;
        self
    }

    /// Stop once every parameter's bulk and tail ESS over all chains reach `ess`.
    pub fn target_ess(mut self, ess: f64) -> Self {
        self.config.target_ess = Some(ess);
        self
    }

    /// Keep the warmup draws for [`Fit::write_cmdstan`] (not for the summary).
    pub fn save_warmup(mut self, save: bool) -> Self {
        self.config.save_warmup = save;
        self
    }

    /// The model's name in the files [`Fit::write_cmdstan`] writes (`NAME-CHAIN.csv`, and the
    /// header's `model = NAME`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Calls `progress(chain, done)` as chains advance (chains counted from 1; `done` counts
    /// iterations, warmup included, of `warmup + draws`): for a progress bar of your own. It is
    /// called from the chains' threads, often: keep it cheap.
    pub fn on_progress(mut self, progress: impl Fn(usize, usize) + Sync + 'm) -> Self {
        self.progress = Some(Box::new(progress));
        self
    }

    /// Any other setting (step size, trajectory length, initial values, …), on the run's
    /// [`SampleConfig`].
    pub fn configure(mut self, change: impl FnOnce(&mut SampleConfig)) -> Self {
        change(&mut self.config);
        self
    }

    /// Runs the chains and keeps their draws. An error leaves nothing behind: a failed chain
    /// stops the others, as in [`sampler::sample`].
    pub fn run(self) -> Result<Fit> {
        let replays: Vec<Arc<Mutex<Replay>>> =
            (0..self.config.chains).map(|_| Arc::default()).collect();
        let sinks = replays
            .iter()
            .map(|replay| Box::new(Recorder(Arc::clone(replay))) as Box<dyn DrawSink>)
            .collect();
        let progress = |chain: usize, done: usize| {
            if let Some(progress) = &self.progress {
                progress(chain, done);
            }
        };
        let run = sampler::sample(self.model, &self.config, sinks, &progress, None);
        let replays = replays
            .into_iter()
            .map(|r| std::mem::take(&mut *r.lock().unwrap_or_else(PoisonError::into_inner)))
            .collect();
        Ok(Fit {
            run: run?,
            config: self.config,
            name: self.name,
            replays,
        })
    }
}

/// What a chain's files need that its [`ChainResult`] does not keep: the warmup rows (when they
/// are saved) and the adaptation as the chain reported it.
#[derive(Debug, Default)]
struct Replay {
    warmup: Vec<Vec<f64>>,
    adaptation: Option<(f64, InverseMetric)>,
}

/// Records a chain's [`Replay`]. Its kept rows are in the run already: a row before the
/// adaptation is a warmup row, one after it a kept one.
struct Recorder(Arc<Mutex<Replay>>);

impl Recorder {
    fn replay(&self) -> std::sync::MutexGuard<'_, Replay> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl DrawSink for Recorder {
    fn adaptation(&mut self, step_size: f64, inverse_metric: &InverseMetric) -> Result<()> {
        self.replay().adaptation = Some((step_size, inverse_metric.clone()));
        Ok(())
    }
    fn draw(&mut self, row: &[f64]) -> Result<()> {
        let mut replay = self.replay();
        if replay.adaptation.is_none() {
            replay.warmup.push(row.to_vec());
        }
        Ok(())
    }
    fn finish(&mut self, _: &ChainResult) -> Result<()> {
        Ok(())
    }
}

/// A finished (or interrupted) run's draws in memory, with their summary.
#[derive(Debug)]
pub struct Fit {
    run: Run,
    config: SampleConfig,
    name: String,
    replays: Vec<Replay>,
}

impl Fit {
    /// The parameter names, in column order.
    pub fn names(&self) -> &[String] {
        &self.run.names
    }

    /// Each chain's kept draws of `parameter`, in chain order, or `None` if the model has no
    /// parameter of that name.
    pub fn draws(&self, parameter: &str) -> Option<Vec<&[f64]>> {
        let p = self.run.names.iter().position(|n| n == parameter)?;
        Some(self.run.series(p))
    }

    /// Per-parameter summaries: mean, sd, MCSE, quantiles, bulk and tail ESS, split R̂.
    pub fn summary(&self) -> Vec<ParameterSummary> {
        self.run.summary()
    }

    /// The summary as `shmc sample` prints it: CmdStan's `stansummary` layout, then the totals.
    pub fn summary_table(&self) -> String {
        format_summary(&self.summary(), &RunTotals::of(&self.run))
    }

    /// The run underneath: every chain's columns, timings, costs and adaptation.
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// Writes one CmdStan CSV per chain into `dir` (created if needed), named and laid out as
    /// `shmc sample` writes them for the same model name, settings and seed: byte for byte, but
    /// for the `file =` line and the timings. Returns the files, in chain order.
    pub fn write_cmdstan(&self, dir: impl AsRef<Path>) -> Result<Vec<PathBuf>> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let columns = self.run.chains.first().map_or(0, |c| c.columns.len());
        let mut row = Vec::with_capacity(columns);
        self.run
            .chains
            .iter()
            .zip(&self.replays)
            .map(|(chain, replay)| {
                let path = chain_path(dir, &self.name, chain.chain);
                let header = CsvHeader::for_run(
                    &self.name,
                    chain.chain,
                    &self.config,
                    self.names().to_vec(),
                );
                let mut sink = CsvSink::create(&path, &header)?;
                for warmup in &replay.warmup {
                    sink.draw(warmup)?;
                }
                if let Some((step_size, inverse_metric)) = &replay.adaptation {
                    sink.adaptation(*step_size, inverse_metric)?;
                }
                for i in 0..chain.kept() {
                    row.clear();
                    row.extend(chain.columns.iter().map(|column| column[i]));
                    sink.draw(&row)?;
                }
                sink.finish(chain)?;
                Ok(path)
            })
            .collect()
    }
}
