//! The full GP on gradients too (derivative observations, [`super::derivative`]).

use super::derivative::{GradientEvidence, observations};
use super::hyper::{Evidence, Hyper, Standardized};
use super::tests::{banana, check_gradient, normals, theta};
use super::*;
use crate::random::chain_rng;
use crate::surrogates::file::SurrogateFile;
use crate::surrogates::{Surrogate, SurrogateMeta};
use shmc_core::Potential;

/// The banana in its first two coordinates plus `0.3 Σ sin(qₖ)` in the others, and its
/// gradient.
fn curved(q: &[f64]) -> (f64, Vec<f64>) {
    let bend = q[1] - 0.5 * q[0] * q[0];
    let mut g = vec![q[0] - 4.0 * q[0] * bend, 4.0 * bend];
    g.extend(q[2..].iter().map(|x| 0.3 * x.cos()));
    (
        banana(q) + q[2..].iter().map(|x| 0.3 * x.sin()).sum::<f64>(),
        g,
    )
}

/// `n` standard-normal states in dimension `d` with [`curved`]'s potential and gradient.
fn states_with_gradients(n: usize, d: usize, seed: u64) -> TrainingSet {
    let mut rng = chain_rng(seed, 0);
    let mut set = TrainingSet::new(d);
    for _ in 0..n {
        let q = normals(&mut rng, d);
        let (u, g) = curved(&q);
        set.push(&q, u, Some(&g));
    }
    set
}

fn with_gradients() -> GpOptions {
    GpOptions {
        gradients: true,
        ..GpOptions::default()
    }
}

/// In the noise-free limit the GP on gradients passes through its training values and its
/// gradient through the training gradients (to the nugget's `δ·α`, 10⁻⁴ of the values'
/// spread: the derivative blocks make `α` larger than on values alone); a GP on the values alone
/// does not get the gradients (checked too, so the test sees the difference).
#[test]
fn the_gp_on_gradients_interpolates_values_and_gradients() {
    let set = states_with_gradients(15, 2, 21);
    let y = Standardized::of(&set).unwrap();
    let observed = observations(&set, &y).unwrap();
    let h = Hyper::at(&theta(&[0.8, 0.8], 1.0, 1e-14, 0.0));
    let gp = GradientEvidence {
        states: &set,
        observations: &observed,
    }
    .posterior(&h, y.shift, y.scale)
    .unwrap();
    let values_only = super::full::FullEvidence {
        states: &set,
        values: &y.values,
    }
    .posterior(&h, y.shift, y.scale)
    .unwrap();
    let (mut grad, mut worst_values_only) = (vec![0.0; 2], 0.0_f64);
    for i in 0..set.len() {
        let (q, u, g) = (set.position(i), set.potential(i), set.gradient(i).unwrap());
        let got = gp.value_and_gradient(q, &mut grad);
        assert!((got - u).abs() < 1e-4 * y.scale, "state {i}: {got} vs {u}");
        for k in 0..2 {
            let tolerance = 1e-4 * g[k].abs().max(y.scale);
            assert!(
                (grad[k] - g[k]).abs() < tolerance,
                "state {i}: {grad:?} vs {g:?}"
            );
        }
        values_only.value_and_gradient(q, &mut grad);
        worst_values_only = worst_values_only.max((grad[0] - g[0]).abs() / y.scale);
    }
    assert!(worst_values_only > 1e-2, "{worst_values_only}");
}

/// The GP on gradients' gradient is that of its mean (central differences), near the states
/// and between them: at fixed, well-conditioned hyperparameters to 10⁻⁶, and as fitted (the
/// noise driven to zero, weights of 10⁶ whose differences lose digits) to 10⁻³.
#[test]
fn the_predictive_gradient_is_its_means() {
    let set = states_with_gradients(20, 3, 22);
    let y = Standardized::of(&set).unwrap();
    let observed = observations(&set, &y).unwrap();
    let fixed = GradientEvidence {
        states: &set,
        observations: &observed,
    }
    .posterior(
        &Hyper::at(&theta(&[0.9, 1.2, 1.5], 1.0, 1e-4, 0.0)),
        y.shift,
        y.scale,
    )
    .unwrap();
    let fitted = fit(&set, &with_gradients()).unwrap().surrogate;
    assert_gradient_is_the_means(&GpSurrogate::new(fixed, None, false), 1e-6);
    assert_gradient_is_the_means(&fitted, 1e-3);
}

/// Central differences of `gp`'s value against its gradient at 20 points, to `tolerance`
/// relative (absolute below 1).
fn assert_gradient_is_the_means(gp: &dyn Potential, tolerance: f64) {
    let mut rng = chain_rng(22, 1);
    let mut grad = [0.0; 3];
    for _ in 0..20 {
        let q = normals(&mut rng, 3);
        gp.value_and_gradient(&q, &mut grad);
        for k in 0..3 {
            let step = 1e-5;
            let (mut up, mut down) = (q.clone(), q.clone());
            up[k] += step;
            down[k] -= step;
            let fd = (gp.value(&up) - gp.value(&down)) / (2.0 * step);
            assert!(
                (grad[k] - fd).abs() < tolerance * fd.abs().max(1.0),
                "{q:?}, {k}: {grad:?} vs {fd}"
            );
        }
    }
}

/// The evidence's gradient with the derivative blocks matches finite differences in every
/// hyperparameter (length scales, signal, noise, mean).
#[test]
fn the_evidence_gradient_with_derivative_blocks_matches_finite_differences() {
    let set = states_with_gradients(12, 3, 23);
    let y = Standardized::of(&set).unwrap();
    let observed = observations(&set, &y).unwrap();
    let evidence = GradientEvidence {
        states: &set,
        observations: &observed,
    };
    check_gradient(&evidence, &theta(&[0.7, 1.1, 2.0], 0.8, 0.05, -0.1));
    check_gradient(&evidence, &theta(&[1.5, 0.4, 0.9], 2.0, 0.01, 0.3));
}

/// Saved and loaded, the GP on gradients (either mean) proposes bit for bit as the fitted one,
/// and its file says it was fitted to gradients; a GP on values writes neither field, as files
/// from before derivative observations, and loads without slopes.
#[test]
fn save_and_load_of_a_gp_on_gradients_give_bit_identical_proposals() {
    let set = states_with_gradients(25, 3, 24);
    let dir = std::env::temp_dir().join(format!("shmc-gpgrad-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (gradients, mean) in [
        (true, MeanFunction::Constant),
        (true, MeanFunction::Quadratic),
        (false, MeanFunction::Constant),
    ] {
        let options = GpOptions {
            gradients,
            mean,
            ..GpOptions::default()
        };
        let fitted = fit(&set, &options).unwrap().surrogate;
        let path = dir.join(format!("{gradients}-{mean:?}.json"));
        fitted.save(&path, &SurrogateMeta::default()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.contains("\"gradients\":true"), gradients, "{text}");
        assert_eq!(text.contains("slopes"), gradients);
        let (loaded, _) = GpSurrogate::read(&SurrogateFile::open(&path).unwrap()).unwrap();
        assert_eq!(loaded.predictor().slopes(), fitted.predictor().slopes());
        let mut rng = chain_rng(24, 3);
        let (mut a, mut b) = ([0.0; 3], [0.0; 3]);
        for i in 0..40 {
            let far = if i % 2 == 0 { 1.0 } else { 6.0 };
            let q: Vec<f64> = normals(&mut rng, 3).iter().map(|x| far * x).collect();
            let (u, v) = (
                fitted.value_and_gradient(&q, &mut a),
                loaded.value_and_gradient(&q, &mut b),
            );
            assert_eq!(u.to_bits(), v.to_bits(), "{gradients} {mean:?}");
            assert_eq!(a.map(f64::to_bits), b.map(f64::to_bits));
            assert_eq!(fitted.value(&q).to_bits(), u.to_bits());
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Gradients multiply the observations by `d + 1`, the matrices by `(d + 1)²`: 50 states in
/// 2-D need 3·150²·8 = 540 000 bytes and more, refused under a limit the values alone
/// (60 000 and more) pass, naming `train_after`; the largest sizes overflow no arithmetic.
#[test]
fn a_gp_on_gradients_above_the_memory_limit_is_refused() {
    let set = states_with_gradients(50, 2, 25);
    let options = GpOptions {
        memory_limit: 200_000,
        ..with_gradients()
    };
    match fit(&set, &options).unwrap_err() {
        Error::MemoryLimit { driver, message } => {
            assert_eq!(driver, "train_after", "{message}");
            assert!(message.contains("with their gradients"), "{message}");
        }
        other => panic!("{other}"),
    }
    let values_only = GpOptions {
        gradients: false,
        ..options.clone()
    };
    assert!(fit(&set, &values_only).is_ok());
    for (n, d) in [(usize::MAX, 1), (1 << 40, usize::MAX), (1 << 31, 1 << 31)] {
        assert!(matches!(
            options.check_memory(n, d),
            Err(Error::MemoryLimit { .. })
        ));
    }
}

/// Gradients with FITC, and gradients the states lack, are refused naming the setting.
#[test]
fn gradients_are_refused_with_fitc_and_without_gradients() {
    let fitc = GpOptions {
        approximation: Approximation::Fitc { inducing: 5 },
        ..with_gradients()
    };
    let set = states_with_gradients(10, 2, 26);
    for (options, set) in [
        (fitc, set),
        (with_gradients(), super::tests::states(10, 2, 26, banana)),
    ] {
        match fit(&set, &options).unwrap_err() {
            Error::Setting { setting, problem } => {
                assert_eq!(setting, "gp_gradients", "{problem}");
            }
            other => panic!("{other}"),
        }
    }
}
