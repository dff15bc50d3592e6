//! The `shmc` command line: a thin clap layer that parses arguments into the library's plain
//! configuration structs and calls the library (`shmc`). Every failure becomes one line on
//! stderr. [`experiments`] holds the papers' benchmarks that `shmc bench` runs.

mod bench;
mod bench_sbc;
pub mod experiments;
mod gp_args;
mod method_args;
mod model_args;
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

use clap::{Parser, Subcommand};

pub use model_args::ModelArgs;
pub use resume::{command_line, read_invocation};

use shmc::models;
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
    Bench(Box<bench::BenchArgs>),
    /// Simulation-based calibration: does a method's posterior put parameters drawn from the
    /// prior at uniform ranks? (Talts et al. 2018)
    Sbc(Box<sbc::SbcArgs>),
    /// Serve a built-in model over UM-Bridge (HTTP) for other tools: its log-density and
    /// gradient, and the elliptic PDE model's forward map as NAME-forward.
    Serve(Box<serve::ServeArgs>),
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
                    .map(|o| {
                        let value = o.value.map(|v| format!(" {v}")).unwrap_or_default();
                        format!("\n        {}{value} ({})", flag(o.setting), o.note)
                    })
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
        Error::FolderHoldsRun {
            dir,
            files,
            resumable,
        } => Error::invalid(format!(
            "{}: holds the files of an earlier run ({files}); a new run would overwrite them: \
             add --overwrite to remove them first (shmc's files only), {}or choose another \
             --output",
            dir.display(),
            match resumable {
                true => format!(
                    "resume that run if it was stopped (`shmc sample --resume {}`), ",
                    dir.display()
                ),
                false => String::new(),
            }
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
