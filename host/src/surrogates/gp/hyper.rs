//! The hyperparameters and their fit: the log marginal likelihood (evidence) of the training
//! values, maximised by L-BFGS ([`crate::optimize::minimize`]) over
//! `θ = (log ℓ₁, …, log ℓ_d, log σ_f, log σ_n, m)`.
//!
//! The values are standardized first (`ỹ = (U − ū)/s_U`), so that `σ_f`, `σ_n` and the constant
//! mean `m` start near 1, 10⁻², 0 whatever the scale and level of `U` (a posterior's potential is
//! often in the thousands); the length scales start at the training positions' standard
//! deviations (the noise at [`START_NOISE`]). Log parameters keep the search unconstrained. The kernel's diagonal carries a
//! nugget of [`NUGGET`] `σ_f²` besides the noise, so that a fit that drives `σ_n` to zero on
//! noise-free values (an exact `U`) keeps a factorizable covariance.

use shmc_core::Potential;

use super::kernel::Predictor;
use crate::optimize::{MapOptions, Minimum, minimize};
use crate::surrogates::states::TrainingSet;
use crate::{Error, Result};

/// The kernel's jitter relative to `σ_f²`: a correlation matrix of states closer than about
/// `10⁻⁴` length scales is singular to rounding, and this bounds its condition number by 10⁸.
pub(super) const NUGGET: f64 = 1e-8;

/// The noise standard deviation the search starts from, relative to the values' spread. Large
/// enough that the start explains the values better than white noise does: from 10⁻² on 200
/// draws of a GP with length scales (0.5, 2), starting at (1, 1), the start's negative log
/// evidence was 1298 against white noise's 284, and the first line search went there (a length
/// scale of 10⁻⁶, where every correlation vanishes and the evidence is flat) and stayed. The
/// search lowers the noise from here when the values are exact.
const START_NOISE: f64 = 0.3;

/// The hyperparameters in standardized units, as the evidence sees them.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Hyper {
    /// `ℓₖ`, in units of the positions.
    pub lengths: Vec<f64>,
    /// `σ_f²`.
    pub signal: f64,
    /// `σ_n²`.
    pub noise: f64,
    /// The constant mean `m`.
    pub mean: f64,
}

impl Hyper {
    /// The number of hyperparameters in dimension `d`: `d` length scales, signal, noise, mean.
    pub fn count(d: usize) -> usize {
        d + 3
    }

    /// The hyperparameters at the search coordinates `θ`.
    pub fn at(theta: &[f64]) -> Self {
        let d = theta.len() - 3;
        Self {
            lengths: theta[..d].iter().map(|t| t.exp()).collect(),
            signal: (2.0 * theta[d]).exp(),
            noise: (2.0 * theta[d + 1]).exp(),
            mean: theta[d + 2],
        }
    }

    /// Where the search starts for `states`: length scales the positions' spreads (1 for a
    /// coordinate that never moved), unit signal, noise [`START_NOISE`], mean 0.
    pub fn start(states: &TrainingSet) -> Vec<f64> {
        let (n, d) = (states.len(), states.dim());
        let mut theta = Vec::with_capacity(Self::count(d));
        for k in 0..d {
            let values = (0..n).map(|i| states.position(i)[k]);
            let spread = spread(values, n).1;
            theta.push(if spread > 0.0 { spread.ln() } else { 0.0 });
        }
        theta.extend([0.0, START_NOISE.ln(), 0.0]);
        theta
    }
}

/// The mean and standard deviation of `n` values.
fn spread(values: impl Iterator<Item = f64> + Clone, n: usize) -> (f64, f64) {
    let mean = values.clone().sum::<f64>() / n as f64;
    let var = values.map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    (mean, var.sqrt())
}

/// The training values standardized: `ỹ = (U − shift)/scale`.
#[derive(Clone, Debug)]
pub(super) struct Standardized {
    pub values: Vec<f64>,
    pub shift: f64,
    pub scale: f64,
}

impl Standardized {
    /// The potentials of `states`, standardized (scale 1 when they are all equal); an error
    /// naming the first state whose potential or position is not finite.
    pub fn of(states: &TrainingSet) -> Result<Self> {
        let n = states.len();
        for i in 0..n {
            if !states.potential(i).is_finite() || states.position(i).iter().any(|x| !x.is_finite())
            {
                return Err(Error::invalid(format!(
                    "training state {i} has a non-finite position or potential (U = {})",
                    states.potential(i)
                )));
            }
        }
        let (shift, sd) = spread((0..n).map(|i| states.potential(i)), n);
        let scale = if sd > 0.0 { sd } else { 1.0 };
        let values = (0..n)
            .map(|i| (states.potential(i) - shift) / scale)
            .collect();
        Ok(Self {
            values,
            shift,
            scale,
        })
    }
}

/// A kind's negative log evidence `−log p(ỹ | θ)` and its gradient in `θ`.
pub(super) trait Evidence: Sync {
    /// The number of hyperparameters.
    fn count(&self) -> usize;

    /// Writes the gradient into `grad` and returns `−log p(ỹ | θ)`; `+∞` where the covariance
    /// does not factorize (the search then backs off).
    fn negative_log_evidence(&self, theta: &[f64], grad: &mut [f64]) -> f64;

    /// The predictive mean at `hyper`, in units of `U` (`shift`, `scale`: the
    /// standardization); `None` when the covariance does not factorize.
    fn posterior(&self, hyper: &Hyper, shift: f64, scale: f64) -> Option<Predictor>;
}

/// An evidence as the optimizer's potential, per observation: the evidence and its gradient
/// grow with the number of states `n`, and L-BFGS's first step is the gradient itself, so on
/// 200 states a step of hundreds in `log ℓ` sent a length scale to 10⁻¹³, where every
/// correlation vanishes and the evidence is flat (a white-noise fit the search never left).
/// Divided by `n`, the first step is of order one.
struct Objective<'a> {
    evidence: &'a dyn Evidence,
    per_observation: f64,
}

impl Potential for Objective<'_> {
    fn dim(&self) -> usize {
        self.evidence.count()
    }
    fn value(&self, theta: &[f64]) -> f64 {
        let mut grad = vec![0.0; theta.len()];
        self.value_and_gradient(theta, &mut grad)
    }
    fn value_and_gradient(&self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let value = self.evidence.negative_log_evidence(theta, grad);
        grad.iter_mut().for_each(|g| *g *= self.per_observation);
        value * self.per_observation
    }
}

/// The hyperparameters that maximise `evidence` of `n` observations (values, and derivatives
/// when the GP is fitted to gradients too) from `start`, within
/// `max_iterations` L-BFGS iterations (the best point found when the search stops short of
/// converging). The minimum's value is the negative log evidence per observation.
pub(super) fn fit(
    evidence: &dyn Evidence,
    n: usize,
    start: &[f64],
    max_iterations: u64,
) -> Result<Minimum> {
    let options = MapOptions {
        max_iterations,
        gradient_tolerance: 1e-6,
        ..MapOptions::default()
    };
    let objective = Objective {
        evidence,
        per_observation: 1.0 / n as f64,
    };
    minimize(&objective, start, &options).map_err(|e| {
        Error::invalid(format!(
            "the Gaussian process's hyperparameter fit failed: {e}"
        ))
    })
}
