//! An output folder belongs to one run: a second run on a folder in use is refused (and the
//! first's files stay whole), a killed run's lock blocks nothing, an earlier run's files are
//! never overwritten without --overwrite (which removes shmc's files and nothing else), and a
//! run the process's limits cannot hold is refused before it creates any file.

mod binary;
use binary::{shmc, text};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn temp_dir(name: &str) -> PathBuf {
    binary::temp_dir("folder", name)
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_shmc"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A banana run of 2 chains into `dir` with `seed`: 100 000 draws, under a second.
fn banana<'a>(seed: &'a str, dir: &'a Path) -> Vec<&'a str> {
    let dir = dir.to_str().unwrap();
    vec![
        "sample", "--model", "banana", "--chains", "2", "--draws", "100000", "--seed", seed,
        "--quiet", "--output", dir,
    ]
}

/// Waits until `ready()` or a minute has passed.
fn wait_until(mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Each chain's file in `dir`, but the lines that hold the folder or a time.
fn rows(dir: &Path, model: &str, chains: usize) -> Vec<Vec<String>> {
    (1..=chains)
        .map(|k| {
            let file = std::fs::read_to_string(dir.join(format!("{model}-{k}.csv"))).unwrap();
            file.lines()
                .filter(|l| !(l.contains("file = ") || l.contains(" seconds")))
                .map(String::from)
                .collect()
        })
        .collect()
}

/// The refusal of a failed run: its one line on stderr.
fn refusal(out: &Output) -> String {
    let err = text(&out.stderr);
    assert!(!out.status.success(), "not refused: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

/// The names and contents of the files in `dir`, sorted (the lock file by name only: it names
/// the last run that took the lock, refused or not).
fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = match name.as_str() {
                ".shmc.lock" => Vec::new(),
                _ => std::fs::read(&path).unwrap(),
            };
            (name, bytes)
        })
        .collect();
    files.sort();
    files
}

fn names(dir: &Path) -> Vec<String> {
    listing(dir).into_iter().map(|(name, _)| name).collect()
}

/// The two runs on one folder: the second, with or without --overwrite, is refused
/// with one line naming the first's pid, and the first ends with the very files it makes
/// alone.
#[test]
fn a_second_run_on_a_folder_in_use_is_refused_and_the_first_ends_whole() {
    let (shared, alone) = (temp_dir("shared"), temp_dir("alone"));
    let first = spawn(&banana("1", &shared));
    wait_until(|| shared.join("banana-2.csv").exists());
    for overwrite in [false, true] {
        let mut args = banana("2", &shared);
        if overwrite {
            args.push("--overwrite");
        }
        let err = refusal(&shmc(&args));
        assert!(
            err.contains("another run is writing to this folder")
                && err.contains(&format!("pid {}", first.id())),
            "{err}"
        );
    }
    let out = first.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = shmc(&banana("1", &alone));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(rows(&shared, "banana", 2) == rows(&alone, "banana", 2));
    let file = std::fs::read_to_string(shared.join("banana-1.csv")).unwrap();
    assert_eq!(file.matches("Elapsed Time").count(), 1);
    let _ = std::fs::remove_dir_all(&shared);
    let _ = std::fs::remove_dir_all(&alone);
}

/// A run killed (SIGKILL) while it holds the folder leaves its lock file behind, naming it; the
/// kernel dropped its lock, so resuming it, or a new run with --overwrite, goes ahead.
#[test]
fn a_killed_runs_lock_file_blocks_nothing() {
    let dir = temp_dir("killed");
    let mut run = spawn(&banana("1", &dir));
    let lock = dir.join(".shmc.lock");
    let holder = format!("pid {} on host", run.id());
    wait_until(|| std::fs::read_to_string(&lock).is_ok_and(|t| t.contains(&holder)));
    run.kill().unwrap();
    run.wait().unwrap();
    assert!(std::fs::read_to_string(&lock).unwrap().contains(&holder));
    let out = shmc(&["sample", "--resume", dir.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut again = banana("2", &dir);
    again.push("--overwrite");
    let out = shmc(&again);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The 4-chain run, then a 2-chain run of another data set into the same folder: the
/// second is refused, naming --overwrite, and nothing changes; with --overwrite the first
/// run's files are removed (its chains 3 and 4 too, and the report page of it, #48) and the
/// user's own files stay.
#[test]
fn a_folder_holding_an_earlier_run_is_refused_unless_overwrite() {
    let dir = temp_dir("reused");
    let path = dir.to_str().unwrap();
    let small = [
        "--warmup", "50", "--draws", "50", "--quiet", "--output", path,
    ];
    let first = [
        &["sample", "--model", "banana", "--chains", "4"],
        &small[..],
    ]
    .concat();
    let out = shmc(&first);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = shmc(&["report", path]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dir.join("report.html").exists());
    std::fs::write(dir.join("notes.txt"), "my notes").unwrap();
    std::fs::write(dir.join("other.csv"), "a,b\n1,2\n").unwrap();
    let before = listing(&dir);
    let second = [
        &[
            "sample", "--model", "logistic", "--n", "50", "--d", "2", "--chains", "2",
        ],
        &small[..],
    ]
    .concat();
    let err = refusal(&shmc(&second));
    assert!(
        err.contains("holds the files of an earlier run") && err.contains("--overwrite"),
        "{err}"
    );
    assert!(listing(&dir) == before, "a refused run changed the folder");
    let out = shmc(&[&second[..], &["--overwrite"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("removed"),
        "{}",
        text(&out.stdout)
    );
    let left: Vec<String> = names(&dir)
        .into_iter()
        .filter(|n| !n.starts_with("logistic-"))
        .collect();
    assert_eq!(
        left,
        [".shmc.lock", "notes.txt", "other.csv", "shmc-run.json"]
    );
    assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"my notes");
    assert_eq!(std::fs::read(dir.join("other.csv")).unwrap(), b"a,b\n1,2\n");
    let settings = std::fs::read_to_string(dir.join("shmc-run.json")).unwrap();
    assert!(settings.contains("logistic"), "{settings}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The folder's files but shmc's lock file, which a refused run leaves behind (the lock is
/// taken before the folder is read, so that two runs cannot both find it free).
fn users_listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = listing(dir);
    files.retain(|(name, _)| name != ".shmc.lock");
    files
}

/// The folder of a user's own files named as a run's would be (a CSV of notes, a
/// checkpoint of another program): the run is refused, with `--overwrite` too, naming the
/// file, and every file is as it was; a user's file beside an earlier run's is refused before
/// the earlier run is removed.
#[test]
fn a_users_files_named_like_a_runs_are_never_written_over() {
    let dir = temp_dir("users");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.to_str().unwrap();
    let run = [
        "sample", "--model", "banana", "--chains", "2", "--warmup", "10", "--draws", "10",
        "--quiet", "--output", path,
    ];
    std::fs::write(dir.join("banana-1.csv"), "my precious notes\n").unwrap();
    std::fs::write(dir.join("banana-1.checkpoint.json"), "{\"mine\":1}").unwrap();
    // Every file, the lock file too: a refused run leaves no lock file of its own behind.
    let before = listing(&dir);
    for overwrite in [&[][..], &["--overwrite"][..]] {
        let err = refusal(&shmc(&[&run[..], overwrite].concat()));
        assert!(
            err.contains("banana-1.csv: not a file of an earlier shmc run"),
            "{err}"
        );
        assert!(listing(&dir) == before, "a refused run changed the folder");
    }
    std::fs::remove_file(dir.join("banana-1.csv")).unwrap();
    let err = refusal(&shmc(&run));
    assert!(
        err.contains("banana-1.checkpoint.json: not a file"),
        "{err}"
    );
    // An earlier run of 2 chains, and the user's checkpoint of a third chain's name.
    std::fs::remove_file(dir.join("banana-1.checkpoint.json")).unwrap();
    assert!(shmc(&run).status.success());
    std::fs::write(dir.join("banana-3.checkpoint.json"), "{\"mine\":3}").unwrap();
    let before = users_listing(&dir);
    let mut three = run.to_vec();
    three[4] = "3";
    three.push("--overwrite");
    let err = refusal(&shmc(&three));
    assert!(
        err.contains("banana-3.checkpoint.json: not a file"),
        "{err}"
    );
    assert!(
        users_listing(&dir) == before,
        "the earlier run was removed before the refusal"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under `ulimit -n 64`, 100 chains (each holding its CSV open) are refused before any file is
/// created, naming --chains and the limit, whether or not the folder exists.
#[test]
fn chains_beyond_the_open_file_limit_are_refused_before_any_file() {
    let dir = temp_dir("nofile");
    for exists in [false, true] {
        if exists {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let command = format!(
            "ulimit -n 64 && exec {} sample --model banana --chains 100 --warmup 10 --draws 10 \
             --quiet --output {}",
            env!("CARGO_BIN_EXE_shmc"),
            dir.display()
        );
        let out = Command::new("sh").args(["-c", &command]).output().unwrap();
        let err = refusal(&out);
        assert!(
            err.contains("--chains 100 ") && err.contains("limit of 64 open files"),
            "{err}"
        );
        assert_eq!(dir.exists(), exists);
        if exists {
            assert!(names(&dir).is_empty(), "{:?}", names(&dir));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The chains' write buffers count against --memory-limit, before any file is created.
#[test]
fn chains_whose_write_buffers_exceed_the_memory_limit_are_refused() {
    let dir = temp_dir("buffers");
    let out = shmc(&[
        "sample",
        "--model",
        "banana",
        "--chains",
        "500",
        "--warmup",
        "1",
        "--draws",
        "1",
        "--memory-limit",
        "1000000",
        "--output",
        dir.to_str().unwrap(),
    ]);
    let err = refusal(&out);
    assert!(
        err.contains("write buffers of 500 chains") && err.contains("--chains"),
        "{err}"
    );
    assert!(!dir.exists());
}

/// A short calibration of `model` into `dir`, with `extra`.
fn calibration<'a>(model: &'a str, dir: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "sbc", "--model", model, "--reps", "20", "--draws", "100", "--warmup", "100", "--thin",
        "5", "--jobs", "1", "--quiet", "--output",
    ];
    args.push(dir.to_str().unwrap());
    args.extend(extra);
    args
}

/// The calibration folders: a gaussian-conjugate calibration into a banana one's folder
/// is refused and, with --overwrite, leaves no banana histogram beside its own; a user's
/// `ranks.csv` is never written over; a calibration into a sample run's folder, and a sample
/// run into a calibration's, are refused; a part run again with another seed is refused; and a
/// manifest that lists a file outside the folder is refused before anything is removed.
#[test]
fn a_calibrations_folder_belongs_to_it() {
    let dir = temp_dir("sbc");
    assert!(shmc(&calibration("banana", &dir, &[])).status.success());
    assert!(names(&dir).contains(&"rank-beta.1.svg".to_string()));
    let before = users_listing(&dir);
    let err = refusal(&shmc(&calibration("gaussian-conjugate", &dir, &[])));
    assert!(err.contains("holds the files of an earlier run"), "{err}");
    assert!(
        users_listing(&dir) == before,
        "a refused run changed the folder"
    );
    let done = shmc(&calibration("gaussian-conjugate", &dir, &["--overwrite"]));
    assert!(done.status.success(), "{}", text(&done.stderr));
    let after = names(&dir);
    assert!(after.contains(&"rank-mu.1.svg".to_string()), "{after:?}");
    assert!(
        !after.iter().any(|n| n.starts_with("rank-beta")),
        "{after:?}"
    );

    let users = temp_dir("sbc-users");
    std::fs::create_dir_all(&users).unwrap();
    std::fs::write(users.join("ranks.csv"), "my ranks\n").unwrap();
    let before = users_listing(&users);
    for overwrite in [&[][..], &["--overwrite"][..]] {
        let err = refusal(&shmc(&calibration("banana", &users, overwrite)));
        assert!(
            err.contains("ranks.csv: not a file of an earlier shmc run"),
            "{err}"
        );
        assert!(
            users_listing(&users) == before,
            "the user's ranks.csv changed"
        );
    }

    let run = temp_dir("sbc-sample");
    let sample = [
        "sample", "--model", "banana", "--chains", "1", "--warmup", "10", "--draws", "10",
        "--quiet", "--output",
    ];
    assert!(
        shmc(&[&sample[..], &[run.to_str().unwrap()]].concat())
            .status
            .success()
    );
    let err = refusal(&shmc(&calibration("banana", &run, &["--overwrite"])));
    assert!(err.contains("holds a sample run's files"), "{err}");
    let err = refusal(&shmc(
        &[&sample[..], &[dir.to_str().unwrap(), "--overwrite"]].concat(),
    ));
    assert!(err.contains("holds a calibration run's files"), "{err}");

    let part = temp_dir("sbc-part");
    let first = ["--first-replication", "1", "--count", "10"];
    assert!(shmc(&calibration("banana", &part, &first)).status.success());
    let before = users_listing(&part);
    let err = refusal(&shmc(&calibration(
        "banana",
        &part,
        &[&first[..], &["--seed", "9"]].concat(),
    )));
    assert!(err.contains("holds the files of an earlier run"), "{err}");
    assert!(users_listing(&part) == before, "the part was replaced");

    // The manifest of the run in `dir`, tampered to list a file outside the folder too.
    let outside = temp_dir("sbc-outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("notes.txt"), "not shmc's").unwrap();
    let escape = format!(
        "../{}/notes.txt",
        outside.file_name().unwrap().to_str().unwrap()
    );
    let text = std::fs::read_to_string(dir.join("shmc-sbc.json")).unwrap();
    let mut manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    manifest["files"]
        .as_array_mut()
        .unwrap()
        .push(escape.into());
    std::fs::write(dir.join("shmc-sbc.json"), manifest.to_string()).unwrap();
    let err = refusal(&shmc(&calibration(
        "gaussian-conjugate",
        &dir,
        &["--overwrite"],
    )));
    assert!(err.contains("not a file a calibration writes"), "{err}");
    assert!(
        outside.join("notes.txt").exists(),
        "an overwrite removed a file outside the folder"
    );
    for folder in [&dir, &users, &run, &part, &outside] {
        let _ = std::fs::remove_dir_all(folder);
    }
}
