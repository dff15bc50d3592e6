//! The batch fits of the network's output weights, with the input scale chosen on held-out
//! states (see the [module docs](super)).

use std::time::Instant;

use shmc_core::Nodes;

use super::design;
use super::options::{AUTO_SCALE_GRID, DynNetwork, Scale, TrainOptions};
use crate::surrogates::FitMethod;
use crate::surrogates::SurrogateMeta;
use crate::surrogates::states::TrainingSet;
use crate::{Error, Result};

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

/// A trained network and how well it did on the held-out states.
#[derive(Clone, Debug)]
pub struct TrainedNetwork {
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

impl TrainedNetwork {
    /// The metadata to store with the network: this fit's figures, the model's name and the
    /// options it was trained with.
    pub fn meta(&self, model: impl Into<String>, opts: &TrainOptions) -> SurrogateMeta {
        SurrogateMeta {
            model: model.into(),
            data: None,
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
pub fn fit_potential(set: &TrainingSet, opts: &TrainOptions) -> Result<TrainedNetwork> {
    fit(set, opts, FitMethod::Potential)
}

/// Batch ridge score matching: `v = argmin Σₙ ‖∇z(qₙ) − ∇U(qₙ)‖² + λ‖v‖²`, then the bias with
/// mean of `z − U` zero over the training states. Every state needs its gradient.
pub fn fit_score(set: &TrainingSet, opts: &TrainOptions) -> Result<TrainedNetwork> {
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

fn fit(set: &TrainingSet, opts: &TrainOptions, method: FitMethod) -> Result<TrainedNetwork> {
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
        return Ok(TrainedNetwork {
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
    Ok(TrainedNetwork {
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
