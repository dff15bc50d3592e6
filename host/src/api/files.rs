//! A run's CmdStan CSV files written as the chains run, one per chain in the run's folder; or a
//! stopped run's files, each cut back to its chain's checkpoint and written on from there.

use std::path::{Path, PathBuf};

use super::limits;
use crate::output::folder::{self, FolderLock};
use crate::output::{CsvHeader, CsvSink, chain_path, resume};
use crate::sampler::{DrawSink, MassMatrix, Resumed, SampleConfig};
use crate::{Error, Model, Result};

/// Where a run's files go, and whether they are a stopped run's to go on with.
#[derive(Clone, Debug)]
pub(super) struct Files {
    /// The run's folder.
    pub dir: PathBuf,
    /// The files are a stopped run's: go on from each chain's checkpoint.
    pub resume: bool,
}

/// A run's open files: each chain's sink and, when resuming, the chain to resume (`None`: it
/// starts again); the folder's lock, held as long as this lives; and the earlier run's files
/// removed to make room (with overwrite).
pub(super) struct OpenFiles {
    pub sinks: Vec<Box<dyn DrawSink>>,
    pub resumed: Vec<Option<Resumed>>,
    pub lock: Option<FolderLock>,
    pub removed: Vec<PathBuf>,
}

/// What the files' headers say beside the run's settings.
pub(super) struct Header<'a> {
    /// The model's name, which also names the files.
    pub name: &'a str,
    /// The data file, if any.
    pub data_file: Option<&'a str>,
    /// Further `key = value` lines under `shmc` ([`super::Sampler::header_entry`]).
    pub entries: &'a [(String, String)],
}

impl Files {
    /// Opens every chain's file, its header naming the model and the data file (`header`):
    /// created (with the folder, if needed) for a new run, cut back to its checkpoint for a
    /// resumed one. First the process's limits are checked, then the folder is locked, and a
    /// new run refuses a folder holding an earlier run's files, or with `overwrite` removes
    /// them; a file of a chain's name that is not shmc's is refused even with `overwrite`.
    pub fn open<M: Model + ?Sized>(
        &self,
        header: &Header,
        config: &SampleConfig,
        model: &M,
        overwrite: bool,
    ) -> Result<OpenFiles> {
        let (name, data_file) = (header.name, header.data_file);
        limits::check_files(config.chains, config.memory_limit)?;
        let made_dir = !self.resume && !self.dir.exists();
        if !self.resume {
            std::fs::create_dir_all(&self.dir).map_err(|e| crate::Error::io(&self.dir, e))?;
        }
        let made_lock = !self.dir.join(folder::LOCK_FILE).exists();
        let lock = folder::lock(&self.dir)?;
        let removed = match self.claim(name, config, model, overwrite) {
            Ok(removed) => removed,
            Err(e) => {
                // A refused run leaves the folder as it found it: no lock file of its own, and
                // no folder if it made one.
                drop(lock);
                if made_lock {
                    let _ = std::fs::remove_file(self.dir.join(folder::LOCK_FILE));
                }
                if made_dir {
                    let _ = std::fs::remove_dir(&self.dir);
                }
                return Err(e);
            }
        };
        let warmup_rows = if config.save_warmup { config.warmup } else { 0 };
        let data_sha256 = data_file.map(crate::data::digest).transpose()?;
        let (mut sinks, mut resumed) = (Vec::new(), Vec::new());
        for chain in config.chain_ids() {
            let path = chain_path(&self.dir, name, chain);
            let mut csv = CsvHeader::for_run(name, chain, config, model.parameter_names());
            csv.data_file = data_file.map(str::to_string);
            csv.data_sha256 = data_sha256.clone();
            csv.extra.extend_from_slice(header.entries);
            let (sink, chain_resumed) = if self.resume {
                CsvSink::resume(&path, &csv, model.dim(), warmup_rows)?
            } else {
                (CsvSink::create(&path, &csv)?, None)
            };
            sinks.push(Box::new(sink) as Box<dyn DrawSink>);
            resumed.push(chain_resumed);
        }
        Ok(OpenFiles {
            sinks,
            resumed,
            lock: Some(lock),
            removed,
        })
    }

    /// Checks that the locked folder may take this run: a resumed run's checkpoints are this
    /// run's, a new run's files would write over nothing but an earlier run's (removed with
    /// `overwrite`); the files removed.
    fn claim<M: Model + ?Sized>(
        &self,
        name: &str,
        config: &SampleConfig,
        model: &M,
        overwrite: bool,
    ) -> Result<Vec<PathBuf>> {
        if self.resume {
            self.check_checkpoints(name, config, model)?;
            return Ok(Vec::new());
        }
        let csvs: Vec<_> = config
            .chain_ids()
            .map(|c| chain_path(&self.dir, name, c))
            .collect();
        folder::clear_earlier_run(&self.dir, &csvs, overwrite)
    }

    /// Reads every chain's checkpoint before any file is cut back to one: a broken checkpoint
    /// ([`crate::sampler::Checkpoint::problem`]), one that is not this run's
    /// ([`crate::sampler::Checkpoint::run_problem`]), or one whose saved `U` is not `model`'s at
    /// its position, is refused with the run's files as they were. (Under the Laplace mass matrix
    /// the saved position is in the approximation's coordinates, and under an approximate rule
    /// the saved value is the surrogate's: the sampler checks those once it has them.)
    fn check_checkpoints<M: Model + ?Sized>(
        &self,
        name: &str,
        config: &SampleConfig,
        model: &M,
    ) -> Result<()> {
        let exact_coordinates =
            config.mass_matrix() == MassMatrix::Diagonal && !config.method.approximate();
        for chain in config.chain_ids() {
            let csv = chain_path(&self.dir, name, chain);
            let Some(checkpoint) = resume::read_checkpoint(&csv, model.dim())? else {
                continue;
            };
            let problem = checkpoint
                .run_problem(chain, model.dim(), config)
                .or_else(|| {
                    exact_coordinates
                        .then(|| checkpoint.potential_problem(&model))
                        .flatten()
                });
            if let Some(problem) = problem {
                let path = resume::checkpoint_path(&csv);
                return Err(Error::invalid(format!("{}: {problem}", path.display())));
            }
        }
        Ok(())
    }

    /// After a failed run: removes the chains' files that hold no draw (only the header
    /// CmdStan writes first) with any checkpoint beside them and, if no chain kept a draw, the
    /// run settings file a front end saved, so that nothing left behind looks like a run (nor
    /// makes the folder refuse the next one); whether any file with draws remains. `ids` are
    /// the run's chains'.
    pub fn remove_empty(&self, name: &str, ids: std::ops::RangeInclusive<usize>) -> bool {
        let mut kept = false;
        for chain in ids {
            let path = chain_path(&self.dir, name, chain);
            match std::fs::read_to_string(&path) {
                Ok(text) if holds_no_draw(&text) => {
                    crate::output::resume::remove(&path);
                    let _ = std::fs::remove_file(&path);
                }
                Ok(_) => kept = true,
                Err(_) => {}
            }
        }
        if !kept {
            let _ = std::fs::remove_file(self.dir.join(crate::output::RUN_SETTINGS_FILE));
        }
        kept
    }

    /// The run's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Whether a CSV's text is a header alone: its column-name line is its one non-comment line.
fn holds_no_draw(text: &str) -> bool {
    text.lines().filter(|l| !l.starts_with('#')).count() <= 1
}
