//! Criterion benchmarks of the surrogate gradient and the online Greville update in `f32`
//! against `f64` (issue 18), at (d, s) = (2, 16), (10, 64) and (50, 256): one implementation,
//! two scalars. Where a loop vectorizes, `f32` puts twice the elements in a vector register, so
//! its throughput approaches twice `f64`'s; the table after criterion's report gives the ratio
//! of the median times, `f64 / f32`, per kernel and size.
//!
//! Timed with the thread CPU clock on Linux (`SHMC_BENCH_CLOCK=wall` for the wall clock), as
//! `benches/core.rs` is, so other jobs on a shared machine inflate the numbers less.
//! Activations: without features, `f32` evaluates them with the single-precision
//! [`fastmath32`](shmc_core::fastmath32) functions (four lanes per SSE2 instruction);
//! `cargo bench -p shmc-core --bench scalar --features micromath` measures micromath's, which
//! do not vectorize.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use nalgebra::Dyn;
use shmc_core::random::{SplitMix64, fill_standard_normal};
use shmc_core::{InputTransform, Network, NetworkConfig, OnlineGreville, Potential, Real};

/// The sizes of the issue.
const SIZES: [(usize, usize); 3] = [(2, 16), (10, 64), (50, 256)];
/// Rows the Greville benchmark cycles through.
const ROWS: usize = 64;

/// The benchmark clock: the thread's CPU time on Linux unless `SHMC_BENCH_CLOCK=wall`.
fn now() -> Duration {
    #[cfg(target_os = "linux")]
    if std::env::var("SHMC_BENCH_CLOCK").as_deref() != Ok("wall") {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
        }
    }
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// A softplus network in `T` with random output weights, and a random point.
fn network<T: Real>(d: usize, s: usize) -> (Network<Dyn, Dyn, T>, Vec<T>) {
    let mut rng = SplitMix64(1);
    let transform = InputTransform::identity(Dyn(d));
    let mut net =
        Network::<Dyn, Dyn, T>::random(&NetworkConfig::default(), transform, Dyn(s), &mut rng)
            .unwrap();
    let mut v = vec![T::zero(); s];
    fill_standard_normal(&mut rng, &mut v);
    net.set_output(&v, T::zero()).unwrap();
    let mut q = vec![T::zero(); d];
    fill_standard_normal(&mut rng, &mut q);
    (net, q)
}

/// Runs `routine` `iters` times per sample under criterion and returns the median seconds per
/// call of its measurement samples.
fn measure(c: &mut Criterion, name: &str, mut routine: impl FnMut()) -> f64 {
    let mut per_call = Vec::new();
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let t = now();
            for _ in 0..iters {
                routine();
            }
            let elapsed = now() - t;
            per_call.push(elapsed.as_secs_f64() / iters as f64);
            elapsed
        })
    });
    let mut tail = per_call.split_off(per_call.len().saturating_sub(20));
    tail.sort_by(f64::total_cmp);
    tail.get(tail.len() / 2).copied().unwrap_or(f64::NAN)
}

fn gradient<T: Real>(c: &mut Criterion, d: usize, s: usize) -> f64 {
    let (net, q) = network::<T>(d, s);
    let mut g = vec![T::zero(); d];
    let name = format!("gradient/{}/d{d}_s{s}", std::any::type_name::<T>());
    measure(c, &name, || net.gradient(black_box(&q), black_box(&mut g)))
}

fn greville<T: Real>(c: &mut Criterion, s: usize) -> f64 {
    let mut rng = SplitMix64(2);
    let mut rows = vec![0.0f64; ROWS * s];
    fill_standard_normal(&mut rng, &mut rows);
    let rows: Vec<T> = rows.iter().map(|&x| T::of(x)).collect();
    // A ridge start stays in the c = 0 branch, the one every update takes once s rows are in.
    let mut state = OnlineGreville::<Dyn, T>::ridge(Dyn(s), 1.0).unwrap();
    let mut next = 0;
    let name = format!("greville/{}/s{s}", std::any::type_name::<T>());
    measure(c, &name, || {
        let row = &rows[next * s..(next + 1) * s];
        state.update(black_box(row), T::one());
        next = (next + 1) % ROWS;
    })
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    let mut table = Vec::new();
    for (d, s) in SIZES {
        let (g64, g32) = (gradient::<f64>(&mut c, d, s), gradient::<f32>(&mut c, d, s));
        let (u64_, u32_) = (greville::<f64>(&mut c, s), greville::<f32>(&mut c, s));
        table.push((d, s, g64, g32, u64_, u32_));
    }
    c.final_summary();
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        return; // `cargo test --benches`: each routine ran once; no table.
    }
    println!("\nmedian time per call; ratio = f64 / f32 (f32 throughput relative to f64)");
    println!("  d    s | gradient f64    f32   ratio | Greville f64     f32   ratio");
    for (d, s, g64, g32, u64_, u32_) in table {
        println!(
            "{d:>3} {s:>4} | {:>9.1} ns {:>6.1} ns {:>5.2} | {:>9.1} ns {:>7.1} ns {:>5.2}",
            g64 * 1e9,
            g32 * 1e9,
            g64 / g32,
            u64_ * 1e9,
            u32_ * 1e9,
            u64_ / u32_
        );
    }
}
