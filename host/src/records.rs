//! What a run records and what reads it back shares: the CmdStan sampler columns that precede
//! the parameters in every row, the fewest draws a summary takes, a phase's count of potential
//! evaluations and a point of a surrogate's learning curve. The sampler writes them; the output,
//! the report and the benchmarks read them, without depending on the sampler's machinery.

use serde::{Deserialize, Serialize};

use crate::surrogates::exact_floats;

/// The fewest kept draws of a chain that a summary's diagnostics (split R̂, ESS) accept.
pub const MIN_SUMMARY_DRAWS: usize = 4;

/// The sampler columns that precede the parameters in every row, as CmdStan names them.
pub const SAMPLER_COLUMNS: [&str; 7] = [
    "lp__",
    "accept_stat__",
    "stepsize__",
    "treedepth__",
    "n_leapfrog__",
    "divergent__",
    "energy__",
];

/// Potential evaluations of one phase of a chain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evaluations {
    /// Transitions made.
    pub iterations: u64,
    /// Exact gradient evaluations (each leapfrog step of an exact trajectory, the last fused
    /// with the exact value).
    pub exact_gradients: u64,
    /// Exact value-only evaluations (the end point of a surrogate trajectory).
    pub exact_values: u64,
    /// Surrogate gradient evaluations (leapfrog steps of surrogate trajectories).
    pub surrogate_gradients: u64,
}

impl Evaluations {
    /// Counts the generalized-leapfrog transition `t` (RMHMC), whose steps each took
    /// `gradients_per_step` gradients of the proposal potential (the surrogate's, or exact),
    /// and whose end point one exact `U`.
    pub(crate) fn record_generalized(
        &mut self,
        t: &shmc_core::Transition,
        surrogate: bool,
        gradients_per_step: u64,
    ) {
        self.iterations += 1;
        self.exact_values += 1;
        let gradients = u64::from(t.steps) * gradients_per_step;
        if surrogate {
            self.surrogate_gradients += gradients;
        } else {
            self.exact_gradients += gradients;
        }
    }

    /// Counts transition `t`, proposed by the surrogate or exactly, and judged by the exact `U`
    /// or (VHMC's approximate rule) by the surrogate.
    /// Moves `outside` of the surrogate gradients counted to the exact ones: the proposal
    /// handed them to the exact potential, outside the surrogate's domain.
    pub(crate) fn record_outside(&mut self, outside: u64) {
        let moved = outside.min(self.surrogate_gradients);
        self.surrogate_gradients -= moved;
        self.exact_gradients += outside;
    }

    pub(crate) fn record(&mut self, t: &shmc_core::Transition, surrogate: bool, exact_judge: bool) {
        self.iterations += 1;
        if surrogate {
            self.exact_values += u64::from(exact_judge);
            self.surrogate_gradients += u64::from(t.steps);
        } else {
            self.exact_gradients += u64::from(t.steps);
        }
    }
}

/// One point of the learning curve: the acceptance of consecutive surrogate proposals and what
/// the surrogate had learned from when it made them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LearningPoint {
    /// The chain's iteration (1-based, warmup included) of the last of the proposals.
    pub iteration: usize,
    /// The states the surrogate had learned from by then ([`crate::sampler::Proposer::learned`]; 0 for a
    /// surrogate fitted before sampling or loaded from a file, which learns nothing in the run).
    pub states: usize,
    /// The proposals.
    pub proposals: usize,
    /// Their mean Metropolis–Hastings acceptance probability (under the exact `U`, except with
    /// an approximate acceptance rule, which the output labels).
    #[serde(with = "exact_floats")]
    pub acceptance: f64,
}
