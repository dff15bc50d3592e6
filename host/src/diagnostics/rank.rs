//! Rank normalization (Vehtari et al. 2021, section 4.1): replace each split-chain draw by the
//! normal score of its rank among all split draws, and the same for the draws folded about their
//! median, `|x − median|`. Bulk ESS and bulk R̂ use the first, tail R̂ the second.
//!
//! Ranks are pooled over all split chains, ties get their average rank (scipy's
//! `rankdata(method="average")`), and the score of rank `r` among `S` values is
//! `Φ⁻¹((r − 3/8)/(S + 1/4))`, as ArviZ and posterior compute it. One sort per parameter serves
//! everything: the sorted draws give the quantiles, the split draws in that order give the bulk
//! ranks, and the folded order is a merge of the two monotone runs on either side of the median.

use super::draws::Draws;
use super::workspace::ScoreTable;

/// One parameter's draws sorted once, for quantiles and ranks.
pub(super) struct Ranked {
    /// All draws, ascending.
    sorted: Vec<f64>,
    /// The split draws, ascending, each with its position in the split layout.
    split: Vec<(f64, usize)>,
}

impl Ranked {
    /// Sorts `draws` in `f64::total_cmp` order: the split draws with their positions, then all
    /// draws by merging in the middle draws an odd length leaves out.
    pub(super) fn new(draws: &Draws) -> Self {
        let mut split: Vec<(f64, usize)> =
            draws.split().values().iter().copied().zip(0..).collect();
        split.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let mut middle = draws.middle_draws();
        middle.sort_unstable_by(f64::total_cmp);
        let sorted = merge_sorted(split.iter().map(|&(x, _)| x), middle);
        Self { sorted, split }
    }

    /// All draws, ascending.
    pub(super) fn sorted(&self) -> &[f64] {
        &self.sorted
    }

    /// The normal scores of the split draws, in split layout.
    pub(super) fn bulk_scores(&self, table: &mut ScoreTable) -> Vec<f64> {
        normal_scores(&self.split, table)
    }

    /// The normal scores of the split draws folded about their median, in split layout.
    pub(super) fn folded_scores(&self, table: &mut ScoreTable) -> Vec<f64> {
        normal_scores(&fold(&self.split, self.split_median()), table)
    }

    /// The median of the split draws as numpy computes it (the mean of the middle two), which
    /// ArviZ folds about; it differs from the median of all draws when an odd chain length
    /// drops middle draws.
    fn split_median(&self) -> f64 {
        let n = self.split.len();
        (self.split[(n - 1) / 2].0 + self.split[n / 2].0) / 2.0
    }
}

/// The ascending merge of two ascending sequences.
fn merge_sorted(a: impl Iterator<Item = f64>, b: Vec<f64>) -> Vec<f64> {
    let mut merged = Vec::with_capacity(a.size_hint().0 + b.len());
    let mut b = b.into_iter().peekable();
    for x in a {
        while let Some(y) = b.next_if(|y| y.total_cmp(&x).is_lt()) {
            merged.push(y);
        }
        merged.push(x);
    }
    merged.extend(b);
    merged
}

/// `(|x − median|, position)` in ascending order of `|x − median|`, from ascending `sorted`:
/// the draws below the median, read downwards, and those at or above it, read upwards, are each
/// ascending in distance, so one merge orders them.
fn fold(sorted: &[(f64, usize)], median: f64) -> Vec<(f64, usize)> {
    let distance = |i: usize| ((sorted[i].0 - median).abs(), sorted[i].1);
    let mut below = sorted.partition_point(|&(x, _)| x < median);
    let mut above = below;
    let mut folded = Vec::with_capacity(sorted.len());
    while below > 0 || above < sorted.len() {
        let from_below =
            above == sorted.len() || (below > 0 && distance(below - 1).0 <= distance(above).0);
        if from_below {
            below -= 1;
            folded.push(distance(below));
        } else {
            folded.push(distance(above));
            above += 1;
        }
    }
    folded
}

/// The normal score of each value's average rank, placed at its position.
fn normal_scores(ascending: &[(f64, usize)], table: &mut ScoreTable) -> Vec<f64> {
    let size = ascending.len();
    let mut scores = vec![0.0; size];
    let mut start = 0;
    while start < size {
        let end = start
            + ascending[start..]
                .iter()
                .take_while(|&&(x, _)| x == ascending[start].0)
                .count();
        // Ranks start+1 ..= end share their average, (start + 1 + end) / 2.
        let score = table.score(size, start + 1 + end);
        for &(_, position) in &ascending[start..end] {
            scores[position] = score;
        }
        start = end;
    }
    scores
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::normal::inverse_normal_cdf;

    fn blom(rank: f64, size: f64) -> f64 {
        inverse_normal_cdf((rank - 0.375) / (size + 0.25))
    }

    #[test]
    fn ties_share_their_average_rank() {
        // One chain of 4 → split chains [3, 1] and [1, 2]; ranks 4, 1.5, 1.5, 3.
        let draws = Draws::from_chain(&[3.0, 1.0, 1.0, 2.0]);
        let scores = Ranked::new(&draws).bulk_scores(&mut ScoreTable::default());
        let expected = [
            blom(4.0, 4.0),
            blom(1.5, 4.0),
            blom(1.5, 4.0),
            blom(3.0, 4.0),
        ];
        assert_eq!(scores, expected);
    }

    #[test]
    fn merge_sorted_interleaves() {
        let merged = merge_sorted([1.0, 3.0, 5.0].into_iter(), vec![0.0, 3.0, 4.0, 9.0]);
        assert_eq!(merged, [0.0, 1.0, 3.0, 3.0, 4.0, 5.0, 9.0]);
    }

    #[test]
    fn folding_orders_by_distance_from_the_median() {
        // Split draws (odd length drops the middle 100): 5, −1, 2, 4, 0, 3 → median 2.5;
        // distances 2.5, 3.5, 0.5, 1.5, 2.5, 0.5 → ranks 4.5, 6, 1.5, 3, 4.5, 1.5.
        let draws = Draws::from_chain(&[5.0, -1.0, 2.0, 100.0, 4.0, 0.0, 3.0]);
        let scores = Ranked::new(&draws).folded_scores(&mut ScoreTable::default());
        let ranks = [4.5, 6.0, 1.5, 3.0, 4.5, 1.5];
        let expected: Vec<f64> = ranks.iter().map(|&r| blom(r, 6.0)).collect();
        assert_eq!(scores, expected);
    }
}
