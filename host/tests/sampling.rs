//! The driver's chains target the right posterior: HMC with Stan-style warmup on models whose
//! posterior is known in closed form, checked within 4 Monte Carlo standard errors.
//!
//! Each MCSE is estimated from the chains themselves (`sd / √ESS`, the estimator ArviZ and
//! Stan report), so the tolerance tracks the real precision of the run rather than a guess.
//! Covariance entries are checked as means of the centred products `(xᵢ − μᵢ)(xⱼ − μⱼ)` about
//! the *true* mean, whose expectation is exactly the true covariance.

use shmc::core::Potential;
use shmc::models::gaussian::{ConjugateGaussian, CorrelatedGaussian};
use shmc::sampler::SampleConfig;

mod common;
use common::{assert_mean_within_4_mcse, run, series};

#[test]
fn hmc_recovers_the_conjugate_gaussian_posterior() {
    let model = ConjugateGaussian::simulate(ConjugateGaussian::DEFAULT_N, 3).unwrap();
    let mean = model.posterior_mean();
    let cov = model.posterior_covariance();
    let config = SampleConfig {
        draws: 10_000,
        warmup: 500,
        seed: 11,
        ..SampleConfig::default()
    };
    let run = run(&model, &config);
    assert_eq!(run.divergences(), 0);
    for i in 0..2 {
        assert_mean_within_4_mcse(&format!("mean {i}"), &series(&run, |q| q[i]), mean[i]);
        for j in i..2 {
            let products = series(&run, |q| (q[i] - mean[i]) * (q[j] - mean[j]));
            assert_mean_within_4_mcse(&format!("cov {i}{j}"), &products, cov[(i, j)]);
        }
    }
}

#[test]
fn hmc_recovers_the_long_direction_of_the_32d_gaussian() {
    let model = CorrelatedGaussian::journal();
    let d = model.dim() as f64;
    let config = SampleConfig {
        draws: 10_000,
        warmup: 1000,
        seed: 5,
        ..SampleConfig::default()
    };
    let run = run(&model, &config);
    // u = Σ qᵢ / √d has mean 0 and variance 1 (the covariance's largest eigenvalue).
    let along = |q: &[f64]| q.iter().sum::<f64>() / d.sqrt();
    assert_mean_within_4_mcse("mean along (1,..,1)", &series(&run, along), 0.0);
    let squares = series(&run, |q| along(q).powi(2));
    assert_mean_within_4_mcse("variance along (1,..,1)", &squares, 1.0);
    // A short-axis direction: e₁ − e₂ has variance 2·0.01.
    let across = series(&run, |q| (q[0] - q[1]).powi(2));
    assert_mean_within_4_mcse("variance across", &across, 0.02);
}

#[test]
fn same_seed_gives_identical_draws_and_different_seeds_do_not() {
    let model = CorrelatedGaussian::new(3, 1.0, 0.5).unwrap();
    let config = SampleConfig {
        chains: 2,
        draws: 50,
        warmup: 50,
        ..SampleConfig::default()
    };
    let a = run(&model, &config);
    let b = run(&model, &config);
    let c = run(
        &model,
        &SampleConfig {
            seed: 2,
            ..config.clone()
        },
    );
    assert_eq!(a.chains[0].columns, b.chains[0].columns);
    assert_ne!(a.chains[0].columns, a.chains[1].columns);
    assert_ne!(a.chains[0].columns, c.chains[0].columns);
}

/// A standard normal whose gradient panics after `limit` calls, as a user's model might on input
/// it did not expect.
struct Fragile {
    calls: std::sync::atomic::AtomicUsize,
    limit: usize,
}

impl Potential for Fragile {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        0.5 * q.iter().map(|x| x * x).sum::<f64>()
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let n = self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert!(n < self.limit, "cannot handle q = {q:?}");
        grad.copy_from_slice(q);
        self.value(q)
    }
}

impl shmc::Model for Fragile {
    fn parameter_names(&self) -> Vec<String> {
        vec!["a".into(), "b".into()]
    }
}

#[test]
fn a_panicking_model_stops_its_chain_with_an_error_naming_it() {
    let model = Fragile {
        calls: 0.into(),
        limit: 3000,
    };
    let config = SampleConfig {
        chains: 1,
        warmup: 100,
        draws: 5000,
        seed: 1,
        ..SampleConfig::default()
    };
    let sinks: Vec<Box<dyn shmc::sampler::DrawSink>> = vec![Box::new(shmc::sampler::NullSink)];
    let Err(err) = shmc::sampler::sample(&model, &config, sinks, &|_, _| {}, None) else {
        panic!("the run should fail");
    };
    let err = err.to_string();
    assert!(
        err.starts_with("chain 1: the model panicked: cannot handle q = ["),
        "{err}"
    );
}
