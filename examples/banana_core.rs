//! Surrogate-accelerated HMC on a banana-shaped posterior with `shmc-core` alone: no host crate,
//! no run-time-sized linear algebra, every size fixed at compile time as on a microcontroller.
//!
//! The model is the banana of the grid-HMC paper: `yᵢ ~ N(β₁ + β₂², 2²)` for 100 observations
//! simulated here with a fixed seed and `β₁ + β₂² = 1`, and the prior `β ~ N(0, I)`. Only
//! `β₁ + β₂²` is identified by the data, so the posterior is a thin curved ridge along the
//! parabola `β₁ ≈ ȳ − β₂²`, held in place by the prior.
//!
//! The example runs the RNS-HMC recipe (journal paper, Algorithm 3):
//!
//! 1. **Exact HMC burn-in** (1000 transitions). Every accepted state comes with its exact `U`,
//!    computed anyway by the Metropolis–Hastings step, so training data cost nothing extra.
//! 2. **Online training** of a `FixedNetwork<2, 64>` (softplus units, input transform from the
//!    training states' mean and spread) with `OnlineGreville`, one state at a time, on the
//!    states accepted after the first 200 transitions; every fifth of them is held out to
//!    measure the fit.
//! 3. **Surrogate HMC** (5000 transitions): the network's gradient drives the leapfrog and the
//!    exact `U` judges the proposal, so the chain still targets the exact posterior while never
//!    evaluating an exact gradient.
//! 4. **Exact HMC reference** (5000 transitions, same settings) to compare with.
//!
//! Everything is seeded, so the printed report is identical on every run.
//!
//! Run with `cargo run --release -p shmc-examples --example banana_core`.

use std::cell::Cell;

use rand_core::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::nalgebra::Vector2;
use shmc_core::random::fill_standard_normal;
use shmc_core::{
    Activation, Const, Dynamics, Exact, FixedGreville, FixedHmc, FixedNetwork, FixedState,
    HmcConfig, IdentityMetric, InputTransform, Network, NetworkConfig, Nodes, Potential, Steps,
    Surrogate, WeightDistribution,
};

/// Observations.
const N: usize = 100;
/// Hidden units of the surrogate.
const S: usize = 64;
/// The observation noise σ_y.
const SIGMA_Y: f64 = 2.0;
/// Exact HMC transitions before the surrogate takes over.
const BURN_IN: usize = 1000;
/// Burn-in transitions whose states are not used for training: the chain is still coming in
/// from its start.
const SKIP: usize = 200;
/// Transitions of the surrogate chain and of the exact reference chain.
const DRAWS: usize = 5000;
/// Every `HOLD_OUT`-th training candidate is kept aside to measure the fit.
const HOLD_OUT: usize = 5;
/// The ridge parameter λ of the Greville start (see [`train`]).
const RIDGE: f64 = 1e-6;

/// Leapfrog settings shared by all phases. The ridge is about 0.2/√(1 + 4β₂²) wide across, which
/// bounds the stable step size; ε = 0.08 with `L ~ U{1..30}` keeps exact HMC's acceptance near
/// 0.95 and travels along the banana in a few transitions (ε = 0.03 accepts 0.99 but mixes about
/// twice as slowly).
fn hmc_config() -> HmcConfig {
    HmcConfig::new(0.08, Steps::Jittered(30)).expect("valid settings")
}

/// The banana potential `U(β) = Σ (yᵢ − β₁ − β₂²)² / 2σ_y² + ‖β‖²/2`, with counters of the exact
/// evaluations the samplers ask for. Each call sums over the data, as a real likelihood would.
struct Banana {
    y: [f64; N],
    values: Cell<u64>,
    gradients: Cell<u64>,
}

impl Banana {
    fn simulate(rng: &mut Pcg64) -> Self {
        let mut y = [0.0; N];
        fill_standard_normal(rng, &mut y);
        // β₁ + β₂² = 1.
        y.iter_mut().for_each(|e| *e = 1.0 + SIGMA_Y * *e);
        Self {
            y,
            values: Cell::new(0),
            gradients: Cell::new(0),
        }
    }

    /// The evaluation counts so far: (values alone, values with gradients).
    fn counts(&self) -> (u64, u64) {
        (self.values.get(), self.gradients.get())
    }

    /// `U(β)` and `∇U(β)`, uncounted (for the diagnostics of the fit).
    fn eval(&self, q: &[f64]) -> (f64, [f64; 2]) {
        let m = q[0] + q[1] * q[1];
        let (mut sq, mut sum) = (0.0, 0.0);
        for &yi in &self.y {
            let r = yi - m;
            sq += r * r;
            sum += r;
        }
        let s2 = SIGMA_Y * SIGMA_Y;
        let u = 0.5 * sq / s2 + 0.5 * (q[0] * q[0] + q[1] * q[1]);
        let du_dm = -sum / s2;
        (u, [du_dm + q[0], 2.0 * q[1] * du_dm + q[1]])
    }
}

impl Potential for Banana {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        self.values.set(self.values.get() + 1);
        self.eval(q).0
    }
    fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
        self.gradients.set(self.gradients.get() + 1);
        let (u, grad) = self.eval(q);
        g.copy_from_slice(&grad);
        u
    }
}

/// What one phase produced and what it cost.
struct Phase {
    draws: Vec<[f64; 2]>,
    /// Accepted states with their transition index and exact `U`.
    accepted: Vec<(usize, [f64; 2], f64)>,
    acceptance: f64,
    divergent: usize,
    exact_values: u64,
    exact_gradients: u64,
    leapfrog_steps: u64,
    end: [f64; 2],
}

/// Runs `n` transitions from `start`, counting `banana`'s exact evaluations (including those
/// that set up the starting state).
fn run_phase<Dy: Dynamics>(
    dynamics: &Dy,
    banana: &Banana,
    start: [f64; 2],
    n: usize,
    rng: &mut Pcg64,
) -> Phase {
    let before = banana.counts();
    let mut hmc = FixedHmc::<2>::new(Const::<2>, hmc_config()).expect("valid settings");
    let mut state = FixedState::<2>::new(Vector2::from(start), dynamics).expect("dimension 2");
    let mut phase = Phase {
        draws: Vec::with_capacity(n),
        accepted: Vec::new(),
        acceptance: 0.0,
        divergent: 0,
        exact_values: 0,
        exact_gradients: 0,
        leapfrog_steps: 0,
        end: start,
    };
    for i in 0..n {
        let t = hmc.transition(&mut state, dynamics, &IdentityMetric, rng);
        let q = [state.position[0], state.position[1]];
        if t.accepted {
            phase.accepted.push((i, q, state.potential));
        }
        phase.divergent += t.divergent as usize;
        phase.leapfrog_steps += u64::from(t.steps);
        phase.draws.push(q);
    }
    let after = banana.counts();
    phase.acceptance = phase.accepted.len() as f64 / n as f64;
    phase.exact_values = after.0 - before.0;
    phase.exact_gradients = after.1 - before.1;
    phase.end = [state.position[0], state.position[1]];
    phase
}

/// Mean, standard deviation, and the batch-means Monte Carlo standard error of the mean
/// (25 batches) of coordinate `k`.
fn summary(draws: &[[f64; 2]], k: usize) -> (f64, f64, f64) {
    let x: Vec<f64> = draws.iter().map(|q| q[k]).collect();
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let sd = (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let batches = 25;
    let len = x.len() / batches;
    let means: Vec<f64> = x
        .chunks_exact(len)
        .map(|b| b.iter().sum::<f64>() / len as f64)
        .collect();
    let var_b = means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (batches - 1) as f64;
    (mean, sd, (var_b / batches as f64).sqrt())
}

/// The trained surrogate and the states it was not trained on.
struct Trained {
    network: FixedNetwork<2, S>,
    rows: usize,
    held_out: Vec<([f64; 2], f64)>,
}

/// Builds the network and trains its output weights online, one burn-in state at a time.
///
/// - The input transform centres and scales each coordinate by the training states' mean and
///   standard deviation, so the random units are laid out over the region the posterior fills.
/// - Weights `wᵢ ~ N(0, 3²/d)` and offsets `dᵢ ~ N(0, 2²)` in those standardized units: the
///   softplus kinks then fall within a couple of standard deviations of the centre, so sums of
///   units can bend along the banana. With the papers' default `N(0, 1/d)` and `N(0, 1)` the
///   units are nearly linear over the posterior; on this seed that fits the held-out `U` a
///   little worse (RMS 0.10 against 0.08) and gives a few divergent surrogate trajectories.
/// - `OnlineGreville::ridge` starts from `Φ = 0, Θ = I/λ`: every update is a recursive
///   least-squares step and the weights are always the ridge solution `(HᵀH + λI)⁻¹HᵀT`. The
///   plain start (`Φ = I, Θ = 0`) takes a "new direction" step for each of the first 64 rows,
///   with gains `c/‖c‖²` that grow large when neighbouring states give nearly collinear feature
///   rows, as consecutive HMC states do, and it interpolates those first rows exactly. On this
///   seed it fits the held-out `U` about half as well (RMS 0.15 against 0.08); the tiny
///   λ = 10⁻⁶ costs nothing visible and keeps the weights well conditioned.
/// - The features have no constant column, so the targets are `U − U₀` with `U₀` the first
///   training state's `U`, and the network's bias is `U₀`. The bias does not enter the gradient
///   that drives the leapfrog; it only matters for the value fit reported below.
fn train(burn_in: &Phase, rng: &mut Pcg64) -> Trained {
    let candidates: Vec<([f64; 2], f64)> = burn_in
        .accepted
        .iter()
        .filter(|(i, _, _)| *i >= SKIP)
        .map(|&(_, q, u)| (q, u))
        .collect();
    let (mut training, mut held_out) = (Vec::new(), Vec::new());
    for (j, c) in candidates.into_iter().enumerate() {
        if j % HOLD_OUT == HOLD_OUT - 1 {
            held_out.push(c);
        } else {
            training.push(c);
        }
    }

    let n = training.len() as f64;
    let mut centre = [0.0; 2];
    let mut scale = [0.0; 2];
    for k in 0..2 {
        centre[k] = training.iter().map(|(q, _)| q[k]).sum::<f64>() / n;
        scale[k] = (training
            .iter()
            .map(|(q, _)| (q[k] - centre[k]).powi(2))
            .sum::<f64>()
            / (n - 1.0))
            .sqrt();
    }
    let transform = InputTransform::new(Vector2::from(centre), Vector2::from(scale))
        .expect("finite centre, positive scale");
    let config = NetworkConfig {
        nodes: Nodes::Additive(Activation::Softplus),
        weights: WeightDistribution::Normal { sd: 3.0 },
        offsets: WeightDistribution::Normal { sd: 2.0 },
    };
    let mut network: FixedNetwork<2, S> =
        Network::random(&config, transform, Const::<S>, rng).expect("valid configuration");

    let mut greville = FixedGreville::<S>::ridge(Const::<S>, RIDGE).expect("positive ridge");
    let u0 = training[0].1;
    let mut h = [0.0; S];
    for (q, u) in &training {
        network.features(q, &mut h);
        greville.update(&h, u - u0);
    }
    network
        .set_output(greville.weights(), u0)
        .expect("finite weights");
    Trained {
        network,
        rows: greville.rows(),
        held_out,
    }
}

fn print_phase(name: &str, phase: &Phase) {
    let (m1, s1, e1) = summary(&phase.draws, 0);
    let (m2, s2, e2) = summary(&phase.draws, 1);
    println!(
        "{name:<22} {:>6} {:>9.3} {:>6} {:>12} {:>12}   {m1:>6.3} ± {e1:.3} {s1:>6.3}   \
         {m2:>6.3} ± {e2:.3} {s2:>6.3}",
        phase.draws.len(),
        phase.acceptance,
        phase.divergent,
        phase.exact_gradients,
        phase.exact_values,
    );
}

fn main() {
    let banana = Banana::simulate(&mut Pcg64::seed_from_u64(2016));
    let ybar = banana.y.iter().sum::<f64>() / N as f64;
    let mut rng = Pcg64::seed_from_u64(1);

    // 1. Exact HMC burn-in from the prior mean.
    let burn_in = run_phase(&Exact(&banana), &banana, [0.0, 0.0], BURN_IN, &mut rng);

    // 2. Online training on the accepted burn-in states.
    let trained = train(&burn_in, &mut rng);
    let network = &trained.network;

    // 3. Surrogate HMC from where the burn-in ended.
    let dynamics = Surrogate {
        target: &banana,
        proposal: network,
    };
    let surrogate = run_phase(&dynamics, &banana, burn_in.end, DRAWS, &mut rng);

    // 4. Exact HMC from the same point, for reference.
    let reference = run_phase(&Exact(&banana), &banana, burn_in.end, DRAWS, &mut rng);

    println!(
        "Banana posterior: y_i ~ N(b1 + b2^2, 2^2), i = 1..{N}, b ~ N(0, I); ybar = {ybar:.3}"
    );
    println!(
        "HMC settings: step size {}, steps uniform on 1..={}; surrogate: {S} softplus units, \
         online Greville (ridge start, lambda = {RIDGE:e})",
        hmc_config().step_size,
        hmc_config().steps.max()
    );
    println!();
    println!(
        "{:<22} {:>6} {:>9} {:>6} {:>12} {:>12}   {:^21}   {:^21}",
        "phase",
        "iters",
        "accept",
        "div",
        "exact grads",
        "exact values",
        "b1 mean ± mcse   sd",
        "b2 mean ± mcse   sd"
    );
    print_phase("exact HMC (burn-in)", &burn_in);
    print_phase("surrogate HMC", &surrogate);
    print_phase("exact HMC (reference)", &reference);
    println!();
    println!(
        "Leapfrog steps: surrogate {} (each one surrogate gradient), exact reference {} \
         (each one exact gradient).",
        surrogate.leapfrog_steps, reference.leapfrog_steps
    );
    println!(
        "The 'exact values' of exact HMC are 0: its end point costs one fused value-and-gradient \
         call, counted under 'exact grads'."
    );

    // The fit on states the network never saw.
    let (mut se, mut su, mut mean_u) = (0.0, 0.0, 0.0);
    let mut grad_rel = Vec::new();
    for (q, u) in &trained.held_out {
        mean_u += u;
        se += (network.value(q) - u).powi(2);
        let mut g = [0.0; 2];
        network.gradient(q, &mut g);
        let (_, gu) = banana.eval(q);
        let num = ((g[0] - gu[0]).powi(2) + (g[1] - gu[1]).powi(2)).sqrt();
        let den = (gu[0].powi(2) + gu[1].powi(2)).sqrt();
        grad_rel.push(num / den);
    }
    let k = trained.held_out.len() as f64;
    mean_u /= k;
    for (_, u) in &trained.held_out {
        su += (u - mean_u).powi(2);
    }
    grad_rel.sort_by(f64::total_cmp);
    println!();
    println!(
        "Surrogate fit: trained online on {} burn-in states; on {} held-out states the RMS error \
         of U is {:.4} (the held-out U spread, sd, is {:.3}); relative gradient error \
         |grad z - grad U| / |grad U|: median {:.3}, 90th percentile {:.3}.",
        trained.rows,
        trained.held_out.len(),
        (se / k).sqrt(),
        (su / (k - 1.0)).sqrt(),
        grad_rel[grad_rel.len() / 2],
        grad_rel[grad_rel.len() * 9 / 10],
    );
}
