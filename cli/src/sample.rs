//! `shmc sample`: build the model, run the library's [`Sampler`] with one CSV file per chain,
//! print its report.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use clap::Args;

use super::ModelArgs;
use super::method_args::MethodArgs;
use super::progress::Progress;
use shmc::output::{Cost, approximate_label, format_comparison};
use shmc::sampler::auto::{self, AutoPlan};
use shmc::sampler::{Init, MassMatrix, Method, NutsSettings, Resumed, Run, SampleConfig, StepSize};
use shmc::surrogates::trained_on;
use shmc::{Error, Model, Result, Sampler, models};

/// Arguments of `shmc sample`.
#[derive(Debug, Args)]
pub struct SampleArgs {
    /// Number of chains, run in parallel on all cores.
    #[arg(long, default_value_t = 4)]
    chains: usize,
    /// The id of the first chain, as CmdStan's `id`: the run makes chains N..N+chains-1
    /// exactly as one run of them all would (same random streams, files MODEL-N.csv...,
    /// checkpoints), so that a run can be split into shards, each its own process and
    /// --output folder (`--chains 2 --chain-id 5` is chains 5 and 6 of `--chains 8`);
    /// `shmc summary` and `shmc report` read the shards' folders as one run.
    #[arg(long, default_value_t = 1, value_name = "N")]
    chain_id: usize,
    /// Kept draws per chain.
    #[arg(long, default_value_t = 1000)]
    draws: usize,
    /// Warmup iterations per chain (not written unless --save-warmup).
    #[arg(long, default_value_t = 1000)]
    warmup: usize,
    /// Stop once every parameter's bulk and tail ESS over all chains reach N (checked every
    /// --ess-check-every draws; --draws is then the most each chain makes). CmdStan users look
    /// for 400.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
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
    /// mode (--init-radius Laplace standard deviations along each principal axis).
    /// Or `low-rank` (NUTS only): nutpie's adaptation, the diagonal corrected along the few
    /// directions where the warmup draws' and gradients' covariances disagree most, learned in
    /// warmup with no MAP search; the CSVs give its diagonal part (shmc_metric = low-rank).
    /// [default: diagonal; --method auto chooses its own and refuses this option]
    #[arg(long, value_enum)]
    metric: Option<MetricArg>,
    /// JSON file with initial values: an array of numbers on the unconstrained scale, or for a
    /// Stan model every parameter by name on its constrained scale, as a CmdStan init file
    /// holds them ({"sigma": 1.5, "theta": [0.1, 0.2]}).
    #[arg(long, value_name = "FILE")]
    init: Option<PathBuf>,
    /// Random initial values are uniform on (-R, R) (with --metric laplace: R Laplace standard
    /// deviations around the mode along each principal axis).
    #[arg(
        long,
        default_value_t = 2.0,
        value_name = "R",
        allow_negative_numbers = true
    )]
    init_radius: f64,
    /// Write the warmup draws before the kept ones (nuts: the first warmup row's stepsize__ is
    /// nan, as nuts-rs finds its first step size inside that transition and does not report it).
    #[arg(long)]
    save_warmup: bool,
    /// Folder for the per-chain CSV files (created if needed). It belongs to one run at a
    /// time: a run writing to it, or an earlier run's files in it, make a new run refuse it
    /// (see --overwrite, --resume).
    #[arg(long, default_value = "output", value_name = "DIR")]
    output: PathBuf,
    /// If --output holds an earlier run's files (its chain CSVs, checkpoints, saved
    /// surrogates, shmc-run.json), remove them before writing instead of refusing the folder.
    /// Only those files are removed.
    #[arg(long)]
    overwrite: bool,
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
    /// Evaluate the run's design on the model's coarser level N (elliptic-pde: an NxN mesh)
    /// instead of on the model: the MAP search and Hessian of the Laplace metric, and the
    /// training evaluations of a surrogate fitted before sampling (--train-from laplace). Every
    /// draw is still judged by the model itself, so the chains stay exact; a level close to the
    /// model gives nearly its surrogate for a fraction of the solves (--mesh 120 with
    /// --design-level 60: a fifth of the cost per evaluation).
    #[arg(long, value_name = "N")]
    design_level: Option<usize>,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    method: MethodArgs,
}

/// The choices of `--metric`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum MetricArg {
    Diagonal,
    Laplace,
    LowRank,
}

impl SampleArgs {
    /// The ids of the run's chains (`--chain-id` on); see `summary::shards`.
    pub(crate) fn chain_ids(&self) -> RangeInclusive<usize> {
        self.chain_id..=self.chain_id.saturating_add(self.chains.saturating_sub(1))
    }

    /// The run's settings, its initial values drawn at random: a file of them is read against
    /// the model ([`SampleArgs::init`]), which is built after the settings are checked.
    fn config(&self) -> Result<SampleConfig> {
        if self.method.is_auto() {
            let given = [
                ("--metric", self.metric.is_some()),
                ("--no-adapt-mass", self.no_adapt_mass),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
                return Err(Error::invalid(format!(
                    "{flag}: auto chooses its own plan, metric included; name the method to \
                     set it (the line auto prints names the method it chose)"
                )));
            }
        }
        let init = Init::Random {
            radius: self.init_radius,
        };
        Ok(SampleConfig {
            chains: self.chains,
            chain_id: self.chain_id,
            warmup: self.warmup,
            draws: self.draws,
            seed: self.seed,
            step_size: self.method.trajectory.step_size(),
            steps: self.method.trajectory.steps(),
            adapt_mass: !self.no_adapt_mass,
            metric: match self.metric {
                None | Some(MetricArg::Diagonal) => MassMatrix::Diagonal,
                Some(MetricArg::Laplace) => MassMatrix::Laplace,
                Some(MetricArg::LowRank) => MassMatrix::LowRank,
            },
            init,
            save_warmup: self.save_warmup,
            max_energy_error: 1000.0,
            target_ess: self.target_ess,
            ess_check_every: self.ess_check_every,
            lockstep: !self.no_lockstep,
            method: self.method.method(self.seed)?,
            memory_limit: self.method.surrogate.memory_limit(),
            design_level: self.design_level,
        })
    }
}

impl SampleArgs {
    /// Where the chains start: `--init`'s values (unconstrained numbers, or values by name that
    /// the model reads on its own scale) or random ones.
    fn init(&self, model: &dyn Model) -> Result<Init> {
        let Some(path) = &self.init else {
            return Ok(Init::Random {
                radius: self.init_radius,
            });
        };
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        super::options::init_values(&text, path, model).map(Init::Values)
    }
}

/// When resuming, the folder given must be the one the run wrote to: a run's folder cannot be
/// moved before it is resumed (its files name it).
fn check_resume_folder(args: &SampleArgs) -> Result<()> {
    let Some(dir) = &args.resume else {
        return Ok(());
    };
    let same = |p: &Path| std::fs::canonicalize(p).ok();
    if same(dir).is_none() || same(dir) != same(&args.output) {
        return Err(Error::invalid(format!(
            "{}: the run to resume wrote to {}, which is not this folder (a run's folder \
             cannot be moved before it is resumed)",
            dir.display(),
            args.output.display()
        )));
    }
    Ok(())
}

/// A saved surrogate (--surrogate) must have been trained on this run's model and data file:
/// one of another proposes from another posterior. A file too old to record them loads with
/// a warning.
fn check_surrogate_file(args: &SampleArgs, config: &SampleConfig) -> Result<()> {
    let Some(path) = config
        .method
        .surrogate()
        .and_then(|s| s.surrogate_file.as_ref())
    else {
        return Ok(());
    };
    if let Some(warning) = trained_on::check(path, &args.model.model, args.model.data())? {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// The library's sampler for the run the arguments describe, writing (or resuming) its files
/// in the output folder, with progress bars, stopped by `stop` (Ctrl-C, SIGTERM).
fn sampler<'m>(
    args: &SampleArgs,
    (config, auto): (SampleConfig, Option<&str>),
    model: &'m dyn Model,
    (progress, stop): (&'m Progress, &'static AtomicBool),
) -> Sampler<'m, dyn Model + 'm> {
    let warmup = config.warmup;
    let mut sampler = Sampler::new(model)
        .settings(config)
        .name(&args.model.model)
        .on_progress(move |chain, done| progress.update(chain, done, warmup))
        .interrupt(stop);
    if let Some(line) = auto {
        sampler = sampler.header_entry(auto::HEADER_KEY, line);
    }
    let sampler = match &args.resume {
        Some(_) => sampler.resume_in(&args.output),
        None => sampler.write_to(&args.output).overwrite(args.overwrite),
    };
    match args.model.data() {
        Some(data) => sampler.data_file(data),
        None => sampler,
    }
}

/// With `--method auto`, the plan put in place in `config`: the one [`auto::choose`] picks for
/// `model` or, resumed, the one the first run picked (`--auto-chose`, saved with it). Its line
/// is printed and returned for the files' headers and the saved command line.
fn choose_plan(
    args: &SampleArgs,
    config: &mut SampleConfig,
    model: &dyn Model,
) -> Result<Option<String>> {
    if !args.method.is_auto() {
        return Ok(None);
    }
    let line = match &args.method.auto_chose {
        Some(line) => line.clone(),
        None => auto::choose(model, config)?.line(),
    };
    let plan = AutoPlan::of_line(&line).ok_or_else(|| {
        let names: Vec<&str> = AutoPlan::ALL.iter().map(|p| p.name()).collect();
        Error::invalid(format!(
            "--auto-chose {line:?} names none of auto's plans ({})",
            names.join(", ")
        ))
    })?;
    *config = plan.apply(config);
    println!("auto: {line}");
    println!(
        "auto: --method {} makes the same draws",
        explicit_method(plan)
    );
    Ok(Some(line))
}

/// The options of an explicit run of `plan`, the same draws as `auto`'s.
fn explicit_method(plan: AutoPlan) -> &'static str {
    match plan {
        AutoPlan::Nuts => "nuts --metric low-rank",
        AutoPlan::LaplaceSurrogate => "rns-hmc --train-from laplace --surrogate-steps-factor nuts",
    }
}

/// With --overwrite, one line saying how many of an earlier run's files were removed.
fn print_removed(removed: &[PathBuf], output: &Path) {
    if !removed.is_empty() {
        println!(
            "--overwrite: removed {} files of an earlier run from {}",
            removed.len(),
            output.display()
        );
    }
}

/// One line per chain of a resumed run (`ids` its chains'): where it goes on from.
fn print_resumed(resumed: &[Option<Resumed>], ids: RangeInclusive<usize>, draws: usize) {
    for (id, r) in ids.zip(resumed) {
        match r {
            Some(r) if r.checkpoint.finished => {
                println!("chain {id}: finished before the stop")
            }
            Some(r) => println!(
                "chain {id}: resumed after draw {} of {draws}",
                r.checkpoint.kept
            ),
            None => println!(
                "chain {id}: stopped in warmup (or its method saves no checkpoint): starts \
                 again, with the same draws"
            ),
        }
    }
}

/// The settings of the `--compare` pilot of `baseline` beside the run of `config`.
fn pilot_config(args: &SampleArgs, config: &SampleConfig, baseline: &str) -> SampleConfig {
    let (method, step_size) = if baseline == "nuts" {
        let adapt = StepSize::Adapt { target: 0.8 };
        (Method::Nuts(NutsSettings::default()), adapt)
    } else {
        (Method::Hmc, config.step_size)
    };
    SampleConfig {
        method,
        step_size,
        adapt_mass: true,
        warmup: args.compare_warmup,
        draws: args.compare_draws,
        save_warmup: false,
        target_ess: None,
        ..config.clone()
    }
}

/// A refusal of the pilot's settings, its warmup and draws named as the `--compare` options
/// that set them.
fn as_compare_setting(error: Error) -> Error {
    let rename = |setting| match setting {
        "warmup" => "compare_warmup",
        "draws" => "compare_draws",
        other => other,
    };
    match error {
        Error::Setting { setting, problem } => Error::setting(rename(setting), problem),
        Error::MemoryLimit { message, driver } => Error::MemoryLimit {
            message,
            driver: rename(driver),
        },
        other => other,
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
    let pilot = pilot_config(args, config, baseline);
    if !args.quiet {
        eprintln!(
            "comparing: {baseline}, {} chains x ({} warmup + {} draws), no files ...",
            pilot.chains, pilot.warmup, pilot.draws
        );
    }
    let measured = Sampler::new(model)
        .settings(pilot)
        .interrupt(super::stop::on_signals())
        .run()?;
    Ok(format_comparison(&[
        Cost::of(format!("{} (this run)", config.method.name()), run),
        Cost::of(
            format!("{baseline} (a pilot measured after it)"),
            measured.run(),
        ),
    ]))
}

/// Runs `shmc sample`.
pub fn run(args: &SampleArgs) -> Result<i32> {
    let mut config = args.config()?;
    let model = models::build(&args.model.spec(args.method.surrogate.memory_limit()))?;
    config.init = args.init(model.as_ref())?;
    if matches!(config.method, Method::Mlda(_)) && model.levels().is_none() {
        return Err(Error::invalid(format!(
            "--method mlda needs a model with coarser levels; {} has none",
            args.model.model
        )));
    }
    super::print_notes(model.notes());
    let auto = choose_plan(args, &mut config, model.as_ref())?;
    check_surrogate_file(args, &config)?;
    check_resume_folder(args)?;
    // Before the bars, one per chain, and the main run: a pilot it cannot make is refused now.
    config.validate(model.as_ref())?;
    if let Some(baseline) = &args.compare {
        pilot_config(args, &config, baseline)
            .validate(model.as_ref())
            .map_err(as_compare_setting)?;
    }
    let progress = Progress::new(config.chains, config.warmup + config.draws, args.quiet);
    // Installed before the files are opened: a SIGTERM from then on stops the run cleanly.
    let stop = super::stop::on_signals();
    let settings = (config.clone(), auto.as_deref());
    let opened = sampler(args, settings, model.as_ref(), (&progress, stop)).open()?;
    if args.resume.is_some() {
        print_resumed(opened.resumed(), config.chain_ids(), config.draws);
    } else {
        print_removed(opened.removed(), &args.output);
        let chosen: Vec<String> = match &auto {
            Some(line) if args.method.auto_chose.is_none() => {
                vec!["--auto-chose".into(), line.clone()]
            }
            _ => Vec::new(),
        };
        super::resume::save_invocation(&args.output, &chosen)?;
    }
    if config.method.approximate() {
        eprintln!("{}", approximate_label(config.method.name(), None));
    }
    // Every chain runs on a thread of its own, so a served model has every chain's call in
    // flight at once and the server decides the parallelism.
    let fit = opened.run()?;
    progress.finish();
    print!("{}", fit.report(&model.work()));
    for line in model.history() {
        println!("model: {line}");
    }
    let run = fit.run();
    if let Some(baseline) = &args.compare
        && !run.interrupted()
    {
        print!("{}", compare(args, &config, model.as_ref(), run, baseline)?);
    }
    println!("draws written to {}", args.output.display());
    if run.interrupted() {
        let (_, kept) = run.summarized();
        eprintln!(
            "interrupted: the CSV files hold the {kept}+ draws finished before the stop; \
             `shmc sample --resume {}` goes on from there",
            args.output.display()
        );
        return Ok(super::stop::exit_code());
    }
    Ok(0)
}
