//! `--surrogate-transitions K`: K HMC transitions on the surrogate between exact judgements,
//! written in the CSV header (so that a resume with other settings is refused), and refused in
//! one line where it cannot run.

mod binary;
use binary::{shmc, text};

use std::process::Output;

/// A short RNS-HMC run on the banana with `extra` options, into a fresh folder named `name`.
fn banana(name: &str, extra: &[&str]) -> (Output, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("shmc-st-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut args = vec![
        "sample", "--model", "banana", "--method", "rns-hmc", "--hidden", "40", "--chains", "2",
        "--warmup", "300", "--draws", "300", "--seed", "2", "--quiet", "--output",
    ];
    args.push(dir.to_str().unwrap());
    args.extend(extra);
    (shmc(&args), dir)
}

#[test]
fn surrogate_transitions_run_and_are_recorded_in_the_header() {
    let (out, dir) = banana("run", &["--surrogate-transitions", "3"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let csv = std::fs::read_to_string(dir.join("banana-1.csv")).unwrap();
    assert!(csv.contains("surrogate_transitions = 3"), "{csv}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn surrogate_transitions_are_refused_where_they_cannot_run() {
    let cases: [(&[&str], &str); 2] = [
        (
            &["--surrogate-transitions", "0"],
            "--surrogate-transitions must be at least 1",
        ),
        (
            &[
                "--surrogate-transitions",
                "3",
                "--surrogate-steps-factor",
                "nuts",
            ],
            "--surrogate-transitions runs HMC transitions on the surrogate, not NUTS trees",
        ),
    ];
    for (i, (extra, expected)) in cases.into_iter().enumerate() {
        let (out, dir) = banana(&format!("refused-{i}"), extra);
        let err = text(&out.stderr);
        assert!(
            !out.status.success() && err.contains(expected),
            "{extra:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
