//! `shmc sbc`: simulation-based calibration of a method on a built-in model's generative form;
//! prints the summary and, with --output, writes the ranks, the histograms and the summary.

use std::path::PathBuf;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::ModelArgs;
use super::method_args::MethodArgs;
use shmc::output::approximate_label;
use shmc::sampler::SampleConfig;
use shmc::sbc::{self, SbcSettings};
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
    /// independent draw.
    #[arg(long, value_name = "T")]
    thin: Option<usize>,
    /// Replications run at once (0: one per core).
    #[arg(long, default_value_t = 0, value_name = "N")]
    jobs: usize,
    /// Master seed; every replication's data and sampler seeds derive from it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Folder for ranks.csv, rank-PARAMETER.svg (one per parameter) and summary.txt.
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

impl SbcArgs {
    fn config(&self) -> Result<SampleConfig> {
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
    let settings = SbcSettings {
        replications: args.reps,
        seed: args.seed,
        thin: args.thin,
        jobs: args.jobs,
    };
    let approximate = config
        .method
        .approximate()
        .then(|| approximate_label(config.method.name(), None));
    if let Some(label) = &approximate {
        eprintln!("{label}");
    }
    // Ctrl-C or SIGTERM: no replication starts after it.
    let stop = super::stop::on_signals();
    let bar = progress_bar(args.reps, args.quiet);
    let result = sbc::run(
        model.as_ref(),
        &config,
        &settings,
        &|done| bar.set_position(done as u64),
        Some(stop),
    );
    bar.finish_and_clear();
    let result = result?;
    let title = format!(
        "{} with {} ({} chain(s) x {} draws after {} warmup, seed {})",
        args.model.model,
        config.method.name(),
        args.chains,
        args.draws,
        args.warmup,
        args.seed
    );
    let report = sbc::format_report(&result, &title, approximate.as_deref());
    print!("{report}");
    if let Some(dir) = &args.output {
        let files = sbc::write_files(&result, &report, dir)?;
        println!("{} files written to {}", files.len(), dir.display());
    }
    Ok(0)
}
