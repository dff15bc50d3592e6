//! `shmc bench surrogates`' Figure 3: the random-bases journal's comparison of its networks
//! with Gaussian-process surrogates as HMC's Hamiltonian, on the 32-D Gaussian whose
//! covariance has eigenvector `(1, …, 1)` with eigenvalue 1 and every other eigenvalue 0.01
//! ([`CorrelatedGaussian::journal`]).
//!
//! One step size, set by a pilot of exact HMC adapted to acceptance 0.7, is shared by every
//! surrogate, as the paper does. Each run is RNS-HMC as `shmc sample` runs it: exact HMC
//! through a burn-in whose accepted states after [`Figure3::train_after`] train the surrogate
//! (the burn-in is as long as makes about `n` of them at the pilot's acceptance, so the count
//! varies a little; the rows carry it), then surrogate trajectories judged by the exact `U`.
//! The four surrogates of one run see the same burn-in (same seed), so the same training
//! states. Per training size and surrogate, [`Figure3::runs`] runs with seeds `seed, seed + 1,
//! …`; the table and the SVG give the median and the 10–90 % quantiles (the paper's 80 %
//! bands) of the training seconds, the acceptance and the mean ESS per second of sampling.
//! The 32-D `U` is cheap, so the seconds are the surrogate's own: the full GP's `O(n·d)`
//! gradient is what the paper says makes its efficiency fall with `n`.

use std::path::PathBuf;

use serde::Serialize;
use shmc::core::{Activation, Nodes, Steps};
use shmc::diagnostics::{Draws, ess};
use shmc::models::gaussian::CorrelatedGaussian;
use shmc::sampler::{Init, Method, NullSink, SampleConfig, StepSize, SurrogateSettings, sample};
use shmc::surrogates::gp::{Approximation, GpFitter, GpOptions};
use shmc::surrogates::kinds::SurrogateKind;
use shmc::surrogates::network::{NetworkFitter, TrainOptions};
use shmc::{Model, Result};

use super::{BenchRow, BenchSettings, chain_row};

pub use super::figure3_plot::plot_figure3;

/// The surrogates of Figure 3, as the rows name them: the full GP, FITC with (up to) 1000
/// inducing points, and networks of 1000 softplus and 1000 RBF units.
pub const FIGURE3_METHODS: [&str; 4] = ["gp", "fitc-1000", "rns-softplus-1000", "rns-rbf-1000"];

/// FITC's inducing points and the networks' hidden units (the paper's 1000).
const UNITS: usize = 1000;

/// The rows' `problem`.
pub const FIGURE3_PROBLEM: &str = "fig3-gaussian-32";

/// The acceptance exact HMC's pilot adapts the shared step size to (the paper's 70 %).
const PILOT_ACCEPTANCE: f64 = 0.7;

/// Figure 3's settings.
#[derive(Clone, Debug)]
pub struct Figure3 {
    /// The training sizes `n` (states the surrogate is fitted on, about).
    pub sizes: Vec<usize>,
    /// The surrogates run, of [`FIGURE3_METHODS`] (default: all).
    pub methods: Vec<&'static str>,
    /// Runs per size and surrogate (the paper's ten).
    pub runs: usize,
    /// Kept draws of each run.
    pub draws: usize,
    /// Leapfrog steps, drawn uniformly from `1..=steps` (exact and surrogate trajectories).
    pub steps: u32,
    /// Burn-in iterations before states are collected (away from the start at the mode).
    pub train_after: usize,
    /// The seed of the first run.
    pub seed: u64,
    /// The most bytes a fit may take (the GP's `n × n` matrices, the networks' `s × s`).
    pub memory_limit: u64,
}

impl Figure3 {
    /// The full run (sizes 100 to 800, ten runs of 2000 draws each), or with `quick` three
    /// sizes of up to 200 and three runs of 300 draws.
    pub fn new(quick: bool, seed: u64, memory_limit: u64) -> Self {
        let (sizes, runs, draws) = if quick {
            (vec![50, 100, 200], 3, 300)
        } else {
            (vec![100, 200, 400, 800], 10, 2000)
        };
        Self {
            sizes,
            methods: FIGURE3_METHODS.to_vec(),
            runs,
            draws,
            steps: 20,
            train_after: 200,
            seed,
            memory_limit,
        }
    }

    /// Refuses, before any run, a largest training size whose full GP or network would pass
    /// the memory limit (the burn-in may collect a little more; the fit checks again).
    pub fn check_memory(&self) -> Result<()> {
        let largest = self.sizes.iter().copied().max().unwrap_or(0);
        let d = CorrelatedGaussian::JOURNAL_DIM;
        for &method in &self.methods {
            match kind(method, 0, self.memory_limit) {
                SurrogateKind::Gp(gp) => gp.options.check_memory(largest, d)?,
                SurrogateKind::Network(network) => network.options.check_memory(largest)?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// One run of one surrogate at one training size (one object of `--json`): the lr-sim bench's
/// row, and what Figure 3 draws.
#[derive(Clone, Debug, Serialize)]
pub struct Figure3Row {
    /// The training size asked for.
    pub observations: usize,
    /// The run (0-based; its seed is the bench's seed plus this).
    pub run: usize,
    /// The accepted burn-in states the surrogate was fitted on.
    pub training_states: usize,
    /// Geyer's ESS averaged over the 32 coordinates.
    pub ess_mean: f64,
    /// `ess_mean` per second of sampling (the paper's time-normalized mean ESS).
    pub mean_ess_per_second: f64,
    /// Whether the surrogate collapsed and the chain went back to exact HMC.
    pub collapsed: bool,
    /// The bench's row: `problem`, `method`, acceptance, ESS, seconds, training seconds, ...
    #[serde(flatten)]
    pub bench: BenchRow,
}

/// The surrogate `method` names, fitted with seed `seed`.
fn kind(method: &str, seed: u64, memory_limit: u64) -> SurrogateKind {
    let gp = |approximation| {
        SurrogateKind::Gp(GpFitter {
            options: GpOptions {
                approximation,
                seed,
                memory_limit,
                ..GpOptions::default()
            },
        })
    };
    let network = |nodes| {
        SurrogateKind::Network(NetworkFitter::potential(TrainOptions {
            hidden: UNITS,
            nodes,
            seed,
            memory_limit,
            ..TrainOptions::default()
        }))
    };
    match method {
        "gp" => gp(Approximation::Full),
        "fitc-1000" => gp(Approximation::Fitc { inducing: UNITS }),
        "rns-softplus-1000" => network(Nodes::Additive(Activation::Softplus)),
        _ => network(Nodes::Rbf { width: 1.0 }),
    }
}

/// The shared step size: exact HMC's, dual-averaged to [`PILOT_ACCEPTANCE`] over 1000 warmup
/// iterations from the mode; returns it and HMC's acceptance at it over 1000 draws.
pub fn shared_step_size(model: &dyn Model, settings: &Figure3) -> Result<(f64, f64)> {
    let config = SampleConfig {
        chains: 1,
        warmup: 1000,
        draws: 1000,
        seed: settings.seed,
        step_size: StepSize::Adapt {
            target: PILOT_ACCEPTANCE,
        },
        steps: Steps::Jittered(settings.steps),
        adapt_mass: false,
        init: Init::Values(vec![0.0; model.dim()]),
        method: Method::Hmc,
        ..SampleConfig::default()
    };
    let run = sample(model, &config, vec![Box::new(NullSink)], &|_, _| {}, None)?;
    Ok((run.step_size(), run.mean_accept_stat()))
}

/// The bench settings of one run at training size `n`: step size `eps`, a burn-in long enough
/// for about `n` accepted states at HMC's acceptance `accept`.
fn run_settings(
    settings: &Figure3,
    (eps, accept): (f64, f64),
    n: usize,
    run: usize,
) -> BenchSettings {
    let collecting = (n as f64 / accept.max(0.05)).ceil() as usize;
    BenchSettings {
        step_size: eps,
        steps: settings.steps,
        burn_in: settings.train_after + collecting,
        train_after: settings.train_after,
        draws: settings.draws,
        hidden: UNITS,
        seed: settings.seed + run as u64,
        data_dir: PathBuf::new(),
        methods: Vec::new(),
        rmhmc_step_size: eps,
        rmhmc_steps: 1,
        rmhmc_iterations: (0, 0),
        nutpie_rate: f64::NAN,
        nuts_warmup: 0,
        plots: None,
    }
}

/// One run of `method` at training size `n`.
fn run_one(
    model: &dyn Model,
    settings: &Figure3,
    step: (f64, f64),
    (method, n, run): (&str, usize, usize),
) -> Result<Figure3Row> {
    let bench = run_settings(settings, step, n, run);
    let surrogate = SurrogateSettings {
        kind: kind(method, bench.seed, settings.memory_limit),
        train_after: Some(settings.train_after),
        ..SurrogateSettings::default()
    };
    let start = vec![0.0; model.dim()];
    let chain = chain_row(
        model,
        &bench,
        ("rns", method),
        Method::RnsHmc(surrogate),
        &start,
    )?;
    let draws = &chain.trace.chains[0].draws;
    // A coordinate whose draws never moved (a surrogate every proposal of which was
    // rejected) has no effective draws: 0, not the NaN Geyer's estimate gives it.
    let ess_mean = draws
        .iter()
        .map(|d| ess(&Draws::from_chain(d)))
        .map(|e| if e.is_nan() { 0.0 } else { e })
        .sum::<f64>()
        / draws.len() as f64;
    let sampling = chain.row.seconds_per_iteration * settings.draws as f64;
    let report = chain.surrogate.unwrap_or_default();
    let mut row = chain.row;
    row.problem = FIGURE3_PROBLEM.into();
    Ok(Figure3Row {
        observations: n,
        run,
        training_states: report.training_states,
        ess_mean,
        mean_ess_per_second: ess_mean / sampling,
        collapsed: report.collapse.is_some(),
        bench: row,
    })
}

/// Runs Figure 3: the pilot, then every surrogate at every size, `runs` times each.
pub fn run_figure3(settings: &Figure3, log: &dyn Fn(&str)) -> Result<Vec<Figure3Row>> {
    settings.check_memory()?;
    let model = CorrelatedGaussian::journal();
    let step = shared_step_size(&model, settings)?;
    log(&format!(
        "fig3: shared step size {:.4} (exact HMC accepts {:.2} at it, steps 1..={})",
        step.0, step.1, settings.steps
    ));
    let mut rows = Vec::new();
    for &n in &settings.sizes {
        for &method in &settings.methods {
            for run in 0..settings.runs {
                let row = run_one(&model, settings, step, (method, n, run))?;
                log(&format!(
                    "fig3: {method} n = {n} run {run}: {} states, trained in {:.2} s, \
                     acceptance {:.2}, mean ESS/s {:.0}",
                    row.training_states,
                    row.bench.training_seconds,
                    row.bench.acceptance,
                    row.mean_ess_per_second
                ));
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// The median and the 10 % and 90 % quantiles (linear between order statistics) of `values`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Band {
    /// 10 % quantile.
    pub low: f64,
    /// Median.
    pub median: f64,
    /// 90 % quantile.
    pub high: f64,
}

impl Band {
    /// The band of `values` (NaN for none).
    pub fn of(values: &[f64]) -> Self {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
        sorted.sort_by(f64::total_cmp);
        let quantile = |p: f64| {
            if sorted.is_empty() {
                return f64::NAN;
            }
            let at = p * (sorted.len() - 1) as f64;
            let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
            sorted[lo] + (at - lo as f64) * (sorted[hi] - sorted[lo])
        };
        Self {
            low: quantile(0.1),
            median: quantile(0.5),
            high: quantile(0.9),
        }
    }
}

/// What Figure 3 shows of one surrogate at one training size, over its runs.
#[derive(Clone, Debug)]
pub struct Summary {
    /// One of [`FIGURE3_METHODS`].
    pub method: String,
    /// The training size.
    pub observations: usize,
    /// Median training states.
    pub training_states: f64,
    /// Training seconds.
    pub training_seconds: Band,
    /// Acceptance.
    pub acceptance: Band,
    /// Mean ESS per second of sampling.
    pub mean_ess_per_second: Band,
    /// Median exact gradients per draw: leapfrog steps outside the training states' reach,
    /// where the sampler proposes with the exact gradient instead of the surrogate's.
    pub exact_gradients: f64,
}

/// The summaries of `rows`, by method and size, in the order they ran.
pub fn summarize(rows: &[Figure3Row]) -> Vec<Summary> {
    let mut keys: Vec<(String, usize)> = Vec::new();
    for r in rows {
        let key = (r.bench.method.clone(), r.observations);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.into_iter()
        .map(|(method, n)| {
            let of = |f: fn(&Figure3Row) -> f64| {
                let values: Vec<f64> = rows
                    .iter()
                    .filter(|r| r.bench.method == method && r.observations == n)
                    .map(f)
                    .collect();
                Band::of(&values)
            };
            Summary {
                training_states: of(|r| r.training_states as f64).median,
                training_seconds: of(|r| r.bench.training_seconds),
                acceptance: of(|r| r.bench.acceptance),
                mean_ess_per_second: of(|r| r.mean_ess_per_second),
                exact_gradients: of(|r| r.bench.mean_gradient_evaluations_per_iteration).median,
                method,
                observations: n,
            }
        })
        .collect()
}

/// Figure 3's table: each surrogate's medians and 80 % bands at each training size.
pub fn format_figure3(rows: &[Figure3Row]) -> String {
    let runs = rows.iter().map(|r| r.run + 1).max().unwrap_or(0);
    let mut out = format!(
        "Figure 3: 32-D Gaussian (eigenvalue 1 along (1,..,1), 0.01 across), one step size for \
         all; median [10%, 90%] over {runs} runs; exact grads: exact gradients per draw \
         (leapfrog steps outside the training states' reach)\n"
    );
    out.push_str(&format!(
        "{:<18} {:>5} {:>7} {:>26} {:>20} {:>26} {:>12}\n",
        "method", "n", "states", "training s", "acceptance", "mean ESS/s", "exact grads"
    ));
    let band = |b: Band, digits: usize| {
        format!(
            "{:.*} [{:.*}, {:.*}]",
            digits, b.median, digits, b.low, digits, b.high
        )
    };
    for s in summarize(rows) {
        out.push_str(&format!(
            "{:<18} {:>5} {:>7.0} {:>26} {:>20} {:>26} {:>12.2}\n",
            s.method,
            s.observations,
            s.training_states,
            band(s.training_seconds, 3),
            band(s.acceptance, 2),
            band(s.mean_ess_per_second, 0),
            s.exact_gradients
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn band_is_the_median_and_the_10_and_90_percent_quantiles() {
        let values: Vec<f64> = (0..11).rev().map(f64::from).collect();
        let band = Band::of(&values);
        assert_eq!((band.low, band.median, band.high), (1.0, 5.0, 9.0));
        let two = Band::of(&[1.0, 3.0]);
        assert!((two.low - 1.2).abs() < 1e-12 && (two.median - 2.0).abs() < 1e-12);
        assert!(Band::of(&[]).median.is_nan());
    }
}
