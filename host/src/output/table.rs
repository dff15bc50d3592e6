//! The summary table printed after a run and by `shmc summary`: one line per parameter in the
//! layout of CmdStan's `stansummary`, then the run's totals.

use std::fmt::Write as _;

use crate::diagnostics::{ParameterSummary, Warning, ess_summary};
use crate::sampler::{KernelWork, Run};

/// Whole-run figures shown under the table.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunTotals {
    /// Number of chains.
    pub chains: usize,
    /// Kept draws per chain.
    pub draws: usize,
    /// Mean acceptance statistic.
    pub mean_accept_stat: f64,
    /// Divergent kept transitions.
    pub divergences: usize,
    /// Seconds of sampling (kept draws), if known.
    pub sampling_seconds: Option<f64>,
    /// Wall-clock seconds, warmup included, if known.
    pub wall_seconds: Option<f64>,
}

impl RunTotals {
    /// The totals of `run`, over the chains and draws its summary uses ([`Run::summarized`]:
    /// an interrupted run's, cut to the draws every chain with enough of them finished).
    pub fn of(run: &Run) -> Self {
        let (summarized, kept) = run.summarized();
        Self {
            chains: summarized.len(),
            draws: kept,
            mean_accept_stat: run.mean_accept_stat(),
            divergences: run.divergences(),
            sampling_seconds: Some(run.sampling_seconds()),
            wall_seconds: Some(run.wall_seconds),
        }
    }
}

/// Formats a number to about four significant digits in at most ten columns.
fn cell(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x:>10}");
    }
    let a = x.abs();
    if a != 0.0 && !(1e-3..1e6).contains(&a) {
        format!("{x:>10.2e}")
    } else if a >= 1000.0 {
        format!("{x:>10.0}")
    } else {
        format!("{x:>10.4}")
    }
}

/// The table and totals as text.
pub fn format_summary(params: &[ParameterSummary], totals: &RunTotals) -> String {
    let width = params
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(4)
        .max(9);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "", "Mean", "SD", "MCSE", "5%", "50%", "95%", "ESS_bulk", "ESS_tail", "R_hat"
    );
    for p in params {
        let _ = write!(out, "{:<width$}", p.name);
        for x in [p.mean, p.sd, p.mcse_mean, p.q5, p.q50, p.q95] {
            out.push_str(&cell(x));
        }
        let _ = writeln!(
            out,
            "{:>10.0}{:>10.0}{:>10.3}",
            p.ess_bulk, p.ess_tail, p.rhat
        );
    }
    let bulk: Vec<f64> = params.iter().map(|p| p.ess_bulk).collect();
    let ess = ess_summary(&bulk);
    let min_ess = ess.map_or(f64::NAN, |e| e.min);
    out.push('\n');
    let _ = writeln!(
        out,
        "{} chains x {} draws; mean accept_stat {:.3}; {} divergent transitions",
        totals.chains, totals.draws, totals.mean_accept_stat, totals.divergences
    );
    if let Some(e) = ess {
        let _ = writeln!(
            out,
            "ESS_bulk min / median / max: {:.0} / {:.0} / {:.0}",
            e.min, e.median, e.max
        );
    }
    if let Some(wall) = totals.wall_seconds {
        let _ = write!(out, "wall time {wall:.2} s");
        if let Some(sampling) = totals.sampling_seconds {
            let _ = write!(out, " (sampling {sampling:.2} s)");
            if min_ess.is_finite() && sampling > 0.0 {
                let _ = write!(
                    out,
                    "; min ESS_bulk per second of sampling {:.1}",
                    min_ess / sampling
                );
            }
        }
        out.push('\n');
    }
    out
}

/// The failed convergence checks, one `warning: ` line each (nothing when every check passed).
pub fn format_warnings(warnings: &[Warning]) -> String {
    warnings
        .iter()
        .map(|w| format!("warning: {}\n", w.message))
        .collect()
}

/// The model's own work over a run (see [`crate::Model::work`]; counters that stayed zero are
/// left out), per iteration and per effective sample: for an expensive model, the cost that
/// matters.
pub fn format_model_work(work: &[(&str, u64)], iterations: u64, min_ess_bulk: f64) -> String {
    let done: Vec<&(&str, u64)> = work.iter().filter(|(_, n)| *n > 0).collect();
    if done.is_empty() || iterations == 0 {
        return String::new();
    }
    let list = |f: &dyn Fn(u64) -> String| {
        done.iter()
            .map(|(name, n)| format!("{} {name}", f(*n)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = format!(
        "exact model work: {} over {iterations} iterations, warmup included ({} per iteration)",
        list(&|n| n.to_string()),
        list(&|n| format!("{:.2}", n as f64 / iterations as f64))
    );
    if min_ess_bulk.is_finite() && min_ess_bulk > 0.0 {
        let _ = write!(
            out,
            "; per effective sample (min ESS_bulk {min_ess_bulk:.0}): {}",
            list(&|n| format!("{:.1}", n as f64 / min_ess_bulk))
        );
    }
    out.push('\n');
    out
}

/// What a run cost per effective sample, for the closing comparison of two methods.
#[derive(Clone, Debug, PartialEq)]
pub struct Cost {
    /// The method, and how it was run.
    pub label: String,
    /// Kept draws per chain.
    pub draws: usize,
    /// Exact gradient evaluations, warmup included.
    pub exact_gradients: u64,
    /// Exact value-only evaluations, warmup included.
    pub exact_values: u64,
    /// The smallest bulk ESS over parameters.
    pub min_ess_bulk: f64,
    /// Wall-clock seconds, warmup (and training) included.
    pub seconds: f64,
}

impl Cost {
    /// The cost of `run` under `label`.
    pub fn of(label: String, run: &Run) -> Self {
        let evaluations = run.evaluations();
        let min_ess_bulk = run
            .summary()
            .iter()
            .map(|p| p.ess_bulk)
            .fold(f64::INFINITY, f64::min);
        Self {
            label,
            draws: run.summarized().1,
            exact_gradients: evaluations.exact_gradients,
            exact_values: evaluations.exact_values,
            min_ess_bulk,
            seconds: run.wall_seconds,
        }
    }
}

/// Two or more runs side by side: exact evaluations and seconds per effective sample, and each
/// run's speed (min ESS_bulk per second, warmup included) as a multiple of the last row's.
pub fn format_comparison(rows: &[Cost]) -> String {
    let mut out = format!(
        "{:<44} {:>6} {:>9} {:>11} {:>9} {:>8} {:>10} {:>9}\n",
        "method", "draws", "min ESS", "exact grad", "exact U", "seconds", "ESS/s", "vs last"
    );
    let rate = |c: &Cost| c.min_ess_bulk / c.seconds;
    let baseline = rows.last().map_or(f64::NAN, rate);
    for c in rows {
        let per = |n: u64| n as f64 / c.min_ess_bulk;
        let _ = writeln!(
            out,
            "{:<44} {:>6} {:>9.0} {:>11.1} {:>9.1} {:>8.1} {:>10.2} {:>8.2}x",
            c.label,
            c.draws,
            c.min_ess_bulk,
            per(c.exact_gradients),
            per(c.exact_values),
            c.seconds,
            rate(c),
            rate(c) / baseline
        );
    }
    out.push_str(
        "(exact grad and exact U: evaluations per effective sample, warmup and training \
         included; seconds: wall clock from the start)\n",
    );
    out
}

/// RMHMC's work and failures in one part of a chain, one line: the fixed-point iterations per
/// step, each reason a trajectory was rejected as divergent, and the metric's work (its
/// evaluations, which factor it, and its cheaper products) apart from the rest of a step, in
/// milliseconds per step and as a share of the transitions' time.
pub fn format_kernel_work(part: &str, work: &KernelWork) -> String {
    if work.transitions == 0 {
        return String::new();
    }
    let c = &work.counts;
    let steps = c.steps.max(1) as f64;
    format!(
        "{part}: {} transitions, {} generalized leapfrog steps, {} fixed-point iterations ({:.1} \
         per step); divergent: {} not converged, {} not reversible, {} not positive definite, {} \
         non-finite; metric: {} evaluations ({:.1} per step) and {} products ({:.1} per step), \
         {:.3} ms per step of the transitions' {:.3} ms per step ({:.0} %; {:.2} s of {:.2} s)\n",
        work.transitions,
        c.steps,
        c.fixed_point_iterations,
        c.fixed_point_iterations as f64 / steps,
        c.not_converged,
        c.not_reversible,
        c.not_positive_definite,
        c.non_finite,
        work.metric_evaluations,
        work.metric_evaluations as f64 / steps,
        work.metric_products,
        work.metric_products as f64 / steps,
        1e3 * work.metric_seconds / steps,
        1e3 * work.seconds / steps,
        100.0 * work.metric_seconds / work.seconds.max(f64::MIN_POSITIVE),
        work.metric_seconds,
        work.seconds,
    )
}
