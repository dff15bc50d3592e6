//! Small inputs that used to do something a user would not expect, each now a warning or one
//! `error:` line: a trajectory length given to NUTS, a constant column under --standardize, a
//! tab-separated data file, a negative --step-size, a grid file holding NaN, and a surrogate
//! trained on another model or data set.

mod binary;
use binary::{shmc, stderr};

use std::path::{Path, PathBuf};

fn temp_dir(name: &str) -> PathBuf {
    let dir = binary::temp_dir("small", name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `shmc ARGS` fails with exit 1 and one line, `error: ` and `needle`.
fn one_line_error(args: &[&str], needle: &str) {
    let out = shmc(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(
        err.starts_with("error: ") && err.contains(needle),
        "{args:?}: {err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

/// A short one-chain run of `args` (after `sample`) into `dir/out`, expected to succeed; its
/// stderr.
fn short_run(dir: &Path, args: &[&str]) -> String {
    let out_dir = dir.join("out");
    let _ = std::fs::remove_dir_all(&out_dir);
    let mut all = vec!["sample"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[
        "--chains",
        "1",
        "--draws",
        "20",
        "--warmup",
        "20",
        "--quiet",
        "--output",
        path(&out_dir),
    ]);
    let out = shmc(&all);
    assert!(out.status.success(), "{all:?}: {}", stderr(&out));
    stderr(&out)
}

#[test]
fn nuts_and_sgld_refuse_a_trajectory_length() {
    let dir = temp_dir("nuts");
    let o = dir.join("out");
    let o = path(&o);
    one_line_error(
        &[
            "sample", "--model", "banana", "--method", "nuts", "--steps", "5", "--output", o,
        ],
        "--steps does not apply to nuts, which ends each trajectory where it turns back",
    );
    one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--method",
            "nuts",
            "--fixed-steps",
            "--output",
            o,
        ],
        "--fixed-steps does not apply to nuts",
    );
    one_line_error(
        &[
            "sample", "--model", "logistic", "--method", "sgld", "--steps", "5", "--output", o,
        ],
        "--steps does not apply to sgld, which takes one Langevin step per iteration",
    );
    assert!(!Path::new(o).exists(), "nothing written");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_constant_column_under_standardize_is_a_warning_naming_it() {
    let dir = temp_dir("constant");
    let data = dir.join("d.csv");
    std::fs::write(
        &data,
        "y,a,b\n1,0.5,3\n0,1.5,3\n1,-0.2,3\n0,2.0,3\n1,0.1,3\n0,1.1,3\n",
    )
    .unwrap();
    let args = ["--model", "logistic", "--data", path(&data)];
    let err = short_run(&dir, &[&args[..], &["--standardize"]].concat());
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].starts_with(&format!(
            "warning: column \"b\" of {} is constant",
            path(&data)
        )) && warnings[0].contains("drawn from the prior alone"),
        "{err}"
    );
    // Without --standardize the column stays (it is collinear with no intercept): no warning.
    let err = short_run(&dir, &args);
    assert!(!err.contains("warning: column"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tab_separated_file_is_read_as_its_comma_separated_twin() {
    let dir = temp_dir("tabs");
    let rows = [
        ["1", "0.5", "2"],
        ["0", "1.5", "1"],
        ["1", "-0.2", "0"],
        ["0", "0.7", "1"],
    ];
    let text = |sep: &str| -> String {
        let body: String = rows.iter().map(|r| r.join(sep) + "\n").collect();
        format!("y{sep}a{sep}b\n{body}{body}")
    };
    let (commas, tabs, tsv) = (dir.join("c.csv"), dir.join("t.csv"), dir.join("t.tsv"));
    std::fs::write(&commas, text(",")).unwrap();
    std::fs::write(&tabs, text("\t")).unwrap();
    std::fs::write(&tsv, text("\t")).unwrap();
    let draws = |data: &Path| {
        short_run(
            &dir,
            &["--model", "logistic", "--data", path(data), "--seed", "3"],
        );
        let csv = std::fs::read_to_string(dir.join("out").join("logistic-1.csv")).unwrap();
        csv.lines()
            .filter(|l| !l.starts_with('#'))
            .skip(1)
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let expected = draws(&commas);
    assert_eq!(expected.len(), 20);
    assert_eq!(draws(&tabs), expected, "tabs in a .csv");
    assert_eq!(draws(&tsv), expected, "a .tsv");
    // A tab-separated file under another name is read as LIBSVM, which says what it looks like.
    let txt = dir.join("t.txt");
    std::fs::write(&txt, text("\t")).unwrap();
    one_line_error(
        &[
            "sample",
            "--model",
            "logistic",
            "--data",
            path(&txt),
            "--output",
            path(&dir),
        ],
        "the first line looks like a header, so the file may be delimited text (comma-, \
         semicolon- or tab-separated), read in the csv format",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_negative_number_gets_the_options_range_error() {
    let o = std::env::temp_dir().join(format!("shmc-small-{}-negative", std::process::id()));
    let o = path(&o);
    one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--step-size",
            "-1",
            "--output",
            o,
        ],
        "--step-size must be a finite positive number, got -1",
    );
    one_line_error(
        &[
            "sample",
            "--model",
            "banana",
            "--target-accept",
            "-0.5",
            "--output",
            o,
        ],
        "--target-accept must lie strictly between 0 and 1, got -0.5",
    );
    // An integer option names itself in clap's message (exit 2), not "unexpected argument".
    let out = shmc(&[
        "sample", "--model", "banana", "--steps", "-1", "--output", o,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error: invalid value '-1' for '--steps <STEPS>'"));
}

/// Trains a surrogate into `dir/name` with `extra` (the model, the kind, ...).
fn train(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let file = dir.join(name);
    let mut args = vec!["train", "--save", path(&file)];
    args.extend_from_slice(extra);
    let out = shmc(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    file
}

/// The arguments of a short `shmc sample` of `model` with the saved surrogate `file` (at
/// index 6).
fn with_surrogate(file: &Path, model: &str) -> Vec<String> {
    let o = file.with_extension("out");
    let _ = std::fs::remove_dir_all(&o);
    vec![
        "sample".into(),
        "--model".into(),
        model.into(),
        "--method".into(),
        "rns-hmc".into(),
        "--surrogate".into(),
        path(file).into(),
        "--chains".into(),
        "1".into(),
        "--draws".into(),
        "20".into(),
        "--warmup".into(),
        "20".into(),
        "--quiet".into(),
        "--output".into(),
        path(&o).into(),
    ]
}

/// `file` with one JSON number string of its surrogate's `field` replaced by `value`.
fn edited(file: &Path, field: &str, index: usize, value: &str) -> PathBuf {
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    json["surrogate"][field][index] = value.into();
    let copy = file.with_file_name(format!("{field}-{value}.json"));
    std::fs::write(&copy, json.to_string()).unwrap();
    copy
}

#[test]
fn a_grid_file_holding_nan_is_refused_naming_the_file_and_entry() {
    let dir = temp_dir("grids");
    let box_ = ["--model", "banana", "--domain=-3:3,-3:3"];
    let force = train(
        &dir,
        "force.json",
        &[&["--surrogate", "force-grid", "--cell", "0.5"], &box_[..]].concat(),
    );
    let sparse = train(
        &dir,
        "sparse.json",
        &[&["--surrogate", "sparse-grid", "--level", "3"], &box_[..]].concat(),
    );
    let run = |file: &Path| {
        let args = with_surrogate(file, "banana");
        shmc(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    assert!(run(&force).status.success(), "the grid as trained loads");
    for (file, field, needle) in [
        (
            &force,
            "values",
            "the force grid's values: entry 4 of 144 is NaN",
        ),
        (
            &force,
            "gradients",
            "the force grid's gradients: entry 4 of 288 is NaN",
        ),
        (
            &sparse,
            "surpluses",
            "the sparse grid's surpluses: entry 4 of 29 is NaN",
        ),
    ] {
        let bad = edited(file, field, 3, "NaN");
        let args = with_surrogate(&bad, "banana");
        one_line_error(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            &format!("{}:1: not a valid surrogate file: {needle}", path(&bad)),
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_surrogate_trained_on_another_model_or_data_is_refused_naming_both() {
    let dir = temp_dir("trained-on");
    let net = train(&dir, "net.json", &["--model", "banana", "--warmup", "200"]);
    let args = with_surrogate(&net, "gaussian-conjugate");
    one_line_error(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &format!(
            "{}: the surrogate was trained on model \"banana\", not on this run's model \
             \"gaussian-conjugate\"",
            path(&net)
        ),
    );
    let mut args = with_surrogate(&net, "banana");
    let out = shmc(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    // A file written before the data were recorded loads, with a warning.
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&net).unwrap()).unwrap();
    assert_eq!(
        json["meta"]["data"],
        serde_json::Value::Null,
        "recorded: no data file"
    );
    json["meta"].as_object_mut().unwrap().remove("data");
    let old = dir.join("old.json");
    std::fs::write(&old, json.to_string()).unwrap();
    args[6] = path(&old).into();
    // A folder of its own: the run with `net` used `net.out`, which a new run may not reuse.
    let output = args.len() - 1;
    args[output] = path(&old.with_extension("out")).into();
    let out = shmc(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with(&format!(
            "warning: {} does not record the data its surrogate was trained on",
            path(&old)
        )),
        "{}",
        stderr(&out)
    );
    // Trained on one data file, loaded for another.
    let (a, b) = (dir.join("a.csv"), dir.join("b.csv"));
    std::fs::write(&a, "y,x\n1,0.5\n0,1.5\n1,-0.2\n0,2.0\n1,0.1\n0,1.1\n").unwrap();
    std::fs::write(&b, "y,x\n0,0.5\n1,1.5\n1,-0.2\n1,2.0\n0,0.1\n0,1.1\n").unwrap();
    let on_a = train(
        &dir,
        "a.json",
        &["--model", "logistic", "--data", path(&a), "--warmup", "200"],
    );
    let mut args = with_surrogate(&on_a, "logistic");
    args.extend(["--data".into(), path(&b).into()]);
    one_line_error(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &format!(
            "{}: the surrogate was trained on data {:?}, this run is on data {:?}",
            path(&on_a),
            path(&a),
            path(&b)
        ),
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Standard output that cannot be written is the user's disk or pipe, not a bug: a full disk is
/// one line naming it (exit 1), a reader that closed the pipe early (`| head`) ends the run
/// silently with SIGPIPE's status, 141; neither prints "internal error".
#[test]
fn standard_output_that_cannot_be_written_is_one_line_or_a_quiet_sigpipe() {
    let run = |stdout: std::process::Stdio| {
        std::process::Command::new(env!("CARGO_BIN_EXE_shmc"))
            .arg("models")
            .stdout(stdout)
            .env_remove("RUST_BACKTRACE") // which brings Rust's panic report back
            .output()
            .expect("the shmc binary runs")
    };
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        let out = run(full.into());
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.starts_with("error: cannot write to standard output: "),
            "{err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    }
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = run(writer.into());
    assert_eq!(out.status.code(), Some(141), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}

/// A surrogate's option given to a method that trains none changed nothing and was accepted
/// without a word; now it is one line naming the option and the method.
#[test]
fn a_surrogate_option_for_a_method_without_a_surrogate_is_refused() {
    for (method, option) in [
        ("hmc", &["--cubic"][..]),
        ("hmc", &["--surrogate-transitions", "3"]),
        ("nuts", &["--hidden", "30"]),
        ("hmc", &["--gp", "full"]),
        ("mlda", &["--fit", "score"]),
    ] {
        // A folder of the test's own: were the option accepted, the run must not write into
        // the working directory.
        let out = temp_dir("surrogate-option");
        let mut args = vec!["sample", "--model", "banana", "--method", method];
        args.extend_from_slice(option);
        args.extend_from_slice(&["--draws", "10", "--warmup", "10", "--output", path(&out)]);
        one_line_error(
            &args,
            &format!(
                "{} is for the surrogate methods (rns-hmc, arns-hmc, vhmc, rns-rmhmc, mlda with \
                 --levels net,...); {method} trains no surrogate",
                option[0]
            ),
        );
    }
    one_line_error(
        &[
            "sample", "--model", "banana", "--method", "rns-hmc", "--cubic",
        ],
        "--cubic is for a network trained on the Laplace approximation",
    );
}
