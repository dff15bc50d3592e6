//! Integration tests of the random-basis [`Network`] surrogate: its value, gradient and Hessian
//! against central finite differences for every kind of unit, its feature rows and feature
//! gradients (the training designs) against the same, the validation of its constructors, and the
//! promise that a compile-time-sized network and a run-time-sized one built from the same numbers
//! compute bit-identical results (one code path for device and host).
//!
//! Every network here uses a non-trivial [`InputTransform`] (centre ≠ 0, per-coordinate scales
//! ≠ 1) so that a transform folded in wrongly (a missing `1/scale` in a gradient, a centre
//! subtracted twice) shows up as an error of order one, far above the tolerances.

use nalgebra::{DMatrix, DVector, SMatrix, SVector, Vector2};
use rand_core::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::random::fill_standard_normal;
use shmc_core::{
    Activation, Const, Dyn, Error, FixedNetwork, InputTransform, Network, NetworkConfig, Nodes,
    Potential, WeightDistribution,
};

const DIM: usize = 3;
const HIDDEN: usize = 7;

fn rng(seed: u64) -> Pcg64 {
    Pcg64::seed_from_u64(seed)
}

/// Every kind of unit the network offers.
fn all_nodes() -> [Nodes; 4] {
    [
        Nodes::Additive(Activation::Softplus),
        Nodes::Additive(Activation::Sigmoid),
        Nodes::Additive(Activation::Tanh),
        Nodes::Rbf { width: 1.3 },
    ]
}

fn centre() -> [f64; DIM] {
    [0.5, -1.0, 2.0]
}

fn scale() -> [f64; DIM] {
    [2.0, 0.5, 1.5]
}

fn transform() -> InputTransform<Dyn> {
    InputTransform::new(
        DVector::from_column_slice(&centre()),
        DVector::from_column_slice(&scale()),
    )
    .unwrap()
}

/// A random network of the given kind with random output weights `N(0, 1)` and bias 0.7.
fn random_network(nodes: Nodes, seed: u64) -> Network<Dyn, Dyn> {
    let mut r = rng(seed);
    let config = NetworkConfig {
        nodes,
        ..NetworkConfig::default()
    };
    let mut net = Network::random(&config, transform(), Dyn(HIDDEN), &mut r).unwrap();
    let mut v = [0.0; HIDDEN];
    fill_standard_normal(&mut r, &mut v);
    net.set_output(&v, 0.7).unwrap();
    net
}

/// Test points spread like the transform says the posterior is: `centre + scale ⊙ N(0, I)`.
fn test_points(seed: u64, n: usize) -> Vec<[f64; DIM]> {
    let mut r = rng(seed);
    (0..n)
        .map(|_| {
            let mut z = [0.0; DIM];
            fill_standard_normal(&mut r, &mut z);
            core::array::from_fn(|k| centre()[k] + scale()[k] * z[k])
        })
        .collect()
}

/// The finite-difference step along coordinate `k`: small relative to the scale on which the
/// network varies there, which is the transform's scale.
fn step(k: usize) -> f64 {
    1e-4 * scale()[k]
}

/// Central difference of `f` along coordinate `k` at `q`.
fn central<F: FnMut(&[f64]) -> f64>(mut f: F, q: &[f64; DIM], k: usize) -> f64 {
    let h = step(k);
    let (mut plus, mut minus) = (*q, *q);
    plus[k] += h;
    minus[k] -= h;
    (f(&plus) - f(&minus)) / (2.0 * h)
}

fn max_abs(x: &[f64]) -> f64 {
    x.iter().fold(0.0f64, |m, v| m.max(v.abs()))
}

/// Tolerance for a finite-difference comparison of quantities of size `magnitude`.
///
/// With the steps above (`h = 10⁻⁴·scale`, i.e. 10⁻⁴ in transformed units) the truncation error
/// `h²|f'''|/6` is about 10⁻⁹ relative and the rounding error `ε|f|/h` about 10⁻¹¹, so 10⁻⁶
/// leaves three orders of margin; any real mistake (a wrong factor, a missing term) is of
/// relative size 10⁻¹ or more.
fn fd_tolerance(magnitude: f64) -> f64 {
    1e-6 * (1.0 + magnitude)
}

#[test]
fn gradient_matches_finite_differences_of_value_for_every_node_kind() {
    for (n, nodes) in all_nodes().into_iter().enumerate() {
        let net = random_network(nodes, 10 + n as u64);
        for q in test_points(20 + n as u64, 5) {
            let mut g = [0.0; DIM];
            net.value_and_gradient(&q, &mut g);
            let tol = fd_tolerance(max_abs(&g));
            for k in 0..DIM {
                let fd = central(|x| net.value(x), &q, k);
                assert!(
                    (g[k] - fd).abs() <= tol,
                    "{nodes:?} at {q:?}, coordinate {k}: gradient {} vs finite difference {fd}",
                    g[k]
                );
            }
        }
    }
}

#[test]
fn hessian_matches_finite_differences_of_gradient_for_every_node_kind() {
    for (n, nodes) in all_nodes().into_iter().enumerate() {
        let net = random_network(nodes, 30 + n as u64);
        for q in test_points(40 + n as u64, 5) {
            let mut hess = [0.0; DIM * DIM];
            net.hessian(&q, &mut hess);
            let tol = fd_tolerance(max_abs(&hess));
            for col in 0..DIM {
                for row in 0..DIM {
                    let fd = central(
                        |x| {
                            let mut g = [0.0; DIM];
                            net.gradient(x, &mut g);
                            g[row]
                        },
                        &q,
                        col,
                    );
                    let got = hess[col * DIM + row];
                    assert!(
                        (got - fd).abs() <= tol,
                        "{nodes:?} at {q:?}, entry ({row}, {col}): Hessian {got} vs finite \
                         difference {fd}"
                    );
                    // The Hessian of a smooth function is symmetric; the buffer should be too,
                    // to rounding (the two triangles are summed in different orders).
                    let mirror = hess[row * DIM + col];
                    assert!(
                        (got - mirror).abs() <= 1e-12 * (1.0 + max_abs(&hess)),
                        "{nodes:?}: Hessian not symmetric: {got} vs {mirror}"
                    );
                }
            }
        }
    }
}

#[test]
fn feature_gradients_match_finite_differences_of_features() {
    for (n, nodes) in all_nodes().into_iter().enumerate() {
        let net = random_network(nodes, 50 + n as u64);
        for q in test_points(60 + n as u64, 5) {
            let mut a = [0.0; DIM * HIDDEN];
            net.feature_gradients(&q, &mut a);
            let tol = fd_tolerance(max_abs(&a));
            for i in 0..HIDDEN {
                for k in 0..DIM {
                    let fd = central(
                        |x| {
                            let mut h = [0.0; HIDDEN];
                            net.features(x, &mut h);
                            h[i]
                        },
                        &q,
                        k,
                    );
                    let got = a[i * DIM + k];
                    assert!(
                        (got - fd).abs() <= tol,
                        "{nodes:?} at {q:?}: ∂φ_{i}/∂q_{k} = {got} vs finite difference {fd}"
                    );
                }
            }
        }
    }
}

/// The network is linear in its output weights: `z = b + Σ vᵢφᵢ` and `∇z = Σ vᵢ∇φᵢ`, with the
/// features and feature gradients the trainers use. The sums are reassociated differently in
/// the two code paths, so equality holds to rounding, 10⁻¹² relative to the terms' size.
#[test]
fn value_and_gradient_are_the_output_weighted_features() {
    for (n, nodes) in all_nodes().into_iter().enumerate() {
        let net = random_network(nodes, 70 + n as u64);
        let v = net.output().as_slice();
        for q in test_points(80 + n as u64, 5) {
            let mut h = [0.0; HIDDEN];
            let mut a = [0.0; DIM * HIDDEN];
            net.features(&q, &mut h);
            net.feature_gradients(&q, &mut a);
            let z = net.bias() + h.iter().zip(v).map(|(hi, vi)| hi * vi).sum::<f64>();
            let size = 1.0 + h.iter().zip(v).map(|(hi, vi)| (hi * vi).abs()).sum::<f64>();
            assert!((net.value(&q) - z).abs() <= 1e-12 * size, "{nodes:?}");
            let mut g = [0.0; DIM];
            net.gradient(&q, &mut g);
            for k in 0..DIM {
                let expected: f64 = (0..HIDDEN).map(|i| v[i] * a[i * DIM + k]).sum();
                assert!(
                    (g[k] - expected).abs() <= 1e-12 * (1.0 + max_abs(&a) * max_abs(v)),
                    "{nodes:?}: gradient {} vs Σ vᵢ∇φᵢ {expected}",
                    g[k]
                );
            }
        }
    }
}

/// `gradient` is a separate, value-free code path; it must not drift from the fused one. Both
/// evaluate the same expressions in the same order, so the results are bit-identical.
#[test]
fn gradient_alone_equals_fused_value_and_gradient_bitwise() {
    for (n, nodes) in all_nodes().into_iter().enumerate() {
        let net = random_network(nodes, 90 + n as u64);
        for q in test_points(100 + n as u64, 10) {
            let (mut g1, mut g2) = ([0.0; DIM], [f64::NAN; DIM]);
            let z = net.value_and_gradient(&q, &mut g1);
            // A stale buffer must be overwritten, not accumulated into.
            net.gradient(&q, &mut g2);
            assert_eq!(bits(&g1), bits(&g2), "{nodes:?} at {q:?}");
            assert_eq!(z.to_bits(), net.value(&q).to_bits(), "{nodes:?} at {q:?}");
        }
    }
}

/// The transform means what its docs say: a network with transform `(centre, scale)` at `q`
/// equals a network with the identity transform and the same raw parameters at
/// `u = (q − centre)/scale`. (Folding the transform into the weights reassociates a few
/// operations, hence 10⁻¹² relative rather than bitwise.)
#[test]
fn input_transform_is_applied_as_documented() {
    for (n, nodes) in all_nodes().into_iter().enumerate() {
        let mut r = rng(110 + n as u64);
        let mut raw_w = DMatrix::<f64>::zeros(DIM, HIDDEN);
        let mut raw_d = DVector::<f64>::zeros(HIDDEN);
        fill_standard_normal(&mut r, raw_w.as_mut_slice());
        fill_standard_normal(&mut r, raw_d.as_mut_slice());
        let mut v = [0.0; HIDDEN];
        fill_standard_normal(&mut r, &mut v);
        let mut with = Network::from_raw(nodes, transform(), raw_w.clone(), raw_d.clone()).unwrap();
        let mut without =
            Network::from_raw(nodes, InputTransform::identity(Dyn(DIM)), raw_w, raw_d).unwrap();
        with.set_output(&v, -0.3).unwrap();
        without.set_output(&v, -0.3).unwrap();
        for q in test_points(120 + n as u64, 5) {
            let u: [f64; DIM] = core::array::from_fn(|k| (q[k] - centre()[k]) / scale()[k]);
            let (zq, zu) = (with.value(&q), without.value(&u));
            assert!(
                (zq - zu).abs() <= 1e-12 * (1.0 + zu.abs()),
                "{nodes:?}: {zq} vs {zu}"
            );
            // Chain rule: ∇_q z = ∇_u z / scale.
            let (mut gq, mut gu) = ([0.0; DIM], [0.0; DIM]);
            with.gradient(&q, &mut gq);
            without.gradient(&u, &mut gu);
            for k in 0..DIM {
                let expected = gu[k] / scale()[k];
                assert!(
                    (gq[k] - expected).abs() <= 1e-12 * (1.0 + expected.abs()),
                    "{nodes:?}, coordinate {k}: {} vs {expected}",
                    gq[k]
                );
            }
        }
    }
}

/// The activations' first and second derivatives against finite differences over a wide range,
/// and no overflow far out (`exp(800)` would be infinite).
#[test]
fn activation_derivatives_match_finite_differences_and_do_not_overflow() {
    let h = 1e-5;
    for act in [Activation::Softplus, Activation::Sigmoid, Activation::Tanh] {
        for j in -60..=60 {
            let x = 0.5 * j as f64 + 0.123;
            let d1 = (act.value(x + h) - act.value(x - h)) / (2.0 * h);
            let d2 = (act.derivative(x + h) - act.derivative(x - h)) / (2.0 * h);
            // Values are O(|x|) for softplus, so rounding in the difference is ~ε|x|/h ≈ 10⁻⁹.
            assert!((act.derivative(x) - d1).abs() < 1e-8, "{act:?}' at {x}");
            assert!(
                (act.second_derivative(x) - d2).abs() < 1e-8,
                "{act:?}'' at {x}"
            );
        }
        for x in [-800.0f64, 800.0] {
            assert!(act.value(x).is_finite(), "{act:?}({x})");
            assert!(act.derivative(x).is_finite(), "{act:?}'({x})");
            assert!(act.second_derivative(x).is_finite(), "{act:?}''({x})");
        }
    }
    assert_eq!(Activation::Softplus.value(800.0), 800.0);
    assert_eq!(Activation::Softplus.value(-800.0), 0.0);
}

fn bits(x: &[f64]) -> Vec<u64> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// A compile-time-sized `FixedNetwork<2, 8>` and a run-time-sized `Network<Dyn, Dyn>` built from
/// the same raw weights run the same generic code, so every output agrees to the last bit.
#[test]
fn fixed_and_dynamic_networks_are_bit_identical() {
    const D: usize = 2;
    const S: usize = 8;
    for (n, nodes) in all_nodes().into_iter().enumerate() {
        let mut r = rng(130 + n as u64);
        let mut raw_w = [0.0; D * S];
        let mut raw_d = [0.0; S];
        let mut v = [0.0; S];
        fill_standard_normal(&mut r, &mut raw_w);
        fill_standard_normal(&mut r, &mut raw_d);
        fill_standard_normal(&mut r, &mut v);
        let (c, s) = ([0.4, -1.7], [1.9, 0.6]);

        let fixed_transform = InputTransform::new(
            Vector2::from_column_slice(&c),
            Vector2::from_column_slice(&s),
        )
        .unwrap();
        let mut fixed: FixedNetwork<D, S> = Network::from_raw(
            nodes,
            fixed_transform,
            SMatrix::<f64, D, S>::from_column_slice(&raw_w),
            SVector::<f64, S>::from_column_slice(&raw_d),
        )
        .unwrap();
        let dyn_transform = InputTransform::new(
            DVector::from_column_slice(&c),
            DVector::from_column_slice(&s),
        )
        .unwrap();
        let mut dynamic: Network<Dyn, Dyn> = Network::from_raw(
            nodes,
            dyn_transform,
            DMatrix::from_column_slice(D, S, &raw_w),
            DVector::from_column_slice(&raw_d),
        )
        .unwrap();
        fixed.set_output(&v, 0.25).unwrap();
        dynamic.set_output(&v, 0.25).unwrap();

        let mut pr = rng(140 + n as u64);
        for _ in 0..20 {
            let mut z = [0.0; D];
            fill_standard_normal(&mut pr, &mut z);
            let q = [c[0] + s[0] * z[0], c[1] + s[1] * z[1]];

            assert_eq!(fixed.value(&q).to_bits(), dynamic.value(&q).to_bits());
            let (mut g1, mut g2) = ([0.0; D], [0.0; D]);
            let z1 = fixed.value_and_gradient(&q, &mut g1);
            let z2 = dynamic.value_and_gradient(&q, &mut g2);
            assert_eq!(z1.to_bits(), z2.to_bits(), "{nodes:?}");
            assert_eq!(bits(&g1), bits(&g2), "{nodes:?}");
            fixed.gradient(&q, &mut g1);
            dynamic.gradient(&q, &mut g2);
            assert_eq!(bits(&g1), bits(&g2), "{nodes:?}");

            let (mut h1, mut h2) = ([0.0; S], [0.0; S]);
            fixed.features(&q, &mut h1);
            dynamic.features(&q, &mut h2);
            assert_eq!(bits(&h1), bits(&h2), "{nodes:?}");
            let (mut a1, mut a2) = ([0.0; D * S], [0.0; D * S]);
            fixed.feature_gradients(&q, &mut a1);
            dynamic.feature_gradients(&q, &mut a2);
            assert_eq!(bits(&a1), bits(&a2), "{nodes:?}");
            let (mut k1, mut k2) = ([0.0; D * D], [0.0; D * D]);
            fixed.hessian(&q, &mut k1);
            dynamic.hessian(&q, &mut k2);
            assert_eq!(bits(&k1), bits(&k2), "{nodes:?}");
        }
    }
}

/// `Network::random` with fixed sizes draws the same parameters from the same seed as with
/// run-time sizes, so a device and a host seeded alike hold the same network.
#[test]
fn fixed_and_dynamic_random_networks_draw_the_same_parameters() {
    for nodes in all_nodes() {
        let config = NetworkConfig {
            nodes,
            ..NetworkConfig::default()
        };
        let fixed = Network::random(
            &config,
            InputTransform::identity(Const::<2>),
            Const::<8>,
            &mut rng(7),
        )
        .unwrap();
        let dynamic = Network::random(
            &config,
            InputTransform::identity(Dyn(2)),
            Dyn(8),
            &mut rng(7),
        )
        .unwrap();
        assert_eq!(
            bits(fixed.weights().as_slice()),
            bits(dynamic.weights().as_slice())
        );
        assert_eq!(
            bits(fixed.offsets().as_slice()),
            bits(dynamic.offsets().as_slice())
        );
    }
}

fn try_random(config: NetworkConfig, transform: InputTransform<Dyn>) -> Result<(), Error> {
    Network::random(&config, transform, Dyn(4), &mut rng(1)).map(|_| ())
}

#[test]
fn random_rejects_bad_weight_distributions_and_widths() {
    let base = NetworkConfig::default();
    for sd in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let weights = NetworkConfig {
            weights: WeightDistribution::Normal { sd },
            ..base
        };
        assert_eq!(
            try_random(weights, transform()),
            Err(Error::NotPositive("weight sd")),
            "weight sd {sd}"
        );
        let offsets = NetworkConfig {
            offsets: WeightDistribution::Normal { sd },
            ..base
        };
        assert_eq!(
            try_random(offsets, transform()),
            Err(Error::NotPositive("weight sd")),
            "offset sd {sd}"
        );
    }
    let uniform = NetworkConfig {
        weights: WeightDistribution::Uniform { half_width: 0.0 },
        ..base
    };
    assert_eq!(
        try_random(uniform, transform()),
        Err(Error::NotPositive("weight half-width"))
    );
    for width in [0.0, -1.3, f64::NAN] {
        let rbf = NetworkConfig {
            nodes: Nodes::Rbf { width },
            ..base
        };
        assert_eq!(
            try_random(rbf, transform()),
            Err(Error::NotPositive("RBF width")),
            "width {width}"
        );
    }
    // The good configurations are accepted, so the rejections above are about the bad values.
    for nodes in all_nodes() {
        let good = NetworkConfig { nodes, ..base };
        assert_eq!(try_random(good, transform()), Ok(()));
    }
}

#[test]
fn input_transform_rejects_non_finite_centre_and_non_positive_scale() {
    let ok = DVector::from_column_slice(&[1.0, 1.0]);
    assert_eq!(
        InputTransform::new(DVector::from_column_slice(&[0.0, f64::NAN]), ok.clone()),
        Err(Error::NotFinite("input centre"))
    );
    for bad in [0.0, -2.0, f64::NAN, f64::INFINITY] {
        assert_eq!(
            InputTransform::new(ok.clone(), DVector::from_column_slice(&[1.0, bad])),
            Err(Error::NotPositive("input scale")),
            "scale {bad}"
        );
    }
    assert_eq!(
        InputTransform::new(ok.clone(), DVector::from_column_slice(&[1.0, 1.0, 1.0])),
        Err(Error::DimensionMismatch {
            expected: 2,
            found: 3
        })
    );
}

/// `InputTransform`'s fields are public, so a transform can bypass `InputTransform::new`. The
/// network constructors must still refuse a NaN centre, a zero scale or a scale of the wrong
/// length rather than build a network whose every output is NaN, or panic.
#[test]
fn random_rejects_a_nan_centre_given_through_the_public_fields() {
    let nan_centre = InputTransform {
        centre: DVector::from_column_slice(&[0.5, f64::NAN, 2.0]),
        scale: DVector::from_column_slice(&scale()),
    };
    let zero_scale = InputTransform {
        centre: DVector::from_column_slice(&centre()),
        scale: DVector::from_column_slice(&[2.0, 0.0, 1.5]),
    };
    let short_scale = InputTransform {
        centre: DVector::from_column_slice(&centre()),
        scale: DVector::from_column_slice(&[2.0, 0.5]),
    };
    let cases = [
        (nan_centre, Error::NotFinite("input centre")),
        (zero_scale, Error::NotPositive("input scale")),
        (
            short_scale,
            Error::DimensionMismatch {
                expected: DIM,
                found: DIM - 1,
            },
        ),
    ];
    // Collect every failing case before asserting, so one run reports them all.
    let mut wrong = Vec::new();
    for (bad, expected) in cases {
        for nodes in all_nodes() {
            let config = NetworkConfig {
                nodes,
                ..NetworkConfig::default()
            };
            let attempt = std::panic::catch_unwind(|| {
                Network::random(&config, bad.clone(), Dyn(4), &mut rng(1))
            });
            let Ok(got) = attempt else {
                wrong.push(format!(
                    "{nodes:?}, centre {:?}, scale {:?}: expected Err({expected:?}), panicked",
                    bad.centre.as_slice(),
                    bad.scale.as_slice(),
                ));
                continue;
            };
            if got.as_ref().err() != Some(&expected) {
                let found = match got {
                    Ok(mut net) => {
                        net.set_output(&[1.0; 4], 0.0).unwrap();
                        let mut g = [0.0; DIM];
                        let z = net.value_and_gradient(&centre(), &mut g);
                        format!("Ok (a network with z = {z}, ∇z = {g:?} at the centre)")
                    }
                    Err(e) => format!("Err({e:?})"),
                };
                wrong.push(format!(
                    "{nodes:?}, centre {:?}, scale {:?}: expected Err({expected:?}), got {found}",
                    bad.centre.as_slice(),
                    bad.scale.as_slice(),
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn from_raw_and_set_output_reject_bad_input() {
    let nodes = Nodes::Additive(Activation::Softplus);
    let mut w = DMatrix::<f64>::zeros(DIM, HIDDEN);
    w[(1, 2)] = f64::NAN;
    assert_eq!(
        Network::from_raw(nodes, transform(), w, DVector::zeros(HIDDEN)).map(|_| ()),
        Err(Error::NotFinite("network input parameters"))
    );
    assert_eq!(
        Network::from_raw(
            nodes,
            transform(),
            DMatrix::zeros(DIM + 1, HIDDEN),
            DVector::zeros(HIDDEN)
        )
        .map(|_| ()),
        Err(Error::DimensionMismatch {
            expected: DIM,
            found: DIM + 1
        })
    );
    assert_eq!(
        Network::from_raw(
            nodes,
            transform(),
            DMatrix::zeros(DIM, HIDDEN),
            DVector::zeros(HIDDEN - 1)
        )
        .map(|_| ()),
        Err(Error::DimensionMismatch {
            expected: HIDDEN,
            found: HIDDEN - 1
        })
    );

    let mut net = random_network(nodes, 150);
    let before = (net.output().clone(), net.bias());
    assert_eq!(
        net.set_output(&[0.0; HIDDEN - 1], 0.0),
        Err(Error::DimensionMismatch {
            expected: HIDDEN,
            found: HIDDEN - 1
        })
    );
    let mut v = [1.0; HIDDEN];
    v[3] = f64::INFINITY;
    assert_eq!(
        net.set_output(&v, 0.0),
        Err(Error::NotFinite("output weights"))
    );
    assert_eq!(
        net.set_output(&[1.0; HIDDEN], f64::NAN),
        Err(Error::NotFinite("output weights"))
    );
    // A rejected update leaves the network as it was.
    assert_eq!((net.output().clone(), net.bias()), before);
}
