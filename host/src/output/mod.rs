//! Output in CmdStan's formats: per-chain CSV files that `arviz.from_cmdstan`, CmdStanPy and
//! `stansummary` read unchanged, and the summary table printed at the end of a run.

pub mod cmdstan;
pub mod footer;
pub mod table;

pub use cmdstan::{CsvHeader, CsvSink, StanCsv, approximate_label, parse_stan_csv, read_stan_csv};
pub use footer::ChainFooter;
pub use table::{RunTotals, format_kernel_work, format_model_work, format_summary};
