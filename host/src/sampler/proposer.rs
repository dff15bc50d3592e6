//! What a chain asks of a surrogate method ([`Proposer`]), whichever it is: RNS-HMC and
//! ARNS-HMC's ([`super::fitted`]) or VHMC's ([`super::variational`]).
//!
//! The state the chain is in is never touched by a proposer; when the proposal changes, the
//! chain refreshes only the cached proposal gradient (the exact `U` it holds stays valid).

use std::cell::RefCell;

use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};
use shmc_core::{Dyn, Potential, State, Steps};

use super::trajectory::TrajectoryChoice;
use crate::Result;
use crate::records::LearningPoint;
use crate::surrogates::{Fallback, Surrogate, exact_floats};

/// What a chain needs from a surrogate method: the proposal potential (once there is one), how
/// the Metropolis–Hastings step judges it, and a look at every warmup transition.
pub trait Proposer {
    /// The potential whose gradient drives the leapfrog, once there is one (before: exact HMC).
    fn proposal(&self) -> Option<&dyn Potential>;

    /// The proposal as the [`Fallback`] it is, for a method that proposes with a fitted
    /// surrogate (the same potential as [`Proposer::proposal`]): the chain's transition then
    /// compiles its lookup into the leapfrog ([`super::chain`]'s dynamics). `None`: another kind
    /// of proposal, called through `dyn Potential`.
    fn fallback(&self) -> Option<&Fallback<'_>> {
        None
    }

    /// Whether the MH step uses the proposal potential itself instead of the exact `U`
    /// (VHMC's published rule): the chain then targets `exp(−V)`, an approximation.
    fn approximate(&self) -> bool {
        false
    }

    /// Where the chain should start instead of a random point, if the method knows better.
    fn initial_position(&self, _rng: &mut Pcg64) -> Option<Vec<f64>> {
        None
    }

    /// The trajectory lengths of surrogate proposals, given the exact phase's `base` and the
    /// metric and step size the surrogate starts proposing with.
    fn trajectory(&mut self, base: Steps, _inv_mass: &[f64], _step_size: f64) -> Steps {
        base
    }

    /// Learns from warmup iteration `i` (of `warmup`), which left the chain in `state`
    /// (`accepted`: by a new proposal). Returns whether the proposal changed, so that the chain
    /// refreshes what it caches of it.
    fn observe(
        &mut self,
        model: &dyn Potential,
        i: usize,
        warmup: usize,
        state: &State<Dyn>,
        accepted: bool,
        rng: &mut Pcg64,
    ) -> Result<bool>;

    /// Where to keep the exact gradient of each end point, for a method that learns from the
    /// exact gradients of accepted states (the end point then evaluates `U` and `∇U` in one
    /// fused pass).
    fn end_gradient(&self) -> Option<&RefCell<EndGradient>> {
        None
    }

    /// The evaluations the proposal handed to the exact potential since the last call (outside
    /// the surrogate's domain), which the chain counts as exact gradients, not the surrogate's.
    fn take_outside(&self) -> u64 {
        0
    }

    /// The fitted surrogate behind the proposal, once there is one (RNS-RMHMC's metric comes
    /// from its network). `None` for a method whose proposal is not a surrogate of its own.
    fn surrogate(&self) -> Option<&dyn Surrogate> {
        None
    }

    /// What a resumed chain needs to propose after warmup exactly as this one does. The
    /// default, [`ForResume::Impossible`], is the safe answer for a proposal that no saved
    /// surrogate rebuilds.
    fn for_resume(&self) -> ForResume<'_> {
        ForResume::Impossible
    }

    /// The cost and fit so far.
    fn report(&self) -> &SurrogateReport;

    /// The states the surrogate has learned from so far, the x-axis of its learning curve
    /// ([`SurrogateReport::learning`]): by default those of its batch fit (and, for a method
    /// that counts them there, those learned online since).
    fn learned(&self) -> usize {
        self.report().training_states
    }

    /// The trained surrogate, if any (VHMC: its learned part, without the Laplace blend).
    fn into_surrogate(self: Box<Self>) -> Option<Box<dyn Surrogate>>;
}

/// What a chain saves of its proposal after warmup so that a resumed chain proposes as it does.
#[derive(Clone, Copy, Debug)]
pub enum ForResume<'a> {
    /// This fitted surrogate, saved in its file format (which rebuilds it bit for bit).
    Save(&'a dyn Surrogate),
    /// Nothing: no surrogate was fitted, or it was precomputed before sampling and the resumed
    /// run precomputes it again, identically.
    Rebuilt,
    /// The proposal is not a surrogate a file rebuilds (VHMC's blend with its Laplace
    /// approximation): the chain starts again from its first iteration.
    Impossible,
}

/// The exact gradient at the latest exact end point, and where it was taken.
#[derive(Clone, Debug, Default)]
pub struct EndGradient {
    /// The end point.
    pub position: Vec<f64>,
    /// `∇U` there.
    pub gradient: Vec<f64>,
}

/// What the surrogate cost and how well it fits, for the output.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SurrogateReport {
    /// States the batch fit used.
    pub training_states: usize,
    /// Seconds spent fitting (batch fit, scale selection, online updates).
    pub training_seconds: f64,
    /// The chosen input scale factor (the network's `c`; NaN for a kind without one).
    #[serde(with = "exact_floats")]
    pub scale: f64,
    /// Relative RMS error of the surrogate's gradient on held-out states.
    #[serde(with = "exact_floats")]
    pub holdout_gradient_error: f64,
    /// States learned online (ARNS-HMC's replay of its batch states included).
    pub online_updates: u64,
    /// Seconds spent in online updates (part of `training_seconds`).
    pub online_seconds: f64,
    /// Times the updated weights were swapped into the proposal.
    pub swaps: u64,
    /// The warmup iteration at which the surrogate started proposing (`None`: never).
    pub started_at: Option<usize>,
    /// Exact evaluations made only for training, beyond those of the chain's own transitions
    /// (VHMC: the MAP search and its Hessian, the pilot states, the score-matching targets).
    pub extra_exact_evaluations: u64,
    /// The trajectory lengths chosen from the surrogate's curvature, if they were.
    pub trajectory: Option<TrajectoryChoice>,
    /// Whether NUTS's trees made the surrogate's trajectories, their draws judged by delayed
    /// acceptance (`chain::delayed_nuts`).
    #[serde(default)]
    pub nuts_trees: bool,
    /// What precomputing the surrogate from the exact potential cost (a grid), if it was:
    /// `before_sampling` when fitted once for every chain, else after this chain's exact phase.
    pub precompute: Option<Precompute>,
    /// Under approximate acceptance with the surrogate's own `Ũ` (a grid's complete variant):
    /// the estimated bound `2‖U − Ũ‖∞` on `KL(P‖Q)`.
    pub kl_bound_estimate: Option<f64>,
    /// If the surrogate's exact acceptance collapsed during warmup: when, and to what (the
    /// chain went on with exact HMC).
    pub collapse: Option<Collapse>,
    /// The learning curve: the acceptance of the surrogate's proposals in windows of warmup
    /// iterations as it learns, then one point for all of sampling's (the surrogate fixed).
    /// Whether a longer warmup or more training states would still pay shows only here.
    #[serde(default)]
    pub learning: Vec<LearningPoint>,
}

/// What precomputing a surrogate from the exact potential cost.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Precompute {
    /// Exact evaluations (value and gradient) made.
    pub evaluations: u64,
    /// Wall time, in seconds.
    pub seconds: f64,
    /// Whether it was made once before sampling (shared by every chain), not after a chain's
    /// exact phase.
    pub before_sampling: bool,
}

/// When and how the surrogate's acceptance collapsed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Collapse {
    /// The warmup iteration (0-based) after which the chain went back to exact HMC.
    pub iteration: usize,
    /// The mean exact acceptance of the last `chain::guard::WINDOW` surrogate proposals.
    pub acceptance: f64,
    /// Their mean acceptance under the surrogate's own Hamiltonian.
    pub own_acceptance: f64,
}
