//! Multilevel delayed acceptance (Lykkegaard, Dodwell, Fox, Mingas & Scheichl, "Multilevel
//! Delayed Acceptance MCMC", SIAM/ASA JUQ 11, 2023; Christen & Fox 2005 for two levels): a
//! hierarchy of potentials `U₀, U₁, …, U_L`, cheapest first, the last the exact one. Level 0
//! moves by HMC on `U₀` with its own Metropolis–Hastings step. Level `ℓ ≥ 1` proposes the end
//! state `y` of a subchain of `n_{ℓ−1}` level-`(ℓ−1)` steps started at its current state `x`,
//! and accepts it with probability
//!
//! `min(1, π_ℓ(y) π_{ℓ−1}(x) / (π_ℓ(x) π_{ℓ−1}(y)))`, `π_k ∝ exp(−U_k)`:
//!
//! one evaluation of `U_ℓ` (none when the subchain ended where it began). One transition of
//! the chain is one step of level `L`, so every state the exact `U` judged is a draw.
//!
//! Why the chain targets the exact `π_L`: by induction, level `ℓ − 1`'s step is reversible for
//! `π_{ℓ−1}` (level 0's is HMC with its MH step, its trajectory length drawn independently of
//! the state); a power of a reversible kernel is reversible, so the subchain `K^n` is a
//! proposal with `π_{ℓ−1}(x) Kⁿ(x, y) = π_{ℓ−1}(y) Kⁿ(y, x)`, and the acceptance above is the
//! Metropolis–Hastings ratio of that proposal for `π_ℓ` (the second factor is the reverse
//! move's proposal density, which reversibility turns into the ratio of `π_{ℓ−1}`). The
//! subchain lengths are settings fixed for the run, never chosen from the state, which would
//! break the reversibility.
//!
//! Why: a level's proposal has already been filtered by every cheaper level, so the expensive
//! `U_L` is evaluated once per draw and judges moves that travelled `n₀ · n₁ ⋯` HMC transitions.
//!
//! The network level: while a trained surrogate proposes, its `Ũ` is level 0, under the coarse
//! meshes; the argument above holds for any bottom potential, however poor (only the
//! acceptances suffer). Until it is fitted, and after a collapse, the meshes run alone.
//!
//! Warmup: unless told otherwise, the finest coarse level judges during warmup and the exact
//! `U` is not evaluated at all. Why: what warmup adapts (the bottom level's step size, the
//! metric) is the coarse levels', and its draws are thrown away, so a fine solve per warmup
//! iteration buys nothing but a start in the fine posterior's typical set, which the finest
//! coarse level's is close to. On the 120×120 PDE a third of MLDA's fine solves were warmup's.
//! The kept chain is unaffected: from its first draw the exact `U` judges, and an MCMC chain's
//! limit does not depend on where it starts.

use nalgebra::DVector;
use rand_pcg::Pcg64;
use shmc_core::random::uniform;
use shmc_core::{DiagonalMetric, Dyn, Exact, Hmc, Potential, State, Transition};

use super::kernel::{Ctx, Kernel, Outcome};
use crate::records::Evaluations;
use crate::{Error, Model, Result};
use std::sync::Arc;

/// A point of the hierarchy: the bottom level's HMC state (its position, `U₀` and `∇U₀`) and
/// the potential of every level there.
#[derive(Clone)]
struct Point {
    state: State<Dyn>,
    /// `values[ℓ] = U_ℓ(position)`, valid up to the level that last moved the point.
    values: Vec<f64>,
}

impl Point {
    fn clone_from(&mut self, other: &Point) {
        self.state.clone_from(&other.state);
        self.values.clone_from(&other.values);
    }
}

/// What the levels did in one transition, for its row, its adaptation and the tests.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Bottom-level HMC transitions and their summed acceptance probability.
    pub bottom: (u32, f64),
    /// Bottom-level leapfrog steps.
    pub steps: u32,
    /// Whether a bottom transition diverged.
    pub divergent: bool,
    /// Per level (index `ℓ ≥ 1`): evaluations of `U_ℓ` and their summed acceptance probability.
    pub judged: Vec<(u64, f64)>,
    /// The last judgement of the top level: its acceptance probability and log ratio, if it
    /// evaluated.
    top: Option<(bool, f64, f64)>,
}

/// The MLDA kernel over `levels`, the chain's exact `U` judging at the top.
pub struct Mlda {
    /// The levels below the exact one, coarsest first.
    coarse: Vec<Arc<dyn Model>>,
    /// `subchains[ℓ]`: the level-`ℓ` steps per proposal to level `ℓ + 1`, one per coarse level.
    subchains: Vec<u32>,
    /// The subchains' points, one per level below the top (reused: no allocation per step).
    scratch: Vec<Point>,
    /// The chain's state as the hierarchy sees it.
    current: Option<Point>,
    /// Whether the proposing surrogate's `Ũ` is the bottom level, below `coarse`.
    network: bool,
    /// Whether the exact `U` judges warmup too (otherwise the finest coarse level does).
    fine_warmup: bool,
    /// How many levels the last transition had, its judge the last: the level whose potential
    /// the chain's state holds. `None` for a fresh kernel (a chain's start, or a resume).
    judged: Option<usize>,
}

impl Mlda {
    /// The kernel proposing from `coarse` (coarsest first), with `subchains[ℓ]` level-`ℓ` steps
    /// per proposal to the level above (one length per coarse level, each at least 1).
    /// With `network`, the proposing surrogate is a level below `coarse`, and `subchains`
    /// starts with its length. With `fine_warmup`, the exact `U` judges warmup as well.
    pub fn new(
        coarse: Vec<Arc<dyn Model>>,
        subchains: Vec<u32>,
        network: bool,
        fine_warmup: bool,
    ) -> Result<Self> {
        let below = coarse.len() + usize::from(network);
        if coarse.is_empty() || subchains.len() != below || subchains.contains(&0) {
            return Err(Error::setting(
                "subchains",
                format!(
                    "needs one length of at least 1 per coarser level ({below}), got {subchains:?}"
                ),
            ));
        }
        Ok(Self {
            coarse,
            subchains,
            scratch: Vec::new(),
            current: None,
            network,
            fine_warmup,
            judged: None,
        })
    }

    /// One transition from `state` (where `U_L` is `state.potential`) through `levels` (bottom
    /// first, the exact one last): `state` moves to where the top level accepted, its gradient
    /// the bottom level's there.
    /// `subchains`: one length per level below the top.
    pub fn step(
        &mut self,
        state: &mut State<Dyn>,
        levels: &[&dyn Potential],
        subchains: &[u32],
        hmc: &mut Hmc<Dyn>,
        metric: &DiagonalMetric<Dyn>,
        rng: &mut Pcg64,
    ) -> Result<(Transition, Tally, f64)> {
        let top = levels.len() - 1;
        let mut current = self.synced(state, levels)?;
        if self.scratch.len() != top {
            self.scratch = vec![current.clone(); top];
        }
        let mut walk = Walk {
            levels,
            subchains,
            hmc,
            metric,
            rng,
            tally: Tally {
                judged: vec![(0, 0.0); levels.len()],
                ..Tally::default()
            },
        };
        walk.advance(&mut self.scratch, top, &mut current);
        let tally = walk.tally;
        let (accepted, accept_prob, log_ratio) = tally.top.unwrap_or((false, 1.0, 0.0));
        state.position.copy_from(&current.state.position);
        state.gradient.copy_from(&current.state.gradient);
        state.potential = current.values[top];
        let bottom = current.values[0];
        self.current = Some(current);
        let transition = Transition {
            accepted,
            accept_prob,
            energy: state.potential,
            energy_error: -log_ratio,
            divergent: tally.divergent,
            steps: tally.steps,
        };
        Ok((transition, tally, bottom))
    }

    /// The hierarchy's point at `state`: the one it left, or (at a chain's start, after a
    /// resume or a phase change) a new one, with every level evaluated there.
    fn synced(&mut self, state: &State<Dyn>, levels: &[&dyn Potential]) -> Result<Point> {
        if let Some(point) = self.current.take()
            && point.state.position == state.position
            && point.values.len() == levels.len()
        {
            return Ok(point);
        }
        let q = state.position.as_slice();
        let bottom = State::new(DVector::from_column_slice(q), &Exact(levels[0]))?;
        // The bottom's value comes with its state and the top's is the chain's: only the
        // levels between are evaluated here.
        let top = levels.len() - 1;
        let mut values = vec![bottom.potential; levels.len()];
        for (value, level) in values.iter_mut().zip(levels).take(top).skip(1) {
            *value = level.value(q);
        }
        values[top] = state.potential;
        Ok(Point {
            state: bottom,
            values,
        })
    }
}

/// One transition's walk down the hierarchy.
struct Walk<'w> {
    levels: &'w [&'w dyn Potential],
    subchains: &'w [u32],
    hmc: &'w mut Hmc<Dyn>,
    metric: &'w DiagonalMetric<Dyn>,
    rng: &'w mut Pcg64,
    tally: Tally,
}

impl Walk<'_> {
    /// One step of level `level` from `x` (valid up to `level`), `scratch[..level]` the points
    /// of the subchains below it.
    fn advance(&mut self, scratch: &mut [Point], level: usize, x: &mut Point) {
        if level == 0 {
            let t =
                self.hmc
                    .transition(&mut x.state, &Exact(self.levels[0]), self.metric, self.rng);
            x.values[0] = x.state.potential;
            self.tally.bottom.0 += 1;
            self.tally.bottom.1 += t.accept_prob;
            self.tally.steps = self.tally.steps.saturating_add(t.steps);
            self.tally.divergent |= t.divergent;
            if self.levels.len() == 1 {
                // Warmup over one mesh: its own HMC step is the judgement.
                self.tally.top = Some((t.accepted, t.accept_prob, -t.energy_error));
            }
            return;
        }
        let (below, rest) = scratch.split_at_mut(level - 1);
        let y = &mut rest[0];
        y.clone_from(x);
        for _ in 0..self.subchains[level - 1] {
            self.advance(below, level - 1, y);
        }
        let top = level == self.levels.len() - 1;
        if y.state.position == x.state.position {
            // The subchain stayed: nothing to judge (the ratio is 1).
            return;
        }
        let u = self.levels[level].value(y.state.position.as_slice());
        let log_ratio = -(u - x.values[level]) + (y.values[level - 1] - x.values[level - 1]);
        let accept_prob = if log_ratio.is_finite() {
            log_ratio.exp().min(1.0)
        } else {
            0.0
        };
        let judged = &mut self.tally.judged[level];
        (judged.0, judged.1) = (judged.0 + 1, judged.1 + accept_prob);
        let accepted = uniform(self.rng) < accept_prob;
        if accepted {
            y.values[level] = u;
            x.clone_from(y);
        }
        if top {
            self.tally.top = Some((accepted, accept_prob, log_ratio));
        }
    }
}

impl Kernel for Mlda {
    /// Runs on the chain's Euclidean step size, trajectory lengths and metric at the bottom
    /// level, whose acceptance the step size adapts to; the exact `U` judges at the top (in
    /// warmup, the finest coarse level, unless `fine_warmup`). The bottom level's gradients
    /// count as surrogate gradients, each judgement of the exact `U` as an exact value; the
    /// coarse levels' own work is the model's ([`Model::work`]). With the network level, the
    /// proposing surrogate's `Ũ` is the bottom, and `Ũ` at the state is kept current.
    fn transition(&mut self, ctx: Ctx<'_>) -> Result<Outcome> {
        let network = ctx
            .proposer
            .and_then(|p| p.proposal())
            .filter(|_| self.network);
        let coarse = std::mem::take(&mut self.coarse);
        let mut levels: Vec<&dyn Potential> = network.into_iter().collect();
        levels.extend(coarse.iter().map(|m| m.as_ref() as &dyn Potential));
        levels.push(ctx.exact);
        let fine_judges = !ctx.warmup || self.fine_warmup;
        levels.truncate(levels.len() - usize::from(!fine_judges));
        // Without the network's subchain while it does not propose: the meshes keep theirs.
        let subchains = std::mem::take(&mut self.subchains);
        let skip = usize::from(self.network && network.is_none());
        let below = &subchains[skip..skip + levels.len() - 1];
        self.rejudge(ctx.state, &levels, fine_judges, ctx.counts);
        let out = self.step(ctx.state, &levels, below, ctx.hmc, ctx.metric, ctx.rng);
        drop(levels);
        (self.coarse, self.subchains) = (coarse, subchains);
        let (transition, tally, bottom) = out?;
        if network.is_some() {
            *ctx.proposal_value = bottom;
        }
        let judged_exactly = fine_judges && tally.top.is_some();
        ctx.counts.record(&transition, true, judged_exactly);
        let stat = tally.bottom.1 / f64::from(tally.bottom.0.max(1));
        Ok(Outcome {
            transition,
            stat,
            depth: 0,
        })
    }
}

impl Mlda {
    /// Makes the state's potential its judge's, `levels`' last, when the judge changed: at
    /// the end of a coarse-judged warmup (one exact `U`, counted), at a chain's start, or on a
    /// resume (the checkpoint at the end of warmup holds the coarse judge's value). Costs one
    /// evaluation per chain and phase; never consumes the random stream, so a resumed chain
    /// goes on as an uninterrupted one does.
    fn rejudge(
        &mut self,
        state: &mut State<Dyn>,
        levels: &[&dyn Potential],
        fine_judges: bool,
        counts: &mut Evaluations,
    ) {
        let stale = match self.judged {
            Some(n) => n != levels.len(),
            // A fresh kernel's state holds the exact `U`, except one resumed from the
            // checkpoint a coarse-judged warmup ended with.
            None => !fine_judges || !self.fine_warmup,
        };
        self.judged = Some(levels.len());
        if !stale {
            return;
        }
        state.potential = levels[levels.len() - 1].value(state.position.as_slice());
        counts.exact_values += u64::from(fine_judges);
        self.current = None;
    }
}

#[cfg(test)]
mod tests;
