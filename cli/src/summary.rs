//! `shmc summary FILES…`: the summary table of existing CmdStan CSVs, one file per chain.

use std::path::PathBuf;

use clap::Args;

use shmc::Result;
use shmc::output::{format_summary, read_stan_csv};
use shmc::report::{Chains, one_run};

/// Arguments of `shmc summary`.
#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// CmdStan CSV files, one per chain.
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
}

/// Runs `shmc summary`. Files that are not one run with the first (another model, data file
/// or columns, or the same file again: see [`one_run`]) are refused, one `error:` line each,
/// before anything is summarized.
pub fn run(args: &SummaryArgs) -> Result<i32> {
    let csvs = args
        .files
        .iter()
        .map(|p| read_stan_csv(p))
        .collect::<Result<Vec<_>>>()?;
    let (csvs, refused) = one_run(csvs);
    if !refused.is_empty() {
        for line in refused {
            eprintln!("error: {line}");
        }
        return Ok(1);
    }
    let approximate = csvs.iter().find_map(|c| c.approximate.clone());
    let interrupted = csvs.iter().any(|c| c.interrupted);
    let unfinished: Vec<PathBuf> = csvs
        .iter()
        .filter(|c| !c.complete && !c.interrupted)
        .map(|c| c.path.clone())
        .collect();
    // A killed run leaves chains of different lengths (a queued chain may have none): summarize
    // the complete part, every usable chain cut to the shortest, and say what was left out.
    let chains = Chains::new(csvs)?;
    for note in &chains.notes {
        eprintln!("note: {note}");
    }
    if let Some(label) = approximate {
        println!("{label}");
    }
    print!("{}", format_summary(&chains.summary(), &chains.totals()));
    if interrupted {
        eprintln!("note: some files record an interrupted run");
    }
    for path in unfinished {
        eprintln!(
            "note: {} has no end block: its chain was killed or failed before the end, and only \
             the draws it finished are read",
            path.display()
        );
    }
    Ok(0)
}
