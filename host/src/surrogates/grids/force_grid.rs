//! Grid HMC's precomputed force map (precomputing paper, section 3.3, Algorithm 2), read in one
//! of two ways ([`Interpolation`]).
//!
//! The box is cut into a uniform grid of cells. The paper's naive grid HMC evaluates `U` and
//! `∇U` once at every cell centre and reads both off as constants inside the cell: the
//! leapfrog's force is piecewise constant, which the paper shows still points the right way for
//! a grid spacing near the step size. Its error is first order in the spacing, and the
//! acceptance pays for it (0.63 against exact HMC's 0.93 on the paper's banana at `h = 0.1`).
//! The multilinear reading evaluates them at the cells' corners instead, one more point per
//! coordinate, and blends a cell's `2^d` corners: the force is continuous and its error second
//! order, and on the paper's 2-D problems it accepts as often as exact HMC, with the same
//! effective draws per draw, for the same spacing. Either way a lookup is independent of the
//! model's cost, and the chain stays exact: any position-dependent force gives a leapfrog that
//! is reversible and volume preserving, and the exact `U` judges it.
//!
//! The price is the curse of dimensionality: some `Π (extentᵢ/h)` points, each storing `d + 1`
//! floats. [`ForceGrid::build`] counts them first (in 128-bit checked arithmetic) and refuses,
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
use crate::surrogates::{GradientAt, Surrogate, SurrogateMeta};
use crate::{Error, Result};

/// Relative slack when rounding `extent / h` to a cell count: a box of width 1 with `h = 0.1`
/// has 10 cells even though `1/0.1` may round to a hair above 10.
const CELL_COUNT_SLACK: f64 = 1e-9;

/// How a force grid reads `U` and `∇U` between the points where it evaluated them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interpolation {
    /// At the cell centres, constant in each cell: the paper's naive grid HMC (eq. 3.11).
    #[default]
    Constant,
    /// At the cell corners, blended multilinearly in each cell: a continuous force whose error
    /// is second order in the spacing, for one more point per coordinate.
    Multilinear,
}

impl Interpolation {
    /// The points tabulated along a coordinate beyond its cells: the corners outnumber the
    /// cells by one.
    fn extra_points(self) -> u8 {
        match self {
            Interpolation::Constant => 0,
            Interpolation::Multilinear => 1,
        }
    }

    /// The points tabulated along a coordinate of `cells` cells.
    fn points(self, cells: usize) -> usize {
        cells.saturating_add(self.extra_points().into())
    }

    /// Its name in the output (as a file records it).
    pub fn name(self) -> &'static str {
        match self {
            Interpolation::Constant => "constant",
            Interpolation::Multilinear => "multilinear",
        }
    }

    /// What a tabulated point is, for messages.
    fn point_name(self) -> &'static str {
        match self {
            Interpolation::Constant => "cell centre",
            Interpolation::Multilinear => "cell corner",
        }
    }
}

/// The most coordinates of a multilinear grid: a lookup blends `2^d` corners (and the memory
/// limit refuses such grids long before, unless their cells are few and wide).
pub const MULTILINEAR_MAX_DIM: usize = 16;

/// The most coordinates whose multilinear lookup is unrolled and folded coordinate by
/// coordinate ([`ForceGrid::blend_fixed`]).
const TREE_MAX_DIM: usize = 3;

/// `U` and `∇U` tabulated on a uniform grid over a box, read as its [`Interpolation`] says.
///
/// Cells are numbered with the first coordinate varying slowest; cell `(i₁, …, i_d)` covers
/// `[lₖ + iₖ wₖ, lₖ + (iₖ + 1) wₖ]` in coordinate `k`, `wₖ` the cell width. A point on a shared
/// face belongs to the cell above it, except on the box's upper faces, which belong to the last
/// cell. The tables hold one entry per cell centre, or per corner (`cellsₖ + 1` along each
/// coordinate), in the same order.
#[derive(Clone, Debug)]
pub struct ForceGrid {
    domain: Domain,
    interpolation: Interpolation,
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
    /// Flat-index stride of the tables (the last coordinate has stride 1).
    stride: usize,
    /// The stride times `d`: the step of the gradients' offset ([`ForceGrid::gradient_offset`]).
    gradient_stride: usize,
}

impl Axis {
    /// The index of the cell holding coordinate `x` and `x`'s position in cell widths from the
    /// box's lower face (so its fraction in the cell is the difference, 1 on the upper face);
    /// `None` outside the box, NaN included: [`Domain::contains`] in the same pass.
    #[inline(always)]
    fn cell_of(&self, x: f64) -> Option<(usize, f64)> {
        if !(self.lower <= x && x <= self.upper) {
            return None;
        }
        // Finite and non-negative inside the box, so the cast floors; the upper face goes to
        // the last cell. Through `i64`, which x86-64 converts in one instruction (to `usize` it
        // takes a dozen), with the same result for these values.
        let position = (x - self.lower) * self.inverse_width;
        Some(((position as i64 as usize).min(self.last), position))
    }
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
    /// Evaluates `potential` (value and gradient) at the points `interpolation` reads (every
    /// cell centre, or every cell corner) of a uniform grid of cell size `cell_size` over
    /// `domain`, in parallel.
    ///
    /// Each coordinate gets `⌈extent/h⌉` cells (the nearest integer when within `1e-9` of it),
    /// stretched to tile the box exactly. Storage is `points × (d + 1) × 8` bytes; when that is
    /// above `memory_limit` (bytes) the grid is refused before anything is allocated or
    /// evaluated, with the bytes it would need in the message.
    ///
    /// Errors also for a non-positive or non-finite `cell_size`, a domain whose dimension is not
    /// the potential's, a multilinear grid over more than [`MULTILINEAR_MAX_DIM`] coordinates,
    /// and a non-finite `U` or `∇U` at a point (the box reaches where the model is undefined;
    /// the error names the point).
    pub fn build<P: Potential + Sync + ?Sized>(
        potential: &P,
        domain: Domain,
        cell_size: f64,
        interpolation: Interpolation,
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
        if interpolation == Interpolation::Multilinear && d > MULTILINEAR_MAX_DIM {
            return Err(Error::invalid(format!(
                "a multilinear force grid blends 2^d cell corners per lookup and takes at most \
                 {MULTILINEAR_MAX_DIM} coordinates, not {d}; a sparse grid suits more"
            )));
        }
        let per_coordinate: Vec<Option<u128>> = (0..d)
            .map(|k| cells_along(domain.width(k), cell_size))
            .collect();
        let cell_total = per_coordinate
            .iter()
            .try_fold(1u128, |n, c| n.checked_mul((*c)?));
        let total = per_coordinate.iter().try_fold(1u128, |n, c| {
            n.checked_mul((*c)?.checked_add(interpolation.extra_points().into())?)
        });
        let bytes = total.and_then(|n| n.checked_mul(8 * (d as u128 + 1)));
        let count_text =
            |n: Option<u128>| n.map_or_else(|| "more than 2^128".to_string(), |n| n.to_string());
        let what = format!(
            "a force grid of cell size {cell_size} over {d} coordinates ({} cells, {} {}s)",
            count_text(cell_total),
            count_text(total),
            interpolation.point_name()
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
            interpolation,
            cells: &cells,
            widths: &widths,
        };
        values
            .par_iter_mut()
            .zip(gradients.par_chunks_mut(d))
            .enumerate()
            .for_each_init(
                || vec![0.0; d],
                |point, (index, (value, gradient))| {
                    layout.point(index, point);
                    *value = potential.value_and_gradient(point, gradient);
                },
            );
        let finite = |i: usize| {
            values[i].is_finite() && gradients[i * d..(i + 1) * d].iter().all(|g| g.is_finite())
        };
        if let Some(index) = (0..count).find(|&i| !finite(i)) {
            let mut point = vec![0.0; d];
            layout.point(index, &mut point);
            return Err(Error::invalid(format!(
                "U or ∇U is not finite at the {} {point:?} (U = {}); the domain must lie where \
                 the model is finite",
                interpolation.point_name(),
                values[index]
            )));
        }
        let precomputation = Precomputation::since(start, count as u64);
        Ok(Self::assemble(
            domain,
            interpolation,
            cells,
            values,
            gradients,
            precomputation,
        ))
    }

    /// The grid with these tables, its lookup fields derived from the domain, reading and cell
    /// counts (the same way for a built and a loaded grid, so lookups agree bit for bit).
    fn assemble(
        domain: Domain,
        interpolation: Interpolation,
        cells: Vec<usize>,
        values: Vec<f64>,
        gradients: Vec<f64>,
        precomputation: Precomputation,
    ) -> Self {
        let d = domain.dim();
        let widths = widths_of(&domain, &cells);
        let mut strides = vec![1usize; d];
        for k in (0..d.saturating_sub(1)).rev() {
            strides[k] = strides[k + 1] * interpolation.points(cells[k + 1]);
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
            interpolation,
            cells,
            widths,
            axes,
            values,
            gradients,
            precomputation,
        }
    }

    /// How the grid reads `U` and `∇U` between its points.
    pub fn interpolation(&self) -> Interpolation {
        self.interpolation
    }

    /// Cells per coordinate.
    pub fn cells(&self) -> &[usize] {
        &self.cells
    }

    /// The number of tabulated points (cell centres or corners): the exact evaluations made.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the grid has no points (never true for a built or loaded grid; here for the
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

    /// An estimate of `‖U − Ũ‖∞` over the box. Constant: the largest, over the cells, of
    /// `½ Σₖ |∂ₖU(centre)| wₖ`, the first-order change of `U` from a cell's centre to its
    /// farthest corner, where the piecewise-constant `Ũ` is furthest off. Multilinear: the
    /// largest, over the corners, of `⅛ Σₖ wₖ |Δₖ ∂ₖU|`, linear interpolation's error
    /// `⅛ wₖ² |∂ₖ²U|` in each coordinate with the curvature read from the change `Δₖ ∂ₖU` of the
    /// slope to the next corner along `k`. Not a bound: the first misses the curvature's share,
    /// the second the change of the curvature within a cell.
    pub fn error_estimate(&self) -> f64 {
        let d = self.domain.dim();
        match self.interpolation {
            Interpolation::Constant => self
                .gradients
                .chunks_exact(d)
                .map(|g| {
                    0.5 * g
                        .iter()
                        .zip(&self.widths)
                        .map(|(g, w)| g.abs() * w)
                        .sum::<f64>()
                })
                .fold(0.0, f64::max),
            Interpolation::Multilinear => (0..self.values.len())
                .map(|i| {
                    (0..d)
                        .filter(|&k| {
                            (i / self.axes[k].stride) % (self.cells[k] + 1) < self.cells[k]
                        })
                        .map(|k| {
                            let next = i + self.axes[k].stride;
                            let change = self.gradients[next * d + k] - self.gradients[i * d + k];
                            0.125 * self.widths[k] * change.abs()
                        })
                        .sum::<f64>()
                })
                .fold(0.0, f64::max),
        }
    }

    /// The bytes the grid's tables take: `points × (d + 1) × 8`.
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
            let (i, _) = axis.cell_of(x)?;
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

    /// `Ũ` at `q`, `None` outside the box.
    pub fn try_value(&self, q: &[f64]) -> Option<f64> {
        match self.interpolation {
            Interpolation::Constant => self.cell(q).map(|c| self.values[c]),
            Interpolation::Multilinear => self.blend::<true>(q, None),
        }
    }

    /// Writes `∇Ũ` at `q` into `grad` and returns `Ũ` there; `None` outside the box, with
    /// `grad` untouched.
    pub fn try_value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> Option<f64> {
        match self.interpolation {
            Interpolation::Constant => {
                let c = self.cell(q)?;
                self.write_gradient(c, grad);
                Some(self.values[c])
            }
            Interpolation::Multilinear => self.blend::<true>(q, Some(grad)),
        }
    }

    /// The multilinear reading at `q`: the corners of its cell weighted by `Πₖ tₖ` or
    /// `Πₖ (1 − tₖ)`, `tₖ` its fractional position in the cell along `k`. Returns `Ũ` and, given
    /// `grad`, writes `∇Ũ` (the blend of the corners' gradients, not the derivative of the
    /// blended `U`: that would be constant along each coordinate within the cell, as the
    /// centres' reading is); `None` outside the box, with `grad` untouched.
    /// With `VALUE` false the value may be left out (returned as 0): a leapfrog step needs only
    /// the gradient.
    fn blend<const VALUE: bool>(&self, q: &[f64], grad: Option<&mut [f64]>) -> Option<f64> {
        match self.axes.len() {
            1 => self.blend_fixed::<1, VALUE>(q, grad),
            2 => self.blend_fixed::<2, VALUE>(q, grad),
            3 => self.blend_fixed::<3, VALUE>(q, grad),
            _ => self.blend_any(q, grad),
        }
    }

    /// The cell holding `q` (the flat index of its lower corner in the values and in the
    /// gradients) with `q`'s fractional position in it written into `fraction`, one per
    /// coordinate; `None` outside the box (or for a point of another dimension).
    #[inline(always)]
    fn lower_corner(&self, q: &[f64], fraction: &mut [f64]) -> Option<(usize, usize)> {
        if q.len() != self.axes.len() || fraction.len() < q.len() {
            return None;
        }
        let (mut base, mut gradient_base) = (0, 0);
        for ((&x, axis), t) in q.iter().zip(&self.axes).zip(fraction) {
            let (i, position) = axis.cell_of(x)?;
            *t = position - i as f64;
            base += i * axis.stride;
            gradient_base += i * axis.gradient_stride;
        }
        Some((base, gradient_base))
    }

    /// [`ForceGrid::blend`] over `D` coordinates (1 to 3), with the value if `VALUE` (else 0).
    /// The corners are read first (their addresses wait only on the cell, not on the
    /// fractions), then folded one coordinate at a time, the last first, by `a + t (b − a)`:
    /// after the fractions a chain of `D` such steps, where weights would take a subtraction, a
    /// product, a multiplication and `D` additions. Its arrays are `D` long, so they stay in
    /// registers: a leapfrog step of a cheap model is a lookup and little else, and one whose
    /// arrays were sized for any dimension (zeroed, spilled, copied out by `memcpy`) took 23 ns
    /// in 2-D against the centres' 12.
    #[inline(always)]
    fn blend_fixed<const D: usize, const VALUE: bool>(
        &self,
        q: &[f64],
        grad: Option<&mut [f64]>,
    ) -> Option<f64> {
        let mut fraction = [0.0; D];
        let (base, gradient_base) = self.lower_corner(q, &mut fraction)?;
        let mut gradients = [[0.0; D]; 1 << TREE_MAX_DIM];
        let mut values = [0.0; 1 << TREE_MAX_DIM];
        for corner in 0..1usize << D {
            let (mut offset, mut gradient_offset) = (base, gradient_base);
            for (k, axis) in self.axes.iter().enumerate().take(D) {
                if corner >> k & 1 == 1 {
                    offset += axis.stride;
                    gradient_offset += axis.gradient_stride;
                }
            }
            copy_small(
                &self.gradients[gradient_offset..gradient_offset + D],
                &mut gradients[corner],
            );
            if VALUE {
                values[corner] = self.values[offset];
            }
        }
        let mut half = 1usize << D;
        for k in (0..D).rev() {
            half /= 2;
            let t = fraction[k];
            for c in 0..half {
                let upper = gradients[c + half];
                for j in 0..D {
                    gradients[c][j] += t * (upper[j] - gradients[c][j]);
                }
                if VALUE {
                    values[c] += t * (values[c + half] - values[c]);
                }
            }
        }
        if let Some(grad) = grad {
            copy_small(&gradients[0], grad);
        }
        Some(values[0])
    }

    /// [`ForceGrid::blend`] over any number of coordinates, value included: each corner
    /// weighted by its product of fractions.
    fn blend_any(&self, q: &[f64], grad: Option<&mut [f64]>) -> Option<f64> {
        let d = self.axes.len();
        let mut fraction = [0.0; MULTILINEAR_MAX_DIM];
        let (base, gradient_base) = self.lower_corner(q, &mut fraction)?;
        let (mut value, mut sum) = (0.0, [0.0; MULTILINEAR_MAX_DIM]);
        for corner in 0..1usize << d {
            let (mut weight, mut offset, mut gradient_offset) = (1.0, base, gradient_base);
            for (k, axis) in self.axes.iter().enumerate() {
                if corner >> k & 1 == 1 {
                    weight *= fraction[k];
                    offset += axis.stride;
                    gradient_offset += axis.gradient_stride;
                } else {
                    weight *= 1.0 - fraction[k];
                }
            }
            value += weight * self.values[offset];
            let row = &self.gradients[gradient_offset..gradient_offset + d];
            for (s, g) in sum.iter_mut().zip(row) {
                *s += weight * g;
            }
        }
        if let Some(grad) = grad {
            grad.copy_from_slice(&sum[..d]);
        }
        Some(value)
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
    interpolation: Interpolation,
    cells: &'a [usize],
    widths: &'a [f64],
}

impl Layout<'_> {
    /// Writes tabulated point `index` (first coordinate slowest) into `point`: a cell's centre,
    /// or a corner (the last one along a coordinate on the box's upper face itself, not a
    /// rounding past it, where the model may be undefined).
    fn point(&self, mut index: usize, point: &mut [f64]) {
        let (lower, upper) = (self.domain.lower(), self.domain.upper());
        for k in (0..point.len()).rev() {
            let points = self.interpolation.points(self.cells[k]);
            let i = index % points;
            index /= points;
            point[k] = match self.interpolation {
                Interpolation::Constant => lower[k] + (i as f64 + 0.5) * self.widths[k],
                Interpolation::Multilinear if i == self.cells[k] => upper[k],
                Interpolation::Multilinear => lower[k] + i as f64 * self.widths[k],
            };
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
        match self.gradient_ref_within(q, grad) {
            GradientAt::Stored(stored) => {
                copy_small(stored, grad);
                true
            }
            GradientAt::Written => true,
            GradientAt::Outside => false,
        }
    }

    /// Constant: the cell's row of the table, which a leapfrog step reads without copying.
    /// Multilinear: the blend, written into `buf`.
    fn gradient_ref_within<'s>(&'s self, q: &[f64], buf: &mut [f64]) -> GradientAt<'s> {
        let found = match self.interpolation {
            Interpolation::Constant => self.gradient_offset(q).map(|offset| {
                GradientAt::Stored(&self.gradients[offset..offset + self.axes.len()])
            }),
            Interpolation::Multilinear => self
                .blend::<false>(q, Some(buf))
                .map(|_| GradientAt::Written),
        };
        found.unwrap_or(GradientAt::Outside)
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
    interpolation: Interpolation,
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
    /// Absent from the files written before grids were read multilinearly: their centres'.
    #[serde(default)]
    interpolation: Interpolation,
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
            interpolation: self.interpolation,
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
        let interpolation = record.interpolation;
        if interpolation == Interpolation::Multilinear && d > MULTILINEAR_MAX_DIM {
            return Err(Error::invalid(format!(
                "a multilinear force grid takes at most {MULTILINEAR_MAX_DIM} coordinates, not {d}"
            )));
        }
        let count = record
            .cells
            .iter()
            .try_fold(1usize, |n, &c| n.checked_mul(interpolation.points(c)))
            .ok_or_else(|| Error::invalid("a force grid's point count overflows"))?;
        if record.values.len() != count || Some(record.gradients.len()) != count.checked_mul(d) {
            return Err(Error::invalid(format!(
                "a force grid of {count} {}s needs {count} values and {} gradient entries, got \
                 {} and {}",
                interpolation.point_name(),
                count.saturating_mul(d),
                record.values.len(),
                record.gradients.len()
            )));
        }
        super::all_finite("the force grid's values:", &record.values)?;
        super::all_finite("the force grid's gradients:", &record.gradients)?;
        Ok(Self::assemble(
            record.domain,
            interpolation,
            record.cells,
            record.values,
            record.gradients,
            record.precomputation,
        ))
    }
}
