//! Figure 3's SVG: three panels against the training size (log axes, as sizes double), the
//! paper's: training seconds, acceptance, and mean ESS per second of sampling; each surrogate's
//! medians joined, its 10–90 % band as a bar at each size.

use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use shmc::{Error, Result};

use super::figure3::{Band, FIGURE3_METHODS, Figure3Row, Summary, summarize};

/// Draws Figure 3 as `fig3-surrogates.svg` in `dir`; returns its path.
pub fn plot_figure3(dir: &Path, rows: &[Figure3Row]) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let path = dir.join("fig3-surrogates.svg");
    draw(&path, &summarize(rows))
        .map_err(|e| Error::invalid(format!("{}: cannot draw: {e}", path.display())))?;
    Ok(path)
}

/// A panel: its caption, its y axis, whether that axis is logarithmic, and its measure.
type Panel = (&'static str, &'static str, bool, fn(&Summary) -> Band);

const PANELS: [Panel; 3] = [
    ("training time", "seconds", true, |s| s.training_seconds),
    ("acceptance", "acceptance probability", false, |s| {
        s.acceptance
    }),
    ("efficiency", "mean ESS per second", true, |s| {
        s.mean_ess_per_second
    }),
];

/// The range of `values`' positive entries (for a log axis) or all of them, padded.
fn range(values: &[f64], log: bool) -> (f64, f64) {
    let kept: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .collect();
    let (lo, hi) = kept
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    match (lo <= hi, log) {
        (false, true) => (1e-3, 1.0),
        (false, false) => (0.0, 1.0),
        (true, true) => (lo / 1.5, hi * 1.5),
        (true, false) => (0.0, hi.max(1.0)),
    }
}

fn draw(path: &Path, summaries: &[Summary]) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let sizes: Vec<f64> = summaries.iter().map(|s| s.observations as f64).collect();
    let (x_lo, x_hi) = range(&sizes, true);
    let root = SVGBackend::new(path, (1500, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, (caption, y_desc, log, measure)) in root.split_evenly((1, 3)).iter().zip(PANELS) {
        let values: Vec<f64> = summaries
            .iter()
            .flat_map(|s| {
                let b = measure(s);
                [b.low, b.median, b.high]
            })
            .collect();
        let (y_lo, y_hi) = range(&values, log);
        let x = (x_lo..x_hi).log_scale();
        let mut builder = ChartBuilder::on(area);
        builder
            .caption(caption, shmc::plot::CAPTION)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60);
        if log {
            let mut chart = builder.build_cartesian_2d(x, (y_lo..y_hi).log_scale())?;
            series(&mut chart, y_desc, summaries, measure)?;
        } else {
            let mut chart = builder.build_cartesian_2d(x, y_lo..y_hi)?;
            series(&mut chart, y_desc, summaries, measure)?;
        }
    }
    root.present()?;
    Ok(())
}

/// The axes (`y_desc` on y), each surrogate's medians joined, its bands as bars, and the
/// legend, on `chart`.
fn series<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    y_desc: &str,
    summaries: &[Summary],
    measure: fn(&Summary) -> Band,
) -> std::result::Result<(), Box<dyn std::error::Error>>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc("training states")
        .y_desc(y_desc)
        .draw()?;
    for (i, method) in FIGURE3_METHODS.iter().enumerate() {
        let colour = shmc::plot::chain_colour(i);
        let mine: Vec<&Summary> = summaries.iter().filter(|s| s.method == *method).collect();
        let medians: Vec<(f64, f64)> = mine
            .iter()
            .map(|s| (s.observations as f64, measure(s).median))
            .collect();
        chart
            .draw_series(std::iter::once(PathElement::new(
                medians.clone(),
                colour.stroke_width(2),
            )))?
            .label(*method)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2)));
        chart.draw_series(medians.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
        chart.draw_series(mine.iter().map(|s| {
            let (x, b) = (s.observations as f64, measure(s));
            PathElement::new([(x, b.low), (x, b.high)], colour.stroke_width(1))
        }))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}
