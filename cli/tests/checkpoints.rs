//! A checkpoint is read like any input: `shmc sample --resume` refuses one whose position is
//! not finite, whose step size is not positive, or whose saved `U` is not the model's at its
//! position, with one line naming the file and the field, and leaves the run's files alone
//! (before, a NaN position resumed to NaN draws and exit 0).

mod binary;
use binary::{shmc, text};

use std::path::{Path, PathBuf};

/// A finished two-chain banana run in a fresh folder named for `name`.
fn finished_run(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shmc-checkpoints-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = shmc(&[
        "sample",
        "--model",
        "banana",
        "--chains",
        "2",
        "--warmup",
        "100",
        "--draws",
        "100",
        "--seed",
        "3",
        "--quiet",
        "--output",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    dir
}

/// `field`'s value (a string, an array of strings, a number or a bool) in chain 2's checkpoint
/// replaced by the JSON `value`, in the text: a JSON value parsed and written again would lose
/// the random stream's 128-bit state.
fn edit(dir: &Path, field: &str, value: &str) {
    let path = dir.join("banana-2.checkpoint.json");
    let json = std::fs::read_to_string(&path).unwrap();
    let key = format!("\"{field}\":");
    let start = json.find(&key).expect(field) + key.len();
    let rest = &json[start..];
    let end = match rest.as_bytes()[0] {
        b'[' => rest.find(']').unwrap() + 1,
        b'"' => rest[1..].find('"').unwrap() + 2,
        _ => rest.find([',', '}']).unwrap(),
    };
    let edited = format!("{}{value}{}", &json[..start], &rest[end..]);
    std::fs::write(&path, edited).unwrap();
}

/// Resumes `dir`; the one line of stderr if refused.
fn resume(dir: &Path) -> Result<(), String> {
    let out = shmc(&["sample", "--resume", dir.to_str().unwrap(), "--quiet"]);
    let err = text(&out.stderr);
    if out.status.success() {
        return Ok(());
    }
    assert_eq!(err.lines().count(), 1, "{err}");
    Err(err)
}

/// Both chains' files.
fn chain_files(dir: &Path) -> Vec<String> {
    (1..=2)
        .map(|k| std::fs::read_to_string(dir.join(format!("banana-{k}.csv"))).unwrap())
        .collect()
}

#[test]
fn resume_refuses_a_checkpoint_with_a_broken_state() {
    let cases = [
        (
            "position",
            r#"["NaN", "0.5"]"#,
            "position[0]: NaN is not a finite number",
        ),
        (
            "position",
            r#"["0.5"]"#,
            "position: 1 entries for a model of 2 parameters",
        ),
        (
            "step_size",
            r#""-1.0""#,
            "step_size: -1.0 is not a positive number",
        ),
        (
            "inv_mass",
            r#"["1.0", "0.0"]"#,
            "inv_mass[1]: 0.0 is not a positive number",
        ),
        (
            "potential",
            r#""-1e300""#,
            "potential: -1e300 is not the model's U",
        ),
    ];
    for (field, value, expected) in cases {
        let dir = finished_run(field);
        assert_eq!(resume(&dir), Ok(()), "the unedited run resumes");
        let files = chain_files(&dir);
        edit(&dir, field, value);
        let err = resume(&dir).expect_err(field);
        assert!(
            err.contains("banana-2.checkpoint.json") && err.contains(expected),
            "{field} = {value}: {err}"
        );
        // Chain 1's file too: nothing is cut back before every checkpoint was read.
        assert!(
            chain_files(&dir) == files,
            "{field}: the files are left as they were"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The issue's edited counts: a checkpoint of another chain, iterations that are not warmup
/// plus kept draws, and a chain marked finished short of its draws (in a run without a target
/// ESS) are refused naming the file, before any file is cut back (before, the CSV was cut and
/// a failure appended first, and `finished: true` closed a chain early and reported success).
#[test]
fn resume_refuses_a_checkpoint_that_is_not_this_runs_before_any_file_changes() {
    let cases: [(&[(&str, &str)], &str); 3] = [
        (&[("chain", "1")], "its checkpoint (chain 1, 200 iterations"),
        (
            &[("done", "7")],
            "does not fit this run (100 warmup iterations, 100 draws",
        ),
        (
            &[("kept", "50"), ("done", "150")],
            "the chain finished after 50 of its 100 draws, which only a target ESS does",
        ),
    ];
    for (edits, expected) in cases {
        let dir = finished_run(edits[0].0);
        let files = chain_files(&dir);
        for (field, value) in edits {
            edit(&dir, field, value);
        }
        let err = resume(&dir).expect_err(expected);
        assert!(
            err.contains("banana-2.checkpoint.json") && err.contains(expected),
            "{edits:?}: {err}"
        );
        assert!(
            chain_files(&dir) == files,
            "{edits:?}: the files are left as they were"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
