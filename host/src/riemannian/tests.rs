//! Tests of the metrics, the generalized leapfrog and the RMHMC transition.

use nalgebra::{DMatrix, DVector, Dyn, OVector};
use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::random::fill_standard_normal;
use shmc_core::{
    DiagonalMetric, Exact, Hmc, HmcConfig, IdentityMetric, InputTransform, Network, NetworkConfig,
    Potential, State, Steps, leapfrog,
};
use std::sync::OnceLock;

use super::*;
use crate::diagnostics::{Draws, mcse_mean};
use crate::models::banana::{Banana, BananaFisher};
use crate::models::logistic::{LogisticFisher, LogisticRegression};

/// A network on `ℝᵈ` with random output weights: a position-dependent, indefinite Hessian.
fn random_network(d: usize, s: usize, seed: u64) -> Network<Dyn, Dyn> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let transform = InputTransform::identity(Dyn(d));
    let mut net = Network::random(&NetworkConfig::default(), transform, Dyn(s), &mut rng).unwrap();
    let mut v = vec![0.0; s];
    fill_standard_normal(&mut rng, &mut v);
    net.set_output(&v, 0.0).unwrap();
    net
}

fn banana() -> (Banana, BananaFisher) {
    let model = Banana::simulate(Banana::PAPER_N, 3).unwrap();
    let metric = model.fisher();
    (model, metric)
}

/// Checks a metric's contractions against central differences of `G` and `log det G`.
fn check_derivatives(metric: &dyn RiemannianMetric, q: &[f64], u: &[f64]) {
    let d = q.len();
    let h = 1e-5;
    let at = metric.at(q).unwrap();
    let (mut quad, mut trace) = (vec![0.0; d], vec![0.0; d]);
    at.quadratic_derivatives(u, &mut quad);
    at.trace_derivatives(&mut trace);
    let uv = DVector::from_column_slice(u);
    for i in 0..d {
        let shifted = |sign: f64| {
            let mut x = q.to_vec();
            x[i] += sign * h;
            metric.at(&x).unwrap()
        };
        let (plus, minus) = (shifted(1.0), shifted(-1.0));
        let dg = (plus.matrix() - minus.matrix()) / (2.0 * h);
        let numeric_quad = uv.dot(&(&dg * &uv));
        let numeric_trace = (plus.log_det() - minus.log_det()) / (2.0 * h);
        let size = 1.0 + dg.amax() * uv.norm_squared();
        assert!(
            (quad[i] - numeric_quad).abs() < 1e-6 * size,
            "ν{i}: {} vs {numeric_quad}",
            quad[i]
        );
        assert!(
            (trace[i] - numeric_trace).abs() < 1e-6 * (1.0 + numeric_trace.abs()),
            "tr{i}: {} vs {numeric_trace}",
            trace[i]
        );
    }
    // solve and factor_times agree with the matrix.
    let g = at.matrix();
    let mut x = vec![0.0; d];
    at.solve(u, &mut x);
    assert!((&g * DVector::from_column_slice(&x) - &uv).amax() < 1e-10 * (1.0 + g.amax()));
    let mut lz = vec![0.0; d];
    let mut l = DMatrix::zeros(d, d);
    for k in 0..d {
        let mut e = vec![0.0; d];
        e[k] = 1.0;
        at.factor_times(&e, &mut lz);
        l.column_mut(k).copy_from_slice(&lz);
    }
    assert!((&l * l.transpose() - &g).amax() < 1e-10 * g.amax());
    assert!((g.determinant().ln() - at.log_det()).abs() < 1e-8);
}

/// Each metric's `ν` and `tr(G⁻¹∂G)` match differences of its own `G` and `log det G`.
#[test]
fn metric_derivatives_match_finite_differences() {
    let model = LogisticRegression::simulate(300, 4, 1).unwrap();
    let fisher = LogisticFisher::new(&model);
    let q = [0.8, -1.1, 0.4, 2.0];
    let u = [0.3, -0.7, 1.2, 0.5];
    check_derivatives(&fisher, &q, &u);
    let net = random_network(4, 40, 2);
    // α = 1: the SoftAbs map is far from |λ| for these O(1) eigenvalues, so its curvature
    // shows in the derivatives.
    check_derivatives(&NetworkSoftAbs::new(&net, 1.0).unwrap(), &q, &u);
    check_derivatives(&NetworkDiagonalSoftAbs::new(&net, 1.0).unwrap(), &q, &u);
    check_derivatives(&banana().1, &[0.3, -0.8], &[1.0, 0.4]);
}

/// With a constant metric `G = M` the generalized leapfrog is the ordinary leapfrog with mass
/// `M`, step by step.
#[test]
fn constant_metric_gives_the_ordinary_leapfrog() {
    let (model, _) = banana();
    let inv_mass = [0.7, 1.3];
    let metric = ConstantMetric::new(DMatrix::from_diagonal(&DVector::from_iterator(
        2,
        inv_mass.iter().map(|m| 1.0 / m),
    )))
    .unwrap();
    let ordinary = DiagonalMetric::new(OVector::<f64, Dyn>::from_column_slice(&inv_mass)).unwrap();
    let integrator = GeneralizedLeapfrog::new(0.05).unwrap();
    let (q0, p0) = ([0.4, -0.9], [1.1, 0.3]);
    let mut point = Trajectory::start(&model, &metric, &q0).unwrap();
    let mut p = p0.to_vec();
    let (mut q_ref, mut p_ref, mut g_ref) = (q0, p0, [0.0; 2]);
    model.gradient(&q_ref, &mut g_ref);
    for step in 0..40 {
        integrator
            .step(&model, &metric, &mut point, &mut p)
            .unwrap();
        leapfrog(
            &Exact(&model),
            &ordinary,
            0.05,
            1,
            &mut q_ref,
            &mut p_ref,
            &mut g_ref,
        );
        for k in 0..2 {
            assert!(
                (point.position[k] - q_ref[k]).abs() < 1e-12,
                "step {step}: q"
            );
            assert!((p[k] - p_ref[k]).abs() < 1e-12, "step {step}: p");
        }
    }
}

/// A tightly solved integrator: reversibility and volume are then checked to the arithmetic.
fn tight(step_size: f64) -> GeneralizedLeapfrog {
    GeneralizedLeapfrog {
        tolerance: 1e-13,
        ..GeneralizedLeapfrog::new(step_size).unwrap()
    }
}

/// `n` steps from `(q, p)` on the banana with its Fisher metric.
fn flow(metric: &dyn RiemannianMetric, model: &Banana, n: usize, z: [f64; 4]) -> [f64; 4] {
    let integrator = tight(0.05);
    let mut point = Trajectory::start(model, metric, &z[..2]).unwrap();
    let mut p = z[2..].to_vec();
    for _ in 0..n {
        integrator.step(model, metric, &mut point, &mut p).unwrap();
    }
    [point.position[0], point.position[1], p[0], p[1]]
}

/// On the banana's position-dependent Fisher metric the generalized leapfrog retraces its
/// trajectory with the momentum flipped, and its Jacobian determinant is 1.
#[test]
fn generalized_leapfrog_is_reversible_and_volume_preserving() {
    let (model, metric) = banana();
    let z0 = [0.2, 0.9, 1.5, -2.0];
    let z1 = flow(&metric, &model, 10, z0);
    assert!((z1[1] - z0[1]).abs() > 0.1, "the trajectory moves: {z1:?}");
    let back = flow(&metric, &model, 10, [z1[0], z1[1], -z1[2], -z1[3]]);
    for k in 0..2 {
        assert!((back[k] - z0[k]).abs() < 1e-10, "q: {back:?} vs {z0:?}");
        assert!(
            (-back[k + 2] - z0[k + 2]).abs() < 1e-10,
            "p: {back:?} vs {z0:?}"
        );
    }
    let h = 1e-5;
    let mut jacobian = DMatrix::zeros(4, 4);
    for j in 0..4 {
        let (mut plus, mut minus) = (z0, z0);
        plus[j] += h;
        minus[j] -= h;
        let (a, b) = (
            flow(&metric, &model, 3, plus),
            flow(&metric, &model, 3, minus),
        );
        for i in 0..4 {
            jacobian[(i, j)] = (a[i] - b[i]) / (2.0 * h);
        }
    }
    let det = jacobian.determinant();
    assert!((det - 1.0).abs() < 1e-6, "det {det}, Jacobian {jacobian}");
    // The map is far from the identity, so a det of 1 is not trivial.
    assert!((jacobian.clone() - DMatrix::identity(4, 4)).amax() > 0.05);
}

/// A driver loop: `draws` RMHMC transitions after `warmup`, returning the draws and the counts.
#[allow(clippy::too_many_arguments)]
fn run_rmhmc(
    rmhmc: &Rmhmc,
    target: &dyn Potential,
    proposal: &dyn Potential,
    metric: &dyn RiemannianMetric,
    start: &[f64],
    warmup: usize,
    draws: usize,
    seed: u64,
) -> (Vec<Vec<f64>>, RmhmcCounts, usize) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut q = start.to_vec();
    let mut u = target.value(&q);
    let (mut out, mut counts, mut accepted) = (Vec::new(), RmhmcCounts::default(), 0);
    for i in 0..warmup + draws {
        let t = rmhmc
            .transition(target, proposal, metric, &q, u, &mut rng)
            .unwrap();
        counts.add(&t.counts);
        (q, u) = (t.position, t.potential);
        if i >= warmup {
            accepted += usize::from(t.accepted);
            out.push(q.clone());
        }
    }
    (out, counts, accepted)
}

/// The mean and MCSE of coordinate `k` of one chain's draws (a function `f` of the draw).
fn mean_and_mcse(draws: &[Vec<f64>], f: impl Fn(&[f64]) -> f64) -> (f64, f64) {
    let values: Vec<f64> = draws.iter().map(|q| f(q)).collect();
    let chain = Draws::from_chain(&values);
    (
        values.iter().sum::<f64>() / values.len() as f64,
        mcse_mean(&chain),
    )
}

/// RMHMC with the banana's Fisher metric recovers `E β₁`, `E β₂`, `E β₁²`, `E β₂²` computed by
/// quadrature on a fine grid, within 4 MCSE.
#[test]
fn rmhmc_recovers_the_banana() {
    let (model, metric) = banana();
    // Quadrature: the posterior is negligible outside [-5, 5]² (prior sd 1).
    let (n, lo, hi) = (1001usize, -5.0, 5.0);
    let step = (hi - lo) / (n - 1) as f64;
    let (mut mass, mut moments) = (0.0, [0.0; 4]);
    let u_min = model.value(&[0.5, 0.7]);
    for i in 0..n {
        for j in 0..n {
            let q = [lo + i as f64 * step, lo + j as f64 * step];
            let w = (u_min - model.value(&q)).exp();
            mass += w;
            for (m, v) in moments
                .iter_mut()
                .zip([q[0], q[1], q[0] * q[0], q[1] * q[1]])
            {
                *m += w * v;
            }
        }
    }
    let exact = moments.map(|m| m / mass);
    // The Fisher metric turns with β₂, so the implicit solves need small steps (ε = 0.3 already
    // fails a fifth of the steps' solves).
    let rmhmc = Rmhmc::new(GeneralizedLeapfrog::new(0.1).unwrap(), 6).unwrap();
    let (draws, counts, accepted) =
        run_rmhmc(&rmhmc, &model, &model, &metric, &[0.5, 0.7], 200, 6000, 11);
    assert!(accepted > 4500, "acceptance {accepted}/6000, {counts:?}");
    let functions: [fn(&[f64]) -> f64; 4] = [|q| q[0], |q| q[1], |q| q[0] * q[0], |q| q[1] * q[1]];
    for (k, f) in functions.into_iter().enumerate() {
        let (mean, mcse) = mean_and_mcse(&draws, f);
        assert!(
            (mean - exact[k]).abs() < 4.0 * mcse,
            "moment {k}: {mean} vs {}, MCSE {mcse}",
            exact[k]
        );
    }
}

/// A 5-D logistic posterior (N = 500) and the mean and MCSE of each coefficient from a long
/// plain HMC chain (core's exact HMC, 30 000 draws).
/// Computed once and shared by the tests that need it.
fn logistic_reference() -> &'static (LogisticRegression, Vec<(f64, f64)>) {
    static REFERENCE: OnceLock<(LogisticRegression, Vec<(f64, f64)>)> = OnceLock::new();
    REFERENCE.get_or_init(compute_logistic_reference)
}

fn compute_logistic_reference() -> (LogisticRegression, Vec<(f64, f64)>) {
    let model = LogisticRegression::simulate(500, 5, 21).unwrap();
    let d = 5;
    let mut rng = Pcg64::seed_from_u64(22);
    let config = HmcConfig::new(0.3, Steps::Jittered(10)).unwrap();
    let mut hmc = Hmc::new(Dyn(d), config).unwrap();
    let dynamics = Exact(&model);
    let mut state = State::new(OVector::<f64, Dyn>::zeros(d), &dynamics).unwrap();
    let mut draws = Vec::new();
    for i in 0..31_000 {
        hmc.transition(&mut state, &dynamics, &IdentityMetric, &mut rng);
        if i >= 1000 {
            draws.push(state.position.as_slice().to_vec());
        }
    }
    let moments = (0..d).map(|k| mean_and_mcse(&draws, |q| q[k])).collect();
    (model, moments)
}

/// Asserts that each coefficient's mean is within 4 combined MCSE of the reference.
fn assert_matches_reference(what: &str, draws: &[Vec<f64>], reference: &[(f64, f64)]) {
    for (k, &(expected, ref_mcse)) in reference.iter().enumerate() {
        let (mean, mcse) = mean_and_mcse(draws, |q| q[k]);
        let tolerance = 4.0 * (mcse * mcse + ref_mcse * ref_mcse).sqrt();
        assert!(
            (mean - expected).abs() < tolerance,
            "{what} β{k}: {mean} (MCSE {mcse}) vs {expected} (MCSE {ref_mcse})"
        );
    }
}

/// RMHMC with the Fisher metric recovers the posterior means of a 5-D logistic regression.
#[test]
fn rmhmc_recovers_a_logistic_posterior() {
    let (model, reference) = logistic_reference();
    let centre: Vec<f64> = reference.iter().map(|r| r.0).collect();
    let fisher = LogisticFisher::new(model);
    let rmhmc = Rmhmc::new(GeneralizedLeapfrog::new(0.5).unwrap(), 4).unwrap();
    let (draws, counts, accepted) =
        run_rmhmc(&rmhmc, model, model, &fisher, &centre, 100, 3000, 31);
    assert!(
        accepted > 2400,
        "RMHMC acceptance {accepted}/3000, {counts:?}"
    );
    assert_matches_reference("RMHMC", &draws, reference);
}

/// RNS-RMHMC, a network fitted to `U` driving the dynamics through its potential and SoftAbs'd
/// Hessian (the exact `U` in the MH step), recovers the same posterior means.
#[test]
fn rns_rmhmc_recovers_a_logistic_posterior() {
    let (model, reference) = logistic_reference();
    let d = 5;
    let centre: Vec<f64> = reference.iter().map(|r| r.0).collect();
    let rmhmc = Rmhmc::new(GeneralizedLeapfrog::new(0.5).unwrap(), 4).unwrap();

    // The surrogate: 150 softplus units on inputs scaled by 3, output weights fitted by least
    // squares to U at 1500 points spread around the posterior.
    let mut rng = Pcg64::seed_from_u64(41);
    let transform = InputTransform::new(
        OVector::<f64, Dyn>::from_column_slice(&centre),
        OVector::<f64, Dyn>::from_element(d, 3.0),
    )
    .unwrap();
    let s = 150;
    let mut net = Network::random(&NetworkConfig::default(), transform, Dyn(s), &mut rng).unwrap();
    let m = 1500;
    let mut design = DMatrix::zeros(m, s + 1);
    let mut targets = DVector::zeros(m);
    let mut features = vec![0.0; s];
    for i in 0..m {
        let mut q = vec![0.0; d];
        fill_standard_normal(&mut rng, &mut q);
        q.iter_mut()
            .zip(&centre)
            .for_each(|(x, c)| *x = c + 2.0 * *x);
        net.features(&q, &mut features);
        for (j, f) in features.iter().enumerate() {
            design[(i, j)] = *f;
        }
        design[(i, s)] = 1.0;
        targets[i] = model.value(&q);
    }
    let mut normal = design.tr_mul(&design);
    for j in 0..=s {
        normal[(j, j)] += 1e-8;
    }
    let weights = normal.cholesky().unwrap().solve(&design.tr_mul(&targets));
    net.set_output(&weights.as_slice()[..s], weights[s])
        .unwrap();
    let surrogate_metric = NetworkSoftAbs::new(&net, 10.0).unwrap();
    let (draws, counts, accepted) = run_rmhmc(
        &rmhmc,
        &model,
        &net,
        &surrogate_metric,
        &centre,
        100,
        3000,
        32,
    );
    assert!(
        accepted > 1500,
        "RNS-RMHMC acceptance {accepted}/3000, {counts:?}"
    );
    assert_matches_reference("RNS-RMHMC", &draws, reference);
}

/// `U = ½|q|²` in two dimensions.
struct StandardNormal;

impl Potential for StandardNormal {
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

/// The identity metric, not positive definite (a failed factorization) outside `|q|∞ ≤ 1.5`.
struct Patchy(ConstantMetric);

impl RiemannianMetric for Patchy {
    fn dim(&self) -> usize {
        2
    }
    fn at(&self, q: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        if q.iter().all(|x| x.abs() <= 1.5) {
            self.0.at(q)
        } else {
            None
        }
    }
}

/// Where the metric is not positive definite the proposal is rejected, counted and named, and
/// the chain never leaves the region; a start outside it is an error, not a panic.
#[test]
fn a_metric_that_is_not_positive_definite_is_a_counted_rejection() {
    let metric = Patchy(ConstantMetric::new(DMatrix::identity(2, 2)).unwrap());
    let rmhmc = Rmhmc::new(GeneralizedLeapfrog::new(0.8).unwrap(), 5).unwrap();
    let mut rng = Pcg64::seed_from_u64(5);
    let (mut q, mut u) = (vec![0.0, 0.0], 0.0);
    let (mut named, mut total) = (0u64, RmhmcCounts::default());
    for _ in 0..500 {
        let t = rmhmc
            .transition(&StandardNormal, &StandardNormal, &metric, &q, u, &mut rng)
            .unwrap();
        total.add(&t.counts);
        if t.divergence == Some(Divergence::Step(StepFailure::NotPositiveDefinite)) {
            named += 1;
            assert!(!t.accepted && t.position == q);
        }
        (q, u) = (t.position, t.potential);
        assert!(q.iter().all(|x| x.is_finite() && x.abs() <= 1.5) && u.is_finite());
    }
    assert!(named > 50, "{named} rejections, {total:?}");
    assert_eq!(total.not_positive_definite, named);
    let outside = rmhmc.transition(
        &StandardNormal,
        &StandardNormal,
        &metric,
        &[2.0, 0.0],
        2.0,
        &mut rng,
    );
    assert!(outside.is_err());
}

/// A fixed-point solve that cannot converge within its iteration limit ends the trajectory as
/// a counted, named rejection.
#[test]
fn a_fixed_point_solve_that_does_not_converge_is_a_counted_rejection() {
    let (model, metric) = banana();
    let integrator = GeneralizedLeapfrog {
        max_iterations: 2,
        ..GeneralizedLeapfrog::new(0.1).unwrap()
    };
    let rmhmc = Rmhmc::new(integrator, 3).unwrap();
    let mut rng = Pcg64::seed_from_u64(8);
    let q = [0.5, 0.7];
    let t = rmhmc
        .transition(&model, &model, &metric, &q, model.value(&q), &mut rng)
        .unwrap();
    assert_eq!(
        t.divergence,
        Some(Divergence::Step(StepFailure::NotConverged))
    );
    assert_eq!(t.counts.not_converged, 1);
    assert!(!t.accepted && t.position == q);
}

/// A network whose Hessian is positive definite everywhere (softplus units, positive output
/// weights), so that SoftAbs with a large `α` leaves it unchanged.
fn convex_network(d: usize, s: usize, seed: u64) -> Network<Dyn, Dyn> {
    let mut net = random_network(d, s, seed);
    let v: Vec<f64> = net.output().iter().map(|v| v.abs()).collect();
    net.set_output(&v, 0.0).unwrap();
    net
}

/// Asserts that two metrics agree at `q`: matrix, log-determinant and both contractions.
fn assert_same_metric(what: &str, a: &dyn RiemannianMetric, b: &dyn RiemannianMetric, q: &[f64]) {
    let d = q.len();
    let u: Vec<f64> = (0..d).map(|k| 0.7 - 0.3 * k as f64).collect();
    let (a, b) = (a.at(q).unwrap(), b.at(q).unwrap());
    let (ga, gb) = (a.matrix(), b.matrix());
    assert!((&ga - &gb).amax() < 1e-10 * gb.amax(), "{what}: G");
    assert!(
        (a.log_det() - b.log_det()).abs() < 1e-10 * (1.0 + b.log_det().abs()),
        "{what}"
    );
    let (mut xa, mut xb) = (vec![0.0; d], vec![0.0; d]);
    a.trace_derivatives(&mut xa);
    b.trace_derivatives(&mut xb);
    let size = xb.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (x, y) in xa.iter().zip(&xb) {
        assert!((x - y).abs() < 1e-9 * size, "{what}: trace {x} vs {y}");
    }
    a.quadratic_derivatives(&u, &mut xa);
    b.quadratic_derivatives(&u, &mut xb);
    let size = xb.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (x, y) in xa.iter().zip(&xb) {
        assert!((x - y).abs() < 1e-9 * size, "{what}: ν {x} vs {y}");
    }
}

/// The network metrics' rank-one (additive units) computations agree with the network's general
/// O(s·d²) loops: the full metric where SoftAbs leaves the Hessian unchanged (Cholesky, O(s·d)
/// contractions) and where it does not (eigen-decomposition), and the diagonal metric.
#[test]
fn rank_one_metrics_match_the_general_loops() {
    let q = [0.3, -0.5, 0.8, 0.1, -1.2];
    let convex = convex_network(5, 130, 4);
    let indefinite = random_network(5, 130, 5);
    for (what, net, alpha) in [("saturated", &convex, 1e4), ("softabs", &indefinite, 1.0)] {
        assert_same_metric(
            what,
            &NetworkSoftAbs::new(net, alpha).unwrap(),
            &NetworkSoftAbs::general(net, alpha).unwrap(),
            &q,
        );
    }
    for net in [&convex, &indefinite] {
        assert_same_metric(
            "diagonal",
            &NetworkDiagonalSoftAbs::new(net, 1.0).unwrap(),
            &NetworkDiagonalSoftAbs::general(net, 1.0).unwrap(),
            &q,
        );
    }
    // Where the Hessian is its own metric, the product without a factorization is `G x`.
    let metric = NetworkSoftAbs::new(&convex, 1e4).unwrap();
    let x = [1.0, -2.0, 0.5, 0.0, 3.0];
    let mut gx = [0.0; 5];
    assert!(metric.product(&q, &x, &mut gx));
    let reference = metric.at(&q).unwrap().matrix() * DVector::from_column_slice(&x);
    assert!((DVector::from_column_slice(&gx) - &reference).amax() < 1e-10 * reference.amax());
    // The derivative checks of `metric_derivatives_match_finite_differences` also hold there.
    check_derivatives(&metric, &q, &[0.3, -0.7, 1.2, 0.5, 0.1]);
}

/// A shifted network metric is the metric of `½ shift ‖q‖² + z(q)` (an anchored surrogate's):
/// SoftAbs of the network's Hessian plus `shift·I`, whole or its diagonal, with the network's
/// own derivatives (the quadratic's are zero), on the rank-one path as on the general one.
#[test]
fn shifted_network_metrics_add_the_quadratics_curvature() {
    let (d, alpha, shift) = (4, 1.0, 1.5);
    let net = random_network(d, 90, 8);
    let q = [0.4, -0.2, 1.1, -0.6];
    let u = [0.5, 1.5, -0.8, 0.3];
    let mut h = DMatrix::zeros(d, d);
    net.hessian(&q, h.as_mut_slice());
    for k in 0..d {
        h[(k, k)] += shift;
    }
    // SoftAbs, written out: x coth(αx).
    let softabs = |x: f64| x / (alpha * x).tanh();

    let diagonal = NetworkDiagonalSoftAbs::new(&net, alpha)
        .unwrap()
        .shifted(shift)
        .unwrap();
    let matrix = diagonal.at(&q).unwrap().matrix();
    for j in 0..d {
        let g = softabs(h[(j, j)]);
        assert!((matrix[(j, j)] - g).abs() < 1e-12 * g, "G{j}{j}");
    }
    check_derivatives(&diagonal, &q, &u);
    let general = NetworkDiagonalSoftAbs::general(&net, alpha).unwrap();
    assert_same_metric(
        "shifted diagonal",
        &diagonal,
        &general.shifted(shift).unwrap(),
        &q,
    );

    let dense = NetworkSoftAbs::new(&net, alpha)
        .unwrap()
        .shifted(shift)
        .unwrap();
    let eigen = h.clone().symmetric_eigen();
    let expected = &eigen.eigenvectors
        * DMatrix::from_diagonal(&eigen.eigenvalues.map(softabs))
        * eigen.eigenvectors.transpose();
    let matrix = dense.at(&q).unwrap().matrix();
    assert!(
        (&matrix - &expected).amax() < 1e-10 * expected.amax(),
        "dense G"
    );
    check_derivatives(&dense, &q, &u);
    let general = NetworkSoftAbs::general(&net, alpha).unwrap();
    assert_same_metric(
        "shifted dense",
        &dense,
        &general.shifted(shift).unwrap(),
        &q,
    );
    // The product without a factorization is the shifted Hessian's.
    let x = [1.0, -2.0, 0.5, 3.0];
    let mut gx = [0.0; 4];
    assert!(dense.product(&q, &x, &mut gx));
    let reference = &h * DVector::from_column_slice(&x);
    assert!((DVector::from_column_slice(&gx) - &reference).amax() < 1e-10 * reference.amax());
    assert!(
        NetworkSoftAbs::new(&net, alpha)
            .unwrap()
            .shifted(f64::NAN)
            .is_err()
    );
}

/// The position solve's small inverse agrees with nalgebra's to 10⁻¹² relative, whatever
/// rows it pivots, and refuses a singular matrix.
#[test]
fn the_small_inverse_matches_nalgebras() {
    let mut rng = Pcg64::seed_from_u64(11);
    for d in [1, 2, 5, 20, 33] {
        let mut entries = vec![0.0; d * d];
        fill_standard_normal(&mut rng, &mut entries);
        // A zero in the top-left corner forces a pivot at the first step.
        entries[0] = 0.0;
        let a = DMatrix::from_vec(d, d, entries);
        if d == 1 {
            assert!(integrator::inverse(a).is_none());
            continue;
        }
        let expected = a.clone().try_inverse().unwrap();
        let ours = integrator::inverse(a.clone()).unwrap();
        assert!(
            (&ours - &expected).amax() < 1e-12 * expected.amax(),
            "d = {d}: {}",
            (&ours - &expected).amax()
        );
        assert!((&a * &ours - DMatrix::identity(d, d)).amax() < 1e-10);
    }
    let mut singular = DMatrix::from_fn(4, 4, |i, j| 1.0 + (i * j) as f64);
    singular.column_mut(2).fill(0.0);
    assert!(integrator::inverse(singular).is_none());
}

/// The diagonal metric is the full path's diagonal: `G = diag(g(∂ⱼ²z))` from the network's
/// Hessian, its log-determinant `Σ log g`, and its derivatives `g'(∂ⱼ²z) ∂ₖ∂ⱼ²z` from the
/// diagonals of the network's third derivatives `∂ₖ∇²z`.
#[test]
fn the_diagonal_metric_is_the_full_paths_diagonal() {
    let (d, alpha) = (4, 1.0);
    let net = random_network(d, 90, 6);
    let q = [0.4, -0.2, 1.1, -0.6];
    let u = [0.5, 1.5, -0.8, 0.3];
    let mut h = vec![0.0; d * d];
    net.hessian(&q, &mut h);
    let (g, slope): (Vec<f64>, Vec<f64>) = (0..d)
        .map(|j| {
            let x = h[j * d + j];
            // SoftAbs, written out: x coth(αx) and its derivative.
            let t = (alpha * x).tanh();
            let sinh = (alpha * x).sinh();
            (x / t, 1.0 / t - alpha * x / (sinh * sinh))
        })
        .unzip();
    let metric = NetworkDiagonalSoftAbs::new(&net, alpha).unwrap();
    let at = metric.at(&q).unwrap();
    let matrix = at.matrix();
    for j in 0..d {
        assert!((matrix[(j, j)] - g[j]).abs() < 1e-12 * g[j]);
    }
    assert!(
        (matrix.sum() - matrix.trace()).abs() == 0.0,
        "off-diagonal entries"
    );
    let log_det: f64 = g.iter().map(|x| x.ln()).sum();
    assert!((at.log_det() - log_det).abs() < 1e-12 * (1.0 + log_det.abs()));
    let (mut trace, mut quad) = (vec![0.0; d], vec![0.0; d]);
    at.trace_derivatives(&mut trace);
    at.quadratic_derivatives(&u, &mut quad);
    for k in 0..d {
        let mut e = vec![0.0; d];
        e[k] = 1.0;
        let mut dh = vec![0.0; d * d];
        net.hessian_derivative(&q, &e, &mut dh);
        let expected_trace: f64 = (0..d).map(|j| slope[j] / g[j] * dh[j * d + j]).sum();
        let expected_quad: f64 = (0..d).map(|j| slope[j] * dh[j * d + j] * u[j] * u[j]).sum();
        assert!((trace[k] - expected_trace).abs() < 1e-9 * (1.0 + expected_trace.abs()));
        assert!((quad[k] - expected_quad).abs() < 1e-9 * (1.0 + expected_quad.abs()));
    }
}

/// The diagonal metric's velocity derivative, `∂(G⁻¹p)/∂q`, matches central differences of
/// `G(q)⁻¹p`; the logistic Fisher metric's product matches `G x`.
#[test]
fn velocity_derivative_and_products_match_the_metric() {
    let (d, h) = (4, 1e-6);
    let net = random_network(d, 90, 7);
    let metric = NetworkDiagonalSoftAbs::new(&net, 1.0).unwrap();
    let q = [0.2, 0.9, -0.4, 0.6];
    let p = [1.0, -0.5, 2.0, 0.7];
    let velocity = |x: &[f64]| {
        let mut v = vec![0.0; d];
        metric.at(x).unwrap().solve(&p, &mut v);
        v
    };
    let v = velocity(&q);
    let jacobian = metric.at(&q).unwrap().velocity_derivative(&v).unwrap();
    for k in 0..d {
        let (mut plus, mut minus) = (q.to_vec(), q.to_vec());
        plus[k] += h;
        minus[k] -= h;
        let (a, b) = (velocity(&plus), velocity(&minus));
        for j in 0..d {
            let numeric = (a[j] - b[j]) / (2.0 * h);
            assert!(
                (jacobian[(j, k)] - numeric).abs() < 1e-6 * (1.0 + numeric.abs()),
                "∂v{j}/∂q{k}: {} vs {numeric}",
                jacobian[(j, k)]
            );
        }
    }
    let model = LogisticRegression::simulate(300, 4, 1).unwrap();
    let fisher = LogisticFisher::new(&model);
    let x = [0.3, -1.0, 2.0, 0.25];
    let mut gx = [0.0; 4];
    assert!(fisher.product(&q, &x, &mut gx));
    let reference = fisher.at(&q).unwrap().matrix() * DVector::from_column_slice(&x);
    assert!((DVector::from_column_slice(&gx) - &reference).amax() < 1e-10 * reference.amax());
}

/// A metric with neither a product nor a velocity derivative: position solves by evaluations
/// alone, from the explicit Euler guess.
struct Plain<'a>(&'a dyn RiemannianMetric);

/// [`Plain`]'s metric at a point: everything but the velocity derivative.
struct PlainAt<'a>(Box<dyn MetricAt + 'a>);

impl MetricAt for PlainAt<'_> {
    fn matrix(&self) -> DMatrix<f64> {
        self.0.matrix()
    }
    fn solve(&self, p: &[f64], out: &mut [f64]) {
        self.0.solve(p, out);
    }
    fn factor_times(&self, z: &[f64], out: &mut [f64]) {
        self.0.factor_times(z, out);
    }
    fn log_det(&self) -> f64 {
        self.0.log_det()
    }
    fn trace_derivatives(&self, out: &mut [f64]) {
        self.0.trace_derivatives(out);
    }
    fn quadratic_derivatives(&self, u: &[f64], out: &mut [f64]) {
        self.0.quadratic_derivatives(u, out);
    }
}

impl RiemannianMetric for Plain<'_> {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn at(&self, q: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        Some(Box::new(PlainAt(self.0.at(q)?)))
    }
}

/// `steps` generalized leapfrog steps from `(q, p)`: the end and the metric evaluations made.
fn integrate(
    potential: &dyn Potential,
    metric: &dyn RiemannianMetric,
    step_size: f64,
    steps: usize,
    q: &[f64],
    p: &[f64],
) -> (Vec<f64>, Vec<f64>, u64) {
    let work = MetricWork::default();
    let timed = Timed {
        metric,
        work: &work,
    };
    let integrator = GeneralizedLeapfrog::new(step_size).unwrap();
    let mut point = Trajectory::start(potential, &timed, q).unwrap();
    let mut p = p.to_vec();
    for _ in 0..steps {
        integrator
            .step(potential, &timed, &mut point, &mut p)
            .unwrap();
    }
    (point.position, p, work.evaluations())
}

/// A named potential and metric with a momentum and step size to integrate them from.
type Case<'a> = (
    &'a str,
    &'a dyn Potential,
    &'a dyn RiemannianMetric,
    [f64; 4],
    f64,
);

/// The position solve's product phase (logistic Fisher, the network's Hessian) and its Newton
/// start (the network's diagonal) reach the solution the solve finds without them, each step
/// checked for reversibility, with fewer metric evaluations.
#[test]
fn position_solves_with_products_and_derivatives_match_those_without() {
    let model = LogisticRegression::simulate(400, 4, 3).unwrap();
    let fisher = LogisticFisher::new(&model);
    let convex = convex_network(4, 120, 8);
    let hessian = NetworkSoftAbs::new(&convex, 1e4).unwrap();
    let indefinite = random_network(4, 120, 9);
    let diagonal = NetworkDiagonalSoftAbs::new(&indefinite, 1.0).unwrap();
    let q = [0.2, -0.3, 0.5, 0.1];
    let cases: [Case; 3] = [
        ("Fisher", &model, &fisher, [0.9, -0.6, 1.2, 0.3], 0.3),
        ("Hessian", &convex, &hessian, [1.0, -0.5, 0.8, 0.2], 0.3),
        (
            "diagonal",
            &indefinite,
            &diagonal,
            [1.0, -0.5, 0.8, 0.2],
            0.3,
        ),
    ];
    for (what, potential, metric, p, eps) in cases {
        let (q_fast, p_fast, fast) = integrate(potential, metric, eps, 5, &q, &p);
        let (q_plain, p_plain, plain) = integrate(potential, &Plain(metric), eps, 5, &q, &p);
        // Each step was checked for reversibility (a failure panics in `integrate`).
        let moved = q_fast.iter().zip(&q).any(|(a, b)| (a - b).abs() > 1e-2);
        assert!(moved, "{what}: the trajectory moves");
        for (a, b) in q_fast
            .iter()
            .zip(&q_plain)
            .chain(p_fast.iter().zip(&p_plain))
        {
            assert!((a - b).abs() < 1e-7 * (1.0 + b.abs()), "{what}: {a} vs {b}");
        }
        assert!(fast < plain, "{what}: {fast} evaluations, plain {plain}");
    }
}

/// A posterior and its metric rescaled, `θ = c q`: `U_c(θ) = U(θ/c)`, `G_c(θ) = G(θ/c)/c²`.
struct Rescaled<'a> {
    potential: &'a (dyn Potential + Sync),
    metric: &'a dyn RiemannianMetric,
    c: f64,
}

impl Rescaled<'_> {
    fn unscaled(&self, theta: &[f64]) -> Vec<f64> {
        theta.iter().map(|t| t / self.c).collect()
    }
}

impl Potential for Rescaled<'_> {
    fn dim(&self) -> usize {
        self.potential.dim()
    }
    fn value(&self, theta: &[f64]) -> f64 {
        self.potential.value(&self.unscaled(theta))
    }
    fn value_and_gradient(&self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let u = self
            .potential
            .value_and_gradient(&self.unscaled(theta), grad);
        grad.iter_mut().for_each(|g| *g /= self.c);
        u
    }
}

/// [`Rescaled`]'s metric at a point.
struct RescaledAt<'a> {
    at: Box<dyn MetricAt + 'a>,
    c: f64,
}

impl MetricAt for RescaledAt<'_> {
    fn matrix(&self) -> DMatrix<f64> {
        self.at.matrix() / (self.c * self.c)
    }
    fn solve(&self, p: &[f64], out: &mut [f64]) {
        self.at.solve(p, out);
        out.iter_mut().for_each(|x| *x *= self.c * self.c);
    }
    fn factor_times(&self, z: &[f64], out: &mut [f64]) {
        self.at.factor_times(z, out);
        out.iter_mut().for_each(|x| *x /= self.c);
    }
    fn log_det(&self) -> f64 {
        self.at.log_det() - 2.0 * self.at.matrix().nrows() as f64 * self.c.ln()
    }
    fn trace_derivatives(&self, out: &mut [f64]) {
        self.at.trace_derivatives(out);
        out.iter_mut().for_each(|x| *x /= self.c);
    }
    fn quadratic_derivatives(&self, u: &[f64], out: &mut [f64]) {
        self.at.quadratic_derivatives(u, out);
        out.iter_mut().for_each(|x| *x /= self.c.powi(3));
    }
}

impl RiemannianMetric for Rescaled<'_> {
    fn dim(&self) -> usize {
        self.metric.dim()
    }
    fn at(&self, theta: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        let at = self.metric.at(&self.unscaled(theta))?;
        Some(Box::new(RescaledAt { at, c: self.c }))
    }
}

/// The fixed-point and reversibility tolerances are in the metric's units, so RMHMC on the
/// banana shrunk to the scale of Bank Marketing's posterior (sd 0.006: `c = 0.003`) or blown
/// up (`c = 300`) makes the same moves, scaled, with as few failed steps. With one absolute
/// tolerance for positions and momenta the shrunk banana's momenta (of scale 1/c) could not
/// meet the reversibility check.
#[test]
fn tolerances_are_in_the_metrics_units() {
    let (model, metric) = banana();
    let rmhmc = Rmhmc::new(GeneralizedLeapfrog::new(0.1).unwrap(), 6).unwrap();
    let start = [0.5, 0.7];
    let (reference, counts, accepted) =
        run_rmhmc(&rmhmc, &model, &model, &metric, &start, 0, 300, 12);
    for c in [0.003, 300.0] {
        let scaled = Rescaled {
            potential: &model,
            metric: &metric,
            c,
        };
        let theta: Vec<f64> = start.iter().map(|x| c * x).collect();
        let (draws, scaled_counts, scaled_accepted) =
            run_rmhmc(&rmhmc, &scaled, &scaled, &scaled, &theta, 0, 300, 12);
        assert!(
            scaled_counts.not_reversible <= counts.not_reversible + 1
                && scaled_counts.not_converged <= counts.not_converged + 1,
            "c = {c}: {scaled_counts:?} against {counts:?}"
        );
        assert!(scaled_accepted.abs_diff(accepted) <= 3, "c = {c}");
        // The same chain, scaled (rounding may part them after a near-tie; the first 100 agree).
        for (a, b) in draws.iter().zip(&reference).take(100) {
            for k in 0..2 {
                assert!((a[k] / c - b[k]).abs() < 1e-6, "c = {c}: {a:?} vs {b:?}");
            }
        }
    }
}

/// With the proposal's own Hamiltonian asked for, a proposal equal to the target (up to a
/// constant) reports the exact acceptance, and a different one its own.
#[test]
fn the_proposal_statistic_is_the_acceptance_under_the_proposals_hamiltonian() {
    struct Shifted<'a>(&'a dyn Potential, f64);
    impl Potential for Shifted<'_> {
        fn dim(&self) -> usize {
            self.0.dim()
        }
        fn value(&self, q: &[f64]) -> f64 {
            self.0.value(q) + self.1 * q[0]
        }
        fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
            let u = self.0.value_and_gradient(q, grad);
            grad[0] += self.1;
            u + self.1 * q[0]
        }
    }
    let (model, metric) = banana();
    let mut rmhmc = Rmhmc::new(GeneralizedLeapfrog::new(0.3).unwrap(), 4).unwrap();
    let q = [0.5, 0.7];
    let u = model.value(&q);
    let run = |rmhmc: &Rmhmc, proposal: &dyn Potential, seed| {
        let mut rng = Pcg64::seed_from_u64(seed);
        rmhmc
            .transition(&model, proposal, &metric, &q, u, &mut rng)
            .unwrap()
    };
    assert!(run(&rmhmc, &model, 1).proposal_accept_stat.is_nan());
    rmhmc.proposal_statistic = true;
    let mut differed = false;
    for seed in 0..20 {
        let same = run(&rmhmc, &model, seed);
        let exact = match same.divergence {
            Some(Divergence::Step(_)) => 0.0,
            _ => (-same.energy_error).exp().min(1.0),
        };
        assert!(
            (same.proposal_accept_stat - exact).abs() < 1e-12,
            "seed {seed}"
        );
        // A tilted proposal moves elsewhere; its own statistic is not the exact acceptance.
        let tilted = run(&rmhmc, &Shifted(&model, 3.0), seed);
        assert!((0.0..=1.0).contains(&tilted.proposal_accept_stat));
        let exact = (-tilted.energy_error).exp().min(1.0);
        differed |= (tilted.proposal_accept_stat - exact).abs() > 1e-3;
    }
    assert!(differed);
}
