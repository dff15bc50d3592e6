//! A `#![no_std]`, `#![no_main]` binary with no global allocator that runs shmc-core end to end:
//! exact HMC on a 2-D banana, online Greville fitting of a 16-unit random network to the visited
//! states, then surrogate HMC driven by that network. That it links at all proves the core needs
//! neither std nor alloc; its exit code says whether the numbers came out sane.
//!
//! It starts through the C library's start-up code (`crt1.o` calls `main`), so it runs on the
//! ordinary x86_64 Linux host target without any extra rustup target. The only unsafe code is
//! here, in the probe: calls to the C library's `write` and `abort`.
#![no_std]
#![no_main]

use shmc_core::greville::DEFAULT_TOLERANCE;
use shmc_core::nalgebra::Vector2;
use shmc_core::random::SplitMix64;
use shmc_core::{
    Const, Exact, FixedGreville, FixedHmc, FixedNetwork, FixedState, HmcConfig, IdentityMetric,
    InputTransform, NetworkConfig, Potential, State, Steps, Surrogate,
};

/// Input dimension.
const D: usize = 2;
/// Hidden units.
const S: usize = 16;
/// Exact transitions, each adding one training row.
const EXACT: u32 = 300;
/// Surrogate transitions.
const SURROGATE: u32 = 100;

// Exit-code bits: every failed check sets one, so the code says what went wrong.
const BAD_SETUP: i32 = 1;
const BAD_EXACT_STATE: i32 = 2;
const NO_EXACT_ACCEPT: i32 = 4;
const BAD_GREVILLE: i32 = 8;
const BAD_SURROGATE_STATE: i32 = 16;
const NO_SURROGATE_ACCEPT: i32 = 32;
const BAD_FIT: i32 = 64;

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
    bend: f64,
}

impl Potential for Banana {
    fn dim(&self) -> usize {
        D
    }

    fn value(&self, q: &[f64]) -> f64 {
        let r = q[1] - self.bend * q[0] * q[0];
        0.5 * (q[0] * q[0] + r * r)
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let r = q[1] - self.bend * q[0] * q[0];
        grad[0] = q[0] - 2.0 * self.bend * q[0] * r;
        grad[1] = r;
        0.5 * (q[0] * q[0] + r * r)
    }
}

fn finite(state: &FixedState<D>) -> bool {
    state.potential.is_finite() && state.position.iter().all(|x| x.is_finite())
}

/// What a run saw.
#[derive(Default)]
struct Report {
    exact_accepted: u32,
    rank: usize,
    surrogate_accepted: u32,
    /// `1 − Σ(z − U)² / Σ(U − mean U)²` over the surrogate chain's states, in thousandths.
    fit_permille: i64,
}

/// Runs the whole pipeline and returns the exit code (0 when every check passes).
fn run(report: &mut Report) -> i32 {
    let mut rng = SplitMix64(0x5EED_0F_5A3C);
    let banana = Banana { bend: 0.5 };
    let Ok(mut network) = FixedNetwork::<D, S>::random(
        &NetworkConfig::default(),
        InputTransform::identity(Const::<D>),
        Const::<S>,
        &mut rng,
    ) else {
        return BAD_SETUP;
    };
    let Ok(mut greville) = FixedGreville::<S>::new(Const::<S>, DEFAULT_TOLERANCE) else {
        return BAD_SETUP;
    };
    let Ok(config) = HmcConfig::new(0.2, Steps::Jittered(8)) else {
        return BAD_SETUP;
    };
    let Ok(mut hmc) = FixedHmc::<D>::new(Const::<D>, config) else {
        return BAD_SETUP;
    };

    // Exact HMC; every visited state becomes a training row (features, exact U).
    let exact = Exact(&banana);
    let Ok(mut state) = State::new(Vector2::new(0.5, 0.0), &exact) else {
        return BAD_SETUP;
    };
    let mut code = 0;
    let mut h = [0.0; S];
    for _ in 0..EXACT {
        let t = hmc.transition(&mut state, &exact, &IdentityMetric, &mut rng);
        report.exact_accepted += u32::from(t.accepted);
        if !finite(&state) {
            code |= BAD_EXACT_STATE;
            break;
        }
        network.features(state.position.as_slice(), &mut h);
        greville.update(&h, state.potential);
    }
    if report.exact_accepted == 0 {
        code |= NO_EXACT_ACCEPT;
    }

    // The surrogate takes the least-squares output weights.
    report.rank = greville.rank();
    let weights = greville.weights();
    if report.rank == 0 || weights.iter().any(|v| !v.is_finite()) {
        return code | BAD_GREVILLE;
    }
    if network.set_output(weights, 0.0).is_err() {
        return code | BAD_GREVILLE;
    }

    // Surrogate HMC: the network's gradient drives the leapfrog, the exact U judges.
    let surrogate = Surrogate {
        target: &banana,
        proposal: &network,
    };
    state.refresh(&surrogate);
    let (mut n, mut sum_u, mut sum_u2, mut sum_err2) = (0.0, 0.0, 0.0, 0.0);
    for _ in 0..SURROGATE {
        let t = hmc.transition(&mut state, &surrogate, &IdentityMetric, &mut rng);
        report.surrogate_accepted += u32::from(t.accepted);
        if !finite(&state) || !t.energy.is_finite() {
            code |= BAD_SURROGATE_STATE;
            break;
        }
        let u = state.potential;
        let err = network.value(state.position.as_slice()) - u;
        n += 1.0;
        sum_u += u;
        sum_u2 += u * u;
        sum_err2 += err * err;
    }
    if report.surrogate_accepted == 0 {
        code |= NO_SURROGATE_ACCEPT;
    }
    let spread = sum_u2 - sum_u * sum_u / n;
    let fit = 1.0 - sum_err2 / spread;
    // The surrogate must predict U better than its mean does.
    if !(fit.is_finite() && fit > 0.0) {
        code |= BAD_FIT;
    }
    if fit.is_finite() {
        report.fit_permille = (fit * 1000.0) as i64;
    }
    code
}

/// A line of output built in a fixed buffer, so that printing needs neither alloc nor
/// `core::fmt`.
struct Line {
    buf: [u8; 192],
    len: usize,
}

impl Line {
    fn new() -> Self {
        Self {
            buf: [0; 192],
            len: 0,
        }
    }

    fn text(&mut self, s: &str) -> &mut Self {
        for &b in s.as_bytes() {
            if self.len < self.buf.len() {
                self.buf[self.len] = b;
                self.len += 1;
            }
        }
        self
    }

    fn int(&mut self, x: i64) -> &mut Self {
        if x < 0 {
            self.text("-");
        }
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        let mut m = x.unsigned_abs();
        loop {
            i -= 1;
            digits[i] = b'0' + (m % 10) as u8;
            m /= 10;
            if m == 0 {
                break;
            }
        }
        // The digits are ASCII.
        self.text(core::str::from_utf8(&digits[i..]).unwrap_or("?"))
    }

    fn print(&self) {
        // SAFETY: the pointer and length describe initialised bytes of `self.buf`.
        unsafe {
            write(1, self.buf.as_ptr(), self.len);
        }
    }
}

/// The C entry point, called by the C library's start-up code.
#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: i32, _argv: *const *const u8) -> i32 {
    let mut report = Report::default();
    let code = run(&mut report);
    Line::new()
        .text("probe: exact accepted ")
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
        .text(", surrogate fit R2 ")
        .int(report.fit_permille)
        .text("/1000, exit code ")
        .int(code.into())
        .text("\n")
        .print();
    code
}
