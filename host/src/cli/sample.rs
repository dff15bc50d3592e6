//! `shmc sample`: build the model, run the chains with one CSV file each, print the summary.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;

use super::ModelArgs;
use super::progress::Progress;
use super::surrogate_args::SurrogateArgs;
use super::trajectory_args::TrajectoryArgs;
use crate::output::{
    CsvHeader, CsvSink, RunTotals, approximate_label, format_model_work, format_summary,
};
use crate::sampler::{DrawSink, Init, Method, SampleConfig, StepSize, sample};
use crate::{Error, Model, Result, models};

/// Set by Ctrl-C: chains stop after their current iteration and files stay valid.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Arguments of `shmc sample`.
#[derive(Debug, Args)]
pub struct SampleArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Sampling method: exact HMC, or a surrogate-accelerated one with the exact MH step (the
    /// draws target the exact posterior): rns-hmc trains a random network on warmup states,
    /// arns-hmc updates it online, vhmc trains it online by score matching inside a Laplace
    /// approximation (APPROXIMATE with --approximate-acceptance); grid-hmc precomputes the
    /// force on a grid of --cell cells, sg-hmc a sparse-grid interpolant of --level (or to
    /// --tolerance), over --domain (the paper's "complete" variant, which also accepts with the
    /// grid's U: --approximate-acceptance, APPROXIMATE).
    #[arg(long, default_value = "hmc",
          value_parser = ["hmc", "rns-hmc", "arns-hmc", "vhmc", "grid-hmc", "sg-hmc"])]
    method: String,
    /// Number of chains, run in parallel on all cores.
    #[arg(long, default_value_t = 4)]
    chains: usize,
    /// Kept draws per chain.
    #[arg(long, default_value_t = 1000)]
    draws: usize,
    /// Warmup iterations per chain (not written unless --save-warmup).
    #[arg(long, default_value_t = 1000)]
    warmup: usize,
    /// Seed; chain k uses stream k of it, so runs are reproducible.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    trajectory: TrajectoryArgs,
    /// Keep the identity mass matrix during warmup (adapt only the step size).
    #[arg(long)]
    no_adapt_mass: bool,
    /// JSON file with initial values: an array of numbers on the unconstrained scale.
    #[arg(long, value_name = "FILE")]
    init: Option<PathBuf>,
    /// Random initial values are uniform on (-R, R).
    #[arg(long, default_value_t = 2.0, value_name = "R")]
    init_radius: f64,
    /// Write the warmup draws before the kept ones.
    #[arg(long)]
    save_warmup: bool,
    /// Folder for the per-chain CSV files (created if needed).
    #[arg(long, default_value = "output", value_name = "DIR")]
    output: PathBuf,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    surrogate: SurrogateArgs,
}

fn read_init(path: &Path) -> Result<Vec<f64>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    super::options::init_values(&text, path)
}

impl SampleArgs {
    fn config(&self) -> Result<SampleConfig> {
        let init = match &self.init {
            Some(path) => Init::Values(read_init(path)?),
            None => Init::Random {
                radius: self.init_radius,
            },
        };
        Ok(SampleConfig {
            chains: self.chains,
            warmup: self.warmup,
            draws: self.draws,
            seed: self.seed,
            step_size: self.trajectory.step_size(),
            steps: self.trajectory.steps(),
            adapt_mass: !self.no_adapt_mass,
            init,
            save_warmup: self.save_warmup,
            max_energy_error: 1000.0,
            memory_limit: self.surrogate.memory_limit(),
            method: match self.method.as_str() {
                "rns-hmc" => Method::RnsHmc(self.surrogate.settings(self.warmup, self.seed)?),
                "grid-hmc" | "sg-hmc" => {
                    let mut settings = self.surrogate.settings(self.warmup, self.seed)?;
                    if settings.surrogate_file.is_some() {
                        return Err(Error::invalid(
                            "--surrogate loads a saved surrogate: use it with --method rns-hmc",
                        ));
                    }
                    let kind = if self.method == "grid-hmc" {
                        "force-grid"
                    } else {
                        "sparse-grid"
                    };
                    settings.grid = Some(self.surrogate.grid(kind)?);
                    Method::RnsHmc(settings)
                }
                "arns-hmc" => Method::ArnsHmc(self.surrogate.settings(self.warmup, self.seed)?),
                "vhmc" => Method::Vhmc(self.surrogate.vhmc(self.seed)?),
                _ => Method::Hmc,
            },
        })
    }
}

fn open_sinks(
    args: &SampleArgs,
    config: &SampleConfig,
    model: &dyn Model,
) -> Result<Vec<Box<dyn DrawSink>>> {
    std::fs::create_dir_all(&args.output).map_err(|e| Error::io(&args.output, e))?;
    let (adapt, delta, stepsize) = match config.step_size {
        StepSize::Adapt { target } => (true, target, 1.0),
        StepSize::Fixed(eps) => (false, 0.8, eps),
    };
    (1..=config.chains)
        .map(|chain| {
            let mut header = CsvHeader {
                model: args.model.model.clone(),
                chain,
                num_samples: config.draws,
                num_warmup: config.warmup,
                save_warmup: config.save_warmup,
                adapt_engaged: adapt,
                delta,
                stepsize,
                seed: config.seed,
                data_file: args.model.data.as_ref().map(|p| p.display().to_string()),
                extra: vec![
                    ("shmc_method".into(), config.method.name().into()),
                    ("trajectory_steps".into(), config.steps.max().to_string()),
                    (
                        "jitter_steps".into(),
                        u8::from(!args.trajectory.fixed_steps).to_string(),
                    ),
                ],
                parameters: model.parameter_names(),
            };
            if config.method.approximate() {
                header.extra.push((
                    "inference".into(),
                    approximate_label(config.method.name(), None),
                ));
            }
            let path = args
                .output
                .join(format!("{}-{chain}.csv", args.model.model));
            CsvSink::create(&path, &header).map(|s| Box::new(s) as Box<dyn DrawSink>)
        })
        .collect()
}

/// Removes the run's CSV files that hold no draw (only the header CmdStan writes first).
fn remove_files_without_draws(args: &SampleArgs) {
    let Ok(entries) = std::fs::read_dir(&args.output) else {
        return;
    };
    let prefix = format!("{}-", args.model.model);
    for path in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
        let ours = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".csv"));
        let empty = ours
            && std::fs::read_to_string(&path).is_ok_and(|text| {
                // The column-name line is the one non-comment line of a header.
                text.lines().filter(|l| !l.starts_with('#')).count() <= 1
            });
        if empty {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Runs `shmc sample`.
pub fn run(args: &SampleArgs) -> Result<i32> {
    let config = args.config()?;
    let model = models::build(&args.model.spec(args.surrogate.memory_limit()))?;
    for note in model.notes() {
        println!("model: {note}");
    }
    config.validate(model.as_ref())?;
    let sinks = open_sinks(args, &config, model.as_ref())?;
    // A second Ctrl-C falls through to the default handler only if this one failed to install;
    // that is harmless, so the error is ignored.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed));
    if config.method.approximate() {
        eprintln!("{}", approximate_label(config.method.name(), None));
    }
    let progress = Progress::new(config.chains, config.warmup + config.draws, args.quiet);
    let run = sample(
        model.as_ref(),
        &config,
        sinks,
        &|chain, done| progress.update(chain, done, config.warmup),
        Some(&INTERRUPTED),
    )
    // A run that fails before its first draw (a grid refused, a model that cannot start)
    // leaves no header-only files that look like a run.
    .inspect_err(|_| remove_files_without_draws(args))?;
    progress.finish();
    // An interrupted run is summarized over the chains that made enough draws, cut to the
    // draws they all finished (as `shmc summary` does with its files).
    let (summarized, kept) = run.summarized();
    if !summarized.is_empty() {
        let totals = RunTotals {
            chains: summarized.len(),
            draws: kept,
            mean_accept_stat: run.mean_accept_stat(),
            divergences: run.divergences(),
            sampling_seconds: Some(run.sampling_seconds()),
            wall_seconds: Some(run.wall_seconds),
        };
        let summary = run.summary();
        print!("{}", format_summary(&summary, &totals));
        let iterations = run
            .chains
            .iter()
            .map(|c| c.warmup_evaluations.iterations + c.sampling_evaluations.iterations)
            .sum();
        let min_ess = summary
            .iter()
            .map(|p| p.ess_bulk)
            .fold(f64::INFINITY, f64::min);
        print!("{}", format_model_work(&model.work(), iterations, min_ess));
    }
    if let Some(p) = &run.precompute {
        println!(
            "precompute: {} exact evaluations in {:.3} s before sampling (shared by every chain; \
             sampling took {:.3} s)",
            p.evaluations,
            p.seconds,
            run.sampling_seconds()
        );
    }
    let mut kl_bound = None;
    for c in &run.chains {
        if let Some(s) = &c.surrogate {
            kl_bound = kl_bound.or(s.kl_bound_estimate);
            match s.precompute {
                Some(p) if p.before_sampling => {
                    println!(
                        "chain {}: proposing with the precomputed surrogate; sampling used {} exact values and {} surrogate gradients",
                        c.chain,
                        c.sampling_evaluations.exact_values,
                        c.sampling_evaluations.surrogate_gradients
                    );
                    continue;
                }
                Some(p) => println!(
                    "chain {}: precompute after the exact phase: {} exact evaluations in {:.3} s",
                    c.chain, p.evaluations, p.seconds
                ),
                None => {}
            }
            println!(
                "chain {}: surrogate trained on {} states in {:.2} s (online updates {} in {:.2} s), scale {}, held-out gradient error {:.3}; sampling used {} exact values and {} surrogate gradients",
                c.chain,
                s.training_states,
                s.training_seconds,
                s.online_updates,
                s.online_seconds,
                s.scale,
                s.holdout_gradient_error,
                c.sampling_evaluations.exact_values,
                c.sampling_evaluations.surrogate_gradients
            );
            if let Some(t) = &s.trajectory {
                println!("chain {}: surrogate trajectories of {t}", c.chain);
            }
        }
    }
    if config.method.approximate() {
        println!("{}", approximate_label(config.method.name(), kl_bound));
    }
    println!("draws written to {}", args.output.display());
    if run.interrupted() {
        eprintln!("interrupted: the CSV files hold the {kept}+ draws finished before the stop");
        return Ok(130);
    }
    Ok(0)
}
