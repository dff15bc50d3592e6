//! Surrogate files: one JSON object with the format's name and version, the kind of surrogate it
//! holds, the [`SurrogateMeta`] of its fit, and the kind's own record under `surrogate`, from
//! which that kind rebuilds it bit for bit (floats are written exactly: see
//! [`super::exact_floats`]).
//!
//! This module knows the format and no kind: a kind writes its record with [`fn@write`], and
//! [`super::kinds::load`] opens a file ([`SurrogateFile::open`], or [`SurrogateFile::parse`] on
//! text in memory) and hands it to the kind it names, which reads its record
//! ([`SurrogateFile::read`]).

use std::fmt::Display;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::SurrogateMeta;
use crate::{Error, Result};

/// The `format` field of a surrogate file.
pub const FORMAT_NAME: &str = "shmc-surrogate";

/// The version of the surrogate file format this build writes. It reads this one and version
/// 1, written before surrogates had kinds: such a file holds a network (its record under
/// `network`) and names no kind.
pub const FORMAT_VERSION: u32 = 2;

/// A file as it is written.
#[derive(Serialize)]
struct Written<'a, R> {
    format: &'a str,
    version: u32,
    kind: &'a str,
    meta: &'a SurrogateMeta,
    surrogate: &'a R,
}

/// What every version of the format begins with.
#[derive(Deserialize)]
struct Header {
    format: String,
    version: u32,
    kind: Option<String>,
}

/// The meta and the kind's record, as a kind reads them.
#[derive(Deserialize)]
struct Body<R> {
    meta: SurrogateMeta,
    #[serde(alias = "network")]
    surrogate: R,
}

/// Writes a surrogate of kind `kind` whose own record is `record`, with `meta`, to `path`.
pub fn write<R: Serialize>(
    path: &Path,
    kind: &str,
    meta: &SurrogateMeta,
    record: &R,
) -> Result<()> {
    let file = Written {
        format: FORMAT_NAME,
        version: FORMAT_VERSION,
        kind,
        meta,
        surrogate: record,
    };
    let text = serde_json::to_string(&file)
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

/// A surrogate file read as far as the kind it holds, for that kind to read on.
#[derive(Debug)]
pub struct SurrogateFile {
    path: PathBuf,
    text: String,
    kind: Option<String>,
}

impl SurrogateFile {
    /// Reads `path` and checks that it is a surrogate file of a version this build reads.
    ///
    /// A file that cannot be read, is not valid JSON, of another format or version, or of
    /// version 2 without a kind is an error naming the file.
    pub fn open(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::parse(path, text)
    }

    /// Checks `text`, the contents of a surrogate file, as [`SurrogateFile::open`] does;
    /// `path` only names the file in errors.
    pub fn parse(path: &Path, text: String) -> Result<Self> {
        let header: Header = serde_json::from_str(&text).map_err(|e| malformed(path, e))?;
        let file = Self {
            path: path.to_path_buf(),
            text,
            kind: header.kind,
        };
        if header.format != FORMAT_NAME {
            return Err(file.invalid(format!(
                "not a surrogate file (format {:?}, expected {FORMAT_NAME:?})",
                header.format
            )));
        }
        if !(1..=FORMAT_VERSION).contains(&header.version) {
            return Err(file.invalid(format!(
                "surrogate file format version {} is not supported (this build reads versions \
                 1 to {FORMAT_VERSION})",
                header.version
            )));
        }
        if header.version > 1 && file.kind.is_none() {
            return Err(file.invalid("the surrogate file names no kind"));
        }
        Ok(file)
    }

    /// The kind of surrogate the file names; `None` for a version-1 file, which holds a
    /// network.
    pub fn kind(&self) -> Option<&str> {
        self.kind.as_deref()
    }

    /// The file's meta and its kind's record, of type `R`.
    pub fn read<R: DeserializeOwned>(&self) -> Result<(R, SurrogateMeta)> {
        let body: Body<R> =
            serde_json::from_str(&self.text).map_err(|e| malformed(&self.path, e))?;
        Ok((body.surrogate, body.meta))
    }

    /// The file's meta alone, its kind's record skipped.
    pub fn meta(&self) -> Result<SurrogateMeta> {
        self.read::<serde::de::IgnoredAny>().map(|(_, meta)| meta)
    }

    /// An error about this file: `message` after its path.
    pub fn invalid(&self, message: impl Display) -> Error {
        Error::invalid(format!("{}: {message}", self.path.display()))
    }
}

/// A file that is not valid JSON of the format, at the line where that shows.
fn malformed(path: &Path, e: serde_json::Error) -> Error {
    Error::Data {
        path: path.to_path_buf(),
        line: e.line().max(1),
        message: format!("not a valid surrogate file: {e}"),
    }
}
