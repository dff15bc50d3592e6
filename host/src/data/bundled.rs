//! The real data sets that ship with the repository (its `data/` folder, gzip-compressed), found
//! by name, so that `--data a9a` works in any clone without a path to remember.
//!
//! The folder is `SHMC_DATA_DIR` when that is set, else the repository's `data/` as it was when
//! this crate was compiled (the source tree the binary was built from). An installed binary
//! whose clone has gone finds neither and says so in one line; pointing `SHMC_DATA_DIR` at a
//! copy of the `.gz` files brings them back.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The bundled data sets, each the file `NAME.gz` in the data folder (see `data/README.md` for
/// their sources, sizes and licences).
pub const BUNDLED: [&str; 4] = ["a9a", "a9a.t", "bank-additional-full.csv", "bank-full.csv"];

/// Short names: `bank` is the Bank Marketing file the papers and the benches fit, the one with
/// the economic indicators.
const ALIASES: [(&str, &str); 1] = [("bank", "bank-additional-full.csv")];

/// The environment variable naming the folder to find the bundled data sets in instead of the
/// repository's `data/`.
pub const DATA_DIR_VAR: &str = "SHMC_DATA_DIR";

/// The folder the bundled data sets are looked for in: `SHMC_DATA_DIR` when it is set and not
/// empty, else the repository's `data/` folder found at compile time. The one place the
/// environment is read.
pub fn data_dir() -> PathBuf {
    data_dir_from(std::env::var_os(DATA_DIR_VAR))
}

/// [`data_dir`] given the variable's value, so that tests need not change the environment
/// (which every test thread shares).
fn data_dir_from(var: Option<OsString>) -> PathBuf {
    match var {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let host = Path::new(env!("CARGO_MANIFEST_DIR"));
            host.parent().unwrap_or(host).join("data")
        }
    }
}

/// The path of the bundled data set `name` (one of [`BUNDLED`], or `bank` for
/// `bank-additional-full.csv`): `NAME.gz` in [`data_dir`]. The readers decompress it as they
/// read it. An unknown name, a missing folder or a missing file is one error line saying which.
pub fn bundled(name: &str) -> Result<PathBuf> {
    bundled_in(&data_dir(), name)
}

/// [`bundled`] in the folder `dir` rather than [`data_dir`].
pub fn bundled_in(dir: &Path, name: &str) -> Result<PathBuf> {
    let Some(name) = canonical(name) else {
        let why = format!("no bundled data set has this name; {}", listing());
        return Err(not_found(name, why));
    };
    if !dir.is_dir() {
        let why = format!(
            "the bundled data folder is missing (it is {DATA_DIR_VAR} if set, else the data/ \
             folder of the source tree shmc was built from): set {DATA_DIR_VAR} to a folder \
             holding {}",
            BUNDLED.map(|n| format!("{n}.gz")).join(", ")
        );
        return Err(not_found(dir, why));
    }
    let path = dir.join(format!("{name}.gz"));
    if !path.is_file() {
        return Err(not_found(
            &path,
            "the bundled data set is missing from its folder".into(),
        ));
    }
    Ok(path)
}

/// The data file `path` names: `path` itself if it exists, else the bundled data set of that
/// name (`a9a`, `bank`: a bare name, not a path with a folder). Anything else is one error line
/// naming `path` and listing the bundled names.
pub fn resolve(path: &Path) -> Result<PathBuf> {
    resolve_from(Path::new(""), &data_dir(), path)
}

/// [`resolve`] with relative paths taken from `cwd` (`""`: the working directory) and the
/// bundled data sets in `dir`.
fn resolve_from(cwd: &Path, dir: &Path, path: &Path) -> Result<PathBuf> {
    let local = cwd.join(path);
    if local.exists() {
        return Ok(local);
    }
    // A link whose target is gone (an unmounted disk) names the user's file, not the bundled one.
    if let Ok(target) = std::fs::read_link(&local) {
        return Err(not_found(
            path,
            format!(
                "a symbolic link to {}, which does not exist (the bundled data set of this \
                 name is not read in its place)",
                target.display()
            ),
        ));
    }
    match path.to_str().and_then(canonical) {
        Some(name) => bundled_in(dir, name),
        None => Err(not_found(
            path,
            format!(
                "no such file, nor a bundled data set: {} (in {DATA_DIR_VAR} if set, else the \
                 repository's data/)",
                listing()
            ),
        )),
    }
}

/// The bundled file name `name` stands for, if it is one or an alias of one.
fn canonical(name: &str) -> Option<&'static str> {
    let alias = ALIASES.iter().find(|(short, _)| *short == name);
    alias
        .map(|&(_, full)| full)
        .or_else(|| BUNDLED.iter().copied().find(|&n| n == name))
}

/// The bundled names, aliases beside their data sets.
fn listing() -> String {
    let names = BUNDLED.map(|n| match ALIASES.iter().find(|(_, full)| *full == n) {
        Some((short, _)) => format!("{n} (or {short})"),
        None => n.to_string(),
    });
    format!("the bundled data sets are {}", names.join(", "))
}

/// A not-found [`Error::Io`] naming `path`, with `why` as its message.
fn not_found(path: impl Into<PathBuf>, why: String) -> Error {
    Error::io(path, io::Error::new(io::ErrorKind::NotFound, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder of the test's own, with `files` in it (empty: only names matter here).
    fn folder(test: &str, files: &[&str]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shmc-bundled-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for file in files {
            std::fs::write(dir.join(file), "").unwrap();
        }
        dir
    }

    /// The error's one printed line; it must start with `path`.
    fn one_line(err: Error, path: &Path) -> String {
        let shown = err.to_string();
        assert!(matches!(err, Error::Io { .. }), "{shown}");
        assert!(
            shown.starts_with(&format!("{}: ", path.display())),
            "{shown}"
        );
        assert!(!shown.contains('\n'), "{shown}");
        shown
    }

    #[cfg(unix)]
    #[test]
    fn a_dangling_link_of_a_bundled_name_is_refused_not_replaced_by_the_bundled_file() {
        let cwd = folder("dangling-cwd", &[]);
        let data = folder("dangling-data", &["a9a.gz"]);
        std::os::unix::fs::symlink("/nonexistent/mydata.svm", cwd.join("a9a")).unwrap();
        let err = resolve_from(&cwd, &data, Path::new("a9a")).unwrap_err();
        let shown = one_line(err, Path::new("a9a"));
        assert!(
            shown.contains("a symbolic link to /nonexistent/mydata.svm, which does not exist"),
            "{shown}"
        );
    }

    #[test]
    fn resolve_prefers_an_existing_file_to_the_bundled_one() {
        let cwd = folder("prefer-cwd", &["a9a"]);
        let data = folder("prefer-data", &["a9a.gz"]);
        let got = resolve_from(&cwd, &data, Path::new("a9a")).unwrap();
        assert_eq!(got, cwd.join("a9a"));
        assert_eq!(Path::new("").join("a9a"), Path::new("a9a"));
        std::fs::remove_dir_all(&cwd).unwrap();
        std::fs::remove_dir_all(&data).unwrap();
    }

    #[test]
    fn resolve_finds_bundled_names_and_the_alias() {
        let cwd = folder("find-cwd", &[]);
        let data = folder("find-data", &[]);
        for name in BUNDLED {
            std::fs::write(data.join(format!("{name}.gz")), "").unwrap();
        }
        for name in BUNDLED {
            let got = resolve_from(&cwd, &data, Path::new(name)).unwrap();
            assert_eq!(got, data.join(format!("{name}.gz")));
        }
        let bank = resolve_from(&cwd, &data, Path::new("bank")).unwrap();
        assert_eq!(bank, data.join("bank-additional-full.csv.gz"));
        // A path with a folder is a path, never a bundled name.
        assert!(resolve_from(&cwd, &data, Path::new("./a9a")).is_err());
        std::fs::remove_dir_all(&cwd).unwrap();
        std::fs::remove_dir_all(&data).unwrap();
    }

    #[test]
    fn an_unknown_name_is_one_line_listing_the_bundled_sets() {
        let cwd = folder("unknown", &[]);
        let path = Path::new("nope.csv");
        let shown = one_line(resolve_from(&cwd, &cwd, path).unwrap_err(), path);
        for name in BUNDLED.iter().chain(["(or bank)", DATA_DIR_VAR].iter()) {
            assert!(shown.contains(name), "{shown} lacks {name}");
        }
        let shown = one_line(bundled_in(&cwd, "nope").unwrap_err(), Path::new("nope"));
        assert!(shown.contains("bank-full.csv"), "{shown}");
        std::fs::remove_dir_all(&cwd).unwrap();
    }

    #[test]
    fn a_missing_folder_or_file_is_one_line_saying_so() {
        let gone = std::env::temp_dir().join(format!("shmc-bundled-{}-gone", std::process::id()));
        let shown = one_line(bundled_in(&gone, "a9a").unwrap_err(), &gone);
        assert!(shown.contains("bundled data folder is missing"), "{shown}");
        assert!(shown.contains(&format!("set {DATA_DIR_VAR}")), "{shown}");
        let data = folder("missing", &["a9a.gz"]);
        let file = data.join("a9a.t.gz");
        let shown = one_line(bundled_in(&data, "a9a.t").unwrap_err(), &file);
        assert!(shown.contains("missing from its folder"), "{shown}");
        std::fs::remove_dir_all(&data).unwrap();
    }

    /// A model's data path goes through [`resolve`]: `bank` is the bundled CSV file (read as
    /// CSV though its name ends in `.gz`), 53 columns once its text columns are one-hot.
    #[test]
    fn a_model_reads_a_bundled_data_set_by_name() {
        let spec = crate::models::ModelSpec::named("logistic").with("data", "bank");
        let model = crate::models::build(&spec).unwrap();
        assert_eq!(model.parameter_names().len(), 53);
    }

    #[test]
    fn shmc_data_dir_is_honoured_when_set() {
        assert_eq!(
            data_dir_from(Some("/elsewhere".into())),
            Path::new("/elsewhere")
        );
        let repository = data_dir_from(None);
        assert_eq!(data_dir_from(Some("".into())), repository);
        assert!(
            repository.join("README.md").is_file(),
            "{}",
            repository.display()
        );
        assert!(repository.ends_with("data"));
    }
}
