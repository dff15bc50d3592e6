//! The Laplace approximation from the command line: the files report the dense metric, and the
//! CLI refuses in one line what the metric or the Laplace-trained network cannot take.

mod binary;
use binary::shmc;

use shmc::output::read_stan_csv;

/// The files say `dense_e` and give the inverse mass matrix whole, symmetric with a positive
/// diagonal, on the model's parameters; `shmc summary` reads them; the methods the metric does
/// not apply to are refused in one line naming it.
#[test]
fn files_report_the_dense_metric_and_the_cli_refuses_what_it_cannot_take() {
    let dir = std::env::temp_dir().join(format!("shmc-laplace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = shmc(&[
        "sample",
        "--model",
        "logistic",
        "--n",
        "400",
        "--d",
        "3",
        "--metric",
        "laplace",
        "--chains",
        "2",
        "--warmup",
        "100",
        "--draws",
        "100",
        "--quiet",
        "--output",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("laplace metric: the MAP search"),
        "{stdout}"
    );
    let file = dir.join("logistic-1.csv");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("metric = dense_e"), "{text}");
    let rows: Vec<Vec<f64>> = text
        .lines()
        .skip_while(|l| !l.starts_with("# Elements of inverse mass matrix:"))
        .skip(1)
        .take(3)
        .map(|l| {
            l.trim_start_matches("# ")
                .split(", ")
                .map(|x| x.parse().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    for i in 0..3 {
        assert_eq!(rows[i].len(), 3);
        assert!(rows[i][i] > 0.0);
        for j in 0..3 {
            assert!((rows[i][j] - rows[j][i]).abs() <= 1e-12 * rows[i][i].abs().max(1.0));
        }
    }
    assert_eq!(read_stan_csv(&file).unwrap().columns[0].len(), 100);
    let summary = shmc(&["summary", file.to_str().unwrap()]);
    assert!(
        summary.status.success(),
        "{}",
        String::from_utf8_lossy(&summary.stderr)
    );

    for (method, needle) in [
        ("rmhmc", "--metric laplace does not apply here: rmhmc"),
        ("sgld", "--metric laplace does not apply here: sgld"),
    ] {
        let out = shmc(&[
            "sample",
            "--model",
            "logistic",
            "--n",
            "200",
            "--d",
            "2",
            "--method",
            method,
            "--metric",
            "laplace",
            "--quiet",
            "--output",
            dir.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(needle), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The settings training from the Laplace approximation cannot take are one line each.
#[test]
fn laplace_training_refuses_what_it_cannot_take() {
    let dir = std::env::temp_dir().join(format!("shmc-laplace-refusals-{}", std::process::id()));
    for (extra, needle) in [
        (
            &["--method", "hmc"][..],
            "--train-from laplace is for rns-hmc's network; hmc",
        ),
        (
            &["--method", "arns-hmc", "--fit", "potential"][..],
            "--train-from laplace is for rns-hmc's network",
        ),
        (
            &["--method", "rns-hmc", "--exact-warmup", "50"][..],
            "--train-from laplace is for rns-hmc's network",
        ),
        (
            &["--method", "rns-hmc", "--train-states", "5"][..],
            "--train-states (5) must be at least 20",
        ),
    ] {
        let mut args = vec![
            "sample",
            "--model",
            "banana",
            "--train-from",
            "laplace",
            "--quiet",
            "--output",
            dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = shmc(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    // The cubic term sits between the Laplace quadratic and the network: only with it.
    let out = shmc(&[
        "sample", "--model", "banana", "--method", "rns-hmc", "--cubic",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "error: --cubic is for a network trained on the Laplace approximation (train from \
         laplace), not on the warmup's states: the cubic sits between the approximation's \
         quadratic and the network"
    );
    let out = shmc(&[
        "sample",
        "--model",
        "banana",
        "--method",
        "rns-hmc",
        "--train-from",
        "laplace",
        "--cubic",
        "--warmup",
        "50",
        "--draws",
        "50",
        "--chains",
        "1",
        "--quiet",
        "--output",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
