//! The rank histogram of one parameter as an SVG file (plotters, SVG backend only): the binned
//! ranks as bars over the grey band where 99 % of a bin's counts fall under uniformity, with the
//! expected count drawn across each bin. Bars outside the band, or a ∪, ∩ or slope across the
//! bins, show how the sampler is off (Talts et al. 2018, section 4).

use std::path::Path;

use plotters::prelude::*;
use statrs::distribution::{Binomial, DiscreteCDF};

use super::uniformity::{Bins, Uniformity};
use crate::plot::{self, BAND as BAND_COLOUR, BAR, Canvas, Drawn};
use crate::{Error, Result};

/// The band's coverage per bin.
const BAND: f64 = 0.99;

/// Draws the histogram of `test`'s counts (`bins` over `0..=L`, `replications` ranks) of
/// parameter `name` to `path`.
pub fn rank_histogram(
    path: &Path,
    name: &str,
    test: &Uniformity,
    bins: Bins,
    replications: usize,
) -> Result<()> {
    let cannot = |e: &dyn std::fmt::Display| {
        Error::invalid(format!(
            "{}: cannot draw the histogram: {e}",
            path.display()
        ))
    };
    let svg = plot::svg((720, 420), |root| {
        draw(root, name, test, bins, replications)
    })
    .map_err(|e| cannot(&e))?;
    std::fs::write(path, svg).map_err(|e| cannot(&e))
}

fn draw(
    root: &Canvas<'_>,
    name: &str,
    test: &Uniformity,
    bins: Bins,
    replications: usize,
) -> Drawn {
    // Bin b spans the rank values from `start(b)` up to `start(b + 1)`.
    let mut start = 0;
    let spans: Vec<(f64, f64)> = (0..bins.count)
        .map(|b| {
            let span = (start as f64, (start + bins.width(b)) as f64);
            start += bins.width(b);
            span
        })
        .collect();
    let bands = (0..bins.count)
        .map(|b| {
            let binomial = Binomial::new(bins.probability(b), replications as u64)?;
            Ok((
                binomial.inverse_cdf((1.0 - BAND) / 2.0) as f64,
                binomial.inverse_cdf((1.0 + BAND) / 2.0) as f64,
            ))
        })
        .collect::<std::result::Result<Vec<_>, statrs::distribution::BinomialError>>()?;
    let top = test
        .counts
        .iter()
        .map(|&c| c as f64)
        .chain(bands.iter().map(|b| b.1))
        .fold(1.0, f64::max)
        * 1.1;

    let mut chart = plot::chart(
        root,
        &format!(
            "{name}: rank of the truth among {} draws, χ² p = {:.3}",
            bins.max_rank, test.p_value
        ),
        0.0..(bins.max_rank + 1) as f64,
        0.0..top,
    )?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .x_desc("rank  (grey: 99 % of a bin's counts if ranks are uniform; line: expected)")
        .y_desc("replications per bin")
        .draw()?;
    let band = BAND_COLOUR.filled();
    chart.draw_series(
        spans
            .iter()
            .zip(&bands)
            .map(|(&(x0, x1), &(lo, hi))| Rectangle::new([(x0, lo), (x1, hi)], band)),
    )?;
    chart.draw_series(spans.iter().zip(&test.counts).map(|(&(x0, x1), &c)| {
        let inset = 0.08 * (x1 - x0);
        Rectangle::new(
            [(x0 + inset, 0.0), (x1 - inset, c as f64)],
            BAR.mix(0.8).filled(),
        )
    }))?;
    chart.draw_series(spans.iter().enumerate().map(|(b, &(x0, x1))| {
        let expected = replications as f64 * bins.probability(b);
        PathElement::new(vec![(x0, expected), (x1, expected)], BLACK.stroke_width(2))
    }))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sbc::uniformity::chi_squared_test;

    #[test]
    fn writes_an_svg_with_one_bar_per_bin_and_the_p_value() {
        let bins = Bins::new(100, 99).unwrap();
        let ranks: Vec<usize> = (0..100).map(|i| (i * 37) % 100).collect();
        let test = chi_squared_test(&ranks, bins);
        let dir = std::env::temp_dir().join(format!("shmc-sbc-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rank-beta.1.svg");
        rank_histogram(&path, "beta.1", &test, bins, 100).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        assert!(svg.contains("beta.1: rank of the truth among 99 draws, χ² p = 1.000"));
        // A white background, 10 band rectangles and 10 bars.
        assert_eq!(svg.matches("<rect").count(), 1 + 2 * bins.count, "{svg}");
    }

    #[test]
    fn an_unwritable_path_is_one_clear_error() {
        let bins = Bins::new(100, 99).unwrap();
        let test = chi_squared_test(&[0; 100], bins);
        let path = Path::new("/nonexistent-dir/rank.svg");
        let err = rank_histogram(path, "x", &test, bins, 100)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("/nonexistent-dir/rank.svg: cannot draw"),
            "{err}"
        );
    }
}
