//! The seam between a chain and the transitions it makes. A [`Kernel`] turns the chain's state
//! into the next one; the chain around it counts, writes rows, adapts, checkpoints and decides
//! when the surrogate proposes. Which kernels a method runs is decided once, at the chain's
//! start, in [`super::registry`].
//!
//! A new kernel is its own module implementing [`Kernel`] plus its line in
//! [`super::registry::Kernels::for_method`].

use rand_pcg::Pcg64;
use shmc_core::{DiagonalMetric, Dyn, Hmc, Potential, State, Transition};

use super::work::RiemannianReport;
use crate::Result;
use crate::records::Evaluations;
use crate::sampler::proposer::Proposer;
use crate::sampler::transitions::Chosen;

/// What a kernel's transition works on: the chain's state and random stream, the potentials,
/// and the Euclidean step size, trajectory length and metric that HMC's adaptation tunes (a
/// kernel with a step size of its own ignores them).
pub(super) struct Ctx<'c> {
    /// The exact potential, which judges every proposal (except under VHMC's approximate rule).
    pub exact: &'c (dyn Potential + Sync),
    /// The method's surrogate side while it proposes; `None` while the chain is exact.
    pub proposer: Option<&'c dyn Proposer>,
    /// Where the chain is; the transition moves it.
    pub state: &'c mut State<Dyn>,
    /// `Ũ` at the state while the surrogate proposes; the transition keeps it current.
    pub proposal_value: &'c mut f64,
    pub rng: &'c mut Pcg64,
    /// HMC's step size, trajectory length and divergence threshold.
    pub hmc: &'c mut Hmc<Dyn>,
    /// The adapted diagonal metric.
    pub metric: &'c DiagonalMetric<Dyn>,
    /// Whether the chain is in warmup (a kernel may skip statistics nothing adapts to).
    pub warmup: bool,
    /// Where the transition counts the potentials and gradients it evaluated.
    pub counts: &'c mut Evaluations,
}

/// What a transition did, for the chain's row and its adaptation.
pub(super) struct Outcome {
    pub transition: Transition,
    /// The acceptance statistic step-size adaptation learns from.
    pub stat: f64,
    /// Stan's tree depth for the row (0 for a fixed-length trajectory, as CmdStan writes for
    /// static HMC).
    pub depth: u32,
}

/// One Markov transition kernel of a chain.
pub(super) trait Kernel {
    /// One transition from `ctx.state`, with its evaluations counted in `ctx.counts`.
    fn transition(&mut self, ctx: Ctx<'_>) -> Result<Outcome>;

    /// The step size of a kernel that adapts its own; `None` for one that runs on the chain's
    /// Euclidean step size (`Ctx::hmc`).
    fn step_size(&self) -> Option<f64> {
        None
    }

    /// Adapts the kernel's own step size to warmup iteration `i`'s (of `warmup`) statistic;
    /// `false` when it has none, so that the chain's Euclidean adaptation learns instead.
    fn adapt(&mut self, _i: usize, _warmup: usize, _stat: f64) -> bool {
        false
    }

    /// What an RMHMC kernel did and cost, for the chain's result and checkpoint.
    fn riemannian(&self) -> Option<RiemannianReport> {
        None
    }

    /// Goes on from a resumed chain's saved RMHMC report.
    fn restore(&mut self, _report: RiemannianReport) {}

    /// Fixes what the kernel runs for every kept draw, once, when warmup ends; what it fixed,
    /// for a kernel whose warmup and sampling differ (surrogate transitions' `W:S`).
    fn end_warmup(&mut self) -> Option<Chosen> {
        None
    }

    /// Goes on sampling with what a resumed chain's [`Self::end_warmup`] fixed.
    fn restore_sampling(&mut self, _chosen: Chosen) {}
}
