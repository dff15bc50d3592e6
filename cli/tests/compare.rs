//! `shmc sample --compare hmc|nuts`: the run beside a pilot of the baseline measured in the
//! same process, with what each needs per effective sample.

use std::process::Command;

fn compare(baseline: &str) -> String {
    let dir = std::env::temp_dir().join(format!("shmc-compare-{}-{baseline}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_shmc"))
        .args([
            "sample",
            "--model",
            "banana",
            "--method",
            "rns-hmc",
            "--chains",
            "2",
            "--warmup",
            "300",
            "--draws",
            "600",
            "--hidden",
            "40",
            "--quiet",
            "--compare",
            baseline,
            "--compare-draws",
            "300",
            "--output",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
    stdout
}

/// The table's rows: the run's own (600 draws, no exact gradient after warmup's) and the
/// pilot's (300 draws of exact trajectories, more exact gradients per effective sample), the
/// pilot the unit of the last column.
#[test]
fn the_run_and_its_baseline_pilot_are_side_by_side() {
    for baseline in ["hmc", "nuts"] {
        let stdout = compare(baseline);
        let row = |label: &str| -> Vec<String> {
            let line = stdout
                .lines()
                .find(|l| l.starts_with(label))
                .unwrap_or_else(|| panic!("no {label} row: {stdout}"));
            line[44..].split_whitespace().map(String::from).collect()
        };
        let (run, pilot) = (
            row("rns-hmc (this run)"),
            row(&format!("{baseline} (a pilot measured after it)")),
        );
        assert_eq!((run[0].as_str(), pilot[0].as_str()), ("600", "300"));
        let number = |r: &[String], k: usize| r[k].parse::<f64>().unwrap();
        assert!(
            number(&pilot, 2) > number(&run, 2),
            "exact gradients per effective sample: {stdout}"
        );
        assert_eq!(pilot[6], "1.00x", "{stdout}");
        assert!(number(&run, 1) > 0.0 && number(&pilot, 1) > 0.0, "{stdout}");
    }
}
