//! The methods by name, as the command line's `--method` values, with the command line's
//! defaults: [`method`] is the one place a name and its options become the library's
//! [`Method`] (it moves to the library's method registry once there is one).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use shmc::core::{Activation, Nodes, Steps};
use shmc::sampler::{
    Method, MldaSettings, NutsSettings, RmhmcSettings, SgldSettings, StepSize, SurrogateSettings,
    SurrogateSteps, TrainFrom, Transitions, VhmcSettings,
};
use shmc::surrogates::gp::{Approximation, GpFitter, GpOptions, MeanFunction};
use shmc::surrogates::grids::{Domain, DomainChoice, GridFitter, GridKind, Interpolation};
use shmc::surrogates::network::{Inputs, NetworkFitter, Scale, TrainOptions};
use shmc::surrogates::{FitMethod, SurrogateKind};

use crate::options::Options;

/// The name that lets the run choose its plan ([`shmc::sampler::auto`]).
pub const AUTO: &str = "auto";

/// The method names `shmc.sample` takes, in the order `help(shmc.sample)` lists them.
pub const NAMES: [&str; 12] = [
    AUTO,
    "nuts",
    "hmc",
    "rns-hmc",
    "arns-hmc",
    "vhmc",
    "rmhmc",
    "rns-rmhmc",
    "grid-hmc",
    "sg-hmc",
    "mlda",
    "sgld",
];

/// The most leapfrog steps of a trajectory when `steps` is not given (the command line's).
const DEFAULT_STEPS: u32 = 20;

/// FITC's inducing points when `inducing` is not given (the command line's `--inducing`; the
/// test giving the command line's draws with FITC leaves it unset, so the two cannot drift).
const DEFAULT_INDUCING: usize = 500;

/// The trajectory options every method but NUTS reads: `step_size`, `steps`, `fixed_steps`,
/// `target_accept`.
pub struct Trajectory {
    /// Fixed step size, or adapted.
    pub step_size: StepSize,
    /// The trajectory length.
    pub steps: Steps,
}

/// Reads the trajectory options; NUTS refuses a length, as the command line does.
pub fn trajectory(name: &str, opts: &mut Options) -> PyResult<Trajectory> {
    let target = opts.take::<f64>("target_accept")?.unwrap_or(0.8);
    let step_size = match opts.take::<f64>("step_size")? {
        Some(eps) => StepSize::Fixed(eps),
        None => StepSize::Adapt { target },
    };
    let fixed = opts.flag("fixed_steps")?;
    let max = opts.take::<u32>("steps")?;
    let refused = match name {
        "nuts" => Some("ends each trajectory where it turns back (at most 2**max_depth - 1 steps)"),
        "sgld" => Some("takes one Langevin step per iteration"),
        _ => None,
    };
    if let Some(why) = refused.filter(|_| max.is_some() || fixed) {
        return Err(PyValueError::new_err(format!(
            "steps and fixed_steps do not apply to {name}, which {why}"
        )));
    }
    let max = max.unwrap_or(DEFAULT_STEPS);
    let steps = if fixed {
        Steps::Fixed(max)
    } else {
        Steps::Jittered(max)
    };
    Ok(Trajectory { step_size, steps })
}

/// The trajectory options `auto` reads: `target_accept` alone (either of its plans adapts the
/// step size to it); a step size or length would set a plan, so it is left unread (refused).
pub fn auto_trajectory(opts: &mut Options) -> PyResult<Trajectory> {
    let target = opts.take::<f64>("target_accept")?.unwrap_or(0.8);
    Ok(Trajectory {
        step_size: StepSize::Adapt { target },
        steps: Steps::Jittered(DEFAULT_STEPS),
    })
}

/// The method `name` with its options from `opts` (those it reads are removed), for a run
/// seeded with `seed` (the network's seed, as on the command line).
pub fn method(
    name: &str,
    opts: &mut Options,
    trajectory: &Trajectory,
    seed: u64,
    memory_limit: u64,
) -> PyResult<Method> {
    let surrogate = |opts: &mut Options| surrogate(opts, seed, memory_limit);
    // The network's methods may take a Gaussian process instead (the library refuses it where
    // the method needs the network's weights: arns-hmc, rns-rmhmc); the grids may not.
    let or_gp = |opts: &mut Options| {
        let settings = surrogate(opts)?;
        gp(settings, opts, seed, memory_limit)
    };
    let defaults = Method::named(name).map_err(|_| {
        PyValueError::new_err(format!(
            "unknown method {name:?}; methods: {}",
            NAMES.join(", ")
        ))
    })?;
    // A match on the registry's method, not on its name: a method added to the library is a
    // compile error here until the package handles it.
    Ok(match defaults {
        Method::Nuts(_) => Method::Nuts(NutsSettings {
            max_depth: opts.take("max_depth")?.unwrap_or(10),
        }),
        Method::Hmc => Method::Hmc,
        Method::RnsHmc(defaults) if defaults.kind.grid().is_some() => {
            let mut settings = surrogate(opts)?;
            settings.kind = SurrogateKind::Grid(grid(name, opts, memory_limit)?);
            Method::RnsHmc(settings)
        }
        Method::RnsHmc(_) => Method::RnsHmc(or_gp(opts)?),
        Method::ArnsHmc(_) => Method::ArnsHmc(or_gp(opts)?),
        Method::Vhmc(_) => Method::Vhmc(VhmcSettings {
            train: network(opts, seed, memory_limit, false)?,
            tau: opts.take("tau")?.unwrap_or(200.0),
            exact_acceptance: !opts.flag("approximate_acceptance")?,
        }),
        Method::Rmhmc(_) => Method::Rmhmc(rmhmc(opts, trajectory, true)?),
        Method::RnsRmhmc(..) => Method::RnsRmhmc(or_gp(opts)?, rmhmc(opts, trajectory, false)?),
        Method::Mlda(defaults) => Method::Mlda(mlda(defaults, opts)?),
        Method::Sgld(defaults) => Method::Sgld(SgldSettings {
            batch: opts.take("sgld_batch")?.unwrap_or(defaults.batch),
            a: opts.take("sgld_a")?.unwrap_or(defaults.a),
            b: opts.take("sgld_b")?.unwrap_or(defaults.b),
            gamma: opts.take("sgld_gamma")?.unwrap_or(defaults.gamma),
        }),
    })
}

/// MLDA's `levels` (the coarser levels, coarsest first), `subchains` (each level's steps
/// per proposal to the level above) and `fine_warmup` (the model itself judges warmup too);
/// levels given alone take their default subchains. The library checks them against the
/// model (a model without levels is refused there).
fn mlda(defaults: MldaSettings, opts: &mut Options) -> PyResult<MldaSettings> {
    let mut settings = match opts.take::<Vec<usize>>("levels")? {
        Some(levels) => MldaSettings::new(levels),
        None => defaults,
    };
    if let Some(subchains) = opts.take::<Vec<u32>>("subchains")? {
        settings.subchains = subchains;
    }
    settings.fine_warmup = opts.take("fine_warmup")?.unwrap_or(false);
    Ok(settings)
}

/// The surrogate settings shared by rns-hmc, arns-hmc, rns-rmhmc and the grids.
fn surrogate(opts: &mut Options, seed: u64, memory_limit: u64) -> PyResult<SurrogateSettings> {
    let laplace = opts.choice("train_from", &["warmup", "laplace"])? == "laplace";
    let states = opts.take("train_states")?.unwrap_or(200);
    let fit = match opts.take::<String>("fit")?.as_deref() {
        Some("score") => FitMethod::Score,
        Some("potential") => FitMethod::Potential,
        None if laplace => FitMethod::Score,
        None => FitMethod::Potential,
        Some(other) => {
            return Err(PyValueError::new_err(format!(
                "option fit={other:?}: must be potential or score"
            )));
        }
    };
    let defaults = SurrogateSettings::default();
    Ok(SurrogateSettings {
        kind: SurrogateKind::Network(NetworkFitter {
            options: network(opts, seed, memory_limit, laplace)?,
            method: fit,
        }),
        train_from: if laplace {
            TrainFrom::Laplace { states }
        } else {
            TrainFrom::Warmup
        },
        cubic: opts.flag("cubic")?,
        train_after: opts.take("train_after")?,
        exact_warmup: opts.take("exact_warmup")?,
        start_after: opts.take("start_after")?.unwrap_or(defaults.start_after),
        start_error: opts.take("start_error")?.unwrap_or(defaults.start_error),
        adapt_rate: opts.take("adapt_rate")?.unwrap_or(defaults.adapt_rate),
        trajectory: surrogate_steps(opts.text("surrogate_steps_factor")?)?,
        transitions: opts
            .text("surrogate_transitions")?
            .as_deref()
            .map(Transitions::parse)
            .transpose()
            .map_err(crate::errors::to_python)?,
        surrogate_file: opts.take("surrogate")?,
        approximate_acceptance: opts.flag("approximate_acceptance")?,
    })
}

/// `settings` with a Gaussian process as the surrogate when `gp` is given (`"full"` or
/// `"fitc"`, with `inducing`, `gp_mean` and `gp_gradients`), as the command line's `--gp`
/// does; without `gp` its companions are refused by name rather than silently ignored.
fn gp(
    mut settings: SurrogateSettings,
    opts: &mut Options,
    seed: u64,
    memory_limit: u64,
) -> PyResult<SurrogateSettings> {
    let approximation = opts.take::<String>("gp")?;
    let inducing = opts.take::<usize>("inducing")?;
    let mean = gp_mean(opts.take::<String>("gp_mean")?.as_deref())?;
    let gradients = opts.flag("gp_gradients")?;
    let approximation = match approximation.as_deref() {
        Some(_) if settings.surrogate_file.is_some() => {
            Err("gp does not apply with surrogate=, a saved surrogate of its own kind".into())
        }
        Some("full") if inducing.is_some() => Err("inducing is for gp=\"fitc\"".into()),
        Some("full") => Ok(Approximation::Full),
        Some("fitc") => Ok(Approximation::Fitc {
            inducing: inducing.unwrap_or(DEFAULT_INDUCING),
        }),
        Some(other) => Err(format!("option gp={other:?}: must be \"full\" or \"fitc\"")),
        None if inducing.is_some() => Err("inducing is for gp=\"fitc\"".into()),
        None if mean.is_some() => Err("gp_mean is for gp=\"full\" or \"fitc\"".into()),
        None if gradients => Err("gp_gradients is for gp=\"full\"".into()),
        None => return Ok(settings),
    }
    .map_err(PyValueError::new_err::<String>)?;
    settings.kind = SurrogateKind::Gp(GpFitter {
        options: GpOptions {
            approximation,
            mean: mean.unwrap_or_default(),
            gradients,
            seed,
            memory_limit,
            ..GpOptions::default()
        },
    });
    Ok(settings)
}

/// `gp_mean`: `"constant"` or `"quadratic"`, if given.
fn gp_mean(given: Option<&str>) -> PyResult<Option<MeanFunction>> {
    match given {
        None => Ok(None),
        Some("constant") => Ok(Some(MeanFunction::Constant)),
        Some("quadratic") => Ok(Some(MeanFunction::Quadratic)),
        Some(other) => Err(PyValueError::new_err(format!(
            "option gp_mean={other:?}: must be \"constant\" or \"quadratic\""
        ))),
    }
}

/// `surrogate_steps_factor`: a whole number, `auto` or `nuts` (default 1).
fn surrogate_steps(text: Option<String>) -> PyResult<SurrogateSteps> {
    match text.as_deref() {
        None => Ok(SurrogateSteps::Factor(1)),
        Some("auto") => Ok(SurrogateSteps::Auto),
        Some("nuts") => Ok(SurrogateSteps::Nuts),
        Some(k) => match k.parse::<u32>() {
            Ok(k) if k > 0 => Ok(SurrogateSteps::Factor(k)),
            _ => Err(PyValueError::new_err(format!(
                "option surrogate_steps_factor={k:?}: must be 'auto', 'nuts' or a whole number \
                 of at least 1"
            ))),
        },
    }
}

/// How the network is built: 2000 hidden units, or 300 when it fits only what the Laplace
/// approximation misses (the command line's defaults).
fn network(
    opts: &mut Options,
    seed: u64,
    memory_limit: u64,
    laplace: bool,
) -> PyResult<TrainOptions> {
    let nodes = match opts.choice("activation", &["softplus", "sigmoid", "tanh", "rbf"])? {
        "softplus" => Nodes::Additive(Activation::Softplus),
        "sigmoid" => Nodes::Additive(Activation::Sigmoid),
        "tanh" => Nodes::Additive(Activation::Tanh),
        _ => Nodes::Rbf {
            width: opts.take("rbf_width")?.unwrap_or(1.0),
        },
    };
    let scale = match opts.text("surrogate_scale")?.as_deref() {
        None | Some("auto") => Scale::Auto,
        Some(c) => match c.parse::<f64>() {
            Ok(c) if c.is_finite() && c > 0.0 => Scale::Fixed(c),
            _ => {
                return Err(PyValueError::new_err(format!(
                    "option surrogate_scale={c:?}: must be 'auto' or a positive number"
                )));
            }
        },
    };
    let standardized = opts.choice("inputs", &["whitened", "standardized"])? == "standardized";
    Ok(TrainOptions {
        memory_limit,
        hidden: opts
            .take("hidden")?
            .unwrap_or(if laplace { 300 } else { 2000 }),
        nodes,
        ridge: opts.take("ridge")?.unwrap_or(1e-6),
        scale,
        inputs: if standardized {
            Inputs::Standardized
        } else {
            Inputs::Whitened
        },
        seed,
        ..TrainOptions::default()
    })
}

/// RMHMC's settings; `exact`: rmhmc, whose step size and steps default to `step_size` and
/// `steps` (rns-rmhmc's are its exact warmup's).
fn rmhmc(opts: &mut Options, trajectory: &Trajectory, exact: bool) -> PyResult<RmhmcSettings> {
    let defaults = RmhmcSettings::default();
    let fixed = opts
        .take::<f64>("rmhmc_step_size")?
        .or(match trajectory.step_size {
            StepSize::Fixed(eps) if exact => Some(eps),
            _ => None,
        });
    let target = match trajectory.step_size {
        StepSize::Adapt { target } => target,
        StepSize::Fixed(_) => 0.8,
    };
    let steps = opts
        .take::<u32>("rmhmc_steps")?
        .unwrap_or(trajectory.steps.max());
    let reverse = opts
        .take::<f64>("reversibility_tolerance")?
        .unwrap_or(defaults.reverse_tolerance.unwrap_or(0.0));
    Ok(RmhmcSettings {
        step_size: fixed.map_or(StepSize::Adapt { target }, StepSize::Fixed),
        steps: match trajectory.steps {
            Steps::Fixed(_) => Steps::Fixed(steps),
            _ => Steps::Jittered(steps),
        },
        tolerance: opts
            .take("fixed_point_tolerance")?
            .unwrap_or(defaults.tolerance),
        max_iterations: opts
            .take("fixed_point_max_iterations")?
            .unwrap_or(defaults.max_iterations),
        reverse_tolerance: (reverse != 0.0).then_some(reverse),
        softabs_alpha: opts.take("softabs_alpha")?.unwrap_or(1.0),
        diagonal: opts.flag("diagonal_metric")?,
    })
}

/// The grid of grid-hmc (a force grid) or sg-hmc (a sparse grid).
fn grid(name: &str, opts: &mut Options, memory_limit: u64) -> PyResult<GridFitter> {
    let kind = if name == "grid-hmc" {
        let multilinear =
            opts.choice("force_interpolation", &["constant", "multilinear"])? == "multilinear";
        GridKind::Force {
            cell: opts.take("cell")?.unwrap_or(0.1),
            interpolation: if multilinear {
                Interpolation::Multilinear
            } else {
                Interpolation::Constant
            },
        }
    } else {
        GridKind::SparseLevel(opts.take("level")?.unwrap_or(5))
    };
    let domain = match opts.text("domain")?.as_deref() {
        None | Some("laplace") => DomainChoice::Laplace { probability: 0.999 },
        Some("states") => DomainChoice::States { margin: 0.1 },
        Some(text) => DomainChoice::Explicit(
            Domain::parse(text)
                .map_err(|e| PyValueError::new_err(format!("option domain={text:?}: {e}")))?,
        ),
    };
    Ok(GridFitter {
        kind,
        domain,
        memory_limit,
    })
}
