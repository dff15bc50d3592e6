//! What the regression models (logistic, probit) share: their options, read from a
//! [`ModelSpec`] into [`RegressionSettings`], and how they get their data — a file read and
//! preprocessed, or a simulation.

use std::path::{Path, PathBuf};

use super::ModelSpec;
use crate::data::{Dataset, Missing, Preprocessing, Projection, read_csv, read_libsvm};
use crate::{Error, Model, Result};

/// The options a regression model reads ([`super::ModelEntry::options`]): its data file and
/// how to read it, or the size of its simulation (`n` and `d` described as given).
macro_rules! regression_options {
    ($n:literal, $d:literal) => {
        &[
            $crate::models::ModelOption::value(
                "data",
                "FILE",
                "CSV with a header or LIBSVM text, or a bundled data set (a9a, bank)",
            ),
            $crate::models::ModelOption::value(
                "format",
                "FORMAT",
                "csv | libsvm; by default from the file's extension",
            ),
            $crate::models::ModelOption::value(
                "response",
                "COLUMN",
                "y: the CSV's response column",
            ),
            $crate::models::ModelOption::value(
                "missing",
                "WHAT",
                "error | drop-rows: a CSV's missing values",
            ),
            $crate::models::ModelOption::switch(
                "standardize",
                "scale each feature to mean 0, sd 1",
            ),
            $crate::models::ModelOption::value(
                "project",
                "K",
                "project the features to K dimensions",
            ),
            $crate::models::ModelOption::value(
                "projection_seed",
                "SEED",
                "1: the projection's seed",
            ),
            $crate::models::ModelOption::switch("intercept", "add a constant column"),
            $crate::models::ModelOption::value("n", "N", $n),
            $crate::models::ModelOption::value("d", "D", $d),
            $crate::models::ModelOption::value("data_seed", "SEED", "1: the simulated data's seed"),
            $crate::models::ModelOption::value(
                "prior_variance",
                "VAR",
                "100: the coefficients' prior variance",
            ),
        ]
    };
}
pub(crate) use regression_options;

/// The options that only a data file takes: a simulation refuses them.
const FILE_ONLY: [&str; 7] = [
    "format",
    "response",
    "missing",
    "standardize",
    "intercept",
    "project",
    "projection_seed",
];

/// How a regression model's data file is read and preprocessed.
struct FileSettings {
    format: Option<String>,
    response: String,
    missing: Missing,
    standardize: bool,
    intercept: bool,
    project: Option<usize>,
    projection_seed: u64,
    memory_limit: u64,
}

impl FileSettings {
    fn read(spec: &ModelSpec) -> Result<Self> {
        let missing = match spec.get::<String>("missing")?.as_deref() {
            None | Some("error") => Missing::Error,
            Some("drop-rows") => Missing::DropRows,
            Some(other) => {
                return Err(Error::setting(
                    "missing",
                    format!("is {other:?}: use error or drop-rows"),
                ));
            }
        };
        Ok(Self {
            format: spec.get("format")?,
            response: spec
                .get("response")?
                .unwrap_or_else(|| crate::data::DEFAULT_RESPONSE.into()),
            missing,
            standardize: spec.switch("standardize")?,
            intercept: spec.switch("intercept")?,
            project: spec.get("project")?,
            projection_seed: spec.get("projection_seed")?.unwrap_or(1),
            memory_limit: spec.memory_limit,
        })
    }
}

/// Reads and preprocesses the data file of a regression model. `path` is a file's path or a
/// bundled data set's name (`a9a`, `bank`: [`crate::data::resolve`]), and the format is guessed
/// from the extension of what the file holds (`csv` for `bank-full.csv.gz` and for a
/// tab-separated `.tsv`).
fn read_dataset(settings: &FileSettings, path: &Path) -> Result<Dataset> {
    let path = &crate::data::resolve(path)?;
    let format = match settings.format.as_deref() {
        Some(f) => f.to_string(),
        None if crate::data::content_extension(path)
            .is_some_and(|e| e.eq_ignore_ascii_case("csv") || e.eq_ignore_ascii_case("tsv")) =>
        {
            "csv".into()
        }
        None => "libsvm".into(),
    };
    let limit = settings.memory_limit;
    let mut data = match format.as_str() {
        "csv" => read_csv(path, &settings.response, settings.missing, limit)?,
        "libsvm" => read_libsvm(path, None, limit)?,
        other => {
            return Err(Error::setting(
                "format",
                format!("{other} is unknown: use csv or libsvm"),
            ));
        }
    };
    let standardization = data.preprocess(&Preprocessing {
        standardize: settings.standardize,
        projection: settings.project.map(|k| Projection {
            k,
            seed: settings.projection_seed,
            memory_limit: limit,
        }),
        intercept: settings.intercept,
    })?;
    // A constant column standardizes to zeros: its coefficient is left to the prior alone,
    // which a user who asked for standardization would not expect.
    let effect = match settings.project {
        Some(_) => "it adds nothing to the projected features",
        None => "its coefficient is drawn from the prior alone",
    };
    for column in standardization.map(|s| s.constant).unwrap_or_default() {
        data.notes.push(format!(
            "warning: column {column:?} of {} is constant: standardized, it is all zeros, so \
             {effect} (leave the column out)",
            path.display()
        ));
    }
    Ok(data)
}

/// A regression model from `spec`'s data file, or simulated with `defaults` = (n, d) unless
/// the settings `n`/`d` say otherwise; `prior_variance` replaces the default prior either way.
pub(crate) fn regression<M: Model + 'static>(
    spec: &ModelSpec,
    defaults: (usize, usize),
    default_prior: f64,
    simulate: fn(usize, usize, u64) -> Result<M>,
    new: fn(Dataset, f64) -> Result<M>,
    data: fn(&M) -> &Dataset,
) -> Result<Box<dyn Model>> {
    let given_prior = spec.get::<f64>("prior_variance")?;
    let prior = given_prior.unwrap_or(default_prior);
    if let Some(path) = spec.get::<PathBuf>("data")? {
        spec.refuse_any(
            &["n", "d", "data_seed"],
            "applies to simulated data, not to a data file",
        )?;
        return Ok(Box::new(new(
            read_dataset(&FileSettings::read(spec)?, &path)?,
            prior,
        )?));
    }
    spec.refuse_any(
        &FILE_ONLY,
        &format!(
            "applies to a data file, and model {} simulates its data without one",
            spec.name
        ),
    )?;
    let n = spec.get("n")?.unwrap_or(defaults.0);
    let d = spec.get("d")?.unwrap_or(defaults.1);
    // The matrix, the normals it is made from and the model's blocked copy of it; the
    // setting named is the one furthest above its default.
    let driver = if d / defaults.1.max(1) > n / defaults.0.max(1) {
        "d"
    } else {
        "n"
    };
    crate::memory::check(
        &format!("the simulated data of {n} rows × {d} features"),
        driver,
        crate::memory::f64s([n, d, 3]),
        spec.memory_limit,
    )?;
    let simulated = simulate(n, d, spec.get("data_seed")?.unwrap_or(1))?;
    if given_prior.is_none() {
        return Ok(Box::new(simulated));
    }
    Ok(Box::new(new(data(&simulated).clone(), prior)?))
}
