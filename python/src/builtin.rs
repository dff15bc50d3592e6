//! The built-in and served models by name, from the library's model table, with the command
//! line's options as keywords (`data=`, `n=`, `url=` ...).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
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
                .map(|o| (o.setting.to_string(), o.note.to_string()))
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

/// The spec of model `name` from the options (each read removed): every setting a built-in
/// model declares, by its name; the library refuses one this model does not take.
fn spec(name: &str, opts: &mut Options) -> PyResult<ModelSpec> {
    let mut spec = ModelSpec::named(name);
    for option in models::options() {
        let value = match option.value {
            None => opts.flag(option.setting)?.then(|| "true".to_string()),
            Some(_) => opts.text(option.setting)?,
        };
        if let Some(value) = value {
            spec.set(option.setting, value);
        }
    }
    spec.memory_limit = opts
        .take("memory_limit")?
        .unwrap_or_else(shmc::memory::machine_default_limit);
    Ok(spec)
}
