//! Slice kernels for the hot loops (surrogate gradients, leapfrog updates).
//!
//! A plain `iter().zip().sum()` dot product is one dependent chain of additions, which the
//! compiler may not reorder; independent partial sums let it keep the floating-point units
//! busy and vectorize: four in `f64`, eight in `f32` ([`Real::PARTIAL_SUMS`]), two vector
//! registers' worth in both. The summation order is fixed per scalar, so results are
//! bit-identical on every platform that rounds IEEE-754 arithmetic the same way. Generic over
//! the scalar ([`Real`]): one kernel for `f64` and `f32`.

use crate::real::Real;

/// `Σ aᵢ bᵢ` with [`Real::PARTIAL_SUMS`] independent partial sums: four for `f64` (two SSE2
/// registers of two lanes), eight for `f32` (two registers of four lanes), so that in both the
/// additions form two independent chains of full vectors. Panics in debug builds if lengths
/// differ. Out of line with the `compact` feature (one copy instead of one per caller).
#[cfg_attr(feature = "compact", inline(never))]
#[cfg_attr(not(feature = "compact"), inline)]
pub fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    // A constant per scalar: the other branch is not compiled into the monomorphized copy.
    if T::PARTIAL_SUMS == 8 {
        dot_with::<T, 8>(a, b)
    } else {
        dot_with::<T, 4>(a, b)
    }
}

/// `Σ aᵢ bᵢ` with `N` partial sums, `N` = 4 or 8: partial sum `k` adds the products
/// `i ≡ k (mod N)` in order, and the remainder `t` past the last multiple of `N` is summed
/// separately. Then, for `N = 4`, `(s₀ + s₂) + (s₁ + s₃) + t` (lanes 0+2 and 1+3 are how a
/// vectorized loop holds them: no shuffles), the order the `f64` results have always had; for
/// `N = 8`, `uₖ = sₖ + sₖ₊₄` lane for lane and then `t + u₀ + u₁ + u₂ + u₃` in turn. The shape
/// of that last sum decides how LLVM vectorizes the loop: with the pairwise form it keeps eight
/// `f32` partial sums in four half-empty registers, with this one in two full ones.
#[inline(always)]
fn dot_with<T: Real, const N: usize>(a: &[T], b: &[T]) -> T {
    debug_assert_eq!(a.len(), b.len());
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let (a_chunks, a_tail) = a.as_chunks::<N>();
    let (b_chunks, b_tail) = b.as_chunks::<N>();
    let mut acc = [T::zero(); N];
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for k in 0..N {
            acc[k] += x[k] * y[k];
        }
    }
    let mut tail = T::zero();
    for (&x, &y) in a_tail.iter().zip(b_tail) {
        tail += x * y;
    }
    if N == 4 {
        (acc[0] + acc[2]) + (acc[1] + acc[3]) + tail
    } else {
        let folded: [T; 4] = core::array::from_fn(|k| acc[k] + acc[(k + 4) % N]);
        let mut sum = tail;
        for u in folded {
            sum += u;
        }
        sum
    }
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

/// `p ← p + α g` (as [`axpy`] computes it), returning whether every entry of `g` is finite: the
/// leapfrog's closing half kick and its check of the new gradient in one pass, not two (in low
/// dimension a pass's loop overhead outweighs its arithmetic). `p` is updated even when `g` is
/// not finite; the caller then discards it. Out of line with the `compact` feature (one copy
/// for the leapfrog and [`crate::Metric::kick_kick_drift`]'s default).
#[cfg_attr(feature = "compact", inline(never))]
#[cfg_attr(not(feature = "compact"), inline)]
pub fn axpy_finite<T: Real>(alpha: T, g: &[T], p: &mut [T]) -> bool {
    debug_assert_eq!(g.len(), p.len());
    let mut finite = true;
    for (pi, &gi) in p.iter_mut().zip(g) {
        finite &= gi.is_finite();
        *pi += alpha * gi;
    }
    finite
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_naive_sum_for_all_tail_lengths() {
        for n in 0..21 {
            let a: std::vec::Vec<f64> = (0..n).map(|i| i as f64 * 0.5 - 1.0).collect();
            let b: std::vec::Vec<f64> = (0..n).map(|i| 2.0 - i as f64).collect();
            let naive: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - naive).abs() < 1e-12, "n = {n}");
            let a: std::vec::Vec<f32> = a.iter().map(|&x| x as f32).collect();
            let b: std::vec::Vec<f32> = b.iter().map(|&x| x as f32).collect();
            let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - naive).abs() < 1e-4, "f32, n = {n}");
        }
    }

    /// The `f64` summation order is the one the host's results were fixed with: four partial
    /// sums, `(s₀ + s₂) + (s₁ + s₃)`, then the remainder (bit for bit).
    #[test]
    fn f64_dot_keeps_its_summation_order() {
        let mut rng = crate::random::SplitMix64(3);
        for n in 0..40 {
            let mut a = std::vec![0.0; n];
            let mut b = std::vec![0.0; n];
            crate::random::fill_standard_normal(&mut rng, &mut a);
            crate::random::fill_standard_normal(&mut rng, &mut b);
            let mut acc = [0.0f64; 4];
            let full = n / 4 * 4;
            for i in 0..full {
                acc[i % 4] += a[i] * b[i];
            }
            let mut tail = 0.0;
            for i in full..n {
                tail += a[i] * b[i];
            }
            let want = (acc[0] + acc[2]) + (acc[1] + acc[3]) + tail;
            assert_eq!(dot(&a, &b).to_bits(), want.to_bits(), "n = {n}");
        }
    }

    #[test]
    fn axpy_adds_scaled_vector() {
        let mut y = [1.0, 2.0, 3.0];
        axpy(2.0, &[1.0, -1.0, 0.5], &mut y);
        assert_eq!(y, [3.0, 0.0, 4.0]);
    }

    #[test]
    fn axpy_finite_is_axpy_and_reports_non_finite_entries() {
        let mut y = [1.0, 2.0, 3.0];
        assert!(axpy_finite(2.0, &[1.0, -1.0, 0.5], &mut y));
        assert_eq!(y, [3.0, 0.0, 4.0]);
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(!axpy_finite(2.0, &[1.0, bad, 0.5], &mut y));
        }
    }
}
