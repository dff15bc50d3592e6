//! Precomputed grids over a domain of interest: grid HMC's force map and sparse-grid HMC's
//! Smolyak interpolant (the precomputing paper; METHODS.md section 5).
//!
//! Both replace the exact `∇U` in the leapfrog by something read off a table that was filled once,
//! before sampling, inside a box [`Domain`]. Outside the box there is no table, and [`Hybrid`]
//! hands the point to the exact potential (the paper's eq. 3.11):
//!
//! ```text
//! Û(q) = Ũ(q) if q ∈ D, U(q) otherwise
//! ```
//!
//! - [`ForceGrid`] (naive grid HMC): `U` and `∇U` at every cell centre of a uniform grid,
//!   piecewise constant. Cost and memory grow as `(extent/h)ᵈ`, so only a few dimensions.
//! - [`SparseGrid`] (sparse-grid HMC): a piecewise-linear hierarchical interpolant of `U` on a
//!   Clenshaw–Curtis sparse grid, regular or refined adaptively where the surpluses are large;
//!   its gradient drives the leapfrog. Point counts grow as `N (log N)^(d−1)`.
//!
//! # Still exact
//! Used as the proposal of [`shmc_core::Surrogate`] (the Metropolis–Hastings step judges with
//! the exact `U`), a grid costs acceptance rate but not correctness: each leapfrog half-kick
//! `p ← p − ε/2 ∇Û(q)` is a shear that moves `p` by an amount depending on `q` alone, and each
//! drift `q ← q + ε M⁻¹ p` one depending on `p` alone, so the trajectory map is volume
//! preserving and, with the momentum flipped, its own inverse, whatever (even discontinuous)
//! position-only force `∇Û` is (the paper's Appendix A). Only the "complete" variant, which also
//! accepts with `Û`, is approximate: it samples `∝ exp(−Û)`, within `KL ≤ 2‖U − Û‖∞` of the
//! target (Theorem 5.1); [`SparseGrid::kl_bound_estimate`] gives the estimate to label it with.
//!
//! # Memory
//! Both builders take a memory limit in bytes and count their storage with checked arithmetic
//! before allocating or evaluating anything, so a grid that cannot fit is an error stating the
//! bytes it would need, not an abort.
//!
//! # Files
//! [`ForceGrid::save`] and [`SparseGrid::save`] write JSON (format [`FORMAT_NAME`], version
//! [`FORMAT_VERSION`]) whose `kind` field says which grid the file holds; [`load`] dispatches on
//! it. Every float is written as a string in Rust's shortest round-trip form and parsed back with
//! the correctly rounded parser, so a loaded grid gives bit-identical values and gradients.

pub mod domain;
mod exact;
pub mod force_grid;
pub mod sparse_grid;

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use shmc_core::Potential;

pub use domain::Domain;
pub use force_grid::ForceGrid;
pub use sparse_grid::{AdaptiveOptions, AdaptiveStop, Construction, SparseGrid};

use crate::{Error, Result};

/// What a sampler needs from a precomputed approximation `Ũ` of `U` over a box: whether a point
/// is in the box, and `Ũ`, `∇Ũ` there. [`Hybrid`] turns any implementation into a
/// [`Potential`] on all of `ℝᵈ`.
///
/// The `try_` methods answer `None` (or `false`) outside the box, so the hybrid's branch and the
/// grid's lookup share one containment test on the leapfrog's hot path. The plain methods return
/// NaN outside, so a caller that forgets [`GridApproximation::contains`] sees a divergent
/// trajectory, not a silently wrong force.
pub trait GridApproximation {
    /// The box the approximation covers.
    fn domain(&self) -> &Domain;

    /// Whether `q` is in the box (closed), i.e. whether `Ũ` means anything there.
    fn contains(&self, q: &[f64]) -> bool {
        self.domain().contains(q)
    }

    /// `Ũ(q)` for `q` in the box, `None` outside.
    fn try_value(&self, q: &[f64]) -> Option<f64>;

    /// Writes `∇Ũ(q)` into `grad` and returns `Ũ(q)` for `q` in the box; `None` outside, with
    /// `grad` untouched.
    fn try_value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> Option<f64>;

    /// Writes `∇Ũ(q)` into `grad` for `q` in the box and returns whether it did. Override it
    /// when the gradient alone is cheaper.
    fn try_gradient(&self, q: &[f64], grad: &mut [f64]) -> bool {
        self.try_value_and_gradient(q, grad).is_some()
    }

    /// `Ũ(q)` in the box, NaN outside.
    fn value(&self, q: &[f64]) -> f64 {
        self.try_value(q).unwrap_or(f64::NAN)
    }

    /// Writes `∇Ũ(q)` into `grad` in the box, NaN outside.
    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        if !self.try_gradient(q, grad) {
            grad.fill(f64::NAN);
        }
    }

    /// Writes `∇Ũ(q)` into `grad` and returns `Ũ(q)`; NaN for both outside the box.
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        self.try_value_and_gradient(q, grad).unwrap_or_else(|| {
            grad.fill(f64::NAN);
            f64::NAN
        })
    }
}

impl<G: GridApproximation + ?Sized> GridApproximation for &G {
    fn domain(&self) -> &Domain {
        (**self).domain()
    }
    fn contains(&self, q: &[f64]) -> bool {
        (**self).contains(q)
    }
    fn try_value(&self, q: &[f64]) -> Option<f64> {
        (**self).try_value(q)
    }
    fn try_value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> Option<f64> {
        (**self).try_value_and_gradient(q, grad)
    }
    fn try_gradient(&self, q: &[f64], grad: &mut [f64]) -> bool {
        (**self).try_gradient(q, grad)
    }
}

/// The paper's eq. 3.11: the grid's `Ũ` inside its box, the exact `U` outside, as one
/// [`Potential`].
///
/// As the proposal of [`shmc_core::Surrogate`] it gives grid HMC (or sparse-grid HMC), exact
/// because the Metropolis–Hastings step uses the exact `U` (see the [module docs](self)). Its
/// `value` is `Ũ` inside the box, which only matters to a caller that accepts with it (the
/// approximate "complete" variant, to be labelled as such).
#[derive(Clone, Debug)]
pub struct Hybrid<G, P> {
    grid: G,
    exact: P,
}

impl<G: GridApproximation, P: Potential> Hybrid<G, P> {
    /// The grid inside its box and `exact` outside. Errors when their dimensions differ.
    pub fn new(grid: G, exact: P) -> Result<Self> {
        let (g, e) = (grid.domain().dim(), exact.dim());
        if g != e {
            return Err(Error::invalid(format!(
                "the grid has {g} coordinates but the exact potential {e}"
            )));
        }
        Ok(Self { grid, exact })
    }

    /// The grid.
    pub fn grid(&self) -> &G {
        &self.grid
    }

    /// The exact potential used outside the box.
    pub fn exact(&self) -> &P {
        &self.exact
    }
}

impl<G: GridApproximation, P: Potential> Potential for Hybrid<G, P> {
    fn dim(&self) -> usize {
        self.exact.dim()
    }

    fn value(&self, q: &[f64]) -> f64 {
        self.grid
            .try_value(q)
            .unwrap_or_else(|| self.exact.value(q))
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        match self.grid.try_value_and_gradient(q, grad) {
            Some(value) => value,
            None => self.exact.value_and_gradient(q, grad),
        }
    }

    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        if !self.grid.try_gradient(q, grad) {
            self.exact.gradient(q, grad);
        }
    }
}

/// What filling a grid cost: the exact evaluations (the expensive part, the thing a grid must
/// pay back in cheaper trajectories) and the wall time they took.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Precomputation {
    /// Calls into the exact potential.
    pub evaluations: u64,
    /// Wall-clock seconds of the construction (evaluations in parallel).
    #[serde(with = "exact::float")]
    pub seconds: f64,
}

impl Precomputation {
    fn since(start: Instant, evaluations: u64) -> Self {
        Self {
            evaluations,
            seconds: start.elapsed().as_secs_f64(),
        }
    }
}

/// `Ok` when `bytes` fits in `limit` and in this machine's address space, otherwise the error
/// stating both (`None`: the count overflowed 128 bits). `what` names the grid in the message.
fn check_memory(what: &str, bytes: Option<u128>, limit: u64) -> Result<()> {
    const GIB: f64 = (1u64 << 30) as f64;
    let limit_text = format!("{limit} bytes ({:.3} GiB)", limit as f64 / GIB);
    match bytes {
        Some(b) if b <= u128::from(limit) => match usize::try_from(b) {
            Ok(_) => Ok(()),
            Err(_) => Err(Error::invalid(format!(
                "{what} would need {b} bytes, more than this machine can address"
            ))),
        },
        Some(b) => Err(Error::invalid(format!(
            "{what} would need {b} bytes ({:.3e} GiB), above the memory limit of {limit_text}",
            b as f64 / GIB
        ))),
        None => Err(Error::invalid(format!(
            "{what} would need more than 2^128 bytes, above the memory limit of {limit_text}"
        ))),
    }
}

/// The `format` field of a grid file.
pub const FORMAT_NAME: &str = "shmc-grid";

/// The version of the grid file format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The `kind` field of a force-grid file.
const FORCE_GRID_KIND: &str = "force-grid";
/// The `kind` field of a sparse-grid file.
const SPARSE_GRID_KIND: &str = "sparse-grid";

/// The first fields of a grid file, read before the body to give a clear error for another
/// format, version or kind.
#[derive(Deserialize)]
struct Header {
    format: String,
    version: u32,
    kind: String,
}

/// A grid file: the header fields, then the grid.
#[derive(Serialize, Deserialize)]
struct GridFile<T> {
    format: String,
    version: u32,
    kind: String,
    grid: T,
}

/// Writes `grid` to `path` as a grid file of `kind`.
fn save_file<T: Serialize>(grid: &T, kind: &str, path: &Path) -> Result<()> {
    let file = GridFile {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        kind: kind.into(),
        grid,
    };
    let text = serde_json::to_string(&file)
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

/// Reads `path` and checks its header; returns the text and the kind it holds.
fn read_file(path: &Path) -> Result<(String, String)> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let header: Header = serde_json::from_str(&text).map_err(|e| malformed(path, e))?;
    if header.format != FORMAT_NAME {
        return Err(Error::invalid(format!(
            "{}: not a grid file (format {:?}, expected {FORMAT_NAME:?})",
            path.display(),
            header.format
        )));
    }
    if header.version != FORMAT_VERSION {
        return Err(Error::invalid(format!(
            "{}: grid file format version {} is not supported (this build reads version \
             {FORMAT_VERSION})",
            path.display(),
            header.version
        )));
    }
    Ok((text, header.kind))
}

/// The body of a grid file already read by [`read_file`], which must hold `kind`.
fn parse_body<T: for<'de> Deserialize<'de>>(
    path: &Path,
    text: &str,
    found: &str,
    kind: &str,
) -> Result<T> {
    if found != kind {
        return Err(Error::invalid(format!(
            "{}: the file holds a {found}, not a {kind}",
            path.display()
        )));
    }
    let file: GridFile<T> = serde_json::from_str(text).map_err(|e| malformed(path, e))?;
    Ok(file.grid)
}

fn malformed(path: &Path, e: serde_json::Error) -> Error {
    Error::Data {
        path: path.to_path_buf(),
        line: e.line().max(1),
        message: format!("not a valid grid file: {e}"),
    }
}

/// A grid read from a file of either kind.
#[derive(Clone, Debug)]
pub enum Grid {
    /// The file held a [`ForceGrid`].
    Force(ForceGrid),
    /// The file held a [`SparseGrid`].
    Sparse(SparseGrid),
}

/// Reads a grid file of either kind, dispatching on its `kind` field, so a caller that accepts
/// "some grid" need not know which one was saved.
pub fn load(path: &Path) -> Result<Grid> {
    let (text, kind) = read_file(path)?;
    match kind.as_str() {
        FORCE_GRID_KIND => parse_body(path, &text, &kind, FORCE_GRID_KIND).map(Grid::Force),
        SPARSE_GRID_KIND => parse_body(path, &text, &kind, SPARSE_GRID_KIND).map(Grid::Sparse),
        other => Err(Error::invalid(format!(
            "{}: unknown grid kind {other:?} (expected {FORCE_GRID_KIND:?} or \
             {SPARSE_GRID_KIND:?})",
            path.display()
        ))),
    }
}

impl GridApproximation for Grid {
    fn domain(&self) -> &Domain {
        match self {
            Grid::Force(g) => g.domain(),
            Grid::Sparse(g) => g.domain(),
        }
    }
    fn try_value(&self, q: &[f64]) -> Option<f64> {
        match self {
            Grid::Force(g) => g.try_value(q),
            Grid::Sparse(g) => g.try_value(q),
        }
    }
    fn try_value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> Option<f64> {
        match self {
            Grid::Force(g) => g.try_value_and_gradient(q, grad),
            Grid::Sparse(g) => g.try_value_and_gradient(q, grad),
        }
    }
    fn try_gradient(&self, q: &[f64], grad: &mut [f64]) -> bool {
        match self {
            Grid::Force(g) => g.try_gradient(q, grad),
            Grid::Sparse(g) => g.try_gradient(q, grad),
        }
    }
}

#[cfg(test)]
mod tests;
