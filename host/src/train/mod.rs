//! Batch training of the random-network surrogate on the states an exact HMC phase visited.
//!
//! Two fits of the output weights `(v, b)` of a [`DynNetwork`] whose input parameters are drawn
//! once at random:
//! * [`fit_potential`]: ELM "potential matching", ridge least squares of `z(qₙ)` on `U(qₙ)`
//!   (journal paper's RNS-HMC training; the bias is not penalized);
//! * [`fit_score`]: score matching, ridge least squares of `∇z(qₙ)` on `∇U(qₙ)` (VHMC), with
//!   the bias set so that `z − U` has mean zero over the training states.
//!
//! Both see the input through `u = (q − m) / (c·sd)`, with `m` and `sd` the mean and per-coordinate
//! standard deviation of the training positions (or, for additive units by default, through
//! the whitened `u = L⁻¹(q − m) / c` with `LLᵀ` their covariance: see [`Inputs`]) and `c` a
//! scale factor: the larger `c`, the
//! more slowly the random units vary over the posterior (near-quadratic pieces, good for
//! near-Gaussian targets); the smaller, the more nonlinear. [`Scale::Auto`] picks `c` from
//! [`AUTO_SCALE_GRID`] by the held-out gradient error. Every fit holds out every k-th state
//! (k = 1/[`TrainOptions::holdout_fraction`]), fits on the rest to measure honest held-out
//! errors (and choose `c`), then refits on all states at the chosen `c`; the refit reuses the
//! training states' normal matrix, so it costs only the held-out states' share.
//!
//! [`save_network`] and [`load_network`] store a network in a JSON file from which it is
//! rebuilt bit for bit.

mod design;
mod io;
mod set;

use std::time::Instant;

use serde::{Deserialize, Serialize};
use shmc_core::Nodes;

use crate::{Error, Result};

pub use io::{FORMAT_NAME, FORMAT_VERSION, SurrogateMeta, load_network, save_network};
pub use set::TrainingSet;

/// The surrogate network with run-time input dimension and number of units.
pub type DynNetwork = shmc_core::Network<shmc_core::Dyn, shmc_core::Dyn>;

/// The scale factors [`Scale::Auto`] tries: powers of two from 0.5 to 64.
///
/// With the default input weights (`w ~ N(0, I/d)`, offsets `N(0, 1)`) a unit's argument moves
/// by about `1/c` per posterior standard deviation: `c ≤ 1` gives strongly nonlinear units
/// (curved targets), `c` of 8–64 units that are near-quadratic over the posterior, which is
/// what near-Gaussian posteriors want. Measured held-out gradient errors (s = 2000, 4000 states
/// of the d = 50 logistic-regression simulation, posterior sd ≈ 0.065): potential matching is
/// best at `c = 16` (our numpy reference's raw inputs, which gave HMC-level acceptance, are
/// `c ≈ 16` there) and clearly worse at 32 and 64, where the default ridge suppresses the units'
/// small quadratic parts; score matching is best at `c = 64` (2.2e-3, against 2.6e-3 at 32 and
/// 6.2e-3 at 128). On a 2-D Gaussian with s = 200 and a curved 3-D target the best is `c = 2`,
/// and 0.5 keeps room for strongly nonlinear targets. The error varies smoothly in `log c`, so
/// doubling steps are fine enough.
pub const AUTO_SCALE_GRID: [f64; 8] = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// How the scale factor `c` of the input transform `u = (q − m) / (c·sd)` is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Scale {
    /// Try every factor of [`AUTO_SCALE_GRID`] and keep the one with the smallest held-out
    /// relative gradient error (held-out value RMSE when no held-out state has a gradient).
    #[default]
    Auto,
    /// This factor (finite, positive).
    Fixed(f64),
}

/// The coordinates additive units see, before the scale factor `c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Inputs {
    /// `(q − m) / sd`: every coordinate centred and scaled by the training states' mean and
    /// standard deviation.
    Standardized,
    /// `L⁻¹(q − m)` with `LLᵀ` the training states' covariance: the posterior's correlations
    /// taken out as well, so that random unit directions are spread evenly over its shape.
    /// Correlated posteriors need it: on Bank Marketing (d = 51, posterior sds from 0.006 to
    /// 0.35 along strongly correlated directions; 3000 Laplace draws, s = 2000) the held-out
    /// gradient error of score matching is 0.29 standardized and 0.035 whitened (potential
    /// matching: 0.48 and 0.048), while on the near-isotropic logistic-regression simulation
    /// both are below 0.01. Falls back to `Standardized` when the covariance is singular (fewer
    /// states than dimensions) and for radial units, whose distances are per coordinate.
    #[default]
    Whitened,
}

/// Which quantity the output weights were fitted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FitMethod {
    /// Potential values ([`fit_potential`]).
    #[default]
    Potential,
    /// Potential gradients ([`fit_score`]).
    Score,
}

/// Options of [`fit_potential`] and [`fit_score`].
#[derive(Clone, Debug, PartialEq)]
pub struct TrainOptions {
    /// The number of hidden units `s`. Default 2000.
    pub hidden: usize,
    /// The kind of unit. Default softplus additive units; radial units are centred at training
    /// states drawn at random, and their width is in the transformed coordinates.
    pub nodes: Nodes,
    /// The ridge parameter `λ ≥ 0` on the output weights (never on the bias). Default 1e-6.
    pub ridge: f64,
    /// The scale factor of the input transform. Default [`Scale::Auto`].
    pub scale: Scale,
    /// The coordinates additive units see. Default [`Inputs::Whitened`].
    pub inputs: Inputs,
    /// The seed of the random input parameters (stream [`chain_rng`](crate::random::chain_rng)
    /// `(seed, 0x5EED_7EA1)`). Default 1.
    pub seed: u64,
    /// The fraction of states held out for choosing the scale and reporting errors, in
    /// `[0, 1)`: every `1/f`-th state. Default 0.2 (every 5th). With 0 nothing is held out,
    /// the errors are NaN and `Scale::Auto` is an error.
    pub holdout_fraction: f64,
}

impl Default for TrainOptions {
    fn default() -> Self {
        Self {
            hidden: 2000,
            nodes: Nodes::default(),
            ridge: 1e-6,
            scale: Scale::Auto,
            inputs: Inputs::Whitened,
            seed: 1,
            holdout_fraction: 0.2,
        }
    }
}

/// One scale factor tried by a fit: its held-out errors when fitted on the training states.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScaleCandidate {
    /// The scale factor `c`.
    pub scale: f64,
    /// Held-out relative RMS gradient error (NaN if no held-out gradients or the solve failed).
    pub holdout_gradient_error: f64,
    /// Held-out RMS of `z − U` (NaN if the solve failed).
    pub holdout_value_rmse: f64,
    /// Wall time of this candidate's fit and evaluation, in seconds.
    pub seconds: f64,
}

/// A trained surrogate and how well it did on the held-out states.
#[derive(Clone, Debug)]
pub struct TrainedSurrogate {
    /// The network, refitted on all states at the chosen scale.
    pub network: DynNetwork,
    /// The chosen scale factor `c`.
    pub scale: f64,
    /// Relative RMS gradient error `√(Σ‖∇z − ∇U‖² / Σ‖∇U‖²)` on the held-out states of the
    /// fit on the training states at the chosen scale (NaN if no held-out gradients).
    pub holdout_gradient_error: f64,
    /// RMS of `z − U` on the held-out states, same fit (NaN if nothing is held out).
    pub holdout_value_rmse: f64,
    /// Wall time of the whole training, in seconds.
    pub seconds: f64,
    /// What the output weights were fitted to.
    pub method: FitMethod,
    /// The number of states the final network was fitted on (all of them).
    pub training_states: usize,
    /// Every scale factor tried, in grid order (one entry for [`Scale::Fixed`], none when
    /// nothing is held out).
    pub candidates: Vec<ScaleCandidate>,
}

impl TrainedSurrogate {
    /// The metadata to store with the network: this fit's figures, the model's name and the
    /// options it was trained with.
    pub fn meta(&self, model: impl Into<String>, opts: &TrainOptions) -> SurrogateMeta {
        SurrogateMeta {
            model: model.into(),
            method: self.method,
            scale: self.scale,
            holdout_gradient_error: self.holdout_gradient_error,
            holdout_value_rmse: self.holdout_value_rmse,
            training_states: self.training_states,
            ridge: opts.ridge,
            seed: opts.seed,
            train_seconds: self.seconds,
        }
    }
}

/// ELM "potential matching": output weights and bias minimizing
/// `Σₙ (z(qₙ) − U(qₙ))² + λ‖v‖²` (bias not penalized).
///
/// Solved through the normal equations with centred columns: `v = (H_cᵀH_c + λI)⁻¹ H_cᵀ(T − t̄)`,
/// `b = t̄ − h̄·v`, which is exactly the solution of `(HᵀH + λ diag(1,…,1,0)) [v; b] = HᵀT` for
/// the design `[H 1]`, better conditioned. Gradients in the set are used only for the held-out
/// error (and so for choosing the scale).
pub fn fit_potential(set: &TrainingSet, opts: &TrainOptions) -> Result<TrainedSurrogate> {
    fit(set, opts, FitMethod::Potential)
}

/// Batch ridge score matching: `v = argmin Σₙ ‖∇z(qₙ) − ∇U(qₙ)‖² + λ‖v‖²`, then the bias with
/// mean of `z − U` zero over the training states. Every state needs its gradient.
pub fn fit_score(set: &TrainingSet, opts: &TrainOptions) -> Result<TrainedSurrogate> {
    fit(set, opts, FitMethod::Score)
}

fn validate(set: &TrainingSet, opts: &TrainOptions, method: FitMethod) -> Result<()> {
    if opts.hidden == 0 {
        return Err(Error::invalid(
            "the surrogate needs at least one hidden unit",
        ));
    }
    if !(opts.ridge.is_finite() && opts.ridge >= 0.0) {
        return Err(Error::invalid(format!(
            "the ridge must be finite and non-negative, not {}",
            opts.ridge
        )));
    }
    if !(opts.holdout_fraction.is_finite() && (0.0..1.0).contains(&opts.holdout_fraction)) {
        return Err(Error::invalid(format!(
            "the held-out fraction must be in [0, 1), not {}",
            opts.holdout_fraction
        )));
    }
    if let Scale::Fixed(c) = opts.scale
        && !(c.is_finite() && c > 0.0)
    {
        return Err(Error::invalid(format!(
            "the input scale factor must be finite and positive, not {c}"
        )));
    }
    if let Nodes::Rbf { width } = opts.nodes
        && !(width.is_finite() && width > 0.0)
    {
        return Err(Error::invalid(format!(
            "the RBF width must be finite and positive, not {width}"
        )));
    }
    if set.dim() == 0 {
        return Err(Error::invalid("training states of dimension 0"));
    }
    if set.len() < 2 {
        return Err(Error::invalid(format!(
            "training needs at least 2 states, got {}",
            set.len()
        )));
    }
    for i in 0..set.len() {
        if set.position(i).iter().any(|x| !x.is_finite()) {
            return Err(Error::invalid(format!(
                "training state {i} has a non-finite position"
            )));
        }
        if !set.potential(i).is_finite() {
            return Err(Error::invalid(format!(
                "training state {i} has a non-finite potential"
            )));
        }
        match set.gradient(i) {
            Some(g) if g.iter().any(|x| !x.is_finite()) => {
                return Err(Error::invalid(format!(
                    "training state {i} has a non-finite gradient"
                )));
            }
            None if method == FitMethod::Score => {
                return Err(Error::invalid(format!(
                    "score matching needs the gradient of every state; state {i} has none"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

fn fit(set: &TrainingSet, opts: &TrainOptions, method: FitMethod) -> Result<TrainedSurrogate> {
    let start = Instant::now();
    validate(set, opts, method)?;
    let prep = design::Prepared::new(set, opts, method)?;
    let grid: Vec<f64> = match opts.scale {
        Scale::Fixed(c) => vec![c],
        Scale::Auto => AUTO_SCALE_GRID.to_vec(),
    };

    if prep.n_holdout() == 0 {
        let c = match opts.scale {
            Scale::Fixed(c) => c,
            Scale::Auto => {
                return Err(Error::invalid(format!(
                    "choosing the input scale needs held-out states: {} states with held-out \
                     fraction {} hold none out",
                    set.len(),
                    opts.holdout_fraction
                )));
            }
        };
        let (v, b) = prep.stats(c, prep.train_rows()).solve(opts.ridge)?;
        let mut network = prep.network(c)?;
        network.set_output(&v, b)?;
        return Ok(TrainedSurrogate {
            network,
            scale: c,
            holdout_gradient_error: f64::NAN,
            holdout_value_rmse: f64::NAN,
            seconds: start.elapsed().as_secs_f64(),
            method,
            training_states: set.len(),
            candidates: Vec::new(),
        });
    }

    // Select on the training states, judged on the held-out ones.
    let by_gradient = prep.holdout_has_gradients();
    let mut candidates = Vec::with_capacity(grid.len());
    let mut best: Option<(design::Stats, ScaleCandidate, f64)> = None;
    let mut failure = None;
    for &c in &grid {
        let t0 = Instant::now();
        let stats = prep.stats(c, prep.train_rows());
        let solved = stats.solve(opts.ridge).and_then(|(v, b)| {
            let mut network = prep.network(c)?;
            network.set_output(&v, b)?;
            Ok(prep.holdout_errors(&network))
        });
        let (gradient_error, value_rmse) = match solved {
            Ok(errors) => errors,
            // With one candidate, its failure is the fit's; with a grid, a failing factor is
            // skipped (and recorded with NaN errors).
            Err(e) if grid.len() == 1 => return Err(e),
            Err(e) => {
                failure = Some(e);
                (f64::NAN, f64::NAN)
            }
        };
        let candidate = ScaleCandidate {
            scale: c,
            holdout_gradient_error: gradient_error,
            holdout_value_rmse: value_rmse,
            seconds: t0.elapsed().as_secs_f64(),
        };
        candidates.push(candidate);
        let criterion = if by_gradient {
            gradient_error
        } else {
            value_rmse
        };
        if criterion.is_finite() && best.as_ref().is_none_or(|b| criterion < b.2) {
            best = Some((stats, candidate, criterion));
        }
    }
    let Some((train_stats, chosen, _)) = best else {
        return Err(failure
            .unwrap_or_else(|| Error::invalid("no input scale gave a finite held-out error")));
    };

    // Refit on all states: add the held-out states' statistics at the chosen scale.
    let c = chosen.scale;
    let all = train_stats.combine(&prep.stats(c, prep.holdout_rows()), method);
    let (v, b) = all.solve(opts.ridge)?;
    let mut network = prep.network(c)?;
    network.set_output(&v, b)?;
    Ok(TrainedSurrogate {
        network,
        scale: c,
        holdout_gradient_error: chosen.holdout_gradient_error,
        holdout_value_rmse: chosen.holdout_value_rmse,
        seconds: start.elapsed().as_secs_f64(),
        method,
        training_states: set.len(),
        candidates,
    })
}

#[cfg(test)]
mod tests;
