//! A chain's checkpoint beside its CSV file, and what resuming reads back from the two.
//!
//! Beside `NAME-k.csv` a chain that has finished warmup keeps `NAME-k.checkpoint.json` (see
//! [`crate::sampler::checkpoint`]) and, if it proposes with a surrogate fitted in warmup,
//! `NAME-k.surrogate.json` (the surrogate file format). Each is written to a temporary file and
//! renamed over the old one, so a kill at any moment leaves either the previous version or the
//! new one, never a mix. Rows are flushed before the checkpoint that counts them, so the CSV
//! always holds at least the rows a checkpoint counts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sampler::{Checkpoint, Resumed, SAMPLER_COLUMNS};
use crate::surrogates::{Surrogate, SurrogateMeta, kinds};
use crate::{Error, Result};

use super::cmdstan::read_stan_csv;

/// The checkpoint file of the chain whose rows are in `csv`.
pub fn checkpoint_path(csv: &Path) -> PathBuf {
    csv.with_extension("checkpoint.json")
}

/// The saved surrogate of the chain whose rows are in `csv`.
pub fn surrogate_path(csv: &Path) -> PathBuf {
    csv.with_extension("surrogate.json")
}

/// Makes `path` with `write` on a temporary file renamed over it.
fn write_atomically(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let temporary = path.with_extension("json.tmp");
    write(&temporary)?;
    std::fs::rename(&temporary, path).map_err(|e| Error::io(path, e))
}

/// Saves `checkpoint` beside `csv`, and `surrogate` if given (`model`: its name, for the
/// surrogate file's meta).
pub fn save(
    csv: &Path,
    checkpoint: &Checkpoint,
    surrogate: Option<&dyn Surrogate>,
    model: &str,
) -> Result<()> {
    if let Some(surrogate) = surrogate {
        let meta = SurrogateMeta {
            model: model.to_string(),
            ..SurrogateMeta::default()
        };
        write_atomically(&surrogate_path(csv), |path| surrogate.save(path, &meta))?;
    }
    let path = checkpoint_path(csv);
    let text = serde_json::to_string(checkpoint)
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
    write_atomically(&path, |temporary| {
        std::fs::write(temporary, text).map_err(|e| Error::io(temporary, e))
    })
}

/// Removes the checkpoint files beside `csv` (a new run in the folder of an old one).
pub fn remove(csv: &Path) {
    for path in [checkpoint_path(csv), surrogate_path(csv)] {
        // Absent is the usual case; a file that cannot be removed is overwritten later.
        let _ = std::fs::remove_file(path);
    }
}

/// The chain of `csv` to resume, if it saved a checkpoint (`None`: it stopped in warmup and
/// starts again), for a model of `dim` parameters. The CSV is cut back to the rows the
/// checkpoint counts (`warmup_rows` saved warmup rows before them), dropping later rows and any
/// end block, so that the chain's sink appends from there.
pub fn read(csv: &Path, dim: usize, warmup_rows: usize) -> Result<Option<Resumed>> {
    let path = checkpoint_path(csv);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let checkpoint: Checkpoint = serde_json::from_str(&text).map_err(|e| Error::Data {
        path: path.clone(),
        line: e.line(),
        message: format!("not a chain checkpoint: {e}"),
    })?;
    let surrogate = if checkpoint.saved_surrogate {
        let (surrogate, _) = kinds::load(&surrogate_path(csv), dim)?;
        Some(Arc::from(surrogate))
    } else {
        None
    };
    cut(csv, warmup_rows + checkpoint.kept)?;
    let file = read_stan_csv(csv)?;
    let kept = file.columns.first().map_or(0, Vec::len);
    if kept != checkpoint.kept || file.columns.len() != SAMPLER_COLUMNS.len() + dim {
        return Err(Error::invalid(format!(
            "{}: {kept} draws of {} columns where its checkpoint counts {} draws of {}",
            csv.display(),
            file.columns.len(),
            checkpoint.kept,
            SAMPLER_COLUMNS.len() + dim
        )));
    }
    let rows = (0..kept)
        .map(|i| file.columns.iter().map(|c| c[i]).collect())
        .collect();
    Ok(Some(Resumed {
        checkpoint,
        rows,
        surrogate,
    }))
}

/// Cuts `csv` back to its header, its first `rows` rows and the adaptation block among them,
/// through a temporary file renamed over it. An error if it holds fewer rows.
fn cut(csv: &Path, rows: usize) -> Result<()> {
    let text = std::fs::read_to_string(csv).map_err(|e| Error::io(csv, e))?;
    let mut kept = String::with_capacity(text.len());
    let (mut header_seen, mut seen, mut adaptation_lines) = (false, 0usize, 0usize);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let comment = line.starts_with('#');
        if !header_seen {
            header_seen = !comment;
        } else if comment {
            // The adaptation block is four comment lines; any other comment after the header
            // starts the end block.
            if line.starts_with("# Adaptation terminated") {
                adaptation_lines = 4;
            }
            if adaptation_lines == 0 {
                break;
            }
            adaptation_lines -= 1;
        } else {
            if seen == rows {
                break;
            }
            seen += 1;
        }
        kept.push_str(line);
        kept.push('\n');
    }
    if seen < rows {
        return Err(Error::invalid(format!(
            "{}: {seen} rows where its checkpoint counts {rows}: the file was changed after the \
             run stopped",
            csv.display()
        )));
    }
    let temporary = csv.with_extension("csv.tmp");
    std::fs::write(&temporary, kept).map_err(|e| Error::io(&temporary, e))?;
    std::fs::rename(&temporary, csv).map_err(|e| Error::io(csv, e))
}
