//! A calibration run split into parts: each part runs a range of the replications (each with
//! the seeds it has in the whole run, so its ranks are the whole run's), on a machine or a task
//! of its own; [`merge`] puts the parts' replications back together as the one run.
//!
//! A part needs a given thinning: the one chosen from the effective sample size depends on every
//! replication's draws, which no part sees.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Replication, SbcRun, Thinning, calibrated};
use crate::{Error, Result};

/// The file in a part's folder that holds its replications, for [`merge`].
pub const PART_FILE: &str = "sbc-part.json";

/// Which replications a part runs: `count` of them from number `first` (counted from 1, as the
/// ranks file counts them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// The number of its first replication, from 1.
    pub first: usize,
    /// How many it runs.
    pub count: usize,
}

/// What a part keeps for [`merge`]: its ranked replications and what they were ranked with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PartRecord {
    /// The replications of the whole run.
    pub of: usize,
    /// The parameter names.
    pub names: Vec<String>,
    /// The thinning applied to every chain.
    pub thin: usize,
    /// The kept draws per replication.
    pub max_rank: usize,
    /// The part's wall-clock seconds.
    pub wall_seconds: f64,
    /// Its replications, in order.
    pub replications: Vec<Replication>,
}

impl PartRecord {
    /// The record of `run`, a part of a run of `of` replications.
    pub fn of_run(run: &SbcRun, of: usize) -> Self {
        Self {
            of,
            names: run.names.clone(),
            thin: run.thin,
            max_rank: run.max_rank,
            wall_seconds: run.wall_seconds,
            replications: run.replications.clone(),
        }
    }

    /// Writes the record into the part's folder `dir` (which exists).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(PART_FILE);
        let text = serde_json::to_string(self).map_err(|e| Error::invalid(e.to_string()))?;
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))
    }

    /// The record in the part's folder `dir`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(PART_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        serde_json::from_str(&text).map_err(|e| Error::Data {
            path: path.clone(),
            line: e.line(),
            message: format!("not a part of a calibration run: {e}"),
        })
    }
}

/// The one run of the parts `parts` (each named by its folder, for the errors): refused in one
/// line unless they are parts of one run of as many replications, ranked alike, whose
/// replications follow on from 1 to the last without a gap or one in two parts. Its wall time
/// is the parts' added up (the time one process would have taken, roughly).
pub fn merge(mut parts: Vec<(String, PartRecord)>) -> Result<SbcRun> {
    parts.sort_by_key(|(_, p)| p.replications.first().map_or(0, |r| r.number));
    let Some((first_name, first)) = parts.first() else {
        return Err(Error::invalid("no part of a calibration run to merge"));
    };
    let (mut next, mut replications, mut seconds) = (1, Vec::new(), 0.0);
    for (name, part) in &parts {
        let alike = (part.of, &part.names, part.thin, part.max_rank)
            == (first.of, &first.names, first.thin, first.max_rank);
        if !alike {
            return Err(Error::invalid(format!(
                "{name} and {first_name} are not parts of one calibration run: {} replications \
                 thinned by {} to {} draws vs {} thinned by {} to {}",
                part.of, part.thin, part.max_rank, first.of, first.thin, first.max_rank
            )));
        }
        let start = part.replications.first().map_or(next, |r| r.number);
        let end = start + part.replications.len().saturating_sub(1);
        if start != next {
            let what = match start > next {
                true => format!("replications {next}..{} are in no part given", start - 1),
                false => format!("replication {start} is in two parts"),
            };
            return Err(Error::invalid(format!(
                "{name} holds replications {start}..{end}: {what}"
            )));
        }
        next = end + 1;
        seconds += part.wall_seconds;
        replications.extend(part.replications.iter().cloned());
    }
    if next != first.of + 1 {
        return Err(Error::invalid(format!(
            "the parts hold replications 1..{} of {}: replications {next}..{} are in no part given",
            next - 1,
            first.of,
            first.of
        )));
    }
    let (names, thin, max_rank) = (first.names.clone(), first.thin, first.max_rank);
    calibrated(
        names,
        replications,
        (thin, Thinning::Given),
        max_rank,
        seconds,
    )
}
