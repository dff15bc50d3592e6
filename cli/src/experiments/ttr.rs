//! `shmc bench ttr`: time to a usable posterior. Seconds from a cold start (data in memory,
//! nothing else) until every parameter's bulk and tail ESS over the chains reach 400, what a
//! CmdStan user checks, for NUTS (nuts-rs on the same `U` kernel, Stan's defaults), exact HMC
//! and the fastest surrogate configuration, each problem's rows side by side in one run.
//!
//! Every row runs 2 chains (one per core of the machine the figures were taken on). Exact HMC
//! and the surrogate stop through the sampler's own target ESS, checked every 100 draws; NUTS
//! runs its 1000 warmup iterations and [`NUTS_MAX_DRAWS`] draws, and its time is read off when
//! its draws first reach the target at a multiple of 100 (the moment it would have stopped).
//!
//! The surrogate row is RNS-HMC trained on the Laplace approximation: a MAP search and its
//! Hessian (the Laplace mass matrix, in whose coordinates the chains run), a network fitted to
//! what the approximation's quadratic misses at a few hundred of its draws (their exact
//! gradients taken in one pass over the data), then a short warmup adapting the step size and
//! the draws, all on surrogate trajectories of the lengths its curvature picks, every proposal
//! judged by the exact `U`. NUTS runs twice: with Stan's defaults (the goal's baseline) and with
//! the same Laplace mass matrix, which is what the surrogate row's metric alone is worth.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use shmc::core::Steps;

use super::nuts::run_nuts;
use super::{BenchSettings, Experiment, LaplacePlan};
use shmc::sampler::{
    DrawSink, EssCheck, MassMatrix, Method, NullSink, Phase, Run, SampleConfig, StepSize,
    SurrogateSteps, check_ess, sample,
};
use shmc::{Model, Result};

/// The label of the NUTS row with Stan's defaults, the one every row is compared with.
const NUTS_LABEL: &str = "NUTS (nuts-rs)";

/// The ESS every row must reach (CmdStan's rule of thumb).
pub const TARGET_ESS: f64 = 400.0;

/// Kept draws between checks of the target.
const CHECK_EVERY: usize = 100;

/// The most kept draws per chain of any row.
const MAX_DRAWS: usize = 5000;

/// NUTS's kept draws per chain (its time is read off the first check that reaches the target).
pub const NUTS_MAX_DRAWS: usize = 2000;

/// Stan's warmup length, for NUTS and exact HMC.
const STAN_WARMUP: usize = 1000;

/// Chains per row.
const CHAINS: usize = 2;

/// One problem and method's time to the target.
#[derive(Clone, Debug, Serialize)]
pub struct TtrRow {
    /// The problem (`lr-sim`, `bank`, `a9a`, `pde`, `pde-fine`).
    pub problem: String,
    /// The method's label.
    pub method: String,
    /// Seconds from the cold start until the target was reached (or the run ended).
    pub seconds_to_target: f64,
    /// Whether the target was reached within the most draws.
    pub reached: bool,
    /// The smallest bulk ESS over the parameters at that point.
    pub ess_bulk_min: f64,
    /// The smallest tail ESS over the parameters at that point.
    pub ess_tail_min: f64,
    /// Kept draws per chain at that point.
    pub draws_per_chain: usize,
    /// The seconds split by phase (the slowest chain's, for the sampler's phases).
    pub split: Split,
    /// Exact gradient evaluations over all chains (NUTS: over its whole run).
    pub exact_gradients: u64,
    /// Exact value-only evaluations over all chains.
    pub exact_values: u64,
}

/// Where the seconds went.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Split {
    /// The MAP search.
    pub map: f64,
    /// Warmup on exact trajectories.
    pub exact_warmup: f64,
    /// Fitting the surrogate.
    pub training: f64,
    /// Warmup on surrogate trajectories.
    pub surrogate_warmup: f64,
    /// The kept draws.
    pub sampling: f64,
}

/// Runs the benchmark on `experiments`, logging progress to `log`.
pub fn run_ttr(
    experiments: &[Experiment],
    quick: bool,
    data_dir: PathBuf,
    seed: u64,
    log: &dyn Fn(&str),
) -> Result<Vec<TtrRow>> {
    let mut rows = Vec::new();
    for &experiment in experiments {
        let mut settings = experiment.settings(quick, data_dir.clone());
        settings.seed = seed;
        let (model, description) = match experiment.model(&settings, quick) {
            Ok(built) => built,
            Err(e) => {
                log(&format!("{}: skipped: {e}", experiment.name()));
                continue;
            }
        };
        log(&format!("{}: {description}", experiment.name()));
        let first = rows.len();
        log("  NUTS (nuts-rs, Stan's defaults) ...");
        rows.push(nuts_row(
            experiment,
            model.as_ref(),
            MassMatrix::Diagonal,
            seed,
        )?);
        log("  NUTS with the Laplace mass matrix ...");
        rows.push(nuts_row(
            experiment,
            model.as_ref(),
            MassMatrix::Laplace,
            seed,
        )?);
        log("  exact HMC (Stan's warmup) ...");
        rows.push(hmc_row(experiment, model.as_ref(), &settings)?);
        log("  RNS-HMC trained on the Laplace approximation ...");
        rows.push(surrogate_row(experiment, model.as_ref(), &settings)?);
        for row in &rows[first..] {
            log(&format!(
                "    {}: {:.2} s ({} draws per chain)",
                row.method, row.seconds_to_target, row.draws_per_chain
            ));
        }
    }
    Ok(rows)
}

/// NUTS with Stan's defaults but the mass matrix `metric`, its time read off its draws.
fn nuts_row(
    experiment: Experiment,
    model: &dyn Model,
    metric: MassMatrix,
    seed: u64,
) -> Result<TtrRow> {
    let run = run_nuts(model, metric, CHAINS, (STAN_WARMUP, NUTS_MAX_DRAWS), seed)?;
    let parameters = run.run.names.len();
    let mut at = None;
    for n in (CHECK_EVERY..=NUTS_MAX_DRAWS).step_by(CHECK_EVERY) {
        let check = check_ess(
            parameters,
            |p| run.series(p).into_iter().map(|s| &s[..n]).collect(),
            TARGET_ESS,
        );
        let reached = check.reached;
        at = Some(check);
        if reached {
            break;
        }
    }
    let check = at.expect("NUTS_MAX_DRAWS is at least one check");
    let seconds = if check.reached {
        run.finished
            .iter()
            .map(|f| f[check.draws - 1])
            .fold(0.0, f64::max)
    } else {
        run.run.wall_seconds
    };
    let warmup_end = run
        .finished
        .iter()
        .map(|f| f.first().copied().unwrap_or(0.0))
        .fold(0.0, f64::max);
    let (label, map) = match &run.run.laplace {
        Some(laplace) => ("NUTS (nuts-rs), Laplace mass matrix", laplace.seconds),
        None => (NUTS_LABEL, 0.0),
    };
    Ok(row_from_check(
        experiment,
        label.into(),
        seconds,
        &check,
        Split {
            map,
            exact_warmup: warmup_end - map,
            sampling: seconds - warmup_end,
            ..Split::default()
        },
        (
            (run.gradients_per_draw() * (CHAINS * (STAN_WARMUP + NUTS_MAX_DRAWS)) as f64) as u64,
            0,
        ),
    ))
}

/// Exact HMC with Stan's warmup and the problem's trajectory lengths, to the target.
fn hmc_row(experiment: Experiment, model: &dyn Model, settings: &BenchSettings) -> Result<TtrRow> {
    let config = SampleConfig {
        chains: CHAINS,
        warmup: STAN_WARMUP,
        draws: MAX_DRAWS,
        seed: settings.seed,
        steps: Steps::Jittered(settings.steps),
        method: Method::Hmc,
        target_ess: Some(TARGET_ESS),
        ess_check_every: CHECK_EVERY,
        ..SampleConfig::default()
    };
    let start = Instant::now();
    let run = sample_quietly(model, &config)?;
    Ok(sampler_row(
        experiment,
        "exact HMC".into(),
        &run,
        start.elapsed().as_secs_f64(),
    ))
}

/// RNS-HMC trained on the Laplace approximation, to the target.
fn surrogate_row(
    experiment: Experiment,
    model: &dyn Model,
    settings: &BenchSettings,
) -> Result<TtrRow> {
    let plan = LaplacePlan::for_experiment(experiment);
    let surrogate = plan.surrogate(SurrogateSteps::Auto, settings.seed);
    let config = SampleConfig {
        chains: CHAINS,
        warmup: plan.warmup,
        draws: MAX_DRAWS,
        seed: settings.seed,
        step_size: StepSize::Adapt { target: 0.8 },
        steps: Steps::Jittered(settings.steps),
        method: Method::RnsHmc(surrogate),
        target_ess: Some(TARGET_ESS),
        ess_check_every: CHECK_EVERY,
        design_level: plan.design_level(model),
        ..SampleConfig::default()
    };
    let start = Instant::now();
    let run = sample_quietly(model, &config)?;
    Ok(sampler_row(
        experiment,
        format!(
            "RNS-HMC on the Laplace approximation ({})",
            plan.describe(model)
        ),
        &run,
        start.elapsed().as_secs_f64(),
    ))
}

fn sample_quietly(model: &dyn Model, config: &SampleConfig) -> Result<Run> {
    let sinks: Vec<Box<dyn DrawSink>> = (0..config.chains)
        .map(|_| Box::new(NullSink) as _)
        .collect();
    sample(model, config, sinks, &|_, _| {}, None)
}

/// The row of a run of the sampler, which took `seconds` in all.
fn sampler_row(experiment: Experiment, method: String, run: &Run, seconds: f64) -> TtrRow {
    let slowest = |phase: Phase| {
        run.chains
            .iter()
            .map(|c| c.phase(phase).seconds)
            .fold(0.0, f64::max)
    };
    let check = run.target_ess.clone().unwrap_or(EssCheck {
        draws: 0,
        bulk: (f64::NAN, 0),
        tail: (f64::NAN, 0),
        reached: false,
    });
    let e = run.evaluations();
    let evaluations = (e.exact_gradients, e.exact_values);
    row_from_check(
        experiment,
        method,
        seconds,
        &check,
        Split {
            map: run.laplace.map_or(0.0, |l| l.seconds),
            exact_warmup: slowest(Phase::ExactWarmup),
            training: slowest(Phase::Training) + run.precompute.map_or(0.0, |p| p.seconds),
            surrogate_warmup: slowest(Phase::SurrogateWarmup),
            sampling: slowest(Phase::Sampling),
        },
        evaluations,
    )
}

fn row_from_check(
    experiment: Experiment,
    method: String,
    seconds: f64,
    check: &EssCheck,
    split: Split,
    (exact_gradients, exact_values): (u64, u64),
) -> TtrRow {
    TtrRow {
        problem: experiment.name().into(),
        method,
        seconds_to_target: seconds,
        reached: check.reached,
        ess_bulk_min: check.bulk.0,
        ess_tail_min: check.tail.0,
        draws_per_chain: check.draws,
        split,
        exact_gradients,
        exact_values,
    }
}

/// The rows as a table, with each problem's speed-up over its NUTS row.
pub fn format_ttr(rows: &[TtrRow]) -> String {
    let mut out = format!(
        "time to min bulk and tail ESS >= {TARGET_ESS} ({CHAINS} chains; seconds: total = MAP + \
         exact warmup + training + surrogate warmup + sampling)\n\
         {:<8} {:<52} {:>8} {:>7} {:>6} {:>6} {:>6} | {:>6} {:>6} {:>6} {:>6} {:>6} | {:>10} {:>9}\n",
        "problem",
        "method",
        "seconds",
        "vs NUTS",
        "draws",
        "bulk",
        "tail",
        "MAP",
        "exact",
        "train",
        "surr.",
        "sample",
        "exact grad",
        "exact U"
    );
    for row in rows {
        let nuts = rows
            .iter()
            .find(|r| r.problem == row.problem && r.method == NUTS_LABEL)
            .map_or(f64::NAN, |r| r.seconds_to_target);
        let flag = if row.reached {
            ""
        } else {
            " (target not reached)"
        };
        let s = row.split;
        out.push_str(&format!(
            "{:<8} {:<52} {:>8.2} {:>6.2}x {:>6} {:>6.0} {:>6.0} | {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} | {:>10} {:>9}{flag}\n",
            row.problem,
            row.method,
            row.seconds_to_target,
            nuts / row.seconds_to_target,
            row.draws_per_chain,
            row.ess_bulk_min,
            row.ess_tail_min,
            s.map,
            s.exact_warmup,
            s.training,
            s.surrogate_warmup,
            s.sampling,
            row.exact_gradients,
            row.exact_values,
        ));
    }
    out
}
