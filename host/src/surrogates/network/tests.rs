use super::design::{self, is_held_out};
use super::*;
use nalgebra::{DMatrix, DVector};
use rand_pcg::Pcg64;
use shmc_core::random::{fill_standard_normal, uniform};
use shmc_core::{Activation, Nodes, Potential};

use crate::random::chain_rng;
use crate::surrogates::file::SurrogateFile;
use crate::surrogates::states::TrainingSet;
use crate::surrogates::{FitMethod, Surrogate, SurrogateMeta, kinds};

fn normals(rng: &mut Pcg64, n: usize) -> Vec<f64> {
    let mut x = vec![0.0; n];
    fill_standard_normal(rng, &mut x);
    x
}

/// `n` states of the correlated 2-D Gaussian with sds (1, 0.3) and correlation 0.8, centred at
/// (1, −2): `U = ½ (q − μ)ᵀ Σ⁻¹ (q − μ)`.
fn gaussian_set(n: usize, seed: u64) -> TrainingSet {
    let (s1, s2, rho) = (1.0, 0.3, 0.8);
    let mu = [1.0, -2.0];
    let det = s1 * s1 * s2 * s2 * (1.0 - rho * rho);
    let prec = [s2 * s2 / det, -rho * s1 * s2 / det, s1 * s1 / det];
    let mut rng = chain_rng(seed, 0);
    let mut set = TrainingSet::new(2);
    for _ in 0..n {
        let z = normals(&mut rng, 2);
        let x = [
            s1 * z[0],
            s2 * (rho * z[0] + (1.0 - rho * rho).sqrt() * z[1]),
        ];
        let q = [mu[0] + x[0], mu[1] + x[1]];
        let g = [
            prec[0] * x[0] + prec[1] * x[1],
            prec[1] * x[0] + prec[2] * x[1],
        ];
        let u = 0.5 * (x[0] * g[0] + x[1] * g[1]);
        set.push(&q, u, Some(&g));
    }
    set
}

/// `n` states of a `d`-dimensional banana-like target with gradients.
fn curved_set(n: usize, d: usize, seed: u64) -> TrainingSet {
    let mut rng = chain_rng(seed, 0);
    let mut set = TrainingSet::new(d);
    for _ in 0..n {
        let q = normals(&mut rng, d);
        // U = Σ q²/2 + (q₁ − q₀²)²/2 (+ mild quartic), gradient by hand.
        let mut u = 0.0;
        let mut g = vec![0.0; d];
        for k in 0..d {
            u += 0.5 * q[k] * q[k] + 0.05 * q[k].powi(4);
            g[k] = q[k] + 0.2 * q[k].powi(3);
        }
        let r = q[1] - q[0] * q[0];
        u += 0.5 * r * r;
        g[1] += r;
        g[0] -= 2.0 * q[0] * r;
        set.push(&q, u, Some(&g));
    }
    set
}

/// The rows of the design `[H 1]` of `network` at the given states.
fn dense_design(network: &DynNetwork, set: &TrainingSet, states: &[usize]) -> DMatrix<f64> {
    let s = network.hidden();
    let mut h = DMatrix::<f64>::zeros(states.len(), s + 1);
    let mut row = vec![0.0; s];
    for (r, &i) in states.iter().enumerate() {
        network.features(set.position(i), &mut row);
        for j in 0..s {
            h[(r, j)] = row[j];
        }
        h[(r, s)] = 1.0;
    }
    h
}

/// The ridge potential-matching solution `[v; b]` by a direct dense solve of
/// `(HᵀH + λ diag(1,…,1,0)) [v; b] = HᵀU`.
fn dense_potential_solution(
    network: &DynNetwork,
    set: &TrainingSet,
    states: &[usize],
    ridge: f64,
) -> (DVector<f64>, f64) {
    let s = network.hidden();
    let h = dense_design(network, set, states);
    let t = DVector::from_iterator(states.len(), states.iter().map(|&i| set.potential(i)));
    let mut a = h.transpose() * &h;
    for j in 0..s {
        a[(j, j)] += ridge;
    }
    let x = a
        .lu()
        .solve(&(h.transpose() * t))
        .expect("singular dense system");
    (x.rows(0, s).into_owned(), x[s])
}

fn max_relative_difference(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-300);
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

#[test]
fn holdout_is_every_fifth_state() {
    let held: Vec<usize> = (0..20).filter(|&i| is_held_out(i, 0.2)).collect();
    assert_eq!(held, vec![4, 9, 14, 19]);
    assert!((0..100).all(|i| !is_held_out(i, 0.0)));
    let quarter: Vec<usize> = (0..12).filter(|&i| is_held_out(i, 0.25)).collect();
    assert_eq!(quarter, vec![3, 7, 11]);
}

#[test]
fn training_set_stores_states_in_order() {
    let mut set = TrainingSet::new(2);
    assert!(set.is_empty());
    set.push(&[1.0, 2.0], 3.0, Some(&[4.0, 5.0]));
    set.push(&[6.0, 7.0], 8.0, None);
    assert_eq!((set.len(), set.dim()), (2, 2));
    assert_eq!(set.position(1), &[6.0, 7.0]);
    assert_eq!(set.potential(0), 3.0);
    assert_eq!(set.gradient(0), Some(&[4.0, 5.0][..]));
    assert_eq!(set.gradient(1), None);
    assert!(!set.has_all_gradients());
}

#[test]
fn potential_fit_recovers_exactly_representable_outputs() {
    let (d, s, n) = (3, 8, 400);
    let mut rng = chain_rng(11, 1);
    let positions: Vec<Vec<f64>> = (0..n).map(|_| normals(&mut rng, d)).collect();
    let opts = TrainOptions {
        hidden: s,
        ridge: 0.0,
        scale: Scale::Fixed(1.0),
        seed: 5,
        ..TrainOptions::default()
    };
    // A first fit only to learn the random input parameters the fit uses for these positions.
    let mut probe = TrainingSet::new(d);
    for q in &positions {
        probe.push(q, q.iter().sum(), None);
    }
    let mut truth = fit_potential(&probe, &opts).unwrap().network;
    let v_true = normals(&mut rng, s);
    truth.set_output(&v_true, 0.75).unwrap();
    let mut set = TrainingSet::new(d);
    for q in &positions {
        set.push(q, truth.value(q), None);
    }
    let fit = fit_potential(&set, &opts).unwrap();
    let err = max_relative_difference(fit.network.output().as_slice(), &v_true);
    eprintln!(
        "exact recovery: max relative output error {err:.2e}, bias {}",
        fit.network.bias()
    );
    assert!(err < 1e-8, "output weights off by {err:e}");
    assert!((fit.network.bias() - 0.75).abs() < 1e-8);
    assert!(fit.holdout_value_rmse < 1e-8);
    assert!(
        fit.holdout_gradient_error.is_nan(),
        "no gradients were given"
    );
}

#[test]
fn potential_fit_on_gaussian_has_small_holdout_gradient_error() {
    let set = gaussian_set(1000, 3);
    let opts = TrainOptions {
        hidden: 200,
        ..TrainOptions::default()
    };
    let fit = fit_potential(&set, &opts).unwrap();
    eprintln!(
        "2-D Gaussian, s = 200, n = 1000: c = {}, held-out gradient error {:.2e}, value RMSE \
         {:.2e}, {:.3} s",
        fit.scale, fit.holdout_gradient_error, fit.holdout_value_rmse, fit.seconds
    );
    for c in &fit.candidates {
        eprintln!(
            "  c = {:5}: gradient error {:.2e}, value RMSE {:.2e}",
            c.scale, c.holdout_gradient_error, c.holdout_value_rmse
        );
    }
    assert!(fit.holdout_gradient_error < 0.05);
    assert_eq!(fit.training_states, 1000);
    assert_eq!(fit.candidates.len(), AUTO_SCALE_GRID.len());
}

#[test]
fn auto_scale_beats_worst_grid_point_and_reports_recomputable_error() {
    let set = curved_set(600, 3, 8);
    let opts = TrainOptions {
        hidden: 120,
        ridge: 1e-6,
        ..TrainOptions::default()
    };
    let fit = fit_potential(&set, &opts).unwrap();
    let errors: Vec<f64> = fit
        .candidates
        .iter()
        .map(|c| c.holdout_gradient_error)
        .collect();
    eprintln!(
        "curved 3-D target: chosen c = {}, errors {errors:?}",
        fit.scale
    );
    let worst = errors.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let best = errors.iter().cloned().fold(f64::INFINITY, f64::min);
    assert!(fit.holdout_gradient_error < worst);
    assert_eq!(fit.holdout_gradient_error, best);
    let chosen = fit
        .candidates
        .iter()
        .find(|c| c.scale == fit.scale)
        .unwrap();
    assert_eq!(chosen.holdout_gradient_error, fit.holdout_gradient_error);

    // Recompute: a direct dense fit on the training states at the chosen scale (same input
    // parameters and transform as the returned network), judged on the held-out states.
    let (train, held): (Vec<usize>, Vec<usize>) =
        (0..set.len()).partition(|&i| !is_held_out(i, opts.holdout_fraction));
    let mut network = fit.network.clone();
    let (v, b) = dense_potential_solution(&network, &set, &train, opts.ridge);
    network.set_output(v.as_slice(), b).unwrap();
    let (mut se, mut sn, mut sv) = (0.0, 0.0, 0.0);
    let mut grad = vec![0.0; set.dim()];
    for &i in &held {
        let z = network.value_and_gradient(set.position(i), &mut grad);
        sv += (z - set.potential(i)).powi(2);
        for (a, b) in grad.iter().zip(set.gradient(i).unwrap()) {
            se += (a - b) * (a - b);
            sn += b * b;
        }
    }
    let gradient_error = (se / sn).sqrt();
    let value_rmse = (sv / held.len() as f64).sqrt();
    eprintln!(
        "recomputed: gradient error {gradient_error:.6e} (reported {:.6e}), value RMSE \
         {value_rmse:.6e} (reported {:.6e})",
        fit.holdout_gradient_error, fit.holdout_value_rmse
    );
    assert!((gradient_error / fit.holdout_gradient_error - 1.0).abs() < 1e-6);
    assert!((value_rmse / fit.holdout_value_rmse - 1.0).abs() < 1e-6);
}

#[test]
fn ridge_solution_matches_direct_dense_solve() {
    let set = curved_set(37, 2, 21);
    for nodes in [
        Nodes::Additive(Activation::Softplus),
        Nodes::Additive(Activation::Tanh),
        Nodes::Rbf { width: 0.7 },
    ] {
        for (holdout_fraction, inputs) in [
            (0.0, Inputs::Standardized),
            (0.2, Inputs::Standardized),
            (0.0, Inputs::Whitened),
            (0.2, Inputs::Whitened),
        ] {
            let opts = TrainOptions {
                hidden: 9,
                nodes,
                ridge: 1e-2,
                scale: Scale::Fixed(1.5),
                inputs,
                seed: 3,
                holdout_fraction,
                ..TrainOptions::default()
            };
            let fit = fit_potential(&set, &opts).unwrap();
            let all: Vec<usize> = (0..set.len()).collect();
            let (v, b) = dense_potential_solution(&fit.network, &set, &all, opts.ridge);
            let err = max_relative_difference(fit.network.output().as_slice(), v.as_slice());
            assert!(
                err < 1e-9,
                "{nodes:?}, {inputs:?}, holdout {holdout_fraction}: {err:e}"
            );
            assert!(
                (fit.network.bias() - b).abs() < 1e-9 * (1.0 + b.abs()),
                "{nodes:?}: bias {} vs {b}",
                fit.network.bias()
            );
        }
    }
}

#[test]
fn score_fit_matches_direct_dense_solve() {
    let set = curved_set(41, 3, 4);
    for nodes in [
        Nodes::Additive(Activation::Softplus),
        Nodes::Additive(Activation::Sigmoid),
        Nodes::Rbf { width: 1.3 },
    ] {
        for (holdout_fraction, inputs) in [
            (0.0, Inputs::Standardized),
            (0.2, Inputs::Standardized),
            (0.0, Inputs::Whitened),
            (0.2, Inputs::Whitened),
        ] {
            let (d, s, ridge) = (set.dim(), 12, 1e-3);
            let opts = TrainOptions {
                hidden: s,
                nodes,
                ridge,
                scale: Scale::Fixed(2.0),
                inputs,
                seed: 9,
                holdout_fraction,
                ..TrainOptions::default()
            };
            let fit = fit_score(&set, &opts).unwrap();
            assert_eq!(fit.method, FitMethod::Score);
            let network = &fit.network;
            let mut normal = DMatrix::<f64>::identity(s, s) * ridge;
            let mut rhs = DVector::<f64>::zeros(s);
            let mut a = DMatrix::<f64>::zeros(d, s);
            for i in 0..set.len() {
                network.feature_gradients(set.position(i), a.as_mut_slice());
                normal += a.transpose() * &a;
                rhs += a.transpose() * DVector::from_column_slice(set.gradient(i).unwrap());
            }
            let v = normal.cholesky().unwrap().solve(&rhs);
            let err = max_relative_difference(network.output().as_slice(), v.as_slice());
            assert!(
                err < 1e-9,
                "{nodes:?}, {inputs:?}, holdout {holdout_fraction}: {err:e}"
            );
            // The bias makes z − U average zero over the states.
            let mean: f64 = (0..set.len())
                .map(|i| network.value(set.position(i)) - set.potential(i))
                .sum::<f64>()
                / set.len() as f64;
            assert!(mean.abs() < 1e-9, "{nodes:?}: mean of z − U is {mean}");
        }
    }
}

#[test]
fn score_fit_needs_gradients_and_learns_the_gaussian() {
    let mut set = gaussian_set(50, 1);
    set.push(&[0.0, 0.0], 1.0, None);
    assert!(fit_score(&set, &TrainOptions::default()).is_err());
    let set = gaussian_set(800, 2);
    let opts = TrainOptions {
        hidden: 100,
        ..TrainOptions::default()
    };
    let fit = fit_score(&set, &opts).unwrap();
    eprintln!(
        "score matching, 2-D Gaussian: c = {}, held-out gradient error {:.2e}",
        fit.scale, fit.holdout_gradient_error
    );
    assert!(fit.holdout_gradient_error < 0.05);
}

/// `n` states of a `d`-dimensional Gaussian with correlation 0.99 between every pair of
/// coordinates and sds from 1 down to 0.1: `q = A z`, `U = ½‖z‖²`, `∇U = A⁻ᵀz`.
fn correlated_set(n: usize, d: usize, seed: u64) -> TrainingSet {
    let correlation = DMatrix::from_fn(d, d, |i, j| if i == j { 1.0 } else { 0.99 });
    let sds = DMatrix::from_diagonal(&DVector::from_fn(d, |i, _| {
        0.1f64.powf(i as f64 / (d - 1) as f64)
    }));
    let a = &sds * correlation.cholesky().unwrap().l();
    let a_inv_t = a.clone().try_inverse().unwrap().transpose();
    let mut rng = chain_rng(seed, 0);
    let mut set = TrainingSet::new(d);
    for _ in 0..n {
        let z = DVector::from_vec(normals(&mut rng, d));
        let q = &a * &z;
        let g = &a_inv_t * &z;
        set.push(q.as_slice(), 0.5 * z.norm_squared(), Some(g.as_slice()));
    }
    set
}

#[test]
fn whitened_inputs_learn_a_correlated_gaussian_that_standardized_ones_miss() {
    let set = correlated_set(600, 8, 5);
    let error = |inputs| {
        let opts = TrainOptions {
            hidden: 60,
            inputs,
            ..TrainOptions::default()
        };
        fit_score(&set, &opts).unwrap().holdout_gradient_error
    };
    let (whitened, standardized) = (error(Inputs::Whitened), error(Inputs::Standardized));
    eprintln!("held-out gradient error: whitened {whitened:.3e}, standardized {standardized:.3e}");
    assert!(whitened < 0.02, "{whitened}");
    assert!(
        standardized > 5.0 * whitened,
        "{standardized} vs {whitened}"
    );
}

#[test]
fn rejects_bad_options_and_data() {
    let set = gaussian_set(20, 1);
    let ok = TrainOptions {
        hidden: 5,
        ..TrainOptions::default()
    };
    assert!(fit_potential(&set, &ok).is_ok());
    let bad = [
        TrainOptions {
            hidden: 0,
            ..ok.clone()
        },
        TrainOptions {
            ridge: -1.0,
            ..ok.clone()
        },
        TrainOptions {
            ridge: f64::NAN,
            ..ok.clone()
        },
        TrainOptions {
            holdout_fraction: 1.0,
            ..ok.clone()
        },
        TrainOptions {
            scale: Scale::Fixed(0.0),
            ..ok.clone()
        },
        TrainOptions {
            nodes: Nodes::Rbf { width: -1.0 },
            ..ok.clone()
        },
        // Auto needs held-out states.
        TrainOptions {
            holdout_fraction: 0.0,
            ..ok.clone()
        },
    ];
    for opts in &bad {
        assert!(fit_potential(&set, opts).is_err(), "{opts:?}");
    }
    let mut one = TrainingSet::new(2);
    one.push(&[0.0, 0.0], 0.0, None);
    assert!(fit_potential(&one, &ok).is_err());
    let mut nan = gaussian_set(20, 1);
    nan.push(&[0.0, 0.0], f64::NAN, None);
    let msg = fit_potential(&nan, &ok).unwrap_err().to_string();
    assert!(msg.contains("state 20"), "{msg}");
}

fn temp_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("shmc-train-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Saves `network` as a surrogate file, with `meta`, as `shmc train` does.
fn save_network(network: &DynNetwork, path: &std::path::Path, meta: &SurrogateMeta) {
    NetworkSurrogate::new(network.clone(), meta.method, meta.ridge)
        .save(path, meta)
        .unwrap();
}

/// The network a surrogate file holds, read as its own kind.
fn read_network(path: &std::path::Path) -> DynNetwork {
    let (surrogate, _) = NetworkSurrogate::read(&SurrogateFile::open(path).unwrap()).unwrap();
    surrogate.network().clone()
}

#[test]
fn save_load_round_trip_is_bit_identical() {
    let set = curved_set(200, 4, 6);
    for (name, nodes) in [
        ("additive.json", Nodes::Additive(Activation::Softplus)),
        ("rbf.json", Nodes::Rbf { width: 0.9 }),
    ] {
        let opts = TrainOptions {
            hidden: 60,
            nodes,
            scale: Scale::Fixed(3.0),
            ..TrainOptions::default()
        };
        let fit = fit_potential(&set, &opts).unwrap();
        let meta = fit.meta("curved", &opts);
        let path = temp_path(name);
        save_network(&fit.network, &path, &meta);
        let (loaded, loaded_meta) = kinds::load(&path, 4).unwrap();
        let mut rng = chain_rng(99, 3);
        let (mut g1, mut g2) = (vec![0.0; 4], vec![0.0; 4]);
        for _ in 0..50 {
            let q: Vec<f64> = normals(&mut rng, 4).iter().map(|x| 2.0 * x).collect();
            let z1 = fit.network.value_and_gradient(&q, &mut g1);
            let z2 = loaded.value_and_gradient(&q, &mut g2);
            assert_eq!(z1.to_bits(), z2.to_bits(), "{name}");
            assert!(g1.iter().zip(&g2).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
        let loaded = read_network(&path);
        assert_eq!(loaded.transform(), fit.network.transform());
        assert_eq!(loaded.nodes(), nodes);
        assert_eq!(loaded_meta.model, "curved");
        assert_eq!(loaded_meta.scale, 3.0);
        assert_eq!(
            loaded_meta.holdout_gradient_error.to_bits(),
            fit.holdout_gradient_error.to_bits()
        );
        assert_eq!(loaded_meta.training_states, 200);
        assert_eq!(loaded_meta.seed, opts.seed);
        std::fs::remove_file(&path).unwrap();
    }
    // Networks built by hand (non-trivial transform, every activation) round-trip too.
    let mut rng = chain_rng(5, 5);
    // (Radial centres `m + scale·c` do not always invert naively: about 0.2% need the search.)
    for nodes in [
        Nodes::Additive(Activation::Softplus),
        Nodes::Additive(Activation::Sigmoid),
        Nodes::Additive(Activation::Tanh),
        Nodes::Rbf { width: 0.4 },
    ] {
        let transform = shmc_core::InputTransform::new(
            DVector::from_vec(vec![0.3, -1.7, 12.5]),
            DVector::from_vec(vec![0.013, 3.3, 0.71]),
        )
        .unwrap();
        let config = shmc_core::NetworkConfig {
            nodes,
            ..Default::default()
        };
        let mut net: DynNetwork =
            shmc_core::Network::random(&config, transform, shmc_core::Dyn(500), &mut rng).unwrap();
        net.set_output(&normals(&mut rng, 500), -2.5).unwrap();
        let path = temp_path("manual.json");
        save_network(&net, &path, &SurrogateMeta::default());
        let (_, meta) = kinds::load(&path, 3).unwrap();
        assert!(meta.scale.is_nan());
        let loaded = read_network(&path);
        assert_eq!(loaded.weights(), net.weights());
        for (a, b) in loaded.offsets().iter().zip(net.offsets().iter()) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
        let q = [0.1 + uniform(&mut rng), -2.0, 12.0];
        assert_eq!(loaded.value(&q).to_bits(), net.value(&q).to_bits());
    }
}

#[test]
fn load_rejects_wrong_dimension_version_and_corrupted_files() {
    let set = gaussian_set(50, 4);
    let opts = TrainOptions {
        hidden: 10,
        scale: Scale::Fixed(1.0),
        ..TrainOptions::default()
    };
    let fit = fit_potential(&set, &opts).unwrap();
    let path = temp_path("reject-me.json");
    save_network(&fit.network, &path, &fit.meta("gaussian", &opts));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(kinds::load(&path, 2).is_ok());

    let msg = kinds::load(&path, 3).unwrap_err().to_string();
    assert!(
        msg.contains("reject-me.json") && msg.contains("dimension 2"),
        "{msg}"
    );

    let cases = [
        ("truncated", text[..text.len() / 2].to_string()),
        ("not json", "hello".to_string()),
        (
            "version",
            text.replacen("\"version\":2", "\"version\":3", 1),
        ),
        ("no kind", text.replacen("\"kind\":\"network\",", "", 1)),
        (
            "unknown kind",
            text.replacen("\"kind\":\"network\"", "\"kind\":\"sparse-grid\"", 1),
        ),
        (
            "format",
            text.replacen("shmc-surrogate", "something-else", 1),
        ),
        // An output weight that is not a number.
        (
            "number",
            text.replacen("\"output\":[\"", "\"output\":[\"x", 1),
        ),
        // A weight dropped: the sizes no longer agree.
        (
            "sizes",
            text.replacen("\"raw_offsets\":[\"", "\"raw_offsets\":[\"0.0\",\"", 1),
        ),
    ];
    for (what, corrupted) in cases {
        assert_ne!(corrupted, text, "{what}: the corruption did not apply");
        std::fs::write(&path, corrupted).unwrap();
        let msg = kinds::load(&path, 2).unwrap_err().to_string();
        eprintln!("{what}: {msg}");
        assert!(msg.contains("reject-me.json"), "{what}: {msg}");
    }
    std::fs::remove_file(&path).unwrap();
    let msg = kinds::load(&path, 2).unwrap_err().to_string();
    assert!(msg.contains("reject-me.json"), "{msg}");
}

/// A file of format version 1, written before surrogates had kinds (no `kind`, the record under
/// `network`), still loads, as the network it holds, bit for bit.
#[test]
fn a_version_1_file_loads_as_the_network_it_holds() {
    let set = gaussian_set(50, 4);
    let opts = TrainOptions {
        hidden: 10,
        scale: Scale::Fixed(1.0),
        ..TrainOptions::default()
    };
    let fit = fit_potential(&set, &opts).unwrap();
    let path = temp_path("version-1.json");
    save_network(&fit.network, &path, &fit.meta("gaussian", &opts));
    let text = std::fs::read_to_string(&path).unwrap();
    let old = text
        .replacen("\"version\":2,\"kind\":\"network\"", "\"version\":1", 1)
        .replacen("\"surrogate\":{", "\"network\":{", 1);
    assert!(old.starts_with("{\"format\":\"shmc-surrogate\",\"version\":1,\"meta\""));
    assert!(old.contains("\"network\":{") && !old.contains("\"surrogate\""));
    std::fs::write(&path, old).unwrap();
    let (loaded, meta) = kinds::load(&path, 2).unwrap();
    assert_eq!(meta.model, "gaussian");
    let (mut g1, mut g2) = ([0.0; 2], [0.0; 2]);
    for i in 0..set.len() {
        let q = set.position(i);
        let z1 = fit.network.value_and_gradient(q, &mut g1);
        let z2 = loaded.value_and_gradient(q, &mut g2);
        assert_eq!(z1.to_bits(), z2.to_bits());
        assert_eq!(g1.map(f64::to_bits), g2.map(f64::to_bits));
    }
    std::fs::remove_file(&path).unwrap();
}

/// The logistic-regression simulation of docs/methods.md, "Published settings and results" (d = 50, N = 10⁵), with 4000 states drawn
/// from its Laplace approximation, to time the fits at the paper's size. Run with
/// `cargo test -p shmc --release surrogates::network::tests::timing -- --ignored --nocapture`.
#[test]
#[ignore = "timing at s = 2000, n = 4000, d = 50; several seconds"]
fn timing_logistic_regression_d50() {
    let (d, big_n, n_states) = (50, 100_000, 4000);
    let mut rng = chain_rng(2016, 0);
    let simulation = LogisticSimulation::new(d, big_n, &mut rng);
    let set = simulation.laplace_states(n_states, &mut rng);
    time_grid_point_pieces(&set);
    time_fits(&set);
}

/// A simulated logistic regression (docs/methods.md, "Published settings and results") with the prior `N(0, 100 I)`: `N` rows of
/// `d` covariates, an intercept column of 0.1 and `0.1·N(0, 1)` entries, with labels drawn from
/// coefficients uniform on `[0, 1)`.
struct LogisticSimulation {
    d: usize,
    /// `N × d` row-major.
    x: Vec<f64>,
    /// The labels, 0 or 1.
    y: Vec<f64>,
}

impl LogisticSimulation {
    /// The covariates, then the coefficients, then the labels, in that order from `rng`.
    fn new(d: usize, big_n: usize, rng: &mut Pcg64) -> Self {
        let mut x = vec![0.0; big_n * d];
        for row in x.chunks_exact_mut(d) {
            row[0] = 0.1;
            for v in row[1..].iter_mut() {
                *v = 0.1 * normals(rng, 1)[0];
            }
        }
        let beta: Vec<f64> = (0..d).map(|_| uniform(rng)).collect();
        let y: Vec<f64> = x
            .chunks_exact(d)
            .map(|row| {
                let p = 1.0 / (1.0 + (-shmc_core::linalg::dot(row, &beta)).exp());
                if uniform(rng) < p { 1.0 } else { 0.0 }
            })
            .collect();
        Self { d, x, y }
    }

    /// `U`, `∇U` and the Hessian at `b`, summed over blocks of 1000 rows in parallel.
    fn with_hessian(&self, b: &[f64]) -> (f64, Vec<f64>, DMatrix<f64>) {
        use rayon::prelude::*;
        let d = self.d;
        let (u, g, h) = self
            .x
            .par_chunks(d * 1000)
            .zip(self.y.par_chunks(1000))
            .map(|(xs, ys)| {
                let mut u = 0.0;
                let mut g = vec![0.0; d];
                let mut h = DMatrix::<f64>::zeros(d, d);
                for (row, &yi) in xs.chunks_exact(d).zip(ys) {
                    let eta = shmc_core::linalg::dot(row, b);
                    u += eta.max(0.0) + (-eta.abs()).exp().ln_1p() - yi * eta;
                    let p = 1.0 / (1.0 + (-eta).exp());
                    for k in 0..d {
                        g[k] += (p - yi) * row[k];
                    }
                    let r = DVector::from_column_slice(row);
                    h.ger(p * (1.0 - p), &r, &r, 1.0);
                }
                (u, g, h)
            })
            .reduce(
                || (0.0, vec![0.0; d], DMatrix::zeros(d, d)),
                |a, b| {
                    let g = a.1.iter().zip(&b.1).map(|(p, q)| p + q).collect();
                    (a.0 + b.0, g, a.2 + b.2)
                },
            );
        let u = u + b.iter().map(|v| v * v).sum::<f64>() / 200.0;
        let g = g.iter().zip(b).map(|(g, v)| g + v / 100.0).collect();
        (u, g, h + DMatrix::identity(d, d) / 100.0)
    }

    /// `U` and `∇U` only (no Hessian) at `b`, as [`Self::with_hessian`] sums them.
    fn value_and_gradient(&self, b: &[f64]) -> (f64, Vec<f64>) {
        use rayon::prelude::*;
        let d = self.d;
        let (u, g) = self
            .x
            .par_chunks(d * 1000)
            .zip(self.y.par_chunks(1000))
            .map(|(xs, ys)| {
                let mut u = 0.0;
                let mut g = vec![0.0; d];
                for (row, &yi) in xs.chunks_exact(d).zip(ys) {
                    let eta = shmc_core::linalg::dot(row, b);
                    u += eta.max(0.0) + (-eta.abs()).exp().ln_1p() - yi * eta;
                    let p = 1.0 / (1.0 + (-eta).exp());
                    shmc_core::linalg::axpy(p - yi, row, &mut g);
                }
                (u, g)
            })
            .reduce(
                || (0.0, vec![0.0; d]),
                |a, b| {
                    (
                        a.0 + b.0,
                        a.1.iter().zip(&b.1).map(|(p, q)| p + q).collect(),
                    )
                },
            );
        let u = u + b.iter().map(|v| v * v).sum::<f64>() / 200.0;
        (u, g.iter().zip(b).map(|(g, v)| g + v / 100.0).collect())
    }

    /// `n_states` states of the Laplace approximation `N(mode, H⁻¹)` (the mode by 20 Newton
    /// steps from 0), with their `U` and `∇U`, whose computation is timed and printed.
    fn laplace_states(&self, n_states: usize, rng: &mut Pcg64) -> TrainingSet {
        let d = self.d;
        let mut mode = vec![0.0; d];
        for _ in 0..20 {
            let (_, g, h) = self.with_hessian(&mode);
            let step = h.cholesky().unwrap().solve(&DVector::from_vec(g));
            mode.iter_mut().zip(step.iter()).for_each(|(m, s)| *m -= s);
        }
        let (_, _, h) = self.with_hessian(&mode);
        let cov = h.clone().try_inverse().unwrap();
        let l_prec = h.cholesky().unwrap().l();
        let mut set = TrainingSet::new(d);
        let draws: Vec<Vec<f64>> = (0..n_states)
            .map(|_| {
                // q = mode + L⁻ᵀ z has covariance H⁻¹.
                let z = DVector::from_vec(normals(rng, d));
                let dq = l_prec.transpose().solve_upper_triangular(&z).unwrap();
                mode.iter().zip(dq.iter()).map(|(m, v)| m + v).collect()
            })
            .collect();
        let t0 = std::time::Instant::now();
        for q in &draws {
            let (u, g) = self.value_and_gradient(q);
            set.push(q, u, Some(&g));
        }
        eprintln!(
            "logistic d = {d}, N = {}: posterior sd ≈ {:.3}; {n_states} states computed in \
             {:.1} s",
            self.y.len(),
            cov[(1, 1)].sqrt(),
            t0.elapsed().as_secs_f64()
        );
        set
    }
}

/// The fastest of three runs of `f`, in seconds.
fn best_of(f: &mut dyn FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Times the pieces of one grid point of a potential-matching fit with 2000 units (c = 16),
/// best of 3, and the normal matrix `HᵀH` alone (its lower triangle against the full product),
/// and prints them.
fn time_grid_point_pieces(set: &TrainingSet) {
    let opts = TrainOptions {
        hidden: 2000,
        scale: Scale::Fixed(16.0),
        ..TrainOptions::default()
    };
    let mut prep = None;
    let t_prep = best_of(&mut || {
        prep = Some(design::Prepared::new(set, &opts, FitMethod::Potential).unwrap())
    });
    let prep = prep.unwrap();
    let mut stats = None;
    let t_stats = best_of(&mut || stats = Some(prep.stats(16.0, prep.train_rows())));
    let stats = stats.unwrap();
    let mut sol = None;
    let t_solve = best_of(&mut || sol = Some(stats.solve(opts.ridge).unwrap()));
    let (v, b) = sol.unwrap();
    let mut network = prep.network(16.0).unwrap();
    network.set_output(&v, b).unwrap();
    let t_hold = best_of(&mut || {
        prep.holdout_errors(&network);
    });
    let (m, s) = (prep.n_train(), 2000);
    let h: Vec<f64> = (0..m * s)
        .map(|i| ((i * 7919) % 1000) as f64 / 1000.0)
        .collect();
    let mut gram = vec![0.0; s * s];
    let t_tri = best_of(&mut || design::lower_gram(&mut gram, &h, m, s, faer::Accum::Replace));
    let t_full = best_of(&mut || {
        let hm = faer::MatRef::from_column_major_slice(&h, m, s);
        faer::linalg::matmul::matmul(
            faer::MatMut::from_column_major_slice_mut(&mut gram, s, s),
            faer::Accum::Replace,
            hm.transpose(),
            hm,
            1.0,
            faer::Par::rayon(0),
        )
    });
    let gflop = m as f64 * (s * s) as f64 / 1e9;
    eprintln!(
        "pieces (s = {s}, {m} training states): prepare {t_prep:.3} s, features + normal matrix \
         {t_stats:.3} s, Cholesky solve {t_solve:.3} s, held-out evaluation {t_hold:.3} s; \
         HᵀH alone: lower triangle {t_tri:.3} s ({:.0} GFLOP/s counting n·s²), full {t_full:.3} s \
         ({:.0} GFLOP/s counting 2n·s²)",
        gflop / t_tri,
        2.0 * gflop / t_full
    );
}

/// Times whole fits with 2000 units, potential and score matching at fixed scales and with
/// the automatic choice, and prints each with its held-out errors per candidate scale; the
/// first fit's file is also timed ([`time_save_and_load`]).
fn time_fits(set: &TrainingSet) {
    let base = TrainOptions {
        hidden: 2000,
        ..TrainOptions::default()
    };
    let fixed = |c: f64| TrainOptions {
        scale: Scale::Fixed(c),
        ..base.clone()
    };
    for (label, opts) in [
        ("fit_potential Fixed(16)", fixed(16.0)),
        ("fit_potential Auto", base.clone()),
        ("fit_score Fixed(16)", fixed(16.0)),
        ("fit_score Auto", base.clone()),
        ("fit_potential Fixed(64)", fixed(64.0)),
        ("fit_score Fixed(64)", fixed(64.0)),
        ("fit_score Fixed(128)", fixed(128.0)),
    ] {
        let fit = if label.starts_with("fit_score") {
            fit_score(set, &opts).unwrap()
        } else {
            fit_potential(set, &opts).unwrap()
        };
        if label == "fit_potential Fixed(16)" {
            time_save_and_load(&fit, &opts, set.dim());
        }
        eprintln!(
            "{label}: {:.2} s, c = {}, held-out gradient error {:.3e}, value RMSE {:.3e}",
            fit.seconds, fit.scale, fit.holdout_gradient_error, fit.holdout_value_rmse
        );
        for c in &fit.candidates {
            eprintln!(
                "    c = {:5}: gradient error {:.3e}, value RMSE {:.3e}, {:.2} s",
                c.scale, c.holdout_gradient_error, c.holdout_value_rmse, c.seconds
            );
        }
    }
}

/// Times saving `fit`'s network to a file and loading it back, and prints the times and the
/// file's size.
fn time_save_and_load(fit: &TrainedNetwork, opts: &TrainOptions, d: usize) {
    let path = temp_path("timing.json");
    let t = std::time::Instant::now();
    save_network(&fit.network, &path, &fit.meta("lr-sim", opts));
    let t_save = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    kinds::load(&path, d).unwrap();
    let bytes = std::fs::metadata(&path).unwrap().len();
    eprintln!(
        "save {t_save:.3} s, load {:.3} s, {:.1} MB",
        t.elapsed().as_secs_f64(),
        bytes as f64 / 1e6
    );
    std::fs::remove_file(&path).unwrap();
}

/// fit_score at the VHMC probit size (s = 100, d = 5).
#[test]
#[ignore = "timing"]
fn timing_score_d5() {
    let set = curved_set(4000, 5, 77);
    for scale in [Scale::Fixed(2.0), Scale::Auto] {
        for nodes in [
            Nodes::Additive(Activation::Softplus),
            Nodes::Rbf { width: 1.0 },
        ] {
            let opts = TrainOptions {
                hidden: 100,
                nodes,
                scale,
                ..TrainOptions::default()
            };
            let fit = fit_score(&set, &opts).unwrap();
            eprintln!(
                "fit_score s = 100, d = 5, n = 4000, {nodes:?}, {scale:?}: {:.4} s, c = {}, \
                 held-out gradient error {:.3e}",
                fit.seconds, fit.scale, fit.holdout_gradient_error
            );
        }
    }
}

#[test]
fn prepared_network_matches_features_of_the_engine() {
    // The engine's shortcut (base matrix, argument = P/c + d) and the network agree.
    let set = curved_set(30, 3, 2);
    let opts = TrainOptions {
        hidden: 7,
        scale: Scale::Fixed(0.8),
        ..TrainOptions::default()
    };
    let prep = design::Prepared::new(&set, &opts, FitMethod::Potential).unwrap();
    let network = prep.network(0.8).unwrap();
    let fit = fit_potential(&set, &opts).unwrap();
    assert_eq!(network.weights(), fit.network.weights());
    assert_eq!(network.offsets(), fit.network.offsets());
}
