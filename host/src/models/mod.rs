//! The built-in models. Each implements [`crate::Model`], the same path a user's own model
//! takes, and names itself in [`CATALOGUE`] with a [`ModelEntry`] defined in its own file: what
//! `shmc models` lists, the [`ModelSpec`] settings it reads, how it is built, and a small
//! instance for tests and calibration. [`build`] turns a spec (what the command line says) into
//! the model it names. A new model is its own file plus one line in [`CATALOGUE`].

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
mod spec;
pub mod umbridge;

use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::linalg::dot;
use shmc_core::random::{fill_standard_normal, uniform};

use crate::data::Dataset;
use crate::{Error, Model, Result};
pub use spec::{ModelSpec, ServedSpec};
pub(crate) use spec::{no_data_options, regression, regression_options};

/// Every built-in model, in the order `shmc models` lists them.
pub const CATALOGUE: [ModelEntry; 9] = [
    logistic::ENTRY,
    probit::ENTRY,
    banana::ENTRY,
    gaussian::CONJUGATE_ENTRY,
    gaussian::CORRELATED_ENTRY,
    beta_binomial::ENTRY,
    elliptic_pde::ENTRY,
    umbridge::ENTRY,
    gp_hyper::ENTRY,
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
    /// The [`ModelSpec`] settings it reads (snake-case names, as [`Error::Setting`] gives
    /// them), each with its default or its values in words; any other setting is refused.
    pub options: &'static [(&'static str, &'static str)],
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

/// Builds the model `spec` names.
pub fn build(spec: &ModelSpec) -> Result<Box<dyn Model>> {
    (entry(&spec.name)?.build)(spec)
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
        // A served model needs its server: tests/umbridge.rs starts one.
        for info in CATALOGUE.iter().filter(|m| m.name != "umbridge") {
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
        // A served model is whatever the server computes: it has no generative form of ours,
        // and no small instance.
        for info in &CATALOGUE {
            let Some((spec, _)) = small(info.name).unwrap() else {
                assert_eq!(info.name, "umbridge");
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
