//! `--surrogate-transitions K|W:S|auto`: K HMC transitions on the surrogate between exact
//! judgements (W in warmup and S after; or S chosen by `auto` at the end of warmup), written in
//! the CSV header (so that a resume with other settings is refused) with `auto`'s choice, and
//! refused in one line where it cannot run.

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
    let form = "--surrogate-transitions takes K, W:S (warmup:sampling) or auto, each k at least 1";
    let cases: [(&[&str], &str); 6] = [
        (&["--surrogate-transitions", "0"], form),
        (&["--surrogate-transitions", "3:0"], form),
        (&["--surrogate-transitions", "x"], form),
        (&["--surrogate-transitions", "auto:3"], form),
        (
            &[
                "--surrogate-transitions",
                "3",
                "--surrogate-steps-factor",
                "nuts",
            ],
            "--surrogate-transitions runs HMC transitions on the surrogate, not NUTS trees",
        ),
        (
            &["--surrogate-transitions", "auto"],
            "--surrogate-transitions auto measures the surrogate's transitions during warmup",
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

/// The lines of a chain's file that the draws depend on: every line but those naming the
/// folder, a time, the surrogate's training or precompute, or the transitions setting (which differ between
/// an `auto` run and its rerun with the chosen `W:S`).
fn draws_of(dir: &std::path::Path) -> Vec<String> {
    let file = std::fs::read_to_string(dir.join("banana-1.csv")).unwrap();
    file.lines()
        .filter(|l| {
            !(l.contains("file = ")
                || l.contains(" seconds")
                || l.contains("surrogate:")
                || l.contains("precompute:")
                || l.contains("urrogate transitions")
                || l.contains("surrogate_transitions"))
        })
        .map(String::from)
        .collect()
}

/// `auto` writes the `W:S` each chain chose (and `shmc summary` shows them); a rerun with
/// chain 1's `W:S` makes chain 1's file again, draw for draw, bit for bit.
#[test]
fn auto_records_its_choice_and_the_choice_reruns_its_draws() {
    let laplace = ["--train-from", "laplace"];
    let mut extra = laplace.to_vec();
    extra.extend(["--surrogate-transitions", "auto"]);
    let (out, dir) = banana("auto", &extra);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let csv = std::fs::read_to_string(dir.join("banana-1.csv")).unwrap();
    let line = csv
        .lines()
        .find_map(|l| l.strip_prefix("# Surrogate transitions = "))
        .unwrap_or_else(|| panic!("no choice recorded: {csv}"));
    let chosen = line.split_whitespace().next().unwrap().to_string();
    assert!(
        chosen.starts_with("1:") && line.contains("(auto: t_U"),
        "{line}"
    );
    let summary = shmc(&["summary", dir.to_str().unwrap()]);
    let shown = text(&summary.stdout);
    assert!(
        shown.contains(&format!("surrogate transitions (auto): {chosen}, 1:")),
        "{shown}"
    );
    let mut extra = laplace.to_vec();
    extra.extend(["--surrogate-transitions", chosen.as_str()]);
    let (out, again) = banana("auto-rerun", &extra);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (a, b) = (draws_of(&dir), draws_of(&again));
    assert!(a.len() > 300, "{} lines", a.len());
    if let Some(i) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) {
        panic!(
            "{chosen}: line {i} differs: {:?} vs {:?}",
            a.get(i),
            b.get(i)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&again);
}
