//! `shmc train`: explore a posterior with exact HMC, train the surrogate on the visited states,
//! and save it, so that later runs (`shmc sample --surrogate FILE`) skip the training. With
//! `--surrogate force-grid|sparse-grid` the surrogate is a grid, precomputed over its --domain
//! (exploring first only for `--domain states`).

use std::path::PathBuf;

use clap::Args;

use super::ModelArgs;
use super::surrogate_args::SurrogateArgs;
use super::trajectory_args::TrajectoryArgs;
use shmc::sampler::{DrawSink, Init, Method, NullSink, SampleConfig, sample};
use shmc::surrogates::kinds::SurrogateKind;
use shmc::surrogates::{FitMethod, SurrogateMeta};
use shmc::{Error, Result, models};

/// Arguments of `shmc train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Exploration iterations of exact HMC (states after --train-after are the training set).
    #[arg(long, default_value_t = 5000)]
    warmup: usize,
    /// Seed of the chain and of the network's random weights.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    trajectory: TrajectoryArgs,
    #[command(flatten)]
    surrogate: SurrogateArgs,
    /// Where to write the trained surrogate (JSON).
    #[arg(long, value_name = "FILE")]
    save: PathBuf,
}

/// Runs `shmc train`.
pub fn run(args: &TrainArgs) -> Result<i32> {
    let mut settings = args.surrogate.settings(args.seed)?;
    settings.surrogate_file = None;
    let kind = args.surrogate.surrogate.as_deref().and_then(|p| p.to_str());
    match kind {
        None | Some("network") => {}
        Some(grid @ ("force-grid" | "sparse-grid")) => {
            settings.kind = SurrogateKind::Grid(args.surrogate.grid(grid)?);
        }
        Some(other) => {
            return Err(Error::invalid(format!(
                "shmc train --surrogate names the kind to train (network, force-grid or \
                 sparse-grid), got {other:?}; `shmc sample --surrogate FILE` loads a saved one"
            )));
        }
    }
    let model = models::build(&args.model.spec(args.surrogate.memory_limit()))?;
    super::print_notes(model.notes());
    // A grid over a box known in advance needs no exploration.
    let warmup = if settings.fitter().before_sampling() {
        0
    } else {
        args.warmup
    };
    let config = SampleConfig {
        chains: 1,
        warmup,
        draws: 1,
        seed: args.seed,
        step_size: args.trajectory.step_size(),
        steps: args.trajectory.steps(),
        adapt_mass: true,
        init: Init::Random { radius: 2.0 },
        save_warmup: false,
        max_energy_error: 1000.0,
        lockstep: true,
        method: Method::RnsHmc(settings.clone()),
        memory_limit: args.surrogate.memory_limit(),
        ..SampleConfig::default()
    };
    let sinks: Vec<Box<dyn DrawSink>> = vec![Box::new(NullSink)];
    let mut run = sample(model.as_ref(), &config, sinks, &|_, _| {}, None)?;
    let chain = run.chains.remove(0);
    let (Some(trained), Some(report)) = (chain.trained, chain.surrogate) else {
        return Err(Error::invalid(
            "the run ended before the surrogate was trained",
        ));
    };
    let meta = SurrogateMeta {
        model: args.model.model.clone(),
        data: Some(args.model.data().map(str::to_string)),
        method: settings
            .kind
            .network()
            .map_or(FitMethod::default(), |n| n.method),
        scale: report.scale,
        holdout_gradient_error: report.holdout_gradient_error,
        training_states: report.training_states,
        train_seconds: report.training_seconds,
        ..SurrogateMeta::default()
    };
    trained.save(&args.save, &meta)?;
    if let Some(p) = &report.precompute {
        println!(
            "precomputed the grid with {} exact evaluations in {:.3} s",
            p.evaluations, p.seconds
        );
        println!("surrogate saved to {}", args.save.display());
        return Ok(0);
    }
    println!(
        "trained on {} states in {:.2} s ({} exact gradient evaluations of exploration); scale {}, held-out gradient error {:.4}",
        report.training_states,
        report.training_seconds,
        chain.warmup_evaluations.exact_gradients,
        report.scale,
        report.holdout_gradient_error
    );
    println!("surrogate saved to {}", args.save.display());
    Ok(0)
}
