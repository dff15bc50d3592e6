//! End-to-end: the `shmc` binary as a user runs it. Its CSVs are read back, `shmc summary`
//! reads them, and bad input gives one clear line and a non-zero exit with no output left
//! behind that looks complete.

mod binary;
use binary::{shmc, stderr};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use shmc::output::read_stan_csv;
use shmc::sampler::SAMPLER_COLUMNS;

fn temp_dir(name: &str) -> PathBuf {
    binary::temp_dir("cli", name)
}

/// The JSON array of rows a `--json FILE` wrote.
fn json_rows(file: &Path) -> Vec<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

fn csv_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "csv"))
        .collect();
    files.sort();
    files
}

#[test]
fn sample_writes_cmdstan_csvs_that_summary_reads() {
    let dir = temp_dir("sample");
    let out = shmc(&[
        "sample",
        "--model",
        "banana",
        "--chains",
        "3",
        "--draws",
        "150",
        "--warmup",
        "100",
        "--seed",
        "4",
        "--output",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("beta.1") && stdout.contains("R_hat"),
        "{stdout}"
    );
    let files = csv_files(&dir);
    assert_eq!(files.len(), 3);
    for file in &files {
        let csv = read_stan_csv(file).unwrap();
        let mut expected: Vec<String> = SAMPLER_COLUMNS.iter().map(|s| s.to_string()).collect();
        expected.extend(["beta.1".to_string(), "beta.2".to_string()]);
        assert_eq!(csv.names, expected);
        assert!(csv.columns.iter().all(|c| c.len() == 150));
        assert!(!csv.interrupted);
        let text = std::fs::read_to_string(file).unwrap();
        assert!(text.contains("# Adaptation terminated") && text.contains("Elapsed Time"));
        // Jittered trajectory lengths are the default, and the header must say so.
        assert!(text.contains("#   jitter_steps = 1\n"), "{text}");
    }
    let args: Vec<&str> = std::iter::once("summary")
        .chain(files.iter().map(|f| f.to_str().unwrap()))
        .collect();
    let summary = shmc(&args);
    assert!(summary.status.success(), "{}", stderr(&summary));
    let text = String::from_utf8_lossy(&summary.stdout);
    assert!(
        text.contains("lp__") && text.contains("beta.2") && text.contains("3 chains x 150 draws"),
        "{text}"
    );

    // As a killed run leaves them: chain 3 queued (header, no draws), chain 2 cut after 100
    // draws with no footer. The summary covers the complete part and names what it left out.
    let lines = |f: &Path| -> Vec<String> {
        std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    };
    let header_end = |l: &[String]| l.iter().position(|x| !x.starts_with('#')).unwrap() + 1;
    let third = lines(&files[2]);
    std::fs::write(&files[2], third[..header_end(&third)].join("\n") + "\n").unwrap();
    let second = lines(&files[1]);
    let mut kept: Vec<String> = second[..header_end(&second)].to_vec();
    let mut draws = 0;
    for line in &second[header_end(&second)..] {
        if !line.starts_with('#') {
            if draws == 100 {
                break;
            }
            draws += 1;
        }
        kept.push(line.clone());
    }
    std::fs::write(&files[1], kept.join("\n") + "\n").unwrap();
    let summary = shmc(&args);
    assert!(summary.status.success(), "{}", stderr(&summary));
    let text = String::from_utf8_lossy(&summary.stdout);
    assert!(text.contains("2 chains x 100 draws"), "{text}");
    let notes = stderr(&summary);
    let name = |f: &Path| f.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        notes.contains(&format!("{} has 0 draws", name(&files[2])))
            && notes.contains(&format!("{}: its last 50 draws left out", name(&files[0]))),
        "{notes}"
    );
    // With no usable chain left, the error names the file with the most draws.
    let out = shmc(&["summary", files[2].to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(&name(&files[2])), "{}", stderr(&out));
}

#[test]
fn save_warmup_writes_warmup_rows_first_and_summary_skips_them() {
    let dir = temp_dir("warmup");
    let out = shmc(&[
        "sample",
        "--model",
        "gaussian-conjugate",
        "--chains",
        "1",
        "--draws",
        "40",
        "--warmup",
        "30",
        "--save-warmup",
        "--output",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let file = &csv_files(&dir)[0];
    let rows = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("lp__"))
        .count();
    assert_eq!(rows, 70);
    assert_eq!(read_stan_csv(file).unwrap().columns[0].len(), 40);
}

#[test]
fn fixed_step_size_and_jittered_steps_are_recorded() {
    let dir = temp_dir("fixed");
    let out = shmc(&[
        "sample",
        "--model",
        "banana",
        "--chains",
        "1",
        "--draws",
        "200",
        "--warmup",
        "0",
        "--step-size",
        "0.05",
        "--steps",
        "6",
        "--jitter-steps",
        "--output",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let file = &csv_files(&dir)[0];
    let text = std::fs::read_to_string(file).unwrap();
    assert!(
        text.contains("#   jitter_steps = 1\n"),
        "header records the jitter"
    );
    let csv = read_stan_csv(file).unwrap();
    assert!(csv.column("stepsize__").unwrap().iter().all(|&e| e == 0.05));
    let steps = csv.column("n_leapfrog__").unwrap();
    assert!(steps.iter().all(|&n| (1.0..=6.0).contains(&n)));
    assert!(
        steps.contains(&1.0) && steps.contains(&6.0),
        "jitter covers 1..=6"
    );
}

/// `--surrogate-steps-factor auto`: the range the network's curvature chose is reported on the
/// terminal and in each CSV's footer, and every kept draw's trajectory length lies in it.
#[test]
fn auto_surrogate_trajectories_are_reported_and_used() {
    let dir = temp_dir("auto-steps");
    let out = shmc(&[
        "sample",
        "--model",
        "logistic",
        "--n",
        "2000",
        "--d",
        "5",
        "--method",
        "rns-hmc",
        "--fit",
        "score",
        "--hidden",
        "200",
        "--chains",
        "1",
        "--warmup",
        "400",
        "--train-after",
        "100",
        "--draws",
        "300",
        "--steps",
        "6",
        "--surrogate-steps-factor",
        "auto",
        "--output",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("surrogate trajectories: "), "{stdout}");
    let file = &csv_files(&dir)[0];
    let text = std::fs::read_to_string(file).unwrap();
    let range = text
        .split("# shmc surrogate trajectories: ")
        .nth(1)
        .and_then(|t| t.split(" steps").next())
        .and_then(|r| r.split_once("..="))
        .map(|(lo, hi)| (lo.parse::<f64>().unwrap(), hi.parse::<f64>().unwrap()))
        .unwrap_or_else(|| panic!("no trajectory line in {text}"));
    // At most 8 times the exact phase's 6 steps.
    assert!(
        range.0 >= 1.0 && range.0 <= range.1 && range.1 <= 48.0,
        "{range:?}"
    );
    let csv = read_stan_csv(file).unwrap();
    let steps = csv.column("n_leapfrog__").unwrap();
    assert!(
        steps.iter().all(|n| (range.0..=range.1).contains(n)),
        "{range:?}: {steps:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `shmc` with `args`, expecting exit code 1 and a single stderr line containing `needle`.
fn assert_one_line_error(args: &[&str], needle: &str) {
    let out = shmc(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: ") && err.contains(needle),
        "{args:?}: {err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

#[test]
fn pde_runs_report_their_solves() {
    let dir = temp_dir("pde");
    let out = shmc(&[
        "sample",
        "--model",
        "elliptic-pde",
        "--mesh",
        "8",
        "--kl-modes",
        "3",
        "--prior-sd",
        "1",
        "--seed-data",
        "2",
        "--chains",
        "2",
        "--warmup",
        "100",
        "--draws",
        "100",
        "--output",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("exact model work:"))
        .unwrap_or_else(|| panic!("no work line in:\n{stdout}"));
    assert!(
        line.contains("forward solves")
            && line.contains("adjoint solves")
            && line.contains("per iteration")
            && line.contains("per effective sample"),
        "{line}"
    );
    assert!(stdout.contains("theta.3") && !stdout.contains("theta.4"));
    assert!(
        stdout.contains("model: 8x8 Q1 mesh, 3 Karhunen-Loeve modes with prior sd 1"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_gives_one_clear_line() {
    let dir = temp_dir("errors");
    let out_dir = dir.join("out");
    let o = out_dir.to_str().unwrap();
    assert_one_line_error(
        &["sample", "--model", "nope", "--output", o],
        "unknown model \"nope\"",
    );
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--step-size",
            "0",
            "--output",
            o,
        ],
        "--step-size must be a finite positive number",
    );
    assert_one_line_error(
        &["sample", "--model", "banana", "--steps", "0", "--output", o],
        "--steps must be at least 1",
    );
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "elliptic-pde",
            "--mesh",
            "1",
            "--output",
            o,
        ],
        "at least 2×2",
    );
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "elliptic-pde",
            "--kl-modes",
            "0",
            "--output",
            o,
        ],
        "modes",
    );
    assert_one_line_error(
        &["sample", "--model", "banana", "--mesh", "10", "--output", o],
        "--mesh does not apply to model banana",
    );
    // A model option's value is read by the model, which names the option.
    assert_one_line_error(
        &["sample", "--model", "banana", "--n", "ten", "--output", o],
        "--n cannot be \"ten\": invalid digit found in string",
    );
    let logistic = [
        "sample", "--model", "logistic", "--n", "50", "--d", "2", "--output", o,
    ];
    assert_one_line_error(
        &[&logistic[..], &["--missing", "drop-rows"]].concat(),
        "--missing applies to a data file, and model logistic simulates its data without one",
    );
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "logistic",
            "--data",
            "bank",
            "--missing",
            "skip",
            "--output",
            o,
        ],
        "--missing is \"skip\": use error or drop-rows",
    );
    // A network too large for memory is refused before anything is allocated or written
    // (it used to abort the process trying to allocate 720 GB).
    assert_one_line_error(
        &[
            "sample", "--model", "banana", "--method", "rns-hmc", "--hidden", "300000", "--output",
            o,
        ],
        "a network of 300000 hidden units would need 2164800000000 bytes",
    );
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--method",
            "vhmc",
            "--hidden",
            "300000",
            "--memory-limit",
            "1000000",
            "--output",
            o,
        ],
        "above the memory limit of 1000000 bytes (0.001 GiB): raise --memory-limit or change --hidden",
    );
    assert!(!out_dir.exists(), "a refused run leaves no files");
    // A numeric column whose first value is missing: refused by default, not read as text.
    let nan_first = dir.join("nan-first.csv");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&nan_first, "a,y\nNaN,0\n2,1\n3,0\n4,1\n").unwrap();
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "logistic",
            "--data",
            nan_first.to_str().unwrap(),
            "--output",
            o,
        ],
        "nan-first.csv:2: missing value \"NaN\" in column \"a\"",
    );
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--method",
            "rns-hmc",
            "--surrogate-steps-factor",
            "long",
            "--output",
            o,
        ],
        "--surrogate-steps-factor must be `auto`, `nuts` or a whole number of at least 1, got \"long\"",
    );
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--method",
            "rns-rmhmc",
            "--rmhmc-step-size",
            "0.5",
            "--surrogate-steps-factor",
            "nuts",
            "--output",
            o,
        ],
        "--surrogate-steps-factor nuts is for rns-hmc and arns-hmc with the exact MH step",
    );
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--method",
            "vhmc",
            "--surrogate-steps-factor",
            "auto",
            "--output",
            o,
        ],
        "--surrogate-steps-factor is for rns-hmc and arns-hmc",
    );
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--standardize",
            "--output",
            o,
        ],
        "--standardize does not apply to model banana",
    );
    // Clap's own errors (an unknown option) exit with 2 and name the option.
    let out = shmc(&["sample", "--model", "banana", "--bogus"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--bogus"));

    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("broken.csv");
    std::fs::write(&data, "x1,y\n0.5,1\n0.7\n").unwrap();
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "logistic",
            "--data",
            data.to_str().unwrap(),
            "--output",
            o,
        ],
        "broken.csv:3:",
    );
    let init = dir.join("init.json");
    std::fs::write(&init, "[1.0]").unwrap();
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--init",
            init.to_str().unwrap(),
            "--output",
            o,
        ],
        "initial values have 1 entries but the model has 2 parameters",
    );
    // Values by name are a Stan model's (CmdStan's init file); the banana has no such names.
    std::fs::write(&init, r#"{"b1": 0.5, "b2": 1}"#).unwrap();
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--init",
            init.to_str().unwrap(),
            "--output",
            o,
        ],
        "init.json:1: initial values by name are read by a Stan model; this model takes an array",
    );
    // A file where the output folder should be.
    let blocker = dir.join("blocker");
    std::fs::write(&blocker, "").unwrap();
    let nested = blocker.join("out");
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--output",
            nested.to_str().unwrap(),
        ],
        "blocker",
    );
    assert!(!out_dir.exists(), "failed runs leave no output behind");
}

#[test]
fn models_lists_every_builtin_model() {
    let out = shmc(&["models"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "logistic",
        "probit",
        "banana",
        "gaussian-conjugate",
        "gaussian-32",
        "beta-binomial",
        "gp-hyper",
        "elliptic-pde",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
}

/// A long `shmc sample` of the logistic simulation with `chains` chains on two threads,
/// writing to `dir`.
fn spawn_long_run(dir: &Path, chains: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_shmc"))
        .env("RAYON_NUM_THREADS", "2")
        .args([
            "sample", "--model", "logistic", "--n", "20000", "--chains", chains, "--warmup", "5",
            "--draws", "100000", "--quiet", "--output",
        ])
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (up to a minute) until `files` CSVs in `dir` hold at least 3 draws each.
fn wait_for_draws(dir: &Path, files: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let started: Vec<PathBuf> = if dir.exists() { csv_files(dir) } else { vec![] };
        let ready = started
            .iter()
            .filter(|f| read_stan_csv(f).is_ok_and(|c| c.columns[0].len() >= 4))
            .count()
            >= files;
        if ready || std::time::Instant::now() > deadline {
            break;
        }
    }
}

/// SIGINT (Ctrl-C) mid-run, with 4 chains on 2 threads: the running chains stop after their
/// current iteration, the queued ones make no draw, the summary covers the chains that made
/// draws, the exit code is 130 (128 + SIGINT, the shell's convention) and every file says it
/// was interrupted and holds complete rows only.
#[test]
fn ctrl_c_stops_cleanly_keeping_finished_draws() {
    let dir = temp_dir("interrupt");
    let child = spawn_long_run(&dir, "4");
    wait_for_draws(&dir, 2);
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("beta.50") && stdout.contains("R_hat"),
        "a summary of the finished draws: {stdout}"
    );
    assert!(
        stderr(&out).contains("interrupted: the CSV files hold the"),
        "{}",
        stderr(&out)
    );
    let mut with_draws = 0;
    for file in csv_files(&dir) {
        let csv = read_stan_csv(&file).unwrap();
        let kept = csv.columns[0].len();
        assert!(
            csv.interrupted && !csv.complete,
            "the file says it was interrupted"
        );
        assert!(kept < 100_000, "{kept} draws kept");
        assert!(
            csv.columns.iter().all(|c| c.len() == kept),
            "every row complete"
        );
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.ends_with('\n'), "the last line is complete");
        with_draws += usize::from(kept >= 3);
    }
    assert!(with_draws >= 2, "{with_draws} files with draws");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigkill_leaves_complete_rows_that_summary_reads() {
    // 4 chains on 2 cores, all running at once (a thread each), killed mid-run.
    let dir = temp_dir("sigkill");
    let mut child = spawn_long_run(&dir, "4");
    wait_for_draws(&dir, 4);
    let seen: usize = csv_files(&dir)
        .iter()
        .map(|f| read_stan_csv(f).map_or(0, |c| c.columns[0].len()))
        .sum();
    child.kill().unwrap();
    child.wait().unwrap();
    let mut total = 0;
    for file in csv_files(&dir) {
        let csv = read_stan_csv(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let kept = csv.columns[0].len();
        assert!(
            csv.columns.iter().all(|c| c.len() == kept),
            "every row complete"
        );
        total += kept;
    }
    assert!(
        total >= seen,
        "{total} draws after the kill, {seen} seen before it"
    );
    let mut args = vec!["summary".to_string()];
    args.extend(csv_files(&dir).iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let summary = shmc(&args);
    assert!(summary.status.success(), "{}", stderr(&summary));
    assert!(String::from_utf8_lossy(&summary.stdout).contains("beta.50"));
    // The killed chains' files have no end block: the summary says so, not a complete run.
    assert!(
        stderr(&summary).contains("has no end block: its chain was killed or failed"),
        "{}",
        stderr(&summary)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// VHMC's published acceptance rule is approximate inference: the run says so on the terminal,
/// in every CSV (with the method name), and `shmc summary` repeats it. The exact default says
/// nothing of the kind.
#[test]
fn approximate_vhmc_is_labelled_everywhere() {
    for (approximate, name) in [(true, "vhmc-approximate"), (false, "vhmc")] {
        let dir = temp_dir(name);
        let mut args = vec![
            "sample",
            "--model",
            "beta-binomial",
            "--method",
            "vhmc",
            "--hidden",
            "50",
            "--chains",
            "2",
            "--draws",
            "100",
            "--warmup",
            "200",
            "--output",
            dir.to_str().unwrap(),
            "--quiet",
        ];
        if approximate {
            args.push("--approximate-acceptance");
        }
        let out = shmc(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.contains("APPROXIMATE"), approximate, "{stdout}");
        let files = csv_files(&dir);
        assert_eq!(files.len(), 2);
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            assert!(text.contains(&format!("shmc_method = {name}\n")), "{text}");
            // VHMC's own exact evaluations (MAP, Hessian, pilot) are counted in the footer.
            let own = text
                .split(" exact evaluations of its own")
                .next()
                .and_then(|t| t.rsplit(' ').next())
                .and_then(|n| n.parse::<u64>().ok());
            assert!(own.is_some_and(|n| n > 100), "{text}");
            assert_eq!(
                read_stan_csv(file).unwrap().approximate.is_some(),
                approximate
            );
        }
        let mut summary_args = vec!["summary"];
        summary_args.extend(files.iter().map(|f| f.to_str().unwrap()));
        let summary = shmc(&summary_args);
        assert!(summary.status.success(), "{}", stderr(&summary));
        let text = String::from_utf8_lossy(&summary.stdout);
        assert_eq!(text.contains("APPROXIMATE"), approximate, "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The draws of a run folder: every non-comment line of every CSV, file by file.
fn draw_lines(dir: &Path) -> Vec<String> {
    csv_files(dir)
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with('#'))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn draws_do_not_depend_on_the_number_of_threads() {
    // 4 chains on one thread run queued, on two in parallel; a surrogate method also trains
    // (faer's parallel products) inside each chain.
    for method in ["hmc", "rns-hmc"] {
        let runs: Vec<Vec<String>> = ["1", "2"]
            .iter()
            .map(|threads| {
                let dir = temp_dir(&format!("threads-{method}-{threads}"));
                // A small network for the method that trains one (hmc refuses --hidden).
                let network: &[&str] = match method {
                    "hmc" => &[],
                    _ => &["--hidden", "50"],
                };
                let out = Command::new(env!("CARGO_BIN_EXE_shmc"))
                    .env("RAYON_NUM_THREADS", threads)
                    .args([
                        "sample", "--model", "banana", "--method", method, "--chains", "4",
                        "--warmup", "200", "--draws", "100", "--seed", "9", "--quiet",
                    ])
                    .args(network)
                    .arg("--output")
                    .arg(&dir)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{}", stderr(&out));
                let lines = draw_lines(&dir);
                let _ = std::fs::remove_dir_all(&dir);
                lines
            })
            .collect();
        assert_eq!(runs[0].len(), 4 * 101, "{method}");
        assert!(
            runs[0] == runs[1],
            "{method}: the draws differ between 1 and 2 threads"
        );
    }
}

#[test]
fn four_lockstep_chains_run_on_one_rayon_thread_and_draw_as_without_lockstep() {
    // In lockstep each chain has a thread of its own, so the four run at once even on one
    // rayon thread, and draw what four chains each reading the data alone draw. A run that
    // hangs fails the test.
    let run = |threads: &str, lockstep: bool| -> Vec<String> {
        let dir = temp_dir(&format!("lockstep-{threads}-{lockstep}"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_shmc"));
        command.env("RAYON_NUM_THREADS", threads).args([
            "sample", "--model", "logistic", "--n", "3000", "--d", "5", "--chains", "4",
            "--warmup", "150", "--draws", "100", "--seed", "3", "--quiet", "--output",
        ]);
        command.arg(&dir);
        if !lockstep {
            command.arg("--no-lockstep");
        }
        let mut child = command
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed().as_secs() > 300 {
                child.kill().unwrap();
                panic!("{threads} thread(s), lockstep {lockstep}: no end after 5 minutes");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(status.success(), "{threads} thread(s), lockstep {lockstep}");
        let lines = draw_lines(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        lines
    };
    let together = run("1", true);
    assert_eq!(together.len(), 4 * 101);
    assert!(together == run("2", false), "lockstep changed the draws");
}

/// `shmc sample` of the banana with `method_args` over the paper's box [-4, 4]², two chains of
/// 100 warmup and 100 kept draws written to `dir`.
fn short_banana_grid_run(dir: &Path, method_args: &[&str]) -> Output {
    let mut args = vec!["sample", "--model", "banana", "--domain=-4:4,-4:4"];
    args.extend_from_slice(method_args);
    args.extend([
        "--chains",
        "2",
        "--draws",
        "100",
        "--warmup",
        "100",
        "--output",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    shmc(&args)
}

/// `--force-interpolation multilinear` reads grid HMC's force from the cell corners: one more
/// point per coordinate to precompute (81² on the banana's [-4, 4]² at 0.1, against the
/// centres' 80²), and each chain's CSV says how its force was read; a reading that does not
/// exist is named with the ones that do.
#[test]
fn grid_hmc_reads_its_force_as_asked_and_says_so() {
    for (reading, points) in [("constant", 6400), ("multilinear", 6561)] {
        let dir = temp_dir(&format!("grid-{reading}"));
        let out = short_banana_grid_run(
            &dir,
            &["--method", "grid-hmc", "--force-interpolation", reading],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("precompute: {points} exact evaluations")),
            "{stdout}"
        );
        let files = csv_files(&dir);
        assert_eq!(files.len(), 2);
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            assert!(text.contains("shmc_method = grid-hmc\n"), "{text}");
            assert!(text.contains("grid_cell = 0.1\n"), "{text}");
            assert!(
                text.contains(&format!("force_interpolation = {reading}\n")),
                "{text}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let err = stderr(&shmc(&[
        "sample",
        "--model",
        "banana",
        "--method",
        "grid-hmc",
        "--force-interpolation",
        "cubic",
    ]));
    assert!(
        err.contains("cubic") && err.contains("multilinear"),
        "{err}"
    );
}

#[test]
fn complete_grid_variant_is_labelled_everywhere() {
    for (approximate, name) in [(true, "sg-hmc-complete"), (false, "sg-hmc")] {
        let dir = temp_dir(name);
        let mut args = vec!["--method", "sg-hmc", "--level", "5"];
        if approximate {
            args.push("--approximate-acceptance");
        }
        let out = short_banana_grid_run(&dir, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.contains("APPROXIMATE"), approximate, "{stdout}");
        assert_eq!(stdout.contains("KL(P||Q) <= 2 sup|U - U~| ~ "), approximate);
        assert!(
            stdout.contains("precompute: 145 exact evaluations"),
            "{stdout}"
        );
        let files = csv_files(&dir);
        assert_eq!(files.len(), 2);
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            assert!(text.contains(&format!("shmc_method = {name}\n")), "{text}");
            assert!(
                text.contains("# shmc precompute: 145 exact evaluations"),
                "{text}"
            );
            let label = read_stan_csv(file).unwrap().approximate;
            assert_eq!(label.is_some(), approximate);
            if let Some(label) = label {
                assert!(label.contains("KL(P||Q) <= 2 sup|U - U~| ~ "), "{label}");
            }
        }
        let mut summary_args = vec!["summary"];
        summary_args.extend(files.iter().map(|f| f.to_str().unwrap()));
        let summary = shmc(&summary_args);
        assert!(summary.status.success(), "{}", stderr(&summary));
        let text = String::from_utf8_lossy(&summary.stdout);
        assert_eq!(text.contains("APPROXIMATE"), approximate, "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A write the system refuses part way (here a file size limit, `ulimit -f 1`, with its
/// signal ignored so the write fails as on a full disk) is one line naming the file. (A
/// symlink to /dev/full named like a chain file would be a file that is not shmc's, which a
/// run refuses before writing.)
#[test]
fn a_refused_write_is_one_clear_line() {
    let dir = temp_dir("fsize");
    let command = format!(
        "trap '' XFSZ; ulimit -f 1 && exec {} sample --model banana --chains 1 --output {}",
        env!("CARGO_BIN_EXE_shmc"),
        dir.display()
    );
    let out = Command::new("sh").args(["-c", &command]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: ") && err.contains("banana-1.csv: File too large"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_grid_too_large_is_one_line_naming_the_option() {
    let dir = temp_dir("too-large");
    let out_dir = dir.to_str().unwrap();
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "logistic",
            "--n",
            "100",
            "--d",
            "10",
            "--method",
            "grid-hmc",
            "--cell",
            "0.01",
            "--domain=-1:1,-1:1,-1:1,-1:1,-1:1,-1:1,-1:1,-1:1,-1:1,-1:1",
            "--output",
            out_dir,
            "--quiet",
        ],
        "above the memory limit",
    );
    // Refused before the first draw: no header-only file is left to look like a run.
    assert!(
        !dir.exists() || csv_files(&dir).is_empty(),
        "{:?}",
        csv_files(&dir)
    );
    let out = shmc(&[
        "sample",
        "--model",
        "banana",
        "--method",
        "sg-hmc",
        "--level",
        "12",
        "--domain=-4:4,-4:4",
        // The kept draws (10 × 9 × 8 bytes) and the chain's file buffer (9 KiB) fit in the
        // limit; the grid (32 769 points, 263 153 bytes) does not.
        "--chains",
        "1",
        "--draws",
        "10",
        "--memory-limit",
        "100000",
        "--output",
        out_dir,
        "--quiet",
    ]);
    let err = stderr(&out);
    assert!(
        err.contains("--memory-limit") && err.contains("--level") && !err.contains("--cell"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    let out = shmc(&[
        "sample",
        "--model",
        "banana",
        "--method",
        "grid-hmc",
        "--cell",
        "0.001",
        "--domain=-4:4,-4:4",
        "--memory-limit",
        "1000000",
        "--output",
        out_dir,
        "--quiet",
    ]);
    let err = stderr(&out);
    assert!(err.contains("change --cell"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sbc_prints_the_verdict_and_writes_ranks_histograms_and_summary() {
    let dir = temp_dir("sbc");
    let out = shmc(&[
        "sbc",
        "--model",
        "gaussian-conjugate",
        "--reps",
        "20",
        "--warmup",
        "200",
        "--draws",
        "200",
        "--thin",
        "5",
        "--output",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "SBC of gaussian-conjugate with hmc (1 chain(s) x 200 draws after 200 warmup, seed 1)",
        "thinning: every 5 draw(s) of each chain kept (as given); 40 kept draws per replication",
        "mu.1",
        "verdict: ",
        "Bonferroni over 2 parameter tests",
    ] {
        assert!(stdout.contains(expected), "{expected:?} not in {stdout}");
    }
    let ranks = std::fs::read_to_string(dir.join("ranks.csv")).unwrap();
    let mut lines = ranks.lines();
    assert_eq!(
        lines.next().unwrap(),
        "replication,data_seed,sampler_seed,min_ess,divergences,seconds,mu.1,mu.2"
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 20);
    for row in rows {
        let rank: usize = row.rsplit(',').next().unwrap().parse().unwrap();
        assert!(rank <= 40, "{row}");
    }
    for file in ["rank-mu.1.svg", "rank-mu.2.svg"] {
        let svg = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(svg.starts_with("<svg"), "{file}");
    }
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(stdout.starts_with(&summary), "{summary}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sbc_labels_an_approximate_method_and_refuses_bad_settings() {
    let dir = temp_dir("sbc-errors");
    let o = dir.to_str().unwrap();
    let base = ["sbc", "--model", "banana", "--quiet", "--output", o];
    let with = |extra: &[&'static str]| [&base[..], extra].concat();
    assert_one_line_error(
        &with(&["--reps", "10"]),
        "--replications must be at least 20 for the uniformity test",
    );
    assert_one_line_error(&with(&["--thin", "0"]), "--thin must be at least 1");
    assert_one_line_error(
        &with(&["--thin", "2000"]),
        "--thin 2000 keeps no draw of a chain of --draws 1000",
    );
    assert_one_line_error(&with(&["--chains", "0"]), "--chains must be at least 1");
    assert!(!dir.exists(), "a refused run leaves no files");
    let out = shmc(&[
        "sbc",
        "--model",
        "banana",
        "--method",
        "vhmc",
        "--approximate-acceptance",
        "--hidden",
        "20",
        "--reps",
        "20",
        "--warmup",
        "300",
        "--draws",
        "100",
        "--thin",
        "5",
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("with vhmc-approximate")
            && stdout.contains("APPROXIMATE inference")
            && stdout.contains("calibration measures its bias"),
        "{stdout}"
    );
}

/// Everything whose size a user drives is sized before it is allocated: one line naming the
/// option that drives it and --memory-limit, exit 1, and no file written.
#[test]
fn sizes_above_the_memory_limit_name_the_option_to_change() {
    let dir = temp_dir("memory");
    std::fs::create_dir_all(&dir).unwrap();
    let out_dir = dir.join("out");
    let o = out_dir.to_str().unwrap();
    // A text column of identifiers one-hot encodes into a column per row.
    let ids = dir.join("ids.csv");
    let rows: String = (0..200).map(|i| format!("id{i},{}\n", i % 2)).collect();
    std::fs::write(&ids, format!("id,y\n{rows}")).unwrap();
    let ids = ids.to_str().unwrap();
    for (args, needle) in [
        (
            vec![
                "--model",
                "logistic",
                "--data",
                ids,
                "--memory-limit",
                "100000",
            ],
            "ids.csv: the design matrix of 200 rows × 199 columns (column \"id\" is categorical \
             with 200 levels) would need 331136 bytes",
        ),
        (
            vec!["--model", "logistic", "--n", "100000000", "--d", "100"],
            "the simulated data of 100000000 rows × 100 features would need 240000000000 bytes",
        ),
        (
            vec![
                "--model",
                "elliptic-pde",
                "--mesh",
                "500",
                "--memory-limit",
                "100000000",
            ],
            "a 500×500 finite-element mesh with 20 Karhunen–Loève modes would need",
        ),
        (
            // The mesh fits; 40 chains' factorization workspaces (one each) do not.
            vec![
                "--model",
                "elliptic-pde",
                "--mesh",
                "60",
                "--chains",
                "40",
                "--memory-limit",
                "100000000",
            ],
            "40 chains evaluating at once, with 3159904 bytes of the model's scratch each would \
             need 126396160 bytes",
        ),
        (
            vec![
                "--model",
                "banana",
                "--draws",
                "100000000",
                "--memory-limit",
                "1000000000",
            ],
            "keeping 100000000 draws of 4 chains with 9 columns in memory would need \
             28800000000 bytes",
        ),
    ] {
        let driver = match args[1] {
            _ if args.contains(&"--chains") => "--chains",
            "banana" => "--draws",
            "elliptic-pde" => "--mesh",
            _ if args[2] == "--data" => "--data",
            _ => "--n",
        };
        let mut full = vec!["sample"];
        full.extend(&args);
        full.extend(["--output", o]);
        assert_one_line_error(&full, needle);
        assert_one_line_error(&full, &format!("raise --memory-limit or change {driver}"));
    }
    assert!(!out_dir.exists(), "a refused run leaves no files");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A saved surrogate that is not one, and a CmdStan CSV cut short in a row: one line naming
/// the file and the line.
#[test]
fn corrupt_surrogate_and_draw_files_name_the_file_and_line() {
    let dir = temp_dir("corrupt");
    std::fs::create_dir_all(&dir).unwrap();
    let surrogate = dir.join("net.json");
    std::fs::write(
        &surrogate,
        "{\"format\": \"shmc-surrogate\",\n \"version\": 2,\n",
    )
    .unwrap();
    let o = dir.join("out");
    assert_one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--method",
            "rns-hmc",
            "--surrogate",
            surrogate.to_str().unwrap(),
            "--output",
            o.to_str().unwrap(),
        ],
        "net.json:3: not a valid surrogate file",
    );
    assert!(
        !o.exists() || csv_files(&o).is_empty(),
        "no header-only files"
    );
    let draws = dir.join("chain.csv");
    std::fs::write(&draws, "# x\nlp__,a\n1,2\n3\n").unwrap();
    assert_one_line_error(
        &["summary", draws.to_str().unwrap()],
        "chain.csv:4: 1 fields, expected 2",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_plots_folder_that_cannot_be_made_is_one_line_naming_it() {
    let dir = temp_dir("plots");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let target = file.join("figs");
    let out = shmc(&[
        "bench",
        "lr-sim",
        "--quick",
        "--plots",
        target.to_str().unwrap(),
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    let stderr = stderr(&out);
    assert!(!out.status.success());
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains(&*target.to_string_lossy()), "{stderr}");
    // It failed before any sampling.
    assert!(!stderr.contains("running HMC"), "{stderr}");
}

#[test]
fn bench_plots_are_for_the_regressions() {
    let dir = temp_dir("plots-pde");
    let out = shmc(&["bench", "pde", "--quick", "--plots", dir.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("--plots draws the journal's figures for lr-sim, bank and a9a"),
        "{err}"
    );
    assert!(!dir.exists(), "nothing is made for a run that is refused");
}

#[test]
fn bench_sbc_prints_its_table_and_writes_json_rows() {
    let dir = temp_dir("bench-sbc");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("sbc.json");
    let out = shmc(&[
        "bench",
        "sbc",
        "--quick",
        "--models",
        "gaussian-conjugate",
        "--methods",
        "hmc,vhmc-approximate",
        "--jobs",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("vhmc-approximate (APPROXIMATE)") && stdout.contains("2 cells in"),
        "{stdout}"
    );
    let rows = json_rows(&json);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["method"], "hmc");
    assert!(rows[0]["approximate"].is_null());
    assert!(
        rows[1]["approximate"]
            .as_str()
            .unwrap()
            .contains("APPROXIMATE")
    );
    for row in &rows {
        assert!(row["min_p_value"].as_f64().unwrap().is_finite(), "{row}");
        assert!(["pass", "fail"].contains(&row["verdict"].as_str().unwrap()));
    }
}

/// `--problems` runs only the named parts of `bench grid`: here the logistic regression's
/// four rows, whose HMC accepts as the paper's did (0.9225; ten replicates of 800 draws put
/// some 0.005 of noise on the mean acceptance, the pilot's tolerance is 0.005); elsewhere it is
/// refused, and an unknown part is named.
#[test]
fn bench_grid_runs_only_the_problems_named() {
    let dir = temp_dir("bench-grid-problems");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("rows.json");
    let out = shmc(&[
        "bench",
        "grid",
        "--quick",
        "--problems",
        "logistic-2d",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = json_rows(&json);
    std::fs::remove_dir_all(&dir).unwrap();
    let problems: Vec<&str> = rows
        .iter()
        .map(|r| r["problem"].as_str().unwrap())
        .collect();
    assert_eq!(problems, ["logistic-2d"; 4]);
    let keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["hmc", "rns", "grid", "grid-multilinear"]);
    let hmc = &rows[0];
    let accept = hmc["acceptance"].as_f64().unwrap();
    assert!((accept - 0.9225).abs() < 0.015, "HMC accepts {accept}");
    // The multilinear force accepts as HMC does (0.919 against 0.919 over 40 replicates of
    // 3200 draws), the paper's constant one less (0.86).
    let multilinear = rows[3]["acceptance"].as_f64().unwrap();
    let constant = rows[2]["acceptance"].as_f64().unwrap();
    assert!(
        (multilinear - accept).abs() < 0.015 && constant < accept - 0.03,
        "HMC {accept}, constant {constant}, multilinear {multilinear}"
    );
    let step = hmc["step_size"].as_f64().unwrap();
    assert!(rows.iter().all(|r| r["step_size"].as_f64() == Some(step)));
    for other in ["lr-sim", "sbc"] {
        let err = stderr(&shmc(&["bench", other, "--quick", "--problems", "pde-5"]));
        assert!(
            err.contains("--problems is for bench grid and bench ttr"),
            "{other}: {err}"
        );
    }
    let err = stderr(&shmc(&["bench", "grid", "--problems", "banana,nope"]));
    assert!(err.contains("nope") && err.contains("gp-hyper"), "{err}");
}

/// `--problems` runs only the named problems of `bench ttr`: here the 30×30 PDE's four rows,
/// its surrogate row on the Laplace plan with the cubic term; a grid part is refused there,
/// naming the problems it has.
#[test]
fn bench_ttr_runs_only_the_problems_named() {
    let dir = temp_dir("bench-ttr-problems");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("rows.json");
    let out = shmc(&[
        "bench",
        "ttr",
        "--quick",
        "--problems",
        "pde",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = json_rows(&json);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert!(rows.iter().all(|r| r["problem"] == "pde"), "{rows:?}");
    let surrogate = rows[3]["method"].as_str().unwrap();
    assert!(surrogate.contains("cubic"), "{surrogate}");
    let err = stderr(&shmc(&["bench", "ttr", "--problems", "pde-5"]));
    assert!(
        err.contains("bench ttr has no problem \"pde-5\"") && err.contains("pde-fine"),
        "{err}"
    );
}

#[test]
fn bench_sbc_options_belong_to_bench_sbc() {
    let err = stderr(&shmc(&["bench", "lr-sim", "--quick", "--models", "banana"]));
    assert!(
        err.contains("--models and --jobs are for bench sbc"),
        "{err}"
    );
    let err = stderr(&shmc(&[
        "bench",
        "lr-sim",
        "--quick",
        "--methods",
        "rns-hmc",
    ]));
    assert!(err.contains("--methods: no row \"rns-hmc\""), "{err}");
    let err = stderr(&shmc(&["bench", "sbc", "--quick", "--steps", "5"]));
    assert!(
        err.contains("bench sbc runs each method as configured"),
        "{err}"
    );
}
