//! `shmc bench surrogates`' Figure 3 (the 32-D Gaussian, one shared step size, the full GP,
//! FITC and 1000-unit networks over training sizes): its JSON rows and SVG, and each bad
//! figure name or training-size list refused in one line.

mod binary;
use binary::{shmc, stderr, temp_dir, text};

/// The methods Figure 3 compares, as its rows name them.
const METHODS: [&str; 4] = ["gp", "fitc-1000", "rns-softplus-1000", "rns-rbf-1000"];

/// `bench surrogates --quick` (both figures, Figure 3 at two of its quick sizes): Figure 1's
/// 12 rows and Figure 3's 2 sizes × 4 surrogates × 3 runs in one JSON array, each of Figure
/// 3's with the lr-sim bench's fields; one step size shared by every row; the four surrogates
/// of a run fitted on the same training states; the table and an SVG naming every surrogate.
#[test]
fn bench_surrogates_quick_writes_figure_3s_rows_and_svg() {
    let dir = temp_dir("figure3", "quick");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("rows.json");
    let plots = dir.join("plots");
    let out = shmc(&[
        "bench",
        "surrogates",
        "--quick",
        "--training-sizes",
        "50,100",
        "--json",
        json.to_str().unwrap(),
        "--plots",
        plots.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(text(&out.stdout).contains("Figure 3: 32-D Gaussian"));
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let of = |problem: &'static str| rows.iter().filter(move |r| r["problem"] == problem);
    assert_eq!(of("fig1-x2").count(), 12);
    let fig3: Vec<_> = of("fig3-gaussian-32").collect();
    assert_eq!(fig3.len(), 24, "{fig3:?}");
    for field in [
        "method",
        "observations",
        "run",
        "training_states",
        "ess_mean",
        "mean_ess_per_second",
        "acceptance",
        "seconds_per_iteration",
        "training_seconds",
        "step_size",
    ] {
        assert!(
            fig3.iter().all(|r| !r[field].is_null()),
            "{field}: {fig3:?}"
        );
    }
    let step = fig3[0]["step_size"].as_f64().unwrap();
    assert!(fig3.iter().all(|r| r["step_size"].as_f64() == Some(step)));
    for n in [50, 100] {
        for run in 0..3 {
            let same: Vec<_> = fig3
                .iter()
                .filter(|r| r["observations"] == n && r["run"] == run)
                .collect();
            let methods: Vec<&str> = same.iter().map(|r| r["method"].as_str().unwrap()).collect();
            assert_eq!(methods, METHODS, "n = {n}, run {run}");
            let states = &same[0]["training_states"];
            assert!(states.as_u64().unwrap() > 0);
            assert!(
                same.iter().all(|r| &r["training_states"] == states),
                "{same:?}"
            );
        }
    }
    let svg = std::fs::read_to_string(plots.join("fig3-surrogates.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..50]);
    for method in METHODS {
        assert!(svg.contains(method), "{method} not in the SVG's legend");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_figures_and_training_sizes_are_refused_in_one_line() {
    for (args, needle) in [
        (
            &["surrogates", "--figure", "2"][..],
            "--figure: no figure \"2\"; bench surrogates draws 1, 3 or all",
        ),
        (
            &["surrogates", "--training-sizes", "100,50"][..],
            "--training-sizes must increase: 50 after 100",
        ),
        (
            &["surrogates", "--training-sizes", "100,100"][..],
            "--training-sizes must increase: 100 after 100",
        ),
        (
            &["surrogates", "--training-sizes", "0,10"][..],
            "--training-sizes: entry 1 is 0",
        ),
        (
            &["surrogates", "--figure", "1", "--training-sizes", "10"][..],
            "--training-sizes and --methods are for Figure 3",
        ),
        (
            &["surrogates", "--training-sizes", "10,100000000"][..],
            "a full Gaussian process on 100000000 training states would need",
        ),
        (
            &["surrogates", "--methods", "gp,rns"][..],
            "--methods: Figure 3 has no surrogate \"rns\"",
        ),
        (
            &["lr-sim", "--figure", "3"][..],
            "--figure and --training-sizes are for bench surrogates",
        ),
        (
            &["surrogates", "--with-gp"][..],
            "--with-gp is for bench lr-sim, bank, a9a and pde",
        ),
    ] {
        let mut full = vec!["bench"];
        full.extend(args);
        let out = shmc(&full);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line: {err}"
        );
        assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
        if args.contains(&"10,100000000") {
            assert!(err.contains("lower --training-sizes"), "{err}");
        }
    }
}
