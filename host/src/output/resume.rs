//! A chain's checkpoint beside its CSV file, and what resuming reads back from the two.
//!
//! Beside `NAME-k.csv` a chain that has finished warmup keeps `NAME-k.checkpoint.json` (see
//! [`crate::sampler::checkpoint`]) and, if it proposes with a surrogate fitted in warmup,
//! `NAME-k.surrogate.json` (the surrogate file format). Each is written to a temporary file and
//! renamed over the old one, so a kill at any moment leaves either the previous version or the
//! new one, never a mix. Rows are flushed before the checkpoint that counts them, so the CSV
//! always holds at least the rows a checkpoint counts; the CSV sink cuts it back to them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sampler::Checkpoint;
use crate::surrogates::{Surrogate, SurrogateMeta, kinds};
use crate::{Error, Result};

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

/// A chain's checkpoint and the surrogate saved beside it, if it saved one.
pub type Saved = (Checkpoint, Option<Arc<dyn Surrogate>>);

/// What the chain whose rows are in `csv` saved (a model of `dim` parameters), if it saved a
/// checkpoint (`None`: it stopped in warmup and starts again).
pub fn read(csv: &Path, dim: usize) -> Result<Option<Saved>> {
    let Some(checkpoint) = read_checkpoint(csv, dim)? else {
        return Ok(None);
    };
    let surrogate = if checkpoint.saved_surrogate {
        let (surrogate, _) = kinds::load(&surrogate_path(csv), dim)?;
        Some(Arc::from(surrogate))
    } else {
        None
    };
    Ok(Some((checkpoint, surrogate)))
}

/// The checkpoint of the chain whose rows are in `csv`, if it saved one, checked
/// ([`Checkpoint::problem`]) for a model of `dim` parameters.
pub fn read_checkpoint(csv: &Path, dim: usize) -> Result<Option<Checkpoint>> {
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
    if let Some(problem) = checkpoint.problem(dim) {
        return Err(Error::invalid(format!("{}: {problem}", path.display())));
    }
    Ok(Some(checkpoint))
}
