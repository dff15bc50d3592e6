//! Surrogate-driven warmup and the target ESS: the surrogate proposes through most of warmup
//! (one exact `U` per iteration) and the draws stay exact; a surrogate that proposes badly is
//! caught and the chain goes on with exact HMC; sampling stops once the ESS is reached.

use shmc::core::Potential;
use shmc::models::banana::Banana;
use shmc::models::gaussian::CorrelatedGaussian;
use shmc::sampler::{Method, Phase, SampleConfig, SurrogateSettings, SurrogateSteps};
use shmc::surrogates::SurrogateKind;
use shmc::surrogates::network::{NetworkFitter, TrainOptions};
use shmc::surrogates::states::TrainingSet;
use shmc::surrogates::{FitMethod, Fitter, SurrogateMeta};

mod common;
use common::{assert_mean_within_4_mcse, banana_moments, run, series};

/// RNS-HMC fitted by score matching after `exact` exact iterations (on the states from
/// `train_after` on), proposing for the rest of warmup, with trajectories of `trajectory`.
fn surrogate_warmup(
    hidden: usize,
    (train_after, exact): (usize, usize),
    trajectory: SurrogateSteps,
) -> Method {
    Method::RnsHmc(SurrogateSettings {
        kind: SurrogateKind::Network(NetworkFitter::score(TrainOptions {
            hidden,
            seed: 3,
            ..TrainOptions::default()
        })),
        train_after: Some(train_after),
        exact_warmup: Some(exact),
        trajectory,
        ..SurrogateSettings::default()
    })
}

/// Every chain spent `exact` of its 500 warmup iterations in exact warmup and the rest in
/// surrogate warmup, where each iteration cost one exact value and no exact gradient.
fn assert_surrogate_drove_warmup(run: &shmc::sampler::Run, exact: usize) {
    for c in &run.chains {
        assert_eq!(c.phase(Phase::ExactWarmup).iterations, exact);
        assert_eq!(c.phase(Phase::SurrogateWarmup).iterations, 500 - exact);
        let report = c.surrogate.as_ref().unwrap();
        assert_eq!(report.collapse, None, "chain {}: {report:?}", c.chain);
        assert_eq!(report.started_at, Some(exact));
        // Exact-phase trajectories take 1..=10 exact gradients each; the surrogate phase's
        // none, so the warmup's exact gradients are at most the exact phase's worth.
        assert!(c.warmup_evaluations.exact_gradients <= 10 * exact as u64);
        assert_eq!(c.warmup_evaluations.exact_values, (500 - exact) as u64);
    }
}

#[test]
fn surrogate_driven_warmup_keeps_the_32d_gaussian_exact() {
    let model = CorrelatedGaussian::journal();
    let d = model.dim() as f64;
    let config = SampleConfig {
        chains: 2,
        warmup: 500,
        draws: 3000,
        seed: 11,
        steps: shmc::core::Steps::Jittered(10),
        method: surrogate_warmup(600, (100, 250), SurrogateSteps::Factor(1)),
        ..SampleConfig::default()
    };
    let run = run(&model, &config);
    assert_surrogate_drove_warmup(&run, 250);
    let along = |q: &[f64]| q.iter().sum::<f64>() / d.sqrt();
    assert_mean_within_4_mcse("mean along", &series(&run, along), 0.0);
    assert_mean_within_4_mcse("var along", &series(&run, |q| along(q).powi(2)), 1.0);
    let cov = model.covariance();
    for i in [0, 13, 31] {
        assert_mean_within_4_mcse(&format!("mean {i}"), &series(&run, |q| q[i]), 0.0);
        assert_mean_within_4_mcse(
            &format!("var {i}"),
            &series(&run, |q| q[i] * q[i]),
            cov[(i, i)],
        );
    }
}

#[test]
fn surrogate_driven_warmup_keeps_the_banana_exact() {
    let model = Banana::simulate(Banana::PAPER_N, 1).unwrap();
    let config = SampleConfig {
        chains: 2,
        warmup: 500,
        draws: 4000,
        seed: 5,
        steps: shmc::core::Steps::Jittered(10),
        method: surrogate_warmup(200, (50, 150), SurrogateSteps::Auto),
        ..SampleConfig::default()
    };
    let run = run(&model, &config);
    assert_surrogate_drove_warmup(&run, 150);
    let moments = banana_moments(&model);
    for i in 0..2 {
        assert_mean_within_4_mcse(&format!("mean {i}"), &series(&run, |q| q[i]), moments[i]);
        assert_mean_within_4_mcse(
            &format!("second moment {i}"),
            &series(&run, |q| q[i] * q[i]),
            moments[2 + i],
        );
    }
}

/// `−U`: its forces point away from the posterior.
struct Negated<'a>(&'a (dyn Potential + Sync));

impl Potential for Negated<'_> {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn value(&self, q: &[f64]) -> f64 {
        -self.0.value(q)
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let u = self.0.value_and_gradient(q, grad);
        grad.iter_mut().for_each(|g| *g = -*g);
        -u
    }
}

/// A surrogate of `−U` (fitted to the negated potential and gradients at draws three times as
/// wide as the posterior, so that its reach covers where the chains go; then saved and loaded as
/// a user's would be) proposes from the first iteration, on trajectories of up to 30 steps: its
/// acceptance collapses, the guard sends every chain back to exact HMC within its first two
/// windows, it says so, and the draws are right. (The guard's margin is thin here: such a
/// surrogate keeps 0.15–0.2 of its own acceptance against the guard's 0.2; with up to 20
/// steps, or a reach only as wide as the posterior, where the exact gradient takes over
/// beyond it, a chain can take a few windows more.)
#[test]
fn a_negated_surrogate_triggers_the_fallback_and_the_draws_stay_exact() {
    let model = CorrelatedGaussian::new(4, 1.0, 0.5).unwrap();
    let wrong = Negated(&model);
    let mut states = TrainingSet::new(4);
    let mut rng = shmc::random::chain_rng(2, 0);
    let mut g = [0.0; 4];
    for _ in 0..200 {
        let mut q = [0.0; 4];
        shmc::core::random::fill_standard_normal(&mut rng, &mut q);
        q.iter_mut().for_each(|x| *x *= 3.0);
        let u = wrong.value_and_gradient(&q, &mut g);
        states.push(&q, u, Some(&g));
    }
    let fitter = NetworkFitter {
        options: TrainOptions {
            hidden: 100,
            seed: 1,
            ..TrainOptions::default()
        },
        method: FitMethod::Score,
    };
    let fitted = fitter.fit(&wrong, &states).unwrap();
    let dir = std::env::temp_dir().join(format!("shmc-negated-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("negated.json");
    let meta = SurrogateMeta {
        model: "gaussian".into(),
        data: Some(None),
        method: FitMethod::Score,
        scale: fitted.scale,
        holdout_gradient_error: fitted.holdout_gradient_error,
        holdout_value_rmse: f64::NAN,
        training_states: states.len(),
        ridge: 1e-6,
        seed: 1,
        train_seconds: fitted.seconds,
    };
    fitted.surrogate.save(&path, &meta).unwrap();

    let config = SampleConfig {
        chains: 2,
        warmup: 500,
        draws: 4000,
        seed: 7,
        steps: shmc::core::Steps::Jittered(30),
        method: Method::RnsHmc(SurrogateSettings {
            surrogate_file: Some(path),
            ..SurrogateSettings::default()
        }),
        ..SampleConfig::default()
    };
    let run = run(&model, &config);
    std::fs::remove_dir_all(&dir).ok();
    for c in &run.chains {
        let collapse = c.surrogate.as_ref().unwrap().collapse.expect("collapse");
        assert!(
            collapse.acceptance < collapse.own_acceptance / 5.0,
            "{collapse:?}"
        );
        assert!(
            collapse.iteration < 100,
            "chain {} collapsed only at {} ({collapse:?})",
            c.chain,
            collapse.iteration
        );
        assert_eq!(c.sampling_evaluations.surrogate_gradients, 0);
        assert!(c.sampling_evaluations.exact_gradients > 0);
        assert!(c.mean_accept_stat() > 0.5, "exact HMC after the fallback");
    }
    let cov = model.covariance();
    for i in 0..4 {
        assert_mean_within_4_mcse(&format!("mean {i}"), &series(&run, |q| q[i]), 0.0);
        assert_mean_within_4_mcse(
            &format!("var {i}"),
            &series(&run, |q| q[i] * q[i]),
            cov[(i, i)],
        );
    }
}

/// With a target ESS the chains stop together at the first check that reaches it, every
/// chain holding the same number of draws, and the reported check agrees with the summary.
#[test]
fn sampling_stops_once_the_target_ess_is_reached() {
    let model = CorrelatedGaussian::new(3, 1.0, 0.3).unwrap();
    let config = SampleConfig {
        chains: 3,
        warmup: 300,
        draws: 20_000,
        seed: 4,
        target_ess: Some(400.0),
        ess_check_every: 50,
        ..SampleConfig::default()
    };
    let run = run(&model, &config);
    let check = run.target_ess.clone().expect("a check");
    assert!(check.reached, "{check:?}");
    assert!(
        check.draws < 20_000 && check.draws.is_multiple_of(50),
        "{check:?}"
    );
    for c in &run.chains {
        assert_eq!(c.kept(), check.draws);
    }
    let summary = run.summary();
    let min_bulk = summary
        .iter()
        .map(|p| p.ess_bulk)
        .fold(f64::INFINITY, f64::min);
    let min_tail = summary
        .iter()
        .map(|p| p.ess_tail)
        .fold(f64::INFINITY, f64::min);
    assert_eq!(min_bulk, check.bulk.0);
    assert_eq!(min_tail, check.tail.0);
    assert!(min_bulk >= 400.0 && min_tail >= 400.0);
    // The check before this one had not reached it: one block fewer falls short.
    let shorter = SampleConfig {
        draws: check.draws - 50,
        target_ess: None,
        ..config.clone()
    };
    let before = shmc::sampler::Run::summary(&common::run(&model, &shorter));
    let reached_before = before
        .iter()
        .all(|p| p.ess_bulk >= 400.0 && p.ess_tail >= 400.0);
    assert!(
        !reached_before,
        "the run went on past a check that reached the target"
    );
}

/// An unreachable target stops at the most draws and says it was not reached.
#[test]
fn an_unreachable_target_ess_stops_at_the_most_draws() {
    let model = CorrelatedGaussian::new(2, 1.0, 1.0).unwrap();
    let config = SampleConfig {
        chains: 2,
        warmup: 200,
        draws: 300,
        seed: 4,
        target_ess: Some(1e6),
        ess_check_every: 100,
        ..SampleConfig::default()
    };
    let run = run(&model, &config);
    let check = run.target_ess.clone().expect("a check");
    assert!(!check.reached);
    assert_eq!(check.draws, 300);
    assert!(run.chains.iter().all(|c| c.kept() == 300));
}
