//! `shmc train`: explore a posterior with exact HMC, train the surrogate on the visited states,
//! and save it, so that later runs (`shmc sample --surrogate FILE`) skip the training.

use std::path::PathBuf;

use clap::Args;

use super::ModelArgs;
use super::surrogate_args::SurrogateArgs;
use super::trajectory_args::TrajectoryArgs;
use crate::sampler::{DrawSink, Init, Method, NullSink, SampleConfig, sample};
use crate::surrogates::SurrogateMeta;
use crate::{Error, Result, models};

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
    if args.surrogate.surrogate.is_some() {
        return Err(Error::invalid(
            "--surrogate loads a trained surrogate; `shmc train` makes one",
        ));
    }
    let model = models::build(&args.model.spec())?;
    for note in model.notes() {
        println!("model: {note}");
    }
    let settings = args.surrogate.settings(args.warmup, args.seed)?;
    let config = SampleConfig {
        chains: 1,
        warmup: args.warmup,
        draws: 1,
        seed: args.seed,
        step_size: args.trajectory.step_size(),
        steps: args.trajectory.steps(),
        adapt_mass: true,
        init: Init::Random { radius: 2.0 },
        save_warmup: false,
        max_energy_error: 1000.0,
        method: Method::RnsHmc(settings.clone()),
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
        method: settings.fit,
        scale: report.scale,
        holdout_gradient_error: report.holdout_gradient_error,
        training_states: report.training_states,
        train_seconds: report.training_seconds,
        ..SurrogateMeta::default()
    };
    trained.save(&args.save, &meta)?;
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
