//! A run's settings besides the method's own options, as `shmc.sample` received them: what the
//! run ([`crate::run`]) is made from and what the result ([`crate::result`]) reports.

use std::path::PathBuf;

/// The run's settings besides the method's own options.
pub struct Plan {
    /// The method's name.
    pub method: String,
    /// Chains, warmup, draws, seed.
    pub chains: usize,
    /// Warmup iterations per chain.
    pub tune: usize,
    /// Kept draws per chain (the most, with a target ESS).
    pub draws: usize,
    /// The seed of every chain's stream.
    pub seed: u64,
    /// Stop once every parameter's bulk and tail ESS reach it.
    pub target_ess: Option<f64>,
    /// Keep the warmup rows.
    pub save_warmup: bool,
    /// Write CmdStan CSVs there as the chains run.
    pub output_dir: Option<PathBuf>,
    /// Show a progress line on stderr.
    pub progress: bool,
    /// With `method="auto"`, the line of its choice once made.
    pub auto: Option<String>,
}
