//! Surrogate transitions (Liu 2001, *Monte Carlo Strategies in Scientific Computing*, §9.4): `k`
//! HMC transitions on the surrogate alone, each with its own Metropolis–Hastings step on `Ũ`,
//! then one exact judgement of where they ended. From `x` the first stage ends at `y`; the
//! second accepts it with probability `min(1, exp(−(U − Ũ)(y) + (U − Ũ)(x)))`: one exact `U`,
//! none when the first stage ended where it began.
//!
//! Why the chain targets the exact `π ∝ exp(−U)`: each surrogate transition is reversible with
//! respect to `π̃ ∝ exp(−Ũ)` (HMC with its own MH step, its trajectory length drawn
//! independently of the state), so `k` of them are too (a power of a self-adjoint kernel is
//! self-adjoint): `π̃(x)K̃ᵏ(x, y) = π̃(y)K̃ᵏ(y, x)`. The second stage is then the Metropolis–
//! Hastings correction of a proposal `K̃ᵏ` from `π̃` to `π` (Christen and Fox 2005), as
//! [`super::delayed_nuts`] does for one NUTS tree. `k` is a setting fixed for the run, never
//! chosen from the state: a `k` that looked at the state would break the reversibility.
//!
//! Why: a judged trajectory costs one exact `U` per iteration however far it moves; `k`
//! surrogate transitions move about `k` times as far for the same exact `U`, so a model whose
//! `U` is expensive pays fewer exact evaluations per effective draw while its surrogate is good.

use shmc_core::random::uniform;
use shmc_core::{DiagonalMetric, Dyn, Exact, Hmc, Potential, State, Transition};

use super::kernel::{Ctx, Kernel, Outcome};
use crate::sampler::proposer::EndGradient;
use crate::sampler::transitions::{Chosen, Measured, Transitions};
use crate::{Error, Result};
use rand_pcg::Pcg64;
use std::cell::RefCell;
use std::time::Instant;

/// `k` HMC transitions on the surrogate per exact judgement: warmup's `k` until
/// [`Self::end_warmup`] fixes sampling's, once, for every kept draw.
pub struct SurrogateTransitions {
    k: u32,
    setting: Transitions,
    /// Under `auto`, until warmup ends: the costs and acceptance sampling's `k` is chosen from.
    measuring: Option<Measured>,
    /// The first stage's chain (reused: no allocation per transition).
    inner: Option<State<Dyn>>,
}

/// What one surrogate-transitions step did.
pub struct Stepped {
    /// The second stage's decision, with the first stage's leapfrog steps.
    pub transition: Transition,
    /// The first stage's mean acceptance on `Ũ`, what the step size adapts to.
    pub own_accept: f64,
    /// Whether the exact `U` was evaluated (not when the first stage ended where it began).
    pub exact_evaluated: bool,
}

/// What the first stage did: its leapfrog steps, mean own acceptance, whether it diverged,
/// and the energy where it ended.
struct FirstStage {
    steps: u32,
    own_accept: f64,
    divergent: bool,
    energy: f64,
}

impl SurrogateTransitions {
    /// The kernel of `setting`'s surrogate transitions per exact judgement (each `k ≥ 1`),
    /// warmup's `k` first.
    pub fn new(setting: Transitions) -> Self {
        Self {
            k: setting.warmup(),
            setting,
            measuring: (setting == Transitions::Auto).then(Measured::default),
            inner: None,
        }
    }

    /// The transitions per judgement now.
    #[cfg(test)]
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Fixes sampling's `k` for every kept draw, once, when warmup ends (after the last
    /// adaptation): the setting's, or under `auto` what [`Measured::choose`] picks from
    /// warmup's measurements, which then stop. Never from the state: the kernel stays one fixed
    /// reversible kernel for all kept draws.
    pub fn end_warmup(&mut self) -> Chosen {
        let warmup = self.setting.warmup();
        let measured = self.measuring.take();
        self.k = match (self.setting, &measured) {
            (Transitions::Fixed { sampling, .. }, _) => sampling,
            (Transitions::Auto, Some(m)) => m.choose(),
            (Transitions::Auto, None) => self.k,
        };
        Chosen {
            warmup,
            sampling: self.k,
            measured,
        }
    }

    /// Goes on sampling with a resumed chain's `chosen` transitions.
    pub fn restore(&mut self, chosen: Chosen) {
        self.measuring = None;
        self.k = chosen.sampling;
    }

    /// One step from `state` (where `U` is `state.potential`, `Ũ` is `*proposal_value`, and
    /// the gradient is `Ũ`'s): `k` transitions of `hmc` on `proposal` under `metric`, judged by
    /// `target`; `record` receives the exact gradient at a judged end point, for a method that
    /// learns from it.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &mut self,
        state: &mut State<Dyn>,
        proposal_value: &mut f64,
        target: &dyn Potential,
        proposal: &dyn Potential,
        hmc: &mut Hmc<Dyn>,
        metric: &DiagonalMetric<Dyn>,
        rng: &mut Pcg64,
        record: Option<&RefCell<EndGradient>>,
    ) -> Stepped {
        let clock = self.measuring.is_some().then(Instant::now);
        let inner = self.inner.get_or_insert_with(|| state.clone());
        let first = first_stage(
            inner,
            state,
            *proposal_value,
            self.k,
            proposal,
            hmc,
            metric,
            rng,
        );
        let k = self.k;
        measure(&mut self.measuring, |m| m.transitions_ran(clock, k));
        let (u_x, v_x) = (state.potential, *proposal_value);
        if inner.position == state.position {
            // The first stage stayed: the second has nothing to judge (its ratio is 1).
            measure(&mut self.measuring, |m| m.decided(1.0));
            let transition = Transition {
                accepted: false,
                accept_prob: 1.0,
                energy: first.energy - v_x + u_x,
                energy_error: 0.0,
                divergent: first.divergent,
                steps: first.steps,
            };
            return Stepped {
                transition,
                own_accept: first.own_accept,
                exact_evaluated: false,
            };
        }
        let clock = self.measuring.is_some().then(Instant::now);
        let u_y = exact_at(target, inner.position.as_slice(), record);
        let v_y = inner.potential;
        let log_ratio = -(u_y - v_y) + (u_x - v_x);
        let accept_prob = if log_ratio.is_finite() {
            log_ratio.exp().min(1.0)
        } else {
            0.0
        };
        let accepted = uniform(rng) < accept_prob;
        if accepted {
            state.clone_from(inner);
            state.potential = u_y;
            *proposal_value = v_y;
        }
        measure(&mut self.measuring, |m| m.judged(clock, accept_prob));
        let transition = Transition {
            accepted,
            accept_prob,
            energy: first.energy - v_y + u_y,
            energy_error: -log_ratio,
            divergent: first.divergent || !u_y.is_finite(),
            steps: first.steps,
        };
        Stepped {
            transition,
            own_accept: first.own_accept,
            exact_evaluated: true,
        }
    }
}

/// The `k` transitions on `Ũ` from `state` (where `Ũ` is `proposal_value`), into `inner`.
#[allow(clippy::too_many_arguments)]
fn first_stage(
    inner: &mut State<Dyn>,
    state: &State<Dyn>,
    proposal_value: f64,
    k: u32,
    proposal: &dyn Potential,
    hmc: &mut Hmc<Dyn>,
    metric: &DiagonalMetric<Dyn>,
    rng: &mut Pcg64,
) -> FirstStage {
    inner.clone_from(state);
    inner.potential = proposal_value;
    let (mut steps, mut accept_sum, mut divergent) = (0u32, 0.0, false);
    let mut last = None;
    for _ in 0..k {
        let t = hmc.transition(inner, &Exact(proposal), metric, rng);
        steps = steps.saturating_add(t.steps);
        accept_sum += t.accept_prob;
        divergent |= t.divergent;
        last = Some(t);
    }
    FirstStage {
        steps,
        own_accept: accept_sum / f64::from(k),
        divergent,
        // `k ≥ 1`, so there is a last transition; its energy is `Ũ + K` at where it ended.
        energy: last.map_or(f64::NAN, |t| t.energy),
    }
}

/// Adds to `auto`'s measurements while warmup runs (`measuring` is `None` otherwise).
fn measure(measuring: &mut Option<Measured>, f: impl FnOnce(&mut Measured)) {
    if let Some(m) = measuring.as_mut() {
        f(m);
    }
}

/// `U` at `q`, with its gradient into `record` when the method learns from it.
fn exact_at(target: &dyn Potential, q: &[f64], record: Option<&RefCell<EndGradient>>) -> f64 {
    let Some(record) = record else {
        return target.value(q);
    };
    let mut record = record.borrow_mut();
    let EndGradient { position, gradient } = &mut *record;
    position.clear();
    position.extend_from_slice(q);
    gradient.resize(q.len(), 0.0);
    target.value_and_gradient(q, gradient)
}

impl Kernel for SurrogateTransitions {
    /// Runs only while the surrogate proposes (with the exact `U` judging), on the chain's
    /// Euclidean step size, trajectory lengths and metric.
    fn transition(&mut self, ctx: Ctx<'_>) -> Result<Outcome> {
        let Some(proposer) = ctx.proposer else {
            return Err(Error::invalid(
                "surrogate transitions run only while a surrogate proposes",
            ));
        };
        let Some(proposal) = proposer.proposal() else {
            return Err(Error::invalid(
                "surrogate transitions run only while a surrogate proposes",
            ));
        };
        let out = self.step(
            ctx.state,
            ctx.proposal_value,
            ctx.exact,
            proposal,
            ctx.hmc,
            ctx.metric,
            ctx.rng,
            proposer.end_gradient(),
        );
        ctx.counts
            .record(&out.transition, true, out.exact_evaluated);
        Ok(Outcome {
            transition: out.transition,
            stat: out.own_accept,
            depth: 0,
        })
    }

    fn end_warmup(&mut self) -> Option<Chosen> {
        Some(SurrogateTransitions::end_warmup(self))
    }

    fn restore_sampling(&mut self, chosen: Chosen) {
        self.restore(chosen);
    }
}

#[cfg(test)]
mod tests {
    use nalgebra::DVector;
    use rand::SeedableRng;
    use shmc_core::{HmcConfig, Steps};

    use super::super::test_targets::{Correlated, Misplaced, Twisted, errors_from};
    use super::*;

    /// `n` draws of `k` surrogate transitions on `proposal` judged by `target`, and how many
    /// exact evaluations they made.
    fn run(
        target: &dyn Potential,
        proposal: &dyn Potential,
        k: u32,
        n: usize,
    ) -> (Vec<[f64; 2]>, usize) {
        let mut kernel = SurrogateTransitions::new(Transitions::fixed(k));
        let (draws, judged, _) = run_with(target, proposal, &mut kernel, 0, n);
        (draws, judged)
    }

    /// `warmup` steps of `kernel`, then its [`SurrogateTransitions::end_warmup`], then `n`
    /// draws (what [`run`] returns, with what the end of warmup fixed), checking that `k`
    /// stays fixed through them.
    fn run_with(
        target: &dyn Potential,
        proposal: &dyn Potential,
        kernel: &mut SurrogateTransitions,
        warmup: usize,
        n: usize,
    ) -> (Vec<[f64; 2]>, usize, Chosen) {
        let mut rng = Pcg64::seed_from_u64(11);
        let metric = DiagonalMetric::new(DVector::from_element(2, 1.0)).unwrap();
        let config = HmcConfig {
            step_size: 0.3,
            steps: Steps::Jittered(8),
            max_energy_error: 1000.0,
        };
        let mut hmc = Hmc::new(Dyn(2), config).unwrap();
        let start = DVector::from_vec(vec![0.1, -0.2]);
        let mut state = State::new(start, &Exact(proposal)).unwrap();
        state.potential = target.value(state.position.as_slice());
        let mut value = proposal.value(state.position.as_slice());
        let (mut draws, mut judged) = (Vec::with_capacity(n), 0);
        let mut chosen = None;
        for i in 0..warmup + n {
            if i == warmup {
                chosen = Some(kernel.end_warmup());
            }
            let out = kernel.step(
                &mut state, &mut value, target, proposal, &mut hmc, &metric, &mut rng, None,
            );
            if let Some(fixed) = chosen.filter(|_| i >= warmup) {
                assert_eq!(kernel.k(), fixed.sampling, "k changed while sampling");
                judged += usize::from(out.exact_evaluated);
                draws.push([state.position[0], state.position[1]]);
            }
        }
        let chosen = chosen.unwrap_or_else(|| kernel.end_warmup());
        (draws, judged, chosen)
    }

    /// `auto`: warmup runs 1 transition per judgement and measures; its end fixes sampling's
    /// `k` once from the measurements, which then stop (a second end changes nothing), and the
    /// draws of whatever `k` it chose are the correlated Gaussian's within 4 MCSE.
    #[test]
    fn auto_fixes_k_once_from_warmup_and_stays_exact() {
        let mut kernel = SurrogateTransitions::new(Transitions::Auto);
        assert_eq!(kernel.k(), 1);
        let (draws, _, _) = run_with(&Correlated, &Misplaced, &mut kernel, 2_000, 40_000);
        let again = kernel.end_warmup();
        assert_eq!(again.sampling, kernel.k());
        assert!(again.measured.is_none(), "measuring went on into sampling");
        let errors = errors_from(&draws, Correlated::MOMENTS);
        assert!(
            errors.iter().all(|&e| e < 4.0),
            "auto (k = {}): errors {errors:?} MCSE",
            kernel.k()
        );
    }

    /// What `auto` measures in warmup: every transition and decision (nothing under a fixed
    /// setting); `W:S` runs `W` in warmup and `S` after.
    #[test]
    fn auto_measures_warmup_and_w_s_switches_at_its_end() {
        let mut kernel = SurrogateTransitions::new(Transitions::Auto);
        let (_, _, chosen) = run_with(&Correlated, &Misplaced, &mut kernel, 300, 0);
        let m = chosen.measured.expect("auto measured its warmup");
        assert_eq!((m.transitions, m.decisions), (300, 300));
        assert!(m.judgements > 0 && m.judgements <= 300, "{m:?}");
        assert_eq!(chosen.warmup, 1);
        let mut pair = SurrogateTransitions::new(Transitions::Fixed {
            warmup: 2,
            sampling: 5,
        });
        assert_eq!(pair.k(), 2);
        let (_, _, chosen) = run_with(&Correlated, &Misplaced, &mut pair, 10, 10);
        assert_eq!((chosen.setting().as_str(), pair.k()), ("2:5", 5));
        assert!(chosen.measured.is_none());
    }

    /// A surrogate of the wrong place and shape (no correlation, mean of `x₁` 0.5), `k` = 1, 3
    /// and 10 transitions on it between judgements: every moment of the correlated Gaussian
    /// target within 4 MCSE. Judged by the surrogate itself, the same kernel samples the
    /// surrogate (its mean of `x₁` is dozens of MCSE from the target's 0).
    ///
    /// The target is Gaussian, not the twisted one: a Gaussian surrogate of a target whose tail
    /// is heavier (the twisted one's `x₂`) makes any independence-like proposal sticky out
    /// there, and 10 transitions on the surrogate are nearly one; the chain is still exact, but
    /// its MCSE is not to be trusted (measured: 4 to 8 MCSE off at 400 000 draws for `k` = 3 and
    /// 10, as for HMC alone at this step size, which cannot enter the twisted target's far
    /// tail).
    #[test]
    fn surrogate_transitions_correct_a_wrong_surrogate_for_every_k() {
        for k in [1, 3, 10] {
            let (draws, judged) = run(&Correlated, &Misplaced, k, 40_000);
            let errors = errors_from(&draws, Correlated::MOMENTS);
            assert!(
                errors.iter().all(|&e| e < 4.0),
                "k = {k}: errors {errors:?} MCSE"
            );
            assert!(judged <= 40_000, "{judged}");
            let (uncorrected, _) = run(&Misplaced, &Misplaced, k, 40_000);
            let errors = errors_from(&uncorrected, Correlated::MOMENTS);
            assert!(
                errors[0] > 20.0,
                "k = {k}: judged by Ũ, errors {errors:?} MCSE"
            );
        }
    }

    /// With the exact potential as its own surrogate the second stage always accepts: `k`
    /// HMC transitions on the target itself.
    #[test]
    fn on_the_exact_potential_every_judged_move_is_accepted() {
        let mut rng = Pcg64::seed_from_u64(3);
        let metric = DiagonalMetric::new(DVector::from_element(2, 1.0)).unwrap();
        let config = HmcConfig {
            step_size: 0.3,
            steps: Steps::Fixed(8),
            max_energy_error: 1000.0,
        };
        let mut hmc = Hmc::new(Dyn(2), config).unwrap();
        let mut state = State::new(DVector::from_vec(vec![0.3, 0.4]), &Exact(&Twisted)).unwrap();
        let mut value = state.potential;
        let mut kernel = SurrogateTransitions::new(Transitions::fixed(3));
        for _ in 0..500 {
            let out = kernel.step(
                &mut state, &mut value, &Twisted, &Twisted, &mut hmc, &metric, &mut rng, None,
            );
            if out.exact_evaluated {
                assert!(out.transition.accepted && out.transition.accept_prob == 1.0);
            }
            assert_eq!(value, state.potential);
        }
    }
}
