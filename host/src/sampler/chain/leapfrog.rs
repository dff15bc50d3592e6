//! HMC's kernel ([`Leapfrog`]) and the dynamics it runs: exact HMC, or surrogate trajectories
//! judged by the exact `U` ([`Judged`]), or (VHMC's published rule) judged by the surrogate
//! itself.
//!
//! # The surrogate's own acceptance
//! Dual averaging aims at an acceptance rate that measures the leapfrog's *integration* error.
//! Under surrogate proposals the exact MH acceptance also carries the surrogate's *fitting*
//! error, which no step size removes: adapting to it would shrink the step size until the
//! chain crawls. So while a surrogate proposes, adaptation is fed the acceptance the same
//! trajectory would have under the surrogate's own Hamiltonian `Ũ + K`,
//! `min(1, exp(−ΔH̃))` with `ΔH̃ = ΔH − ΔU + ΔŨ` ([`surrogate_accept_stat`]), which [`Judged`]
//! makes available by recording `U` and `Ũ` at the end point. The MH decision itself always
//! uses the exact `ΔH`.

use std::cell::{Cell, RefCell};

use rand_pcg::Pcg64;
use shmc_core::{DiagonalMetric, Dyn, Dynamics, Exact, Hmc, Potential, State, Transition};

use super::kernel::{Ctx, Kernel, Outcome};
use crate::Result;
use crate::sampler::proposer::{EndGradient, Proposer};

/// `U` and `Ũ` at the latest end point of a judged trajectory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EndPoint {
    /// The exact potential.
    pub exact: f64,
    /// The proposal potential.
    pub proposal: f64,
}

impl Default for EndPoint {
    fn default() -> Self {
        Self {
            exact: f64::NAN,
            proposal: f64::NAN,
        }
    }
}

/// Surrogate trajectories judged by the exact `U`. The end point evaluates `U` (fused with
/// `∇U` into `record` for a method that learns from the exact gradients of accepted states:
/// a fraction of a pass more instead of a separate gradient pass) and `Ũ` with its gradient,
/// and keeps both potentials in `end`.
///
/// Generic over the proposal's type: a fitted surrogate's proposal is a
/// [`Fallback`](crate::surrogates::Fallback), whose lookup then compiles into the leapfrog
/// ([`hmc_transition`]): one dynamic call per step (to the surrogate's kind) instead of two.
pub struct Judged<'a, P: Potential + ?Sized = dyn Potential> {
    /// The exact potential (MH step).
    pub target: &'a dyn Potential,
    /// The potential whose gradient drives the leapfrog.
    pub proposal: &'a P,
    /// Where the end point's exact gradient goes, if the method learns from it.
    pub record: Option<&'a RefCell<EndGradient>>,
    /// The end point's `U` and `Ũ`.
    pub end: &'a Cell<EndPoint>,
}

impl<P: Potential + ?Sized> Dynamics for Judged<'_, P> {
    fn dim(&self) -> usize {
        self.target.dim()
    }

    fn proposal_gradient(&self, q: &[f64], grad: &mut [f64]) {
        self.proposal.gradient(q, grad);
    }

    fn proposal_gradient_ref<'s>(&'s self, q: &[f64], buf: &'s mut [f64]) -> &'s [f64] {
        self.proposal.gradient_ref(q, buf)
    }

    fn end_point(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let exact = match self.record {
            Some(record) => {
                let mut record = record.borrow_mut();
                let EndGradient { position, gradient } = &mut *record;
                position.clear();
                position.extend_from_slice(q);
                gradient.resize(q.len(), 0.0);
                self.target.value_and_gradient(q, gradient)
            }
            None => self.target.value(q),
        };
        let proposal = self.proposal.value_and_gradient(q, grad);
        self.end.set(EndPoint { exact, proposal });
        exact
    }
}

/// HMC's kernel: a fixed-length leapfrog trajectory on the chain's Euclidean step size and
/// metric, under whichever dynamics proposes ([`hmc_transition`]).
pub struct Leapfrog;

impl Kernel for Leapfrog {
    /// Returns, while the surrogate proposes with the exact `U` judging, the surrogate's own
    /// acceptance as the statistic (in sampling, where nothing adapts, it skips that `exp`, a
    /// noticeable part of a cheap model's iteration, and returns the exact one).
    fn transition(&mut self, ctx: Ctx<'_>) -> Result<Outcome> {
        let (u0, v0) = (ctx.state.potential, *ctx.proposal_value);
        let end = Cell::new(EndPoint::default());
        let t = hmc_transition(
            ctx.hmc,
            ctx.state,
            ctx.metric,
            ctx.rng,
            ctx.exact,
            ctx.proposer,
            &end,
        );
        let proposed = ctx.proposer.is_some();
        let approximate = ctx.proposer.is_some_and(|p| p.approximate());
        let mut stat = t.accept_prob;
        if proposed && !approximate {
            let end = end.get();
            if t.accepted {
                *ctx.proposal_value = end.proposal;
            }
            if ctx.warmup {
                stat = surrogate_accept_stat(&t, u0, v0, end).unwrap_or(t.accept_prob);
            }
        }
        ctx.counts.record(&t, proposed, !approximate);
        Ok(Outcome {
            transition: t,
            stat,
            depth: 0,
        })
    }
}

/// One HMC transition of `hmc` from `state`: exact HMC, or while `proposer` proposes its
/// trajectories judged by the exact `U` (or by the surrogate itself under VHMC's approximate
/// rule). `end` receives the end point's potentials of judged trajectories.
///
/// The dynamics are chosen once per transition and the transition is compiled for each kind
/// ([`Exact`], [`Judged`]), so that the leapfrog calls their gradients directly: called through
/// `dyn Dynamics`, every leapfrog step of a cheap model paid a dynamic call and a frame more.
pub fn hmc_transition(
    hmc: &mut Hmc<Dyn>,
    state: &mut State<Dyn>,
    metric: &DiagonalMetric<Dyn>,
    rng: &mut Pcg64,
    model: &dyn Potential,
    proposer: Option<&dyn Proposer>,
    end: &Cell<EndPoint>,
) -> Transition {
    let Some(proposer) = proposer else {
        return hmc.transition(state, &Exact(model), metric, rng);
    };
    let Some(proposal) = proposer.proposal() else {
        return hmc.transition(state, &Exact(model), metric, rng);
    };
    if proposer.approximate() {
        return hmc.transition(state, &Exact(proposal), metric, rng);
    }
    let record = proposer.end_gradient();
    match proposer.fallback() {
        Some(fallback) => {
            let judged = Judged {
                target: model,
                proposal: fallback,
                record,
                end,
            };
            hmc.transition(state, &judged, metric, rng)
        }
        None => {
            let judged = Judged {
                target: model,
                proposal,
                record,
                end,
            };
            hmc.transition(state, &judged, metric, rng)
        }
    }
}

/// The acceptance statistic of transition `t` under the surrogate's own Hamiltonian, given the
/// exact and surrogate potentials at its start (`u0`, `v0`) and end point (`end`); `None` when
/// the surrogate has no finite value there (a force grid outside its cells), so that the exact
/// statistic is used instead.
pub fn surrogate_accept_stat(t: &Transition, u0: f64, v0: f64, end: EndPoint) -> Option<f64> {
    let error = t.energy_error - (end.exact - u0) + (end.proposal - v0);
    if !(v0.is_finite() && end.proposal.is_finite()) {
        return None;
    }
    Some(if error.is_finite() {
        (-error).exp().min(1.0)
    } else {
        0.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quadratic `U = ½ a x²`.
    struct Quadratic(f64);
    impl Potential for Quadratic {
        fn dim(&self) -> usize {
            1
        }
        fn value(&self, q: &[f64]) -> f64 {
            0.5 * self.0 * q[0] * q[0]
        }
        fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
            g[0] = self.0 * q[0];
            self.value(q)
        }
    }

    /// With the surrogate equal to the target, its own acceptance is the exact one; with a
    /// surrogate that differs only by a constant, too (a constant changes no force).
    #[test]
    fn surrogate_statistic_is_the_exact_one_for_a_perfect_surrogate() {
        let (target, offset) = (Quadratic(2.0), 3.5);
        let end = Cell::new(EndPoint::default());
        let judged = Judged {
            target: &target,
            proposal: &target,
            record: None,
            end: &end,
        };
        let mut g = [0.0];
        let (q0, q1) = (0.3, -0.4);
        let u0 = target.value(&[q0]);
        let u1 = judged.end_point(&[q1], &mut g);
        assert_eq!(g[0], 2.0 * q1);
        let t = Transition {
            accepted: false,
            accept_prob: 0.0,
            energy: 0.0,
            energy_error: 0.7,
            divergent: false,
            steps: 3,
        };
        let exact = (-0.7f64).exp();
        let same = surrogate_accept_stat(&t, u0, u0, end.get()).unwrap();
        assert!((same - exact).abs() < 1e-15);
        let shifted = EndPoint {
            exact: u1,
            proposal: u1 + offset,
        };
        let constant = surrogate_accept_stat(&t, u0, u0 + offset, shifted).unwrap();
        assert!((constant - exact).abs() < 1e-14);
        // A surrogate whose rise from start to end is 1 lower than the target's accepts with
        // exp(−(0.7 − 1)) = 1.
        let lower = EndPoint {
            exact: u1,
            proposal: u1 - 1.0,
        };
        assert_eq!(surrogate_accept_stat(&t, u0, u0, lower), Some(1.0));
        let nowhere = EndPoint {
            exact: u1,
            proposal: f64::NAN,
        };
        assert_eq!(surrogate_accept_stat(&t, u0, u0, nowhere), None);
    }
}
