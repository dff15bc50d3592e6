//! The settings of multilevel delayed acceptance (the chain's `mlda` kernel): which coarser
//! levels of the model propose, and how many steps each takes per proposal to the level above.

use std::sync::Arc;

use crate::{Error, Model, Result};

/// MLDA's levels and subchain lengths.
#[derive(Clone, Debug, PartialEq)]
pub struct MldaSettings {
    /// The coarser levels' resolutions, coarsest first (the elliptic PDE: elements per side);
    /// the model itself is the finest and judges.
    pub levels: Vec<usize>,
    /// `subchains[ℓ]`: level `ℓ`'s steps per proposal to level `ℓ + 1`, one per coarser
    /// level. Fixed for the run (a length chosen from the state would make the chain inexact).
    pub subchains: Vec<u32>,
}

impl MldaSettings {
    /// The subchain lengths when none are given: 4 coarsest-level steps per proposal to the
    /// level above, then 2 per level higher up. Measured on the 30×30 elliptic PDE with 10×10
    /// and 15×15 levels (see docs/methods.md): longer subchains move further per exact
    /// judgement but are rejected more, and past these the exact solves per tail-ESS stop
    /// falling while the coarse solves keep growing.
    pub fn default_subchains(levels: usize) -> Vec<u32> {
        (0..levels).map(|l| if l == 0 { 4 } else { 2 }).collect()
    }

    /// `levels` with the default subchain lengths.
    pub fn new(levels: Vec<usize>) -> Self {
        let subchains = Self::default_subchains(levels.len());
        Self { levels, subchains }
    }

    /// Checks the levels (at least one, strictly increasing) and their subchain lengths.
    pub fn validate(&self) -> Result<()> {
        if self.levels.is_empty() || !self.levels.windows(2).all(|w| w[0] < w[1]) {
            return Err(Error::setting(
                "levels",
                format!(
                    "must list at least one coarser level, coarsest first and each finer than \
                     the last, got {:?}",
                    self.levels
                ),
            ));
        }
        if self.subchains.len() != self.levels.len() || self.subchains.contains(&0) {
            return Err(Error::setting(
                "subchains",
                format!(
                    "needs one length of at least 1 per coarser level ({}), got {:?}",
                    self.levels.len(),
                    self.subchains
                ),
            ));
        }
        Ok(())
    }

    /// The model's coarser levels these settings name, coarsest first, each within
    /// `memory_limit` bytes; refused for a model without levels.
    pub fn coarse_levels<M: Model + ?Sized>(
        &self,
        model: &M,
        memory_limit: u64,
    ) -> Result<Vec<Arc<dyn Model>>> {
        let Some(levels) = model.levels() else {
            return Err(Error::setting(
                "method",
                "mlda needs a model with coarser levels; this model has none",
            ));
        };
        self.levels
            .iter()
            .map(|&resolution| levels.coarser(resolution, memory_limit))
            .collect()
    }
}
