//! `shmc sample --method auto`: on a cheap model it runs NUTS with the low-rank metric, on an
//! expensive one the Laplace-trained surrogate plan; either way it says so, records it in the
//! CSV headers, makes the draws of the explicit run it names, refuses the options that would set
//! a plan, and a stopped run resumes with its first run's choice.

mod binary;
use binary::{shmc, stderr, temp_dir, text};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn dir(name: &str) -> std::path::PathBuf {
    temp_dir("auto", name)
}

/// The rows and adaptation lines of chain `k`'s file of `model` in `dir`: every line but the
/// settings comments before the column header and those that hold a time.
fn draws(dir: &Path, model: &str, k: usize) -> Vec<String> {
    let path = dir.join(format!("{model}-{k}.csv"));
    let file = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    file.lines()
        .skip_while(|l| l.starts_with('#'))
        .filter(|l| {
            !["seconds", "Elapsed", "surrogate:", "precompute:"]
                .iter()
                .any(|timed| l.contains(timed))
        })
        .map(str::to_string)
        .collect()
}

/// The first line where `a` and `b` differ, named in the panic (not two whole files).
fn assert_same_lines(a: &[String], b: &[String], what: &str) {
    if let Some(i) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
        panic!("{what}: line {i} differs:\n{}\n{}", a[i], b[i]);
    }
    assert_eq!(a.len(), b.len(), "{what}: lines");
}

/// Runs `sample` with `common` and then `plan` into `dir`; its stdout.
fn sample(common: &[&str], plan: &[&str], dir: &Path) -> String {
    let mut args = vec!["sample"];
    args.extend(common);
    args.extend(plan);
    args.extend(["--quiet", "--output", dir.to_str().unwrap()]);
    let out = shmc(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    text(&out.stdout)
}

/// Auto's run and the explicit run it names make the same draws, chain by chain.
fn assert_same_draws_as(common: &[&str], model: &str, explicit: &[&str], expected_plan: &str) {
    let (auto_dir, explicit_dir) = (dir(&format!("{model}-auto")), dir(&format!("{model}-x")));
    let stdout = sample(common, &["--method", "auto"], &auto_dir);
    assert!(
        stdout.contains(&format!("auto: {expected_plan} (")),
        "{stdout}"
    );
    let named = format!("auto: --method {} makes the same draws", explicit.join(" "));
    assert!(stdout.contains(&named), "{stdout}");
    let header = std::fs::read_to_string(auto_dir.join(format!("{model}-1.csv"))).unwrap();
    assert!(
        header.contains(&format!("#   shmc_auto = {expected_plan} (")),
        "{header}"
    );
    let mut plan = vec!["--method"];
    plan.extend(explicit);
    sample(common, &plan, &explicit_dir);
    for k in 1..=2 {
        let (a, b) = (draws(&auto_dir, model, k), draws(&explicit_dir, model, k));
        assert!(a.len() > 100, "chain {k}: {} lines", a.len());
        assert_same_lines(&a, &b, &format!("chain {k} of auto and the explicit run"));
    }
    let _ = std::fs::remove_dir_all(&auto_dir);
    let _ = std::fs::remove_dir_all(&explicit_dir);
}

#[test]
fn auto_runs_nuts_with_the_low_rank_metric_on_a_cheap_model() {
    // The banana's gradient is a few flops: thousands of times cheaper than a network's.
    let common = [
        "--model", "banana", "--chains", "2", "--warmup", "300", "--draws", "300", "--seed", "5",
    ];
    assert_same_draws_as(
        &common,
        "banana",
        &["nuts", "--metric", "low-rank"],
        "nuts-low-rank",
    );
}

#[test]
fn auto_runs_the_laplace_trained_surrogate_plan_on_an_expensive_model() {
    // 20 000 rows of 20 features: a gradient of about a million flops against the 300-unit
    // network's 25 thousand.
    let common = [
        "--model", "logistic", "--n", "20000", "--d", "20", "--chains", "2", "--warmup", "200",
        "--draws", "200", "--seed", "5",
    ];
    let explicit = [
        "rns-hmc",
        "--train-from",
        "laplace",
        "--surrogate-steps-factor",
        "nuts",
    ];
    assert_same_draws_as(&common, "logistic", &explicit, "rns-hmc-laplace");
}

#[test]
fn auto_refuses_the_options_that_would_set_its_plan() {
    let out_dir = dir("refused");
    let output = out_dir.to_str().unwrap();
    for (extra, flag) in [
        (&["--metric", "laplace"][..], "--metric"),
        (&["--no-adapt-mass"], "--no-adapt-mass"),
        (&["--steps", "5"], "--steps"),
        (&["--step-size", "0.1"], "--step-size"),
        (&["--hidden", "50"], "--hidden"),
        (&["--train-from", "laplace"], "--train-from"),
    ] {
        let mut args = vec!["sample", "--model", "banana", "--method", "auto"];
        args.extend(extra);
        args.extend(["--output", output]);
        let out = shmc(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("error: {flag}: auto chooses its own plan")),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert!(!out_dir.exists(), "{args:?}: a refused run made its folder");
    }
    let out = shmc(&["sbc", "--model", "banana", "--method", "auto"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("sbc checks one kernel"), "{err}");
    // The saved choice belongs to auto alone.
    let out = shmc(&[
        "sample",
        "--model",
        "banana",
        "--method",
        "hmc",
        "--auto-chose",
        "nuts-low-rank (x)",
        "--output",
        output,
    ]);
    assert!(stderr(&out).contains("--auto-chose is --method auto's own"));
}

/// Stopped by SIGTERM after every chain's first checkpoint, an auto run resumes with the plan
/// its first run chose (the saved line, not a new timing) to the rows of an uninterrupted run
/// of the explicit method it named. (The surrogate plan here, whose draws cost an exact value
/// each, 0.1 ms: seconds of sampling, so checkpoints; either plan would do.)
#[test]
fn a_stopped_auto_run_resumes_with_its_first_choice() {
    let (stopped, whole) = (dir("stopped"), dir("whole"));
    let common = [
        "--model", "logistic", "--n", "20000", "--d", "20", "--chains", "2", "--warmup", "200",
        "--draws", "40000", "--seed", "9",
    ];
    let mut args = vec!["sample"];
    args.extend(common);
    args.extend(["--method", "auto", "--quiet", "--output"]);
    args.push(stopped.to_str().unwrap());
    let child = Command::new(env!("CARGO_BIN_EXE_shmc"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A chain's checkpoint counts its kept draws: the stop must come after one that counts some.
    let checkpointed = |k: usize| {
        let path = stopped.join(format!("logistic-{k}.checkpoint.json"));
        std::fs::read_to_string(path).is_ok_and(|t| !t.contains("\"kept\":0,"))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(checkpointed(1) && checkpointed(2)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    let resumed = shmc(&["sample", "--resume", stopped.to_str().unwrap()]);
    let said = text(&resumed.stdout);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert!(said.contains("chain 1: resumed after draw"), "{said}");
    let first = text(&out.stdout);
    let auto_lines = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with("auto: "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(auto_lines(&first).len(), 2, "{first}");
    assert_eq!(
        auto_lines(&said),
        auto_lines(&first),
        "the resumed run timed the model again"
    );
    let explicit = auto_lines(&first)[1]
        .strip_prefix("auto: --method ")
        .and_then(|l| l.strip_suffix(" makes the same draws"))
        .unwrap()
        .to_string();
    let mut plan = vec!["--method"];
    plan.extend(explicit.split(' '));
    sample(&common, &plan, &whole);
    for k in 1..=2 {
        let (a, b) = (draws(&stopped, "logistic", k), draws(&whole, "logistic", k));
        assert_same_lines(&a, &b, &format!("chain {k} resumed and uninterrupted"));
    }
    let _ = std::fs::remove_dir_all(&stopped);
    let _ = std::fs::remove_dir_all(&whole);
}
