//! NUTS on the surrogate, corrected by one exact evaluation per draw: delayed acceptance.
//!
//! A first stage runs the No-U-Turn sampler on the surrogate's density `π̃ ∝ exp(−Ũ)`: the
//! trajectory doubles forwards or backwards until it turns back on itself, and a point of it is
//! drawn with probability proportional to `exp(−H̃)` (multinomial NUTS, as Stan and nutpie run
//! it). Every leapfrog step costs one surrogate gradient. The second stage accepts the point
//! `q′` the first proposed from `q` with probability
//! `min(1, exp(−(U(q′) − Ũ(q′)) + (U(q) − Ũ(q))))`: one exact `U`, none when the first stage
//! stayed at `q`. The chain then targets the exact `π ∝ exp(−U)` (Christen and Fox 2005),
//! because the first stage's transition is reversible with respect to `π̃`:
//! `π̃(q) K̃(q, q′) = π̃(q′) K̃(q′, q)`.
//!
//! That reversibility is what the tree's construction is for, so it is spelled out here. From
//! any point of a finished tree, the same directions build the same tree with the same
//! probability (`2^−depth`); the U-turn checks are made on the tree's halves in trajectory order,
//! whichever point the tree grew from, so a tree that stops is the same from all of its points.
//! Inside a subtree the point is drawn in proportion to the weights (uniform progressive
//! sampling); at the top the new subtree's point replaces the old tree's with probability
//! `min(1, w_new/w_old)` (Stan's biased progressive sampling). For a move from `x` in the old
//! tree `A` to `y` in the subtree `B` that doubled it, and back from `y` (whose old tree is `B`,
//! extended by `A`), the probabilities are `min(1, w_B/w_A)·π̃(y)/w_B` and
//! `min(1, w_A/w_B)·π̃(x)/w_A`, and `π̃(x)` times the first equals `π̃(y)` times the second,
//! `π̃(x)π̃(y)·min(1/w_A, 1/w_B)`; later doublings reject both alike. One departure, as in Stan:
//! a step whose energy is more than the divergence threshold above the *start's* ends the tree,
//! which depends on the start; at Stan's threshold of 1000 the weight of such points is
//! `e^−1000`, and the test with a deliberately wrong surrogate in `tests/` checks the
//! moments.
//!
//! Why: a surrogate NUTS trajectory costs a few dozen surrogate gradients, and its antithetic
//! draws give means (bulk ESS) more than one effective draw per draw, which fixed-length
//! surrogate trajectories chosen for both means and variances cannot.

use rand_pcg::Pcg64;
use shmc_core::random::uniform;
use shmc_core::{Dyn, Exact, Metric, Potential, State, Transition, leapfrog};

use super::kernel::{Ctx, Kernel, Outcome};
use crate::{Error, Result};

/// Stan's default maximum tree depth: at most `2^10 − 1` leapfrog steps per draw.
pub const MAX_DEPTH: u32 = 10;

/// Stan's `treedepth__` of a transition of `leapfrog_steps` steps: the doublings it began. The
/// `j`-th doubling adds between 1 and `2^(j−1)` steps (fewer when its subtree turns back or
/// diverges part-way), so `j` doublings make `2^(j−1)` to `2^j − 1` steps: `j` is the bit length
/// of the count. nuts-rs's own depth leaves out a last doubling that turned back.
pub fn tree_depth(leapfrog_steps: u64) -> u32 {
    u64::BITS - leapfrog_steps.leading_zeros()
}

/// A point of a trajectory: position, momentum, surrogate gradient and value, and `M⁻¹p`.
#[derive(Clone)]
struct Point {
    q: Vec<f64>,
    p: Vec<f64>,
    grad: Vec<f64>,
    /// `M⁻¹p`, the velocity the U-turn criterion projects on.
    p_sharp: Vec<f64>,
    /// `Ũ(q)`.
    value: f64,
}

/// A (sub)tree: its first and last points in trajectory order, the sum of its momenta, the
/// log of its total weight `Σ exp(H̃₀ − H̃)`, and the point drawn from it so far.
struct Tree {
    first: Point,
    last: Point,
    rho: Vec<f64>,
    log_weight: f64,
    sample: Point,
    /// Whether the drawn point is the transition's start (then nothing moved).
    sample_is_start: bool,
}

impl Tree {
    /// The end the tree grows from in direction `forward`.
    fn end(&self, forward: bool) -> &Point {
        if forward { &self.last } else { &self.first }
    }
}

/// What a transition did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Drawn {
    /// Accepted or not by the second stage, its acceptance probability, the exact energies,
    /// and the tree's leapfrog steps.
    pub transition: Transition,
    /// The surrogate's own mean acceptance over the tree's steps: what the step size adapts to
    /// (see `super::dynamics` on why not the exact one).
    pub tree_accept: f64,
    /// `Ũ` where the chain now is.
    pub proposal_value: f64,
    /// Whether the exact `U` was evaluated (not when the tree kept its start).
    pub exact_evaluated: bool,
}

/// The NUTS kernel with its settings and the counts of the transition in progress.
pub struct DelayedNuts {
    max_depth: u32,
    max_energy_error: f64,
    steps: u32,
    accept_sum: f64,
    divergent: bool,
}

impl Kernel for DelayedNuts {
    /// Runs only while the surrogate proposes (with the exact `U` judging), on the chain's
    /// Euclidean step size and metric.
    fn transition(&mut self, ctx: Ctx<'_>) -> Result<Outcome> {
        let Some(proposal) = ctx.proposer.and_then(|p| p.proposal()) else {
            return Err(Error::invalid(
                "delayed-acceptance NUTS runs only while a surrogate proposes",
            ));
        };
        let out = self.draw(
            ctx.state,
            *ctx.proposal_value,
            ctx.exact,
            proposal,
            ctx.metric,
            ctx.hmc.config.step_size,
            ctx.rng,
        );
        *ctx.proposal_value = out.proposal_value;
        let t = out.transition;
        ctx.counts.record(&t, true, out.exact_evaluated);
        Ok(Outcome {
            transition: t,
            stat: out.tree_accept,
            depth: tree_depth(u64::from(t.steps)),
        })
    }
}

/// Whether a trajectory with velocities `first` and `last` at its ends and momentum sum `rho`
/// still moves apart at both ends (the generalized U-turn criterion).
fn apart(first: &[f64], last: &[f64], rho: &[f64]) -> bool {
    let dot = |a: &[f64]| a.iter().zip(rho).map(|(x, y)| x * y).sum::<f64>();
    dot(first) > 0.0 && dot(last) > 0.0
}

/// `a + b`.
fn sum(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// `log(eᵃ + eᵇ)`.
fn log_add(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + ((a - m).exp() + (b - m).exp()).ln()
}

impl DelayedNuts {
    /// A kernel of trees up to `max_depth` doublings; a step whose surrogate energy rises
    /// more than `max_energy_error` above the start's ends the tree as divergent.
    pub fn new(max_depth: u32, max_energy_error: f64) -> Self {
        Self {
            max_depth,
            max_energy_error,
            steps: 0,
            accept_sum: 0.0,
            divergent: false,
        }
    }

    /// One transition from `state` (whose proposal gradient is the surrogate's, and where
    /// `Ũ = proposal_value`) with step size `step_size` under `metric`: NUTS on `proposal`,
    /// then the exact `target` judges the point it drew.
    ///
    /// Long (over 100 lines) because the tree's doubling loop, the draw it keeps and its delayed
    /// acceptance are one algorithm that reads as the published one, step by step.
    #[allow(clippy::too_many_arguments)]
    pub fn draw<M>(
        &mut self,
        state: &mut State<Dyn>,
        proposal_value: f64,
        target: &dyn Potential,
        proposal: &dyn Potential,
        metric: &M,
        step_size: f64,
        rng: &mut Pcg64,
    ) -> Drawn
    where
        M: Metric + ?Sized,
    {
        self.steps = 0;
        self.accept_sum = 0.0;
        self.divergent = false;
        let dim = state.position.len();
        let mut p = vec![0.0; dim];
        metric.draw_momentum(rng, &mut p);
        let start = self.point(
            state.position.as_slice().to_vec(),
            p,
            state.gradient.as_slice().to_vec(),
            proposal_value,
            metric,
        );
        let h0 = proposal_value + metric.kinetic(&start.p);
        let exact_h0 = state.potential + metric.kinetic(&start.p);
        let mut tree = Tree {
            first: start.clone(),
            last: start.clone(),
            rho: start.p.clone(),
            log_weight: 0.0,
            sample: start,
            sample_is_start: true,
        };
        let env = Env {
            proposal,
            metric,
            step_size,
            h0,
        };
        for depth in 0..self.max_depth {
            let forward = uniform(rng) < 0.5;
            let Some(subtree) = self.build(&env, depth, tree.end(forward), forward, rng) else {
                break;
            };
            // Biased progressive sampling: the new half's point replaces the old one's with
            // probability min(1, w_new / w_old).
            let take = subtree.log_weight > tree.log_weight
                || uniform(rng) < (subtree.log_weight - tree.log_weight).exp();
            let (merged, apart) = merge(tree, subtree, forward, take);
            tree = merged;
            if !apart {
                break;
            }
        }
        let tree_accept = if self.steps == 0 {
            0.0
        } else {
            self.accept_sum / f64::from(self.steps)
        };
        let sample = tree.sample;
        let kinetic = metric.kinetic(&sample.p);
        if tree.sample_is_start {
            // The first stage stayed: the second has nothing to judge (its ratio is 1).
            return Drawn {
                transition: Transition {
                    accepted: false,
                    accept_prob: 1.0,
                    energy: exact_h0,
                    energy_error: 0.0,
                    divergent: self.divergent,
                    steps: self.steps,
                },
                tree_accept,
                proposal_value,
                exact_evaluated: false,
            };
        }
        let exact = target.value(&sample.q);
        let log_ratio = -(exact - sample.value) + (state.potential - proposal_value);
        let accept_prob = if log_ratio.is_finite() {
            log_ratio.exp().min(1.0)
        } else {
            0.0
        };
        let accepted = uniform(rng) < accept_prob;
        let exact_h1 = exact + kinetic;
        let mut new_value = proposal_value;
        if accepted {
            state.position.copy_from_slice(&sample.q);
            state.gradient.copy_from_slice(&sample.grad);
            state.potential = exact;
            new_value = sample.value;
        }
        Drawn {
            transition: Transition {
                accepted,
                accept_prob,
                energy: if accepted { exact_h1 } else { exact_h0 },
                energy_error: exact_h1 - exact_h0,
                divergent: self.divergent || !exact.is_finite(),
                steps: self.steps,
            },
            tree_accept,
            proposal_value: new_value,
            exact_evaluated: true,
        }
    }

    /// A point with its velocity.
    fn point<M: Metric + ?Sized>(
        &self,
        q: Vec<f64>,
        p: Vec<f64>,
        grad: Vec<f64>,
        value: f64,
        metric: &M,
    ) -> Point {
        let mut p_sharp = vec![0.0; p.len()];
        metric.drift(1.0, &p, &mut p_sharp);
        Point {
            q,
            p,
            grad,
            p_sharp,
            value,
        }
    }

    /// A subtree of `2^depth` steps from `from` in direction `forward`, or `None` when it
    /// diverged or turned back inside (then nothing of it is drawn and the tree stops).
    fn build<M: Metric + ?Sized>(
        &mut self,
        env: &Env<'_, M>,
        depth: u32,
        from: &Point,
        forward: bool,
        rng: &mut Pcg64,
    ) -> Option<Tree> {
        if depth == 0 {
            return self.leaf(env, from, forward);
        }
        let inner = self.build(env, depth - 1, from, forward, rng)?;
        let outer = self.build(env, depth - 1, inner.end(forward), forward, rng)?;
        // Uniform progressive sampling: the outer half's point with probability
        // w_outer / (w_inner + w_outer).
        let total = log_add(inner.log_weight, outer.log_weight);
        let take = uniform(rng) < (outer.log_weight - total).exp();
        let (tree, apart) = merge(inner, outer, forward, take);
        apart.then_some(tree)
    }

    /// One leapfrog step from `from`.
    fn leaf<M: Metric + ?Sized>(
        &mut self,
        env: &Env<'_, M>,
        from: &Point,
        forward: bool,
    ) -> Option<Tree> {
        let (mut q, mut p, mut grad) = (from.q.clone(), from.p.clone(), from.grad.clone());
        let eps = if forward {
            env.step_size
        } else {
            -env.step_size
        };
        let value = leapfrog(
            &Exact(env.proposal),
            env.metric,
            eps,
            1,
            &mut q,
            &mut p,
            &mut grad,
        );
        self.steps += 1;
        let error = value + env.metric.kinetic(&p) - env.h0;
        if !error.is_finite() || error > self.max_energy_error {
            self.divergent = true;
            return None;
        }
        self.accept_sum += (-error).exp().min(1.0);
        let point = self.point(q, p, grad, value, env.metric);
        Some(Tree {
            rho: point.p.clone(),
            first: point.clone(),
            last: point.clone(),
            log_weight: -error,
            sample: point,
            sample_is_start: false,
        })
    }
}

/// What every step of one transition shares.
struct Env<'a, M: ?Sized> {
    proposal: &'a dyn Potential,
    metric: &'a M,
    step_size: f64,
    /// The surrogate Hamiltonian at the start.
    h0: f64,
}

/// `old` joined by `new` on its `forward` side, with `new`'s point drawn if `take_new`, and
/// whether the joined tree still moves apart: as a whole, and each half extended by the
/// other's nearest point (Stan's additional checks, which catch a U-turn the halves' ends
/// straddle). The checks name the halves in trajectory order, so they are the same whichever
/// half the tree grew from.
fn merge(old: Tree, new: Tree, forward: bool, take_new: bool) -> (Tree, bool) {
    let log_weight = log_add(old.log_weight, new.log_weight);
    let (before, after) = if forward { (&old, &new) } else { (&new, &old) };
    let rho = sum(&before.rho, &after.rho);
    let apart = apart(&before.first.p_sharp, &after.last.p_sharp, &rho)
        && apart(
            &before.first.p_sharp,
            &after.first.p_sharp,
            &sum(&before.rho, &after.first.p),
        )
        && apart(
            &before.last.p_sharp,
            &after.last.p_sharp,
            &sum(&after.rho, &before.last.p),
        );
    let (drawn, other) = if take_new { (new, old) } else { (old, new) };
    let (first, last) = if forward == take_new {
        (other.first, drawn.last)
    } else {
        (drawn.first, other.last)
    };
    let tree = Tree {
        first,
        last,
        rho,
        log_weight,
        sample: drawn.sample,
        sample_is_start: drawn.sample_is_start,
    };
    (tree, apart)
}

#[cfg(test)]
mod tests {
    use nalgebra::DVector;
    use rand::SeedableRng;
    use shmc_core::{DiagonalMetric, Exact};

    use super::super::test_targets::{Misplaced, Twisted, errors_in_mcse};
    use super::*;

    /// `n` draws of the kernel judged by `target` with proposals on `proposal`, and the mean
    /// number of leapfrog steps per draw.
    fn run(target: &dyn Potential, proposal: &dyn Potential, n: usize) -> (Vec<[f64; 2]>, f64) {
        let mut rng = Pcg64::seed_from_u64(5);
        let metric = DiagonalMetric::new(DVector::from_element(2, 1.0)).unwrap();
        let start = DVector::from_vec(vec![0.1, -0.2]);
        let mut state = State::new(start, &shmc_core::Surrogate { target, proposal }).unwrap();
        let mut value = proposal.value(state.position.as_slice());
        let mut nuts = DelayedNuts::new(MAX_DEPTH, 1000.0);
        let (mut draws, mut steps) = (Vec::with_capacity(n), 0u64);
        for _ in 0..n {
            let out = nuts.draw(&mut state, value, target, proposal, &metric, 0.4, &mut rng);
            value = out.proposal_value;
            steps += u64::from(out.transition.steps);
            draws.push([state.position[0], state.position[1]]);
        }
        (draws, steps as f64 / n as f64)
    }

    /// With the exact potential as its own surrogate the second stage always accepts, so this
    /// is NUTS itself: its tree's draws (biased progressive sampling, the U-turn checks) must
    /// leave a curved, non-Gaussian target's moments right.
    #[test]
    fn nuts_on_the_exact_potential_samples_a_twisted_gaussian() {
        let (draws, steps) = run(&Twisted, &Twisted, 40_000);
        let errors = errors_in_mcse(&draws);
        assert!(errors.iter().all(|&e| e < 4.0), "errors {errors:?} MCSE");
        assert!(steps > 3.0, "trees of {steps} steps on average");
    }

    /// A surrogate of the wrong place and shape: the first stage alone samples it (its mean of
    /// `x₁`, 0.5, is dozens of MCSE from the target's 0), and the delayed acceptance against
    /// the exact `U` brings every moment back within 4 MCSE.
    #[test]
    fn delayed_acceptance_corrects_a_wrong_surrogate() {
        let (draws, _) = run(&Twisted, &Misplaced, 40_000);
        let errors = errors_in_mcse(&draws);
        assert!(errors.iter().all(|&e| e < 4.0), "errors {errors:?} MCSE");
        // Judged by the surrogate itself: the first stage's own target, far from the twisted one.
        let (uncorrected, _) = run(&Misplaced, &Misplaced, 40_000);
        let errors = errors_in_mcse(&uncorrected);
        assert!(errors[0] > 20.0, "errors {errors:?} MCSE");
    }

    /// Where the first stage stays at the start, nothing is evaluated exactly and nothing moves.
    #[test]
    fn a_tree_that_draws_its_start_costs_no_exact_evaluation() {
        struct Counting<'a>(&'a dyn Potential, std::cell::Cell<u64>);
        impl Potential for Counting<'_> {
            fn dim(&self) -> usize {
                2
            }
            fn value(&self, q: &[f64]) -> f64 {
                self.1.set(self.1.get() + 1);
                self.0.value(q)
            }
            fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
                self.1.set(self.1.get() + 1);
                self.0.value_and_gradient(q, g)
            }
        }
        let target = Counting(&Twisted, std::cell::Cell::new(0));
        let mut rng = Pcg64::seed_from_u64(9);
        let metric = DiagonalMetric::new(DVector::from_element(2, 1.0)).unwrap();
        let mut state = State::new(DVector::from_vec(vec![0.3, 0.4]), &Exact(&Twisted)).unwrap();
        let mut nuts = DelayedNuts::new(MAX_DEPTH, 1000.0);
        let (mut stayed, mut judged) = (0, 0);
        for _ in 0..2000 {
            let before = (state.position.clone(), target.1.get());
            let value = Twisted.value(state.position.as_slice());
            // A step size so large that most trees diverge at once and keep their start.
            let out = nuts.draw(&mut state, value, &target, &Twisted, &metric, 1.5, &mut rng);
            let evaluations = target.1.get() - before.1;
            assert_eq!(evaluations, u64::from(out.exact_evaluated));
            if out.exact_evaluated {
                judged += 1;
            } else {
                stayed += 1;
                assert_eq!(state.position, before.0);
                assert!(!out.transition.accepted);
            }
        }
        assert!(
            stayed > 100 && judged > 100,
            "stayed {stayed}, judged {judged}"
        );
    }

    #[test]
    fn tree_depth_counts_the_doublings_begun_as_stan_does() {
        // One step: one doubling; a full tree of depth j: 2^j − 1 steps; a last doubling that
        // turned back after its first step: 2^(j−1) steps, still depth j.
        for (steps, depth) in [(1, 1), (2, 2), (3, 2), (4, 3), (7, 3), (11, 4), (1023, 10)] {
            assert_eq!(tree_depth(steps), depth, "{steps} steps");
        }
    }
}
