//! A Stan model's coarser levels, for multilevel delayed acceptance: cheaper versions of the same
//! posterior that the user writes (a program with a looser ODE tolerance or a coarser grid, or
//! the same program on fewer data), given coarsest first as `stan_levels`. Level `i` (from 1) is
//! the `i`-th entry and the model itself is level `k + 1`, so `--levels 1,2` asks for both of
//! two. Each level is built on first request (a program compiled and cached as the model's own)
//! and shared by every chain after that.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use shmc_core::Potential;

use super::compile::{Program, cache_root, library};
use super::library::StanModel;
use super::read_limited;
use super::toolchain::Toolchain;
use crate::model::Levels;
use crate::{Error, Model, Result};

/// One level as `stan_levels` names it: its program or library and its data, either of which
/// may be the model's own.
#[derive(Clone, Debug, PartialEq)]
struct Source {
    /// A Stan program (`.stan`) or a compiled library (`.so`); `None`: the model's.
    code: Option<PathBuf>,
    /// CmdStan JSON data; `None`: the model's.
    data: Option<PathBuf>,
}

/// The entries of `stan_levels`, comma-separated, coarsest first: `PROGRAM.stan` (with the
/// model's data), `DATA.json` (the model's program), or `PROGRAM.stan:DATA.json`.
fn sources(text: &str) -> Result<Vec<Source>> {
    let bad = |entry: &str| {
        Error::setting(
            "stan_levels",
            format!(
                "entry {entry:?} is not PROGRAM.stan, LIBRARY.so, DATA.json or \
                 PROGRAM.stan:DATA.json"
            ),
        )
    };
    text.split(',')
        .map(|entry| {
            let code = |p: &str| p.ends_with(".stan") || p.ends_with(".so");
            match entry.split_once(':') {
                Some((c, d)) if code(c) && d.ends_with(".json") => Ok(Source {
                    code: Some(c.into()),
                    data: Some(d.into()),
                }),
                None if code(entry) => Ok(Source {
                    code: Some(entry.into()),
                    data: None,
                }),
                None if entry.ends_with(".json") => Ok(Source {
                    code: None,
                    data: Some(entry.into()),
                }),
                _ => Err(bad(entry)),
            }
        })
        .collect()
}

/// The coarser levels of one Stan model.
pub struct StanLevels {
    sources: Vec<Source>,
    /// The model's own library and data, for entries that keep one of them.
    library: PathBuf,
    data: String,
    stan_home: Option<PathBuf>,
    seed: u32,
    /// The model's unconstrained dimension, which every level must share.
    dim: usize,
    built: Mutex<Vec<Option<Arc<StanModel>>>>,
}

impl StanLevels {
    /// The levels `text` names (`stan_levels`) of the model built from `library` and `data`,
    /// whose unconstrained dimension is `dim`.
    pub fn new(
        text: &str,
        library: &Path,
        data: &str,
        stan_home: Option<PathBuf>,
        seed: u32,
        dim: usize,
    ) -> Result<Self> {
        let sources = sources(text)?;
        Ok(Self {
            built: Mutex::new(vec![None; sources.len()]),
            sources,
            library: library.to_path_buf(),
            data: data.to_string(),
            stan_home,
            seed,
            dim,
        })
    }

    /// Level `index` (from 0) built now: its library compiled or loaded, its data read.
    fn build(&self, index: usize, memory_limit: u64) -> Result<StanModel> {
        let source = &self.sources[index];
        let data = match &source.data {
            Some(path) => read_limited(path, memory_limit)?,
            None => self.data.clone(),
        };
        let (lib, origin) = match &source.code {
            None => (self.library.clone(), self.library.display().to_string()),
            Some(lib) if lib.extension().is_some_and(|e| e == "so") => {
                (lib.clone(), lib.display().to_string())
            }
            Some(file) => {
                let code = read_limited(file, memory_limit)?;
                let origin = file.display().to_string();
                let program = Program {
                    code: &code,
                    origin: &origin,
                };
                let toolchain = Toolchain::find(self.stan_home.as_deref())?;
                let mut say = |line: &str| eprintln!("{line}");
                (
                    library(&program, &toolchain, &cache_root(), &mut say)?,
                    origin,
                )
            }
        };
        let level = StanModel::load(&lib, &data, self.seed, origin)
            .map_err(|e| Error::setting("stan_levels", format!("level {}: {e}", index + 1)))?;
        if level.dim() != self.dim {
            return Err(Error::setting(
                "stan_levels",
                format!(
                    "level {} has {} unconstrained parameters where the model has {}: a level \
                     is the same posterior, coarser",
                    index + 1,
                    level.dim(),
                    self.dim
                ),
            ));
        }
        Ok(level)
    }
}

impl Levels for StanLevels {
    fn resolution(&self) -> usize {
        self.sources.len() + 1
    }

    fn coarser(&self, resolution: usize, memory_limit: u64) -> Result<Arc<dyn Model>> {
        let count = self.sources.len();
        if resolution == 0 || resolution > count {
            return Err(Error::setting(
                "levels",
                format!(
                    "names level {resolution}, but this Stan model's coarser levels are 1 to \
                     {count}, coarsest first, in the order the model lists them"
                ),
            ));
        }
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &mut built[resolution - 1];
        if let Some(level) = slot {
            return Ok(level.clone());
        }
        let level = Arc::new(self.build(resolution - 1, memory_limit)?);
        *slot = Some(level.clone());
        Ok(level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_name_a_program_data_or_both() {
        let parsed = sources("coarse.stan,thin.json,c.stan:d.json,lib.so").unwrap();
        let path = |p: &str| Some(PathBuf::from(p));
        assert_eq!(parsed[0].code, path("coarse.stan"));
        assert_eq!(parsed[0].data, None);
        assert_eq!(
            (parsed[1].code.clone(), parsed[1].data.clone()),
            (None, path("thin.json"))
        );
        assert_eq!(parsed[2].data, path("d.json"));
        assert_eq!(parsed[3].code, path("lib.so"));
        for bad in ["coarse.txt", "a.stan:b.txt", "", "a.json:b.json"] {
            let err = sources(bad).unwrap_err().to_string();
            assert!(
                err.contains("stan_levels") && err.contains("is not"),
                "{err}"
            );
        }
    }
}
