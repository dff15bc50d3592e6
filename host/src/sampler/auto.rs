//! `auto`: the plan a run makes, chosen by measuring the model before any chain starts.
//!
//! A surrogate pays where the exact gradient costs much more than the surrogate's: NUTS spends
//! a tree of exact gradients per draw, the surrogate plan one exact judgement and a tree of
//! surrogate gradients. So `auto` times `∇U` at a few start points and the plan's own network
//! (fitted to a stand-in quadratic: its cost does not depend on its weights), and picks
//!
//! - NUTS with nutpie's low-rank metric, the plan that passed most posteriordb posteriors, when
//!   `∇U` costs less than [`PAYING_RATIO`] surrogate gradients;
//! - otherwise RNS-HMC trained on the Laplace approximation, NUTS's trees on the network judged
//!   by delayed acceptance (the benchmarks' fastest exact plan).
//!
//! The choice is made once, before the first warmup iteration, and never looked at again: every
//! draw, warmup included, comes from the one kernel it names, which an explicit run of that plan
//! reproduces bit for bit. Timing makes the choice machine-dependent, so it is reported
//! ([`AutoChoice::line`]) for the files and the user to record.

use std::time::Instant;

use shmc_core::random::{fill_standard_normal, uniform};

use super::config::{Init, MassMatrix, SampleConfig};
use super::method::{Method, NutsSettings};
use super::surrogate_settings::SurrogateSettings;
use super::trajectory::SurrogateSteps;
use crate::random::chain_rng;
use crate::surrogates::states::TrainingSet;
use crate::{Model, Result};

/// `∇U` must cost this many surrogate gradients for the surrogate plan: a NUTS tree of `L`
/// exact gradients against one exact judgement and `L` surrogate gradients breaks even near
/// 1.2 at `L` = 10; the margin pays for the MAP search, the training states and a surrogate
/// that mixes worse than the exact tree.
pub const PAYING_RATIO: f64 = 4.0;

/// The surrogate plan's network: hidden units and Laplace draws it is fitted to.
pub const SURROGATE_HIDDEN: usize = 300;
/// See [`SURROGATE_HIDDEN`].
pub const SURROGATE_STATES: usize = 200;

/// The key of the CSV header's line (under `shmc`) that holds an `auto` run's
/// [`AutoChoice::line`].
pub const HEADER_KEY: &str = "shmc_auto";

/// The random stream of the timing points (far from the chains' and the training states').
const TIMING_STREAM: usize = 0x7133_A070;
/// Timed calls of each kind: enough for a median, few enough for a model that takes seconds.
const TIMED_CALLS: usize = 15;
/// At most this many start points are tried for finite ones.
const TRIED_POINTS: usize = 200;
/// Timing stops after this long even with fewer calls (a slow model's start-up stays short).
const TIMING_BUDGET_SECONDS: f64 = 2.0;

/// The plans `auto` chooses among.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoPlan {
    /// NUTS with the low-rank metric.
    Nuts,
    /// RNS-HMC on the Laplace approximation with NUTS trees on the surrogate.
    LaplaceSurrogate,
}

impl AutoPlan {
    /// The plans, each first in the [`AutoChoice::line`] of its choice.
    pub const ALL: [AutoPlan; 2] = [AutoPlan::Nuts, AutoPlan::LaplaceSurrogate];

    /// The plan's name: the first word of the line that reports it.
    pub fn name(self) -> &'static str {
        match self {
            AutoPlan::Nuts => "nuts-low-rank",
            AutoPlan::LaplaceSurrogate => "rns-hmc-laplace",
        }
    }

    /// The plan a [`AutoChoice::line`] reports (`None` if it names none): how a resumed run
    /// makes the choice its first run made, without timing anything again.
    pub fn of_line(line: &str) -> Option<AutoPlan> {
        let first = line.split_whitespace().next()?;
        Self::ALL.into_iter().find(|plan| plan.name() == first)
    }

    /// `config` with this plan's method and metric in place of its own.
    pub fn apply(self, config: &SampleConfig) -> SampleConfig {
        let (method, metric) = match self {
            AutoPlan::Nuts => (Method::Nuts(NutsSettings::default()), MassMatrix::LowRank),
            AutoPlan::LaplaceSurrogate => (
                Method::RnsHmc(surrogate_plan(config.seed)),
                MassMatrix::Diagonal,
            ),
        };
        SampleConfig {
            method,
            metric,
            ..config.clone()
        }
    }

    /// What the plan is, in the terms of an explicit run that makes the same draws.
    fn explained(self) -> &'static str {
        match self {
            AutoPlan::Nuts => "nuts with the low-rank metric",
            AutoPlan::LaplaceSurrogate => {
                "rns-hmc, its network trained on Laplace draws, nuts trees on it"
            }
        }
    }
}

/// What `auto` measured and what it chose.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoChoice {
    /// The plan chosen.
    pub plan: AutoPlan,
    /// Median seconds of one `U` and `∇U` of the model at the start points (NaN if none was
    /// finite).
    pub gradient_seconds: f64,
    /// Median seconds of one value and gradient of the plan's network.
    pub surrogate_seconds: f64,
    /// Why the surrogate plan, which the timings favoured, could not be made: its Laplace
    /// approximation failed.
    pub no_laplace: Option<String>,
}

impl AutoChoice {
    /// `config` with the chosen plan's method and metric in place of its own.
    pub fn apply(&self, config: &SampleConfig) -> SampleConfig {
        self.plan.apply(config)
    }

    /// One line: the plan's name, what it is, and the figures it was chosen on.
    pub fn line(&self) -> String {
        let ratio = self.gradient_seconds / self.surrogate_seconds;
        let why = match (self.plan, &self.no_laplace) {
            (AutoPlan::Nuts, Some(failure)) => format!(
                "{} would pay, but the Laplace approximation it trains on failed: {failure}",
                times(ratio)
            ),
            (AutoPlan::Nuts, None) if self.gradient_seconds.is_nan() => {
                "no finite start point to time".to_string()
            }
            (AutoPlan::Nuts, None) => format!(
                "{} under {PAYING_RATIO}x: a surrogate cannot pay",
                times(ratio)
            ),
            (AutoPlan::LaplaceSurrogate, _) => {
                format!(
                    "{} at least {PAYING_RATIO}x: the surrogate pays",
                    times(ratio)
                )
            }
        };
        format!(
            "{} ({}; grad U {}, the surrogate's {}: {why})",
            self.plan.name(),
            self.plan.explained(),
            seconds(self.gradient_seconds),
            seconds(self.surrogate_seconds)
        )
    }
}

/// The surrogate plan's settings for a run of seed `seed`.
pub fn surrogate_plan(seed: u64) -> SurrogateSettings {
    SurrogateSettings {
        trajectory: SurrogateSteps::Nuts,
        ..SurrogateSettings::laplace_trained(SURROGATE_HIDDEN, SURROGATE_STATES, seed)
    }
}

/// Measures `model` and the surrogate plan's network at the start points of `config` and
/// chooses between the plans.
pub fn choose(model: &dyn Model, config: &SampleConfig) -> Result<AutoChoice> {
    let gradient_seconds = time_model(model, config);
    let surrogate_seconds = time_surrogate(model, config.seed)?;
    let choice = decide(gradient_seconds, surrogate_seconds);
    if choice.plan != AutoPlan::LaplaceSurrogate {
        return Ok(choice);
    }
    Ok(match super::find_laplace(model, config) {
        Ok(_) => choice,
        Err(e) => AutoChoice {
            plan: AutoPlan::Nuts,
            no_laplace: Some(laplace_failure(&e)),
            ..choice
        },
    })
}

/// The reason in a Laplace approximation's failure `e`, without the setting it is named for
/// (auto set the metric, not the user).
fn laplace_failure(e: &crate::Error) -> String {
    match e {
        crate::Error::Setting { problem, .. } => problem
            .strip_prefix("laplace needs the Laplace approximation at the MAP, which failed: ")
            .unwrap_or(problem)
            .to_string(),
        other => other.to_string(),
    }
}

/// The plan for a model whose gradient costs `gradient_seconds` where the surrogate's costs
/// `surrogate_seconds`.
pub fn decide(gradient_seconds: f64, surrogate_seconds: f64) -> AutoChoice {
    let pays = gradient_seconds >= PAYING_RATIO * surrogate_seconds;
    AutoChoice {
        plan: if pays {
            AutoPlan::LaplaceSurrogate
        } else {
            AutoPlan::Nuts
        },
        gradient_seconds,
        surrogate_seconds,
        no_laplace: None,
    }
}

/// The median seconds of `U` and `∇U` at the finite points among start points drawn as the
/// chains draw theirs (NaN if none is finite).
fn time_model(model: &dyn Model, config: &SampleConfig) -> f64 {
    let d = model.dim();
    let mut rng = chain_rng(config.seed, TIMING_STREAM);
    let (mut q, mut g) = (vec![0.0; d], vec![0.0; d]);
    let mut times = Vec::with_capacity(TIMED_CALLS);
    let clock = Instant::now();
    for _ in 0..TRIED_POINTS {
        match &config.init {
            Init::Values(values) => q.clone_from(values),
            Init::Random { radius } => {
                q.iter_mut()
                    .for_each(|x| *x = radius * (2.0 * uniform(&mut rng) - 1.0));
            }
        }
        let start = Instant::now();
        let u = model.value_and_gradient(&q, &mut g);
        let took = start.elapsed().as_secs_f64();
        if u.is_finite() && g.iter().all(|x| x.is_finite()) {
            times.push(took);
        }
        if times.len() == TIMED_CALLS || clock.elapsed().as_secs_f64() > TIMING_BUDGET_SECONDS {
            break;
        }
    }
    median(&mut times)
}

/// The median seconds of a value and gradient of the surrogate plan's network on `model`'s
/// dimension, fitted to the standard normal's quadratic (what the Laplace-trained network sees
/// at a Gaussian posterior): its cost is that of its units, whatever it was fitted to.
fn time_surrogate(model: &dyn Model, seed: u64) -> Result<f64> {
    let d = model.dim();
    let settings = surrogate_plan(seed);
    let mut rng = chain_rng(seed, TIMING_STREAM + 1);
    let mut states = TrainingSet::new(d);
    let mut x = vec![0.0; d];
    for _ in 0..TIMED_CALLS * 4 {
        fill_standard_normal(&mut rng, &mut x);
        let u = 0.5 * x.iter().map(|v| v * v).sum::<f64>();
        states.push(&x, u, Some(&x));
    }
    let fitted = settings.fitter().fit(&model, &states)?;
    let mut g = vec![0.0; d];
    let mut times: Vec<f64> = (0..TIMED_CALLS)
        .map(|_| {
            fill_standard_normal(&mut rng, &mut x);
            let start = Instant::now();
            std::hint::black_box(fitted.surrogate.value_and_gradient(&x, &mut g));
            start.elapsed().as_secs_f64()
        })
        .collect();
    Ok(median(&mut times))
}

/// The median of `values` (NaN if empty).
fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_unstable_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A ratio with two significant digits or so (`0.0031x`, `0.42x`, `3.7x`, `120x`).
fn times(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}x")
    } else if r >= 1.0 || r == 0.0 {
        format!("{r:.1}x")
    } else {
        let digits = (-r.log10()).ceil().clamp(1.0, 12.0) as usize + 1;
        format!("{r:.digits$}x")
    }
}

/// Seconds in the unit that reads best.
fn seconds(s: f64) -> String {
    if s.is_nan() {
        "unmeasured".into()
    } else if s < 1e-3 {
        format!("{:.1} us", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}
