//! Stan programs as models: a program compiled here (`stan_file`, with a toolchain already on
//! the machine, see [`toolchain`]) or a library a user built with BridgeStan (`stan_lib`),
//! with its data in CmdStan's JSON. Every sampler takes the result like any other model.

mod compile;
#[cfg(feature = "stan")]
mod levels;
#[cfg(feature = "stan")]
mod library;
pub mod toolchain;

use std::path::{Path, PathBuf};

pub use compile::{Program, cache_root, library};
#[cfg(feature = "stan")]
pub use library::StanModel;
pub use toolchain::Toolchain;

#[cfg(feature = "stan")]
use shmc_core::Potential;

use super::{ModelEntry, ModelOption, ModelSpec};
use crate::{Error, Model, Result};

/// The registry's entry.
pub const ENTRY: ModelEntry = ModelEntry {
    name: "stan",
    description: "a Stan program (compiled here, offline, with a toolchain on the machine, and \
                  cached) or a Stan library built with BridgeStan, with CmdStan's JSON data: \
                  draws on the constrained scale under Stan's names",
    parameters: "the program's parameters, transformed parameters and generated quantities, \
                 as CmdStan names them (theta.1, Sigma.2.1)",
    options: &[
        ModelOption::value(
            "stan_file",
            "FILE",
            "a Stan program (.stan), compiled on first use and cached (SHMC_CACHE_DIR, else \
             ~/.cache/shmc)",
        ),
        ModelOption::value(
            "stan_lib",
            "FILE",
            "a compiled Stan library with BridgeStan's C interface (BridgeStan 2.x's \
             model.so), instead of --stan-file",
        ),
        ModelOption::value("data", "FILE", "the program's data as CmdStan's JSON"),
        ModelOption::value(
            "stan_home",
            "DIR",
            "the Stan toolchain (stanc, include/, lib/: the httpstan package's folder); \
             default SHMC_STAN_HOME, else the httpstan package of SHMC_PYTHON or python3",
        ),
        ModelOption::value(
            "stan_levels",
            "LIST",
            "coarser versions of the posterior for --method mlda, coarsest first, \
             comma-separated: PROGRAM.stan (with this data), DATA.json (with this program) or \
             PROGRAM.stan:DATA.json; --levels 1,2 picks them by place",
        ),
        ModelOption::value(
            "stan_seed",
            "SEED",
            "1: the seed of the model's construction and of its generated quantities",
        ),
    ],
    build,
    small: None,
};

fn build(spec: &ModelSpec) -> Result<Box<dyn Model>> {
    let data = match spec.get::<PathBuf>("data")? {
        Some(path) => read_limited(&path, spec.memory_limit)?,
        None => String::new(),
    };
    let seed: u32 = spec.get("stan_seed")?.unwrap_or(1);
    let stan_home: Option<PathBuf> = spec.get("stan_home")?;
    let (library, origin) = match (
        spec.get::<PathBuf>("stan_file")?,
        spec.get::<PathBuf>("stan_lib")?,
    ) {
        (Some(_), Some(_)) => {
            return Err(Error::setting(
                "stan_lib",
                "cannot be given with `stan_file`: give the program or its library",
            ));
        }
        (None, None) => {
            return Err(Error::setting(
                "stan_file",
                "is needed by model stan (or `stan_lib`, a compiled library)",
            ));
        }
        (None, Some(lib)) => (lib.clone(), lib.display().to_string()),
        (Some(file), None) => {
            let code = read_limited(&file, spec.memory_limit)?;
            let origin = file.display().to_string();
            let program = Program {
                code: &code,
                origin: &origin,
            };
            let toolchain = Toolchain::find(stan_home.as_deref())?;
            let mut say = |line: &str| eprintln!("{line}");
            let lib = compile::library(&program, &toolchain, &cache_root(), &mut say)?;
            (lib, origin)
        }
    };
    let levels: Option<String> = spec.get("stan_levels")?;
    let built = Built {
        library: &library,
        data: &data,
        seed,
        origin,
        stan_home,
    };
    load(built, levels.as_deref())
}

/// What `build` found: the model's library and data, and what its levels reuse.
struct Built<'a> {
    library: &'a Path,
    data: &'a str,
    seed: u32,
    origin: String,
    stan_home: Option<PathBuf>,
}

#[cfg(feature = "stan")]
fn load(built: Built, levels: Option<&str>) -> Result<Box<dyn Model>> {
    let model = StanModel::load(built.library, built.data, built.seed, built.origin)?;
    let Some(text) = levels else {
        return Ok(Box::new(model));
    };
    let levels = levels::StanLevels::new(
        text,
        built.library,
        built.data,
        built.stan_home,
        built.seed,
        model.dim(),
    )?;
    Ok(Box::new(model.with_levels(levels)))
}

#[cfg(not(feature = "stan"))]
fn load(_: Built, _: Option<&str>) -> Result<Box<dyn Model>> {
    Err(Error::invalid(
        "this build of shmc has no Stan support: rebuild with the `stan` feature",
    ))
}

/// A text file's contents, refused before reading when larger than `limit` bytes.
pub(crate) fn read_limited(path: &Path, limit: u64) -> Result<String> {
    let size = std::fs::metadata(path)
        .map_err(|e| Error::io(path, e))?
        .len();
    if size > limit {
        return Err(Error::invalid(format!(
            "{}: {size} bytes, above the memory limit of {limit}",
            path.display()
        )));
    }
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}
