//! The look every plot of shmc shares (SBC's rank histograms, the run report's figures, the
//! benchmarks' figures): chain colours, axis spans, lines, SVG
//! text drawn by plotters' SVG backend alone. There is no font library: plotters only estimates
//! the width of text and leaves its rendering to the viewer's sans-serif font, so captions are
//! kept short enough to fit whatever the font.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// What drawing returns: plotters' errors, whatever their backend.
pub type Drawn = std::result::Result<(), Box<dyn std::error::Error>>;

/// A canvas: the SVG backend's drawing area.
pub type Canvas<'b> = DrawingArea<SVGBackend<'b>, Shift>;

/// A chart with numbers on both axes.
pub type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Bars and single-series marks.
pub const BAR: RGBColor = RGBColor(70, 110, 170);

/// Reference bands (what a correct sampler's marks fall in).
pub const BAND: RGBColor = RGBColor(215, 215, 215);

/// The caption above a chart.
pub const CAPTION: (&str, u32) = ("sans-serif", 18);

/// Draws `draw` on a white canvas of `size` pixels and returns the SVG text.
pub fn svg(
    size: (u32, u32),
    draw: impl FnOnce(&Canvas<'_>) -> Drawn,
) -> std::result::Result<String, Box<dyn std::error::Error>> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root)?;
        root.present()?;
    }
    Ok(text)
}

/// A chart over `x` × `y` on `area` under `caption`, with room for tick labels and the axes'
/// descriptions.
pub fn chart<'a, 'b>(
    area: &'a Canvas<'b>,
    caption: &str,
    x: Range<f64>,
    y: Range<f64>,
) -> std::result::Result<Chart<'a, 'b>, Box<dyn std::error::Error>> {
    Ok(ChartBuilder::on(area)
        .caption(caption, CAPTION)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(x, y)?)
}

/// Colours of chains 1, 2, … (then again from the first).
const CHAINS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// The colour of the chain at `index` (0-based), as `#rrggbb` for the page's legend too.
pub fn chain_colour(index: usize) -> RGBColor {
    CHAINS[index % CHAINS.len()]
}

/// [`chain_colour`] as CSS.
pub fn chain_css(index: usize) -> String {
    let RGBColor(r, g, b) = chain_colour(index);
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// The range of the finite values of `series`, widened when they are all equal (or absent) so
/// that the axis has a length.
pub fn span<'a>(series: impl IntoIterator<Item = &'a [f64]>) -> Range<f64> {
    let (lo, hi) = series
        .into_iter()
        .flatten()
        .filter(|x| x.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    if lo > hi {
        return -1.0..1.0;
    }
    let pad = if hi > lo {
        0.04 * (hi - lo)
    } else {
        0.5 * lo.abs().max(1.0)
    };
    lo - pad..hi + pad
}

/// A line through `points` (plotters' `PathElement`: its line series is a feature left out).
pub fn line<S: Into<ShapeStyle>>(
    points: Vec<(f64, f64)>,
    style: S,
) -> Option<PathElement<(f64, f64)>> {
    (!points.is_empty()).then(|| PathElement::new(points, style))
}
