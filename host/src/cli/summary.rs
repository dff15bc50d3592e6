//! `shmc summary FILES…`: the summary table of existing CmdStan CSVs, one file per chain.

use std::path::PathBuf;

use clap::Args;

use crate::diagnostics::summarize;
use crate::output::{RunTotals, format_summary, read_stan_csv};
use crate::sampler::SAMPLER_COLUMNS;
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
    let draws = csvs.iter().map(|c| c.columns[0].len()).min().unwrap_or(0);
    if draws < 4 {
        return Err(Error::invalid(format!(
            "{}: only {draws} draws; a summary needs at least 4 per chain",
            first.path.display()
        )));
    }
    // lp__ and the parameters, as stansummary shows them.
    let shown: Vec<usize> = (0..first.names.len())
        .filter(|&k| {
            first.names[k] == "lp__" || !SAMPLER_COLUMNS.contains(&first.names[k].as_str())
        })
        .collect();
    let names: Vec<String> = shown.iter().map(|&k| first.names[k].clone()).collect();
    let chains: Vec<Vec<Vec<f64>>> = csvs
        .iter()
        .map(|c| {
            shown
                .iter()
                .map(|&k| c.columns[k][..draws].to_vec())
                .collect()
        })
        .collect();
    let column_sum = |name: &str| -> f64 {
        csvs.iter()
            .filter_map(|c| c.column(name))
            .map(|col| col[..draws].iter().sum::<f64>())
            .sum()
    };
    let totals = RunTotals {
        chains: csvs.len(),
        draws,
        mean_accept_stat: column_sum("accept_stat__") / (draws * csvs.len()) as f64,
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
    Ok(0)
}
