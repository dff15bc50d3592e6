//! The report's plots, each an SVG text to inline in the page (plotters, SVG backend only, in the
//! look of [`crate::plot`]): a parameter's trace and histogram, a pair's scatter, the acceptance
//! statistic and the divergences over the draws, and a surrogate's learning curve.
//!
//! Chains are told apart by colour ([`chain_colour`], which the page's legend repeats). Long runs
//! are thinned for display only, so that a report stays a few hundred kilobytes whatever the
//! draws: a trace shows at most [`TRACE_POINTS`] draws per chain, a scatter at most
//! [`SCATTER_POINTS`] in all; the captions say when. Non-finite draws are not drawn.

use plotters::prelude::*;

use crate::plot::{self, BAR, Canvas, Chart, Drawn, chain_colour, line, span};
use crate::records::LearningPoint;
use crate::{Error, Result};

/// The most draws per chain a trace shows (more than the pixels across it).
pub const TRACE_POINTS: usize = 1000;

/// The most points a pair's scatter shows, all chains together.
pub const SCATTER_POINTS: usize = 400;

/// Draws a figure of `size` pixels, naming `what` if plotters fails.
fn figure(what: &str, size: (u32, u32), draw: impl FnOnce(&Canvas<'_>) -> Drawn) -> Result<String> {
    plot::svg(size, draw).map_err(|e| Error::invalid(format!("cannot draw the {what}: {e}")))
}

/// The stride that shows at most `most` of `n` points.
fn stride(n: usize, most: usize) -> usize {
    n.div_ceil(most.max(1)).max(1)
}

/// " (every 3rd draw shown)", or nothing when every draw is.
fn thinned(stride: usize) -> String {
    match stride {
        1 => String::new(),
        2 => " (every 2nd draw shown)".into(),
        3 => " (every 3rd draw shown)".into(),
        k => format!(" (every {k}th draw shown)"),
    }
}

/// Each chain's finite points `(i + 1, x_i)` at every `stride`-th draw.
fn thinned_points(series: &[f64], stride: usize) -> Vec<(f64, f64)> {
    series
        .iter()
        .enumerate()
        .step_by(stride)
        .filter(|(_, x)| x.is_finite())
        .map(|(i, &x)| ((i + 1) as f64, x))
        .collect()
}

/// Numbers on the axes: few digits, as a reader compares them.
fn ticks(chart: &mut Chart<'_, '_>, x_desc: &str, y_desc: &str) -> Drawn {
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(6)
        .y_labels(5)
        .x_label_formatter(&|x| format!("{x:.3}"))
        .y_label_formatter(&|y| format!("{y:.3}"))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    Ok(())
}

/// Counts on an axis have no decimals.
fn integer_ticks(chart: &mut Chart<'_, '_>, x_desc: &str, y_desc: &str, y_integer: bool) -> Drawn {
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(6)
        .y_labels(5)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| match y_integer {
            // A count's ticks between whole numbers would print as repeated integers.
            true if (y - y.round()).abs() > 1e-9 => String::new(),
            true => format!("{y:.0}"),
            false => format!("{y:.2}"),
        })
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    Ok(())
}

/// Parameter `name`'s draws over the iterations, one line per chain.
pub fn trace(name: &str, chains: &[&[f64]]) -> Result<String> {
    let draws = chains.iter().map(|c| c.len()).max().unwrap_or(0);
    let step = stride(draws, TRACE_POINTS);
    figure(&format!("trace of {name}"), (640, 240), |root| {
        let mut chart = plot::chart(
            root,
            &format!("{name}{}", thinned(step)),
            0.0..draws.max(1) as f64 + 1.0,
            span(chains.iter().copied()),
        )?;
        integer_ticks(&mut chart, "draw", "", false)?;
        for (c, series) in chains.iter().enumerate() {
            chart.draw_series(line(thinned_points(series, step), chain_colour(c).mix(0.8)))?;
        }
        Ok(())
    })
}

/// The bins of a histogram of `n` draws: about √n, between 10 and 40.
fn bins(n: usize) -> usize {
    ((n as f64).sqrt().round() as usize).clamp(10, 40)
}

/// Parameter `name`'s draws, all chains together, as a histogram.
pub fn histogram(name: &str, chains: &[&[f64]]) -> Result<String> {
    let x = span(chains.iter().copied());
    let count = bins(chains.iter().map(|c| c.len()).sum());
    let width = (x.end - x.start) / count as f64;
    let mut counts = vec![0usize; count];
    for &v in chains.iter().flat_map(|c| c.iter()) {
        if v.is_finite() {
            let b = ((v - x.start) / width) as usize;
            counts[b.min(count - 1)] += 1;
        }
    }
    let top = counts.iter().copied().max().unwrap_or(0).max(1) as f64 * 1.08;
    figure(&format!("histogram of {name}"), (320, 240), |root| {
        let mut chart = plot::chart(root, name, x.clone(), 0.0..top)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_labels(4)
            .y_labels(4)
            .x_label_formatter(&|v| format!("{v:.2}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .y_desc("draws")
            .draw()?;
        chart.draw_series(counts.iter().enumerate().map(|(b, &n)| {
            let x0 = x.start + b as f64 * width;
            Rectangle::new([(x0, 0.0), (x0 + width, n as f64)], BAR.mix(0.85).filled())
        }))?;
        Ok(())
    })
}

/// Parameter `y` against parameter `x`, one point per (thinned) draw, coloured by chain.
pub fn pair(x: (&str, &[&[f64]]), y: (&str, &[&[f64]])) -> Result<String> {
    let total: usize = x.1.iter().map(|c| c.len()).sum();
    let step = stride(total, SCATTER_POINTS);
    figure(
        &format!("scatter of {} and {}", y.0, x.0),
        (300, 300),
        |root| {
            let mut chart = plot::chart(
                root,
                &format!("{} vs {}", y.0, x.0),
                span(x.1.iter().copied()),
                span(y.1.iter().copied()),
            )?;
            ticks(&mut chart, x.0, y.0)?;
            for (c, (xs, ys)) in x.1.iter().zip(y.1).enumerate() {
                let colour = chain_colour(c).mix(0.5).filled();
                chart.draw_series(
                    xs.iter()
                        .zip(ys.iter())
                        .step_by(step)
                        .filter(|(a, b)| a.is_finite() && b.is_finite())
                        .map(|(&a, &b)| Circle::new((a, b), 2, colour)),
                )?;
            }
            Ok(())
        },
    )
}

/// The draws a point of the acceptance plot averages: a 25th of the chain.
pub fn acceptance_window(draws: usize) -> usize {
    (draws / 25).max(1)
}

/// Each chain's acceptance statistic over the draws, as a trailing mean over
/// [`acceptance_window`] draws (a single draw's is too noisy to read).
pub fn acceptance(chains: &[&[f64]]) -> Result<String> {
    let draws = chains.iter().map(|c| c.len()).max().unwrap_or(0);
    let window = acceptance_window(draws);
    let step = stride(draws, TRACE_POINTS);
    figure("acceptance plot", (640, 240), |root| {
        let mut chart = plot::chart(
            root,
            &format!("accept_stat__, mean of the last {window} draws"),
            0.0..draws.max(1) as f64 + 1.0,
            0.0..1.05,
        )?;
        integer_ticks(&mut chart, "draw", "", false)?;
        for (c, series) in chains.iter().enumerate() {
            let mut sum = 0.0;
            let means: Vec<f64> = series
                .iter()
                .enumerate()
                .map(|(i, &a)| {
                    sum += if a.is_finite() { a } else { 0.0 };
                    if i >= window {
                        let old = series[i - window];
                        sum -= if old.is_finite() { old } else { 0.0 };
                    }
                    sum / (i + 1).min(window) as f64
                })
                .collect();
            chart.draw_series(line(thinned_points(&means, step), chain_colour(c).mix(0.9)))?;
        }
        Ok(())
    })
}

/// Each chain's divergent transitions so far, over the draws.
pub fn divergences(chains: &[&[f64]]) -> Result<String> {
    let draws = chains.iter().map(|c| c.len()).max().unwrap_or(0);
    let totals: Vec<usize> = chains
        .iter()
        .map(|c| c.iter().filter(|&&d| d != 0.0).count())
        .collect();
    let all: usize = totals.iter().sum();
    let most = totals.iter().copied().max().unwrap_or(0);
    figure("divergence plot", (560, 240), |root| {
        let mut chart = plot::chart(
            root,
            &format!("divergent transitions so far: {all} in all"),
            0.0..draws.max(1) as f64 + 1.0,
            -0.05 * most.max(1) as f64..most.max(1) as f64 * 1.08,
        )?;
        integer_ticks(&mut chart, "draw", "", true)?;
        for (c, series) in chains.iter().enumerate() {
            // A step line: only the draws where the count rises.
            let mut count = 0.0;
            let mut steps = vec![(0.0, 0.0)];
            for (i, &d) in series.iter().enumerate() {
                if d != 0.0 {
                    let at = (i + 1) as f64;
                    steps.push((at, count));
                    count += 1.0;
                    steps.push((at, count));
                }
            }
            steps.push((series.len() as f64, count));
            chart.draw_series(line(steps, chain_colour(c).stroke_width(2)))?;
        }
        Ok(())
    })
}

/// What the learning curve's x-axis is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LearningAxis {
    /// The states the surrogate had learned from (they grew during the run).
    States,
    /// The iteration: each chain's surrogate kept the states it was fitted to (fitted once,
    /// precomputed or loaded), so acceptance against them would be a column per chain.
    Iteration,
}

/// The axis the learning `curves` are drawn against.
pub fn learning_axis(curves: &[&[LearningPoint]]) -> LearningAxis {
    let grew = |curve: &&[LearningPoint]| curve.windows(2).any(|w| w[0].states != w[1].states);
    if curves.iter().any(grew) {
        LearningAxis::States
    } else {
        LearningAxis::Iteration
    }
}

/// Each chain's learning curve: the mean acceptance of its surrogate's warmup proposals (a line
/// with dots) and of its sampling proposals (a ring: the surrogate fixed), against the states
/// learned or, if those never changed, the iteration. `warmup`: the warmup iterations, which
/// tell warmup points from sampling's.
pub fn learning(curves: &[&[LearningPoint]], warmup: usize) -> Result<String> {
    let axis = learning_axis(curves);
    let x_of = |p: &LearningPoint| match axis {
        LearningAxis::States => p.states as f64,
        LearningAxis::Iteration => p.iteration as f64,
    };
    let xs: Vec<f64> = curves.iter().flat_map(|c| c.iter()).map(x_of).collect();
    let (x_desc, caption) = match axis {
        LearningAxis::States => (
            "states learned",
            "surrogate acceptance vs states learned".to_string(),
        ),
        LearningAxis::Iteration => {
            let mut states: Vec<usize> = curves
                .iter()
                .filter_map(|c| c.first())
                .map(|p| p.states)
                .collect();
            states.sort_unstable();
            states.dedup();
            let states: Vec<String> = states.iter().map(usize::to_string).collect();
            (
                "iteration",
                format!(
                    "surrogate acceptance (learned from {} states)",
                    states.join(" or ")
                ),
            )
        }
    };
    figure("learning curve", (640, 300), |root| {
        let mut chart = plot::chart(root, &caption, span([xs.as_slice()]), 0.0..1.05)?;
        integer_ticks(&mut chart, x_desc, "mean acceptance", false)?;
        for (c, curve) in curves.iter().enumerate() {
            let colour = chain_colour(c);
            let (warm, sampling): (Vec<&LearningPoint>, Vec<&LearningPoint>) =
                curve.iter().partition(|p| p.iteration <= warmup);
            let dots: Vec<(f64, f64)> = warm.iter().map(|p| (x_of(p), p.acceptance)).collect();
            chart.draw_series(line(dots.clone(), colour.stroke_width(2)))?;
            chart.draw_series(dots.iter().map(|&at| Circle::new(at, 3, colour.filled())))?;
            chart.draw_series(
                sampling
                    .iter()
                    .map(|p| Circle::new((x_of(p), p.acceptance), 7, colour.stroke_width(3))),
            )?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_draws_marks_even_from_degenerate_draws() {
        let a: Vec<f64> = (0..2000).map(|i| (i as f64 * 0.1).sin()).collect();
        let constant = vec![3.0; 2000];
        let broken = vec![f64::NAN, f64::INFINITY, 1.0, 2.0];
        let trace_svg = trace("a", &[&a, &constant]).unwrap();
        assert!(trace_svg.contains("<polyline") && trace_svg.contains("every 2nd draw shown"));
        // 1000 points per chain at most.
        let longest = trace_svg
            .split("<polyline")
            .skip(1)
            .map(|p| p.split("points=\"").nth(1).unwrap().split(' ').count())
            .max()
            .unwrap();
        assert!(longest <= TRACE_POINTS + 1, "{longest}");
        for svg in [
            histogram("a", &[&a]).unwrap(),
            histogram("c", &[&constant]).unwrap(),
            histogram("b", &[&broken]).unwrap(),
        ] {
            // The background and at least one bar.
            assert!(svg.matches("<rect").count() > 1, "{svg}");
        }
        let scatter = pair(("a", &[&a, &a]), ("c", &[&constant, &constant])).unwrap();
        let points = scatter.matches("<circle").count();
        assert!(
            points <= SCATTER_POINTS && points > SCATTER_POINTS / 2,
            "{points}"
        );
        assert!(trace("b", &[&broken]).unwrap().contains("<polyline"));
        let none = vec![0.0; 40];
        let divergent = divergences(&[&none, &[0.0, 1.0, 0.0, 1.0]]).unwrap();
        assert!(divergent.contains("2 in all"), "{divergent}");
        // One line per chain, beside the black axes and ticks.
        let lines = divergent
            .split("<polyline")
            .skip(1)
            .filter(|element| !element.split("/>").next().unwrap().contains("#000000"))
            .count();
        assert_eq!(lines, 2, "{divergent}");
        let accept = acceptance(&[&a]).unwrap();
        assert!(accept.contains("mean of the last 80 draws"));
    }

    #[test]
    fn the_learning_curve_plots_states_when_they_grow_else_iterations() {
        let point = |iteration, states, acceptance| LearningPoint {
            iteration,
            states,
            proposals: 10,
            acceptance,
        };
        let growing = [
            point(110, 100, 0.3),
            point(120, 110, 0.6),
            point(300, 120, 0.7),
        ];
        let fixed = [point(300, 80, 0.5)];
        let other = [point(110, 90, 0.4), point(300, 90, 0.5)];
        assert_eq!(learning_axis(&[&growing]), LearningAxis::States);
        assert_eq!(learning_axis(&[&fixed, &fixed]), LearningAxis::Iteration);
        // Each chain fitted once, to its own number of states.
        assert_eq!(learning_axis(&[&fixed, &other]), LearningAxis::Iteration);
        assert!(
            learning(&[&fixed, &other, &fixed], 200)
                .unwrap()
                .contains("learned from 80 or 90 states")
        );
        let svg = learning(&[&growing, &fixed], 200).unwrap();
        assert!(svg.contains("vs states learned"));
        // Two warmup dots, then one ring per chain for sampling.
        assert_eq!(svg.matches("<circle").count(), 4, "{svg}");
        let once = learning(&[&fixed], 200).unwrap();
        assert!(once.contains("learned from 80 states"));
    }
}
