//! `shmc summary FILES…`: the summary table of existing CmdStan CSVs, one file per chain.

use std::path::PathBuf;

use clap::Args;

use crate::diagnostics::summarize;
use crate::output::{RunTotals, format_summary, read_stan_csv};
use crate::sampler::{MIN_SUMMARY_DRAWS as MIN_DRAWS, SAMPLER_COLUMNS};
use crate::{Error, Result};

/// Arguments of `shmc summary`.
#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// CmdStan CSV files, one per chain.
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
}

/// Runs `shmc summary`.
pub fn run(args: &SummaryArgs) -> Result<i32> {
    let csvs = args
        .files
        .iter()
        .map(|p| read_stan_csv(p))
        .collect::<Result<Vec<_>>>()?;
    let first = &csvs[0];
    for csv in &csvs[1..] {
        if csv.names != first.names {
            return Err(Error::invalid(format!(
                "{} has other columns than {}",
                csv.path.display(),
                first.path.display()
            )));
        }
    }
    // A killed run leaves chains of different lengths (a queued chain may have none): summarize
    // the complete part, every usable chain cut to the shortest, and say what was left out.
    let length = |c: &crate::output::StanCsv| c.columns.first().map_or(0, Vec::len);
    let (usable, short): (Vec<_>, Vec<_>) = csvs.iter().partition(|c| length(c) >= MIN_DRAWS);
    for c in &short {
        eprintln!(
            "note: {} has {} draws, fewer than the {MIN_DRAWS} a summary needs: left out",
            c.path.display(),
            length(c)
        );
    }
    let Some(draws) = usable.iter().map(|c| length(c)).min() else {
        let longest = csvs.iter().max_by_key(|c| length(c)).unwrap_or(first);
        return Err(Error::invalid(format!(
            "{}: only {} draws, the most of any file; a summary needs at least {MIN_DRAWS} per chain",
            longest.path.display(),
            length(longest)
        )));
    };
    for c in usable.iter().filter(|c| length(c) > draws) {
        eprintln!(
            "note: {}: its last {} draws left out, to the common length {draws}",
            c.path.display(),
            length(c) - draws
        );
    }
    let first = usable[0];
    // lp__ and the parameters, as stansummary shows them.
    let shown: Vec<usize> = (0..first.names.len())
        .filter(|&k| {
            first.names[k] == "lp__" || !SAMPLER_COLUMNS.contains(&first.names[k].as_str())
        })
        .collect();
    let names: Vec<String> = shown.iter().map(|&k| first.names[k].clone()).collect();
    let chains: Vec<Vec<Vec<f64>>> = usable
        .iter()
        .map(|c| {
            shown
                .iter()
                .map(|&k| c.columns[k][..draws].to_vec())
                .collect()
        })
        .collect();
    let column_sum = |name: &str| -> f64 {
        usable
            .iter()
            .filter_map(|c| c.column(name))
            .map(|col| col[..draws].iter().sum::<f64>())
            .sum()
    };
    let totals = RunTotals {
        chains: usable.len(),
        draws,
        mean_accept_stat: column_sum("accept_stat__") / (draws * usable.len()) as f64,
        divergences: column_sum("divergent__") as usize,
        sampling_seconds: None,
        wall_seconds: None,
    };
    if let Some(label) = csvs.iter().find_map(|c| c.approximate.as_ref()) {
        println!("{label}");
    }
    print!("{}", format_summary(&summarize(&names, &chains), &totals));
    if csvs.iter().any(|c| c.interrupted) {
        eprintln!("note: some files record an interrupted run");
    }
    for c in csvs.iter().filter(|c| !c.complete && !c.interrupted) {
        eprintln!(
            "note: {} has no end block: its chain was killed or failed before the end, and only \
             the draws it finished are read",
            c.path.display()
        );
    }
    Ok(0)
}
