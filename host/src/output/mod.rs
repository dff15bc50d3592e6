//! Output in CmdStan's formats: per-chain CSV files that `arviz.from_cmdstan`, CmdStanPy and
//! `stansummary` read unchanged, the summary table and the report printed at the end of a run.

pub mod cmdstan;
pub(crate) mod folder;
pub mod footer;
pub mod resume;
mod run_report;
pub mod table;

/// The file in a run's folder where a front end keeps the run's settings (`shmc sample` its
/// command line, for `--resume`): one of the run's files, so a new run in the folder is
/// refused unless told to overwrite them, and then it is removed with them.
pub const RUN_SETTINGS_FILE: &str = "shmc-run.json";

pub use cmdstan::{
    CsvHeader, CsvSink, Engine, StanCsv, approximate_label, chain_path, parse_stan_csv,
    read_stan_csv,
};
pub use folder::{CALIBRATION_MANIFEST, REPORT_PAGE};
pub use footer::{ChainFooter, trajectories_line};
pub use run_report::{format_run, run_warnings};
pub use table::{
    Cost, RunTotals, format_comparison, format_kernel_work, format_model_work, format_summary,
    format_warnings,
};
