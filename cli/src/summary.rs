//! `shmc summary FILES…`: the summary table of existing CmdStan CSVs, one file per chain.

use std::path::PathBuf;

use clap::Args;

use shmc::Result;
use shmc::output::{StanCsv, format_summary, format_warnings, read_stan_csv};
use shmc::report::{Chains, one_run};

pub(crate) mod shards;

/// Arguments of `shmc summary`.
#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// CmdStan CSV files, one per chain; or run folders: a run's, the shards' of one run
    /// (`shmc sample --chain-id`), or the folder holding the shards' folders. Shards are read
    /// as one run once they are one: the same settings, and chains 1, 2, ... without a gap.
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
}

/// The CSV files `paths` name: files as they are, and each run folder's files in chain order
/// after the folders' shards are checked to be one run ([`shards::folders`]).
fn csv_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let (dirs, mut files): (Vec<PathBuf>, Vec<PathBuf>) =
        paths.iter().cloned().partition(|p| p.is_dir());
    let mut found = Vec::new();
    for dir in shards::folders(&dirs)? {
        found.extend(shmc::report::csv_files(&dir)?);
    }
    found.append(&mut files);
    Ok(found)
}

/// The surrogate transitions `auto` chose, one `W:S` per file in file order (what reruns each
/// chain's draws), if the files name them.
fn transitions_line(csvs: &[StanCsv]) -> Option<String> {
    let chosen: Vec<&str> = csvs
        .iter()
        .filter_map(|c| c.transitions.as_deref())
        .collect();
    (!chosen.is_empty()).then(|| format!("surrogate transitions (auto): {}", chosen.join(", ")))
}

/// Runs `shmc summary`. Files that are not one run with the first (another model, data file
/// or columns, or the same file again: see [`one_run`]) are refused, one `error:` line each,
/// before anything is summarized.
pub fn run(args: &SummaryArgs) -> Result<i32> {
    let csvs = csv_files(&args.files)?
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
    let transitions = transitions_line(&csvs);
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
    if let Some(line) = transitions {
        println!("{line}");
    }
    let summary = chains.summary();
    print!("{}", format_summary(&summary, &chains.totals()));
    print!("{}", format_warnings(&chains.warnings(&summary)));
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
