//! The built-in models. Each implements [`crate::Model`], the same path a user's own model
//! takes, and names itself in [`CATALOGUE`] with a [`ModelEntry`] defined in its own file: what
//! `shmc models` lists, the settings it reads ([`ModelOption`]), how it is built, and a small
//! instance for tests and calibration. [`build`] turns a spec (what the command line says) into
//! the model it names, refusing a setting the model does not declare. A new model is its own
//! file plus one line in [`CATALOGUE`]; a new option of a model is one line in its entry and
//! one read in its builder, and the front ends (the command line's flags, the Python package's
//! keywords) follow from the entry.

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
mod regression;
mod spec;
pub mod stan;
pub mod umbridge;

use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::linalg::dot;
use shmc_core::random::{fill_standard_normal, uniform};

use crate::data::Dataset;
use crate::{Error, Model, Result};
pub(crate) use regression::{regression, regression_options};
pub use spec::{ModelOption, ModelSpec};

/// Every built-in model, in the order `shmc models` lists them.
pub const CATALOGUE: [ModelEntry; 10] = [
    logistic::ENTRY,
    probit::ENTRY,
    banana::ENTRY,
    gaussian::CONJUGATE_ENTRY,
    gaussian::CORRELATED_ENTRY,
    beta_binomial::ENTRY,
    elliptic_pde::ENTRY,
    umbridge::ENTRY,
    gp_hyper::ENTRY,
    stan::ENTRY,
];

/// A built-in model as the registry knows it.
#[derive(Clone, Copy, Debug)]
pub struct ModelEntry {
    /// The name a [`ModelSpec`] (and the command line) gives.
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// Its parameters.
    pub parameters: &'static str,
    /// The [`ModelSpec`] settings it reads; [`build`] refuses any other.
    pub options: &'static [ModelOption],
    /// Builds it from a spec.
    pub build: fn(&ModelSpec) -> Result<Box<dyn Model>>,
    /// Makes a spec describe a small instance (few rows, a coarse mesh), for tests and
    /// calibration runs, saying in words how small; `None` for a model with no generative form
    /// of ours (a served one), which calibration cannot run on.
    pub small: Option<fn(&mut ModelSpec) -> &'static str>,
}

/// The entry of the model called `name`, or an error listing the built-in models.
pub fn entry(name: &str) -> Result<&'static ModelEntry> {
    CATALOGUE.iter().find(|m| m.name == name).ok_or_else(|| {
        let names: Vec<&str> = CATALOGUE.iter().map(|m| m.name).collect();
        Error::invalid(format!(
            "unknown model {name:?}; built-in models: {}",
            names.join(", ")
        ))
    })
}

/// Builds the model `spec` names, after refusing any setting it does not declare.
pub fn build(spec: &ModelSpec) -> Result<Box<dyn Model>> {
    let entry = entry(&spec.name)?;
    let declared = |given: &str| entry.options.iter().any(|o| o.setting == given);
    if let Some(given) = spec.given().find(|given| !declared(given)) {
        return Err(match setting_named(given) {
            Some(setting) => {
                Error::setting(setting, format!("does not apply to model {}", spec.name))
            }
            None => Error::invalid(format!(
                "model {} has no setting {given:?}; its settings: {}",
                spec.name,
                entry
                    .options
                    .iter()
                    .map(|o| o.setting)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        });
    }
    (entry.build)(spec)
}

/// The setting called `name` if some model declares it.
fn setting_named(name: &str) -> Option<&'static str> {
    settings().find(|s| *s == name)
}

/// Every setting some built-in model declares, each once, in catalogue order: what a front
/// end offers (the command line's model flags, the Python package's keywords).
pub fn settings() -> impl Iterator<Item = &'static str> {
    options().map(|o| o.setting)
}

/// Every option some built-in model declares, each setting once (its first declaration), in
/// catalogue order.
pub fn options() -> impl Iterator<Item = &'static ModelOption> {
    let all = CATALOGUE.iter().flat_map(|m| m.options.iter());
    all.clone()
        .enumerate()
        .filter(move |(i, o)| {
            all.clone()
                .take(*i)
                .all(|earlier| earlier.setting != o.setting)
        })
        .map(|(_, o)| o)
}

/// The small instance of the model called `name` ([`ModelEntry::small`]): its spec and how
/// small it is in words, or `None` for a model without one.
pub fn small(name: &str) -> Result<Option<(ModelSpec, &'static str)>> {
    Ok(entry(name)?.small.map(|shrink| {
        let mut spec = ModelSpec::named(name);
        let size = shrink(&mut spec);
        (spec, size)
    }))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogued_model_builds_with_defaults() {
        // A model whose density comes from outside (a server, a Stan program) needs that
        // outside input and has no small instance: tests/umbridge.rs and tests/stan.rs.
        for info in CATALOGUE.iter().filter(|m| m.small.is_some()) {
            let model = build(&ModelSpec::named(info.name))
                .unwrap_or_else(|e| panic!("{}: {e}", info.name));
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
        // A served model or a Stan program is whatever the outside computes: it has no
        // generative form of ours, and no small instance.
        for info in &CATALOGUE {
            let Some((spec, _)) = small(info.name).unwrap() else {
                assert!(["umbridge", "stan"].contains(&info.name), "{}", info.name);
                continue;
            };
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
        let err = |spec: ModelSpec| build(&spec).err().unwrap().to_string();
        let banana = || ModelSpec::named("banana");
        assert_eq!(
            err(banana().with("standardize", true)),
            "setting `standardize` does not apply to model banana"
        );
        assert_eq!(
            err(ModelSpec::named("gaussian-32").with("url", "http://127.0.0.1:1")),
            "setting `url` does not apply to model gaussian-32"
        );
        assert_eq!(
            err(banana().with("meshh", 3)),
            "model banana has no setting \"meshh\"; its settings: n, data_seed"
        );
        assert!(err(banana().with("n", "ten")).starts_with("setting `n` cannot be \"ten\""));
        assert!(err(banana().with("n", -3)).starts_with("setting `n` cannot be \"-3\""));
    }

    #[test]
    fn a_regression_refuses_file_options_without_a_file_and_simulation_options_with_one() {
        let err = |spec: ModelSpec| build(&spec).err().unwrap().to_string();
        let logistic = || ModelSpec::named("logistic").with("n", 50).with("d", 2);
        assert!(
            err(logistic().with("standardize", true))
                .starts_with("setting `standardize` applies to a data file"),
        );
        assert!(
            err(logistic().with("missing", "drop-rows")).starts_with("setting `missing` applies")
        );
        let bank = ModelSpec::named("logistic").with("data", "bank");
        assert!(err(bank.clone().with("n", 5)).starts_with("setting `n` applies to simulated"));
        assert!(err(bank.with("missing", "skip")).contains("use error or drop-rows"));
    }

    #[test]
    fn every_setting_takes_the_same_kind_of_value_in_every_model() {
        // The front ends make one flag or keyword per setting: a setting that is a switch in
        // one model and takes a value in another could not be both.
        for option in CATALOGUE.iter().flat_map(|m| m.options) {
            let first = options().find(|o| o.setting == option.setting).unwrap();
            assert_eq!(
                first.value.is_none(),
                option.value.is_none(),
                "{}",
                option.setting
            );
        }
        assert_eq!(settings().filter(|s| *s == "data").count(), 1);
    }

    #[test]
    fn a_served_models_options_are_checked_before_connecting() {
        // Port 1 on loopback: nothing is contacted, every check comes first.
        let served = |f: &dyn Fn(ModelSpec) -> ModelSpec| {
            let spec = ModelSpec::named("umbridge").with("url", "http://127.0.0.1:1");
            build(&f(spec)).err().unwrap().to_string()
        };
        assert!(
            served(&|s| s.with("umbridge_output", "posterior")).contains("log-density or forward")
        );
        assert!(
            served(&|s| s.with("noise", 0.1))
                .starts_with("setting `noise` applies to a forward model")
        );
        assert!(served(&|s| s.with("standardize", true)).contains("`standardize` does not apply"));
        assert_eq!(
            served(&|s| s.with("umbridge_output", "forward")),
            "setting `data` must name the observations of a forward model"
        );
        assert!(served(&|s| s.with("timeout", 0.0)).contains("`timeout` must be"));
        assert!(served(&|s| s.with("umbridge_config", "{")).contains("not JSON"));
    }
}
