//! The chains of a run, read from their CmdStan CSVs and cut to the draws they all have.
//!
//! A killed or interrupted run leaves chains of different lengths (a chain still queued may
//! have none): the diagnostics need equal ones, so every chain with enough draws is cut to the
//! shortest and the rest left out, each with a note saying so. A report also leaves out the
//! files it cannot read, where a summary of named files stops at the first, and reads a file
//! whose last line was cut short (a chain killed while writing it) up to that line.

use std::path::Path;

use super::same_run::one_run;
use crate::diagnostics::{
    ChainColumns, ParameterSummary, Warning, convergence_warnings, summarize,
};
use crate::output::{RunTotals, StanCsv, parse_stan_csv, read_stan_csv};
use crate::records::{MIN_SUMMARY_DRAWS, SAMPLER_COLUMNS};
use crate::{Error, Result};

/// The usable chains of a run and what was left out.
#[derive(Clone, Debug)]
pub struct Chains {
    /// The chains, in file order (chain order for a run folder), each with at least
    /// [`MIN_SUMMARY_DRAWS`] draws.
    pub files: Vec<StanCsv>,
    /// The draws every chain contributes: the shortest chain's.
    pub draws: usize,
    /// One line per file, or part of a file, left out, and why.
    pub notes: Vec<String>,
}

/// A file's kept draws.
fn length(csv: &StanCsv) -> usize {
    csv.columns.first().map_or(0, Vec::len)
}

impl Chains {
    /// The chains of `csvs` (at least one), which must be one run ([`one_run`]: an error
    /// naming each file that is not): those with enough draws, cut to the shortest of them.
    pub fn new(csvs: Vec<StanCsv>) -> Result<Self> {
        let (csvs, refused) = one_run(csvs);
        if !refused.is_empty() {
            return Err(Error::invalid(refused.join("; ")));
        }
        let Some(first) = csvs.first() else {
            return Err(Error::invalid("no CmdStan CSV files to read"));
        };
        let longest = csvs.iter().max_by_key(|c| length(c)).unwrap_or(first);
        let too_few = format!(
            "{}: only {} draws, the most of any file; a summary needs at least \
             {MIN_SUMMARY_DRAWS} per chain",
            longest.path.display(),
            length(longest)
        );
        let mut notes = Vec::new();
        let (files, short): (Vec<_>, Vec<_>) = csvs
            .into_iter()
            .partition(|c| length(c) >= MIN_SUMMARY_DRAWS);
        for c in &short {
            notes.push(format!(
                "{} has {} draws, fewer than the {MIN_SUMMARY_DRAWS} a summary needs: left out",
                c.path.display(),
                length(c)
            ));
        }
        let Some(draws) = files.iter().map(length).min() else {
            return Err(Error::invalid(too_few));
        };
        for c in files.iter().filter(|c| length(c) > draws) {
            notes.push(format!(
                "{}: its last {} draws left out, to the common length {draws}",
                c.path.display(),
                length(c) - draws
            ));
        }
        Ok(Self {
            files,
            draws,
            notes,
        })
    }

    /// The chains of run folder `dir`: every `.csv` file in it, in chain order (by the number
    /// that ends the name, as in `banana-10.csv`). Files that cannot be read, or that are not
    /// of the first readable file's run ([`one_run`]: another model, data file or columns; a
    /// link to a file already read), are left out with a note; it is an error only if none is
    /// left.
    pub fn read_dir(dir: &Path) -> Result<Self> {
        Self::read_dirs(&[dir])
    }

    /// The chains of a run split into shards ([`crate::sampler::SampleConfig::chain_id`]), each
    /// shard's folder in `dirs` in the order given, read as [`Chains::read_dir`] reads one.
    /// Whether the shards are one run's is the caller's to check (a front end knows the
    /// settings each was started with); here the files must be one run as their headers tell
    /// ([`one_run`]).
    pub fn read_dirs<P: AsRef<Path>>(dirs: &[P]) -> Result<Self> {
        let mut paths = Vec::new();
        for dir in dirs {
            paths.extend(csv_files(dir.as_ref())?);
        }
        let dir = dirs.first().map_or(Path::new(""), AsRef::as_ref);
        if paths.is_empty() {
            return Err(Error::invalid(format!(
                "{}: no .csv files (a run folder holds one CmdStan CSV per chain)",
                dir.display()
            )));
        }
        let mut notes = Vec::new();
        let mut csvs: Vec<StanCsv> = Vec::new();
        for path in &paths {
            match read_chain(path, &mut notes) {
                Ok(csv) => csvs.push(csv),
                Err(e) => notes.push(format!("{e}: left out")),
            }
        }
        let (csvs, refused) = one_run(csvs);
        notes.extend(refused.into_iter().map(|line| format!("{line}: left out")));
        if csvs.is_empty() {
            return Err(Error::invalid(format!(
                "{}: no readable CmdStan CSV ({})",
                dir.display(),
                notes.join("; ")
            )));
        }
        let mut chains = Self::new(csvs)?;
        notes.append(&mut chains.notes);
        chains.notes = notes;
        Ok(chains)
    }

    /// Each chain's first [`Chains::draws`] values of column `name` (empty if it is absent).
    pub fn column(&self, name: &str) -> Vec<&[f64]> {
        self.files
            .iter()
            .filter_map(|c| c.column(name))
            .map(|column| &column[..self.draws])
            .collect()
    }

    /// The parameters: the columns after the sampler's.
    pub fn parameters(&self) -> Vec<String> {
        self.files[0]
            .names
            .iter()
            .filter(|n| !SAMPLER_COLUMNS.contains(&n.as_str()))
            .cloned()
            .collect()
    }

    /// The summary (mean, sd, MCSE, quantiles, bulk and tail ESS, R̂) of `lp__` and every
    /// parameter, as stansummary shows them.
    pub fn summary(&self) -> Vec<ParameterSummary> {
        let names: Vec<String> = std::iter::once("lp__".to_string())
            .filter(|lp| self.files[0].names.contains(lp))
            .chain(self.parameters())
            .collect();
        let draws: Vec<Vec<Vec<f64>>> = self
            .files
            .iter()
            .map(|file| {
                names
                    .iter()
                    .filter_map(|name| file.column(name))
                    .map(|column| column[..self.draws].to_vec())
                    .collect()
            })
            .collect();
        summarize(&names, &draws)
    }

    /// The convergence checks the parameters' draws fail ([`convergence_warnings`]; `lp__` is
    /// left out, as `shmc sample` leaves it out), `summary` being [`Chains::summary`]. The tree
    /// depth limit is the header's `max_depth`.
    pub fn warnings(&self, summary: &[ParameterSummary]) -> Vec<Warning> {
        let column = |file: &'_ StanCsv, name: &str| -> Vec<f64> {
            file.column(name)
                .map_or_else(Vec::new, |c| c[..self.draws].to_vec())
        };
        let sampler: Vec<[Vec<f64>; 3]> = self
            .files
            .iter()
            .map(|f| {
                [
                    column(f, "treedepth__"),
                    column(f, "divergent__"),
                    column(f, "energy__"),
                ]
            })
            .collect();
        let columns: Vec<ChainColumns> = sampler
            .iter()
            .map(|[treedepth, divergent, energy]| ChainColumns {
                treedepth,
                divergent,
                energy,
            })
            .collect();
        let max_depth = self.files[0]
            .setting("max_depth")
            .and_then(|d| d.split_whitespace().next()?.parse().ok());
        let parameters: Vec<ParameterSummary> = summary
            .iter()
            .filter(|p| p.name != "lp__")
            .cloned()
            .collect();
        convergence_warnings(&parameters, &columns, max_depth)
    }

    /// The chains, draws, mean acceptance statistic and divergences of the summarized draws.
    pub fn totals(&self) -> RunTotals {
        let sum = |name: &str| -> f64 { self.column(name).iter().flat_map(|c| c.iter()).sum() };
        RunTotals {
            chains: self.files.len(),
            draws: self.draws,
            mean_accept_stat: sum("accept_stat__") / (self.draws * self.files.len()) as f64,
            divergences: sum("divergent__") as usize,
            sampling_seconds: None,
            wall_seconds: None,
        }
    }
}

/// Reads the chain in `path`; if only its last line is broken and unterminated (cut short as the
/// chain was killed), reads the lines before it and says so in `notes`.
fn read_chain(path: &Path, notes: &mut Vec<String>) -> Result<StanCsv> {
    let error = match read_stan_csv(path) {
        Err(Error::Data { line, message, .. }) => (line, message),
        other => return other,
    };
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let (line, message) = error;
    if text.ends_with('\n') || line != text.lines().count() {
        return Err(Error::Data {
            path: path.to_path_buf(),
            line,
            message,
        });
    }
    let whole_lines = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
    let csv = parse_stan_csv(whole_lines.as_bytes(), path)?;
    notes.push(format!(
        "{}:{line}: the last line is cut short ({message}): left out",
        path.display()
    ));
    Ok(csv)
}

/// The `.csv` files in folder `dir`, in chain order.
pub fn csv_files(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "csv"))
        .collect();
    paths.sort_by_key(|p| chain_order(p));
    Ok(paths)
}

/// The sort key of a chain's file: its name without the number that ends it, then the number.
fn chain_order(path: &Path) -> (String, u64, String) {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = stem.trim_end_matches(|c: char| c.is_ascii_digit());
    let number = stem[prefix.len()..].parse().unwrap_or(0);
    (prefix.to_string(), number, stem)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("shmc-report-chains-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn file(dir: &Path, name: &str, columns: &str, rows: usize) {
        let mut text = format!("# model = m\n{columns}\n");
        for i in 0..rows {
            let fields = columns.split(',').count();
            text.push_str(&vec![i.to_string(); fields].join(","));
            text.push('\n');
        }
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn chains_come_in_number_order_cut_to_the_shortest_with_notes() {
        let dir = temp("order");
        file(&dir, "m-10.csv", "lp__,a", 8);
        file(&dir, "m-2.csv", "lp__,a", 6);
        file(&dir, "m-1.csv", "lp__,a", 2);
        file(&dir, "other-1.csv", "lp__,b", 9);
        std::fs::write(dir.join("m-3.csv"), "lp__,a\n1,2\n3\n").unwrap();
        // Killed while writing its fifth row: the four before are read.
        std::fs::write(dir.join("m-4.csv"), "lp__,a\n1,1\n2,2\n3,3\n4,4\n5").unwrap();
        std::fs::write(dir.join("notes.txt"), "not a chain").unwrap();
        let chains = Chains::read_dir(&dir).unwrap();
        let names: Vec<_> = chains
            .files
            .iter()
            .map(|c| c.path.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, ["m-2.csv", "m-4.csv", "m-10.csv"]);
        assert_eq!(chains.draws, 4);
        assert_eq!(chains.column("a")[1], [1.0, 2.0, 3.0, 4.0]);
        let notes = chains.notes.join("\n");
        for needle in [
            "m-3.csv:3: 1 fields, expected 2: left out",
            "other-1.csv and ",
            "m-1.csv are not one run: column 2 is \"b\" vs \"a\": left out",
            "m-1.csv has 2 draws, fewer than the 4 a summary needs: left out",
            "m-4.csv:6: the last line is cut short (1 fields, expected 2): left out",
            "m-10.csv: its last 4 draws left out, to the common length 4",
        ] {
            assert!(notes.contains(needle), "{needle} in\n{notes}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_folder_without_usable_chains_is_one_error() {
        let missing = std::env::temp_dir().join("shmc-report-no-such-folder");
        let err = Chains::read_dir(&missing).unwrap_err().to_string();
        assert!(err.starts_with(&missing.display().to_string()), "{err}");
        let dir = temp("empty");
        let err = Chains::read_dir(&dir).unwrap_err().to_string();
        assert!(err.ends_with("no .csv files (a run folder holds one CmdStan CSV per chain)"));
        std::fs::write(dir.join("x.csv"), "a,b\n1,2\n").unwrap();
        let err = Chains::read_dir(&dir).unwrap_err().to_string();
        assert!(
            err.contains("no readable CmdStan CSV") && err.contains("no lp__"),
            "{err}"
        );
        file(&dir, "x.csv", "lp__,a", 3);
        let err = Chains::read_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("only 3 draws"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
