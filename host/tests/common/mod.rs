//! Helpers shared by the sampling tests: run chains in memory, derive per-chain series, and
//! compare a mean with its expectation in units of its Monte Carlo standard error.

use shmc::Model;
use shmc::diagnostics::{Draws, mcse_mean};
use shmc::sampler::{DrawSink, NullSink, Run, SampleConfig, sample};

pub fn run(model: &dyn Model, config: &SampleConfig) -> Run {
    let sinks: Vec<Box<dyn DrawSink>> = (0..config.chains)
        .map(|_| Box::new(NullSink) as _)
        .collect();
    sample(model, config, sinks, &|_, _| {}, None).expect("sampling runs")
}

/// The per-chain series `f(draw)` for a function of the parameter vector.
pub fn series(run: &Run, f: impl Fn(&[f64]) -> f64) -> Vec<Vec<f64>> {
    let d = run.names.len();
    run.chains
        .iter()
        .map(|c| {
            (0..c.kept())
                .map(|i| {
                    let q: Vec<f64> = (0..d).map(|p| c.parameter(p)[i]).collect();
                    f(&q)
                })
                .collect()
        })
        .collect()
}

/// Asserts that the mean of `chains` is within 4 MCSE of `expected`.
pub fn assert_mean_within_4_mcse(what: &str, chains: &[Vec<f64>], expected: f64) {
    let draws = Draws::new(chains).expect("equal chains");
    let mean = draws.values().iter().sum::<f64>() / draws.values().len() as f64;
    let mcse = mcse_mean(&draws);
    assert!(mcse.is_finite() && mcse > 0.0, "{what}: MCSE {mcse}");
    assert!(
        (mean - expected).abs() < 4.0 * mcse,
        "{what}: estimate {mean}, expected {expected}, MCSE {mcse}"
    );
}
