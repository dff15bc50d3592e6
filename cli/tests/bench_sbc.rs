//! `shmc bench sbc`'s table through the library, on a subset of its cells (the whole quick table
//! takes minutes): the conjugate Gaussian with exact HMC and with sparse-grid HMC's complete
//! variant, which is approximate, and with RMHMC, which it cannot run (no Riemannian metric).
//! The rows must carry finite p-values and a verdict, the approximate one its label, and the
//! refused method a line in the log instead of a row or an error. Whether a cell passes is not
//! checked here: at 30 replications the verdict's false alarms are 5 % by design, and the
//! calibration itself is tested in `sbc.rs`.

use std::sync::Mutex;

use shmc_cli::experiments::sbc::{SbcBenchSettings, format_sbc_table, run_sbc_bench};

fn settings(models: &[&str], methods: &[&str]) -> SbcBenchSettings {
    SbcBenchSettings {
        quick: true,
        seed: 3,
        jobs: 0,
        models: models.iter().map(|m| m.to_string()).collect(),
        methods: methods.iter().map(|m| m.to_string()).collect(),
        part: None,
    }
}

#[test]
fn a_subset_of_the_table_has_p_values_verdicts_and_the_approximate_label() {
    let log = Mutex::new(Vec::new());
    let rows = run_sbc_bench(
        &settings(
            &["gaussian-conjugate"],
            &["sg-hmc-complete", "rmhmc", "hmc"],
        ),
        &|line| log.lock().unwrap().push(line.to_string()),
    )
    .expect("the cells run");
    let log = log.into_inner().unwrap().join("\n");
    assert!(log.contains("rmhmc: skipped: the model offers no"), "{log}");
    // In the table's order, whatever the order asked.
    let methods: Vec<&str> = rows.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(methods, ["hmc", "sg-hmc-complete"]);
    for row in &rows {
        assert_eq!(row.model, "gaussian-conjugate");
        assert_eq!((row.replications, row.p_values.len()), (30, 2), "{row:?}");
        assert!(row.error.is_none(), "{row:?}");
        assert!(
            row.p_values.iter().all(|p| (0.0..=1.0).contains(p)),
            "{row:?}"
        );
        assert_eq!(row.min_p_value, row.p_values[0].min(row.p_values[1]));
        assert!((row.adjusted_p_value - (2.0 * row.min_p_value).min(1.0)).abs() < 1e-12);
        let pass = row.adjusted_p_value >= 0.05;
        assert_eq!(row.verdict, if pass { "pass" } else { "fail" }, "{row:?}");
        assert!(
            row.kept >= 2 && row.thin >= 1 && row.seconds > 0.0,
            "{row:?}"
        );
        assert!(
            row.ess_least > 0.0 && row.ess_least <= row.ess_median,
            "{row:?}"
        );
    }
    assert!(rows[0].approximate.is_none());
    let label = rows[1]
        .approximate
        .as_deref()
        .expect("the complete variant is labelled");
    assert!(
        label.starts_with("APPROXIMATE inference: sg-hmc-complete"),
        "{label}"
    );
    let table = format_sbc_table(&rows);
    assert!(table.contains("sg-hmc-complete (APPROXIMATE)"), "{table}");
    assert!(table.contains(label), "{table}");
    assert!(table.contains("2 cells in"), "{table}");
    // The exact cell alone is the family: its two p-values against 0.05 / 2.
    let family = format!(
        "fail at their own level (0.1 expected by chance); the smallest of their 2 p-values is \
         {:.3e} against Bonferroni's 2.500e-2 for the whole table: {}",
        rows[0].min_p_value,
        if rows[0].min_p_value < 0.025 {
            "fail"
        } else {
            "pass"
        }
    );
    assert!(table.contains(&family), "{table}");
}

#[test]
fn an_unknown_model_or_method_is_refused_naming_the_choices() {
    let error = |models: &[&str], methods: &[&str]| {
        run_sbc_bench(&settings(models, methods), &|_| {})
            .expect_err("refused")
            .to_string()
    };
    let e = error(&["nope"], &[]);
    assert!(
        e.contains("no model \"nope\"") && e.contains("elliptic-pde"),
        "{e}"
    );
    let e = error(&[], &["rns"]);
    assert!(
        e.contains("no method \"rns\"") && e.contains("sg-hmc-complete"),
        "{e}"
    );
}

/// GP-HMC and FITC-HMC have cells of their own on the conjugate Gaussian, the elliptic PDE
/// (8×8 mesh, 3 modes) and the logistic model (N 100, d 3): quick, 30 replications, each a
/// finished row (no model skips them) with a p-value per parameter and a verdict, and no error
/// (a GP that failed to fit in some replication would be one). About 35 s here.
#[test]
fn gp_hmc_and_fitc_hmc_cells_run() {
    // In the table's order of models (the catalogue's), whatever order they are asked in.
    let models = ["logistic", "gaussian-conjugate", "elliptic-pde"];
    let rows =
        run_sbc_bench(&settings(&models, &["fitc-hmc", "gp-hmc"]), &|_| {}).expect("the cells run");
    let cells: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.model.as_str(), r.method.as_str()))
        .collect();
    let want: Vec<(&str, &str)> = models
        .iter()
        .flat_map(|m| [(*m, "gp-hmc"), (*m, "fitc-hmc")])
        .collect();
    assert_eq!(cells, want);
    for row in &rows {
        let d = if row.model == "gaussian-conjugate" {
            2
        } else {
            3
        };
        assert!(row.error.is_none(), "{row:?}");
        assert!(row.approximate.is_none(), "{row:?}");
        assert_eq!((row.replications, row.p_values.len()), (30, d), "{row:?}");
        assert!(
            row.p_values.iter().all(|p| (0.0..=1.0).contains(p)),
            "{row:?}"
        );
        assert!(["pass", "fail"].contains(&row.verdict.as_str()), "{row:?}");
    }
}

/// MLDA's cells: on the PDE (8×8 judging 4×4 and 6×6 meshes, and with a network below them)
/// they have p-values and a verdict; a model without levels skips them with a line.
#[test]
fn mlda_cells_run_on_the_pde_and_are_skipped_without_levels() {
    let log = Mutex::new(Vec::new());
    let rows = run_sbc_bench(
        &settings(
            &["gaussian-conjugate", "elliptic-pde"],
            &["mlda", "mlda-network"],
        ),
        &|line| log.lock().unwrap().push(line.to_string()),
    )
    .expect("the cells run");
    let log = log.into_inner().unwrap().join("\n");
    assert!(
        log.contains("mlda: skipped: the model offers no coarser levels"),
        "{log}"
    );
    let cells: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.model.as_str(), r.method.as_str()))
        .collect();
    assert_eq!(
        cells,
        [("elliptic-pde", "mlda"), ("elliptic-pde", "mlda-network")]
    );
    for row in &rows {
        assert!(row.error.is_none(), "{row:?}");
        assert!(
            row.p_values.iter().all(|p| (0.0..=1.0).contains(p)),
            "{row:?}"
        );
        assert!(["pass", "fail"].contains(&row.verdict.as_str()), "{row:?}");
        assert!(row.approximate.is_none(), "{row:?}");
    }
}
