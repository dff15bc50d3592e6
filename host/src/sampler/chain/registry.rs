//! Which kernels each method runs: the registry of the chain's kernels ([`super::kernel`]).
//! [`Kernels::for_method`] picks them once, when the chain starts: one while the chain is exact
//! and, if the method has another, one while the surrogate proposes. The chain switches
//! between the two only when its phase changes (the surrogate starts proposing, or the guard
//! sends it back to exact HMC for good).

use super::delayed_nuts::{self, DelayedNuts};
use super::generalized::Riemannian;
use super::kernel::Kernel;
use super::leapfrog::Leapfrog;
use super::mlda::Mlda;
use super::surrogate_transitions::SurrogateTransitions;
use super::work::RiemannianReport;
use crate::metric::RiemannianMetric;
use crate::sampler::config::SampleConfig;
use crate::sampler::method::Method;
use crate::sampler::proposer::Proposer;
use crate::sampler::trajectory::SurrogateSteps;
use crate::sampler::transitions::Chosen;
use crate::{Error, Model, Result};

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
            Method::Mlda(settings) => Box::new(Mlda::new(
                settings.coarse_levels(model, config.memory_limit)?,
                settings.subchains.clone(),
                settings.network.is_some(),
                settings.fine_warmup,
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
            _ => transitions.map(|t| Box::new(SurrogateTransitions::new(t)) as Box<dyn Kernel>),
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

    /// Fixes the proposing kernel for the kept draws, when warmup ends: what it fixed, if it
    /// has a choice to fix ([`Kernel::end_warmup`]).
    pub fn end_warmup(&mut self) -> Option<Chosen> {
        self.proposing.as_mut().and_then(|k| k.end_warmup())
    }

    /// Hands a resumed chain's fixed choice back to its proposing kernel.
    pub fn restore_sampling(&mut self, chosen: Chosen) {
        if let Some(kernel) = self.proposing.as_mut() {
            kernel.restore_sampling(chosen);
        }
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
