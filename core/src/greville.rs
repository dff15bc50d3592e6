//! Online least squares for the output weights by Greville's pseudoinverse recursion, O(s²) per
//! new training row whatever the number of rows seen (journal paper, Proposition 1).
//!
//! After rows `h₁ … h_k` (the hidden-unit outputs at visited states) with targets `t₁ … t_k`
//! (their exact potentials), the state is `v = H†T` (the minimum-norm least-squares output
//! weights), `Φ = I − H†H` (the projector onto the null space of `H`) and `Θ = H†H†ᵀ`. A new row
//! either adds a direction outside the row space of `H` (`c = Φh ≠ 0`) or lies inside it
//! (`c = 0`, an ordinary recursive-least-squares step). Both `Φ` and `Θ` are symmetric, so only
//! their lower triangles are stored and updated (a symmetric product of our own that reads each
//! column once, and nalgebra's `syger`), which halves the memory traffic of the two
//! matrix–vector products and the rank-one and rank-two updates that make up an update. Once
//! the rank reaches `s`, `Φ = 0` and is skipped altogether. The symmetric product sums in
//! nalgebra's `sygemv` order, so `f64` results are those of `sygemv`, bit for bit; in `f32` its
//! loops run four lanes per SSE2 register where `sygemv`'s dot products ran two.
//!
//! Starting with `Φ = 0, Θ = I/λ` ([`OnlineGreville::ridge`]) instead gives the ridge solution
//! `v = (HᵀH + λI)⁻¹HᵀT`, which is better conditioned when the hidden-unit outputs of nearby
//! states are nearly collinear.

use nalgebra::{
    DefaultAllocator, Dim, Matrix, OMatrix, OVector, U1, allocator::Allocator, storage::Storage,
};

use crate::error::{Error, check_dim, check_positive};
use crate::linalg::dot;
use crate::real::Real;

/// The default relative tolerance for deciding `c = Φh = 0`: `‖c‖ ≤ tol·‖h‖`, in `f64`.
pub const DEFAULT_TOLERANCE: f64 = 1e-8;

/// The recursion's state for `S` hidden units, in the scalar `T` (`f64` unless named).
#[derive(Clone, Debug)]
pub struct OnlineGreville<S: Dim, T: Real = f64>
where
    DefaultAllocator: Allocator<S> + Allocator<S, S>,
{
    weights: OVector<T, S>,
    /// `Φ = I − H†H`, lower triangle.
    phi: OMatrix<T, S, S>,
    /// `Θ = H†H†ᵀ`, lower triangle.
    theta: OMatrix<T, S, S>,
    /// Scratch: `c = Φh`, then the gain `b`.
    gain: OVector<T, S>,
    /// Scratch: `Θh`.
    theta_h: OVector<T, S>,
    rank: usize,
    rows: usize,
    tolerance: T,
    /// The ridge parameter of a [`OnlineGreville::ridge`] start, 0 for the pseudoinverse start
    /// `Φ = I, Θ = 0`: what [`OnlineGreville::restart`] returns to.
    lambda: T,
}

impl<S: Dim, T: Real> OnlineGreville<S, T>
where
    DefaultAllocator: Allocator<S> + Allocator<S, S>,
{
    /// The state for no data: `v = 0`, `Φ = I`, `Θ = 0`. `tolerance` is the relative threshold
    /// of the `c = 0` test ([`DEFAULT_TOLERANCE`] suits well-scaled features).
    pub fn new(hidden: S, tolerance: f64) -> Result<Self, Error> {
        check_positive(tolerance, "Greville tolerance")?;
        let mut state = Self::zeroed(hidden, tolerance);
        state.restart();
        Ok(state)
    }

    /// The ridge start `Φ = 0`, `Θ = I/λ`: every later update is then a recursive least-squares
    /// step and `v` is always `(HᵀH + λI)⁻¹HᵀT`.
    pub fn ridge(hidden: S, lambda: f64) -> Result<Self, Error> {
        check_positive(lambda, "ridge parameter")?;
        let mut state = Self::zeroed(hidden, DEFAULT_TOLERANCE);
        state.lambda = T::of(lambda);
        state.restart();
        Ok(state)
    }

    /// Forgets every row: back to the start the state was made with (`Φ = I, Θ = 0`, or the
    /// ridge start `Φ = 0, Θ = I/λ`; a batch start returns to `Φ = I, Θ = 0`). In O(s²), with
    /// no new storage: a device refactorizes by restarting and replaying the rows it kept
    /// (see [`training`](crate::training)).
    pub fn restart(&mut self) {
        let zero = T::zero();
        self.weights.fill(zero);
        self.phi.fill(zero);
        self.theta.fill(zero);
        if self.lambda > zero {
            self.theta.fill_diagonal(T::one() / self.lambda);
            self.rank = self.weights.len();
        } else {
            self.phi.fill_diagonal(T::one());
            self.rank = 0;
        }
        self.rows = 0;
    }

    /// The state after a batch fit of `k` rows: `pinv` is `H†` (`s × k`, from an SVD), `h` is
    /// `H` (`k × s`) and `targets` is `T`. Sets `v = H†T`, `Φ = I − H†H`, `Θ = H†H†ᵀ`.
    pub fn from_batch<K, SP, SH>(
        pinv: &Matrix<T, S, K, SP>,
        h: &Matrix<T, K, S, SH>,
        targets: &[T],
        tolerance: f64,
    ) -> Result<Self, Error>
    where
        K: Dim,
        SP: Storage<T, S, K>,
        SH: Storage<T, K, S>,
    {
        check_positive(tolerance, "Greville tolerance")?;
        let (hidden, k) = pinv.shape_generic();
        check_dim(hidden.value(), h.ncols())?;
        check_dim(k.value(), h.nrows())?;
        check_dim(k.value(), targets.len())?;
        let mut state = Self::zeroed(hidden, tolerance);
        let one = T::one();
        state.phi.fill_diagonal(one);
        state.phi.gemm(-one, pinv, h, one);
        for (col, &t) in pinv.column_iter().zip(targets) {
            state.theta.syger(one, &col, &col, one);
            state.weights.axpy(t, &col, one);
        }
        // The trace of the projector Φ is the nullity of H.
        let nullity = libm::round(state.phi.trace().to_f64()).max(0.0) as usize;
        state.rank = hidden.value().saturating_sub(nullity);
        state.rows = k.value();
        Ok(state)
    }

    fn zeroed(hidden: S, tolerance: f64) -> Self {
        let tolerance = T::of(tolerance);
        Self {
            weights: OVector::zeros_generic(hidden, U1),
            phi: OMatrix::zeros_generic(hidden, hidden),
            theta: OMatrix::zeros_generic(hidden, hidden),
            gain: OVector::zeros_generic(hidden, U1),
            theta_h: OVector::zeros_generic(hidden, U1),
            rank: 0,
            rows: 0,
            tolerance,
            lambda: T::zero(),
        }
    }

    /// Adds the row `row` (length `s`) with target `t`, updating `v`, `Φ` and `Θ` in O(s²).
    ///
    /// A row of the wrong length is ignored (it cannot come from the network this state
    /// trains), so that the update has no panicking path.
    pub fn update(&mut self, row: &[T], t: T) {
        let s = self.weights.len();
        debug_assert_eq!(row.len(), s);
        if row.len() != s {
            return;
        }
        let one = T::one();
        let residual = t - dot(row, self.weights.as_slice());
        symmetric_product(self.theta_h.as_mut_slice(), self.theta.as_slice(), row);
        let h_theta_h = dot(row, self.theta_h.as_slice());

        let mut new_direction = false;
        if self.rank < s {
            symmetric_product(self.gain.as_mut_slice(), self.phi.as_slice(), row);
            let c2 = dot(self.gain.as_slice(), self.gain.as_slice());
            let h2 = dot(row, row);
            new_direction = c2 > self.tolerance * self.tolerance * h2;
            if new_direction {
                // b = c/‖c‖²; Φ ← Φ − c cᵀ/‖c‖²;
                // Θ ← Θ − Θh bᵀ − b (Θh)ᵀ + (1 + hᵀΘh) b bᵀ = Θ − u bᵀ − b uᵀ,
                // with u = Θh − ½(1 + hᵀΘh) b.
                rank_one(&mut self.phi, -one / c2, &self.gain, &self.gain);
                self.gain.scale_mut(one / c2);
                let half = T::of(-0.5) * (one + h_theta_h);
                self.theta_h.axpy(half, &self.gain, one);
                rank_one(&mut self.theta, -one, &self.theta_h, &self.gain);
                rank_one(&mut self.theta, -one, &self.gain, &self.theta_h);
                self.rank += 1;
            }
        }
        if !new_direction {
            // b = Θh/(1 + hᵀΘh); Θ ← Θ − Θh bᵀ.
            let denom = one + h_theta_h;
            rank_one(&mut self.theta, -one / denom, &self.theta_h, &self.theta_h);
            self.gain.copy_from(&self.theta_h);
            self.gain.scale_mut(one / denom);
        }
        self.weights.axpy(residual, &self.gain, one);
        self.rows += 1;
    }

    /// The current output weights `v`.
    pub fn weights(&self) -> &[T] {
        self.weights.as_slice()
    }

    /// The prediction `hᵀv` for a feature row `h`.
    pub fn predict(&self, h: &[T]) -> T {
        dot(h, self.weights.as_slice())
    }

    /// The number of rows added (including a batch start's).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The rank of the rows seen (`s` for a ridge start).
    pub fn rank(&self) -> usize {
        self.rank
    }
}

/// `y ← M x` for the symmetric `s × s` matrix `M` of which only the lower triangle of the
/// column-major `m` is read. The operations and their order are those of nalgebra's `sygemv`
/// (α = 1, β = 0), which this replaces, so `f64` results are the same bit for bit: `y = x₀ m₀`
/// (column 0), `y₀ += m₁..,₀ · x₁..` ([`column_dot`]); then per column `j ≥ 1`,
/// `yⱼ += mⱼ..,ⱼ · xⱼ..` (the diagonal included) and `yⱼ₊₁.. += xⱼ mⱼ₊₁..,ⱼ`
/// ([`symmetric_column`]).
///
/// Not inlined: `update` makes two such products and four rank-one updates below, and one
/// out-of-line copy of each kernel instead of six inlined ones is most of the difference
/// between a 2.5 kB and a 1 kB update on a device; the call costs nothing next to O(s²) work.
/// Over slices, so there is one copy per scalar, not one per size.
#[inline(never)]
fn symmetric_product<T: Real>(y: &mut [T], m: &[T], x: &[T]) {
    let s = y.len();
    debug_assert!(x.len() == s && m.len() == s * s);
    let mut columns = m.chunks_exact(s.max(1));
    // Column 0, all of it: y = x₀ m₀, then y₀ += m₁..,₀ · x₁...
    let (Some(first), Some(&x0)) = (columns.next(), x.first()) else {
        return;
    };
    for (yi, &mi) in y.iter_mut().zip(first) {
        *yi = x0 * mi;
    }
    if let (Some(y0), Some(below), Some(xs)) = (y.first_mut(), first.get(1..), x.get(1..)) {
        *y0 += column_dot(below, xs);
    }
    // Column j ≥ 1 from its diagonal on: `diagonal` starts at Mⱼⱼ, `xs` at xⱼ, `ys` at yⱼ.
    let mut diagonal = m.get(s + 1..).unwrap_or_default();
    let mut xs = x.get(1..).unwrap_or_default();
    let mut ys = y.get_mut(1..).unwrap_or_default();
    while let Some(lower) = diagonal.get(..xs.len()) {
        if xs.is_empty() {
            return;
        }
        symmetric_column(ys, lower, xs);
        diagonal = diagonal.get(s + 1..).unwrap_or_default();
        xs = xs.get(1..).unwrap_or_default();
        ys = core::mem::take(&mut ys).get_mut(1..).unwrap_or_default();
    }
}

/// Column `j ≥ 1` of [`symmetric_product`], given from the diagonal on: `lower = mⱼ..,ⱼ`,
/// `xs = xⱼ..`, `ys = yⱼ..` (equal lengths): `yⱼ += lower · xs` and `yⱼ₊₁.. += xⱼ lower₁..` in
/// one pass that loads each entry of the column once for both (nalgebra reads the column
/// twice). The sums are nalgebra's: [`column_dot`]'s order, and each `yᵢ` gets the same terms
/// in the same order. Out of line, so that the compiler knows `ys` overlaps neither input and
/// vectorizes without run-time overlap checks.
#[inline(never)]
fn symmetric_column<T: Real>(ys: &mut [T], lower: &[T], xs: &[T]) {
    let n = ys.len().min(lower.len()).min(xs.len());
    let (ys, lower, xs) = (&mut ys[..n], &lower[..n], &xs[..n]);
    let (Some(&yj), Some(&xj)) = (ys.first(), xs.first()) else {
        return;
    };
    let (m_chunks, m_tail) = lower.as_chunks::<8>();
    let (x_chunks, x_tail) = xs.as_chunks::<8>();
    let (y_chunks, y_tail) = ys.as_chunks_mut::<8>();
    let mut acc = [T::zero(); 8];
    // The pass also adds xⱼ mⱼⱼ to yⱼ, which is overwritten below.
    for ((m, x), y) in m_chunks.iter().zip(x_chunks).zip(y_chunks) {
        for k in 0..8 {
            acc[k] += m[k] * x[k];
            y[k] += xj * m[k];
        }
    }
    let mut dot = fold(acc);
    for ((&m, &x), y) in m_tail.iter().zip(x_tail).zip(y_tail) {
        dot += m * x;
        *y += xj * m;
    }
    if let Some(first) = ys.first_mut() {
        *first = yj + dot;
    }
}

/// `M ← M + α x yᵀ` on the lower triangle of `M` (nalgebra's `syger`); not inlined, as
/// [`symmetric_product`].
#[inline(never)]
fn rank_one<S: Dim, T: Real>(
    m: &mut OMatrix<T, S, S>,
    alpha: T,
    x: &OVector<T, S>,
    y: &OVector<T, S>,
) where
    DefaultAllocator: Allocator<S> + Allocator<S, S>,
{
    m.syger(alpha, x, y, T::one());
}

/// The dot product of [`symmetric_product`], in the order of nalgebra's `dot`, which it
/// replaces: eight partial sums over the multiples of eight, [`fold`]ed, then the remaining
/// products one at a time.
#[inline(always)]
fn column_dot<T: Real>(a: &[T], b: &[T]) -> T {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let (a_chunks, a_tail) = a.as_chunks::<8>();
    let (b_chunks, b_tail) = b.as_chunks::<8>();
    let mut acc = [T::zero(); 8];
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut sum = fold(acc);
    for (&x, &y) in a_tail.iter().zip(b_tail) {
        sum += x * y;
    }
    sum
}

/// nalgebra's end of a dot product's eight partial sums:
/// `((((0 + (s₀ + s₄)) + (s₁ + s₅)) + (s₂ + s₆)) + (s₃ + s₇))`.
///
/// The four lane-for-lane sums pass through [`black_box`](core::hint::black_box) before the
/// serial ones: without it LLVM shapes the whole loop after this serial sum and keeps eight
/// `f32` partial sums in four half-empty SSE registers (two lanes each, as for `f64`), half the
/// `f32` throughput. The value is unchanged; the cost is one store and four loads per dot product.
#[inline(always)]
fn fold<T: Real>(acc: [T; 8]) -> T {
    let lanes: [T; 4] = core::array::from_fn(|k| acc[k] + acc[k + 4]);
    let mut sum = T::zero();
    for u in core::hint::black_box(lanes) {
        sum += u;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::{SplitMix64, fill_standard_normal};
    use nalgebra::{DMatrix, DVector, Dyn};

    fn random_rows(rng: &mut SplitMix64, k: usize, s: usize) -> (DMatrix<f64>, DVector<f64>) {
        let mut h = DMatrix::zeros(k, s);
        fill_standard_normal(rng, h.as_mut_slice());
        let mut t = DVector::zeros(k);
        fill_standard_normal(rng, t.as_mut_slice());
        (h, t)
    }

    fn batch_solution(h: &DMatrix<f64>, t: &DVector<f64>) -> DVector<f64> {
        h.clone().pseudo_inverse(1e-12).unwrap() * t
    }

    fn assert_close(a: &[f64], b: &[f64], rel: f64) {
        let diff: f64 = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).powi(2))
            .sum::<f64>()
            .sqrt();
        let norm: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
        assert!(diff <= rel * norm, "relative error {} > {rel}", diff / norm);
    }

    #[test]
    fn online_equals_batch_pseudoinverse_through_both_branches() {
        let (s, k) = (20, 45);
        let mut rng = SplitMix64(1);
        let (h, t) = random_rows(&mut rng, k, s);
        let mut online = OnlineGreville::new(Dyn(s), DEFAULT_TOLERANCE).unwrap();
        for j in 0..k {
            let row: std::vec::Vec<f64> = h.row(j).iter().copied().collect();
            online.update(&row, t[j]);
            // Check underdetermined (c ≠ 0) and overdetermined (c = 0) phases.
            if j + 1 == 12 || j + 1 == s || j + 1 == k {
                let hk = h.rows(0, j + 1).into_owned();
                let tk = t.rows(0, j + 1).into_owned();
                assert_close(online.weights(), batch_solution(&hk, &tk).as_slice(), 1e-8);
            }
        }
        assert_eq!(online.rank(), s);
    }

    #[test]
    fn batch_start_then_online_equals_batch() {
        let (s, k0, k) = (20, 8, 40);
        let mut rng = SplitMix64(2);
        let (h, t) = random_rows(&mut rng, k, s);
        let h0 = h.rows(0, k0).into_owned();
        let pinv = h0.clone().pseudo_inverse(1e-12).unwrap();
        let t0: std::vec::Vec<f64> = t.rows(0, k0).iter().copied().collect();
        let mut online = OnlineGreville::from_batch(&pinv, &h0, &t0, DEFAULT_TOLERANCE).unwrap();
        assert_eq!(online.rank(), k0);
        for j in k0..k {
            let row: std::vec::Vec<f64> = h.row(j).iter().copied().collect();
            online.update(&row, t[j]);
        }
        assert_close(online.weights(), batch_solution(&h, &t).as_slice(), 1e-8);
    }

    #[test]
    fn ridge_start_gives_ridge_solution() {
        let (s, k, lambda) = (12, 30, 0.5);
        let mut rng = SplitMix64(3);
        let (h, t) = random_rows(&mut rng, k, s);
        let mut online = OnlineGreville::ridge(Dyn(s), lambda).unwrap();
        for j in 0..k {
            let row: std::vec::Vec<f64> = h.row(j).iter().copied().collect();
            online.update(&row, t[j]);
        }
        let normal = h.transpose() * &h + DMatrix::identity(s, s) * lambda;
        let expected = normal.cholesky().unwrap().solve(&(h.transpose() * &t));
        assert_close(online.weights(), expected.as_slice(), 1e-10);
    }

    #[test]
    fn repeated_row_takes_the_least_squares_branch() {
        let mut online = OnlineGreville::<Dyn>::new(Dyn(3), DEFAULT_TOLERANCE).unwrap();
        online.update(&[1.0, 2.0, 0.0], 1.0);
        online.update(&[1.0, 2.0, 0.0], 3.0);
        assert_eq!(online.rank(), 1);
        // Least squares over two identical rows predicts their mean.
        assert!((online.predict(&[1.0, 2.0, 0.0]) - 2.0).abs() < 1e-12);
    }

    /// The symmetric product is nalgebra's `sygemv` in `f64`, bit for bit (the host's
    /// results depend on it), for sizes around the multiples of eight of the dot products; in
    /// `f32` it agrees with nalgebra's to the rounding of a length-`s` dot product.
    #[test]
    fn symmetric_product_is_nalgebras_bit_for_bit_in_f64() {
        let mut rng = SplitMix64(4);
        for s in [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 64, 100] {
            let mut m = DMatrix::<f64>::zeros(s, s);
            let mut x = DVector::<f64>::zeros(s);
            fill_standard_normal(&mut rng, m.as_mut_slice());
            fill_standard_normal(&mut rng, x.as_mut_slice());
            let bits = |v: &[f64]| v.iter().map(|z| z.to_bits()).collect::<std::vec::Vec<_>>();

            let mut want = DVector::<f64>::zeros(s);
            want.sygemv(1.0, &m, &x, 0.0);
            let mut got = std::vec![f64::NAN; s];
            symmetric_product(&mut got, m.as_slice(), x.as_slice());
            assert_eq!(bits(&got), bits(want.as_slice()), "sygemv, s = {s}");

            let m32 = m.map(|v| v as f32);
            let x32 = x.map(|v| v as f32);
            let mut want = DVector::<f32>::zeros(s);
            want.sygemv(1.0, &m32, &x32, 0.0);
            let mut got = std::vec![f32::NAN; s];
            symmetric_product(&mut got, m32.as_slice(), x32.as_slice());
            for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
                let scale: f32 = (0..s)
                    .map(|k| (m32[(i.max(k), i.min(k))] * x32[k]).abs())
                    .sum();
                let bound = s as f32 * f32::EPSILON * scale;
                assert!((g - w).abs() <= bound, "f32 sygemv, s = {s}, row {i}");
            }
        }
    }

    #[test]
    fn rejects_bad_settings() {
        assert!(OnlineGreville::<Dyn>::new(Dyn(3), 0.0).is_err());
        assert!(OnlineGreville::<Dyn>::ridge(Dyn(3), -1.0).is_err());
    }
}
