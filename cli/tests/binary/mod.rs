//! What the CLI's integration tests share: running the `shmc` binary, reading what it printed,
//! and a folder of their own under the system's temporary directory.
#![allow(dead_code)] // each test file uses its part

use std::path::PathBuf;
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
