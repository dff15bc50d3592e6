//! Gaussian-process surrogates (Rasmussen 2003, the baseline the random-network paper argues
//! against): a GP regression of the training states' potentials with a squared-exponential ARD
//! kernel ([`kernel`]) and a constant mean, or a quadratic one fitted by least squares first
//! ([`quadratic`], which extrapolates a near-Gaussian posterior's bowl), its hyperparameters by
//! maximising the log marginal likelihood ([`hyper`]), and its predictive mean's value and
//! gradient as `Ũ`, `∇Ũ`.
//!
//! Two approximations: the full GP ([`full`]; `O(n³)` to fit, `O(n²)` memory, `O(n·d)` per
//! gradient; on the states' gradients too, [`derivative`], `O((n(d+1))³)` to fit) and FITC ([`fitc`]; `M` inducing points drawn at random from the training states,
//! `O(n·M²)` to fit, `O(M·d)` per gradient). Both are written on faer rather than taken from a
//! GP crate: see [`GpFitter`] for why. Saved as kinds [`FULL_KIND`] and [`FITC_KIND`].
//!
//! The chain stays exact: the surrogate only drives the leapfrog, and the exact `U` judges.

mod derivative;
mod fitc;
mod full;
mod hyper;
mod kernel;
mod quadratic;
mod record;
mod surrogate;

use std::time::Instant;

use rand::seq::index;
use shmc_core::Potential;

pub use kernel::Predictor;
pub use quadratic::Quadratic;
pub use record::{FITC_KIND, FULL_KIND};
pub use surrogate::GpSurrogate;

use crate::random::chain_rng;
use crate::surrogates::network::Reach;
use crate::surrogates::states::TrainingSet;
use crate::surrogates::{Fitted, Fitter};
use crate::{Error, Result};
use derivative::GradientEvidence;
use fitc::FitcEvidence;
use full::FullEvidence;
use hyper::{Evidence, Hyper, Standardized};

/// The random stream (of `chain_rng(seed, ·)`) FITC's inducing points are drawn from.
const INDUCING_STREAM: usize = 0x1DC0;

/// Which Gaussian process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approximation {
    /// The full GP on every training state.
    Full,
    /// FITC with this many inducing points, a random subset of the training states (all of
    /// them when there are no more states than this).
    Fitc {
        /// `M ≥ 1`.
        inducing: usize,
    },
}

/// The GP's mean function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MeanFunction {
    /// A constant, fitted with the hyperparameters (far from the states the mean reverts to
    /// it, and its gradient to zero).
    #[default]
    Constant,
    /// A full quadratic fitted by least squares first ([`Quadratic`]), the GP on its residuals
    /// (far from the states the mean reverts to the quadratic).
    Quadratic,
}

/// How a Gaussian process is fitted.
#[derive(Clone, Debug, PartialEq)]
pub struct GpOptions {
    /// Full or FITC.
    pub approximation: Approximation,
    /// Constant or quadratic.
    pub mean: MeanFunction,
    /// Fit the full GP to the training states' gradients too (derivative observations,
    /// [`derivative`]): `n(d + 1)` observations, `O((n(d+1))³)` to fit. The full GP only.
    pub gradients: bool,
    /// The seed of FITC's choice of inducing points (stream [`INDUCING_STREAM`]).
    pub seed: u64,
    /// The most L-BFGS iterations of the hyperparameter fit (default 100).
    pub max_iterations: u64,
    /// The most bytes the fit may take; refused before anything is allocated.
    pub memory_limit: u64,
}

impl Default for GpOptions {
    fn default() -> Self {
        Self {
            approximation: Approximation::Full,
            mean: MeanFunction::Constant,
            gradients: false,
            seed: 1,
            max_iterations: 100,
            memory_limit: u64::MAX,
        }
    }
}

/// A fitted Gaussian process and what its fit found.
#[derive(Debug)]
pub struct GpFit {
    /// The surrogate.
    pub surrogate: GpSurrogate,
    /// The maximised log marginal likelihood of the standardized values.
    pub log_evidence: f64,
    /// L-BFGS iterations of the hyperparameter fit.
    pub iterations: u64,
    /// Wall time of the fit, in seconds.
    pub seconds: f64,
}

impl GpOptions {
    /// Refuses, before anything is allocated, a fit on `states` states in dimension `d` that
    /// would pass [`GpOptions::memory_limit`]: the full GP's three `n × n` matrices (driven by
    /// the number of training states, which `train_after` sets), FITC's six `M × n` (driven
    /// by `inducing`).
    pub fn check_memory(&self, states: usize, d: usize) -> Result<()> {
        self.check_states(&states.to_string(), states, d)
    }

    /// [`GpOptions::check_memory`] for a fit on `count` (in words: "617", "up to 800")
    /// training states.
    fn check_states(&self, count: &str, states: usize, d: usize) -> Result<()> {
        self.validate()?;
        if self.mean == MeanFunction::Quadratic {
            crate::memory::check(
                &format!("a quadratic mean in dimension {d} on {count} training states"),
                "gp_mean",
                quadratic::bytes(states, d),
                self.memory_limit,
            )?;
        }
        match self.approximation {
            Approximation::Full if self.gradients => crate::memory::check(
                &format!(
                    "a full Gaussian process on {count} training states with their gradients \
                     ({} observations each)",
                    d.saturating_add(1)
                ),
                "train_after",
                derivative::bytes(states, d),
                self.memory_limit,
            ),
            Approximation::Full => crate::memory::check(
                &format!("a full Gaussian process on {count} training states"),
                "train_after",
                full::bytes(states, d),
                self.memory_limit,
            ),
            Approximation::Fitc { inducing } => crate::memory::check(
                &format!("FITC with {inducing} inducing points on {count} training states"),
                "inducing",
                fitc::bytes(inducing.min(states), states, d),
                self.memory_limit,
            ),
        }
    }

    /// A setting the fit cannot use, named.
    fn validate(&self) -> Result<()> {
        if self.approximation == (Approximation::Fitc { inducing: 0 }) {
            return Err(Error::setting("inducing", "must be at least 1, got 0"));
        }
        if self.gradients && self.approximation != Approximation::Full {
            return Err(Error::setting(
                "gp_gradients",
                "applies to the full Gaussian process only: FITC fits the values alone",
            ));
        }
        if self.max_iterations == 0 {
            return Err(Error::invalid(
                "the Gaussian process's hyperparameter fit needs at least 1 iteration",
            ));
        }
        Ok(())
    }
}

/// The Gaussian process of `options` fitted to `states`' potentials (with a quadratic mean,
/// to their residuals from the least-squares quadratic).
///
/// Errors (before allocating) for no states, a setting it cannot use, a size above the memory
/// limit, non-finite states; and when the covariance does not factorize at the fitted
/// hyperparameters.
pub fn fit(states: &TrainingSet, options: &GpOptions) -> Result<GpFit> {
    let start = Instant::now();
    let (n, d) = (states.len(), states.dim());
    if n == 0 {
        return Err(Error::invalid(
            "a Gaussian process needs at least 1 training state",
        ));
    }
    options.check_memory(n, d)?;
    // Refuses a non-finite state before the quadratic sees it.
    let y = Standardized::of(states)?;
    let quadratic = match options.mean {
        MeanFunction::Constant => None,
        MeanFunction::Quadratic => Some(Quadratic::fit(states)?),
    };
    let residuals = quadratic.as_ref().map(|q| q.residuals(states));
    let (fitted_states, y) = match &residuals {
        Some(r) => (r, Standardized::of(r)?),
        None => (states, y),
    };
    let (predictor, best, observations) = fit_standardized(fitted_states, &y, options)?;
    let predictor = predictor.with_quadratic(quadratic);
    let sparse = options.approximation != Approximation::Full;
    Ok(GpFit {
        surrogate: GpSurrogate::new(predictor, Reach::of(states), sparse),
        log_evidence: -best.value * observations as f64,
        iterations: best.iterations,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The hyperparameters of the GP of `options` on `states`' standardized potentials `y` (and
/// gradients, with [`GpOptions::gradients`]), its predictive mean, and its number of
/// observations.
fn fit_standardized(
    states: &TrainingSet,
    y: &Standardized,
    options: &GpOptions,
) -> Result<(Predictor, crate::optimize::Minimum, usize)> {
    // FITC with an inducing point at every state is the full GP (`Q = K_ff`, `Λ = σ_n²`), so it
    // is fitted as one: the full GP's `O(n³)` with one `n × n` factorization per evidence
    // instead of FITC's dozen `n × n` products (at n = 400 of Figure 3, 33.6 s against 1.3 s).
    let inducing = match options.approximation {
        Approximation::Fitc { inducing } if inducing < states.len() => {
            Some(inducing_points(states, inducing, options.seed))
        }
        _ => None,
    };
    let observations = if options.gradients {
        derivative::observations(states, y)?
    } else {
        y.values.clone()
    };
    let evidence: Box<dyn Evidence + '_> = match &inducing {
        Some(points) => Box::new(FitcEvidence {
            states,
            values: &y.values,
            inducing: points,
        }),
        None if options.gradients => Box::new(GradientEvidence {
            states,
            observations: &observations,
        }),
        None => Box::new(FullEvidence {
            states,
            values: &y.values,
        }),
    };
    let count = observations.len();
    let best = hyper::fit(
        evidence.as_ref(),
        count,
        &Hyper::start(states),
        options.max_iterations,
    )?;
    let predictor = evidence
        .posterior(&Hyper::at(&best.position), y.shift, y.scale)
        .ok_or_else(|| {
            Error::invalid(
                "the Gaussian process's covariance does not factorize at its fitted \
                 hyperparameters",
            )
        })?;
    Ok((predictor, best, count))
}

/// `m` distinct training states drawn at random (all of them, in order, when `m ≥ n`), as an
/// `m × d` row-major matrix.
fn inducing_points(states: &TrainingSet, m: usize, seed: u64) -> Vec<f64> {
    let n = states.len();
    let mut chosen: Vec<usize> = if m >= n {
        (0..n).collect()
    } else {
        index::sample(&mut chain_rng(seed, INDUCING_STREAM), n, m).into_vec()
    };
    chosen.sort_unstable();
    chosen
        .iter()
        .flat_map(|&i| states.position(i).to_vec())
        .collect()
}

/// How a Gaussian process is fitted as a sampler's surrogate: [`fit`] with its options.
///
/// Written on faer rather than taken from egobox-gp 0.37 (the one Rust crate with FITC),
/// measured in a scratch crate: it adds 56 crates this build lacks (ndarray, linfa, its own
/// optimizers; no BLAS by default, OpenBLAS only behind its `blas` feature), fits the
/// hyperparameters without gradients (COBYLA from several starts): a full GP on 200 states
/// of a 32-D Gaussian took 14.4 s and on 500 more than 9 minutes, and one gradient of its mean
/// 74 µs through `ndarray` matrices. Here the evidence's gradient is analytic (L-BFGS), the
/// mean is one pass over the centres, and a file rebuilds the surrogate bit for bit.
#[derive(Clone, Debug, PartialEq)]
pub struct GpFitter {
    /// The approximation and its options.
    pub options: GpOptions,
}

impl Fitter for GpFitter {
    /// Fitted to `states` alone; the model is not evaluated.
    fn fit(&self, _model: &(dyn Potential + Sync), states: &TrainingSet) -> Result<Fitted> {
        let fitted = fit(states, &self.options)?;
        Ok(Fitted {
            surrogate: Box::new(fitted.surrogate),
            scale: f64::NAN,
            holdout_gradient_error: f64::NAN,
            seconds: fitted.seconds,
            exact_evaluations: 0,
        })
    }

    /// Which GP, and FITC's inducing points: a run's CSV header says what proposed.
    fn header(&self) -> Vec<(&'static str, String)> {
        match self.options.approximation {
            Approximation::Full if self.options.gradients => {
                vec![("gp", "full".into()), ("gp_gradients", "true".into())]
            }
            Approximation::Full => vec![("gp", "full".into())],
            Approximation::Fitc { inducing } => {
                vec![("gp", "fitc".into()), ("inducing", inducing.to_string())]
            }
        }
    }

    /// The fit on as many states as the warmup can collect, checked before the warmup runs:
    /// otherwise a run the limit refuses would be refused only after its whole warmup.
    fn check_memory(&self, states: usize, dim: usize) -> Result<()> {
        self.options
            .check_states(&format!("up to {states}"), states, dim)
    }
}

#[cfg(test)]
mod derivative_tests;
#[cfg(test)]
mod tests;
