//! `shmc bench posteriordb` on the small database in tests/posteriordb (its make.py wrote it):
//! a Stan program whose every parameter's posterior is known in closed form, with reference
//! draws drawn from those closed forms. shmc's NUTS and nutpie must pass it and must fail the
//! same posterior against a reference whose mean is half a posterior sd off (the check can
//! fail); a data file that is not a zip archive is one line naming it. Without a Stan toolchain
//! (`pip install httpstan`), or without nutpie in `SHMC_PYTHON` for nutpie's rows, a test says
//! so in one line and passes, except under `CI=true`, where CI installs both.

use std::path::{Path, PathBuf};
use std::process::Command;

use shmc::models::stan::Toolchain;
use shmc_cli::experiments::posteriordb::{PosteriordbRow, PosteriordbSettings, run_posteriordb};

fn database() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/posteriordb")
}

fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Whether a Stan toolchain is here; a line saying it is not otherwise (a failure under CI).
fn toolchain_present() -> bool {
    match Toolchain::find(None) {
        Ok(_) => true,
        Err(e) => {
            assert!(!in_ci(), "no Stan toolchain, and CI installs one: {e}");
            eprintln!("skipped: {e}");
            false
        }
    }
}

fn settings(posteriors: &[&str], rows: &[&str]) -> PosteriordbSettings {
    PosteriordbSettings {
        dir: database(),
        posteriors: Some(posteriors.iter().map(|p| p.to_string()).collect()),
        rows: rows.iter().map(|r| r.to_string()).collect(),
        chains: 2,
        warmup: 500,
        draws: 1000,
        seed: 1,
        memory_limit: 1 << 30,
    }
}

/// The rules each parameter broke, by name.
fn failures(row: &PosteriordbRow) -> Vec<(String, Vec<&'static str>)> {
    let checks = row.checks.as_ref().unwrap_or_else(|| panic!("{row:?}"));
    checks
        .parameters
        .iter()
        .map(|p| (p.name.clone(), p.failures.clone()))
        .collect()
}

#[test]
fn right_samplers_pass_the_known_posterior_and_fail_a_shifted_reference() {
    if !toolchain_present() {
        return;
    }
    let rows = run_posteriordb(
        &settings(
            &["known-known", "known-shifted"],
            &["nuts", "auto", "nutpie-low-rank"],
        ),
        &|line| eprintln!("{line}"),
    )
    .expect("the database is read and its program compiled");
    assert_eq!(rows.len(), 6);
    for row in &rows {
        if row.method == "nutpie-low-rank" && row.verdict.contains("no nutpie") {
            assert!(
                !in_ci(),
                "CI installs nutpie in SHMC_PYTHON: {}",
                row.verdict
            );
            eprintln!("skipped nutpie's rows: {}", row.verdict);
            continue;
        }
        let broken: Vec<_> = failures(row)
            .into_iter()
            .filter(|(_, f)| !f.is_empty())
            .collect();
        let names: Vec<String> = failures(row).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["mu", "tau", "theta.1", "theta.2"], "{row:?}");
        match row.posterior.as_str() {
            "known-known" => assert!(row.passed && broken.is_empty(), "{row:?}"),
            _ => {
                assert!(!row.passed, "{row:?}");
                assert_eq!(broken, [("mu".to_string(), vec!["mean"])], "{row:?}");
                assert!(row.verdict.starts_with("mu breaks mean"), "{}", row.verdict);
            }
        }
        assert!(
            row.gradients > 0 && row.seconds_to_ess.is_finite(),
            "{row:?}"
        );
    }
}

#[test]
fn a_data_file_that_is_not_a_zip_is_one_line_naming_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_shmc"))
        .args(["bench", "posteriordb", "--posteriordb"])
        .arg(database())
        .args([
            "--posteriors",
            "known-known,known-broken",
            "--methods",
            "nuts",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: ")
            && err.contains("data/data/broken.json.zip: not a zip archive")
            && err.trim_end().lines().count() == 1,
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_shmc"))
        .args([
            "bench",
            "posteriordb",
            "--posteriordb",
            "/nonexistent/posteriordb",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a posteriordb checkout"), "{err}");
}
