//! The built-in models. Each implements [`crate::Model`], the same path a user's own model
//! takes; [`build`] turns a [`ModelSpec`] (what the command line says) into one.

pub mod banana;
pub mod beta_binomial;
pub mod elliptic_pde;
#[cfg(test)]
mod fd_check;
pub mod gaussian;
pub mod gp_hyper;
pub mod ica;
pub mod logistic;
pub mod probit;
pub mod umbridge;

use std::path::PathBuf;

use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::linalg::dot;
use shmc_core::random::{fill_standard_normal, uniform};

use crate::data::{Dataset, Missing, Preprocessing, Projection, read_csv, read_libsvm};
use crate::{Error, Model, Result};

/// Which model to build and from what.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// The model's name, as listed by [`CATALOGUE`].
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

/// A built-in model's entry in `shmc models`.
#[derive(Clone, Copy, Debug)]
pub struct ModelInfo {
    /// The name on the command line.
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// Its parameters.
    pub parameters: &'static str,
}

/// Every built-in model.
pub const CATALOGUE: &[ModelInfo] = &[
    ModelInfo {
        name: "logistic",
        description: "Bayesian logistic regression, prior N(0, 100 I); simulated as in the papers, or from a data file",
        parameters: "beta.1 .. beta.d",
    },
    ModelInfo {
        name: "probit",
        description: "Bayesian probit regression, prior N(0, 100 I); simulated as in the VHMC paper, or from a data file",
        parameters: "theta.1 .. theta.d",
    },
    ModelInfo {
        name: "banana",
        description: "banana-shaped posterior: y ~ N(b1 + b2^2, 2^2), b ~ N(0, I) (precomputing paper)",
        parameters: "beta.1, beta.2",
    },
    ModelInfo {
        name: "gaussian-conjugate",
        description: "2-D Gaussian mean with known covariance and a conjugate prior (precomputing paper)",
        parameters: "mu.1, mu.2",
    },
    ModelInfo {
        name: "gaussian-32",
        description: "correlated Gaussian: eigenvalue 1 along (1,..,1), 0.01 across (journal paper)",
        parameters: "q.1 .. q.d",
    },
    ModelInfo {
        name: "beta-binomial",
        description: "beta-binomial overdispersion, 20-city cancer mortality (VHMC paper; Albert ch. 5)",
        parameters: "logit_eta, log_K",
    },
    ModelInfo {
        name: "elliptic-pde",
        description: "elliptic PDE inverse problem: the diffusion coefficient of div(c grad u) = 0 on the unit square from u observed on an 11x11 grid with noise sd 0.1; Q1 finite elements, log c a Gaussian process (squared exponential, sd 1, length 0.2) by its Karhunen-Loeve modes (journal paper 5.2)",
        parameters: "theta.1 .. theta.d (the mode weights)",
    },
    ModelInfo {
        name: "umbridge",
        description: "a model served over UM-Bridge (HTTP) by any UM-Bridge server or load balancer: its output read as the log-density, or as a forward map with a Gaussian likelihood on given data",
        parameters: "theta.1 .. theta.d (d from the server)",
    },
    ModelInfo {
        name: "gp-hyper",
        description: "Gaussian-process hyperparameters, priors N(-1, 1) on the logs (precomputing paper 4.3)",
        parameters: "log_eta, log_l, log_J",
    },
];

/// A binary regression's generative form: the coefficients drawn from the prior
/// `N(0, prior_variance · I)` and each response `yᵢ ~ Bernoulli(p(xᵢ·β))` with the model's
/// `link`, the covariates `data`'s own. From `Pcg64::seed_from_u64(seed)`, in order: the `d`
/// normals behind the coefficients, then one uniform per response. Returns the coefficients
/// and the data with the simulated responses.
pub(crate) fn simulate_responses(
    data: &Dataset,
    prior_variance: f64,
    seed: u64,
    link: impl Fn(f64) -> f64,
) -> (Vec<f64>, Dataset) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut beta = vec![0.0; data.p];
    fill_standard_normal(&mut rng, &mut beta);
    let sd = prior_variance.sqrt();
    beta.iter_mut().for_each(|b| *b *= sd);
    let y = data
        .x
        .chunks_exact(data.p)
        .map(|row| {
            let p = link(dot(row, &beta));
            if uniform(&mut rng) < p { 1.0 } else { 0.0 }
        })
        .collect();
    let simulated = Dataset { y, ..data.clone() };
    (beta, simulated)
}

/// Checks what every regression model needs: at least one row and one column, and a finite
/// positive prior variance.
pub(crate) fn check_regression(model: &str, data: &Dataset, prior_variance: f64) -> Result<()> {
    if data.p == 0 || data.n == 0 {
        return Err(Error::invalid(format!(
            "{model} needs at least one row and one column, the data are {} × {}",
            data.n, data.p
        )));
    }
    if !(prior_variance.is_finite() && prior_variance > 0.0) {
        return Err(Error::invalid(format!(
            "the prior variance must be positive and finite, got {prior_variance}"
        )));
    }
    Ok(())
}

/// Rejects data options for a model that takes none.
fn no_data_options(spec: &ModelSpec) -> Result<()> {
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

/// The elliptic PDE model `spec` describes (its mesh, modes, prior sd and data seed).
pub fn elliptic_pde(spec: &ModelSpec) -> Result<elliptic_pde::EllipticPde> {
    no_data_options(&ModelSpec {
        mesh: None,
        kl_modes: None,
        prior_sd: None,
        ..spec.clone()
    })?;
    let defaults = elliptic_pde::PdeSettings::default();
    elliptic_pde::EllipticPde::simulate_within(
        elliptic_pde::PdeSettings {
            mesh: spec.mesh.unwrap_or(defaults.mesh),
            modes: spec.kl_modes.unwrap_or(defaults.modes),
            prior_sd: spec.prior_sd.unwrap_or(defaults.prior_sd),
            data_seed: spec.data_seed,
        },
        spec.memory_limit,
    )
}

/// The served model `spec` describes: connects to its server.
fn served(spec: &ModelSpec) -> Result<umbridge::ServedPosterior> {
    let s = &spec.served;
    let forward = match s.output.as_deref() {
        None | Some("log-density") => false,
        Some("forward") => true,
        Some(other) => {
            return Err(Error::setting(
                "umbridge_output",
                format!("is {other:?}: use log-density or forward"),
            ));
        }
    };
    // A forward model takes its data, noise and prior; a log-density is the whole posterior.
    let own = ModelSpec {
        data: None,
        prior_sd: None,
        served: ServedSpec::default(),
        ..spec.clone()
    };
    no_data_options(&own)?;
    let likelihood = if forward {
        let data = spec.data.as_deref().ok_or_else(|| {
            Error::setting("data", "must name the observations of a forward model")
        })?;
        umbridge::Likelihood::Gaussian {
            data: umbridge::read_observations(data)?,
            noise_sd: s
                .noise
                .ok_or_else(|| Error::setting("noise", "must be given for a forward model"))?,
            prior_mean: s.prior_mean.unwrap_or(0.0),
            prior_sd: spec.prior_sd.unwrap_or(1.0),
        }
    } else {
        let extra = [
            (spec.data.is_some(), "data"),
            (s.noise.is_some(), "noise"),
            (s.prior_mean.is_some(), "prior_mean"),
            (spec.prior_sd.is_some(), "prior_sd"),
        ];
        if let Some((_, setting)) = extra.iter().find(|(set, _)| *set) {
            return Err(Error::setting(
                setting,
                "applies to a forward model (umbridge output forward), not to a served \
                 log-density",
            ));
        }
        umbridge::Likelihood::LogDensity
    };
    let timeout = s.timeout.unwrap_or(60.0);
    if !(timeout.is_finite() && timeout > 0.0) {
        return Err(Error::setting(
            "timeout",
            "must be a positive number of seconds",
        ));
    }
    let config = match &s.config {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| Error::setting("umbridge_config", format!("is not JSON: {e}")))?,
        None => serde_json::Value::Object(Default::default()),
    };
    umbridge::ServedPosterior::connect(umbridge::ServedSettings {
        url: s.url.clone().unwrap_or_else(|| {
            format!(
                "http://127.0.0.1:{}",
                crate::umbridge::protocol::DEFAULT_PORT
            )
        }),
        model: s.model.clone(),
        likelihood,
        patience: crate::umbridge::client::Patience {
            timeout: std::time::Duration::from_secs_f64(timeout),
            retries: s.retries.unwrap_or(3),
        },
        config,
    })
}

/// Reads and preprocesses the data file of a regression model. `path` is a file's path or a
/// bundled data set's name (`a9a`, `bank`: [`crate::data::resolve`]), and the format is guessed
/// from the extension of what the file holds (`csv` for `bank-full.csv.gz`).
fn read_dataset(spec: &ModelSpec, path: &std::path::Path) -> Result<Dataset> {
    let path = &crate::data::resolve(path)?;
    let format = match spec.format.as_deref() {
        Some(f) => f.to_string(),
        None if crate::data::content_extension(path)
            .is_some_and(|e| e.eq_ignore_ascii_case("csv")) =>
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
    data.preprocess(&Preprocessing {
        standardize: spec.standardize,
        projection: spec.project.map(|k| Projection {
            k,
            seed: spec.projection_seed,
        }),
        intercept: spec.intercept,
    })?;
    Ok(data)
}

/// A regression model from `spec`'s data file, or simulated with `defaults` = (n, d) unless
/// `--n`/`--d` say otherwise; `--prior-variance` replaces the default prior either way.
fn regression<M: Model + 'static>(
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
    crate::memory::check(
        &format!("the simulated data of {n} rows × {d} features"),
        "n",
        crate::memory::f64s([n, d]),
        spec.memory_limit,
    )?;
    let simulated = simulate(n, d, spec.data_seed)?;
    if spec.prior_variance.is_none() {
        return Ok(Box::new(simulated));
    }
    Ok(Box::new(new(data(&simulated).clone(), prior)?))
}

/// Builds the model `spec` names.
pub fn build(spec: &ModelSpec) -> Result<Box<dyn Model>> {
    let n = |default: usize| spec.n.unwrap_or(default);
    match spec.name.as_str() {
        "logistic" => regression(
            spec,
            (100_000, 50),
            logistic::LogisticRegression::DEFAULT_PRIOR_VARIANCE,
            logistic::LogisticRegression::simulate,
            logistic::LogisticRegression::new,
            logistic::LogisticRegression::data,
        ),
        "probit" => regression(
            spec,
            (10_000, 5),
            probit::ProbitRegression::DEFAULT_PRIOR_VARIANCE,
            probit::ProbitRegression::simulate,
            probit::ProbitRegression::new,
            probit::ProbitRegression::data,
        ),
        "banana" => {
            no_data_options(spec)?;
            Ok(Box::new(banana::Banana::simulate(
                n(banana::Banana::PAPER_N),
                spec.data_seed,
            )?))
        }
        "gaussian-conjugate" => {
            no_data_options(spec)?;
            Ok(Box::new(gaussian::ConjugateGaussian::simulate(
                n(gaussian::ConjugateGaussian::DEFAULT_N),
                spec.data_seed,
            )?))
        }
        "gaussian-32" => {
            no_data_options(spec)?;
            let d = spec.d.unwrap_or(gaussian::CorrelatedGaussian::JOURNAL_DIM);
            Ok(Box::new(gaussian::CorrelatedGaussian::new(
                d,
                gaussian::CorrelatedGaussian::JOURNAL_VARIANCE_ALONG,
                gaussian::CorrelatedGaussian::JOURNAL_VARIANCE_ACROSS,
            )?))
        }
        "beta-binomial" => {
            no_data_options(spec)?;
            Ok(Box::new(beta_binomial::BetaBinomial::cancer_mortality()))
        }
        "elliptic-pde" => Ok(Box::new(elliptic_pde(spec)?)),
        "umbridge" => Ok(Box::new(served(spec)?)),
        "gp-hyper" => {
            no_data_options(spec)?;
            Ok(Box::new(gp_hyper::GpHyper::simulate(
                n(gp_hyper::GpHyper::DEFAULT_N),
                spec.data_seed,
            )?))
        }
        other => {
            let names: Vec<&str> = CATALOGUE.iter().map(|m| m.name).collect();
            Err(Error::invalid(format!(
                "unknown model {other:?}; built-in models: {}",
                names.join(", ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogued_model_builds_with_defaults() {
        // A served model needs its server: tests/umbridge.rs starts one.
        for info in CATALOGUE.iter().filter(|m| m.name != "umbridge") {
            let mut spec = ModelSpec::named(info.name);
            // Keep the big simulation small here.
            if info.name == "logistic" {
                spec.n = Some(500);
            }
            let model = build(&spec).unwrap_or_else(|e| panic!("{}: {e}", info.name));
            assert_eq!(model.parameter_names().len(), model.dim(), "{}", info.name);
            let q = vec![0.1; model.dim()];
            let mut g = vec![0.0; model.dim()];
            assert!(
                model.value_and_gradient(&q, &mut g).is_finite(),
                "{}",
                info.name
            );
        }
    }

    #[test]
    fn every_catalogued_model_simulates_from_its_generative_form() {
        // A served model is whatever the server computes: it has no generative form of ours.
        for info in CATALOGUE.iter().filter(|info| info.name != "umbridge") {
            let mut spec = ModelSpec::named(info.name);
            if info.name == "logistic" {
                spec.n = Some(500);
            }
            if info.name == "elliptic-pde" {
                (spec.mesh, spec.kl_modes) = (Some(8), Some(4));
            }
            let model = build(&spec).unwrap();
            let generative = model
                .generative()
                .unwrap_or_else(|| panic!("{} has no generative form", info.name));
            let (a, b) = (
                generative.simulate(5).unwrap(),
                generative.simulate(6).unwrap(),
            );
            assert_eq!(a.truth.len(), model.dim(), "{}", info.name);
            assert_ne!(a.truth, b.truth, "{}", info.name);
            assert_eq!(a.truth, generative.simulate(5).unwrap().truth);
            assert_eq!(a.posterior.parameter_names(), model.parameter_names());
            // The posterior of data simulated from the truth is finite there.
            let mut g = vec![0.0; model.dim()];
            let u = a.posterior.value_and_gradient(&a.truth, &mut g);
            assert!(
                u.is_finite() && g.iter().all(|v| v.is_finite()),
                "{}",
                info.name
            );
        }
    }

    #[test]
    fn unknown_model_and_misplaced_options_are_clear_errors() {
        let err = build(&ModelSpec::named("nope")).err().unwrap().to_string();
        assert!(
            err.contains("unknown model \"nope\"") && err.contains("logistic"),
            "{err}"
        );
        let spec = ModelSpec {
            standardize: true,
            ..ModelSpec::named("banana")
        };
        let err = build(&spec).err().unwrap().to_string();
        assert_eq!(err, "setting `standardize` does not apply to model banana");
        let mut spec = ModelSpec::named("gaussian-32");
        spec.served.url = Some("http://127.0.0.1:1".into());
        let err = build(&spec).err().unwrap().to_string();
        assert_eq!(err, "setting `url` does not apply to model gaussian-32");
    }

    #[test]
    fn a_served_models_options_are_checked_before_connecting() {
        // Port 1 on loopback: nothing is contacted, every check comes first.
        let served = |f: &dyn Fn(&mut ModelSpec)| {
            let mut spec = ModelSpec::named("umbridge");
            spec.served.url = Some("http://127.0.0.1:1".into());
            f(&mut spec);
            build(&spec).err().unwrap().to_string()
        };
        assert!(
            served(&|s| s.served.output = Some("posterior".into()))
                .contains("log-density or forward")
        );
        assert!(
            served(&|s| s.served.noise = Some(0.1))
                .starts_with("setting `noise` applies to a forward model")
        );
        assert!(served(&|s| s.standardize = true).contains("`standardize` does not apply"));
        assert_eq!(
            served(&|s| s.served.output = Some("forward".into())),
            "setting `data` must name the observations of a forward model"
        );
        assert!(served(&|s| s.served.timeout = Some(0.0)).contains("`timeout` must be"));
        assert!(served(&|s| s.served.config = Some("{".into())).contains("not JSON"));
    }
}
