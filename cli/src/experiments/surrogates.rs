//! `shmc bench surrogates`: the random-bases journal's Figures 1 and 3, the Gaussian-process
//! baselines it argues against (the full GP and FITC, [`shmc::surrogates::gp`]) beside its
//! random networks.
//!
//! Figure 1 fits `U(x) = x²/2`, the standard normal's potential, from `N = 10, 20, 40` nested
//! standard-normal points (one draw of 40, its first `N`): the full GP, FITC with 5 inducing
//! points, and networks of 5 softplus and 5 RBF units. FITC and the networks are random (the
//! inducing subset, the input parameters), so each is fitted [`Figure1::repetitions`] times
//! with seeds 1, 2, … and its curves averaged, as the paper does; the full GP is deterministic.
//! Errors are over `[−4, 4]` (what the paper draws: far outside the data, where `U` keeps
//! rising but a GP's mean returns to its constant) and over `[−2, 2]` (around the data).

use std::path::{Path, PathBuf};
use std::time::Instant;

use plotters::prelude::*;
use serde::Serialize;
use shmc::core::{Activation, Nodes, Potential};
use shmc::random::chain_rng;
use shmc::surrogates::gp::{self, Approximation, GpOptions};
use shmc::surrogates::network::{TrainOptions, fit_potential};
use shmc::surrogates::states::TrainingSet;
use shmc::{Error, Result};

/// Figure 1's settings.
#[derive(Clone, Debug)]
pub struct Figure1 {
    /// The nested training sizes.
    pub sizes: Vec<usize>,
    /// Fits averaged per random method and size.
    pub repetitions: usize,
    /// The seed of the training points.
    pub seed: u64,
}

impl Figure1 {
    /// The paper's (100 repetitions), or 20 with `quick`.
    pub fn new(quick: bool, seed: u64) -> Self {
        Self {
            sizes: vec![10, 20, 40],
            repetitions: if quick { 20 } else { 100 },
            seed,
        }
    }
}

/// The methods of Figure 1, as the rows name them.
pub const FIGURE1_METHODS: [&str; 4] = ["gp", "fitc-5", "rns-softplus-5", "rns-rbf-5"];

/// Where the curves are evaluated: 161 points over `[−4, 4]`.
fn grid() -> Vec<f64> {
    (0..=160).map(|i| -4.0 + 0.05 * i as f64).collect()
}

/// One method at one training size.
#[derive(Clone, Debug, Serialize)]
pub struct FitRow {
    /// `fig1-x2`.
    pub problem: String,
    /// One of [`FIGURE1_METHODS`].
    pub method: String,
    /// The training size `N`.
    pub observations: usize,
    /// Fits averaged.
    pub repetitions: usize,
    /// RMSE over `[−4, 4]` of the averaged curve (the paper's figure).
    pub rmse_mean_curve: f64,
    /// RMSE over `[−4, 4]` of one fit, averaged over the fits.
    pub rmse: f64,
    /// RMSE over `[−2, 2]` of one fit, averaged over the fits.
    pub rmse_inside: f64,
    /// Wall seconds of one fit, averaged.
    pub fit_seconds: f64,
    /// The averaged curve on the grid (for the SVG; not in the table).
    #[serde(skip)]
    pub curve: Vec<f64>,
}

/// The training set of the first `n` of `points`.
fn training(points: &[f64], n: usize) -> TrainingSet {
    let mut set = TrainingSet::new(1);
    for &x in &points[..n] {
        set.push(&[x], 0.5 * x * x, Some(&[x]));
    }
    set
}

/// One fit of `method` (seed `seed`) to `set`, evaluated on `xs`.
fn fit_curve(method: &str, set: &TrainingSet, seed: u64, xs: &[f64]) -> Result<Vec<f64>> {
    let curve = |p: &dyn Potential| xs.iter().map(|x| p.value(&[*x])).collect();
    let network = |nodes| {
        let options = TrainOptions {
            hidden: 5,
            nodes,
            seed,
            ..TrainOptions::default()
        };
        fit_potential(set, &options).map(|t| curve(&t.network))
    };
    match method {
        "gp" | "fitc-5" => {
            let approximation = if method == "gp" {
                Approximation::Full
            } else {
                Approximation::Fitc { inducing: 5 }
            };
            let options = GpOptions {
                approximation,
                seed,
                ..GpOptions::default()
            };
            Ok(curve(&gp::fit(set, &options)?.surrogate))
        }
        "rns-softplus-5" => network(Nodes::Additive(Activation::Softplus)),
        _ => network(Nodes::Rbf { width: 1.0 }),
    }
}

/// The RMSE of `curve` against `x²/2` over the grid points in `[−bound, bound]`.
fn rmse(xs: &[f64], curve: &[f64], bound: f64) -> f64 {
    let (sum, count) = xs
        .iter()
        .zip(curve)
        .filter(|(x, _)| x.abs() <= bound + 1e-12)
        .fold((0.0, 0usize), |(s, c), (x, y)| {
            (s + (y - 0.5 * x * x).powi(2), c + 1)
        });
    (sum / count as f64).sqrt()
}

/// `method`'s row at training size `n`: its fits, their averaged curve and errors.
fn figure1_row(method: &str, points: &[f64], n: usize, settings: &Figure1) -> Result<FitRow> {
    let xs = grid();
    let set = training(points, n);
    let repetitions = if method == "gp" {
        1
    } else {
        settings.repetitions
    };
    let mut mean_curve = vec![0.0; xs.len()];
    let (mut single, mut inside, mut seconds) = (0.0, 0.0, 0.0);
    for rep in 0..repetitions {
        let start = Instant::now();
        let curve = fit_curve(method, &set, rep as u64 + 1, &xs)?;
        seconds += start.elapsed().as_secs_f64();
        single += rmse(&xs, &curve, 4.0);
        inside += rmse(&xs, &curve, 2.0);
        for (m, c) in mean_curve.iter_mut().zip(&curve) {
            *m += c / repetitions as f64;
        }
    }
    let r = repetitions as f64;
    Ok(FitRow {
        problem: "fig1-x2".into(),
        method: method.into(),
        observations: n,
        repetitions,
        rmse_mean_curve: rmse(&xs, &mean_curve, 4.0),
        rmse: single / r,
        rmse_inside: inside / r,
        fit_seconds: seconds / r,
        curve: mean_curve,
    })
}

/// The training points of Figure 1: the largest size's standard normals (seed `seed`).
fn figure1_points(settings: &Figure1) -> Vec<f64> {
    let largest = settings.sizes.iter().copied().max().unwrap_or(0);
    let mut points = vec![0.0; largest];
    shmc::core::random::fill_standard_normal(&mut chain_rng(settings.seed, 0xF161), &mut points);
    points
}

/// Runs Figure 1: every method at every size.
pub fn run_figure1(settings: &Figure1, log: &dyn Fn(&str)) -> Result<Vec<FitRow>> {
    let points = figure1_points(settings);
    let mut rows = Vec::new();
    for &n in &settings.sizes {
        for method in FIGURE1_METHODS {
            let row = figure1_row(method, &points, n, settings)?;
            log(&format!(
                "fig1: {method} N = {n}: RMSE {:.3} ({} fits, {:.1} ms each)",
                row.rmse_mean_curve,
                row.repetitions,
                1e3 * row.fit_seconds
            ));
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Figure 1's table.
pub fn format_figure1(rows: &[FitRow]) -> String {
    let mut out = String::from(
        "Figure 1: U(x) = x^2/2 from N nested standard-normal points; RMSE of the averaged \
         curve over [-4, 4], and of one fit over [-4, 4] and [-2, 2]\n",
    );
    out.push_str(&format!(
        "{:<16} {:>4} {:>6} {:>12} {:>10} {:>12} {:>10}\n",
        "method", "N", "fits", "RMSE(mean)", "RMSE", "RMSE[-2,2]", "fit ms"
    ));
    for r in rows {
        out.push_str(&format!(
            "{:<16} {:>4} {:>6} {:>12.3} {:>10.3} {:>12.3} {:>10.2}\n",
            r.method,
            r.observations,
            r.repetitions,
            r.rmse_mean_curve,
            r.rmse,
            r.rmse_inside,
            1e3 * r.fit_seconds
        ));
    }
    out
}

/// Draws Figure 1 (one panel per size: `x²/2`, each method's averaged curve, the training
/// points) as `fig1-surrogates.svg` in `dir`; returns its path.
pub fn plot_figure1(dir: &Path, rows: &[FitRow], settings: &Figure1) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let path = dir.join("fig1-surrogates.svg");
    draw_figure1(&path, rows, settings)
        .map_err(|e| Error::invalid(format!("{}: cannot draw: {e}", path.display())))?;
    Ok(path)
}

fn draw_figure1(
    path: &Path,
    rows: &[FitRow],
    settings: &Figure1,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let (xs, points) = (grid(), figure1_points(settings));
    let root = SVGBackend::new(path, (1200, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, settings.sizes.len()));
    for (panel, &n) in panels.iter().zip(&settings.sizes) {
        let mut chart = shmc::plot::chart(panel, &format!("N = {n}"), -4.0..4.0, -1.0..9.0)?;
        chart.configure_mesh().x_desc("x").y_desc("U").draw()?;
        let clipped = |ys: &[f64]| {
            xs.iter()
                .zip(ys)
                .map(|(x, y)| (*x, y.clamp(-1.0, 9.0)))
                .collect()
        };
        let truth: Vec<f64> = xs.iter().map(|x| 0.5 * x * x).collect();
        if let Some(l) = shmc::plot::line(clipped(&truth), BLACK.stroke_width(2)) {
            chart
                .draw_series([l])?
                .label("x^2/2")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK));
        }
        for (i, method) in FIGURE1_METHODS.iter().enumerate() {
            let colour = shmc::plot::chain_colour(i);
            let Some(row) = rows
                .iter()
                .find(|r| r.method == *method && r.observations == n)
            else {
                continue;
            };
            if let Some(l) = shmc::plot::line(clipped(&row.curve), colour.stroke_width(2)) {
                chart
                    .draw_series([l])?
                    .label(*method)
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour));
            }
        }
        chart.draw_series(
            points[..n]
                .iter()
                .map(|&x| Circle::new((x, 0.5 * x * x), 3, BLACK.filled())),
        )?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperMiddle)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
