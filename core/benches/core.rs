//! Criterion benchmarks of the core's hot paths at the sizes of the papers' experiments, each
//! with a floating-point operation count and a byte count read off the code, so that the timings
//! can be stated as GFLOP/s and GB/s against this machine's limits:
//!
//! 1. `Potential::gradient` of a run-time-sized softplus network, d = 50, s = 2000 (the logistic
//!    regression surrogate of the journal paper).
//! 2. One `OnlineGreville::update` at s = 1000 in the `c = 0` branch (a ridge start, which never
//!    leaves that branch).
//! 3. The same in the `c ≠ 0` branch (rank < s), timed in place, with the state reset to a
//!    prepared rank-500 copy, outside the timing, whenever its rank reaches 990. For comparison:
//!    the update on a fresh clone of the prepared state per iteration (what `iter_batched` would
//!    do; clone untimed), and the clone alone, which costs more than the update it prepares.
//! 4. `OnlineScoreMatching::update_from_network` at d = 5, s = 100 and d = 50, s = 2000.
//! 5. A full surrogate HMC transition at d = 50, s = 2000, L = 6 with a cheap exact target.
//!
//! After criterion's own report, a table prints each kernel's median time per call (from the
//! same samples criterion measured), the operation and byte counts, the achieved rates and their
//! fraction of the machine's limits. On Linux the routines are timed with the thread CPU clock,
//! so that other jobs on a shared machine inflate the numbers less (`SHMC_BENCH_CLOCK=wall` for
//! the wall clock); criterion's own figures are then CPU times too. The limits are those that
//! `/work/shared/tools/machine-limits` measured on this machine (one core: 51.1 GFLOP/s f64 FMA
//! peak, 20.9 GB/s read, 34.6 GB/s copy); override them with `SHMC_PEAK_GFLOPS`,
//! `SHMC_READ_GBPS` and `SHMC_COPY_GBPS`.
//!
//! Counting conventions: one multiply or one add is one flop (an FMA is two); `exp` calls are
//! not counted as flops (the table gives the time per hidden unit, one `exp` each, instead);
//! bytes are the f64 matrix and weight entries each kernel must read or write once per call
//! (vectors of length s or d are negligible and left out). Whether those bytes come from DRAM or
//! from cache is noted per row: L2 is 1 MiB per core and L3 32 MiB shared, so a 1000 × 1000 f64
//! matrix (8 MB) is L3- but not L2-resident.

use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use nalgebra::{DVector, Dyn};
use rand_core::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::random::fill_standard_normal;
use shmc_core::{
    Activation, Hmc, HmcConfig, IdentityMetric, InputTransform, Network, NetworkConfig, Nodes,
    OnlineGreville, OnlineScoreMatching, Potential, State, Steps, Surrogate,
};

fn rng(seed: u64) -> Pcg64 {
    Pcg64::seed_from_u64(seed)
}

/// Whether to time with the thread's CPU clock (the default on Linux) rather than the wall clock
/// (`SHMC_BENCH_CLOCK=wall`). On a machine shared with other jobs the wall clock also counts the
/// time the benchmark thread waits for a core; the thread CPU clock counts only the time it runs
/// (still slowed by whatever shares its caches and memory bus).
fn cpu_clock() -> bool {
    static CPU: OnceLock<bool> = OnceLock::new();
    *CPU.get_or_init(|| {
        cfg!(target_os = "linux") && std::env::var("SHMC_BENCH_CLOCK").as_deref() != Ok("wall")
    })
}

/// The current reading of the benchmark clock (see [`cpu_clock`]).
fn now() -> Duration {
    #[cfg(target_os = "linux")]
    if cpu_clock() {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc == 0 {
            return Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
        }
    }
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// This machine's single-core limits (see the module docs).
struct Limits {
    gflops: f64,
    read_gbps: f64,
    copy_gbps: f64,
}

impl Limits {
    fn get() -> Self {
        let env = |name: &str, default: f64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Self {
            gflops: env("SHMC_PEAK_GFLOPS", 51.1),
            read_gbps: env("SHMC_READ_GBPS", 20.9),
            copy_gbps: env("SHMC_COPY_GBPS", 34.6),
        }
    }
}

/// How a kernel touches memory, for choosing the bandwidth to compare with.
#[derive(Clone, Copy)]
enum Traffic {
    /// Only reads its matrices.
    Read,
    /// Reads and writes them (compared with the copy bandwidth, which counts both).
    ReadWrite,
}

/// One row of the final table.
struct Row {
    name: String,
    /// Median seconds per call over criterion's samples.
    seconds: f64,
    flops: f64,
    bytes: f64,
    traffic: Traffic,
    /// Hidden-unit evaluations per call (one `exp` each), for the time per unit; 0 if not
    /// meaningful.
    units: f64,
    note: &'static str,
}

/// What a benchmark measures, before it is run.
struct Kernel {
    name: String,
    flops: f64,
    bytes: f64,
    traffic: Traffic,
    /// As in [`Row`].
    units: f64,
    note: &'static str,
}

/// Runs `routine` under criterion and adds the kernel's table row with the median time per call
/// over criterion's measurement samples. `setup` builds the routine's state on first use, so a
/// benchmark that a command-line filter skips costs nothing; `routine(state, iters)` performs
/// `iters` calls and returns the time they took.
fn bench<T, Setup, F>(
    c: &mut Criterion,
    rows: &mut Vec<Row>,
    kernel: Kernel,
    (samples, measurement): (usize, Duration),
    setup: Setup,
    mut routine: F,
) where
    Setup: FnOnce() -> T,
    F: FnMut(&mut T, u64) -> Duration,
{
    let mut setup = Some(setup);
    let mut state: Option<T> = None;
    let mut per_call: Vec<f64> = Vec::new();
    let mut group = c.benchmark_group("core");
    group.sample_size(samples).measurement_time(measurement);
    group.throughput(Throughput::ElementsAndBytes {
        elements: kernel.flops as u64,
        bytes: kernel.bytes as u64,
    });
    group.bench_function(&kernel.name, |b| {
        let st = state.get_or_insert_with(|| (setup.take().expect("set up once"))());
        b.iter_custom(|iters| {
            let t = routine(st, iters);
            per_call.push(t.as_secs_f64() / iters as f64);
            t
        })
    });
    group.finish();
    if per_call.is_empty() {
        return; // filtered out
    }
    // The last `samples` calls are criterion's measurement; the ones before are its warm-up.
    let start = per_call.len().saturating_sub(samples);
    let mut measured = per_call[start..].to_vec();
    measured.sort_by(f64::total_cmp);
    rows.push(Row {
        name: kernel.name,
        seconds: measured[measured.len() / 2],
        flops: kernel.flops,
        bytes: kernel.bytes,
        traffic: kernel.traffic,
        units: kernel.units,
        note: kernel.note,
    });
}

fn softplus_network(d: usize, s: usize, seed: u64) -> Network<Dyn, Dyn> {
    let mut r = rng(seed);
    let config = NetworkConfig {
        nodes: Nodes::Additive(Activation::Softplus),
        ..NetworkConfig::default()
    };
    let mut net = Network::random(&config, InputTransform::identity(Dyn(d)), Dyn(s), &mut r)
        .expect("valid configuration");
    let mut v = vec![0.0; s];
    fill_standard_normal(&mut r, &mut v);
    v.iter_mut().for_each(|x| *x *= 0.01);
    net.set_output(&v, 0.0).expect("finite weights");
    net
}

fn random_points(d: usize, n: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut r = rng(seed);
    (0..n)
        .map(|_| {
            let mut q = vec![0.0; d];
            fill_standard_normal(&mut r, &mut q);
            q
        })
        .collect()
}

/// Flops of one `Potential::gradient` of a softplus network: per unit a dot product (2d), the
/// offset (1), the logistic (an add and a divide beside the `exp`), `vᵢ·a'` (1) and an axpy (2d).
fn gradient_flops(d: usize, s: usize) -> f64 {
    (s * (4 * d + 4)) as f64
}

fn bench_gradient(c: &mut Criterion, rows: &mut Vec<Row>) {
    let (d, s) = (50, 2000);
    let kernel = Kernel {
        name: format!("network gradient d={d} s={s}"),
        flops: gradient_flops(d, s),
        bytes: ((d + 2) * s * 8) as f64,
        traffic: Traffic::Read,
        units: s as f64,
        note: "weights 0.83 MB: L2-resident",
    };
    bench(
        c,
        rows,
        kernel,
        (100, Duration::from_secs(3)),
        || {
            (
                softplus_network(d, s, 1),
                random_points(d, 64, 2),
                vec![0.0; d],
                0,
            )
        },
        |(net, points, g, k), iters| {
            let t = now();
            for _ in 0..iters {
                net.gradient(black_box(&points[*k % points.len()]), g);
                black_box(&g);
                *k += 1;
            }
            now() - t
        },
    );
}

/// Entries of the stored lower triangle of an s × s matrix.
fn triangle(s: usize) -> f64 {
    (s * (s + 1) / 2) as f64
}

/// The Greville update as `greville.rs` performs it, in units of the lower triangle `T = s(s+1)/2`
/// (nalgebra's `sygemv` reads each stored entry once for a dot product and once for an axpy: 4
/// flops per entry, i.e. ≈ 2s²; `syger` does one multiply-add per stored entry: ≈ s²):
/// - `c = 0`: `Θh` (sygemv) + one syger on Θ: 6T ≈ 3s² flops; Θ read twice, written once.
/// - `c ≠ 0`: `Θh` and `Φh` (two sygemv), one syger on Φ, two on Θ: 14T ≈ 7s² flops; Φ read twice
///   and written once, Θ read three times and written twice.
///
/// plus O(s) vector work (a few dot products and axpys, ≈ 10s flops). In a `sygemv` the column
/// read by the dot product is read again by the axpy straight away, from L1, so it counts once.
fn greville_counts(s: usize, new_direction: bool) -> (f64, f64) {
    let t = triangle(s);
    let vec = 10.0 * s as f64;
    if new_direction {
        (14.0 * t + vec, (5.0 + 3.0) * t * 8.0)
    } else {
        (6.0 * t + vec, (2.0 + 1.0) * t * 8.0)
    }
}

/// Random feature rows (standard normal; the cost of an update does not depend on the values).
fn rows_and_targets(s: usize, n: usize, seed: u64) -> (Vec<Vec<f64>>, Vec<f64>) {
    let rows = random_points(s, n, seed);
    let mut t = vec![0.0; n];
    fill_standard_normal(&mut rng(seed + 1), &mut t);
    (rows, t)
}

/// A state of rank `PREPARED_RANK` from the plain start, and the rows to continue with.
struct Prepared {
    state: OnlineGreville<Dyn>,
    rows: Vec<Vec<f64>>,
    targets: Vec<f64>,
}

const GREVILLE_S: usize = 1000;
const PREPARED_RANK: usize = 500;

fn prepare_greville() -> Prepared {
    let s = GREVILLE_S;
    let (rows, targets) = rows_and_targets(s, s, 5);
    let mut state = OnlineGreville::new(Dyn(s), 1e-8).expect("valid tolerance");
    for j in 0..PREPARED_RANK {
        state.update(&rows[j], targets[j]);
    }
    assert_eq!(state.rank(), PREPARED_RANK);
    Prepared {
        state,
        rows,
        targets,
    }
}

fn bench_greville(c: &mut Criterion, rows: &mut Vec<Row>) {
    let s = GREVILLE_S;
    let timing = (30, Duration::from_secs(3));

    // (ii) c = 0: a ridge start has rank s from the outset, so every update takes that branch.
    let (flops, bytes) = greville_counts(s, false);
    bench(
        c,
        rows,
        Kernel {
            name: format!("greville update c=0 s={s}"),
            flops,
            bytes,
            traffic: Traffic::ReadWrite,
            units: 0.0,
            note: "Θ lower 4 MB: L3-resident",
        },
        timing,
        || {
            let (data, targets) = rows_and_targets(s, 256, 3);
            let ridge = OnlineGreville::ridge(Dyn(s), 1e-6).expect("valid ridge");
            (ridge, data, targets, 0)
        },
        |(ridge, data, targets, k), iters| {
            let t = now();
            for _ in 0..iters {
                let j = *k % data.len();
                ridge.update(black_box(&data[j]), targets[j]);
                *k += 1;
            }
            let elapsed = now() - t;
            assert_eq!(ridge.rank(), s);
            elapsed
        },
    );

    // (iii) c ≠ 0: from the prepared state of rank 500, each new independent row adds a
    // direction. The updates run in place; when the rank reaches 990 the state is reset to the
    // prepared one outside the timed region, so only updates are timed, every one of them in
    // the c ≠ 0 branch, on a state that is as warm in cache as in a real run.
    let prepared = std::cell::OnceCell::new();
    let (flops, bytes) = greville_counts(s, true);
    bench(
        c,
        rows,
        Kernel {
            name: format!("greville update c≠0 s={s}, in place"),
            flops,
            bytes,
            traffic: Traffic::ReadWrite,
            units: 0.0,
            note: "Φ+Θ lower 8 MB: L3-resident",
        },
        timing,
        || {
            let p: &Prepared = prepared.get_or_init(prepare_greville);
            (p, p.state.clone())
        },
        |(p, state), iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                if state.rank() >= s - 10 {
                    state.clone_from(&p.state);
                }
                let j = state.rows();
                let t = now();
                state.update(black_box(&p.rows[j]), p.targets[j]);
                total += now() - t;
            }
            assert_eq!(state.rank(), state.rows());
            total
        },
    );

    // The same with a fresh clone per iteration, as `iter_batched` would do it: the clone is not
    // timed, but it leaves the copy freshly written in cache, and it costs about as much as the
    // update itself (next row), so a clone per iteration is a poor way to keep the state from
    // filling.
    bench(
        c,
        rows,
        Kernel {
            name: format!("greville update c≠0 s={s}, fresh clone"),
            flops,
            bytes,
            traffic: Traffic::ReadWrite,
            units: 0.0,
            note: "as above, on a just-copied state",
        },
        timing,
        || prepared.get_or_init(prepare_greville),
        |p, iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut fresh = p.state.clone();
                let t = now();
                fresh.update(black_box(&p.rows[PREPARED_RANK]), p.targets[PREPARED_RANK]);
                total += now() - t;
                black_box(&fresh);
            }
            total
        },
    );

    // The clone alone: two full s × s matrices (16 MB) read and written, plus the allocation.
    bench(
        c,
        rows,
        Kernel {
            name: format!("greville state clone s={s}"),
            flops: 0.0,
            bytes: (2 * s * s * 8 * 2) as f64,
            traffic: Traffic::ReadWrite,
            units: 0.0,
            note: "2 full matrices read + written, incl. alloc",
        },
        timing,
        || prepared.get_or_init(prepare_greville),
        |p, iters| {
            let t = now();
            for _ in 0..iters {
                black_box(p.state.clone());
            }
            now() - t
        },
    );
}

/// Flops of `update_from_network` as `score_matching.rs` performs it: the design block
/// (feature gradients, ≈ 4sd), `K = AC` (2ds²), `M = I + KAᵀ` (s rank-one updates of a d × d
/// matrix, 2d²s), a Cholesky of M (d³/3), `W = M⁻¹K` (two triangular solves with s right-hand
/// sides, 2d²s), the residual and the weight update (two gemv, 4ds) and `C ← C − KᵀW` (2ds²).
fn score_matching_counts(d: usize, s: usize) -> (f64, f64) {
    let (d, s) = (d as f64, s as f64);
    let flops = 4.0 * d * s * s + 4.0 * d * d * s + d * d * d / 3.0 + 8.0 * d * s;
    // C (s × s, stored in full) is read by the gemm and read and written by the gemm_tr.
    let bytes = 3.0 * s * s * 8.0;
    (flops, bytes)
}

fn bench_score_matching(c: &mut Criterion, rows: &mut Vec<Row>) {
    for (d, s, samples, note) in [
        (5, 100, 50, "C 80 kB: L2-resident"),
        (50, 2000, 10, "C 32 MB: L3-sized"),
    ] {
        let (flops, bytes) = score_matching_counts(d, s);
        bench(
            c,
            rows,
            Kernel {
                name: format!("score matching update d={d} s={s}"),
                flops,
                bytes,
                traffic: Traffic::ReadWrite,
                units: 0.0,
                note,
            },
            (samples, Duration::from_secs(8)),
            || {
                let net = softplus_network(d, s, 7);
                let points = random_points(d, 64, 8);
                let sm = OnlineScoreMatching::new(Dyn(d), Dyn(s), 1.0).expect("valid ridge");
                (net, points, sm, 0)
            },
            |(net, points, sm, k), iters| {
                let t = now();
                for _ in 0..iters {
                    // A standard normal target: ∇U(q) = q.
                    let q = &points[*k % points.len()];
                    sm.update_from_network(net, black_box(q), q)
                        .expect("finite target");
                    *k += 1;
                }
                now() - t
            },
        );
    }
}

/// `U(q) = ½‖q‖²`: a target that costs nothing next to the surrogate.
struct StandardNormal(usize);

impl Potential for StandardNormal {
    fn dim(&self) -> usize {
        self.0
    }
    fn value(&self, q: &[f64]) -> f64 {
        0.5 * q.iter().map(|x| x * x).sum::<f64>()
    }
    fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
        g.copy_from_slice(q);
        self.value(q)
    }
}

fn bench_transition(c: &mut Criterion, rows: &mut Vec<Row>) {
    let (d, s, steps) = (50, 2000, 6);
    let target = StandardNormal(d);
    let flops = steps as f64 * gradient_flops(d, s) + 20.0 * d as f64;
    bench(
        c,
        rows,
        Kernel {
            name: format!("surrogate HMC transition d={d} s={s} L={steps}"),
            flops,
            bytes: steps as f64 * ((d + 2) * s * 8) as f64,
            traffic: Traffic::Read,
            units: steps as f64 * s as f64,
            note: "6 gradients + O(d) leapfrog/MH",
        },
        (100, Duration::from_secs(3)),
        || {
            let net = softplus_network(d, s, 9);
            let config = HmcConfig::new(0.1, Steps::Fixed(steps)).expect("valid settings");
            let hmc = Hmc::new(Dyn(d), config).expect("valid settings");
            let dynamics = Surrogate {
                target: &target,
                proposal: net,
            };
            let state = State::new(DVector::zeros(d), &dynamics).expect("matching dimension");
            (dynamics, hmc, state, rng(10))
        },
        |(dynamics, hmc, state, r), iters| {
            let t = now();
            for _ in 0..iters {
                black_box(hmc.transition(state, dynamics, &IdentityMetric, r));
            }
            now() - t
        },
    );
}

fn print_table(rows: &[Row]) {
    if rows.is_empty() {
        return;
    }
    let limits = Limits::get();
    println!(
        "\nTimes: median per call over criterion's samples, {} clock.",
        if cpu_clock() { "thread CPU" } else { "wall" }
    );
    println!(
        "Limits (one core): {:.1} GFLOP/s f64 peak, {:.1} GB/s read, {:.1} GB/s copy (read+write)",
        limits.gflops, limits.read_gbps, limits.copy_gbps
    );
    println!(
        "{:<44} {:>11} {:>10} {:>8} {:>7} {:>9} {:>7} {:>7} {:>9}  note",
        "kernel", "time", "flop", "GFLOP/s", "%peak", "bytes", "GB/s", "%bw", "ns/unit"
    );
    for r in rows {
        let gflops = r.flops / r.seconds / 1e9;
        let gbps = r.bytes / r.seconds / 1e9;
        let bw = match r.traffic {
            Traffic::Read => limits.read_gbps,
            Traffic::ReadWrite => limits.copy_gbps,
        };
        // Time per hidden-unit evaluation (each one `exp` plus two length-d loops).
        let per_unit = if r.units > 0.0 {
            format!("{:.1}", r.seconds / r.units * 1e9)
        } else {
            "-".into()
        };
        println!(
            "{:<44} {:>11} {:>10.3e} {:>8.2} {:>6.1}% {:>9} {:>7.2} {:>6.1}% {:>9}  {}",
            r.name,
            format_time(r.seconds),
            r.flops,
            gflops,
            100.0 * gflops / limits.gflops,
            format_bytes(r.bytes),
            gbps,
            100.0 * gbps / bw,
            per_unit,
            r.note
        );
    }
    if cfg!(target_feature = "fma") {
        println!("Compiled with FMA: the core's loops can in principle reach the peak.");
    } else {
        println!(
            "Compiled without AVX/FMA (no -C target-cpu=native): the core's own loops use SSE2, \
             two doubles per instruction and no fused multiply-add, so their ceiling is a quarter \
             of the FMA peak, {:.1} GFLOP/s; matrixmultiply (the gemm in score matching) picks \
             AVX2/FMA at run time.",
            limits.gflops / 4.0
        );
    }
    println!(
        "%bw compares with the read bandwidth for read-only kernels and the copy bandwidth for \
         read-write ones; both were measured on DRAM-sized arrays, so a cache-resident kernel \
         can exceed 100%."
    );
}

fn format_time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.2} µs", s * 1e6)
    } else {
        format!("{:.3} ms", s * 1e3)
    }
}

fn format_bytes(b: f64) -> String {
    if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else {
        format!("{:.1} kB", b / 1e3)
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let mut rows = Vec::new();
    bench_gradient(&mut c, &mut rows);
    bench_greville(&mut c, &mut rows);
    bench_score_matching(&mut c, &mut rows);
    bench_transition(&mut c, &mut rows);
    c.final_summary();
    // `cargo bench` passes `--bench`; `cargo test --benches` and `-- --test` run each kernel once.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--test") || !args.iter().any(|a| a == "--bench") {
        println!("Test mode: each kernel ran once, cold; no table.");
    } else {
        print_table(&rows);
    }
}
