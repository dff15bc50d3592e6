//! A finished run's draws in memory ([`Fit`]), and what its chains' files need beyond them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::diagnostics::{ParameterSummary, Warning};
use crate::output::{
    CsvHeader, CsvSink, RunTotals, chain_path, format_run, format_summary, run_warnings,
};
use crate::sampler::{ChainResult, DrawSink, InverseMetric, Run, SampleConfig};
use crate::{Error, Result};

/// What a chain's files need that its [`ChainResult`] does not keep: the warmup rows (when they
/// are saved) and the adaptation as the chain reported it.
#[derive(Debug, Default)]
pub(super) struct Replay {
    warmup: Vec<Vec<f64>>,
    adaptation: Option<(f64, InverseMetric)>,
}

/// Records a chain's [`Replay`]. Its kept rows are in the run already: a row before the
/// adaptation is a warmup row, one after it a kept one.
pub(super) struct Recorder(pub(super) Arc<Mutex<Replay>>);

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
    pub(super) run: Run,
    pub(super) config: SampleConfig,
    pub(super) name: String,
    pub(super) written: Written,
}

/// Where a run's rows went besides the [`Run`]: replays kept in memory, from which
/// [`Fit::write_cmdstan`] writes the files, or files written as the chains ran.
#[derive(Debug)]
pub(super) enum Written {
    /// Each chain's replay, in chain order.
    InMemory(Vec<Replay>),
    /// The folder the chains' files were written to.
    Streamed(PathBuf),
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

    /// Each chain's warmup rows (the sampler columns, then the parameters, as in
    /// [`crate::sampler::ChainResult::columns`]), in chain order: what a front end that shows
    /// warmup beside the kept draws needs (the Python package's `warmup_*` groups). Empty for
    /// a run that did not keep them ([`super::Sampler::save_warmup`]) or wrote them to its
    /// files as it ran ([`super::Sampler::write_to`]).
    pub fn warmup_rows(&self) -> Vec<&[Vec<f64>]> {
        match &self.written {
            Written::InMemory(replays) => replays.iter().map(|r| r.warmup.as_slice()).collect(),
            Written::Streamed(_) => Vec::new(),
        }
    }

    /// Per-parameter summaries: mean, sd, MCSE, quantiles, bulk and tail ESS, split R̂.
    pub fn summary(&self) -> Vec<ParameterSummary> {
        self.run.summary()
    }

    /// The summary as `shmc sample` prints it: CmdStan's `stansummary` layout, then the totals.
    pub fn summary_table(&self) -> String {
        format_summary(&self.summary(), &RunTotals::of(&self.run))
    }

    /// The convergence checks the draws fail (R̂, bulk and tail ESS per chain, divergences,
    /// tree depth, E-BFMI), one [`Warning`] each; none for a run that passed them all. The
    /// report ([`Fit::report`]) prints them after its summary.
    pub fn warnings(&self) -> Vec<Warning> {
        run_warnings(&self.run, &self.config, &self.summary())
    }

    /// The run underneath: every chain's columns, timings, costs and adaptation.
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// The run's settings.
    pub fn config(&self) -> &SampleConfig {
        &self.config
    }

    /// What `shmc sample` prints after its summary: the model's and the kernels' work, the
    /// surrogate's training and costs per chain, the target ESS's outcome, and the APPROXIMATE
    /// label where it applies. `work` is the model's own count of its work ([`crate::Model::work`]).
    pub fn report(&self, work: &[(&str, u64)]) -> String {
        format_run(&self.run, &self.config, work)
    }

    /// Writes one CmdStan CSV per chain into `dir` (created if needed), named and laid out as
    /// `shmc sample` writes them for the same model name, settings and seed: byte for byte, but
    /// for the `file =` line and the timings. Returns the files, in chain order.
    /// A run that wrote its files as it ran ([`super::Sampler::write_to`]) kept no warmup rows
    /// to write again: for it this is an error naming its folder.
    pub fn write_cmdstan(&self, dir: impl AsRef<Path>) -> Result<Vec<PathBuf>> {
        let dir = dir.as_ref();
        let replays = match &self.written {
            Written::InMemory(replays) => replays,
            Written::Streamed(to) => {
                return Err(Error::invalid(format!(
                    "the run wrote its files to {} as it ran; copy them from there",
                    to.display()
                )));
            }
        };
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let columns = self.run.chains.first().map_or(0, |c| c.columns.len());
        let mut row = Vec::with_capacity(columns);
        self.run
            .chains
            .iter()
            .zip(replays)
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
