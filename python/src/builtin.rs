//! The built-in and served models by name, from the library's model table, with the command
//! line's options as keywords (`data=`, `n=`, `url=` ...).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use shmc::data::Missing;
use shmc::models::{self, ModelSpec};

use crate::errors;
use crate::model::Handle;
use crate::options::Options;

/// A model table entry as Python gets it: name, description, parameters, and each option
/// with its default.
type Entry = (String, String, String, Vec<(String, String)>);

/// The model table: each model's name, description, parameters and options (with defaults).
#[pyfunction]
pub fn builtin_models() -> Vec<Entry> {
    models::CATALOGUE
        .iter()
        .map(|m| {
            let options = m
                .options
                .iter()
                .map(|(name, default)| (name.to_string(), default.to_string()))
                .collect();
            (
                m.name.into(),
                m.description.into(),
                m.parameters.into(),
                options,
            )
        })
        .collect()
}

/// The built-in model `name` with the options `options` (the library's setting names, as
/// `shmc models` lists them; served models: `url`, `umbridge_model`, ...).
#[pyfunction]
#[pyo3(signature = (name, options=None))]
pub fn builtin(py: Python<'_>, name: &str, options: Option<Bound<'_, PyDict>>) -> PyResult<Handle> {
    let mut opts = Options::new(options.as_ref(), format!("model {name}"))?;
    let spec = spec(name, &mut opts)?;
    opts.finish("see shmc.models() for each model's options")?;
    let model = py
        .detach(|| models::build(&spec))
        .map_err(errors::to_python)?;
    Ok(Handle {
        model: Arc::from(model),
        callable: None,
        name: name.into(),
    })
}

/// The spec of model `name` from the options (each read removed).
fn spec(name: &str, opts: &mut Options) -> PyResult<ModelSpec> {
    let mut spec = ModelSpec::named(name);
    spec.data = opts.take("data")?;
    spec.format = opts.take("format")?;
    if let Some(response) = opts.take("response")? {
        spec.response = response;
    }
    if opts.choice("missing", &["error", "drop-rows"])? == "drop-rows" {
        spec.missing = Missing::DropRows;
    }
    spec.standardize = opts.flag("standardize")?;
    spec.intercept = opts.flag("intercept")?;
    spec.project = opts.take("project")?;
    spec.projection_seed = opts.take("projection_seed")?.unwrap_or(1);
    spec.n = opts.take("n")?;
    spec.d = opts.take("d")?;
    spec.data_seed = opts.take("data_seed")?.unwrap_or(1);
    spec.prior_variance = opts.take("prior_variance")?;
    spec.mesh = opts.take("mesh")?;
    spec.kl_modes = opts.take("kl_modes")?;
    spec.prior_sd = opts.take("prior_sd")?;
    let served = &mut spec.served;
    served.url = opts.take("url")?;
    served.model = opts.take("umbridge_model")?;
    served.output = opts.take("umbridge_output")?;
    served.noise = opts.take("noise")?;
    served.prior_mean = opts.take("prior_mean")?;
    served.timeout = opts.take("timeout")?;
    served.retries = opts.take("retries")?;
    served.config = opts.take("umbridge_config")?;
    spec.memory_limit = opts
        .take("memory_limit")?
        .unwrap_or_else(crate::run::default_memory_limit);
    Ok(spec)
}
