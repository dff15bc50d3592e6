//! Naive grid HMC's precomputed force map (precomputing paper, section 3.3, Algorithm 2).
//!
//! The box is cut into a uniform grid of cells; `U` and `∇U` are evaluated once at every cell
//! centre, and inside a cell both are read off as constants. That makes the leapfrog's force
//! piecewise constant, which the paper shows still points the right way for a grid spacing near
//! the step size. Looking a point up is `d` multiplications and a floor, independent of the
//! model's cost.
//!
//! The price is the curse of dimensionality: `Π (extentᵢ/h)` cells, each storing `d + 1`
//! floats. [`ForceGrid::build`] counts that first (in 128-bit checked arithmetic) and refuses,
//! before allocating or evaluating anything, a grid above the caller's memory limit.

use std::path::Path;
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use shmc_core::Potential;

use super::{Domain, FORCE_GRID_KIND, Precomputation};
use crate::memory::check as check_memory;
use crate::surrogates::exact_floats;
use crate::surrogates::file::{self, SurrogateFile};
use crate::surrogates::{Surrogate, SurrogateMeta};
use crate::{Error, Result};

/// Relative slack when rounding `extent / h` to a cell count: a box of width 1 with `h = 0.1`
/// has 10 cells even though `1/0.1` may round to a hair above 10.
const CELL_COUNT_SLACK: f64 = 1e-9;

/// `U` and `∇U` at the centres of a uniform grid over a box, piecewise constant in each cell.
///
/// Cells are stored with the first coordinate varying slowest; cell `(i₁, …, i_d)` covers
/// `[lₖ + iₖ wₖ, lₖ + (iₖ + 1) wₖ]` in coordinate `k`, `wₖ` the cell width. A point on a shared
/// face belongs to the cell above it, except on the box's upper faces, which belong to the last
/// cell.
#[derive(Clone, Debug)]
pub struct ForceGrid {
    domain: Domain,
    /// Cells per coordinate.
    cells: Vec<usize>,
    /// Cell width per coordinate: the box's width over the cell count, at most `h (1 + 1e-9)`.
    widths: Vec<f64>,
    /// What the lookup reads per coordinate, side by side ([`Axis`]).
    axes: Vec<Axis>,
    /// `U` at each cell centre.
    values: Vec<f64>,
    /// `∇U` at each cell centre, `d` per cell, cell after cell.
    gradients: Vec<f64>,
    precomputation: Precomputation,
}

/// What locating a point's cell needs of one coordinate, in one place: a leapfrog step of a
/// cheap model is a lookup and little else, so the lookup reads one record per coordinate (the
/// box test and the cell index in one pass) instead of four tables with a bounds check each.
#[derive(Clone, Copy, Debug)]
struct Axis {
    /// The box's bounds in this coordinate (the domain's, copied).
    lower: f64,
    upper: f64,
    /// `1 / width` of a cell.
    inverse_width: f64,
    /// The last cell's index (cells − 1): the upper face belongs to it.
    last: usize,
    /// Flat-index stride (the last coordinate has stride 1).
    stride: usize,
    /// The stride times `d`: the step of the gradients' offset ([`ForceGrid::gradient_offset`]).
    gradient_stride: usize,
}

/// The number of cells of width at most `h` that tile `extent` (see [`CELL_COUNT_SLACK`]), or
/// `None` from `2¹²⁸` on.
fn cells_along(extent: f64, h: f64) -> Option<u128> {
    let ratio = extent / h;
    let nearest = ratio.round();
    let count = if (ratio - nearest).abs() <= CELL_COUNT_SLACK * nearest {
        nearest
    } else {
        ratio.ceil()
    };
    // `u128::MAX as f64` is 2¹²⁸ exactly.
    (count < u128::MAX as f64).then_some((count as u128).max(1))
}

impl ForceGrid {
    /// Evaluates `potential` (value and gradient) at the centre of every cell of a uniform grid
    /// of cell size `cell_size` over `domain`, in parallel.
    ///
    /// Each coordinate gets `⌈extent/h⌉` cells (the nearest integer when within `1e-9` of it),
    /// stretched to tile the box exactly. Storage is `cells × (d + 1) × 8` bytes; when that is
    /// above `memory_limit` (bytes) the grid is refused before anything is allocated or
    /// evaluated, with the bytes it would need in the message.
    ///
    /// Errors also for a non-positive or non-finite `cell_size`, a domain whose dimension is not
    /// the potential's, and a non-finite `U` or `∇U` at a centre (the box reaches where the model
    /// is undefined; the error names the point).
    pub fn build<P: Potential + Sync + ?Sized>(
        potential: &P,
        domain: Domain,
        cell_size: f64,
        memory_limit: u64,
    ) -> Result<Self> {
        let start = Instant::now();
        let d = domain.dim();
        if potential.dim() != d {
            return Err(Error::invalid(format!(
                "the domain has {d} coordinates but the potential {}",
                potential.dim()
            )));
        }
        if !(cell_size.is_finite() && cell_size > 0.0) {
            return Err(Error::invalid(format!(
                "a force grid's cell size must be finite and positive, got {cell_size}"
            )));
        }
        let per_coordinate: Vec<Option<u128>> = (0..d)
            .map(|k| cells_along(domain.width(k), cell_size))
            .collect();
        let total = per_coordinate
            .iter()
            .try_fold(1u128, |n, c| n.checked_mul((*c)?));
        let bytes = total.and_then(|n| n.checked_mul(8 * (d as u128 + 1)));
        let what = format!(
            "a force grid of cell size {cell_size} over {d} coordinates ({} cells)",
            total.map_or_else(|| "more than 2^128".to_string(), |n| n.to_string())
        );
        check_memory(&what, "cell", bytes, memory_limit)?;
        // The bytes fit in memory, so every count below fits in usize.
        let cells: Vec<usize> = per_coordinate
            .iter()
            .map(|c| c.expect("counted above") as usize)
            .collect();
        let count = total.expect("counted above") as usize;

        let mut values = vec![0.0; count];
        let mut gradients = vec![0.0; count * d];
        let widths = widths_of(&domain, &cells);
        let layout = Layout {
            domain: &domain,
            cells: &cells,
            widths: &widths,
        };
        values
            .par_iter_mut()
            .zip(gradients.par_chunks_mut(d))
            .enumerate()
            .for_each_init(
                || vec![0.0; d],
                |centre, (index, (value, gradient))| {
                    layout.centre(index, centre);
                    *value = potential.value_and_gradient(centre, gradient);
                },
            );
        let finite = |i: usize| {
            values[i].is_finite() && gradients[i * d..(i + 1) * d].iter().all(|g| g.is_finite())
        };
        if let Some(index) = (0..count).find(|&i| !finite(i)) {
            let mut centre = vec![0.0; d];
            layout.centre(index, &mut centre);
            return Err(Error::invalid(format!(
                "U or ∇U is not finite at the cell centre {centre:?} (U = {}); the domain must \
                 lie where the model is finite",
                values[index]
            )));
        }
        let precomputation = Precomputation::since(start, count as u64);
        Ok(Self::assemble(
            domain,
            cells,
            values,
            gradients,
            precomputation,
        ))
    }

    /// The grid with these tables, its lookup fields derived from the domain and cell counts
    /// (the same way for a built and a loaded grid, so lookups agree bit for bit).
    fn assemble(
        domain: Domain,
        cells: Vec<usize>,
        values: Vec<f64>,
        gradients: Vec<f64>,
        precomputation: Precomputation,
    ) -> Self {
        let d = domain.dim();
        let widths = widths_of(&domain, &cells);
        let mut strides = vec![1usize; d];
        for k in (0..d.saturating_sub(1)).rev() {
            strides[k] = strides[k + 1] * cells[k + 1];
        }
        let axes = (0..d)
            .map(|k| Axis {
                lower: domain.lower()[k],
                upper: domain.upper()[k],
                inverse_width: 1.0 / widths[k],
                last: cells[k] - 1,
                stride: strides[k],
                gradient_stride: strides[k] * d,
            })
            .collect();
        Self {
            domain,
            cells,
            widths,
            axes,
            values,
            gradients,
            precomputation,
        }
    }

    /// Cells per coordinate.
    pub fn cells(&self) -> &[usize] {
        &self.cells
    }

    /// The number of cells.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the grid has no cells (never true for a built or loaded grid; here for the
    /// `len`/`is_empty` pair).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The cell width per coordinate: the box's width over its cell count, so at most the
    /// requested cell size (up to the 1e-9 rounding slack).
    pub fn widths(&self) -> &[f64] {
        &self.widths
    }

    /// What filling the grid cost.
    pub fn precomputation(&self) -> Precomputation {
        self.precomputation
    }

    /// An estimate of `‖U − Ũ‖∞` over the box: the largest, over the cells, of
    /// `½ Σₖ |∂ₖU(centre)| wₖ`, the first-order change of `U` from a cell's centre to its
    /// farthest corner, where the piecewise-constant `Ũ` is furthest off. Not a bound: it
    /// misses the curvature's share, which is second order in the cell widths.
    pub fn error_estimate(&self) -> f64 {
        let d = self.domain.dim();
        self.gradients
            .chunks_exact(d)
            .map(|g| {
                0.5 * g
                    .iter()
                    .zip(&self.widths)
                    .map(|(g, w)| g.abs() * w)
                    .sum::<f64>()
            })
            .fold(0.0, f64::max)
    }

    /// The bytes the grid's tables take: `cells × (d + 1) × 8`.
    pub fn bytes(&self) -> usize {
        8 * (self.values.len() + self.gradients.len())
    }

    /// The flat index of the cell holding `q`, or `None` outside the box (or for a point of
    /// another dimension).
    fn cell(&self, q: &[f64]) -> Option<usize> {
        self.locate(q, |axis| axis.stride)
    }

    /// Where the gradient of the cell holding `q` starts in `gradients` (its flat index times
    /// `d`), or `None` outside the box. From the strides times `d`, so that no multiplication
    /// by `d` comes between the position and the load of the gradient: in a leapfrog step of a
    /// cheap model, the lookup is most of the chain of dependent operations.
    fn gradient_offset(&self, q: &[f64]) -> Option<usize> {
        self.locate(q, |axis| axis.gradient_stride)
    }

    /// `Σₖ iₖ stride(axisₖ)` over the cell indices `iₖ` of `q`, or `None` outside the box (or
    /// for a point of another dimension): the box test of [`Domain::contains`] (NaN is
    /// outside) and the index in one pass over the coordinates.
    #[inline(always)]
    fn locate(&self, q: &[f64], stride: impl Fn(&Axis) -> usize) -> Option<usize> {
        if q.len() != self.axes.len() {
            return None;
        }
        let mut index = 0;
        for (&x, axis) in q.iter().zip(&self.axes) {
            if !(axis.lower <= x && x <= axis.upper) {
                return None;
            }
            // Finite and non-negative inside the box, so the cast floors; the upper face goes
            // to the last cell. Through `i64`, which x86-64 converts in one instruction (to
            // `usize` it takes a dozen), with the same result for these values.
            let i = (((x - axis.lower) * axis.inverse_width) as i64 as usize).min(axis.last);
            index += i * stride(axis);
        }
        Some(index)
    }

    /// Writes `∇U` at the centre of cell `c` into `grad`.
    fn write_gradient(&self, c: usize, grad: &mut [f64]) {
        let d = self.axes.len();
        copy_small(&self.gradients[c * d..(c + 1) * d], grad);
    }

    /// Reads the force grid of a surrogate file of kind [`FORCE_GRID_KIND`] (for
    /// [`crate::surrogates::kinds::load`]). Inconsistent sizes are an error naming the file.
    pub fn read(file: &SurrogateFile) -> Result<(Self, SurrogateMeta)> {
        file.read()
    }

    /// The box the grid covers.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// `U` at the centre of the cell holding `q`, `None` outside the box.
    pub fn try_value(&self, q: &[f64]) -> Option<f64> {
        self.cell(q).map(|c| self.values[c])
    }

    /// Writes `∇U` at the centre of the cell holding `q` into `grad` and returns `U` there;
    /// `None` outside the box, with `grad` untouched.
    pub fn try_value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> Option<f64> {
        let c = self.cell(q)?;
        self.write_gradient(c, grad);
        Some(self.values[c])
    }
}

/// `dst.copy_from_slice(src)`, as register moves for the lengths of a grid that fits in memory
/// (up to 4; longer ones call `copy_from_slice`): for so few floats, the call to `memcpy` that
/// a slice copy (or a loop the compiler recognizes as one) makes costs more than the rest of a
/// cell lookup. Panics, as `copy_from_slice` does, if the lengths differ.
fn copy_small(src: &[f64], dst: &mut [f64]) {
    fn fixed<const N: usize>(src: &[f64], dst: &mut [f64]) -> bool {
        match (<&[f64; N]>::try_from(src), <&mut [f64; N]>::try_from(dst)) {
            (Ok(src), Ok(dst)) => {
                *dst = *src;
                true
            }
            _ => false,
        }
    }
    let copied = match src.len() {
        1 => fixed::<1>(src, dst),
        2 => fixed::<2>(src, dst),
        3 => fixed::<3>(src, dst),
        4 => fixed::<4>(src, dst),
        _ => false,
    };
    if !copied {
        dst.copy_from_slice(src);
    }
}

/// Each coordinate's cell width: the box's width over its cell count.
fn widths_of(domain: &Domain, cells: &[usize]) -> Vec<f64> {
    (0..domain.dim())
        .map(|k| domain.width(k) / cells[k] as f64)
        .collect()
}

/// What locating a cell centre needs, borrowed apart from the tables being filled.
struct Layout<'a> {
    domain: &'a Domain,
    cells: &'a [usize],
    widths: &'a [f64],
}

impl Layout<'_> {
    /// Writes the centre of cell `index` (first coordinate slowest) into `centre`.
    fn centre(&self, mut index: usize, centre: &mut [f64]) {
        let lower = self.domain.lower();
        for k in (0..centre.len()).rev() {
            let i = index % self.cells[k];
            index /= self.cells[k];
            centre[k] = lower[k] + (i as f64 + 0.5) * self.widths[k];
        }
    }
}

/// The grid's `Ũ` inside its box; NaN outside, where it knows nothing (a sampler proposes with
/// [`crate::surrogates::Fallback`], which never asks it there), so a caller that forgets
/// [`Surrogate::contains`] sees a divergent trajectory, not a silently wrong force.
impl Potential for ForceGrid {
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

impl Surrogate for ForceGrid {
    fn contains(&self, q: &[f64]) -> bool {
        self.domain.contains(q)
    }

    /// One pass: the cell lookup is the box test.
    fn value_within(&self, q: &[f64]) -> Option<f64> {
        self.try_value(q)
    }

    /// One pass: the cell lookup is the box test.
    fn value_and_gradient_within(&self, q: &[f64], grad: &mut [f64]) -> Option<f64> {
        self.try_value_and_gradient(q, grad)
    }

    /// One pass: the cell lookup is the box test.
    fn gradient_within(&self, q: &[f64], grad: &mut [f64]) -> bool {
        self.stored_gradient_within(q)
            .map(|stored| copy_small(stored, grad))
            .is_some()
    }

    /// The cell's row of the table: a leapfrog step reads it without copying.
    fn stored_gradient_within(&self, q: &[f64]) -> Option<&[f64]> {
        let offset = self.gradient_offset(q)?;
        Some(&self.gradients[offset..offset + self.axes.len()])
    }

    /// [`ForceGrid::error_estimate`], from the tabulated gradients.
    fn sup_error_estimate(&self) -> Option<f64> {
        Some(self.error_estimate())
    }

    fn save(&self, path: &Path, meta: &SurrogateMeta) -> Result<()> {
        file::write(path, FORCE_GRID_KIND, meta, self)
    }
}

/// A force grid as written to a file (borrowed, so saving copies nothing).
#[derive(Serialize)]
struct ForceGridRef<'a> {
    domain: &'a Domain,
    cells: &'a [usize],
    #[serde(with = "exact_floats::vec")]
    values: &'a [f64],
    #[serde(with = "exact_floats::vec")]
    gradients: &'a [f64],
    precomputation: Precomputation,
}

/// A force grid as read from a file, checked by `TryFrom` before it becomes a [`ForceGrid`].
#[derive(Deserialize)]
struct ForceGridRecord {
    domain: Domain,
    cells: Vec<usize>,
    #[serde(with = "exact_floats::vec")]
    values: Vec<f64>,
    #[serde(with = "exact_floats::vec")]
    gradients: Vec<f64>,
    precomputation: Precomputation,
}

impl Serialize for ForceGrid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        ForceGridRef {
            domain: &self.domain,
            cells: &self.cells,
            values: &self.values,
            gradients: &self.gradients,
            precomputation: self.precomputation,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for ForceGrid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let record = ForceGridRecord::deserialize(d)?;
        Self::try_from(record).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<ForceGridRecord> for ForceGrid {
    type Error = Error;

    fn try_from(record: ForceGridRecord) -> Result<Self> {
        let d = record.domain.dim();
        if record.cells.len() != d || record.cells.contains(&0) {
            return Err(Error::invalid(format!(
                "a force grid over {d} coordinates needs {d} positive cell counts, got {:?}",
                record.cells
            )));
        }
        let count = record
            .cells
            .iter()
            .try_fold(1usize, |n, &c| n.checked_mul(c))
            .ok_or_else(|| Error::invalid("a force grid's cell count overflows"))?;
        if record.values.len() != count || Some(record.gradients.len()) != count.checked_mul(d) {
            return Err(Error::invalid(format!(
                "a force grid of {count} cells needs {count} values and {} gradient entries, got \
                 {} and {}",
                count.saturating_mul(d),
                record.values.len(),
                record.gradients.len()
            )));
        }
        Ok(Self::assemble(
            record.domain,
            record.cells,
            record.values,
            record.gradients,
            record.precomputation,
        ))
    }
}
