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

/// The file in a part's folder of `shmc bench sbc` that holds every cell's part.
pub const TABLE_PART_FILE: &str = "bench-sbc-part.json";

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

    /// Refuses in one line, naming the part `name`, a record no part writes: an empty one,
    /// replications out of order, repeated or with a gap, and ranks that do not fit the names
    /// (one per parameter) or the kept draws (each at most the draws it is ranked among).
    fn check(&self, name: &str) -> Result<()> {
        let bad = |what: String| Err(Error::invalid(format!("{name}: {what}")));
        let Some(first) = self.replications.first() else {
            return bad("holds no replication".into());
        };
        for (k, r) in self.replications.iter().enumerate() {
            if r.number != first.number + k {
                return bad(format!(
                    "replication {} follows {}: a part holds consecutive replications, each once",
                    r.number,
                    self.replications[k - 1].number
                ));
            }
            let rows: Vec<(&[usize], usize)> = match self.kept_by_thin.is_empty() {
                true => vec![(&r.ranks, self.max_rank)],
                false if r.ranks_by_thin.len() != self.kept_by_thin.len() => {
                    return bad(format!(
                        "replication {} has ranks at {} thinnings, the part names {}",
                        r.number,
                        r.ranks_by_thin.len(),
                        self.kept_by_thin.len()
                    ));
                }
                false => r
                    .ranks_by_thin
                    .iter()
                    .map(Vec::as_slice)
                    .zip(self.kept_by_thin.iter().copied())
                    .collect(),
            };
            for (ranks, most) in rows {
                if ranks.len() != self.names.len() {
                    return bad(format!(
                        "replication {} has {} ranks for {} parameters",
                        r.number,
                        ranks.len(),
                        self.names.len()
                    ));
                }
                if let Some(rank) = ranks.iter().find(|&&rank| rank > most) {
                    return bad(format!(
                        "replication {} has rank {rank}, above the {most} draws it is ranked \
                         among",
                        r.number
                    ));
                }
            }
        }
        Ok(())
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
    for (name, part) in &parts {
        part.check(name)?;
    }
    parts.sort_by_key(|(_, p)| p.replications.first().map_or(0, |r| r.number));
    let Some((first_name, first)) = parts.first() else {
        return Err(Error::invalid("no part of a calibration run to merge"));
    };
    if let Some((name, part)) = parts.iter().find(|(_, p)| p.names != first.names) {
        return Err(Error::invalid(format!(
            "{name} and {first_name} are not parts of one calibration run: parameters {} vs {}",
            part.names.join(", "),
            first.names.join(", ")
        )));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn replication(number: usize, ranks: Vec<usize>) -> Replication {
        Replication {
            number,
            data_seed: 1,
            sampler_seed: 2,
            ranks,
            min_ess: 100.0,
            divergences: 0,
            seconds: 0.1,
            ranks_by_thin: Vec::new(),
        }
    }

    /// A whole run of 20 replications (the fewest the uniformity test takes) of 2 parameters
    /// ranked among 9 draws, as one part: `edit` breaks it.
    fn part_with(edit: impl FnOnce(&mut PartRecord)) -> Vec<(String, PartRecord)> {
        let mut record = PartRecord {
            of: 20,
            names: vec!["a".into(), "b".into()],
            thin: 1,
            max_rank: 9,
            kept_by_thin: Vec::new(),
            wall_seconds: 1.0,
            replications: (1..=20)
                .map(|n| replication(n, vec![n % 10, 9 - n % 10]))
                .collect(),
        };
        edit(&mut record);
        vec![("part-1".into(), record)]
    }

    fn refused(parts: Vec<(String, PartRecord)>) -> String {
        match merge(parts) {
            Ok(_) => panic!("a broken part was merged"),
            Err(e) => e.to_string(),
        }
    }

    /// An edit that breaks a part and the one line that should refuse it.
    type Breakage = (fn(&mut PartRecord), &'static str);

    #[test]
    fn a_corrupt_part_is_one_error_naming_it_not_a_panic_or_a_pass() {
        if let Err(e) = merge(part_with(|_| {})) {
            panic!("a whole part: {e}");
        }
        let cases: [Breakage; 6] = [
            (
                |p| p.replications[2].ranks[0] = 1_000_000,
                "part-1: replication 3 has rank 1000000, above the 9 draws it is ranked among",
            ),
            (
                |p| p.replications[1].ranks.pop().map(drop).unwrap_or(()),
                "part-1: replication 2 has 1 ranks for 2 parameters",
            ),
            (
                |p| p.replications[0].ranks.push(3),
                "part-1: replication 1 has 3 ranks for 2 parameters",
            ),
            (
                |p| p.replications[2].number = 2,
                "part-1: replication 2 follows 2: a part holds consecutive replications, each once",
            ),
            (
                |p| {
                    p.replications.remove(1);
                },
                "part-1: replication 3 follows 1: a part holds consecutive replications, each once",
            ),
            (|p| p.replications.clear(), "part-1: holds no replication"),
        ];
        for (edit, message) in cases {
            assert_eq!(refused(part_with(edit)), message);
        }
    }

    #[test]
    fn parts_that_rank_other_parameters_are_refused_naming_them() {
        let mut parts = part_with(|p| {
            p.of = 40;
        });
        let mut other = part_with(|p| {
            p.of = 40;
            p.names[1] = "c".into();
            for r in &mut p.replications {
                r.number += 20;
            }
        });
        parts.push((String::from("part-2"), other.remove(0).1));
        assert_eq!(
            refused(parts),
            "part-2 and part-1 are not parts of one calibration run: parameters a, c vs a, b"
        );
    }
}
