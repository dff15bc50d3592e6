//! `shmc sample --method nuts` as a user runs it: it recovers a correlated Gaussian's moments,
//! fills CmdStan's sampler columns truthfully, writes files that `shmc summary` and ArviZ read,
//! and refuses the settings NUTS cannot honour.
//!
//! The ArviZ check needs python3 with arviz (`.ci/run` installs it from
//! `cli/tests/arviz/requirements.txt`): without it the test says so and passes, except under
//! `CI=true`, where it fails.

#[path = "../../host/tests/common/mod.rs"]
mod common;

mod binary;
use binary::{shmc, stderr};

use std::path::{Path, PathBuf};
use std::process::Command;

use common::assert_mean_within_4_mcse;
use shmc::output::{StanCsv, read_stan_csv};

/// The Gaussian's dimension, and its marginal variance: `0.01 + (1 − 0.01)/d` (eigenvalue 1
/// along `(1, …, 1)`, 0.01 across; see `shmc models`).
const DIM: usize = 10;
const VARIANCE: f64 = 0.01 + 0.99 / DIM as f64;

fn temp_dir(name: &str) -> PathBuf {
    binary::temp_dir("nuts", name)
}

/// Runs NUTS on the 10-D correlated Gaussian into `dir` with `extra` options; returns its files.
fn sample_gaussian(dir: &Path, extra: &[&str]) -> Vec<PathBuf> {
    let mut args = vec![
        "sample",
        "--model",
        "gaussian-32",
        "--d",
        "10",
        "--method",
        "nuts",
        "--output",
        dir.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let out = shmc(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    (1..=4)
        .map(|c| dir.join(format!("gaussian-32-{c}.csv")))
        .collect()
}

/// Each chain's draws of `f(column)` for the named column.
fn series(csvs: &[StanCsv], name: &str, f: impl Fn(f64) -> f64) -> Vec<Vec<f64>> {
    csvs.iter()
        .map(|c| c.column(name).unwrap().iter().map(|&x| f(x)).collect())
        .collect()
}

#[test]
fn nuts_recovers_a_correlated_gaussian_and_shmc_summary_reads_its_files() {
    let dir = temp_dir("gaussian");
    let files = sample_gaussian(
        &dir,
        &["--draws", "5000", "--warmup", "1000", "--seed", "5"],
    );
    let csvs: Vec<StanCsv> = files.iter().map(|f| read_stan_csv(f).unwrap()).collect();
    for q in (1..=DIM).map(|i| format!("q.{i}")) {
        assert_mean_within_4_mcse(&format!("E[{q}]"), &series(&csvs, &q, |x| x), 0.0);
        assert_mean_within_4_mcse(
            &format!("E[{q}^2]"),
            &series(&csvs, &q, |x| x * x),
            VARIANCE,
        );
    }

    for (file, csv) in files.iter().zip(&csvs) {
        let text = std::fs::read_to_string(file).unwrap();
        for line in [
            "#         engine = nuts\n",
            "#             max_depth = 10\n",
        ] {
            assert!(text.contains(line), "{line:?} in {}", file.display());
        }
        assert!(text.contains("#   shmc_method = nuts\n") && !text.contains("jitter_steps"));
        let step_size: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("# Step size = "))
            .expect("an adaptation block")
            .parse()
            .unwrap();
        let column = |name: &str| csv.column(name).unwrap();
        for i in 0..csv.columns[0].len() {
            let (depth, steps) = (column("treedepth__")[i], column("n_leapfrog__")[i]);
            // Stan's count: `depth` doublings make 2^(depth-1) to 2^depth - 1 steps.
            assert!(
                (1.0..=10.0).contains(&depth)
                    && steps >= 2f64.powf(depth - 1.0)
                    && steps <= 2f64.powf(depth) - 1.0,
                "draw {i}: tree depth {depth} with {steps} leapfrog steps"
            );
            assert!((0.0..=1.0).contains(&column("accept_stat__")[i]));
            assert!([0.0, 1.0].contains(&column("divergent__")[i]));
            assert_eq!(column("stepsize__")[i], step_size, "the adapted step size");
            // energy__ = U + K with K >= 0, and lp__ = -U.
            assert!(column("energy__")[i] >= -column("lp__")[i]);
        }
        let deepest = column("treedepth__").iter().cloned().fold(0.0, f64::max);
        assert!(deepest >= 2.0, "NUTS trees grow past one doubling");
    }

    let mut args = vec!["summary"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let summary = shmc(&args);
    assert!(summary.status.success(), "{}", stderr(&summary));
    let text = String::from_utf8_lossy(&summary.stdout);
    assert!(
        text.contains("q.10") && text.contains("4 chains x 5000 draws"),
        "{text}"
    );
}

/// Whether python3 with arviz is here. Without it the test prints what is missing and is
/// skipped, unless `CI=true`: CI installs it, so there its absence fails.
fn python_arviz() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import arviz"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let what =
            "python3 with arviz (python3 -m pip install -r cli/tests/arviz/requirements.txt)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{what} is missing, and CI needs it"
        );
        eprintln!("skipped: {what} is missing");
    }
    found
}

/// `arviz.from_cmdstan` reads the files, warmup included, with CmdStan's sampler columns mapped
/// to its names, and its posterior means are the files' to the last digit.
#[test]
fn arviz_reads_the_nuts_files_warmup_included() {
    if !python_arviz() {
        return;
    }
    let dir = temp_dir("arviz");
    let files = sample_gaussian(
        &dir,
        &[
            "--draws",
            "300",
            "--warmup",
            "200",
            "--seed",
            "6",
            "--save-warmup",
        ],
    );
    let script = r#"
import json, sys, warnings
warnings.filterwarnings("ignore")
import arviz as az
idata = az.from_cmdstan(sys.argv[1:], save_warmup=True)
stats = idata.sample_stats
print(json.dumps({
    "posterior": list(idata.posterior["q"].shape),
    "warmup": list(idata.warmup_posterior["q"].shape),
    "means": idata.posterior["q"].mean(dim=["chain", "draw"]).values.tolist(),
    "max_tree_depth": int(stats["tree_depth"].max()),
    "steps": int(stats["n_steps"].sum()),
    "divergent": int(stats["diverging"].sum()),
    "bfmi": [float(b) for b in az.bfmi(idata)],
}))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(&files)
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found["posterior"], serde_json::json!([4, 300, DIM]));
    assert_eq!(found["warmup"], serde_json::json!([4, 200, DIM]));
    let csvs: Vec<StanCsv> = files.iter().map(|f| read_stan_csv(f).unwrap()).collect();
    for (i, mean) in found["means"].as_array().unwrap().iter().enumerate() {
        let draws = series(&csvs, &format!("q.{}", i + 1), |x| x).concat();
        let ours = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean.as_f64().unwrap() - ours).abs() < 1e-12, "q.{}", i + 1);
    }
    let total = |name: &str| -> f64 { series(&csvs, name, |x| x).concat().iter().sum() };
    assert_eq!(found["steps"].as_f64().unwrap(), total("n_leapfrog__"));
    assert_eq!(found["divergent"].as_f64().unwrap(), total("divergent__"));
    let deepest = series(&csvs, "treedepth__", |x| x).concat();
    assert_eq!(
        found["max_tree_depth"].as_f64().unwrap(),
        deepest.iter().cloned().fold(0.0, f64::max)
    );
    for bfmi in found["bfmi"].as_array().unwrap() {
        assert!(bfmi.as_f64().unwrap() > 0.3, "E-BFMI from energy__: {bfmi}");
    }
}

#[test]
fn nuts_refuses_the_settings_it_cannot_honour_in_one_line() {
    for (extra, needle) in [
        (
            &["--step-size", "0.1"][..],
            "--step-size does not apply to nuts",
        ),
        (
            &["--no-adapt-mass"][..],
            "nuts adapts its diagonal mass matrix",
        ),
        (
            &["--warmup", "0"][..],
            "--warmup must be at least 1 for nuts",
        ),
        (&["--max-depth", "0"][..], "--max-depth must be at least 1"),
    ] {
        let dir = temp_dir("refused");
        let mut args = vec!["sample", "--model", "banana", "--method", "nuts", "--quiet"];
        args.extend(["--output", dir.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let out = shmc(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(needle) && err.lines().count() == 1,
            "{extra:?}: {err}"
        );
        assert!(!dir.exists(), "{extra:?} left {}", dir.display());
    }
}
