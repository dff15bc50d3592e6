//! `shmc bench`: the papers' experiments side by side (see [`crate::experiments`]).

use std::path::PathBuf;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use clap::Args;

use crate::bench_sbc::BenchSbcArgs;
use crate::experiments::figure3::{
    FIGURE3_METHODS, Figure3, format_figure3, plot_figure3, run_figure3,
};
use crate::experiments::grid::{
    PARTS, format_lengths, format_problems, format_sweep, run_lengths, run_problems, run_sweep,
};
use crate::experiments::posteriordb::{
    DEFAULT_ROWS, PosteriordbSettings, ROWS, format_posteriordb, run_posteriordb,
};
use crate::experiments::sbc::{SbcBenchSettings, format_sbc_table};
use crate::experiments::surrogates::{Figure1, format_figure1, plot_figure1, run_figure1};
use crate::experiments::vhmc::{format_vhmc_table, plot_errors, run_vhmc};
use crate::experiments::{
    BenchSettings, Experiment, GP_KEYS, METHOD_KEYS, format_table, run_experiment,
};
use shmc::models::elliptic_pde::PdeSettings;
use shmc::{Error, Result};

/// Arguments of `shmc bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The experiment: the logistic-regression simulation, Bank Marketing, a9a, or the elliptic
    /// PDE inverse problem (30x30 mesh, 20 modes; every exact U is a finite-element solve), or
    /// pde-fine, the same problem on a 120x120 mesh with data simulated on a 200x200 one (one
    /// solve costs tens of milliseconds; rows hmc, mlda over 30x30 and 60x60, mlda-net,
    /// all-in, transitions and nuts, each 500 burn-in or warmup and 1000 draws per chain), or
    /// the precomputing paper's grid experiments (grid HMC and sgHMC against HMC and RNS-HMC on
    /// its four problems, grid HMC's force read on the paper's cells as published, constant per
    /// cell, and multilinearly from their corners; the banana in two forms: its U summed over
    /// its 100 points as the paper writes it, and from sufficient statistics; every method at
    /// the step size and fixed trajectory length at which pilot HMC accepts and mixes as the
    /// paper's HMC did; then the summed banana's grid speed-ups at fixed lengths of 5 to 40
    /// steps, and the dimension sweep), time to result
    /// (seconds until every parameter's bulk and tail ESS reach 400, for NUTS, exact HMC and
    /// RNS-HMC with surrogate-driven warmup, on lr-sim, bank, a9a, pde and pde-fine), or
    /// UM-Bridge (the protocol's overhead per evaluation on loopback, 4 chains against a served PDE model with
    /// 1 and 2 workers, and served calls per effective sample of HMC and RNS-HMC), or the VHMC
    /// paper's comparison (exact HMC, VHMC with the exact and the published, APPROXIMATE,
    /// acceptance, and SGLD, APPROXIMATE: relative error of the posterior mean and variance
    /// against a long exact HMC reference, as a function of wall seconds, on beta-binomial,
    /// probit, a9a and simulated ICA), or simulation-based calibration's full table (every
    /// built-in model with a generative form, at a size where a replication takes well under a
    /// second, x every method that applies to it, 200 replications per cell, 30 with --quick;
    /// approximate methods labelled; see --models, --methods and --jobs), or the journal's
    /// Figure 1 with its Gaussian-process baselines (U = x^2/2 fitted from 10, 20, 40 points by
    /// the full GP, FITC with 5 inducing points and networks of 5 softplus and 5 RBF units;
    /// 100 fits averaged, 20 with --quick; --plots draws the curves) and Figure 3 (see
    /// --figure), or posteriordb: the reference posteriors of a posteriordb checkout (see
    /// --posteriordb), each Stan program compiled once and sampled by shmc's NUTS (diagonal
    /// and low-rank), RNS-HMC with its defaults and nutpie on the same library, every
    /// parameter checked against the reference draws: mean within 4 combined MCSE, sd within
    /// 4 standard errors, R-hat at most 1.01, bulk and tail ESS at least 400; with gradients
    /// and seconds to ESS 400, warmup included.
    #[arg(value_parser = ["lr-sim", "bank", "a9a", "pde", "pde-fine", "grid", "ttr", "umbridge", "vhmc", "sbc", "surrogates", "posteriordb"])]
    experiment: String,
    /// A smaller run, several times faster: fewer observations, replicates, iterations and
    /// hidden units.
    #[arg(long)]
    quick: bool,
    /// Also write the rows as a JSON array to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Folder with the real data sets as the repository ships them (bank-additional-full.csv.gz,
    /// a9a.gz). Default: $SHMC_DATA_DIR if set, else the data/ folder of the source tree shmc
    /// was built from.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Seed of the chains and networks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Override the step size: the paper's on lr-sim; 0.008 on bank and 0.003 on a9a, where
    /// the papers' 0.012 is unstable on our preprocessing (bank accepts 0.41, a9a nothing).
    #[arg(long, value_name = "EPS", allow_negative_numbers = true)]
    step_size: Option<f64>,
    /// Override the papers' maximum number of leapfrog steps.
    #[arg(long)]
    steps: Option<u32>,
    /// Override the papers' number of hidden units s (a network holds a d-dimensional
    /// quadratic only with s ≥ d(d + 1)/2).
    #[arg(long, value_name = "S")]
    hidden: Option<usize>,
    /// Run only these rows, comma-separated: hmc, rns, rns-score, arns, rns-long (RNS-HMC
    /// with 4x longer surrogate trajectories), rns-auto (with the lengths its curvature picks),
    /// gp and fitc (RNS-HMC with a full Gaussian process or FITC of 500 inducing points as its
    /// surrogate, on the same burn-in; only when named here or with --with-gp),
    /// mlda (pde: multilevel delayed acceptance over 10x10 and 15x15 meshes, pde-fine: over 30x30
    /// and 60x60, subchains 4,2; starting at the prior mean, its burn-in judged by the finer
    /// coarse mesh), mlda-net (the same with RNS-HMC's network below the meshes, subchains
    /// 4,4,2),
    /// all-in (4 chains in lockstep on a network trained on the Laplace approximation, with
    /// NUTS's trees on it, each draw judged by delayed acceptance against the exact U, or on the
    /// PDE the trajectory lengths its curvature picks; adapted step size; timed from the MAP
    /// search to the last draw, as nutpie's figure is), transitions (the same run with
    /// surrogate transitions between exact judgements: on pde and pde-fine `auto`, which picks
    /// the sampling k per chain at the end of warmup and prints it, in the JSON as
    /// transitions_k "W:S"; elsewhere 3) and nuts (nutpie's NUTS on the same
    /// kernel, 4 chains, timed likewise). Default: all of them, all-in and nuts on lr-sim and pde
    /// only. Speed-ups need the hmc row. sbc: run only these methods: hmc, nuts, rns-hmc,
    /// rns-hmc-auto (trajectory lengths from the network's curvature), rns-hmc-nuts (NUTS's trees
    /// on the network, delayed acceptance), rns-hmc-transitions (3 HMC transitions on the
    /// network per exact judgement), gp-hmc and fitc-hmc (a full GP or FITC with 60 inducing
    /// points as the surrogate), mlda and mlda-network (on the PDE: 4x4 and 6x6 meshes under
    /// its 8x8, and a network below them), arns-hmc, vhmc, vhmc-approximate, rmhmc, rns-rmhmc,
    /// grid-hmc, grid-hmc-multilinear (the force read from the cells' corners),
    /// grid-hmc-complete, sg-hmc, sg-hmc-complete.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    methods: Option<Vec<String>>,
    /// grid: run only these parts: logistic-2d, banana (both forms), gp-hyper, pde-5, lengths
    /// (the summed banana against the trajectory length), sweep (the dimension sweep). ttr:
    /// run only these problems: lr-sim, bank, a9a, pde, pde-fine. Default: all of them.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    problems: Option<Vec<String>>,
    /// sbc: run only these models: gaussian-conjugate, gaussian-32, banana, beta-binomial,
    /// logistic, probit, gp-hyper, elliptic-pde.
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = clap::builder::PossibleValuesParser::new(crate::experiments::sbc::models()))]
    models: Option<Vec<String>>,
    /// sbc: replications run at once (0: one per core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// nutpie's min ESS_bulk per second on this machine, which the all-in row is compared
    /// with: run `python host/benches/nutpie_lr_sim.py` (it needs nutpie and pymc from PyPI).
    /// Default: the 43.8, measured on a 2-core AMD EPYC.
    #[arg(long, value_name = "RATE", allow_negative_numbers = true)]
    nutpie: Option<f64>,
    /// surrogates: --figure and --training-sizes (boxed: they keep `shmc`'s command enum
    /// small).
    #[command(flatten)]
    figures: Box<FigureArgs>,
    /// sbc: the table in parts, as `shmc sbc`'s (boxed, as --figure's).
    #[command(flatten)]
    sbc: Box<BenchSbcArgs>,
    /// posteriordb: the checkout and the runs' sizes (boxed, as --figure's).
    #[command(flatten)]
    posteriordb: Box<PosteriordbArgs>,
    /// lr-sim, bank, a9a, pde: also run RNS-HMC with a full Gaussian process (gp row) and
    /// with FITC of 500 inducing points (fitc row) as its surrogate, beside the network (the
    /// rows --methods gp,fitc picks; off by default: the full GP's fit is O(n^3) in the
    /// burn-in's states).
    #[arg(long)]
    with_gp: bool,
    /// Also draw figures as SVG files in DIR (created if needed). vhmc: one per problem of
    /// error against seconds. lr-sim, bank, a9a: the random-bases journal's figures from this
    /// run: Fig. 6 (HMC vs RNS-HMC marginals, needs the hmc and rns
    /// rows), Fig. 8 (relative error of the mean vs elapsed seconds, HMC, RNS-HMC, ARNS-HMC and
    /// NUTS), and Figs. 5 and 4 (RNS-HMC acceptance vs training states and vs hidden units,
    /// networks fitted on the hmc row's burn-in, extra runs timed in the log); lr-sim also
    /// draws Fig. 4's acceptance vs dimension (RNS-HMC and HMC on simulated logistic
    /// regressions of d = 10 to 100, 10 to 70 with --quick, each with its own HMC burn-in and
    /// fit, timed in the log).
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
}

/// `bench surrogates`' choice of figures and Figure 3's training sizes.
#[derive(Debug, Args)]
pub struct FigureArgs {
    /// surrogates: which of the journal's figures, 1, 3 or all (default). Figure 3 (the 32-D
    /// Gaussian, one shared step size; the full GP, FITC with 1000 inducing points and
    /// networks of 1000 softplus and RBF units; training seconds, acceptance and mean ESS per
    /// second; medians and 80% bands over 10 runs at 100, 200, 400 and 800 training states, 3
    /// runs at 50, 100, 200 with --quick). Measured on a loaded 2-core machine: sizes 100-400
    /// take about 10 minutes, and 800 adds about an hour (ten FITC fits of 4-5 minutes each);
    /// --quick takes about 40 seconds.
    #[arg(long, value_name = "FIGURE")]
    pub figure: Option<String>,
    /// surrogates, Figure 3: the training sizes, comma-separated, increasing (default
    /// 100,200,400,800; 50,100,200 with --quick). --methods picks its surrogates: gp,
    /// fitc-1000, rns-softplus-1000, rns-rbf-1000.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub training_sizes: Option<Vec<usize>>,
}

/// `bench posteriordb`'s checkout, posteriors and run sizes.
#[derive(Debug, Args)]
pub struct PosteriordbArgs {
    /// posteriordb: the checkout (its posterior_database/ folder, or the folder holding it),
    /// in the database's own layout: posteriors/*.json, models/stan/*.stan,
    /// data/data/*.json.zip, reference_posteriors/draws/draws/*.json.zip. The Stan programs
    /// are compiled with the toolchain `--model stan` finds (SHMC_STAN_HOME, else the httpstan
    /// package of SHMC_PYTHON or python3) and cached; nutpie's rows run in that interpreter
    /// (pip install nutpie).
    #[arg(long, value_name = "DIR")]
    pub posteriordb: Option<PathBuf>,
    /// posteriordb: run only these posteriors (default: every one with reference draws).
    /// --methods picks the rows: auto, nuts, nuts-low-rank, nuts-laplace, rns-hmc, nutpie,
    /// nutpie-low-rank (default: auto, nuts, nuts-low-rank, rns-hmc, nutpie-low-rank).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub posteriors: Option<Vec<String>>,
    /// posteriordb: chains per row.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub chains: usize,
    /// posteriordb: warmup iterations per chain.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub warmup: usize,
    /// posteriordb: kept draws per chain.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub draws: usize,
    /// posteriordb: the most bytes a file of the database or a run's draws may take
    /// (default: half of this machine's memory).
    #[arg(long, value_name = "BYTES")]
    pub memory_limit: Option<u64>,
}

impl BenchArgs {
    /// The folder the real data sets are read from.
    fn data_dir(&self) -> PathBuf {
        self.data_dir.clone().unwrap_or_else(shmc::data::data_dir)
    }
}

/// Runs `shmc bench`.
pub fn run(args: &BenchArgs) -> Result<i32> {
    check_experiment_flags(args)?;
    if args.experiment == "posteriordb" {
        return run_posteriordb_bench(args);
    }
    if args.experiment == "sbc" {
        return run_sbc(args);
    }
    if args.experiment == "surrogates" {
        return run_surrogates(args);
    }
    if args.models.is_some() || args.jobs.is_some() {
        return Err(Error::invalid("--models and --jobs are for bench sbc"));
    }
    if let Some(unknown) = args
        .methods
        .iter()
        .flatten()
        .find(|m| !METHOD_KEYS.contains(&m.as_str()))
    {
        return Err(Error::invalid(format!(
            "--methods: no row {unknown:?}; the rows are {}",
            METHOD_KEYS.join(", ")
        )));
    }
    if args.experiment == "grid" {
        return run_grid(args);
    }
    if args.experiment == "ttr" {
        return run_ttr(args);
    }
    if args.experiment == "umbridge" {
        return run_umbridge(args);
    }
    if args.experiment == "vhmc" {
        return run_vhmc_bench(args);
    }
    let experiment = match args.experiment.as_str() {
        "lr-sim" => Experiment::LrSim,
        "bank" => Experiment::Bank,
        "pde" => Experiment::Pde,
        "pde-fine" => Experiment::PdeFine,
        _ => Experiment::A9a,
    };
    let settings = table_settings(args, experiment)?;
    eprintln!(
        "{}: step size {}, steps 1..={}, burn-in {} (training after {}), {} draws, {} hidden units, \
         {} cores; RMHMC rows: step size {}, {} steps",
        args.experiment,
        settings.step_size,
        settings.steps,
        settings.burn_in,
        settings.train_after,
        settings.draws,
        settings.hidden,
        std::thread::available_parallelism().map_or(1, usize::from),
        settings.rmhmc_step_size,
        settings.rmhmc_steps
    );
    let rows = run_experiment(experiment, &settings, args.quick, &|m| eprintln!("{m}"))?;
    print!("{}", format_table(&rows));
    write_json(args, &rows)?;
    Ok(0)
}

/// Refuses the flags that belong to another experiment than the one asked for.
fn check_experiment_flags(args: &BenchArgs) -> Result<()> {
    let p = &args.posteriordb;
    let sizes_given = p.chains != 4 || p.warmup != 1000 || p.draws != 1000;
    if (p.posteriordb.is_some()
        || p.posteriors.is_some()
        || p.memory_limit.is_some()
        || sizes_given)
        && args.experiment != "posteriordb"
    {
        return Err(Error::invalid(
            "--posteriordb, --posteriors, --chains, --warmup, --draws and --memory-limit are for \
             bench posteriordb",
        ));
    }
    if args.problems.is_some() && !["grid", "ttr"].contains(&args.experiment.as_str()) {
        return Err(Error::invalid("--problems is for bench grid and bench ttr"));
    }
    if (args.figures.figure.is_some() || args.figures.training_sizes.is_some())
        && args.experiment != "surrogates"
    {
        return Err(Error::invalid(
            "--figure and --training-sizes are for bench surrogates",
        ));
    }
    if args.sbc.given() && args.experiment != "sbc" {
        return Err(Error::invalid(
            "--first-replication, --count, --merge and --output are for bench sbc",
        ));
    }
    if args.with_gp && !matches!(args.experiment.as_str(), "lr-sim" | "bank" | "a9a" | "pde") {
        return Err(Error::invalid(
            "--with-gp is for bench lr-sim, bank, a9a and pde",
        ));
    }
    Ok(())
}

/// The settings of a Table 1 experiment (lr-sim, bank, a9a, pde, pde-fine): its own, with the
/// flags' overrides, each checked.
fn table_settings(args: &BenchArgs, experiment: Experiment) -> Result<BenchSettings> {
    let mut settings = experiment.settings(args.quick, args.data_dir());
    settings.seed = args.seed;
    if let Some(hidden) = args.hidden {
        if hidden == 0 {
            return Err(Error::invalid("--hidden must be at least 1"));
        }
        settings.hidden = hidden;
    }
    if let Some(methods) = &args.methods {
        settings.methods = methods.clone();
    }
    if args.with_gp {
        for key in GP_KEYS {
            if !settings.methods.iter().any(|m| m == key) {
                settings.methods.push(key.to_string());
            }
        }
    }
    if let Some(eps) = args.step_size {
        if !(eps.is_finite() && eps > 0.0) {
            return Err(Error::invalid(
                "--step-size must be a finite positive number",
            ));
        }
        settings.step_size = eps;
    }
    if let Some(rate) = args.nutpie {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(Error::invalid("--nutpie must be a finite positive rate"));
        }
        settings.nutpie_rate = rate;
    }
    if let Some(steps) = args.steps {
        if steps == 0 {
            return Err(Error::invalid("--steps must be at least 1"));
        }
        settings.steps = steps;
    }
    if args.plots.is_some() && matches!(experiment, Experiment::Pde | Experiment::PdeFine) {
        return Err(Error::invalid(
            "--plots draws the journal's figures for lr-sim, bank and a9a",
        ));
    }
    settings.plots = args.plots.clone();
    Ok(settings)
}

/// `shmc bench vhmc`: the table, the verdicts, the JSON rows and the plots.
fn run_vhmc_bench(args: &BenchArgs) -> Result<i32> {
    let bench = run_vhmc(args.quick, &args.data_dir(), args.seed, &|m| {
        eprintln!("{m}")
    })?;
    print!("{}", format_vhmc_table(&bench.rows));
    println!(
        "sgld and vhmc-approximate are APPROXIMATE inference (no exact Metropolis-Hastings \
         correction); errors are against the exact HMC reference"
    );
    for line in &bench.verdicts {
        println!("{line}");
    }
    write_json(args, &bench.rows)?;
    if let Some(dir) = &args.plots {
        for path in plot_errors(dir, &bench.rows)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(0)
}

/// `shmc bench surrogates`: Figures 1 and 3 (or the one `--figure` names): tables, JSON rows
/// (one array; `problem` tells the figures apart) and SVGs.
fn run_surrogates(args: &BenchArgs) -> Result<i32> {
    if args.step_size.is_some()
        || args.steps.is_some()
        || args.hidden.is_some()
        || args.nutpie.is_some()
        || args.models.is_some()
        || args.jobs.is_some()
    {
        return Err(Error::invalid(
            "bench surrogates runs the journal's settings: it takes --quick, --seed, --json, \
             --plots, --figure, and for Figure 3 --training-sizes and --methods",
        ));
    }
    let (one, three) = figures_asked(args)?;
    let figure3 = figure3_settings(args, three)?;
    let mut rows: Vec<serde_json::Value> = Vec::new();
    if one {
        let figure1 = Figure1::new(args.quick, args.seed);
        let fits = run_figure1(&figure1, &|m| eprintln!("{m}"))?;
        print!("{}", format_figure1(&fits));
        rows.extend(fits.iter().map(to_json).collect::<Result<Vec<_>>>()?);
        if let Some(dir) = &args.plots {
            eprintln!("wrote {}", plot_figure1(dir, &fits, &figure1)?.display());
        }
    }
    if let Some(figure3) = figure3 {
        let runs = run_figure3(&figure3, &|m| eprintln!("{m}")).map_err(figure3_memory)?;
        print!("{}", format_figure3(&runs));
        rows.extend(runs.iter().map(to_json).collect::<Result<Vec<_>>>()?);
        if let Some(dir) = &args.plots {
            eprintln!("wrote {}", plot_figure3(dir, &runs)?.display());
        }
    }
    write_json(args, &rows)?;
    Ok(0)
}

/// Which figures `--figure` asks for: (Figure 1, Figure 3).
fn figures_asked(args: &BenchArgs) -> Result<(bool, bool)> {
    match args.figures.figure.as_deref() {
        None | Some("all") => Ok((true, true)),
        Some("1") => Ok((true, false)),
        Some("3") => Ok((false, true)),
        Some(other) => Err(Error::invalid(format!(
            "--figure: no figure {other:?}; bench surrogates draws 1, 3 or all"
        ))),
    }
}

/// Figure 3's settings when it runs, with `--training-sizes` checked: each at least 1, in
/// increasing order, and the largest within the memory limit (half this machine's memory).
fn figure3_settings(args: &BenchArgs, runs: bool) -> Result<Option<Figure3>> {
    let sizes = args.figures.training_sizes.as_ref();
    if !runs {
        return match (sizes, &args.methods) {
            (None, None) => Ok(None),
            _ => Err(Error::invalid(
                "--training-sizes and --methods are for Figure 3 (--figure 3 or all)",
            )),
        };
    }
    let limit = shmc::memory::machine_default_limit();
    let mut settings = Figure3::new(args.quick, args.seed, limit);
    if let Some(methods) = &args.methods {
        settings.methods = figure3_methods(methods)?;
    }
    if let Some(sizes) = sizes {
        if let Some(zero) = sizes.iter().position(|&n| n == 0) {
            return Err(Error::invalid(format!(
                "--training-sizes: entry {} is 0; a surrogate needs at least 1 training state",
                zero + 1
            )));
        }
        if let Some(w) = sizes.windows(2).find(|w| w[1] <= w[0]) {
            return Err(Error::invalid(format!(
                "--training-sizes must increase: {} after {}",
                w[1], w[0]
            )));
        }
        settings.sizes = sizes.clone();
    }
    settings.check_memory().map_err(figure3_memory)?;
    Ok(Some(settings))
}

/// Figure 3's surrogates `--methods` names, each one of [`FIGURE3_METHODS`].
fn figure3_methods(names: &[String]) -> Result<Vec<&'static str>> {
    names
        .iter()
        .map(|name| {
            FIGURE3_METHODS
                .iter()
                .find(|m| *m == name)
                .copied()
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "--methods: Figure 3 has no surrogate {name:?}; it has {}",
                        FIGURE3_METHODS.join(", ")
                    ))
                })
        })
        .collect()
}

/// A memory refusal of Figure 3 in the bench's terms: its training sizes drive the sizes.
fn figure3_memory(error: Error) -> Error {
    match error {
        Error::MemoryLimit { message, .. } => Error::invalid(format!(
            "{message} (half this machine's memory): lower --training-sizes"
        )),
        other => other,
    }
}

/// One row as JSON.
fn to_json<T: serde::Serialize>(row: &T) -> Result<serde_json::Value> {
    serde_json::to_value(row).map_err(|e| Error::invalid(format!("cannot encode the results: {e}")))
}

/// Writes `rows` to `--json FILE`, if given.
fn write_json<T: serde::Serialize>(args: &BenchArgs, rows: &[T]) -> Result<()> {
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(rows)
            .map_err(|e| Error::invalid(format!("cannot encode the results: {e}")))?;
        std::fs::write(path, text).map_err(|e| Error::io(path, e))?;
    }
    Ok(())
}

/// Runs `shmc bench posteriordb`: the table, each method's count of posteriors passed, the JSON
/// rows.
fn run_posteriordb_bench(args: &BenchArgs) -> Result<i32> {
    let p = &args.posteriordb;
    let Some(dir) = &p.posteriordb else {
        return Err(Error::invalid(
            "bench posteriordb needs --posteriordb DIR, a posteriordb checkout",
        ));
    };
    let other = args.step_size.is_some()
        || args.steps.is_some()
        || args.hidden.is_some()
        || args.nutpie.is_some()
        || args.plots.is_some()
        || args.quick
        || args.with_gp
        || args.problems.is_some()
        || args.models.is_some()
        || args.jobs.is_some();
    if other {
        return Err(Error::invalid(
            "bench posteriordb runs each method with its defaults: of the other flags it takes \
             --methods, --seed and --json",
        ));
    }
    let keys: Vec<&str> = ROWS.iter().map(|(key, _)| *key).collect();
    let rows = match &args.methods {
        Some(methods) => {
            if let Some(unknown) = methods.iter().find(|m| !keys.contains(&m.as_str())) {
                return Err(Error::invalid(format!(
                    "--methods: bench posteriordb has no row {unknown:?}; its rows are {}",
                    keys.join(", ")
                )));
            }
            methods.clone()
        }
        None => DEFAULT_ROWS.map(String::from).to_vec(),
    };
    for (name, n, least) in [
        ("chains", p.chains, 1),
        ("warmup", p.warmup, 1),
        ("draws", p.draws, 4),
    ] {
        if n < least {
            return Err(Error::invalid(format!("--{name} must be at least {least}")));
        }
    }
    let settings = PosteriordbSettings {
        dir: dir.clone(),
        posteriors: p.posteriors.clone(),
        rows,
        chains: p.chains,
        warmup: p.warmup,
        draws: p.draws,
        seed: args.seed,
        memory_limit: p
            .memory_limit
            .unwrap_or_else(shmc::memory::machine_default_limit),
    };
    let rows = run_posteriordb(&settings, &|m| eprintln!("{m}"))?;
    print!("{}", format_posteriordb(&rows));
    write_json(args, &rows)?;
    Ok(0)
}

/// Runs `shmc bench sbc`: the table, the labels of the approximate methods, the JSON rows.
fn run_sbc(args: &BenchArgs) -> Result<i32> {
    if args.step_size.is_some()
        || args.steps.is_some()
        || args.hidden.is_some()
        || args.nutpie.is_some()
        || args.plots.is_some()
    {
        return Err(Error::invalid(
            "bench sbc runs each method as configured for each model: --step-size, --steps, \
             --hidden, --nutpie and --plots are for the other experiments",
        ));
    }
    let settings = SbcBenchSettings {
        quick: args.quick,
        seed: args.seed,
        jobs: args.jobs.unwrap_or(0),
        models: args.models.clone().unwrap_or_default(),
        methods: args.methods.clone().unwrap_or_default(),
        part: None,
    };
    let rows = crate::bench_sbc::rows(settings, &args.sbc, &|m| eprintln!("{m}"))?;
    print!("{}", format_sbc_table(&rows));
    write_json(args, &rows)?;
    Ok(0)
}

/// The names `--problems` picks among `known` (all of them without it), or one line naming
/// the first unknown one, `what` it is not, and the known ones.
fn picked_problems<'a>(
    problems: &'a Option<Vec<String>>,
    what: &str,
    known: &[&'a str],
) -> Result<Vec<&'a str>> {
    let Some(list) = problems else {
        return Ok(known.to_vec());
    };
    if let Some(unknown) = list.iter().find(|p| !known.contains(&p.as_str())) {
        return Err(Error::invalid(format!(
            "--problems: {what} \"{unknown}\"; it has {}",
            known.join(", ")
        )));
    }
    Ok(list.iter().map(String::as_str).collect())
}

/// Runs `shmc bench ttr` on its problems (`--problems`: some of them).
fn run_ttr(args: &BenchArgs) -> Result<i32> {
    if args.methods.is_some()
        || args.step_size.is_some()
        || args.steps.is_some()
        || args.nutpie.is_some()
        || args.plots.is_some()
    {
        return Err(Error::invalid(
            "bench ttr runs NUTS, exact HMC and its surrogate configuration with adapted step \
             sizes: --methods, --step-size, --steps, --nutpie and --plots are for the other \
             experiments",
        ));
    }
    let log = |m: &str| eprintln!("{m}");
    let all = [
        Experiment::LrSim,
        Experiment::Bank,
        Experiment::A9a,
        Experiment::Pde,
        Experiment::PdeFine,
    ];
    let names = all.map(Experiment::name);
    let picked = picked_problems(&args.problems, "bench ttr has no problem", &names)?;
    let experiments: Vec<Experiment> = all
        .into_iter()
        .filter(|e| picked.contains(&e.name()))
        .collect();
    let rows = crate::experiments::ttr::run_ttr(
        &experiments,
        args.quick,
        args.data_dir(),
        args.seed,
        &log,
    )?;
    print!("{}", crate::experiments::ttr::format_ttr(&rows));
    write_json(args, &rows)?;
    Ok(0)
}

/// Runs `shmc bench grid`: the problems (the banana in both forms), the summed banana against
/// the trajectory length, then the dimension sweep; `--json` gets every row of the three (the
/// lengths' with `problem` `banana-sum-steps-L`, the sweep's `sweep-dN`).
fn run_grid(args: &BenchArgs) -> Result<i32> {
    if args.methods.is_some()
        || args.step_size.is_some()
        || args.steps.is_some()
        || args.hidden.is_some()
        || args.nutpie.is_some()
        || args.plots.is_some()
    {
        return Err(Error::invalid(
            "bench grid runs HMC, RNS-HMC and the grid method with the step size and trajectory \
             length pilots of HMC find and each problem's network: --methods, --step-size, \
             --steps, --hidden, --nutpie and --plots are for the other experiments",
        ));
    }
    let log = |m: &str| eprintln!("{m}");
    let parts = picked_problems(&args.problems, "bench grid has no part", &PARTS)?;
    let mut rows = run_problems(args.quick, args.seed, &parts, &log)?;
    let mut tables = Vec::new();
    if !rows.is_empty() {
        tables.push(format_problems(&rows));
    }
    if parts.contains(&"lengths") {
        let length_rows = run_lengths(args.quick, args.seed, &log)?;
        tables.push(format_lengths(&length_rows));
        rows.extend(length_rows);
    }
    if parts.contains(&"sweep") {
        let (sweep, sweep_rows) = run_sweep(args.quick, args.seed, &log)?;
        tables.push(format_sweep(&sweep));
        rows.extend(sweep_rows);
    }
    print!("{}", tables.join("\n"));
    write_json(args, &rows)?;
    Ok(0)
}

/// Runs `shmc bench umbridge`: its servers are this very binary's `shmc serve`.
fn run_umbridge(args: &BenchArgs) -> Result<i32> {
    if args.methods.is_some()
        || args.step_size.is_some()
        || args.steps.is_some()
        || args.hidden.is_some()
        || args.nutpie.is_some()
        || args.json.is_some()
        || args.plots.is_some()
    {
        return Err(Error::invalid(
            "bench umbridge takes only --quick and --seed",
        ));
    }
    let exe = std::env::current_exe()
        .map_err(|e| Error::invalid(format!("cannot find the shmc binary: {e}")))?;
    let start = |pde: &PdeSettings, workers: usize| {
        let args = [
            "--model".to_string(),
            "elliptic-pde".into(),
            "--mesh".into(),
            pde.mesh.to_string(),
            "--kl-modes".into(),
            pde.modes.to_string(),
            "--workers".into(),
            workers.to_string(),
        ];
        let server = ServeProcess::start(&exe, &args)?;
        Ok((
            server.url.clone(),
            Box::new(server) as Box<dyn std::any::Any>,
        ))
    };
    let report = crate::experiments::umbridge::run_umbridge(&start, args.quick, args.seed, &|m| {
        eprintln!("{m}")
    })?;
    print!("{report}");
    Ok(0)
}

/// A `shmc serve` child process, killed when dropped.
struct ServeProcess {
    child: Child,
    url: String,
}

impl ServeProcess {
    /// Starts `exe serve ARGS --port 0` and reads the URL it prints.
    fn start(exe: &Path, args: &[String]) -> Result<Self> {
        let mut child = Command::new(exe)
            .arg("serve")
            .args(args)
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::invalid(format!("cannot start {} serve: {e}", exe.display())))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let url = lines
            .by_ref()
            .take(20)
            .map_while(|l| l.ok())
            .find_map(|line| {
                let start = line.find("http://")?;
                line[start..].split_whitespace().next().map(str::to_string)
            });
        // Keep reading so that the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let mut process = Self {
            child,
            url: String::new(),
        };
        process.url =
            url.ok_or_else(|| Error::invalid("shmc serve did not say where it listens"))?;
        Ok(process)
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
