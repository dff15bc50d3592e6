//! A run's folder belongs to one run at a time. While a run writes to it, it holds an advisory
//! lock (`flock`) on the folder's lock file, so a second run on the folder is refused instead
//! of interleaving its rows with the first's; the kernel drops the lock when the process ends,
//! however it ends, so a lock file left by a killed run blocks nothing. And a new run never
//! writes over an earlier run's files: it is refused, or, when asked to overwrite, removes
//! those files (shmc's, recognised by name and header, never any other) first. One rule,
//! [`take_over`], for every kind of run (a sample run's chains, a calibration's ranks): a file
//! the new run would write that is not the earlier run's is refused, overwrite or not.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use super::RUN_SETTINGS_FILE;
use super::resume::{checkpoint_path, surrogate_path};
use crate::{Error, Result};

/// The lock file in a run's folder. It stays when the run ends: its lock, not its presence,
/// says that a run is writing; it holds the pid and host of the last run that took it.
pub(crate) const LOCK_FILE: &str = ".shmc.lock";

/// The lock on a run's folder: held while this value lives, released when it is dropped (or
/// by the kernel when the process dies).
#[derive(Debug)]
pub(crate) struct FolderLock {
    _file: File,
}

/// Takes the lock on `dir` (which must exist), or refuses, naming the run that holds it.
pub(crate) fn lock(dir: &Path) -> Result<FolderLock> {
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

/// Refuses a new sample run in `dir` if it holds an earlier run's files, or with `overwrite`
/// removes them; the files removed. Before either, a file the run would write (its chain files
/// `csvs` and theirs beside them) that is not an earlier run's is refused, overwrite or not, and
/// so is a folder holding a calibration run.
pub(crate) fn clear_earlier_run(
    dir: &Path,
    csvs: &[PathBuf],
    overwrite: bool,
) -> Result<Vec<PathBuf>> {
    refuse_other_kind(dir, CALIBRATION_MANIFEST, "a calibration run's")?;
    let will_write: Vec<PathBuf> = csvs
        .iter()
        .flat_map(|csv| std::iter::once(csv.clone()).chain(companions(csv)))
        .collect();
    take_over(dir, &will_write, &earlier_run(dir)?, true, overwrite)
}

/// The file that lists a calibration run's files in its folder (`shmc sbc --output`); named
/// here, where every kind of run learns which folders are not its own.
pub const CALIBRATION_MANIFEST: &str = "shmc-sbc.json";

/// Refuses `dir` when it holds `marker`, the file of another kind of run (`what`).
pub(crate) fn refuse_other_kind(dir: &Path, marker: &str, what: &str) -> Result<()> {
    let path = dir.join(marker);
    match path.exists() {
        false => Ok(()),
        true => Err(Error::invalid(format!(
            "{}: holds {what} files ({} lists or marks them): write this run to another folder",
            dir.display(),
            path.display()
        ))),
    }
}

/// The one ownership rule: a new run that writes `will_write` into `dir`, which holds the
/// earlier run's files `earlier`, is refused if any file it would write exists and is not among
/// `earlier` (such a file is not shmc's, or not this kind of run's, and nothing can give it
/// back, so not even an overwrite writes over it); then refused if `earlier` is not empty, or
/// with `overwrite` removes `earlier` (all of them, so nothing of the old run stays beside the
/// new one). `resumable`: whether the earlier run could be resumed instead. The files removed.
pub(crate) fn take_over(
    dir: &Path,
    will_write: &[PathBuf],
    earlier: &[PathBuf],
    resumable: bool,
    overwrite: bool,
) -> Result<Vec<PathBuf>> {
    if let Some(path) = will_write
        .iter()
        .find(|path| path.exists() && !earlier.contains(path))
    {
        return Err(Error::invalid(format!(
            "{}: not a file of an earlier shmc run, and this run would write over it: move it, \
             or write the run to another folder",
            path.display()
        )));
    }
    if earlier.is_empty() {
        return Ok(Vec::new());
    }
    if !overwrite {
        return Err(Error::FolderHoldsRun {
            dir: dir.to_path_buf(),
            files: short_list(earlier),
            resumable,
        });
    }
    for path in earlier {
        std::fs::remove_file(path).map_err(|e| Error::io(path, e))?;
    }
    Ok(earlier.to_vec())
}

/// Up to three of `files` by name, and how many more.
pub(crate) fn short_list(files: &[PathBuf]) -> String {
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

/// The page `shmc report` writes into a run's folder by default: part of the run it describes,
/// so it goes with that run's files (a new run beside it would leave a page of the old one).
pub const REPORT_PAGE: &str = "report.html";

/// The line in a page's head that marks it as a report shmc wrote: a later report may replace
/// a file holding it (the page is made again from the run), and no other file.
pub(crate) const REPORT_GENERATOR: &str = "<meta name=\"generator\" content=\"shmc report\">";

/// Whether the file at `path` is a page shmc wrote: its head, in the first 4 KiB, holds
/// [`REPORT_GENERATOR`].
pub(crate) fn is_shmc_page(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    let mut head = Vec::new();
    match file.take(4096).read_to_end(&mut head) {
        Ok(_) => String::from_utf8_lossy(&head).contains(REPORT_GENERATOR),
        Err(_) => false,
    }
}

/// The files shmc wrote for a run in `dir`, sorted: every chain CSV whose header is shmc's,
/// with the checkpoint, saved surrogate and temporary files beside it, the run settings file,
/// and its report page if shmc wrote it. Anything else (a user's notes, another program's CSV
/// or page) is not counted.
pub(crate) fn earlier_run(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let settings = name == RUN_SETTINGS_FILE || name == format!("{RUN_SETTINGS_FILE}.tmp");
        if settings || (name == REPORT_PAGE && is_shmc_page(&path)) {
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

    /// `shmc report`'s page describes the run in its folder, so it goes with that run's files
    /// (`sample --overwrite` left it describing the old run, #48); a user's page of that name
    /// stays theirs.
    #[test]
    fn the_runs_report_page_is_the_runs_and_a_users_page_is_not() {
        let dir = temp_dir("page");
        let page = format!("<!DOCTYPE html>\n<head>\n{REPORT_GENERATOR}\n</head>\n");
        std::fs::write(dir.join(REPORT_PAGE), page).unwrap();
        let names = |dir: &Path| -> Vec<String> {
            earlier_run(dir)
                .unwrap()
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(&dir), [REPORT_PAGE]);
        std::fs::write(dir.join(REPORT_PAGE), "<html>my own notes</html>").unwrap();
        assert!(names(&dir).is_empty());
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
