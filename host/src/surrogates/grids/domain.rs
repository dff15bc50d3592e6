//! The domain of interest: the box `D = [l₁, u₁] × … × [l_d, u_d]` a grid covers.
//!
//! A precomputed grid pays for every cell or point it holds, whether or not the sampler ever
//! goes there, so the box should cover the posterior's high-density region and little else
//! (precomputing paper, section 3.5). Three ways to get one:
//!
//! - [`Domain::from_laplace`]: the Laplace approximation `N(q̂, H⁻¹)` at the MAP `q̂`, each
//!   coordinate's marginal interval of a chosen probability. Cheap, and good when the posterior
//!   is close to Gaussian; a banana or a skewed posterior gets a box in the wrong place.
//! - [`Domain::bounding_box`]: the box of states already visited (say, early exact-HMC
//!   trajectories), widened by a margin. Follows any shape, but only as far as the chain got.
//! - [`Domain::parse`] (and [`str::parse`]): written by hand as `lo:hi,lo:hi,…`, as the paper does
//!   for its experiments.
//!
//! Outside the box a grid-driven sampler falls back to the exact gradient (see
//! [`crate::surrogates::Fallback`]), so a box that is too small costs speed, never correctness.

use std::fmt;
use std::str::FromStr;

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};
use shmc_core::Potential;

use crate::diagnostics::inverse_normal_cdf;
use crate::optimize::{MapEstimate, MapOptions, find_map};
use crate::surrogates::exact_floats;
use crate::{Error, Result};

/// A box in `ℝᵈ`: finite bounds with `lower[i] < upper[i]` for every coordinate.
///
/// The fields are private so that every `Domain` in existence is valid: grids divide by the
/// box's widths and index cells from its lower corner, which a NaN, an infinite or an empty
/// interval would turn into garbage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "DomainRecord", into = "DomainRecord")]
pub struct Domain {
    lower: Vec<f64>,
    upper: Vec<f64>,
}

/// A domain as written in a grid file: bounds as exact decimal strings, validated on reading.
#[derive(Serialize, Deserialize)]
struct DomainRecord {
    #[serde(with = "exact_floats::vec")]
    lower: Vec<f64>,
    #[serde(with = "exact_floats::vec")]
    upper: Vec<f64>,
}

impl TryFrom<DomainRecord> for Domain {
    type Error = Error;

    fn try_from(record: DomainRecord) -> Result<Self> {
        Domain::new(record.lower, record.upper)
    }
}

impl From<Domain> for DomainRecord {
    fn from(domain: Domain) -> Self {
        Self {
            lower: domain.lower,
            upper: domain.upper,
        }
    }
}

impl Domain {
    /// The box with these corners. Errors (naming the coordinate) unless both have the same
    /// length ≥ 1 and every pair is finite with `lower < upper`.
    pub fn new(lower: Vec<f64>, upper: Vec<f64>) -> Result<Self> {
        if lower.is_empty() {
            return Err(Error::invalid("a domain needs at least one coordinate"));
        }
        if lower.len() != upper.len() {
            return Err(Error::invalid(format!(
                "a domain's lower corner has {} coordinates but its upper corner {}",
                lower.len(),
                upper.len()
            )));
        }
        for (i, (&lo, &hi)) in lower.iter().zip(&upper).enumerate() {
            if !(lo.is_finite() && hi.is_finite()) {
                return Err(Error::invalid(format!(
                    "domain coordinate {i}: the bounds {lo:?} and {hi:?} must be finite"
                )));
            }
            if lo >= hi {
                return Err(Error::invalid(format!(
                    "domain coordinate {i}: the lower bound {lo:?} must be below the upper \
                     bound {hi:?}"
                )));
            }
            if !(hi - lo).is_finite() {
                return Err(Error::invalid(format!(
                    "domain coordinate {i}: the width from {lo:?} to {hi:?} overflows"
                )));
            }
        }
        Ok(Self { lower, upper })
    }

    /// The number of coordinates `d`.
    pub fn dim(&self) -> usize {
        self.lower.len()
    }

    /// The lower corner `(l₁, …, l_d)`.
    pub fn lower(&self) -> &[f64] {
        &self.lower
    }

    /// The upper corner `(u₁, …, u_d)`.
    pub fn upper(&self) -> &[f64] {
        &self.upper
    }

    /// The width `uᵢ − lᵢ` of coordinate `i`.
    pub fn width(&self, i: usize) -> f64 {
        self.upper[i] - self.lower[i]
    }

    /// Whether `q` lies in the closed box (`lᵢ ≤ qᵢ ≤ uᵢ` for all `i`). A point with the wrong
    /// number of coordinates, or a NaN coordinate, is not inside: the caller then falls back to
    /// the exact potential, which reports the problem its own way.
    pub fn contains(&self, q: &[f64]) -> bool {
        q.len() == self.lower.len()
            && q.iter()
                .zip(self.lower.iter().zip(&self.upper))
                .all(|(x, (lo, hi))| *lo <= *x && *x <= *hi)
    }

    /// The box of the Laplace approximation at a MAP estimate (precomputing paper, section
    /// 3.5): coordinate `i` gets `q̂ᵢ ± z·sdᵢ` with `sdᵢ = √((H⁻¹)ᵢᵢ)` its marginal standard
    /// deviation under `N(q̂, H⁻¹)`, and `z = Φ⁻¹((1 + p)/2)`, so that each coordinate's interval
    /// holds probability `p` under the approximation. The whole box holds less than `p` (about
    /// `pᵈ` for a nearly diagonal `H⁻¹`): choose `p` per coordinate.
    ///
    /// Uses [`MapEstimate::laplace_precision`] (the Hessian, lifted to positive definite if it is
    /// not). Refuses an estimate whose search did not converge: the box would be centred on a
    /// point that is not the mode, and sized by the curvature there.
    pub fn from_laplace(map: &MapEstimate, probability: f64) -> Result<Self> {
        if !map.converged {
            return Err(Error::invalid(format!(
                "the MAP search stopped short of its gradient tolerance (|grad U| = {:.3e} at \
                 its end; {}), so a Laplace box around its end point would be centred on the \
                 wrong point",
                map.gradient_norm, map.termination
            )));
        }
        Self::from_gaussian(&map.position, &map.laplace_precision()?, probability)
    }

    /// Finds the MAP from `start` ([`find_map`] with default options) and returns its Laplace box
    /// ([`Domain::from_laplace`]) with the estimate, whose [`MapEstimate::evaluations`] belong
    /// in the grid's precomputation cost.
    pub fn laplace(
        potential: &(dyn Potential + Sync),
        start: &[f64],
        probability: f64,
    ) -> Result<(Self, MapEstimate)> {
        let map = find_map(potential, start, &MapOptions::default())?;
        Ok((Self::from_laplace(&map, probability)?, map))
    }

    /// The box whose coordinate `i` is `meanᵢ ± z·√((P⁻¹)ᵢᵢ)`, `z = Φ⁻¹((1 + p)/2)`: each
    /// marginal of `N(mean, P⁻¹)` has probability `p` inside its interval. The building block of
    /// [`Domain::from_laplace`], for a Gaussian known in closed form.
    ///
    /// Errors when `p` is not in `(0, 1)`, the sizes disagree, or the precision `P` is not
    /// symmetric positive definite (no Cholesky factor).
    pub fn from_gaussian(mean: &[f64], precision: &DMatrix<f64>, probability: f64) -> Result<Self> {
        if !(probability > 0.0 && probability < 1.0) {
            return Err(Error::invalid(format!(
                "a Laplace box's per-coordinate probability must be in (0, 1), got {probability}"
            )));
        }
        let d = mean.len();
        if precision.nrows() != d || precision.ncols() != d {
            return Err(Error::invalid(format!(
                "a Laplace box needs a {d} × {d} precision for a mean of {d} coordinates, got \
                 {} × {}",
                precision.nrows(),
                precision.ncols()
            )));
        }
        if mean.iter().any(|m| !m.is_finite()) {
            return Err(Error::invalid("a Laplace box's centre is not finite"));
        }
        let cholesky = nalgebra::Cholesky::new(precision.clone()).ok_or_else(|| {
            Error::invalid("a Laplace box needs a positive definite precision (Hessian)")
        })?;
        let covariance = cholesky.inverse();
        let z = inverse_normal_cdf(0.5 * (1.0 + probability));
        let mut lower = Vec::with_capacity(d);
        let mut upper = Vec::with_capacity(d);
        for (i, m) in mean.iter().enumerate() {
            let half = z * covariance[(i, i)].sqrt();
            lower.push(m - half);
            upper.push(m + half);
        }
        Self::new(lower, upper)
    }

    /// The smallest box holding every state, each side then pushed out by `margin` times that
    /// coordinate's extent (`margin = 0.1` adds 10 % on both sides), so that the chain's next
    /// excursion just past the visited region still finds the grid.
    ///
    /// Errors when there are no states, their lengths differ, a coordinate is not finite,
    /// `margin` is negative or not finite, or all states share one value of a coordinate (the
    /// box would be empty there).
    pub fn bounding_box<S: AsRef<[f64]>>(
        states: impl IntoIterator<Item = S>,
        margin: f64,
    ) -> Result<Self> {
        if !(margin.is_finite() && margin >= 0.0) {
            return Err(Error::invalid(format!(
                "a bounding box's margin must be a finite fraction ≥ 0, got {margin}"
            )));
        }
        let mut states = states.into_iter();
        let first = states
            .next()
            .ok_or_else(|| Error::invalid("a bounding box needs at least one state"))?;
        let mut lower = first.as_ref().to_vec();
        let mut upper = lower.clone();
        for (n, state) in std::iter::once(first).chain(states).enumerate() {
            let state = state.as_ref();
            if state.len() != lower.len() {
                return Err(Error::invalid(format!(
                    "state {n} has {} coordinates, the first state {}",
                    state.len(),
                    lower.len()
                )));
            }
            for (i, &x) in state.iter().enumerate() {
                if !x.is_finite() {
                    return Err(Error::invalid(format!(
                        "state {n}, coordinate {i} is not finite ({x})"
                    )));
                }
                lower[i] = lower[i].min(x);
                upper[i] = upper[i].max(x);
            }
        }
        for i in 0..lower.len() {
            let extent = upper[i] - lower[i];
            if extent == 0.0 {
                return Err(Error::invalid(format!(
                    "every state has coordinate {i} equal to {:?}, so their bounding box is \
                     empty there",
                    lower[i]
                )));
            }
            lower[i] -= margin * extent;
            upper[i] += margin * extent;
        }
        Self::new(lower, upper)
    }

    /// Reads `lo:hi,lo:hi,…` (one `lo:hi` per coordinate, spaces allowed around the numbers).
    /// A malformed entry is an error naming it (1-based) and what is wrong with it.
    pub fn parse(text: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Err(Error::invalid(
                "a domain needs at least one lo:hi entry, got an empty text",
            ));
        }
        let mut lower = Vec::new();
        let mut upper = Vec::new();
        for (n, entry) in text.split(',').enumerate() {
            let bad = |why: String| {
                Error::invalid(format!("domain entry {} {:?}: {why}", n + 1, entry.trim()))
            };
            let (lo, hi) = entry
                .split_once(':')
                .ok_or_else(|| bad("expected lo:hi".into()))?;
            let number = |part: &str, which: &str| -> Result<f64> {
                let part = part.trim();
                let x: f64 = part
                    .parse()
                    .map_err(|_| bad(format!("the {which} bound {part:?} is not a number")))?;
                if x.is_finite() {
                    Ok(x)
                } else {
                    Err(bad(format!("the {which} bound must be finite")))
                }
            };
            let (lo, hi) = (number(lo, "lower")?, number(hi, "upper")?);
            if lo >= hi {
                return Err(bad(format!(
                    "the lower bound must be below the upper ({lo} ≥ {hi})"
                )));
            }
            lower.push(lo);
            upper.push(hi);
        }
        Self::new(lower, upper)
    }
}

impl FromStr for Domain {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        Self::parse(text)
    }
}

/// `lo:hi,lo:hi,…` with every bound in Rust's shortest round-trip form, so that
/// [`Domain::parse`] reads back the same box bit for bit.
impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (lo, hi)) in self.lower.iter().zip(&self.upper).enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{lo:?}:{hi:?}")?;
        }
        Ok(())
    }
}
