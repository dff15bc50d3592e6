//! The settings the surrogate methods share ([`SurrogateSettings`]): the surrogate's kind and
//! its own settings, where its training states come from, and how its proposals are made and
//! judged. Its own module because the methods that hold one ([`super::Method`], and MLDA's
//! network level in [`super::MldaSettings`]) both read it.

use std::path::PathBuf;

use super::trajectory::SurrogateSteps;
use super::transitions::Transitions;
use crate::surrogates::kinds::SurrogateKind;
use crate::surrogates::network::{NetworkFitter, TrainOptions};
use crate::surrogates::{FitMethod, Fitter};

/// Where RNS-HMC's network gets its training states.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TrainFrom {
    /// The accepted states of each chain's exact warmup (the papers).
    #[default]
    Warmup,
    /// `states` draws of the Laplace approximation at the MAP, evaluated exactly (in one pass
    /// over the data for a row-sum model) before the chains start. The network fits only what
    /// the approximation's quadratic misses ([`crate::surrogates::anchored`]), once for every
    /// chain, and proposes from the first warmup iteration; the chains run in the
    /// approximation's coordinates (the Laplace mass matrix). Time to a usable posterior is
    /// then the MAP search, a few hundred exact gradients and one exact `U` per iteration.
    Laplace {
        /// The number of training states.
        states: usize,
    },
}

/// The settings shared by the surrogate methods.
#[derive(Clone, Debug, PartialEq)]
pub struct SurrogateSettings {
    /// The kind of surrogate and its own settings: the network (how it is built, and whether
    /// it matches the potential values the MH steps computed, as the papers do, or the exact
    /// gradients at the same states, `d` equations per state instead of one), or a grid (grid
    /// HMC, sparse-grid HMC: fitted before sampling over a box known in advance, or after the
    /// exact phase over the states' box).
    pub kind: SurrogateKind,
    /// Where the training states come from: each chain's warmup, or the Laplace approximation.
    pub train_from: TrainFrom,
    /// A network trained on the Laplace approximation: also fit a cubic term to what its
    /// quadratic misses ([`crate::surrogates::cubic`]), before the network (small dimensions
    /// only). Refused for other training.
    pub cubic: bool,
    /// Warmup iterations before states are collected (the papers: 1000 of 5000); `None`, the
    /// default: a fifth of the warmup, or a third of the exact warmup when the surrogate
    /// proposes in warmup ([`SurrogateSettings::collect_after`]), so the defaults fit any
    /// warmup.
    pub train_after: Option<usize>,
    /// RNS-HMC: the warmup iterations of exact HMC after which the surrogate is fitted and
    /// proposes, adaptation going on with it, for the rest of warmup (surrogate-driven warmup:
    /// one exact `U` per iteration instead of a trajectory of exact gradients). `None`: fitted
    /// at the end of warmup, as the papers do.
    pub exact_warmup: Option<usize>,
    /// ARNS-HMC: collected states before the first fit (the online updates follow).
    pub start_after: usize,
    /// ARNS-HMC: the surrogate starts proposing once its held-out relative gradient error is
    /// at most this (or when warmup ends); until then exact HMC goes on collecting states.
    pub start_error: f64,
    /// ARNS-HMC: the swap probability is `t^(−κ)` with this `κ ∈ (0, 1]`.
    pub adapt_rate: f64,
    /// How long surrogate trajectories are: a multiple of the exact phase's, or the range the
    /// surrogate's curvature predicts mixes best (surrogate leapfrog steps cost almost nothing).
    pub trajectory: SurrogateSteps,
    /// Surrogate transitions: this many HMC transitions on the surrogate alone (each with its
    /// own MH step on `Ũ`) between two exact judgements, instead of one surrogate trajectory
    /// judged at its end (see the chain's `surrogate_transitions` kernel): the same `k`
    /// throughout, a warmup and a sampling `k`, or `auto` ([`Transitions`]). `None`: one judged
    /// trajectory, as the papers do.
    pub transitions: Option<Transitions>,
    /// A saved surrogate to use instead of training one (`shmc train --save`).
    pub surrogate_file: Option<PathBuf>,
    /// The grids' "complete" variant: the MH step also uses the grid's `Û` (inside its box), so
    /// the chain targets `exp(−Û)`, an approximation (labelled so in every output).
    pub approximate_acceptance: bool,
}

impl Default for SurrogateSettings {
    fn default() -> Self {
        Self {
            kind: SurrogateKind::default(),
            train_from: TrainFrom::Warmup,
            cubic: false,
            train_after: None,
            exact_warmup: None,
            start_after: 300,
            start_error: 0.1,
            adapt_rate: 0.5,
            trajectory: SurrogateSteps::Factor(1),
            transitions: None,
            surrogate_file: None,
            approximate_acceptance: false,
        }
    }
}

impl SurrogateSettings {
    /// A network of `hidden` residual units score-matched at `states` draws of the Laplace
    /// approximation ([`TrainFrom::Laplace`]) and seeded by `seed`, the rest the defaults: what
    /// the benches' fastest rows run.
    pub fn laplace_trained(hidden: usize, states: usize, seed: u64) -> Self {
        Self {
            kind: SurrogateKind::Network(NetworkFitter {
                options: TrainOptions {
                    hidden,
                    seed,
                    ..TrainOptions::default()
                },
                method: FitMethod::Score,
            }),
            train_from: TrainFrom::Laplace { states },
            ..Self::default()
        }
    }

    /// The warmup iterations before states are collected in a warmup of `warmup` iterations
    /// whose exact part ends after `exact_warmup` ([`super::Method::exact_warmup`]):
    /// [`Self::train_after`] if given, else a fifth of the warmup (a third of the exact warmup
    /// when there is one), so that four fifths of the exact warmup's states train the surrogate.
    pub fn collect_after(&self, warmup: usize, exact_warmup: Option<usize>) -> usize {
        self.train_after
            .unwrap_or(exact_warmup.map_or(warmup / 5, |exact| exact / 3))
    }

    /// Whether the surrogate is fitted once before the chains start, shared by all of them: a
    /// grid over a box known in advance, or a network trained on the Laplace approximation's
    /// draws (not a saved one, which is loaded).
    pub fn before_sampling(&self) -> bool {
        self.surrogate_file.is_none()
            && (self.fitter().before_sampling()
                || matches!(self.train_from, TrainFrom::Laplace { .. }))
    }

    /// Whether the network trains on the Laplace approximation's draws.
    pub fn laplace_states(&self) -> Option<usize> {
        match self.train_from {
            TrainFrom::Laplace { states } => Some(states),
            TrainFrom::Warmup => None,
        }
    }

    /// How the surrogate is fitted: its kind's fitter.
    pub fn fitter(&self) -> &dyn Fitter {
        self.kind.fitter()
    }
}
