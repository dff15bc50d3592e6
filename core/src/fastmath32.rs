//! The single-precision counterparts of [`fastmath`](crate::fastmath): branch-free, call-free
//! `eˣ`, the logistic function and its derivatives, softplus, and `tanh` with its derivatives,
//! computed in `f32` throughout, for an `f32` network's activations.
//!
//! Before these, an `f32` activation widened its argument, ran the `f64` function and rounded
//! the result, so a loop over a block of units ran two lanes per SSE2 instruction, as in `f64`,
//! and the `f32` network was no faster than the `f64` one. These functions are straight-line
//! `f32` code (comparisons become selects, `2ⁿ` is built in the exponent bits), so the same loop
//! runs four lanes per instruction, and the reduced argument needs a polynomial of degree 7
//! where `f64` needs 13. On a Cortex-M4F/M7 they are all single-precision FPU instructions.
//!
//! # Accuracy
//! In units of the `f32` spacing at the exact value (ulp), the largest errors over *every*
//! `f32` argument with `|x| ≤ 120` (`exp`: every `f32`), against `f64` references (`libm`'s
//! `exp` and the functions of [`fastmath`](crate::fastmath), exact to far below an `f32` ulp).
//! Beyond 104, `e^−|x|` is exactly 0 and every function returns its limit exactly (0, 1, ±1,
//! or `x` for softplus):
//!
//! | [`exp`] | [`logistic`] | [`tanh`] | [`logistic_derivative`] | [`tanh_derivative`] | [`softplus`] | [`logistic_second_derivative`] | [`tanh_second_derivative`] |
//! | --- | --- | --- | --- | --- | --- | --- | --- |
//! | 1.05 | 2.40 | 2.31 | 4.22 | 4.22 | 4.45 | 6.39 | 6.32 |
//!
//! One ulp is at most `2⁻²³ ≈ 1.2·10⁻⁷` relative, so the activations and their first
//! derivatives are within 5.3·10⁻⁷ relative, against about 6·10⁻⁸ for an `f64` result rounded
//! once; each is a handful of roundings (`1 + a`, a division, a product) on top of `exp`'s.
//! Subnormal results (below 1.2·10⁻³⁸) count in the subnormal spacing 1.4·10⁻⁴⁵. The second
//! derivatives keep their relative accuracy through their zero at `x = 0` (from
//! `expm1(−|x|)`, where [`fastmath`](crate::fastmath)'s `f64` σ'' has `1 − a`). The unit tests
//! check the same bounds (rounded up: 1.1, 2.5, 4.5, 6.5) on dense grids and random points.
//!
//! # Extreme arguments
//! As in `fastmath`: every function is defined on all of `f32`; arguments are clamped into the
//! range where `eˣ` changes (`[−104, 89]`) before the reduction, so nothing overflows inside:
//! `exp(x) = 0` for `x ≤ −103.98` (and at −∞) and `+∞` exactly where the rounded `eˣ`
//! overflows (`x > 88.7228`); `softplus(x) = x` exactly for every `x > 14.56` (up to `+∞`) and
//! 0 for `x < −102.88`; `logistic(x) = 1` for `x > 16.64`; `tanh(x) = ±1` for `|x| > 8.5`;
//! NaN stays NaN. No fused multiply-adds are formed, so the results are the same bit for bit
//! on every target.
//!
//! # Code size
//! Inlined everywhere, as the `f64` functions; the `compact` feature keeps one out-of-line
//! `exp` and one `exp_and_expm1_nonpositive`.

use core::f32::consts::{LN_2, LOG2_E, SQRT_2};

const SIGN: u32 = 1 << 31;

/// `|x|`, by clearing the sign bit.
#[inline(always)]
fn abs(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & !SIGN)
}

/// `|magnitude|` with the sign of `sign`.
#[inline(always)]
fn copysign(magnitude: f32, sign: f32) -> f32 {
    f32::from_bits((magnitude.to_bits() & !SIGN) | (sign.to_bits() & SIGN))
}

/// Below this `eˣ` rounds to zero (`e⁻¹⁰⁴ ≈ 6.8·10⁻⁴⁶` is under half the smallest subnormal,
/// 1.4·10⁻⁴⁵).
const EXP_MIN_ARG: f32 = -104.0;
/// Above this `eˣ` overflows (`e⁸⁹ ≈ 4.5·10³⁸ > f32::MAX`).
const EXP_MAX_ARG: f32 = 89.0;

/// `ln 2` split so that `n · LN2_HI` is exact for `|n| < 2⁹` (the 15 significant bits of
/// fdlibm's `expf` constants): `LN2_HI = 0.693145751953125`, `LN2_LO ≈ 1.4286068·10⁻⁶`.
const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
const LN2_LO: f32 = f32::from_bits(0x35bf_be8e);
/// Adding `1.5 · 2²³` rounds to an integer and leaves it in the low mantissa bits.
const SHIFTER: f32 = 12_582_912.0;

/// `1/k!` for `k = 2, …, 7`: the Taylor coefficients of `(eʳ − 1 − r)/r²`.
const C2: f32 = 1.0 / 2.0;
const C3: f32 = 1.0 / 6.0;
const C4: f32 = 1.0 / 24.0;
const C5: f32 = 1.0 / 120.0;
const C6: f32 = 1.0 / 720.0;
const C7: f32 = 1.0 / 5_040.0;

/// `x = n ln 2 + r` with `n` the nearest integer to `x / ln 2` (to a rounding), so
/// `|r| ≤ ln 2 / 2` (to a rounding). Returns `n + 256` as an integer (positive for the clamped
/// arguments, `n ∈ [−150, 129]`) and `r`.
#[inline(always)]
fn reduce(x: f32) -> (u32, f32) {
    let t = x * LOG2_E + SHIFTER;
    let n = t - SHIFTER;
    // Exact: n·LN2_HI is exact and within a factor of two of x (Sterbenz).
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let biased = t
        .to_bits()
        .wrapping_sub(SHIFTER.to_bits())
        .wrapping_add(256);
    (biased, r)
}

/// `2ⁿ` as two factors `2^⌊n/2⌋ · 2^(n − ⌊n/2⌋)`, each a normal number for `n ∈ [−150, 129]`,
/// from `biased = n + 256`: multiplying by the two in turn rounds once, so subnormal results and
/// overflow come out right.
#[inline(always)]
fn pow2_halves(biased: u32) -> (f32, f32) {
    let half = biased >> 1; // ⌊n/2⌋ + 128
    let e1 = half.wrapping_sub(1); // ⌊n/2⌋ + 127, the biased exponent
    let e2 = biased.wrapping_sub(1).wrapping_sub(half); // n − ⌊n/2⌋ + 127
    (f32::from_bits(e1 << 23), f32::from_bits(e2 << 23))
}

/// `eʳ − 1` for `|r| ≤ ln 2 / 2`: `r + r² T(r)` with `T(r) = Σₖ₌₀⁵ rᵏ/(k + 2)!`, the Taylor
/// series of `eʳ` to `r⁷` (truncation below 5.3·10⁻⁹ absolute, a tenth of an ulp of `eʳ`), the
/// tail `T` by Estrin's scheme. The tail `r² T(r)` is at most 0.07, so its rounding errors
/// hardly show in the sum, which is rounded once.
#[inline(always)]
fn expm1_reduced(r: f32) -> f32 {
    let r2 = r * r;
    let r4 = r2 * r2;
    let t = ((C2 + C3 * r) + (C4 + C5 * r) * r2) + (C6 + C7 * r) * r4;
    r + r2 * t
}

/// `eˣ` for every `f32` `x`, branch-free, within 1.05 ulp of the exact value (checked over
/// every `f32`).
///
/// `x = n ln 2 + r` with `|r| ≤ ln 2 / 2`, `eʳ = 1 + (r + r² T(r))` by its Taylor series to
/// `r⁷`, and `2ⁿ` built in the exponent bits as two factors. `x` is first clamped to
/// `[−104, 89]`, outside which the result is 0 or +∞ anyway: `exp(x) = 0` below −103.97
/// (including −∞), subnormal results between that and −87.34 are correctly scaled,
/// `exp(x) = +∞` above 88.73 (including +∞), and NaN stays NaN.
#[cfg_attr(feature = "compact", inline(never))]
#[cfg_attr(not(feature = "compact"), inline(always))]
pub fn exp(x: f32) -> f32 {
    // Comparisons, not `max`/`min`, so that NaN passes through.
    let x = if x < EXP_MIN_ARG { EXP_MIN_ARG } else { x };
    let x = if x > EXP_MAX_ARG { EXP_MAX_ARG } else { x };
    let (biased, r) = reduce(x);
    let (s1, s2) = pow2_halves(biased);
    (1.0 + expm1_reduced(r)) * s1 * s2
}

/// `(eʸ, eʸ − 1)` for `y ≤ 0` from one reduction: `eʸ` is bit-identical to [`exp`]`(y)`, and
/// `eʸ − 1` keeps its relative accuracy near `y = 0`.
#[cfg_attr(feature = "compact", inline(never))]
#[cfg_attr(not(feature = "compact"), inline(always))]
fn exp_and_expm1_nonpositive(y: f32) -> (f32, f32) {
    let y = if y < EXP_MIN_ARG { EXP_MIN_ARG } else { y };
    let (biased, r) = reduce(y);
    let (s1, s2) = pow2_halves(biased);
    let pm1 = expm1_reduced(r);
    let e = (1.0 + pm1) * s1 * s2;
    // 2ⁿ(eʳ − 1) + (2ⁿ − 1): exact scaling, then one addition; for n = 0 it is eʳ − 1 itself.
    let s = s1 * s2;
    (e, s * pm1 + (s - 1.0))
}

/// `σ(x) = 1/(1 + e⁻ˣ)`: with `a = e^−|x|`, `1/(1 + a)` for `x ≥ 0` and `a/(1 + a)` below.
#[inline(always)]
pub fn logistic(x: f32) -> f32 {
    let a = exp(-abs(x));
    let num = if x >= 0.0 { 1.0 } else { a };
    num / (1.0 + a)
}

/// `σ'(x) = a/(1 + a)²` with `a = e^−|x|`: no cancellation for large `|x|`.
#[inline(always)]
pub fn logistic_derivative(x: f32) -> f32 {
    let a = exp(-abs(x));
    let one_plus_a = 1.0 + a;
    a / (one_plus_a * one_plus_a)
}

/// `σ''(x) = σ'(x)(1 − 2σ(x)) = ∓a(1 − a)/(1 + a)³` for `x ≷ 0`, with `a = e^−|x|` and
/// `1 − a = −expm1(−|x|)` from the same reduction, so that the zero at `x = 0` keeps its
/// relative accuracy (the `f64` function's `1 − a` does not, at a cost of 10⁻¹⁶).
#[inline(always)]
pub fn logistic_second_derivative(x: f32) -> f32 {
    let (a, am1) = exp_and_expm1_nonpositive(-abs(x));
    let one_plus_a = 1.0 + a;
    let q = (a * am1) / (one_plus_a * one_plus_a * one_plus_a);
    if x >= 0.0 { q } else { -q }
}

/// `log1p(a)` for `a ∈ [0, 1]` as `base + 2 atanh(s)`, `s = num/den`, `|s| ≤ 0.1716`:
/// `s = a/(2 + a)`, `base = 0` for `a ≤ √2 − 1`; `s = (a − 1)/(a + 3)`, `base = ln 2` above.
/// `atanh(s)/s` by its series to `s⁸` (truncation below 2·10⁻⁹).
#[inline(always)]
fn log1p(a: f32) -> f32 {
    let high = a > SQRT_2 - 1.0;
    let num = if high { a - 1.0 } else { a };
    let den = if high { a + 3.0 } else { a + 2.0 };
    let base = if high { LN_2 } else { 0.0 };
    let s = num / den;
    let w = s * s;
    let w2 = w * w;
    let series = ((1.0 + w * (1.0 / 3.0)) + w2 * (1.0 / 5.0 + w * (1.0 / 7.0))) + w2 * w2 / 9.0;
    base + 2.0 * s * series
}

/// `softplus(x) = log(1 + eˣ) = max(x, 0) + log1p(e^−|x|)`, branch-free: finite for every
/// finite `x`, exactly `x` for `x > 14.56`, 0 for `x < −102.9`, `+∞` at `+∞`.
#[inline(always)]
pub fn softplus(x: f32) -> f32 {
    x.max(0.0) + log1p(exp(-abs(x)))
}

/// `tanh(x) = sign(x) · (−expm1(−2|x|))/(1 + e^−2|x|)`: relative accuracy kept for small `|x|`;
/// `tanh(±0) = ±0`, `±1` exactly for `|x| > 8.5`, NaN stays NaN.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let (e, em1) = exp_and_expm1_nonpositive(-2.0 * abs(x));
    copysign(-em1 / (1.0 + e), x)
}

/// `tanh'(x) = 4e/(1 + e)²` with `e = e^−2|x|`: no cancellation for large `|x|`.
#[inline(always)]
pub fn tanh_derivative(x: f32) -> f32 {
    let e = exp(-2.0 * abs(x));
    let one_plus_e = 1.0 + e;
    (4.0 * e) / (one_plus_e * one_plus_e)
}

/// `tanh''(x) = −2 tanh(x) tanh'(x)`.
#[inline(always)]
pub fn tanh_second_derivative(x: f32) -> f32 {
    -2.0 * tanh(x) * tanh_derivative(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fastmath;
    use crate::random::{SplitMix64, uniform};
    use std::vec::Vec;

    /// The spacing of `f32` values at `|y|` (for `y` in the `f32` range): `2^(e − 23)` for a
    /// normal `y` with exponent `e`, the subnormal spacing `2⁻¹⁴⁹` below `f32::MIN_POSITIVE`.
    fn ulp(y: f64) -> f64 {
        let e = ((y.to_bits() >> 52) & 0x7ff) as i64 - 1023;
        f64::from_bits(((e.max(-126) - 23 + 1023) as u64) << 52)
    }

    /// The error of `got` against the exact `want`, in ulp of `want`.
    fn ulp_error(got: f32, want: f64) -> f64 {
        let got = f64::from(got);
        if got == want {
            0.0
        } else {
            (got - want).abs() / ulp(want)
        }
    }

    /// `f32` arguments: a dense grid over `[lo, hi]` and uniform random points in it, rounded.
    fn points(lo: f64, hi: f64, grid: usize, random: usize, seed: u64) -> Vec<f32> {
        let mut rng = SplitMix64(seed);
        (0..=grid)
            .map(|k| lo + (hi - lo) * k as f64 / grid as f64)
            .chain((0..random).map(|_| lo + (hi - lo) * uniform(&mut rng)))
            .map(|x| x as f32)
            .collect()
    }

    /// The largest error of `f` against `reference` (evaluated in `f64` at the same `f32`
    /// argument) over `xs`, in ulp of the reference, with its argument.
    fn worst_ulp(xs: &[f32], f: fn(f32) -> f32, reference: fn(f64) -> f64) -> (f64, f32) {
        xs.iter().fold((0.0, f32::NAN), |(e, at), &x| {
            let err = ulp_error(f(x), reference(f64::from(x)));
            if err > e { (err, x) } else { (e, at) }
        })
    }

    fn arguments() -> Vec<f32> {
        let mut xs = points(-30.0, 30.0, 600_000, 300_000, 1);
        xs.extend(points(-1e-3, 1e-3, 50_000, 50_000, 2));
        xs.extend(points(-120.0, 120.0, 200_000, 100_000, 3));
        xs.extend(points(-1e6, 1e6, 10_000, 10_000, 4));
        xs.extend([1e-30, -1e-30, 1e-45, -1e-45, 0.0, -0.0, 1e30, -1e30]);
        xs.extend([f32::MAX, f32::MIN, f32::MIN_POSITIVE, -f32::MIN_POSITIVE]);
        xs
    }

    /// `exp` within one ulp of the exact value wherever the result is normal, and within one
    /// subnormal spacing where it is subnormal (the ulp above is that spacing there).
    #[test]
    fn exp_is_within_one_ulp() {
        let mut xs = points(-104.0, 88.72, 2_000_000, 1_000_000, 5);
        xs.extend(points(-1.0, 1.0, 200_000, 200_000, 6));
        xs.extend(points(-1e-6, 1e-6, 10_000, 10_000, 7));
        let (err, at) = worst_ulp(&xs, exp, libm::exp);
        std::println!("f32 exp: max error {err:.3} ulp at {at}");
        assert!(err <= 1.1, "exp: {err} ulp at {at}");
    }

    #[test]
    fn exp_edge_cases() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(-103.98), 0.0);
        assert_eq!(exp(-104.0), 0.0);
        assert_eq!(exp(-1e30), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(f32::MIN), 0.0);
        assert!(exp(-103.9) > 0.0);
        assert!(exp(88.72).is_finite());
        assert_eq!(exp(88.73), f32::INFINITY);
        assert_eq!(exp(1e30), f32::INFINITY);
        assert_eq!(exp(f32::MAX), f32::INFINITY);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(-f32::NAN).is_nan());
        assert_eq!(exp(1e-30), 1.0);
        assert_eq!(exp(-1e-30), 1.0);
    }

    /// A function's name, its bound in ulp, the function and its `f64` reference.
    type Check = (&'static str, f64, fn(f32) -> f32, fn(f64) -> f64);

    /// `σ''(x) = −tanh(x/2) σ'(x)`: relative accuracy near its zero, unlike `fastmath`'s.
    fn logistic_second_derivative_reference(x: f64) -> f64 {
        -libm::tanh(0.5 * x) * fastmath::logistic_derivative(x)
    }

    /// The activations against `f64` references (the functions of [`fastmath`], accurate to
    /// ~10⁻¹⁵, so exact at this scale), over `[−30, 30]` and `[−120, 120]` densely, near 0, out
    /// to `±10⁶`, and at the extremes, in ulp of the exact value. The bounds sit just above the
    /// worst errors measured (given in the module docs).
    #[test]
    fn activations_are_within_a_few_ulp() {
        let xs = arguments();
        let checks: [Check; 7] = [
            ("logistic", 2.5, logistic, fastmath::logistic),
            (
                "logistic'",
                4.5,
                logistic_derivative,
                fastmath::logistic_derivative,
            ),
            (
                "logistic''",
                6.5,
                logistic_second_derivative,
                logistic_second_derivative_reference,
            ),
            ("softplus", 4.5, softplus, fastmath::softplus),
            ("tanh", 2.5, tanh, fastmath::tanh),
            ("tanh'", 4.5, tanh_derivative, fastmath::tanh_derivative),
            (
                "tanh''",
                6.5,
                tanh_second_derivative,
                fastmath::tanh_second_derivative,
            ),
        ];
        for (name, bound, f, reference) in checks {
            let (err, at) = worst_ulp(&xs, f, reference);
            std::println!("f32 {name}: max error {err:.3} ulp at {at}");
            assert!(err <= bound, "{name}: {err} ulp at {at}");
        }
    }

    /// The table of the module docs, over every `f32` with `|x| ≤ 120` (`exp`: every `f32`
    /// whose `eˣ` rounds to a finite value, and `+∞` exactly where it rounds to `+∞`).
    /// About 2·10¹⁰ evaluations, minutes of CPU: `cargo test --release -p shmc-core --lib
    /// fastmath32 -- --ignored`.
    #[test]
    #[ignore = "exhaustive: minutes of CPU"]
    fn every_argument_is_within_the_documented_ulp() {
        let table: [Check; 8] = [
            ("exp", 1.05, exp, libm::exp),
            ("logistic", 2.41, logistic, fastmath::logistic),
            ("tanh", 2.32, tanh, fastmath::tanh),
            (
                "logistic'",
                4.22,
                logistic_derivative,
                fastmath::logistic_derivative,
            ),
            ("tanh'", 4.22, tanh_derivative, fastmath::tanh_derivative),
            ("softplus", 4.45, softplus, fastmath::softplus),
            (
                "logistic''",
                6.40,
                logistic_second_derivative,
                logistic_second_derivative_reference,
            ),
            (
                "tanh''",
                6.33,
                tanh_second_derivative,
                fastmath::tanh_second_derivative,
            ),
        ];
        for (name, bound, f, reference) in table {
            let (mut worst, mut at) = (0.0f64, 0.0f32);
            for bits in 0..=u32::MAX {
                let x = f32::from_bits(bits);
                if x.is_nan() || (name != "exp" && x.abs() > 120.0) {
                    continue;
                }
                let want = reference(f64::from(x));
                if (want as f32).is_infinite() {
                    assert_eq!(f(x), want as f32, "{name}({x}) overflows");
                    continue;
                }
                let err = ulp_error(f(x), want);
                if err > worst {
                    (worst, at) = (err, x);
                }
            }
            std::println!("f32 {name}: max error {worst:.4} ulp at {at:e}, every argument");
            assert!(worst <= bound, "{name}: {worst} ulp at {at}");
        }
    }

    #[test]
    fn activations_at_extreme_arguments() {
        for x in [1e30, f32::MAX, f32::INFINITY, 200.0] {
            assert_eq!(logistic(x), 1.0);
            assert_eq!(logistic(-x), 0.0);
            assert_eq!(logistic_derivative(x), 0.0);
            assert_eq!(logistic_derivative(-x), 0.0);
            assert_eq!(logistic_second_derivative(x), 0.0);
            assert_eq!(logistic_second_derivative(-x), 0.0);
            assert_eq!(softplus(x), x);
            assert_eq!(softplus(-x), 0.0);
            assert_eq!(tanh(x), 1.0);
            assert_eq!(tanh(-x), -1.0);
            assert_eq!(tanh_derivative(x), 0.0);
            assert_eq!(tanh_derivative(-x), 0.0);
            assert_eq!(tanh_second_derivative(x), 0.0);
        }
        // Softplus is finite and equal to x for every large finite x.
        for x in [20.0f32, 104.5, 1e4, 3e38] {
            assert_eq!(softplus(x), x);
            assert!(softplus(-x) >= 0.0 && softplus(-x) < 3e-9);
        }
        assert_eq!(tanh(10.0), 1.0);
        assert_eq!(logistic(0.0), 0.5);
        assert_eq!(logistic(-0.0), 0.5);
        assert_eq!(logistic_derivative(0.0), 0.25);
        assert_eq!(logistic_second_derivative(0.0), 0.0);
        assert_eq!(softplus(0.0), LN_2);
        assert_eq!(tanh(0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(tanh(1e-30), 1e-30);
        assert_eq!(tanh(-1e-45), -1e-45);
        assert_eq!(tanh_derivative(0.0), 1.0);
        let all: [fn(f32) -> f32; 8] = [
            exp,
            logistic,
            logistic_derivative,
            logistic_second_derivative,
            softplus,
            tanh,
            tanh_derivative,
            tanh_second_derivative,
        ];
        for f in all {
            assert!(f(f32::NAN).is_nan());
            assert!(f(-f32::NAN).is_nan());
        }
    }
}
