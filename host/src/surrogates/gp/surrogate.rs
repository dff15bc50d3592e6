//! A fitted Gaussian process as a [`Surrogate`]: its predictive mean, standing for `U` within
//! the [`Reach`] of its training states as a network does (far from them the mean reverts to
//! its constant and its gradient to zero, which would let a trajectory drift off).

use std::path::Path;

use shmc_core::Potential;

use super::Approximation;
use super::kernel::Predictor;
use super::record::{self, FITC_KIND, FULL_KIND};
use crate::Result;
use crate::surrogates::file::SurrogateFile;
use crate::surrogates::network::Reach;
use crate::surrogates::{Surrogate, SurrogateMeta};

/// A Gaussian process's predictive mean as a surrogate.
#[derive(Clone, Debug)]
pub struct GpSurrogate {
    predictor: Predictor,
    reach: Option<Reach>,
    /// Full or FITC: the kind it is saved under.
    sparse: bool,
}

impl GpSurrogate {
    pub(super) fn new(predictor: Predictor, reach: Option<Reach>, sparse: bool) -> Self {
        Self {
            predictor,
            reach,
            sparse,
        }
    }

    /// The predictive mean.
    pub fn predictor(&self) -> &Predictor {
        &self.predictor
    }

    /// Which approximation it is, by the kind it is saved under (FITC's inducing count is
    /// its number of centres).
    pub fn approximation(&self) -> Approximation {
        if self.sparse {
            Approximation::Fitc {
                inducing: self.predictor.centres(),
            }
        } else {
            Approximation::Full
        }
    }

    /// The surrogate a surrogate file of kind [`FULL_KIND`] or [`FITC_KIND`] holds, and the
    /// meta of its fit.
    pub fn read(file: &SurrogateFile) -> Result<(Self, SurrogateMeta)> {
        let (predictor, reach, meta) = record::read(file)?;
        let sparse = file.kind() == Some(FITC_KIND);
        Ok((Self::new(predictor, reach, sparse), meta))
    }
}

impl Potential for GpSurrogate {
    fn dim(&self) -> usize {
        self.predictor.dim()
    }
    fn value(&self, q: &[f64]) -> f64 {
        self.predictor.value(q)
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        self.predictor.value_and_gradient(q, grad)
    }
}

impl Surrogate for GpSurrogate {
    fn contains(&self, q: &[f64]) -> bool {
        self.reach.as_ref().is_none_or(|r| r.contains(q))
    }

    fn save(&self, path: &Path, meta: &SurrogateMeta) -> Result<()> {
        let kind = if self.sparse { FITC_KIND } else { FULL_KIND };
        record::write(kind, &self.predictor, self.reach.as_ref(), path, meta)
    }
}
