//! A calibration run split into parts: each part runs a range of the replications (each with
//! the seeds it has in the whole run, so its ranks are the whole run's), on a machine or a task
//! of its own; [`merge`] puts the parts' replications back together as the one run.
//!
//! Without a given thinning, the one chosen from the effective sample size depends on every
//! replication's draws, which no part sees: such a part keeps each replication's ranks at every
//! thinning the whole run could choose, and [`merge`] chooses it from all the replications' ESS
//! as one process would ([`super::choose_thin`]), then takes their ranks at it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Replication, SbcRun, Thinning, calibrated, choose_thin};
use crate::{Error, Result};

/// The file in a part's folder that holds its replications, for [`merge`].
pub const PART_FILE: &str = "sbc-part.json";

/// Which replications a part runs: `count` of them from number `first` (counted from 1, as the
/// ranks file counts them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// The number of its first replication, from 1.
    pub first: usize,
    /// How many it runs.
    pub count: usize,
}

impl Part {
    /// The indices (from 0) of its replications, refused unless they lie within replications
    /// `1..=replications`.
    pub fn within(self, replications: usize) -> Result<std::ops::Range<usize>> {
        let last = self.first.checked_add(self.count).map(|end| end - 1);
        match last {
            Some(last) if self.first >= 1 && self.count >= 1 && last <= replications => {
                Ok(self.first - 1..last)
            }
            _ => Err(Error::setting(
                "first_replication",
                format!(
                    "({}) with a count of {} is not a part of replications 1..{replications}",
                    self.first, self.count
                ),
            )),
        }
    }
}

/// What a part keeps for [`merge`]: its ranked replications and what they were ranked with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PartRecord {
    /// The replications of the whole run.
    pub of: usize,
    /// The parameter names.
    pub names: Vec<String>,
    /// The thinning applied to every chain (without a given one: the part's own choice, which
    /// [`merge`] makes again from every part).
    pub thin: usize,
    /// The kept draws per replication.
    pub max_rank: usize,
    /// Without a given thinning: the kept draws per replication at every thinning the whole
    /// run could choose ([`SbcRun::kept_by_thin`]); empty when the thinning was given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_by_thin: Vec<usize>,
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
            kept_by_thin: run.kept_by_thin.clone(),
            wall_seconds: run.wall_seconds,
            replications: run.replications.clone(),
        }
    }

    /// The replications it holds.
    fn part(&self) -> Part {
        let first = self.replications.first().map_or(0, |r| r.number);
        Part {
            first,
            count: self.replications.len(),
        }
    }

    /// What parts of one run share: the replications and parameters, and the given thinning
    /// and kept draws, or the kept draws at every thinning the merge may choose.
    fn ranked_alike(&self, other: &Self) -> bool {
        let given = |p: &Self| p.kept_by_thin.is_empty().then_some((p.thin, p.max_rank));
        (self.of, &self.names, given(self), &self.kept_by_thin)
            == (other.of, &other.names, given(other), &other.kept_by_thin)
    }

    /// How its replications are ranked, for an error: the thinning given, or chosen at the merge.
    fn thinning_text(&self) -> String {
        match self.kept_by_thin.is_empty() {
            true => format!("thinned by {} to {} draws", self.thin, self.max_rank),
            false => format!(
                "thinned at the merge, at most by {}",
                self.kept_by_thin.len()
            ),
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

/// Refuses in one line `parts` (each named, for the errors) that are not the replications
/// `1..=of` of one run, each in exactly one part: a gap, or a replication in two parts.
pub fn check_cover(parts: &[(String, Part)], of: usize) -> Result<()> {
    let mut sorted: Vec<&(String, Part)> = parts.iter().collect();
    sorted.sort_by_key(|(_, p)| p.first);
    let mut next = 1;
    for (name, part) in sorted {
        let (start, end) = (part.first, part.first + part.count.saturating_sub(1));
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
    }
    if next != of + 1 {
        return Err(Error::invalid(format!(
            "the parts hold replications 1..{} of {of}: replications {next}..{of} are in no \
             part given",
            next - 1
        )));
    }
    Ok(())
}

/// The one run of the parts `parts` (each named by its folder, for the errors): refused in one
/// line unless they are parts of one run of as many replications, ranked alike, that cover it
/// ([`check_cover`]). Without a given thinning, it is chosen here from every replication's ESS
/// as one process chooses it. Its wall time is the parts' added up (the time one process would
/// have taken, roughly).
pub fn merge(mut parts: Vec<(String, PartRecord)>) -> Result<SbcRun> {
    parts.sort_by_key(|(_, p)| p.replications.first().map_or(0, |r| r.number));
    let Some((first_name, first)) = parts.first() else {
        return Err(Error::invalid("no part of a calibration run to merge"));
    };
    if let Some((name, part)) = parts.iter().find(|(_, p)| !p.ranked_alike(first)) {
        return Err(Error::invalid(format!(
            "{name} and {first_name} are not parts of one calibration run: {} replications {} \
             vs {} {}",
            part.of,
            part.thinning_text(),
            first.of,
            first.thinning_text()
        )));
    }
    let ranges: Vec<(String, Part)> = parts.iter().map(|(n, p)| (n.clone(), p.part())).collect();
    check_cover(&ranges, first.of)?;
    let seconds = parts.iter().map(|(_, p)| p.wall_seconds).sum();
    let (names, of) = (first.names.clone(), first.of);
    let (given, kept_by_thin) = ((first.thin, first.max_rank), first.kept_by_thin.clone());
    let mut replications: Vec<Replication> = parts
        .into_iter()
        .flat_map(|(_, p)| p.replications)
        .collect();
    if kept_by_thin.is_empty() {
        let (thin, max_rank) = given;
        let ranked = ((thin, Thinning::Given), max_rank, of);
        return calibrated(names, replications, ranked, seconds);
    }
    let (thin, thinning) = chosen_thin(&replications, &kept_by_thin)?;
    for r in &mut replications {
        let number = r.number;
        r.ranks = std::mem::take(&mut r.ranks_by_thin)
            .into_iter()
            .nth(thin - 1)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "replication {number} has no ranks at thinning {thin}"
                ))
            })?;
    }
    let ranked = ((thin, thinning), kept_by_thin[thin - 1], of);
    calibrated(names, replications, ranked, seconds)
}

/// The thinning one process would have chosen for `replications`, whose kept draws at every
/// thinning it may choose are `kept_by_thin` (the first: all their draws).
fn chosen_thin(replications: &[Replication], kept_by_thin: &[usize]) -> Result<(usize, Thinning)> {
    let draws = kept_by_thin[0] as f64;
    let per_draw = replications.iter().map(|r| r.min_ess / draws).collect();
    choose_thin(per_draw, kept_by_thin.len())
}
