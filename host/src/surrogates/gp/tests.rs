use faer::Side;
use rand_pcg::Pcg64;
use shmc_core::Potential;
use shmc_core::random::fill_standard_normal;

use super::fitc::FitcEvidence;
use super::full::FullEvidence;
use super::hyper::{Evidence, Hyper, Standardized};
use super::*;
use crate::random::chain_rng;
use crate::surrogates::file::SurrogateFile;
use crate::surrogates::{Surrogate, SurrogateMeta};

pub(super) fn normals(rng: &mut Pcg64, n: usize) -> Vec<f64> {
    let mut x = vec![0.0; n];
    fill_standard_normal(rng, &mut x);
    x
}

/// `n` standard-normal states in dimension `d` with potential `u`.
pub(super) fn states(n: usize, d: usize, seed: u64, u: impl Fn(&[f64]) -> f64) -> TrainingSet {
    let mut rng = chain_rng(seed, 0);
    let mut set = TrainingSet::new(d);
    for _ in 0..n {
        let q = normals(&mut rng, d);
        set.push(&q, u(&q), None);
    }
    set
}

/// A curved 2-D potential on a non-trivial level: what a posterior's `U` looks like.
pub(super) fn banana(q: &[f64]) -> f64 {
    100.0 + 0.5 * q[0] * q[0] + 2.0 * (q[1] - 0.5 * q[0] * q[0]).powi(2)
}

/// `θ` of given length scales, signal and noise variances and mean.
pub(super) fn theta(lengths: &[f64], signal: f64, noise: f64, mean: f64) -> Vec<f64> {
    let mut t: Vec<f64> = lengths.iter().map(|l| l.ln()).collect();
    t.extend([0.5 * signal.ln(), 0.5 * noise.ln(), mean]);
    t
}

fn full_fit(set: &TrainingSet) -> GpFit {
    fit(set, &GpOptions::default()).unwrap()
}

/// In the noise-free limit the full GP passes through its training values (to the nugget's
/// `δ·α`, at well-conditioned hyperparameters; and to 10⁻² of the values' spread as fitted,
/// the fit having driven the noise to zero on exact values); its gradient is that of its mean
/// (central differences).
#[test]
fn the_full_gp_interpolates_and_its_gradient_is_its_means() {
    let set = states(30, 2, 3, banana);
    let y = Standardized::of(&set).unwrap();
    let fixed = FullEvidence {
        states: &set,
        values: &y.values,
    }
    .posterior(
        &Hyper::at(&theta(&[0.5, 0.5], 1.0, 1e-14, 0.0)),
        y.shift,
        y.scale,
    )
    .unwrap();
    let gp = full_fit(&set).surrogate;
    for i in 0..set.len() {
        let (q, u) = (set.position(i), set.potential(i));
        assert!(
            (fixed.value(q) - u).abs() < 1e-6 * y.scale,
            "state {i}: {} vs {u}",
            fixed.value(q)
        );
        assert!(
            (gp.value(q) - u).abs() < 1e-2 * y.scale,
            "state {i}: {} vs {u}",
            gp.value(q)
        );
    }
    // The fitted mean's weights are large (its noise went to zero), so its differences lose
    // digits to cancellation: a looser tolerance there.
    for (mean, tolerance) in [(&fixed, 1e-7), (gp.predictor(), 1e-3)] {
        let mut grad = [0.0; 2];
        for q in [[0.3, -0.2], [-1.0, 0.7], [1.2, 1.5]] {
            mean.value_and_gradient(&q, &mut grad);
            for k in 0..2 {
                let h = 1e-5;
                let (mut up, mut down) = (q, q);
                up[k] += h;
                down[k] -= h;
                let fd = (mean.value(&up) - mean.value(&down)) / (2.0 * h);
                let error = (grad[k] - fd).abs();
                assert!(
                    error < tolerance * fd.abs().max(1.0),
                    "{q:?} {k}: {} vs {fd}",
                    grad[k]
                );
            }
        }
    }
}

/// At one set of hyperparameters FITC with every training state as an inducing point is the
/// full GP: the same evidence, gradient and predictive mean, to rounding. (The nugget `δ` in
/// `K_uu` makes them differ by about `δ/λ_min(C)`, so the length scales keep the states'
/// correlation matrix well conditioned.)
#[test]
fn fitc_with_every_state_inducing_is_the_full_gp() {
    let set = states(25, 2, 4, banana);
    let y = Standardized::of(&set).unwrap();
    let inducing: Vec<f64> = (0..set.len())
        .flat_map(|i| set.position(i).to_vec())
        .collect();
    let full = FullEvidence {
        states: &set,
        values: &y.values,
    };
    let sparse = FitcEvidence {
        states: &set,
        values: &y.values,
        inducing: &inducing,
    };
    let t = theta(&[0.3, 0.4], 1.5, 1e-3, 0.2);
    let (mut g_full, mut g_sparse) = (vec![0.0; 5], vec![0.0; 5]);
    let v_full = full.negative_log_evidence(&t, &mut g_full);
    let v_sparse = sparse.negative_log_evidence(&t, &mut g_sparse);
    assert!(
        (v_full - v_sparse).abs() < 1e-8 * v_full.abs(),
        "{v_full} vs {v_sparse}"
    );
    for (a, b) in g_full.iter().zip(&g_sparse) {
        assert!(
            (a - b).abs() < 1e-6 * a.abs().max(1.0),
            "{g_full:?} vs {g_sparse:?}"
        );
    }
    let h = Hyper::at(&t);
    let p_full = full.posterior(&h, y.shift, y.scale).unwrap();
    let p_sparse = sparse.posterior(&h, y.shift, y.scale).unwrap();
    let mut rng = chain_rng(9, 1);
    for _ in 0..20 {
        let q = normals(&mut rng, 2);
        let (a, b) = (p_full.value(&q), p_sparse.value(&q));
        assert!((a - b).abs() < 1e-8 * a.abs(), "{q:?}: {a} vs {b}");
    }
}

/// Central differences of the negative log evidence in each hyperparameter.
pub(super) fn check_gradient(evidence: &dyn Evidence, t: &[f64]) {
    let mut grad = vec![0.0; t.len()];
    evidence.negative_log_evidence(t, &mut grad);
    let mut scratch = vec![0.0; t.len()];
    for k in 0..t.len() {
        let h = 1e-5;
        let (mut up, mut down) = (t.to_vec(), t.to_vec());
        up[k] += h;
        down[k] -= h;
        let fd = (evidence.negative_log_evidence(&up, &mut scratch)
            - evidence.negative_log_evidence(&down, &mut scratch))
            / (2.0 * h);
        assert!(
            (grad[k] - fd).abs() < 1e-5 * fd.abs().max(1.0),
            "θ{k}: analytic {} vs differences {fd}",
            grad[k]
        );
    }
}

/// The evidence's gradient, full and FITC (five inducing points, so Λ is not the noise
/// alone), matches finite differences in every hyperparameter.
#[test]
fn the_evidence_gradient_matches_finite_differences() {
    let set = states(40, 3, 5, |q| banana(q) + 0.3 * q[2].sin());
    let y = Standardized::of(&set).unwrap();
    let t = theta(&[0.7, 1.1, 2.0], 0.8, 0.05, -0.1);
    check_gradient(
        &FullEvidence {
            states: &set,
            values: &y.values,
        },
        &t,
    );
    let inducing: Vec<f64> = (0..5).flat_map(|i| set.position(3 * i).to_vec()).collect();
    check_gradient(
        &FitcEvidence {
            states: &set,
            values: &y.values,
            inducing: &inducing,
        },
        &t,
    );
}

/// Values drawn from the GP prior with length scales (0.5, 2) on 200 points: the fit recovers
/// both within 25 %, full and FITC (100 inducing points).
#[test]
fn fitted_length_scales_recover_an_anisotropic_functions() {
    let (n, truth) = (200, [0.5, 2.0]);
    let mut set = states(n, 2, 6, |_| 0.0);
    let y = Standardized::of(&set).unwrap();
    let prior = FullEvidence {
        states: &set,
        values: &y.values,
    };
    let k = prior.covariance(&Hyper::at(&theta(&truth, 1.0, 1e-6, 0.0)));
    let l = k.llt(Side::Lower).unwrap();
    let z = normals(&mut chain_rng(6, 2), n);
    let mut drawn = TrainingSet::new(2);
    for i in 0..n {
        let u: f64 = (0..=i).map(|j| l.L()[(i, j)] * z[j]).sum();
        drawn.push(set.position(i), 3.0 * u + 10.0, None);
    }
    set = drawn;
    for approximation in [Approximation::Full, Approximation::Fitc { inducing: 100 }] {
        let options = GpOptions {
            approximation,
            ..GpOptions::default()
        };
        let gp = fit(&set, &options).unwrap().surrogate;
        for (got, want) in gp.predictor().lengths().iter().zip(truth) {
            assert!(
                (got / want - 1.0).abs() < 0.25,
                "{approximation:?}: {:?}",
                gp.predictor().lengths()
            );
        }
    }
}

/// A fit whose matrices would pass the memory limit is refused with the setting that drives
/// them, before the fit allocates; the largest sizes overflow no arithmetic.
#[test]
fn sizes_above_the_memory_limit_are_refused() {
    let set = states(50, 2, 7, banana);
    for (approximation, driver) in [
        (Approximation::Full, "train_after"),
        (Approximation::Fitc { inducing: 20 }, "inducing"),
    ] {
        // The full GP needs 3·50²·8 = 60 000 bytes and more; FITC 20·50·6·8 = 48 000.
        let options = GpOptions {
            approximation,
            memory_limit: 40_000,
            ..GpOptions::default()
        };
        match fit(&set, &options).unwrap_err() {
            Error::MemoryLimit { driver: d, message } => {
                assert_eq!(d, driver, "{message}");
            }
            other => panic!("{approximation:?}: {other}"),
        }
        let roomy = GpOptions {
            memory_limit: 1 << 30,
            ..options
        };
        assert!(fit(&set, &roomy).is_ok(), "{approximation:?}");
        for (n, d) in [(usize::MAX, 1), (1 << 40, usize::MAX)] {
            assert!(matches!(
                roomy.check_memory(n, d),
                Err(Error::MemoryLimit { .. })
            ));
        }
    }
}

/// A saved and loaded GP of either kind, with either mean, proposes bit for bit as the fitted
/// one (far outside its states too, where the quadratic mean dominates).
#[test]
fn save_and_load_give_bit_identical_proposals() {
    let set = states(60, 3, 8, |q| banana(q) + q[2] * q[2]);
    let dir = std::env::temp_dir().join(format!("shmc-gp-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (approximation, kind, mean) in [
        (Approximation::Full, FULL_KIND, MeanFunction::Constant),
        (
            Approximation::Fitc { inducing: 15 },
            FITC_KIND,
            MeanFunction::Constant,
        ),
        (Approximation::Full, FULL_KIND, MeanFunction::Quadratic),
        (
            Approximation::Fitc { inducing: 15 },
            FITC_KIND,
            MeanFunction::Quadratic,
        ),
    ] {
        let options = GpOptions {
            approximation,
            mean,
            ..GpOptions::default()
        };
        let fitted = fit(&set, &options).unwrap().surrogate;
        let path = dir.join(format!("{kind}.json"));
        fitted.save(&path, &SurrogateMeta::default()).unwrap();
        let file = SurrogateFile::open(&path).unwrap();
        assert_eq!(file.kind(), Some(kind));
        let (loaded, _) = GpSurrogate::read(&file).unwrap();
        assert_eq!(loaded.approximation(), fitted.approximation());
        assert_eq!(
            loaded.predictor().quadratic(),
            fitted.predictor().quadratic()
        );
        assert_eq!(
            fitted.predictor().quadratic().is_some(),
            mean == MeanFunction::Quadratic
        );
        let mut rng = chain_rng(8, 3);
        let (mut a, mut b) = ([0.0; 3], [0.0; 3]);
        for i in 0..50 {
            let far = if i % 2 == 0 { 1.0 } else { 10.0 };
            let q: Vec<f64> = normals(&mut rng, 3).iter().map(|x| far * x).collect();
            let (u, v) = (
                fitted.value_and_gradient(&q, &mut a),
                loaded.value_and_gradient(&q, &mut b),
            );
            assert_eq!(u.to_bits(), v.to_bits(), "{kind}");
            assert_eq!(a.map(f64::to_bits), b.map(f64::to_bits), "{kind}");
            assert_eq!(fitted.contains(&q), loaded.contains(&q));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An exactly quadratic `U` (correlated, off-centre, on a high level): with the quadratic mean
/// the GP's residuals vanish and its mean and gradient extrapolate to 10 sd from the training
/// states to 10⁻⁶ relative; the constant mean's revert to its constant there (checked too, so
/// the test sees the difference). The least-squares coefficients are the quadratic's own.
#[test]
fn the_quadratic_mean_extrapolates_an_exactly_quadratic_potential() {
    let quadratic = |q: &[f64]| {
        500.0 + 1.5 * q[0] - 0.5 * q[1]
            + 0.5 * (2.0 * q[0] * q[0] + 1.2 * q[0] * q[1] + 0.8 * q[1] * q[1])
    };
    let gradient = |q: &[f64]| {
        [
            1.5 + 2.0 * q[0] + 0.6 * q[1],
            -0.5 + 0.6 * q[0] + 0.8 * q[1],
        ]
    };
    let set = states(40, 2, 12, quadratic);
    let fitted = |mean| {
        let options = GpOptions {
            mean,
            ..GpOptions::default()
        };
        fit(&set, &options).unwrap().surrogate
    };
    let (with, without) = (
        fitted(MeanFunction::Quadratic),
        fitted(MeanFunction::Constant),
    );
    let q = with.predictor().quadratic().expect("a quadratic mean");
    assert!((q.hessian[1] - 0.6).abs() < 1e-6, "{q:?}");
    let mut grad = [0.0; 2];
    for far in [[10.0, 0.0], [-7.0, 7.0], [0.0, -10.0]] {
        let (u, g) = (quadratic(&far), gradient(&far));
        let got = with.value_and_gradient(&far, &mut grad);
        assert!(
            (got - u).abs() < 1e-6 * u.abs(),
            "{far:?}: {got} against {u}"
        );
        for k in 0..2 {
            assert!(
                (grad[k] - g[k]).abs() < 1e-6 * g[k].abs().max(1.0),
                "{far:?}: {grad:?} against {g:?}"
            );
        }
        let reverted = without.value(&far);
        assert!(
            (reverted - u).abs() > 0.1 * (u - 500.0).abs(),
            "{far:?}: {reverted}"
        );
    }
}

/// FITC with at least as many inducing points as states is fitted as the full GP (which it is,
/// `Q = K_ff`): the same evidence, length scales and proposals bit for bit, where FITC's own
/// algebra agrees only to rounding ([`fitc_with_every_state_inducing_is_the_full_gp`]) at a
/// dozen times the cost.
#[test]
fn fitc_with_an_inducing_point_per_state_is_fitted_as_the_full_gp() {
    let set = states(30, 2, 7, banana);
    let full = full_fit(&set);
    for inducing in [30, 1000] {
        let options = GpOptions {
            approximation: Approximation::Fitc { inducing },
            ..GpOptions::default()
        };
        let fitc = fit(&set, &options).unwrap();
        assert_eq!(fitc.log_evidence.to_bits(), full.log_evidence.to_bits());
        let (a, b) = (fitc.surrogate.predictor(), full.surrogate.predictor());
        assert_eq!(a.lengths(), b.lengths());
        let mut rng = chain_rng(7, 1);
        for _ in 0..10 {
            let q = normals(&mut rng, 2);
            assert_eq!(a.value(&q).to_bits(), b.value(&q).to_bits(), "{q:?}");
        }
    }
}
