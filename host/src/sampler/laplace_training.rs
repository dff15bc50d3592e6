//! RNS-HMC's network trained on the Laplace approximation ([`TrainFrom::Laplace`]) before the
//! chains start: the chains run in the approximation's standard coordinates (the Laplace mass
//! matrix), where it is the standard normal, so its draws are standard normal vectors and its
//! potential the quadratic `u₀ + g₀·x + ½‖x‖²`. The states are evaluated exactly, all in one
//! pass over the data for a row-sum model, and the network fitted to what the quadratic misses
//! ([`AnchoredFitter`]). Every chain then proposes with it from its first warmup iteration.
//!
//! Exactness does not depend on where the states come from: every proposal is still judged by
//! the exact `U`. A posterior far from its Laplace approximation only gets a poorer surrogate,
//! which the acceptance rate shows and the collapse guard catches.
//!
//! [`TrainFrom::Laplace`]: super::surrogate_settings::TrainFrom::Laplace

use std::time::Instant;

use rayon::prelude::*;
use shmc_core::random::fill_standard_normal;

use super::surrogate_settings::SurrogateSettings;
use crate::random::chain_rng;
use crate::row_sum;
use crate::surrogates::anchored::AnchoredFitter;
use crate::surrogates::states::TrainingSet;
use crate::surrogates::{Fitted, Fitter};
use crate::{Error, Model, Result};

/// The random stream of the training states (far from the chains' small stream numbers).
const STATES_STREAM: usize = 0x1A91_ACE5;

/// The network of `settings` fitted on `states` standard normal draws and the origin of
/// `model`, whose coordinates are its Laplace approximation's standard ones, with the states;
/// its evaluations and seconds count the whole precomputation (the exact pass included).
pub(super) fn fit(
    settings: &SurrogateSettings,
    model: &dyn Model,
    states: usize,
) -> Result<(Fitted, TrainingSet)> {
    let clock = Instant::now();
    let d = model.dim();
    let Some(network) = settings.kind.network() else {
        return Err(Error::invalid(
            "the Laplace approximation anchors a network surrogate, not another kind",
        ));
    };
    let mut rng = chain_rng(network.options.seed, STATES_STREAM);
    // The origin (the mode) first: the quadratic's level and slope.
    let points: Vec<Vec<f64>> = std::iter::once(vec![0.0; d])
        .chain((0..states).map(|_| {
            let mut x = vec![0.0; d];
            fill_standard_normal(&mut rng, &mut x);
            x
        }))
        .collect();
    let evaluated = exact_at(model, &points);
    let (u0, g0) = evaluated[0].clone();
    if !u0.is_finite() || g0.iter().any(|g| !g.is_finite()) {
        return Err(Error::invalid(
            "the potential or its gradient is not finite at the MAP: the Laplace approximation \
             cannot anchor a surrogate there",
        ));
    }
    let mut training = TrainingSet::new(d);
    for (x, (u, g)) in points.iter().zip(&evaluated).skip(1) {
        // A draw where the model is not finite (far in a tail) teaches nothing.
        if u.is_finite() && g.iter().all(|v| v.is_finite()) {
            training.push(x, *u, Some(g));
        }
    }
    let fitter = AnchoredFitter {
        value: u0,
        gradient: g0,
        network: network.clone(),
        cubic: settings.cubic,
    };
    let fitted = fitter.fit(model, &training)?;
    let whole = Fitted {
        exact_evaluations: points.len() as u64,
        seconds: clock.elapsed().as_secs_f64(),
        ..fitted
    };
    Ok((whole, training))
}

/// `U` and `∇U` at every point: in one pass over the data shared out between the threads for a
/// row-sum model, else the points shared out between the threads.
fn exact_at(model: &dyn Model, points: &[Vec<f64>]) -> Vec<(f64, Vec<f64>)> {
    if let Some(sum) = model.row_sum() {
        return row_sum::evaluate_many(sum, points);
    }
    points
        .par_iter()
        .map(|x| {
            let mut g = vec![0.0; x.len()];
            let u = model.value_and_gradient(x, &mut g);
            (u, g)
        })
        .collect()
}
