//! The exactness test of `shmc-core`: HMC whose leapfrog is driven by a *wrong* proposal
//! potential, but whose Metropolis–Hastings step uses the exact one, still samples the exact
//! posterior. On a correlated 2-D Gaussian both the exact sampler and the deliberately wrong
//! surrogate sampler must recover the mean and all three covariance entries within 4 Monte Carlo
//! standard errors, with an identity and with a diagonal mass matrix. A companion test shows the
//! wrong proposal is wrong enough that these checks *could* fail: a chain that followed it
//! without the exact correction misses the variance by dozens of standard errors.
//!
//! The last tests cover broken potentials: NaN or infinite values and NaN gradients beyond a
//! boundary, and absurd finite energy errors, must give rejected transitions flagged divergent,
//! leave the chain state untouched, and never panic.
//!
//! Monte Carlo standard errors are estimated honestly, by batch means (50 batches of 2000
//! transitions; the batches are far longer than the chains' autocorrelation times of a few
//! transitions, so the batch means are nearly independent). For a covariance entry the
//! quantity averaged is the product of the centred draws, so its MCSE accounts for the
//! autocorrelation of those products. With 5 quantities per chain and a two-sided 4-MCSE window
//! (`P(|t₄₉| > 4) ≈ 2·10⁻⁴`) a correct sampler fails by chance with probability about 10⁻³ per
//! chain; the seeds are fixed, so the outcome is reproducible.

use nalgebra::Vector2;
use rand_core::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::random::fill_standard_normal;
use shmc_core::{
    Const, DiagonalMetric, Dynamics, Exact, Hmc, HmcConfig, IdentityMetric, Metric, Potential,
    State, Steps, Surrogate, Transition, leapfrog,
};

/// Transitions per chain: long enough that the MCSE of a variance is about 0.01.
const TRANSITIONS: usize = 100_000;
/// Batches for the batch-means MCSE.
const BATCHES: usize = 50;
/// The tolerance, in Monte Carlo standard errors.
const Z: f64 = 4.0;
/// The proposal is the target Gaussian with every coordinate scaled by this about the mean, so
/// its covariance is `1.3² = 1.69` times the target's.
const WRONG_SCALE: f64 = 1.3;
/// The target's mean: non-zero, so that a sign or centring error shows.
const MEAN: [f64; 2] = [1.0, -0.5];
/// The target's covariance: unit variances, correlation 0.8 (eigenvalues 1.8 and 0.2).
const COV: [[f64; 2]; 2] = [[1.0, 0.8], [0.8, 1.0]];

/// Step size and trajectory length. The leapfrog is stable for `ε < 2√0.2 ≈ 0.89`; ε = 0.3 with
/// `L ~ U{1..10}` gives the exact sampler an acceptance of about 0.95 and mixes in a few
/// transitions.
fn config() -> HmcConfig {
    HmcConfig::new(0.3, Steps::Jittered(10)).unwrap()
}

fn rng(seed: u64) -> Pcg64 {
    Pcg64::seed_from_u64(seed)
}

/// `U(q) = ½ (q − μ)ᵀ Σ⁻¹ (q − μ)`.
#[derive(Clone, Copy, Debug)]
struct Gaussian {
    mean: [f64; 2],
    precision: [[f64; 2]; 2],
}

impl Gaussian {
    fn new(mean: [f64; 2], cov: [[f64; 2]; 2]) -> Self {
        let det = cov[0][0] * cov[1][1] - cov[0][1] * cov[1][0];
        assert!(det > 0.0);
        Self {
            mean,
            precision: [
                [cov[1][1] / det, -cov[0][1] / det],
                [-cov[1][0] / det, cov[0][0] / det],
            ],
        }
    }

    /// The same Gaussian with every coordinate scaled by `c` about the mean.
    fn scaled(&self, c: f64) -> Self {
        let p = self.precision;
        let k = 1.0 / (c * c);
        Self {
            mean: self.mean,
            precision: [[k * p[0][0], k * p[0][1]], [k * p[1][0], k * p[1][1]]],
        }
    }
}

impl Potential for Gaussian {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        let x = [q[0] - self.mean[0], q[1] - self.mean[1]];
        let p = &self.precision;
        0.5 * (p[0][0] * x[0] * x[0] + 2.0 * p[0][1] * x[0] * x[1] + p[1][1] * x[1] * x[1])
    }
    fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
        let x = [q[0] - self.mean[0], q[1] - self.mean[1]];
        let p = &self.precision;
        g[0] = p[0][0] * x[0] + p[0][1] * x[1];
        g[1] = p[1][0] * x[0] + p[1][1] * x[1];
        self.value(q)
    }
}

/// The target covariance after scaling coordinate `k` by `d[k]`: `DΣD`.
fn scaled_cov(d: [f64; 2]) -> [[f64; 2]; 2] {
    [
        [d[0] * d[0] * COV[0][0], d[0] * d[1] * COV[0][1]],
        [d[1] * d[0] * COV[1][0], d[1] * d[1] * COV[1][1]],
    ]
}

/// An estimate and its Monte Carlo standard error.
#[derive(Clone, Copy, Debug)]
struct Estimate {
    value: f64,
    mcse: f64,
}

/// The mean of `x` and its batch-means MCSE: the standard deviation of the batch means over
/// `√(batches)`.
fn batch_means(x: &[f64], batches: usize) -> Estimate {
    let len = x.len() / batches;
    let means: Vec<f64> = x
        .chunks_exact(len)
        .take(batches)
        .map(|b| b.iter().sum::<f64>() / len as f64)
        .collect();
    let value = means.iter().sum::<f64>() / batches as f64;
    let var = means.iter().map(|m| (m - value).powi(2)).sum::<f64>() / (batches - 1) as f64;
    Estimate {
        value,
        mcse: (var / batches as f64).sqrt(),
    }
}

/// The two means and the three covariance entries `(0,0)`, `(0,1)`, `(1,1)`, each with its
/// batch-means MCSE. Covariance entries average the products of the draws centred at the
/// overall sample mean (centring costs O(1/n), far below the MCSE).
fn moments(draws: &[[f64; 2]]) -> ([Estimate; 2], [Estimate; 3]) {
    let coord = |k: usize| draws.iter().map(|q| q[k]).collect::<Vec<_>>();
    let means = [
        batch_means(&coord(0), BATCHES),
        batch_means(&coord(1), BATCHES),
    ];
    let m = [means[0].value, means[1].value];
    let product = |i: usize, j: usize| {
        let p: Vec<f64> = draws
            .iter()
            .map(|q| (q[i] - m[i]) * (q[j] - m[j]))
            .collect();
        batch_means(&p, BATCHES)
    };
    (means, [product(0, 0), product(0, 1), product(1, 1)])
}

/// What a chain produced.
struct Run {
    draws: Vec<[f64; 2]>,
    acceptance: f64,
    divergent: usize,
}

/// Runs `TRANSITIONS` HMC transitions from the target mean and records every state.
fn run<Dy: Dynamics, M: Metric>(dynamics: &Dy, metric: &M, seed: u64) -> Run {
    let mut r = rng(seed);
    let mut hmc = Hmc::new(Const::<2>, config()).unwrap();
    let mut state = State::new(Vector2::from(MEAN), dynamics).unwrap();
    let mut draws = Vec::with_capacity(TRANSITIONS);
    let (mut accepted, mut divergent) = (0usize, 0usize);
    for _ in 0..TRANSITIONS {
        let t = hmc.transition(&mut state, dynamics, metric, &mut r);
        accepted += t.accepted as usize;
        divergent += t.divergent as usize;
        draws.push([state.position[0], state.position[1]]);
    }
    Run {
        draws,
        acceptance: accepted as f64 / TRANSITIONS as f64,
        divergent,
    }
}

/// Asserts that the draws recover `mean` and `cov` within `Z` MCSE, and that the MCSEs are small
/// (at most 0.02 of the coordinates' scale, 4–6 times the i.i.d. error at this length), so
/// that a chain which barely moves cannot pass on the strength of a huge error bar.
fn assert_recovers(label: &str, run: &Run, mean: [f64; 2], cov: [[f64; 2]; 2]) {
    let (means, covs) = moments(&run.draws);
    let truth_cov = [cov[0][0], cov[0][1], cov[1][1]];
    let names = ["Σ₀₀", "Σ₀₁", "Σ₁₁"];
    let scale = |i: usize, j: usize| (cov[i][i] * cov[j][j]).sqrt();
    let cov_scales = [scale(0, 0), scale(0, 1), scale(1, 1)];
    let mut report = format!("{label}: acceptance {:.3}\n", run.acceptance);
    let mut ok = true;
    for k in 0..2 {
        let e = means[k];
        let z = (e.value - mean[k]) / e.mcse;
        report += &format!(
            "  mean[{k}] {:.4} ± {:.4} (truth {:.4}, z = {z:.2})\n",
            e.value, e.mcse, mean[k]
        );
        ok &= z.abs() < Z && e.mcse < 0.02 * cov[k][k].sqrt();
    }
    for k in 0..3 {
        let e = covs[k];
        let z = (e.value - truth_cov[k]) / e.mcse;
        report += &format!(
            "  {} {:.4} ± {:.4} (truth {:.4}, z = {z:.2})\n",
            names[k], e.value, e.mcse, truth_cov[k]
        );
        ok &= z.abs() < Z && e.mcse < 0.02 * cov_scales[k];
    }
    println!("{report}");
    assert!(ok, "{report}");
    assert_eq!(run.divergent, 0, "{label}: divergences on a Gaussian");
}

/// (a) Plain HMC with the exact potential.
#[test]
fn exact_hmc_recovers_mean_and_covariance() {
    let target = Gaussian::new(MEAN, COV);
    let run = run(&Exact(target), &IdentityMetric, 1);
    assert!(run.acceptance > 0.8, "acceptance {}", run.acceptance);
    assert_recovers("exact HMC", &run, MEAN, COV);
}

/// (b) The leapfrog follows a Gaussian 1.3 times too wide; the exact MH step corrects it.
#[test]
fn wrong_proposal_with_exact_acceptance_recovers_mean_and_covariance() {
    let target = Gaussian::new(MEAN, COV);
    let proposal = target.scaled(WRONG_SCALE);
    let run = run(&Surrogate { target, proposal }, &IdentityMetric, 2);
    // The wrong forces cost acceptance: evidence that the proposal matters at all.
    let exact = self::run(&Exact(target), &IdentityMetric, 2);
    assert!(
        run.acceptance < exact.acceptance - 0.05,
        "surrogate acceptance {} vs exact {}",
        run.acceptance,
        exact.acceptance
    );
    assert!(run.acceptance > 0.3, "acceptance {}", run.acceptance);
    assert_recovers("surrogate HMC, proposal ×1.3", &run, MEAN, COV);
}

/// (a) and (b) with a diagonal mass matrix whose inverse is the marginal variances. With unit
/// marginal variances that metric would be the identity, so the target here is the same
/// Gaussian with coordinates scaled by 3 and 0.5 (variances 9 and 0.25, correlation still 0.8);
/// in coordinates standardized by the metric the dynamics are those of (a), so the same ε fits.
/// A mismatch between the metric's kinetic energy, drift and momentum draws would bias the
/// covariance.
#[test]
fn diagonal_metric_recovers_mean_and_covariance() {
    let d = [3.0, 0.5];
    let cov = scaled_cov(d);
    let target = Gaussian::new(MEAN, cov);
    let metric = DiagonalMetric::new(Vector2::new(cov[0][0], cov[1][1])).unwrap();
    let exact = run(&Exact(target), &metric, 3);
    assert!(exact.acceptance > 0.8, "acceptance {}", exact.acceptance);
    assert_recovers("exact HMC, diagonal metric", &exact, MEAN, cov);
    let proposal = target.scaled(WRONG_SCALE);
    let surrogate = run(&Surrogate { target, proposal }, &metric, 4);
    assert_recovers("surrogate HMC ×1.3, diagonal metric", &surrogate, MEAN, cov);
}

/// (c) The exactness tests above could fail: the ×1.3 proposal on its own is far from the target.
///
/// Two chains that follow the wrong proposal without the exact correction:
/// - the same leapfrog trajectories with every proposal accepted (no MH step at all), which
///   samples (up to leapfrog error) the proposal's own Gaussian, variance 1.69;
/// - MH with the *proposal's* Hamiltonian instead of the exact one (the bug the exact correction
///   guards against), which samples the proposal's Gaussian exactly.
///
/// Each misses `Σ₀₀ = 1` by far more than 4 of its own MCSEs and by far more than the
/// tolerance window of the exact test, so a sampler that silently dropped the exact
/// correction would fail test (b).
#[test]
fn wrong_proposal_alone_misses_the_variance_by_many_mcse() {
    let target = Gaussian::new(MEAN, COV);
    let proposal = target.scaled(WRONG_SCALE);
    let dynamics = Surrogate { target, proposal };

    // Every trajectory accepted.
    let mut r = rng(5);
    let cfg = config();
    let (mut q, mut p, mut g) = (MEAN, [0.0; 2], [0.0; 2]);
    proposal.gradient(&q, &mut g);
    let mut forced = Vec::with_capacity(TRANSITIONS);
    for _ in 0..TRANSITIONS {
        let n = cfg.steps.draw(&mut r);
        fill_standard_normal(&mut r, &mut p);
        let u = leapfrog(
            &dynamics,
            &IdentityMetric,
            cfg.step_size,
            n,
            &mut q,
            &mut p,
            &mut g,
        );
        assert!(u.is_finite());
        forced.push(q);
    }
    let (_, forced_cov) = moments(&forced);

    // MH judged by the proposal's own energy.
    let judged_by_proposal = run(&Exact(proposal), &IdentityMetric, 6);
    let (_, wrong_cov) = moments(&judged_by_proposal.draws);

    // The exact chain's error bar on Σ₀₀, for the width of the window test (b) uses.
    let exact = run(&Surrogate { target, proposal }, &IdentityMetric, 2);
    let (_, exact_cov) = moments(&exact.draws);
    let window = Z * exact_cov[0].mcse;

    let analytic = WRONG_SCALE * WRONG_SCALE * COV[0][0];
    for (label, e) in [
        ("every trajectory accepted", forced_cov[0]),
        ("MH with the proposal's energy", wrong_cov[0]),
    ] {
        let miss = (e.value - COV[0][0]).abs();
        println!(
            "{label}: Σ₀₀ = {:.4} ± {:.4} (target 1, proposal {analytic:.2}); miss = {:.0} \
             own MCSE, {:.0}× the exact test's window",
            e.value,
            e.mcse,
            miss / e.mcse,
            miss / window
        );
        // The proposal's variance is 1.69; the leapfrog error moves it by a few per cent at most.
        assert!((e.value - analytic).abs() < 0.1, "{label}: {e:?}");
        assert!(miss > 20.0 * e.mcse, "{label}: {e:?}");
        assert!(miss > 20.0 * window, "{label}: {e:?} vs window {window}");
    }
}

/// A potential that is `inner` inside the box `|qᵢ| ≤ 2` and broken outside it, in one of
/// several ways.
#[derive(Clone, Copy, Debug)]
enum Broken {
    /// Value and gradient NaN outside.
    Nan,
    /// Value NaN outside, gradient that of the inner potential.
    NanValue,
    /// Gradient NaN outside, value that of the inner potential.
    NanGradient,
    /// Value +∞ outside (a hard wall), gradient zero.
    Infinite,
    /// Value 10⁶ outside (finite, but an energy error far above the divergence threshold of
    /// 1000), gradient zero.
    Huge,
}

#[derive(Clone, Copy, Debug)]
struct Walled {
    inner: Gaussian,
    broken: Broken,
}

const WALL: f64 = 2.0;

fn outside(q: &[f64]) -> bool {
    q.iter().any(|x| x.abs() > WALL)
}

impl Potential for Walled {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        if !outside(q) {
            return self.inner.value(q);
        }
        match self.broken {
            Broken::Nan | Broken::NanValue => f64::NAN,
            Broken::NanGradient => self.inner.value(q),
            Broken::Infinite => f64::INFINITY,
            Broken::Huge => 1e6,
        }
    }
    fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
        let u = self.inner.value_and_gradient(q, g);
        if !outside(q) {
            return u;
        }
        match self.broken {
            Broken::Nan | Broken::NanGradient => g.fill(f64::NAN),
            Broken::NanValue => {}
            Broken::Infinite | Broken::Huge => g.fill(0.0),
        }
        self.value(q)
    }
}

/// Runs a chain on a broken dynamics and checks every transition: a divergent one is rejected
/// with acceptance probability 0 and leaves the state bit-for-bit unchanged (position, cached
/// `U` and cached gradient); so does any rejected one; the chain never leaves the box where
/// everything is finite. Returns the number of divergent transitions.
fn check_broken<Dy: Dynamics>(label: &str, dynamics: &Dy, seed: u64) -> usize {
    let mut r = rng(seed);
    // A long step and long trajectories so that many of them cross the wall.
    let config = HmcConfig::new(0.4, Steps::Jittered(12)).unwrap();
    let mut hmc = Hmc::new(Const::<2>, config).unwrap();
    let mut state = State::new(Vector2::new(0.0, 0.0), dynamics).unwrap();
    let (mut divergent, mut accepted) = (0, 0);
    for i in 0..5000 {
        let before = state.clone();
        let t: Transition = hmc.transition(&mut state, dynamics, &IdentityMetric, &mut r);
        if t.divergent {
            divergent += 1;
            assert!(!t.accepted, "{label}, transition {i}: {t:?}");
            assert_eq!(t.accept_prob, 0.0, "{label}, transition {i}: {t:?}");
        } else {
            assert!(t.energy_error.is_finite(), "{label}, transition {i}: {t:?}");
        }
        if t.accepted {
            accepted += 1;
        } else {
            let same = |a: &Vector2<f64>, b: &Vector2<f64>| {
                a.iter()
                    .zip(b.iter())
                    .all(|(x, y)| x.to_bits() == y.to_bits())
            };
            assert!(
                same(&state.position, &before.position)
                    && same(&state.gradient, &before.gradient)
                    && state.potential.to_bits() == before.potential.to_bits(),
                "{label}, transition {i}: rejected but the state changed: {before:?} → {state:?}"
            );
        }
        assert!(
            !outside(state.position.as_slice()) && state.potential.is_finite(),
            "{label}, transition {i}: the chain left the box: {state:?}"
        );
        assert!(t.energy.is_finite(), "{label}, transition {i}: {t:?}");
    }
    println!("{label}: {divergent} divergent, {accepted} accepted of 5000");
    // The scenario must actually provoke divergences, and the chain must still move.
    assert!(divergent > 100, "{label}: only {divergent} divergent");
    assert!(accepted > 1000, "{label}: only {accepted} accepted");
    divergent
}

#[test]
fn broken_potentials_give_rejected_divergent_transitions_and_unchanged_state() {
    let inner = Gaussian::new([0.0, 0.0], COV);
    let walled = |broken| Walled { inner, broken };
    // Exact HMC on a potential broken outside the box, in every way.
    for broken in [
        Broken::Nan,
        Broken::NanValue,
        Broken::NanGradient,
        Broken::Infinite,
        Broken::Huge,
    ] {
        check_broken(&format!("exact, {broken:?}"), &Exact(walled(broken)), 7);
    }
    // A proposal whose gradient turns NaN, with a healthy target.
    check_broken(
        "surrogate with a NaN proposal gradient",
        &Surrogate {
            target: inner,
            proposal: walled(Broken::NanGradient),
        },
        8,
    );
    // A healthy proposal with a target whose value turns NaN.
    check_broken(
        "surrogate with a NaN target value",
        &Surrogate {
            target: walled(Broken::NanValue),
            proposal: inner,
        },
        9,
    );
}
