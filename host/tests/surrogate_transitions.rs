//! Surrogate transitions stay exact with a deliberately wrong surrogate: a network fitted to the
//! 32-D Gaussian moved off its mean, loaded as a user's saved surrogate, proposes `k` = 1, 3
//! and 10 HMC transitions on itself between exact judgements, and the draws still have the
//! target's moments.

use shmc::core::Potential;
use shmc::models::gaussian::CorrelatedGaussian;
use shmc::sampler::{Method, SampleConfig, SurrogateSettings, Transitions};
use shmc::surrogates::network::{NetworkFitter, TrainOptions};
use shmc::surrogates::states::TrainingSet;
use shmc::surrogates::{Fitter, SurrogateMeta};

mod common;
use common::{assert_mean_within_4_mcse, run, series};

/// How far the surrogate's mean is moved, in each coordinate: along the long axis (variance 1)
/// that is 0.11 sd, across it (variance 0.01) 0.2 sd — dozens of MCSE at these run lengths.
const SHIFT: f64 = 0.02;

/// The target moved by `SHIFT` in every coordinate: `U(q − SHIFT·1)`.
struct Moved<'m>(&'m CorrelatedGaussian);

impl Potential for Moved<'_> {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn value(&self, q: &[f64]) -> f64 {
        let moved: Vec<f64> = q.iter().map(|x| x - SHIFT).collect();
        self.0.value(&moved)
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let moved: Vec<f64> = q.iter().map(|x| x - SHIFT).collect();
        self.0.value_and_gradient(&moved, grad)
    }
}

/// A 600-unit network score-matched to the moved target at 400 of its own draws (a 32-D
/// quadratic needs 528 units to be fitted whole; with 300 the fit is so poor that the
/// collapse guard sends the chains back to exact HMC), saved where `dir` says, as `shmc train`
/// would save it.
fn misplaced_surrogate(model: &CorrelatedGaussian, dir: &std::path::Path) -> std::path::PathBuf {
    let moved = Moved(model);
    let cholesky = model.covariance().cholesky().unwrap();
    let mut states = TrainingSet::new(model.dim());
    let mut rng = shmc::random::chain_rng(4, 0);
    let mut gradient = vec![0.0; model.dim()];
    for _ in 0..400 {
        let mut z = vec![0.0; model.dim()];
        shmc::core::random::fill_standard_normal(&mut rng, &mut z);
        let x = cholesky.l() * nalgebra::DVector::from_vec(z);
        let q: Vec<f64> = x.iter().map(|v| 1.5 * v + SHIFT).collect();
        let u = moved.value_and_gradient(&q, &mut gradient);
        states.push(&q, u, Some(&gradient));
    }
    let fitter = NetworkFitter::score(TrainOptions {
        hidden: 600,
        seed: 2,
        ..TrainOptions::default()
    });
    let fitted = fitter.fit(&moved, &states).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("misplaced.json");
    let meta = SurrogateMeta {
        model: "gaussian-32".into(),
        training_states: states.len(),
        ..SurrogateMeta::default()
    };
    fitted.surrogate.save(&path, &meta).unwrap();
    path
}

/// `k` = 1, 3, 10 surrogate transitions on the misplaced network, judged by the exact `U`: the
/// mean of every coordinate tested and the variance along the long axis within 4 MCSE of the
/// target's (the surrogate's own mean is `SHIFT` away). At most one exact `U` per iteration
/// judges; the exact gradients counted are the steps beyond the network's reach.
#[test]
fn surrogate_transitions_correct_a_misplaced_network_on_the_32d_gaussian() {
    let model = CorrelatedGaussian::journal();
    let dir = std::env::temp_dir().join(format!("shmc-misplaced-{}", std::process::id()));
    let path = misplaced_surrogate(&model, &dir);
    let d = model.dim() as f64;
    // Fewer draws for more transitions per draw: each moves further, and costs more.
    for (k, draws) in [(1, 4000), (3, 2000), (10, 1000)] {
        let config = SampleConfig {
            warmup: 500,
            draws,
            seed: 9,
            method: Method::RnsHmc(SurrogateSettings {
                transitions: Some(Transitions::fixed(k)),
                surrogate_file: Some(path.clone()),
                ..SurrogateSettings::default()
            }),
            ..SampleConfig::default()
        };
        let run = run(&model, &config);
        for c in &run.chains {
            let e = &c.sampling_evaluations;
            assert!(e.exact_values <= draws as u64, "k = {k}: {e:?}");
            assert!(e.surrogate_gradients > 0, "k = {k}: {e:?}");
        }
        let along = |q: &[f64]| q.iter().sum::<f64>() / d.sqrt();
        assert_mean_within_4_mcse(&format!("k = {k}, mean along"), &series(&run, along), 0.0);
        assert_mean_within_4_mcse(
            &format!("k = {k}, var along"),
            &series(&run, |q| along(q).powi(2)),
            1.0,
        );
        for i in [0, 13, 31] {
            let name = format!("k = {k}, mean {i}");
            assert_mean_within_4_mcse(&name, &series(&run, |q| q[i]), 0.0);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
