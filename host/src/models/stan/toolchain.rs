//! Where a Stan toolchain is: `stanc`, the headers of Stan, Stan Math and their libraries, and
//! the prebuilt libraries they link. shmc compiles with the system C++ compiler against a
//! toolchain that is already on the machine, never one it downloads, so that a machine with no
//! network can compile a Stan program.
//!
//! The one such toolchain pip installs with no further download is the httpstan wheel: its
//! package folder holds `stanc`, `include/` (Stan, Stan Math, Eigen, Boost, SUNDIALS, TBB,
//! RapidJSON) and `lib/` (SUNDIALS and TBB). A folder of that layout is found, in this order, at
//! the `stan_home` setting, at `SHMC_STAN_HOME`, or as the httpstan package of the interpreter
//! `SHMC_PYTHON` names or of `python3` on `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Error, Result};

/// A Stan toolchain of the httpstan layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Toolchain {
    /// The folder holding `stanc`, `include/` and `lib/`.
    pub home: PathBuf,
    /// `stanc --version`'s answer and the compiler's: part of every cache key.
    pub version: String,
}

impl Toolchain {
    /// The toolchain at `stan_home` if given, else at `SHMC_STAN_HOME`, else the httpstan package
    /// of the Python interpreter; an error saying how to get one when none is found.
    pub fn find(stan_home: Option<&Path>) -> Result<Self> {
        let home = match stan_home {
            Some(home) => home.to_path_buf(),
            None => match std::env::var_os("SHMC_STAN_HOME") {
                Some(home) => PathBuf::from(home),
                None => httpstan_package()?,
            },
        };
        Self::at(&home)
    }

    /// The toolchain in `home`, checked to hold what compiling needs.
    pub fn at(home: &Path) -> Result<Self> {
        for part in ["stanc", "include/stan/model/model_base.hpp", "lib"] {
            if !home.join(part).exists() {
                return Err(Error::invalid(format!(
                    "{} is not a Stan toolchain: it has no {part} (the httpstan package's \
                     layout: stanc, include/, lib/)",
                    home.display()
                )));
            }
        }
        let stanc = answer(Command::new(home.join("stanc")).arg("--version"))
            .map_err(|e| Error::invalid(format!("{}: {e}", home.join("stanc").display())))?;
        let compiler = answer(Command::new(compiler()).arg("--version"))
            .map_err(|e| Error::invalid(format!("C++ compiler {}: {e}", compiler())))?;
        let compiler = compiler.lines().next().unwrap_or_default().to_string();
        Ok(Self {
            home: home.to_path_buf(),
            version: format!("{}; {compiler}", stanc.trim()),
        })
    }

    /// The `stanc` binary.
    pub fn stanc(&self) -> PathBuf {
        self.home.join("stanc")
    }

    /// The headers' folder.
    pub fn include(&self) -> PathBuf {
        self.home.join("include")
    }

    /// The prebuilt libraries' folder (SUNDIALS, TBB), linked by rpath.
    pub fn lib(&self) -> PathBuf {
        self.home.join("lib")
    }
}

/// The C++ compiler: `CXX` if set, `g++` otherwise.
pub fn compiler() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "g++".into())
}

/// The httpstan package folder of `SHMC_PYTHON` (or `python3`).
fn httpstan_package() -> Result<PathBuf> {
    let python = std::env::var("SHMC_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = "import httpstan, os; print(os.path.dirname(httpstan.__file__))";
    match answer(Command::new(&python).args(["-c", probe])) {
        Ok(folder) => Ok(PathBuf::from(folder.trim())),
        Err(_) => Err(Error::invalid(format!(
            "no Stan toolchain found: give --stan-home (or SHMC_STAN_HOME) a folder with \
             stanc, include/ and lib/, or install httpstan for {python} (`{python} -m pip \
             install httpstan`), whose wheel carries Stan and needs no download"
        ))),
    }
}

/// What `command` prints on stdout when it succeeds; its stderr's first line otherwise.
fn answer(command: &mut Command) -> std::result::Result<String, String> {
    let output = command.output().map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(stderr.lines().last().unwrap_or("failed").to_string())
    }
}
