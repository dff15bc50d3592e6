//! MCMC diagnostics as a Stan or ArviZ user expects them, as pure functions over draws (no I/O).
//!
//! - [`autocovariance`] / [`autocorrelation`] of one chain by zero-padded FFT.
//! - [`ess`]: Geyer's initial monotone sequence estimator (Geyer 1992) combined over chains the way
//!   Stan does it; [`ess_mean`] is the same on split chains. The papers' single-chain "ESS by
//!   Geyer's initial monotone sequence" is `ess(&Draws::from_chain(x))`.
//! - [`ess_bulk`], [`ess_tail`], [`ess_quantile`] and [`rhat`]: the rank-normalized split
//!   diagnostics of Vehtari, Gelman, Simpson, Carpenter and Bürkner (2021), computed as ArviZ 0.23
//!   and posterior compute them.
//! - [`mcse_mean`], [`quantile`] (type 7), [`summarize`] for a whole run (one
//!   [`ParameterSummary`] per parameter) and [`ess_summary`] (min/median/max of many ESS).
//! - [`convergence_warnings`]: the checks of CmdStan's `diagnose` and PyMC (R̂, bulk and tail
//!   ESS per chain, divergences, tree depth, [`e_bfmi`]), one [`Warning`] per failed check.
//! - [`relative_error_mean`] and [`relative_error_covariance`]: the REM and REC of the variational
//!   HMC paper, against a reference run.
//!
//! Single diagnostics take a [`Draws`]: one quantity's draws, chain by chain, validated once.
//! Conventions shared by every diagnostic (those of Stan and posterior): fewer than 4 draws per
//! chain, a non-finite draw, or draws that are all equal give NaN for ESS, R̂ and MCSE. Deviations
//! from ArviZ 0.23 are listed where they arise: an ESS of a constant series is NaN (ArviZ returns
//! the number of draws), R̂ of a single chain is computed from its two halves (ArviZ returns NaN),
//! and quantiles are numpy's type 7 (ArviZ's tail ESS takes its thresholds from `mquantiles`,
//! which can differ in the last bit; that matters only if a draw sits exactly on the threshold).

mod autocovariance;
mod convergence;
mod draws;
mod error_metrics;
mod ess;
mod normal;
mod quantile;
mod rank;
#[cfg(test)]
mod reference;
mod rhat;
mod summary;
mod workspace;

pub use autocovariance::{autocorrelation, autocovariance};
pub use convergence::{
    ChainColumns, Check, EBFMI_LIMIT, ESS_PER_CHAIN, RHAT_LIMIT, Warning, convergence_warnings,
    e_bfmi,
};
pub use draws::Draws;
pub use error_metrics::{
    SampleMoments, relative_error_covariance, relative_error_mean, sample_moments,
};
pub use ess::{ess, ess_bulk, ess_mean, ess_quantile, ess_tail};
pub use normal::inverse_normal_cdf;
pub use quantile::{quantile, quantile_sorted};
pub use rhat::rhat;
pub use summary::{EssSummary, ParameterSummary, ess_summary, mcse_mean, summarize, try_summarize};

/// Why draws could not be diagnosed: their shape is inconsistent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DiagnosticsError {
    /// No chains were given.
    #[error("no chains to diagnose")]
    NoChains,
    /// No draws were given where at least one is needed.
    #[error("no draws to diagnose")]
    NoDraws,
    /// A chain is not as long as the first.
    #[error("chain {chain} has {found} draws, but chain 0 has {expected}")]
    UnequalChainLengths {
        /// The offending chain (0-based).
        chain: usize,
        /// The first chain's length.
        expected: usize,
        /// This chain's length.
        found: usize,
    },
    /// A chain does not hold one series per parameter name.
    #[error("chain {chain} has {found} parameters, but there are {expected} names")]
    ParameterCount {
        /// The offending chain (0-based).
        chain: usize,
        /// The number of names (or the first chain's number of parameters).
        expected: usize,
        /// This chain's number of parameters.
        found: usize,
    },
    /// An estimate and its reference differ in dimension.
    #[error("dimension mismatch: the reference has {expected} entries, the estimate {found}")]
    DimensionMismatch {
        /// The reference's number of entries.
        expected: usize,
        /// The estimate's number of entries.
        found: usize,
    },
}
