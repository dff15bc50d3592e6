//! How a grid is fitted ([`GridFitter`]): choose the box, then fill the grid from the exact
//! potential. Unlike a network, a grid needs no states unless its box is the states' own.

use std::time::Instant;

use shmc_core::Potential;

use super::{AdaptiveOptions, Domain, ForceGrid, Interpolation, SparseGrid};
use crate::surrogates::states::TrainingSet;
use crate::surrogates::{Fitted, Fitter, Surrogate};
use crate::{Error, Result};

/// Which grid, and its resolution.
#[derive(Clone, Debug, PartialEq)]
pub enum GridKind {
    /// Grid HMC's force grid with cells of this size (at most) per coordinate.
    Force {
        /// The cell size `h`.
        cell: f64,
        /// How the grid reads the force between its points (the paper's naive grid HMC:
        /// constant in each cell).
        interpolation: Interpolation,
    },
    /// Sparse-grid HMC's regular Smolyak grid of this level.
    SparseLevel(u8),
    /// Sparse-grid HMC's dimension-adaptive grid, refined to these options' tolerance.
    SparseAdaptive(AdaptiveOptions),
}

/// Where the grid's box comes from (the precomputing paper, section 3.5).
#[derive(Clone, Debug, PartialEq)]
pub enum DomainChoice {
    /// The Laplace approximation at the MAP: each coordinate's interval holds this probability
    /// ([`Domain::from_laplace`]). Known before sampling.
    Laplace {
        /// The per-coordinate probability.
        probability: f64,
    },
    /// The bounding box of the exact phase's states, widened by this fraction of each extent
    /// on both sides ([`Domain::bounding_box`]). Known only after the exact phase.
    States {
        /// The margin.
        margin: f64,
    },
    /// A box given by hand. Known before sampling.
    Explicit(Domain),
}

/// Fits a grid of [`GridKind`] over the box of a [`DomainChoice`], refusing one whose tables
/// would pass `memory_limit` bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct GridFitter {
    /// The grid.
    pub kind: GridKind,
    /// Its box.
    pub domain: DomainChoice,
    /// The most bytes the grid's tables may take.
    pub memory_limit: u64,
}

impl GridFitter {
    /// The box for `model`, and the exact evaluations spent finding it (the MAP search).
    fn domain(
        &self,
        model: &(dyn Potential + Sync),
        states: &TrainingSet,
    ) -> Result<(Domain, u64)> {
        let d = model.dim();
        let domain = match &self.domain {
            DomainChoice::Laplace { probability } => {
                let start = vec![0.0; d];
                let (domain, map) = Domain::laplace(model, &start, *probability)?;
                return Ok((domain, map.evaluations));
            }
            DomainChoice::States { margin } => {
                Domain::bounding_box((0..states.len()).map(|i| states.position(i)), *margin)?
            }
            DomainChoice::Explicit(domain) => domain.clone(),
        };
        if domain.dim() != d {
            return Err(Error::invalid(format!(
                "the domain has {} coordinates but the model has {d}",
                domain.dim()
            )));
        }
        Ok((domain, 0))
    }
}

impl Fitter for GridFitter {
    /// The grid over the chosen box. Its held-out gradient error is measured on the states
    /// inside the box that carry an exact gradient (NaN when none do).
    fn fit(&self, model: &(dyn Potential + Sync), states: &TrainingSet) -> Result<Fitted> {
        let start = Instant::now();
        let (domain, search) = self.domain(model, states)?;
        let (surrogate, evaluations): (Box<dyn Surrogate>, u64) = match &self.kind {
            GridKind::Force {
                cell,
                interpolation,
            } => {
                let grid =
                    ForceGrid::build(model, domain, *cell, *interpolation, self.memory_limit)?;
                let n = grid.precomputation().evaluations;
                (Box::new(grid), n)
            }
            GridKind::SparseLevel(level) => {
                let grid = SparseGrid::regular(model, domain, *level, self.memory_limit)?;
                let n = grid.precomputation().evaluations;
                (Box::new(grid), n)
            }
            GridKind::SparseAdaptive(options) => {
                let grid = SparseGrid::adaptive(model, domain, options, self.memory_limit)?;
                let n = grid.precomputation().evaluations;
                (Box::new(grid), n)
            }
        };
        Ok(Fitted {
            holdout_gradient_error: gradient_error(surrogate.as_ref(), states),
            surrogate,
            scale: f64::NAN,
            seconds: start.elapsed().as_secs_f64(),
            exact_evaluations: search + evaluations,
        })
    }

    fn before_sampling(&self) -> bool {
        !matches!(self.domain, DomainChoice::States { .. })
    }

    /// A force grid's cell and interpolation (a sparse grid's level or tolerance are in its
    /// file's record).
    fn header(&self) -> Vec<(&'static str, String)> {
        match &self.kind {
            GridKind::Force {
                cell,
                interpolation,
            } => vec![
                ("grid_cell", cell.to_string()),
                ("force_interpolation", interpolation.name().into()),
            ],
            _ => Vec::new(),
        }
    }
}

/// The relative RMS error `‖∇Ũ − ∇U‖ / ‖∇U‖` over the states inside the grid's box that carry
/// an exact gradient; NaN when there are none.
fn gradient_error(grid: &dyn Surrogate, states: &TrainingSet) -> f64 {
    let mut approx = vec![0.0; states.dim()];
    let (mut error, mut norm) = (0.0, 0.0);
    for i in 0..states.len() {
        let (q, Some(exact)) = (states.position(i), states.gradient(i)) else {
            continue;
        };
        if !grid.contains(q) {
            continue;
        }
        grid.gradient(q, &mut approx);
        for (a, e) in approx.iter().zip(exact) {
            error += (a - e) * (a - e);
            norm += e * e;
        }
    }
    if norm > 0.0 {
        (error / norm).sqrt()
    } else {
        f64::NAN
    }
}
