//! The `shmc` command line: a thin clap layer that parses arguments into the library's plain
//! configuration structs and calls the library (`shmc`). Every failure becomes one line on
//! stderr. [`experiments`] holds the papers' benchmarks that `shmc bench` runs.

mod bench;
pub mod experiments;
mod gp_args;
mod method_args;
pub mod options;
mod progress;
mod report;
mod resume;
mod rmhmc_args;
mod sample;
mod sbc;
mod serve;
mod stop;
mod summary;
mod surrogate_args;
mod train;
mod trajectory_args;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use resume::{command_line, read_invocation};

use shmc::models::{self, ModelSpec};
use shmc::{Error, Result};

/// Surrogate-accelerated Hamiltonian Monte Carlo.
///
/// Samples a posterior with HMC (and, with --method, its surrogate-accelerated variants),
/// writing one CmdStan-format CSV per chain that ArviZ, CmdStanPy and stansummary read.
#[derive(Debug, Parser)]
#[command(name = "shmc", version, about, long_about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Sample a built-in model; write CmdStan CSVs and print a summary.
    Sample(Box<sample::SampleArgs>),
    /// Print the summary table of existing CmdStan CSV files (one per chain).
    Summary(summary::SummaryArgs),
    /// Write a run folder's CSVs as one self-contained HTML page: summary table, traces,
    /// histograms, pairs, acceptance, divergences, evaluations and the surrogate's training.
    Report(report::ReportArgs),
    /// List the built-in models and their parameters.
    Models,
    /// Explore with exact HMC, train a surrogate on the visited states, and save it.
    Train(Box<train::TrainArgs>),
    /// Run the papers' experiments: HMC and the surrogate methods side by side.
    Bench(bench::BenchArgs),
    /// Simulation-based calibration: does a method's posterior put parameters drawn from the
    /// prior at uniform ranks? (Talts et al. 2018)
    Sbc(Box<sbc::SbcArgs>),
    /// Serve a built-in model over UM-Bridge (HTTP) for other tools: its log-density and
    /// gradient, and the elliptic PDE model's forward map as NAME-forward.
    Serve(Box<serve::ServeArgs>),
}

/// Which model, and the data or simulation settings that build it.
#[derive(Debug, Args)]
#[command(next_help_heading = "Model and data (each model's options: shmc models)")]
pub struct ModelArgs {
    /// Built-in model (see `shmc models`).
    #[arg(long)]
    pub model: String,
    /// Data file: CSV with a header, or LIBSVM sparse text (chosen by --format), or a data set
    /// the repository ships, by name (a9a, a9a.t, bank, bank-full.csv); for a served
    /// forward model (--model umbridge --umbridge-output forward) its observations, as numbers
    /// separated by spaces, commas or lines, or a JSON array.
    #[arg(long, value_name = "FILE")]
    pub data: Option<PathBuf>,
    /// Format of --data; by default `csv` (delimited by `,`, `;` or tabs, whichever the header
    /// holds most of) for a .csv or .tsv file and `libsvm` otherwise.
    #[arg(long, value_parser = ["csv", "libsvm"])]
    pub format: Option<String>,
    /// Name of the response column of a CSV file.
    #[arg(long, default_value = "y")]
    pub response: String,
    /// Missing values in a CSV file (an empty field, NA, N/A, NaN, null): an error naming the
    /// column and line, or drop-rows to leave out every row that has one (the count is printed).
    #[arg(long, default_value = "error", value_parser = ["error", "drop-rows"])]
    pub missing: String,
    /// Standardize every feature to mean 0 and sd 1.
    #[arg(long)]
    pub standardize: bool,
    /// Add an intercept column (after standardization and projection).
    #[arg(long)]
    pub intercept: bool,
    /// Project the features to K dimensions with a seeded Gaussian random matrix.
    #[arg(long, value_name = "K")]
    pub project: Option<usize>,
    /// Seed of the random projection.
    #[arg(long, default_value_t = 1)]
    pub projection_seed: u64,
    /// Number of simulated observations (simulated models).
    #[arg(long, value_name = "N")]
    pub n: Option<usize>,
    /// Number of simulated features or dimensions (simulated models).
    #[arg(long, value_name = "D")]
    pub d: Option<usize>,
    /// Seed of the simulated data.
    #[arg(long, default_value_t = 1, alias = "seed-data")]
    pub data_seed: u64,
    /// Prior variance of regression coefficients.
    #[arg(long, value_name = "VAR", allow_negative_numbers = true)]
    pub prior_variance: Option<f64>,
    /// Elements per side of the PDE model's finite-element mesh [default: 30].
    #[arg(long, value_name = "N")]
    pub mesh: Option<usize>,
    /// Karhunen-Loeve modes of the PDE model's coefficient, its dimension [default: 20].
    #[arg(long, value_name = "D")]
    pub kl_modes: Option<usize>,
    /// Prior sd of the PDE model's mode weights [default: 0.5], or of every input of a served
    /// forward model [default: 1].
    #[arg(long, value_name = "SD", allow_negative_numbers = true)]
    pub prior_sd: Option<f64>,
    /// The UM-Bridge server of --model umbridge [default: http://127.0.0.1:4242], or several
    /// instances of the same model, comma-separated (URL,URL,...): each call goes to the one
    /// with the fewest calls in flight; or dir:FOLDER, the instances a cluster engine started
    /// (cluster/shmc_hq.py: HyperQueue tasks), read from FOLDER/url-N.txt.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The served model's name [default: the server's only model].
    #[arg(long, value_name = "NAME")]
    pub umbridge_model: Option<String>,
    /// What the served model outputs: the log-density, or a forward map observed as --data
    /// with Gaussian noise of sd --noise, under the prior N(--prior-mean, --prior-sd^2) on
    /// every input [default: log-density].
    #[arg(long, value_parser = ["log-density", "forward"])]
    pub umbridge_output: Option<String>,
    /// Noise sd of a served forward model's observations.
    #[arg(long, value_name = "SIGMA", allow_negative_numbers = true)]
    pub noise: Option<f64>,
    /// Prior mean of every input of a served forward model [default: 0].
    #[arg(long, value_name = "MEAN", allow_hyphen_values = true)]
    pub prior_mean: Option<f64>,
    /// Seconds to wait for one answer of the served model, its evaluation included
    /// [default: 60].
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub timeout: Option<f64>,
    /// Retries, with doubling backoff from 0.1 s, when the served model cannot be reached,
    /// times out or is busy [default: 3].
    #[arg(long, value_name = "N")]
    pub retries: Option<u32>,
    /// A JSON object sent as the served model's `config` with every call [default: {}].
    #[arg(long, value_name = "JSON")]
    pub umbridge_config: Option<String>,
}

impl ModelArgs {
    /// The model these options describe, its data and mesh within `memory_limit` bytes.
    fn spec(&self, memory_limit: u64) -> ModelSpec {
        ModelSpec {
            name: self.model.clone(),
            data: self.data.clone(),
            format: self.format.clone(),
            response: self.response.clone(),
            missing: if self.missing == "drop-rows" {
                shmc::data::Missing::DropRows
            } else {
                shmc::data::Missing::Error
            },
            standardize: self.standardize,
            intercept: self.intercept,
            project: self.project,
            projection_seed: self.projection_seed,
            n: self.n,
            d: self.d,
            data_seed: self.data_seed,
            prior_variance: self.prior_variance,
            mesh: self.mesh,
            kl_modes: self.kl_modes,
            prior_sd: self.prior_sd,
            served: models::ServedSpec {
                url: self.url.clone(),
                model: self.umbridge_model.clone(),
                output: self.umbridge_output.clone(),
                noise: self.noise,
                prior_mean: self.prior_mean,
                timeout: self.timeout,
                retries: self.retries,
                config: self.umbridge_config.clone(),
            },
            memory_limit,
        }
    }
}

/// The text of `shmc models`: each built-in model, its parameters and its options.
fn catalogue_text() -> String {
    models::CATALOGUE
        .iter()
        .map(|m| {
            let options = match m.options {
                [] => " none".to_string(),
                options => options
                    .iter()
                    .map(|(setting, note)| format!("\n        {} ({note})", flag(setting)))
                    .collect(),
            };
            format!(
                "{}\n    {}\n    parameters: {}\n    options:{options}\n",
                m.name, m.description, m.parameters
            )
        })
        .collect()
}

/// Prints a model's notes: a `warning: ` one on stderr as it is (something to act on, such as
/// a constant column that standardization empties), the others on stdout after `model: `.
fn print_notes(notes: Vec<String>) {
    for note in notes {
        if note.starts_with("warning: ") {
            eprintln!("{note}");
        } else {
            println!("model: {note}");
        }
    }
}

/// The option that sets the library's setting `setting` (`train_after` is `--train-after`).
fn flag(setting: &str) -> String {
    format!("--{}", setting.replace('_', "-"))
}

/// A library error as the command line says it: a setting by the option that sets it.
fn in_cli_terms(error: Error) -> Error {
    match error {
        Error::Setting { setting, problem } => {
            Error::invalid(format!("{} {problem}", flag(setting)))
        }
        Error::MemoryLimit { message, driver } => Error::invalid(format!(
            "{message}: raise --memory-limit or change {}",
            flag(driver)
        )),
        Error::FolderHoldsRun { dir, files } => Error::invalid(format!(
            "{}: holds the files of an earlier run ({files}); a new run would overwrite them: \
             add --overwrite to remove them first (shmc's files only), resume that run if it \
             was stopped (`shmc sample --resume {}`), or choose another --output",
            dir.display(),
            dir.display()
        )),
        other => other,
    }
}

/// Runs the parsed command; returns the process exit code.
pub fn run(cli: Cli) -> Result<i32> {
    let result = match cli.command {
        Command::Sample(args) => sample::run(&args),
        Command::Summary(args) => summary::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Train(args) => train::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Sbc(args) => sbc::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Models => {
            print!("{}", catalogue_text());
            Ok(0)
        }
    };
    result.map_err(in_cli_terms)
}
