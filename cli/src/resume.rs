//! `shmc sample --resume DIR`: the run's own command line, saved in its output folder when it
//! started, parsed again so that the resumed run has exactly the settings of the one it goes
//! on with.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use shmc::{Error, Result};

/// The file in a run's output folder that holds its command line.
const FILE: &str = shmc::output::RUN_SETTINGS_FILE;

/// A run's command line and the folder it ran in (its relative paths are relative to it).
#[derive(Debug, Serialize, Deserialize)]
struct Invocation {
    /// The version of shmc that started the run.
    shmc: String,
    /// The working directory.
    cwd: PathBuf,
    /// The arguments after the program's name.
    args: Vec<String>,
}

/// Saves the command line of the run writing to `output`, with `added` after it (what the run
/// decided that a resumed run must repeat), through a temporary file renamed over the old one.
pub fn save_invocation(output: &Path, added: &[String]) -> Result<()> {
    let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    // `--resume` itself is never saved: a resumed run keeps the file its first run wrote.
    let invocation = Invocation {
        shmc: env!("CARGO_PKG_VERSION").into(),
        cwd,
        args: std::env::args()
            .skip(1)
            .chain(added.iter().cloned())
            .collect(),
    };
    let text = serde_json::to_string_pretty(&invocation)
        .map_err(|e| Error::invalid(format!("{FILE}: {e}")))?;
    let (path, temporary) = (output.join(FILE), output.join(format!("{FILE}.tmp")));
    std::fs::write(&temporary, text).map_err(|e| Error::io(&temporary, e))?;
    std::fs::rename(&temporary, &path).map_err(|e| Error::io(&path, e))
}

/// The command line to parse: `args` as given, or for `shmc sample --resume DIR [--quiet]` the
/// one saved in `DIR` with `--resume DIR` (and `--quiet`) added, after moving to the folder it
/// ran in.
pub fn command_line(args: Vec<OsString>) -> Result<Vec<OsString>> {
    let text: Vec<&str> = args.iter().skip(1).filter_map(|a| a.to_str()).collect();
    let Some(at) = text.iter().position(|a| *a == "--resume") else {
        return Ok(args);
    };
    if text.first() != Some(&"sample") || text.len() != args.len() - 1 {
        return Ok(args); // clap reports it
    }
    let Some(dir) = text.get(at + 1) else {
        return Ok(args);
    };
    let rest: Vec<&str> = text
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != 0 && i != at && i != at + 1)
        .map(|(_, a)| *a)
        .collect();
    if rest.iter().any(|a| *a != "--quiet") {
        return Err(Error::invalid(format!(
            "--resume takes every setting from the run in {dir}; give it alone (or with \
             --quiet), not with {}",
            rest.join(" ")
        )));
    }
    let dir = std::path::absolute(dir).map_err(|e| Error::io(dir, e))?;
    let path = dir.join(FILE);
    let saved = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::invalid(format!(
            "{}: no {FILE}: {} is not the output folder of a run of `shmc sample`",
            path.display(),
            dir.display()
        )),
        _ => Error::io(&path, e),
    })?;
    let (cwd, saved_args) = read_invocation(&saved, &path)?;
    std::env::set_current_dir(&cwd).map_err(|e| Error::io(&cwd, e))?;
    let mut resumed: Vec<OsString> = vec![args[0].clone()];
    resumed.extend(saved_args.into_iter().map(OsString::from));
    resumed.extend(["--resume".into(), dir.into_os_string()]);
    if !rest.is_empty() && !resumed.iter().any(|a| a == "--quiet") {
        resumed.push("--quiet".into());
    }
    Ok(resumed)
}

/// The folder a run ran in and its arguments, read from the text of its run-settings file
/// `path` (named in errors): refused if it is not one, or was written by another version of
/// shmc (whose options may mean other things).
pub fn read_invocation(text: &str, path: &Path) -> Result<(PathBuf, Vec<String>)> {
    let invocation: Invocation = serde_json::from_str(text).map_err(|e| Error::Data {
        path: path.to_path_buf(),
        line: e.line(),
        message: format!("not a saved command line: {e}"),
    })?;
    if invocation.shmc != env!("CARGO_PKG_VERSION") {
        return Err(Error::invalid(format!(
            "{}: the run was started by shmc {}; this is shmc {}, which cannot resume it",
            path.display(),
            invocation.shmc,
            env!("CARGO_PKG_VERSION")
        )));
    }
    Ok((invocation.cwd, invocation.args))
}
