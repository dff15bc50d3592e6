//! A calibration run's folder belongs to that run, as a sample run's belongs to it: the run
//! locks it, and before writing anything lists the files it will write in a manifest
//! ([`CALIBRATION_MANIFEST`]). A later calibration in the folder is refused, or with an
//! overwrite removes exactly the files that manifest lists (so an old `rank-beta.svg` does not
//! stay beside a new `rank-mu.svg`); a file it would write that no manifest lists (a user's
//! `ranks.csv`) is refused either way, and so is a folder holding a sample run.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::part::{PART_FILE, TABLE_PART_FILE};
use crate::output::folder::{self, FolderLock};
use crate::output::{CALIBRATION_MANIFEST, RUN_SETTINGS_FILE};
use crate::{Error, Result};

/// The files a calibration writes whatever its parameters (a part's and the run settings a
/// front end saves for `--merge` among them); with `rank-NAME.svg`, the only names a manifest
/// may list, so a tampered one cannot point an overwrite at any other file.
const FIXED_FILES: [&str; 6] = [
    "ranks.csv",
    "summary.txt",
    PART_FILE,
    TABLE_PART_FILE,
    RUN_SETTINGS_FILE,
    "shmc-run.json.tmp",
];

/// The manifest: which shmc wrote it, and the files of the run, by name in its folder.
#[derive(Serialize, Deserialize)]
struct Manifest {
    shmc: String,
    files: Vec<String>,
}

/// The names of the files a calibration of parameters `names` writes: the ranks, a histogram
/// per parameter and the summary; for a part also its part file and the run settings.
pub fn calibration_files(names: &[String], part: bool) -> Vec<String> {
    let mut files = vec!["ranks.csv".to_string(), "summary.txt".to_string()];
    files.extend(names.iter().map(|name| histogram_file(name)));
    if part {
        files.extend([PART_FILE, RUN_SETTINGS_FILE, "shmc-run.json.tmp"].map(String::from));
    }
    files
}

/// The histogram file of parameter `name`: its letters, digits, `.`, `-` and `_`, the rest `_`.
pub(super) fn histogram_file(name: &str) -> String {
    let stem: String = name
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() || "._-".contains(c) {
            true => c,
            false => '_',
        })
        .collect();
    format!("rank-{stem}.svg")
}

/// Whether `name` is a file name a calibration writes (no folder, nothing hidden).
fn is_calibration_file(name: &str) -> bool {
    let histogram = name
        .strip_prefix("rank-")
        .and_then(|rest| rest.strip_suffix(".svg"))
        .is_some_and(|stem| {
            !stem.starts_with('.')
                && stem
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        });
    histogram || FIXED_FILES.contains(&name)
}

/// A calibration's claim on its folder: the lock, held while this lives, and the files it
/// may write there.
#[derive(Debug)]
pub struct SbcFolder {
    dir: PathBuf,
    files: Vec<String>,
    removed: Vec<PathBuf>,
    _lock: FolderLock,
}

impl SbcFolder {
    /// Claims `dir` (created if needed) for a calibration that writes `files` there (names in
    /// it, as [`calibration_files`] gives them): locks it, refuses it if it holds a sample run,
    /// a file of `files` that is not an earlier calibration's, or an earlier calibration (or
    /// with `overwrite` removes that calibration's files), and lists `files` in its manifest.
    pub fn claim(dir: &Path, files: Vec<String>, overwrite: bool) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let lock = folder::lock(dir)?;
        let earlier = earlier_calibration(dir)?;
        let samples: Vec<PathBuf> = folder::earlier_run(dir)?
            .into_iter()
            .filter(|path| !earlier.contains(path))
            .collect();
        if !samples.is_empty() {
            return Err(Error::invalid(format!(
                "{}: holds a sample run's files ({}): write the calibration to another folder",
                dir.display(),
                folder::short_list(&samples)
            )));
        }
        let mut will_write: Vec<PathBuf> = files.iter().map(|f| dir.join(f)).collect();
        will_write.push(dir.join(CALIBRATION_MANIFEST));
        let removed = folder::take_over(dir, &will_write, &earlier, false, overwrite)?;
        write_manifest(dir, &files)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            files,
            removed,
            _lock: lock,
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of `file` in the folder, refused unless the claim lists it.
    pub fn path(&self, file: &str) -> Result<PathBuf> {
        match self.files.iter().any(|f| f == file) {
            true => Ok(self.dir.join(file)),
            false => Err(Error::invalid(format!(
                "{}: not among the files this calibration listed for its folder",
                self.dir.join(file).display()
            ))),
        }
    }

    /// The earlier calibration's files removed (with an overwrite).
    pub fn removed(&self) -> &[PathBuf] {
        &self.removed
    }
}

/// The files of the earlier calibration in `dir`, by its manifest: those it lists that exist,
/// and the manifest. None without a manifest; a manifest that is not one is refused.
fn earlier_calibration(dir: &Path) -> Result<Vec<PathBuf>> {
    let path = dir.join(CALIBRATION_MANIFEST);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let not_ours = |message: String| Error::Data {
        path: path.clone(),
        line: 1,
        message,
    };
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| not_ours(format!("not a calibration run's list of files: {e}")))?;
    if let Some(name) = manifest.files.iter().find(|f| !is_calibration_file(f)) {
        return Err(not_ours(format!(
            "lists {name:?}, which is not a file a calibration writes: not shmc's manifest"
        )));
    }
    let mut files: Vec<PathBuf> = manifest
        .files
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| p.is_file())
        .collect();
    files.push(path);
    files.sort();
    files.dedup();
    Ok(files)
}

/// Lists `files` in `dir`'s manifest, through a temporary file so a stop leaves a whole one.
fn write_manifest(dir: &Path, files: &[String]) -> Result<()> {
    let manifest = Manifest {
        shmc: env!("CARGO_PKG_VERSION").into(),
        files: files.to_vec(),
    };
    let text =
        serde_json::to_string_pretty(&manifest).map_err(|e| Error::invalid(e.to_string()))?;
    let path = dir.join(CALIBRATION_MANIFEST);
    let temporary = dir.join(format!("{CALIBRATION_MANIFEST}.tmp"));
    std::fs::write(&temporary, text).map_err(|e| Error::io(&temporary, e))?;
    std::fs::rename(&temporary, &path).map_err(|e| Error::io(&path, e))
}
