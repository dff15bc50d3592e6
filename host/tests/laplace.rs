//! The Laplace approximation at the MAP as the mass matrix (`--metric laplace`): the chains run
//! in its standard coordinates and every method's draws stay exact; the files report the dense
//! matrix on the model's own parameters; lockstep passes still equal each chain's own. And as
//! where RNS-HMC's network trains (`--train-from laplace`): fitted once before the chains start,
//! proposing through the whole warmup, its draws exact however far the posterior is from
//! Gaussian.

use shmc::core::{Potential, Steps};
use shmc::diagnostics::{Draws, ess_bulk};
use shmc::models::banana::Banana;
use shmc::models::gaussian::CorrelatedGaussian;
use shmc::models::logistic::LogisticRegression;
use shmc::sampler::{
    Init, MassMatrix, Method, NutsSettings, Phase, SampleConfig, StepSize, SurrogateSettings,
    SurrogateSteps,
};

mod common;
use common::{assert_mean_within_4_mcse, banana_draws, banana_moments, run, series};

fn laplace(method: Method) -> SampleConfig {
    SampleConfig {
        chains: 2,
        warmup: 300,
        draws: 1500,
        seed: 5,
        steps: Steps::Jittered(8),
        metric: MassMatrix::Laplace,
        method,
        ..SampleConfig::default()
    }
}

/// The journal's 32-D Gaussian (variance 1 along `(1, …, 1)`, 0.01 across) is its own Laplace
/// approximation, so its standard coordinates are the standard normal: HMC's trajectories
/// then cross the wide direction (sd 1, against 0.1 across, which bounds the step size of a
/// diagonal metric) many times faster, and HMC's and NUTS's draws have the Gaussian's moments.
#[test]
fn the_laplace_metric_whitens_the_32d_gaussian_and_keeps_hmc_and_nuts_exact() {
    let model = CorrelatedGaussian::journal();
    let d = model.dim() as f64;
    let cov = model.covariance();
    let diagonal = run(
        &model,
        &SampleConfig {
            metric: MassMatrix::Diagonal,
            ..laplace(Method::Hmc)
        },
    );
    for method in [Method::Hmc, Method::Nuts(NutsSettings::default())] {
        let name = method.name();
        let run = run(&model, &laplace(method));
        let along = |q: &[f64]| q.iter().sum::<f64>() / d.sqrt();
        if name == "hmc" {
            let ess = |run: &shmc::sampler::Run| {
                let chains = series(run, along);
                let refs: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
                ess_bulk(&Draws::new(&refs).unwrap())
            };
            let (whitened, plain) = (ess(&run), ess(&diagonal));
            assert!(
                whitened > 3.0 * plain,
                "bulk ESS along (1, …, 1): {whitened} with the Laplace metric, {plain} with \
                 the diagonal one"
            );
        }
        assert_mean_within_4_mcse(&format!("{name}: mean along"), &series(&run, along), 0.0);
        assert_mean_within_4_mcse(
            &format!("{name}: var along"),
            &series(&run, |q| along(q).powi(2)),
            1.0,
        );
        for i in [0, 17] {
            assert_mean_within_4_mcse(&format!("{name}: mean {i}"), &series(&run, |q| q[i]), 0.0);
            assert_mean_within_4_mcse(
                &format!("{name}: var {i}"),
                &series(&run, |q| q[i] * q[i]),
                cov[(i, i)],
            );
        }
    }
}

/// The banana is far from Gaussian (its MAP search from the origin ends on the saddle between
/// its arms, whose curvatures' magnitudes make the metric): the Laplace metric only changes how
/// fast HMC mixes (Stan's warmup adapts a diagonal on top), and its draws have the moments
/// quadrature gives. The chains are long because they leave the saddle for the arms seldom:
/// with 4000 draws each, the MCSE came out too small (over 24 seeds, `E[β₁²]`'s error was 1.6
/// of its MCSE in standard deviation, and −4.7 for one), with 40 000 it is right (sd 1.0 over
/// 16 seeds); the O(1) banana makes them cheap.
#[test]
fn the_laplace_metric_keeps_hmc_exact_on_the_banana() {
    let model = Banana::simulate(Banana::PAPER_N, 3).unwrap();
    let moments = banana_moments(&model);
    let run = run(
        &model,
        &SampleConfig {
            chains: 4,
            warmup: 1000,
            draws: 40_000,
            ..laplace(Method::Hmc)
        },
    );
    let names = ["E[b1]", "E[b2]", "E[b1^2]", "E[b2^2]"];
    let fs: [fn(&[f64]) -> f64; 4] = [|q| q[0], |q| q[1], |q| q[0] * q[0], |q| q[1] * q[1]];
    for ((name, f), expected) in names.iter().zip(fs).zip(moments) {
        assert_mean_within_4_mcse(name, &series(&run, f), expected);
    }
}

/// Chains in lockstep share their passes over the data through the change of variables and
/// make the very draws they make alone.
#[test]
fn lockstep_chains_under_the_laplace_metric_draw_as_chains_alone() {
    let model = LogisticRegression::simulate(3000, 5, 2).unwrap();
    let config = SampleConfig {
        draws: 200,
        warmup: 150,
        ..laplace(Method::Hmc)
    };
    let together = run(&model, &config);
    let alone = run(
        &model,
        &SampleConfig {
            lockstep: false,
            ..config
        },
    );
    for (a, b) in together.chains.iter().zip(&alone.chains) {
        assert_eq!(a.columns, b.columns, "chain {}", a.chain);
    }
    assert!(together.laplace.is_some_and(|l| l.evaluations > 0));
}

/// RNS-HMC with its network trained on 200 draws of the Laplace approximation.
fn trained_on_laplace() -> Method {
    trained_on_laplace_with(SurrogateSteps::Auto)
}

/// As [`trained_on_laplace`], with `trajectory`.
fn trained_on_laplace_with(trajectory: SurrogateSteps) -> Method {
    Method::RnsHmc(SurrogateSettings {
        trajectory,
        ..SurrogateSettings::laplace_trained(100, 200, 2)
    })
}

/// Whether `run`'s surrogate trajectories were NUTS's trees (whose draws that keep their
/// start are not judged: no exact value).
fn nuts_trees(run: &shmc::sampler::Run) -> bool {
    run.chains[0]
        .surrogate
        .as_ref()
        .is_some_and(|s| s.nuts_trees)
}

/// The network is fitted once, before the chains, to 200 draws and the mode (201 exact
/// evaluations, reported apart) and proposes from the first warmup iteration.
fn assert_fitted_before_the_chains(run: &shmc::sampler::Run) {
    let precompute = run.precompute.expect("fitted before sampling");
    assert_eq!(precompute.evaluations, 201);
    assert!(run.laplace.is_some_and(|l| l.evaluations > 0));
    for c in &run.chains {
        assert_eq!(c.phase(Phase::ExactWarmup).iterations, 0);
        assert_eq!(c.surrogate.as_ref().unwrap().training_states, 200);
    }
}

/// As [`assert_fitted_before_the_chains`], and one exact `U` per iteration, warmup included,
/// with exact gradients only where a trajectory leaves the network's reach (a handful, mostly
/// while the first step sizes are tried: at most one leapfrog step in twenty).
fn assert_trained_before_the_chains(run: &shmc::sampler::Run, warmup: usize) {
    let precompute = run.precompute.expect("fitted before sampling");
    assert_eq!(precompute.evaluations, 201);
    assert!(run.laplace.is_some_and(|l| l.evaluations > 0));
    for c in &run.chains {
        assert_eq!(c.phase(Phase::ExactWarmup).iterations, 0);
        assert_eq!(c.phase(Phase::SurrogateWarmup).iterations, warmup);
        let report = c.surrogate.as_ref().unwrap();
        assert_eq!(report.training_states, 200);
        assert_eq!(report.collapse, None, "chain {}: {report:?}", c.chain);
        for e in [&c.warmup_evaluations, &c.sampling_evaluations] {
            assert!(
                20 * e.exact_gradients <= e.surrogate_gradients,
                "chain {}: {e:?}",
                c.chain
            );
            if nuts_trees(run) {
                assert!(
                    e.exact_values <= e.iterations && 2 * e.exact_values > e.iterations,
                    "chain {}: {e:?}",
                    c.chain
                );
            } else {
                assert_eq!(e.exact_values, e.iterations, "chain {}", c.chain);
            }
        }
    }
}

/// On the 32-D Gaussian the approximation is exact, so the anchored network has nothing left
/// to fit (held-out gradient error below 10⁻³) and the draws have the Gaussian's moments.
#[test]
fn a_network_trained_on_the_laplace_approximation_samples_the_32d_gaussian_exactly() {
    assert_samples_the_32d_gaussian(trained_on_laplace());
}

/// The same with NUTS's trees on the network, each draw judged by delayed acceptance; a
/// tree's depth goes into the CSV's `treedepth__` as Stan's does.
#[test]
fn nuts_trees_on_a_network_trained_on_the_laplace_approximation_sample_the_32d_gaussian() {
    let run = assert_samples_the_32d_gaussian(trained_on_laplace_with(SurrogateSteps::Nuts));
    assert!(nuts_trees(&run));
    let c = &run.chains[0];
    let (depth, steps) = (&c.columns[3], &c.columns[4]);
    for (&depth, &steps) in depth.iter().zip(steps) {
        assert!(depth >= 1.0 && steps >= 2f64.powf(depth - 1.0) && steps < 2f64.powf(depth));
    }
}

/// Runs `method` on the 32-D Gaussian (150 warmup iterations, 2000 draws) and checks the
/// moments along its long axis and of two coordinates within 4 MCSE.
fn assert_samples_the_32d_gaussian(method: Method) -> shmc::sampler::Run {
    let model = CorrelatedGaussian::journal();
    let d = model.dim() as f64;
    let cov = model.covariance();
    let config = SampleConfig {
        warmup: 150,
        draws: 2000,
        ..laplace(method)
    };
    let run = run(&model, &config);
    assert_trained_before_the_chains(&run, 150);
    let error = run.chains[0]
        .surrogate
        .as_ref()
        .unwrap()
        .holdout_gradient_error;
    assert!(error < 1e-3, "held-out gradient error {error}");
    let along = |q: &[f64]| q.iter().sum::<f64>() / d.sqrt();
    assert_mean_within_4_mcse("mean along", &series(&run, along), 0.0);
    assert_mean_within_4_mcse("var along", &series(&run, |q| along(q).powi(2)), 1.0);
    for i in [3, 29] {
        assert_mean_within_4_mcse(&format!("mean {i}"), &series(&run, |q| q[i]), 0.0);
        assert_mean_within_4_mcse(
            &format!("var {i}"),
            &series(&run, |q| q[i] * q[i]),
            cov[(i, i)],
        );
    }
    run
}

/// The banana is far from its Laplace approximation: the anchored network is a poorer proposal
/// there, which costs acceptance (a chain whose exact acceptance collapses goes back to exact
/// HMC), never exactness. Exactness is checked as the kernel's invariance, which does not
/// depend on how fast its chains mix: they mix slowly on a banana. On the paper's banana, 4
/// chains of 3000 draws missed its moments by up to 6 MCSE over 16 seeds, and exact HMC with the
/// same Laplace metric by up to 7.5 MCSE at 4 × 10⁵ draws (within 1.5 at 4 × 3·10⁵): chains that
/// reach the arms' tips only in rare excursions underestimate their own MCSE until they have
/// made some (2026-11-26).
///
/// So 400 independent exact draws of a banana ([`banana_draws`]) each start 20 iterations at a
/// fixed step size (no adaptation), and the end points are exact draws too if the kernel is
/// exact. The kernel must not depend on its start: the banana here has `ȳ` near 0 and one
/// mode, so every start's MAP search ends at the same Laplace approximation (on the paper's,
/// with two modes, it would depend on the arm the start is in), and each run's network depends
/// on its seed only. Each moment's change over the 20 iterations, paired with its start, then
/// has mean 0 and the standard error of 400 independent pairs (over 8 other seeds of starts
/// and chains, every |z| below 2). The harness can fail: with the chains run on a banana whose
/// data are shifted by 0.2 (from the same exact starts), `E[β₂²]` changed by 8.0 standard
/// errors. The network makes three quarters of the gradients (exact ones where a trajectory
/// leaves its reach, as from a start in an arm's tip).
#[test]
fn a_network_trained_on_the_laplace_approximation_keeps_the_banana_exact() {
    type Moment = (&'static str, fn(&[f64]) -> f64);
    use rand::SeedableRng;
    let mut rng = rand_pcg::Pcg64::seed_from_u64(12);
    let mut noise = vec![0.0; Banana::PAPER_N];
    shmc::core::random::fill_standard_normal(&mut rng, &mut noise);
    let y: Vec<f64> = noise.iter().map(|e| Banana::SIGMA_Y * e).collect();
    // Along the ridge β₁ ≈ ȳ − β₂² the prior's exponent (β₁² + β₂²)/2 has its one minimum at
    // β₂ = 0 while ȳ < 1/2 (the paper's ȳ ≈ 1 has two, at β₂² ≈ ȳ − 1/2).
    let mean = y.iter().sum::<f64>() / y.len() as f64;
    assert!(mean < 0.4, "ȳ = {mean}: the banana has two modes");
    let model = Banana::new(&y).unwrap();
    let pilot = run(
        &model,
        &SampleConfig {
            chains: 1,
            draws: 10,
            ..laplace(trained_on_laplace())
        },
    );
    assert_fitted_before_the_chains(&pilot);
    let step_size = pilot.chains[0].step_size;
    let steps = 20;
    let starts = banana_draws(&model, 400, 3);
    let fs: [Moment; 4] = [
        ("E[b1]", |q| q[0]),
        ("E[b2]", |q| q[1]),
        ("E[b1^2]", |q| q[0] * q[0]),
        ("E[b2^2]", |q| q[1] * q[1]),
    ];
    let mut changes = vec![Vec::new(); fs.len()];
    // (the network's, exact) gradients: exact only where a trajectory leaves its reach
    let mut gradients = (0u64, 0u64);
    for (r, start) in starts.iter().enumerate() {
        let config = SampleConfig {
            chains: 1,
            warmup: 0,
            draws: steps,
            seed: 100 + r as u64,
            init: Init::Values(start.to_vec()),
            step_size: StepSize::Fixed(step_size),
            ..laplace(trained_on_laplace())
        };
        let chain = &run(&model, &config).chains[0];
        let e = &chain.sampling_evaluations;
        gradients.0 += e.surrogate_gradients;
        gradients.1 += e.exact_gradients;
        let end = [chain.parameter(0)[steps - 1], chain.parameter(1)[steps - 1]];
        for ((_, f), change) in fs.iter().zip(&mut changes) {
            change.push(f(&end) - f(start));
        }
    }
    assert!(
        gradients.0 > 2 * gradients.1,
        "the network proposed too little: {gradients:?} of its and exact gradients"
    );
    for ((name, _), change) in fs.iter().zip(&changes) {
        let n = change.len() as f64;
        let mean = change.iter().sum::<f64>() / n;
        let se = (change.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt();
        assert!(
            se > 0.0 && mean.abs() < 4.0 * se,
            "{name} moved by {mean} over {steps} iterations from exact draws (standard error {se})"
        );
    }
}

/// On a logistic regression the training states are evaluated in one pass over the data, and
/// chains in lockstep draw as chains alone.
#[test]
fn laplace_training_on_a_row_sum_model_draws_the_same_in_lockstep() {
    let model = LogisticRegression::simulate(4000, 6, 3).unwrap();
    let config = SampleConfig {
        warmup: 100,
        draws: 300,
        ..laplace(trained_on_laplace())
    };
    let together = run(&model, &config);
    assert_trained_before_the_chains(&together, 100);
    let alone = run(
        &model,
        &SampleConfig {
            lockstep: false,
            ..config
        },
    );
    for (a, b) in together.chains.iter().zip(&alone.chains) {
        assert_eq!(a.columns, b.columns, "chain {}", a.chain);
    }
}
