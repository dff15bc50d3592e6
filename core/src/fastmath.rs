//! Branch-free, call-free versions of the few transcendental functions the hot loops need: `eˣ`,
//! the logistic function and its derivative, softplus, and `tanh` with its derivative.
//!
//! `libm`'s functions are accurate but are out-of-line calls with branches, so a loop that calls
//! them runs one element at a time. The functions here are straight-line code (comparisons
//! become selects) marked `#[inline(always)]`, so a loop that applies one of them over a slice
//! vectorizes, two doubles per instruction with SSE2. The network evaluates its units in blocks
//! for this reason: all the units' arguments first, then the activation over the whole block.
//!
//! # Accuracy
//! [`exp`] is within one ulp of the exact value (0.92 ulp, 1.5·10⁻¹⁶ relative, the worst seen
//! against 200-bit values at 60 000 random points); against glibc's correctly rounded `exp`
//! about 90% of its results are identical and the rest one ulp off, which is how `libm`'s `exp`
//! fares too. The composite functions add a few roundings (a division, `1 + a`, …), measured the
//! same way: [`logistic`] and [`tanh`] ≤ 2.3 ulp, [`logistic_derivative`], [`tanh_derivative`]
//! and [`softplus`] ≤ 3.6 ulp, [`softplus_logistic`] ≤ 4.1 ulp; ≤ 7·10⁻¹⁶ relative for all. The unit tests check all of them
//! against `libm` over dense grids and random points; their bounds (2.3·10⁻¹⁶ for `exp`, up to
//! 10⁻¹⁵ for the derivatives) include the rounding of the `libm`-built reference formulas.
//! Results that are subnormal (below 2.2·10⁻³⁰⁸) are within the subnormal spacing,
//! 4.9·10⁻³²⁴, of `libm`'s.
//!
//! # Extreme arguments
//! Every function is defined on all of `f64`: arguments are clamped into the range where the
//! result changes (for `exp`, [−746, 710]) before the reduction, so huge or infinite arguments
//! give the limits (`exp(−∞) = 0`, `exp(+∞) = +∞`, `logistic(±10³⁰⁰) = 1` or 0, `tanh(±∞) = ±1`)
//! without overflow inside, and NaN stays NaN. The results are bit-for-bit the same on every
//! target that rounds IEEE-754 doubles alike (no fused multiply-adds are formed).
//!
//! # Code size
//! Inlined everywhere, `exp` is copied into every activation of every loop: fast, and about
//! 350 bytes a copy. The `compact` feature keeps one out-of-line `exp` (and one
//! `exp_and_expm1_nonpositive`) instead, for a device's flash.

use core::f64::consts::{LN_2, LOG2_E, SQRT_2};

const SIGN: u64 = 1 << 63;

/// `|x|`, by clearing the sign bit (a single `andpd` in a vector loop).
#[inline(always)]
fn abs(x: f64) -> f64 {
    f64::from_bits(x.to_bits() & !SIGN)
}

/// `|magnitude|` with the sign of `sign`.
#[inline(always)]
fn copysign(magnitude: f64, sign: f64) -> f64 {
    f64::from_bits((magnitude.to_bits() & !SIGN) | (sign.to_bits() & SIGN))
}

/// Below this `eˣ` rounds to zero (`e⁻⁷⁴⁶ ≈ 1.1·10⁻³²⁴` is under half the smallest subnormal).
const EXP_MIN_ARG: f64 = -746.0;
/// Above this `eˣ` overflows (`e⁷¹⁰ > f64::MAX`).
const EXP_MAX_ARG: f64 = 710.0;

/// `ln 2` split so that `n · LN2_HI` is exact for `|n| < 2²⁰` (fdlibm's constants).
const LN2_HI: f64 = 6.931_471_803_691_238e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// Adding `1.5 · 2⁵²` rounds to an integer and leaves it in the low mantissa bits.
const SHIFTER: f64 = 6_755_399_441_055_744.0;

/// `1/k!` for `k = 0, …, 13`: the Taylor coefficients of `eʳ`.
const C: [f64; 14] = [
    1.0,
    1.0,
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5_040.0,
    1.0 / 40_320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
    1.0 / 479_001_600.0,
    1.0 / 6_227_020_800.0,
];

/// The argument reduction `x = n ln 2 + r` with `n` the nearest integer to `x / ln 2`, so
/// `|r| ≤ ln 2 / 2` (to a rounding). Returns `n + 2048` as an integer (positive for the clamped
/// arguments, `n ∈ [−1076, 1024]`) and `r`.
#[inline(always)]
fn reduce(x: f64) -> (u64, f64) {
    let t = x * LOG2_E + SHIFTER;
    let n = t - SHIFTER;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    // t's bits are SHIFTER's plus n (two's complement in the low mantissa bits).
    let biased = t
        .to_bits()
        .wrapping_sub(SHIFTER.to_bits())
        .wrapping_add(2048);
    (biased, r)
}

/// `2ⁿ` as two factors `2^⌊n/2⌋ · 2^(n − ⌊n/2⌋)`, each a normal number for `n ∈ [−1076, 1024]`,
/// from `biased = n + 2048`. Multiplying by the two in turn rounds only once, so results that are
/// subnormal or overflow come out right, where one factor `2ⁿ` would not exist.
#[inline(always)]
fn pow2_halves(biased: u64) -> (f64, f64) {
    let half = biased >> 1; // ⌊n/2⌋ + 1024
    let e1 = half.wrapping_sub(1); // ⌊n/2⌋ + 1023, the biased exponent
    let e2 = biased.wrapping_sub(1).wrapping_sub(half); // n − ⌊n/2⌋ + 1023
    (f64::from_bits(e1 << 52), f64::from_bits(e2 << 52))
}

/// `eʳ − 1` for `|r| ≤ ln 2 / 2`: `r + r² T(r)` with `T(r) = Σₖ₌₀¹¹ rᵏ/(k + 2)!`, the Taylor
/// series of `eʳ` to `r¹³` (truncation below 5·10⁻¹⁸ relative). The tail `r² T(r)` is at most
/// 0.07 in size, so its rounding errors (Estrin's scheme, a short dependency chain) hardly show in
/// the sum, which is rounded once: `eʳ − 1` to about half an ulp, without the cancellation of
/// `eʳ − 1` near 0, and `eʳ = 1 + (eʳ − 1)` to about half an ulp more.
#[inline(always)]
fn expm1_reduced(r: f64) -> f64 {
    let r2 = r * r;
    let r4 = r2 * r2;
    let r8 = r4 * r4;
    let q0 = (C[2] + C[3] * r) + (C[4] + C[5] * r) * r2;
    let q1 = (C[6] + C[7] * r) + (C[8] + C[9] * r) * r2;
    let q2 = (C[10] + C[11] * r) + (C[12] + C[13] * r) * r2;
    r + r2 * ((q0 + q1 * r4) + q2 * r8)
}

/// `eˣ` for every `x`, branch-free, to about one ulp (relative error ≤ 2.3·10⁻¹⁶ against `libm`
/// wherever the result is a normal number).
///
/// `x = n ln 2 + r` with `|r| ≤ ln 2 / 2` (`n ln 2` in two parts, so `r` is exact to ~10⁻²⁶),
/// `eʳ = 1 + (r + r² T(r))` by its Taylor series to `r¹³` with the tail `T` in Estrin's scheme,
/// and `2ⁿ` built in the exponent bits as two factors.
/// `x` is first clamped to `[−746, 710]`, outside which the result is 0 or +∞ anyway: so
/// `exp(x) = 0` for `x < −745.14` (including −∞), results between are subnormal and correctly
/// scaled, `exp(x) = +∞` for `x > 709.79` (including +∞), and NaN stays NaN.
///
/// Against glibc's (practically correctly rounded) `exp` over `[−708, 709]`, about 90% of the
/// results are the correctly rounded double and the rest one ulp off, as with `libm`'s `exp`.
#[cfg_attr(feature = "compact", inline(never))]
#[cfg_attr(not(feature = "compact"), inline(always))]
pub fn exp(x: f64) -> f64 {
    // Written as comparisons, not `max`/`min`, so that NaN passes through.
    let x = if x < EXP_MIN_ARG { EXP_MIN_ARG } else { x };
    let x = if x > EXP_MAX_ARG { EXP_MAX_ARG } else { x };
    let (biased, r) = reduce(x);
    let (s1, s2) = pow2_halves(biased);
    (1.0 + expm1_reduced(r)) * s1 * s2
}

/// `(eʸ, eʸ − 1)` for `y ≤ 0` (larger `y` are not clamped and not supported) from one
/// reduction: `eʸ` is bit-identical to [`exp`]`(y)`, and `eʸ − 1` keeps its relative accuracy
/// near `y = 0` (about one ulp).
#[cfg_attr(feature = "compact", inline(never))]
#[cfg_attr(not(feature = "compact"), inline(always))]
fn exp_and_expm1_nonpositive(y: f64) -> (f64, f64) {
    let y = if y < EXP_MIN_ARG { EXP_MIN_ARG } else { y };
    let (biased, r) = reduce(y);
    let (s1, s2) = pow2_halves(biased);
    let pm1 = expm1_reduced(r);
    let e = (1.0 + pm1) * s1 * s2;
    // 2ⁿ(eʳ − 1) + (2ⁿ − 1): exact scaling, then one addition; for n = 0 it is eʳ − 1 itself.
    let s = s1 * s2;
    (e, s * pm1 + (s - 1.0))
}

/// The logistic function `σ(x) = 1/(1 + e⁻ˣ)`, branch-free and without overflow: with
/// `a = e^−|x|`, `σ(x) = 1/(1 + a)` for `x ≥ 0` and `a/(1 + a)` for `x < 0` (one division with
/// the numerator selected). Relative error a few ulp at most (≤ 4·10⁻¹⁶); `σ(x)` underflows to
/// 0 below `x ≈ −745`, as it should.
#[inline(always)]
pub fn logistic(x: f64) -> f64 {
    let a = exp(-abs(x));
    let num = if x >= 0.0 { 1.0 } else { a };
    num / (1.0 + a)
}

/// `σ'(x) = σ(x)(1 − σ(x)) = a/(1 + a)²` with `a = e^−|x|`: symmetric and without the
/// cancellation of `1 − σ(x)` for large `x`, so accurate to a few ulp (≤ 5·10⁻¹⁶ relative)
/// everywhere; it is 0 for `|x| > 745`.
#[inline(always)]
pub fn logistic_derivative(x: f64) -> f64 {
    let a = exp(-abs(x));
    let one_plus_a = 1.0 + a;
    a / (one_plus_a * one_plus_a)
}

/// `σ''(x) = σ'(x)(1 − 2σ(x))`, with `1 − 2σ(x) = ∓(1 − a)/(1 + a)` for `x ≷ 0`.
#[inline(always)]
pub fn logistic_second_derivative(x: f64) -> f64 {
    let a = exp(-abs(x));
    let inv = 1.0 / (1.0 + a);
    let m = (1.0 - a) * inv;
    a * inv * inv * if x >= 0.0 { -m } else { m }
}

/// `log1p(a)` for `a ∈ [0, 1]` as `base + 2 atanh(num/den)` with `|num/den| ≤ 0.1716`:
/// `num/den = a/(2 + a)`, `base = 0` for `a ≤ √2 − 1`, and `num/den = (a − 1)/(a + 3)`,
/// `base = ln 2` above (`log1p(a) = ln 2 + log((1 + a)/2)`). Returns `(num, den, base)`, so that
/// a caller can fold the division into another one.
#[inline(always)]
fn log1p_parts(a: f64) -> (f64, f64, f64) {
    let high = a > SQRT_2 - 1.0;
    let num = if high { a - 1.0 } else { a };
    let den = if high { a + 3.0 } else { a + 2.0 };
    let base = if high { LN_2 } else { 0.0 };
    (num, den, base)
}

/// `base + 2 atanh(s)`, the end of [`log1p_parts`]'s recipe.
#[inline(always)]
fn log1p_finish(base: f64, s: f64) -> f64 {
    base + 2.0 * s * atanh_series(s * s)
}

/// `atanh(s)/s = Σₖ wᵏ/(2k + 1)` at `w = s²`, to `w⁹` (Estrin's scheme); for `w ≤ 0.0295` the
/// truncation error is below 3·10⁻¹⁷.
#[inline(always)]
fn atanh_series(w: f64) -> f64 {
    let w2 = w * w;
    let w4 = w2 * w2;
    let w8 = w4 * w4;
    let p01 = 1.0 + w / 3.0;
    let p23 = 1.0 / 5.0 + w / 7.0;
    let p45 = 1.0 / 9.0 + w / 11.0;
    let p67 = 1.0 / 13.0 + w / 15.0;
    let p89 = 1.0 / 17.0 + w / 19.0;
    ((p01 + p23 * w2) + (p45 + p67 * w2) * w4) + p89 * w8
}

/// `softplus(x) = log(1 + eˣ) = max(x, 0) + log1p(a)` with `a = e^−|x|`, branch-free:
/// `log1p(a) = 2 atanh(a/(2 + a))` for `a ≤ √2 − 1`, `ln 2 + 2 atanh((a − 1)/(a + 3))` above, the
/// `atanh` by its series. Relative error a few ulp at most (≤ 7·10⁻¹⁶). For `|x|` beyond 745,
/// `e^−|x|` is 0 and softplus is `max(x, 0)` exactly; softplus(+∞) = +∞, and NaN stays NaN.
#[inline(always)]
pub fn softplus(x: f64) -> f64 {
    let a = exp(-abs(x));
    let (num, den, base) = log1p_parts(a);
    x.max(0.0) + log1p_finish(base, num / den)
}

/// `(softplus(x), σ(x)) = (log(1 + eˣ), 1/(1 + e⁻ˣ))` from one `a = e^−|x|` and *one* division
/// (the loss and the residual of a logistic-regression likelihood): `1/((1 + a)·den)` serves
/// both `num/den` of [`softplus`]'s `log1p` and `σ = (1 or a)/(1 + a)`. Two more roundings than
/// [`softplus`] and [`logistic`] separately, so a few ulp (≤ 7·10⁻¹⁶ relative); the same limits
/// at extreme arguments (σ is exactly 0 or 1 beyond `|x| = 745`).
#[inline(always)]
pub fn softplus_logistic(x: f64) -> (f64, f64) {
    let a = exp(-abs(x));
    let (num, den, base) = log1p_parts(a);
    let one_plus_a = 1.0 + a;
    let inv = 1.0 / (one_plus_a * den);
    let s = num * one_plus_a * inv;
    let sigmoid = if x >= 0.0 { den * inv } else { a * den * inv };
    (x.max(0.0) + log1p_finish(base, s), sigmoid)
}

/// `ln x` for `x ≥ 1` (a product of factors `1 + e^−|z|`, whose logarithm is a sum of
/// softplus terms: one `ln` then serves many of them): `x = 2ᵉ m` with `m ∈ [1, 2)`, and
/// `ln x = e ln 2 + log1p(m − 1)` by [`log1p_parts`]'s recipe, `e ln 2` in two parts so that it is
/// exact. Branch-free, so a loop over lanes vectorizes; within a few ulp of `libm`'s `log`
/// (≤ 7·10⁻¹⁶ relative, like [`softplus`]). `+∞` and NaN pass through; arguments below 1 are
/// not supported.
#[inline(always)]
pub fn ln_at_least_one(x: f64) -> f64 {
    const MANTISSA: u64 = (1 << 52) - 1;
    let bits = x.to_bits();
    let e = ((bits >> 52) as f64) - 1023.0;
    let a = f64::from_bits((bits & MANTISSA) | (1023 << 52)) - 1.0;
    let (num, den, base) = log1p_parts(a);
    let k = if base > 0.0 { e + 1.0 } else { e };
    let s = num / den;
    let ln = k * LN2_HI + (k * LN2_LO + 2.0 * s * atanh_series(s * s));
    // Comparisons with NaN are false: NaN and +∞ come out as themselves.
    if x < f64::INFINITY { ln } else { x }
}

/// `(−expm1(−2|x|), 1 + e)` with `e = e^−2|x|`: `tanh|x|` is their ratio.
#[inline(always)]
fn tanh_parts(x: f64) -> (f64, f64) {
    let (e, em1) = exp_and_expm1_nonpositive(-2.0 * abs(x));
    (-em1, 1.0 + e)
}

/// `tanh(x) = sign(x) · (1 − e)/(1 + e)` with `e = e^−2|x|`, the numerator as `−expm1(−2|x|)` so
/// that small `|x|` keep their relative accuracy. A few ulp at most (≤ 4·10⁻¹⁶ relative);
/// `tanh(±0) = ±0`, `tanh(x) = ±1` exactly for `|x| > 19.1`, and NaN stays NaN.
#[inline(always)]
pub fn tanh(x: f64) -> f64 {
    let (num, den) = tanh_parts(x);
    copysign(num / den, x)
}

/// `tanh'(x) = 1 − tanh²(x) = 4e/(1 + e)²` with `e = e^−2|x|`: no cancellation for large `|x|`,
/// so a few ulp relative everywhere (≤ 5·10⁻¹⁶); 0 for `|x| > 373`.
#[inline(always)]
pub fn tanh_derivative(x: f64) -> f64 {
    let e = exp(-2.0 * abs(x));
    let one_plus_e = 1.0 + e;
    (4.0 * e) / (one_plus_e * one_plus_e)
}

/// `tanh''(x) = −2 tanh(x) tanh'(x)`.
#[inline(always)]
pub fn tanh_second_derivative(x: f64) -> f64 {
    -2.0 * tanh(x) * tanh_derivative(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::{SplitMix64, uniform};

    const MIN_NORMAL: f64 = f64::MIN_POSITIVE;

    /// Relative error of `got` against `want`; for subnormal `want`, the error in units of the
    /// smallest normal number (so a subnormal result off by its spacing counts as ~2·10⁻¹⁶).
    fn rel(got: f64, want: f64) -> f64 {
        if got == want {
            return 0.0;
        }
        (got - want).abs() / want.abs().max(MIN_NORMAL)
    }

    /// A dense grid over `[lo, hi]` plus uniform random points in it.
    fn points(lo: f64, hi: f64, grid: usize, random: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64(seed);
        (0..=grid)
            .map(|k| lo + (hi - lo) * k as f64 / grid as f64)
            .chain((0..random).map(|_| lo + (hi - lo) * uniform(&mut rng)))
            .collect()
    }

    /// The largest relative error of `f` against `reference` over `xs`, with its argument.
    fn worst(xs: &[f64], f: impl Fn(f64) -> f64, reference: impl Fn(f64) -> f64) -> (f64, f64) {
        xs.iter().fold((0.0, f64::NAN), |(e, at), &x| {
            let err = rel(f(x), reference(x));
            if err > e { (err, x) } else { (e, at) }
        })
    }

    /// A function's name, the bound on its relative error, the function and its reference.
    type Check = (&'static str, f64, fn(f64) -> f64, fn(f64) -> f64);

    fn libm_logistic(x: f64) -> f64 {
        if x >= 0.0 {
            1.0 / (1.0 + libm::exp(-x))
        } else {
            let e = libm::exp(x);
            e / (1.0 + e)
        }
    }

    #[test]
    fn exp_matches_libm_to_about_one_ulp() {
        // Every result normal: e^−708.39 is just above the smallest normal number.
        let mut xs = points(-708.39, 709.78, 2_000_000, 1_000_000, 1);
        xs.extend(points(-1.0, 1.0, 200_000, 200_000, 2));
        xs.extend(points(-1e-6, 1e-6, 10_000, 10_000, 3));
        let (err, at) = worst(&xs, exp, libm::exp);
        std::println!("exp: max relative error {err:.3e} at {at}");
        assert!(err <= 2.3e-16, "exp: relative error {err:e} at {at}");
    }

    #[test]
    fn exp_subnormal_and_overflow_ranges_and_edge_cases() {
        // Subnormal results: within one spacing (2⁻¹⁰⁷⁴) of libm's.
        for x in points(-745.2, -708.3, 200_000, 100_000, 4) {
            let (got, want) = (exp(x), libm::exp(x));
            assert!(
                (got - want).abs() <= 4.95e-324,
                "exp({x}) = {got:e}, libm {want:e}"
            );
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert!(rel(exp(1.0), core::f64::consts::E) <= 2.3e-16);
        assert_eq!(exp(-745.2), 0.0);
        assert_eq!(exp(-746.0), 0.0);
        assert_eq!(exp(-1e300), 0.0);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp(f64::MIN), 0.0);
        assert!(exp(-745.0) > 0.0);
        assert!(exp(709.78).is_finite());
        assert_eq!(exp(709.79), f64::INFINITY);
        assert_eq!(exp(1e300), f64::INFINITY);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert!(exp(f64::NAN).is_nan());
        assert!(exp(-f64::NAN).is_nan());
        assert_eq!(exp(1e-300), 1.0);
        assert_eq!(exp(-1e-300), 1.0);
    }

    /// Every function against a reference built from `libm` over dense grids and random points.
    /// The bounds allow for the reference's own rounding (a few ulp for the composite formulas;
    /// the cosh² ones are the least accurate), so they sit above the errors against exact values
    /// given in the module docs.
    #[test]
    fn activations_match_libm() {
        let mut xs = points(-40.0, 40.0, 1_000_000, 500_000, 5);
        xs.extend(points(-1e-3, 1e-3, 100_000, 100_000, 6));
        xs.extend(points(-750.0, 750.0, 100_000, 100_000, 7));
        xs.extend([1e-300, -1e-300, 5e-324, 0.0, -0.0]);
        let checks: [Check; 6] = [
            ("logistic", 4e-16, logistic, libm_logistic),
            ("logistic'", 1e-15, logistic_derivative, |x| {
                // σ'(x) = 1/(4 cosh²(x/2)).
                let c = libm::cosh(0.5 * x);
                0.25 / (c * c)
            }),
            ("softplus", 8e-16, softplus, |x| {
                x.max(0.0) + libm::log1p(libm::exp(-x.abs()))
            }),
            (
                "softplus σ",
                7e-16,
                |x| softplus_logistic(x).1,
                libm_logistic,
            ),
            ("tanh", 6e-16, tanh, libm::tanh),
            ("tanh'", 1e-15, tanh_derivative, |x| {
                let c = libm::cosh(x);
                1.0 / (c * c)
            }),
        ];
        for (name, bound, f, reference) in checks {
            // The cosh² references overflow where the derivatives are subnormal: compare where
            // they are normal numbers (|x| < 700 for σ', |x| < 350 for tanh').
            let xs: Vec<f64> = match name {
                "logistic'" => xs.iter().copied().filter(|x| x.abs() < 700.0).collect(),
                "tanh'" => xs.iter().copied().filter(|x| x.abs() < 350.0).collect(),
                _ => xs.clone(),
            };
            let (err, at) = worst(&xs, f, reference);
            std::println!("{name}: max relative error {err:.3e} at {at}");
            assert!(err <= bound, "{name}: relative error {err:e} at {at}");
        }
    }

    #[test]
    fn ln_of_products_matches_libm() {
        // Near 1 (where ln is small and relative accuracy is hardest), products of a few
        // factors in [1, 2], every binade to the top, and the exact cases.
        let mut xs = points(1.0, 1.5, 100_000, 100_000, 11);
        xs.extend(points(1.0, 65_536.0, 0, 100_000, 12));
        xs.extend((0..1023).map(|e| libm::ldexp(1.0 + 0.377 * (e % 7) as f64 / 7.0, e)));
        xs.extend([1.0, 2.0, f64::MAX, 1.0 + f64::EPSILON]);
        let (err, at) = worst(&xs, ln_at_least_one, libm::log);
        std::println!("ln: max relative error {err:.3e} at {at}");
        assert!(err <= 7e-16, "ln: relative error {err:e} at {at}");
        assert_eq!(ln_at_least_one(1.0), 0.0);
        assert_eq!(ln_at_least_one(f64::INFINITY), f64::INFINITY);
        assert!(ln_at_least_one(f64::NAN).is_nan());
    }

    #[test]
    fn second_derivatives_match_finite_differences_of_first() {
        let h = 1e-6;
        for k in -400..=400 {
            let x = 0.05 * k as f64 + 0.0123;
            let fd = (logistic_derivative(x + h) - logistic_derivative(x - h)) / (2.0 * h);
            assert!(
                (logistic_second_derivative(x) - fd).abs() < 1e-9,
                "σ'' at {x}"
            );
            let fd = (tanh_derivative(x + h) - tanh_derivative(x - h)) / (2.0 * h);
            assert!(
                (tanh_second_derivative(x) - fd).abs() < 1e-9,
                "tanh'' at {x}"
            );
        }
    }

    #[test]
    fn activations_at_extreme_arguments() {
        for x in [1e300, f64::MAX, f64::INFINITY, 800.0] {
            assert_eq!(logistic(x), 1.0);
            assert_eq!(logistic(-x), 0.0);
            assert_eq!(logistic_derivative(x), 0.0);
            assert_eq!(logistic_derivative(-x), 0.0);
            assert_eq!(logistic_second_derivative(x), 0.0);
            assert_eq!(logistic_second_derivative(-x), 0.0);
            assert_eq!(softplus(-x), 0.0);
            assert_eq!(softplus_logistic(x), (x, 1.0));
            assert_eq!(softplus_logistic(-x), (0.0, 0.0));
            assert_eq!(tanh(x), 1.0);
            assert_eq!(tanh(-x), -1.0);
            assert_eq!(tanh_derivative(x), 0.0);
            assert_eq!(tanh_derivative(-x), 0.0);
            assert_eq!(tanh_second_derivative(x), 0.0);
        }
        assert_eq!(softplus(1e300), 1e300);
        assert_eq!(tanh(20.0), 1.0);
        assert_eq!(logistic(0.0), 0.5);
        assert_eq!(logistic(-0.0), 0.5);
        assert_eq!(logistic_derivative(0.0), 0.25);
        assert_eq!(logistic_second_derivative(0.0), 0.0);
        assert_eq!(softplus(0.0), LN_2);
        assert_eq!(tanh(0.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(tanh(1e-300), 1e-300);
        assert_eq!(tanh(-5e-324), -5e-324);
        assert_eq!(tanh_derivative(0.0), 1.0);
        let all: [fn(f64) -> f64; 8] = [
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
            assert!(f(f64::NAN).is_nan());
            assert!(f(-f64::NAN).is_nan());
        }
        assert!(softplus_logistic(f64::NAN).1.is_nan());
    }
}
