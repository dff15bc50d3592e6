//! A `#![no_std]`, `#![no_main]` binary with no global allocator that runs shmc-core end to end
//! as a device would, in `f64` or (feature `f32`) in `f32` with micromath's activations:
//!
//! 1. exact HMC on a 2-D banana, every state going into a heapless [`TrainingBuffer`] and an
//!    online Greville fit of a 16-unit random network;
//! 2. ARNS-HMC on the device: surrogate HMC driven by that network and judged by the exact
//!    potential, each accepted state added to the buffer and the fit with probability `1/t`
//!    (vanishing adaptation); the Greville state starts from the ridge start at
//!    [`F32_RIDGE`], the rule for single precision (in f64 too, so both run the same code);
//! 3. the surrogate chain's moments checked against the banana's known ones within 4 Monte
//!    Carlo standard errors (batch means).
//!
//! That it links at all proves the core needs neither std nor alloc; its exit code says whether
//! the numbers came out right. It also measures its peak stack by painting the stack before the
//! work and scanning it after.
//!
//! It starts through the C library's start-up code (`crt1.o` calls `main`), so it runs on the
//! ordinary x86_64 Linux host target without any extra rustup target. The only unsafe code is
//! here, in the probe: calls to the C library's `write` and `abort`, and the stack painting.
#![no_std]
#![no_main]

use shmc_core::nalgebra::Vector2;
use shmc_core::random::{SplitMix64, uniform_below};
use shmc_core::training::F32_RIDGE;
use shmc_core::{
    Const, Exact, FixedGreville, FixedHmc, FixedNetwork, FixedState, HmcConfig, IdentityMetric,
    InputTransform, NetworkConfig, Potential, Real, State, Steps, Surrogate, TrainingBuffer,
};

/// The scalar the probe computes in.
#[cfg(not(feature = "f32"))]
type R = f64;
/// The scalar the probe computes in.
#[cfg(feature = "f32")]
type R = f32;

/// Input dimension.
const D: usize = 2;
/// Hidden units.
const S: usize = 16;
/// States the training buffer keeps.
const KEEP: usize = 64;
/// Exact transitions, each adding one training row.
const EXACT: u32 = 1000;
/// Surrogate transitions, in `BATCHES` batches for the Monte Carlo standard errors.
const SURROGATE: u32 = 20_000;
const BATCHES: usize = 20;
/// The banana's bend `b`.
const BEND: f64 = 0.5;
/// The banana's moments `E[q₀], E[q₁], E[q₀²], E[q₁²]`: `q₀ ~ N(0, 1)` and
/// `q₁ | q₀ ~ N(b q₀², 1)`, so `E[q₁] = b` and `E[q₁²] = 1 + 3b²`.
const MOMENTS: [f64; 4] = [0.0, BEND, 1.0, 1.0 + 3.0 * BEND * BEND];

// Exit-code bits: every failed check sets one, so the code says what went wrong.
const BAD_SETUP: i32 = 1;
const BAD_EXACT_STATE: i32 = 2;
const NO_EXACT_ACCEPT: i32 = 4;
const BAD_GREVILLE: i32 = 8;
const BAD_SURROGATE_STATE: i32 = 16;
const NO_SURROGATE_ACCEPT: i32 = 32;
const BAD_MOMENTS: i32 = 64;

unsafe extern "C" {
    fn write(fd: i32, buf: *const u8, count: usize) -> isize;
    fn abort() -> !;
}

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // SAFETY: `abort` takes no arguments and never returns.
    unsafe { abort() }
}

/// The precompiled `core` is built for unwinding, so its unwind tables name this symbol even
/// though with `panic = "abort"` nothing ever unwinds. Without std nobody defines it; this
/// stand-in is never called.
#[unsafe(no_mangle)]
pub extern "C" fn rust_eh_personality() {}

/// The banana `U(q) = ½q₀² + ½(q₁ − b·q₀²)²`: a standard normal bent along a parabola.
struct Banana {
    bend: R,
}

impl Potential<R> for Banana {
    fn dim(&self) -> usize {
        D
    }

    fn value(&self, q: &[R]) -> R {
        let [q0, q1] = point(q);
        let r = q1 - self.bend * q0 * q0;
        0.5 * (q0 * q0 + r * r)
    }

    fn value_and_gradient(&self, q: &[R], grad: &mut [R]) -> R {
        let [q0, q1] = point(q);
        let r = q1 - self.bend * q0 * q0;
        if let [g0, g1] = grad {
            *g0 = q0 - 2.0 * self.bend * q0 * r;
            *g1 = r;
        }
        0.5 * (q0 * q0 + r * r)
    }
}

/// The two coordinates of `q` (NaN if it is not 2-D, which the chain then rejects).
fn point(q: &[R]) -> [R; 2] {
    match q {
        [q0, q1] => [*q0, *q1],
        _ => [R::NAN; 2],
    }
}

fn finite(state: &FixedState<D, R>) -> bool {
    state.potential.is_finite() && state.position.iter().all(|x| x.is_finite())
}

/// What a run saw.
#[derive(Default)]
struct Report {
    exact_accepted: u32,
    rank: usize,
    surrogate_accepted: u32,
    updates: u32,
    /// Per moment, `(mean − truth) / MCSE` in hundredths.
    z_centi: [i64; 4],
}

/// Batch sums of `q₀, q₁, q₀², q₁²` for the batch-means standard errors.
struct Moments {
    batch: [[f64; 4]; BATCHES],
}

impl Moments {
    fn add(&mut self, index: u32, q: [R; 2]) {
        let per_batch = SURROGATE / BATCHES as u32;
        let Some(sums) = self.batch.get_mut((index / per_batch) as usize) else {
            return;
        };
        let (q0, q1) = (q[0].to_f64(), q[1].to_f64());
        for (sum, x) in sums.iter_mut().zip([q0, q1, q0 * q0, q1 * q1]) {
            *sum += x;
        }
    }

    /// Per moment, `(mean − truth) / MCSE` with the MCSE from the spread of the batch means.
    fn z_scores(&self) -> [f64; 4] {
        let per_batch = f64::from(SURROGATE / BATCHES as u32);
        let b = BATCHES as f64;
        let mut z = [0.0; 4];
        for (k, zk) in z.iter_mut().enumerate() {
            let (mut sum, mut sum2) = (0.0, 0.0);
            for sums in &self.batch {
                let m = sums[k] / per_batch;
                sum += m;
                sum2 += m * m;
            }
            let mean = sum / b;
            let var = (sum2 - b * mean * mean) / (b - 1.0);
            let mcse = libm::sqrt(var / b);
            *zk = (mean - MOMENTS[k]) / mcse;
        }
        z
    }
}

/// Runs the whole pipeline and returns the exit code (0 when every check passes). Not inlined,
/// so that its frames lie below the painted top of the stack.
#[inline(never)]
fn run(report: &mut Report) -> i32 {
    let mut rng = SplitMix64(0x5EED_0F_5A3C);
    let banana = Banana { bend: BEND as R };
    let Ok(mut network) = FixedNetwork::<D, S, R>::random(
        &NetworkConfig::default(),
        InputTransform::identity(Const::<D>),
        Const::<S>,
        &mut rng,
    ) else {
        return BAD_SETUP;
    };
    let Ok(mut greville) = FixedGreville::<S, R>::ridge(Const::<S>, F32_RIDGE) else {
        return BAD_SETUP;
    };
    let Ok(config) = HmcConfig::new(0.2, Steps::Jittered(8)) else {
        return BAD_SETUP;
    };
    let Ok(mut hmc) = FixedHmc::<D, R>::new(Const::<D>, config) else {
        return BAD_SETUP;
    };
    let mut buffer = TrainingBuffer::<R, D, KEEP>::new();
    let mut h = [0.0; S];

    // Exact HMC; every visited state becomes a training row (features, exact U).
    let exact = Exact(&banana);
    let Ok(mut state) = State::new(Vector2::new(0.5, 0.0), &exact) else {
        return BAD_SETUP;
    };
    let mut code = 0;
    for _ in 0..EXACT {
        let t = hmc.transition(&mut state, &exact, &IdentityMetric, &mut rng);
        report.exact_accepted += u32::from(t.accepted);
        if !finite(&state) {
            code |= BAD_EXACT_STATE;
            break;
        }
        let q = state.position.as_slice();
        if buffer.push(q, state.potential).is_err() {
            return code | BAD_SETUP;
        }
        network.features(q, &mut h);
        greville.update(&h, state.potential);
    }
    if report.exact_accepted == 0 {
        code |= NO_EXACT_ACCEPT;
    }
    report.rank = greville.rank();
    if report.rank == 0 || network.set_output(greville.weights(), 0.0).is_err() {
        return code | BAD_GREVILLE;
    }

    // ARNS-HMC: the network's gradient drives the leapfrog, the exact U judges; accepted
    // states train the network with probability 1/t (the schedule t^−κ at κ = 1, drawn with
    // integers).
    let mut moments = Moments {
        batch: [[0.0; 4]; BATCHES],
    };
    state.refresh(&Surrogate {
        target: &banana,
        proposal: &network,
    });
    for t in 0..SURROGATE {
        let surrogate = Surrogate {
            target: &banana,
            proposal: &network,
        };
        let step = hmc.transition(&mut state, &surrogate, &IdentityMetric, &mut rng);
        if !finite(&state) || !step.energy.is_finite() {
            code |= BAD_SURROGATE_STATE;
            break;
        }
        moments.add(t, point(state.position.as_slice()));
        if !step.accepted {
            continue;
        }
        report.surrogate_accepted += 1;
        if uniform_below(&mut rng, u64::from(t) + 1) != 0 {
            continue;
        }
        let q = state.position.as_slice();
        if buffer.push(q, state.potential).is_err() {
            return code | BAD_SETUP;
        }
        report.updates += 1;
        network.features(q, &mut h);
        greville.update(&h, state.potential);
        if network.set_output(greville.weights(), 0.0).is_err() {
            return code | BAD_GREVILLE;
        }
        state.refresh_gradient(&Surrogate {
            target: &banana,
            proposal: &network,
        });
    }
    if report.surrogate_accepted == 0 {
        code |= NO_SURROGATE_ACCEPT;
    }
    let z = moments.z_scores();
    for (zk, out) in z.iter().zip(report.z_centi.iter_mut()) {
        if !(zk.abs() <= 4.0) {
            code |= BAD_MOMENTS;
        }
        if zk.is_finite() {
            *out = (zk * 100.0) as i64;
        }
    }
    code
}

/// A line of output built in a fixed buffer, so that printing needs neither alloc nor
/// `core::fmt`.
struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    fn new() -> Self {
        Self {
            buf: [0; 256],
            len: 0,
        }
    }

    #[inline(never)]
    fn text(&mut self, s: &str) -> &mut Self {
        for (slot, &b) in self.buf.iter_mut().skip(self.len).zip(s.as_bytes()) {
            *slot = b;
            self.len += 1;
        }
        self
    }

    fn int(&mut self, x: i64) -> &mut Self {
        if x < 0 {
            self.text("-");
        }
        let mut digits = [0u8; 20];
        let mut n = 0;
        let mut m = x.unsigned_abs();
        for slot in digits.iter_mut() {
            *slot = b'0' + (m % 10) as u8;
            n += 1;
            m /= 10;
            if m == 0 {
                break;
            }
        }
        for &digit in digits.iter().take(n).rev() {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = digit;
                self.len += 1;
            }
        }
        self
    }

    fn print(&self) {
        let len = self.len.min(self.buf.len());
        // SAFETY: the pointer and length describe initialised bytes of `self.buf`.
        unsafe {
            write(1, self.buf.as_ptr(), len);
        }
    }
}

/// Stack painting. Everything here is outside Rust's memory model on purpose: it writes and
/// reads the bytes *below* the current stack frame, which no Rust object owns, with volatile
/// accesses the compiler cannot elide. On x86-64 Linux the main thread's stack below the
/// stack pointer is mapped on demand, and nothing else (no signal handler) uses it meanwhile.
mod stack {
    /// How far below `main`'s frame the stack is painted (more than the probe uses).
    pub const DEPTH: usize = 32 * 1024;
    /// Skipped below the painter's own frame, which it must not overwrite while running.
    const GAP: usize = 512;
    const PAINT: u8 = 0xA5;

    /// Paints `DEPTH` bytes below the caller's frame and returns the top of the painted range.
    #[inline(never)]
    pub fn paint() -> usize {
        let marker = 0u8;
        let top = core::ptr::addr_of!(marker) as usize - GAP;
        for address in top - DEPTH..top {
            // SAFETY: see the module docs: stack memory below every live frame.
            unsafe { core::ptr::write_volatile(address as *mut u8, PAINT) };
        }
        top
    }

    /// How many bytes below `top` were written since [`paint`] (the lowest changed byte).
    #[inline(never)]
    pub fn used(top: usize) -> usize {
        for address in top - DEPTH..top {
            // SAFETY: as in `paint`; the range was painted and is still mapped.
            if unsafe { core::ptr::read_volatile(address as *const u8) } != PAINT {
                return top - address;
            }
        }
        0
    }
}

/// The C entry point, called by the C library's start-up code: paints the stack, runs the
/// probe below its own small frame and reports.
#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: i32, _argv: *const *const u8) -> i32 {
    let top = stack::paint();
    let mut report = Report::default();
    let code = run(&mut report);
    let stack = stack::used(top);
    print(&report, code, stack);
    code
}

/// Prints the report, the exit code and the peak stack.
#[inline(never)]
fn print(report: &Report, code: i32, stack: usize) {
    let mut line = Line::new();
    line.text(if cfg!(feature = "f32") {
        "probe f32"
    } else {
        "probe f64"
    })
    .text(": exact accepted ")
    .int(report.exact_accepted.into())
    .text("/")
    .int(EXACT.into())
    .text(", greville rank ")
    .int(report.rank as i64)
    .text("/")
    .int(S as i64)
    .text(", surrogate accepted ")
    .int(report.surrogate_accepted.into())
    .text("/")
    .int(SURROGATE.into())
    .text(", updates ")
    .int(report.updates.into())
    .text(", moment z-scores x100");
    for z in report.z_centi {
        line.text(" ").int(z);
    }
    line.text(", exit code ")
        .int(code.into())
        .text("\nstack_bytes ")
        .int(stack as i64)
        .text("\n")
        .print();
}
