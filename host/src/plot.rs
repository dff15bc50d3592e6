//! The look every plot of shmc shares (SBC's rank histograms, the run report's figures): SVG
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
