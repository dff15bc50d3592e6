//! One chain from start to finish: initialization, warmup (step size and metric adaptation),
//! kept draws. Each row is handed to the chain's sink as soon as it is made, so an interrupted
//! run keeps every finished draw.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use nalgebra::DVector;
use rand::Rng;
use shmc_core::{
    DiagonalMetric, DualAveraging, Dyn, Dynamics, Exact, Hmc, HmcConfig, Potential, State,
    Surrogate, Transition, random::uniform,
};

use super::config::{Init, SampleConfig, StepSize};
use super::fitted::{FittedPhase, Precomputed};
use super::method::Method;
use super::proposer::{Proposer, Recording};
use super::variational::VhmcPhase;
use super::warmup::{VarianceEstimator, WindowSchedule, initial_step_size};
use super::{ChainResult, DrawSink, SAMPLER_COLUMNS};
use crate::random::chain_rng;
use crate::{Error, Model, Result};

/// Draws the starting state, retrying random starts (up to 100) until `U` and `∇U` are finite.
fn initial_state<M: Model + ?Sized, R: Rng + ?Sized>(
    model: &M,
    init: &Init,
    chain: usize,
    rng: &mut R,
) -> Result<State<Dyn>> {
    let dim = model.dim();
    let dynamics = Exact(model);
    let finite =
        |s: &State<Dyn>| s.potential.is_finite() && s.gradient.iter().all(|g| g.is_finite());
    match init {
        Init::Values(values) => {
            let state = State::new(DVector::from_column_slice(values), &dynamics)?;
            if finite(&state) {
                Ok(state)
            } else {
                Err(Error::invalid(format!(
                    "chain {chain}: the potential or its gradient is not finite at the given initial values"
                )))
            }
        }
        Init::Random { radius } => {
            for _ in 0..100 {
                let q = DVector::from_fn(dim, |_, _| radius * (2.0 * uniform(rng) - 1.0));
                let state = State::new(q, &dynamics)?;
                if finite(&state) {
                    return Ok(state);
                }
            }
            Err(Error::invalid(format!(
                "chain {chain}: no finite potential at 100 random initial points in (-{radius}, {radius})"
            )))
        }
    }
}

/// The chain's surrogate machinery, if its method has one, on the exact potential of lifetime
/// `'m`.
type Phase<'m> = Option<Box<dyn Proposer + 'm>>;

/// The surrogate machinery of `method` for a chain on `model` that starts at `start`, or `None`
/// for exact HMC. A saved surrogate is loaded here; VHMC finds its Laplace approximation here;
/// `precomputed` is the surrogate fitted before sampling, if there is one.
fn proposer<'m>(
    method: &Method,
    model: &'m (dyn Potential + Sync),
    start: &[f64],
    precomputed: Option<&Precomputed>,
) -> Result<Phase<'m>> {
    Ok(match method {
        Method::Hmc => None,
        Method::RnsHmc(settings) => Some(Box::new(FittedPhase::new(
            false,
            settings,
            model,
            precomputed,
        )?)),
        Method::ArnsHmc(settings) => Some(Box::new(FittedPhase::new(
            true,
            settings,
            model,
            precomputed,
        )?)),
        Method::Vhmc(settings) => Some(Box::new(VhmcPhase::new(settings, model, start)?)),
    })
}

/// Calls `f` with the chain's current dynamics: exact HMC until the surrogate proposes; then
/// surrogate proposals judged by the exact `U`, or by the surrogate itself under VHMC's
/// approximate rule.
fn with_dynamics<M: Model + ?Sized, T>(
    model: &M,
    surrogate: &Phase<'_>,
    f: impl FnOnce(&dyn Dynamics) -> T,
) -> T {
    let Some(phase) = surrogate.as_deref() else {
        return f(&Exact(model));
    };
    match (phase.proposal(), phase.end_gradient()) {
        (Some(proposal), _) if phase.approximate() => f(&Exact(proposal)),
        (Some(proposal), Some(record)) => f(&Recording {
            target: &model,
            proposal,
            record,
        }),
        (Some(proposal), None) => f(&Surrogate {
            target: model,
            proposal,
        }),
        (None, _) => f(&Exact(model)),
    }
}

/// Re-evaluates what the state caches of the proposal after it changed: its gradient, and
/// under the approximate rule also the level `V` the MH step compares against.
fn refresh<M: Model + ?Sized>(model: &M, surrogate: &Phase<'_>, state: &mut State<Dyn>) {
    let approximate = surrogate.as_deref().is_some_and(|p| p.approximate());
    with_dynamics(model, surrogate, |d| {
        if approximate {
            state.refresh(d);
        } else {
            state.refresh_gradient(d);
        }
    });
}

/// Runs chain `chain` (1-based) to completion or until `interrupt` is set, proposing with
/// `precomputed` if a surrogate was fitted before sampling.
pub fn run_chain<M: Model + ?Sized>(
    model: &M,
    config: &SampleConfig,
    precomputed: Option<&Precomputed>,
    chain: usize,
    sink: &mut dyn DrawSink,
    progress: &(dyn Fn(usize, usize) + Sync),
    interrupt: &AtomicBool,
) -> Result<ChainResult> {
    let dim = model.dim();
    let mut rng = chain_rng(config.seed, chain);
    let mut metric = DiagonalMetric::new(DVector::from_element(dim, 1.0))?;
    let mut state = initial_state(model, &config.init, chain, &mut rng)?;
    let mut surrogate: Phase<'_> = proposer(
        &config.method,
        &model,
        state.position.as_slice(),
        precomputed,
    )?;
    if let (Init::Random { .. }, Some(phase)) = (&config.init, surrogate.as_deref())
        && let Some(q) = phase.initial_position(&mut rng)
    {
        let start = State::new(DVector::from_vec(q), &Exact(model))?;
        if start.potential.is_finite() && start.gradient.iter().all(|g| g.is_finite()) {
            state = start;
        }
    }
    let proposing = |s: &Phase<'_>| s.as_deref().is_some_and(|p| p.proposal().is_some());
    if proposing(&surrogate) {
        refresh(model, &surrogate, &mut state);
    }
    let approximate = surrogate.as_deref().is_some_and(|p| p.approximate());

    let adapt_target = match config.step_size {
        StepSize::Adapt { target } => Some(target),
        StepSize::Fixed(_) => None,
    };
    let mut step_size = match config.step_size {
        StepSize::Fixed(eps) => eps,
        StepSize::Adapt { .. } => with_dynamics(model, &surrogate, |d| {
            initial_step_size(&state, d, &metric, 1.0, &mut rng)
        }),
    };
    let steps = match surrogate.as_deref_mut() {
        Some(phase) if phase.proposal().is_some() => {
            phase.trajectory(config.steps, metric.inv_mass(), step_size)
        }
        _ => config.steps,
    };
    let mut hmc = Hmc::new(
        Dyn(dim),
        HmcConfig {
            step_size,
            steps,
            max_energy_error: config.max_energy_error,
        },
    )?;
    let mut dual = adapt_target
        .map(|t| DualAveraging::new(step_size, t))
        .transpose()?;
    let schedule = if adapt_target.is_some() && config.adapt_mass {
        WindowSchedule::new(config.warmup)
    } else {
        WindowSchedule::new(0)
    };
    let mut variance = VarianceEstimator::new(dim);

    let names = model.parameter_names();
    let mut result = ChainResult::new(chain, names.len(), config.draws);
    let mut row = Vec::with_capacity(SAMPLER_COLUMNS.len() + names.len());
    let total = config.warmup + config.draws;
    let mut phase_start = Instant::now();
    for i in 0..total {
        if interrupt.load(Ordering::Relaxed) {
            result.interrupted = true;
            break;
        }
        let warmup = i < config.warmup;
        let surrogate_proposal = proposing(&surrogate);
        let t: Transition = with_dynamics(model, &surrogate, |d| {
            hmc.transition(&mut state, d, &metric, &mut rng)
        });
        let counts = if warmup {
            &mut result.warmup_evaluations
        } else {
            &mut result.sampling_evaluations
        };
        counts.record(&t, surrogate_proposal, !approximate);
        if warmup {
            result.warmup_divergences += usize::from(t.divergent);
            if let Some(dual) = dual.as_mut() {
                step_size = dual.update(t.accept_prob);
                if schedule.in_slow_window(i) {
                    variance.add(state.position.as_slice());
                }
                if schedule.window_ends_at(i) {
                    metric.set_inv_mass(&variance.regularized_variance())?;
                    variance.reset();
                    step_size = with_dynamics(model, &surrogate, |d| {
                        initial_step_size(&state, d, &metric, step_size, &mut rng)
                    });
                    dual.restart(step_size);
                }
                if i + 1 == config.warmup {
                    step_size = dual.final_step_size();
                }
                hmc.config.step_size = step_size;
            }
            let changed = match surrogate.as_deref_mut() {
                Some(phase) => {
                    phase.observe(&model, i, config.warmup, &state, t.accepted, &mut rng)?
                }
                None => false,
            };
            if changed {
                refresh(model, &surrogate, &mut state);
                // Adaptation ends when a trained surrogate starts proposing: dual averaging
                // towards 0.8 would shrink the step size until the surrogate's gradient error
                // no longer shows, which makes the chain crawl. The surrogate keeps the exact
                // phase's step size, as the papers do. (VHMC proposes from the start, and
                // adapts with its proposal.)
                let keep_adapting = surrogate
                    .as_deref()
                    .is_some_and(|p| p.adapts_while_proposing());
                if !keep_adapting && let Some(d) = dual.take() {
                    step_size = d.final_step_size();
                    hmc.config.step_size = step_size;
                }
                // The trajectory is set once, with the step size and metric the surrogate
                // starts proposing with.
                if let (false, Some(phase)) = (surrogate_proposal, surrogate.as_deref_mut()) {
                    hmc.config.steps = phase.trajectory(config.steps, metric.inv_mass(), step_size);
                }
            }
        }
        if i + 1 == config.warmup {
            sink.adaptation(step_size, metric.inv_mass())?;
        }
        if !warmup || config.save_warmup {
            row.clear();
            row.extend_from_slice(&[
                -state.potential,
                t.accept_prob,
                hmc.config.step_size,
                0.0,
                f64::from(t.steps),
                f64::from(u8::from(t.divergent)),
                t.energy,
            ]);
            model.write_parameters(state.position.as_slice(), &mut row);
            sink.draw(&row)?;
        }
        if !warmup {
            result.record(&row);
        }
        if i + 1 == config.warmup {
            result.warmup_seconds = phase_start.elapsed().as_secs_f64();
            phase_start = Instant::now();
        }
        progress(chain, i + 1);
    }
    if config.warmup == 0 {
        sink.adaptation(step_size, metric.inv_mass())?;
    }
    let elapsed = phase_start.elapsed().as_secs_f64();
    if result.kept() > 0 || config.warmup == 0 {
        result.sampling_seconds = elapsed;
    } else {
        result.warmup_seconds = elapsed;
    }
    result.step_size = step_size;
    result.inv_mass = metric.inv_mass().to_vec();
    if let Some(phase) = surrogate {
        result.surrogate = Some(phase.report().clone());
        result.trained = phase.into_surrogate().map(Arc::from);
    }
    sink.finish(&result)?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Flat;
    impl Potential for Flat {
        fn dim(&self) -> usize {
            1
        }
        fn value(&self, _: &[f64]) -> f64 {
            f64::NAN
        }
        fn value_and_gradient(&self, _: &[f64], g: &mut [f64]) -> f64 {
            g[0] = 0.0;
            f64::NAN
        }
    }
    impl Model for Flat {
        fn parameter_names(&self) -> Vec<String> {
            vec!["x".into()]
        }
    }

    #[test]
    fn nowhere_finite_potential_is_a_clear_error() {
        let err = initial_state(
            &Flat,
            &Init::Random { radius: 2.0 },
            3,
            &mut chain_rng(1, 3),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("chain 3") && err.contains("no finite potential"),
            "{err}"
        );
    }
}
