//! `--method mlda`: multilevel delayed acceptance over a model's coarser levels, with the
//! levels and subchain lengths in the CSV header and every level's solves in the run's work,
//! and refused in one line where it cannot run.

mod binary;
use binary::{shmc, text};

use std::process::Output;

/// A short run of `model` with `extra` options, into a fresh folder named `name`.
fn run(name: &str, model: &[&str], extra: &[&str]) -> (Output, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("shmc-mlda-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut args = vec!["sample", "--model"];
    args.extend(model);
    args.extend([
        "--chains", "2", "--warmup", "200", "--draws", "200", "--seed", "3", "--output",
    ]);
    args.push(dir.to_str().unwrap());
    args.extend(extra);
    (shmc(&args), dir)
}

/// A 12×12 PDE with 4 modes: MLDA over 4×4 and 6×6 meshes runs, writes its levels and
/// subchains in the header and reports each level's solves.
#[test]
fn mlda_runs_over_the_pde_meshes_and_reports_each_level() {
    let pde = ["elliptic-pde", "--mesh", "12", "--kl-modes", "4"];
    let extra = ["--method", "mlda", "--levels", "4,6", "--subchains", "3,2"];
    let (out, dir) = run("pde", &pde, &extra);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let csv = std::fs::read_to_string(dir.join("elliptic-pde-1.csv")).unwrap();
    assert!(csv.contains("mlda_levels = 4,6"), "{csv}");
    assert!(csv.contains("mlda_subchains = 3,2"), "{csv}");
    assert!(csv.contains("mlda_warmup_judge = coarse"), "{csv}");
    let report = text(&out.stdout);
    for level in ["forward solves (4x4)", "forward solves (6x6)"] {
        assert!(report.contains(level), "{report}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mlda_is_refused_in_one_line_where_it_cannot_run() {
    let pde: &[&str] = &["elliptic-pde", "--mesh", "12", "--kl-modes", "4"];
    let cases: [(&[&str], &[&str], &str); 6] = [
        (
            &["banana"],
            &["--method", "mlda"],
            "--method mlda needs a model with coarser levels; banana has none",
        ),
        (
            pde,
            &["--method", "mlda", "--levels", "4,12"],
            "--levels must lie between 2 and 11 elements per side (coarser than the 12x12 \
             mesh), got 12",
        ),
        (
            pde,
            &["--method", "mlda", "--levels", "4,6", "--subchains", "3"],
            "--subchains needs one length of at least 1 per coarser level (2), got [3]",
        ),
        (
            pde,
            &["--method", "hmc", "--levels", "4"],
            "--levels is for --method mlda; hmc has no levels",
        ),
        (
            pde,
            &["--method", "nuts", "--fine-warmup"],
            "--fine-warmup is for --method mlda; nuts has no levels",
        ),
        (
            pde,
            &[
                "--method",
                "mlda",
                "--levels",
                "4",
                "--subchains",
                "3",
                "--metric",
                "laplace",
            ],
            "--metric laplace moves the chains to the Laplace approximation's coordinates",
        ),
    ];
    for (i, (model, extra, expected)) in cases.into_iter().enumerate() {
        let (out, dir) = run(&format!("refused-{i}"), model, extra);
        let err = text(&out.stderr);
        assert!(
            !out.status.success() && err.contains(expected),
            "{extra:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `--levels net,4,6`: the network, trained on the warmup's states, proposes below the meshes
/// once fitted; the header names it and its subchain, and the network's gradients are counted
/// as surrogate gradients in the sampling phase.
#[test]
fn mlda_with_a_network_level_runs_and_names_it() {
    let pde = ["elliptic-pde", "--mesh", "12", "--kl-modes", "4"];
    let extra = ["--method", "mlda", "--levels", "net,4,6", "--hidden", "100"];
    let (out, dir) = run("net", &pde, &extra);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let csv = std::fs::read_to_string(dir.join("elliptic-pde-1.csv")).unwrap();
    assert!(csv.contains("mlda_levels = net,4,6"), "{csv}");
    assert!(csv.contains("mlda_subchains = 4,4,2"), "{csv}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_network_level_is_refused_in_one_line_where_it_cannot_run() {
    let pde: &[&str] = &["elliptic-pde", "--mesh", "12", "--kl-modes", "4"];
    let cases: [(&[&str], &str); 5] = [
        (
            &["--levels", "4,net"],
            "--levels: \"net\" is neither a mesh size nor `net` (which only the first level may be)",
        ),
        (
            &["--levels", "net,4", "--subchains", "3"],
            "--subchains needs one length of at least 1 per coarser level (2, the network's \
             first), got [3]",
        ),
        (
            &["--levels", "net,4", "--train-from", "laplace"],
            "--train-from laplace is not for mlda's network",
        ),
        (
            &["--levels", "net,4", "--fit", "score"],
            "--fit must be potential for mlda's network",
        ),
        (
            &["--levels", "net,4", "--surrogate-transitions", "3"],
            "--surrogate-transitions is not for mlda",
        ),
    ];
    for (i, (extra, expected)) in cases.into_iter().enumerate() {
        let mut args = vec!["--method", "mlda"];
        args.extend(extra);
        let (out, dir) = run(&format!("net-refused-{i}"), pde, &args);
        let err = text(&out.stderr);
        assert!(
            !out.status.success() && err.contains(expected),
            "{extra:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `--design-level 6` on a 12×12 PDE: the Laplace approximation and the training draws run on
/// the 6×6 mesh (the report says so, the header records it), the draws on the model.
#[test]
fn a_design_level_runs_the_design_on_the_coarser_mesh_and_says_so() {
    let pde = ["elliptic-pde", "--mesh", "12", "--kl-modes", "4"];
    let extra = [
        "--method",
        "rns-hmc",
        "--train-from",
        "laplace",
        "--train-states",
        "60",
        "--hidden",
        "20",
        "--design-level",
        "6",
    ];
    let (out, dir) = run("design", &pde, &extra);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let csv = std::fs::read_to_string(dir.join("elliptic-pde-1.csv")).unwrap();
    assert!(csv.contains("design_level = 6"), "{csv}");
    let report = text(&out.stdout);
    assert!(
        report.contains("precompute: 61 evaluations of the model's level 6"),
        "{report}"
    );
    assert!(report.contains("forward solves (6x6)"), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_design_level_is_refused_in_one_line_where_it_cannot_apply() {
    let pde: &[&str] = &["elliptic-pde", "--mesh", "12", "--kl-modes", "4"];
    let laplace: &[&str] = &[
        "--method",
        "rns-hmc",
        "--train-from",
        "laplace",
        "--design-level",
    ];
    let cases: [(&[&str], Vec<&str>, &str); 3] = [
        (
            &["banana"],
            [laplace, &["5"]].concat(),
            "--design-level needs a model with coarser levels; this model has none",
        ),
        (
            pde,
            [laplace, &["12"]].concat(),
            "--design-level must lie between 2 and 11 elements per side (coarser than the \
             12x12 mesh), got 12",
        ),
        (
            pde,
            vec!["--method", "hmc", "--design-level", "6"],
            "--design-level evaluates the Laplace approximation and a surrogate fitted before \
             sampling on a coarser level; this run has neither",
        ),
    ];
    for (i, (model, extra, expected)) in cases.into_iter().enumerate() {
        let (out, dir) = run(&format!("design-refused-{i}"), model, &extra);
        let err = text(&out.stderr);
        assert!(
            !out.status.success() && err.contains(expected),
            "{extra:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!dir.exists(), "{}", dir.display());
    }
}
