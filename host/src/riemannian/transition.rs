//! One RMHMC transition: `p ~ N(0, G(q))`, `L` generalized leapfrog steps under the proposal
//! potential and the metric, and Metropolis–Hastings with the *exact* Hamiltonian
//! `H = U(q) + ½ log det G(q) + ½ pᵀG(q)⁻¹p` (exact `U`, the same metric).
//!
//! RMHMC is the transition with the exact potential proposing; RNS-RMHMC the same transition
//! with the surrogate's potential and its Hessian metric driving the dynamics. The generalized
//! leapfrog is reversible and volume preserving for any `U` and `G` (steps that fail either are
//! rejected deterministically, the same way forwards and backwards), so the exact MH step keeps
//! the chain exact whatever the surrogate.

use rand::Rng;
use serde::{Deserialize, Serialize};
use shmc_core::Potential;
use shmc_core::random::{fill_standard_normal, uniform};

use super::integrator::{GeneralizedLeapfrog, StepFailure, Trajectory};
use super::{MetricAt, RiemannianMetric};
use crate::{Error, Result};

/// RMHMC with a fixed trajectory length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rmhmc {
    /// The integrator.
    pub integrator: GeneralizedLeapfrog,
    /// The number of steps `L` per trajectory.
    pub steps: u32,
    /// An energy error above this marks the trajectory divergent (Stan's 1000).
    pub max_energy_error: f64,
    /// Also report the acceptance statistic under the proposal's own Hamiltonian, `Ũ` in place
    /// of `U` with the same metric ([`RmhmcTransition::proposal_accept_stat`]), at the cost of
    /// the proposal's potential at both ends: what step-size adaptation learns from while a
    /// surrogate proposes, as for HMC (`sampler::chain::dynamics`): the exact acceptance also
    /// carries the surrogate's fitting error, which no step size removes.
    pub proposal_statistic: bool,
}

/// Why a trajectory was divergent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Divergence {
    /// A step failed.
    Step(StepFailure),
    /// The energy error exceeded the threshold.
    EnergyError,
}

/// Counts of the integrator's work and failures, summed over transitions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RmhmcCounts {
    /// Fixed-point iterations (both implicit equations, including the reverse checks).
    pub fixed_point_iterations: u64,
    /// Generalized leapfrog steps taken (each failed step counted once).
    pub steps: u64,
    /// Trajectories ended by a fixed-point solve that did not converge.
    pub not_converged: u64,
    /// Trajectories ended by a step that failed the reversibility check.
    pub not_reversible: u64,
    /// Trajectories ended by a metric that was not positive definite.
    pub not_positive_definite: u64,
    /// Trajectories ended by a non-finite value.
    pub non_finite: u64,
}

impl RmhmcCounts {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: &RmhmcCounts) {
        self.fixed_point_iterations += other.fixed_point_iterations;
        self.steps += other.steps;
        self.not_converged += other.not_converged;
        self.not_reversible += other.not_reversible;
        self.not_positive_definite += other.not_positive_definite;
        self.non_finite += other.non_finite;
    }

    /// Counts a trajectory ended by the step failure `f`.
    fn count_failure(&mut self, f: StepFailure) {
        *match f {
            StepFailure::NotPositiveDefinite => &mut self.not_positive_definite,
            StepFailure::NotConverged => &mut self.not_converged,
            StepFailure::NotReversible => &mut self.not_reversible,
            StepFailure::NonFinite => &mut self.non_finite,
        } += 1;
    }
}

/// The outcome of one transition.
#[derive(Clone, Debug, PartialEq)]
pub struct RmhmcTransition {
    /// Where the chain is after the transition.
    pub position: Vec<f64>,
    /// The exact `U` there.
    pub potential: f64,
    /// Whether the proposal was accepted.
    pub accepted: bool,
    /// `H(end) − H(start)` (NaN when the trajectory failed before its end).
    pub energy_error: f64,
    /// `H` where the chain is after the transition (the end point if accepted, else the start
    /// with the momentum drawn for it): finite whenever the transition returns.
    pub energy: f64,
    /// Why the trajectory was divergent, if it was.
    pub divergence: Option<Divergence>,
    /// `min(1, exp(−ΔH̃))` with `H̃ = Ũ + ½ log det G + ½ pᵀG⁻¹p` the proposal's own Hamiltonian,
    /// when [`Rmhmc::proposal_statistic`] asks for it (0 where a step failed); NaN otherwise.
    pub proposal_accept_stat: f64,
    /// This transition's counts.
    pub counts: RmhmcCounts,
}

/// `U + ½ log det G + ½ pᵀG⁻¹p`.
fn hamiltonian(potential: f64, at: &dyn MetricAt, p: &[f64]) -> f64 {
    let mut u = vec![0.0; p.len()];
    at.solve(p, &mut u);
    let kinetic: f64 = 0.5 * u.iter().zip(p).map(|(a, b)| a * b).sum::<f64>();
    potential + 0.5 * at.log_det() + kinetic
}

impl Rmhmc {
    /// A validated transition with `steps` steps of `integrator`.
    pub fn new(integrator: GeneralizedLeapfrog, steps: u32) -> Result<Self> {
        integrator.validate()?;
        if steps == 0 {
            return Err(Error::invalid("a trajectory needs at least one step"));
        }
        Ok(Self {
            integrator,
            steps,
            max_energy_error: 1000.0,
            proposal_statistic: false,
        })
    }

    /// One transition from `q`, where the exact potential is `potential` (`target.value(q)`,
    /// cached by the caller). `proposal` and `metric` drive the dynamics; `target` and the same
    /// `metric` judge. An error (never a panic) if the sizes disagree or the metric is not
    /// positive definite at `q` itself, where no chain can be.
    pub fn transition<R: Rng + ?Sized>(
        &self,
        target: &dyn Potential,
        proposal: &dyn Potential,
        metric: &dyn RiemannianMetric,
        q: &[f64],
        potential: f64,
        rng: &mut R,
    ) -> Result<RmhmcTransition> {
        check_dimensions(target, proposal, metric, q.len())?;
        let mut counts = RmhmcCounts::default();
        let start_proposal = if self.proposal_statistic {
            proposal.value(q)
        } else {
            f64::NAN
        };
        let mut point = Trajectory::start(proposal, metric, q).map_err(|failure| {
            Error::invalid(format!("RMHMC cannot start at this point: {failure:?}"))
        })?;
        let mut p = draw_momentum(&*point.metric, q.len(), rng);
        let origin = Origin {
            position: q,
            potential,
            energy: hamiltonian(potential, &*point.metric, &p),
        };

        if let Err(f) = self.integrate(proposal, metric, &mut point, &mut p, &mut counts) {
            counts.count_failure(f);
            let statistic = self.failed_statistic();
            return Ok(origin.stay(f64::NAN, Some(Divergence::Step(f)), statistic, counts));
        }
        let end_potential = target.value(&point.position);
        let h1 = hamiltonian(end_potential, &*point.metric, &p);
        let energy_error = h1 - origin.energy;
        let proposal_accept_stat = self.proposal_accept_stat(
            proposal,
            &point.position,
            energy_error,
            end_potential - potential,
            start_proposal,
        );
        let divergence = self.divergence(energy_error, &mut counts);
        if divergence.is_some() {
            return Ok(origin.stay(energy_error, divergence, proposal_accept_stat, counts));
        }
        // Draw the uniform even when acceptance is certain, so the random stream does not
        // depend on the energy error.
        let accepted = uniform(rng) < (-energy_error).exp();
        Ok(if accepted {
            RmhmcTransition {
                position: point.position,
                potential: end_potential,
                accepted,
                energy_error,
                energy: h1,
                divergence: None,
                proposal_accept_stat,
                counts,
            }
        } else {
            origin.stay(energy_error, None, proposal_accept_stat, counts)
        })
    }

    /// `L` generalized leapfrog steps of `(point, p)` under the proposal potential and the
    /// metric, counted in `counts`; the first step that fails ends the trajectory.
    fn integrate<'m>(
        &self,
        proposal: &dyn Potential,
        metric: &'m dyn RiemannianMetric,
        point: &mut Trajectory<'m>,
        p: &mut [f64],
        counts: &mut RmhmcCounts,
    ) -> std::result::Result<(), StepFailure> {
        let mut outcome = Ok(());
        for _ in 0..self.steps {
            counts.steps += 1;
            if let Err(f) = self.integrator.step(proposal, metric, point, p) {
                outcome = Err(f);
                break;
            }
        }
        counts.fixed_point_iterations = point.iterations;
        outcome
    }

    /// Why a trajectory whose steps all succeeded is divergent, if it is: a non-finite energy
    /// error (counted in `counts`) or one above [`Rmhmc::max_energy_error`].
    fn divergence(&self, energy_error: f64, counts: &mut RmhmcCounts) -> Option<Divergence> {
        if !energy_error.is_finite() {
            counts.non_finite += 1;
            Some(Divergence::Step(StepFailure::NonFinite))
        } else if energy_error > self.max_energy_error {
            Some(Divergence::EnergyError)
        } else {
            None
        }
    }

    /// The proposal's acceptance statistic of a trajectory that failed: nothing accepted, if
    /// it was asked for (NaN otherwise).
    fn failed_statistic(&self) -> f64 {
        if self.proposal_statistic {
            0.0
        } else {
            f64::NAN
        }
    }

    /// `min(1, exp(−ΔH̃))` for a trajectory that ended at `end` with the energy error
    /// `energy_error` and the exact potential's change `potential_change`, where the proposal's
    /// potential at the start was `start_proposal`: [`RmhmcTransition::proposal_accept_stat`].
    fn proposal_accept_stat(
        &self,
        proposal: &dyn Potential,
        end: &[f64],
        energy_error: f64,
        potential_change: f64,
        start_proposal: f64,
    ) -> f64 {
        if !self.proposal_statistic {
            return f64::NAN;
        }
        // ΔH̃ = ΔH − ΔU + ΔŨ: the kinetic energy and log-determinant are the same in both.
        let error = energy_error - potential_change + (proposal.value(end) - start_proposal);
        if error.is_finite() {
            (-error).exp().min(1.0)
        } else {
            self.failed_statistic()
        }
    }
}

/// Errors unless the target, the proposal and the metric all have the point's dimension `d`.
fn check_dimensions(
    target: &dyn Potential,
    proposal: &dyn Potential,
    metric: &dyn RiemannianMetric,
    d: usize,
) -> Result<()> {
    for (what, dim) in [
        ("target", target.dim()),
        ("proposal", proposal.dim()),
        ("metric", metric.dim()),
    ] {
        if dim != d {
            return Err(Error::invalid(format!(
                "RMHMC: the {what} has dimension {dim}, the point {d}"
            )));
        }
    }
    Ok(())
}

/// A momentum `p = L z ~ N(0, G(q))`, `z` standard normal, with `L` the metric's square root.
fn draw_momentum<R: Rng + ?Sized>(at: &dyn MetricAt, d: usize, rng: &mut R) -> Vec<f64> {
    let mut z = vec![0.0; d];
    fill_standard_normal(rng, &mut z);
    let mut p = vec![0.0; d];
    at.factor_times(&z, &mut p);
    p
}

/// Where a transition starts, and where the chain stays when the proposal is rejected.
struct Origin<'q> {
    /// The point `q`.
    position: &'q [f64],
    /// The exact `U(q)`.
    potential: f64,
    /// `H` at `q` with the momentum drawn there.
    energy: f64,
}

impl Origin<'_> {
    /// The transition that stays here (a rejection, divergent or not).
    fn stay(
        &self,
        energy_error: f64,
        divergence: Option<Divergence>,
        proposal_accept_stat: f64,
        counts: RmhmcCounts,
    ) -> RmhmcTransition {
        RmhmcTransition {
            position: self.position.to_vec(),
            potential: self.potential,
            accepted: false,
            energy_error,
            energy: self.energy,
            divergence,
            proposal_accept_stat,
            counts,
        }
    }
}
