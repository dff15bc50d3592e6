//! The design matrix in blocks of [`ROWS`] rows stored column by column, and the fused pass
//! over it that gives the loss and gradient sums of a range of rows at several points.
//!
//! # Why this layout
//! Row-major `X` makes each `zᵢ = xᵢ·β` a dot product of 50 numbers that ends in a horizontal
//! sum, and the softplus of one row at a time. With `X` stored block by block, each block's
//! columns contiguous (`x[block][j][r]`), the `ROWS` dot products of a block advance together:
//! `z[r] += x[j][r] · β[j]` is one vector multiply-add per column, every lane its own row.
//! The losses and residuals of the block are then a branch-free loop over `ROWS` lanes. The
//! gradient `Σᵣ (σ(zᵣ) − yᵣ) xᵣ` is a second sweep over a tile of blocks (from the L2 cache),
//! column by column, each lane its own running sum (no horizontal sum per block), and the
//! lanes are summed once per pass. Every point of a pass takes its terms from a block while it
//! is in the L1 cache, so `X` is read once per pass whatever the number of chains.
//!
//! # Vector width chosen at run time, the same bits everywhere
//! The pass is compiled for the baseline x86-64 (two-wide SSE2) and for AVX2, and `pulp`
//! picks the widest the processor has. Each lane's sums run in the same order whatever the
//! vector width, and Rust never fuses a multiply and an add on its own, so the builds return
//! the same bits (a test checks it): a chain's draws do not depend on the machine's vector
//! unit, nor on how many chains share the pass. The sums of products use fused multiply-adds
//! (`mul_add`, one rounding, the same result in every build) where the processor has them
//! (x86-64 with AVX2 and FMA, every 64-bit ARM): one instruction in place of two, which the
//! dot products' 25 per row over 4 lanes were short of. Only on an x86 processor without FMA
//! (before 2013, and some low-end ones since) does the pass multiply and add apart, as a
//! library `fma` would cost tens of times more: its sums round differently, by about 10⁻¹⁶
//! relative, and so its draws differ from other machines' in the last bits.
//!
//! On this machine's Xeon (2026-11), one point over the LR simulation's 10⁵ × 50 matrix took
//! 1.7 ms instead of the row-major pass's 3.0 ms (single thread, best of 40) with separate
//! multiplies and adds and a `log1p` per row. With the multiply-adds fused, one `ln` per tile
//! and the points served block by block, the arithmetic of one point's `U` with the rows in
//! cache fell from 0.88 to 0.53 ms (`U` and `∇U`: 1.58 to 0.95 ms), and two chains' `U` in one
//! pass on two cores from 1.54 to 1.07–1.23 ms, against a bandwidth floor of 0.70 ms
//! (`cargo bench --bench lockstep`). Unrolling the dot products' loop by hand (2026-11-26, see
//! [`dot_products`]) took two chains' pass to 0.95–1.02 ms against a floor of 0.71–0.72 ms
//! (1.34–1.42×), one chain's `U` from 2.1–2.3 to 1.5–1.8 ms.

use std::cell::RefCell;

use pulp::{Arch, Simd, WithSimd};
use shmc_core::fastmath::{exp, ln_at_least_one};

use crate::row_sum::Query;

/// Rows per block: 16 lanes of `z` are four AVX2 registers of independent sums, and a block of
/// 16 rows of 50 doubles (6.4 kB) stays in the L1 cache while it serves every point of a pass.
pub(super) const ROWS: usize = 16;

/// Blocks per tile: a tile's rows (256 of 50 doubles, 100 kB) stay in the L2 cache while every
/// point of a pass takes its losses and residuals, then its gradient terms, from them.
const TILE: usize = 16;

/// `X` in blocks of [`ROWS`] rows, each block column-major, and `y`; the last block is padded
/// with zero rows (their losses are masked out of the sums).
#[derive(Clone, Debug)]
pub(super) struct Blocked {
    x: Vec<f64>,
    y: Vec<f64>,
    d: usize,
}

impl Blocked {
    /// The blocked copy of the row-major `n × d` matrix `x` and the responses `y`.
    pub(super) fn new(x: &[f64], y: &[f64], d: usize) -> Self {
        let n = y.len();
        let blocks = n.div_ceil(ROWS);
        let mut blocked = vec![0.0; blocks * ROWS * d];
        for (i, row) in x.chunks_exact(d).enumerate() {
            let block = &mut blocked[(i / ROWS) * ROWS * d..][..ROWS * d];
            for (j, &v) in row.iter().enumerate() {
                block[j * ROWS + i % ROWS] = v;
            }
        }
        let mut padded = y.to_vec();
        padded.resize(blocks * ROWS, 0.0);
        Self {
            x: blocked,
            y: padded,
            d,
        }
    }

    /// Rows `start..end` (`start` a multiple of [`ROWS`]) at each of `queries`: one record of
    /// `1 + d` numbers per query in `out`, `Σ [log(1 + e^zᵢ) − yᵢ zᵢ]` first if the query needs
    /// the value, then `Σ (σ(zᵢ) − yᵢ) xᵢ` if it needs the gradient (what it does not need is
    /// left untouched).
    pub(super) fn pass(&self, start: usize, end: usize, queries: &[Query<'_>], out: &mut [f64]) {
        let arch = Arch::new();
        SCRATCH.with_borrow_mut(|scratch| {
            if fused_multiply_add() {
                arch.dispatch(self.job::<true>(start, end, queries, out, scratch));
            } else {
                arch.dispatch(self.job::<false>(start, end, queries, out, scratch));
            }
        });
    }

    /// [`Blocked::pass`] with the baseline instruction set only, multiply-adds `FUSED` or not
    /// (fused in software, as slow as it is exact).
    #[cfg(test)]
    pub(super) fn pass_baseline<const FUSED: bool>(
        &self,
        start: usize,
        end: usize,
        queries: &[Query<'_>],
        out: &mut [f64],
    ) {
        let mut scratch = Scratch::default();
        pulp::Scalar::new().vectorize(self.job::<FUSED>(start, end, queries, out, &mut scratch));
    }

    fn job<'a, const FUSED: bool>(
        &'a self,
        start: usize,
        end: usize,
        queries: &'a [Query<'a>],
        out: &'a mut [f64],
        scratch: &'a mut Scratch,
    ) -> Pass<'a, FUSED> {
        assert_eq!(start % ROWS, 0, "a pass starts at a block");
        assert!(start <= end && end <= self.y.len(), "rows out of range");
        for query in queries {
            assert_eq!(query.point.len(), self.d, "β has the wrong dimension");
        }
        assert_eq!(
            out.len(),
            queries.len() * (1 + self.d),
            "one record per query"
        );
        Pass {
            blocked: self,
            start,
            end,
            queries,
            out,
            scratch,
        }
    }
}

/// A pass's working arrays, kept by each thread from one pass to the next: each query's lane
/// sums of the losses, running products of `1 + e^−|z|` and tile of residuals, and the lanes of
/// its gradient sums. At the precomputing paper's 100 rows, allocating and zeroing them (4
/// allocations, 2.5 kB a query) took a quarter of the pass (2026-11-26).
#[derive(Default)]
struct Scratch {
    lanes: Vec<[f64; ROWS]>,
    products: Vec<[f64; ROWS]>,
    resid: Vec<[[f64; ROWS]; TILE]>,
    sums: Vec<f64>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// One pass's arguments, run by [`WithSimd::with_simd`] with the instruction set `pulp` chose.
struct Pass<'a, const FUSED: bool> {
    blocked: &'a Blocked,
    start: usize,
    end: usize,
    queries: &'a [Query<'a>],
    out: &'a mut [f64],
    scratch: &'a mut Scratch,
}

impl<const FUSED: bool> WithSimd for Pass<'_, FUSED> {
    type Output = ();

    /// Everything below is `#[inline(always)]`, so that it is compiled inside the function
    /// `pulp` built for the chosen instruction set.
    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        let d = self.blocked.d;
        let queries = self.queries.len();
        let Scratch {
            lanes,
            products,
            resid,
            sums,
        } = self.scratch;
        lanes.clear();
        lanes.resize(queries, [0.0; ROWS]);
        products.clear();
        products.resize(queries, [1.0; ROWS]);
        sums.clear();
        sums.resize(queries * d * ROWS, 0.0);
        // Every residual the gradient reads is written first (`terms`), so none is cleared.
        if resid.len() < queries {
            resid.resize(queries, [[0.0; ROWS]; TILE]);
        }
        for tile in (self.start..self.end).step_by(TILE * ROWS) {
            let rows = (self.end - tile).min(TILE * ROWS);
            let xt = &self.blocked.x[tile * d..][..rows.div_ceil(ROWS) * ROWS * d];
            let yt = &self.blocked.y[tile..][..rows.div_ceil(ROWS) * ROWS];
            // Every point takes its terms from a block while it is in the L1 cache, so the pass
            // reads memory in one stream that the prefetcher keeps ahead of the arithmetic (point
            // by point over a tile, the second point's work left the memory idle).
            let blocks = xt.chunks_exact(ROWS * d).zip(yt.chunks_exact(ROWS));
            for (b, (xb, yb)) in blocks.enumerate() {
                let live = (rows - b * ROWS).min(ROWS);
                let yb: &[f64; ROWS] = yb.try_into().expect("blocks hold ROWS rows");
                for (k, query) in self.queries.iter().enumerate() {
                    let z = dot_products::<FUSED>(xb, query.point);
                    let (lanes, products, resid) =
                        (&mut lanes[k], &mut products[k], &mut resid[k][b]);
                    match (query.need.value(), query.need.gradient()) {
                        (true, true) => terms::<true, true>(&z, yb, live, lanes, products, resid),
                        (true, false) => terms::<true, false>(&z, yb, live, lanes, products, resid),
                        _ => terms::<false, true>(&z, yb, live, lanes, products, resid),
                    }
                }
            }
            for (k, query) in self.queries.iter().enumerate() {
                if query.need.value() {
                    // At most TILE factors in [1, 2] per lane: far from overflow.
                    for (lane, product) in lanes[k].iter_mut().zip(&mut products[k]) {
                        *lane += ln_at_least_one(*product);
                        *product = 1.0;
                    }
                }
                if query.need.gradient() {
                    let blocks = rows.div_ceil(ROWS);
                    let sums = &mut sums[k * d * ROWS..][..d * ROWS];
                    gradient_terms::<FUSED>(xt, &resid[k][..blocks], sums);
                }
            }
        }
        let records = self.out.chunks_exact_mut(1 + d);
        for (k, (query, record)) in self.queries.iter().zip(records).enumerate() {
            if query.need.value() {
                record[0] = lane_sum(lanes[k]);
            }
            if query.need.gradient() {
                let lanes = sums[k * d * ROWS..][..d * ROWS].chunks_exact(ROWS);
                for (g, lane) in record[1..].iter_mut().zip(lanes) {
                    *g = lane_sum(lane.try_into().expect("ROWS lanes"));
                }
            }
        }
    }
}

/// The block's `ROWS` dot products `zᵣ = xᵣ·β`, column by column, even and odd columns into
/// separate sums added at the end: each lane's additions form two independent chains, so the
/// adder's latency (4 cycles) is hidden behind the other chain's work instead of setting the
/// pace of the whole loop.
///
/// The loop takes two pairs of columns per turn, in the same order as one pair at a time (the
/// same bits): the compiler unrolls it so only when it tunes for a processor with AVX2, not in
/// the baseline build whose pass `pulp` switches to AVX2 at run time, and one pair per turn left
/// fewer loads in flight (two chains' `U` in one pass: 1.20–1.30 ms against 0.95–1.02 ms).
#[inline(always)]
fn dot_products<const FUSED: bool>(xb: &[f64], beta: &[f64]) -> [f64; ROWS] {
    let mut even = [0.0f64; ROWS];
    let mut odd = [0.0f64; ROWS];
    let quads = xb.chunks_exact(4 * ROWS).zip(beta.chunks_exact(4));
    for (columns, b) in quads {
        for k in 0..2 {
            let (first, second) = columns[2 * k * ROWS..][..2 * ROWS].split_at(ROWS);
            for r in 0..ROWS {
                even[r] = multiply_add::<FUSED>(first[r], b[2 * k], even[r]);
                odd[r] = multiply_add::<FUSED>(second[r], b[2 * k + 1], odd[r]);
            }
        }
    }
    if beta.len() % 4 >= 2 {
        let at = beta.len() / 4 * 4;
        let (first, second) = xb[at * ROWS..][..2 * ROWS].split_at(ROWS);
        for r in 0..ROWS {
            even[r] = multiply_add::<FUSED>(first[r], beta[at], even[r]);
            odd[r] = multiply_add::<FUSED>(second[r], beta[at + 1], odd[r]);
        }
    }
    if beta.len() % 2 == 1 {
        let last = &xb[(beta.len() - 1) * ROWS..][..ROWS];
        let b = beta[beta.len() - 1];
        for (e, &x) in even.iter_mut().zip(last) {
            *e = multiply_add::<FUSED>(x, b, *e);
        }
    }
    let mut z = [0.0f64; ROWS];
    for r in 0..ROWS {
        z[r] = even[r] + odd[r];
    }
    z
}

/// One block's likelihood terms from its dot products `z`, with `a = e^−|z|` computed once.
///
/// If `VALUE`: each row's loss `log(1 + e^z) − y z = max(z, 0) − y z + log(1 + a)` goes to its lane
/// of `lanes` in two parts: `max(z, 0) − y z` is added, and `1 + a` multiplies the lane's running
/// product in `products`, whose logarithm the caller adds once per tile. One `ln` serves 16
/// rows where a `log1p` per row cost more than the exponential; the product's roundings change
/// the sum by about 10⁻¹⁶ per row in absolute terms, what a `log1p` per row would have cost.
/// If `GRADIENT`: each row's residual `σ(z) − y` goes to `resid` (the gradient's sweep reads it),
/// `σ(z) = 1/(1 + a)` for `z ≥ 0` and `a/(1 + a)` below (the core's `logistic`).
/// Rows from `live` on are padding (zero rows of `x` and `y`): factor 1 and residual 0.
#[inline(always)]
fn terms<const VALUE: bool, const GRADIENT: bool>(
    z: &[f64; ROWS],
    yb: &[f64; ROWS],
    live: usize,
    lanes: &mut [f64; ROWS],
    products: &mut [f64; ROWS],
    resid: &mut [f64; ROWS],
) {
    let mut factor = [0.0f64; ROWS];
    for r in 0..ROWS {
        let a = exp(-z[r].abs());
        if VALUE {
            lanes[r] += z[r].max(0.0) - yb[r] * z[r];
            factor[r] = 1.0 + a;
        }
        if GRADIENT {
            let numerator = if z[r] >= 0.0 { 1.0 } else { a };
            resid[r] = numerator / (1.0 + a) - yb[r];
        }
    }
    if live < ROWS {
        factor[live..].fill(1.0);
        resid[live..].fill(0.0);
    }
    if VALUE {
        for (p, f) in products.iter_mut().zip(factor) {
            *p *= f;
        }
    }
}

/// Adds the tile's `Σᵢ (σ(zᵢ) − yᵢ) xᵢ` lane-wise to `sums` (column `j`'s lanes at `j · ROWS`):
/// column by column, each lane's sum over the tile's blocks kept in registers and added to
/// `sums` once, so the inner loop loads `x` and the residuals and stores nothing.
#[inline(always)]
fn gradient_terms<const FUSED: bool>(xt: &[f64], resid: &[[f64; ROWS]], sums: &mut [f64]) {
    let d = sums.len() / ROWS;
    for (j, lane) in sums.chunks_exact_mut(ROWS).enumerate() {
        let mut acc = [0.0f64; ROWS];
        for (xb, r) in xt.chunks_exact(ROWS * d).zip(resid) {
            let column = &xb[j * ROWS..][..ROWS];
            for ((a, &x), &r) in acc.iter_mut().zip(column).zip(r) {
                *a = multiply_add::<FUSED>(x, r, *a);
            }
        }
        for (s, a) in lane.iter_mut().zip(acc) {
            *s += a;
        }
    }
}

/// Whether the processor multiplies and adds in one rounding: on x86-64 where `pulp` runs the
/// pass with AVX2 and FMA, on 64-bit ARM always.
pub(super) fn fused_multiply_add() -> bool {
    #[cfg(target_arch = "x86_64")]
    return pulp::x86::V3::try_new().is_some();
    #[cfg(target_arch = "aarch64")]
    return true;
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    return false;
}

/// `a·b + c`, in one rounding if `FUSED`.
#[inline(always)]
fn multiply_add<const FUSED: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FUSED { a.mul_add(b, c) } else { a * b + c }
}

/// The sum of `ROWS` lanes, halves added pairwise (the order two-, four- and eight-wide
/// registers fold in, so every build sums alike).
#[inline(always)]
fn lane_sum(mut lanes: [f64; ROWS]) -> f64 {
    let mut len = ROWS;
    while len > 1 {
        len /= 2;
        for i in 0..len {
            lanes[i] += lanes[i + len];
        }
    }
    lanes[0]
}
