//! A run split into shards (`shmc sample --chain-id`): two shards of two chains make the four
//! chains of one run, file for file, and `shmc summary` / `shmc report` read the shards'
//! folders as that run; a set of shards that is not one run is refused in one line.

mod binary;
use binary::{masked_csv as masked, shmc, stderr, text};

use std::path::{Path, PathBuf};

/// The settings every run here shares (a short banana run).
const RUN: [&str; 10] = [
    "sample", "--model", "banana", "--warmup", "150", "--draws", "150", "--seed", "7", "--quiet",
];

/// Runs `RUN` with `extra` into `out`, and fails on an error.
fn sample(out: &Path, extra: &[&str]) {
    let mut args = RUN.to_vec();
    args.extend(["--output", out.to_str().unwrap()]);
    args.extend(extra);
    let done = shmc(&args);
    assert!(done.status.success(), "{}", stderr(&done));
}

/// A checkpoint without its times.
fn checkpoint(path: &Path) -> serde_json::Value {
    fn drop_times(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                map.retain(|k, _| !k.contains("seconds"));
                map.values_mut().for_each(drop_times);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(drop_times),
            _ => {}
        }
    }
    let mut value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    drop_times(&mut value);
    value
}

/// `shmc summary` of `paths`: its standard output, after a success.
fn summary(paths: &[&PathBuf]) -> String {
    let mut args = vec!["summary"];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    let done = shmc(&args);
    assert!(done.status.success(), "{}", stderr(&done));
    text(&done.stdout)
}

/// `--chains 4` against shards of chains 1-2 and 3-4: the same files (CSV and checkpoint) for
/// every chain, the same summary from the shards' folders or the folder holding them, and a
/// report of all four chains.
#[test]
fn two_shards_of_two_chains_are_the_four_chain_run() {
    let dir = binary::temp_dir("shards", "same");
    let (whole, parent) = (dir.join("whole"), dir.join("shards"));
    let (first, second) = (parent.join("chains-1"), parent.join("chains-3"));
    sample(&whole, &["--chains", "4"]);
    sample(&first, &["--chains", "2"]);
    sample(&second, &["--chains", "2", "--chain-id", "3"]);
    for chain in 1..=4 {
        let shard = if chain <= 2 { &first } else { &second };
        let csv = format!("banana-{chain}.csv");
        assert_eq!(
            masked(&whole.join(&csv)),
            masked(&shard.join(&csv)),
            "{csv}"
        );
        let saved = format!("banana-{chain}.checkpoint.json");
        assert_eq!(
            checkpoint(&whole.join(&saved)),
            checkpoint(&shard.join(&saved))
        );
    }
    assert!(!second.join("banana-1.csv").exists());
    let expected = summary(&[&whole]);
    assert_eq!(summary(&[&first, &second]), expected);
    assert_eq!(summary(&[&parent]), expected);
    let done = shmc(&["report", parent.to_str().unwrap()]);
    assert!(done.status.success(), "{}", stderr(&done));
    let page = std::fs::read_to_string(parent.join("report.html")).unwrap();
    assert!(page.contains("4 chain(s) of 150 draws"), "{page:.2000}");
}

/// `shmc summary`'s one `error:` line (exit 1) for the shards' folders `paths`.
fn refusal(paths: &[&PathBuf]) -> String {
    let mut args = vec!["summary"];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    let done = shmc(&args);
    assert_eq!(done.status.code(), Some(1), "{}", text(&done.stdout));
    let err = stderr(&done);
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

/// A gap between shards, a chain in two shards and shards of other settings are refused, by
/// `shmc summary` and `shmc report` alike, in one line naming the folders and what is wrong.
#[test]
fn shards_that_are_not_one_run_are_refused_in_one_line() {
    let dir = binary::temp_dir("shards", "refused");
    let shard = |name: &str, extra: &[&str]| {
        let out = dir.join(name);
        sample(&out, extra);
        out
    };
    let first = shard("a", &["--chains", "2"]);
    let fifth = shard("c", &["--chains", "2", "--chain-id", "5"]);
    let err = refusal(&[&first, &fifth]);
    assert!(err.contains("holds chains 5..6") && err.contains("chains 3..4 are in no shard"));
    let second = shard("b", &["--chains", "2", "--chain-id", "2"]);
    assert!(refusal(&[&first, &second]).contains("chain 2 is in two shards"));
    let other = shard(
        "d",
        &["--chains", "2", "--chain-id", "3", "--init-radius", "1.5"],
    );
    let err = refusal(&[&first, &other]);
    assert!(
        err.contains("their settings differ (--init-radius 1.5 vs (none))"),
        "{err}"
    );
    let done = shmc(&["report", first.to_str().unwrap(), fifth.to_str().unwrap()]);
    assert_eq!(done.status.code(), Some(1));
    assert!(stderr(&done).contains("chains 3..4 are in no shard"));
}

/// The first chain's id is refused at 0, past the last number, and for a shard stopping at a
/// target ESS (which needs every chain's draws in one process), before any file is written.
#[test]
fn chain_ids_that_cannot_be_a_shard_are_refused() {
    let dir = binary::temp_dir("shards", "ids");
    let out = dir.join("out");
    for (extra, expected) in [
        (
            vec!["--chain-id", "0"],
            "error: --chain-id must be at least 1",
        ),
        (
            vec!["--chain-id", &*usize::MAX.to_string(), "--chains", "2"],
            "error: --chain-id (18446744073709551615) with 2 chains numbers the last chain past",
        ),
        (
            vec!["--chain-id", "3", "--target-ess", "100"],
            "error: --chain-id (3) makes this run a shard of a larger one, and a target ESS",
        ),
    ] {
        let mut args = RUN.to_vec();
        args.extend(["--output", out.to_str().unwrap()]);
        args.extend(extra.iter().copied());
        let done = shmc(&args);
        assert_eq!(done.status.code(), Some(1));
        let err = stderr(&done);
        assert!(
            err.starts_with(expected) && err.lines().count() == 1,
            "{err}"
        );
        assert!(!out.exists());
    }
}

/// A folder of shards in which one shard lost its settings file is refused naming that folder,
/// where it used to be skipped without a word (two of four chains reported).
#[test]
fn a_shard_without_its_settings_file_is_refused_not_skipped() {
    let dir = binary::temp_dir("shards", "lost-settings");
    sample(&dir.join("a"), &["--chains", "2"]);
    sample(&dir.join("b"), &["--chains", "2", "--chain-id", "3"]);
    std::fs::remove_file(dir.join("b").join("shmc-run.json")).unwrap();
    let err = refusal(&[&dir]);
    assert!(
        err.contains(&format!(
            "{}: holds chain files but no shmc-run.json",
            dir.join("b").display()
        )),
        "{err}"
    );
}
