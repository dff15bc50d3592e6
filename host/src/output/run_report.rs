//! What a finished run says after its chains: the summary table and the model's work, the
//! Laplace search and precompute, the target ESS's outcome, each chain's phases, the kernels'
//! and the surrogate's work, and the APPROXIMATE label where it applies. `shmc sample` prints
//! it; the library's `Fit::report` gives it to a library user.

use std::fmt::Write as _;

use super::{
    RunTotals, approximate_label, format_kernel_work, format_model_work, format_summary,
    format_warnings, trajectories_line,
};
use crate::diagnostics::{ChainColumns, ParameterSummary, Warning, convergence_warnings};
use crate::sampler::{
    COLLAPSE_WINDOW, ChainResult, Evaluations, Method, Run, SAMPLER_COLUMNS, SURROGATE_MAX_DEPTH,
    SampleConfig,
};

/// The run's report: `work` is the model's own count of its work ([`crate::Model::work`]).
pub fn format_run(run: &Run, config: &SampleConfig, work: &[(&str, u64)]) -> String {
    let mut out = String::new();
    summary(&mut out, run, config, work);
    before_sampling(&mut out, run);
    if let Some(target) = config.target_ess {
        target_ess(&mut out, run, target);
    }
    for c in &run.chains {
        phases(&mut out, c);
    }
    for c in &run.chains {
        riemannian(&mut out, c);
    }
    for c in &run.chains {
        surrogate(&mut out, c);
    }
    if config.method.approximate() {
        let kl_bound = run
            .chains
            .iter()
            .find_map(|c| c.surrogate.as_ref().and_then(|s| s.kl_bound_estimate));
        let _ = writeln!(out, "{}", approximate_label(config.method.name(), kl_bound));
    }
    out
}

/// The summary table, its failed convergence checks and the model's work per effective sample,
/// over the chains that made enough draws (an interrupted run's, cut to the draws they all
/// finished).
fn summary(out: &mut String, run: &Run, config: &SampleConfig, work: &[(&str, u64)]) {
    if run.summarized().0.is_empty() {
        return;
    }
    let summary = run.summary();
    out.push_str(&format_summary(&summary, &RunTotals::of(run)));
    out.push_str(&format_warnings(&run_warnings(run, config, &summary)));
    let iterations = run
        .chains
        .iter()
        .map(|c| c.warmup_evaluations.iterations + c.sampling_evaluations.iterations)
        .sum();
    let min_ess = summary
        .iter()
        .map(|p| p.ess_bulk)
        .fold(f64::INFINITY, f64::min);
    out.push_str(&format_model_work(work, iterations, min_ess));
}

/// The convergence checks `run` fails ([`convergence_warnings`]), over the draws its
/// `summary` ([`Run::summary`]) was made from. A surrogate plan's trees (delayed-acceptance
/// NUTS) stop at [`SURROGATE_MAX_DEPTH`]; a fixed-length trajectory has depth 0.
pub fn run_warnings(
    run: &Run,
    config: &SampleConfig,
    summary: &[ParameterSummary],
) -> Vec<Warning> {
    let (chains, kept) = run.summarized();
    fn sampler<'a>(c: &'a ChainResult, name: &str, kept: usize) -> &'a [f64] {
        let k = SAMPLER_COLUMNS
            .iter()
            .position(|n| *n == name)
            .expect("a sampler column");
        &c.columns[k][..kept]
    }
    let columns: Vec<ChainColumns> = chains
        .iter()
        .map(|c| ChainColumns {
            treedepth: sampler(c, "treedepth__", kept),
            divergent: sampler(c, "divergent__", kept),
            energy: sampler(c, "energy__", kept),
        })
        .collect();
    let max_depth = match &config.method {
        Method::Nuts(nuts) => nuts.max_depth,
        _ => u64::from(SURROGATE_MAX_DEPTH),
    };
    convergence_warnings(summary, &columns, Some(max_depth))
}

/// What the run did once before its chains: the Laplace metric's MAP search, a precompute.
fn before_sampling(out: &mut String, run: &Run) {
    let evaluations = match run.design_level {
        Some(level) => format!("evaluations of the model's level {level}"),
        None => "exact evaluations".to_string(),
    };
    if let Some(p) = &run.laplace {
        let _ = writeln!(
            out,
            "laplace metric: the MAP search and its Hessian took {} {evaluations} in {:.3} s \
             before sampling",
            p.evaluations, p.seconds
        );
    }
    if let Some(p) = &run.precompute {
        let _ = writeln!(
            out,
            "precompute: {} {evaluations} in {:.3} s before sampling (shared by every chain; \
             sampling took {:.3} s)",
            p.evaluations,
            p.seconds,
            run.sampling_seconds()
        );
    }
}

/// Whether the target ESS was reached, after how many draws, with the smallest ESS.
fn target_ess(out: &mut String, run: &Run, target: f64) {
    let Some(check) = &run.target_ess else {
        return;
    };
    let name = |p: usize| run.names.get(p).map_or("?", String::as_str);
    let ess = format!(
        "min bulk ESS {:.0} ({}), min tail ESS {:.0} ({})",
        check.bulk.0,
        name(check.bulk.1),
        check.tail.0,
        name(check.tail.1)
    );
    let _ = if check.reached {
        writeln!(
            out,
            "target ESS {target} reached after {} draws per chain, {:.1} s from the start: {ess}",
            check.draws, run.wall_seconds
        )
    } else {
        writeln!(
            out,
            "target ESS {target} not reached: stopped at the most draws ({} per chain) with \
             {ess}; allow more draws per chain or lower the target",
            check.draws
        )
    };
}

/// A surrogate chain's phases with their iterations and seconds, and its collapse to exact HMC.
fn phases(out: &mut String, c: &ChainResult) {
    let Some(surrogate) = &c.surrogate else {
        return;
    };
    let phases: Vec<String> = c
        .phases
        .iter()
        .filter(|p| p.iterations > 0 || p.seconds > 0.0)
        .map(|p| match p.iterations {
            0 => format!("{} {:.2} s", p.phase.name(), p.seconds),
            n => format!("{} {n} it {:.2} s", p.phase.name(), p.seconds),
        })
        .collect();
    let _ = writeln!(out, "chain {}: {}", c.chain, phases.join(", "));
    if let Some(collapse) = surrogate.collapse {
        let _ = writeln!(
            out,
            "chain {}: the surrogate's exact acceptance collapsed to {:.3} (its own \
             dynamics: {:.3}) over its last {COLLAPSE_WINDOW} proposals at warmup iteration {}: \
             exact HMC from there on",
            c.chain,
            collapse.acceptance,
            collapse.own_acceptance,
            collapse.iteration + 1
        );
    }
}

/// An RMHMC chain's step size and its generalized leapfrog's work per phase.
fn riemannian(out: &mut String, c: &ChainResult) {
    if let Some(r) = &c.riemannian {
        let _ = writeln!(out, "chain {}: RMHMC step size {:.4}", c.chain, r.step_size);
        out.push_str(&format_kernel_work(
            &format!("chain {} warmup", c.chain),
            &r.warmup,
        ));
        out.push_str(&format_kernel_work(
            &format!("chain {} sampling", c.chain),
            &r.sampling,
        ));
    }
}

/// A surrogate chain's training (or precompute) and what its sampling cost in evaluations.
fn surrogate(out: &mut String, c: &ChainResult) {
    let Some(s) = &c.surrogate else {
        return;
    };
    match s.precompute {
        Some(p) if p.before_sampling => {
            let fit = if s.training_states > 0 {
                format!(
                    " (trained on {} Laplace draws, scale {}, held-out gradient error {:.4})",
                    s.training_states, s.scale, s.holdout_gradient_error
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "chain {}: proposing with the precomputed surrogate{fit}; sampling used {}",
                c.chain,
                sampling_cost(&c.sampling_evaluations)
            );
            trajectories(out, c);
            return;
        }
        Some(p) => {
            let _ = writeln!(
                out,
                "chain {}: precompute after the exact phase: {} exact evaluations in {:.3} s",
                c.chain, p.evaluations, p.seconds
            );
        }
        None => {}
    }
    let _ = writeln!(
        out,
        "chain {}: surrogate trained on {} states in {:.2} s (online updates {} in {:.2} s), \
         scale {}, held-out gradient error {:.3}; sampling used {}",
        c.chain,
        s.training_states,
        s.training_seconds,
        s.online_updates,
        s.online_seconds,
        s.scale,
        s.holdout_gradient_error,
        sampling_cost(&c.sampling_evaluations)
    );
    trajectories(out, c);
}

/// The surrogate trajectories' lengths, when the chain's method reports them.
fn trajectories(out: &mut String, c: &ChainResult) {
    if let Some(line) = c
        .surrogate
        .as_ref()
        .and_then(|s| trajectories_line(s, &c.sampling_evaluations))
    {
        let _ = writeln!(out, "chain {}: surrogate trajectories: {line}", c.chain);
    }
}

/// What a surrogate chain's sampling cost in evaluations: `N exact values and N surrogate
/// gradients`, and the exact gradients when there were any (leapfrog steps outside the
/// surrogate's domain, or exact trajectories after its acceptance collapsed).
fn sampling_cost(e: &Evaluations) -> String {
    let exact = match e.exact_gradients {
        0 => String::new(),
        n => format!(", {n} exact gradients"),
    };
    format!(
        "{} exact values{exact} and {} surrogate gradients",
        e.exact_values, e.surrogate_gradients
    )
}
