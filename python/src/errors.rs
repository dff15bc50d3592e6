//! The library's errors as Python exceptions, its setting names as `shmc.sample`'s keywords
//! (the library names a setting, never a front end's spelling of it).

use pyo3::exceptions::{PyConnectionError, PyMemoryError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use shmc::{Error, Fit};

use crate::model::{Handle, Raised};

/// The keyword of `shmc.sample` (or `shmc.model`) that sets the library's `setting`.
fn keyword(setting: &str) -> &str {
    match setting {
        "warmup" => "tune",
        other => other,
    }
}

/// `error` as the Python exception a user of `shmc.sample` gets.
pub fn to_python(error: Error) -> PyErr {
    match error {
        Error::Setting { setting, problem } => {
            PyValueError::new_err(format!("{} {problem}", keyword(setting)))
        }
        Error::MemoryLimit { message, driver } => PyMemoryError::new_err(format!(
            "{message}: raise memory_limit or lower {}",
            keyword(driver)
        )),
        Error::Io { .. } => PyOSError::new_err(error.to_string()),
        Error::Served { .. } => PyConnectionError::new_err(error.to_string()),
        Error::ModelFailed(_) => PyRuntimeError::new_err(error.to_string()),
        Error::FolderHoldsRun { dir, files, .. } => PyOSError::new_err(format!(
            "{}: holds the files of an earlier run ({files}); write elsewhere, or pass \
             overwrite=True to remove them (its files only)",
            dir.display()
        )),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// A run's result: a Python callback's exception re-raised as itself (its traceback kept),
/// with a note of the chain and iteration where it was raised; any other error translated.
pub fn run_result(fit: shmc::Result<Fit>, model: &Handle) -> PyResult<Fit> {
    let raised = model.callable.as_ref().and_then(|c| c.take_raised());
    match (fit, raised) {
        (_, Some(raised)) => Err(with_place(raised)),
        (Ok(fit), None) => Ok(fit),
        (Err(error), None) => Err(to_python(error)),
    }
}

/// The exception of `raised`, noted with where it happened (`add_note` on Python 3.11 and
/// later; the message also names the place on older ones through a chained RuntimeError).
fn with_place(raised: Raised) -> PyErr {
    let place = match raised.at {
        Some((chain, done)) => format!(
            "in chain {chain} at iteration {} (warmup included)",
            done + 1
        ),
        None => "before any iteration finished (a chain's start or first iteration, or the \
                 work before the chains: the Laplace approximation, a surrogate fitted first)"
            .to_string(),
    };
    let note = format!("shmc: raised by the log density {place}; every chain stopped");
    Python::attach(|py| {
        let value = raised.error.value(py);
        if value.hasattr("add_note").unwrap_or(false)
            && value.call_method1("add_note", (&note,)).is_ok()
        {
            return raised.error.clone_ref(py);
        }
        let wrapped = PyRuntimeError::new_err(note);
        wrapped.set_cause(py, Some(raised.error));
        wrapped
    })
}
