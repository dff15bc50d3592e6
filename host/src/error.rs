//! The host's error type: every failure a user can cause (bad files, bad options, a model that
//! cannot be built) becomes one of these, printed as one line by the CLI.

use std::path::PathBuf;

/// What went wrong, with enough context to name the culprit.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A data file is malformed: which file, which line (1-based) and what is wrong.
    #[error("{}:{line}: {message}", path.display())]
    Data {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong there.
        message: String,
    },
    /// A file or folder could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An option or argument is out of range or inconsistent.
    #[error("{0}")]
    Invalid(String),
    /// One named setting is out of range or does not apply. `setting` is the library's name
    /// for it (`step_size`, `train_after`), so that a front end can name it its own way (the
    /// CLI says `--step-size`); `problem` completes the sentence.
    #[error("setting `{setting}` {problem}")]
    Setting {
        /// The setting, in the library's snake-case name.
        setting: &'static str,
        /// What is wrong with it: "must be at least 1", "does not apply to model banana".
        problem: String,
    },
    /// A surrogate (a grid, a network's training) would need more memory than its limit: what
    /// it is, the bytes it would need and the limit, and the setting that drives the size, so
    /// that a front end can name both options to change.
    #[error("{message}: raise the memory limit or lower `{driver}`")]
    MemoryLimit {
        /// What would not fit, with its size and the limit.
        message: String,
        /// The setting that drives the size (`hidden`, `cell`, `level`, `max_points`).
        driver: &'static str,
    },
    /// A model served over HTTP (UM-Bridge) could not be reached or answered wrongly: the
    /// server, the endpoint (`/Evaluate`) and what went wrong.
    #[error("UM-Bridge server {url}, {endpoint}: {problem}")]
    Served {
        /// The server's base URL.
        url: String,
        /// The endpoint, as the protocol names it (`/Evaluate`, `/Gradient`).
        endpoint: &'static str,
        /// What went wrong.
        problem: String,
    },
    /// The model failed during a run in a way its value cannot say (see
    /// [`crate::Model::failure`]): every chain stopped after its current iteration, and the
    /// draws made before stay with the run's sinks.
    #[error("the model failed during the run, so every chain stopped: {0}")]
    ModelFailed(String),
    /// A run's folder holds the files an earlier run wrote (its chains' CSVs, checkpoints,
    /// run settings): a new run would overwrite some and leave the others beside its own. A
    /// front end names its ways out: resume that run, write elsewhere, or overwrite it.
    #[error(
        "{}: holds the files of an earlier run ({files}); a new run would overwrite them: \
         {}write elsewhere, or overwrite it (its files only)",
        dir.display(),
        if *resumable { "resume that run, " } else { "" }
    )]
    FolderHoldsRun {
        /// The folder.
        dir: PathBuf,
        /// The earlier run's files found there, named in a short list.
        files: String,
        /// Whether the earlier run can be resumed (a sample run can; a calibration cannot).
        resumable: bool,
    },
    /// The core rejected a configuration.
    #[error(transparent)]
    Core(#[from] shmc_core::Error),
}

impl Error {
    /// An [`Error::Invalid`] from anything printable.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::Invalid(message.into())
    }

    /// An [`Error::Setting`]: `setting` (its snake-case name) followed by `problem`.
    pub fn setting(setting: &'static str, problem: impl Into<String>) -> Self {
        Error::Setting {
            setting,
            problem: problem.into(),
        }
    }

    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// The host's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
