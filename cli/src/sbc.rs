//! `shmc sbc`: simulation-based calibration of a method on a built-in model's generative form;
//! prints the summary and, with --output, writes the ranks, the histograms and the summary.

use std::path::PathBuf;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::ModelArgs;
use super::method_args::MethodArgs;
use super::summary::shards::{only_in, options_but};
use shmc::output::approximate_label;
use shmc::sampler::SampleConfig;
use shmc::sbc::{self, PART_FILE, Part, PartRecord, SbcFolder, SbcRun, SbcSettings};
use shmc::{Error, Result, models};

/// Arguments of `shmc sbc`.
#[derive(Debug, Args)]
pub struct SbcArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    method: MethodArgs,
    /// Replications: a draw from the prior, data simulated from it, the posterior sampled.
    #[arg(
        long,
        visible_alias = "replications",
        default_value_t = 200,
        value_name = "N"
    )]
    reps: usize,
    /// Chains per replication.
    #[arg(long, default_value_t = 1)]
    chains: usize,
    /// Kept draws per chain, before thinning.
    #[arg(long, default_value_t = 1000)]
    draws: usize,
    /// Warmup iterations per chain (a surrogate method trains on them, as in a user's run).
    #[arg(long, default_value_t = 1000)]
    warmup: usize,
    /// Keep every T-th draw of each chain. By default T is chosen from the replications'
    /// effective sample sizes, so that in 90 % of them a kept draw is worth at least one
    /// independent draw (for parts, by --merge from all of them, as one process chooses it).
    #[arg(long, value_name = "T")]
    thin: Option<usize>,
    /// Replications run at once (0: one per core).
    #[arg(long, default_value_t = 0, value_name = "N")]
    jobs: usize,
    /// Master seed; every replication's data and sampler seeds derive from it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Folder for ranks.csv, rank-PARAMETER.svg (one per parameter) and summary.txt, listed in
    /// shmc-sbc.json. The folder belongs to the run: one holding an earlier calibration is
    /// refused (see --overwrite), and so is one holding a sample run or a file of those names
    /// that is not an earlier calibration's.
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// With --output: remove an earlier calibration's files from the folder (those its
    /// shmc-sbc.json lists, nothing else) before writing, instead of refusing the folder.
    #[arg(long, requires = "output")]
    overwrite: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    parts: PartArgs,
}

/// The options that split a calibration into parts and merge them back: `shmc sbc`'s and
/// `shmc bench sbc`'s, one meaning for both.
#[derive(Debug, Args)]
pub struct PartArgs {
    /// Run only replications N..N+K-1 (K: --count), each with the seeds it has in the whole
    /// run: a part for another process or HyperQueue task. Needs --output, where the part is
    /// written for --merge. Without --thin the part keeps its ranks at every thinning the
    /// merge may choose.
    #[arg(long, value_name = "N", requires = "count")]
    pub first_replication: Option<usize>,
    /// With --first-replication: how many replications the part runs.
    #[arg(long, value_name = "K", requires = "first_replication")]
    pub count: Option<usize>,
    /// Run nothing: merge the parts written to these folders (by --first-replication ...
    /// --output DIR) into the result of the whole run, the same report as one process running
    /// every replication. Give the whole run's other options as they were given to the parts:
    /// a part started with other settings is refused.
    #[arg(long, value_name = "DIR", num_args = 1.., conflicts_with = "first_replication")]
    pub merge: Vec<PathBuf>,
}

impl PartArgs {
    /// The part asked for, if any.
    pub fn part(&self) -> Option<Part> {
        self.first_replication
            .zip(self.count)
            .map(|(first, count)| Part { first, count })
    }

    /// Refuses a folder of --merge whose part was started with other settings than this
    /// command's, but those of `per_part`; `words`: the subcommand's words (`sbc`, or `bench
    /// sbc`), which the saved command line starts with.
    pub fn check_settings(&self, words: usize, per_part: &[&str]) -> Result<()> {
        let own: Vec<String> = std::env::args().skip(1 + words).collect();
        let own = options_but(&own, per_part);
        for dir in &self.merge {
            let path = dir.join(shmc::output::RUN_SETTINGS_FILE);
            let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
            let (_, saved) = super::resume::read_invocation(&text, &path)?;
            let theirs = options_but(saved.get(words..).unwrap_or_default(), per_part);
            if theirs != own {
                return Err(Error::invalid(format!(
                    "{}: a part started with other settings than this command's ({} vs {})",
                    dir.display(),
                    only_in(&theirs, &own),
                    only_in(&own, &theirs)
                )));
            }
        }
        Ok(())
    }
}

/// The options that differ between the parts of one calibration run and the command that
/// merges them.
const PER_PART: [&str; 7] = [
    "--first-replication",
    "--count",
    "--output",
    "--overwrite",
    "--quiet",
    "--jobs",
    "--merge",
];

impl SbcArgs {
    fn config(&self) -> Result<SampleConfig> {
        if self.method.is_auto() {
            return Err(Error::invalid(
                "--method auto: sbc checks one kernel, and auto's choice hangs on the machine's \
                 timings; name the method (nuts, or rns-hmc --train-from laplace ...)",
            ));
        }
        Ok(SampleConfig {
            chains: self.chains,
            warmup: self.warmup,
            draws: self.draws,
            seed: self.seed,
            step_size: self.method.trajectory.step_size(),
            steps: self.method.trajectory.steps(),
            method: self.method.method(self.seed)?,
            memory_limit: self.method.surrogate.memory_limit(),
            ..SampleConfig::default()
        })
    }
}

/// A bar over the replications on stderr, on a terminal and without --quiet.
fn progress_bar(reps: usize, quiet: bool) -> ProgressBar {
    let bar = ProgressBar::new(reps as u64);
    if quiet || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template(
            "replications [{bar:30}] {pos}/{len} ({elapsed} elapsed, {eta} left)",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    bar
}

/// Runs `shmc sbc`.
pub fn run(args: &SbcArgs) -> Result<i32> {
    let config = args.config()?;
    let model = models::build(&args.model.spec(args.method.surrogate.memory_limit()))?;
    config.validate(model.as_ref())?;
    if let Some(thin) = args.thin
        && thin > args.draws
    {
        return Err(Error::invalid(format!(
            "--thin {thin} keeps no draw of a chain of --draws {}",
            args.draws
        )));
    }
    let part = args.parts.part();
    if part.is_some() && args.output.is_none() {
        return Err(Error::invalid(
            "--first-replication needs --output: the part's replications are written there, \
             for --merge",
        ));
    }
    let settings = SbcSettings {
        replications: args.reps,
        seed: args.seed,
        thin: args.thin,
        jobs: args.jobs,
        part,
        memory_limit: args.method.surrogate.memory_limit(),
    };
    let approximate = config
        .method
        .approximate()
        .then(|| approximate_label(config.method.name(), None));
    if let Some(label) = &approximate {
        eprintln!("{label}");
    }
    // A run claims its folder before its first replication, a merge once it has read its parts.
    let (result, folder) = match args.parts.merge.is_empty() {
        true => {
            sbc::check(model.as_ref(), &settings)?;
            let folder = claim(args, &model.parameter_names())?;
            (calibrate(args, model.as_ref(), &config, &settings)?, folder)
        }
        false => {
            let result = merged(args)?;
            let folder = claim(args, &result.names)?;
            (result, folder)
        }
    };
    let mut title = format!(
        "{} with {} ({} chain(s) x {} draws after {} warmup, seed {})",
        args.model.model,
        config.method.name(),
        args.chains,
        args.draws,
        args.warmup,
        args.seed
    );
    if let Some(part) = part {
        let last = part.first + part.count - 1;
        title.push_str(&format!(
            ", replications {}..{last} of {}",
            part.first, args.reps
        ));
    }
    let report = sbc::format_report(&result, &title, approximate.as_deref());
    print!("{report}");
    if let Some(folder) = &folder {
        let dir = folder.dir();
        let files = sbc::write_files(&result, &report, folder)?;
        println!("{} files written to {}", files.len(), dir.display());
        if part.is_some() {
            PartRecord::of_run(&result, args.reps).write(dir)?;
            super::resume::save_invocation(dir, &[])?;
            println!(
                "the part for --merge written to {}",
                dir.join(PART_FILE).display()
            );
        }
    }
    Ok(0)
}

/// The folder of --output claimed for a calibration of parameters `names` (see
/// [`SbcFolder::claim`]), with a line on the files --overwrite removed; None without --output.
fn claim(args: &SbcArgs, names: &[String]) -> Result<Option<SbcFolder>> {
    let Some(dir) = &args.output else {
        return Ok(None);
    };
    let files = sbc::calibration_files(names, args.parts.part().is_some());
    let folder = SbcFolder::claim(dir, files, args.overwrite)?;
    if !folder.removed().is_empty() {
        eprintln!(
            "--overwrite: removed {} files of an earlier calibration from {}",
            folder.removed().len(),
            dir.display()
        );
    }
    Ok(Some(folder))
}

/// Runs the replications of `settings` (all, or a part) with a progress bar.
fn calibrate(
    args: &SbcArgs,
    model: &dyn shmc::Model,
    config: &SampleConfig,
    settings: &SbcSettings,
) -> Result<SbcRun> {
    // Ctrl-C or SIGTERM: no replication starts after it.
    let stop = super::stop::on_signals();
    let bar = progress_bar(args.parts.count.unwrap_or(args.reps), args.quiet);
    let result = sbc::run(
        model,
        config,
        settings,
        &|done| bar.set_position(done as u64),
        Some(stop),
    );
    bar.finish_and_clear();
    result
}

/// The whole run from the parts in the folders of --merge, each checked to have been started
/// with this command's settings (but those of [`PER_PART`]).
fn merged(args: &SbcArgs) -> Result<SbcRun> {
    args.parts.check_settings(1, &PER_PART)?;
    let parts = args
        .parts
        .merge
        .iter()
        .map(|dir| Ok((dir.display().to_string(), PartRecord::read(dir)?)))
        .collect::<Result<Vec<_>>>()?;
    sbc::merge(parts)
}
