//! The surrogate options shared by `shmc sample` (surrogate methods) and `shmc train`.

use std::path::PathBuf;

use clap::Args;
use shmc::core::{Activation, Nodes};

use super::gp_args::GpArgs;
use super::options;
use shmc::sampler::{SurrogateSettings, TrainFrom, Transitions, VhmcSettings};
use shmc::surrogates::FitMethod;
use shmc::surrogates::grids::{AdaptiveOptions, GridFitter, GridKind, Interpolation};
use shmc::surrogates::kinds::SurrogateKind;
use shmc::surrogates::network::{Inputs, NetworkFitter, TrainOptions};
use shmc::{Error, Result};

/// How the surrogate network is built, trained and used.
#[derive(Debug, Args)]
#[command(next_help_heading = "Surrogate (rns-hmc, arns-hmc, vhmc, rns-rmhmc, the grids)")]
pub struct SurrogateArgs {
    /// Hidden units s of the surrogate network [default: 2000, or 300 with --train-from
    /// laplace, where the network fits only what the Laplace approximation misses].
    #[arg(long, value_name = "S")]
    pub hidden: Option<usize>,
    /// Hidden-unit kind.
    #[arg(long, default_value = "softplus", value_parser = ["softplus", "sigmoid", "tanh", "rbf"])]
    pub activation: String,
    /// Width of RBF units, in the transformed inputs (with --activation rbf).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub rbf_width: f64,
    /// Ridge penalty on the output weights.
    #[arg(
        long,
        default_value_t = 1e-6,
        value_name = "LAMBDA",
        allow_negative_numbers = true
    )]
    pub ridge: f64,
    /// What the batch fit matches: the potential values of the collected states (the papers'
    /// RNS-HMC), or their exact gradients (score matching, d equations per state: a good fit
    /// from far fewer states) [default: potential, or score with --train-from laplace].
    #[arg(long, value_parser = ["potential", "score"])]
    pub fit: Option<String>,
    /// rns-hmc: where the network's training states come from: each chain's exact warmup (the
    /// papers), or `laplace`: --train-states draws of the Laplace approximation at the MAP,
    /// evaluated exactly before the chains start (in one pass over the data for logistic and
    /// probit), the network fitted once to what the approximation's quadratic misses, shared by
    /// every chain and proposing from the first warmup iteration (one exact U per iteration).
    /// It runs the chains with --metric laplace. The fastest way to a usable posterior when the
    /// posterior is not far from Gaussian (its acceptance rate and held-out error say how far).
    #[arg(long, value_enum, default_value_t = TrainFromArg::Warmup)]
    pub train_from: TrainFromArg,
    /// rns-hmc with --train-from laplace: the number of Laplace draws to train on.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub train_states: usize,
    /// With --train-from laplace: also fit a cubic term to what the quadratic misses, before
    /// the network. For a posterior whose departure from its Laplace approximation is mostly
    /// skew, in few dimensions: it has d(d+1)(d+2)/6 coefficients (1540 at d = 20; refused
    /// above 5456). On the elliptic PDE it took the held-out gradient error from 0.19 to 0.08.
    #[arg(long)]
    pub cubic: bool,
    /// Input scale of the random units, as a multiple of the training states' spread (see
    /// --inputs), or `auto` to pick it by the held-out gradient error (reported).
    #[arg(long, default_value = "auto", value_name = "auto|C")]
    pub surrogate_scale: String,
    /// The coordinates the random units see: the training states whitened by their covariance
    /// (correlations taken out; for correlated posteriors), or only standardized per
    /// coordinate. RBF units are always standardized.
    #[arg(long, default_value = "whitened", value_parser = ["whitened", "standardized"])]
    pub inputs: String,
    /// Warmup iterations before states are collected for training (default: a fifth of
    /// --warmup, or a third of --exact-warmup; the papers use 1000 of 5000).
    #[arg(long, value_name = "B")]
    pub train_after: Option<usize>,
    /// rns-hmc: fit the surrogate after N warmup iterations of exact HMC and let it propose
    /// for the rest of warmup, the step size and metric adapting on its trajectories (one exact
    /// U per iteration instead of a trajectory of exact gradients; back to exact HMC if its
    /// acceptance collapses, said in the output). Default: fit at the end of warmup, as the
    /// papers do (rns-rmhmc adapting its step size: after half the warmup).
    #[arg(long, value_name = "N")]
    pub exact_warmup: Option<usize>,
    /// ARNS-HMC: collected states before the surrogate starts proposing and updating online.
    #[arg(long, default_value_t = 300)]
    pub start_after: usize,
    /// ARNS-HMC: the surrogate starts proposing only once its held-out relative gradient error
    /// is at most this (else exact HMC collects half as many states again and refits).
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
    pub start_error: f64,
    /// ARNS-HMC: updated weights are swapped in with probability t^(-KAPPA).
    #[arg(
        long,
        default_value_t = 0.5,
        value_name = "KAPPA",
        allow_negative_numbers = true
    )]
    pub adapt_rate: f64,
    /// Surrogate trajectories take K times --steps leapfrog steps, or with `auto` the range of
    /// lengths the trained network's curvature predicts mixes best for means and variances
    /// alike (up to 8x --steps; reported), or with `nuts` NUTS's own trees on the surrogate
    /// (Stan's, up to 2^10 - 1 steps), each draw then judged by delayed acceptance against
    /// the exact U: one exact U per draw, none when the tree keeps its start; the most
    /// effective draws of means per second, `auto` of variances and quantiles.
    #[arg(long, default_value = "1", value_name = "K|auto|nuts")]
    pub surrogate_steps_factor: String,
    /// Surrogate transitions (Liu 2001): K HMC transitions on the surrogate alone, each with its
    /// own MH step on the surrogate's U, between two exact judgements; the end point is then
    /// accepted against the exact U (delayed acceptance), so the draws target the exact
    /// posterior for every K. One exact U per iteration however far the K transitions move:
    /// for expensive models with a good surrogate. W:S runs W in warmup and S for the kept
    /// draws. auto runs 1 in warmup and, when warmup ends, fixes S for every kept draw from
    /// what the chain measured there: S = min(t_U / t_tr, -1 / ln a) rounded, within 1..20
    /// (t_U: seconds per exact judgement, t_tr: per surrogate transition, a: the judgements'
    /// acceptance); each chain's W:S is written to its CSV and rerunning with it makes the same
    /// draws. auto needs the surrogate to propose in warmup (--exact-warmup, --train-from
    /// laplace or --surrogate). Without it, one surrogate trajectory is judged at its end (the
    /// papers). rns-hmc and arns-hmc, with K or auto step factors.
    #[arg(long, value_name = "K|W:S|auto")]
    pub surrogate_transitions: Option<String>,
    /// VHMC: the network's weight in the blended potential is mu_t = 1 - exp(-t/TAU) at warmup
    /// iteration t (the Laplace approximation has the rest).
    #[arg(long, default_value_t = 200.0, allow_negative_numbers = true)]
    pub tau: f64,
    /// VHMC: accept with the surrogate V as published, instead of the exact U. The draws then
    /// target exp(-V): APPROXIMATE inference, labelled so in every output.
    #[arg(long)]
    pub approximate_acceptance: bool,
    /// Use a surrogate saved by `shmc train --save` instead of training one (`shmc train`:
    /// the kind to train, network, force-grid or sparse-grid).
    #[arg(long, value_name = "FILE")]
    pub surrogate: Option<PathBuf>,
    /// grid-hmc: the force grid's cell size per coordinate (cells grow as (extent/h)^d).
    #[arg(
        long,
        default_value_t = 0.1,
        value_name = "H",
        allow_negative_numbers = true
    )]
    pub cell: f64,
    /// grid-hmc: how the force is read between grid points. constant: the force at the
    /// centre of the point's cell, the paper's naive grid HMC. multilinear: blended from the
    /// cell's 2^d corners, one more point per coordinate to precompute; a continuous force
    /// that on the paper's 2-D problems accepts as often as exact HMC at --cell 0.1 (0.92
    /// against constant's 0.63 on its banana).
    #[arg(long, value_enum, default_value_t = InterpolationArg::Constant)]
    pub force_interpolation: InterpolationArg,
    /// sg-hmc: the regular sparse grid's level (default 5 unless --tolerance is given).
    #[arg(long, value_name = "K")]
    pub level: Option<u8>,
    /// sg-hmc: refine the sparse grid adaptively until its largest surplus is below T.
    #[arg(
        long,
        value_name = "T",
        conflicts_with = "level",
        allow_negative_numbers = true
    )]
    pub tolerance: Option<f64>,
    /// sg-hmc with --tolerance: the most points (exact evaluations) the grid may take.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_points: usize,
    /// The grid's box: the Laplace approximation's, each coordinate's interval holding
    /// probability P (default 0.999), the bounding box of the exact phase's states (10 %
    /// margin), or given as lo:hi,... per coordinate.
    #[arg(
        long,
        default_value = "laplace",
        value_name = "laplace[:P]|states|lo:hi,..."
    )]
    pub domain: String,
    /// The most bytes a data set, a PDE mesh, a grid, a network's training or the kept draws
    /// may take (default: half of this machine's memory); a larger one is refused before it is
    /// allocated.
    #[arg(long, value_name = "BYTES")]
    pub memory_limit: Option<u64>,
    /// A Gaussian process instead of the network (`--gp`, `--inducing`).
    #[command(flatten)]
    pub gp: GpArgs,
}

/// The choices of `--force-interpolation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InterpolationArg {
    Constant,
    Multilinear,
}

/// The choices of `--train-from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TrainFromArg {
    Warmup,
    Laplace,
}

/// Hidden units of a network fitted to all of `U` by default, and of one fitted to what the
/// Laplace approximation misses.
const DEFAULT_HIDDEN: (usize, usize) = (2000, 300);

impl SurrogateArgs {
    /// The first network or GP option given a value other than its default, if any: what a
    /// method that trains no surrogate (hmc, nuts, rmhmc, sgld, mlda without `net`) would
    /// otherwise ignore without a word. The defaults are clap's own, parsed from no arguments.
    pub fn network_option(&self) -> Option<&'static str> {
        let d = default_args();
        self.network_build_option(&d)
            .or_else(|| self.training_option(&d))
    }

    /// The first option of how the network is built and fitted given a value other than its
    /// default `d`'s: what a Gaussian process in its place (`--gp`) would ignore.
    fn network_build_option(&self, d: &SurrogateArgs) -> Option<&'static str> {
        [
            ("--hidden", self.hidden != d.hidden),
            ("--activation", self.activation != d.activation),
            ("--rbf-width", self.rbf_width != d.rbf_width),
            ("--ridge", self.ridge != d.ridge),
            ("--fit", self.fit != d.fit),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }

    /// The first option of where any surrogate's training states come from and how its
    /// proposals are made given a value other than its default `d`'s.
    fn training_option(&self, d: &SurrogateArgs) -> Option<&'static str> {
        [
            ("--train-states", self.train_states != d.train_states),
            ("--cubic", self.cubic != d.cubic),
            (
                "--surrogate-scale",
                self.surrogate_scale != d.surrogate_scale,
            ),
            ("--inputs", self.inputs != d.inputs),
            ("--train-after", self.train_after != d.train_after),
            ("--exact-warmup", self.exact_warmup != d.exact_warmup),
            (
                "--surrogate-steps-factor",
                self.surrogate_steps_factor != d.surrogate_steps_factor,
            ),
            (
                "--surrogate-transitions",
                self.surrogate_transitions != d.surrogate_transitions,
            ),
            ("--surrogate", self.surrogate != d.surrogate),
            ("--gp", self.gp.gp != d.gp.gp),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }

    /// `--memory-limit`, or half of this machine's memory.
    pub fn memory_limit(&self) -> u64 {
        self.memory_limit
            .unwrap_or_else(shmc::memory::machine_default_limit)
    }

    /// The VHMC settings for seed `seed`.
    pub fn vhmc(&self, seed: u64) -> Result<VhmcSettings> {
        self.gp.refuse("vhmc trains its own network")?;
        if self.surrogate.is_some() {
            return Err(Error::invalid(
                "--surrogate is for rns-hmc and arns-hmc; vhmc trains its own network",
            ));
        }
        let flag = if self.surrogate_steps_factor != "1" {
            "--surrogate-steps-factor"
        } else {
            "--surrogate-transitions"
        };
        if self.surrogate_steps_factor != "1" || self.surrogate_transitions.is_some() {
            return Err(Error::invalid(format!(
                "{flag} is for rns-hmc and arns-hmc; vhmc's trajectories are the exact \
                 phase's (--steps)"
            )));
        }
        Ok(VhmcSettings {
            train: self.network(seed)?,
            tau: self.tau,
            exact_acceptance: !self.approximate_acceptance,
        })
    }

    /// How the network is built and fitted, with seed `seed` (shared by every method).
    fn network(&self, seed: u64) -> Result<TrainOptions> {
        let nodes = match self.activation.as_str() {
            "softplus" => Nodes::Additive(Activation::Softplus),
            "sigmoid" => Nodes::Additive(Activation::Sigmoid),
            "tanh" => Nodes::Additive(Activation::Tanh),
            _ => Nodes::Rbf {
                width: self.rbf_width,
            },
        };
        let scale = options::surrogate_scale(&self.surrogate_scale)?;
        let laplace = self.train_from == TrainFromArg::Laplace;
        let default_hidden = if laplace {
            DEFAULT_HIDDEN.1
        } else {
            DEFAULT_HIDDEN.0
        };
        Ok(TrainOptions {
            memory_limit: self.memory_limit(),
            hidden: self.hidden.unwrap_or(default_hidden),
            nodes,
            ridge: self.ridge,
            scale,
            inputs: if self.inputs == "standardized" {
                Inputs::Standardized
            } else {
                Inputs::Whitened
            },
            seed,
            ..TrainOptions::default()
        })
    }

    /// The grid of kind `kind` (`force-grid` or `sparse-grid`) these options describe.
    pub fn grid(&self, kind: &str) -> Result<GridFitter> {
        self.gp.refuse("the grid methods fit a grid")?;
        let kind = match kind {
            "force-grid" => GridKind::Force {
                cell: self.cell,
                interpolation: match self.force_interpolation {
                    InterpolationArg::Constant => Interpolation::Constant,
                    InterpolationArg::Multilinear => Interpolation::Multilinear,
                },
            },
            _ => match (self.level, self.tolerance) {
                (_, Some(tolerance)) => GridKind::SparseAdaptive(AdaptiveOptions {
                    tolerance,
                    max_points: self.max_points,
                    ..AdaptiveOptions::default()
                }),
                (level, None) => GridKind::SparseLevel(level.unwrap_or(5)),
            },
        };
        let domain = options::domain(&self.domain)?;
        Ok(GridFitter {
            kind,
            domain,
            memory_limit: self.memory_limit(),
        })
    }

    /// The validated settings for a run with seed `seed`.
    pub fn settings(&self, seed: u64) -> Result<SurrogateSettings> {
        if self.surrogate.is_some() {
            self.gp
                .refuse("--surrogate loads a saved surrogate of its own kind")?;
        }
        if let Some(gp) = &self.gp.gp
            && let Some(flag) = self.network_build_option(&default_args())
        {
            return Err(Error::invalid(format!(
                "{flag} is for the network surrogate; --gp {gp} fits a Gaussian process in its \
                 place (its hyperparameters by the marginal likelihood), so it would change \
                 nothing"
            )));
        }
        Ok(SurrogateSettings {
            kind: self.gp.kind_or(
                SurrogateKind::Network(NetworkFitter {
                    options: self.network(seed)?,
                    method: match (self.fit.as_deref(), self.train_from) {
                        (Some("score"), _) | (None, TrainFromArg::Laplace) => FitMethod::Score,
                        _ => FitMethod::Potential,
                    },
                }),
                seed,
                self.memory_limit(),
            )?,
            train_from: match self.train_from {
                TrainFromArg::Warmup => TrainFrom::Warmup,
                TrainFromArg::Laplace => TrainFrom::Laplace {
                    states: self.train_states,
                },
            },
            cubic: self.cubic,
            train_after: self.train_after,
            exact_warmup: self.exact_warmup,
            start_after: self.start_after,
            start_error: self.start_error,
            adapt_rate: self.adapt_rate,
            trajectory: options::surrogate_steps(&self.surrogate_steps_factor)?,
            transitions: self
                .surrogate_transitions
                .as_deref()
                .map(Transitions::parse)
                .transpose()?,
            surrogate_file: self.surrogate.clone(),
            approximate_acceptance: self.approximate_acceptance,
        })
    }
}

/// The surrogate options as clap's defaults set them (no option given).
fn default_args() -> SurrogateArgs {
    use clap::FromArgMatches;
    let command = SurrogateArgs::augment_args(clap::Command::new("defaults"));
    let matches = command.get_matches_from(["defaults"]);
    SurrogateArgs::from_arg_matches(&matches).expect("the options' defaults parse")
}
