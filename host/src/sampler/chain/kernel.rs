//! The seam between a chain and the transitions it makes. A [`Kernel`] turns the chain's state
//! into the next one; the chain around it counts, writes rows, adapts, checkpoints and decides
//! when the surrogate proposes. Which kernels a method runs is decided once, at the chain's
//! start, in [`Kernels::for_method`]: one for when the surrogate does not propose and,
//! if the method has a different one, one for when it does. The chain switches between the two
//! only when its phase changes (the surrogate starts proposing, or the guard sends it back to
//! exact HMC for good).
//!
//! A new kernel is its own module implementing [`Kernel`] plus its line in
//! [`Kernels::for_method`].

use rand_pcg::Pcg64;
use shmc_core::{DiagonalMetric, Dyn, Hmc, Potential, State, Transition};

use super::delayed_nuts::{self, DelayedNuts};
use super::generalized::{Riemannian, RiemannianReport};
use super::leapfrog::Leapfrog;
use super::surrogate_transitions::SurrogateTransitions;
use crate::metric::RiemannianMetric;
use crate::records::Evaluations;
use crate::sampler::config::SampleConfig;
use crate::sampler::method::Method;
use crate::sampler::proposer::Proposer;
use crate::sampler::trajectory::SurrogateSteps;
use crate::{Error, Model, Result};

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
}

/// The kernels of one chain: the one it runs while exact and the one it runs while the
/// surrogate proposes (the same when `proposing` is `None`).
pub(super) struct Kernels<'b> {
    exact: Box<dyn Kernel + 'b>,
    proposing: Option<Box<dyn Kernel + 'b>>,
}

impl<'b> Kernels<'b> {
    /// The kernels of `config`'s method for a chain of `model` starting at `start` with
    /// `proposer` (the method's surrogate side, if it has one). The registry of kernels.
    pub fn for_method<M: Model + ?Sized>(
        model: &'b M,
        config: &SampleConfig,
        start: &[f64],
        proposer: Option<&dyn Proposer>,
    ) -> Result<Self> {
        let max_energy_error = config.max_energy_error;
        let exact: Box<dyn Kernel + 'b> = match &config.method {
            Method::Rmhmc(settings) => Box::new(Riemannian::new(
                settings,
                max_energy_error,
                Some(model_metric(model, start)?),
            )?),
            _ => Box::new(Leapfrog),
        };
        let surrogate = config.method.surrogate();
        let judged = !proposer.is_some_and(|p| p.approximate());
        let nuts_trees = surrogate.is_some_and(|s| s.trajectory == SurrogateSteps::Nuts);
        let transitions = surrogate.and_then(|s| s.transitions).filter(|_| judged);
        let proposing: Option<Box<dyn Kernel + 'b>> = match &config.method {
            Method::RnsRmhmc(_, settings) => {
                Some(Box::new(Riemannian::new(settings, max_energy_error, None)?))
            }
            _ if nuts_trees && judged => Some(Box::new(DelayedNuts::new(
                delayed_nuts::MAX_DEPTH,
                max_energy_error,
            ))),
            _ => transitions.map(|k| Box::new(SurrogateTransitions::new(k)) as Box<dyn Kernel>),
        };
        Ok(Self { exact, proposing })
    }

    /// The kernel that runs while the surrogate proposes (`proposing`) or not.
    pub fn get(&mut self, proposing: bool) -> &mut (dyn Kernel + 'b) {
        match self.proposing.as_mut().filter(|_| proposing) {
            Some(kernel) => kernel.as_mut(),
            None => self.exact.as_mut(),
        }
    }

    /// [`Self::get`], to read.
    pub fn peek(&self, proposing: bool) -> &(dyn Kernel + 'b) {
        match self.proposing.as_ref().filter(|_| proposing) {
            Some(kernel) => kernel.as_ref(),
            None => self.exact.as_ref(),
        }
    }

    /// Whether the exact phase runs on the chain's Euclidean step size and metric (which the
    /// chain then finds and adapts).
    pub fn euclidean(&self) -> bool {
        self.exact.step_size().is_none()
    }

    /// The RMHMC report of whichever kernel keeps one.
    pub fn riemannian(&self) -> Option<RiemannianReport> {
        self.exact
            .riemannian()
            .or_else(|| self.proposing.as_ref().and_then(|k| k.riemannian()))
    }

    /// Hands a resumed chain's RMHMC report to its kernels.
    pub fn restore(&mut self, report: RiemannianReport) {
        self.exact.restore(report);
        if let Some(kernel) = self.proposing.as_mut() {
            kernel.restore(report);
        }
    }
}

/// RMHMC's metric: the model's own at the chain's start, or why there is none.
fn model_metric<'b, M: Model + ?Sized>(
    model: &'b M,
    start: &[f64],
) -> Result<Box<dyn RiemannianMetric + 'b>> {
    model.riemannian_metric(start).ok_or_else(|| {
        Error::setting(
            "method",
            "rmhmc needs the model's Riemannian metric, and this model offers none at the \
             chain's start",
        )
    })
}
