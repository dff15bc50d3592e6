//! What the CLI's integration tests share: running the `shmc` binary, reading what it printed,
//! and a folder of their own under the system's temporary directory.
#![allow(dead_code)] // each test file uses its part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `shmc` binary built for these tests with `args`.
pub fn shmc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shmc"))
        .args(args)
        .output()
        .expect("the shmc binary runs")
}

/// Bytes the binary printed, as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What the binary printed on stderr.
pub fn stderr(out: &Output) -> String {
    text(&out.stderr)
}

/// `shmc-GROUP-PID-NAME` under the temporary directory, emptied of an earlier run's files (not
/// created: a test of a folder that does not exist yet needs it absent); one per test and
/// process, so that tests running at once never share one.
pub fn temp_dir(group: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shmc-{group}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A chain's CSV file without what two runs making the same draws into other folders differ
/// in: its own path (the header's `file =`) and its times.
pub fn masked_csv(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !(l.contains("file = ") || l.contains("seconds") || l.contains("Elapsed")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines of `ranks.csv` in `dir` without its column of seconds: what two runs of the same
/// replications (one process, or parts merged) share.
pub fn ranks_without_seconds(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("ranks.csv")).unwrap();
    text.lines()
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            [&cells[..5], &cells[6..]].concat().join(",")
        })
        .collect()
}

/// The rows of a `shmc bench --json` file without their seconds: what two runs of the same
/// table (one process, or parts merged) share.
pub fn json_rows_without_seconds(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    rows.into_iter()
        .map(|mut row| {
            row.as_object_mut().unwrap().remove("seconds");
            row
        })
        .collect()
}
