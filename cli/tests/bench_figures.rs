//! `shmc bench --plots DIR`'s figures, at the library level on small synthetic inputs (the quick
//! bench with its figures takes over a minute on a 2-core machine): every SVG exists, has the
//! marks its series need and a title naming its figure; Fig. 8's reference is never the plotted
//! run's own draws.

mod binary;

use std::path::{Path, PathBuf};

use shmc::models::logistic::LogisticRegression;
use shmc::sampler::SAMPLER_COLUMNS;
use shmc_cli::experiments::figures::{
    ChainTrace, DimensionPoint, Traces, acceptance_curve, acceptance_vs_dimension, burn_in_states,
    marginals, relative_error_of_mean, rem_curves,
};

fn temp_dir(name: &str) -> PathBuf {
    let dir = binary::temp_dir("figures", name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A chain of `n` draws of `dim` parameters, draw `i` of parameter `p` at `f(p, i)`, made at
/// `0.1 (i + 1)` seconds.
fn chain(dim: usize, n: usize, f: impl Fn(usize, usize) -> f64) -> ChainTrace {
    ChainTrace {
        draws: (0..dim)
            .map(|p| (0..n).map(|i| f(p, i)).collect())
            .collect(),
        seconds: (0..n).map(|i| 0.1 * (i + 1) as f64).collect(),
    }
}

fn traces(key: &str, method: &str, chains: Vec<ChainTrace>) -> Traces {
    Traces {
        key: key.into(),
        method: method.into(),
        chains,
    }
}

/// A deterministic wiggle in (−1, 1).
fn wiggle(p: usize, i: usize) -> f64 {
    ((i * 7919 + p * 104_729) % 1000) as f64 / 500.0 - 1.0
}

fn read(dir: &Path, name: &str) -> String {
    let svg = std::fs::read_to_string(dir.join(name)).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    svg
}

/// Lines drawn in a series colour (the axes are black polylines).
fn lines_in(svg: &str, colour: &str) -> usize {
    svg.matches(&format!(
        "<polyline fill=\"none\" opacity=\"1\" stroke=\"{colour}\""
    ))
    .count()
}

const BLUE: &str = "#1F77B4";
const ORANGE: &str = "#FF7F0E";
const GREEN: &str = "#2CA02C";
const RED: &str = "#D62728";

#[test]
fn fig6_overlays_both_methods_on_each_of_the_first_four_parameters() {
    let dir = temp_dir("fig6");
    let names: Vec<String> = (1..=6).map(|i| format!("beta.{i}")).collect();
    let hmc = traces("hmc", "HMC", vec![chain(6, 300, wiggle)]);
    let rns = traces(
        "rns",
        "RNS-HMC",
        vec![chain(6, 200, |p, i| wiggle(p, i) + 0.2)],
    );
    marginals(&dir, &names, &hmc, &rns).unwrap();
    let svg = read(&dir, "fig6-marginals.svg");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        svg.contains("Fig. 6: marginals, HMC (blue, 300 draws) vs RNS-HMC (orange, 200 draws)"),
        "{svg}"
    );
    assert_eq!(lines_in(&svg, BLUE), 4, "one HMC outline per panel");
    assert_eq!(lines_in(&svg, ORANGE), 4, "one RNS-HMC outline per panel");
    assert!(svg.contains("beta.4") && !svg.contains("beta.5"));
}

#[test]
fn fig8_takes_nuts_chains_2_to_4_as_the_reference_and_plots_chain_1() {
    let dir = temp_dir("fig8-nuts");
    // NUTS's chain 1 sits at 3 where chains 2–4 sit at 1: against its own draws its REM
    // would be 0, against the others' it is 2.
    let nuts_chains = (0..4)
        .map(|c| chain(3, 50, move |_, _| if c == 0 { 3.0 } else { 1.0 }))
        .collect();
    let all = [
        traces("hmc", "HMC", vec![chain(3, 100, |_, _| 1.5)]),
        traces("rns", "RNS-HMC", vec![chain(3, 100, |_, _| 1.0)]),
        traces("arns", "ARNS-HMC", vec![chain(3, 80, |_, _| 1.0)]),
        traces("nuts", "NUTS (nuts-rs, 4 chains)", nuts_chains),
    ];
    let (curves, note) = rem_curves(&all).unwrap().unwrap();
    assert_eq!(
        note,
        "reference mean: NUTS chains 2-4 pooled; NUTS curve: its chain 1"
    );
    let labels: Vec<&str> = curves.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["HMC", "RNS-HMC", "ARNS-HMC", "NUTS chain 1"]);
    let last = |k: usize| curves[k].points.last().copied().unwrap();
    assert!((last(0).1 - 0.5).abs() < 1e-12, "{:?}", last(0));
    assert!(last(1).1.abs() < 1e-12);
    assert!((last(3).1 - 2.0).abs() < 1e-12, "{:?}", last(3));
    // The x-axis is each draw's own time stamp.
    assert!((last(0).0 - 10.0).abs() < 1e-9 && (last(3).0 - 5.0).abs() < 1e-9);
    relative_error_of_mean(&dir, &curves, &note).unwrap();
    let svg = read(&dir, "fig8-rem-vs-time.svg");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(svg.contains("Fig. 8: relative error of the mean vs elapsed time"));
    assert!(svg.contains("NUTS chains 2-4 pooled"));
    for colour in [BLUE, ORANGE, GREEN, RED] {
        assert_eq!(lines_in(&svg, colour), 1, "{colour}");
    }
}

#[test]
fn fig8_without_nuts_measures_each_row_against_the_others() {
    let all = [
        traces("hmc", "HMC", vec![chain(2, 10, |_, _| 1.0)]),
        traces("rns", "RNS-HMC", vec![chain(2, 10, |_, _| 2.0)]),
    ];
    let (curves, note) = rem_curves(&all).unwrap().unwrap();
    assert!(note.contains("other rows"), "{note}");
    assert_eq!(curves.len(), 2);
    // |1 − 2| / |2| and |2 − 1| / |1|: neither is 0, which its own draws would give.
    assert!((curves[0].points.last().unwrap().1 - 0.5).abs() < 1e-12);
    assert!((curves[1].points.last().unwrap().1 - 1.0).abs() < 1e-12);
    // One row alone has nothing to be measured against.
    assert!(rem_curves(&all[..1]).unwrap().is_none());
    // A row that made the very same draws as another is no reference for it.
    let copies = [
        traces("rns", "RNS-HMC", vec![chain(2, 10, |_, _| 2.0)]),
        traces("arns", "ARNS-HMC", vec![chain(2, 10, |_, _| 2.0)]),
    ];
    assert!(rem_curves(&copies).unwrap().is_none());
    let three = [all[0].clone(), copies[0].clone(), copies[1].clone()];
    let (curves, _) = rem_curves(&three).unwrap().unwrap();
    // HMC against the two copies pooled (|1 − 2| / 2); each copy against HMC alone (1).
    let ends: Vec<f64> = curves.iter().map(|c| c.points.last().unwrap().1).collect();
    assert_eq!(ends, [0.5, 1.0, 1.0]);
}

#[test]
fn fig8_thins_long_runs_to_a_few_hundred_points() {
    let all = [
        traces("hmc", "HMC", vec![chain(2, 5000, wiggle)]),
        traces(
            "arns",
            "ARNS-HMC",
            vec![chain(2, 5000, |p, i| wiggle(p, i) + 3.0)],
        ),
    ];
    let (curves, _) = rem_curves(&all).unwrap().unwrap();
    let points = &curves[0].points;
    assert!(points.len() <= 401, "{}", points.len());
    // The last point is the whole run's mean, at the last draw's time.
    assert!((points.last().unwrap().0 - 500.0).abs() < 1e-9);
}

#[test]
fn acceptance_figures_draw_one_line_and_a_dot_per_point() {
    let dir = temp_dir("fig5");
    let points = vec![(100.0, 0.1), (400.0, 0.4), (1600.0, 0.85)];
    acceptance_curve(
        &dir,
        "fig5.svg",
        "Fig. 5: RNS-HMC acceptance vs training states",
        "training states",
        &[("RNS-HMC", points.clone())],
    )
    .unwrap();
    let svg = read(&dir, "fig5.svg");
    std::fs::remove_dir_all(&dir).unwrap();
    // One series: the title is the caller's, with no colour legend.
    assert!(svg.contains("Fig. 5: RNS-HMC acceptance vs training states\n"));
    assert_eq!(lines_in(&svg, BLUE), 1);
    assert_eq!(svg.matches("<circle").count(), points.len());
}

#[test]
fn fig4_by_dimension_draws_rns_hmc_and_hmc_each_as_a_line_through_its_dots() {
    let dir = temp_dir("fig4-dimension");
    let point = |dim: usize, rns: f64| DimensionPoint {
        dim,
        step_size: 0.05,
        training_states: 1500,
        hmc: 0.7,
        rns,
    };
    let points = [
        point(10, 0.9),
        point(30, 0.8),
        point(50, 0.6),
        point(70, 0.2),
    ];
    acceptance_vs_dimension(&dir, 2000, 1000, &points).unwrap();
    let svg = read(&dir, "fig4-acceptance-vs-dimension.svg");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        svg.contains(
            "Fig. 4: acceptance vs dimension (2000 hidden units): RNS-HMC (blue), HMC (orange)"
        ),
        "{svg}"
    );
    assert_eq!(lines_in(&svg, BLUE), 1, "one RNS-HMC line");
    assert_eq!(lines_in(&svg, ORANGE), 1, "one HMC line");
    let dots = |colour: &str| {
        svg.split("<circle")
            .skip(1)
            .filter(|c| {
                c.split('>')
                    .next()
                    .unwrap()
                    .contains(&format!("fill=\"{colour}\""))
            })
            .count()
    };
    assert_eq!(dots(BLUE), points.len());
    assert_eq!(dots(ORANGE), points.len());
    assert!(svg.contains("dimension d of a simulated logistic regression; step size for HMC"));
    assert!(svg.contains("mean exact acceptance probability"));
}

#[test]
fn burn_in_states_are_the_accepted_ones_after_train_after() {
    let model = LogisticRegression::simulate(200, 3, 1).unwrap();
    let start = [0.0, 0.0, 0.0];
    let row = |q: [f64; 3]| {
        let mut r = vec![0.0; SAMPLER_COLUMNS.len()];
        r.extend(q);
        r
    };
    let warmup = [
        row([0.1, 0.0, 0.0]),
        row([0.2, 0.0, 0.0]),
        row([0.2, 0.0, 0.0]), // rejected: not collected
        row([0.3, 0.1, 0.0]),
        row([0.4, 0.1, 0.0]),
    ];
    let set = burn_in_states(&model, &warmup, &start, 1);
    let positions: Vec<&[f64]> = (0..set.len()).map(|i| set.position(i)).collect();
    assert_eq!(
        positions,
        [&[0.2, 0.0, 0.0][..], &[0.3, 0.1, 0.0], &[0.4, 0.1, 0.0]]
    );
    assert!(set.has_all_gradients());
    use shmc::core::Potential;
    assert_eq!(set.potential(0), model.value(&[0.2, 0.0, 0.0]));
}
