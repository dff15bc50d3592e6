//! posteriordb, the field's set of reference posteriors, read in the database's own layout: a
//! checkout's `posterior_database/` folder (or the checkout itself), holding
//!
//! - `posteriors/NAME.json`: the posterior's `model_name`, `data_name` and
//!   `reference_posterior_name` (null for a posterior without reference draws);
//! - `models/stan/MODEL.stan`: the Stan program;
//! - `data/data/DATA.json.zip`: its data, one JSON file as CmdStan reads it;
//! - `reference_posteriors/draws/draws/NAME.json.zip`: the reference, a JSON list of chains,
//!   each `{parameter: [draws]}` on the constrained scale under Stan's names (`beta[1]`).
//!
//! Everything read is outside data: sizes are checked against the memory limit before a zip
//! entry is inflated, and a file that is not what the layout says is one error naming it.
//! [`check`] compares a sampler's draws with the reference, parameter by parameter.

pub mod check;
mod reference;

use std::io::Read;
use std::path::{Path, PathBuf};

pub use check::{Checks, ParameterCheck, check};
pub use reference::Reference;

use crate::{Error, Result};

/// A posteriordb checkout (its `posterior_database/` folder).
#[derive(Clone, Debug)]
pub struct Database {
    root: PathBuf,
}

/// One posterior of the database: its program, data and reference draws.
#[derive(Clone, Debug)]
pub struct Posterior {
    /// The posterior's name (`eight_schools-eight_schools_noncentered`).
    pub name: String,
    /// The Stan program's file.
    pub program: PathBuf,
    /// The data as CmdStan's JSON text (`{}` for a program without data).
    pub data: String,
    /// The reference draws, if the database has them for this posterior.
    pub reference: Option<Reference>,
}

impl Database {
    /// The database at `dir`: a `posterior_database/` folder, or a checkout holding one.
    pub fn open(dir: &Path) -> Result<Self> {
        let nested = dir.join("posterior_database");
        let root = if nested.join("posteriors").is_dir() {
            nested
        } else {
            dir.to_path_buf()
        };
        if !root.join("posteriors").is_dir() {
            return Err(Error::invalid(format!(
                "{}: not a posteriordb checkout (no posteriors/ folder in it or in its \
                 posterior_database/)",
                dir.display()
            )));
        }
        Ok(Self { root })
    }

    /// The posteriors' names, sorted.
    pub fn names(&self) -> Result<Vec<String>> {
        let dir = self.root.join("posteriors");
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        let mut names = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| Error::io(&dir, e))?.path();
            if path.extension().is_some_and(|x| x == "json")
                && let Some(stem) = path.file_stem()
            {
                names.push(stem.to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// The posterior `name`, its files read with at most `limit` bytes each.
    pub fn posterior(&self, name: &str, limit: u64) -> Result<Posterior> {
        let file = self.root.join("posteriors").join(format!("{name}.json"));
        if !file.is_file() {
            return Err(Error::invalid(format!(
                "{}: no such posterior (the database's posteriors are its posteriors/*.json)",
                file.display()
            )));
        }
        let text = read_limited(&file, limit)?;
        let meta: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::invalid(format!("{}: {e}", file.display())))?;
        let field = |key: &str| -> Result<Option<String>> {
            match meta.get(key) {
                Some(serde_json::Value::String(s)) if is_plain_name(s) => Ok(Some(s.clone())),
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(other) => Err(Error::invalid(format!(
                    "{}: {key} is {other}, not the name of a file of the database",
                    file.display()
                ))),
            }
        };
        let missing = |key: &str| Error::invalid(format!("{}: no {key}", file.display()));
        let model = field("model_name")?.ok_or_else(|| missing("model_name"))?;
        let program = self.root.join("models/stan").join(format!("{model}.stan"));
        if !program.is_file() {
            return Err(Error::invalid(format!(
                "{}: posterior {name}'s Stan program is missing",
                program.display()
            )));
        }
        let data = match field("data_name")? {
            Some(data) => {
                let zip = self.root.join("data/data").join(format!("{data}.json.zip"));
                read_zipped(&zip, limit)?
            }
            None => "{}".to_string(),
        };
        let reference = match field("reference_posterior_name")? {
            Some(reference) => {
                let zip = self
                    .root
                    .join("reference_posteriors/draws/draws")
                    .join(format!("{reference}.json.zip"));
                let text = read_zipped(&zip, limit)?;
                let parsed = Reference::parse(&text, limit)
                    .map_err(|e| Error::invalid(format!("{}: {e}", zip.display())))?;
                Some(parsed)
            }
            None => None,
        };
        Ok(Posterior {
            name: name.to_string(),
            program,
            data,
            reference,
        })
    }
}

/// Whether `name` names a file of the database and nothing outside it.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['/', '\\']) && name != "." && name != ".."
}

/// A text file, refused before reading when larger than `limit` bytes.
fn read_limited(path: &Path, limit: u64) -> Result<String> {
    let size = std::fs::metadata(path)
        .map_err(|e| Error::io(path, e))?
        .len();
    crate::memory::check(
        &format!("reading {}", path.display()),
        "memory_limit",
        Some(u128::from(size)),
        limit,
    )?;
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

/// The one file inside the zip archive at `path`, as text: its declared size checked against
/// `limit` before it is inflated, and never more than that read whatever the header says.
fn read_zipped(path: &Path, limit: u64) -> Result<String> {
    let bad = |problem: String| Error::invalid(format!("{}: {problem}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut archive =
        zip::ZipArchive::new(file).map_err(|e| bad(format!("not a zip archive: {e}")))?;
    let files: Vec<usize> = (0..archive.len())
        .filter(|&i| archive.by_index_raw(i).is_ok_and(|f| f.is_file()))
        .collect();
    let [index] = files[..] else {
        return Err(bad(format!(
            "{} files in the archive where the database has one",
            files.len()
        )));
    };
    let mut entry = archive
        .by_index(index)
        .map_err(|e| bad(format!("its file cannot be read: {e}")))?;
    crate::memory::check(
        &format!("inflating {}", path.display()),
        "memory_limit",
        Some(u128::from(entry.size())),
        limit,
    )?;
    let declared = entry.size();
    let mut text = String::new();
    (&mut entry)
        .take(limit.min(declared))
        .read_to_string(&mut text)
        .map_err(|e| bad(format!("its file is not UTF-8 text or is damaged: {e}")))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_leave_the_database_are_refused() {
        for bad in ["", "..", "../etc/passwd", "a/b", "a\\b"] {
            assert!(!is_plain_name(bad), "{bad:?}");
        }
        assert!(is_plain_name("eight_schools_noncentered"));
    }
}
