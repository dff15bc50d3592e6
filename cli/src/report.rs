//! `shmc report RUN_DIR`: the run's CmdStan CSVs as one self-contained HTML page.

use std::path::PathBuf;

use clap::Args;

use shmc::Result;
use shmc::report::{DEFAULT_PARAMETERS, render};

/// Arguments of `shmc report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The folder of the run's CSV files (one per chain, as `shmc sample --output` writes
    /// them); or the shards' folders of one run (`shmc sample --chain-id`), or the folder
    /// holding them, read as one run once they are one (as `shmc summary` reads them).
    #[arg(required = true, value_name = "RUN_DIR")]
    run_dir: Vec<PathBuf>,
    /// Where to write the page [default: the first RUN_DIR/report.html]. An earlier report there
    /// is replaced; any other file is refused.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The parameters to plot (traces, histograms, pairs), by name [default: the first 4].
    #[arg(long, value_name = "a,b,c", value_delimiter = ',')]
    parameters: Option<Vec<String>>,
}

// The help of --parameters names the default.
const _: () = assert!(DEFAULT_PARAMETERS == 4);

/// Runs `shmc report`: writes the page, says where, and repeats on stderr what it left out.
pub fn run(args: &ReportArgs) -> Result<i32> {
    let folders = super::summary::shards::folders(&args.run_dir)?;
    let report = render(&folders, args.parameters.as_deref())?;
    let path = args
        .output
        .clone()
        .unwrap_or_else(|| args.run_dir[0].join(shmc::output::REPORT_PAGE));
    report.write_to(&path)?;
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    println!(
        "report written to {} ({} KB)",
        path.display(),
        report.html.len().div_ceil(1024)
    );
    Ok(0)
}
