//! `--gp full|fitc` and `--inducing`: rns-hmc with a Gaussian-process surrogate, and each
//! misuse refused in one line naming the option.

mod binary;
use binary::{shmc, stderr, temp_dir};

/// `shmc sample --model banana ARGS --quiet --output DIR` in a folder of its own.
fn sample(name: &str, args: &[&str]) -> std::process::Output {
    let dir = temp_dir("gp", name);
    let mut full = vec!["sample", "--model", "banana", "--quiet", "--seed", "3"];
    full.extend(args);
    full.extend(["--output", dir.to_str().unwrap()]);
    let out = shmc(&full);
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn gp_options_where_they_would_be_ignored_or_cannot_work_are_refused() {
    for (name, args, needle) in [
        (
            "inducing-0",
            &["--method", "rns-hmc", "--gp", "fitc", "--inducing", "0"][..],
            "--inducing must be at least 1",
        ),
        (
            "inducing-alone",
            &["--method", "rns-hmc", "--inducing", "5"][..],
            "--inducing is for --gp fitc",
        ),
        (
            "inducing-full",
            &["--method", "rns-hmc", "--gp", "full", "--inducing", "5"][..],
            "--inducing is for --gp fitc",
        ),
        (
            "vhmc",
            &["--method", "vhmc", "--gp", "full"][..],
            "--gp is for rns-hmc: vhmc trains its own network",
        ),
        (
            "grid",
            &["--method", "grid-hmc", "--gp", "fitc"][..],
            "--gp is for rns-hmc: the grid methods fit a grid",
        ),
        (
            "arns",
            &["--method", "arns-hmc", "--gp", "full"][..],
            "only the network learns online",
        ),
        (
            "memory",
            &[
                "--method",
                "rns-hmc",
                "--gp",
                "full",
                "--warmup",
                "1000",
                "--draws",
                "10",
                "--memory-limit",
                "2000000",
            ][..],
            // Refused before the warmup: up to 1000 − 200 states.
            "a full Gaussian process on up to 800 training states",
        ),
        (
            "mean-alone",
            &["--method", "rns-hmc", "--gp-mean", "quadratic"][..],
            "--gp-mean is for --gp full or fitc",
        ),
        (
            "mean-vhmc",
            &["--method", "vhmc", "--gp-mean", "quadratic"][..],
            "--gp-mean is for rns-hmc --gp: vhmc trains its own network",
        ),
        (
            "gradients-fitc",
            &["--method", "rns-hmc", "--gp", "fitc", "--gp-gradients"][..],
            "--gp-gradients applies to the full Gaussian process only: FITC fits the values alone",
        ),
        (
            "fit-score",
            &["--method", "rns-hmc", "--gp", "full", "--fit", "score"][..],
            "--fit is for the network surrogate; --gp full fits a Gaussian process in its place",
        ),
        (
            "hidden",
            &["--method", "rns-hmc", "--gp", "fitc", "--hidden", "50"][..],
            "--hidden is for the network surrogate; --gp fitc fits a Gaussian process",
        ),
        (
            "gradients-alone",
            &["--method", "rns-hmc", "--gp-gradients"][..],
            "--gp-gradients is for --gp full",
        ),
        (
            "gradients-memory",
            // Up to 480 states: their values fit in 3·480²·8 ≈ 5.5 MB, with their gradients
            // (1440 observations) they need 49.8 MB.
            &[
                "--method",
                "rns-hmc",
                "--gp",
                "full",
                "--gp-gradients",
                "--warmup",
                "600",
                "--draws",
                "10",
                "--memory-limit",
                "20000000",
            ][..],
            "a full Gaussian process on up to 480 training states with their gradients",
        ),
    ] {
        let out = sample(name, args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.starts_with("error: "), "{name}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{name}: one line: {err}");
        assert!(err.contains(needle), "{name}: {needle:?} not in {err}");
        if name.ends_with("memory") {
            assert!(
                err.contains("raise --memory-limit or change --train-after"),
                "{err}"
            );
        }
    }
}

/// Both kinds, and the full GP with a quadratic mean or on gradients too, drive rns-hmc on the banana to a normal
/// end.
#[test]
fn rns_hmc_runs_with_either_gp() {
    for (name, kind) in [
        ("full", &["--gp", "full"][..]),
        ("fitc", &["--gp", "fitc", "--inducing", "40"][..]),
        ("quadratic", &["--gp", "full", "--gp-mean", "quadratic"][..]),
        ("gradients", &["--gp", "full", "--gp-gradients"][..]),
    ] {
        let mut args = vec![
            "--method", "rns-hmc", "--warmup", "400", "--draws", "200", "--chains", "1",
        ];
        args.extend(kind);
        let out = sample(name, &args);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
    }
}

/// `shmc bench surrogates --quick`: Figure 1's twelve rows, and the paper's ordering at the
/// smallest size (the networks' averaged curves closer to `x²/2` over `[−4, 4]` than FITC's,
/// and FITC's than the full GP's).
#[test]
fn bench_surrogates_reproduces_figure_1s_ordering() {
    let dir = temp_dir("gp", "bench");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("fig1.json");
    let out = shmc(&[
        "bench",
        "surrogates",
        "--quick",
        "--figure",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(rows.len(), 12);
    let rmse = |method: &str| {
        rows.iter()
            .find(|r| r["method"] == method && r["observations"] == 10)
            .and_then(|r| r["rmse_mean_curve"].as_f64())
            .unwrap()
    };
    assert!(rmse("rns-softplus-5") < rmse("fitc-5"), "{rows:?}");
    assert!(rmse("rns-rbf-5") < rmse("fitc-5"), "{rows:?}");
    assert!(rmse("fitc-5") < rmse("gp"), "{rows:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
