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
    let evaluated = exact_at(model, &points)?;
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
/// row-sum model, else the points shared out between the threads, as many as the model serves
/// calls at once (a served model's instances all busy, see [`crate::batch`]).
fn exact_at(model: &dyn Model, points: &[Vec<f64>]) -> Result<Vec<(f64, Vec<f64>)>> {
    if let Some(sum) = model.row_sum() {
        return Ok(row_sum::evaluate_many(sum, points));
    }
    crate::batch::spread(model.concurrency(), || {
        points
            .par_iter()
            .map(|x| {
                let mut g = vec![0.0; x.len()];
                let u = model.value_and_gradient(x, &mut g);
                (u, g)
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::models::umbridge::{Likelihood, ServedPosterior, ServedSettings};
    use crate::serve::served::Served;
    use crate::serve::server::{Server, ServerSettings};

    /// Calls in flight over every server, counted where they are answered.
    #[derive(Default)]
    struct Latch {
        now: AtomicUsize,
        peak: AtomicUsize,
    }

    /// The standard normal's log-density, whose Evaluate holds its call until `wanted` calls
    /// are in flight over all the servers (at most a few seconds: a batch that never gets
    /// that wide fails rather than hangs), and counts the calls it answered.
    struct Held {
        latch: Arc<Latch>,
        wanted: usize,
        answered: AtomicUsize,
    }

    impl Served for Held {
        fn input_size(&self) -> usize {
            2
        }
        fn output_size(&self) -> usize {
            1
        }
        fn evaluate(&self, x: &[f64]) -> Result<Vec<f64>> {
            let latch = &self.latch;
            let now = latch.now.fetch_add(1, Ordering::SeqCst) + 1;
            latch.peak.fetch_max(now, Ordering::SeqCst);
            let start = Instant::now();
            while latch.peak.load(Ordering::SeqCst) < self.wanted
                && start.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            latch.now.fetch_sub(1, Ordering::SeqCst);
            self.answered.fetch_add(1, Ordering::SeqCst);
            Ok(vec![-0.5 * x.iter().map(|v| v * v).sum::<f64>()])
        }
        fn gradient(&self, x: &[f64], sens: &[f64]) -> Result<Vec<f64>> {
            Ok(x.iter().map(|v| -sens[0] * v).collect())
        }
        fn apply_jacobian(&self, x: &[f64], v: &[f64]) -> Result<Vec<f64>> {
            Ok(vec![-x.iter().zip(v).map(|(a, b)| a * b).sum::<f64>()])
        }
    }

    /// The Laplace draws of a model served by more instances than this machine has cores are
    /// evaluated on all of them at once: the servers see every instance's call in flight
    /// together (with rayon's pool, one thread per core, they saw at most a call per core).
    #[test]
    fn the_laplace_draws_keep_every_served_instance_busy_at_once() {
        let instances = (rayon::current_num_threads() + 1).max(4);
        let latch = Arc::new(Latch::default());
        let (mut servers, mut models) = (Vec::new(), Vec::new());
        for _ in 0..instances {
            let model = Arc::new(Held {
                latch: Arc::clone(&latch),
                wanted: instances,
                answered: AtomicUsize::new(0),
            });
            let settings = ServerSettings {
                port: 0,
                workers: 2,
                ..ServerSettings::default()
            };
            let served: Arc<dyn Served> = model.clone();
            servers.push(Server::start(vec![("normal".into(), served)], &settings).unwrap());
            models.push(model);
        }
        let urls: Vec<String> = servers
            .iter()
            .map(|s| format!("http://{}", s.addr()))
            .collect();
        let served = ServedPosterior::connect(ServedSettings {
            url: urls.join(","),
            model: None,
            likelihood: Likelihood::LogDensity,
            patience: Default::default(),
            config: serde_json::json!({}),
            memory_limit: u64::MAX,
        })
        .unwrap();
        let before: usize = models
            .iter()
            .map(|m| m.answered.load(Ordering::SeqCst))
            .sum();
        let points: Vec<Vec<f64>> = (0..2 * instances).map(|i| vec![i as f64, 1.0]).collect();
        let evaluated = exact_at(&served, &points).unwrap();
        assert_eq!(latch.peak.load(Ordering::SeqCst), instances);
        for (x, (u, g)) in points.iter().zip(&evaluated) {
            assert_eq!(
                (*u, g.as_slice()),
                (0.5 * (x[0] * x[0] + 1.0), x.as_slice())
            );
        }
        let after: usize = models
            .iter()
            .map(|m| m.answered.load(Ordering::SeqCst))
            .sum();
        assert_eq!(after - before, points.len());
        assert!(models.iter().all(|m| m.answered.load(Ordering::SeqCst) > 0));
    }
}
