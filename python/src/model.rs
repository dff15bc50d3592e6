//! The models a Python user samples: a Python callable's log density ([`Callable`]), or a
//! built-in or served model built by name from the library's model table.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use shmc::Model;
use shmc::core::Potential;

thread_local! {
    /// `(chain, iterations done)` of the chain running on this thread, as the sampler last
    /// reported it (see [`record_progress`]): where a callback that raises was.
    static AT: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

/// Records that `chain` (from 1) finished `done` iterations on this thread, so that an
/// exception raised next says where. The sampler reports progress from each chain's thread.
pub fn record_progress(chain: usize, done: usize) {
    AT.with(|at| at.set(Some((chain, done))));
}

/// A model whose `U = −log p` and `∇U` come from a Python callable returning
/// `(logp, grad)`: the GIL taken for each call only. An exception, or a value of the wrong
/// shape, is kept with where it happened and stops the run ([`Model::failure`]); the
/// evaluation returns NaN meanwhile (a rejected transition).
pub struct Callable {
    names: Vec<String>,
    function: Py<PyAny>,
    /// `q -> logp` alone, when the model offers one: the exact judgement of a surrogate
    /// proposal needs no gradient, and skipping it halves a PyMC model's evaluation.
    value_function: Option<Py<PyAny>>,
    raised: Mutex<Option<Raised>>,
    failed: AtomicBool,
    calls: AtomicU64,
}

/// The first exception a callback raised, and where.
pub struct Raised {
    /// The exception, its traceback kept.
    pub error: PyErr,
    /// `(chain, iterations done)` when it was raised, if a chain had reported progress.
    pub at: Option<(usize, usize)>,
}

impl Callable {
    /// The model of `function` on `names.len()` parameters.
    pub fn new(function: Py<PyAny>, names: Vec<String>, value: Option<Py<PyAny>>) -> Self {
        Self {
            names,
            function,
            value_function: value,
            raised: Mutex::new(None),
            failed: AtomicBool::new(false),
            calls: AtomicU64::new(0),
        }
    }

    /// The first exception raised, taken out (later runs start clean).
    pub fn take_raised(&self) -> Option<Raised> {
        self.failed.store(false, Ordering::Relaxed);
        self.raised
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// The calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Calls the function at `q` and writes `∇U = −grad` into `gradient`; returns `U = −logp`.
    fn call(&self, py: Python<'_>, q: &[f64], gradient: &mut [f64]) -> PyResult<f64> {
        let point = PyArray1::from_slice(py, q);
        let answer = self.function.bind(py).call1((point,))?;
        let (logp, grad): (f64, Bound<'_, PyAny>) = answer.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "the log density must return (logp, grad), a float and an array; it returned \
                 {}",
                short_repr(&answer)
            ))
        })?;
        let grad = match grad.cast::<PyArray1<f64>>() {
            Ok(array) => array.clone(),
            Err(_) => as_float_array(py, &grad)?,
        };
        if grad.len() != q.len() || grad.ndim() != 1 {
            return Err(PyValueError::new_err(format!(
                "the gradient has shape {}, expected ({},) (one entry per parameter)",
                shape_text(grad.shape()),
                q.len()
            )));
        }
        let grad = grad.readonly();
        for (out, g) in gradient.iter_mut().zip(grad.as_array().iter()) {
            *out = -g;
        }
        Ok(-logp)
    }

    /// Calls the value-only function at `q`; returns `U = −logp`.
    fn call_value(&self, py: Python<'_>, value: &Py<PyAny>, q: &[f64]) -> PyResult<f64> {
        let answer = value.bind(py).call1((PyArray1::from_slice(py, q),))?;
        let logp: f64 = answer.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "the log density's value function must return a float; it returned {}",
                short_repr(&answer)
            ))
        })?;
        Ok(-logp)
    }

    /// Keeps the first exception, with where it was raised, and stops the run.
    fn record(&self, error: PyErr) {
        let mut raised = self.raised.lock().unwrap_or_else(PoisonError::into_inner);
        if raised.is_none() {
            *raised = Some(Raised {
                error,
                at: AT.with(Cell::get),
            });
        }
        self.failed.store(true, Ordering::Relaxed);
    }
}

/// `value` as a float64 NumPy array of one dimension (a list, a JAX array, float32).
fn as_float_array<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let numpy = py.import("numpy")?;
    let array = numpy
        .getattr("asarray")?
        .call1((value, numpy.getattr("float64")?))?;
    let shape: Vec<usize> = array.getattr("shape")?.extract()?;
    array.cast_into::<PyArray1<f64>>().map_err(|_| {
        PyValueError::new_err(format!(
            "the gradient has shape {}, expected one dimension (one entry per parameter)",
            shape_text(&shape)
        ))
    })
}

/// A shape as Python writes it: `(3,)`, `(2, 3)`.
fn shape_text(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A repr of `value` cut to 80 characters, for messages.
fn short_repr(value: &Bound<'_, PyAny>) -> String {
    let text = value.repr().map_or_else(|_| "?".into(), |r| r.to_string());
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

impl Potential for Callable {
    fn dim(&self) -> usize {
        self.names.len()
    }

    fn value(&self, q: &[f64]) -> f64 {
        let Some(value) = &self.value_function else {
            let mut gradient = vec![0.0; q.len()];
            return self.value_and_gradient(q, &mut gradient);
        };
        if self.failed.load(Ordering::Relaxed) {
            return f64::NAN;
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        Python::attach(|py| self.call_value(py, value, q)).unwrap_or_else(|error| {
            self.record(error);
            f64::NAN
        })
    }

    fn value_and_gradient(&self, q: &[f64], gradient: &mut [f64]) -> f64 {
        if self.failed.load(Ordering::Relaxed) {
            return f64::NAN;
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        Python::attach(|py| self.call(py, q, gradient)).unwrap_or_else(|error| {
            self.record(error);
            f64::NAN
        })
    }
}

impl Model for Callable {
    fn parameter_names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn failure(&self) -> Option<String> {
        self.failed
            .load(Ordering::Relaxed)
            .then(|| "the Python log density raised an exception".to_string())
    }

    fn work(&self) -> Vec<(&'static str, u64)> {
        vec![("python calls", self.calls())]
    }
}

/// A model `shmc.sample` can run: the library's, or a Python callable (kept apart too, for
/// its exception after a run).
#[pyclass(name = "Model", module = "shmc._shmc", frozen)]
pub struct Handle {
    /// The model the sampler runs.
    pub model: Arc<dyn Model>,
    /// The same model when it is a Python callable.
    pub callable: Option<Arc<Callable>>,
    /// The model's name in the run's attributes (`banana`, `python`).
    pub name: String,
}

#[pymethods]
impl Handle {
    /// The parameter names, in order.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.model.parameter_names()
    }

    /// The number of parameters (unconstrained coordinates).
    #[getter]
    fn ndim(&self) -> usize {
        self.model.dim()
    }

    /// The model's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// What building the model noted (columns read, rows dropped), one sentence each.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.model.notes()
    }

    /// The model's `log p` and its gradient at `q` (for checking a model by hand).
    fn logp_and_grad<'py>(
        &self,
        py: Python<'py>,
        q: Vec<f64>,
    ) -> PyResult<(f64, Bound<'py, PyArray1<f64>>)> {
        if q.len() != self.model.dim() {
            return Err(PyValueError::new_err(format!(
                "q has {} entries, the model {}",
                q.len(),
                self.model.dim()
            )));
        }
        let mut gradient = vec![0.0; q.len()];
        let model = Arc::clone(&self.model);
        let u = py.detach(|| model.value_and_gradient(&q, &mut gradient));
        if let Some(raised) = self.callable.as_ref().and_then(|c| c.take_raised()) {
            return Err(raised.error);
        }
        let grad: Vec<f64> = gradient.iter().map(|g| -g).collect();
        Ok((-u, PyArray1::from_vec(py, grad)))
    }

    fn __repr__(&self) -> String {
        format!("shmc.Model({:?}, ndim={})", self.name, self.model.dim())
    }
}
