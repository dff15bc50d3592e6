//! Sparse-grid HMC's interpolant: Smolyak's construction on nested Clenshaw–Curtis points with
//! the piecewise-linear hierarchical basis (precomputing paper, section 3.4 and Appendix B),
//! mapped from `[0, 1]ᵈ` onto the domain's box.
//!
//! # The one-dimensional hierarchy
//! Levels are counted from 0 here (the paper's `i` is `l + 1`). Level 0 is the point `½` with the
//! constant basis function 1; level 1 adds `0` and `1`, level `l ≥ 2` adds the odd multiples of
//! `2⁻ˡ`. Together levels `0..=l` are the paper's `m = 2ˡ + 1` equispaced points (1 point for
//! `l = 0`). A point new at level `l ≥ 1` carries the hat `max(0, 1 − 2ˡ |x − xⱼ|)`, which
//! vanishes at every point of lower levels: that is what makes the basis hierarchical.
//!
//! # Subspaces and surpluses
//! A multi-index `l = (l₁, …, l_d)` names the subspace of tensor products of level-`lₖ` hats,
//! `Πₖ n(lₖ)` of them (`n(0) = 1`, `n(1) = 2`, `n(l) = 2^(l−1)`). An interpolant is a
//! downward-closed set of subspaces with one coefficient, the hierarchical surplus
//! `w = f(x) − Ã(x)`, per point: the function's value minus what the coarser subspaces already
//! predict there. The regular grid of level `k` takes every `|l| ≤ k`, which is Smolyak's
//! `A_{k+d,d}` (`1, 5, 13, 29, 65, 145` points for `d = 2`, `k = 0..5`). Smooth functions have
//! surpluses shrinking about fourfold per level, so the surpluses of the finest subspaces
//! estimate the interpolation error ([`SparseGrid::error_estimate`]) and steer adaptive
//! refinement ([`SparseGrid::adaptive`], Gerstner and Griebel's dimension-adaptive algorithm).
//!
//! # Fast evaluation
//! Within one level the hats of different points have disjoint interiors, so at any `x` each
//! subspace has exactly one basis function that can be non-zero, found by a floor. Evaluation
//! therefore tabulates, per coordinate and level, that function's index, value and slope
//! (`d × (L + 1)` hats), then makes one pass over the subspaces: a mixed-radix index into the
//! subspace's dense block of surpluses and a product of `d` table entries. The cost is
//! `O(S d)` for `S` subspaces, with no hashing, no allocation (the scratch lives per thread) and
//! the subspaces' levels stored contiguously. The gradient takes the same pass with prefix and
//! suffix products, `O(S d)` as well.
//!
//! Measured on the project's 2-core machine while others were building (release, best of 15
//! runs over 1000 random points): value and gradient together take about 1.0 µs for `d = 3`,
//! level 6 (1073 points, 84 subspaces) and 3.8 µs for `d = 5`, level 5 (2433 points, 252
//! subspaces); the value alone half that. Walking lexicographically sorted subspaces as a trie,
//! recomputing only what follows the common prefix, does a third of the multiplications at
//! `d = 5` but measured no faster: its inner loops vary in length from one subspace to the next
//! and mispredict, while the fixed-length loops here overlap well.
//!
//! # Gradient at kinks
//! The interpolant is piecewise multilinear: it has kinks where a coordinate crosses a multiple
//! of the finest spacing `2^(−L)`. [`SparseGrid::try_value_and_gradient`] returns, in every coordinate, the
//! one-sided derivative *from above* (the slope on `[x, x + δ)`), except on the box's upper face,
//! where only the slope from below exists. Any fixed choice keeps the leapfrog deterministic and
//! so reversible; this one is what the floor in the lookup gives.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use shmc_core::Potential;

use super::{Domain, Precomputation, SPARSE_GRID_KIND};
use crate::memory::check as check_memory;
use crate::surrogates::exact_floats;
use crate::surrogates::file::{self, SurrogateFile};
use crate::surrogates::{Surrogate, SurrogateMeta};
use crate::{Error, Result};

/// The finest level any coordinate may reach: spacing `2⁻³⁰` of the box's width, far below any
/// useful resolution, and small enough that every within-level index fits comfortably.
pub const MAX_LEVEL: u8 = 30;

/// The number of points new at level `l` in one dimension.
fn level_count(l: u8) -> usize {
    match l {
        0 => 1,
        1 => 2,
        _ => 1 << (l - 1),
    }
}

/// The coordinate in `[0, 1]` of point `j` new at level `l`.
fn node(l: u8, j: usize) -> f64 {
    match l {
        0 => 0.5,
        1 => j as f64,
        _ => (2 * j + 1) as f64 / (1u64 << l) as f64,
    }
}

/// The one basis function of a level that can be non-zero at a coordinate: its index within the
/// level, the level's point count, its value and its slope there.
#[derive(Clone, Copy, Debug, Default)]
struct Hat {
    index: usize,
    count: usize,
    value: f64,
    slope: f64,
}

/// The level-`l` hat active at `u ∈ [0, 1]`, slope from above (see the module docs).
fn hat(u: f64, l: u8) -> Hat {
    match l {
        0 => Hat {
            index: 0,
            count: 1,
            value: 1.0,
            slope: 0.0,
        },
        1 => {
            // Hats at 0 and 1 of half-width ½; ½ itself goes to the upper one (value 0).
            let t = 2.0 * u;
            if t < 1.0 {
                Hat {
                    index: 0,
                    count: 2,
                    value: 1.0 - t,
                    slope: -2.0,
                }
            } else {
                Hat {
                    index: 1,
                    count: 2,
                    value: t - 1.0,
                    slope: 2.0,
                }
            }
        }
        _ => {
            // Cells of width 2⁻ˡ; the point 2j+1 (in units of 2⁻ˡ) is the upper end of cell 2j
            // and the lower end of cell 2j+1. Scaling by a power of two is exact.
            let scale = (1u64 << l) as f64;
            let t = u * scale;
            let cells = 1usize << l;
            let c = (t as usize).min(cells - 1);
            let offset = t - c as f64;
            if c.is_multiple_of(2) {
                Hat {
                    index: c / 2,
                    count: cells / 2,
                    value: offset,
                    slope: scale,
                }
            } else {
                Hat {
                    index: c / 2,
                    count: cells / 2,
                    value: 1.0 - offset,
                    slope: -scale,
                }
            }
        }
    }
}

/// Per-evaluation working memory: the point in unit coordinates, the hat table and the prefix
/// products. Kept per thread, so an evaluation allocates nothing once warm.
#[derive(Default)]
struct Scratch {
    unit: Vec<f64>,
    table: Vec<Hat>,
    prefix: Vec<f64>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// A set of subspaces and their surpluses, borrowed: the whole grid, or during construction the
/// subspaces present before the batch being added.
#[derive(Clone, Copy)]
struct Hierarchy<'a> {
    dim: usize,
    /// `dim` levels per subspace.
    levels: &'a [u8],
    /// Where each subspace's block of surpluses starts.
    starts: &'a [usize],
    surpluses: &'a [f64],
    /// The highest level of any coordinate of any subspace.
    top: u8,
}

impl Hierarchy<'_> {
    /// Fills `scratch.table` for the point in `scratch.unit`: row `k` holds the active hat of
    /// each level `0..=top` in coordinate `k`.
    fn tabulate(&self, scratch: &mut Scratch) {
        let Scratch { unit, table, .. } = scratch;
        table.clear();
        for &u in unit.iter() {
            table.extend((0..=self.top).map(|l| hat(u, l)));
        }
    }

    /// The interpolant at `scratch.unit`.
    fn value(&self, scratch: &mut Scratch) -> f64 {
        self.tabulate(scratch);
        let (d, width, table) = (self.dim, self.top as usize + 1, &scratch.table);
        let mut total = 0.0;
        for (s, levels) in self.levels.chunks_exact(d).enumerate() {
            let mut index = 0;
            let mut product = 1.0;
            for (row, &l) in table.chunks_exact(width).zip(levels) {
                let h = &row[l as usize];
                index = index * h.count + h.index;
                product *= h.value;
            }
            total += self.surpluses[self.starts[s] + index] * product;
        }
        total
    }

    /// The interpolant at `scratch.unit`, its gradient in unit coordinates written to `grad`.
    fn value_and_gradient(&self, scratch: &mut Scratch, grad: &mut [f64]) -> f64 {
        self.tabulate(scratch);
        let (d, width) = (self.dim, self.top as usize + 1);
        let Scratch { table, prefix, .. } = scratch;
        prefix.resize(d, 0.0);
        grad.fill(0.0);
        let mut total = 0.0;
        for (s, levels) in self.levels.chunks_exact(d).enumerate() {
            let mut index = 0;
            let mut product = 1.0;
            for ((row, &l), p) in table.chunks_exact(width).zip(levels).zip(prefix.iter_mut()) {
                let h = &row[l as usize];
                index = index * h.count + h.index;
                *p = product;
                product *= h.value;
            }
            let w = self.surpluses[self.starts[s] + index];
            total += w * product;
            // ∂/∂uₖ of w Πₘ φₘ is w (Π_{m<k} φₘ) φₖ' (Π_{m>k} φₘ): the prefix times a running
            // suffix, right also where some φₘ is zero (a point on a kink), where dividing the
            // product by φₖ would not be.
            let mut suffix = w;
            for k in (0..d).rev() {
                let h = &table[k * width + levels[k] as usize];
                grad[k] += prefix[k] * suffix * h.slope;
                suffix *= h.value;
            }
        }
        total
    }
}

/// How a sparse grid was built, kept with it (and in its file) so its error estimate can be
/// read in context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum Construction {
    /// Every subspace with `|l| ≤ level` (Smolyak's `A_{level+d,d}`).
    Regular {
        /// The level `k`.
        level: u8,
    },
    /// Dimension-adaptive refinement ([`SparseGrid::adaptive`]).
    Adaptive {
        /// The surplus tolerance asked for.
        #[serde(with = "exact_floats")]
        tolerance: f64,
        /// The point budget.
        max_points: usize,
        /// Why the refinement stopped.
        stop: AdaptiveStop,
    },
}

/// Why adaptive refinement stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdaptiveStop {
    /// The largest surplus of the active set fell below the tolerance.
    Tolerance,
    /// Refining the subspace with the largest surplus would have exceeded the point budget.
    PointBudget,
    /// Every active subspace is at the level cap in every direction it could grow.
    LevelCap,
}

/// Options of [`SparseGrid::adaptive`].
#[derive(Clone, Debug, PartialEq)]
pub struct AdaptiveOptions {
    /// Stop when the largest absolute surplus among the active (unrefined) subspaces is below
    /// this (default `1e-2`: an error in `U` of a hundredth of a nat is far below the O(1)
    /// energy errors that decide acceptance). `0` refines until a budget or cap ends it.
    pub tolerance: f64,
    /// The most points the grid may hold, i.e. the most exact evaluations (default 10 000).
    pub max_points: usize,
    /// The finest level any coordinate may reach (default and maximum [`MAX_LEVEL`]).
    pub max_level: u8,
}

impl Default for AdaptiveOptions {
    fn default() -> Self {
        Self {
            tolerance: 1e-2,
            max_points: 10_000,
            max_level: MAX_LEVEL,
        }
    }
}

impl AdaptiveOptions {
    /// Errors for a negative or non-finite tolerance, an empty point budget and a level cap
    /// above [`MAX_LEVEL`].
    fn validate(&self) -> Result<()> {
        if !(self.tolerance.is_finite() && self.tolerance >= 0.0) {
            return Err(Error::invalid(format!(
                "an adaptive sparse grid's tolerance must be finite and ≥ 0, got {}",
                self.tolerance
            )));
        }
        if self.max_points == 0 {
            return Err(Error::invalid(
                "an adaptive sparse grid needs a point budget ≥ 1",
            ));
        }
        if self.max_level > MAX_LEVEL {
            return Err(Error::invalid(format!(
                "a sparse grid's level cap must be at most {MAX_LEVEL}, got {}",
                self.max_level
            )));
        }
        Ok(())
    }
}

/// A hierarchical sparse-grid interpolant `Ũ` of a potential over a box (see the
/// [module docs](self)).
#[derive(Clone, Debug)]
pub struct SparseGrid {
    domain: Domain,
    /// `1 / widthₖ`: box coordinates to unit coordinates.
    inverse_widths: Vec<f64>,
    /// `d` levels per subspace, in the order they were added (coarse first).
    levels: Vec<u8>,
    /// Where each subspace's block of surpluses starts; the blocks follow the subspaces' order.
    starts: Vec<usize>,
    /// One surplus per point, in blocks; within a subspace's block the point with per-coordinate
    /// indices `(j₁, …, j_d)` is at the mixed-radix index `(…(j₁ n₂ + j₂)…) n_d + j_d`.
    surpluses: Vec<f64>,
    /// Whether each subspace is on the frontier (not refined): its surpluses estimate the error.
    active: Vec<bool>,
    /// The highest level present.
    top: u8,
    construction: Construction,
    precomputation: Precomputation,
}

/// Bytes a subspace adds besides its surpluses: its levels, its start and its active flag.
fn subspace_bytes(d: usize) -> u128 {
    d as u128 + 8 + 1
}

/// The number of points in the subspace with these levels.
fn block_len(levels: &[u8]) -> usize {
    levels.iter().map(|&l| level_count(l)).product()
}

/// `Σ_{|l| ≤ k} Πᵢ weight(lᵢ)` over `l ∈ {0, …, k}ᵈ`, by dynamic programming over coordinates;
/// `None` on overflow.
fn regular_count(d: usize, k: u8, weight: impl Fn(u8) -> u128) -> Option<u128> {
    let k = k as usize;
    // ways[s]: weighted count of level multi-indices over the coordinates so far with sum s.
    let mut ways = vec![0u128; k + 1];
    ways[0] = 1;
    for _ in 0..d {
        let mut next = vec![0u128; k + 1];
        for (s, slot) in next.iter_mut().enumerate() {
            for l in 0..=s {
                *slot = slot.checked_add(weight(l as u8).checked_mul(ways[s - l])?)?;
            }
        }
        ways = next;
    }
    ways.iter().try_fold(0u128, |a, &b| a.checked_add(b))
}

/// Every `l ∈ ℕᵈ` with `|l| = sum`, in lexicographic order.
fn multi_indices(d: usize, sum: u8) -> Vec<Vec<u8>> {
    fn fill(prefix: &mut Vec<u8>, d: usize, left: u8, out: &mut Vec<Vec<u8>>) {
        if prefix.len() + 1 == d {
            prefix.push(left);
            out.push(prefix.clone());
            prefix.pop();
            return;
        }
        for l in 0..=left {
            prefix.push(l);
            fill(prefix, d, left - l, out);
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    fill(&mut Vec::with_capacity(d), d, sum, &mut out);
    out
}

/// A grid under construction, with the potential that fills it.
struct Builder<'p, P: ?Sized> {
    potential: &'p P,
    grid: SparseGrid,
    start: Instant,
}

impl<'p, P: Potential + Sync + ?Sized> Builder<'p, P> {
    fn new(
        potential: &'p P,
        domain: Domain,
        construction: Construction,
        start: Instant,
    ) -> Result<Self> {
        let d = domain.dim();
        if potential.dim() != d {
            return Err(Error::invalid(format!(
                "the domain has {d} coordinates but the potential {}",
                potential.dim()
            )));
        }
        Ok(Self {
            potential,
            grid: SparseGrid {
                inverse_widths: (0..d).map(|k| 1.0 / domain.width(k)).collect(),
                domain,
                levels: Vec::new(),
                starts: Vec::new(),
                surpluses: Vec::new(),
                active: Vec::new(),
                top: 0,
                construction,
                precomputation: Precomputation {
                    evaluations: 0,
                    seconds: 0.0,
                },
            },
            start,
        })
    }

    /// Appends subspaces none of which lies below another, whose own lower neighbours are all
    /// present, and fills their surpluses: the potential at each new point (in parallel) minus
    /// the interpolant of the subspaces already there. Errors, naming the point, where the
    /// potential is not finite.
    fn add(&mut self, batch: &[Vec<u8>]) -> Result<()> {
        let grid = &mut self.grid;
        let d = grid.domain.dim();
        let first = grid.active.len();
        let old_top = grid.top;
        let old_points = grid.surpluses.len();
        let mut batch_starts = Vec::with_capacity(batch.len() + 1);
        let mut end = old_points;
        for levels in batch {
            grid.levels.extend_from_slice(levels);
            grid.starts.push(end);
            batch_starts.push(end);
            end += block_len(levels);
            grid.active.push(true);
            grid.top = grid.top.max(levels.iter().copied().max().unwrap_or(0));
        }
        batch_starts.push(end);
        grid.surpluses.resize(end, 0.0);
        let (old, new) = grid.surpluses.split_at_mut(old_points);
        let before = Hierarchy {
            dim: d,
            levels: &grid.levels[..first * d],
            starts: &grid.starts[..first],
            surpluses: old,
            top: old_top,
        };
        let new_levels = &grid.levels[first * d..];
        let (domain, potential, batch_starts) = (&grid.domain, self.potential, &batch_starts);
        new.par_iter_mut()
            .enumerate()
            .try_for_each_init(
                || (Scratch::default(), vec![0.0; d]),
                |(scratch, q), (i, w)| {
                    let point = old_points + i;
                    let s = batch_starts.partition_point(|&start| start <= point) - 1;
                    let levels = &new_levels[s * d..(s + 1) * d];
                    let mut flat = point - batch_starts[s];
                    scratch.unit.resize(d, 0.0);
                    for k in (0..d).rev() {
                        let n = level_count(levels[k]);
                        let u = node(levels[k], flat % n);
                        flat /= n;
                        scratch.unit[k] = u;
                        q[k] = if u == 1.0 {
                            domain.upper()[k]
                        } else {
                            domain.lower()[k] + u * domain.width(k)
                        };
                    }
                    let f = potential.value(q);
                    if !f.is_finite() {
                        return Err((q.clone(), f));
                    }
                    *w = f - before.value(scratch);
                    Ok(())
                },
            )
            .map_err(|(q, f)| {
                Error::invalid(format!(
                    "U is not finite at the sparse-grid point {q:?} (U = {f}); the domain must \
                     lie where the model is finite"
                ))
            })?;
        grid.precomputation.evaluations += (end - old_points) as u64;
        Ok(())
    }

    /// The finished grid, with the construction's wall time.
    fn finish(self) -> SparseGrid {
        let mut grid = self.grid;
        grid.precomputation.seconds = self.start.elapsed().as_secs_f64();
        grid
    }
}

impl<P: Potential + Sync + ?Sized> Builder<'_, P> {
    /// The dimension-adaptive refinement of [`SparseGrid::adaptive`] from the single subspace
    /// `l = 0`, until one of its stopping rules ends it; returns which.
    fn refine(&mut self, options: &AdaptiveOptions) -> Result<AdaptiveStop> {
        let mut frontier = Frontier::new(&self.grid);
        loop {
            let grid = &self.grid;
            let Some(best) = frontier.largest(grid) else {
                return Ok(AdaptiveStop::LevelCap);
            };
            if frontier.indicator[best] < options.tolerance {
                return Ok(AdaptiveStop::Tolerance);
            }
            let Some(candidates) = frontier.forward_neighbours(grid, best, options.max_level)
            else {
                // Stays on the frontier (its surpluses still measure the error), but cannot grow.
                frontier.growable[best] = false;
                continue;
            };
            let new_points: usize = candidates.iter().map(|l| block_len(l)).sum();
            if grid.surpluses.len() + new_points > options.max_points {
                return Ok(AdaptiveStop::PointBudget);
            }
            let first = grid.active.len();
            self.grid.active[best] = false;
            self.add(&candidates)?;
            frontier.extend(&self.grid, first, candidates);
        }
    }
}

/// What the adaptive refinement knows of every subspace added so far, beside the grid's own
/// levels and active flags.
struct Frontier {
    /// The subspaces by their levels.
    index: HashMap<Vec<u8>, usize>,
    /// Largest |surplus| per subspace.
    indicator: Vec<f64>,
    /// Whether each subspace can still grow in some direction.
    growable: Vec<bool>,
}

impl Frontier {
    /// The frontier of a grid holding only the subspace `l = 0`.
    fn new(grid: &SparseGrid) -> Self {
        let d = grid.domain.dim();
        Self {
            index: HashMap::from([(vec![0; d], 0)]),
            indicator: vec![grid.surpluses[0].abs()],
            growable: vec![true],
        }
    }

    /// The active subspace that can grow with the largest surplus (the last of equals), if any.
    fn largest(&self, grid: &SparseGrid) -> Option<usize> {
        (0..grid.active.len())
            .filter(|&s| grid.active[s] && self.growable[s])
            .max_by(|&a, &b| self.indicator[a].total_cmp(&self.indicator[b]))
    }

    /// The forward neighbours `l + eₖ` of subspace `best` to add when it retires: those below
    /// `max_level` not yet added whose lower neighbours are all retired (or `best` itself).
    /// `None` when `best` is at `max_level` in every coordinate.
    fn forward_neighbours(
        &self,
        grid: &SparseGrid,
        best: usize,
        max_level: u8,
    ) -> Option<Vec<Vec<u8>>> {
        let d = grid.domain.dim();
        let levels = &grid.levels[best * d..(best + 1) * d];
        let retired = |l: &[u8]| {
            self.index
                .get(l)
                .is_some_and(|&s| !grid.active[s] || s == best)
        };
        let mut candidates = Vec::new();
        let mut capped = true;
        for k in 0..d {
            if levels[k] >= max_level {
                continue;
            }
            capped = false;
            let mut next = levels.to_vec();
            next[k] += 1;
            let admissible = (0..d).filter(|&m| next[m] > 0).all(|m| {
                let mut below = next.clone();
                below[m] -= 1;
                retired(&below)
            });
            if admissible && !self.index.contains_key(&next) {
                candidates.push(next);
            }
        }
        (!capped).then_some(candidates)
    }

    /// Takes in the subspaces `candidates`, just added to `grid` as subspaces `first, …`.
    fn extend(&mut self, grid: &SparseGrid, first: usize, candidates: Vec<Vec<u8>>) {
        for (offset, levels) in candidates.into_iter().enumerate() {
            let s = first + offset;
            let block = &grid.surpluses[grid.starts[s]..grid.starts[s] + block_len(&levels)];
            self.indicator
                .push(block.iter().fold(0.0_f64, |m, w| m.max(w.abs())));
            self.growable.push(true);
            self.index.insert(levels, s);
        }
    }
}

impl SparseGrid {
    /// The number of points of the regular grid of `level` over `d` coordinates (`None` above
    /// `2¹²⁸`), counted without building anything: for choosing a level that fits.
    pub fn regular_points(d: usize, level: u8) -> Option<u128> {
        regular_count(d, level, |l| level_count(l) as u128)
    }

    /// The regular sparse grid of `level` (every subspace with `|l| ≤ level`, Smolyak's
    /// `A_{level+d,d}`) interpolating `potential` over `domain`, the potential evaluated at the
    /// new points of each level in parallel.
    ///
    /// The points and subspaces are counted first; when the grid's storage (8 bytes per point,
    /// `d + 9` per subspace) is above `memory_limit` bytes it is refused before anything is
    /// allocated or evaluated, with the bytes it would need in the message. Errors also for a
    /// level above [`MAX_LEVEL`], a domain whose dimension is not the potential's, and a
    /// non-finite `U` at a grid point.
    pub fn regular<P: Potential + Sync + ?Sized>(
        potential: &P,
        domain: Domain,
        level: u8,
        memory_limit: u64,
    ) -> Result<Self> {
        let start = Instant::now();
        if level > MAX_LEVEL {
            return Err(Error::invalid(format!(
                "a sparse grid's level must be at most {MAX_LEVEL}, got {level}"
            )));
        }
        let d = domain.dim();
        let points = Self::regular_points(d, level);
        let subspaces = regular_count(d, level, |_| 1);
        let bytes = points.zip(subspaces).and_then(|(p, s)| {
            p.checked_mul(8)?
                .checked_add(s.checked_mul(subspace_bytes(d))?)
        });
        let what = format!(
            "a level-{level} sparse grid over {d} coordinates ({} points)",
            points.map_or_else(|| "more than 2^128".to_string(), |p| p.to_string())
        );
        check_memory(&what, "level", bytes, memory_limit)?;
        let mut builder = Builder::new(potential, domain, Construction::Regular { level }, start)?;
        for sum in 0..=level {
            builder.add(&multi_indices(d, sum))?;
        }
        // The frontier of a regular grid is its finest layer, |l| = level.
        let grid = &mut builder.grid;
        for (active, levels) in grid.active.iter_mut().zip(grid.levels.chunks_exact(d)) {
            *active = levels.iter().map(|&l| l as usize).sum::<usize>() == level as usize;
        }
        Ok(builder.finish())
    }

    /// A sparse grid refined where `potential` needs it (Gerstner and Griebel's
    /// dimension-adaptive algorithm on subspace index sets): starting from the single point
    /// `l = 0`, repeatedly take the active subspace with the largest absolute surplus, retire it,
    /// and add each forward neighbour `l + eₖ` whose lower neighbours are all retired, until the
    /// largest active surplus is below [`AdaptiveOptions::tolerance`], the next refinement would
    /// pass [`AdaptiveOptions::max_points`], or nothing below [`AdaptiveOptions::max_level`] is
    /// left. A coordinate that barely matters has small surpluses and stays coarse, which is the
    /// whole point against a regular grid. See [`Construction::Adaptive`] for why it stopped.
    ///
    /// The point budget bounds the storage: when `max_points` points and as many subspaces
    /// (plus the construction's index of them, `d + 64` bytes each) would not fit in
    /// `memory_limit` bytes, the grid is refused before anything is allocated or evaluated.
    pub fn adaptive<P: Potential + Sync + ?Sized>(
        potential: &P,
        domain: Domain,
        options: &AdaptiveOptions,
        memory_limit: u64,
    ) -> Result<Self> {
        let start = Instant::now();
        options.validate()?;
        let d = domain.dim();
        let per_point = 8 + subspace_bytes(d) + d as u128 + 64;
        let bytes = (options.max_points as u128).checked_mul(per_point);
        let what = format!(
            "an adaptive sparse grid of up to {} points over {d} coordinates",
            options.max_points
        );
        check_memory(&what, "max_points", bytes, memory_limit)?;

        let construction = Construction::Adaptive {
            tolerance: options.tolerance,
            max_points: options.max_points,
            stop: AdaptiveStop::Tolerance,
        };
        let mut builder = Builder::new(potential, domain, construction, start)?;
        builder.add(&[vec![0; d]])?;
        let stop = builder.refine(options)?;
        if let Construction::Adaptive { stop: slot, .. } = &mut builder.grid.construction {
            *slot = stop;
        }
        Ok(builder.finish())
    }

    /// The number of points (= surpluses = exact evaluations made).
    pub fn len(&self) -> usize {
        self.surpluses.len()
    }

    /// Whether the grid has no points (never true for a built or loaded grid; here for the
    /// `len`/`is_empty` pair).
    pub fn is_empty(&self) -> bool {
        self.surpluses.is_empty()
    }

    /// The number of subspaces (level multi-indices): what one evaluation walks over.
    pub fn subspaces(&self) -> usize {
        self.active.len()
    }

    /// The levels of subspace `s` and its block of surpluses.
    fn block(&self, s: usize) -> (&[u8], &[f64]) {
        let d = self.domain.dim();
        let levels = &self.levels[s * d..(s + 1) * d];
        let start = self.starts[s];
        (levels, &self.surpluses[start..start + block_len(levels)])
    }

    /// The largest absolute surplus in each frontier subspace (the finest layer of a regular
    /// grid, the active set of an adaptive one).
    fn frontier_maxima(&self) -> impl Iterator<Item = f64> + '_ {
        (0..self.subspaces())
            .filter(|&s| self.active[s])
            .map(|s| self.block(s).1.iter().fold(0.0_f64, |m, w| m.max(w.abs())))
    }

    /// The points per level sum `|l|` (entry `s` counts the points of subspaces with
    /// `|l| = s`), so a caller can see where the budget went.
    pub fn points_per_level(&self) -> Vec<usize> {
        let mut counts = Vec::new();
        for s in 0..self.subspaces() {
            let (levels, block) = self.block(s);
            let sum: usize = levels.iter().map(|&l| l as usize).sum();
            if counts.len() <= sum {
                counts.resize(sum + 1, 0);
            }
            counts[sum] += block.len();
        }
        counts
    }

    /// The largest absolute surplus of the frontier subspaces: what adaptive refinement
    /// compares with its tolerance. It is the error, at one point, of the grid without that
    /// subspace, so it says how much the last refinement changed, not the remaining error
    /// (which sums many such terms; see [`SparseGrid::error_estimate`]).
    pub fn largest_surplus(&self) -> f64 {
        self.frontier_maxima().fold(0.0, f64::max)
    }

    /// An estimate of `‖U − Ũ‖∞` over the box: the sum, over the frontier subspaces, of each
    /// one's largest absolute surplus.
    ///
    /// At any point each subspace has one non-zero hat (at most 1), so this sum bounds how much
    /// the frontier changed the interpolant anywhere: `‖Δ‖∞`, the last refinement's size. If
    /// refinements shrink at least twofold from one to the next, the remaining error is at most
    /// `‖Δ‖∞ (½ + ¼ + …) ≤ ‖Δ‖∞`; for a smooth `U` they shrink about fourfold (up to log factors),
    /// and the estimate is then pessimistic, by about tenfold for a Gaussian bump in three
    /// dimensions. It is not a bound: a feature the grid has not resolved at all (a narrow peak
    /// between points) goes unseen, as does any error a coarse grid's surpluses hide.
    pub fn error_estimate(&self) -> f64 {
        self.frontier_maxima().sum()
    }

    /// `2 ×` [`SparseGrid::error_estimate`]: the Kullback–Leibler bound `KL(P‖Q) ≤ 2‖U − Û‖∞`
    /// of the paper's Theorem 5.1 for the approximate "complete" variant, which also accepts
    /// with `Û` (the value of [`crate::surrogates::Fallback`]) and so samples `Q ∝ exp(−Û)`. Since `Û = U` outside
    /// the box, the supremum over the box is the supremum over `ℝᵈ`. A label, carrying the
    /// estimate's caveats; the exact sampler needs none.
    pub fn kl_bound_estimate(&self) -> f64 {
        2.0 * self.error_estimate()
    }

    /// How the grid was built (and for an adaptive grid, why it stopped).
    pub fn construction(&self) -> &Construction {
        &self.construction
    }

    /// What filling the grid cost.
    pub fn precomputation(&self) -> Precomputation {
        self.precomputation
    }

    /// The bytes the grid's tables take: 8 per point and `d + 9` per subspace.
    pub fn bytes(&self) -> usize {
        8 * self.surpluses.len() + self.levels.len() + 8 * self.starts.len() + self.active.len()
    }

    fn hierarchy(&self) -> Hierarchy<'_> {
        Hierarchy {
            dim: self.domain.dim(),
            levels: &self.levels,
            starts: &self.starts,
            surpluses: &self.surpluses,
            top: self.top,
        }
    }

    /// Runs `f` with the thread's scratch holding `q` in unit coordinates, or returns `None`
    /// when `q` is outside the box.
    fn at<T>(&self, q: &[f64], f: impl FnOnce(&mut Scratch) -> T) -> Option<T> {
        if !self.domain.contains(q) {
            return None;
        }
        SCRATCH.with(|cell| {
            let mut scratch = cell.borrow_mut();
            let lower = self.domain.lower();
            scratch.unit.clear();
            scratch.unit.extend(
                q.iter()
                    .zip(lower)
                    .zip(&self.inverse_widths)
                    .map(|((x, lo), iw)| ((x - lo) * iw).clamp(0.0, 1.0)),
            );
            Some(f(&mut scratch))
        })
    }

    /// Reads the sparse grid of a surrogate file of kind [`SPARSE_GRID_KIND`] (for
    /// [`crate::surrogates::kinds::load`]). Inconsistent subspaces (sizes, levels above
    /// [`MAX_LEVEL`], a set that is not downward closed) are an error naming the file.
    pub fn read(file: &SurrogateFile) -> Result<(Self, SurrogateMeta)> {
        file.read()
    }

    /// The box the grid covers.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// `Ũ(q)` for `q` in the box, `None` outside.
    pub fn try_value(&self, q: &[f64]) -> Option<f64> {
        let hierarchy = self.hierarchy();
        self.at(q, |scratch| hierarchy.value(scratch))
    }

    /// Writes `∇Ũ(q)` (the one-sided gradient of the module docs: from above at kinks) into
    /// `grad` and returns `Ũ(q)` for `q` in the box; `None` outside, with `grad` untouched.
    pub fn try_value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> Option<f64> {
        let hierarchy = self.hierarchy();
        let value = self.at(q, |scratch| hierarchy.value_and_gradient(scratch, grad))?;
        for (g, iw) in grad.iter_mut().zip(&self.inverse_widths) {
            *g *= iw;
        }
        Some(value)
    }
}

/// The interpolant inside its box; NaN outside, where it knows nothing (a sampler proposes with
/// [`crate::surrogates::Fallback`], which never asks it there).
impl Potential for SparseGrid {
    fn dim(&self) -> usize {
        self.domain.dim()
    }

    fn value(&self, q: &[f64]) -> f64 {
        self.try_value(q).unwrap_or(f64::NAN)
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        self.try_value_and_gradient(q, grad).unwrap_or_else(|| {
            grad.fill(f64::NAN);
            f64::NAN
        })
    }
}

impl Surrogate for SparseGrid {
    fn contains(&self, q: &[f64]) -> bool {
        self.domain.contains(q)
    }

    /// [`SparseGrid::error_estimate`], from the frontier's surpluses.
    fn sup_error_estimate(&self) -> Option<f64> {
        Some(self.error_estimate())
    }

    fn save(&self, path: &Path, meta: &SurrogateMeta) -> Result<()> {
        file::write(path, SPARSE_GRID_KIND, meta, self)
    }
}

/// A sparse grid as written to a file (borrowed, so saving copies nothing). The subspace
/// starts, the top level and the unit-coordinate map are derived again on loading.
#[derive(Serialize)]
struct SparseGridRef<'a> {
    domain: &'a Domain,
    levels: &'a [u8],
    #[serde(with = "exact_floats::vec")]
    surpluses: &'a [f64],
    active: &'a [bool],
    construction: &'a Construction,
    precomputation: Precomputation,
}

/// A sparse grid as read from a file, checked by `TryFrom` before it becomes a [`SparseGrid`].
#[derive(Deserialize)]
struct SparseGridRecord {
    domain: Domain,
    levels: Vec<u8>,
    #[serde(with = "exact_floats::vec")]
    surpluses: Vec<f64>,
    active: Vec<bool>,
    construction: Construction,
    precomputation: Precomputation,
}

impl Serialize for SparseGrid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        SparseGridRef {
            domain: &self.domain,
            levels: &self.levels,
            surpluses: &self.surpluses,
            active: &self.active,
            construction: &self.construction,
            precomputation: self.precomputation,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for SparseGrid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let record = SparseGridRecord::deserialize(d)?;
        Self::try_from(record).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<SparseGridRecord> for SparseGrid {
    type Error = Error;

    fn try_from(record: SparseGridRecord) -> Result<Self> {
        let d = record.domain.dim();
        if record.levels.is_empty() || !record.levels.len().is_multiple_of(d) {
            return Err(Error::invalid(format!(
                "a sparse grid over {d} coordinates needs a positive multiple of {d} levels, got \
                 {}",
                record.levels.len()
            )));
        }
        let count = record.levels.len() / d;
        if record.active.len() != count {
            return Err(Error::invalid(format!(
                "a sparse grid of {count} subspaces needs {count} active flags, got {}",
                record.active.len()
            )));
        }
        let mut starts = Vec::with_capacity(count);
        let mut points = 0usize;
        let mut seen = HashSet::with_capacity(count);
        for levels in record.levels.chunks_exact(d) {
            if let Some(&l) = levels.iter().find(|&&l| l > MAX_LEVEL) {
                return Err(Error::invalid(format!(
                    "a sparse-grid subspace has level {l}, above the maximum {MAX_LEVEL}"
                )));
            }
            if !seen.insert(levels) {
                return Err(Error::invalid(format!(
                    "the sparse-grid subspace {levels:?} appears twice"
                )));
            }
            starts.push(points);
            points = levels
                .iter()
                .try_fold(1usize, |n, &l| n.checked_mul(level_count(l)))
                .and_then(|n| points.checked_add(n))
                .ok_or_else(|| Error::invalid("a sparse grid's point count overflows"))?;
        }
        for levels in record.levels.chunks_exact(d) {
            for m in (0..d).filter(|&m| levels[m] > 0) {
                let mut below = levels.to_vec();
                below[m] -= 1;
                if !seen.contains(below.as_slice()) {
                    return Err(Error::invalid(format!(
                        "the sparse-grid subspace {levels:?} lacks its lower neighbour {below:?}"
                    )));
                }
            }
        }
        if record.surpluses.len() != points {
            return Err(Error::invalid(format!(
                "a sparse grid with these subspaces has {points} points, but the file has {} \
                 surpluses",
                record.surpluses.len()
            )));
        }
        super::all_finite("the sparse grid's surpluses:", &record.surpluses)?;
        let domain = record.domain;
        Ok(Self {
            inverse_widths: (0..d).map(|k| 1.0 / domain.width(k)).collect(),
            domain,
            top: record.levels.iter().copied().max().unwrap_or(0),
            levels: record.levels,
            starts,
            surpluses: record.surpluses,
            active: record.active,
            construction: record.construction,
            precomputation: record.precomputation,
        })
    }
}
