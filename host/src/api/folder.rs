//! A run's folder belongs to one run at a time. While a run writes to it, it holds an advisory
//! lock (`flock`) on the folder's lock file, so a second run on the folder is refused instead
//! of interleaving its rows with the first's; the kernel drops the lock when the process ends,
//! however it ends, so a lock file left by a killed run blocks nothing. And a new run never
//! writes over an earlier run's files: it is refused, or, when asked to overwrite, removes
//! those files (shmc's, recognised by name and header, never any other) first.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use crate::output::RUN_SETTINGS_FILE;
use crate::output::resume::{checkpoint_path, surrogate_path};
use crate::{Error, Result};

/// The lock file in a run's folder. It stays when the run ends: its lock, not its presence,
/// says that a run is writing; it holds the pid and host of the last run that took it.
pub(super) const LOCK_FILE: &str = ".shmc.lock";

/// The lock on a run's folder: held while this value lives, released when it is dropped (or
/// by the kernel when the process dies).
#[derive(Debug)]
pub(super) struct FolderLock {
    _file: File,
}

/// Takes the lock on `dir` (which must exist), or refuses, naming the run that holds it.
pub(super) fn lock(dir: &Path) -> Result<FolderLock> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(in_use(dir, &path)),
        Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
    }
    let holder = format!("pid {} on host {}\n", std::process::id(), host_name());
    file.set_len(0)
        .and_then(|()| file.write_all(holder.as_bytes()))
        .and_then(|()| file.flush())
        .map_err(|e| Error::io(&path, e))?;
    Ok(FolderLock { _file: file })
}

/// The refusal of a folder whose lock another run holds, naming that run as its lock file does.
fn in_use(dir: &Path, lock: &Path) -> Error {
    let holder = std::fs::read_to_string(lock).unwrap_or_default();
    let holder = match holder.trim() {
        "" => "a run that is starting".to_string(),
        holder => format!("shmc {holder}"),
    };
    Error::invalid(format!(
        "{}: another run is writing to this folder ({holder}, which holds {}); two runs in one \
         folder would mix their files: wait for it to end or write elsewhere",
        dir.display(),
        lock.display()
    ))
}

/// This machine's name, for the lock file.
fn host_name() -> String {
    #[cfg(unix)]
    {
        rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned()
    }
    #[cfg(not(unix))]
    {
        std::env::var("COMPUTERNAME").unwrap_or_else(|_| "unknown".into())
    }
}

/// Refuses a new run in `dir` if it holds an earlier run's files, or with `overwrite` removes
/// them; the files removed. Before either, a file the run would write (its chain files `csvs`
/// and theirs beside them) that is not an earlier run's is refused, overwrite or not.
pub(super) fn clear_earlier_run(
    dir: &Path,
    csvs: &[PathBuf],
    overwrite: bool,
) -> Result<Vec<PathBuf>> {
    let files = earlier_run(dir)?;
    refuse_foreign(csvs, &files)?;
    if files.is_empty() {
        return Ok(files);
    }
    if !overwrite {
        return Err(Error::FolderHoldsRun {
            dir: dir.to_path_buf(),
            files: short_list(&files),
        });
    }
    for path in &files {
        std::fs::remove_file(path).map_err(|e| Error::io(path, e))?;
    }
    Ok(files)
}

/// Refuses a new run whose chain files `csvs` (or the checkpoint, saved surrogate and
/// temporary files beside them) exist and are not among the earlier run's files `earlier`:
/// such a file is not shmc's (a user's notes named like a chain file, another program's
/// checkpoint), and nothing can give it back, so not even an overwrite writes over it.
fn refuse_foreign(csvs: &[PathBuf], earlier: &[PathBuf]) -> Result<()> {
    let taken = csvs
        .iter()
        .flat_map(|csv| std::iter::once(csv.clone()).chain(companions(csv)))
        .find(|path| path.exists() && !earlier.contains(path));
    match taken {
        None => Ok(()),
        Some(path) => Err(Error::invalid(format!(
            "{}: not a file of an earlier shmc run, and this run would write over it: move it, \
             or write the run to another folder",
            path.display()
        ))),
    }
}

/// Up to three of `files` by name, and how many more.
fn short_list(files: &[PathBuf]) -> String {
    let names: Vec<String> = files
        .iter()
        .take(3)
        .map(|p| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    match files.len() {
        n if n > 3 => format!("{} and {} more", names.join(", "), n - 3),
        _ => names.join(", "),
    }
}

/// The files shmc wrote for a run in `dir`, sorted: every chain CSV whose header is shmc's,
/// with the checkpoint, saved surrogate and temporary files beside it, and the run settings
/// file. Anything else (a user's notes, another program's CSV) is not counted.
pub(super) fn earlier_run(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name == RUN_SETTINGS_FILE || name == format!("{RUN_SETTINGS_FILE}.tmp") {
            files.push(path);
        } else if name.ends_with(".csv") && is_shmc_csv(&path) {
            files.extend(companions(&path).into_iter().filter(|p| p.is_file()));
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The files shmc keeps beside a chain's CSV: its checkpoint, saved surrogate, and the
/// temporary files each is written through.
fn companions(csv: &Path) -> Vec<PathBuf> {
    let (checkpoint, surrogate) = (checkpoint_path(csv), surrogate_path(csv));
    vec![
        csv.with_extension("csv.tmp"),
        checkpoint.with_extension("json.tmp"),
        surrogate.with_extension("json.tmp"),
        checkpoint,
        surrogate,
    ]
}

/// Whether the CSV at `path` is a chain file shmc wrote: its comment header has shmc's
/// `# shmc` block with its version (what the CSV sink writes before the column names).
fn is_shmc_csv(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    let mut in_shmc_block = false;
    // A header is a few dozen short lines: a file without line breaks is not read whole.
    for line in BufReader::new(file.take(1 << 20)).lines() {
        let Ok(line) = line else { return false };
        if !line.starts_with('#') {
            return false;
        }
        if in_shmc_block && line.starts_with("#   version = ") {
            return true;
        }
        in_shmc_block = line == "# shmc";
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shmc-folder-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_held_lock_refuses_a_second_taker_and_is_free_once_dropped() {
        let dir = temp_dir("lock");
        let held = lock(&dir).unwrap();
        let text = lock(&dir).unwrap_err().to_string();
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        drop(held);
        lock(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_shmc_files_count_as_an_earlier_run() {
        let dir = temp_dir("earlier");
        let shmc_header = "# model = banana\n# shmc\n#   version = 0.1.0\nlp__,x\n";
        std::fs::write(dir.join("banana-1.csv"), shmc_header).unwrap();
        std::fs::write(dir.join("banana-1.checkpoint.json"), "{}").unwrap();
        std::fs::write(dir.join("theirs.csv"), "# shmc\nlp__,x\n1,2\n").unwrap();
        std::fs::write(dir.join("theirs.checkpoint.json"), "{}").unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        let names: Vec<String> = earlier_run(&dir)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["banana-1.checkpoint.json", "banana-1.csv"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_of_a_chains_name_that_is_not_shmcs_is_refused_even_with_overwrite() {
        let dir = temp_dir("foreign");
        let shmc_header = "# model = banana\n# shmc\n#   version = 0.1.0\nlp__,x\n";
        std::fs::write(dir.join("banana-1.csv"), shmc_header).unwrap();
        std::fs::write(dir.join("banana-1.checkpoint.json"), "{}").unwrap();
        let csvs = [dir.join("banana-1.csv"), dir.join("banana-2.csv")];
        std::fs::write(dir.join("banana-2.checkpoint.json"), "{\"mine\":2}").unwrap();
        let text = clear_earlier_run(&dir, &csvs, true)
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("banana-2.checkpoint.json: not a file of an earlier shmc run"),
            "{text}"
        );
        assert!(dir.join("banana-1.csv").exists(), "removed before refusing");
        std::fs::remove_file(dir.join("banana-2.checkpoint.json")).unwrap();
        let removed = clear_earlier_run(&dir, &csvs, true).unwrap();
        assert_eq!(removed.len(), 2, "{removed:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
