//! Accuracy of a run against a reference: the relative error of the mean (REM) and of the
//! covariance (REC) used by the variational HMC paper (Zhang, Shahbaba and Zhao, eq. 21, after
//! Ahn et al. 2012) to compare samplers at a fixed computing time:
//!
//! `REM = Σ_i |β̄_i − β°_i| / Σ_i |β°_i|`,  `REC = Σ_ij |C_ij − C°_ij| / Σ_ij |C°_ij|`,
//!
//! with `β̄`, `C` the sample mean and covariance of the run (`C = (1/t) Σ (β − β̄)(β − β̄)ᵀ`, the
//! divisor `t`, not `t − 1`) and `β°`, `C°` those of a long reference run. Both are entrywise
//! ℓ₁ ratios: the paper's REC is *not* a Frobenius-norm ratio.

use nalgebra::{DMatrix, DVector};

use super::DiagnosticsError;

/// The sample mean and covariance of a run, pooled over chains.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleMoments {
    /// `β̄ = (1/t) Σ β`.
    pub mean: DVector<f64>,
    /// `C = (1/t) Σ (β − β̄)(β − β̄)ᵀ` (the paper's divisor `t`).
    pub covariance: DMatrix<f64>,
}

/// The mean and covariance of all draws of all chains, `chains[c][p]` holding the draws of
/// parameter `p` in chain `c` (the layout of [`super::summarize`]).
///
/// Fails if there are no chains or no draws, if the chains differ in their number of parameters,
/// or if the series differ in length.
pub fn sample_moments(chains: &[Vec<Vec<f64>>]) -> Result<SampleMoments, DiagnosticsError> {
    let first = chains.first().ok_or(DiagnosticsError::NoChains)?;
    let dimension = first.len();
    let length = first.first().map_or(0, Vec::len);
    for (chain, series) in chains.iter().enumerate() {
        if series.len() != dimension {
            let (expected, found) = (dimension, series.len());
            return Err(DiagnosticsError::ParameterCount {
                chain,
                expected,
                found,
            });
        }
        if let Some(found) = series.iter().map(Vec::len).find(|&n| n != length) {
            let expected = length;
            return Err(DiagnosticsError::UnequalChainLengths {
                chain,
                expected,
                found,
            });
        }
    }
    if length == 0 {
        return Err(DiagnosticsError::NoDraws);
    }
    let total = chains.len() * length;
    // Rows are draws, columns parameters.
    let mut centred = DMatrix::from_fn(total, dimension, |row, p| {
        chains[row / length][p][row % length]
    });
    let mean = centred.row_mean().transpose();
    for (p, mut column) in centred.column_iter_mut().enumerate() {
        column.add_scalar_mut(-mean[p]);
    }
    let covariance = centred.tr_mul(&centred) / total as f64;
    Ok(SampleMoments { mean, covariance })
}

/// REM: `Σ|estimate − reference| / Σ|reference|` (infinite or NaN if the reference is zero).
///
/// Fails if the two differ in length.
pub fn relative_error_mean(estimate: &[f64], reference: &[f64]) -> Result<f64, DiagnosticsError> {
    relative_l1_error(estimate, reference)
}

/// REC: `Σ_ij |C_ij − C°_ij| / Σ_ij |C°_ij|` (infinite or NaN if the reference is zero).
///
/// Fails if the two matrices differ in shape.
pub fn relative_error_covariance(
    estimate: &DMatrix<f64>,
    reference: &DMatrix<f64>,
) -> Result<f64, DiagnosticsError> {
    if estimate.shape() != reference.shape() {
        return Err(DiagnosticsError::DimensionMismatch {
            expected: reference.len(),
            found: estimate.len(),
        });
    }
    relative_l1_error(estimate.as_slice(), reference.as_slice())
}

/// `‖estimate − reference‖₁ / ‖reference‖₁` over equally long slices.
fn relative_l1_error(estimate: &[f64], reference: &[f64]) -> Result<f64, DiagnosticsError> {
    if estimate.len() != reference.len() {
        return Err(DiagnosticsError::DimensionMismatch {
            expected: reference.len(),
            found: estimate.len(),
        });
    }
    let difference: f64 = estimate
        .iter()
        .zip(reference)
        .map(|(a, b)| (a - b).abs())
        .sum();
    let scale: f64 = reference.iter().map(|b| b.abs()).sum();
    Ok(difference / scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed: one chain of draws (1, 2), (3, 2), (2, 5) has mean (2, 3) and deviations
    /// (−1, −1), (1, −1), (0, 2); with divisor 3, C = [[2/3, 0], [0, 2]].
    #[test]
    fn sample_moments_use_the_papers_divisor() {
        let chains = vec![vec![vec![1.0, 3.0, 2.0], vec![2.0, 2.0, 5.0]]];
        let moments = sample_moments(&chains).unwrap();
        assert_eq!(moments.mean, DVector::from_vec(vec![2.0, 3.0]));
        let expected = DMatrix::from_row_slice(2, 2, &[2.0 / 3.0, 0.0, 0.0, 2.0]);
        assert!((moments.covariance - expected).abs().max() < 1e-15);
    }

    #[test]
    fn sample_moments_pool_chains() {
        let one = vec![vec![vec![1.0, 3.0, 2.0, 6.0]]];
        let two = vec![vec![vec![1.0, 3.0]], vec![vec![2.0, 6.0]]];
        assert_eq!(sample_moments(&one), sample_moments(&two));
    }

    /// Hand-computed: |1.1 − 1| + |−2.2 + 2| = 0.3 over |1| + |−2| = 3 gives 0.1; the covariance
    /// differs by 0.1 in each of the two off-diagonal entries and the reference sums to
    /// 1 + 4 + 2·0.5 = 6, so REC = 0.2/6.
    #[test]
    fn relative_errors_are_l1_ratios() {
        let rem = relative_error_mean(&[1.1, -2.2], &[1.0, -2.0]).unwrap();
        assert!((rem - 0.1).abs() < 1e-12);
        let reference = DMatrix::from_row_slice(2, 2, &[1.0, 0.5, 0.5, 4.0]);
        let estimate = DMatrix::from_row_slice(2, 2, &[1.0, 0.6, 0.6, 4.0]);
        let rec = relative_error_covariance(&estimate, &reference).unwrap();
        assert!((rec - 0.2 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn mismatched_shapes_are_errors() {
        assert_eq!(
            relative_error_mean(&[1.0], &[1.0, 2.0]),
            Err(DiagnosticsError::DimensionMismatch {
                expected: 2,
                found: 1
            })
        );
        let square = DMatrix::<f64>::identity(2, 2);
        let wide = DMatrix::<f64>::zeros(1, 4);
        assert!(relative_error_covariance(&wide, &square).is_err());
        assert_eq!(sample_moments(&[]), Err(DiagnosticsError::NoChains));
        assert_eq!(
            sample_moments(&[vec![vec![]]]),
            Err(DiagnosticsError::NoDraws)
        );
    }
}
