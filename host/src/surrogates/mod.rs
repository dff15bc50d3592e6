//! Surrogates: cheap stand-ins for the potential `U`, learned from the states an exact phase
//! visited, that the samplers use only to propose.

pub mod laplace;
pub mod network;
pub mod states;

use serde::{Deserialize, Serialize};

/// Which quantity a surrogate was fitted to: the potential values of the states, or their
/// gradients (score matching: `d` equations per state instead of one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FitMethod {
    /// Potential values ([`network::fit_potential`]).
    #[default]
    Potential,
    /// Potential gradients ([`network::fit_score`]).
    Score,
}
