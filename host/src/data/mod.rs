//! Data sets for the regression models: a dense design matrix with 0/1 responses, the readers
//! that build one from the published files, and the transforms the papers apply before fitting.
//!
//! - [`read_csv`]: a header row, `,`, `;` or tab separated, quoted fields allowed; the response column
//!   is picked by name, numeric columns are read as numbers and text columns are one-hot encoded
//!   (the UCI Bank Marketing files).
//! - [`read_libsvm`]: sparse `label index:value …` lines (the LIBSVM `a9a` files).
//! - [`parse_csv`] and [`parse_libsvm`]: the same readers on text already in memory.
//! - Both readers take a file whose name ends in `.gz` (the repository's `data/` ships its data
//!   sets compressed) through a gzip decoder, its text bounded by the memory limit.
//! - [`bundled`] and [`resolve`]: the data sets in the repository's `data/` (or
//!   `SHMC_DATA_DIR`) by name, `a9a`, `a9a.t`, `bank-additional-full.csv` (or `bank`) and
//!   `bank-full.csv`; [`resolve`] is how a model's data path is read, so `--data a9a` works.
//! - [`Dataset::preprocess`]: standardization, a seeded Gaussian random projection and an
//!   intercept column, always in that order (see [`Preprocessing`]).
//!
//! Every malformed input becomes an [`crate::Error::Data`] naming the file and the 1-based line,
//! so a user can open the file at the culprit.

mod bundled;
mod delimited;
mod file;
mod libsvm;
mod transform;

pub use bundled::{BUNDLED, DATA_DIR_VAR, bundled, bundled_in, data_dir, resolve};
pub use delimited::{DEFAULT_RESPONSE, Missing, parse_csv, read_csv};
pub use file::{content_extension, is_gzip};
pub use libsvm::{parse_libsvm, read_libsvm};
pub use transform::{INTERCEPT_NAME, Preprocessing, Projection, Standardization};

use crate::{Error, Result};

/// The SHA-256 of the bytes of the data file `name` ([`resolve`]d as a model reads it), in
/// lowercase hex: a run's header records it, so that runs given the same path for different
/// files (another working directory, an edited file) are told apart, and copies are one.
pub fn digest(name: &str) -> Result<String> {
    crate::digest::file_sha256(&resolve(std::path::Path::new(name))?)
}

/// Whether the data files named `a` and `b` (as a run's CSV header or a surrogate file records
/// them, as the user gave them) are one: the same name, or names that [`resolve`] to the same
/// file from here (`a9a` and `data/a9a.gz`; a relative path and an absolute one).
pub fn same_source(a: &str, b: &str) -> bool {
    let file = |name: &str| {
        resolve(std::path::Path::new(name))
            .ok()
            .and_then(|p| std::fs::canonicalize(p).ok())
    };
    a == b || file(a).is_some_and(|f| file(b) == Some(f))
}

/// A regression data set: `n` rows of `p` features with a binary response.
///
/// The design matrix is stored row-major (row `i` is `x[i * p .. (i + 1) * p]`), which is the
/// order the likelihood kernels stream through it.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// The design matrix, row-major, `n × p`.
    pub x: Vec<f64>,
    /// The responses, each `0.0` or `1.0`.
    pub y: Vec<f64>,
    /// The number of rows (observations).
    pub n: usize,
    /// The number of columns (features).
    pub p: usize,
    /// One name per column, in column order.
    pub feature_names: Vec<String>,
    /// What reading the data decided that the user should see (categorical columns and their
    /// baselines, dropped rows), one sentence each; a run prints them.
    pub notes: Vec<String>,
}

impl Dataset {
    /// A data set from its parts, checking that the sizes agree, that every entry of `x` is
    /// finite and that every response is 0 or 1.
    pub fn new(
        x: Vec<f64>,
        y: Vec<f64>,
        n: usize,
        p: usize,
        feature_names: Vec<String>,
    ) -> Result<Self> {
        if n.checked_mul(p) != Some(x.len()) {
            return Err(Error::invalid(format!(
                "design matrix has {} entries, expected n × p = {n} × {p}",
                x.len()
            )));
        }
        if y.len() != n {
            return Err(Error::invalid(format!(
                "{} responses for {n} rows",
                y.len()
            )));
        }
        if feature_names.len() != p {
            return Err(Error::invalid(format!(
                "{} feature names for {p} columns",
                feature_names.len()
            )));
        }
        if let Some(k) = x.iter().position(|v| !v.is_finite()) {
            return Err(Error::invalid(format!(
                "design matrix entry ({}, {}) is not finite",
                k / p + 1,
                k % p + 1
            )));
        }
        if let Some(i) = y.iter().position(|&v| v != 0.0 && v != 1.0) {
            return Err(Error::invalid(format!(
                "response {} is {}, expected 0 or 1",
                i + 1,
                y[i]
            )));
        }
        Ok(Self {
            x,
            y,
            n,
            p,
            feature_names,
            notes: Vec::new(),
        })
    }

    /// The reader's notes, then the size and which coefficient (`prefix.1`, …) is which column.
    pub fn describe(&self, prefix: &str) -> Vec<String> {
        let mut out = self.notes.clone();
        let columns: Vec<String> = self
            .feature_names
            .iter()
            .enumerate()
            .map(|(j, name)| format!("{prefix}.{} = {name}", j + 1))
            .collect();
        out.push(format!(
            "{} rows, {} columns: {}",
            self.n,
            self.p,
            columns.join(", ")
        ));
        out
    }

    /// Row `i` of the design matrix.
    #[inline]
    pub fn row(&self, i: usize) -> &[f64] {
        &self.x[i * self.p..(i + 1) * self.p]
    }

    /// The number of rows whose response is 1.
    pub fn positives(&self) -> usize {
        self.y.iter().filter(|&&v| v == 1.0).count()
    }

    /// The data set without the rows where column `name` is nonzero, and without every column
    /// that is constant on the rows left (the column itself, and any indicator only those rows
    /// had). Bank Marketing needs it: `housing=unknown` and `loan=unknown` mark the same rows,
    /// two identical columns whose coefficients only the prior separates.
    pub fn without_rows_where(&self, name: &str) -> Result<Self> {
        let column = self
            .feature_names
            .iter()
            .position(|f| f == name)
            .ok_or_else(|| Error::invalid(format!("no column named {name:?}")))?;
        let rows: Vec<usize> = (0..self.n)
            .filter(|&i| self.row(i)[column] == 0.0)
            .collect();
        let Some(&first) = rows.first() else {
            return Err(Error::invalid(format!("every row has {name} nonzero")));
        };
        let keep: Vec<usize> = (0..self.p)
            .filter(|&j| rows.iter().any(|&i| self.row(i)[j] != self.row(first)[j]))
            .collect();
        self.select(&rows, &keep)
    }

    /// The data set without the columns that are nonzero on fewer than `min_rows` rows, and the
    /// names of the columns dropped. A one-hot level seen only a handful of times informs its
    /// coefficient hardly at all, and when those rows share one outcome (Bank Marketing's
    /// `default=yes`: 3 rows, all "no") the likelihood has no maximum in that direction, so the
    /// posterior there is the prior's width (sd 2.8 against 0.006–0.35 for every other
    /// direction) and no fixed-step sampler mixes. Dropping the column folds those rows into the
    /// baseline level, as lumping rare levels (`forcats::fct_lump_min`) does.
    pub fn without_sparse_columns(&self, min_rows: usize) -> Result<(Self, Vec<String>)> {
        let nonzero = |j: usize| (0..self.n).filter(|&i| self.row(i)[j] != 0.0).count();
        let (keep, dropped): (Vec<usize>, Vec<usize>) =
            (0..self.p).partition(|&j| nonzero(j) >= min_rows);
        if keep.is_empty() {
            return Err(Error::invalid(format!(
                "every column is nonzero on fewer than {min_rows} rows"
            )));
        }
        let rows: Vec<usize> = (0..self.n).collect();
        let names = dropped
            .iter()
            .map(|&j| self.feature_names[j].clone())
            .collect();
        Ok((self.select(&rows, &keep)?, names))
    }

    /// The rows `rows` and columns `columns` of the data set, in the order given.
    fn select(&self, rows: &[usize], columns: &[usize]) -> Result<Self> {
        let x = rows
            .iter()
            .flat_map(|&i| columns.iter().map(move |&j| self.row(i)[j]))
            .collect();
        let y = rows.iter().map(|&i| self.y[i]).collect();
        let names = columns
            .iter()
            .map(|&j| self.feature_names[j].clone())
            .collect();
        let mut out = Self::new(x, y, rows.len(), columns.len(), names)?;
        out.notes = self.notes.clone();
        Ok(out)
    }
}

/// The bytes a name and the transforms' per-column vectors take, per column.
pub(crate) const COLUMN_BYTES: u128 = 64;

/// Refuses, before it is allocated, a data set of `n` rows × `p` columns that would take more
/// than `memory_limit` bytes: the dense matrix, and per column its name and what standardizing
/// it keeps. A LIBSVM line with one index of 10⁸ asks for that many columns whatever the rows.
fn check_size(what: &str, n: usize, p: usize, memory_limit: u64) -> Result<()> {
    let bytes =
        crate::memory::f64s([n, p]).and_then(|matrix| matrix.checked_add(COLUMN_BYTES * p as u128));
    crate::memory::check(what, "data", bytes, memory_limit)
}

/// Asserts that `err` is a data error in `file` on `line` whose message contains `needle`, and
/// that the printed error starts with `file:line:` (the readers' tests share it).
#[cfg(test)]
pub(crate) fn assert_data_error_at(err: Error, file: &str, line: usize, needle: &str) {
    let shown = err.to_string();
    match err {
        Error::Data {
            path,
            line: got,
            message,
        } => {
            assert_eq!(path, std::path::Path::new(file));
            assert_eq!(got, line, "wrong line in: {shown}");
            assert!(message.contains(needle), "{shown} lacks {needle:?}");
            assert!(shown.starts_with(&format!("{file}:{line}:")), "{shown}");
        }
        other => panic!("expected a data error, got {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_where_a_column_is_set_go_with_the_columns_left_constant() {
        let names = ["a", "u1", "u2", "b"].map(String::from).to_vec();
        #[rustfmt::skip]
        let x = vec![
            1.0, 0.0, 0.0, 5.0,
            2.0, 1.0, 1.0, 6.0,
            3.0, 0.0, 0.0, 7.0,
        ];
        let data = Dataset::new(x, vec![1.0, 0.0, 0.0], 3, 4, names).unwrap();
        let kept = data.without_rows_where("u1").unwrap();
        assert_eq!(kept.feature_names, ["a", "b"]);
        assert_eq!(kept.x, [1.0, 5.0, 3.0, 7.0]);
        assert_eq!(kept.y, [1.0, 0.0]);
        let err = data.without_rows_where("nope").unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn columns_nonzero_on_too_few_rows_are_dropped_and_named() {
        let names = ["a", "rare", "b"].map(String::from).to_vec();
        #[rustfmt::skip]
        let x = vec![
            1.0, 0.0, 0.0,
            2.0, 1.0, 3.0,
            0.0, 0.0, 4.0,
        ];
        let data = Dataset::new(x, vec![1.0, 0.0, 0.0], 3, 3, names).unwrap();
        let (kept, dropped) = data.without_sparse_columns(2).unwrap();
        assert_eq!(dropped, ["rare"]);
        assert_eq!(kept.feature_names, ["a", "b"]);
        assert_eq!(kept.x, [1.0, 0.0, 2.0, 3.0, 0.0, 4.0]);
        assert_eq!(kept.y, data.y);
        let (all, none) = data.without_sparse_columns(1).unwrap();
        assert!(none.is_empty());
        assert_eq!(all, data);
        let err = data.without_sparse_columns(4).unwrap_err().to_string();
        assert!(err.contains("fewer than 4 rows"), "{err}");
    }
    use std::collections::BTreeSet;

    #[test]
    fn new_checks_sizes_and_values() {
        let names = || vec!["a".to_string()];
        assert!(Dataset::new(vec![1.0, 2.0], vec![0.0, 1.0], 2, 1, names()).is_ok());
        assert!(Dataset::new(vec![1.0], vec![0.0, 1.0], 2, 1, names()).is_err());
        assert!(Dataset::new(vec![1.0, 2.0], vec![0.0], 2, 1, names()).is_err());
        assert!(Dataset::new(vec![1.0, 2.0], vec![0.0, 1.0], 2, 1, vec![]).is_err());
        assert!(Dataset::new(vec![1.0, f64::NAN], vec![0.0, 1.0], 2, 1, names()).is_err());
        assert!(Dataset::new(vec![1.0, 2.0], vec![0.0, 0.5], 2, 1, names()).is_err());
    }

    /// The number of source columns behind the (one-hot encoded) feature names.
    fn source_columns(d: &Dataset) -> usize {
        d.feature_names
            .iter()
            .map(|name| name.split('=').next().unwrap())
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// Row, column and label counts from `data/README.md`, read from the bundled files (the
    /// repository's `data/`, or `SHMC_DATA_DIR`).
    #[test]
    fn reads_the_bundled_data_sets() {
        let file = |name: &str| bundled(name).unwrap();
        let a9a = read_libsvm(file("a9a"), None, u64::MAX).unwrap();
        assert_eq!((a9a.n, a9a.p, a9a.positives()), (32_561, 123, 7_841));
        let a9a_test = read_libsvm(file("a9a.t"), Some(123), u64::MAX).unwrap();
        assert_eq!(
            (a9a_test.n, a9a_test.p, a9a_test.positives()),
            (16_281, 123, 3_846)
        );
        assert!(read_libsvm(file("a9a.t"), Some(121), u64::MAX).is_err());

        let bank = read_csv(file("bank"), DEFAULT_RESPONSE, Missing::Error, u64::MAX).unwrap();
        assert_eq!(
            (bank.n, source_columns(&bank), bank.positives()),
            (41_188, 20, 4_640)
        );
        // 10 numeric columns and 10 text columns with 53 − 10 = 43 non-baseline levels.
        assert_eq!(bank.p, 53);
        assert!(bank.feature_names.iter().any(|f| f == "job=services"));
        assert!(!bank.feature_names.iter().any(|f| f == "job=housemaid"));
        let full = read_csv(
            file("bank-full.csv"),
            DEFAULT_RESPONSE,
            Missing::Error,
            u64::MAX,
        )
        .unwrap();
        assert_eq!(
            (full.n, source_columns(&full), full.positives()),
            (45_211, 16, 5_289)
        );

        let mut projected = a9a;
        projected
            .preprocess(&Preprocessing {
                standardize: true,
                projection: Some(Projection {
                    k: 60,
                    seed: 1,
                    memory_limit: u64::MAX,
                }),
                intercept: false,
            })
            .unwrap();
        assert_eq!((projected.n, projected.p), (32_561, 60));
    }
}
