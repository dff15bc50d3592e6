//! A finished (or interrupted) run as Python values: every chain's rows as one array
//! `(chain, draw, column)`, the warmup rows when kept, and per-chain statistics (step size,
//! evaluations, the surrogate's fit) for the Python layer to lay out as InferenceData.

use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use shmc::Fit;
use shmc::sampler::{ChainResult, Evaluations, SAMPLER_COLUMNS};

use crate::model::Handle;
use crate::plan::Plan;

/// The run as a dict: `columns`, `draws`, `warmup` (or None), `chains` (one dict each),
/// `interrupted`, and the method's name, settings and report.
pub fn to_python<'py>(
    py: Python<'py>,
    fit: &Fit,
    model: &Handle,
    plan: &Plan,
    stopped: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let run = fit.run();
    let mut columns: Vec<String> = SAMPLER_COLUMNS.iter().map(|c| c.to_string()).collect();
    columns.extend(run.names.iter().cloned());
    // Chains of an interrupted run may have made different numbers of draws: all are cut to
    // the fewest, so the draws form one array.
    let kept = run.chains.iter().map(ChainResult::kept).min().unwrap_or(0);
    let rows: Vec<Vec<Vec<f64>>> = run
        .chains
        .iter()
        .map(|c| {
            (0..kept)
                .map(|i| c.columns.iter().map(|col| col[i]).collect())
                .collect()
        })
        .collect();
    let out = PyDict::new(py);
    out.set_item("columns", columns)?;
    out.set_item(
        "draws",
        cube(py, &rows, SAMPLER_COLUMNS.len() + run.names.len())?,
    )?;
    let warmup = fit.warmup_rows();
    if plan.save_warmup && !warmup.is_empty() {
        let fewest = warmup.iter().map(|w| w.len()).min().unwrap_or(0);
        let rows: Vec<Vec<Vec<f64>>> = warmup.iter().map(|w| w[..fewest].to_vec()).collect();
        out.set_item(
            "warmup",
            cube(py, &rows, SAMPLER_COLUMNS.len() + run.names.len())?,
        )?;
    } else {
        out.set_item("warmup", py.None())?;
    }
    let chains: PyResult<Vec<Bound<'py, PyDict>>> =
        run.chains.iter().map(|c| chain(py, c)).collect();
    out.set_item("chains", chains?)?;
    out.set_item("interrupted", stopped || run.interrupted())?;
    let config = fit.config();
    out.set_item("method", config.method.name())?;
    out.set_item("auto", plan.auto.as_deref())?;
    out.set_item("approximate", config.method.approximate())?;
    out.set_item("settings", format!("{config:?}"))?;
    out.set_item("report", fit.report(&model.model.work()))?;
    let warnings: Vec<(&str, String)> = fit
        .warnings()
        .into_iter()
        .map(|w| (w.check.name(), w.message))
        .collect();
    out.set_item("warnings", warnings)?;
    out.set_item("wall_seconds", run.wall_seconds)?;
    if let Some(check) = &run.target_ess {
        out.set_item("target_ess_reached", check.reached)?;
    }
    Ok(out)
}

/// `rows[chain][draw]` (each of `width` values) as a float64 array `(chain, draw, width)`.
fn cube<'py>(py: Python<'py>, rows: &[Vec<Vec<f64>>], width: usize) -> PyResult<Bound<'py, PyAny>> {
    let draws = rows.first().map_or(0, Vec::len);
    let flat: Vec<f64> = rows.iter().flatten().flatten().copied().collect();
    Ok(PyArray1::from_vec(py, flat)
        .reshape([rows.len(), draws, width])?
        .into_any())
}

/// One chain's statistics.
fn chain<'py>(py: Python<'py>, c: &ChainResult) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("step_size", c.step_size)?;
    out.set_item("inv_mass", c.inv_mass.clone())?;
    out.set_item("warmup_seconds", c.warmup_seconds)?;
    out.set_item("sampling_seconds", c.sampling_seconds)?;
    out.set_item("warmup_divergences", c.warmup_divergences)?;
    out.set_item(
        "warmup_evaluations",
        evaluations(py, &c.warmup_evaluations)?,
    )?;
    out.set_item(
        "sampling_evaluations",
        evaluations(py, &c.sampling_evaluations)?,
    )?;
    out.set_item("interrupted", c.interrupted)?;
    if let Some(chosen) = &c.transitions {
        out.set_item("surrogate_transitions", chosen.setting())?;
    }
    if let Some(s) = &c.surrogate {
        let surrogate = PyDict::new(py);
        surrogate.set_item("training_states", s.training_states)?;
        surrogate.set_item("training_seconds", s.training_seconds)?;
        surrogate.set_item("holdout_gradient_error", s.holdout_gradient_error)?;
        surrogate.set_item("started_at", s.started_at)?;
        surrogate.set_item("extra_exact_evaluations", s.extra_exact_evaluations)?;
        out.set_item("surrogate", surrogate)?;
    }
    Ok(out)
}

/// A phase's evaluation counts.
fn evaluations<'py>(py: Python<'py>, e: &Evaluations) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("iterations", e.iterations)?;
    out.set_item("exact_gradients", e.exact_gradients)?;
    out.set_item("exact_values", e.exact_values)?;
    out.set_item("surrogate_gradients", e.surrogate_gradients)?;
    Ok(out)
}
