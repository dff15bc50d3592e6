//! `shmc sbc` split into parts (`--first-replication N --count K`, one process or HyperQueue
//! task each) and merged back (`--merge`): the merged result is the one-process run's, and parts
//! that are not one run are refused in one line.

mod binary;
use binary::{json_rows_without_seconds, ranks_without_seconds as ranks, shmc, stderr, text};

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

/// The one `error:` line (exit 1) of `shmc` with `extra` after `base` (`RUN`, or `BENCH`).
fn refused(base: &[&str], extra: &[&str]) -> String {
    let mut args = base.to_vec();
    args.extend(extra);
    let done = shmc(&args);
    assert_eq!(done.status.code(), Some(1), "{}", text(&done.stdout));
    let err = stderr(&done);
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

/// A missing part, a part of other settings, a part without a folder to go to and a part
/// outside the replications are refused in one line.
#[test]
fn parts_that_are_not_one_calibration_are_refused_in_one_line() {
    let dir = binary::temp_dir("sbc-parts", "refused");
    let p2 = dir.join("p2");
    sbc(&p2, &["--first-replication", "21", "--count", "20"]);
    let p2 = p2.to_str().unwrap();
    assert_eq!(
        refused(&RUN, &["--merge", p2]),
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
        refused(&RUN, &["--first-replication", "1", "--count", "20"]),
        "error: --first-replication needs --output: the part's replications are written there, \
         for --merge\n"
    );
    let out = dir.join("p3");
    let out = out.to_str().unwrap();
    let err = refused(
        &RUN,
        &[
            "--first-replication",
            "30",
            "--count",
            "20",
            "--output",
            out,
        ],
    );
    assert_eq!(
        err,
        "error: --first-replication (30) with a count of 20 is not a part of replications \
         1..40\n"
    );
}

/// Without --thin, two parts merged choose the thinning one process chooses from every
/// replication's ESS, and rank at it: the one-process report and ranks.
#[test]
fn parts_without_a_thinning_merge_to_the_one_process_choice() {
    let dir = binary::temp_dir("sbc-parts", "unthinned");
    let unthinned = |out: &Path, extra: &[&str]| {
        let mut args: Vec<&str> = RUN
            .iter()
            .copied()
            .filter(|a| !["--thin", "5"].contains(a))
            .collect();
        args.extend(extra);
        args.extend(["--quiet", "--output", out.to_str().unwrap()]);
        let done = shmc(&args);
        assert!(done.status.success(), "{}", stderr(&done));
        text(&done.stdout)
    };
    let whole = unthinned(&dir.join("whole"), &[]);
    assert!(whole.contains("chosen from the measured ESS"), "{whole}");
    let (p1, p2) = (dir.join("p1"), dir.join("p2"));
    unthinned(&p1, &["--first-replication", "1", "--count", "25"]);
    unthinned(&p2, &["--first-replication", "26", "--count", "15"]);
    let merge = ["--merge", p1.to_str().unwrap(), p2.to_str().unwrap()];
    let merged = unthinned(&dir.join("merged"), &merge);
    assert_eq!(masked(&merged), masked(&whole));
    assert_eq!(ranks(&dir.join("merged")), ranks(&dir.join("whole")));
}

/// `shmc bench sbc` on a bounded table (two models, two methods, the quick run's 30
/// replications) with `extra`: its rows from `--json`, without their seconds, after a success.
fn bench_rows(dir: &Path, name: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let json = dir.join(format!("{name}.json"));
    let mut args = BENCH.to_vec();
    args.extend(extra);
    args.extend(["--json", json.to_str().unwrap()]);
    let done = shmc(&args);
    assert!(done.status.success(), "{}", stderr(&done));
    json_rows_without_seconds(&json)
}

/// The bounded table of `bench_rows`.
const BENCH: [&str; 9] = [
    "bench",
    "sbc",
    "--quick",
    "--models",
    "banana,gaussian-conjugate",
    "--methods",
    "hmc,rns-hmc",
    "--seed",
    "3",
];

/// `shmc bench sbc` in two parts of 18 and 12 replications, merged: every cell's row (its
/// thinning chosen from all 30 replications' ESS, kept draws, p-values, ESS and divergences)
/// is the one-process table's; a gap, a replication in two parts and a part of other settings
/// are refused in one line.
#[test]
fn bench_sbc_parts_merge_to_the_one_process_table() {
    let dir = binary::temp_dir("sbc-parts", "bench");
    std::fs::create_dir_all(&dir).unwrap();
    let whole = bench_rows(&dir, "whole", &[]);
    assert_eq!(whole.len(), 4, "{whole:?}");
    let (p1, p2) = (dir.join("p1"), dir.join("p2"));
    let (p1, p2) = (p1.to_str().unwrap(), p2.to_str().unwrap());
    bench_rows(
        &dir,
        "p1",
        &["--first-replication", "1", "--count", "18", "--output", p1],
    );
    bench_rows(
        &dir,
        "p2",
        &["--first-replication", "19", "--count", "12", "--output", p2],
    );
    let merged = bench_rows(&dir, "merged", &["--merge", p2, p1]);
    assert_eq!(merged, whole);
    assert_eq!(
        refused(&BENCH, &["--merge", p2]),
        format!("error: {p2} holds replications 19..30: replications 1..18 are in no part given\n")
    );
    assert_eq!(
        refused(&BENCH, &["--merge", p1, p1, p2]),
        format!("error: {p1} holds replications 1..18: replication 1 is in two parts\n")
    );
    assert_eq!(
        refused(&BENCH, &["--first-replication", "1", "--count", "18"]),
        "error: --first-replication needs --output: the part's cells are written there, for \
         --merge\n"
    );
    assert_eq!(
        refused(
            &BENCH,
            &["--first-replication", "25", "--count", "10", "--output", p1]
        ),
        "error: --first-replication (25) with a count of 10 is not a part of replications 1..30\n"
    );
    let done = shmc(&["bench", "lr-sim", "--merge", p1]);
    assert_eq!(
        stderr(&done),
        "error: --first-replication, --count, --merge and --output are for bench sbc\n"
    );
    let mut other = BENCH.to_vec();
    other[8] = "4";
    other.extend(["--merge", p1, p2]);
    let done = shmc(&other);
    assert_eq!(
        stderr(&done),
        format!(
            "error: {p1}: a part started with other settings than this command's (--seed 3 vs \
             --seed 4)\n"
        )
    );
}
