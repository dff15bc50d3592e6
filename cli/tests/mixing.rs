//! `shmc summary` and `shmc report` combine only the chains of one run: files of another model,
//! data file or columns, and the same file given twice, are refused by `summary` (one `error:`
//! line each, naming both files and what differs) and left out by `report` (one note each);
//! chains that differ only in seed and chain id are one run. A CSV with a repeated column name
//! is an error naming the file and the column.

mod binary;
use binary::{shmc, stderr};

use std::path::{Path, PathBuf};
use std::process::Output;

fn temp_dir(name: &str) -> PathBuf {
    let dir = binary::temp_dir("mixing", name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A short run of `model` into `dir/name`, one chain unless `extra` gives `--chains`; the path
/// of its first chain's file.
fn run(dir: &Path, name: &str, model: &str, extra: &[&str]) -> PathBuf {
    let chains = match extra.iter().position(|a| *a == "--chains") {
        Some(k) => extra[k + 1],
        None => "1",
    };
    let out = dir.join(name);
    let extra: Vec<&str> = match extra.iter().position(|a| *a == "--chains") {
        Some(k) => [&extra[..k], &extra[k + 2..]].concat(),
        None => extra.to_vec(),
    };
    let mut args = vec![
        "sample",
        "--model",
        model,
        "--chains",
        chains,
        "--draws",
        "40",
        "--warmup",
        "40",
        "--quiet",
        "--output",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(&extra);
    let result = shmc(&args);
    assert!(result.status.success(), "{args:?}: {}", stderr(&result));
    out.join(format!("{model}-1.csv"))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `shmc summary FILES` refused: exit 1 and exactly the `error:` lines given as needles, one
/// each, in order.
fn refused(files: &[&Path], needles: &[&[&str]]) {
    let mut args = vec!["summary"];
    args.extend(files.iter().map(|f| path(f)));
    let out = shmc(&args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), needles.len(), "{err}");
    for (line, needles) in lines.iter().zip(needles) {
        assert!(line.starts_with("error: "), "{line}");
        for needle in *needles {
            assert!(line.contains(needle), "{needle:?} in {line}");
        }
    }
    assert!(
        stdout(&out).is_empty(),
        "nothing summarized: {}",
        stdout(&out)
    );
}

#[test]
fn summary_refuses_another_model_and_another_data_file_naming_both() {
    let dir = temp_dir("models");
    let banana = run(&dir, "b", "banana", &[]);
    let logistic = run(&dir, "l", "logistic", &["--n", "50", "--d", "2"]);
    refused(
        &[&banana, &logistic],
        &[&[
            path(&logistic),
            path(&banana),
            "are not one run: model \"logistic\" vs \"banana\"",
        ]],
    );
    // Two data sets with the same columns: only the data file tells them apart.
    let (a, b) = (dir.join("a.csv"), dir.join("b.csv"));
    std::fs::write(&a, "y,x\n1,0.5\n0,1.5\n1,-0.2\n0,2.0\n1,0.1\n0,1.1\n").unwrap();
    std::fs::write(&b, "y,x\n0,0.5\n1,1.5\n1,-0.2\n1,2.0\n0,0.1\n0,1.1\n").unwrap();
    let on_a = run(&dir, "a", "logistic", &["--data", path(&a)]);
    let on_b = run(&dir, "b2", "logistic", &["--data", path(&b)]);
    let banana_2 = run(&dir, "b3", "banana", &["--seed", "2"]);
    refused(
        &[&on_a, &on_b, &banana_2],
        &[
            &[path(&on_b), path(&on_a), "data file", path(&b)],
            &[path(&banana_2), "model \"banana\" vs \"logistic\""],
        ],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_same_file_given_twice_is_one_chain_not_two() {
    let dir = temp_dir("twice");
    let banana = run(&dir, "b", "banana", &[]);
    let again = dir.join("b").join("..").join("b").join("banana-1.csv");
    refused(
        &[&banana, &again],
        &[&[
            &format!("{} is {} again", path(&again), path(&banana)),
            "the same file given twice",
        ]],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn chains_of_other_seeds_and_ids_are_one_run() {
    let dir = temp_dir("seeds");
    let first = run(&dir, "s1", "banana", &["--seed", "1"]);
    // Chain 2 of a run with another seed and other draws: CmdStan users combine such chains.
    run(&dir, "s2", "banana", &["--seed", "7", "--chains", "2"]);
    let second = dir.join("s2").join("banana-2.csv");
    let out = shmc(&["summary", path(&first), path(&second)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("2 chains x 40 draws"),
        "{}",
        stdout(&out)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_repeated_column_name_is_an_error_naming_the_file_and_column() {
    let dir = temp_dir("columns");
    let banana = run(&dir, "b", "banana", &[]);
    let text = std::fs::read_to_string(&banana).unwrap();
    let edited = text.replacen(",beta.1,beta.2\n", ",beta.1,beta.1\n", 1);
    assert_ne!(edited, text, "the header names beta.1 and beta.2");
    let copy = dir.join("copy.csv");
    std::fs::write(&copy, edited).unwrap();
    let out = shmc(&["summary", path(&copy)]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("error: {}:", path(&copy)))
            && err.contains("column 9 repeats the name \"beta.1\" of column 8"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_leaves_out_another_runs_files_and_goes_on() {
    let dir = temp_dir("report");
    run(&dir, "b", "banana", &["--chains", "2"]);
    let logistic = run(&dir, "l", "logistic", &["--n", "50", "--d", "2"]);
    let folder = dir.join("b");
    let stray = folder.join("logistic-1.csv");
    std::fs::copy(&logistic, &stray).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(folder.join("banana-1.csv"), folder.join("banana-3.csv")).unwrap();
    let out = shmc(&["report", path(&folder)]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("not one run")).collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(
        notes[0].starts_with(&format!("note: {} and ", path(&stray)))
            && notes[0].contains("model \"logistic\" vs \"banana\"")
            && notes[0].ends_with(": left out"),
        "{err}"
    );
    #[cfg(unix)]
    assert!(
        err.contains("banana-3.csv is ") && err.contains("the same file given twice"),
        "{err}"
    );
    let page = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(
        page.contains("2 chain(s) of 40 draws"),
        "the banana's two chains"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A chain given again through a hard link, a copy of a chain, and a chain's file renamed for
/// another chain are each refused: one chain is not two.
#[test]
fn a_link_a_copy_or_a_renamed_chain_is_not_another_chain() {
    let dir = temp_dir("copies");
    let first = run(&dir, "b", "banana", &["--chains", "2"]);
    let second = dir.join("b").join("banana-2.csv");
    let link = dir.join("link.csv");
    std::fs::hard_link(&first, &link).unwrap();
    refused(
        &[&first, &link],
        &[&[&format!("{} is {} again", path(&link), path(&first))]],
    );
    let copy = dir.join("copy.csv");
    std::fs::copy(&first, &copy).unwrap();
    refused(
        &[&first, &copy],
        &[&[&format!(
            "{} holds the same draws as {}",
            path(&copy),
            path(&first)
        )]],
    );
    std::fs::create_dir_all(dir.join("x")).unwrap();
    let renamed = dir.join("x").join("banana-3.csv");
    std::fs::rename(&second, &renamed).unwrap();
    refused(
        &[&first, &renamed],
        &[&[&format!(
            "{} is named for chain 3, but its header says chain 2",
            path(&renamed)
        )]],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two runs given the same data path (`--data d.csv`) from two working directories, where the
/// path names other bytes, are refused by their data's SHA-256; the same bytes under another
/// name are one data set.
#[test]
fn the_same_data_path_holding_other_bytes_is_another_data_set() {
    let dir = temp_dir("data-bytes");
    let sampled_in = |cwd: &str, data: &str, rows: &str, seed: &str| {
        let cwd = dir.join(cwd);
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(cwd.join(data), rows).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_shmc"))
            .args([
                "sample", "--model", "logistic", "--data", data, "--chains", "1",
            ])
            .args(["--warmup", "40", "--draws", "40", "--seed", seed, "--quiet"])
            .args(["--output", "run"])
            .current_dir(&cwd)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        cwd.join("run").join("logistic-1.csv")
    };
    let a = "y,x\n1,0.5\n0,1.5\n1,-0.2\n0,2.0\n1,0.1\n0,1.1\n";
    let b = "y,x\n0,0.5\n1,1.5\n1,-0.2\n1,2.0\n0,0.1\n0,1.1\n";
    let on_a = sampled_in("w1", "d.csv", a, "1");
    let on_b = sampled_in("w2", "d.csv", b, "1");
    refused(
        &[&on_a, &on_b],
        &[&[
            path(&on_b),
            path(&on_a),
            "data file \"d.csv\" vs \"d.csv\": other bytes (sha256 ",
        ]],
    );
    // Another seed: the same seed on the same bytes would be the same chain again.
    let on_copy = sampled_in("w3", "copy-of-d.csv", a, "2");
    let out = shmc(&["summary", path(&on_a), path(&on_copy)]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}
