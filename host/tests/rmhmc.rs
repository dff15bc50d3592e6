//! RMHMC and RNS-RMHMC through the driver (`shmc::sampler::sample`) stay exact: they recover
//! the banana's moments (quadrature) and a 5-D logistic posterior's means (a long HMC run) within
//! 4 Monte Carlo standard errors, and a metric that is not positive definite at some proposals
//! rejects them, counted, with nothing non-finite in the CSV.

use nalgebra::DMatrix;
use shmc::Model;
use shmc::core::{Potential, Steps};
use shmc::diagnostics::{Draws, mcse_mean};
use shmc::models::banana::Banana;
use shmc::models::logistic::LogisticRegression;
use shmc::output::{CsvHeader, CsvSink, read_stan_csv};
use shmc::riemannian::{ConstantMetric, MetricAt, RiemannianMetric};
use shmc::sampler::{
    DrawSink, Init, Method, RmhmcSettings, Run, SampleConfig, StepSize, SurrogateSettings,
    TrainFrom, sample,
};
use shmc::surrogates::SurrogateKind;
use shmc::surrogates::network::NetworkFitter;
use shmc::surrogates::network::TrainOptions;

mod common;
use common::{assert_mean_within_4_mcse, banana_moments, run, series};

/// RMHMC's settings with a fixed step size `eps` and trajectories of 1..=`steps`.
fn rmhmc(eps: f64, steps: u32) -> RmhmcSettings {
    RmhmcSettings {
        step_size: StepSize::Fixed(eps),
        steps: Steps::Jittered(steps),
        ..RmhmcSettings::default()
    }
}

/// RNS-HMC's network (score fit on the states from `train_after` on) of `hidden` units.
fn network(hidden: usize, train_after: usize) -> SurrogateSettings {
    SurrogateSettings {
        kind: SurrogateKind::Network(NetworkFitter::score(TrainOptions {
            hidden,
            seed: 7,
            ..TrainOptions::default()
        })),
        train_after: Some(train_after),
        ..SurrogateSettings::default()
    }
}

/// RNS-HMC's network of 100 units score-matched to what the Laplace approximation's quadratic
/// misses at 200 of its draws, before the chains start.
fn laplace_trained() -> SurrogateSettings {
    SurrogateSettings {
        train_from: TrainFrom::Laplace { states: 200 },
        ..network(100, 100)
    }
}

/// Every kept draw of every chain came from the generalized leapfrog.
fn assert_generalized_sampling(run: &Run, draws: usize) {
    for c in &run.chains {
        let r = c.riemannian.expect("an RMHMC chain reports its kernel");
        assert_eq!(r.sampling.transitions, draws as u64, "chain {}", c.chain);
        assert!(r.sampling.metric_evaluations > 0 && r.sampling.counts.steps > 0);
    }
}

fn assert_banana_moments(run: &Run, model: &Banana) {
    let exact = banana_moments(model);
    let functions: [fn(&[f64]) -> f64; 4] = [|q| q[0], |q| q[1], |q| q[0] * q[0], |q| q[1] * q[1]];
    for (k, f) in functions.into_iter().enumerate() {
        assert_mean_within_4_mcse(&format!("moment {k}"), &series(run, f), exact[k]);
    }
}

/// Exact RMHMC with the banana's Fisher metric, its step size adapted by dual averaging on
/// its own acceptance.
#[test]
fn rmhmc_recovers_the_banana() {
    let model = Banana::simulate(Banana::PAPER_N, 3).unwrap();
    let config = SampleConfig {
        chains: 2,
        warmup: 300,
        draws: 2500,
        seed: 21,
        method: Method::Rmhmc(RmhmcSettings {
            step_size: StepSize::Adapt { target: 0.8 },
            ..rmhmc(1.0, 8)
        }),
        ..SampleConfig::default()
    };
    let run = run(&model, &config);
    assert_generalized_sampling(&run, 2500);
    // Adapted, not left at its start.
    assert!(run.chains.iter().all(|c| c.step_size != 1.0));
    assert_banana_moments(&run, &model);
}

/// RNS-RMHMC: exact HMC for 400 iterations, the network fitted on their states, then RMHMC on
/// the network's potential and SoftAbs'd Hessian for the rest of warmup (adapting its step
/// size) and the draws.
#[test]
fn rns_rmhmc_recovers_the_banana() {
    let model = Banana::simulate(Banana::PAPER_N, 3).unwrap();
    let config = SampleConfig {
        chains: 2,
        warmup: 600,
        draws: 2500,
        seed: 22,
        method: Method::RnsRmhmc(
            SurrogateSettings {
                exact_warmup: Some(400),
                ..network(200, 100)
            },
            RmhmcSettings {
                step_size: StepSize::Adapt { target: 0.8 },
                ..rmhmc(1.0, 8)
            },
        ),
        ..SampleConfig::default()
    };
    let run = run(&model, &config);
    assert_generalized_sampling(&run, 2500);
    for c in &run.chains {
        let report = c.surrogate.as_ref().unwrap();
        assert_eq!(report.collapse, None, "chain {}: {report:?}", c.chain);
        // Exact gradients only where a trajectory leaves the network's reach (1.6 % here).
        let e = &c.sampling_evaluations;
        assert!(20 * e.exact_gradients < e.surrogate_gradients, "{e:?}");
        assert!(c.sampling_evaluations.surrogate_gradients > 0);
    }
    assert_banana_moments(&run, &model);
}

/// Each coefficient's mean and MCSE over all chains.
fn means(run: &Run, d: usize) -> Vec<(f64, f64)> {
    (0..d)
        .map(|k| {
            let chains = series(run, |q| q[k]);
            let draws = Draws::new(&chains).unwrap();
            let n = draws.values().len() as f64;
            (draws.values().iter().sum::<f64>() / n, mcse_mean(&draws))
        })
        .collect()
}

/// RMHMC (Fisher metric) and RNS-RMHMC (network metric, trained on warmup states or on the
/// Laplace approximation) on a 5-D logistic posterior (N = 500) agree with a long HMC run
/// within 4 combined MCSE, every coefficient.
#[test]
fn rmhmc_and_rns_rmhmc_recover_a_logistic_posterior() {
    let model = LogisticRegression::simulate(500, 5, 21).unwrap();
    let base = SampleConfig {
        chains: 2,
        seed: 31,
        ..SampleConfig::default()
    };
    let reference = means(
        &run(
            &model,
            &SampleConfig {
                warmup: 500,
                draws: 10_000,
                ..base.clone()
            },
        ),
        5,
    );
    let methods = [
        ("RMHMC", Method::Rmhmc(rmhmc(0.5, 4)), 300, 1500),
        (
            "RNS-RMHMC",
            Method::RnsRmhmc(network(100, 100), rmhmc(0.5, 4)),
            500,
            2000,
        ),
        // The network trained on 200 draws of the Laplace approximation before the chains
        // start: the chains run in its standard coordinates under the anchored surrogate's
        // metric (the residual network's Hessian plus the identity, SoftAbs'd), its diagonal
        // or whole, proposing from the first warmup iteration.
        (
            "RNS-RMHMC (Laplace, diagonal)",
            Method::RnsRmhmc(
                laplace_trained(),
                RmhmcSettings {
                    diagonal: true,
                    ..rmhmc(0.8, 4)
                },
            ),
            300,
            2000,
        ),
        (
            "RNS-RMHMC (Laplace)",
            Method::RnsRmhmc(laplace_trained(), rmhmc(0.8, 4)),
            300,
            2000,
        ),
    ];
    for (name, method, warmup, draws) in methods {
        let run = run(
            &model,
            &SampleConfig {
                warmup,
                draws,
                method,
                ..base.clone()
            },
        );
        assert_generalized_sampling(&run, draws);
        assert!(run.mean_accept_stat() > 0.5, "{name}: acceptance too low");
        if name.contains("Laplace") {
            assert!(run.precompute.is_some(), "{name}: fitted before the chains");
            for c in &run.chains {
                let kernel = c.riemannian.unwrap();
                assert_eq!(kernel.warmup.transitions, warmup as u64, "{name}");
                // No exact phase: exact gradients only outside the network's reach.
                let e = &c.warmup_evaluations;
                assert!(
                    20 * e.exact_gradients < e.surrogate_gradients,
                    "{name}: {e:?}"
                );
            }
        }
        for (k, ((mean, mcse), (expected, ref_mcse))) in
            means(&run, 5).into_iter().zip(&reference).enumerate()
        {
            let tolerance = 4.0 * (mcse * mcse + ref_mcse * ref_mcse).sqrt();
            assert!(
                (mean - expected).abs() < tolerance,
                "{name} beta.{}: {mean} (MCSE {mcse}) vs HMC {expected} (MCSE {ref_mcse})",
                k + 1
            );
        }
    }
}

/// `U = ½|q|²` in two dimensions whose metric, the identity, is not positive definite (fails
/// to factor) outside `|q|∞ ≤ 1.5`: a model whose metric breaks at some proposals.
struct PatchyNormal(ConstantMetric);

impl Potential for PatchyNormal {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        0.5 * (q[0] * q[0] + q[1] * q[1])
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        grad.copy_from_slice(q);
        self.value(q)
    }
}

impl RiemannianMetric for PatchyNormal {
    fn dim(&self) -> usize {
        2
    }
    fn at(&self, q: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        q.iter()
            .all(|x| x.abs() <= 1.5)
            .then(|| self.0.at(q))
            .flatten()
    }
}

impl Model for PatchyNormal {
    fn parameter_names(&self) -> Vec<String> {
        vec!["x".into(), "y".into()]
    }
    fn riemannian_metric(&self, _start: &[f64]) -> Option<Box<dyn RiemannianMetric + '_>> {
        Some(Box::new(PatchyNormal(self.0.clone())))
    }
}

/// Proposals where the metric does not factor are rejected as divergent, each counted with its
/// reason; the CSV the run writes holds only finite numbers, one divergent row per rejection.
#[test]
fn a_metric_that_is_not_positive_definite_is_a_counted_rejection() {
    let model = PatchyNormal(ConstantMetric::new(DMatrix::identity(2, 2)).unwrap());
    let config = SampleConfig {
        chains: 1,
        warmup: 50,
        draws: 500,
        seed: 5,
        init: Init::Values(vec![0.0, 0.0]),
        method: Method::Rmhmc(rmhmc(0.8, 5)),
        ..SampleConfig::default()
    };
    let dir = std::env::temp_dir().join(format!("shmc-rmhmc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("patchy-1.csv");
    let header = CsvHeader {
        model: "patchy".into(),
        chain: 1,
        num_samples: config.draws,
        num_warmup: config.warmup,
        parameters: model.parameter_names(),
        ..CsvHeader::default()
    };
    let sinks: Vec<Box<dyn DrawSink>> = vec![Box::new(CsvSink::create(&path, &header).unwrap())];
    let run = sample(&model, &config, sinks, &|_, _| {}, None).unwrap();
    let report = run.chains[0].riemannian.unwrap();
    let failures = report.sampling.counts.not_positive_definite;
    assert!(failures > 20, "{report:?}");
    assert_eq!(
        failures as usize,
        run.divergences(),
        "every divergence here is a non-positive-definite metric: {report:?}"
    );
    let csv = read_stan_csv(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(csv.columns[0].len(), 500);
    for (name, column) in csv.names.iter().zip(&csv.columns) {
        assert!(column.iter().all(|x| x.is_finite()), "{name} not finite");
    }
    let divergent = csv.names.iter().position(|n| n == "divergent__").unwrap();
    let rows = csv.columns[divergent].iter().filter(|&&x| x == 1.0).count();
    assert_eq!(rows as u64, failures);
    let x = csv.names.iter().position(|n| n == "x").unwrap();
    assert!(csv.columns[x].iter().all(|v| v.abs() <= 1.5));
}
