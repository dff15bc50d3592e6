//! Helpers shared by the sampling tests: run chains in memory, derive per-chain series, and
//! compare a mean with its expectation in units of its Monte Carlo standard error.
// Each test crate uses its own part of these.
#![allow(dead_code)]

use shmc::Model;
use shmc::core::Potential;
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

/// `E[β₁]`, `E[β₂]`, `E[β₁²]`, `E[β₂²]` of the banana by the midpoint rule on a 1200² grid over
/// `[−6, 6]²`, which holds all but a negligible part of its mass.
pub fn banana_moments<M: Potential + ?Sized>(model: &M) -> [f64; 4] {
    let (n, lo, hi) = (1200, -6.0, 6.0);
    let h = (hi - lo) / n as f64;
    let at = |i: usize| lo + (i as f64 + 0.5) * h;
    let mut minimum = f64::INFINITY;
    for i in 0..n {
        for j in 0..n {
            minimum = minimum.min(model.value(&[at(i), at(j)]));
        }
    }
    let mut sums = [0.0; 5];
    for i in 0..n {
        for j in 0..n {
            let q = [at(i), at(j)];
            let w = (minimum - model.value(&q)).exp();
            sums[0] += w;
            sums[1] += w * q[0];
            sums[2] += w * q[1];
            sums[3] += w * q[0] * q[0];
            sums[4] += w * q[1] * q[1];
        }
    }
    [1, 2, 3, 4].map(|k| sums[k] / sums[0])
}

/// `count` independent exact draws of a 2-D posterior such as the banana: a cell of a 600²
/// grid over `[−6, 6]²` drawn with its midpoint density's probability (inverse CDF), then a
/// point uniformly within it. Their moments are [`banana_moments`]'s up to the grid's
/// resolution (cells of 0.02).
pub fn banana_draws<M: Potential + ?Sized>(model: &M, count: usize, seed: u64) -> Vec<[f64; 2]> {
    use rand::SeedableRng;
    use shmc::core::random::uniform;
    let (n, lo, hi) = (600, -6.0, 6.0);
    let h = (hi - lo) / n as f64;
    let at = |i: usize| lo + (i as f64 + 0.5) * h;
    let potentials: Vec<f64> = (0..n * n)
        .map(|c| model.value(&[at(c / n), at(c % n)]))
        .collect();
    let minimum = potentials.iter().copied().fold(f64::INFINITY, f64::min);
    let mut cumulative = Vec::with_capacity(n * n);
    let mut total = 0.0;
    for u in &potentials {
        total += (minimum - u).exp();
        cumulative.push(total);
    }
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let target = uniform(&mut rng) * total;
            let c = cumulative.partition_point(|&s| s < target).min(n * n - 1);
            let jitter = |rng: &mut rand_pcg::Pcg64| (uniform(rng) - 0.5) * h;
            [at(c / n) + jitter(&mut rng), at(c % n) + jitter(&mut rng)]
        })
        .collect()
}
