//! `shmc bench sbc` in parts: `--first-replication N --count K --output DIR` runs those
//! replications of every cell (a process or HyperQueue task each), and `--merge DIR...` puts
//! the parts back together into the one-process table. The options are `shmc sbc`'s
//! ([`PartArgs`]) and each cell's parts merge through [`shmc::sbc::merge`], as `shmc sbc`'s do:
//! a part without a given thinning keeps its ranks at every thinning, so the merge chooses the
//! one the whole run would have, from every replication's ESS.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::experiments::sbc::{
    SbcBenchSettings, SbcRow, replications, run_sbc_bench, run_sbc_cells,
};
use crate::sbc::PartArgs;
use shmc::output::RUN_SETTINGS_FILE;
use shmc::sampler::SampleConfig;
use shmc::sbc::{self, Part, PartRecord, SbcFolder, SbcSettings};
use shmc::{Error, Model, Result};

/// The file in a part's folder that holds every cell's part, for --merge.
const PART_FILE: &str = sbc::TABLE_PART_FILE;

/// The options that differ between the parts of one table and the command that merges them.
const PER_PART: [&str; 7] = [
    "--first-replication",
    "--count",
    "--output",
    "--overwrite",
    "--merge",
    "--json",
    "--jobs",
];

/// `bench sbc`'s parts: `shmc sbc`'s options, and the folder a part is written to.
#[derive(Debug, Args)]
pub struct BenchSbcArgs {
    #[command(flatten)]
    pub parts: PartArgs,
    /// sbc, with --first-replication: the folder the part's cells are written to, for --merge.
    #[arg(long, value_name = "DIR", requires = "first_replication")]
    pub output: Option<PathBuf>,
    /// With --output: remove an earlier part's files from the folder (those its shmc-sbc.json
    /// lists, nothing else) before writing, instead of refusing the folder.
    #[arg(long, requires = "output")]
    pub overwrite: bool,
}

impl BenchSbcArgs {
    /// Whether a part or a merge is asked for.
    pub fn given(&self) -> bool {
        self.parts.first_replication.is_some() || !self.parts.merge.is_empty()
    }
}

/// A part of the table: the replications it ran of every cell, and each cell's part (or why
/// the cell failed).
#[derive(Serialize, Deserialize)]
struct TablePart {
    of: usize,
    part: Part,
    cells: Vec<CellPart>,
}

/// One cell's part of its calibration, or its error.
#[derive(Serialize, Deserialize)]
struct CellPart {
    model: String,
    method: String,
    part: std::result::Result<PartRecord, String>,
}

/// The table's rows: of the whole run, of the part asked for (written to --output), or merged
/// from the parts of --merge.
pub fn rows(
    mut settings: SbcBenchSettings,
    args: &BenchSbcArgs,
    log: &dyn Fn(&str),
) -> Result<Vec<SbcRow>> {
    if !args.parts.merge.is_empty() {
        return merged(&settings, args, log);
    }
    let Some(part) = args.parts.part() else {
        return run_sbc_bench(&settings, log);
    };
    let Some(dir) = &args.output else {
        return Err(Error::invalid(
            "--first-replication needs --output: the part's cells are written there, for --merge",
        ));
    };
    let of = replications(settings.quick);
    part.within(of)?;
    let files = [PART_FILE, RUN_SETTINGS_FILE, "shmc-run.json.tmp"].map(String::from);
    let folder = SbcFolder::claim(dir, files.to_vec(), args.overwrite)?;
    if !folder.removed().is_empty() {
        log(&format!(
            "--overwrite: removed {} files of an earlier part from {}",
            folder.removed().len(),
            dir.display()
        ));
    }
    settings.part = Some(part);
    let cells = RefCell::new(Vec::new());
    let run = |model: &str, method: &str, m: &dyn Model, c: &SampleConfig, s: &SbcSettings| {
        let result = sbc::run(m, c, s, &|_| {}, None);
        cells.borrow_mut().push(CellPart {
            model: model.into(),
            method: method.into(),
            part: result
                .as_ref()
                .map(|r| PartRecord::of_run(r, of))
                .map_err(|e| e.to_string()),
        });
        result
    };
    let rows = run_sbc_cells(&settings, &run, log)?;
    let cells = cells.into_inner();
    write_part(dir, &TablePart { of, part, cells })?;
    log(&format!(
        "the part for --merge written to {}",
        dir.join(PART_FILE).display()
    ));
    Ok(rows)
}

/// Writes `part` and this command line (for --merge's check of the settings) into `dir`.
fn write_part(dir: &Path, part: &TablePart) -> Result<()> {
    let path = dir.join(PART_FILE);
    let text = serde_json::to_string(part).map_err(|e| Error::invalid(e.to_string()))?;
    std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
    super::resume::save_invocation(dir, &[])
}

/// The part in `dir`.
fn read_part(dir: &Path) -> Result<TablePart> {
    let path = dir.join(PART_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::Data {
        path: path.clone(),
        line: e.line(),
        message: format!("not a part of bench sbc's table: {e}"),
    })
}

/// The rows of the parts in --merge's folders, each checked to have been started with this
/// command's settings (but those of [`PER_PART`]) and all to cover the replications once.
fn merged(
    settings: &SbcBenchSettings,
    args: &BenchSbcArgs,
    log: &dyn Fn(&str),
) -> Result<Vec<SbcRow>> {
    args.parts.check_settings(2, &PER_PART)?;
    let parts = args
        .parts
        .merge
        .iter()
        .map(|dir| Ok((dir.display().to_string(), read_part(dir)?)))
        .collect::<Result<Vec<_>>>()?;
    let ranges: Vec<(String, Part)> = parts.iter().map(|(n, p)| (n.clone(), p.part)).collect();
    sbc::check_cover(&ranges, replications(settings.quick))?;
    let merge = |model: &str, method: &str, _: &dyn Model, _: &SampleConfig, _: &SbcSettings| {
        let records = parts
            .iter()
            .map(|(name, part)| {
                let cell = part
                    .cells
                    .iter()
                    .find(|c| c.model == model && c.method == method);
                let cell = cell.ok_or_else(|| {
                    Error::invalid(format!("{name} holds no part of {model} x {method}"))
                })?;
                let record = cell.part.clone();
                Ok((
                    name.clone(),
                    record.map_err(|e| Error::invalid(format!("{name}: {e}")))?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        sbc::merge(records)
    };
    run_sbc_cells(settings, &merge, log)
}
