//! The scalar of the core's arithmetic: `f64`, the default everywhere (the host uses nothing
//! else), or `f32`, for microcontrollers whose FPU is single-precision only (Cortex-M4F, M7),
//! where every `f64` operation is a software routine.
//!
//! The network, the leapfrog, the HMC transition, the metrics and the Greville update are each
//! written once, generic over [`Real`]; what differs between the two scalars is only the handful
//! of elementary functions below and the number of partial sums of a dot product
//! ([`Real::PARTIAL_SUMS`]: two SSE2 registers' worth, four `f64` or eight `f32`):
//!
//! - `f64`: the branch-free [`fastmath`](crate::fastmath) functions (a few ulp), so the host's
//!   results are those of the code before the core became generic, bit for bit.
//! - `f32`: by default the branch-free single-precision functions of [`crate::fastmath32`]
//!   (`exp` within 1.05 `f32` ulp, the activations and their first derivatives within 4.5, the
//!   second derivatives within 6.4), which vectorize four lanes per
//!   SSE2 instruction where the `f64` functions run two, and use no `f64` arithmetic. With the
//!   `micromath` feature, [micromath](https://docs.rs/micromath)'s fast single-precision `exp`
//!   instead (relative error about 10⁻³; softplus's `log(1 + a)` by a short series): no `f64`
//!   arithmetic either, but it does not vectorize. A less accurate surrogate only lowers the
//!   acceptance rate: the Metropolis–Hastings step judges with the user's `U`, not the
//!   network's.
//!
//! Things that are not on a hot path (random draws, constructors' square roots, the acceptance
//! probability `exp(−ΔH)`) are computed in `f64` and converted with [`Real::of`], so they are
//! the same for both scalars up to that one rounding.

use nalgebra::RealField;

use crate::fastmath;
#[cfg(not(feature = "micromath"))]
use crate::fastmath32;

/// A floating-point scalar the core computes in: `f64` or `f32`.
///
/// Beyond nalgebra's [`RealField`] (arithmetic, comparisons, the matrix kernels) it names the
/// conversions to and from `f64` and the activations' elementary functions, whose
/// implementations differ per scalar (see the module docs). The names avoid those of
/// [`RealField`]'s own methods (`exp`, `tanh`), so calls on a generic `T` stay unambiguous.
pub trait Real: RealField + Copy {
    /// The machine epsilon, as an `f64` (`2⁻⁵²` or `2⁻²³`).
    const EPSILON: f64;

    /// The number of independent partial sums of a dot product ([`dot`](crate::linalg::dot)),
    /// which fixes its summation order: 4 for `f64` (two SSE2 registers of two lanes; the
    /// order the host's results are pinned to), 8 for `f32` (two registers of four lanes, so
    /// that its additions, too, form two independent chains of full vectors). Either 4 or 8.
    const PARTIAL_SUMS: usize;

    /// `x` rounded to this scalar (exact for `f64`).
    fn of(x: f64) -> Self;
    /// The value as an `f64` (exact for both scalars).
    fn to_f64(self) -> f64;

    /// `eˣ` for the radial units: branch-free, vectorizable.
    fn exp_fast(self) -> Self;
    /// The logistic function `σ(x) = 1/(1 + e⁻ˣ)`.
    fn logistic(self) -> Self;
    /// `σ'(x)`.
    fn logistic_derivative(self) -> Self;
    /// `σ''(x)`.
    fn logistic_second_derivative(self) -> Self;
    /// `log(1 + eˣ)`.
    fn softplus(self) -> Self;
    /// `tanh(x)`.
    fn tanh_fast(self) -> Self;
    /// `tanh'(x)`.
    fn tanh_derivative(self) -> Self;
    /// `tanh''(x)`.
    fn tanh_second_derivative(self) -> Self;
}

/// The activations' methods: inlined into the loops that call them (which then vectorize),
/// or with the `compact` feature one out-of-line copy each (a device's flash).
macro_rules! activations {
    ($($name:ident => $body:expr),* $(,)?) => {
        $(
            #[cfg_attr(feature = "compact", inline(never))]
            #[cfg_attr(not(feature = "compact"), inline(always))]
            fn $name(self) -> Self {
                $body(self)
            }
        )*
    };
}

impl Real for f64 {
    const EPSILON: f64 = f64::EPSILON;
    const PARTIAL_SUMS: usize = 4;

    #[inline(always)]
    fn of(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }

    activations! {
        exp_fast => fastmath::exp,
        logistic => fastmath::logistic,
        logistic_derivative => fastmath::logistic_derivative,
        logistic_second_derivative => fastmath::logistic_second_derivative,
        softplus => fastmath::softplus,
        tanh_fast => fastmath::tanh,
        tanh_derivative => fastmath::tanh_derivative,
        tanh_second_derivative => fastmath::tanh_second_derivative,
    }
}

impl Real for f32 {
    const EPSILON: f64 = f32::EPSILON as f64;
    const PARTIAL_SUMS: usize = 8;

    #[inline(always)]
    fn of(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }

    #[cfg(not(feature = "micromath"))]
    activations! {
        exp_fast => fastmath32::exp,
        logistic => fastmath32::logistic,
        logistic_derivative => fastmath32::logistic_derivative,
        logistic_second_derivative => fastmath32::logistic_second_derivative,
        softplus => fastmath32::softplus,
        tanh_fast => fastmath32::tanh,
        tanh_derivative => fastmath32::tanh_derivative,
        tanh_second_derivative => fastmath32::tanh_second_derivative,
    }

    #[cfg(feature = "micromath")]
    #[inline(always)]
    fn exp_fast(self) -> Self {
        micromath::F32Ext::exp(self)
    }
    #[cfg(feature = "micromath")]
    #[inline(always)]
    fn logistic(self) -> Self {
        let a = small::exp_minus_abs(self);
        let num = if self >= 0.0 { 1.0 } else { a };
        num / (1.0 + a)
    }
    #[cfg(feature = "micromath")]
    #[inline(always)]
    fn logistic_derivative(self) -> Self {
        let a = small::exp_minus_abs(self);
        let one_plus_a = 1.0 + a;
        a / (one_plus_a * one_plus_a)
    }
    #[cfg(feature = "micromath")]
    #[inline(always)]
    fn logistic_second_derivative(self) -> Self {
        let a = small::exp_minus_abs(self);
        let inv = 1.0 / (1.0 + a);
        let m = (1.0 - a) * inv;
        a * inv * inv * if self >= 0.0 { -m } else { m }
    }
    #[cfg(feature = "micromath")]
    #[inline(always)]
    fn softplus(self) -> Self {
        let a = small::exp_minus_abs(self);
        self.max(0.0) + small::log1p(a)
    }
    #[cfg(feature = "micromath")]
    #[inline(always)]
    fn tanh_fast(self) -> Self {
        let e = small::exp_minus_abs(2.0 * self);
        micromath::F32Ext::copysign((1.0 - e) / (1.0 + e), self)
    }
    #[cfg(feature = "micromath")]
    #[inline(always)]
    fn tanh_derivative(self) -> Self {
        let e = small::exp_minus_abs(2.0 * self);
        let one_plus_e = 1.0 + e;
        (4.0 * e) / (one_plus_e * one_plus_e)
    }
    #[cfg(feature = "micromath")]
    #[inline(always)]
    fn tanh_second_derivative(self) -> Self {
        -2.0 * self.tanh_fast() * self.tanh_derivative()
    }
}

/// The single-precision building block of the `micromath` activations: the same formulas as
/// [`fastmath`]'s, which need only `e^−|x|` (never overflowing) and, for softplus, `ln(1 + a)`.
#[cfg(feature = "micromath")]
mod small {
    /// `e^−|x|` by micromath's `exp` (relative error about 10⁻³).
    #[inline(always)]
    pub(super) fn exp_minus_abs(x: f32) -> f32 {
        micromath::F32Ext::exp(-micromath::F32Ext::abs(x))
    }

    /// `log(1 + a)` for `a ∈ [0, 1]` as `2 atanh(s)`, `s = a/(2 + a) ≤ 1/3`, by its series to
    /// `s⁷` (relative error below 2·10⁻⁵, and exact in relative terms as `a → 0`, where
    /// micromath's `ln(1 + a)` keeps only an absolute accuracy).
    #[inline(always)]
    pub(super) fn log1p(a: f32) -> f32 {
        let s = a / (2.0 + a);
        let w = s * s;
        2.0 * s * (1.0 + w * (1.0 / 3.0 + w * (1.0 / 5.0 + w * (1.0 / 7.0))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `f32` activations against the `f64` ones. Without `micromath`: the
    /// [`fastmath32`](crate::fastmath32) functions, within 6.5 `f32` ulp (below 8·10⁻⁷
    /// relative; `fastmath32`'s tests bound each function more tightly). With it: every
    /// activation is an O(1) function of `a = e^−|x|` with
    /// derivative at most about 1 in `log a`, so micromath's `exp` (relative error up to
    /// 1.3·10⁻³) bounds their absolute error by 2·10⁻³ (measured worst: tanh, 1.0·10⁻³), and
    /// `exp` itself above 1 by 2·10⁻³ relative.
    #[test]
    fn single_precision_activations_track_double_precision() {
        let micromath = cfg!(feature = "micromath");
        let (relative, absolute) = if micromath {
            (2e-3, 0.0)
        } else {
            (6.5 * f32::EPSILON as f64, 3e-45)
        };
        type Pair = (fn(f32) -> f32, fn(f64) -> f64);
        let checks: [Pair; 8] = [
            (f32::exp_fast, f64::exp_fast),
            (f32::logistic, f64::logistic),
            (f32::logistic_derivative, f64::logistic_derivative),
            (
                f32::logistic_second_derivative,
                f64::logistic_second_derivative,
            ),
            (f32::softplus, f64::softplus),
            (f32::tanh_fast, f64::tanh_fast),
            (f32::tanh_derivative, f64::tanh_derivative),
            (f32::tanh_second_derivative, f64::tanh_second_derivative),
        ];
        for (k, (single, double)) in checks.into_iter().enumerate() {
            for i in -400..=400 {
                let x = 0.02 * i as f32 + 0.003;
                let want = double(f64::from(x));
                let got = f64::from(single(x));
                let size = if micromath {
                    want.abs().max(1.0)
                } else {
                    want.abs()
                };
                let bound = relative * size + absolute;
                assert!(
                    (got - want).abs() <= bound,
                    "function {k} at {x}: {got} vs {want}"
                );
            }
        }
    }
}
