//! Scratch state shared by the diagnostics of many parameters: FFT plans and buffers, and the
//! normal scores of ranks. [`super::summarize`] makes one and reuses it for every parameter; the
//! single-diagnostic functions make a fresh one per call.

use super::autocovariance::AutocovarianceEngine;
use super::normal::inverse_normal_cdf;

/// FFT plans and normal scores, reused across parameters.
pub(super) struct Workspace {
    /// Mean autocovariances by FFT.
    pub(super) autocovariance: AutocovarianceEngine,
    /// Normal scores of (half-integer) ranks.
    pub(super) scores: ScoreTable,
}

impl Workspace {
    /// An empty workspace.
    pub(super) fn new() -> Self {
        Self {
            autocovariance: AutocovarianceEngine::new(),
            scores: ScoreTable::default(),
        }
    }
}

/// Blom's normal scores `Φ⁻¹((r − 3/8)/(S + 1/4))` for ranks `r` among `S` values, memoized.
///
/// Average ranks of ties are half-integers, so entry `k` holds the score of rank `k/2`; entries
/// are computed on first use (NaN marks "not yet").
#[derive(Default)]
pub(super) struct ScoreTable {
    size: usize,
    scores: Vec<f64>,
}

impl ScoreTable {
    /// The normal score of rank `twice_rank / 2` among `size` values (`1 ≤ rank ≤ size`).
    pub(super) fn score(&mut self, size: usize, twice_rank: usize) -> f64 {
        if size != self.size {
            self.size = size;
            self.scores.clear();
            self.scores.resize(2 * size + 1, f64::NAN);
        }
        let slot = &mut self.scores[twice_rank];
        if slot.is_nan() {
            let rank = twice_rank as f64 / 2.0;
            *slot = inverse_normal_cdf((rank - 0.375) / (size as f64 + 0.25));
        }
        *slot
    }
}
