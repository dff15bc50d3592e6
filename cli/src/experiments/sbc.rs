//! `shmc bench sbc`: issue 16's full table, simulation-based calibration ([`shmc::sbc`]) of
//! every method on every built-in model with a generative form, one row per cell.
//!
//! A cell is a model at an SBC size (a replication samples in well under a second: small `N`,
//! a coarse PDE mesh) and a method configured as a user would run it there, its surrogate
//! trained on each replication's own warmup. Every cell runs [`shmc::sbc::run`] with the same
//! master seed, so a cell repeats exactly whatever else runs. A method that does not apply to
//! a model (no Riemannian metric, too many dimensions for a grid, or refused by
//! [`SampleConfig::validate`]) is skipped with a line in the log; a cell that fails while it
//! runs gets a row saying so, so that a long run never loses the cells after it.
//!
//! The exact methods should pass (at family-wise level 0.05, a correct method fails one cell
//! in twenty by chance); the approximate ones (VHMC's published acceptance rule, the grids'
//! complete variant) are labelled, and their rows measure their bias. A failing exact cell is
//! read with its columns: many replications whose kept draws stay correlated (`corr.`) or
//! divergences point at a chain that does not mix at this length, not at a wrong target.

use std::time::Instant;

use serde::Serialize;

use shmc::models::{self, CATALOGUE, ModelSpec, build};
use shmc::output::approximate_label;
use shmc::sampler::{
    Method, MldaSettings, NutsSettings, RmhmcSettings, SampleConfig, SurrogateSettings,
    SurrogateSteps, Transitions, VhmcSettings,
};
use shmc::sbc::{self, Part, SbcRun, SbcSettings};
use shmc::surrogates::FitMethod;
use shmc::surrogates::gp::{Approximation, GpFitter, GpOptions};
use shmc::surrogates::grids::{DomainChoice, GridFitter, GridKind, Interpolation};
use shmc::surrogates::kinds::SurrogateKind;
use shmc::surrogates::network::{NetworkFitter, TrainOptions};
use shmc::{Error, Model, Result};

/// The models, in the table's order: every built-in one with a small instance to calibrate on
/// ([`shmc::models::ModelEntry::small`]; a served model has none of ours).
pub fn models() -> Vec<&'static str> {
    CATALOGUE
        .iter()
        .filter(|m| m.small.is_some())
        .map(|m| m.name)
        .collect()
}

/// The methods, in the table's order: the exact ones, then the approximate ones beside their
/// exact twins. `rns-hmc-auto` is RNS-HMC with the trajectory lengths its network's curvature
/// picks, `rns-hmc-nuts` with NUTS's trees on its network judged by delayed acceptance;
/// `mlda` runs multilevel delayed acceptance over [`MLDA_LEVELS`] on a model with levels (the
/// PDE), `mlda-network` with a network below them;
/// `grid-hmc-multilinear` reads the force grid from its cells' corners; `-complete` is a grid's
/// variant that also accepts with the grid's `U`; `gp-hmc` and `fitc-hmc` are RNS-HMC with a full
/// GP or FITC as the surrogate (Rasmussen 2003, the paper's baselines).
pub const METHODS: [&str; 20] = [
    "hmc",
    "nuts",
    "rns-hmc",
    "rns-hmc-auto",
    "rns-hmc-nuts",
    "rns-hmc-transitions",
    "gp-hmc",
    "fitc-hmc",
    "mlda",
    "mlda-network",
    "arns-hmc",
    "vhmc",
    "vhmc-approximate",
    "rmhmc",
    "rns-rmhmc",
    "grid-hmc",
    "grid-hmc-multilinear",
    "grid-hmc-complete",
    "sg-hmc",
    "sg-hmc-complete",
];

/// MLDA's coarser levels at the SBC size of a model with levels: the PDE's 8×8 mesh judges
/// proposals from 4×4 and 6×6 meshes.
const MLDA_LEVELS: [usize; 2] = [4, 6];

/// Replications per cell: the 200, or 30 in a quick run (the fewest for three bins).
pub fn replications(quick: bool) -> usize {
    if quick { 30 } else { 200 }
}

/// The most dimensions of a force grid, whose cells grow as `(extent/h)^d`: at `d = 3` the
/// box of a replication's states holds tens of thousands of cells, each an exact gradient
/// (a Cholesky of `gp-hyper`, a PDE solve).
const FORCE_GRID_MAX_DIM: usize = 2;

/// The most dimensions of a sparse grid here (level 5 is 351 points at `d = 3`, level 9 a few
/// thousand).
const SPARSE_GRID_MAX_DIM: usize = 3;

/// What the grids and Gaussian processes may allocate.
const GRID_MEMORY: u64 = 1 << 30;

/// The most warmup states a Gaussian process is fitted to here: its fit is `O(n³)` per
/// evidence evaluation, so gaussian-32's 1200 would take a minute per replication, while 300
/// fit in well under a second.
const GP_STATES: usize = 300;

/// FITC's inducing points here.
const GP_INDUCING: usize = 60;

/// What `shmc bench sbc` runs.
#[derive(Clone, Debug)]
pub struct SbcBenchSettings {
    /// Fewer replications and shorter chains (a few minutes in all).
    pub quick: bool,
    /// The master seed of every cell's replications, and the networks' seed.
    pub seed: u64,
    /// Replications run at once (0: one per core).
    pub jobs: usize,
    /// The models to run, from [`models`] (all when empty).
    pub models: Vec<String>,
    /// The methods to run, from [`METHODS`] (all when empty).
    pub methods: Vec<String>,
    /// Run only these replications of every cell (see [`shmc::sbc::Part`]); `None`: all.
    pub part: Option<Part>,
}

/// How a cell's calibration is obtained, given its model's and method's keys, the model, the
/// sampler and the calibration's settings: run here (all replications or a part), or merged
/// from parts run elsewhere.
pub type Calibrate<'a> =
    dyn Fn(&str, &str, &dyn Model, &SampleConfig, &SbcSettings) -> Result<SbcRun> + 'a;

/// One cell's result (a row of the table and an object of `--json`).
#[derive(Clone, Debug, Serialize)]
pub struct SbcRow {
    /// The model's name.
    pub model: String,
    /// Its size here (observations, dimension, mesh).
    pub size: String,
    /// The method's key in [`METHODS`].
    pub method: String,
    /// For an approximate method, what its draws target ([`approximate_label`]); `null` for an
    /// exact one.
    pub approximate: Option<String>,
    /// Replications.
    pub replications: usize,
    /// Warmup iterations per replication.
    pub warmup: usize,
    /// Draws per replication, before thinning.
    pub draws: usize,
    /// The thinning (from the measured ESS).
    pub thin: usize,
    /// Kept draws per replication, `L`: ranks lie in `0..=L`.
    pub kept: usize,
    /// The parameters' names.
    pub parameters: Vec<String>,
    /// Each parameter's χ² p-value.
    pub p_values: Vec<f64>,
    /// The smallest of them.
    pub min_p_value: f64,
    /// The Bonferroni-adjusted smallest p-value the verdict compares with 0.05.
    pub adjusted_p_value: f64,
    /// `pass`, `fail`, or `error` (the cell did not finish: see `error`).
    pub verdict: String,
    /// Replications whose draws held fewer effective draws than the kept ones: correlated
    /// kept draws push ranks to the ends whatever the target.
    pub underthinned: usize,
    /// The median over the replications of the smallest bulk or tail ESS over the parameters.
    pub ess_median: f64,
    /// The least of them.
    pub ess_least: f64,
    /// Divergent kept draws over all replications.
    pub divergences: usize,
    /// Wall seconds of the cell.
    pub seconds: f64,
    /// Why the cell did not finish.
    pub error: Option<String>,
}

/// A model at its SBC size, and the chain lengths and network size its cells use.
struct Sized {
    spec: ModelSpec,
    size: &'static str,
    warmup: usize,
    draws: usize,
    hidden: usize,
    sparse_level: u8,
}

/// Model `name` at its SBC size; `quick` halves the chains.
///
/// The chains are 500 warmup and 1000 draws except where a model asks for more: the banana's
/// thin curved ridge (and its two arms when `b₁ + b₂²` is large) leaves HMC an ESS of a few
/// per hundred draws, so it draws 4000 (cheap: its `U` is O(1)); gaussian-32's networks need
/// `d(d + 1)/2 = 528` units to hold its quadratic and more states than that to fit them, so its
/// warmup is 1500 and its networks 600 units. The sparse grids are level 5, except on the
/// banana, whose ridge is 0.2 wide (`b₁ + b₂²` known to sd 2/√100): at level 5 its grid is too
/// coarse there and the chain, rejecting most surrogate proposals along the ridge, is
/// practically reducible (replications stuck where they started); level 9 resolves it. The
/// probit's too: with coefficients drawn from its prior (sd 10) the data are nearly separable,
/// and `log Φ`'s quadratic walls defeat level 5 alike (SBC with seed 1: the ranks ∪-shaped,
/// 127 of 200 replications correlated, median ESS 12 of 1000 draws; level 7: 46 correlated,
/// median ESS 67, uniform ranks; level 9: 17, 162, uniform).
fn sized(name: &str, quick: bool) -> Result<Sized> {
    let Some((spec, size)) = models::small(name)? else {
        return Err(Error::invalid(format!(
            "bench sbc cannot calibrate model {name:?}: it runs {}",
            models().join(", ")
        )));
    };
    let (warmup, draws, hidden, sparse_level) = match name {
        "gaussian-32" => (1500, 1000, 600, 5),
        "banana" => (1000, 4000, 200, 9),
        "probit" => (500, 1000, 200, 9),
        _ => (500, 1000, 200, 5),
    };
    let halve = |n: usize| if quick { n / 2 } else { n };
    Ok(Sized {
        spec,
        size,
        warmup: halve(warmup),
        draws: halve(draws),
        hidden,
        sparse_level,
    })
}

impl Sized {
    /// The network every surrogate method trains on a replication's warmup, states collected
    /// from a fifth of the way in.
    fn surrogate(&self, fit: FitMethod, seed: u64) -> SurrogateSettings {
        let train_after = self.warmup / 5;
        SurrogateSettings {
            kind: SurrogateKind::Network(NetworkFitter {
                options: TrainOptions {
                    hidden: self.hidden,
                    seed,
                    ..TrainOptions::default()
                },
                method: fit,
            }),
            train_after: Some(train_after),
            // ARNS-HMC's first fit on half the states its warmup collects, the rest updating
            // it online (its default of 300 is all of a quick run's).
            start_after: ((self.warmup - train_after) / 2).min(300),
            ..SurrogateSettings::default()
        }
    }

    /// RNS-HMC with a full GP (`inducing` `None`) or FITC fitted to the last [`GP_STATES`]
    /// (at most) of the warmup's states.
    fn gp(&self, inducing: Option<usize>, seed: u64) -> Method {
        let surrogate = self.surrogate(FitMethod::Potential, seed);
        let train_after = surrogate
            .train_after
            .map(|t| t.max(self.warmup.saturating_sub(GP_STATES)));
        Method::RnsHmc(SurrogateSettings {
            kind: SurrogateKind::Gp(GpFitter {
                options: GpOptions {
                    approximation: inducing.map_or(Approximation::Full, |inducing| {
                        Approximation::Fitc { inducing }
                    }),
                    seed,
                    memory_limit: GRID_MEMORY,
                    ..GpOptions::default()
                },
            }),
            train_after,
            ..surrogate
        })
    }

    /// A grid fitted over the box of the exact phase's states: a replication's posterior can
    /// lie anywhere the prior reaches, so no box is known in advance, and a Laplace box needs a
    /// converged MAP search, which gp-hyper's flat directions deny some replications.
    fn grid(&self, kind: GridKind, complete: bool, seed: u64) -> Method {
        Method::RnsHmc(SurrogateSettings {
            kind: SurrogateKind::Grid(GridFitter {
                kind,
                domain: DomainChoice::States { margin: 0.1 },
                memory_limit: GRID_MEMORY,
            }),
            approximate_acceptance: complete,
            ..self.surrogate(FitMethod::Potential, seed)
        })
    }

    /// The method `key` for a model of dimension `d`, with or without a Riemannian metric and
    /// coarser levels (`offers`), or why it does not apply.
    ///
    /// RNS-HMC fits scores (`d` equations per state: a good fit from the few hundred states
    /// of a short warmup); ARNS-HMC must fit potentials, which it updates online.
    fn method(
        &self,
        key: &str,
        d: usize,
        (has_metric, has_levels): (bool, bool),
        seed: u64,
    ) -> Result<Method, String> {
        let grid_too_big = |most: usize, kind: &str| {
            Err(format!(
                "{kind} is for low-dimensional models (d <= {most} here), this one has d = {d}"
            ))
        };
        let rns_rmhmc = || {
            let mut s = self.surrogate(FitMethod::Score, seed);
            // RMHMC adapts its step size on the surrogate after the network is fitted.
            s.exact_warmup = Some(3 * self.warmup / 5);
            s
        };
        Ok(match key {
            "hmc" => Method::Hmc,
            "nuts" => Method::Nuts(NutsSettings::default()),
            "rns-hmc" => Method::RnsHmc(self.surrogate(FitMethod::Score, seed)),
            "rns-hmc-auto" => Method::RnsHmc(SurrogateSettings {
                trajectory: SurrogateSteps::Auto,
                ..self.surrogate(FitMethod::Score, seed)
            }),
            "rns-hmc-nuts" => Method::RnsHmc(SurrogateSettings {
                trajectory: SurrogateSteps::Nuts,
                ..self.surrogate(FitMethod::Score, seed)
            }),
            "rns-hmc-transitions" => Method::RnsHmc(SurrogateSettings {
                transitions: Some(Transitions::fixed(3)),
                ..self.surrogate(FitMethod::Score, seed)
            }),
            "gp-hmc" => self.gp(None, seed),
            "fitc-hmc" => self.gp(Some(GP_INDUCING), seed),
            "mlda" | "mlda-network" if !has_levels => {
                return Err("the model offers no coarser levels".into());
            }
            "mlda" => Method::Mlda(MldaSettings::new(MLDA_LEVELS.to_vec())),
            "mlda-network" => Method::Mlda(MldaSettings::with_network(
                MLDA_LEVELS.to_vec(),
                self.surrogate(FitMethod::Potential, seed),
            )),
            "arns-hmc" => Method::ArnsHmc(self.surrogate(FitMethod::Potential, seed)),
            "vhmc" | "vhmc-approximate" => Method::Vhmc(VhmcSettings {
                train: TrainOptions {
                    seed,
                    ..VhmcSettings::default().train
                },
                exact_acceptance: key == "vhmc",
                ..VhmcSettings::default()
            }),
            "rmhmc" | "rns-rmhmc" if !has_metric => {
                return Err("the model offers no Riemannian metric".into());
            }
            "rmhmc" => Method::Rmhmc(RmhmcSettings::default()),
            "rns-rmhmc" => Method::RnsRmhmc(rns_rmhmc(), RmhmcSettings::default()),
            "grid-hmc" | "grid-hmc-multilinear" | "grid-hmc-complete" if d > FORCE_GRID_MAX_DIM => {
                return grid_too_big(FORCE_GRID_MAX_DIM, "a force grid");
            }
            "sg-hmc" | "sg-hmc-complete" if d > SPARSE_GRID_MAX_DIM => {
                return grid_too_big(SPARSE_GRID_MAX_DIM, "a sparse grid");
            }
            "grid-hmc" | "grid-hmc-multilinear" | "grid-hmc-complete" => self.grid(
                GridKind::Force {
                    cell: 0.1,
                    interpolation: if key == "grid-hmc-multilinear" {
                        Interpolation::Multilinear
                    } else {
                        Interpolation::Constant
                    },
                },
                key.ends_with("complete"),
                seed,
            ),
            "sg-hmc" | "sg-hmc-complete" => self.grid(
                GridKind::SparseLevel(self.sparse_level),
                key.ends_with("complete"),
                seed,
            ),
            other => return Err(format!("unknown method {other:?}")),
        })
    }
}

/// The keys of `chosen` in `all`'s order, all of `all` when `chosen` is empty; an error names
/// an unknown one.
fn pick<'a>(all: &[&'a str], chosen: &[String], what: &str) -> Result<Vec<&'a str>> {
    if let Some(unknown) = chosen.iter().find(|c| !all.contains(&c.as_str())) {
        return Err(Error::invalid(format!(
            "bench sbc has no {what} {unknown:?}: it runs {}",
            all.join(", ")
        )));
    }
    Ok(all
        .iter()
        .copied()
        .filter(|k| chosen.is_empty() || chosen.iter().any(|c| c == k))
        .collect())
}

/// Runs every cell `settings` picks, logging each, and returns their rows.
pub fn run_sbc_bench(settings: &SbcBenchSettings, log: &dyn Fn(&str)) -> Result<Vec<SbcRow>> {
    let run = |_: &str, _: &str, model: &dyn Model, config: &SampleConfig, sbc: &SbcSettings| {
        sbc::run(model, config, sbc, &|_| {}, None)
    };
    run_sbc_cells(settings, &run, log)
}

/// The rows of every cell `settings` picks, each calibrated by `calibrate`, logging each.
pub fn run_sbc_cells(
    settings: &SbcBenchSettings,
    calibrate: &Calibrate,
    log: &dyn Fn(&str),
) -> Result<Vec<SbcRow>> {
    let models = pick(&models(), &settings.models, "model")?;
    let methods = pick(&METHODS, &settings.methods, "method")?;
    let sbc_settings = SbcSettings {
        replications: replications(settings.quick),
        seed: settings.seed,
        thin: None,
        jobs: settings.jobs,
        part: settings.part,
        memory_limit: shmc::memory::machine_default_limit(),
    };
    let mut rows = Vec::new();
    for name in models {
        let sized = sized(name, settings.quick)?;
        let model = build(&sized.spec)?;
        let d = model.dim();
        let offers = (
            model.riemannian_metric(&vec![0.0; d]).is_some(),
            model.levels().is_some(),
        );
        log(&format!(
            "{name} ({}): {} warmup, {} draws, 1 chain per replication",
            sized.size, sized.warmup, sized.draws
        ));
        for &key in &methods {
            let config = sized
                .method(key, d, offers, settings.seed)
                .map(|method| SampleConfig {
                    chains: 1,
                    warmup: sized.warmup,
                    draws: sized.draws,
                    seed: settings.seed,
                    method,
                    ..SampleConfig::default()
                })
                .and_then(|c| {
                    c.validate(model.as_ref())
                        .map(|()| c)
                        .map_err(|e| e.to_string())
                });
            let config = match config {
                Ok(config) => config,
                Err(why) => {
                    log(&format!("  {key}: skipped: {why}"));
                    continue;
                }
            };
            let start = Instant::now();
            let calibrated = calibrate(name, key, model.as_ref(), &config, &sbc_settings);
            let tried = (sbc_settings.replications, start.elapsed().as_secs_f64());
            let row = cell(
                &sized,
                (name, key),
                model.as_ref(),
                &config,
                calibrated,
                tried,
            );
            log(&format!(
                "  {key}: {} in {:.1} s (min p {:.3e}, {} of {} replications correlated, {} \
                 divergences){}",
                row.verdict,
                row.seconds,
                row.min_p_value,
                row.underthinned,
                row.replications,
                row.divergences,
                row.error
                    .as_ref()
                    .map_or(String::new(), |e| format!(": {e}"))
            ));
            rows.push(row);
        }
    }
    Ok(rows)
}

/// One cell's row from its calibration `result`, its failure a row too (with the
/// replications and seconds `tried`).
fn cell(
    sized: &Sized,
    (model_name, key): (&str, &str),
    model: &dyn Model,
    config: &SampleConfig,
    result: Result<SbcRun>,
    (replications, seconds): (usize, f64),
) -> SbcRow {
    let mut row = SbcRow {
        model: model_name.into(),
        size: sized.size.into(),
        method: key.into(),
        approximate: config.method.approximate().then(|| {
            // Each replication builds its own grid, so there is no one bound on KL(P‖Q) to
            // quote, and no file's end to find it at.
            let label = approximate_label(config.method.name(), None);
            match label.split_once("; the bound") {
                Some((what, _)) => format!("{what}; the bound on KL(P||Q) differs per grid"),
                None => label,
            }
        }),
        replications,
        warmup: config.warmup,
        draws: config.draws,
        thin: 0,
        kept: 0,
        parameters: model.parameter_names(),
        p_values: Vec::new(),
        min_p_value: f64::NAN,
        adjusted_p_value: f64::NAN,
        verdict: "error".into(),
        underthinned: 0,
        ess_median: f64::NAN,
        ess_least: f64::NAN,
        divergences: 0,
        seconds,
        error: None,
    };
    match result {
        Ok(run) => fill(&mut row, &run),
        Err(e) => row.error = Some(e.to_string()),
    }
    row
}

/// The row's figures from a finished run.
fn fill(row: &mut SbcRow, run: &SbcRun) {
    let mut ess: Vec<f64> = run.replications.iter().map(|r| r.min_ess).collect();
    ess.sort_by(f64::total_cmp);
    row.replications = run.replications.len();
    row.seconds = run.wall_seconds;
    row.thin = run.thin;
    row.kept = run.max_rank;
    row.p_values = run.tests.iter().map(|t| t.p_value).collect();
    row.min_p_value = row.p_values.iter().copied().fold(1.0, f64::min);
    row.adjusted_p_value = run.verdict.adjusted_p;
    row.verdict = if run.verdict.uniform() {
        "pass"
    } else {
        "fail"
    }
    .into();
    row.underthinned = run.underthinned();
    row.ess_median = ess.get(ess.len() / 2).copied().unwrap_or(f64::NAN);
    row.ess_least = ess.first().copied().unwrap_or(f64::NAN);
    row.divergences = run.replications.iter().map(|r| r.divergences).sum();
}

/// The rows as one table, the approximate methods' labels and the errors below it.
pub fn format_sbc_table(rows: &[SbcRow]) -> String {
    let mut out = format!(
        "simulation-based calibration: each row's replications draw parameters from the prior, \
         simulate data and rank the truth among the thinned posterior draws; verdict at \
         family-wise level {} (Bonferroni over the parameters); corr.: replications whose \
         kept draws stay correlated\n\
         {:<33} {:<34} {:>5} {:>6} {:>5} {:>5} {:>10} {:>10} {:>7} {:>5} {:>9} {:>8} {:>8}\n",
        sbc::ALPHA,
        "model",
        "method",
        "reps",
        "draws",
        "thin",
        "kept",
        "min p",
        "adj. p",
        "verdict",
        "corr.",
        "ESS med.",
        "diverg.",
        "seconds"
    );
    for r in rows {
        let method = if r.approximate.is_some() {
            format!("{} (APPROXIMATE)", r.method)
        } else {
            r.method.clone()
        };
        out.push_str(&format!(
            "{:<33} {:<34} {:>5} {:>6} {:>5} {:>5} {:>10.3e} {:>10.3e} {:>7} {:>5} {:>9.0} {:>8} {:>8.1}\n",
            format!("{} ({})", r.model, r.size),
            method,
            r.replications,
            r.draws,
            r.thin,
            r.kept,
            r.min_p_value,
            r.adjusted_p_value,
            r.verdict,
            r.underthinned,
            r.ess_median,
            r.divergences,
            r.seconds
        ));
    }
    let mut labelled: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if let Some(label) = &r.approximate
            && !labelled.iter().any(|(m, _)| *m == r.method)
        {
            labelled.push((&r.method, label));
        }
    }
    for (method, label) in labelled {
        out.push_str(&format!("{method}: {label}\n"));
    }
    for r in rows {
        if let Some(e) = &r.error {
            out.push_str(&format!("{} x {}: error: {e}\n", r.model, r.method));
        }
    }
    let total: f64 = rows.iter().map(|r| r.seconds).sum();
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| r.verdict != "pass")
        .map(|r| format!("{} x {}", r.model, r.method))
        .collect();
    out.push_str(&format!(
        "{} cells in {total:.0} s; not passing: {}\n",
        rows.len(),
        if failed.is_empty() {
            "none".to_string()
        } else {
            failed.join(", ")
        }
    ));
    out.push_str(&exact_verdict(rows));
    out
}

/// The table's verdict on the exact methods as one family: each cell's verdict is at level
/// [`sbc::ALPHA`] over its own parameters, so among `n` correct cells about `ALPHA · n` fail by
/// chance; the table-wide test is Bonferroni over every exact cell's parameters.
fn exact_verdict(rows: &[SbcRow]) -> String {
    let exact: Vec<&SbcRow> = rows
        .iter()
        .filter(|r| r.approximate.is_none() && r.error.is_none() && !r.p_values.is_empty())
        .collect();
    let tests: usize = exact.iter().map(|r| r.p_values.len()).sum();
    if tests == 0 {
        return String::new();
    }
    let failing = exact.iter().filter(|r| r.verdict != "pass").count();
    let least = exact
        .iter()
        .map(|r| r.min_p_value)
        .fold(f64::INFINITY, f64::min);
    let threshold = sbc::ALPHA / tests as f64;
    format!(
        "exact methods as one family: {failing} of {} cells fail at their own level ({:.1} \
         expected by chance); the smallest of their {tests} p-values is {least:.3e} against \
         Bonferroni's {threshold:.3e} for the whole table: {}\n",
        exact.len(),
        sbc::ALPHA * exact.len() as f64,
        if least < threshold { "fail" } else { "pass" }
    )
}
