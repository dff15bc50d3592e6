//! `shmc sbc` split into parts (`--first-replication N --count K`, one process or HyperQueue
//! task each) and merged back (`--merge`): the merged result is the one-process run's, and parts
//! that are not one run are refused in one line.

mod binary;
use binary::{shmc, stderr, text};

use std::path::Path;

/// The calibration every run here shares: 40 short replications of the conjugate Gaussian.
const RUN: [&str; 15] = [
    "sbc",
    "--model",
    "gaussian-conjugate",
    "--reps",
    "40",
    "--draws",
    "200",
    "--warmup",
    "200",
    "--thin",
    "5",
    "--seed",
    "3",
    "--jobs",
    "1",
];

/// `shmc sbc` with `RUN`, `extra` and `--output out`: its standard output, after a success.
fn sbc(out: &Path, extra: &[&str]) -> String {
    let mut args = RUN.to_vec();
    args.extend(extra);
    args.extend(["--quiet", "--output", out.to_str().unwrap()]);
    let done = shmc(&args);
    assert!(done.status.success(), "{}", stderr(&done));
    text(&done.stdout)
}

/// Text without what two runs of the same replications differ in: times, and the folder named.
fn masked(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with("time:") && !l.contains("written to"))
        .map(str::to_string)
        .collect()
}

/// The ranks file without its column of seconds.
fn ranks(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("ranks.csv")).unwrap();
    text.lines()
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            [&cells[..5], &cells[6..]].concat().join(",")
        })
        .collect()
}

/// Two parts of 20 replications, merged: the report and the ranks (seeds, ESS, divergences,
/// ranks of every replication) of the one process running all 40.
#[test]
fn two_parts_merged_are_the_one_process_calibration() {
    let dir = binary::temp_dir("sbc-parts", "same");
    let whole = sbc(&dir.join("whole"), &[]);
    sbc(
        &dir.join("p1"),
        &["--first-replication", "1", "--count", "20"],
    );
    let part = sbc(
        &dir.join("p2"),
        &["--first-replication", "21", "--count", "20"],
    );
    assert!(
        part.contains("replications 21..40 of 40: 20 replications"),
        "{part}"
    );
    let (p1, p2) = (dir.join("p1"), dir.join("p2"));
    let merged = sbc(
        &dir.join("merged"),
        &["--merge", p2.to_str().unwrap(), p1.to_str().unwrap()],
    );
    assert_eq!(masked(&merged), masked(&whole));
    assert_eq!(ranks(&dir.join("merged")), ranks(&dir.join("whole")));
    assert_eq!(ranks(&p2)[1..], ranks(&dir.join("whole"))[21..]);
}

/// `shmc sbc`'s one `error:` line (exit 1) for `extra` after `RUN`.
fn refusal(extra: &[&str]) -> String {
    let mut args = RUN.to_vec();
    args.extend(extra);
    let done = shmc(&args);
    assert_eq!(done.status.code(), Some(1), "{}", text(&done.stdout));
    let err = stderr(&done);
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

/// A missing part, a part of other settings, a part without a folder to go to, a part outside
/// the replications and a part without a given thinning are refused in one line.
#[test]
fn parts_that_are_not_one_calibration_are_refused_in_one_line() {
    let dir = binary::temp_dir("sbc-parts", "refused");
    let p2 = dir.join("p2");
    sbc(&p2, &["--first-replication", "21", "--count", "20"]);
    let p2 = p2.to_str().unwrap();
    assert_eq!(
        refusal(&["--merge", p2]),
        format!("error: {p2} holds replications 21..40: replications 1..20 are in no part given\n")
    );
    let mut other = RUN.to_vec();
    other[12] = "4";
    other.extend(["--merge", p2]);
    let done = shmc(&other);
    assert_eq!(done.status.code(), Some(1));
    assert_eq!(
        stderr(&done),
        format!(
            "error: {p2}: a part started with other settings than this command's (--seed 3 vs \
             --seed 4)\n"
        )
    );
    assert_eq!(
        refusal(&["--first-replication", "1", "--count", "20"]),
        "error: --first-replication needs --output: the part's replications are written there, \
         for --merge\n"
    );
    let out = dir.join("p3");
    let out = out.to_str().unwrap();
    let err = refusal(&[
        "--first-replication",
        "30",
        "--count",
        "20",
        "--output",
        out,
    ]);
    assert_eq!(
        err,
        "error: --first-replication (30) with a count of 20 is not a part of replications \
         1..40\n"
    );
    let mut unthinned: Vec<&str> = RUN
        .iter()
        .copied()
        .filter(|a| *a != "--thin" && *a != "5")
        .collect();
    unthinned.extend(["--first-replication", "1", "--count", "20", "--output", out]);
    let done = shmc(&unthinned);
    assert!(
        stderr(&done).starts_with("error: --thin must be given for a part of the replications"),
        "{}",
        stderr(&done)
    );
}
