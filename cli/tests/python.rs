//! The Python package's own tests (`python/tests`, pytest) run from `cargo test`: `cargo test
//! python` runs them. They need the package built and installed with what its tests need
//! (`.ci/run` does it in a fresh virtual environment and points `SHMC_PYTHON` at its
//! interpreter; by hand: `pip install ./python -r python/tests/requirements.txt`). Without
//! them the test says so in one line and passes, except under `CI=true`, where it fails.

use std::path::Path;
use std::process::Command;

/// The interpreter with the package: `$SHMC_PYTHON`, or `python3`.
fn python() -> String {
    std::env::var("SHMC_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Whether `python` has the package and pytest. Without them the test prints what is missing
/// and is skipped, unless `CI=true`: CI installs them, so there their absence fails.
fn package_installed(python: &str) -> bool {
    let found = Command::new(python)
        .args(["-c", "import shmc, pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let what = format!(
            "{python} with the shmc package and pytest (pip install ./python -r \
             python/tests/requirements.txt, or set SHMC_PYTHON)"
        );
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{what} is missing, and CI needs it"
        );
        eprintln!("skipped: {what} is missing");
    }
    found
}

/// pytest on `python/tests`, with this build's `shmc` binary for the test that compares the
/// package's draws with the command line's.
#[test]
fn python_package_tests_pass() {
    let python = python();
    if !package_installed(&python) {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let out = Command::new(&python)
        .args([
            "-m",
            "pytest",
            "python/tests",
            "-q",
            "-p",
            "no:cacheprovider",
        ])
        .current_dir(root)
        .env("SHMC_BIN", env!("CARGO_BIN_EXE_shmc"))
        .output()
        .expect("pytest runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pytest failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let closing = stdout.lines().last().unwrap_or_default();
    eprintln!("python/tests: {closing}");
    assert!(closing.contains(" passed"), "{stdout}");
}
