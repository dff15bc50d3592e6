//! Surrogates: cheap stand-ins for the potential `U`, learned from the states an exact phase
//! visited, that the samplers use only to propose.
//!
//! [`Surrogate`] is everything a sampler asks of a trained one, whatever its kind: a potential
//! to propose with, the domain where it stands for `U` (outside it the proposal takes the exact
//! gradient: [`Fallback`]), how it is saved (a file names its kind, and [`kinds::load`]
//! dispatches on it), and two capabilities a kind may lack: its curvature ([`Curvature`], from
//! which the trajectory lengths can be chosen) and learning state by state ([`Online`]). A
//! [`Fitter`] is how a kind is fitted in one batch: to a [`TrainingSet`] (the network), or from
//! the exact potential itself (a grid, which may need no states at all).
//! The samplers drive `dyn Surrogate` and `dyn Fitter` alone, so a new kind is a new module
//! here and a line in [`kinds`], never a second sampler path.
//!
//! Layers: the kinds ([`network`], [`grids`], and [`anchored`], a network on top of the Laplace
//! approximation's quadratic) build on this module, [`states`], [`exact_floats`] and
//! [`mod@file`]; [`kinds`] knows every kind; [`laplace`] blends any surrogate with a Laplace
//! approximation (VHMC). None of them knows a sampler.

pub mod anchored;
pub mod cubic;
pub mod exact_floats;
pub mod file;
pub mod gp;
pub mod grids;
pub mod kinds;
pub mod laplace;
pub mod network;
pub mod states;
pub mod trained_on;

pub use kinds::SurrogateKind;

use std::cell::Cell;
use std::fmt::Debug;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use shmc_core::Potential;

use crate::Result;
use states::TrainingSet;

/// Which quantity a surrogate was fitted to: the potential values of the states, or their
/// gradients (score matching: `d` equations per state instead of one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FitMethod {
    /// Potential values ([`network::fit_potential`]).
    #[default]
    Potential,
    /// Potential gradients ([`network::fit_score`]).
    Score,
}

/// What a surrogate file records about how its surrogate was fitted, beside the surrogate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SurrogateMeta {
    /// The model (target) the surrogate was trained for.
    pub model: String,
    /// The data file it was trained on, as the run named it: `Some(None)` for none (a model
    /// that reads no file); `None` when not recorded (a file written before shmc recorded it,
    /// which still loads: see [`trained_on`]).
    #[serde(
        default,
        deserialize_with = "trained_on::recorded",
        skip_serializing_if = "Option::is_none"
    )]
    pub data: Option<Option<String>>,
    /// What the surrogate was fitted to.
    pub method: FitMethod,
    /// The input scale factor (the network's `c`; NaN for a kind without one).
    #[serde(with = "exact_floats")]
    pub scale: f64,
    /// The held-out relative RMS gradient error (NaN if unknown).
    #[serde(with = "exact_floats")]
    pub holdout_gradient_error: f64,
    /// The held-out RMS error of the potential (NaN if unknown).
    #[serde(with = "exact_floats")]
    pub holdout_value_rmse: f64,
    /// The number of training states.
    pub training_states: usize,
    /// The ridge parameter of the fit (NaN if unknown); an online fit goes on with it.
    #[serde(with = "exact_floats")]
    pub ridge: f64,
    /// The seed of the random input parameters (the network's).
    pub seed: u64,
    /// Wall time of the training, in seconds.
    #[serde(with = "exact_floats")]
    pub train_seconds: f64,
}

impl Default for SurrogateMeta {
    fn default() -> Self {
        Self {
            model: String::new(),
            data: None,
            method: FitMethod::default(),
            scale: f64::NAN,
            holdout_gradient_error: f64::NAN,
            holdout_value_rmse: f64::NAN,
            training_states: 0,
            ridge: f64::NAN,
            seed: 0,
            train_seconds: f64::NAN,
        }
    }
}

/// A trained surrogate: what a sampler needs of one, whatever its kind.
///
/// Its [`Potential`] is the surrogate's own, meaningful inside its domain; a sampler proposes
/// with [`Fallback`], which takes the exact potential outside. Only the gradient drives a
/// trajectory, and the exact `U` judges it, so a surrogate's level is free (a gradient fit sets
/// it only up to a constant).
pub trait Surrogate: Potential + Debug + Send + Sync {
    /// Whether `q` lies where the surrogate stands for `U`. A kind fitted on a bounded region (a
    /// grid over a box) knows nothing outside it; the default, everywhere, is the network's.
    fn contains(&self, _q: &[f64]) -> bool {
        true
    }

    /// `Ũ(q)` if `q` lies in the surrogate's domain ([`Surrogate::contains`]), else `None`.
    /// [`Fallback`] asks this instead of `contains` and then the value, so that a kind whose
    /// evaluation finds out anyway whether `q` is inside (a grid's cell lookup) overrides it and
    /// tests the domain once per leapfrog step, not twice.
    fn value_within(&self, q: &[f64]) -> Option<f64> {
        self.contains(q).then(|| self.value(q))
    }

    /// Writes `∇Ũ(q)` into `grad` and returns `Ũ(q)` if `q` lies in the surrogate's domain;
    /// else `None`, with `grad` untouched (see [`Surrogate::value_within`]).
    fn value_and_gradient_within(&self, q: &[f64], grad: &mut [f64]) -> Option<f64> {
        self.contains(q).then(|| self.value_and_gradient(q, grad))
    }

    /// Writes `∇Ũ(q)` into `grad` and returns `true` if `q` lies in the surrogate's domain;
    /// else `false`, with `grad` untouched (see [`Surrogate::value_within`]).
    fn gradient_within(&self, q: &[f64], grad: &mut [f64]) -> bool {
        let inside = self.contains(q);
        if inside {
            self.gradient(q, grad);
        }
        inside
    }

    /// `∇Ũ(q)` for a leapfrog step ([`Potential::gradient_ref`]): where the surrogate stores
    /// it, if its kind keeps gradients in a table (a force grid's cells), read in place at no
    /// copy; else written into `buf`; or [`GradientAt::Outside`] the domain, with `buf`
    /// untouched. One call per step either way (the default asks
    /// [`Surrogate::gradient_within`]).
    fn gradient_ref_within<'s>(&'s self, q: &[f64], buf: &mut [f64]) -> GradientAt<'s> {
        if self.gradient_within(q, buf) {
            GradientAt::Written
        } else {
            GradientAt::Outside
        }
    }

    /// The surrogate's curvature, if its kind knows it: the trajectory lengths can then be
    /// chosen from it. `None` keeps the exact phase's lengths.
    fn curvature(&self) -> Option<&dyn Curvature> {
        None
    }

    /// The surrogate as a random network plus a multiple of `½‖x‖²`, if it is one: RNS-RMHMC
    /// builds its metric from the network's Hessian and third derivatives. `None`: a kind
    /// without them (a grid).
    fn network(&self) -> Option<NetworkForm<'_>> {
        None
    }

    /// Learning state by state, if its kind can (the network can; a grid cannot). `None` keeps
    /// the batch fit.
    fn online(&mut self) -> Option<&mut dyn Online> {
        None
    }

    /// An estimate of `‖U − Ũ‖∞` over its domain, if its kind has one (a grid does): what a
    /// sampler that also accepts with `Ũ` (a grid's approximate "complete" variant) states with
    /// its label, `KL ≤ 2‖U − Ũ‖∞`. `None`: no estimate.
    fn sup_error_estimate(&self) -> Option<f64> {
        None
    }

    /// Writes the surrogate and `meta` to the JSON file `path`, under its kind's name, so that
    /// [`kinds::load`] rebuilds it bit for bit.
    fn save(&self, path: &Path, meta: &SurrogateMeta) -> Result<()>;
}

/// A surrogate that is a random network plus `shift · ½‖x‖²` ([`Surrogate::network`]): its
/// Hessian is the network's plus `shift` times the identity.
#[derive(Clone, Copy, Debug)]
pub struct NetworkForm<'s> {
    /// The network.
    pub network: &'s shmc_core::Network<shmc_core::Dyn, shmc_core::Dyn>,
    /// What the surrogate adds to the network's Hessian's diagonal: 0 for the network alone, 1
    /// for an anchored surrogate (the quadratic `½‖x‖²` plus a residual network).
    pub shift: f64,
}

/// A surrogate's Hessian, which predicts how trajectories rotate the posterior's directions.
pub trait Curvature {
    /// Writes `∇²V(q)` into `out` (`d × d`, column-major).
    fn hessian(&self, q: &[f64], out: &mut [f64]);
}

/// A surrogate that goes on learning after its batch fit, one state at a time.
///
/// The fit moves on in the background and the potential changes only at [`Online::publish`], so
/// the sampler decides when its proposal changes (ARNS-HMC: with a vanishing probability).
pub trait Online {
    /// Starts from `states`, the batch fit's own: they are replayed, so that the online fit is
    /// the batch fit of them, and every later state extends it.
    fn begin(&mut self, states: &TrainingSet) -> Result<()>;

    /// Adds the state `q` with exact potential `potential` and, when known, exact gradient.
    fn learn(&mut self, q: &[f64], potential: f64, gradient: Option<&[f64]>) -> Result<()>;

    /// Makes the surrogate's potential the online fit so far.
    fn publish(&mut self) -> Result<()>;
}

/// How a surrogate of some kind is fitted in one batch: its kind and options, held by a sampler
/// until what the fit needs is there.
pub trait Fitter {
    /// The surrogate of `model`'s exact potential fitted to `states` (a kind may evaluate
    /// `model` itself, as a grid does at its points), and how well it did.
    fn fit(&self, model: &(dyn Potential + Sync), states: &TrainingSet) -> Result<Fitted>;

    /// Whether the fit needs no states, so that it is made once before sampling, shared by
    /// every chain, instead of after each chain's exact phase. The default: it needs them.
    fn before_sampling(&self) -> bool {
        false
    }

    /// Whether the surrogates it fits go on learning state by state ([`Surrogate::online`]),
    /// as ARNS-HMC needs. The default: they do not.
    fn learns_online(&self) -> bool {
        false
    }

    /// The kind's settings a run's CSV header records beside the method's name, as `(key,
    /// value)` pairs (a force grid's cell and interpolation). The default: none.
    fn header(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Refuses, before any chain starts, a fit on up to `states` states in dimension `dim`
    /// that the memory limit would refuse only when it is made, after the whole warmup. The
    /// default: nothing to check here (the network's sizes are checked with the method's
    /// settings, a grid's when it is built before sampling).
    fn check_memory(&self, _states: usize, _dim: usize) -> Result<()> {
        Ok(())
    }
}

/// A batch fit's surrogate and the figures the output reports about it.
#[derive(Debug)]
pub struct Fitted {
    /// The surrogate.
    pub surrogate: Box<dyn Surrogate>,
    /// The input scale factor chosen (the network's `c`; NaN for a kind without one).
    pub scale: f64,
    /// Relative RMS gradient error on the held-out states (NaN if none had a gradient).
    pub holdout_gradient_error: f64,
    /// Wall time of the fit, in seconds.
    pub seconds: f64,
    /// Exact evaluations the fit made itself (a grid's points, its box's MAP search); 0 for a
    /// fit to the states alone.
    pub exact_evaluations: u64,
}

/// One surrogate shared by every chain (a grid precomputed before sampling): each chain
/// proposes with it, none can change it, so it has no online learning.
#[derive(Clone, Debug)]
pub struct Shared(pub Arc<dyn Surrogate>);

impl Potential for Shared {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn value(&self, q: &[f64]) -> f64 {
        self.0.value(q)
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        self.0.value_and_gradient(q, grad)
    }
    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        self.0.gradient(q, grad)
    }
}

impl Surrogate for Shared {
    fn contains(&self, q: &[f64]) -> bool {
        self.0.contains(q)
    }
    fn value_within(&self, q: &[f64]) -> Option<f64> {
        self.0.value_within(q)
    }
    fn value_and_gradient_within(&self, q: &[f64], grad: &mut [f64]) -> Option<f64> {
        self.0.value_and_gradient_within(q, grad)
    }
    fn gradient_within(&self, q: &[f64], grad: &mut [f64]) -> bool {
        self.0.gradient_within(q, grad)
    }
    fn gradient_ref_within<'s>(&'s self, q: &[f64], buf: &mut [f64]) -> GradientAt<'s> {
        self.0.gradient_ref_within(q, buf)
    }
    fn curvature(&self) -> Option<&dyn Curvature> {
        self.0.curvature()
    }
    fn network(&self) -> Option<NetworkForm<'_>> {
        self.0.network()
    }
    fn sup_error_estimate(&self) -> Option<f64> {
        self.0.sup_error_estimate()
    }
    fn save(&self, path: &Path, meta: &SurrogateMeta) -> Result<()> {
        self.0.save(path, meta)
    }
}

/// A boxed surrogate is a potential, so that a potential built around any surrogate (VHMC's
/// [`laplace::RegularizedSurrogate`]) can own one without knowing its kind.
impl Potential for Box<dyn Surrogate> {
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn value(&self, q: &[f64]) -> f64 {
        (**self).value(q)
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        (**self).value_and_gradient(q, grad)
    }
    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        (**self).gradient(q, grad)
    }
}

/// Where [`Surrogate::gradient_ref_within`] left the gradient.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GradientAt<'s> {
    /// In the surrogate's own table.
    Stored(&'s [f64]),
    /// In the caller's buffer.
    Written,
    /// Nowhere: the point is outside the surrogate's domain.
    Outside,
}

/// A surrogate as a [`Fallback`] holds it: its own (a chain's fit, which may learn online), or
/// one shared by every chain (a grid precomputed before sampling). Either way a lookup is one
/// dynamic call to the surrogate's kind: a shared one is not wrapped in [`Shared`], a second
/// layer that every leapfrog step would go through.
#[derive(Debug)]
pub enum Held {
    /// The chain's own surrogate.
    Own(Box<dyn Surrogate>),
    /// A surrogate every chain proposes with, which none changes.
    Shared(Arc<dyn Surrogate>),
}

impl Deref for Held {
    type Target = dyn Surrogate;

    fn deref(&self) -> &Self::Target {
        match self {
            Held::Own(surrogate) => surrogate.as_ref(),
            Held::Shared(surrogate) => surrogate.as_ref(),
        }
    }
}

impl From<Box<dyn Surrogate>> for Held {
    fn from(surrogate: Box<dyn Surrogate>) -> Self {
        Held::Own(surrogate)
    }
}

impl Held {
    /// Online learning, for a surrogate of the chain's own whose kind learns online; a shared
    /// one changes for no chain.
    pub fn online(&mut self) -> Option<&mut dyn Online> {
        match self {
            Held::Own(surrogate) => surrogate.online(),
            Held::Shared(_) => None,
        }
    }

    /// The surrogate as a box (a shared one behind [`Shared`]).
    pub fn into_box(self) -> Box<dyn Surrogate> {
        match self {
            Held::Own(surrogate) => surrogate,
            Held::Shared(surrogate) => Box::new(Shared(surrogate)),
        }
    }
}

/// A surrogate as a chain's proposal: the surrogate inside its domain and the exact potential
/// outside it, so that a surrogate fitted on a bounded region never drives a trajectory where it
/// knows nothing. Pair it with the exact `U` in [`shmc_core::Surrogate`]: leapfrog under any
/// force field keeps the exact MH step exact, and only the gradient matters there (the value is
/// the surrogate's or the exact one, whichever side `q` is on).
///
/// It counts the evaluations it hands to the exact potential ([`Fallback::take_outside`]): a
/// chain's report would otherwise count them as the surrogate's, and on an expensive model they
/// can be most of the cost (a network whose reach was drawn too tight sent one leapfrog step in
/// nine of a 50-D logistic regression to the exact gradient, twice the cost of an iteration,
/// unseen in any count).
pub struct Fallback<'a> {
    /// The trained surrogate.
    pub surrogate: Held,
    /// The exact potential, used outside the surrogate's domain.
    pub exact: &'a dyn Potential,
    /// Evaluations made by `exact` since [`Fallback::take_outside`] was last called.
    outside: Cell<u64>,
}

impl<'a> Fallback<'a> {
    /// `surrogate` inside its domain, `exact` outside.
    pub fn new(surrogate: Held, exact: &'a dyn Potential) -> Self {
        Self {
            surrogate,
            exact,
            outside: Cell::new(0),
        }
    }

    /// The evaluations handed to the exact potential since the last call.
    pub fn take_outside(&self) -> u64 {
        self.outside.take()
    }

    /// The exact potential, counted.
    fn exact(&self) -> &dyn Potential {
        self.outside.set(self.outside.get() + 1);
        self.exact
    }
}

impl Potential for Fallback<'_> {
    fn dim(&self) -> usize {
        self.exact.dim()
    }

    fn value(&self, q: &[f64]) -> f64 {
        match self.surrogate.value_within(q) {
            Some(value) => value,
            None => self.exact().value(q),
        }
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        match self.surrogate.value_and_gradient_within(q, grad) {
            Some(value) => value,
            None => self.exact().value_and_gradient(q, grad),
        }
    }

    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        if !self.surrogate.gradient_within(q, grad) {
            self.exact().gradient(q, grad)
        }
    }

    fn gradient_ref<'s>(&'s self, q: &[f64], buf: &'s mut [f64]) -> &'s [f64] {
        match self.surrogate.gradient_ref_within(q, buf) {
            GradientAt::Stored(stored) => stored,
            GradientAt::Written => buf,
            GradientAt::Outside => {
                self.exact().gradient(q, buf);
                buf
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `U = ½‖q‖²`.
    struct Quadratic;
    impl Potential for Quadratic {
        fn dim(&self) -> usize {
            2
        }
        fn value(&self, q: &[f64]) -> f64 {
            0.5 * (q[0] * q[0] + q[1] * q[1])
        }
        fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
            grad.copy_from_slice(q);
            self.value(q)
        }
    }

    /// A surrogate of the unit box `[−1, 1]²` that is 1 below the exact `U` there, with twice
    /// its gradient: any mix-up of the sides shows in both.
    #[derive(Debug)]
    struct InTheBox;
    impl Potential for InTheBox {
        fn dim(&self) -> usize {
            2
        }
        fn value(&self, q: &[f64]) -> f64 {
            Quadratic.value(q) - 1.0
        }
        fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
            grad[0] = 2.0 * q[0];
            grad[1] = 2.0 * q[1];
            self.value(q)
        }
    }
    impl Surrogate for InTheBox {
        fn contains(&self, q: &[f64]) -> bool {
            q.iter().all(|x| x.abs() <= 1.0)
        }
        fn save(&self, _: &Path, _: &SurrogateMeta) -> Result<()> {
            Err(crate::Error::invalid("a test surrogate is not saved"))
        }
    }

    /// Whether the chain owns the surrogate or shares it, and behind [`Shared`] or not.
    #[test]
    fn the_proposal_is_the_surrogate_inside_its_domain_and_exact_outside() {
        let helds = [
            Held::Own(Box::new(InTheBox)),
            Held::Shared(Arc::new(InTheBox)),
            Held::Own(Box::new(Shared(Arc::new(InTheBox)))),
        ];
        for held in helds {
            let proposal = Fallback::new(held, &Quadratic);
            assert_eq!(proposal.dim(), 2);
            let mut grad = [0.0; 2];
            for (q, inside) in [
                ([0.5, -1.0], true),
                ([1.5, 0.0], false),
                ([0.0, -2.0], false),
            ] {
                assert_eq!(proposal.take_outside(), 0);
                let u = Quadratic.value(&q);
                let (want_u, factor) = if inside { (u - 1.0, 2.0) } else { (u, 1.0) };
                assert_eq!(proposal.value(&q), want_u, "{q:?}");
                assert_eq!(proposal.value_and_gradient(&q, &mut grad), want_u, "{q:?}");
                assert_eq!(grad, [factor * q[0], factor * q[1]], "{q:?}");
                grad = [f64::NAN; 2];
                proposal.gradient(&q, &mut grad);
                assert_eq!(grad, [factor * q[0], factor * q[1]], "{q:?}");
                // Outside, each of the three calls went to the exact potential.
                assert_eq!(proposal.take_outside(), if inside { 0 } else { 3 }, "{q:?}");
            }
            // A shared surrogate learns nothing online; as a box it is the same surrogate.
            let mut held = proposal.surrogate;
            let own = matches!(held, Held::Own(_));
            assert!(held.online().is_none());
            let boxed = held.into_box();
            assert!(boxed.contains(&[0.5, -1.0]) && !boxed.contains(&[1.5, 0.0]));
            assert_eq!(boxed.value(&[0.5, -1.0]), 0.625 - 1.0, "own: {own}");
        }
    }
}
