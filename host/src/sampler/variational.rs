//! VHMC's side of a chain (Bayesian Analysis paper, Alg. 2): the Laplace approximation first,
//! then a surrogate (the random network) trained online by score matching on the exact gradients
//! of the accepted warmup states, blended with the Laplace quadratic as
//! `V_t = μ_t z + ½(1 − μ_t)(θ − θ_L)ᵀH(θ − θ_L)` ([`RegularizedSurrogate`]).
//!
//! # The pilot (beyond the paper)
//! The network's input scale matters more than anything else (see
//! [`crate::surrogates::network`]), and the best one differs by two orders of magnitude between
//! models (probit: 4 posterior sd; the beta-binomial: 1; the logistic simulation: 32–64). VHMC
//! trains online from the first iteration, so there is no training set to choose it on. The
//! pilot makes one: it draws [`PILOT_STATES`] points from the Laplace approximation
//! `N(θ_L, H⁻¹)`, evaluates the exact gradient there, and lets the batch score matching
//! ([`VhmcSettings::fitter`]) choose the scale on them (or use `--surrogate-scale C`). The
//! surrogate's online learning then starts from the pilot states, so its weights are the ridge
//! fit of the pilot plus every accepted state (the online recursion is exactly the batch ridge
//! solution).
//!
//! # Within the network's reach (beyond the paper)
//! The network stands for `U` only where it has seen states ([`Surrogate::contains`]):
//! outside that region `V` is whatever the fit and the Laplace quadratic leave there, and
//! trajectories driven by it may never leave the learned region. The MH step keeps such a chain
//! invariant for the posterior, but a kernel that never proposes into the tails is practically
//! reducible: on the banana (simulation-based calibration, `shmc bench sbc`) chains of 40 000
//! draws never passed `|β₂| ≈ 1.1` where exact HMC reaches 1.8, and estimated `E[β₂²]` at 0.25
//! against 0.42 by quadrature. So outside the reach the proposal is the exact potential, as for
//! RNS-HMC's networks and the grids ([`crate::surrogates::Fallback`]); inside nothing changes.
//! Under the published acceptance rule `V` stays the proposal everywhere: that chain targets
//! `exp(−V)`, and `V` learned from scores is `U` only up to a constant, which a switch to `U`
//! at the reach's edge would turn into a step in its target.
//!
//! # Exact or approximate
//! By default the proposal is `V_t` and the MH step uses the exact `U`: the chain targets the
//! exact posterior however good `V_t` is. With `exact_acceptance = false` the MH step uses `V_t`
//! too, as published: the chain then targets `exp(−V_t)`, **approximate inference**, and every
//! output says so.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use nalgebra::{DMatrix, DVector};
use rand_pcg::Pcg64;
use shmc_core::random::fill_standard_normal;
use shmc_core::{Dyn, Potential, State};

use super::method::VhmcSettings;
use super::proposer::{EndGradient, Proposer, SurrogateReport};
use crate::optimize::{MapOptions, find_map};
use crate::random::chain_rng;
use crate::surrogates::laplace::RegularizedSurrogate;
use crate::surrogates::states::TrainingSet;
use crate::surrogates::{Online, Surrogate};
use crate::{Error, Result};

/// Laplace draws with exact gradients that choose the network's scale and start its weights.
pub const PILOT_STATES: usize = 100;

/// The random stream of the pilot draws (chains use small stream numbers).
const PILOT_STREAM: usize = 0x91_1075;

/// VHMC's surrogate machinery for one chain.
pub struct VhmcPhase<'m> {
    settings: VhmcSettings,
    /// `Lᵀ` for the Laplace precision `H = LLᵀ`: `θ_L + L⁻ᵀz` is a Laplace draw.
    factor: DMatrix<f64>,
    potential: Reached<'m>,
    /// The exact gradient at the latest accepted state, when it was not recorded.
    gradient: Vec<f64>,
    /// The exact gradient of the latest end point (exact MH rule, during warmup).
    end_gradient: RefCell<EndGradient>,
    /// Whether warmup, and with it the training, is still going on.
    training: bool,
    report: SurrogateReport,
}

impl<'m> VhmcPhase<'m> {
    /// The MAP and Laplace approximation from `start`, the pilot, and the regularized potential
    /// at `μ_0 = 0`.
    pub fn new(
        settings: &VhmcSettings,
        model: &'m (dyn Potential + Sync),
        start: &[f64],
    ) -> Result<Self> {
        let begin = Instant::now();
        let dim = start.len();
        let map = find_map(model, start, &MapOptions::default())?;
        let precision = map.laplace_precision()?;
        let mut report = SurrogateReport {
            extra_exact_evaluations: map.evaluations,
            ..SurrogateReport::default()
        };

        // Pilot draws θ_L + L⁻ᵀz with H = LLᵀ, so their covariance is H⁻¹.
        let factor = precision
            .clone()
            .cholesky()
            .ok_or_else(|| Error::invalid("the Laplace precision is not positive definite"))?
            .l()
            .transpose();
        let mut rng = chain_rng(settings.train.seed, PILOT_STREAM);
        let mut pilot = TrainingSet::new(dim);
        let mut gradient = vec![0.0; dim];
        let mut attempts = 0;
        while pilot.len() < PILOT_STATES && attempts < 10 * PILOT_STATES {
            attempts += 1;
            let q = laplace_draw(&map.position, &factor, &mut rng);
            let u = model.value_and_gradient(&q, &mut gradient);
            report.extra_exact_evaluations += 1;
            if u.is_finite() && gradient.iter().all(|g| g.is_finite()) {
                pilot.push(&q, u, Some(&gradient));
            }
        }
        if pilot.len() < PILOT_STATES {
            return Err(Error::invalid(format!(
                "vhmc: the potential or its gradient is not finite at {} of {attempts} draws from \
                 the Laplace approximation at the MAP",
                attempts - pilot.len()
            )));
        }
        let fitted = settings.fitter().fit(model, &pilot)?;
        let mut surrogate = fitted.surrogate;
        let online = learning(surrogate.as_mut())?;
        online.begin(&pilot)?;
        online.publish()?;
        report.training_states = pilot.len();
        report.scale = fitted.scale;
        report.holdout_gradient_error = fitted.holdout_gradient_error;
        report.started_at = Some(0);
        report.training_seconds = begin.elapsed().as_secs_f64();
        Ok(Self {
            settings: settings.clone(),
            factor,
            potential: Reached {
                blend: RegularizedSurrogate::new(surrogate, map.position, precision)?,
                exact: model,
                fallback: settings.exact_acceptance,
                outside: Cell::new(0),
            },
            gradient,
            end_gradient: RefCell::default(),
            training: true,
            report,
        })
    }
}

/// The online learning VHMC needs of its surrogate.
fn learning(surrogate: &mut dyn Surrogate) -> Result<&mut dyn Online> {
    surrogate
        .online()
        .ok_or_else(|| Error::invalid("vhmc learns online: its surrogate must be able to"))
}

/// A draw from `N(mode, H⁻¹)` given `Lᵀ` with `H = LLᵀ`.
fn laplace_draw(mode: &[f64], factor: &DMatrix<f64>, rng: &mut Pcg64) -> Vec<f64> {
    let mut z = DVector::zeros(mode.len());
    fill_standard_normal(rng, z.as_mut_slice());
    let offset = factor
        .solve_upper_triangular(&z)
        .expect("a Cholesky factor has a nonzero diagonal");
    mode.iter().zip(&offset).map(|(m, o)| m + o).collect()
}

/// VHMC's proposal potential: the blend `V_t` within its network's reach, the exact potential
/// outside it under the exact acceptance rule (see the [module docs](self)).
struct Reached<'m> {
    blend: RegularizedSurrogate<Box<dyn Surrogate>>,
    exact: &'m (dyn Potential + Sync),
    /// Whether the exact potential takes over outside the reach (exact acceptance).
    fallback: bool,
    /// Evaluations handed to `exact` since the chain last asked ([`Proposer::take_outside`]).
    outside: Cell<u64>,
}

impl Reached<'_> {
    /// The potential that stands for `U` at `q`.
    fn at(&self, q: &[f64]) -> &dyn Potential {
        if !self.fallback || self.blend.surrogate().contains(q) {
            &self.blend
        } else {
            self.outside.set(self.outside.get() + 1);
            self.exact
        }
    }
}

impl Potential for Reached<'_> {
    fn dim(&self) -> usize {
        self.exact.dim()
    }

    fn value(&self, q: &[f64]) -> f64 {
        self.at(q).value(q)
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        self.at(q).value_and_gradient(q, grad)
    }

    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        self.at(q).gradient(q, grad)
    }
}

impl Proposer for VhmcPhase<'_> {
    /// A draw from the Laplace approximation: every chain starts where `V` was trained, each at
    /// its own point. (A random start far out in the tails leaves the chain where the network
    /// has never seen a state; its proposals are then rejected, the step size adapts down,
    /// and the chain crawls.)
    fn initial_position(&self, rng: &mut Pcg64) -> Option<Vec<f64>> {
        Some(laplace_draw(self.potential.blend.mode(), &self.factor, rng))
    }

    fn proposal(&self) -> Option<&dyn Potential> {
        Some(&self.potential)
    }

    fn approximate(&self) -> bool {
        !self.settings.exact_acceptance
    }

    /// Under the exact rule the MH step evaluates `U` at every end point anyway; fusing `∇U`
    /// into it gives the score-matching target of an accepted state almost for free.
    fn end_gradient(&self) -> Option<&RefCell<EndGradient>> {
        (self.training && self.settings.exact_acceptance).then_some(&self.end_gradient)
    }

    fn report(&self) -> &SurrogateReport {
        &self.report
    }

    fn into_surrogate(self: Box<Self>) -> Option<Box<dyn Surrogate>> {
        Some(self.potential.blend.into_surrogate())
    }

    fn take_outside(&self) -> u64 {
        self.potential.outside.take()
    }

    /// Through warmup: adds each accepted state's exact gradient to the score matching and
    /// moves `μ_t` on; the proposal changes every iteration. After warmup `V` stays fixed.
    fn observe(
        &mut self,
        model: &dyn Potential,
        i: usize,
        warmup: usize,
        state: &State<Dyn>,
        accepted: bool,
        _rng: &mut Pcg64,
    ) -> Result<bool> {
        if i >= warmup {
            return Ok(false);
        }
        let begin = Instant::now();
        if accepted {
            let q = state.position.as_slice();
            let recorded = self.end_gradient.get_mut();
            // The record may be of a later trial point (the step-size heuristic after a
            // metric window), so it is used only if it is this state's.
            if recorded.position != q {
                model.gradient(q, &mut self.gradient);
                self.report.extra_exact_evaluations += 1;
                recorded.position.clear();
                recorded.position.extend_from_slice(q);
                recorded.gradient.clone_from(&self.gradient);
            }
            let gradient = &recorded.gradient;
            if gradient.iter().all(|g| g.is_finite()) {
                let online = learning(self.potential.blend.surrogate_mut().as_mut())?;
                online.learn(q, state.potential, Some(gradient))?;
                online.publish()?;
                self.report.online_updates += 1;
                self.report.training_states += 1;
            }
        }
        self.training = i + 1 < warmup;
        self.potential
            .blend
            .advance(i as u64 + 1, self.settings.tau)?;
        let seconds = begin.elapsed().as_secs_f64();
        self.report.online_seconds += seconds;
        self.report.training_seconds += seconds;
        Ok(true)
    }
}
