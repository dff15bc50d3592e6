//! `shmc bench vhmc`: the VHMC paper's comparison (its Figures 3–5) of exact HMC, VHMC and
//! SGLD by the error of their posterior estimates as a function of wall seconds, on its four
//! problems: the beta-binomial model of the 20 cities' cancer mortality, probit regression
//! (N = 10⁴, d = 5), 50-D logistic regression on a9a, and Bayesian ICA of a 5×5 unmixing
//! matrix (25-D; sources simulated and mixed by a known matrix: the paper's MEG data are not
//! available).
//!
//! Every method runs one chain from the MAP, timed from the start of its run (warmup and VHMC's
//! training included, what a user waits for). At checkpoints along its kept draws the running
//! mean and variance of every parameter are compared with a reference run's: exact HMC, 2
//! chains of 20 000 draws after 1000 warmup (`--quick`: 2500 after 500; the methods make 5000
//! after 1000, `--quick` 800 after 300), adapted step size and mass matrix. The errors are relative:
//! `‖m − m_ref‖₂ / ‖m_ref‖₂` and `‖v − v_ref‖₂ / ‖v_ref‖₂`.
//!
//! Settings: HMC and VHMC adapt their step size to an acceptance of 0.7 (the paper's "around
//! 70 %") and a diagonal mass matrix in warmup, trajectories jittered up to the paper's
//! `L`; VHMC's `τ` and hidden units are the paper's per problem (fewer units with `--quick`).
//! SGLD takes 500 rows per minibatch (the paper's), `ε_t = a (b + t)^(−0.55)` starting at a
//! fifth of the reference's smallest posterior variance (the covariance's smallest eigenvalue:
//! stable, and small enough that its bias
//! is not all that shows; the paper, too, picks SGLD's step sizes from a range) and decaying to
//! about a quarter of that by the end, and as many iterations as make the rows it reads match
//! exact HMC's (minibatch rows against `L̄ N` per HMC iteration). It needs a row-sum model, so
//! the beta-binomial problem has no SGLD row. SGLD and VHMC's published acceptance rule are
//! APPROXIMATE and labelled so.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use plotters::prelude::*;
use serde::Serialize;
use shmc::core::Steps;

use shmc::data::{Dataset, Preprocessing, Projection, bundled_in, read_libsvm};
use shmc::models::beta_binomial::BetaBinomial;
use shmc::models::ica::Ica;
use shmc::models::logistic::LogisticRegression;
use shmc::models::probit::ProbitRegression;
use shmc::optimize::{MapOptions, find_map};
use shmc::sampler::{
    ChainResult, DrawSink, Init, InverseMetric, Method, NullSink, Run, SampleConfig, SgldSettings,
    StepSize, VhmcSettings, sample,
};
use shmc::surrogates::network::TrainOptions;
use shmc::{Error, Model, Result};

/// One checkpoint of one method on one problem (one object of `--json`).
#[derive(Clone, Debug, Serialize)]
pub struct ErrorRow {
    /// The problem.
    pub problem: String,
    /// The method, `(APPROXIMATE)` appended for approximate ones.
    pub method: String,
    /// Seconds from the start of the method's run to the checkpoint's draw.
    pub seconds: f64,
    /// Kept draws at the checkpoint.
    pub draws: usize,
    /// `‖m − m_ref‖₂ / ‖m_ref‖₂` of the running mean.
    pub mean_rel_error: f64,
    /// `‖v − v_ref‖₂ / ‖v_ref‖₂` of the running variance.
    pub var_rel_error: f64,
}

/// What the bench found: the rows, and a line per problem on where VHMC is below HMC and SGLD.
#[derive(Clone, Debug, Default)]
pub struct VhmcBench {
    /// Every checkpoint of every method.
    pub rows: Vec<ErrorRow>,
    /// One verdict per problem (and one line per skipped problem or row).
    pub verdicts: Vec<String>,
}

/// The fractions of the kept draws at which the errors are recorded.
const CHECKPOINTS: [f64; 7] = [0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0];

/// The SGLD minibatch (the paper's).
const SGLD_BATCH: usize = 500;

/// The most SGLD iterations (its kept draws are held in memory).
const SGLD_MAX_ITERATIONS: usize = 400_000;

/// A problem and the paper's settings for it.
struct Problem {
    name: &'static str,
    model: Box<dyn Model>,
    /// Where the MAP search starts (ICA: the identity, as `W = 0` is singular).
    start: Vec<f64>,
    /// The most leapfrog steps.
    steps: u32,
    tau: f64,
    hidden: usize,
}

/// The iterations of one method's run, and the reference's.
#[derive(Clone, Copy)]
struct Lengths {
    warmup: usize,
    draws: usize,
}

/// Runs the bench; `log` hears progress and the notes on what was skipped or simulated.
pub fn run_vhmc(quick: bool, data_dir: &Path, seed: u64, log: &dyn Fn(&str)) -> Result<VhmcBench> {
    let (lengths, reference) = if quick {
        (
            Lengths {
                warmup: 300,
                draws: 800,
            },
            Lengths {
                warmup: 500,
                draws: 2500,
            },
        )
    } else {
        (
            Lengths {
                warmup: 1000,
                draws: 5000,
            },
            Lengths {
                warmup: 1000,
                draws: 20_000,
            },
        )
    };
    let mut bench = VhmcBench::default();
    for problem in problems(quick, data_dir, seed, &mut bench.verdicts, log)? {
        log(&format!(
            "{}: {} parameters",
            problem.name,
            problem.model.dim()
        ));
        let rows = run_problem(&problem, lengths, reference, seed, log)?;
        bench.verdicts.push(verdict(problem.name, &rows));
        bench.rows.extend(rows);
    }
    Ok(bench)
}

/// The four problems; a9a is skipped with a line in `notes` when its file is missing.
fn problems(
    quick: bool,
    data_dir: &Path,
    seed: u64,
    notes: &mut Vec<String>,
    log: &dyn Fn(&str),
) -> Result<Vec<Problem>> {
    let mut problems = vec![
        Problem {
            name: "beta-binomial",
            model: Box::new(BetaBinomial::cancer_mortality()),
            start: vec![0.0; 2],
            steps: 20,
            tau: 200.0,
            hidden: if quick { 50 } else { 100 },
        },
        Problem {
            name: "probit",
            model: Box::new(ProbitRegression::simulate(10_000, 5, seed)?),
            start: vec![0.0; 5],
            steps: 20,
            tau: 5.0,
            hidden: 100,
        },
    ];
    match bundled_in(data_dir, "a9a") {
        Ok(a9a) => {
            let mut data = read_libsvm(&a9a, Some(123), u64::MAX)?;
            if quick {
                data = first_rows(data, 8000)?;
            }
            data.preprocess(&Preprocessing {
                standardize: true,
                projection: Some(Projection {
                    k: 50,
                    seed: 1,
                    memory_limit: u64::MAX,
                }),
                intercept: false,
            })?;
            log(&format!(
                "a9a: {} rows{}, standardized, randomly projected to 50 features",
                data.n,
                if quick {
                    " (the first 8000, in a quick run)"
                } else {
                    ""
                }
            ));
            problems.push(Problem {
                name: "a9a",
                model: Box::new(LogisticRegression::new(
                    data,
                    LogisticRegression::DEFAULT_PRIOR_VARIANCE,
                )?),
                start: vec![0.0; 50],
                steps: 20,
                tau: 500.0,
                hidden: if quick { 300 } else { 2000 },
            });
        }
        Err(missing) => notes.push(format!("a9a: skipped: {missing}")),
    }
    let n = if quick { 2000 } else { 10_000 };
    let identity = (0..25)
        .map(|i| if i % 6 == 0 { 1.0 } else { 0.0 })
        .collect();
    problems.push(Problem {
        name: "ica",
        model: Box::new(Ica::simulate(n, 5, seed)?),
        start: identity,
        steps: if quick { 20 } else { 40 },
        tau: 2000.0,
        hidden: if quick { 300 } else { 1000 },
    });
    notes.push(format!(
        "ica: the MEG data are not available: {n} observations of 5 simulated secant sources \
         mixed by a known 5x5 matrix"
    ));
    Ok(problems)
}

/// The first `n` rows of `data`.
fn first_rows(data: Dataset, n: usize) -> Result<Dataset> {
    let n = n.min(data.n);
    Dataset::new(
        data.x[..n * data.p].to_vec(),
        data.y[..n].to_vec(),
        n,
        data.p,
        data.feature_names,
    )
}

/// A sink that notes when each kept draw was made (seconds since `start`).
struct Stopwatch {
    start: Instant,
    times: Arc<Mutex<Vec<f64>>>,
}

impl DrawSink for Stopwatch {
    fn adaptation(&mut self, _: f64, _: &InverseMetric) -> Result<()> {
        Ok(())
    }
    fn draw(&mut self, _: &[f64]) -> Result<()> {
        let seconds = self.start.elapsed().as_secs_f64();
        self.times
            .lock()
            .map_err(|_| Error::invalid("the stopwatch's lock is poisoned"))?
            .push(seconds);
        Ok(())
    }
    fn finish(&mut self, _: &ChainResult) -> Result<()> {
        Ok(())
    }
}

/// Every parameter's mean and variance over all chains' kept draws.
fn moments(run: &Run) -> (Vec<f64>, Vec<f64>) {
    (0..run.names.len())
        .map(|p| {
            let all: Vec<f64> = run.series(p).concat();
            let n = all.len() as f64;
            let mean = all.iter().sum::<f64>() / n;
            let var = all.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            (mean, var)
        })
        .unzip()
}

/// The smallest eigenvalue of the covariance of all chains' kept draws: the posterior's
/// narrowest direction's variance, which bounds a stable Langevin step (`ε λ_max(Σ⁻¹) < 4`).
/// The marginal variances can be far larger on a correlated posterior (ICA's).
fn smallest_variance(run: &Run) -> f64 {
    let d = run.names.len();
    let series: Vec<Vec<f64>> = (0..d).map(|p| run.series(p).concat()).collect();
    let n = series[0].len() as f64;
    let means: Vec<f64> = series.iter().map(|s| s.iter().sum::<f64>() / n).collect();
    let covariance = nalgebra::DMatrix::from_fn(d, d, |i, j| {
        series[i]
            .iter()
            .zip(&series[j])
            .map(|(a, b)| (a - means[i]) * (b - means[j]))
            .sum::<f64>()
            / (n - 1.0)
    });
    covariance
        .symmetric_eigenvalues()
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
}

fn relative(x: &[f64], reference: &[f64]) -> f64 {
    let diff: f64 = x.iter().zip(reference).map(|(a, b)| (a - b).powi(2)).sum();
    let norm: f64 = reference.iter().map(|b| b * b).sum();
    (diff / norm).sqrt()
}

/// The reference, then every method on `problem`.
fn run_problem(
    problem: &Problem,
    lengths: Lengths,
    reference_lengths: Lengths,
    seed: u64,
    log: &dyn Fn(&str),
) -> Result<Vec<ErrorRow>> {
    let model = problem.model.as_ref();
    let map = find_map(model, &problem.start, &MapOptions::default())?;
    let protocol = Protocol {
        problem,
        seed,
        start: &map.position,
    };
    let reference = protocol.reference(reference_lengths, log)?;
    let (ref_mean, ref_var) = moments(&reference);
    let mut rows = Vec::new();
    for (label, config) in protocol.runs(lengths, &reference, log) {
        log(&format!("{}: running {label} ...", problem.name));
        let (run, times) = timed(model, &config)?;
        rows.extend(checkpoints(
            problem.name,
            &label,
            &run,
            &times,
            &ref_mean,
            &ref_var,
        ));
    }
    Ok(rows)
}

/// What every run on a problem shares: its seed, and adapted HMC's settings from the MAP.
struct Protocol<'a> {
    problem: &'a Problem,
    seed: u64,
    /// The MAP.
    start: &'a [f64],
}

impl Protocol<'_> {
    /// `chains` of `method` for `lengths`, with the step size adapted to acceptance 0.7 and the
    /// mass matrix adapted, and the problem's jittered steps.
    fn config(&self, method: Method, chains: usize, lengths: Lengths) -> SampleConfig {
        SampleConfig {
            chains,
            warmup: lengths.warmup,
            draws: lengths.draws,
            seed: self.seed,
            step_size: StepSize::Adapt { target: 0.7 },
            steps: Steps::Jittered(self.problem.steps),
            adapt_mass: true,
            init: Init::Values(self.start.to_vec()),
            method,
            ..SampleConfig::default()
        }
    }

    /// The reference the methods' errors are measured against: 2 chains of exact HMC.
    fn reference(&self, lengths: Lengths, log: &dyn Fn(&str)) -> Result<Run> {
        log(&format!(
            "{}: reference: exact HMC, 2 chains x {} draws after {} warmup",
            self.problem.name, lengths.draws, lengths.warmup
        ));
        let sinks: Vec<Box<dyn DrawSink>> = vec![Box::new(NullSink), Box::new(NullSink)];
        sample(
            self.problem.model.as_ref(),
            &self.config(Method::Hmc, 2, lengths),
            sinks,
            &|_, _| {},
            None,
        )
    }

    /// VHMC with the problem's network and τ; `exact_acceptance` false: the approximate
    /// variant, which accepts on the surrogate's Hamiltonian.
    fn vhmc(&self, exact_acceptance: bool) -> Method {
        Method::Vhmc(VhmcSettings {
            train: TrainOptions {
                hidden: self.problem.hidden,
                ridge: 1e-3,
                seed: self.seed,
                ..TrainOptions::default()
            },
            tau: self.problem.tau,
            exact_acceptance,
        })
    }

    /// The methods' runs, labelled, in the order they run: HMC, VHMC, approximate VHMC and,
    /// where `U` is a sum over data rows, SGLD.
    fn runs(
        &self,
        lengths: Lengths,
        reference: &Run,
        log: &dyn Fn(&str),
    ) -> Vec<(String, SampleConfig)> {
        let mut runs = vec![
            ("hmc".to_string(), self.config(Method::Hmc, 1, lengths)),
            ("vhmc".to_string(), self.config(self.vhmc(true), 1, lengths)),
            (
                "vhmc-approximate (APPROXIMATE)".to_string(),
                self.config(self.vhmc(false), 1, lengths),
            ),
        ];
        match self.problem.model.row_sum() {
            Some(sum) => runs.push((
                "sgld (APPROXIMATE)".to_string(),
                self.sgld(lengths, sum.rows(), reference),
            )),
            None => log(&format!(
                "{}: no sgld row: its U is not a sum over data rows",
                self.problem.name
            )),
        }
        runs
    }

    /// SGLD on a `U` summed over `rows` data rows, given as many rows read as exact HMC's
    /// L̄ = (L + 1)/2 full gradients per iteration, its step sizes decaying from a fifth of
    /// the reference's smallest posterior variance.
    fn sgld(&self, lengths: Lengths, rows: usize, reference: &Run) -> SampleConfig {
        let hmc_rows = (lengths.warmup + lengths.draws) as f64 * f64::from(self.problem.steps + 1)
            / 2.0
            * rows as f64;
        let batch = SGLD_BATCH.min(rows);
        let total = ((hmc_rows / batch as f64) as usize).clamp(1000, SGLD_MAX_ITERATIONS);
        let gamma = 0.55;
        let b = total as f64 / 10.0;
        let eps0 = 0.2 * smallest_variance(reference);
        let settings = SgldSettings {
            batch,
            a: eps0 * b.powf(gamma),
            b,
            gamma,
        };
        let warmup = total / 10;
        SampleConfig {
            warmup,
            draws: total - warmup,
            method: Method::Sgld(settings),
            ..self.config(Method::Hmc, 1, lengths)
        }
    }
}

/// Runs `config` on `model` and returns the run with each kept draw's seconds since the start
/// (the checkpoints' time axis).
fn timed(model: &dyn Model, config: &SampleConfig) -> Result<(Run, Vec<f64>)> {
    let times = Arc::new(Mutex::new(Vec::with_capacity(config.draws)));
    let sinks: Vec<Box<dyn DrawSink>> = vec![Box::new(Stopwatch {
        start: Instant::now(),
        times: Arc::clone(&times),
    })];
    let run = sample(model, config, sinks, &|_, _| {}, None)?;
    let times = times
        .lock()
        .map_err(|_| Error::invalid("the stopwatch's lock is poisoned"))?
        .clone();
    Ok((run, times))
}

/// The errors of `run`'s running moments at the [`CHECKPOINTS`].
fn checkpoints(
    problem: &str,
    label: &str,
    run: &Run,
    times: &[f64],
    ref_mean: &[f64],
    ref_var: &[f64],
) -> Vec<ErrorRow> {
    let chain = &run.chains[0];
    let kept = chain.kept().min(times.len());
    let d = run.names.len();
    let (mut sum, mut sum_sq) = (vec![0.0; d], vec![0.0; d]);
    let mut rows = Vec::new();
    let mut marks = CHECKPOINTS
        .iter()
        .map(|f| ((f * kept as f64) as usize).max(2))
        .peekable();
    for i in 0..kept {
        for p in 0..d {
            let x = chain.parameter(p)[i];
            sum[p] += x;
            sum_sq[p] += x * x;
        }
        let n = i + 1;
        if marks.peek() != Some(&n) {
            continue;
        }
        while marks.peek() == Some(&n) {
            marks.next();
        }
        let m = n as f64;
        let mean: Vec<f64> = sum.iter().map(|s| s / m).collect();
        let var: Vec<f64> = sum_sq
            .iter()
            .zip(&mean)
            .map(|(s, mu)| ((s - m * mu * mu) / (m - 1.0)).max(0.0))
            .collect();
        rows.push(ErrorRow {
            problem: problem.to_string(),
            method: label.to_string(),
            seconds: times[i],
            draws: n,
            mean_rel_error: relative(&mean, ref_mean),
            var_rel_error: relative(&var, ref_var),
        });
    }
    rows
}

/// A method's error at `seconds`: its last checkpoint at or before then, if any.
fn error_at(rows: &[ErrorRow], method: &str, seconds: f64) -> Option<(f64, f64)> {
    rows.iter()
        .rfind(|r| r.method == method && r.seconds <= seconds)
        .map(|r| (r.mean_rel_error, r.var_rel_error))
}

/// Where VHMC (both rules) is below HMC and SGLD: each pair compared at the time the shorter of
/// the two runs ended, each by its last checkpoint by then (a method with none by then has no
/// estimate yet, and is not below).
fn verdict(problem: &str, rows: &[ErrorRow]) -> String {
    let mut methods: Vec<&str> = Vec::new();
    for r in rows {
        if !methods.contains(&r.method.as_str()) {
            methods.push(&r.method);
        }
    }
    let end = |method: &str| {
        rows.iter()
            .filter(|r| r.method == method)
            .map(|r| r.seconds)
            .fold(0.0, f64::max)
    };
    let short = |method: &str| method.split(' ').next().unwrap_or(method).to_string();
    let mut parts = Vec::new();
    for vhmc in methods.iter().filter(|m| m.starts_with("vhmc")) {
        for other in methods
            .iter()
            .filter(|m| m.starts_with("hmc") || m.starts_with("sgld"))
        {
            let at = end(vhmc).min(end(other));
            let (name, other_name) = (short(vhmc), short(other));
            let text = match (error_at(rows, vhmc, at), error_at(rows, other, at)) {
                (Some(own), Some(theirs)) => format!(
                    "mean {} ({:.4} vs {:.4}), var {} ({:.4} vs {:.4})",
                    below(own.0, theirs.0),
                    own.0,
                    theirs.0,
                    below(own.1, theirs.1),
                    own.1,
                    theirs.1
                ),
                (Some(_), None) => format!("below ({other_name} has no estimate yet)"),
                (None, _) => format!("NOT below ({name} has no estimate yet)"),
            };
            parts.push(format!("{name} vs {other_name} at {at:.2} s: {text}"));
        }
    }
    format!("{problem}: {}", parts.join("; "))
}

fn below(a: f64, b: f64) -> &'static str {
    if a < b { "below" } else { "NOT below" }
}

/// The table: one line per checkpoint.
pub fn format_vhmc_table(rows: &[ErrorRow]) -> String {
    let mut text = format!(
        "{:<14} {:<31} {:>9} {:>7} {:>10} {:>10}\n",
        "problem", "method", "seconds", "draws", "mean_err", "var_err"
    );
    for r in rows {
        text.push_str(&format!(
            "{:<14} {:<31} {:>9.3} {:>7} {:>10.4} {:>10.4}\n",
            r.problem, r.method, r.seconds, r.draws, r.mean_rel_error, r.var_rel_error
        ));
    }
    text
}

/// One SVG per problem in `dir`: the relative errors of the mean (left) and the variance
/// (right) against seconds, both axes logarithmic, a line per method.
pub fn plot_errors(dir: &Path, rows: &[ErrorRow]) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut problems: Vec<&str> = Vec::new();
    for r in rows {
        if !problems.contains(&r.problem.as_str()) {
            problems.push(&r.problem);
        }
    }
    let mut written = Vec::new();
    for problem in problems {
        let path = dir.join(format!("vhmc-{problem}.svg"));
        let mine: Vec<&ErrorRow> = rows.iter().filter(|r| r.problem == problem).collect();
        draw(&path, problem, &mine)
            .map_err(|e| Error::invalid(format!("{}: cannot draw: {e}", path.display())))?;
        written.push(path);
    }
    Ok(written)
}

/// What a panel plots of a row.
type Measure = dyn Fn(&ErrorRow) -> f64;

fn draw(
    path: &Path,
    problem: &str,
    rows: &[&ErrorRow],
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    let range = |f: &dyn Fn(&ErrorRow) -> f64| {
        let values = rows.iter().map(|r| f(r)).filter(|&x| positive(x));
        let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
        if lo.is_finite() {
            (lo / 1.5, hi * 1.5)
        } else {
            (1e-3, 1.0)
        }
    };
    let seconds = range(&|r| r.seconds);
    let mut methods: Vec<&str> = Vec::new();
    for r in rows {
        if !methods.contains(&r.method.as_str()) {
            methods.push(&r.method);
        }
    }
    let root = SVGBackend::new(path, (1100, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    let measures: [(&str, &Measure); 2] = [
        ("mean", &|r| r.mean_rel_error),
        ("variance", &|r| r.var_rel_error),
    ];
    for (panel, (name, measure)) in panels.iter().zip(measures) {
        let errors = range(measure);
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{problem}: relative error of the {name}"),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(
                (seconds.0..seconds.1).log_scale(),
                (errors.0..errors.1).log_scale(),
            )?;
        chart
            .configure_mesh()
            .x_desc("wall seconds")
            .y_desc("relative error")
            .draw()?;
        for (k, method) in methods.iter().enumerate() {
            let colour = Palette99::pick(k).to_rgba();
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.method == *method)
                .map(|r| (r.seconds, measure(r)))
                .filter(|&(s, e)| positive(s) && positive(e))
                .collect();
            chart
                .draw_series(std::iter::once(PathElement::new(
                    points.clone(),
                    colour.stroke_width(2),
                )))?
                .label(*method)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
