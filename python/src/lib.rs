//! The native module of the `shmc` Python package (`shmc._shmc`): models (a Python callable's
//! log density, the library's built-in and served models) and a sampling run of the library's
//! [`shmc::Sampler`] returning its draws and statistics as arrays. The package's Python layer
//! (`python/shmc`) turns them into ArviZ InferenceData and wraps PyMC models.

mod builtin;
mod errors;
mod methods;
mod model;
mod options;
mod plan;
mod result;
mod run;

use std::sync::Arc;

use pyo3::prelude::*;

use model::{Callable, Handle};

/// The model of a Python callable `function(q) -> (logp, grad)` on parameters `names`,
/// called `name` in a run's attributes; `value(q) -> logp`, if given, is called where no
/// gradient is needed.
#[pyfunction]
#[pyo3(signature = (function, names, name = "python".to_string(), value = None))]
fn from_callable(
    function: Py<PyAny>,
    names: Vec<String>,
    name: String,
    value: Option<Py<PyAny>>,
) -> Handle {
    let callable = Arc::new(Callable::new(function, names, value));
    Handle {
        model: callable.clone(),
        callable: Some(callable),
        name,
    }
}

/// Refuses `ndim` parameters that would not fit in `memory_limit` bytes (default half the
/// machine's), as the command line does, before the caller makes anything of that size.
#[pyfunction]
#[pyo3(signature = (ndim, memory_limit = None))]
fn check_dimension(ndim: usize, memory_limit: Option<u64>) -> PyResult<()> {
    shmc::memory::check(
        &format!("a {ndim}-parameter model's names and chain state"),
        "ndim",
        shmc::memory::dimension(ndim),
        memory_limit.unwrap_or_else(shmc::memory::machine_default_limit),
    )
    .map_err(errors::to_python)
}

/// The method names `sample` takes.
#[pyfunction]
fn method_names() -> Vec<&'static str> {
    methods::NAMES.to_vec()
}

#[pymodule]
fn _shmc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Handle>()?;
    m.add_function(wrap_pyfunction!(from_callable, m)?)?;
    m.add_function(wrap_pyfunction!(method_names, m)?)?;
    m.add_function(wrap_pyfunction!(check_dimension, m)?)?;
    m.add_function(wrap_pyfunction!(builtin::builtin, m)?)?;
    m.add_function(wrap_pyfunction!(builtin::builtin_models, m)?)?;
    m.add_function(wrap_pyfunction!(run::sample, m)?)?;
    Ok(())
}
