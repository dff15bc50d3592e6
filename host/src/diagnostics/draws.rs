//! The draws of one scalar quantity, chain by chain, validated once so that every diagnostic
//! after it is infallible; and the split-chain layout the rank-normalized diagnostics work on.
//!
//! Splitting follows ArviZ and posterior: each chain of `n` draws becomes its first `⌊n/2⌋` and
//! its last `⌊n/2⌋` draws (the middle draw of an odd-length chain is dropped), stacked as the
//! first halves of all chains followed by the second halves of all chains.

use super::DiagnosticsError;

/// The draws of one scalar quantity from `m ≥ 1` chains of equal length `n`, stored chain-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Draws {
    values: Vec<f64>,
    chains: usize,
    draws: usize,
}

impl Draws {
    /// Copies `chains[c][i]`, draw `i` of chain `c`.
    ///
    /// Fails if there are no chains or the chains differ in length. Zero draws are accepted (every
    /// diagnostic is then NaN).
    pub fn new<C: AsRef<[f64]>>(chains: &[C]) -> Result<Self, DiagnosticsError> {
        let first = chains.first().ok_or(DiagnosticsError::NoChains)?;
        let draws = first.as_ref().len();
        let mut values = Vec::with_capacity(draws * chains.len());
        for (chain, series) in chains.iter().enumerate() {
            let series = series.as_ref();
            if series.len() != draws {
                return Err(DiagnosticsError::UnequalChainLengths {
                    chain,
                    expected: draws,
                    found: series.len(),
                });
            }
            values.extend_from_slice(series);
        }
        Ok(Self::from_parts(values, chains.len(), draws))
    }

    /// The draws of a single chain.
    pub fn from_chain(draws: &[f64]) -> Self {
        Self::from_parts(draws.to_vec(), 1, draws.len())
    }

    /// Chain-major `values` of `chains` chains of `draws` draws each (`values.len()` must be
    /// `chains · draws`; callers in this module guarantee it).
    pub(super) fn from_parts(values: Vec<f64>, chains: usize, draws: usize) -> Self {
        debug_assert_eq!(values.len(), chains * draws);
        Self {
            values,
            chains,
            draws,
        }
    }

    /// The number of chains.
    pub fn num_chains(&self) -> usize {
        self.chains
    }

    /// The number of draws in each chain.
    pub fn num_draws(&self) -> usize {
        self.draws
    }

    /// The draws of chain `c` (panics if `c` is not below [`Draws::num_chains`]).
    pub fn chain(&self, c: usize) -> &[f64] {
        &self.values[c * self.draws..(c + 1) * self.draws]
    }

    /// All draws, chain after chain.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Whether ESS, R̂ and MCSE are defined: at least 4 draws per chain, all finite, not all
    /// equal (the rule of Stan and posterior).
    pub(super) fn is_diagnosable(&self) -> bool {
        self.draws >= 4
            && self.values.iter().all(|x| x.is_finite())
            && self.values.iter().any(|&x| x != self.values[0])
    }

    /// The length of each split chain, `⌊n/2⌋`.
    pub(super) fn split_draws(&self) -> usize {
        self.draws / 2
    }

    /// The split chains: `2m` chains of `⌊n/2⌋` draws.
    pub(super) fn split(&self) -> Draws {
        let half = self.split_draws();
        let mut values = Vec::with_capacity(2 * self.chains * half);
        for c in 0..self.chains {
            values.extend_from_slice(&self.chain(c)[..half]);
        }
        for c in 0..self.chains {
            values.extend_from_slice(&self.chain(c)[self.draws - half..]);
        }
        Self::from_parts(values, 2 * self.chains, half)
    }

    /// The draws the split leaves out: the middle draw of each chain if `n` is odd, else none.
    pub(super) fn middle_draws(&self) -> Vec<f64> {
        if 2 * self.split_draws() == self.draws {
            return Vec::new();
        }
        (0..self.chains)
            .map(|c| self.chain(c)[self.draws / 2])
            .collect()
    }

    /// The mean of each chain.
    pub(super) fn chain_means(&self) -> Vec<f64> {
        (0..self.chains).map(|c| mean(self.chain(c))).collect()
    }
}

/// The arithmetic mean (NaN for an empty slice).
pub(super) fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The unbiased (`n − 1`) sample variance, by two passes (NaN for fewer than two values).
pub(super) fn variance(values: &[f64]) -> f64 {
    let centre = mean(values);
    let squares: f64 = values.iter().map(|x| (x - centre) * (x - centre)).sum();
    squares / (values.len() as f64 - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_rejects_ragged_or_missing_chains() {
        let empty: [Vec<f64>; 0] = [];
        assert_eq!(Draws::new(&empty), Err(DiagnosticsError::NoChains));
        let ragged = [vec![1.0, 2.0], vec![1.0]];
        assert_eq!(
            Draws::new(&ragged),
            Err(DiagnosticsError::UnequalChainLengths {
                chain: 1,
                expected: 2,
                found: 1
            })
        );
    }

    #[test]
    fn split_drops_the_middle_draw_and_stacks_halves() {
        let draws = Draws::new(&[[1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]]).unwrap();
        let split = draws.split();
        assert_eq!(split.num_chains(), 4);
        assert_eq!(split.num_draws(), 2);
        assert_eq!(split.values(), &[1.0, 2.0, 6.0, 7.0, 4.0, 5.0, 9.0, 10.0]);
        assert_eq!(draws.middle_draws(), [3.0, 8.0]);
    }

    #[test]
    fn diagnosable_needs_four_finite_varying_draws() {
        assert!(Draws::from_chain(&[1.0, 2.0, 3.0, 4.0]).is_diagnosable());
        assert!(!Draws::from_chain(&[1.0, 2.0, 3.0]).is_diagnosable());
        assert!(!Draws::from_chain(&[2.0; 10]).is_diagnosable());
        assert!(!Draws::from_chain(&[1.0, 2.0, f64::NAN, 4.0]).is_diagnosable());
        assert!(!Draws::from_chain(&[1.0, 2.0, f64::INFINITY, 4.0]).is_diagnosable());
    }
}
