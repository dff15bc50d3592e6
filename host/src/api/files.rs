//! A run's CmdStan CSV files written as the chains run, one per chain in the run's folder; or a
//! stopped run's files, each cut back to its chain's checkpoint and written on from there.

use std::path::{Path, PathBuf};

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

/// Each chain's sink and, when resuming, the chain to resume (`None`: it starts again).
pub(super) type Opened = (Vec<Box<dyn DrawSink>>, Vec<Option<Resumed>>);

impl Files {
    /// Opens every chain's file, its header naming the model `name` and the data file:
    /// created (with the folder, if needed) for a new run, cut back to its checkpoint for a
    /// resumed one.
    pub fn open<M: Model + ?Sized>(
        &self,
        (name, data_file): (&str, Option<&str>),
        config: &SampleConfig,
        model: &M,
    ) -> Result<Opened> {
        if !self.resume {
            std::fs::create_dir_all(&self.dir).map_err(|e| crate::Error::io(&self.dir, e))?;
        }
        if self.resume {
            self.check_checkpoints(name, config, model)?;
        }
        let warmup_rows = if config.save_warmup { config.warmup } else { 0 };
        let mut opened: Opened = (Vec::new(), Vec::new());
        for chain in 1..=config.chains {
            let path = chain_path(&self.dir, name, chain);
            let mut header = CsvHeader::for_run(name, chain, config, model.parameter_names());
            header.data_file = data_file.map(str::to_string);
            let (sink, resumed) = if self.resume {
                CsvSink::resume(&path, &header, model.dim(), warmup_rows)?
            } else {
                (CsvSink::create(&path, &header)?, None)
            };
            opened.0.push(Box::new(sink));
            opened.1.push(resumed);
        }
        Ok(opened)
    }

    /// Reads every chain's checkpoint before any file is cut back to one: a broken checkpoint
    /// ([`crate::sampler::Checkpoint::problem`]), or one whose saved `U` is not `model`'s at its
    /// position, is refused with the run's files as they were. (Under the Laplace mass matrix
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
        for chain in 1..=config.chains {
            let csv = chain_path(&self.dir, name, chain);
            let Some(checkpoint) = resume::read_checkpoint(&csv, model.dim())? else {
                continue;
            };
            let problem = exact_coordinates
                .then(|| checkpoint.potential_problem(&model))
                .flatten();
            if let Some(problem) = problem {
                let path = resume::checkpoint_path(&csv);
                return Err(Error::invalid(format!("{}: {problem}", path.display())));
            }
        }
        Ok(())
    }

    /// After a failed run: removes the chains' files that hold no draw (only the header
    /// CmdStan writes first), so that nothing left behind looks like a run; whether any file
    /// with draws remains.
    pub fn remove_empty(&self, name: &str, chains: usize) -> bool {
        let mut kept = false;
        for chain in 1..=chains {
            let path = chain_path(&self.dir, name, chain);
            match std::fs::read_to_string(&path) {
                Ok(text) if holds_no_draw(&text) => {
                    let _ = std::fs::remove_file(&path);
                }
                Ok(_) => kept = true,
                Err(_) => {}
            }
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
