//! `shmc bench`: the papers' experiments, every method on the same posterior in one process,
//! reported side by side as the journal's Table 1 (acceptance, ESS, time per iteration, min
//! ESS per second, speed-up over HMC), so that ratios come from one run on one machine.
//!
//! Each method runs one chain with the papers' protocol: a burn-in of exact HMC (the surrogate
//! methods collect and train on it), then kept draws. ESS is Geyer's initial monotone sequence
//! estimate per parameter, the papers' definition. Methods run one after another, so each has
//! a core to itself, and every chain starts at the MAP.
//!
//! When do longer surrogate trajectories (the `rns-long` row) pay? Along a direction of
//! posterior sd σ a leapfrog step of size ε turns the phase by θ ≈ ε/σ, and an accepted move of
//! L steps leaves lag-1 autocorrelation cos(Lθ) there; averaged over the jittered L, negative
//! means antithetic draws (ESS above the draw count). On the logistic-regression simulation
//! (isotropic, σ ≈ 0.065, θ ≈ 0.72) L in 1..=6 averages cos −0.32 and L in 1..=24 only −0.08,
//! which with 23% rejections predicts ESS per draw 1.0 against 0.71: measured 1.09 and 0.71.
//! So there HMC's trajectories are already the right length and longer ones lose. On Bank
//! Marketing the widest direction (σ = 0.35) is longer than HMC's longest trajectory (45 ×
//! 0.008 = 0.36), and 4× steps multiply the min ESS by 5.6. The `rns-auto` and all-in rows let
//! the surrogate's own curvature choose the range of lengths by this very picture
//! ([`shmc::sampler::trajectory`]): on LR-sim it keeps about the papers' length (2..=7 steps),
//! on Bank it goes to 17..=136 and the min ESS rises 6× over HMC's.
//!
//! The all-in row is measured against the general-purpose sampler in the same run: nutpie's
//! NUTS ([`nuts`]) on the same kernel, and against nutpie's own figure on this machine when it
//! is given (`--nutpie`, measured by `host/benches/nutpie_lr_sim.py`).

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use shmc::core::Steps;

use shmc::data::{Missing, Preprocessing, Projection, bundled_in, read_csv, read_libsvm};
use shmc::diagnostics::{Draws, ess, ess_bulk, ess_summary, ess_tail};
use shmc::models::elliptic_pde::{EllipticPde, PdeSettings};
use shmc::models::logistic::LogisticRegression;
use shmc::optimize::{MapOptions, find_map};
use shmc::output::{format_kernel_work, trajectories_line};
use shmc::sampler::{
    DrawSink, Init, KernelWork, MassMatrix, Method, MldaSettings, NullSink, RmhmcSettings, Run,
    SampleConfig, StepSize, SurrogateReport, SurrogateSettings, SurrogateSteps, Transitions,
    sample,
};
use shmc::surrogates::FitMethod;
use shmc::surrogates::gp::{Approximation, GpFitter, GpOptions};
use shmc::surrogates::kinds::SurrogateKind;
use shmc::surrogates::network::{NetworkFitter, TrainOptions};
use shmc::{Error, Model, Result};

pub mod figure3;
mod figure3_plot;
pub mod figures;
pub mod grid;
pub mod nuts;
pub mod posteriordb;
pub mod sbc;
pub mod surrogates;
pub mod ttr;
pub mod umbridge;
pub mod vhmc;

/// The experiments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Experiment {
    /// The logistic-regression simulation (N = 10⁵, d = 50).
    LrSim,
    /// UCI Bank Marketing (bank-additional-full.csv without the rows of unknown housing and
    /// loan, one-hot without levels seen on fewer than 10 rows, standardized, intercept).
    Bank,
    /// LIBSVM a9a, standardized and randomly projected to 60 features.
    A9a,
    /// The elliptic PDE inverse problem (30×30 mesh, 20 Karhunen–Loève modes, prior sd 0.5).
    Pde,
    /// The same inverse problem on a 120×120 mesh with data from a 200×200 one
    /// ([`EllipticPde::fine`]): one solve costs tens of milliseconds.
    PdeFine,
}

/// The settings of one experiment.
#[derive(Clone, Debug)]
pub struct BenchSettings {
    /// Leapfrog step size (the papers', except on Bank and a9a: see [`Experiment::settings`]).
    pub step_size: f64,
    /// Maximum leapfrog steps, drawn uniformly from 1..=steps.
    pub steps: u32,
    /// Burn-in iterations (exact HMC; the surrogates train on it).
    pub burn_in: usize,
    /// Burn-in iterations before states are collected.
    pub train_after: usize,
    /// Kept draws.
    pub draws: usize,
    /// The NUTS row's warmup per chain: nutpie's 1000 (300 in the quick run), or on pde-fine
    /// the burn-in every row has.
    pub nuts_warmup: usize,
    /// Hidden units.
    pub hidden: usize,
    /// Seed of the chains and the networks.
    pub seed: u64,
    /// The folder holding the real data sets.
    pub data_dir: PathBuf,
    /// The rows to run, by their keys in [`METHOD_KEYS`].
    pub methods: Vec<String>,
    /// RMHMC's and RNS-RMHMC's fixed step size (the papers').
    pub rmhmc_step_size: f64,
    /// RMHMC's and RNS-RMHMC's steps per trajectory (every trajectory takes them all).
    pub rmhmc_steps: u32,
    /// Exact RMHMC's burn-in and kept draws (its metric makes an iteration up to hundreds of
    /// HMC's, so the quick run shortens them more than the others').
    pub rmhmc_iterations: (usize, usize),
    /// nutpie's min ESS_bulk per second on the LR simulation, on the machine the bench runs on
    /// (`host/benches/nutpie_lr_sim.py` measures it); the all-in row is compared with it.
    pub nutpie_rate: f64,
    /// The folder to draw the journal's figures in ([`figures`]), created if needed; `None`:
    /// no figures, and no runs for them.
    pub plots: Option<PathBuf>,
}

/// The keys of the rows a bench can run, in the order they run: HMC, RNS-HMC (potential and
/// score fits), ARNS-HMC, RNS-HMC with 4× longer surrogate trajectories and with the lengths its
/// curvature picks, RMHMC and RNS-RMHMC (Table 1's last two rows), the all-in run (2 chains,
/// adapted, accounted as nutpie's figure) and NUTS (the last two by default on lr-sim only).
pub const METHOD_KEYS: [&str; 15] = [
    "hmc",
    "rns",
    "rns-score",
    "arns",
    "rns-long",
    "rns-auto",
    "gp",
    "fitc",
    "rmhmc",
    "rns-rmhmc",
    "mlda",
    "mlda-net",
    "all-in",
    "transitions",
    "nuts",
];

/// The rows that compare whole runs on both cores rather than the papers' single chains: by
/// default on lr-sim (the posterior nutpie's figure is for) and on the PDE problem, where the
/// issue asks for the comparison with NUTS.
const WALL_TIME_KEYS: [&str; 3] = ["all-in", "transitions", "nuts"];

/// pde-fine's rows: the exact baselines (HMC, NUTS), the best surrogate configuration of the
/// paper's problem (all-in), surrogate transitions and MLDA over meshes. The others pay the
/// exact burn-in or RMHMC's metric at tens of milliseconds a solve and say nothing new.
const PDE_FINE_KEYS: [&str; 6] = ["hmc", "mlda", "mlda-net", "all-in", "transitions", "nuts"];

/// Surrogate transitions between two exact judgements in the `transitions` row off the PDEs: 3,
/// the value `bench sbc` checks; the best k depends on the surrogate's quality (stop 42:
/// logistic 10, the 30×30 PDE 1), so this is a setting, not a tuned optimum (the PDEs' rows
/// choose it with `auto`).
const TRANSITIONS: u32 = 3;

/// pde-fine's run lengths, the same for every row: 500 burn-in (or warmup) and 1000 kept draws
/// per chain (the quick run: 20 and 30). At about 25 ms a solve this keeps `bench pde-fine`
/// within half an hour on 2 idle cores, and 1000 draws give HMC a tail ESS of a few hundred (the
/// paper's problem: 1985 in 5000).
const PDE_FINE_LENGTHS: [(usize, usize); 2] = [(500, 1000), (20, 30)];

/// RNS-HMC with a Gaussian process as its surrogate instead of the network (issue #36: where
/// each surrogate wins), run only when asked (`--with-gp`, or by key): the full GP's fit is
/// `O(n³)` in the burn-in's accepted states (about 3000 with the papers' burn-in), and leaving
/// them out keeps the default runs and their draws as they were.
pub const GP_KEYS: [&str; 2] = ["gp", "fitc"];

impl Experiment {
    /// The papers' settings (docs/methods.md, "Published settings and results", with the exceptions below), or a run of
    /// under a minute with `quick`.
    pub fn settings(self, quick: bool, data_dir: PathBuf) -> BenchSettings {
        // Bank and a9a keep the papers' L but not their ε, which does not suit our
        // preprocessing (51 one-hot features for the paper's 24; 60 projected ones): leapfrog is
        // unstable once ε exceeds 2 σ_min, the smallest posterior sd along an eigenvector, and
        // Bank's σ_min is 0.0064 (HMC at ε = 0.012 accepts 0.41, at 0.008 0.82); a9a's is
        // smaller still (ε = 0.012 rejects every proposal, 0.003 accepts 0.92). Bank also needs s ≥ d(d + 1)/2 = 1326 to hold its near-Gaussian
        // shape: s = 1000 accepted 0.35 where 1500 accepts as HMC does.
        let (step_size, steps, hidden) = match self {
            Experiment::LrSim => (0.045, 6, 2000),
            Experiment::Bank => (0.008, 45, 1500),
            Experiment::A9a => (0.003, 10, 2500),
            Experiment::Pde | Experiment::PdeFine => (0.16, 10, 1000),
        };
        // The journal's RMHMC settings (Table 1), for RMHMC and RNS-RMHMC alike.
        let (rmhmc_step_size, rmhmc_steps) = match self {
            Experiment::LrSim => (0.54, 2),
            Experiment::Bank => (0.4, 6),
            Experiment::A9a => (0.5, 4),
            Experiment::Pde | Experiment::PdeFine => (0.8, 3),
        };
        let mut s = BenchSettings {
            step_size,
            steps,
            rmhmc_step_size,
            rmhmc_steps,
            rmhmc_iterations: (5000, 5000),
            burn_in: 5000,
            train_after: 1000,
            draws: 5000,
            nuts_warmup: if quick { 300 } else { 1000 },
            hidden,
            seed: 1,
            data_dir,
            methods: METHOD_KEYS
                .iter()
                .filter(|k| {
                    !GP_KEYS.contains(k)
                        && (!WALL_TIME_KEYS.contains(k)
                            || matches!(self, Experiment::LrSim | Experiment::Pde))
                })
                .map(|k| k.to_string())
                .collect(),
            nutpie_rate: NUTPIE_LR_SIM_MIN_ESS_PER_SECOND,
            plots: None,
        };
        if quick {
            // Bank's 45 steps make an exact iteration ~8x the others': fewer iterations keep
            // its quick run near a minute.
            let long = steps > 10;
            s.burn_in = if long { 600 } else { 2000 };
            s.train_after = if long { 100 } else { 200 };
            s.draws = if long { 400 } else { 1000 };
            // Fewer units than d(d + 1)/2 (1275 at d = 50) cannot hold a d-dimensional
            // quadratic, which is what a near-Gaussian posterior needs: 400 units proposed so
            // poorly that the quick run said nothing about the full one.
            s.hidden = s.hidden.min(1500);
            // An exact RMHMC iteration costs ~10 metric points of O(N·d²) each on the
            // regressions: enough draws to see its cost and a rough ESS, no more.
            s.rmhmc_iterations = (20, 100);
        }
        if self == Experiment::PdeFine {
            (s.burn_in, s.draws) = PDE_FINE_LENGTHS[usize::from(quick)];
            s.train_after = s.burn_in / 5;
            s.nuts_warmup = s.burn_in;
            s.methods = PDE_FINE_KEYS.iter().map(|k| k.to_string()).collect();
        }
        s
    }

    /// Whether this is one of the elliptic PDE problems.
    fn is_pde(self) -> bool {
        matches!(self, Experiment::Pde | Experiment::PdeFine)
    }

    /// The experiment's name on the command line and in the rows' `problem` field.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::LrSim => "lr-sim",
            Experiment::Bank => "bank",
            Experiment::A9a => "a9a",
            Experiment::Pde => "pde",
            Experiment::PdeFine => "pde-fine",
        }
    }

    /// The observations of the simulated logistic regression, for the experiment that is one
    /// (lr-sim: the papers' 10⁵, 20 000 with `quick`); `None` for real data and the PDE.
    pub fn simulated_observations(self, quick: bool) -> Option<usize> {
        (self == Experiment::LrSim).then_some(simulation_size(quick))
    }

    /// The posterior, and a line saying what it is.
    pub fn model(self, settings: &BenchSettings, quick: bool) -> Result<(Box<dyn Model>, String)> {
        let prior = LogisticRegression::DEFAULT_PRIOR_VARIANCE;
        let mut data = match self {
            Experiment::LrSim => {
                let n = simulation_size(quick);
                let model = LogisticRegression::simulate(n, 50, settings.seed)?;
                let line = format!("posterior: 50 parameters, {n} observations");
                return Ok((Box::new(model), line));
            }
            // The quick run keeps the paper's model: it is the size that sets the costs.
            Experiment::Pde => {
                let pde = PdeSettings {
                    data_seed: settings.seed,
                    ..PdeSettings::default()
                };
                let line = format!(
                    "posterior: {} Karhunen-Loeve mode weights (prior sd {}), {}x{} Q1 mesh, \
                     {} observations with noise sd {}",
                    pde.modes,
                    pde.prior_sd,
                    pde.mesh,
                    pde.mesh,
                    EllipticPde::OBSERVATION_GRID.pow(2),
                    EllipticPde::NOISE_SD
                );
                return Ok((Box::new(EllipticPde::simulate(pde)?), line));
            }
            Experiment::PdeFine => {
                let model = EllipticPde::fine(settings.seed, u64::MAX)?;
                let line = format!(
                    "posterior: {} Karhunen-Loeve mode weights, {n}x{n} Q1 mesh, data simulated \
                     on a {m}x{m} mesh",
                    model.settings().modes,
                    n = EllipticPde::FINE_MESH,
                    m = model.data_mesh(),
                );
                return Ok((Box::new(model), line));
            }
            // The paper's 40,197 rows: without the 990 whose housing and loan are unknown (the
            // same rows, so their two indicators are identical columns), and without the levels
            // seen on fewer than 10 rows (only `default=yes`, 3 rows: see
            // `Dataset::without_sparse_columns`).
            Experiment::Bank => {
                read_csv(
                    bundled_in(&settings.data_dir, "bank-additional-full.csv")?,
                    "y",
                    Missing::Error,
                    u64::MAX,
                )?
                .without_rows_where("housing=unknown")?
                .without_sparse_columns(10)?
                .0
            }
            Experiment::A9a => {
                read_libsvm(bundled_in(&settings.data_dir, "a9a")?, Some(123), u64::MAX)?
            }
        };
        let steps = match self {
            Experiment::A9a => Preprocessing {
                standardize: true,
                projection: Some(Projection {
                    k: 60,
                    seed: 1,
                    memory_limit: u64::MAX,
                }),
                intercept: false,
            },
            _ => Preprocessing {
                standardize: true,
                projection: None,
                intercept: true,
            },
        };
        data.preprocess(&steps)?;
        let line = format!("posterior: {} parameters, {} observations", data.p, data.n);
        Ok((Box::new(LogisticRegression::new(data, prior)?), line))
    }
}

/// The observations of lr-sim's simulated logistic regression: the papers' 10⁵, or 20 000 for
/// a quick run.
fn simulation_size(quick: bool) -> usize {
    if quick { 20_000 } else { 100_000 }
}

/// One row of the table (and one object of `--json`).
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    /// The problem (posterior) the row is for: the experiment's name, or in `bench grid` one
    /// of its problems.
    pub problem: String,
    /// The row's key in [`METHOD_KEYS`] (`bench grid`: `hmc`, `rns` or `grid`).
    pub key: String,
    /// The method (with its variant).
    pub method: String,
    /// Mean acceptance probability of the kept draws.
    pub acceptance: f64,
    /// Smallest Geyer ESS over the parameters.
    pub ess_min: f64,
    /// Median Geyer ESS.
    pub ess_median: f64,
    /// Largest Geyer ESS.
    pub ess_max: f64,
    /// Smallest tail ESS (5 % and 95 % quantiles) over the parameters: a trajectory length
    /// that only made draws antithetic would raise the bulk ESS and not this one.
    pub ess_tail_min: f64,
    /// `ess_min` per kept draw.
    pub ess_min_per_iteration: f64,
    /// Sampling seconds per kept draw.
    pub seconds_per_iteration: f64,
    /// Median seconds of one exact `U` in this run.
    pub exact_potential_seconds: f64,
    /// Exact gradient evaluations per kept draw.
    pub mean_gradient_evaluations_per_iteration: f64,
    /// `ess_min` per second of sampling (the papers' convention).
    pub min_ess_per_second: f64,
    /// `ess_min` per second of burn-in, training and sampling (what a user waits for).
    pub min_ess_per_second_with_training: f64,
    /// `min_ess_per_second` over HMC's.
    pub speedup: f64,
    /// The standard error of `speedup` where the bench runs independent replicates (the grid
    /// bench: the jackknife over them, paired by seed); NaN (`null`) elsewhere.
    pub speedup_se: f64,
    /// Seconds spent training the surrogate (part of burn-in).
    pub training_seconds: f64,
    /// Seconds of a surrogate precomputed before sampling (a grid), apart from burn-in and
    /// sampling; 0 for none.
    pub precompute_seconds: f64,
    /// Exact evaluations of that precomputation.
    pub precompute_evaluations: u64,
    /// Online update time, for ARNS-HMC.
    pub online_update_seconds: f64,
    /// Online updates made, for ARNS-HMC.
    pub online_updates: u64,
    /// The trajectory lengths, as text: those chosen from the surrogate's curvature (`auto`),
    /// or in `bench grid` the lengths every method ran; `null` where the bench's settings say.
    pub trajectory: Option<String>,
    /// The step size after warmup, the geometric mean over the row's chains (in `bench grid`
    /// the one every method of a problem ran); NaN where the sampler is not shmc's.
    pub step_size: f64,
    /// The chosen input scale and held-out gradient error of the surrogate.
    pub surrogate_scale: f64,
    /// Relative RMS error of the surrogate gradient on held-out training states.
    pub holdout_gradient_error: f64,
    /// Chains run at once (one per core); the papers' rows run one.
    pub chains: usize,
    /// For the all-in row: `min_ess_per_second_with_training` over nutpie's figure
    /// ([`BenchSettings::nutpie_rate`]; else NaN, `null` in JSON).
    pub versus_nutpie: f64,
    /// The nutpie figure `versus_nutpie` is relative to.
    pub nutpie_rate: f64,
    /// For the all-in row: `min_ess_per_second_with_training` over the NUTS row's, measured in
    /// the same run (else NaN).
    pub versus_nuts: f64,
    /// min(bulk, tail) ESS per second, everything included (burn-in or warmup, training, MAP;
    /// the bulk ESS is Geyer's for the single-chain rows): the figure for the goals.
    pub min_bulk_tail_per_second_with_training: f64,
    /// `min_bulk_tail_per_second_with_training` over the NUTS row's in the same run (NaN
    /// without one).
    pub versus_nuts_min_bulk_tail: f64,
    /// The model's own work (see [`Model::work`]: PDE solves) per iteration, burn-in included,
    /// by name; empty for models that count none.
    pub work_per_iteration: Vec<(String, f64)>,
    /// The model's work per effective draw, everything included (warmup, training): each
    /// counter over the smallest tail ESS.
    pub solves_per_ess_tail: Vec<(String, f64)>,
    /// Each counter over the smallest bulk ESS.
    pub solves_per_ess_bulk: Vec<(String, f64)>,
    /// For the RMHMC rows: their sampling's generalized-leapfrog work and failures.
    pub rmhmc: Option<KernelWork>,
    /// For the surrogate-transitions rows: the `W:S` the chains ran (what `auto` chose), one
    /// when they agree, else one per chain; rerunning with it makes the same draws.
    pub transitions_k: Option<String>,
}

/// The `W:S` the run's chains ran ([`BenchRow::transitions_k`]), if they ran surrogate
/// transitions.
fn transitions_k(run: &Run) -> Option<String> {
    let mut chosen: Vec<String> = run
        .chains
        .iter()
        .filter_map(|c| c.transitions.map(|t| t.setting()))
        .collect();
    if chosen.windows(2).all(|w| w[0] == w[1]) {
        chosen.truncate(1);
    }
    (!chosen.is_empty()).then(|| chosen.join(","))
}

/// The growth of each work counter between two readings of [`Model::work`].
fn work_since(before: &[(&'static str, u64)], after: &[(&'static str, u64)]) -> Vec<(String, u64)> {
    after
        .iter()
        .map(|(name, n)| {
            let start = before
                .iter()
                .find(|(b, _)| b == name)
                .map_or(0, |(_, v)| *v);
            (name.to_string(), n - start)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

impl BenchRow {
    /// Sets the work per effective draw from the run's whole `work` and the row's ESS.
    fn set_work_per_ess(&mut self, work: &[(String, u64)]) {
        self.solves_per_ess_tail = per_iteration(work, self.ess_tail_min);
        self.solves_per_ess_bulk = per_iteration(work, self.ess_min);
    }
}

/// `work` per iteration.
fn per_iteration(work: &[(String, u64)], iterations: f64) -> Vec<(String, f64)> {
    work.iter()
        .map(|(name, n)| (name.clone(), *n as f64 / iterations))
        .collect()
}

/// nutpie's NUTS on the LR simulation (diagonal mass matrix, 4 chains × (1000 warmup + 5000
/// draws), both cores): min ESS_bulk per second of wall time, warmup included, as the issue
/// gives it for a 2-core AMD EPYC. `host/benches/nutpie_lr_sim.py` measures it on the machine
/// at hand (`shmc bench lr-sim --nutpie RATE`): a Python package cannot run inside this
/// process, and a figure from another machine makes a ratio of two machines.
pub const NUTPIE_LR_SIM_MIN_ESS_PER_SECOND: f64 = 43.8;

/// Median seconds of one exact `U` at `q`, over repeated evaluations.
fn exact_potential_seconds(model: &dyn Model, q: &[f64]) -> f64 {
    let mut times: Vec<f64> = (0..25)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(model.value(std::hint::black_box(q)));
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// `ess` of each of `dim` parameters over all chains, `series(p)` giving each chain's draws of
/// parameter `p`; NaN where the draws cannot be diagnosed.
fn per_parameter<'a>(
    dim: usize,
    series: impl Fn(usize) -> Vec<&'a [f64]>,
    ess: fn(&Draws) -> f64,
) -> Vec<f64> {
    (0..dim)
        .map(|p| Draws::new(&series(p)).map_or(f64::NAN, |d| ess(&d)))
        .collect()
}

/// The smallest of `values`, NaN if every one is.
fn smallest(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NAN, f64::min)
}

/// What a row's ESS per second divides by.
struct Seconds {
    /// Sampling alone: the longest chain's, for chains run side by side
    /// ([`Run::sampling_seconds`]), or their sum, for runs made one after another.
    sampling: f64,
    /// What a user waited: burn-in, training and sampling, or wall time.
    with_training: f64,
}

/// The row of `run` (all its chains) given each parameter's ESS and the `seconds` it took.
fn row(
    key: &str,
    label: &str,
    run: &Run,
    exact_u: f64,
    ess_values: &[f64],
    seconds: Seconds,
) -> BenchRow {
    let tail = smallest(&per_parameter(run.names.len(), |p| run.series(p), ess_tail));
    let e = ess_summary(ess_values).unwrap_or(shmc::diagnostics::EssSummary {
        min: f64::NAN,
        median: f64::NAN,
        max: f64::NAN,
    });
    let kept = run.chains.iter().map(|c| c.kept()).sum::<usize>().max(1) as f64;
    let total =
        |f: &dyn Fn(&shmc::sampler::ChainResult) -> f64| run.chains.iter().map(f).sum::<f64>();
    let surrogate = run.chains[0].surrogate.as_ref();
    let report = surrogate.cloned().unwrap_or_default();
    let trained = |x: f64| if surrogate.is_some() { x } else { f64::NAN };
    BenchRow {
        problem: String::new(),
        key: key.to_string(),
        method: label.to_string(),
        acceptance: run.mean_accept_stat(),
        ess_min: e.min,
        ess_median: e.median,
        ess_max: e.max,
        ess_tail_min: tail,
        ess_min_per_iteration: e.min / kept,
        seconds_per_iteration: total(&|c| c.sampling_seconds) / kept,
        exact_potential_seconds: exact_u,
        mean_gradient_evaluations_per_iteration: total(&|c| {
            c.sampling_evaluations.exact_gradients as f64
        }) / kept,
        min_ess_per_second: e.min / seconds.sampling,
        min_ess_per_second_with_training: e.min / seconds.with_training,
        speedup: f64::NAN,
        speedup_se: f64::NAN,
        training_seconds: report.training_seconds,
        precompute_seconds: 0.0,
        precompute_evaluations: 0,
        online_update_seconds: report.online_seconds,
        online_updates: report.online_updates,
        trajectory: trajectories_line(&report, &run.chains[0].sampling_evaluations),
        step_size: run.step_size(),
        surrogate_scale: trained(report.scale),
        holdout_gradient_error: trained(report.holdout_gradient_error),
        chains: run.chains.len(),
        versus_nutpie: f64::NAN,
        nutpie_rate: f64::NAN,
        versus_nuts: f64::NAN,
        min_bulk_tail_per_second_with_training: e.min.min(tail) / seconds.with_training,
        versus_nuts_min_bulk_tail: f64::NAN,
        work_per_iteration: Vec::new(),
        solves_per_ess_tail: Vec::new(),
        solves_per_ess_bulk: Vec::new(),
        rmhmc: run.chains[0].riemannian.map(|r| r.sampling),
        transitions_k: transitions_k(run),
    }
}

/// The all-in run: what a user on this machine gets from `shmc sample`, accounted as nutpie's
/// figure is. RNS-HMC trained on the Laplace approximation on 4 chains at once, as nutpie and
/// the NUTS row run (in lockstep: each iteration's exact `U` of every chain in one pass over the
/// data, its rows split across the cores):
/// the MAP search and its Hessian (the Laplace mass matrix), a residual network of
/// [`LaplacePlan`]'s units score-matched at its draws, then warmup and draws with NUTS's trees
/// on the network, each draw judged by delayed acceptance against the exact `U` (one exact `U`
/// per draw; NUTS's antithetic trees give means, the bulk ESS this row is ranked by, about
/// twice the effective draws per draw of the trajectory lengths the curvature picks, which are
/// chosen for means and variances alike: on LR-sim 2.05 against 0.89 bulk, 0.63 against 0.80
/// tail, at the same cost per draw); on the PDE, whose surrogate is rougher, the curvature's
/// lengths. ESS is the rank-normalized bulk ESS of the pooled chains
/// (the tail ESS is reported beside it); time is wall time from the MAP search to the last
/// draw, everything before the draws included.
fn all_in_row(
    experiment: Experiment,
    model: &dyn Model,
    settings: &BenchSettings,
    (quick, exact_u): (bool, f64),
    (key, label, transitions): (&str, &str, Option<Transitions>),
    log: &dyn Fn(&str),
) -> Result<BenchRow> {
    let chains = 4;
    let plan = LaplacePlan::for_experiment(experiment);
    let warmup = plan.warmup;
    log(&format!(
        "running {label}: RNS-HMC trained on {} ({chains} chains at once, {warmup} warmup) ...",
        plan.describe(model)
    ));
    let start = Instant::now();
    let work_before = model.work();
    // NUTS's trees pay where the surrogate is close: their draws are antithetic only while
    // delayed acceptance keeps them. On LR-sim (held-out gradient error 0.002, acceptance
    // 0.997) they gave min bulk ESS 41 058 against the curvature's lengths' 17 856 in 5000
    // draws; on the PDE (error 0.13, acceptance 0.81) 9940 in 4.0 s against 10 711 in 3.6 s.
    let trajectory = match experiment {
        Experiment::Pde | Experiment::PdeFine => SurrogateSteps::Auto,
        _ => SurrogateSteps::Nuts,
    };
    let surrogate = SurrogateSettings {
        transitions,
        ..plan.surrogate(trajectory, settings.seed)
    };
    let config = SampleConfig {
        chains,
        warmup,
        draws: settings.draws,
        seed: settings.seed,
        step_size: StepSize::Adapt { target: 0.8 },
        steps: Steps::Jittered(settings.steps),
        save_warmup: false,
        max_energy_error: 1000.0,
        lockstep: true,
        method: Method::RnsHmc(surrogate),
        design_level: plan.design_level(model),
        ..SampleConfig::default()
    };
    let sinks: Vec<Box<dyn DrawSink>> = (0..chains).map(|_| Box::new(NullSink) as _).collect();
    let run = sample(model, &config, sinks, &|_, _| {}, None)?;
    let wall = start.elapsed().as_secs_f64();
    let map_seconds = run.laplace.map_or(0.0, |l| l.seconds);
    let training = run.precompute.map_or(0.0, |p| p.seconds);
    for c in &run.chains {
        log(&format!(
            "  chain {}: MAP and Hessian {map_seconds:.2} s, training {training:.2} s, warmup \
             {:.2} s, draws {:.2} s, step size {:.4}, trajectories: {}{}",
            c.chain,
            c.warmup_seconds,
            c.sampling_seconds,
            c.step_size,
            c.surrogate
                .as_ref()
                .and_then(|r| trajectories_line(r, &c.sampling_evaluations))
                .unwrap_or_else(|| "the exact phase's steps".into()),
            c.transitions
                .map(|t| format!(", surrogate transitions {}", t.describe()))
                .unwrap_or_default()
        ));
    }
    let work = work_since(&work_before, &model.work());
    let bulk = per_parameter(run.names.len(), |p| run.series(p), ess_bulk);
    let seconds = Seconds {
        sampling: run.sampling_seconds(),
        with_training: wall,
    };
    let mut all_in = row(key, label, &run, exact_u, &bulk, seconds);
    all_in.work_per_iteration = per_iteration(&work, (chains * (warmup + settings.draws)) as f64);
    all_in.set_work_per_ess(&work);
    // The quick run's posterior is smaller than the one nutpie's figure is for.
    if experiment == Experiment::LrSim && !quick {
        all_in.nutpie_rate = settings.nutpie_rate;
        all_in.versus_nutpie = all_in.min_ess_per_second_with_training / settings.nutpie_rate;
    }
    Ok(all_in)
}

/// The Laplace-trained surrogate of the all-in run and of `shmc bench ttr`'s surrogate row:
/// residual network units, Laplace draws, warmup iterations, whether a cubic term sits
/// between the quadratic and the network ([`shmc::surrogates::cubic`]), and whether the design
/// (the MAP, its Hessian and the training draws) is evaluated on the model's level of half its
/// resolution ([`SampleConfig::design_level`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LaplacePlan {
    pub hidden: usize,
    pub states: usize,
    pub warmup: usize,
    pub cubic: bool,
    pub coarse_design: bool,
}

impl LaplacePlan {
    /// The plan for `experiment`. The regressions: 300 units on 200 draws (held-out gradient
    /// errors 0.004 on LR-sim, 0.037 on Bank, 0.063 on a9a; more units changed the last
    /// digits). The PDEs: the cubic on 400 draws and 50 units, because what the quadratic
    /// misses there is mostly a cubic that random units do not fit. Measured on the 30×30 PDE
    /// (4 chains × 5000 draws, seed 1): without the cubic (300 units, 200 draws) the held-out
    /// gradient error is 0.134, the exact acceptance 0.80 and the min bulk/tail ESS
    /// 10 711/8505; with it, 0.060, 0.89 and 14 006/14 472, for 0.09 s more training. Their
    /// warmup is 75 iterations: with the Laplace metric only the step size adapts, and 75
    /// against 150 gave the same ESS within seeds' noise (seeds 2, 3: min tail 14 122 and
    /// 13 431 against 14 022 and 13 823), one second less on pde-fine. Their design runs on
    /// the mesh of half the model's: on the 120×120 mesh (4 chains × 1250 draws, seed 1) the
    /// MAP, Hessian and 400 training draws took 0.63 s on 60×60 against 3.40 s, for the same
    /// acceptance (0.893) and min tail ESS (3198); on 30×30, 0.12 s on 15×15 against 0.26 s
    /// (acceptance 0.887 against 0.894, the same ESS within 1 %).
    pub(crate) fn for_experiment(experiment: Experiment) -> Self {
        if experiment.is_pde() {
            Self {
                hidden: 50,
                states: 400,
                warmup: 75,
                cubic: true,
                coarse_design: true,
            }
        } else {
            Self {
                hidden: 300,
                states: 200,
                warmup: 150,
                cubic: false,
                coarse_design: false,
            }
        }
    }

    /// The design level on `model`: half its resolution, if the plan asks for it and the
    /// model has levels.
    pub(crate) fn design_level(&self, model: &dyn Model) -> Option<usize> {
        let levels = model.levels().filter(|_| self.coarse_design)?;
        Some(levels.resolution() / 2)
    }

    /// RNS-HMC's surrogate settings for the plan, with trajectories `trajectory`.
    pub(crate) fn surrogate(&self, trajectory: SurrogateSteps, seed: u64) -> SurrogateSettings {
        SurrogateSettings {
            trajectory,
            cubic: self.cubic,
            ..SurrogateSettings::laplace_trained(self.hidden, self.states, seed)
        }
    }

    /// "N Laplace draws, s = S[, cubic][, design on level L]" on `model`, for the rows' labels.
    pub(crate) fn describe(&self, model: &dyn Model) -> String {
        let cubic = if self.cubic { ", cubic" } else { "" };
        let design = match self.design_level(model) {
            Some(level) => format!(", design on level {level}"),
            None => String::new(),
        };
        format!(
            "{} Laplace draws, s = {}{cubic}{design}",
            self.states, self.hidden
        )
    }
}

/// RNS-RMHMC's residual network units and Laplace draws on the PDE, where the surrogate also
/// carries a cubic term ([`shmc::surrogates::cubic`]). Measured without it (seed 1): the
/// held-out relative gradient error of the anchored surrogate is 0.137 with one unit (the
/// quadratic alone, nearly), 0.135 with 20 to 150, 0.134 with 300 and 0.133 with 600 (400 draws
/// instead of 200: 0.139), so more units buy no better proposals, only dearer metric points
/// (O(s·d) each, and the O(s·d²) derivative matrix at every step's end): 50 units. The cubic's
/// 1540 coefficients want more draws: fitted on 200, 400 and 800 of 2000 draws (seed 1, 1.2x
/// wider than the approximation) the rest's gradient error is 0.093, 0.076 and 0.070, and on
/// seeds 2 and 5 RNS-RMHMC's min ESS was 4742 and 5088 with 200 draws, about 5560 with 400
/// (5561 and 5286 in the bench's own fit, which holds a fifth of them out): 400 draws, about
/// 0.3 s of exact gradients.
const PDE_RNS_RMHMC_PLAN: (usize, usize) = (50, 400);

/// Runs the rows `settings.methods` names on the experiment, in the order of [`METHOD_KEYS`],
/// then, with [`BenchSettings::plots`], draws the figures (and makes their own runs).
pub fn run_experiment(
    experiment: Experiment,
    settings: &BenchSettings,
    quick: bool,
    log: &dyn Fn(&str),
) -> Result<Vec<BenchRow>> {
    prepare_plots(experiment, settings)?;
    let (model, description) = experiment.model(settings, quick)?;
    let model = model.as_ref();
    log(&description);
    let surrogate = surrogate_settings(settings);
    let methods = methods(experiment, settings, &surrogate);
    // Start every method at the MAP: from 0 the papers' small fixed step sizes can diverge on
    // every proposal (a9a: U's gradient at 0 is ~10⁴) and the chain never moves.
    let map = find_map(model, &vec![0.0; model.dim()], &MapOptions::default())?;
    log(&format!(
        "start: the MAP, found in {} evaluations ({})",
        map.evaluations, map.termination
    ));
    let mut rows: Vec<BenchRow> = Vec::new();
    let mut traces: Vec<figures::Traces> = Vec::new();
    // HMC's burn-in, which Figs. 5 and 4 fit their networks on.
    let mut hmc_warmup: Vec<Vec<f64>> = Vec::new();
    for (key, label, method) in methods {
        if !settings.methods.iter().any(|m| m == key) {
            continue;
        }
        log(&format!("running {label} ..."));
        log_laplace_plan(label, &method, log);
        // MLDA starts at the prior mean: its burn-in, judged by the finest coarse mesh, finds
        // the typical set without a fine solve, where the MAP would cost fine solves its row
        // would have to count (213 on pde-fine).
        let origin = vec![0.0; model.dim()];
        let start = match method {
            Method::Mlda(_) => &origin,
            _ => &map.position,
        };
        let chain = chain_row(model, settings, (key, label), method, start)?;
        if let Some(warmup) = chain.warmup {
            hmc_warmup = warmup;
        }
        traces.push(chain.trace);
        rows.push(chain.row);
    }
    set_speedups(&mut rows);
    // Their speed-ups stay NaN: four chains against the papers' one are not comparable.
    for (key, label, transitions) in surrogate_wall_rows(experiment) {
        if !settings.methods.iter().any(|m| m == key) {
            continue;
        }
        let exact_u = match rows.first() {
            Some(r) => r.exact_potential_seconds,
            None => exact_potential_seconds(model, &map.position),
        };
        let what = (key, label, transitions);
        rows.push(all_in_row(
            experiment,
            model,
            settings,
            (quick, exact_u),
            what,
            log,
        )?);
    }
    if settings.methods.iter().any(|m| m == "nuts") {
        let (row, trace) = nuts_row(model, settings, log)?;
        rows.push(row);
        traces.push(trace);
    }
    for r in &mut rows {
        r.problem = experiment.name().to_string();
    }
    compare_with_nuts(&mut rows);
    if let Some(dir) = &settings.plots {
        let figures = Figures {
            dir,
            model,
            settings,
            traces: &traces,
            burn_in: &hmc_warmup,
            map: &map.position,
            simulated: experiment.simulated_observations(quick),
        };
        figures.draw(&surrogate, quick, log)?;
    }
    Ok(rows)
}

/// The surrogate rows run as the all-in run is (4 chains, Laplace-trained, wall time), one line
/// per row: (key, label, surrogate transitions between exact judgements). On the PDEs the
/// transitions row runs `auto` (its chosen `W:S` is in the row's `transitions_k`); elsewhere 3.
fn surrogate_wall_rows(
    experiment: Experiment,
) -> [(&'static str, &'static str, Option<Transitions>); 2] {
    let (label, transitions) = if experiment.is_pde() {
        (
            "RNS-HMC, auto surrogate transitions (4 chains)",
            Transitions::Auto,
        )
    } else {
        (
            "RNS-HMC, 3 surrogate transitions (4 chains)",
            Transitions::fixed(TRANSITIONS),
        )
    };
    [
        ("all-in", "RNS-HMC all-in (4 chains)", None),
        ("transitions", label, Some(transitions)),
    ]
}

/// Makes the figures' folder, if figures are asked for, before the runs: a folder that cannot
/// be made (or an experiment the figures are not drawn for) then costs no minutes of sampling.
fn prepare_plots(experiment: Experiment, settings: &BenchSettings) -> Result<()> {
    let Some(dir) = &settings.plots else {
        return Ok(());
    };
    if experiment.is_pde() {
        return Err(Error::invalid(
            "the journal's figures are drawn for the regressions (lr-sim, bank, a9a)",
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))
}

/// The papers' RNS-HMC surrogate: a network of `settings.hidden` units trained on the burn-in
/// after `settings.train_after` iterations. The other surrogate rows and the figures vary it.
fn surrogate_settings(settings: &BenchSettings) -> SurrogateSettings {
    SurrogateSettings {
        kind: SurrogateKind::Network(NetworkFitter::potential(TrainOptions {
            hidden: settings.hidden,
            seed: settings.seed,
            ..TrainOptions::default()
        })),
        train_after: Some(settings.train_after),
        ..SurrogateSettings::default()
    }
}

/// Every row a single chain makes, as (key, label, method), in the order of [`METHOD_KEYS`]:
/// the variants of `surrogate`, then RMHMC and RNS-RMHMC.
fn methods(
    experiment: Experiment,
    settings: &BenchSettings,
    surrogate: &SurrogateSettings,
) -> Vec<(&'static str, &'static str, Method)> {
    let long = SurrogateSettings {
        trajectory: SurrogateSteps::Factor(4),
        ..surrogate.clone()
    };
    let auto = SurrogateSettings {
        trajectory: SurrogateSteps::Auto,
        ..surrogate.clone()
    };
    let mut score = surrogate.clone();
    if let SurrogateKind::Network(network) = &mut score.kind {
        network.method = FitMethod::Score;
    }
    let (gp, fitc) = gp_surrogates(settings, surrogate);
    let rmhmc = rmhmc_settings(experiment, settings);
    // RNS-RMHMC's network on the PDE: trained on the Laplace approximation's draws, with a
    // cubic term (the chain then runs in its standard coordinates, the metric the diagonal of
    // the anchored surrogate's Hessian there); elsewhere on the burn-in, as the papers do.
    let rns_rmhmc = if experiment.is_pde() {
        let (hidden, states) = PDE_RNS_RMHMC_PLAN;
        SurrogateSettings {
            cubic: true,
            ..SurrogateSettings::laplace_trained(hidden, states, settings.seed)
        }
    } else {
        surrogate.clone()
    };
    let mut rows = vec![
        ("hmc", "HMC", Method::Hmc),
        ("rns", "RNS-HMC", Method::RnsHmc(surrogate.clone())),
        ("rns-score", "RNS-HMC (score fit)", Method::RnsHmc(score)),
        ("arns", "ARNS-HMC", Method::ArnsHmc(surrogate.clone())),
        ("rns-long", "RNS-HMC (4x steps)", Method::RnsHmc(long)),
        ("rns-auto", "RNS-HMC (auto steps)", Method::RnsHmc(auto)),
        ("gp", "RNS-HMC (full GP)", Method::RnsHmc(gp)),
        ("fitc", FITC_LABEL, Method::RnsHmc(fitc)),
        ("rmhmc", "RMHMC", Method::Rmhmc(rmhmc.clone())),
        ("rns-rmhmc", "RNS-RMHMC", Method::RnsRmhmc(rns_rmhmc, rmhmc)),
    ];
    // MLDA needs the model's coarser levels: the PDE's 10x10 and 15x15 meshes, pde-fine's
    // 30x30 and 60x60 (a 60x60 solve costs about a tenth of a 120x120 one, a 30x30 a tenth of
    // that). Its network level is RNS-HMC's network, fitted on the burn-in's potentials.
    match experiment {
        Experiment::Pde => {
            let mlda = MldaSettings::new(vec![10, 15]);
            rows.push(("mlda", "MLDA (10x10, 15x15)", Method::Mlda(mlda)));
            let net = MldaSettings::with_network(vec![10, 15], surrogate.clone());
            rows.push(("mlda-net", "MLDA + network", Method::Mlda(net)));
        }
        Experiment::PdeFine => {
            let mlda = MldaSettings::new(vec![30, 60]);
            rows.push(("mlda", "MLDA (30x30, 60x60)", Method::Mlda(mlda)));
            let net = MldaSettings::with_network(vec![30, 60], surrogate.clone());
            rows.push(("mlda-net", "MLDA + network", Method::Mlda(net)));
        }
        _ => {}
    }
    rows
}

/// The `fitc` row's label.
const FITC_LABEL: &str = "RNS-HMC (FITC 500)";

/// `surrogate` with a full GP and with FITC of 500 inducing points (`shmc sample --gp fitc`'s
/// default) in place of the network, trained on the same burn-in, each fit refused above half
/// this machine's memory.
fn gp_surrogates(
    settings: &BenchSettings,
    surrogate: &SurrogateSettings,
) -> (SurrogateSettings, SurrogateSettings) {
    let with = |approximation| SurrogateSettings {
        kind: SurrogateKind::Gp(GpFitter {
            options: GpOptions {
                approximation,
                seed: settings.seed,
                memory_limit: shmc::memory::machine_default_limit(),
                ..GpOptions::default()
            },
        }),
        ..surrogate.clone()
    };
    (
        with(Approximation::Full),
        with(Approximation::Fitc { inducing: 500 }),
    )
}

/// RMHMC's and RNS-RMHMC's settings: the papers' fixed step size and trajectory length, and
/// the metric each experiment's posterior wants.
fn rmhmc_settings(experiment: Experiment, settings: &BenchSettings) -> RmhmcSettings {
    RmhmcSettings {
        step_size: StepSize::Fixed(settings.rmhmc_step_size),
        // The journal jitters the trajectory lengths of HMC and RNS-HMC only (section 5); its
        // RMHMC rows take all L steps every iteration, twice the average of 1..=L. On the PDE
        // jittering would not buy robustness either (RNS-RMHMC, seeds 1-5, min ESS of 5000
        // draws): fixed L = 3 gives 4849, 2216, 4959, 3784, 1780; 1..=3 gives 2028, 1475,
        // 1933, 1570, 2049 and 2..=4 gives 2127, 1877, 2545, 2306, 4147. Three steps of 0.8 in
        // the near-standard-normal coordinates turn the phase by about 2.4 rad, so accepted
        // draws are antithetic (lag-1 autocorrelation near -0.15, median ESS above the draw
        // count), and shorter trajectories lose that. The low seeds are no periodicity: each
        // is one long stay (28 iterations on seed 2, 26 on seed 5) at a point 3-4 posterior
        // sds out where the surrogate's own Hamiltonian is conserved (acceptance under it
        // 0.93-1.0) but the exact one is not (0.06-0.17): the surrogate's error U - Ũ is
        // lower there than around it. That error is mostly the cubic term the Laplace
        // quadratic misses, which the residual network barely fits (see
        // `PDE_RNS_RMHMC_PLAN`). Measured on 2000 exact gradients at draws 1.2x wider than
        // the approximation (seed 1): quadratic alone, held-out relative gradient error 0.19
        // and sd of U - Ũ 0.78; random softplus units (50-600) 0.16-0.18 and 0.55-0.62; a
        // cubic polynomial score-fitted on 400 of the draws 0.076 and 0.25. Hence the cubic
        // term of its surrogate (`PDE_RNS_RMHMC_PLAN`), which lifts those two seeds' min ESS
        // to 5561 and 5286: jittering L does not, and jittering ε cannot shorten a stay that
        // the integration error does not cause.
        steps: Steps::Fixed(settings.rmhmc_steps),
        // The journal's RNS-RMHMC metric for the PDE is the network Hessian's diagonal; for the
        // regressions it is the Hessian itself, which SoftAbs with α = 100 leaves unchanged
        // wherever every eigenvalue exceeds 20/α = 0.2 (posterior sd below 2.2 in every
        // direction), and where the metric's derivatives cost O(s·d) (Bank's Hessian has
        // eigenvalues of 5 and 16, which the default α = 1 would make an eigen-decomposition
        // and O(s·d²) contractions per fixed-point iteration).
        diagonal: experiment.is_pde(),
        softabs_alpha: if experiment.is_pde() {
            RmhmcSettings::default().softabs_alpha
        } else {
            100.0
        },
        ..RmhmcSettings::default()
    }
}

/// Logs, for RNS-RMHMC trained on the Laplace approximation's draws (the PDE), what its
/// surrogate and metric are: nothing in the row says so.
fn log_laplace_plan(label: &str, method: &Method, log: &dyn Fn(&str)) {
    if let Method::RnsRmhmc(surrogate, rmhmc) = method
        && let Some(states) = surrogate.laplace_states()
        && let Some(network) = surrogate.kind.network()
    {
        log(&format!(
            "  {label}: {}network of {} units {} to what the Laplace approximation's \
             quadratic misses at {states} of its draws, before the chain; the chain in the \
             approximation's standard coordinates, its metric the SoftAbs'd (alpha {}) {} \
             of the surrogate's Hessian there",
            if surrogate.cubic {
                "cubic term and "
            } else {
                ""
            },
            network.options.hidden,
            match network.method {
                FitMethod::Score => "score-matched",
                FitMethod::Potential => "fitted",
            },
            rmhmc.softabs_alpha,
            if rmhmc.diagonal { "diagonal" } else { "whole" }
        ));
    }
}

/// What one method's chain gives [`run_experiment`]: its row, its trace for the figures, and,
/// for HMC when figures are drawn, its burn-in.
struct ChainRow {
    row: BenchRow,
    trace: figures::Traces,
    warmup: Option<Vec<Vec<f64>>>,
    /// The surrogate's report (its training states, whether it collapsed), for Figure 3.
    surrogate: Option<SurrogateReport>,
}

/// Runs one chain of `method` from `start` with the papers' protocol (fixed step size,
/// jittered steps, no mass adaptation) and measures its row.
fn chain_row(
    model: &dyn Model,
    settings: &BenchSettings,
    (key, label): (&str, &str),
    method: Method,
    start: &[f64],
) -> Result<ChainRow> {
    let (burn_in, draws) = match &method {
        Method::Rmhmc(_) => settings.rmhmc_iterations,
        _ => (settings.burn_in, settings.draws),
    };
    let config = SampleConfig {
        chains: 1,
        warmup: burn_in,
        draws,
        seed: settings.seed,
        step_size: StepSize::Fixed(settings.step_size),
        steps: Steps::Jittered(settings.steps),
        adapt_mass: false,
        init: Init::Values(start.to_vec()),
        // The sink alone sees saved warmup rows: the row's figures are the same.
        save_warmup: settings.plots.is_some() && key == "hmc",
        max_energy_error: 1000.0,
        lockstep: true,
        method,
        ..SampleConfig::default()
    };
    let saved = if config.save_warmup { burn_in } else { 0 };
    let (recorder, recorded) = figures::Recorder::new(Instant::now(), saved);
    let sinks: Vec<Box<dyn DrawSink>> = vec![Box::new(recorder)];
    let work_before = model.work();
    let run = sample(model, &config, sinks, &|_, _| {}, None)?;
    let work = work_since(&work_before, &model.work());
    let chain = &run.chains[0];
    let recorded = figures::take(&recorded);
    let warmup = config.save_warmup.then_some(recorded.warmup);
    let trace = figures::Traces {
        key: key.to_string(),
        method: label.to_string(),
        chains: vec![figures::ChainTrace::new(
            chain,
            model.dim(),
            recorded.finished,
        )],
    };
    let last: Vec<f64> = (0..model.dim())
        .map(|p| *chain.parameter(p).last().unwrap_or(&0.0))
        .collect();
    let exact_u = exact_potential_seconds(model, &last);
    let geyer: Vec<f64> = (0..run.names.len())
        .map(|p| ess(&Draws::from_chain(chain.parameter(p))))
        .collect();
    let seconds = Seconds {
        sampling: run.sampling_seconds(),
        with_training: chain.warmup_seconds + chain.sampling_seconds,
    };
    let mut row = row(key, label, &run, exact_u, &geyer, seconds);
    row.work_per_iteration = per_iteration(&work, (burn_in + draws) as f64);
    row.set_work_per_ess(&work);
    let surrogate = chain.surrogate.clone();
    Ok(ChainRow {
        row,
        trace,
        warmup,
        surrogate,
    })
}

/// Sets every row's speed-up over HMC's row; without one they stay NaN.
fn set_speedups(rows: &mut [BenchRow]) {
    if let Some(hmc) = rows
        .iter()
        .find(|r| r.key == "hmc")
        .map(|r| r.min_ess_per_second)
    {
        for r in rows {
            r.speedup = r.min_ess_per_second / hmc;
        }
    }
}

/// Sets the all-in row's rate over NUTS's in the same run, both warmup and training included,
/// and every row's min(bulk, tail) rate over NUTS's, when NUTS ran.
fn compare_with_nuts(rows: &mut [BenchRow]) {
    let Some(nuts) = rows.iter().find(|r| r.key == "nuts").cloned() else {
        return;
    };
    for r in rows.iter_mut() {
        r.versus_nuts_min_bulk_tail =
            r.min_bulk_tail_per_second_with_training / nuts.min_bulk_tail_per_second_with_training;
        if r.key == "all-in" {
            r.versus_nuts =
                r.min_ess_per_second_with_training / nuts.min_ess_per_second_with_training;
        }
    }
}

/// The goals' figures of the rows that count the model's solves (the PDE problems), one line
/// each: fine solves per tail ESS (the goal: at most 1.5), the work per tail ESS by
/// level, and min(bulk, tail) ESS per second with everything included, over NUTS's.
fn format_goals(rows: &[BenchRow]) -> String {
    let mut out = String::new();
    for r in rows.iter().filter(|r| !r.solves_per_ess_tail.is_empty()) {
        let fine = r
            .solves_per_ess_tail
            .iter()
            .find(|(name, _)| name == "forward solves")
            .map_or(0.0, |(_, n)| *n);
        let levels: Vec<String> = r
            .solves_per_ess_tail
            .iter()
            .map(|(name, n)| format!("{n:.2} {name}"))
            .collect();
        out.push_str(&format!(
            "{}: {fine:.2} fine solves per tail ESS ({}); min(bulk, tail) ESS {:.3}/s with \
             everything included, {:.2}x NUTS's\n",
            r.method,
            levels.join(", "),
            r.min_bulk_tail_per_second_with_training,
            r.versus_nuts_min_bulk_tail
        ));
    }
    out
}

/// What [`run_experiment`] hands its figures: the rows' traces, HMC's burn-in, the MAP, and
/// for the simulation its observations (Fig. 4's dimension panel simulates its own posteriors
/// of that size; real data have no other dimensions to offer).
struct Figures<'a> {
    dir: &'a std::path::Path,
    model: &'a dyn Model,
    settings: &'a BenchSettings,
    traces: &'a [figures::Traces],
    burn_in: &'a [Vec<f64>],
    map: &'a [f64],
    simulated: Option<usize>,
}

impl Figures<'_> {
    /// Draws every figure the rows that ran allow, logging what each needed and took (Figs. 5
    /// and 4 fit networks and run chains of their own: `surrogate` is the RNS row's; Fig. 4's
    /// dimension panel also runs HMC on each posterior it simulates).
    fn draw(&self, surrogate: &SurrogateSettings, quick: bool, log: &dyn Fn(&str)) -> Result<()> {
        let start = Instant::now();
        let dir = self.dir.display();
        let find = |key: &str| self.traces.iter().find(|t| t.key == key);
        let names = self.model.parameter_names();
        match (find("hmc"), find("rns")) {
            (Some(hmc), Some(rns)) => figures::marginals(self.dir, &names, hmc, rns)?,
            _ => log("Fig. 6 (marginals) needs the hmc and rns rows: not drawn"),
        }
        // Fig. 8 shows the rows the journal's does, and NUTS.
        let shown: Vec<figures::Traces> = self
            .traces
            .iter()
            .filter(|t| ["hmc", "rns", "arns", "nuts"].contains(&t.key.as_str()))
            .cloned()
            .collect();
        match figures::rem_curves(&shown)? {
            Some((curves, note)) => figures::relative_error_of_mean(self.dir, &curves, &note)?,
            None => {
                log("Fig. 8 (REM vs time) needs two of the hmc, rns, arns and nuts rows: not drawn")
            }
        }
        if self.burn_in.is_empty() {
            log("Figs. 5 and 4 (acceptance) fit on the hmc row's burn-in: not drawn without it");
        } else {
            log(
                "Figs. 5 and 4: fitting networks on HMC's burn-in and running short RNS-HMC chains ...",
            );
            let states = figures::burn_in_states(
                self.model,
                self.burn_in,
                self.map,
                self.settings.train_after,
            );
            figures::acceptance_figures(
                self.dir,
                self.model,
                self.settings,
                surrogate,
                &states,
                self.map,
                quick,
                log,
            )?;
        }
        match self.simulated {
            Some(observations) => {
                let begun = Instant::now();
                let points =
                    figures::dimension_sweep(self.settings, surrogate, observations, quick, log)?;
                figures::acceptance_vs_dimension(
                    self.dir,
                    self.settings.hidden,
                    figures::acceptance_draws(quick),
                    &points,
                )?;
                log(&format!(
                    "  Fig. 4 (acceptance vs dimension): {:.1} s",
                    begun.elapsed().as_secs_f64()
                ));
            }
            None => log(
                "Fig. 4's acceptance vs dimension simulates its posteriors: drawn by lr-sim, not here",
            ),
        }
        log(&format!(
            "figures drawn in {dir} in {:.1} s (their own runs included)",
            start.elapsed().as_secs_f64()
        ));
        Ok(())
    }
}

/// The general-purpose baseline: nutpie's NUTS ([`nuts::run_nuts`]) on the same posterior and
/// kernel with nutpie's protocol, 4 chains × (1000 warmup + 5000 draws) at once (the quick
/// run: 300 + the quick draws; pde-fine: its burn-in and draws), accounted as the all-in row:
/// pooled bulk ESS over wall time.
fn nuts_row(
    model: &dyn Model,
    settings: &BenchSettings,
    log: &dyn Fn(&str),
) -> Result<(BenchRow, figures::Traces)> {
    let (chains, warmup) = (4, settings.nuts_warmup);
    log(&format!(
        "running NUTS (nuts-rs, nutpie's sampler): {chains} chains x ({warmup} + {}) ...",
        settings.draws
    ));
    let work_before = model.work();
    let run = nuts::run_nuts(
        model,
        MassMatrix::Diagonal,
        chains,
        (warmup, settings.draws),
        settings.seed,
    )?;
    let work = work_since(&work_before, &model.work());
    let parameters = run.run.names.len();
    let bulk = per_parameter(parameters, |p| run.series(p), ess_bulk);
    let tail = per_parameter(parameters, |p| run.series(p), ess_tail);
    let e = ess_summary(&bulk).ok_or_else(|| Error::invalid("NUTS left no diagnosable draws"))?;
    log(&format!(
        "  NUTS: {:.1} s, {:.1} gradients per iteration, {} divergences",
        run.run.wall_seconds,
        run.gradients_per_draw(),
        run.run.divergences()
    ));
    let method = format!("NUTS (nuts-rs, {chains} chains)");
    let trace = figures::Traces {
        key: "nuts".into(),
        method: method.clone(),
        chains: run
            .run
            .chains
            .iter()
            .zip(&run.finished)
            .map(|(c, t)| figures::ChainTrace::new(c, parameters, t.clone()))
            .collect(),
    };
    let mut row = BenchRow {
        problem: String::new(),
        key: "nuts".into(),
        method,
        acceptance: f64::NAN,
        ess_min: e.min,
        ess_median: e.median,
        ess_max: e.max,
        ess_tail_min: smallest(&tail),
        ess_min_per_iteration: e.min / (chains * settings.draws) as f64,
        seconds_per_iteration: f64::NAN,
        exact_potential_seconds: f64::NAN,
        mean_gradient_evaluations_per_iteration: run.gradients_per_draw(),
        min_ess_per_second: f64::NAN,
        min_ess_per_second_with_training: e.min / run.run.wall_seconds,
        speedup: f64::NAN,
        speedup_se: f64::NAN,
        training_seconds: f64::NAN,
        precompute_seconds: 0.0,
        precompute_evaluations: 0,
        online_update_seconds: f64::NAN,
        online_updates: 0,
        trajectory: None,
        step_size: f64::NAN,
        surrogate_scale: f64::NAN,
        holdout_gradient_error: f64::NAN,
        chains,
        versus_nutpie: f64::NAN,
        nutpie_rate: f64::NAN,
        versus_nuts: f64::NAN,
        min_bulk_tail_per_second_with_training: e.min.min(smallest(&tail)) / run.run.wall_seconds,
        versus_nuts_min_bulk_tail: f64::NAN,
        work_per_iteration: per_iteration(&work, (chains * (warmup + settings.draws)) as f64),
        solves_per_ess_tail: Vec::new(),
        solves_per_ess_bulk: Vec::new(),
        rmhmc: None,
        transitions_k: None,
    };
    row.set_work_per_ess(&work);
    Ok((row, trace))
}

/// The rows as the journal's Table 1.
pub fn format_table(rows: &[BenchRow]) -> String {
    let mut out = format!(
        "{:<27}{:>8}{:>22}{:>11}{:>11}{:>11}{:>10}{:>9}\n",
        "method",
        "accept",
        "ESS (min, med, max)",
        "s/iter",
        "U (s)",
        "minESS/s",
        "w/ train",
        "speedup"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<27}{:>8.3}{:>22}{:>11.2e}{:>11.2e}{:>11.2}{:>10.2}{:>9.2}\n",
            r.method,
            r.acceptance,
            format!("({:.0}, {:.0}, {:.0})", r.ess_min, r.ess_median, r.ess_max),
            r.seconds_per_iteration,
            r.exact_potential_seconds,
            r.min_ess_per_second,
            r.min_ess_per_second_with_training,
            r.speedup
        ));
    }
    for r in rows.iter().filter(|r| r.surrogate_scale.is_finite()) {
        out.push_str(&format!(
            "{}: input scale {}, held-out gradient error {:.3}, training {:.1} s{}{}\n",
            r.method,
            r.surrogate_scale,
            r.holdout_gradient_error,
            r.training_seconds,
            r.trajectory
                .as_ref()
                .map_or(String::new(), |t| format!(", trajectories: {t}")),
            if r.online_updates > 0 {
                format!(
                    ", {} online updates in {:.1} s",
                    r.online_updates, r.online_update_seconds
                )
            } else {
                String::new()
            }
        ));
    }
    for r in rows {
        if let Some(work) = &r.rmhmc {
            out.push_str(&format_kernel_work(&format!("{} sampling", r.method), work));
        }
    }
    for r in rows.iter().filter(|r| !r.work_per_iteration.is_empty()) {
        let work: Vec<String> = r
            .work_per_iteration
            .iter()
            .map(|(name, n)| format!("{n:.2} {name}"))
            .collect();
        out.push_str(&format!(
            "{}: {} per iteration (burn-in included)\n",
            r.method,
            work.join(", ")
        ));
    }
    for r in rows
        .iter()
        .filter(|r| WALL_TIME_KEYS.contains(&r.key.as_str()))
    {
        let mut versus = Vec::new();
        if r.versus_nuts.is_finite() {
            versus.push(format!("{:.2}x NUTS's in this run", r.versus_nuts));
        }
        if r.versus_nutpie.is_finite() {
            versus.push(format!(
                "{:.2}x nutpie's {}/s",
                r.versus_nutpie, r.nutpie_rate
            ));
        }
        out.push_str(&format!(
            "{}: min ESS_bulk {:.0} (ESS_tail {:.0}) in {:.1} s of wall time ({}) = {:.1}/s{}{}\n",
            r.method,
            r.ess_min,
            r.ess_tail_min,
            r.ess_min / r.min_ess_per_second_with_training,
            if r.key == "nuts" {
                "warmup and draws"
            } else {
                "MAP, warmup, training and draws"
            },
            r.min_ess_per_second_with_training,
            if versus.is_empty() { "" } else { ", " },
            versus.join(", ")
        ));
    }
    out.push_str(&format_goals(rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GP rows run only when asked: no experiment's default rows name them (so the
    /// benches' run times and draws stay as they were), and asked for, each is RNS-HMC with
    /// its Gaussian process in place of the network, on the network row's burn-in.
    #[test]
    fn gp_rows_are_off_by_default_and_swap_only_the_surrogate() {
        for experiment in [
            Experiment::LrSim,
            Experiment::Bank,
            Experiment::A9a,
            Experiment::Pde,
        ] {
            let settings = experiment.settings(true, PathBuf::new());
            assert!(
                !settings
                    .methods
                    .iter()
                    .any(|m| GP_KEYS.contains(&m.as_str())),
                "{experiment:?}: {:?}",
                settings.methods
            );
        }
        let settings = Experiment::Pde.settings(true, PathBuf::new());
        let surrogate = surrogate_settings(&settings);
        let rows = methods(Experiment::Pde, &settings, &surrogate);
        for (key, approximation) in [
            ("gp", Approximation::Full),
            ("fitc", Approximation::Fitc { inducing: 500 }),
        ] {
            let (_, _, method) = rows.iter().find(|(k, _, _)| *k == key).unwrap();
            let Method::RnsHmc(gp) = method else {
                panic!("{key}: {method:?}");
            };
            let SurrogateKind::Gp(fitter) = &gp.kind else {
                panic!("{key}: {:?}", gp.kind);
            };
            assert_eq!(fitter.options.approximation, approximation);
            assert_eq!(gp.train_after, surrogate.train_after);
        }
    }
}
