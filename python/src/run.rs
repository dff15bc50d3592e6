//! `shmc._shmc.sample`: a run of the library's [`Sampler`] on a model, the GIL released while
//! the chains work (each Python callback takes it for itself), Ctrl-C stopping the chains and
//! keeping their draws, and the result handed back as arrays ([`crate::result`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use shmc::sampler::auto;
use shmc::sampler::{Init, MassMatrix, Method, NutsSettings, SampleConfig};
use shmc::{Fit, Model, Sampler};

use crate::errors;
use crate::methods;
use crate::model::{Handle, record_progress};
use crate::options::Options;
use crate::plan::Plan;

/// How often the waiting thread looks for Ctrl-C and redraws the progress line.
const POLL: Duration = Duration::from_millis(50);

/// The library's settings for `plan` and the method options in `opts` (each read removed), on
/// `model` (which reads initial values given by name).
/// With `method="auto"` the method is NUTS until [`choose_plan`] puts auto's plan in place,
/// and the options that would set a plan are left unread, so refused.
fn config(plan: &Plan, opts: &mut Options, model: &dyn Model) -> PyResult<SampleConfig> {
    let memory_limit = opts
        .take::<u64>("memory_limit")?
        .unwrap_or_else(shmc::memory::machine_default_limit);
    let auto = plan.method == methods::AUTO;
    let (trajectory, method, metric) = if auto {
        let trajectory = methods::auto_trajectory(opts)?;
        let method = Method::Nuts(NutsSettings::default());
        (trajectory, method, MassMatrix::Diagonal)
    } else {
        let trajectory = methods::trajectory(&plan.method, opts)?;
        let method = methods::method(&plan.method, opts, &trajectory, plan.seed, memory_limit)?;
        let metric = match opts.choice("metric", &["diagonal", "laplace", "low-rank"])? {
            "laplace" => MassMatrix::Laplace,
            "low-rank" => MassMatrix::LowRank,
            _ => MassMatrix::Diagonal,
        };
        (trajectory, method, metric)
    };
    let init = match initial_values(opts, model)? {
        Some(values) => Init::Values(values),
        None => Init::Random {
            radius: opts.take("init_radius")?.unwrap_or(2.0),
        },
    };
    let defaults = SampleConfig::default();
    Ok(SampleConfig {
        chains: plan.chains,
        chain_id: 1,
        warmup: plan.tune,
        draws: plan.draws,
        seed: plan.seed,
        step_size: trajectory.step_size,
        steps: trajectory.steps,
        adapt_mass: auto || opts.take("adapt_mass")?.unwrap_or(true),
        metric,
        init,
        save_warmup: plan.save_warmup,
        max_energy_error: defaults.max_energy_error,
        method,
        target_ess: plan.target_ess,
        ess_check_every: opts
            .take("ess_check_every")?
            .unwrap_or(defaults.ess_check_every),
        lockstep: true,
        memory_limit,
        design_level: opts.take("design_level")?,
    })
}

/// Runs `plan` with the method options `options` on `model`; returns the run as a dict of
/// arrays and values ([`crate::result::to_python`]).
#[pyfunction]
#[pyo3(signature = (model, method, chains, tune, draws, seed, target_ess, save_warmup, output_dir, progress, options=None))]
#[allow(clippy::too_many_arguments)]
pub fn sample<'py>(
    py: Python<'py>,
    model: &Handle,
    method: String,
    chains: usize,
    tune: usize,
    draws: usize,
    seed: u64,
    target_ess: Option<f64>,
    save_warmup: bool,
    output_dir: Option<PathBuf>,
    progress: bool,
    options: Option<Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut plan = Plan {
        method,
        chains,
        tune,
        draws,
        seed,
        target_ess,
        save_warmup,
        output_dir,
        progress,
        auto: None,
    };
    let mut opts = Options::new(options.as_ref(), format!("method {}", plan.method))?;
    let mut config = config(&plan, &mut opts, model.model.as_ref())?;
    let overwrite = opts.flag("overwrite")?;
    opts.finish(if plan.method == methods::AUTO {
        "auto chooses its own plan, metric and trajectories included: name the method to set \
         them (attrs[\"auto\"] names the one it chose)"
    } else {
        "see help(shmc.sample) for each method's options"
    })?;
    plan.auto = choose_plan(py, &plan, &mut config, model.model.as_ref())?;
    // Refused settings are refused here, before a thread or a progress line.
    config
        .validate(model.model.as_ref())
        .map_err(errors::to_python)?;
    let stopped = AtomicBool::new(false);
    let fit = run(py, model, config, &plan, overwrite, &stopped);
    let fit = errors::run_result(fit, model)?;
    crate::result::to_python(py, &fit, model, &plan, stopped.load(Ordering::Relaxed))
}

/// With `method="auto"`, the plan [`auto::choose`] picks for `model`, put in place in
/// `config`; its line (for `attrs["auto"]` and the CSV headers). The GIL is released while it
/// measures: its MAP search spreads the Hessian's gradients over threads, and a Python model's
/// callback on each of them takes the GIL for itself (held here, they would wait for ever).
fn choose_plan(
    py: Python<'_>,
    plan: &Plan,
    config: &mut SampleConfig,
    model: &dyn Model,
) -> PyResult<Option<String>> {
    if plan.method != methods::AUTO {
        return Ok(None);
    }
    let measured = &*config;
    let choice = py
        .detach(|| auto::choose(model, measured))
        .map_err(errors::to_python)?;
    *config = choice.apply(config);
    Ok(Some(choice.line()))
}

/// `init`: unconstrained numbers, or (as `shmc.sample` passes a dict) values by name in JSON,
/// which the model reads on its own scale (a Stan model: CmdStan's init file).
fn initial_values(opts: &mut Options, model: &dyn Model) -> PyResult<Option<Vec<f64>>> {
    if let Some(named) = opts.take_if::<String>("init")? {
        let values = model.unconstrain_named(&named).ok_or_else(|| {
            PyValueError::new_err(format!(
                "init given by name is read by a Stan model; this model takes a list of its \
                 {} numbers on the unconstrained scale",
                model.dim()
            ))
        })?;
        return values
            .map(Some)
            .map_err(|e| PyValueError::new_err(format!("init: {e}")));
    }
    opts.take::<Vec<f64>>("init")
}

/// Runs the chains on a thread of their own while this one, the GIL released, waits: every
/// [`POLL`] it takes the GIL to look for Ctrl-C (which sets `stopped` and stops the chains
/// after their current iteration, their draws kept) and to redraw the progress line.
fn run(
    py: Python<'_>,
    model: &Handle,
    config: SampleConfig,
    plan: &Plan,
    overwrite: bool,
    stopped: &AtomicBool,
) -> shmc::Result<Fit> {
    let done: Vec<AtomicUsize> = (0..config.chains).map(|_| AtomicUsize::new(0)).collect();
    let total = config.chains * (config.warmup + config.draws);
    let approximate = config.method.approximate();
    // The files are named for the model (`banana-1.csv`), as the command line names them.
    let name = model.name.as_str();
    let model: &dyn Model = model.model.as_ref();
    py.detach(|| {
        std::thread::scope(|scope| {
            let chains = scope.spawn(|| {
                let mut sampler = Sampler::new(model)
                    .name(name)
                    .settings(config)
                    .on_progress(|chain, n| {
                        record_progress(chain, n);
                        done[chain - 1].store(n, Ordering::Relaxed);
                    })
                    .interrupt(stopped);
                if let Some(line) = &plan.auto {
                    sampler = sampler.header_entry(auto::HEADER_KEY, line);
                }
                match &plan.output_dir {
                    Some(dir) => sampler.write_to(dir).overwrite(overwrite).run(),
                    None => sampler.run(),
                }
            });
            let mut line = ProgressLine::new(plan, total, approximate);
            while !chains.is_finished() {
                std::thread::sleep(POLL);
                Python::attach(|py| {
                    if py.check_signals().is_err() {
                        stopped.store(true, Ordering::Relaxed);
                    }
                    line.show(py, done.iter().map(|d| d.load(Ordering::Relaxed)).sum());
                });
            }
            Python::attach(|py| {
                line.finish(py, done.iter().map(|d| d.load(Ordering::Relaxed)).sum())
            });
            chains
                .join()
                .unwrap_or_else(|_| Err(shmc::Error::invalid("the sampler's thread panicked")))
        })
    })
}

/// A progress line on Python's `sys.stderr` (so a notebook shows it), redrawn at most once a
/// second.
struct ProgressLine {
    shown: bool,
    last: Option<Instant>,
    total: usize,
    label: String,
}

impl ProgressLine {
    /// `approximate`: the method's draws are (sgld; vhmc accepting with its surrogate), and
    /// the line says so.
    fn new(plan: &Plan, total: usize, approximate: bool) -> Self {
        let method = if approximate {
            format!("{} (APPROXIMATE)", plan.method)
        } else {
            plan.method.clone()
        };
        Self {
            shown: plan.progress,
            last: None,
            total,
            label: format!("shmc {method}: {} chains", plan.chains),
        }
    }

    fn show(&mut self, py: Python<'_>, done: usize) {
        if !self.shown
            || self
                .last
                .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.last = Some(Instant::now());
        let percent = 100 * done / self.total.max(1);
        let text = format!(
            "\r{}, {done}/{} iterations ({percent}%)",
            self.label, self.total
        );
        write_stderr(py, &text);
    }

    /// The last count, then the end of the line.
    fn finish(&mut self, py: Python<'_>, done: usize) {
        if self.shown && self.last.is_some() {
            self.last = None;
            self.show(py, done);
            write_stderr(py, "\n");
        }
    }
}

/// Writes `text` to Python's `sys.stderr`; a stream that cannot take it is left alone (the
/// progress line is a courtesy, not the result).
fn write_stderr(py: Python<'_>, text: &str) {
    let _ = py.import("sys").and_then(|sys| {
        let stderr = sys.getattr("stderr")?;
        stderr.call_method1("write", (text,))?;
        stderr.call_method0("flush")
    });
}
