//! Chains in lockstep over the data against each chain reading it alone, on the logistic
//! regression of the RNS-HMC paper's simulation (N = 10⁵, d = 50, a 40 MB design matrix).
//!
//! A *round* is what one iteration step costs the chains: every one of them gets its `U` (or
//! `U` and `∇U`) at its own point. Per chain, each chain's thread streams all of `X`; in
//! lockstep the chains' threads share one pass, each taking segments of rows for every chain's
//! point. The summary prints the bytes a round moves from memory, its time (best of many, the
//! least disturbed by other processes) and the fraction of the bandwidth floor it reaches:
//! `floor = bytes / (cores × one core's read bandwidth)`, the bandwidth measured in the same run
//! by a read-only sum of `X`. Criterion then times the rounds of two chains.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

mod common;
use common::best_of;
use shmc::Model;
use shmc::core::Potential;
use shmc::models::logistic::LogisticRegression;
use shmc::sampler::lockstep::Lockstep;

const N: usize = 100_000;
const D: usize = 50;
const SEED: u64 = 20_160_101;
/// Rows of the in-cache comparison: 0.8 MB, inside one core's 1 MB L2 cache.
const CACHED_N: usize = 2_000;

/// A read-only pass over `x` with eight independent sums (not latency-bound).
fn read_sum(x: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for k in 0..8 {
            acc[k] += c[k];
        }
    }
    acc.iter().sum::<f64>() + chunks.remainder().iter().sum::<f64>()
}

/// Chain `chain`'s point: the true β shifted a little, so that no two chains ask the same.
fn point(model: &LogisticRegression, chain: usize) -> Vec<f64> {
    let beta = model.true_beta().expect("simulated");
    beta.iter()
        .enumerate()
        .map(|(j, b)| b + 0.01 * ((chain * 7 + j) % 5) as f64)
        .collect()
}

/// Starts `chains` threads, each doing once per round the work `make(chain)` builds on that
/// thread, and hands `body` the function that runs one round.
fn with_rounds<W: FnMut()>(
    chains: usize,
    make: impl Fn(usize) -> W + Sync,
    body: impl FnOnce(&dyn Fn()),
) {
    let start = Barrier::new(chains + 1);
    let end = Barrier::new(chains + 1);
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        for chain in 0..chains {
            let (start, end, stop, make) = (&start, &end, &stop, &make);
            scope.spawn(move || {
                let mut work = make(chain);
                loop {
                    start.wait();
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    work();
                    end.wait();
                }
            });
        }
        body(&|| {
            start.wait();
            end.wait();
        });
        stop.store(true, Ordering::Relaxed);
        start.wait();
    });
}

/// What one round needs at each point.
#[derive(Clone, Copy, Debug)]
enum Need {
    Value,
    ValueAndGradient,
}

/// One chain's evaluation of `need` at `q` on `p`.
fn evaluate(p: &dyn Potential, q: &[f64], need: Need, grad: &mut [f64]) -> f64 {
    match need {
        Need::Value => p.value(black_box(q)),
        Need::ValueAndGradient => p.value_and_gradient(black_box(q), grad),
    }
}

/// Runs `body` with the round function of `chains` chains, in lockstep or each on its own.
fn rounds(
    model: &LogisticRegression,
    chains: usize,
    lockstep: bool,
    need: Need,
    body: impl FnOnce(&dyn Fn()),
) {
    let points: Vec<Vec<f64>> = (0..chains).map(|c| point(model, c)).collect();
    if lockstep {
        let shared = Lockstep::new(model, chains).expect("logistic regression is a row sum");
        let seats = Mutex::new(shared.seats().into_iter().map(Some).collect::<Vec<_>>());
        let points = &points;
        with_rounds(
            chains,
            |chain| {
                let seat = seats.lock().expect("no panic")[chain].take();
                let member = seat.expect("one seat per chain").take();
                let mut grad = vec![0.0; D];
                move || {
                    black_box(evaluate(&member, &points[chain], need, &mut grad));
                }
            },
            body,
        );
    } else {
        let points = &points;
        with_rounds(
            chains,
            |chain| {
                let mut grad = vec![0.0; D];
                move || {
                    black_box(evaluate(model, &points[chain], need, &mut grad));
                }
            },
            body,
        );
    }
}

/// The fastest of `reps` rounds.
fn best_round(model: &LogisticRegression, chains: usize, lockstep: bool, need: Need) -> Duration {
    let mut best = Duration::MAX;
    rounds(model, chains, lockstep, need, |round| {
        round();
        best = best_of(30, round);
    });
    best
}

fn lockstep(c: &mut Criterion) {
    let model = LogisticRegression::simulate(N, D, SEED).expect("valid simulation settings");
    assert!(model.row_sum().is_some());
    let data = model.data();
    let bytes = std::mem::size_of_val(data.x.as_slice()) + std::mem::size_of_val(data.y.as_slice());
    let cores = thread::available_parallelism().map_or(1, usize::from);
    let read = best_of(30, || {
        black_box(read_sum(black_box(&data.x)));
    });
    let read_bw = std::mem::size_of_val(data.x.as_slice()) as f64 / read.as_secs_f64();
    let floor = bytes as f64 / (cores as f64 * read_bw);
    let ms = |t: f64| t * 1e3;
    println!(
        "lockstep rounds, logistic N = {N}, d = {D}: X and y {:.1} MB; one core reads {:.1} GB/s, \
         floor of one pass on {cores} cores {:.3} ms (best of 30)",
        bytes as f64 / 1e6,
        read_bw / 1e9,
        ms(floor)
    );
    println!(
        "  {:<16} {:>6} {:>18} {:>18} {:>10} {:>14} {:>10}",
        "need",
        "chains",
        "per chain ms/round",
        "lockstep ms/round",
        "speed-up",
        "MB/round",
        "floor"
    );
    for need in [Need::Value, Need::ValueAndGradient] {
        for chains in [1, 2, 4] {
            let alone = best_round(&model, chains, false, need).as_secs_f64();
            let shared = best_round(&model, chains, true, need).as_secs_f64();
            // Per chain, every chain reads the data; in lockstep, one pass reads it once.
            println!(
                "  {:<16} {chains:>6} {:>18.3} {:>18.3} {:>9.2}× {:>6.1} vs {:>5.1} {:>9.0}%",
                format!("{need:?}"),
                ms(alone),
                ms(shared),
                alone / shared,
                (chains * bytes) as f64 / 1e6,
                bytes as f64 / 1e6,
                100.0 * floor / shared
            );
        }
    }

    // The same pass over rows already in the L2 cache, scaled to N: what the kernel's
    // arithmetic alone costs. When it is not far below the floor, no sharing of reads can bring
    // a round of several points down to the floor.
    let cached = LogisticRegression::simulate(CACHED_N, D, SEED).expect("valid settings");
    let beta = point(&cached, 0);
    let mut grad = vec![0.0; D];
    for need in [Need::Value, Need::ValueAndGradient] {
        let t = best_of(300, || {
            black_box(evaluate(&cached, &beta, need, &mut grad));
        });
        println!(
            "  arithmetic alone ({need:?}, {CACHED_N} rows in cache, scaled to N): {:.3} ms per \
             point on one core",
            ms(t.as_secs_f64() * (N / CACHED_N) as f64)
        );
    }

    let mut group = c.benchmark_group("lockstep_n1e5_d50_two_chains");
    group.sample_size(20);
    for (name, lockstep) in [("per_chain_value", false), ("lockstep_value", true)] {
        rounds(&model, 2, lockstep, Need::Value, |round| {
            group.bench_function(name, |b| b.iter(round));
        });
    }
    group.finish();
}

criterion_group!(benches, lockstep);
criterion_main!(benches);
