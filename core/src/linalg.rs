//! Slice kernels for the hot loops (surrogate gradients, leapfrog updates).
//!
//! A plain `iter().zip().sum()` dot product is one dependent chain of additions, which the
//! compiler may not reorder; four independent accumulators let it keep the floating-point
//! units busy and vectorize. The summation order is fixed, so results are bit-identical on
//! every platform that rounds IEEE-754 doubles the same way. Generic over the scalar
//! ([`Real`]): one kernel for `f64` and `f32`.

use crate::real::Real;

/// `Σ aᵢ bᵢ` with four independent partial sums. Panics in debug builds if lengths differ.
/// Out of line with the `compact` feature (one copy instead of one per caller).
#[cfg_attr(feature = "compact", inline(never))]
#[cfg_attr(not(feature = "compact"), inline)]
pub fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    debug_assert_eq!(a.len(), b.len());
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [T::zero(); 4];
    let mut ca = a.chunks_exact(4);
    let mut cb = b.chunks_exact(4);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for k in 0..4 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut tail = T::zero();
    for (&x, &y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += x * y;
    }
    // Pairing lanes 0+2 and 1+3 matches how the vectorized loop holds them (no shuffles).
    (acc[0] + acc[2]) + (acc[1] + acc[3]) + tail
}

/// `y ← y + α x`.
#[inline]
pub fn axpy<T: Real>(alpha: T, x: &[T], y: &mut [T]) {
    debug_assert_eq!(x.len(), y.len());
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

/// Whether every entry is finite.
#[inline]
pub fn all_finite<T: Real>(x: &[T]) -> bool {
    x.iter().all(|v| v.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_naive_sum_for_all_tail_lengths() {
        for n in 0..13 {
            let a: std::vec::Vec<f64> = (0..n).map(|i| i as f64 * 0.5 - 1.0).collect();
            let b: std::vec::Vec<f64> = (0..n).map(|i| 2.0 - i as f64).collect();
            let naive: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - naive).abs() < 1e-12, "n = {n}");
        }
    }

    #[test]
    fn axpy_adds_scaled_vector() {
        let mut y = [1.0, 2.0, 3.0];
        axpy(2.0, &[1.0, -1.0, 0.5], &mut y);
        assert_eq!(y, [3.0, 0.0, 4.0]);
    }
}
