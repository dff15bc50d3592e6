//! Writing and reading CmdStan's per-chain CSV.
//!
//! The layout is CmdStan's: `#` comment lines holding the configuration, the header line
//! (`lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__`, then the
//! parameters), the adaptation block (`# Adaptation terminated`, step size, inverse metric),
//! one line per draw, and the elapsed-time block. Rows are written and flushed as they are
//! made, so a killed run leaves every finished draw readable; an interrupted or failed chain ends
//! with a comment saying so instead of the timing block, so it never looks complete (a killed
//! one has no end at all: [`StanCsv::complete`] tells the three from a finished chain).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use shmc_core::Steps;

use super::footer::{evaluations_line, learning_line, trajectories_line};
use super::resume;
use crate::sampler::transitions::Chosen;
use crate::sampler::{
    ChainResult, Checkpoint, DrawSink, InverseMetric, MassMatrix, Method, Resumed, SAMPLER_COLUMNS,
    SampleConfig, StepSize,
};
use crate::surrogates::Surrogate;
use crate::{Error, Result};

/// How the sampler's trajectories end, as CmdStan's `engine` says it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// A trajectory length set beforehand (HMC and the methods built on it).
    #[default]
    Static,
    /// NUTS's doubling until the trajectory turns back, at most `max_depth` times.
    Nuts {
        /// The largest tree depth.
        max_depth: u64,
    },
}

/// What the comment header of one chain's file records.
#[derive(Clone, Debug, Default)]
pub struct CsvHeader {
    /// The model's name.
    pub model: String,
    /// The chain's id (1-based).
    pub chain: usize,
    /// Kept draws asked for.
    pub num_samples: usize,
    /// Warmup iterations asked for.
    pub num_warmup: usize,
    /// Whether warmup rows precede the kept rows.
    pub save_warmup: bool,
    /// Whether warmup adapts the step size (and the metric).
    pub adapt_engaged: bool,
    /// The target acceptance of the adaptation.
    pub delta: f64,
    /// The step size set by the user, or the initial one.
    pub stepsize: f64,
    /// The seed of the run.
    pub seed: u64,
    /// How trajectories end.
    pub engine: Engine,
    /// Whether the mass matrix is dense (the Laplace approximation's: `dense_e`), not
    /// diagonal (`diag_e`).
    pub dense_metric: bool,
    /// The data file, if any.
    pub data_file: Option<String>,
    /// The SHA-256 of the data file's bytes (lowercase hex), if there is one: what makes two
    /// runs' data one, whatever path each was given ([`crate::data::digest`]).
    pub data_sha256: Option<String>,
    /// Further `key = value` lines (method settings), written under `shmc`.
    pub extra: Vec<(String, String)>,
    /// The parameter names.
    pub parameters: Vec<String>,
}

/// Formats a number compactly and exactly: shortest round-trip decimal, with an exponent for
/// very large or very small magnitudes (Rust's `{}` never uses one).
pub fn format_number(x: f64) -> String {
    let a = x.abs();
    if x == 0.0 || (1e-5..1e15).contains(&a) || !x.is_finite() {
        match x {
            f64::INFINITY => "inf".into(),
            f64::NEG_INFINITY => "-inf".into(),
            _ if x.is_nan() => "nan".into(),
            _ => format!("{x}"),
        }
    } else {
        format!("{x:e}")
    }
}

/// The label of approximate inference, in the output and the CSV files: SGLD, VHMC's
/// published acceptance rule, or a grid's complete variant (`method` `grid-hmc-complete` or
/// `sg-hmc-complete`) with its estimated bound `2‖U − Ũ‖∞` on `KL(P‖Q)` once the grid is built.
pub fn approximate_label(method: &str, kl_bound: Option<f64>) -> String {
    if method == "sgld" {
        return "APPROXIMATE inference: sgld takes Langevin steps on minibatch gradients with no \
                Metropolis-Hastings correction, so the draws are biased by the step size and the \
                gradient noise (lp__ and energy__ are not computed: NaN)"
            .into();
    }
    if method.starts_with("vhmc") {
        return "APPROXIMATE inference: vhmc with the published acceptance rule accepts with the \
                surrogate V, so the draws target exp(-V), not the exact posterior (lp__ holds -V)"
            .into();
    }
    let bound = match kl_bound {
        Some(b) => format!("KL(P||Q) <= 2 sup|U - U~| ~ {b:.4} (estimated from the grid)"),
        None => "the bound KL(P||Q) <= 2 sup|U - U~| is estimated once the grid is built (see \
                 the end of the file)"
            .into(),
    };
    format!(
        "APPROXIMATE inference: {method} (the complete variant) accepts with the grid's U~ \
         inside its box, so the draws target exp(-U~), not the exact posterior (lp__ holds \
         -U~); {bound}"
    )
}

impl CsvHeader {
    /// The header `shmc sample` writes for chain `chain` (1-based) of a run of `config` on the
    /// model called `model` with `parameters`: the run's settings in CmdStan's terms, and the
    /// method's under `shmc`. The data file is the caller's to add.
    pub fn for_run(
        model: &str,
        chain: usize,
        config: &SampleConfig,
        parameters: Vec<String>,
    ) -> Self {
        let (adapt_engaged, delta, stepsize) = match config.step_size {
            StepSize::Adapt { target } => (true, target, 1.0),
            StepSize::Fixed(eps) => (false, 0.8, eps),
        };
        let method = config.method.name();
        let mut extra = vec![("shmc_method".to_string(), method.to_string())];
        if config.metric == MassMatrix::LowRank {
            // CmdStan has no low-rank metric: the adaptation block gives its diagonal part.
            extra.push(("shmc_metric".into(), "low-rank".into()));
        }
        let engine = match &config.method {
            Method::Nuts(nuts) => Engine::Nuts {
                max_depth: nuts.max_depth,
            },
            Method::Sgld(sgld) => {
                extra.push(("sgld_batch".into(), sgld.batch.to_string()));
                extra.push((
                    "sgld_step_size".into(),
                    format!("{} * ({} + t)^-{}", sgld.a, sgld.b, sgld.gamma),
                ));
                Engine::Static
            }
            _ => {
                extra.push(("trajectory_steps".into(), config.steps.max().to_string()));
                let jittered = matches!(config.steps, Steps::Jittered(_));
                extra.push(("jitter_steps".into(), u8::from(jittered).to_string()));
                Engine::Static
            }
        };
        if let Method::RnsHmc(settings) = &config.method {
            let kind = settings.kind.fitter().header();
            extra.extend(
                kind.into_iter()
                    .map(|(key, value)| (key.to_string(), value)),
            );
        }
        if let Some(k) = config.method.surrogate().and_then(|s| s.transitions) {
            extra.push(("surrogate_transitions".into(), k.to_string()));
        }
        if let Method::Mlda(settings) = &config.method {
            let list = |v: &[String]| v.join(",");
            let levels: Vec<String> = settings.levels.iter().map(usize::to_string).collect();
            let subchains: Vec<String> = settings.subchains.iter().map(u32::to_string).collect();
            let network = settings.network.iter().map(|_| "net".to_string());
            let levels: Vec<String> = network.chain(levels).collect();
            extra.push(("mlda_levels".into(), list(&levels)));
            extra.push(("mlda_subchains".into(), list(&subchains)));
            let judge = if settings.fine_warmup {
                "fine"
            } else {
                "coarse"
            };
            extra.push(("mlda_warmup_judge".into(), judge.into()));
        }
        if let Some(level) = config.design_level {
            extra.push(("design_level".into(), level.to_string()));
        }
        if config.method.approximate() {
            extra.push(("inference".into(), approximate_label(method, None)));
        }
        Self {
            model: model.to_string(),
            chain,
            num_samples: config.draws,
            num_warmup: config.warmup,
            save_warmup: config.save_warmup,
            adapt_engaged,
            delta,
            stepsize,
            seed: config.seed,
            engine,
            dense_metric: config.mass_matrix() == MassMatrix::Laplace,
            data_file: None,
            data_sha256: None,
            extra,
            parameters,
        }
    }
}

/// Where chain `chain` (1-based) of model `model` is written in `dir`: `MODEL-CHAIN.csv`, as
/// CmdStan names its per-chain files.
pub fn chain_path(dir: &Path, model: &str, chain: usize) -> PathBuf {
    dir.join(format!("{model}-{chain}.csv"))
}

/// A chain's CSV file, written as the chain runs.
pub struct CsvSink {
    path: PathBuf,
    out: BufWriter<File>,
    line: String,
    /// The method's name, from the header's `shmc_method`, for the approximate label.
    method: String,
    /// The model's name, for the meta of a saved surrogate.
    model: String,
}

impl CsvSink {
    /// Creates (or truncates) `path` and writes the configuration and the column header; an
    /// older run's checkpoint beside it is removed.
    pub fn create(path: &Path, header: &CsvHeader) -> Result<Self> {
        resume::remove(path);
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        let mut sink = Self::on(path, file, header);
        let text = header_text(header, path);
        sink.write(&text)?;
        sink.flush()?;
        Ok(sink)
    }

    /// The sink of a stopped chain's file `path` and the chain to resume, for a model of `dim`
    /// parameters: the file cut back to the rows its checkpoint counts (after `warmup_rows`
    /// saved warmup rows), dropping later rows and any end block, and written on after them;
    /// or, if the chain stopped in warmup, written anew. An error if its header is not the one `header` makes (other settings).
    pub fn resume(
        path: &Path,
        header: &CsvHeader,
        dim: usize,
        warmup_rows: usize,
    ) -> Result<(Self, Option<Resumed>)> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        if !text.starts_with(&header_text(header, path)) {
            return Err(Error::invalid(format!(
                "{}: its header is not the one this run writes (other settings, a data file \
                 whose bytes changed since the run stopped, or another version of shmc): it \
                 cannot be resumed",
                path.display()
            )));
        }
        let Some((checkpoint, surrogate)) = resume::read(path, dim)? else {
            return Ok((Self::create(path, header)?, None));
        };
        cut(path, warmup_rows + checkpoint.kept)?;
        let file = read_stan_csv(path)?;
        let kept = file.columns.first().map_or(0, Vec::len);
        if kept != checkpoint.kept || file.columns.len() != SAMPLER_COLUMNS.len() + dim {
            return Err(Error::invalid(format!(
                "{}: {kept} draws of {} columns where its checkpoint counts {} draws of {}",
                path.display(),
                file.columns.len(),
                checkpoint.kept,
                SAMPLER_COLUMNS.len() + dim
            )));
        }
        let rows = (0..kept)
            .map(|i| file.columns.iter().map(|c| c[i]).collect())
            .collect();
        let resumed = Resumed {
            checkpoint,
            path: resume::checkpoint_path(path),
            rows,
            surrogate,
        };
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok((Self::on(path, file, header), Some(resumed)))
    }

    fn on(path: &Path, file: File, header: &CsvHeader) -> Self {
        Self {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            line: String::new(),
            method: header
                .extra
                .iter()
                .find(|(k, _)| k == "shmc_method")
                .map_or_else(String::new, |(_, v)| v.clone()),
            model: header.model.clone(),
        }
    }

    fn write(&mut self, text: &str) -> Result<()> {
        self.out
            .write_all(text.as_bytes())
            .map_err(|e| Error::io(&self.path, e))
    }

    fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| Error::io(&self.path, e))
    }
}

fn header_text(h: &CsvHeader, path: &Path) -> String {
    let flag = |b: bool| if b { 1 } else { 0 };
    let mut s = String::new();
    let mut line = |text: String| {
        s.push_str("# ");
        s.push_str(&text);
        s.push('\n');
    };
    line("stan_version_major = 2".into());
    line("stan_version_minor = 36".into());
    line("stan_version_patch = 0".into());
    line(format!("model = {}", h.model));
    line("method = sample (Default)".into());
    line("  sample".into());
    line(format!("    num_samples = {}", h.num_samples));
    line(format!("    num_warmup = {}", h.num_warmup));
    line(format!("    save_warmup = {}", flag(h.save_warmup)));
    line("    thin = 1".into());
    line("    adapt".into());
    line(format!("      engaged = {}", flag(h.adapt_engaged)));
    line(format!("      delta = {}", h.delta));
    line("    algorithm = hmc (Default)".into());
    line("      hmc".into());
    match h.engine {
        Engine::Static => {
            line("        engine = static".into());
            line("          static".into());
            // CmdStanPy insists on a tree depth limit even for static HMC; treedepth__ is
            // always 0 here, so this limit is never reported as hit.
            line("            max_depth = 10".into());
        }
        Engine::Nuts { max_depth } => {
            line("        engine = nuts".into());
            line("          nuts".into());
            line(format!("            max_depth = {max_depth}"));
        }
    }
    if h.dense_metric {
        line("        metric = dense_e".into());
    } else {
        line("        metric = diag_e (Default)".into());
    }
    line(format!("        stepsize = {}", h.stepsize));
    line("    num_chains = 1 (Default)".into());
    line(format!("id = {}", h.chain));
    if let Some(file) = &h.data_file {
        line("data".into());
        line(format!("  file = {file}"));
        if let Some(sha256) = &h.data_sha256 {
            line(format!("  sha256 = {sha256}"));
        }
    }
    line("init = 2 (Default)".into());
    line("random".into());
    line(format!("  seed = {}", h.seed));
    line("output".into());
    line(format!("  file = {}", path.display()));
    line("shmc".into());
    line(format!("  version = {}", env!("CARGO_PKG_VERSION")));
    for (k, v) in &h.extra {
        line(format!("  {k} = {v}"));
    }
    let columns: Vec<&str> = SAMPLER_COLUMNS
        .iter()
        .copied()
        .chain(h.parameters.iter().map(String::as_str))
        .collect();
    s.push_str(&columns.join(","));
    s.push('\n');
    s
}

/// The comment that names the surrogate transitions `auto` chose, before the adaptation's.
const TRANSITIONS_COMMENT: &str = "Surrogate transitions = ";

impl DrawSink for CsvSink {
    fn transitions_chosen(&mut self, chosen: &Chosen) -> Result<()> {
        self.write(&format!("# {TRANSITIONS_COMMENT}{}\n", chosen.describe()))
    }

    fn adaptation(&mut self, step_size: f64, inverse_metric: &InverseMetric) -> Result<()> {
        let row = |values: &mut dyn Iterator<Item = f64>| {
            let cells: Vec<String> = values.map(format_number).collect();
            format!("# {}\n", cells.join(", "))
        };
        let matrix = match inverse_metric {
            InverseMetric::Diagonal(diagonal) => format!(
                "# Diagonal elements of inverse mass matrix:\n{}",
                row(&mut diagonal.iter().copied())
            ),
            InverseMetric::Dense(matrix) => {
                let rows: String = matrix
                    .row_iter()
                    .map(|r| row(&mut r.iter().copied()))
                    .collect();
                format!("# Elements of inverse mass matrix:\n{rows}")
            }
        };
        let text = format!(
            "# Adaptation terminated\n# Step size = {}\n{matrix}",
            format_number(step_size)
        );
        self.write(&text)?;
        self.flush()
    }

    fn draw(&mut self, row: &[f64]) -> Result<()> {
        self.line.clear();
        for (k, &x) in row.iter().enumerate() {
            if k > 0 {
                self.line.push(',');
            }
            // treedepth__, n_leapfrog__ and divergent__ are integers in CmdStan's files.
            if (3..=5).contains(&k) {
                self.line.push_str(&format!("{}", x as i64));
            } else {
                self.line.push_str(&format_number(x));
            }
        }
        self.line.push('\n');
        let line = std::mem::take(&mut self.line);
        let written = self.write(&line);
        self.line = line;
        written?;
        self.flush()
    }

    fn finish(&mut self, chain: &ChainResult) -> Result<()> {
        let mut text = if chain.interrupted {
            "# Sampling interrupted: this file holds only the draws finished before the stop.\n"
                .to_string()
        } else {
            let (warmup, sampling) = (chain.warmup_seconds, chain.sampling_seconds);
            format!(
                "# \n#  Elapsed Time: {warmup:.3} seconds (Warm-up)\n#                {sampling:.3} seconds (Sampling)\n#                {:.3} seconds (Total)\n# \n",
                warmup + sampling
            )
        };
        for (phase, e) in [
            ("warmup", &chain.warmup_evaluations),
            ("sampling", &chain.sampling_evaluations),
        ] {
            text.push_str(&format!("# {}\n", evaluations_line(phase, e)));
        }
        if let Some(s) = &chain.surrogate {
            text.push_str(&format!(
                "# shmc surrogate: trained on {} states in {:.3} s with {} exact evaluations of its own (online updates {} in {:.3} s, swaps {}), scale {}, held-out gradient error {:.4}\n",
                s.training_states,
                s.training_seconds,
                s.extra_exact_evaluations,
                s.online_updates,
                s.online_seconds,
                s.swaps,
                s.scale,
                s.holdout_gradient_error
            ));
            if let Some(t) = trajectories_line(s, &chain.sampling_evaluations) {
                text.push_str(&format!("# shmc surrogate trajectories: {t}\n"));
            }
            if !s.learning.is_empty() {
                text.push_str(&format!("# {}\n", learning_line(&s.learning)));
            }
            if let Some(p) = &s.precompute {
                text.push_str(&format!(
                    "# shmc precompute: {} exact evaluations in {:.3} s ({})\n",
                    p.evaluations,
                    p.seconds,
                    if p.before_sampling {
                        "before sampling, shared by every chain"
                    } else {
                        "after the exact phase"
                    }
                ));
            }
            if let Some(b) = s.kl_bound_estimate {
                text.push_str(&format!(
                    "# inference = {}\n",
                    approximate_label(&self.method, Some(b))
                ));
            }
        }
        self.write(&text)?;
        self.flush()
    }

    fn checkpoint(
        &mut self,
        checkpoint: &Checkpoint,
        surrogate: Option<&dyn Surrogate>,
    ) -> Result<()> {
        resume::save(&self.path, checkpoint, surrogate, &self.model)
    }

    fn failed(&mut self, message: &str) -> Result<()> {
        let message = message.replace('\n', " ");
        self.write(&format!(
            "# Sampling failed: {message}\n# This file holds only the draws finished before the failure.\n"
        ))?;
        self.flush()
    }
}

/// Cuts `csv` back to its header, its first `rows` rows and the comments among them (the
/// surrogate transitions `auto` chose, the adaptation block), through a temporary file renamed
/// over it. An error if it holds fewer rows.
fn cut(csv: &Path, rows: usize) -> Result<()> {
    let text = std::fs::read_to_string(csv).map_err(|e| Error::io(csv, e))?;
    let mut kept = String::with_capacity(text.len());
    let (mut header_seen, mut seen, mut block) = (false, 0usize, MiddleBlock::default());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let comment = line.starts_with('#');
        if !header_seen {
            header_seen = !comment;
        } else if comment {
            if !block.holds(line) {
                break;
            }
        } else {
            if seen == rows {
                break;
            }
            seen += 1;
        }
        kept.push_str(line);
        kept.push('\n');
    }
    if seen < rows {
        return Err(Error::invalid(format!(
            "{}: {seen} rows where its checkpoint counts {rows}: the file was changed after the \
             run stopped",
            csv.display()
        )));
    }
    let temporary = csv.with_extension("csv.tmp");
    std::fs::write(&temporary, kept).map_err(|e| Error::io(&temporary, e))?;
    std::fs::rename(&temporary, csv).map_err(|e| Error::io(csv, e))
}

/// Reads the comments a file holds between its draws, by what each declares: the surrogate
/// transitions `auto` chose, and the adaptation block, whose matrix heading says whether one
/// row (a diagonal) or a row per parameter (a dense matrix) follows. Any other comment starts
/// the end block.
#[derive(Default)]
struct MiddleBlock {
    /// Matrix rows still allowed: `Some(1)` after a diagonal's heading, `None` when none is.
    rows_left: Option<usize>,
}

impl MiddleBlock {
    /// Whether the comment `line` belongs among the draws.
    fn holds(&mut self, line: &str) -> bool {
        let text = line.trim_start_matches('#').trim();
        if self.rows_left.is_some_and(|n| n > 0) && is_number_row(text) {
            self.rows_left = self.rows_left.map(|n| n - 1);
            return true;
        }
        self.rows_left = match text {
            "Diagonal elements of inverse mass matrix:" => Some(1),
            "Elements of inverse mass matrix:" => Some(usize::MAX),
            _ => None,
        };
        self.rows_left.is_some()
            || text == "Adaptation terminated"
            || text.starts_with("Step size = ")
            || text.starts_with(TRANSITIONS_COMMENT)
    }
}

/// Whether `text` is a comma-separated list of numbers, as a metric's rows are.
fn is_number_row(text: &str) -> bool {
    !text.is_empty() && text.split(',').all(|x| x.trim().parse::<f64>().is_ok())
}

/// The draws of one CmdStan CSV file.
#[derive(Clone, Debug, PartialEq)]
pub struct StanCsv {
    /// The file.
    pub path: PathBuf,
    /// Column names, in file order.
    pub names: Vec<String>,
    /// `columns[k][i]`: column `k` at kept draw `i` (warmup rows dropped).
    pub columns: Vec<Vec<f64>>,
    /// Whether the file records an interrupted run.
    pub interrupted: bool,
    /// Whether the file ends as a finished chain's does, with CmdStan's elapsed-time block. A
    /// chain that was killed, failed (the file then says why) or interrupted has none: its rows
    /// are only the draws made before it stopped.
    pub complete: bool,
    /// The file's `inference = …` comment when the run was approximate (VHMC with its
    /// published acceptance rule), else `None`.
    pub approximate: Option<String>,
    /// The `key = value` comment lines before the column header (the run's configuration:
    /// `model`, `num_warmup`, `seed`, shmc's `shmc_method` …), in file order.
    pub settings: Vec<(String, String)>,
    /// The `# shmc …` lines after the draws, without `# shmc ` (what the chain's phases cost,
    /// and a surrogate's training): [`ChainFooter::parse`](super::ChainFooter::parse) reads them.
    pub shmc: Vec<String>,
    /// The surrogate transitions `auto` chose, `W:S` (what reruns the draws), if the file
    /// names them.
    pub transitions: Option<String>,
    /// The data file the header names (`file` under `data`), if any: the `file` key alone is
    /// ambiguous, since the output file is one too.
    pub data_file: Option<String>,
    /// The SHA-256 of the data file's bytes the header records (`sha256` under `data`), if any.
    pub data_sha256: Option<String>,
}

impl StanCsv {
    /// The value of the header's setting `key`, if present (the first, if it repeats).
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The values of the named column, if present.
    pub fn column(&self, name: &str) -> Option<&[f64]> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|k| self.columns[k].as_slice())
    }
}

fn parse_config_number(line: &str, key: &str) -> Option<usize> {
    let rest = line.trim_start_matches('#').trim();
    let value = rest.strip_prefix(key)?.trim_start().strip_prefix('=')?;
    value.split_whitespace().next()?.parse().ok()
}

/// Reads a CmdStan CSV file (ours or CmdStan's), dropping warmup rows when the file says they
/// were saved. Errors name the file and the line.
pub fn read_stan_csv(path: &Path) -> Result<StanCsv> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    parse_stan_csv(BufReader::new(file), path)
}

/// Reads a CmdStan CSV from `input` as [`read_stan_csv`] reads it from a file; `path` names
/// the file in errors and in the result.
pub fn parse_stan_csv(input: impl BufRead, path: &Path) -> Result<StanCsv> {
    let bad = |line: usize, message: String| Error::Data {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut names: Option<Vec<String>> = None;
    let mut columns: Vec<Vec<f64>> = Vec::new();
    let mut config = Configuration::default();
    let mut comments = Comments::default();
    let mut rows = 0usize;
    for (index, line) in input.lines().enumerate() {
        let number = index + 1;
        let line = line.map_err(|e| Error::io(path, e))?;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if text.starts_with('#') {
            if names.is_none() {
                config.read(text);
            }
            comments.read(text, names.is_some());
            continue;
        }
        let Some(header) = &names else {
            let header = header_names(text).map_err(|message| bad(number, message))?;
            columns = vec![Vec::new(); header.len()];
            names = Some(header);
            continue;
        };
        let fields: Vec<&str> = text.split(',').collect();
        if fields.len() != header.len() {
            return Err(bad(
                number,
                format!("{} fields, expected {}", fields.len(), header.len()),
            ));
        }
        rows += 1;
        if config.save_warmup && rows <= config.num_warmup {
            continue;
        }
        for (k, field) in fields.iter().enumerate() {
            let value = field.trim().parse::<f64>().map_err(|_| {
                bad(
                    number,
                    format!("column {} ({}): not a number: {field:?}", k + 1, header[k]),
                )
            })?;
            columns[k].push(value);
        }
    }
    let names = names.ok_or_else(|| bad(0, "no header line: not a CmdStan CSV".into()))?;
    Ok(StanCsv {
        path: path.to_path_buf(),
        names,
        columns,
        interrupted: comments.interrupted,
        complete: comments.complete,
        approximate: comments.approximate,
        transitions: comments.transitions,
        settings: config.settings,
        shmc: comments.shmc,
        data_file: config.data_file,
        data_sha256: config.data_sha256,
    })
}

/// The column names of a CSV's header line, refused when it has no `lp__` column or names one
/// twice.
fn header_names(text: &str) -> std::result::Result<Vec<String>, String> {
    let header: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
    if !header.iter().any(|h| h == "lp__") {
        return Err("header line has no lp__ column: not a CmdStan CSV".into());
    }
    match repeated_name(&header) {
        Some(message) => Err(message),
        None => Ok(header),
    }
}

/// What a CSV's comment lines say besides the configuration: whether the run was interrupted
/// or completed, its inference label, the surrogate transitions it chose, and shmc's own lines
/// after the column header.
#[derive(Default)]
struct Comments {
    interrupted: bool,
    complete: bool,
    approximate: Option<String>,
    transitions: Option<String>,
    shmc: Vec<String>,
}

impl Comments {
    /// Reads the comment line `text`, `after_header` when the column header came before it.
    fn read(&mut self, text: &str, after_header: bool) {
        self.interrupted |= text.contains("Sampling interrupted");
        self.complete |= text.contains("Elapsed Time");
        let body = text.trim_start_matches('#').trim();
        if let Some(label) = body.strip_prefix("inference = ") {
            self.approximate = Some(label.to_string());
        }
        if let Some(rest) = body.strip_prefix(TRANSITIONS_COMMENT) {
            self.transitions = rest.split_whitespace().next().map(str::to_string);
        }
        if after_header && let Some(line) = text.strip_prefix("# shmc ") {
            self.shmc.push(line.to_string());
        }
    }
}

/// What the configuration lines before the column header say.
#[derive(Default)]
struct Configuration {
    num_warmup: usize,
    save_warmup: bool,
    /// Every `key = value`, in order.
    settings: Vec<(String, String)>,
    /// The top-level entry the current line is under (`data`, `output`, …).
    section: String,
    /// `file` under `data` (the output file is a `file` too).
    data_file: Option<String>,
    /// `sha256` under `data`.
    data_sha256: Option<String>,
}

impl Configuration {
    /// Takes in the comment line `text`.
    fn read(&mut self, text: &str) {
        if let Some(n) = parse_config_number(text, "num_warmup") {
            self.num_warmup = n;
        }
        if let Some(n) = parse_config_number(text, "save_warmup") {
            self.save_warmup = n != 0;
        }
        let entry = text.trim_start_matches('#');
        let entry = entry.strip_prefix(' ').unwrap_or(entry);
        if !entry.starts_with(' ') {
            self.section = entry.split(" = ").next().unwrap_or("").trim().to_string();
        }
        if let Some((key, value)) = entry.split_once(" = ") {
            let (key, value) = (key.trim().to_string(), value.trim().to_string());
            match (self.section.as_str(), key.as_str()) {
                ("data", "file") => self.data_file = Some(value.clone()),
                ("data", "sha256") => self.data_sha256 = Some(value.clone()),
                _ => {}
            }
            self.settings.push((key, value));
        }
    }
}

/// A column name that repeats an earlier one, as a message naming both columns: such a file
/// cannot be read by name (the later column would show the earlier one's values).
fn repeated_name(header: &[String]) -> Option<String> {
    let mut seen = std::collections::HashMap::new();
    for (k, name) in header.iter().enumerate() {
        if let Some(first) = seen.insert(name.as_str(), k) {
            return Some(format!(
                "column {} repeats the name {name:?} of column {}: column names must be unique",
                k + 1,
                first + 1
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shmc-cmdstan-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("out.csv")
    }

    #[test]
    fn written_file_reads_back() {
        let path = temp("roundtrip");
        let header = CsvHeader {
            model: "test".into(),
            chain: 2,
            num_samples: 2,
            num_warmup: 1,
            save_warmup: true,
            data_file: Some("d.csv".into()),
            parameters: vec!["a".into(), "b.1".into()],
            ..CsvHeader::default()
        };
        let mut sink = CsvSink::create(&path, &header).unwrap();
        sink.draw(&[-1.0, 0.5, 0.1, 0.0, 3.0, 0.0, 2.0, 9.0, 9.0])
            .unwrap();
        sink.adaptation(0.1, &InverseMetric::Diagonal(vec![1.0, 2.0]))
            .unwrap();
        sink.draw(&[-1.5, 0.9, 0.1, 0.0, 4.0, 1.0, 2.5, 1.25, -3e-20])
            .unwrap();
        sink.draw(&[-2.5, 1.0, 0.1, 0.0, 5.0, 0.0, 3.5, 2.5, 7.0])
            .unwrap();
        let mut chain = ChainResult::new(1, 0, 0);
        chain.warmup_seconds = 0.1;
        chain.sampling_seconds = 0.2;
        let point = crate::sampler::LearningPoint {
            iteration: 3,
            states: 20,
            proposals: 2,
            acceptance: 0.5,
        };
        chain.surrogate = Some(crate::sampler::SurrogateReport {
            learning: vec![point],
            ..Default::default()
        });
        sink.finish(&chain).unwrap();
        drop(sink);
        let csv = read_stan_csv(&path).unwrap();
        assert_eq!(csv.names.len(), 9);
        assert_eq!(csv.column("a").unwrap(), &[1.25, 2.5]);
        assert_eq!(csv.column("b.1").unwrap(), &[-3e-20, 7.0]);
        assert_eq!(csv.column("n_leapfrog__").unwrap(), &[4.0, 5.0]);
        assert!(!csv.interrupted && csv.complete);
        assert_eq!(csv.setting("model"), Some("test"));
        assert_eq!(csv.setting("num_warmup"), Some("1"));
        // The data file, told from the output file, which is a `file` too.
        assert_eq!(csv.data_file.as_deref(), Some("d.csv"));
        // The costs of both phases, the surrogate's training and its learning curve.
        assert_eq!(csv.shmc.len(), 4, "{:?}", csv.shmc);
        let footer = super::super::ChainFooter::parse(&csv.shmc);
        assert_eq!(footer.warmup, Some(Default::default()));
        assert_eq!(footer.learning, [point]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("# Step size = 0.1\n"));
        assert!(text.contains(",4,1,"), "integer columns: {text}");
    }

    /// A stopped file of `d` parameters with a dense metric, `auto`'s transitions and an end
    /// block, cut back to `rows` of its 3 rows, keeps everything before them (issue #48: the
    /// cut took any adaptation block for four lines).
    #[test]
    fn a_cut_keeps_a_dense_metric_and_the_transitions_whatever_the_dimension() {
        for d in [1, 2, 50] {
            let path = temp(&format!("cut-{d}"));
            let header = CsvHeader {
                model: "test".into(),
                parameters: (1..=d).map(|k| format!("x.{k}")).collect(),
                ..CsvHeader::default()
            };
            let mut sink = CsvSink::create(&path, &header).unwrap();
            let chosen = Chosen {
                warmup: 1,
                sampling: 2,
                measured: None,
            };
            sink.transitions_chosen(&chosen).unwrap();
            let metric = nalgebra::DMatrix::from_fn(d, d, |i, j| 1.0 / (1 + i + j) as f64);
            sink.adaptation(0.5, &InverseMetric::Dense(metric)).unwrap();
            let row = |i: usize| -> Vec<f64> {
                (0..SAMPLER_COLUMNS.len() + d)
                    .map(|k| (i + k) as f64)
                    .collect()
            };
            for i in 0..3 {
                sink.draw(&row(i)).unwrap();
            }
            sink.finish(&ChainResult::new(1, 0, 0)).unwrap();
            drop(sink);
            let before = std::fs::read_to_string(&path).unwrap();
            cut(&path, 2).unwrap();
            let after = std::fs::read_to_string(&path).unwrap();
            // Everything before the third row: the header line and two rows are the first
            // three lines that are not comments.
            let lines: Vec<&str> = before.lines().collect();
            let third_row = (0..lines.len())
                .filter(|&i| !lines[i].starts_with('#'))
                .nth(3)
                .unwrap();
            assert_eq!(
                after,
                format!("{}\n", lines[..third_row].join("\n")),
                "d = {d}"
            );
            let csv = read_stan_csv(&path).unwrap();
            assert_eq!(csv.columns[0], [0.0, 1.0], "d = {d}");
            assert!(cut(&path, 3).is_err(), "d = {d}: a row too many");
        }
    }

    #[test]
    fn a_failed_chain_says_so_and_does_not_read_as_complete() {
        let path = temp("failed");
        let header = CsvHeader {
            parameters: vec!["a".into()],
            ..CsvHeader::default()
        };
        let mut sink = CsvSink::create(&path, &header).unwrap();
        sink.draw(&[-1.0, 0.5, 0.1, 0.0, 3.0, 0.0, 2.0, 9.0])
            .unwrap();
        sink.failed("chain 1: the model panicked: boom\nsecond line")
            .unwrap();
        drop(sink);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.ends_with(
                "# Sampling failed: chain 1: the model panicked: boom second line\n# This file \
                 holds only the draws finished before the failure.\n"
            ),
            "{text}"
        );
        let csv = read_stan_csv(&path).unwrap();
        assert_eq!(csv.column("a").unwrap(), &[9.0]);
        assert!(!csv.complete && !csv.interrupted);
    }

    #[test]
    fn broken_files_name_the_line() {
        let path = temp("broken");
        std::fs::write(&path, "# x\nlp__,a\n1,2\n3\n").unwrap();
        let err = read_stan_csv(&path).unwrap_err().to_string();
        assert!(
            err.contains(":4:") && err.contains("1 fields, expected 2"),
            "{err}"
        );
        std::fs::write(&path, "lp__,a\n1,abc\n").unwrap();
        let err = read_stan_csv(&path).unwrap_err().to_string();
        assert!(err.contains(":2:") && err.contains("not a number"), "{err}");
        std::fs::write(&path, "# x\nlp__,a,b,a\n1,2,3,4\n").unwrap();
        let err = read_stan_csv(&path).unwrap_err().to_string();
        assert!(
            err.contains(":2: column 4 repeats the name \"a\" of column 2"),
            "{err}"
        );
        std::fs::write(&path, "x,y\n1,2\n").unwrap();
        assert!(
            read_stan_csv(&path)
                .unwrap_err()
                .to_string()
                .contains("no lp__")
        );
    }

    #[test]
    fn numbers_format_exactly() {
        for x in [0.0, 1.5, -2.25e-30, 6.02e23, 0.1, 123456.789] {
            assert_eq!(format_number(x).parse::<f64>().unwrap(), x);
        }
        assert_eq!(format_number(1e-300), "1e-300");
    }
}
