//! Chains in lockstep over the data: a shared pass returns, to every chain, exactly what the
//! chain's own evaluation returns; runs with and without lockstep make the same draws; a chain
//! that fails mid-run ends the run with its error instead of leaving the others waiting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc::core::Potential;
use shmc::core::random::{fill_standard_normal, uniform};
use shmc::data::Dataset;
use shmc::model::indexed_names;
use shmc::models::logistic::LogisticRegression;
use shmc::models::probit::ProbitRegression;
use shmc::row_sum::{self, Need, Query, RowSum};
use shmc::sampler::lockstep::Lockstep;
use shmc::sampler::{
    ChainResult, DrawSink, InverseMetric, Method, NullSink, SampleConfig, SurrogateSettings,
    VhmcSettings, sample,
};
use shmc::surrogates::SurrogateKind;
use shmc::surrogates::network::{NetworkFitter, TrainOptions};
use shmc::{Model, Result};

/// `N(0, 1)` features and fair-coin responses.
fn random_data(n: usize, d: usize, seed: u64) -> Dataset {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut x = vec![0.0; n * d];
    fill_standard_normal(&mut rng, &mut x);
    let y = (0..n)
        .map(|_| if uniform(&mut rng) < 0.5 { 1.0 } else { 0.0 })
        .collect();
    Dataset::new(x, y, n, d, indexed_names("x", d)).unwrap()
}

/// Chain `chain`'s `k`-th point and what it asks for there: the needs rotate so that passes mix
/// value-only, gradient-only and fused queries.
fn query(d: usize, chain: usize, k: usize) -> (Vec<f64>, Need) {
    let mut q = vec![0.0; d];
    fill_standard_normal(&mut Pcg64::seed_from_u64((100 * chain + k) as u64), &mut q);
    let need = [Need::Value, Need::Gradient, Need::ValueAndGradient][(chain + k) % 3];
    (q, need)
}

/// `(U, ∇U)` as `Potential` gives them for `need` (unused parts zero).
fn evaluate(p: &dyn Potential, q: &[f64], need: Need) -> (f64, Vec<f64>) {
    let mut grad = vec![0.0; q.len()];
    let value = match need {
        Need::Value => p.value(q),
        Need::Gradient => {
            p.gradient(q, &mut grad);
            0.0
        }
        Need::ValueAndGradient => p.value_and_gradient(q, &mut grad),
    };
    (value, grad)
}

/// Every chain of `chains` evaluates `points` queries through its lockstep member on its own
/// thread; each result must equal the model's own evaluation bit for bit.
fn assert_lockstep_equals_per_chain<M: Model>(name: &str, model: &M, chains: usize, points: usize) {
    let d = model.dim();
    let lockstep = Lockstep::new(model, chains).expect("a row-sum model");
    let shared: Vec<Vec<(f64, Vec<f64>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lockstep
            .seats()
            .into_iter()
            .enumerate()
            .map(|(chain, seat)| {
                scope.spawn(move || {
                    let member = seat.take();
                    (0..points)
                        .map(|k| {
                            let (q, need) = query(d, chain, k);
                            evaluate(&member, &q, need)
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (chain, results) in shared.iter().enumerate() {
        for (k, (value, grad)) in results.iter().enumerate() {
            let (q, need) = query(d, chain, k);
            let (want_value, want_grad) = evaluate(model, &q, need);
            let bits = |g: &[f64]| g.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(
                value.to_bits() == want_value.to_bits() && bits(grad) == bits(&want_grad),
                "{name}, {chains} chains, chain {chain}, point {k} ({need:?}): shared \
                 ({value}, {grad:?}) vs per chain ({want_value}, {want_grad:?})"
            );
            assert!(value.is_finite() && grad.iter().all(|g| g.is_finite()));
        }
    }
}

#[test]
fn shared_passes_equal_per_chain_evaluations_bit_for_bit() {
    // Row counts that are not multiples of the 64-row block or the 1024-row segment (several
    // segments, the last one short), and one shorter than a block.
    let logistic = [(2500, 7), (1100, 50), (10, 3)];
    for (n, d) in logistic {
        let model = LogisticRegression::new(random_data(n, d, n as u64), 100.0).unwrap();
        assert!(model.row_sum().is_some());
        for chains in 1..=4 {
            assert_lockstep_equals_per_chain(&format!("logistic {n}×{d}"), &model, chains, 7);
        }
    }
    for (n, d) in [(2100, 5), (50, 2)] {
        let model = ProbitRegression::new(random_data(n, d, n as u64), 100.0).unwrap();
        for chains in 1..=4 {
            assert_lockstep_equals_per_chain(&format!("probit {n}×{d}"), &model, chains, 7);
        }
    }
    // More points than one block serves at once (eight).
    let model = LogisticRegression::new(random_data(1500, 4, 9), 100.0).unwrap();
    assert_lockstep_equals_per_chain("logistic, 11 chains", &model, 11, 3);
}

#[test]
fn a_segment_of_several_queries_equals_each_query_alone() {
    // The model level alone, without threads: one call for four queries against four calls.
    let model = LogisticRegression::new(random_data(1300, 6, 4), 100.0).unwrap();
    let points: Vec<(Vec<f64>, Need)> = (0..4).map(|k| query(6, 0, k)).collect();
    let queries: Vec<Query<'_>> = points
        .iter()
        .map(|(point, need)| Query { point, need: *need })
        .collect();
    for index in 0..model.segments() {
        let mut together = vec![0.0; 4 * 7];
        model.segment(index, &queries, &mut together);
        for (k, query) in queries.iter().enumerate() {
            let mut alone = vec![0.0; 7];
            model.segment(index, std::slice::from_ref(query), &mut alone);
            let record = &together[7 * k..7 * (k + 1)];
            let used = |r: &[f64]| match query.need {
                Need::Value => vec![r[0]],
                Need::Gradient => r[1..].to_vec(),
                Need::ValueAndGradient => r.to_vec(),
            };
            assert_eq!(used(record), used(&alone), "segment {index}, query {k}");
        }
    }
}

/// Many points in one pass shared out over rayon's threads (what fitting a surrogate to many
/// states at once does) get each point's own `U` and `∇U`, bit for bit.
#[test]
fn many_points_in_one_pass_equal_each_points_own_evaluation() {
    let logistic = LogisticRegression::new(random_data(5000, 7, 8), 100.0).unwrap();
    let probit = ProbitRegression::new(random_data(2100, 7, 9), 100.0).unwrap();
    let models: [&dyn Model; 2] = [&logistic, &probit];
    for model in models {
        let points: Vec<Vec<f64>> = (0..37).map(|k| query(7, 3, k).0).collect();
        let together = row_sum::evaluate_many(model.row_sum().unwrap(), &points);
        assert_eq!(together.len(), points.len());
        for (point, (value, grad)) in points.iter().zip(&together) {
            let (own_value, own_grad) = evaluate(model, point, Need::ValueAndGradient);
            assert_eq!(value.to_bits(), own_value.to_bits());
            assert_eq!(grad, &own_grad);
        }
    }
}

/// `U(q) = Σᵢ ½‖q − rᵢ‖²` over rows `rᵢ`, in segments of three rows, whose segment code panics
/// once, after `panic_after` segments, and whose prior part panics once, after
/// `finish_panics_after` calls: a user's model that opts in and fails on some input. Its first
/// `gate` prior evaluations wait until all of them have started.
struct Rows {
    rows: Vec<f64>,
    d: usize,
    segments_done: AtomicUsize,
    panic_after: usize,
    finishes: AtomicUsize,
    finish_panics_after: usize,
    gate: usize,
    arrived: Mutex<usize>,
    all_arrived: Condvar,
}

impl Rows {
    fn new(panic_after: usize, finish_panics_after: usize) -> Self {
        let d = 2;
        let mut rows = vec![0.0; 10 * d];
        fill_standard_normal(&mut Pcg64::seed_from_u64(3), &mut rows);
        Self {
            rows,
            d,
            segments_done: AtomicUsize::new(0),
            panic_after,
            finishes: AtomicUsize::new(0),
            finish_panics_after,
            gate: 0,
            arrived: Mutex::new(0),
            all_arrived: Condvar::new(),
        }
    }

    /// Waits (at most two minutes) until `gate` callers have come, if this is one of the first
    /// `gate` calls; panics if they never do.
    fn pass_gate(&self) {
        let mut arrived = self.arrived.lock().unwrap();
        if *arrived >= self.gate {
            return;
        }
        *arrived += 1;
        self.all_arrived.notify_all();
        let (arrived, timeout) = self
            .all_arrived
            .wait_timeout_while(arrived, Duration::from_secs(120), |n| *n < self.gate)
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "only {} of {} chains ever ran at once",
            *arrived,
            self.gate
        );
    }
}

impl RowSum for Rows {
    fn segments(&self) -> usize {
        (self.rows.len() / self.d).div_ceil(3)
    }

    fn segment(&self, index: usize, queries: &[Query<'_>], out: &mut [f64]) {
        let done = self.segments_done.fetch_add(1, Ordering::Relaxed);
        if done == self.panic_after {
            panic!("segment code gave up");
        }
        let rows = &self.rows[3 * index * self.d..((3 * index + 3) * self.d).min(self.rows.len())];
        for (query, record) in queries.iter().zip(out.chunks_exact_mut(1 + self.d)) {
            record.fill(0.0);
            for row in rows.chunks_exact(self.d) {
                for j in 0..self.d {
                    let r = query.point[j] - row[j];
                    record[0] += 0.5 * r * r;
                    record[1 + j] += r;
                }
            }
        }
    }

    fn rows(&self) -> usize {
        self.rows.len() / self.d
    }

    fn rows_gradient(&self, point: &[f64], rows: &[usize], grad: &mut [f64]) {
        grad.fill(0.0);
        for &i in rows {
            for j in 0..self.d {
                grad[j] += point[j] - self.rows[i * self.d + j];
            }
        }
    }

    fn finish(&self, _: &[f64], _: Need, _: &mut f64, _: &mut [f64]) {
        self.pass_gate();
        let n = self.finishes.fetch_add(1, Ordering::Relaxed);
        if n == self.finish_panics_after {
            panic!("the prior gave up");
        }
    }
}

impl Potential for Rows {
    fn dim(&self) -> usize {
        self.d
    }
    fn value(&self, q: &[f64]) -> f64 {
        row_sum::evaluate(self, q, Need::Value, &mut [])
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        row_sum::evaluate(self, q, Need::ValueAndGradient, grad)
    }
    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        row_sum::evaluate(self, q, Need::Gradient, grad);
    }
}

impl Model for Rows {
    fn parameter_names(&self) -> Vec<String> {
        indexed_names("q", self.d)
    }
    fn row_sum(&self) -> Option<&dyn RowSum> {
        Some(self)
    }
}

/// A sink that fails at its `fail_at`-th draw, as a full disk would.
struct FailingSink {
    draws: usize,
    fail_at: usize,
}

impl DrawSink for FailingSink {
    fn adaptation(&mut self, _: f64, _: &InverseMetric) -> Result<()> {
        Ok(())
    }
    fn draw(&mut self, _: &[f64]) -> Result<()> {
        self.draws += 1;
        if self.draws == self.fail_at {
            return Err(shmc::Error::invalid("the disk is full"));
        }
        Ok(())
    }
    fn finish(&mut self, _: &ChainResult) -> Result<()> {
        Ok(())
    }
}

fn config(chains: usize) -> SampleConfig {
    SampleConfig {
        chains,
        warmup: 200,
        draws: 300,
        seed: 4,
        ..SampleConfig::default()
    }
}

fn null_sinks(chains: usize) -> Vec<Box<dyn DrawSink>> {
    (0..chains).map(|_| Box::new(NullSink) as _).collect()
}

#[test]
fn lockstep_and_per_chain_runs_make_the_same_draws() {
    let model = Rows::new(usize::MAX, usize::MAX);
    let logistic = LogisticRegression::simulate(1500, 4, 2).unwrap();
    let train = TrainOptions {
        hidden: 40,
        seed: 3,
        ..TrainOptions::default()
    };
    // The network fitted to the warmup's gradients, then surrogate proposals judged by the
    // exact U (one exact value per iteration); VHMC's MAP search and online training.
    let rns = Method::RnsHmc(SurrogateSettings {
        kind: SurrogateKind::Network(NetworkFitter::score(train.clone())),
        train_after: Some(100),
        ..SurrogateSettings::default()
    });
    let vhmc = Method::Vhmc(VhmcSettings {
        train: TrainOptions {
            ridge: VhmcSettings::default().train.ridge,
            ..train
        },
        ..VhmcSettings::default()
    });
    for (model, method) in [
        (&model as &dyn Model, Method::Hmc),
        (&logistic, Method::Hmc),
        (&logistic, rns),
        (&logistic, vhmc),
    ] {
        let run = |lockstep| {
            let config = SampleConfig {
                lockstep,
                method: method.clone(),
                ..config(3)
            };
            sample(model, &config, null_sinks(3), &|_, _| {}, None).unwrap()
        };
        let (together, alone) = (run(true), run(false));
        for (a, b) in together.chains.iter().zip(&alone.chains) {
            assert_eq!(a.columns, b.columns, "chain {} ({method:?})", a.chain);
        }
    }
}

#[test]
fn four_lockstep_chains_run_at_once_whatever_rayons_threads() {
    // Each chain's first evaluation waits for all four: chains queued on rayon's threads (two
    // on this machine, one under RAYON_NUM_THREADS=1) would never all start.
    let model = Rows {
        gate: 4,
        ..Rows::new(usize::MAX, usize::MAX)
    };
    let run = sample(&model, &config(4), null_sinks(4), &|_, _| {}, None).unwrap();
    assert_eq!(run.chains.len(), 4);
}

#[test]
fn a_chain_whose_sink_fails_ends_the_run_with_its_error() {
    let model = Rows::new(usize::MAX, usize::MAX);
    let mut sinks = null_sinks(4);
    sinks[2] = Box::new(FailingSink {
        draws: 0,
        fail_at: 50,
    });
    let err = sample(&model, &config(4), sinks, &|_, _| {}, None).unwrap_err();
    assert_eq!(err.to_string(), "the disk is full");
}

#[test]
fn a_panic_in_shared_segment_code_ends_the_run_with_its_message() {
    // After 2000 segments (about 500 shared passes): every chain of that pass stops.
    let model = Rows::new(2000, usize::MAX);
    let err = sample(&model, &config(4), null_sinks(4), &|_, _| {}, None).unwrap_err();
    let err = err.to_string();
    assert!(
        err.starts_with("chain ") && err.ends_with(": the model panicked: segment code gave up"),
        "{err}"
    );
}

#[test]
fn a_panic_in_one_chains_own_code_ends_the_run_with_its_message() {
    // The prior part runs on each chain's own thread, after the shared pass.
    let model = Rows::new(usize::MAX, 1500);
    let err = sample(&model, &config(4), null_sinks(4), &|_, _| {}, None).unwrap_err();
    let err = err.to_string();
    assert!(
        err.starts_with("chain ") && err.ends_with(": the model panicked: the prior gave up"),
        "{err}"
    );
}
