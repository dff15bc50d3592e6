//! The short library API ([`shmc::Sampler`]): the draws it keeps in memory have a known
//! Gaussian's moments, and the files it writes are those `shmc sample` writes for the same
//! model, settings and seed.

#[path = "../../host/tests/common/mod.rs"]
mod common;

mod binary;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::assert_mean_within_4_mcse;
use shmc::Sampler;
use shmc::models::gaussian::CorrelatedGaussian;
use shmc::sampler::{Method, NutsSettings};

/// The CLI's `gaussian-32 --d 10`: variance 1 along `(1, …, 1)`, 0.01 across, so each
/// coordinate has mean 0 and variance `0.01 + 0.99/10`.
fn gaussian() -> CorrelatedGaussian {
    CorrelatedGaussian::new(10, 1.0, 0.01).unwrap()
}

const VARIANCE: f64 = 0.01 + 0.99 / 10.0;

fn temp_dir(name: &str) -> PathBuf {
    binary::temp_dir("api", name)
}

#[test]
fn the_draws_in_memory_have_the_gaussians_moments() {
    let model = gaussian();
    for method in [Method::Nuts(NutsSettings::default()), Method::Hmc] {
        let fit = Sampler::new(&model)
            .method(method.clone())
            .draws(2000)
            .seed(8)
            .run()
            .unwrap();
        let name = method.name();
        assert_eq!(fit.names().len(), 10);
        assert_eq!(fit.summary().len(), 10);
        assert!(fit.summary_table().contains("4 chains x 2000 draws"));
        assert!(fit.draws("nope").is_none());
        for q in fit.names() {
            let chains: Vec<Vec<f64>> = fit
                .draws(q)
                .unwrap()
                .into_iter()
                .map(<[f64]>::to_vec)
                .collect();
            assert_eq!(chains.len(), 4);
            assert_mean_within_4_mcse(&format!("{name}: E[{q}]"), &chains, 0.0);
            let squares: Vec<Vec<f64>> = chains
                .iter()
                .map(|c| c.iter().map(|x| x * x).collect())
                .collect();
            assert_mean_within_4_mcse(&format!("{name}: E[{q}^2]"), &squares, VARIANCE);
        }
    }
}

/// The lines of `file`, but for the two that cannot match between two runs: the file's own
/// path (`file = …`), and the elapsed-time block's seconds (wall-clock time).
fn comparable_lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|line| {
            if line.starts_with("#   file = ") {
                "#   file = (masked)".to_string()
            } else if line.contains(" seconds (") {
                "# (elapsed time masked)".to_string()
            } else {
                line.to_string()
            }
        })
        .collect()
}

/// `shmc sample` of the CLI's `gaussian-32 --d 10` with `method` and `seed` into `dir`: 2 chains
/// of 150 warmup iterations (saved) and 200 draws; its output, after checking it succeeded.
fn shmc_sample(dir: &Path, method: &str, seed: &str) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_shmc"))
        .args([
            "sample",
            "--model",
            "gaussian-32",
            "--d",
            "10",
            "--method",
            method,
        ])
        .args([
            "--chains", "2", "--warmup", "150", "--draws", "200", "--seed", seed,
        ])
        .args([
            "--save-warmup",
            "--quiet",
            "--output",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn write_cmdstan_writes_what_shmc_sample_writes_for_the_same_seed() {
    for (method, api_method) in [
        ("nuts", Method::Nuts(NutsSettings::default())),
        ("hmc", Method::Hmc),
    ] {
        let cli_dir = temp_dir(&format!("cli-{method}"));
        shmc_sample(&cli_dir, method, "11");

        let api_dir = temp_dir(&format!("api-{method}"));
        let model = gaussian();
        let files = Sampler::new(&model)
            .name("gaussian-32")
            .method(api_method)
            .chains(2)
            .warmup(150)
            .draws(200)
            .seed(11)
            .save_warmup(true)
            .run()
            .unwrap()
            .write_cmdstan(&api_dir)
            .unwrap();

        assert_eq!(files.len(), 2);
        for (chain, file) in files.iter().enumerate() {
            let name = format!("gaussian-32-{}.csv", chain + 1);
            assert_eq!(file, &api_dir.join(&name));
            let (ours, cli) = (
                comparable_lines(file),
                comparable_lines(&cli_dir.join(&name)),
            );
            // 150 warmup and 200 kept rows, the header, the adaptation and the end blocks.
            assert!(ours.len() > 350, "{method}: {} lines", ours.len());
            assert_eq!(ours, cli, "{method}: {name}");
        }
    }
}

/// `shmc sample` is the library's sampler writing its files as it runs: with the same settings,
/// `Sampler::write_to` writes the CLI's files, header and report alike; such a run kept no
/// warmup rows to write again, so `Fit::write_cmdstan` names its folder instead; and resuming
/// the finished run in that folder leaves every chain as it was.
#[test]
fn write_to_streams_the_files_shmc_sample_writes_and_resumes_them() {
    let cli_dir = temp_dir("stream-cli");
    let out = shmc_sample(&cli_dir, "hmc", "5");

    let api_dir = temp_dir("stream-api");
    let model = gaussian();
    let streamed = || {
        Sampler::new(&model)
            .name("gaussian-32")
            .chains(2)
            .warmup(150)
            .draws(200)
            .seed(5)
            .save_warmup(true)
    };
    let fit = streamed().write_to(&api_dir).run().unwrap();
    for chain in 1..=2 {
        let name = format!("gaussian-32-{chain}.csv");
        let (ours, cli) = (
            comparable_lines(&api_dir.join(&name)),
            comparable_lines(&cli_dir.join(&name)),
        );
        assert!(ours.len() > 350, "{} lines", ours.len());
        assert_eq!(ours, cli, "{name}");
    }
    // The parameters' rows of the summary (the totals under them hold times).
    let stdout = String::from_utf8_lossy(&out.stdout);
    let table = fit.summary_table();
    let rows = table.split("\n\n").next().unwrap();
    assert!(
        rows.lines().count() == 11 && stdout.contains(rows),
        "{stdout}"
    );
    let refused = fit.write_cmdstan(temp_dir("stream-copy")).unwrap_err();
    assert!(
        refused.to_string().contains(api_dir.to_str().unwrap()),
        "{refused}"
    );

    let before = comparable_lines(&api_dir.join("gaussian-32-1.csv"));
    let opened = streamed().resume_in(&api_dir).open().unwrap();
    assert!(
        opened
            .resumed()
            .iter()
            .all(|r| r.as_ref().is_some_and(|r| r.checkpoint.finished)),
        "every chain finished before"
    );
    opened.run().unwrap();
    assert_eq!(comparable_lines(&api_dir.join("gaussian-32-1.csv")), before);
    for dir in [cli_dir, api_dir] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Settings the model cannot honour are refused by the library itself, before any file is
/// written: RMHMC needs the model's Riemannian metric, which the correlated Gaussian lacks.
#[test]
fn the_library_refuses_rmhmc_without_the_models_metric_before_writing() {
    let dir = temp_dir("rmhmc");
    let model = gaussian();
    let error = Sampler::new(&model)
        .method(Method::Rmhmc(Default::default()))
        .write_to(&dir)
        .run()
        .unwrap_err();
    assert!(
        matches!(&error, shmc::Error::Setting { setting: "method", problem } if problem.contains("Riemannian metric")),
        "{error}"
    );
    assert!(!dir.exists(), "nothing written");
}
