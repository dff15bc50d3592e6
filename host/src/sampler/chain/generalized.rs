//! RMHMC's kernel, the generalized leapfrog ([`Riemannian`]): RMHMC runs it throughout under
//! the model's metric; RNS-RMHMC runs exact HMC until its surrogate proposes, then this kernel
//! on the network's potential and metric. Both are judged by the exact `U`.
//!
//! A generalized leapfrog step that fails (a fixed-point solve that does not converge, a step
//! that does not integrate back to its start, a metric that is not positive definite) rejects
//! the transition as divergent, with its reason counted in [`RiemannianReport`].

use std::time::Instant;

use nalgebra::DVector;
use rand::Rng;
use shmc_core::{DualAveraging, Dyn, Potential, State, Transition};

use crate::riemannian::{
    MetricWork, NetworkDiagonalSoftAbs, NetworkSoftAbs, RiemannianMetric, Rmhmc, Timed,
};
use crate::sampler::method::RmhmcSettings;
use crate::sampler::method::StepSize;
use crate::surrogates::{NetworkForm, Surrogate};

use super::kernel::{Ctx, Kernel, Outcome};
use super::work::RiemannianReport;
use crate::{Error, Result};

/// The step size an adapted RMHMC starts from: its metric carries the posterior's scales, so
/// unit steps are the natural order (the papers' fixed ones are 0.4 to 0.8).
const INITIAL_STEP_SIZE: f64 = 1.0;

/// RMHMC's kernel: the generalized leapfrog under the model's metric (RMHMC) or, when
/// `model_metric` is `None`, under the surrogate network's, made per transition (RNS-RMHMC).
pub struct Riemannian<'b> {
    model_metric: Option<Box<dyn RiemannianMetric + 'b>>,
    leapfrog: Generalized,
}

/// The generalized leapfrog of one chain: its settings, its step size (adapted on its own
/// acceptance, never the HMC phase's: the metrics differ), and its work so far.
struct Generalized {
    settings: RmhmcSettings,
    max_energy_error: f64,
    dual: Option<DualAveraging>,
    work: MetricWork,
    report: RiemannianReport,
}

impl<'b> Riemannian<'b> {
    /// The kernel of `settings`, with the run's divergence threshold, under `model_metric` or
    /// (`None`) the surrogate network's.
    pub fn new(
        settings: &RmhmcSettings,
        max_energy_error: f64,
        model_metric: Option<Box<dyn RiemannianMetric + 'b>>,
    ) -> Result<Self> {
        Ok(Self {
            model_metric,
            leapfrog: Generalized::new(settings, max_energy_error)?,
        })
    }
}

impl Kernel for Riemannian<'_> {
    /// The exact or (while it proposes) the surrogate's potential under the model's or the
    /// network's metric, judged by the exact `U`.
    fn transition(&mut self, ctx: Ctx<'_>) -> Result<Outcome> {
        let proposal = ctx.proposer.and_then(|p| p.proposal()).unwrap_or(ctx.exact);
        let network_metric;
        let metric: &dyn RiemannianMetric = match &self.model_metric {
            Some(metric) => metric.as_ref(),
            None => {
                let surrogate = ctx.proposer.and_then(|p| p.surrogate());
                network_metric = self.leapfrog.network_metric(surrogate)?;
                network_metric.as_ref()
            }
        };
        let surrogate = ctx.proposer.is_some();
        let (transition, stat) = self.leapfrog.transition(
            ctx.exact, proposal, metric, ctx.state, ctx.rng, ctx.warmup, surrogate,
        )?;
        let per_step = self.leapfrog.gradients_per_step();
        ctx.counts
            .record_generalized(&transition, surrogate, per_step);
        Ok(Outcome {
            transition,
            stat,
            depth: 0,
        })
    }

    fn step_size(&self) -> Option<f64> {
        Some(self.leapfrog.report.step_size)
    }

    /// Always its own: RMHMC's step size never learns from (nor feeds) HMC's adaptation.
    fn adapt(&mut self, i: usize, warmup: usize, stat: f64) -> bool {
        self.leapfrog.adapt(i, warmup, stat);
        true
    }

    fn riemannian(&self) -> Option<RiemannianReport> {
        Some(self.leapfrog.report)
    }

    fn restore(&mut self, report: RiemannianReport) {
        self.leapfrog.report = report;
    }
}

impl Generalized {
    /// The generalized leapfrog of `settings`, with the run's divergence threshold.
    fn new(settings: &RmhmcSettings, max_energy_error: f64) -> Result<Self> {
        let (step_size, dual) = match settings.step_size {
            StepSize::Fixed(eps) => (eps, None),
            StepSize::Adapt { target } => (
                INITIAL_STEP_SIZE,
                Some(DualAveraging::new(INITIAL_STEP_SIZE, target)?),
            ),
        };
        Ok(Self {
            settings: settings.clone(),
            max_energy_error,
            dual,
            work: MetricWork::default(),
            report: RiemannianReport {
                step_size,
                ..RiemannianReport::default()
            },
        })
    }

    /// Gradient evaluations per generalized leapfrog step: the force at its end, and at its
    /// start again when the step is integrated back to check it.
    fn gradients_per_step(&self) -> u64 {
        1 + u64::from(self.settings.reverse_tolerance.is_some())
    }

    /// The metric of the surrogate's network (RNS-RMHMC): its Hessian under SoftAbs, whole or
    /// its diagonal. An error if the surrogate has no network (a grid).
    fn network_metric<'a>(
        &self,
        surrogate: Option<&'a dyn Surrogate>,
    ) -> Result<Box<dyn RiemannianMetric + 'a>> {
        let NetworkForm { network, shift } =
            surrogate.and_then(|s| s.network()).ok_or_else(|| {
                Error::invalid("rns-rmhmc's metric is a network's Hessian: its surrogate has none")
            })?;
        let alpha = self.settings.softabs_alpha;
        Ok(if self.settings.diagonal {
            Box::new(NetworkDiagonalSoftAbs::new(network, alpha)?.shifted(shift)?)
        } else {
            Box::new(NetworkSoftAbs::new(network, alpha)?.shifted(shift)?)
        })
    }

    /// One transition from `state`: the dynamics of `proposal` and `metric`, judged by `target`
    /// with the same metric. An accepted move updates the position and the exact `U` the state
    /// caches; its gradient, which only HMC's leapfrog uses, is left unknown (NaN) until a
    /// return to that kernel refreshes it.
    ///
    /// Returns the transition and the statistic step-size adaptation learns from: where
    /// `surrogate` proposes during an adapting warmup, the acceptance under the surrogate's own
    /// Hamiltonian (as RNS-HMC's surrogate warmup adapts, see `super::dynamics`), else the
    /// exact acceptance.
    #[allow(clippy::too_many_arguments)]
    fn transition<R: Rng + ?Sized>(
        &mut self,
        target: &dyn Potential,
        proposal: &dyn Potential,
        metric: &dyn RiemannianMetric,
        state: &mut State<Dyn>,
        rng: &mut R,
        warmup: bool,
        surrogate: bool,
    ) -> Result<(Transition, f64)> {
        let steps = self.settings.steps.draw(rng);
        let mut rmhmc = Rmhmc::new(self.settings.integrator(self.report.step_size), steps)?;
        rmhmc.max_energy_error = self.max_energy_error;
        rmhmc.proposal_statistic = surrogate && warmup && self.dual.is_some();
        let (evaluations, products) = (self.work.evaluations(), self.work.products());
        let metric_seconds = self.work.seconds();
        let clock = Instant::now();
        let timed = Timed {
            metric,
            work: &self.work,
        };
        let t = rmhmc.transition(
            target,
            proposal,
            &timed,
            state.position.as_slice(),
            state.potential,
            rng,
        )?;
        let part = if warmup {
            &mut self.report.warmup
        } else {
            &mut self.report.sampling
        };
        part.seconds += clock.elapsed().as_secs_f64();
        part.transitions += 1;
        part.counts.add(&t.counts);
        part.metric_evaluations += self.work.evaluations() - evaluations;
        part.metric_products += self.work.products() - products;
        part.metric_seconds += self.work.seconds() - metric_seconds;
        let divergent = t.divergence.is_some();
        let accept_prob = if divergent || !t.energy_error.is_finite() {
            0.0
        } else {
            (-t.energy_error).exp().min(1.0)
        };
        let statistic = if rmhmc.proposal_statistic {
            t.proposal_accept_stat
        } else {
            accept_prob
        };
        if t.accepted {
            state.position = DVector::from_vec(t.position);
            state.potential = t.potential;
            state.gradient.fill(f64::NAN);
        }
        let transition = Transition {
            accepted: t.accepted,
            accept_prob,
            energy: t.energy,
            energy_error: t.energy_error,
            divergent,
            steps: u32::try_from(t.counts.steps).unwrap_or(u32::MAX),
        };
        Ok((transition, statistic))
    }

    /// Adapts the step size to warmup iteration `i`'s (of `warmup`) acceptance statistic, when
    /// it is adapted; the final step size after the last one.
    fn adapt(&mut self, i: usize, warmup: usize, accept_stat: f64) {
        if let Some(dual) = self.dual.as_mut() {
            self.report.step_size = if i + 1 == warmup {
                dual.update(accept_stat);
                dual.final_step_size()
            } else {
                dual.update(accept_stat)
            };
        }
    }
}
