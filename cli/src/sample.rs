//! `shmc sample`: build the model, run the chains with one CSV file each, print the summary.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;

use super::ModelArgs;
use super::method_args::MethodArgs;
use super::progress::Progress;
use shmc::output::{
    Cost, CsvHeader, CsvSink, RunTotals, approximate_label, chain_path, format_comparison,
    format_kernel_work, format_model_work, format_summary, trajectories_line,
};
use shmc::sampler::{
    DrawSink, Evaluations, Init, MassMatrix, Method, NullSink, NutsSettings, Resumed, Run,
    SampleConfig, StepSize, resume, sample,
};
use shmc::{Error, Model, Result, models};

/// Set by Ctrl-C: chains stop after their current iteration and files stay valid.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Arguments of `shmc sample`.
#[derive(Debug, Args)]
pub struct SampleArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    method: MethodArgs,
    /// Number of chains, run in parallel on all cores.
    #[arg(long, default_value_t = 4)]
    chains: usize,
    /// Kept draws per chain.
    #[arg(long, default_value_t = 1000)]
    draws: usize,
    /// Warmup iterations per chain (not written unless --save-warmup).
    #[arg(long, default_value_t = 1000)]
    warmup: usize,
    /// Stop once every parameter's bulk and tail ESS over all chains reach N (checked every
    /// --ess-check-every draws; --draws is then the most each chain makes). CmdStan users look
    /// for 400.
    #[arg(long, value_name = "N")]
    target_ess: Option<f64>,
    /// Kept draws between checks of --target-ess.
    #[arg(long, default_value_t = 100, value_name = "K")]
    ess_check_every: usize,
    /// Seed; chain k uses stream k of it, so runs are reproducible.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keep the identity mass matrix during warmup (adapt only the step size).
    #[arg(long)]
    no_adapt_mass: bool,
    /// The mass matrix: `diagonal`, adapted in warmup (Stan's diag_e); or `laplace`, the
    /// Hessian at the MAP, found before the chains start (its MAP search and Hessian are
    /// reported): a dense mass matrix (the CSVs say dense_e and give it whole) that takes out
    /// the posterior's correlations and scales at once; a warmup of 500 or more adapts a
    /// diagonal on top, a shorter one the step size only.
    /// For ill-conditioned posteriors: on Bank Marketing NUTS reached a bulk ESS of 4125 in
    /// 39 s with it, 173 in 222 s without. Random initial values are then drawn around the
    /// mode (--init-radius Laplace standard deviations along each principal axis)
    #[arg(long, value_enum, default_value_t = MetricArg::Diagonal)]
    metric: MetricArg,
    /// JSON file with initial values: an array of numbers on the unconstrained scale.
    #[arg(long, value_name = "FILE")]
    init: Option<PathBuf>,
    /// Random initial values are uniform on (-R, R) (with --metric laplace: R Laplace standard
    /// deviations around the mode along each principal axis).
    #[arg(long, default_value_t = 2.0, value_name = "R")]
    init_radius: f64,
    /// Write the warmup draws before the kept ones (nuts: the first warmup row's stepsize__ is
    /// nan, as nuts-rs finds its first step size inside that transition and does not report it).
    #[arg(long)]
    save_warmup: bool,
    /// Folder for the per-chain CSV files (created if needed).
    #[arg(long, default_value = "output", value_name = "DIR")]
    output: PathBuf,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
    /// After the run, measure what METHOD (exact hmc, or nuts) needs on the same model, in the
    /// same process: a pilot with the same chains, seed and --metric, of --compare-warmup
    /// warmup iterations and --compare-draws kept draws per chain (no files), then both side by
    /// side, exact evaluations and seconds per effective sample, warmup included.
    #[arg(long, value_name = "METHOD", value_parser = ["hmc", "nuts"])]
    compare: Option<String>,
    /// Kept draws per chain of the --compare pilot.
    #[arg(long, default_value_t = 500, value_name = "N")]
    compare_draws: usize,
    /// Warmup iterations per chain of the --compare pilot: Stan's default, what a user of
    /// METHOD runs (a surrogate run's own warmup can be much shorter).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    compare_warmup: usize,
    /// Continue the stopped (killed, interrupted or failed) run whose output folder is DIR,
    /// with the settings it was started with: each chain from its last checkpoint (saved about
    /// every second after warmup, and when stopped), or from its start if it stopped in warmup.
    /// The draws are those an uninterrupted run makes, bit for bit. Give it alone (or with
    /// --quiet).
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// Let every chain read all the data for each of its exact evaluations. By default, for
    /// models whose U is a sum over data rows (logistic, probit) and two chains or more, the
    /// chains evaluate their exact U together in one pass over the data, shared out between one
    /// thread per chain; the draws are the same either way.
    #[arg(long)]
    no_lockstep: bool,
}

/// What a surrogate chain's sampling cost in evaluations: `N exact values and N surrogate
/// gradients`, and the exact gradients when there were any (leapfrog steps outside the
/// surrogate's domain, or exact trajectories after its acceptance collapsed).
fn sampling_cost(e: &Evaluations) -> String {
    let exact = match e.exact_gradients {
        0 => String::new(),
        n => format!(", {n} exact gradients"),
    };
    format!(
        "{} exact values{exact} and {} surrogate gradients",
        e.exact_values, e.surrogate_gradients
    )
}

fn read_init(path: &Path) -> Result<Vec<f64>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    super::options::init_values(&text, path)
}

/// The choices of `--metric`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum MetricArg {
    Diagonal,
    Laplace,
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
            step_size: self.method.trajectory.step_size(),
            steps: self.method.trajectory.steps(),
            adapt_mass: !self.no_adapt_mass,
            metric: match self.metric {
                MetricArg::Diagonal => MassMatrix::Diagonal,
                MetricArg::Laplace => MassMatrix::Laplace,
            },
            init,
            save_warmup: self.save_warmup,
            max_energy_error: 1000.0,
            target_ess: self.target_ess,
            ess_check_every: self.ess_check_every,
            lockstep: !self.no_lockstep,
            method: self.method.method(self.warmup, self.seed)?,
            memory_limit: self.method.surrogate.memory_limit(),
        })
    }
}

/// Each chain's sink: a new file, or when resuming, its stopped file cut back to its checkpoint
/// with the chain to resume from it (`None`: the chain starts again).
type Opened = (Vec<Box<dyn DrawSink>>, Vec<Option<Resumed>>);

fn open_sinks(args: &SampleArgs, config: &SampleConfig, model: &dyn Model) -> Result<Opened> {
    let warmup_rows = if config.save_warmup { config.warmup } else { 0 };
    let mut opened: Opened = (Vec::new(), Vec::new());
    for (path, header) in chain_files(args, config, model)? {
        let (sink, resumed) = if args.resume.is_some() {
            CsvSink::resume(&path, &header, model.dim(), warmup_rows)?
        } else {
            (CsvSink::create(&path, &header)?, None)
        };
        opened.0.push(Box::new(sink));
        opened.1.push(resumed);
    }
    Ok(opened)
}

/// Each chain's file and header, in the output folder (created, with the run's command line
/// saved in it, unless resuming: then it must be the folder given).
fn chain_files(
    args: &SampleArgs,
    config: &SampleConfig,
    model: &dyn Model,
) -> Result<Vec<(PathBuf, CsvHeader)>> {
    match &args.resume {
        Some(dir) => {
            let same = |p: &Path| std::fs::canonicalize(p).ok();
            if same(dir).is_none() || same(dir) != same(&args.output) {
                return Err(Error::invalid(format!(
                    "{}: the run to resume wrote to {}, which is not this folder (a run's folder \
                     cannot be moved before it is resumed)",
                    dir.display(),
                    args.output.display()
                )));
            }
        }
        None => {
            std::fs::create_dir_all(&args.output).map_err(|e| Error::io(&args.output, e))?;
            super::resume::save_invocation(&args.output)?;
        }
    }
    Ok((1..=config.chains)
        .map(|chain| {
            let name = &args.model.model;
            let mut header = CsvHeader::for_run(name, chain, config, model.parameter_names());
            header.data_file = args.model.data.as_ref().map(|p| p.display().to_string());
            (chain_path(&args.output, name, chain), header)
        })
        .collect())
}

/// The run's CSV files in the output folder.
fn run_files(args: &SampleArgs) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(&args.output) else {
        return Vec::new();
    };
    let prefix = format!("{}-", args.model.model);
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".csv"))
        })
        .collect()
}

/// Whether the run left CSV files (after [`remove_files_without_draws`]: files with draws).
fn has_run_files(args: &SampleArgs) -> bool {
    !run_files(args).is_empty()
}

/// Removes the run's CSV files that hold no draw (only the header CmdStan writes first).
fn remove_files_without_draws(args: &SampleArgs) {
    for path in run_files(args) {
        let empty = std::fs::read_to_string(&path).is_ok_and(|text| {
            // The column-name line is the one non-comment line of a header.
            text.lines().filter(|l| !l.starts_with('#')).count() <= 1
        });
        if empty {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The run beside a pilot of `baseline` (`hmc` or `nuts`) on the same model, chains, seed and
/// metric, with its own warmup, run now: what each needs per effective sample.
fn compare(
    args: &SampleArgs,
    config: &SampleConfig,
    model: &dyn Model,
    run: &Run,
    baseline: &str,
) -> Result<String> {
    let (method, step_size) = if baseline == "nuts" {
        let adapt = StepSize::Adapt { target: 0.8 };
        (Method::Nuts(NutsSettings::default()), adapt)
    } else {
        (Method::Hmc, config.step_size)
    };
    let pilot = SampleConfig {
        method,
        step_size,
        adapt_mass: true,
        warmup: args.compare_warmup,
        draws: args.compare_draws,
        save_warmup: false,
        target_ess: None,
        ..config.clone()
    };
    if !args.quiet {
        eprintln!(
            "comparing: {baseline}, {} chains x ({} warmup + {} draws), no files ...",
            pilot.chains, pilot.warmup, pilot.draws
        );
    }
    let sinks = (0..pilot.chains)
        .map(|_| Box::new(NullSink) as Box<dyn DrawSink>)
        .collect();
    let measured = sample(model, &pilot, sinks, &|_, _| {}, Some(&INTERRUPTED))?;
    Ok(format_comparison(&[
        Cost::of(format!("{} (this run)", config.method.name()), run),
        Cost::of(format!("{baseline} (a pilot measured after it)"), &measured),
    ]))
}

/// Runs `shmc sample`.
pub fn run(args: &SampleArgs) -> Result<i32> {
    let config = args.config()?;
    let model = models::build(&args.model.spec(args.method.surrogate.memory_limit()))?;
    for note in model.notes() {
        println!("model: {note}");
    }
    config.validate(model.as_ref())?;
    if matches!(config.method, Method::Rmhmc(_))
        && model.riemannian_metric(&vec![0.0; model.dim()]).is_none()
    {
        return Err(Error::invalid(format!(
            "--method rmhmc needs the model's Riemannian metric, and model {} offers none \
             (logistic, banana and elliptic-pde do; rns-rmhmc uses its network's)",
            args.model.model
        )));
    }
    let (sinks, resumed) = open_sinks(args, &config, model.as_ref())?;
    if args.resume.is_some() {
        for (k, r) in resumed.iter().enumerate() {
            match r {
                Some(r) if r.checkpoint.finished => {
                    println!("chain {}: finished before the stop", k + 1)
                }
                Some(r) => println!(
                    "chain {}: resumed after draw {} of {}",
                    k + 1,
                    r.checkpoint.kept,
                    config.draws
                ),
                None => println!(
                    "chain {}: stopped in warmup (or its method saves no checkpoint): starts \
                     again, with the same draws",
                    k + 1
                ),
            }
        }
    }
    // A second Ctrl-C falls through to the default handler only if this one failed to install;
    // that is harmless, so the error is ignored.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed));
    if config.method.approximate() {
        eprintln!("{}", approximate_label(config.method.name(), None));
    }
    let progress = Progress::new(config.chains, config.warmup + config.draws, args.quiet);
    // Every chain runs on a thread of its own, so a served model has every chain's call in
    // flight at once and the server decides the parallelism.
    let run = resume(
        model.as_ref(),
        &config,
        &resumed,
        sinks,
        &|chain, done| progress.update(chain, done, config.warmup),
        Some(&INTERRUPTED),
    )
    // A run that fails before its first draw (a grid refused, a model that cannot start)
    // leaves no header-only files that look like a run.
    .inspect_err(|_| remove_files_without_draws(args))
    .map_err(|e| match e {
        Error::ModelFailed(failure) if has_run_files(args) => Error::ModelFailed(format!(
            "{failure}; the CSV files in {} keep the draws made before",
            args.output.display()
        )),
        other => other,
    })?;
    progress.finish();
    // An interrupted run is summarized over the chains that made enough draws, cut to the
    // draws they all finished (as `shmc summary` does with its files).
    let (summarized, kept) = run.summarized();
    if !summarized.is_empty() {
        let summary = run.summary();
        print!("{}", format_summary(&summary, &RunTotals::of(&run)));
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
    if let Some(p) = &run.laplace {
        println!(
            "laplace metric: the MAP search and its Hessian took {} exact evaluations in {:.3} s \
             before sampling",
            p.evaluations, p.seconds
        );
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
    if let (Some(target), Some(check)) = (config.target_ess, &run.target_ess) {
        let name = |p: usize| run.names.get(p).map_or("?", String::as_str);
        let ess = format!(
            "min bulk ESS {:.0} ({}), min tail ESS {:.0} ({})",
            check.bulk.0,
            name(check.bulk.1),
            check.tail.0,
            name(check.tail.1)
        );
        if check.reached {
            println!(
                "target ESS {target} reached after {} draws per chain, {:.1} s from the start: {ess}",
                check.draws, run.wall_seconds
            );
        } else {
            println!(
                "target ESS {target} not reached: stopped at the most draws ({} per chain) with {ess}; \
                 raise --draws or lower --target-ess",
                check.draws
            );
        }
    }
    for c in &run.chains {
        let phases: Vec<String> = c
            .phases
            .iter()
            .filter(|p| p.iterations > 0 || p.seconds > 0.0)
            .map(|p| match p.iterations {
                0 => format!("{} {:.2} s", p.phase.name(), p.seconds),
                n => format!("{} {n} it {:.2} s", p.phase.name(), p.seconds),
            })
            .collect();
        if c.surrogate.is_some() {
            println!("chain {}: {}", c.chain, phases.join(", "));
        }
        if let Some(collapse) = c.surrogate.as_ref().and_then(|s| s.collapse) {
            println!(
                "chain {}: the surrogate's exact acceptance collapsed to {:.3} (its own \
                 dynamics: {:.3}) over its last {} proposals at warmup iteration {}: exact HMC \
                 from there on",
                c.chain,
                collapse.acceptance,
                collapse.own_acceptance,
                shmc::sampler::COLLAPSE_WINDOW,
                collapse.iteration + 1
            );
        }
    }
    for c in &run.chains {
        if let Some(r) = &c.riemannian {
            println!("chain {}: RMHMC step size {:.4}", c.chain, r.step_size);
            print!(
                "{}{}",
                format_kernel_work(&format!("chain {} warmup", c.chain), &r.warmup),
                format_kernel_work(&format!("chain {} sampling", c.chain), &r.sampling)
            );
        }
    }
    let mut kl_bound = None;
    for c in &run.chains {
        if let Some(s) = &c.surrogate {
            kl_bound = kl_bound.or(s.kl_bound_estimate);
            match s.precompute {
                Some(p) if p.before_sampling => {
                    let fit = if s.training_states > 0 {
                        format!(
                            " (trained on {} Laplace draws, scale {}, held-out gradient error \
                             {:.4})",
                            s.training_states, s.scale, s.holdout_gradient_error
                        )
                    } else {
                        String::new()
                    };
                    println!(
                        "chain {}: proposing with the precomputed surrogate{fit}; sampling used {}",
                        c.chain,
                        sampling_cost(&c.sampling_evaluations)
                    );
                    if let Some(line) = c
                        .surrogate
                        .as_ref()
                        .and_then(|s| trajectories_line(s, &c.sampling_evaluations))
                    {
                        println!("chain {}: surrogate trajectories: {line}", c.chain);
                    }
                    continue;
                }
                Some(p) => println!(
                    "chain {}: precompute after the exact phase: {} exact evaluations in {:.3} s",
                    c.chain, p.evaluations, p.seconds
                ),
                None => {}
            }
            println!(
                "chain {}: surrogate trained on {} states in {:.2} s (online updates {} in {:.2} s), scale {}, held-out gradient error {:.3}; sampling used {}",
                c.chain,
                s.training_states,
                s.training_seconds,
                s.online_updates,
                s.online_seconds,
                s.scale,
                s.holdout_gradient_error,
                sampling_cost(&c.sampling_evaluations)
            );
            if let Some(line) = c
                .surrogate
                .as_ref()
                .and_then(|s| trajectories_line(s, &c.sampling_evaluations))
            {
                println!("chain {}: surrogate trajectories: {line}", c.chain);
            }
        }
    }
    if config.method.approximate() {
        println!("{}", approximate_label(config.method.name(), kl_bound));
    }
    if let Some(baseline) = &args.compare
        && !run.interrupted()
    {
        print!(
            "{}",
            compare(args, &config, model.as_ref(), &run, baseline)?
        );
    }
    println!("draws written to {}", args.output.display());
    if run.interrupted() {
        eprintln!(
            "interrupted: the CSV files hold the {kept}+ draws finished before the stop; \
             `shmc sample --resume {}` goes on from there",
            args.output.display()
        );
        return Ok(130);
    }
    Ok(0)
}
