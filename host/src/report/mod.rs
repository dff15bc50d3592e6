//! A run as one self-contained HTML page: what a person checks after sampling, from the
//! CmdStan CSVs alone (one per chain, as `shmc sample` writes them, or CmdStan's own).
//!
//! The page holds the summary table (mean, sd, MCSE, quantiles, bulk and tail ESS, R̂ from
//! [`crate::diagnostics`], flagged where Stan's guidance says to worry), the acceptance
//! statistic and the divergences over the draws, a trace and a histogram per chosen parameter,
//! the scatter of every pair of them, each chain's exact and surrogate evaluations per phase,
//! and for a surrogate method its training and learning curve (the files' `# shmc` lines, see
//! [`crate::output::footer`]). Plots are inline SVG ([`figures`]), so the page needs nothing
//! beside it.
//!
//! A run folder with files that cannot be used (unreadable, of another run, too few draws) or
//! chains of unequal length still gets a report: the page says what it left out ([`Chains`]).

mod chains;
pub mod figures;
mod page;
mod same_run;

use std::path::Path;

pub use chains::{Chains, csv_files};
use page::{Page, escape, figure, number};
pub use same_run::one_run;

use crate::diagnostics::ParameterSummary;
use crate::output::ChainFooter;
use crate::output::folder::is_shmc_page;
use crate::records::Evaluations;
use crate::{Error, Result};

/// The parameters plotted when none are chosen: the first few, so that the pairs stay few.
pub const DEFAULT_PARAMETERS: usize = 4;

/// Above this R̂ a parameter's chains disagree (Vehtari et al. 2021).
const RHAT_LIMIT: f64 = 1.01;

/// Below this bulk or tail ESS per chain the estimates are unreliable (Vehtari et al. 2021).
const ESS_PER_CHAIN: f64 = 100.0;

/// A rendered report.
#[derive(Clone, Debug)]
pub struct Report {
    /// The page.
    pub html: String,
    /// What the page says was left out, one line each (for the caller to repeat).
    pub notes: Vec<String>,
}

impl Report {
    /// Writes the page to `path`. A file there is written over only if it is a page shmc wrote
    /// (marked by its generator line: an earlier report, made again from the run by this one);
    /// any other (a chain's CSV, a user's own `report.html`, a folder) is refused. The page goes
    /// through a new temporary file beside `path`, so a stop never leaves half a page.
    pub fn write_to(&self, path: &Path) -> Result<()> {
        if path.exists() && !is_shmc_page(path) {
            return Err(Error::invalid(format!(
                "{}: not a report shmc wrote, and the report would write over it: move it, or \
                 write the report elsewhere",
                path.display()
            )));
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .and_then(|mut file| std::io::Write::write_all(&mut file, self.html.as_bytes()));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(Error::io(&temporary, e));
        }
        std::fs::rename(&temporary, path).map_err(|e| {
            let _ = std::fs::remove_file(&temporary);
            Error::io(path, e)
        })
    }
}

/// The report of the run in folder `dirs`, plotting `parameters` (by default the first
/// [`DEFAULT_PARAMETERS`]).
/// A run split into shards ([`crate::sampler::SampleConfig::chain_id`]) gives every shard's
/// folder in `dirs`, in chain order, and gets one page of all their chains.
pub fn render<P: AsRef<Path>>(dirs: &[P], parameters: Option<&[String]>) -> Result<Report> {
    let chains = Chains::read_dirs(dirs)?;
    let chosen = choose(&chains, parameters)?;
    let first = &chains.files[0];
    let model = first.setting("model").unwrap_or("model");
    let method = first.setting("shmc_method").unwrap_or("hmc");
    let title = format!("shmc report: {model}, {method}");
    let mut page = Page::new(&title);
    let mut notes = chains.notes.clone();
    for c in &chains.files {
        if c.interrupted {
            notes.push(format!("{} records an interrupted run", c.path.display()));
        } else if !c.complete {
            notes.push(format!(
                "{} has no end block: its chain was killed or failed before the end, and only \
                 the draws it finished are shown",
                c.path.display()
            ));
        }
    }
    facts(&mut page, dirs, &chains);
    if let Some(label) = &first.approximate {
        page.paragraph("approximate", label);
    }
    if !notes.is_empty() {
        let items: String = notes
            .iter()
            .map(|n| format!("<li>{}</li>", escape(n)))
            .collect();
        page.html(&format!(
            "<div class=\"notes\"><strong>Left out or incomplete</strong><ul>{items}</ul></div>"
        ));
    }
    legend(&mut page, &chains);
    summary_table(&mut page, &chains);
    sampler(&mut page, &chains)?;
    parameters_section(&mut page, &chains, &chosen)?;
    pairs(&mut page, &chains, &chosen)?;
    let footers: Vec<ChainFooter> = chains
        .files
        .iter()
        .map(|c| ChainFooter::parse(&c.shmc))
        .collect();
    costs(&mut page, &chains, &footers);
    surrogate(&mut page, &chains, &footers)?;
    settings(&mut page, &chains);
    Ok(Report {
        html: page.finish(&title),
        notes,
    })
}

/// The columns to plot: `parameters` (each a column of the files, once), or the first
/// [`DEFAULT_PARAMETERS`] parameters.
fn choose(chains: &Chains, parameters: Option<&[String]>) -> Result<Vec<String>> {
    let Some(wanted) = parameters else {
        return Ok(chains
            .parameters()
            .into_iter()
            .take(DEFAULT_PARAMETERS)
            .collect());
    };
    let names = &chains.files[0].names;
    let mut chosen: Vec<String> = Vec::new();
    for name in wanted {
        if !names.contains(name) {
            let known = chains.parameters();
            let shown = known.len().min(10);
            return Err(Error::setting(
                "parameters",
                format!(
                    "names {name:?}, which the run does not have (its parameters: {}{})",
                    known[..shown].join(", "),
                    if known.len() > shown { ", …" } else { "" }
                ),
            ));
        }
        if !chosen.contains(name) {
            chosen.push(name.clone());
        }
    }
    Ok(chosen)
}

/// The chain's label: its `id` from the file's header, else its place.
fn chain_label(chains: &Chains, index: usize) -> String {
    chains.files[index]
        .setting("id")
        .map_or_else(|| (index + 1).to_string(), str::to_string)
}

fn facts<P: AsRef<Path>>(page: &mut Page, dirs: &[P], chains: &Chains) {
    let first = &chains.files[0];
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.as_ref().display().to_string())
        .collect();
    let folders = match names.len() {
        1 => format!("Run folder {}", names[0]),
        n => format!("Run of {n} shard folders {}", names.join(", ")),
    };
    let mut text = format!(
        "{folders}: {} chain(s) of {} draws each",
        chains.files.len(),
        chains.draws
    );
    if let Some(w) = first.setting("num_warmup") {
        text.push_str(&format!(" after {w} warmup iterations"));
    }
    if let Some(seed) = first.setting("seed") {
        text.push_str(&format!("; seed {seed}"));
    }
    if let Some(version) = first.setting("version") {
        text.push_str(&format!("; written by shmc {version}"));
    }
    page.paragraph("", &format!("{text}."));
}

fn legend(page: &mut Page, chains: &Chains) {
    let mut html = String::from("<p>Chains:");
    for (i, c) in chains.files.iter().enumerate() {
        let file = c
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        html.push_str(&format!(
            "<span class=\"swatch\" style=\"background:{}\"></span>{} ({})",
            crate::plot::chain_css(i),
            escape(&chain_label(chains, i)),
            escape(&file)
        ));
    }
    html.push_str("</p>");
    page.html(&html);
}

fn summary_table(page: &mut Page, chains: &Chains) {
    page.heading("Summary");
    let low_ess = ESS_PER_CHAIN * chains.files.len() as f64;
    page.paragraph(
        "",
        &format!(
            "Highlighted: R̂ above {RHAT_LIMIT} (the chains disagree) and bulk or tail ESS below \
             {low_ess:.0} ({ESS_PER_CHAIN:.0} per chain: too few effective draws to trust the \
             estimates), after Vehtari et al. (2021). NaN: too few draws, or constant draws."
        ),
    );
    let rows: Vec<Vec<(String, bool)>> = chains
        .summary()
        .iter()
        .map(|p: &ParameterSummary| {
            vec![
                (p.name.clone(), false),
                (number(p.mean), false),
                (number(p.sd), false),
                (number(p.mcse_mean), false),
                (number(p.q5), false),
                (number(p.q50), false),
                (number(p.q95), false),
                (format!("{:.0}", p.ess_bulk), p.ess_bulk < low_ess),
                (format!("{:.0}", p.ess_tail), p.ess_tail < low_ess),
                (format!("{:.3}", p.rhat), p.rhat > RHAT_LIMIT),
            ]
        })
        .collect();
    page.table(
        &[
            "", "mean", "sd", "MCSE", "5%", "50%", "95%", "ESS bulk", "ESS tail", "R̂",
        ],
        &rows,
    );
}

fn sampler(page: &mut Page, chains: &Chains) -> Result<()> {
    page.heading("Sampler");
    let totals = chains.totals();
    page.paragraph(
        "",
        &format!(
            "Mean acceptance statistic {:.3}; {} divergent transitions in {} draws.",
            totals.mean_accept_stat,
            totals.divergences,
            totals.draws * totals.chains
        ),
    );
    let mut row = String::from("<div class=\"row\">");
    row.push_str(&figure(
        "acceptance",
        &figures::acceptance(&chains.column("accept_stat__"))?,
        "",
    ));
    row.push_str(&figure(
        "divergences",
        &figures::divergences(&chains.column("divergent__"))?,
        "",
    ));
    row.push_str("</div>");
    page.html(&row);
    Ok(())
}

fn parameters_section(page: &mut Page, chains: &Chains, chosen: &[String]) -> Result<()> {
    page.heading("Traces and histograms");
    let all = chains.parameters().len();
    if chosen.len() < all {
        page.paragraph(
            "",
            &format!(
                "{} of the {all} parameters: {} (choose others by name).",
                chosen.len(),
                chosen.join(", ")
            ),
        );
    }
    for name in chosen {
        let draws = chains.column(name);
        page.html(&format!(
            "<div class=\"row\">{}{}</div>",
            figure(&format!("trace {name}"), &figures::trace(name, &draws)?, ""),
            figure(
                &format!("histogram {name}"),
                &figures::histogram(name, &draws)?,
                ""
            )
        ));
    }
    Ok(())
}

fn pairs(page: &mut Page, chains: &Chains, chosen: &[String]) -> Result<()> {
    if chosen.len() < 2 {
        return Ok(());
    }
    page.heading("Pairs");
    let mut row = String::from("<div class=\"row\">");
    for (i, x) in chosen.iter().enumerate() {
        for y in &chosen[i + 1..] {
            let svg = figures::pair((x, &chains.column(x)), (y, &chains.column(y)))?;
            row.push_str(&figure(&format!("pair {x} {y}"), &svg, ""));
        }
    }
    row.push_str("</div>");
    page.html(&row);
    Ok(())
}

fn costs(page: &mut Page, chains: &Chains, footers: &[ChainFooter]) {
    let mut rows = Vec::new();
    for (i, footer) in footers.iter().enumerate() {
        for (phase, e) in [("warmup", footer.warmup), ("sampling", footer.sampling)] {
            if let Some(Evaluations {
                iterations,
                exact_gradients,
                exact_values,
                surrogate_gradients,
            }) = e
            {
                rows.push(
                    [
                        chain_label(chains, i),
                        phase.to_string(),
                        iterations.to_string(),
                        exact_gradients.to_string(),
                        exact_values.to_string(),
                        surrogate_gradients.to_string(),
                    ]
                    .map(|text| (text, false))
                    .to_vec(),
                );
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    page.heading("Evaluations");
    page.paragraph(
        "",
        "Per chain and phase: the exact gradients (each leapfrog step of an exact trajectory), \
         exact values (the end point of a surrogate trajectory, judged by the exact U) and \
         surrogate gradients the chain made. A surrogate's own training evaluations are in the \
         section below.",
    );
    page.table(
        &[
            "chain",
            "phase",
            "iterations",
            "exact gradients",
            "exact values",
            "surrogate gradients",
        ],
        &rows,
    );
}

fn surrogate(page: &mut Page, chains: &Chains, footers: &[ChainFooter]) -> Result<()> {
    if footers
        .iter()
        .all(|f| f.other.is_empty() && f.learning.is_empty())
    {
        return Ok(());
    }
    page.heading("Surrogate");
    let mut lines = String::from("<ul>");
    for (i, footer) in footers.iter().enumerate() {
        for line in &footer.other {
            lines.push_str(&format!(
                "<li>chain {}: {}</li>",
                escape(&chain_label(chains, i)),
                escape(line)
            ));
        }
        for line in &footer.unreadable {
            lines.push_str(&format!(
                "<li>chain {}: an unreadable line: <code>{}</code></li>",
                escape(&chain_label(chains, i)),
                escape(line)
            ));
        }
    }
    lines.push_str("</ul>");
    page.html(&lines);
    let curves: Vec<&[_]> = footers.iter().map(|f| f.learning.as_slice()).collect();
    if curves.iter().all(|c| c.is_empty()) {
        page.paragraph(
            "notes",
            "No learning curve: these files do not record one (they were written before shmc \
             recorded it, or the surrogate never proposed).",
        );
        return Ok(());
    }
    let warmup = chains.files[0]
        .setting("num_warmup")
        .and_then(|w| w.parse().ok())
        .unwrap_or(usize::MAX);
    let caption = match figures::learning_axis(&curves) {
        figures::LearningAxis::States => {
            "Each dot: the mean acceptance probability of consecutive surrogate proposals during \
             warmup, at the states the surrogate had learned from by the last of them; each \
             ring: all of sampling's proposals, the surrogate fixed. A curve still rising at the \
             end of warmup says more training states would pay."
        }
        figures::LearningAxis::Iteration => {
            "The surrogate learned nothing during the run after its fit (or was precomputed or \
             loaded), so its acceptance is shown over the iterations: dots for warmup's \
             proposals in windows, a ring for all of sampling's."
        }
    };
    page.html(&figure(
        "learning",
        &figures::learning(&curves, warmup)?,
        caption,
    ));
    Ok(())
}

fn settings(page: &mut Page, chains: &Chains) {
    let rows: Vec<Vec<(String, bool)>> = chains.files[0]
        .settings
        .iter()
        .map(|(k, v)| vec![(k.clone(), false), (v.clone(), false)])
        .collect();
    if rows.is_empty() {
        return;
    }
    page.heading("Settings");
    page.html("<details><summary>The first chain's file header</summary>");
    page.table(&["setting", "value"], &rows);
    page.html("</details>");
}
