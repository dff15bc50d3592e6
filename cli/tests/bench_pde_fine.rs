//! `shmc bench pde-fine`: the 120×120 problem's rows carry the work per effective draw by
//! level (`solves_per_ess_tail`, `solves_per_ess_bulk`) and the goals' min(bulk, tail) rate.

mod binary;
use binary::{shmc, text};

/// A quick run of the HMC and MLDA rows writes both with every level's solves per tail and
/// bulk ESS: the fine mesh's, and MLDA's 30×30 and 60×60 levels'.
#[test]
fn quick_pde_fine_rows_carry_solves_per_ess_by_level() {
    let json = std::env::temp_dir().join(format!("shmc-pde-fine-{}.json", std::process::id()));
    let out = shmc(&[
        "bench",
        "pde-fine",
        "--quick",
        "--methods",
        "hmc,mlda",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let rows = rows.as_array().unwrap();
    let keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["hmc", "mlda"]);
    let levels = |row: &serde_json::Value, field: &str| -> Vec<String> {
        row[field]
            .as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry[1].as_f64().is_some_and(|n| n > 0.0))
            .map(|entry| entry[0].as_str().unwrap().to_string())
            .collect()
    };
    for row in rows {
        assert_eq!(row["problem"], "pde-fine");
        for field in ["solves_per_ess_tail", "solves_per_ess_bulk"] {
            assert!(
                levels(row, field).contains(&"forward solves".into()),
                "{row}"
            );
        }
        assert!(
            row["min_bulk_tail_per_second_with_training"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }
    for field in ["solves_per_ess_tail", "solves_per_ess_bulk"] {
        let mlda = levels(&rows[1], field);
        for level in ["forward solves (30x30)", "forward solves (60x60)"] {
            assert!(mlda.contains(&level.to_string()), "{field}: {mlda:?}");
        }
    }
    assert!(text(&out.stdout).contains("fine solves per tail ESS"));
}

/// The journal's figures are not drawn for pde-fine: `--plots` is refused in one line before
/// any model is built.
#[test]
fn pde_fine_refuses_plots_in_one_line() {
    let dir = std::env::temp_dir().join(format!("shmc-pde-fine-plots-{}", std::process::id()));
    let out = shmc(&["bench", "pde-fine", "--plots", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(
        err.trim(),
        "error: --plots draws the journal's figures for lr-sim, bank and a9a"
    );
    assert!(!dir.exists());
}
