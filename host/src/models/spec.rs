//! What a built-in model is built from: [`ModelSpec`], every option a front end can give, and
//! the checks and readers the models' builders share.

use std::path::PathBuf;

use crate::data::{Dataset, Missing, Preprocessing, Projection, read_csv, read_libsvm};

/// The settings a regression model reads ([`super::ModelEntry::options`]): its data file and
/// how to read it, or the size of its simulation (`n` and `d` described as given).
macro_rules! regression_options {
    ($n:literal, $d:literal) => {
        &[
            (
                "data",
                "FILE: CSV with a header or LIBSVM text, or a bundled data set (a9a, bank)",
            ),
            (
                "format",
                "csv | libsvm; by default from the file's extension",
            ),
            ("response", "the CSV's response column; y"),
            ("missing", "error | drop-rows: a CSV's missing values"),
            ("standardize", "scale each feature to mean 0, sd 1"),
            ("project", "K: project the features to K dimensions"),
            ("projection_seed", "1"),
            ("intercept", "add a constant column"),
            ("n", $n),
            ("d", $d),
            ("data_seed", "1"),
            ("prior_variance", "100"),
        ]
    };
}
use crate::{Error, Model, Result};
pub(crate) use regression_options;

/// Which model to build and from what.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// The model's name, as listed by [`super::CATALOGUE`].
    pub name: String,
    /// A data file (regression models).
    pub data: Option<PathBuf>,
    /// `csv` or `libsvm`; by default from the file's extension.
    pub format: Option<String>,
    /// The response column of a CSV file.
    pub response: String,
    /// What a CSV file's missing values do.
    pub missing: Missing,
    /// Standardize the features.
    pub standardize: bool,
    /// Add an intercept column.
    pub intercept: bool,
    /// Project the features to this many dimensions.
    pub project: Option<usize>,
    /// The seed of the projection.
    pub projection_seed: u64,
    /// Simulated observations.
    pub n: Option<usize>,
    /// Simulated features or dimension.
    pub d: Option<usize>,
    /// The seed of simulated data.
    pub data_seed: u64,
    /// The prior variance of regression coefficients.
    pub prior_variance: Option<f64>,
    /// Elements per side of a PDE model's finite-element mesh.
    pub mesh: Option<usize>,
    /// Karhunen–Loève modes of a PDE model's coefficient field (its dimension).
    pub kl_modes: Option<usize>,
    /// The prior standard deviation of a PDE model's mode weights, or of a served forward
    /// model's inputs.
    pub prior_sd: Option<f64>,
    /// The most bytes the model's data (read or simulated) or its PDE mesh may take; a larger
    /// one is refused before it is allocated ([`crate::memory`]).
    pub memory_limit: u64,
    /// Where a served model is and how to read it.
    pub served: ServedSpec,
}

/// The options of a model served over UM-Bridge (`umbridge`); every one `None` for the others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServedSpec {
    /// The server, `http://HOST:PORT`.
    pub url: Option<String>,
    /// The served model's name (default: the server's only one).
    pub model: Option<String>,
    /// `log-density` (the default) or `forward`.
    pub output: Option<String>,
    /// The noise sd of a forward model's Gaussian likelihood.
    pub noise: Option<f64>,
    /// The prior mean of a forward model's inputs (default 0).
    pub prior_mean: Option<f64>,
    /// Seconds to wait for one request (default 60).
    pub timeout: Option<f64>,
    /// Retries after a connection error, a timeout or a busy server (default 3).
    pub retries: Option<u32>,
    /// The JSON object sent as every call's `config`.
    pub config: Option<String>,
}

impl ServedSpec {
    /// The setting names of the options given, for a model that takes none of them.
    fn given(&self) -> Vec<&'static str> {
        [
            (self.url.is_some(), "url"),
            (self.model.is_some(), "umbridge_model"),
            (self.output.is_some(), "umbridge_output"),
            (self.noise.is_some(), "noise"),
            (self.prior_mean.is_some(), "prior_mean"),
            (self.timeout.is_some(), "timeout"),
            (self.retries.is_some(), "retries"),
            (self.config.is_some(), "umbridge_config"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect()
    }
}

impl ModelSpec {
    /// A spec for `name` with every option at its default.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.into(),
            data: None,
            format: None,
            response: crate::data::DEFAULT_RESPONSE.into(),
            missing: Missing::Error,
            standardize: false,
            intercept: false,
            project: None,
            projection_seed: 1,
            n: None,
            d: None,
            data_seed: 1,
            prior_variance: None,
            mesh: None,
            kl_modes: None,
            prior_sd: None,
            served: ServedSpec::default(),
            memory_limit: u64::MAX,
        }
    }
}

/// Rejects data options for a model that takes none.
pub(crate) fn no_data_options(spec: &ModelSpec) -> Result<()> {
    let given = [
        (spec.data.is_some(), "data"),
        (spec.format.is_some(), "format"),
        (spec.missing != Missing::Error, "missing"),
        (spec.standardize, "standardize"),
        (spec.intercept, "intercept"),
        (spec.project.is_some(), "project"),
        (spec.prior_variance.is_some(), "prior_variance"),
        (spec.mesh.is_some(), "mesh"),
        (spec.kl_modes.is_some(), "kl_modes"),
        (spec.prior_sd.is_some(), "prior_sd"),
    ];
    let served = spec.served.given();
    match given
        .iter()
        .find(|(set, _)| *set)
        .map(|(_, setting)| *setting)
        .or(served.first().copied())
    {
        Some(setting) => Err(Error::setting(
            setting,
            format!("does not apply to model {}", spec.name),
        )),
        None => Ok(()),
    }
}

/// Reads and preprocesses the data file of a regression model. `path` is a file's path or a
/// bundled data set's name (`a9a`, `bank`: [`crate::data::resolve`]), and the format is guessed
/// from the extension of what the file holds (`csv` for `bank-full.csv.gz` and for a
/// tab-separated `.tsv`).
fn read_dataset(spec: &ModelSpec, path: &std::path::Path) -> Result<Dataset> {
    let path = &crate::data::resolve(path)?;
    let format = match spec.format.as_deref() {
        Some(f) => f.to_string(),
        None if crate::data::content_extension(path)
            .is_some_and(|e| e.eq_ignore_ascii_case("csv") || e.eq_ignore_ascii_case("tsv")) =>
        {
            "csv".into()
        }
        None => "libsvm".into(),
    };
    let mut data = match format.as_str() {
        "csv" => read_csv(path, &spec.response, spec.missing, spec.memory_limit)?,
        "libsvm" => read_libsvm(path, None, spec.memory_limit)?,
        other => {
            return Err(Error::setting(
                "format",
                format!("{other} is unknown: use csv or libsvm"),
            ));
        }
    };
    let standardization = data.preprocess(&Preprocessing {
        standardize: spec.standardize,
        projection: spec.project.map(|k| Projection {
            k,
            seed: spec.projection_seed,
            memory_limit: spec.memory_limit,
        }),
        intercept: spec.intercept,
    })?;
    // A constant column standardizes to zeros: its coefficient is left to the prior alone,
    // which a user who asked for standardization would not expect.
    let effect = match spec.project {
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
/// `--n`/`--d` say otherwise; `--prior-variance` replaces the default prior either way.
pub(crate) fn regression<M: Model + 'static>(
    spec: &ModelSpec,
    defaults: (usize, usize),
    default_prior: f64,
    simulate: fn(usize, usize, u64) -> Result<M>,
    new: fn(Dataset, f64) -> Result<M>,
    data: fn(&M) -> &Dataset,
) -> Result<Box<dyn Model>> {
    let prior = spec.prior_variance.unwrap_or(default_prior);
    if let Some(path) = &spec.data {
        return Ok(Box::new(new(read_dataset(spec, path)?, prior)?));
    }
    no_data_options(&ModelSpec {
        prior_variance: None,
        ..spec.clone()
    })?;
    let (n, d) = (spec.n.unwrap_or(defaults.0), spec.d.unwrap_or(defaults.1));
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
    let simulated = simulate(n, d, spec.data_seed)?;
    if spec.prior_variance.is_none() {
        return Ok(Box::new(simulated));
    }
    Ok(Box::new(new(data(&simulated).clone(), prior)?))
}
