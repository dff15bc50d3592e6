//! Convergence warnings: a run that cannot converge in its budget says so after its summary
//! (R̂, bulk and tail ESS, divergences, tree depth), one `warning:` line per failed check, and
//! `shmc summary` of its files prints the same lines; a converged run prints none.

mod binary;
use binary::{shmc, stderr, text};

use std::path::Path;

/// `shmc sample` of `model` into `out` with `args`, its stdout; it must succeed.
fn sample(out: &Path, model: &str, args: &[&str]) -> String {
    let mut all = vec![
        "sample",
        "--model",
        model,
        "--output",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let run = shmc(&all);
    assert!(run.status.success(), "{all:?}: {}", stderr(&run));
    text(&run.stdout)
}

fn warnings(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect()
}

/// What `shmc summary DIR` warns.
fn summary_warnings(dir: &Path) -> Vec<String> {
    let run = shmc(&["summary", dir.to_str().unwrap()]);
    assert!(run.status.success(), "{}", stderr(&run));
    warnings(&text(&run.stdout))
        .into_iter()
        .map(String::from)
        .collect()
}

#[test]
fn a_run_too_short_to_converge_warns_and_a_converged_one_does_not() {
    let dir = binary::temp_dir("warnings", "short");
    // Ten warmup iterations leave the step size and metric far from adapted: 2 chains of 60
    // draws of exact HMC on the banana have neither mixed nor made 200 effective draws.
    let short = sample(
        &dir,
        "banana",
        &[
            "--method", "hmc", "--chains", "2", "--warmup", "10", "--draws", "60", "--seed", "1",
        ],
    );
    let lines = warnings(&short);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("warning: R_hat above 1.01 for ")),
        "{short}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("warning: bulk ESS below 200 (100 per chain) for ")),
        "{short}"
    );
    assert_eq!(
        summary_warnings(&dir),
        lines,
        "shmc summary of the same files"
    );

    let dir = binary::temp_dir("warnings", "converged");
    let converged = sample(
        &dir,
        "gaussian-conjugate",
        &["--method", "nuts", "--chains", "4", "--seed", "1"],
    );
    assert!(warnings(&converged).is_empty(), "{converged}");
    assert!(summary_warnings(&dir).is_empty());
}

#[test]
fn divergences_and_the_depth_limit_are_counted_and_named() {
    let dir = binary::temp_dir("warnings", "trees");
    // A fixed step size far too large for the banana's curved ridge diverges; a depth limit of
    // 2 is hit by most NUTS trees on it.
    let big_steps = sample(
        &dir.join("big"),
        "banana",
        &[
            "--method",
            "hmc",
            "--chains",
            "2",
            "--warmup",
            "0",
            "--draws",
            "200",
            "--step-size",
            "0.5",
            "--seed",
            "2",
        ],
    );
    assert!(
        warnings(&big_steps)
            .iter()
            .any(|l| l.contains("kept transitions diverged")),
        "{big_steps}"
    );
    let shallow = sample(
        &dir.join("shallow"),
        "banana",
        &[
            "--method",
            "nuts",
            "--chains",
            "2",
            "--max-depth",
            "2",
            "--seed",
            "2",
        ],
    );
    assert!(
        warnings(&shallow)
            .iter()
            .any(|l| l.contains("kept transitions stopped at the tree depth limit 2")),
        "{shallow}"
    );
    assert_eq!(summary_warnings(&dir.join("shallow")), warnings(&shallow));
}
