//! The settings of multilevel delayed acceptance (the chain's `mlda` kernel): which coarser
//! levels of the model propose, whether a trained surrogate sits below them, and how many
//! steps each level takes per proposal to the level above.

use std::sync::Arc;

use super::surrogate_settings::SurrogateSettings;
use crate::{Error, Model, Result};

/// MLDA's levels and subchain lengths.
#[derive(Clone, Debug, PartialEq)]
pub struct MldaSettings {
    /// The coarser levels' resolutions, coarsest first (the elliptic PDE: elements per side);
    /// the model itself is the finest and judges.
    pub levels: Vec<usize>,
    /// `subchains[ℓ]`: level `ℓ`'s steps per proposal to level `ℓ + 1`, one per level below
    /// the model (the network's first when there is one). Fixed for the run (a length chosen
    /// from the state would make the chain inexact).
    pub subchains: Vec<u32>,
    /// The network level: a surrogate trained as RNS-HMC trains it (on the warmup's states, or
    /// a saved one), whose HMC subchain proposes to the coarsest mesh once it is fitted (MLDA
    /// over the meshes alone until then). Why: a mesh level's HMC pays a forward and an
    /// adjoint solve per leapfrog step, so below the meshes the surrogate's steps, nearly free,
    /// leave the coarsest mesh one forward solve per network subchain. `None`: the meshes alone.
    pub network: Option<SurrogateSettings>,
    /// Whether the exact `U` judges warmup too. `false` (the default): the finest coarse level
    /// judges warmup, which then costs no exact solve (see the chain's `mlda` kernel for why
    /// the kept draws stay exact).
    pub fine_warmup: bool,
}

impl MldaSettings {
    /// The subchain lengths when none are given: 4 coarsest-level steps per proposal to the
    /// level above, then 2 per level higher up. Measured on the 30×30 elliptic PDE with 10×10
    /// and 15×15 levels (see docs/methods.md): longer subchains move further per exact
    /// judgement but are rejected more, and past these the exact solves per tail-ESS stop
    /// falling while the coarse solves keep growing.
    /// With a network level below the meshes, it takes [`NETWORK_SUBCHAIN`] steps per
    /// proposal to the coarsest mesh, and the meshes keep theirs.
    pub fn default_subchains(levels: usize, network: bool) -> Vec<u32> {
        let meshes = (0..levels).map(|l| if l == 0 { 4 } else { 2 });
        std::iter::repeat_n(NETWORK_SUBCHAIN, usize::from(network))
            .chain(meshes)
            .collect()
    }

    /// `levels` with the default subchain lengths and no network level.
    pub fn new(levels: Vec<usize>) -> Self {
        let subchains = Self::default_subchains(levels.len(), false);
        Self {
            levels,
            subchains,
            network: None,
            fine_warmup: false,
        }
    }

    /// `levels` over the network `network`, with the default subchain lengths.
    pub fn with_network(levels: Vec<usize>, network: SurrogateSettings) -> Self {
        Self {
            subchains: Self::default_subchains(levels.len(), true),
            levels,
            network: Some(network),
            fine_warmup: false,
        }
    }

    /// The levels below the model: the meshes, and the network if there is one.
    pub fn below(&self) -> usize {
        self.levels.len() + usize::from(self.network.is_some())
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
        if self.subchains.len() != self.below() || self.subchains.contains(&0) {
            return Err(Error::setting(
                "subchains",
                format!(
                    "needs one length of at least 1 per coarser level ({}{}), got {:?}",
                    self.below(),
                    if self.network.is_some() {
                        ", the network's first"
                    } else {
                        ""
                    },
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

/// The network level's steps per proposal to the coarsest mesh when none is given: 4, as the
/// coarsest mesh's own default (measured on the 30×30 PDE, see docs/guide.md).
pub const NETWORK_SUBCHAIN: u32 = 4;
