//! Which sampler a chain runs: exact HMC, NUTS (what Stan users compare against), or one of the
//! surrogate-accelerated methods that learn a cheap potential from the chain's own history and
//! use it only to propose.
//!
//! Every method here except VHMC's approximate acceptance (and SGLD, which has no
//! Metropolis–Hastings step at all) keeps the exact `U` in the Metropolis–Hastings step, so the
//! chain targets the exact posterior. The surrogate adapts only
//! during warmup; the kept draws come from a fixed proposal, an ordinary MCMC kernel.

use shmc_core::Steps;

use super::multilevel::MldaSettings;
use super::surrogate_settings::SurrogateSettings;
use super::trajectory::SurrogateSteps;
use super::transitions::Transitions;
use crate::riemannian::GeneralizedLeapfrog;
use crate::surrogates::grids::GridKind;
use crate::surrogates::network::{NetworkFitter, TrainOptions};
use crate::surrogates::{FitMethod, Fitter};
use crate::{Error, Result};

/// How the step size is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StepSize {
    /// Dual averaging during warmup towards `target` acceptance, from Stan's heuristic start.
    Adapt {
        /// The acceptance rate aimed at (Stan: 0.8).
        target: f64,
    },
    /// A fixed step size, as the papers use.
    Fixed(f64),
}

/// The sampler.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    /// Exact HMC: the exact gradient drives every leapfrog step.
    Hmc,
    /// The No-U-Turn Sampler (Hoffman & Gelman 2014), Stan's default, from nuts-rs (the crate
    /// nutpie wraps): trajectories doubled until they turn back, a diagonal mass matrix and the
    /// step size adapted in warmup (the sampler's `nuts` module).
    Nuts(NutsSettings),
    /// RNS-HMC (journal Alg. 3): exact HMC through warmup collecting the accepted states
    /// (from `train_after` on), a network trained on them at the end of warmup, then surrogate
    /// proposals with the exact MH step.
    RnsHmc(SurrogateSettings),
    /// ARNS-HMC (journal Alg. 4): the network starts after `start_after` collected states and is
    /// updated online (Greville, O(s²) per state) through the rest of warmup, the sampler
    /// swapping in the updated weights with probability `t^(−κ)`.
    ArnsHmc(SurrogateSettings),
    /// VHMC (Bayesian Analysis paper, Alg. 2): the Laplace approximation at the MAP first, then
    /// the network trained online by score matching on the exact gradients of the accepted
    /// warmup states, blended with the Laplace quadratic by `μ_t = 1 − exp(−t/τ)` (the
    /// sampler's `variational` module).
    Vhmc(VhmcSettings),
    /// Riemannian-manifold HMC (Girolami & Calderhead 2011): the generalized leapfrog under the
    /// model's own metric ([`crate::Model::riemannian_metric`]), exact `U` throughout.
    Rmhmc(RmhmcSettings),
    /// RNS-RMHMC (journal section 3.4): RNS-HMC's exact warmup and network fit, then RMHMC
    /// transitions whose dynamics are the network's potential and its SoftAbs'd Hessian (the
    /// whole, or its diagonal), judged by the exact `U`.
    RnsRmhmc(SurrogateSettings, RmhmcSettings),
    /// Stochastic-gradient Langevin dynamics (Welling & Teh 2011), the VHMC paper's baseline:
    /// one Langevin step per iteration on a minibatch estimate of `∇U`, with a decreasing step
    /// size and no Metropolis–Hastings step, so the draws are APPROXIMATE (biased by the step
    /// size and the gradient noise); it needs a [`RowSum`](crate::row_sum::RowSum) model (the
    /// sampler's `sgld` module).
    Sgld(SgldSettings),
    /// Multilevel delayed acceptance (Lykkegaard et al. 2023): HMC on the model's coarsest
    /// level, each level's subchain proposing to the next, the model itself judging (the
    /// chain's `mlda` kernel); it needs a model with levels ([`crate::Model::levels`]).
    Mlda(MldaSettings),
}

/// The settings of SGLD: the step size `ε_t = a (b + t)^(−γ)` at iteration `t` (from 0, warmup
/// included) and the minibatch size.
#[derive(Clone, Debug, PartialEq)]
pub struct SgldSettings {
    /// Rows per minibatch `n` (without replacement; all rows if the data have fewer). The VHMC
    /// paper's SGLD uses 500 on a9a and on the MEG data.
    pub batch: usize,
    /// The step size's scale `a`. The right one depends on the posterior's scale (a step must
    /// stay well below the posterior's smallest variance), so there is no universal default:
    /// 10⁻⁴ suits posteriors of sd ~0.01–0.1 (regressions on 10³–10⁵ rows).
    pub a: f64,
    /// The step size's offset `b`: the schedule starts at `a b^(−γ)`.
    pub b: f64,
    /// The decay `γ`, in (0.5, 1] for Welling & Teh's conditions (`Σε = ∞`, `Σε² < ∞`); their
    /// 0.55 by default (the VHMC paper's ICA run uses 0.5, at the boundary).
    pub gamma: f64,
}

impl Default for SgldSettings {
    fn default() -> Self {
        Self {
            batch: 500,
            a: 1e-4,
            b: 1.0,
            gamma: 0.55,
        }
    }
}

impl SgldSettings {
    /// The refusal for a model whose `U` is not a sum over data rows.
    pub(super) fn refusal_without_rows() -> Error {
        Error::invalid(
            "sgld needs minibatches of the data, so a model whose U is a sum over data rows \
             (logistic, probit); this model's is not",
        )
    }

    /// The step size `a (b + t)^(−γ)` of iteration `t` (from 0).
    pub fn step_size(&self, t: usize) -> f64 {
        self.a * (self.b + t as f64).powf(-self.gamma)
    }

    fn validate(&self) -> Result<()> {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if self.batch == 0 {
            return Err(Error::setting("sgld_batch", "must be at least 1"));
        }
        if !positive(self.a) {
            return Err(Error::setting("sgld_a", "must be a finite positive number"));
        }
        if !positive(self.b) {
            return Err(Error::setting("sgld_b", "must be a finite positive number"));
        }
        if !(self.gamma.is_finite() && self.gamma >= 0.0 && self.gamma <= 1.0) {
            return Err(Error::setting("sgld_gamma", "must lie in [0, 1]"));
        }
        Ok(())
    }
}

/// The settings of NUTS that Stan names; the rest are nuts-rs's defaults (see the sampler's
/// `nuts` module).
#[derive(Clone, Debug, PartialEq)]
pub struct NutsSettings {
    /// The most doublings of a trajectory: at most `2^max_depth − 1` leapfrog steps per
    /// transition (Stan: 10). A transition that reaches it has not turned back yet, so many of
    /// them mean the step size is small for the posterior's scale.
    pub max_depth: u64,
}

impl Default for NutsSettings {
    fn default() -> Self {
        Self { max_depth: 10 }
    }
}

/// The settings of RMHMC's transitions (exact or on the surrogate). There is no Euclidean
/// metric to adapt: the metric is the model's or the network's.
#[derive(Clone, Debug, PartialEq)]
pub struct RmhmcSettings {
    /// Fixed (the papers'), or adapted by dual averaging on the RMHMC transitions' own
    /// acceptance during the warmup they run in (RNS-RMHMC's: under the surrogate's own
    /// Hamiltonian, which no fitting error lowers).
    pub step_size: StepSize,
    /// The trajectory length, jittered like HMC's by default.
    pub steps: Steps,
    /// The fixed-point solves stop once successive iterates differ by less than this (largest
    /// coordinate in the metric's units, see [`crate::riemannian::integrator`]).
    pub tolerance: f64,
    /// A fixed-point solve not converged after this many iterations is a divergent, rejected
    /// transition.
    pub max_iterations: u32,
    /// A step integrated back that misses its start by more than this (in the metric's units)
    /// is a divergent, rejected transition; `None` skips the check (half the cost of a step, and no guarantee that the
    /// solves found the reversible fixed point).
    pub reverse_tolerance: Option<f64>,
    /// RNS-RMHMC: SoftAbs's `α`, so the network metric's eigenvalues are at least `1/α`.
    pub softabs_alpha: f64,
    /// RNS-RMHMC: the SoftAbs'd diagonal of the network's Hessian instead of the whole (the
    /// journal's choice for the PDE problem).
    pub diagonal: bool,
}

impl Default for RmhmcSettings {
    fn default() -> Self {
        Self {
            step_size: StepSize::Adapt { target: 0.8 },
            steps: Steps::Jittered(6),
            tolerance: GeneralizedLeapfrog::DEFAULT_TOLERANCE,
            max_iterations: GeneralizedLeapfrog::DEFAULT_MAX_ITERATIONS,
            reverse_tolerance: Some(GeneralizedLeapfrog::DEFAULT_REVERSE_TOLERANCE),
            softabs_alpha: 1.0,
            diagonal: false,
        }
    }
}

impl RmhmcSettings {
    /// The integrator with step size `step_size`.
    pub fn integrator(&self, step_size: f64) -> GeneralizedLeapfrog {
        GeneralizedLeapfrog {
            step_size,
            tolerance: self.tolerance,
            max_iterations: self.max_iterations,
            reverse_tolerance: self.reverse_tolerance,
        }
    }

    /// Checks the settings; `adapt_warmup`: the warmup iterations RMHMC runs in, where an
    /// adapted step size learns.
    fn validate(&self, adapt_warmup: usize) -> Result<()> {
        match self.step_size {
            StepSize::Fixed(eps) if !(eps.is_finite() && eps > 0.0) => {
                return Err(Error::setting(
                    "rmhmc_step_size",
                    format!("must be a finite positive number, got {eps}"),
                ));
            }
            StepSize::Adapt { target } if !(target > 0.0 && target < 1.0) => {
                return Err(Error::setting(
                    "target_accept",
                    format!("must lie strictly between 0 and 1, got {target}"),
                ));
            }
            StepSize::Adapt { .. } if adapt_warmup == 0 => {
                return Err(Error::setting(
                    "rmhmc_step_size",
                    "needs a value: no warmup iteration runs RMHMC to adapt it in (rns-rmhmc \
                     adapts it only after an exact warmup shorter than the warmup)",
                ));
            }
            _ => {}
        }
        if self.steps.max() == 0 {
            return Err(Error::setting("rmhmc_steps", "must be at least 1"));
        }
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !positive(self.tolerance) {
            return Err(Error::setting(
                "fixed_point_tolerance",
                "must be a finite positive number",
            ));
        }
        if self.max_iterations == 0 {
            return Err(Error::setting(
                "fixed_point_max_iterations",
                "must be at least 1",
            ));
        }
        if !self.reverse_tolerance.is_none_or(positive) {
            return Err(Error::setting(
                "reversibility_tolerance",
                "must be a finite positive number",
            ));
        }
        if !positive(self.softabs_alpha) {
            return Err(Error::setting(
                "softabs_alpha",
                "must be a finite positive number",
            ));
        }
        Ok(())
    }
}

/// The settings of VHMC.
#[derive(Clone, Debug, PartialEq)]
pub struct VhmcSettings {
    /// Hidden units, unit kind, seed, input scale (`Scale::Auto`: chosen on the pilot) and the
    /// ridge `λ` of the score matching (online: `C₀ = I/λ`).
    pub train: TrainOptions,
    /// The time constant `τ` of `μ_t = 1 − exp(−t/τ)`, in iterations.
    pub tau: f64,
    /// Accept with the exact `U` (the default: an exact chain), or with `V_t` as published
    /// (approximate inference: the chain targets `exp(−V_t)`).
    pub exact_acceptance: bool,
}

impl Default for VhmcSettings {
    fn default() -> Self {
        Self {
            train: TrainOptions {
                hidden: 100,
                ridge: 1e-3,
                ..TrainOptions::default()
            },
            tau: 200.0,
            exact_acceptance: true,
        }
    }
}

impl Method {
    /// The warmup iterations of exact HMC after which a surrogate fitted on warmup states
    /// proposes, when that is before the end of warmup: the settings' `exact_warmup`, and for
    /// RNS-RMHMC left to adapt its step size without one, half the warmup, since that step size
    /// adapts only on RMHMC's own transitions (fitting at the end of warmup, as the papers do
    /// with their fixed step sizes, would leave it none to adapt in).
    pub fn exact_warmup(&self, warmup: usize) -> Option<usize> {
        match self {
            Method::RnsRmhmc(s, r)
                if s.exact_warmup.is_none()
                    && s.surrogate_file.is_none()
                    && !s.before_sampling()
                    && matches!(r.step_size, StepSize::Adapt { .. }) =>
            {
                Some(warmup / 2)
            }
            Method::RnsHmc(s) | Method::ArnsHmc(s) | Method::RnsRmhmc(s, _) => s.exact_warmup,
            Method::Mlda(m) => m.network.as_ref().and_then(|s| s.exact_warmup),
            _ => None,
        }
    }

    /// The method's name on the command line and in the output.
    pub fn name(&self) -> &'static str {
        match self {
            Method::Hmc => "hmc",
            Method::Nuts(_) => "nuts",
            Method::RnsHmc(s) => match (s.kind.grid(), s.approximate_acceptance) {
                (None, _) => "rns-hmc",
                (Some(g), false) if matches!(g.kind, GridKind::Force { .. }) => "grid-hmc",
                (Some(_), false) => "sg-hmc",
                (Some(g), true) if matches!(g.kind, GridKind::Force { .. }) => "grid-hmc-complete",
                (Some(_), true) => "sg-hmc-complete",
            },
            Method::ArnsHmc(_) => "arns-hmc",
            Method::Vhmc(v) if v.exact_acceptance => "vhmc",
            Method::Vhmc(_) => "vhmc-approximate",
            Method::Rmhmc(_) => "rmhmc",
            Method::RnsRmhmc(..) => "rns-rmhmc",
            Method::Sgld(_) => "sgld",
            Method::Mlda(_) => "mlda",
        }
    }

    /// Whether the chains target only an approximation of the posterior (VHMC with its
    /// published acceptance rule, a grid's "complete" variant, SGLD).
    pub fn approximate(&self) -> bool {
        match self {
            Method::Sgld(_) => true,
            Method::Vhmc(v) => !v.exact_acceptance,
            Method::RnsHmc(s) | Method::ArnsHmc(s) | Method::RnsRmhmc(s, _) => {
                s.approximate_acceptance
            }
            Method::Hmc | Method::Nuts(_) | Method::Rmhmc(_) | Method::Mlda(_) => false,
        }
    }

    /// The surrogate settings, for RNS-HMC, ARNS-HMC, RNS-RMHMC and MLDA's network level.
    pub fn surrogate(&self) -> Option<&SurrogateSettings> {
        match self {
            Method::Hmc
            | Method::Nuts(_)
            | Method::Vhmc(_)
            | Method::Rmhmc(_)
            | Method::Sgld(_) => None,
            Method::Mlda(m) => m.network.as_ref(),
            Method::RnsHmc(s) | Method::ArnsHmc(s) | Method::RnsRmhmc(s, _) => Some(s),
        }
    }

    /// The RMHMC settings, for RMHMC and RNS-RMHMC.
    pub fn rmhmc(&self) -> Option<&RmhmcSettings> {
        match self {
            Method::Rmhmc(r) | Method::RnsRmhmc(_, r) => Some(r),
            _ => None,
        }
    }

    /// Checks the settings against the run's warmup length.
    ///
    /// Long (over 100 lines) because it is one flat list of refusals, each a few lines with
    /// its message, read top to bottom as the methods' rules; the per-kind settings check their
    /// own ranges (`RmhmcSettings::validate`, `VhmcSettings::validate`, ...).
    pub fn validate(&self, warmup: usize) -> Result<()> {
        match self {
            Method::Nuts(n) if n.max_depth == 0 => {
                return Err(Error::setting("max_depth", "must be at least 1"));
            }
            Method::Vhmc(v) => return v.validate(warmup),
            Method::Sgld(s) => return s.validate(),
            Method::Rmhmc(r) => return r.validate(warmup),
            Method::Mlda(m) => {
                m.validate()?;
                check_network_level(m.network.as_ref())?;
            }
            Method::RnsRmhmc(s, r) => {
                // The warmup RMHMC runs in: all of it for a network trained before sampling.
                let adapt_warmup = match (s.laplace_states(), self.exact_warmup(warmup)) {
                    (Some(_), _) => warmup,
                    (None, exact) => exact.map_or(0, |exact| warmup.saturating_sub(exact)),
                };
                r.validate(adapt_warmup)?;
                if s.kind.network().is_none() || s.approximate_acceptance {
                    return Err(Error::invalid(
                        "rns-rmhmc's metric is the network's Hessian: it needs a network \
                         surrogate and the exact MH step",
                    ));
                }
            }
            _ => {}
        }
        let Some(s) = self.surrogate() else {
            return Ok(());
        };
        if let Some(network) = s.kind.network() {
            check_network(&network.options)?;
            if s.surrogate_file.is_none() {
                network.options.check_memory(warmup)?;
            }
        }
        if s.approximate_acceptance && s.kind.grid().is_none() {
            return Err(Error::invalid(
                "approximate acceptance with a grid's U is for grid-hmc and sg-hmc",
            ));
        }
        if !s.fitter().learns_online() && matches!(self, Method::ArnsHmc(_)) {
            return Err(Error::invalid(
                "only the network learns online (not a grid or a Gaussian process): use \
                 this surrogate with rns-hmc's single fit",
            ));
        }
        if !(s.adapt_rate > 0.0 && s.adapt_rate <= 1.0) {
            return Err(Error::setting("adapt_rate", "must lie in (0, 1]"));
        }
        if s.trajectory == SurrogateSteps::Nuts
            && (matches!(self, Method::RnsRmhmc(..)) || s.approximate_acceptance)
        {
            return Err(Error::setting(
                "surrogate_steps_factor",
                "nuts is for rns-hmc and arns-hmc with the exact MH step (delayed acceptance \
                 judges the trees' draws against the exact U)",
            ));
        }
        check_transitions(self, s)?;
        if s.trajectory == SurrogateSteps::Factor(0) {
            return Err(Error::setting(
                "surrogate_steps_factor",
                "must be at least 1",
            ));
        }
        if matches!(self, Method::ArnsHmc(_))
            && s.kind
                .network()
                .is_some_and(|n| n.method == FitMethod::Score)
        {
            return Err(Error::setting(
                "fit",
                "must be potential for arns-hmc, which updates its weights online from potential \
                 values (rns-hmc and vhmc fit scores)",
            ));
        }
        if let Some(states) = s.laplace_states() {
            if !matches!(self, Method::RnsHmc(_) | Method::RnsRmhmc(..))
                || s.kind.network().is_none()
                || s.surrogate_file.is_some()
                || s.exact_warmup.is_some()
            {
                return Err(Error::setting(
                    "train_from",
                    "laplace is for rns-hmc's network (and rns-rmhmc's), fitted once before \
                     sampling (not with a grid, a saved surrogate or an exact warmup)",
                ));
            }
            if states < MIN_LAPLACE_STATES {
                return Err(Error::setting(
                    "train_states",
                    format!("({states}) must be at least {MIN_LAPLACE_STATES}"),
                ));
            }
            if let Some(network) = s.kind.network() {
                network.options.check_memory(states)?;
            }
        }
        let needs_states = s.surrogate_file.is_none() && !s.before_sampling();
        let train_after = s.collect_after(warmup, self.exact_warmup(warmup));
        if let Some(exact) = s.exact_warmup {
            if !matches!(
                self,
                Method::RnsHmc(_) | Method::RnsRmhmc(..) | Method::Mlda(_)
            ) || !needs_states
            {
                return Err(Error::setting(
                    "exact_warmup",
                    "is for rns-hmc fitting its surrogate on warmup states (arns-hmc starts \
                     proposing when its fit is good enough)",
                ));
            }
            if exact > warmup || train_after >= exact {
                return Err(Error::setting(
                    "exact_warmup",
                    format!(
                        "({exact}) must lie above the iterations before states are collected \
                         ({train_after}) and at most the warmup ({warmup})"
                    ),
                ));
            }
        }
        if needs_states && train_after >= warmup {
            return Err(Error::setting(
                "train_after",
                format!(
                    "({train_after}) must be below the warmup ({warmup}): the surrogate trains \
                     on warmup states"
                ),
            ));
        }
        Ok(())
    }
}

/// MLDA's network level runs HMC subchains on the surrogate, judged by the coarsest mesh: not
/// NUTS trees, not surrogate transitions (its subchain is that already), not an approximate
/// rule; and a network fitted on MLDA's warmup fits potentials (the states' gradients there
/// are the coarsest level's).
fn check_network_level(network: Option<&SurrogateSettings>) -> Result<()> {
    let Some(s) = network else {
        return Ok(());
    };
    let (setting, why) = if s.laplace_states().is_some() {
        (
            "train_from",
            "laplace is not for mlda's network: the chains would run in the Laplace \
             approximation's coordinates, which the meshes do not share",
        )
    } else if s.transitions.is_some() {
        (
            "surrogate_transitions",
            "is not for mlda: the network level's subchain is its surrogate transitions (set \
             its length with the subchains)",
        )
    } else if s.trajectory != SurrogateSteps::Factor(1) {
        (
            "surrogate_steps_factor",
            "is not for mlda: the network level runs the chain's own HMC trajectories",
        )
    } else if s.approximate_acceptance {
        (
            "approximate_acceptance",
            "is not for mlda, whose finest level judges exactly",
        )
    } else if s.surrogate_file.is_none()
        && s.kind
            .network()
            .is_some_and(|n| n.method == FitMethod::Score)
    {
        (
            "fit",
            "must be potential for mlda's network: its warmup states carry the coarsest \
             level's gradient, not the model's",
        )
    } else {
        return Ok(());
    };
    Err(Error::setting(setting, why))
}

/// Surrogate transitions run HMC on the surrogate with the exact `U` judging: at least one per
/// judgement, and with neither NUTS trees, RNS-RMHMC's generalized leapfrog nor an approximate
/// rule. `auto` measures the surrogate's transitions in warmup, so rns-hmc's surrogate must
/// propose then (arns-hmc's starts when its fit is good: until then `auto` keeps warmup's `k`).
fn check_transitions(method: &Method, s: &SurrogateSettings) -> Result<()> {
    let why = match s.transitions {
        None => return Ok(()),
        Some(Transitions::Fixed { warmup, sampling }) if warmup == 0 || sampling == 0 => {
            "must be at least 1"
        }
        Some(_) if s.trajectory == SurrogateSteps::Nuts => {
            "runs HMC transitions on the surrogate, not NUTS trees"
        }
        Some(_) if matches!(method, Method::RnsRmhmc(..)) => {
            "is for rns-hmc and arns-hmc (rns-rmhmc judges each generalized-leapfrog trajectory)"
        }
        Some(_) if s.approximate_acceptance => {
            "needs the exact MH step, which an approximate acceptance rule leaves out"
        }
        Some(Transitions::Auto)
            if matches!(method, Method::RnsHmc(_))
                && s.exact_warmup.is_none()
                && s.surrogate_file.is_none()
                && !s.before_sampling() =>
        {
            "auto measures the surrogate's transitions during warmup, and this surrogate is \
             fitted only when warmup ends: let it propose in warmup (exact_warmup, train_from \
             laplace, or a saved surrogate) or give K"
        }
        Some(_) => return Ok(()),
    };
    Err(Error::setting("surrogate_transitions", why))
}

impl VhmcSettings {
    /// How the pilot fit is made: the network with [`Self::train`], by score matching, which
    /// its online learning then continues on the accepted states' exact gradients.
    pub fn fitter(&self) -> Box<dyn Fitter> {
        Box::new(NetworkFitter {
            options: self.train.clone(),
            method: FitMethod::Score,
        })
    }

    fn validate(&self, warmup: usize) -> Result<()> {
        check_network(&self.train)?;
        self.train.check_memory(warmup)?;
        if !(self.tau.is_finite() && self.tau > 0.0) {
            return Err(Error::setting("tau", "must be a finite positive number"));
        }
        if warmup == 0 {
            return Err(Error::setting(
                "warmup",
                "must be positive: vhmc trains its surrogate during warmup",
            ));
        }
        Ok(())
    }
}

/// The fewest Laplace draws a network trains on: a fifth are held out to choose its scale.
pub const MIN_LAPLACE_STATES: usize = 20;

/// The network options every surrogate method needs: at least one unit, a positive ridge.
fn check_network(train: &TrainOptions) -> Result<()> {
    if train.hidden == 0 {
        return Err(Error::setting("hidden", "must be at least 1"));
    }
    if !(train.ridge.is_finite() && train.ridge > 0.0) {
        return Err(Error::setting("ridge", "must be a finite positive number"));
    }
    Ok(())
}
