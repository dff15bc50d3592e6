//! A calibration run as a person reads it (the summary: thinning, per-parameter tests, the
//! verdict, the times) and as files: the ranks as CSV, one rank histogram per parameter.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::folder::{SbcFolder, histogram_file};
use super::plot::rank_histogram;
use super::{MIN_KEPT, SbcRun, THINNED_ENOUGH, Thinning};
use crate::{Error, Result};

/// The summary of `run`, under the heading `title` (which model, which sampler, how many
/// draws); `approximate` is the label of an approximate method, whose ranks show its bias.
pub fn format_report(run: &SbcRun, title: &str, approximate: Option<&str>) -> String {
    let mut out = String::new();
    let reps = run.replications.len();
    let _ = writeln!(out, "SBC of {title}: {reps} replications");
    if let Some(label) = approximate {
        let _ = writeln!(
            out,
            "{label}\n  (so calibration measures its bias: non-uniform ranks are expected)"
        );
    }
    write_thinning(&mut out, run);
    write_tests(&mut out, run);
    write_verdict(&mut out, run);
    write_times(&mut out, run);
    out
}

/// Where the thinning came from, in words for the summary's thinning line.
fn thinning_source(thinning: Thinning) -> String {
    match thinning {
        Thinning::Given => "as given".to_string(),
        Thinning::FromEss {
            ess_per_draw,
            lowered_from: None,
        } => format!(
            "chosen from the measured ESS: the smallest bulk or tail ESS per draw over the \
             parameters was at least {ess_per_draw:.3} in {:.0} % of the replications, so there \
             a kept draw is worth at least one independent draw",
            100.0 * THINNED_ENOUGH
        ),
        Thinning::FromEss {
            ess_per_draw,
            lowered_from: Some(wanted),
        } => format!(
            "the measured ESS asked for every {wanted}th draw (the smallest bulk or tail ESS per \
             draw over the parameters was {ess_per_draw:.4} at the {:.0} % quantile of the \
             replications: chains that barely move), which would keep fewer than {MIN_KEPT} \
             draws; lowered to keep {MIN_KEPT}, so the slowest replications' kept draws stay \
             correlated (more draws per chain, or a given thinning, avoid this)",
            100.0 * (1.0 - THINNED_ENOUGH)
        ),
    }
}

/// The thinning, the kept draws and the replications whose ESS fell short of them.
fn write_thinning(out: &mut String, run: &SbcRun) {
    let reps = run.replications.len();
    let source = thinning_source(run.thinning);
    let mut ess: Vec<f64> = run.replications.iter().map(|r| r.min_ess).collect();
    ess.sort_by(f64::total_cmp);
    let median = ess.get(ess.len() / 2).copied().unwrap_or(f64::NAN);
    let _ = writeln!(
        out,
        "thinning: every {} draw(s) of each chain kept ({source}); {} kept draws per \
         replication, ranks 0..={}\n  {} of {reps} replications had an ESS below their kept draws \
         (smallest ESS over the parameters: median {median:.0}, least {:.0}); correlated kept \
         draws push ranks to the ends",
        run.thin,
        run.max_rank,
        run.max_rank,
        run.underthinned(),
        ess.first().copied().unwrap_or(f64::NAN),
    );
}

/// The per-parameter uniformity tests as a table: χ², degrees of freedom, p-value and the
/// ranks per bin, under a heading with the counts a uniform histogram expects.
fn write_tests(out: &mut String, run: &SbcRun) {
    let reps = run.replications.len();
    let width = run.names.iter().map(String::len).max().unwrap_or(0).max(9);
    let _ = writeln!(
        out,
        "{:<width$}  {:>9}  {:>3}  {:>9}   ranks per bin (expected: {})",
        "parameter",
        "chi2",
        "df",
        "p-value",
        (0..run.bins.count)
            .map(|b| format!("{:.1}", reps as f64 * run.bins.probability(b)))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (name, test) in run.names.iter().zip(&run.tests) {
        let counts: Vec<String> = test.counts.iter().map(usize::to_string).collect();
        let _ = writeln!(
            out,
            "{name:<width$}  {:>9.2}  {:>3}  {:>9.3e}   {}",
            test.chi_squared,
            test.degrees_of_freedom,
            test.p_value,
            counts.join(" ")
        );
    }
}

/// The verdict, with the Bonferroni-adjusted smallest p-value it rests on.
fn write_verdict(out: &mut String, run: &SbcRun) {
    let v = &run.verdict;
    let _ = writeln!(
        out,
        "verdict: {} at family-wise level {} (Bonferroni over {} parameter tests: smallest \
         p-value x {} = {:.3e} {} {})",
        if v.uniform() {
            "PASS, ranks uniform"
        } else {
            "FAIL, ranks not uniform"
        },
        v.alpha,
        v.tests,
        v.tests,
        v.adjusted_p,
        if v.uniform() { ">=" } else { "<" },
        v.alpha
    );
}

/// The wall and per-replication times, and the divergent kept draws.
fn write_times(out: &mut String, run: &SbcRun) {
    let reps = run.replications.len();
    let divergences: usize = run.replications.iter().map(|r| r.divergences).sum();
    let with_divergences = run
        .replications
        .iter()
        .filter(|r| r.divergences > 0)
        .count();
    let busy: f64 = run.replications.iter().map(|r| r.seconds).sum();
    let _ = writeln!(
        out,
        "time: {:.1} s wall, {:.2} s per replication (simulation and sampling); divergent kept \
         draws: {divergences} in {with_divergences} replications",
        run.wall_seconds,
        busy / reps.max(1) as f64
    );
}

/// Writes `run` into the folder it claimed: `ranks.csv` (one row per replication: its seeds,
/// smallest ESS, divergences, seconds and the rank of every parameter), `rank-NAME.svg` per
/// parameter and `summary.txt` holding `report`. Returns the files written.
pub fn write_files(run: &SbcRun, report: &str, folder: &SbcFolder) -> Result<Vec<PathBuf>> {
    let csv_path = folder.path("ranks.csv")?;
    let csv_error = |e: csv::Error| Error::invalid(format!("{}: {e}", csv_path.display()));
    let mut csv = csv::Writer::from_path(&csv_path).map_err(csv_error)?;
    let mut header: Vec<String> = [
        "replication",
        "data_seed",
        "sampler_seed",
        "min_ess",
        "divergences",
        "seconds",
    ]
    .map(String::from)
    .to_vec();
    header.extend(run.names.iter().cloned());
    csv.write_record(&header).map_err(csv_error)?;
    for r in &run.replications {
        let mut row = vec![
            r.number.to_string(),
            r.data_seed.to_string(),
            r.sampler_seed.to_string(),
            format!("{:.1}", r.min_ess),
            r.divergences.to_string(),
            format!("{:.3}", r.seconds),
        ];
        row.extend(r.ranks.iter().map(usize::to_string));
        csv.write_record(&row).map_err(csv_error)?;
    }
    csv.flush().map_err(|e| Error::io(&csv_path, e))?;
    let mut written = vec![csv_path];
    for (name, test) in run.names.iter().zip(&run.tests) {
        let path = folder.path(&histogram_file(name))?;
        rank_histogram(&path, name, test, run.bins, run.replications.len())?;
        written.push(path);
    }
    let summary = folder.path("summary.txt")?;
    std::fs::write(&summary, report).map_err(|e| Error::io(&summary, e))?;
    written.push(summary);
    Ok(written)
}
