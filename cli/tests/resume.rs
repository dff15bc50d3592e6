//! `shmc sample --resume DIR`: a run killed (SIGKILL), interrupted (SIGINT) or terminated
//! (SIGTERM) and resumed writes the same rows as a run never stopped, bit for bit, whatever
//! moment it was stopped at.

mod binary;
use binary::{shmc, text};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn temp_dir(name: &str) -> PathBuf {
    binary::temp_dir("resume", name)
}

/// A logistic regression small enough for a few seconds of sampling: 2 chains, 60 000 draws
/// after `warmup` iterations, by `plan`: a method and its options, separated by spaces.
fn run_args<'a>(plan: &'a str, warmup: &'a str, dir: &'a Path) -> Vec<&'a str> {
    let mut args = vec![
        "sample", "--model", "logistic", "--n", "2000", "--d", "5", "--chains", "2", "--warmup",
        warmup, "--draws", "60000", "--seed", "7", "--quiet", "--method",
    ];
    args.extend(plan.split(' '));
    if !plan.starts_with("hmc") {
        args.extend(["--hidden", "60"]);
    }
    args.extend(["--output", dir.to_str().unwrap()]);
    args
}

/// A folder name for `plan`.
fn plan_name(plan: &str) -> String {
    plan.replace([' ', ':'], "_")
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_shmc"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Each chain's file in `dir`, every line but those that hold the folder or a time: the
/// settings, the header, the adaptation, the rows and the evaluation counts must all match.
fn rows(dir: &Path) -> Vec<Vec<String>> {
    (1..=2)
        .map(|k| {
            let file = std::fs::read_to_string(dir.join(format!("logistic-{k}.csv"))).unwrap();
            file.lines()
                .filter(|l| {
                    !(l.contains("file = ")
                        || l.contains(" seconds")
                        || l.contains("surrogate:")
                        || l.contains("precompute:"))
                })
                .map(without_timings)
                .collect()
        })
        .collect()
}

/// The `auto` transitions line states the timings it chose by; a resumed run keeps the
/// choice, not the clock, so only the choice is compared.
fn without_timings(line: &str) -> String {
    match line.split_once(" (auto:") {
        Some((choice, _)) => choice.to_string(),
        None => line.to_string(),
    }
}

/// Waits until `ready()` or a minute has passed.
fn wait_until(mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The kept draws every chain's checkpoint counts (0 for a chain without one).
fn checkpointed(dir: &Path) -> Vec<usize> {
    (1..=2)
        .map(|k| {
            let path = dir.join(format!("logistic-{k}.checkpoint.json"));
            std::fs::read_to_string(path).ok().map_or(0, |t| {
                let at = t.find("\"kept\":").map_or(0, |i| i + 7);
                t[at..]
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            })
        })
        .collect()
}

/// Runs `method` to the end in one folder; in another, stops it with `signal` once `stop_when`
/// holds for its folder, checks the stopped run with `stopped_as` (its output, its folder),
/// resumes it, and compares the two folders' files.
fn resumed_equals_uninterrupted(
    method: &str,
    warmup: &str,
    signal: &str,
    stop_when: impl Fn(&Path) -> bool,
    stopped_as: impl Fn(&Output, &Path),
) -> String {
    let (whole, stopped) = (
        temp_dir(&format!("{}-{warmup}-{signal}-whole", plan_name(method))),
        temp_dir(&format!("{}-{warmup}-{signal}-stopped", plan_name(method))),
    );
    let out = shmc(&run_args(method, warmup, &whole));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let child = spawn(&run_args(method, warmup, &stopped));
    wait_until(|| stop_when(&stopped));
    let before = checkpointed(&stopped);
    assert!(
        Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert!(
        !out.status.success(),
        "{method} finished before the {signal} ({before:?} checkpointed): make the run longer"
    );
    stopped_as(&out, &stopped);
    let resumed = shmc(&["sample", "--resume", stopped.to_str().unwrap()]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    let (a, b) = (rows(&whole), rows(&stopped));
    for (chain, (a, b)) in a.iter().zip(&b).enumerate() {
        assert_eq!(a.len(), b.len(), "chain {}: rows", chain + 1);
        if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
            panic!(
                "{method}, {signal}: chain {} differs at line {i}: {} vs {}",
                chain + 1,
                a[i],
                b[i]
            );
        }
    }
    let file = std::fs::read_to_string(stopped.join("logistic-1.csv")).unwrap();
    assert!(
        file.contains("Elapsed Time"),
        "the resumed file ends as a finished one"
    );
    assert!(!file.contains("interrupted"), "{file}");
    let _ = std::fs::remove_dir_all(&whole);
    let _ = std::fs::remove_dir_all(&stopped);
    text(&resumed.stdout)
}

/// SIGKILL mid-sampling, after at least one checkpoint of each chain: the rows after the
/// checkpoint are dropped and made again, identically (also with NUTS's trees on the
/// surrogate, whose kernel keeps nothing between draws but the state and the random stream, and
/// with `W:S` surrogate transitions, whose resumed kernel must go on with `S`, not `W`).
#[test]
fn a_killed_run_resumes_to_the_rows_of_an_uninterrupted_one() {
    for method in [
        "hmc",
        "rns-hmc",
        // NUTS's trees on the network.
        "rns-hmc --surrogate-steps-factor nuts",
        // 1 surrogate transition per judgement in warmup, 3 after.
        "rns-hmc --exact-warmup 150 --surrogate-transitions 1:3",
    ] {
        let stdout = resumed_equals_uninterrupted(
            method,
            "300",
            "-KILL",
            |dir| checkpointed(dir).iter().all(|&k| k > 0),
            |_, _| {},
        );
        assert!(stdout.contains("chain 1: resumed after draw"), "{stdout}");
    }
}

/// How a run that a signal stopped cleanly ends: exit `code` (128 + the signal), the line that
/// says how to resume it, and each chain's file ending on the note of the stop, with a
/// checkpoint counting every row it holds.
fn stopped_cleanly(code: i32) -> impl Fn(&Output, &Path) {
    move |out, dir| {
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{err}");
        assert!(err.contains("`shmc sample --resume"), "{err}");
        for k in 1..=2 {
            let file = std::fs::read_to_string(dir.join(format!("logistic-{k}.csv"))).unwrap();
            assert!(file.contains("# Sampling interrupted"), "chain {k}");
            let rows = file.lines().filter(|l| !l.starts_with('#')).count() - 1;
            assert_eq!(checkpointed(dir)[k - 1], rows, "chain {k}");
        }
    }
}

/// SIGINT (Ctrl-C): the chains save a checkpoint as they stop, so the resumed run makes no
/// draw twice; the run exits 130.
#[test]
fn an_interrupted_run_resumes_to_the_rows_of_an_uninterrupted_one() {
    resumed_equals_uninterrupted(
        "arns-hmc",
        "300",
        "-INT",
        |dir| checkpointed(dir).iter().all(|&k| k > 0),
        stopped_cleanly(130),
    );
}

/// SIGTERM, what batch schedulers and container runtimes send, stops a run as Ctrl-C does:
/// every finished draw flushed, a checkpoint, the files' end notes, exit 143 (128 + 15); and
/// the run resumes to the rows of an uninterrupted one.
#[test]
fn a_terminated_run_stops_cleanly_and_resumes_to_the_rows_of_an_uninterrupted_one() {
    resumed_equals_uninterrupted(
        "hmc",
        "300",
        "-TERM",
        |dir| checkpointed(dir).iter().all(|&k| k > 0),
        stopped_cleanly(143),
    );
}

/// The plans whose files hold more than a diagonal's adaptation block between header and rows:
/// a dense metric writes a row per parameter, `auto` transitions a line of their own (issue
/// #48: these could not be resumed). Killed and terminated, they resume to the same rows.
#[test]
fn dense_metric_and_auto_transition_runs_resume_to_the_rows_of_an_uninterrupted_one() {
    for (method, signal) in [
        ("hmc --metric laplace", "-TERM"),
        ("rns-hmc --train-from laplace --cubic", "-TERM"),
        // The README's main job.
        (
            "rns-hmc --train-from laplace --surrogate-steps-factor nuts",
            "-KILL",
        ),
        (
            "rns-hmc --exact-warmup 150 --surrogate-transitions auto",
            "-KILL",
        ),
    ] {
        let stdout = resumed_equals_uninterrupted(
            method,
            "300",
            signal,
            |dir| checkpointed(dir).iter().all(|&k| k > 0),
            |_, _| {},
        );
        assert!(
            stdout.contains("chain 1: resumed after draw"),
            "{method}: {stdout}"
        );
    }
}

/// Killed in warmup, before any checkpoint: the chains start again and, being seeded, make the
/// same rows.
#[test]
fn a_run_killed_in_warmup_starts_again_with_the_same_rows() {
    // A warmup of 5000 iterations takes about a second: the kill comes in it, once the files
    // are there.
    let stdout = resumed_equals_uninterrupted(
        "hmc",
        "5000",
        "-KILL",
        |dir| dir.join("logistic-2.csv").exists() && checkpointed(dir) == [0, 0],
        |_, _| {},
    );
    assert!(stdout.contains("starts again"), "{stdout}");
}

#[test]
fn resume_refuses_other_options_a_folder_without_a_run_and_changed_files() {
    let dir = temp_dir("refusals");
    let out = shmc(&["sample", "--resume", dir.to_str().unwrap(), "--draws", "5"]);
    let err = text(&out.stderr);
    assert!(
        !out.status.success() && err.contains("give it alone"),
        "{err}"
    );
    let out = shmc(&["sample", "--resume", dir.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no shmc-run.json"),
        "{err}"
    );
    // A finished run whose header was edited: other settings, refused before any file changes.
    let out = shmc(&[
        "sample",
        "--model",
        "banana",
        "--chains",
        "2",
        "--warmup",
        "50",
        "--draws",
        "50",
        "--quiet",
        "--output",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let path = dir.join("banana-1.csv");
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("num_samples = 50", "num_samples = 60");
    std::fs::write(&path, &edited).unwrap();
    let out = shmc(&["sample", "--resume", dir.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(
        !out.status.success() && err.contains("cannot be resumed"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), edited);
    assert_eq!(err.lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run whose data file's bytes changed after it stopped is not resumed onto the other data:
/// its header records the data's SHA-256, and the refusal leaves the run's files as they were.
#[test]
fn a_resume_after_the_data_file_changed_is_refused_with_the_files_untouched() {
    for metric in ["diagonal", "laplace"] {
        resume_after_the_data_changed(metric);
    }
}

fn resume_after_the_data_changed(metric: &str) {
    let dir = temp_dir(&format!("data-changed-{metric}"));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("d.csv");
    let rows = |flip: usize| {
        let lines: String = (0..200)
            .map(|i| format!("{},{}\n", (i % 2 == 0) ^ (i == flip), i as f64 / 50.0 - 2.0))
            .collect::<String>()
            .replace("true", "1")
            .replace("false", "0");
        format!("y,x\n{lines}")
    };
    std::fs::write(&data, rows(usize::MAX)).unwrap();
    let out = dir.join("run");
    let (data_arg, out_arg) = (data.to_str().unwrap(), out.to_str().unwrap());
    let child = spawn(&[
        "sample", "--model", "logistic", "--data", data_arg, "--chains", "2", "--warmup", "50",
        "--draws", "50000000", "--seed", "7", "--quiet", "--output", out_arg, "--metric", metric,
    ]);
    wait_until(|| checkpointed(&out).iter().all(|&k| k > 0));
    let signalled = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(signalled.success());
    let stopped = child.wait_with_output().unwrap();
    assert_eq!(
        stopped.status.code(),
        Some(143),
        "{}",
        text(&stopped.stderr)
    );
    let files = || -> Vec<String> {
        [
            "logistic-1.csv",
            "logistic-2.csv",
            "logistic-1.checkpoint.json",
        ]
        .map(|f| std::fs::read_to_string(out.join(f)).unwrap())
        .to_vec()
    };
    let before = files();
    std::fs::write(&data, rows(3)).unwrap();
    let resumed = shmc(&["sample", "--resume", out_arg]);
    let err = text(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(1), "{err}");
    // The saved U at the saved position tells first, where it is checked (HMC's diagonal
    // metric, here); the header's data digest tells for every run.
    assert!(
        err.contains("a data file whose bytes changed")
            || err.contains("is not the model's U at the saved position"),
        "{err}"
    );
    assert!(files() == before, "the stopped run's files are untouched");
    let _ = std::fs::remove_dir_all(&dir);
}
