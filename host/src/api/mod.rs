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
//! It is [`sampler::resume`] underneath, with the same defaults as `shmc sample` (4 chains,
//! 1000 warmup and 1000 kept draws, exact HMC, seed 1); `shmc sample` is this sampler with the
//! files written as the chains run ([`Sampler::write_to`]), a stopped run resumed
//! ([`Sampler::resume_in`]), progress bars and Ctrl-C ([`Sampler::interrupt`]). Who streams
//! draws elsewhere (a database) calls [`sampler::sample`] with sinks of their own instead.

mod files;
mod fit;
mod limits;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};

use crate::output::folder::FolderLock;
use crate::sampler::{self, DrawSink, MassMatrix, Method, Resumed, SampleConfig};
use crate::{Error, Model, Result};
use files::{Files, OpenFiles};
pub use fit::Fit;
use fit::{Recorder, Replay, Written};

/// A sampling run to be made: the model and its settings. Each setter returns the sampler, so a
/// run is one expression; [`Sampler::run`] makes it.
pub struct Sampler<'m, M: ?Sized> {
    model: &'m M,
    config: SampleConfig,
    name: String,
    progress: Option<Progress<'m>>,
    interrupt: Option<&'m AtomicBool>,
    files: Option<Files>,
    overwrite: bool,
    data_file: Option<String>,
    header_entries: Vec<(String, String)>,
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
            interrupt: None,
            files: None,
            overwrite: false,
            data_file: None,
            header_entries: Vec::new(),
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

    /// The id of the first chain (default 1, CmdStan's `id`): a run of chains `id..id + chains`
    /// makes exactly those chains of the one run of them all, each with its own file
    /// (`MODEL-ID.csv`), random stream and checkpoint; see [`SampleConfig::chain_id`].
    pub fn chain_id(mut self, id: usize) -> Self {
        self.config.chain_id = id;
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

    /// Every setting at once (a front end that builds the whole [`SampleConfig`] itself).
    pub fn settings(mut self, config: SampleConfig) -> Self {
        self.config = config;
        self
    }

    /// Any other setting (step size, trajectory length, initial values, …), on the run's
    /// [`SampleConfig`].
    pub fn configure(mut self, change: impl FnOnce(&mut SampleConfig)) -> Self {
        change(&mut self.config);
        self
    }

    /// Stop every chain after its current iteration once `flag` is set (by a signal handler,
    /// another thread): every finished draw is kept and the [`Fit`] says it was interrupted.
    pub fn interrupt(mut self, flag: &'m AtomicBool) -> Self {
        self.interrupt = Some(flag);
        self
    }

    /// Write each chain's CmdStan CSV into `dir` (created if needed) as the draws are made,
    /// with a checkpoint beside it about every second after warmup, instead of keeping the
    /// warmup rows for [`Fit::write_cmdstan`]: a run killed midway leaves files of complete rows
    /// that [`Sampler::resume_in`] goes on from.
    ///
    /// The folder belongs to the run while it runs: another run writing to it is refused (a
    /// lock file, `.shmc.lock`, holds the lock), and so is a folder that holds an earlier
    /// run's files, unless [`Sampler::overwrite`].
    pub fn write_to(mut self, dir: impl Into<PathBuf>) -> Self {
        self.files = Some(Files {
            dir: dir.into(),
            resume: false,
        });
        self
    }

    /// Go on with the stopped run whose files are in `dir` (written by [`Sampler::write_to`]
    /// with the same model, name and settings): each chain from its last checkpoint, or from
    /// its start if it stopped in warmup. The draws are those of an uninterrupted run, bit for
    /// bit; a file whose header differs from the one these settings write is refused.
    pub fn resume_in(mut self, dir: impl Into<PathBuf>) -> Self {
        self.files = Some(Files {
            dir: dir.into(),
            resume: true,
        });
        self
    }

    /// With [`Sampler::write_to`]: if the folder holds an earlier run's files (shmc's chain
    /// CSVs, their checkpoints and saved surrogates, the run settings file), remove them before
    /// writing, instead of refusing the folder. No other file is touched;
    /// [`Opened::removed`] lists those removed.
    pub fn overwrite(mut self, overwrite: bool) -> Self {
        self.overwrite = overwrite;
        self
    }

    /// The data file to name in the files' headers (with [`Sampler::write_to`]).
    pub fn data_file(mut self, name: impl Into<String>) -> Self {
        self.data_file = Some(name.into());
        self
    }

    /// A `key = value` line for the files' headers, under `shmc` after the method's own (with
    /// [`Sampler::write_to`]): what the caller knows of the run that its settings do not say,
    /// such as why its method was chosen. A resumed run must give the same entries.
    pub fn header_entry(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.header_entries.push((key.into(), value.into()));
        self
    }

    /// The run's settings as they stand.
    pub fn config(&self) -> &SampleConfig {
        &self.config
    }

    /// Checks the settings against the model and the process's limits (threads; with files,
    /// open files), takes the folder and opens the run's files, before any chain starts: what
    /// [`Opened::resumed`] tells can be shown first. Nothing is written if the settings are
    /// refused.
    pub fn open(self) -> Result<Opened<'m, M>> {
        self.config.validate(self.model)?;
        limits::check_threads(self.config.chains)?;
        let chains = self.config.chains;
        let (files, replays) = match &self.files {
            Some(files) => {
                let header = files::Header {
                    name: &self.name,
                    data_file: self.data_file.as_deref(),
                    entries: &self.header_entries,
                };
                let opened = files.open(&header, &self.config, self.model, self.overwrite)?;
                (opened, Vec::new())
            }
            None => {
                self.check_kept_warmup()?;
                let replays: Vec<Arc<Mutex<Replay>>> =
                    (0..chains).map(|_| Arc::default()).collect();
                let sinks = replays
                    .iter()
                    .map(|replay| Box::new(Recorder(Arc::clone(replay))) as Box<dyn DrawSink>)
                    .collect();
                let files = OpenFiles {
                    sinks,
                    resumed: vec![None; chains],
                    lock: None,
                    removed: Vec::new(),
                };
                (files, replays)
            }
        };
        Ok(Opened {
            sampler: self,
            sinks: files.sinks,
            resumed: files.resumed,
            replays,
            lock: files.lock,
            removed: files.removed,
        })
    }

    /// Refuses saved warmup rows that would not fit in memory: without files
    /// ([`Sampler::write_to`]) they are kept for [`Fit::write_cmdstan`], a row of the
    /// sampler's columns and the parameters (and a vector's own 24 bytes) per iteration.
    fn check_kept_warmup(&self) -> Result<()> {
        let c = &self.config;
        if !c.save_warmup {
            return Ok(());
        }
        let row = (sampler::SAMPLER_COLUMNS.len() as u128 + self.model.dim() as u128) * 8 + 24;
        crate::memory::check(
            &format!(
                "keeping {} warmup rows of {} chains in memory",
                c.warmup, c.chains
            ),
            "warmup",
            row.checked_mul(c.warmup as u128)
                .and_then(|b| b.checked_mul(c.chains as u128)),
            c.memory_limit,
        )
    }

    /// Runs the chains: [`Sampler::open`], then [`Opened::run`].
    pub fn run(self) -> Result<Fit> {
        self.open()?.run()
    }
}

/// A run whose settings were checked and whose files are open, its chains not yet started.
pub struct Opened<'m, M: ?Sized> {
    sampler: Sampler<'m, M>,
    sinks: Vec<Box<dyn DrawSink>>,
    resumed: Vec<Option<Resumed>>,
    replays: Vec<Arc<Mutex<Replay>>>,
    /// The folder's lock, held until the run ends.
    lock: Option<FolderLock>,
    removed: Vec<PathBuf>,
}

impl<'m, M: Model + ?Sized> Opened<'m, M> {
    /// Each chain's checkpoint when resuming a stopped run (`None`: the chain starts again,
    /// having stopped in warmup); all `None` for a new run.
    pub fn resumed(&self) -> &[Option<Resumed>] {
        &self.resumed
    }

    /// The earlier run's files removed from the folder (with [`Sampler::overwrite`]).
    pub fn removed(&self) -> &[PathBuf] {
        &self.removed
    }

    /// Runs the chains and keeps their draws. A failed chain stops the others, as in
    /// [`sampler::sample`]; a run that fails leaves no file without a draw, and a model's
    /// failure names the folder whose files keep the draws made before it. The folder's lock
    /// is released when this returns, whether the run ended, failed or was interrupted.
    pub fn run(self) -> Result<Fit> {
        let Opened {
            sampler: s,
            sinks,
            resumed,
            replays,
            lock: _lock,
            removed: _,
        } = self;
        let progress = |chain: usize, done: usize| {
            if let Some(progress) = &s.progress {
                progress(chain, done);
            }
        };
        let run =
            sampler::resume_validated(s.model, &s.config, &resumed, sinks, &progress, s.interrupt);
        let run = match (run, &s.files) {
            (Err(e), Some(files)) => return Err(failed(e, files, &s.name, &s.config)),
            (run, _) => run?,
        };
        let written = match s.files {
            Some(files) => Written::Streamed(files.dir),
            None => Written::InMemory(
                replays
                    .into_iter()
                    .map(|r| std::mem::take(&mut *r.lock().unwrap_or_else(PoisonError::into_inner)))
                    .collect(),
            ),
        };
        Ok(Fit {
            run,
            config: s.config,
            name: s.name,
            written,
        })
    }
}

/// A run's error after its files were opened: the files without a draw removed, and a model's
/// failure completed with where the draws made before it are.
fn failed(error: Error, files: &Files, name: &str, config: &SampleConfig) -> Error {
    let kept = files.remove_empty(name, config.chain_ids());
    match error {
        Error::ModelFailed(failure) if kept => Error::ModelFailed(format!(
            "{failure}; the CSV files in {} keep the draws made before",
            files.dir().display()
        )),
        other => other,
    }
}
