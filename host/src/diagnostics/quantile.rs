//! Sample quantiles by linear interpolation between order statistics: Hyndman and Fan's type 7,
//! the default of numpy (`method="linear"`) and R, used for the 5/50/95 % columns of a summary,
//! for the median of the folded R̂ and for the thresholds of the tail ESS.
//!
//! For sorted `x_0 ≤ … ≤ x_{n−1}` and `h = (n − 1)p`, `g = h − ⌊h⌋`, the quantile is
//! `x_⌊h⌋ + g (x_⌊h⌋+1 − x_⌊h⌋)`, evaluated as numpy does (from the upper point when `g ≥ ½`), so
//! that it returns a tied pair's common value exactly.

/// The type-7 `p`-quantile of `values` (NaN if empty, if `p ∉ [0, 1]`, or if a value is NaN).
pub fn quantile(values: &[f64], p: f64) -> f64 {
    if values.iter().any(|x| x.is_nan()) {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    quantile_sorted(&sorted, p)
}

/// The type-7 `p`-quantile of already ascending `sorted` values (NaN if empty or `p ∉ [0, 1]`).
pub fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * p;
    let low = (h.floor() as usize).min(sorted.len() - 1);
    let high = (low + 1).min(sorted.len() - 1);
    let g = h - low as f64;
    let (a, b) = (sorted[low], sorted[high]);
    if g >= 0.5 {
        b - (b - a) * (1.0 - g)
    } else {
        a + (b - a) * g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed: for 1..=10, h = 9p; p = 0.05 → h = 0.45 → 1 + 0.45 = 1.45;
    /// p = 0.5 → h = 4.5 → 5.5; p = 0.95 → h = 8.55 → 9.55; the ends give the extremes.
    #[test]
    fn quantiles_of_one_to_ten_match_hand_computation() {
        let x: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        for (p, expected) in [
            (0.0, 1.0),
            (0.05, 1.45),
            (0.5, 5.5),
            (0.95, 9.55),
            (1.0, 10.0),
        ] {
            let q = quantile(&x, p);
            assert!((q - expected).abs() < 1e-12, "p = {p}: {q} vs {expected}");
        }
    }

    /// Hand-computed on an odd-length, unevenly spaced sample: sorted (−2, 0, 1, 4, 10), h = 4p;
    /// p = 0.05 → h = 0.2 → −2 + 0.2·2 = −1.6; p = 0.5 → the middle value 1;
    /// p = 0.95 → h = 3.8 → 4 + 0.8·6 = 8.8.
    #[test]
    fn quantiles_of_an_uneven_sample_match_hand_computation() {
        let x = [4.0, -2.0, 10.0, 1.0, 0.0];
        for (p, expected) in [(0.05, -1.6), (0.5, 1.0), (0.95, 8.8)] {
            let q = quantile(&x, p);
            assert!((q - expected).abs() < 1e-12, "p = {p}: {q} vs {expected}");
        }
    }

    #[test]
    fn tied_neighbours_give_their_exact_value() {
        let x = [0.1, 0.1, 0.1, 0.7];
        assert_eq!(quantile(&x, 0.3), 0.1);
        assert_eq!(quantile(&x, 0.6), 0.1);
    }

    #[test]
    fn degenerate_inputs_give_nan_or_the_single_value() {
        assert!(quantile(&[], 0.5).is_nan());
        assert!(quantile(&[1.0, f64::NAN], 0.5).is_nan());
        assert!(quantile(&[1.0, 2.0], 1.5).is_nan());
        assert_eq!(quantile(&[3.0], 0.95), 3.0);
    }
}
