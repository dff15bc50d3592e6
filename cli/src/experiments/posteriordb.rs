//! `shmc bench posteriordb`: shmc's methods and nutpie on the reference posteriors of a
//! posteriordb checkout, each posterior's Stan program compiled once (offline, with the Stan
//! toolchain shmc finds, and cached) and sampled by every row on that same library.
//!
//! Each row runs `chains × (warmup + draws)` and is judged against the reference draws,
//! parameter by parameter on the constrained scale ([`shmc::posteriordb::check`]). Its cost
//! is everything counted from the start of sampling, warmup included, compile excluded:
//! exact gradients, and seconds to ESS 400, the warmup's seconds plus the sampling seconds
//! scaled to the draws that reach min(bulk, tail) ESS 400 at the rate measured.
//!
//! nutpie runs in a Python interpreter (`SHMC_PYTHON`, else `python3`) on the same compiled
//! library, which has BridgeStan's C interface; its seconds are split between warmup and
//! sampling in proportion to their gradients (NUTS's cost is its gradients).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use shmc::api::Sampler;
use shmc::core::Potential;
use shmc::models::stan::{Program, StanModel, Toolchain, cache_root, library};
use shmc::posteriordb::{self, Checks, Database, Reference};
use shmc::sampler::{MassMatrix, Method, auto};
use shmc::{Error, Result};

/// The rows a run can ask for, with what each is.
pub const ROWS: [(&str, &str); 7] = [
    (
        "auto",
        "shmc's --method auto: the plan it chooses for the posterior",
    ),
    ("nuts", "shmc's NUTS, diagonal metric (Stan's defaults)"),
    ("nuts-low-rank", "shmc's NUTS, nutpie's low-rank metric"),
    ("nuts-laplace", "shmc's NUTS, the Laplace (dense) metric"),
    ("rns-hmc", "RNS-HMC with its defaults"),
    ("nutpie", "nutpie, diagonal metric"),
    ("nutpie-low-rank", "nutpie, low-rank metric"),
];

/// The rows run when none are named.
pub const DEFAULT_ROWS: [&str; 5] = [
    "auto",
    "nuts",
    "nuts-low-rank",
    "rns-hmc",
    "nutpie-low-rank",
];

/// The ESS a row's time is measured to.
const TARGET_ESS: f64 = 400.0;

/// What to run.
#[derive(Clone, Debug)]
pub struct PosteriordbSettings {
    /// The checkout.
    pub dir: PathBuf,
    /// The posteriors (all with reference draws when `None`).
    pub posteriors: Option<Vec<String>>,
    /// The rows, keys of [`ROWS`].
    pub rows: Vec<String>,
    /// Chains per row.
    pub chains: usize,
    /// Warmup iterations per chain.
    pub warmup: usize,
    /// Kept draws per chain.
    pub draws: usize,
    /// The seed of every row.
    pub seed: u64,
    /// The most bytes a file read or the draws kept may take.
    pub memory_limit: u64,
}

/// One posterior and row.
#[derive(Clone, Debug, Serialize)]
pub struct PosteriordbRow {
    /// The posterior's name.
    pub posterior: String,
    /// The row's key.
    pub method: String,
    /// Unconstrained dimension.
    pub dim: usize,
    /// Whether every reference parameter passed every rule.
    pub passed: bool,
    /// One line on the furthest-off failed parameter, or on why the row did not run.
    pub verdict: String,
    /// The largest split R̂.
    pub max_rhat: f64,
    /// The smallest bulk or tail ESS.
    pub min_ess: f64,
    /// Divergent kept transitions.
    pub divergences: u64,
    /// Exact gradient evaluations, warmup included (the Laplace metric's MAP search too).
    pub gradients: u64,
    /// Exact value-only evaluations.
    pub values: u64,
    /// Wall seconds of the run.
    pub seconds: f64,
    /// Seconds to min(bulk, tail) ESS 400, warmup included, at the rate measured.
    pub seconds_to_ess: f64,
    /// Every parameter's comparison (empty for a row that did not run).
    pub checks: Option<Checks>,
}

/// Runs `settings`, logging progress to `log`.
pub fn run_posteriordb(
    settings: &PosteriordbSettings,
    log: &dyn Fn(&str),
) -> Result<Vec<PosteriordbRow>> {
    let database = Database::open(&settings.dir)?;
    let names = match &settings.posteriors {
        Some(names) => names.clone(),
        None => database.names()?,
    };
    // Every posterior is read (and a bad file refused) before the first compile.
    let posteriors = names
        .iter()
        .map(|name| database.posterior(name, settings.memory_limit))
        .collect::<Result<Vec<_>>>()?;
    let toolchain = Toolchain::find(None)?;
    let mut rows = Vec::new();
    for posterior in &posteriors {
        let name = &posterior.name;
        let Some(reference) = &posterior.reference else {
            log(&format!(
                "{name}: skipped: the database has no reference draws for it"
            ));
            continue;
        };
        // A program that does not compile or load fails its rows, not the whole run.
        let (lib, model) = match built(posterior, &toolchain, log) {
            Ok(built) => built,
            Err(e) => {
                log(&format!("{name}: {e}"));
                for key in &settings.rows {
                    let mut row = failed_row(key, 0, &e);
                    row.posterior = name.clone();
                    rows.push(row);
                }
                continue;
            }
        };
        log(&format!("{name}: d = {}", model.dim()));
        for key in &settings.rows {
            let row = match key.as_str() {
                "nutpie" | "nutpie-low-rank" => {
                    nutpie_row(settings, &lib, posterior, reference, key)
                }
                _ => shmc_row(settings, &model, reference, key, log),
            };
            let mut row = row.unwrap_or_else(|e| failed_row(key, model.dim(), &e));
            row.posterior = name.clone();
            row.dim = model.dim();
            log(&format!(
                "  {key}: {} in {:.1} s ({} gradients){}",
                if row.passed { "pass" } else { "FAIL" },
                row.seconds,
                row.gradients,
                if row.verdict.is_empty() {
                    String::new()
                } else {
                    format!(": {}", row.verdict)
                }
            ));
            rows.push(row);
        }
    }
    Ok(rows)
}

/// `posterior`'s program compiled (or taken from the cache) and its model built from its data.
fn built(
    posterior: &posteriordb::Posterior,
    toolchain: &Toolchain,
    log: &dyn Fn(&str),
) -> Result<(PathBuf, StanModel)> {
    let code = std::fs::read_to_string(&posterior.program)
        .map_err(|e| Error::io(&posterior.program, e))?;
    let origin = posterior.program.display().to_string();
    let program = Program {
        code: &code,
        origin: &origin,
    };
    let lib = library(&program, toolchain, &cache_root(), &mut |l| log(l))?;
    let model = StanModel::load(&lib, &posterior.data, 1, origin)?;
    Ok((lib, model))
}

/// A row of one of shmc's own methods; `auto`'s choice is logged, and its timing counted in
/// the row's seconds.
fn shmc_row(
    settings: &PosteriordbSettings,
    model: &StanModel,
    reference: &Reference,
    key: &str,
    log: &dyn Fn(&str),
) -> Result<PosteriordbRow> {
    let sampler = Sampler::new(model)
        .chains(settings.chains)
        .warmup(settings.warmup)
        .draws(settings.draws)
        .seed(settings.seed);
    let (method, metric) = match key {
        "auto" => ("auto", MassMatrix::Diagonal),
        "nuts" => ("nuts", MassMatrix::Diagonal),
        "nuts-low-rank" => ("nuts", MassMatrix::LowRank),
        "nuts-laplace" => ("nuts", MassMatrix::Laplace),
        _ => ("rns-hmc", MassMatrix::Diagonal),
    };
    let choosing = std::time::Instant::now();
    let sampler = if method == "auto" {
        let choice = auto::choose(model, sampler.config())?;
        log(&format!("  auto: {}", choice.line()));
        let config = choice.apply(sampler.config());
        sampler.settings(config)
    } else {
        sampler
            .method(Method::entry(method)?.defaults())
            .metric(metric)
    };
    let chose = choosing.elapsed().as_secs_f64();
    let fit = sampler.run()?;
    let chains = fit_chains(&fit);
    let checks = posteriordb::check(fit.names(), &chains, reference)?;
    let run = fit.run();
    let evaluations = run.evaluations();
    let sampling = run.sampling_seconds();
    Ok(judged(
        key,
        checks,
        Cost {
            divergences: run.divergences() as u64,
            gradients: evaluations.exact_gradients,
            values: evaluations.exact_values,
            seconds: chose + run.wall_seconds,
            warmup_seconds: chose + run.wall_seconds - sampling,
        },
    ))
}

/// What a row cost.
struct Cost {
    divergences: u64,
    gradients: u64,
    values: u64,
    seconds: f64,
    warmup_seconds: f64,
}

/// A fit's kept draws as `chains[c][p]`, in the fit's parameter order.
fn fit_chains(fit: &shmc::api::Fit) -> Vec<Vec<Vec<f64>>> {
    let series: Vec<Vec<&[f64]>> = fit
        .names()
        .iter()
        .map(|name| fit.draws(name).unwrap_or_default())
        .collect();
    let chains = series.first().map_or(0, Vec::len);
    (0..chains)
        .map(|c| series.iter().map(|p| p[c].to_vec()).collect())
        .collect()
}

/// The row of `checks` and `cost`.
fn judged(key: &str, checks: Checks, cost: Cost) -> PosteriordbRow {
    let min_ess = checks.min_ess();
    let sampling = cost.seconds - cost.warmup_seconds;
    let verdict = checks.worst().map_or_else(String::new, |p| {
        format!(
            "{} breaks {} (mean {:+.1} MCSE, sd ratio {:.2}, R-hat {:.3}, ESS {:.0})",
            p.name,
            p.failures.join(", "),
            p.z,
            p.sd_ratio,
            p.rhat,
            p.ess_bulk.min(p.ess_tail)
        )
    });
    PosteriordbRow {
        posterior: String::new(),
        method: key.to_string(),
        dim: 0,
        passed: checks.passed(),
        verdict,
        max_rhat: checks.max_rhat(),
        min_ess,
        divergences: cost.divergences,
        gradients: cost.gradients,
        values: cost.values,
        seconds: cost.seconds,
        seconds_to_ess: cost.warmup_seconds + sampling * TARGET_ESS / min_ess,
        checks: Some(checks),
    }
}

/// The row of a method that did not finish.
fn failed_row(key: &str, dim: usize, error: &Error) -> PosteriordbRow {
    PosteriordbRow {
        posterior: String::new(),
        method: key.to_string(),
        dim,
        passed: false,
        verdict: format!("did not run: {error}"),
        max_rhat: f64::NAN,
        min_ess: f64::NAN,
        divergences: 0,
        gradients: 0,
        values: 0,
        seconds: f64::NAN,
        seconds_to_ess: f64::NAN,
        checks: None,
    }
}

/// The script that runs nutpie on a compiled library; see its own comments.
const NUTPIE_SCRIPT: &str = include_str!("posteriordb_nutpie.py");

/// What the script prints.
#[derive(Deserialize)]
struct NutpieRun {
    seconds: f64,
    warmup_gradients: u64,
    gradients: u64,
    divergences: u64,
    names: Vec<String>,
    chains: Vec<Vec<Vec<f64>>>,
}

/// A row of nutpie on `lib`, through the Python interpreter of `SHMC_PYTHON` (else python3).
fn nutpie_row(
    settings: &PosteriordbSettings,
    lib: &Path,
    posterior: &posteriordb::Posterior,
    reference: &Reference,
    key: &str,
) -> Result<PosteriordbRow> {
    let python = std::env::var_os("SHMC_PYTHON").unwrap_or_else(|| "python3".into());
    let data = std::env::temp_dir().join(format!(
        "shmc-posteriordb-{}-{}.json",
        std::process::id(),
        posterior.name
    ));
    std::fs::write(&data, &posterior.data).map_err(|e| Error::io(&data, e))?;
    let output = Command::new(&python)
        .arg("-c")
        .arg(NUTPIE_SCRIPT)
        .arg(lib)
        .arg(&data)
        .args([settings.chains, settings.warmup, settings.draws].map(|n| n.to_string()))
        .arg(settings.seed.to_string())
        .arg(if key == "nutpie-low-rank" {
            "low-rank"
        } else {
            "diag"
        })
        .output();
    let _ = std::fs::remove_file(&data);
    let output = output.map_err(|e| {
        Error::invalid(format!(
            "{}: cannot start it: {e}",
            Path::new(&python).display()
        ))
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.trim_end().lines().last().unwrap_or("no message");
        return Err(Error::invalid(format!(
            "{} could not run nutpie: {last}",
            Path::new(&python).display()
        )));
    }
    let run: NutpieRun = serde_json::from_slice(&output.stdout)
        .map_err(|e| Error::invalid(format!("nutpie's script answered unreadably: {e}")))?;
    let checks = posteriordb::check(&run.names, &run.chains, reference)?;
    let share = run.warmup_gradients as f64 / run.gradients.max(1) as f64;
    Ok(judged(
        key,
        checks,
        Cost {
            divergences: run.divergences,
            gradients: run.gradients,
            values: 0,
            seconds: run.seconds,
            warmup_seconds: run.seconds * share,
        },
    ))
}

/// The rows as a table, a posterior's rows together, and the count of posteriors each method
/// passed.
pub fn format_posteriordb(rows: &[PosteriordbRow]) -> String {
    let mut out = format!(
        "{:<44} {:<16} {:>3} {:>5} {:>7} {:>7} {:>6} {:>10} {:>8} {:>9}  {}\n",
        "posterior",
        "method",
        "d",
        "pass",
        "R-hat",
        "min ESS",
        "div",
        "gradients",
        "seconds",
        "s/ESS400",
        "worst parameter"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<44} {:<16} {:>3} {:>5} {:>7.3} {:>7.0} {:>6} {:>10} {:>8.1} {:>9.1}  {}\n",
            r.posterior,
            r.method,
            r.dim,
            if r.passed { "yes" } else { "NO" },
            r.max_rhat,
            r.min_ess,
            r.divergences,
            r.gradients,
            r.seconds,
            r.seconds_to_ess,
            r.verdict
        ));
    }
    let mut methods: Vec<&str> = rows.iter().map(|r| r.method.as_str()).collect();
    methods.dedup();
    methods.sort_unstable();
    methods.dedup();
    for method in methods {
        let of: Vec<&PosteriordbRow> = rows.iter().filter(|r| r.method == method).collect();
        let passed = of.iter().filter(|r| r.passed).count();
        out.push_str(&format!("{method}: passed {passed} of {}\n", of.len()));
    }
    out
}
