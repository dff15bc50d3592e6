//! The cost of the logistic-regression potential on the RNS-HMC paper's simulation (N = 10⁵,
//! d = 50, a 40 MB design matrix), set against this machine's memory bandwidth.
//!
//! One fused `U + ∇U` must read all of `X`, so `bytes(X) / read bandwidth` is a floor no
//! implementation can beat on one core. The bench measures that bandwidth in the same run (a
//! read-only sum of `X` with independent accumulators, and a `copy_from_slice` of an
//! equally large buffer), prints the floor next to the kernel's time, and then lets criterion
//! time the kernels and the two memory sweeps.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

mod common;
use common::best_of;
use shmc::core::Potential;
use shmc::models::logistic::LogisticRegression;

const N: usize = 100_000;
const D: usize = 50;
const SEED: u64 = 20_160_101;

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

fn logistic(c: &mut Criterion) {
    let model = LogisticRegression::simulate(N, D, SEED).expect("valid simulation settings");
    let x = &model.data().x;
    let bytes = std::mem::size_of_val(x.as_slice());
    let beta: Vec<f64> = model.true_beta().expect("simulated").to_vec();
    let mut grad = vec![0.0; D];
    let mut copy = vec![0.0; x.len()];

    // The summary: best of 30 runs each, all in this process.
    let reps = 30;
    let fused = best_of(reps, || {
        black_box(model.value_and_gradient(black_box(&beta), &mut grad));
    });
    let value = best_of(reps, || {
        black_box(model.value(black_box(&beta)));
    });
    let gradient = best_of(reps, || {
        model.gradient(black_box(&beta), &mut grad);
        black_box(&grad);
    });
    let read = best_of(reps, || {
        black_box(read_sum(black_box(x)));
    });
    let copied = best_of(reps, || {
        copy.copy_from_slice(black_box(x));
        black_box(&copy);
    });
    let gbps = |t: Duration, b: usize| b as f64 / t.as_secs_f64() / 1e9;
    let ms = |t: Duration| t.as_secs_f64() * 1e3;
    let read_bw = gbps(read, bytes);
    let copy_bw = gbps(copied, 2 * bytes);
    let copy_floor = bytes as f64 / (copy_bw * 1e9) * 1e3;
    println!(
        "logistic U+∇U, N = {N}, d = {D}, X = {:.1} MB (best of {reps})",
        bytes as f64 / 1e6
    );
    println!("  fused value_and_gradient  {:8.3} ms", ms(fused));
    println!("  value only                {:8.3} ms", ms(value));
    println!("  gradient only             {:8.3} ms", ms(gradient));
    println!(
        "  read floor: X / read bw   {:8.3} ms  ({read_bw:.1} GB/s read-only sum of X)",
        ms(read)
    );
    println!(
        "  copy floor: X / copy bw   {copy_floor:8.3} ms  ({copy_bw:.1} GB/s copy, read + write)"
    );
    println!(
        "  fused / read floor {:.2}×, fused / copy floor {:.2}×",
        fused.as_secs_f64() / read.as_secs_f64(),
        ms(fused) / copy_floor
    );

    let mut group = c.benchmark_group("logistic_n1e5_d50");
    group.bench_function("value_and_gradient", |b| {
        b.iter(|| black_box(model.value_and_gradient(black_box(&beta), &mut grad)))
    });
    group.bench_function("value", |b| {
        b.iter(|| black_box(model.value(black_box(&beta))))
    });
    group.bench_function("gradient", |b| {
        b.iter(|| {
            model.gradient(black_box(&beta), &mut grad);
            black_box(grad[0])
        })
    });
    group.bench_function("read_sum_of_x", |b| {
        b.iter(|| black_box(read_sum(black_box(x))))
    });
    group.bench_function("copy_of_x", |b| {
        b.iter(|| {
            copy.copy_from_slice(black_box(x));
            black_box(copy[0])
        })
    });
    group.finish();
}

criterion_group!(benches, logistic);
criterion_main!(benches);
