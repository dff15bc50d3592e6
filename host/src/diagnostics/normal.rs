//! The inverse of the standard normal CDF, needed to turn ranks into normal scores for the
//! rank-normalized ESS and R̂.
//!
//! This is Wichura's algorithm AS 241 (`PPND16`, Applied Statistics 37(3), 1988, 477–484): three
//! rational approximations of degree 7 — one for the centre `|p − ½| ≤ 0.425`, two for the tails
//! in the variable `r = √(−ln min(p, 1−p))` — with a relative error of about 1e-16, so no Newton
//! refinement step (which would need an accurate `erfc`, absent from `std`) is required.

#![allow(
    clippy::excessive_precision,
    reason = "AS 241's coefficients are kept digit for digit as published"
)]

/// Centre region: numerator coefficients, constant term first.
const CENTRE_NUM: [f64; 8] = [
    3.387_132_872_796_366_608,
    1.331_416_678_917_843_774_5e2,
    1.971_590_950_306_551_442_7e3,
    1.373_169_376_550_946_112_5e4,
    4.592_195_393_154_987_145_7e4,
    6.726_577_092_700_870_085_3e4,
    3.343_057_558_358_812_810_5e4,
    2.509_080_928_730_122_672_7e3,
];
/// Centre region: denominator coefficients, constant term first.
const CENTRE_DEN: [f64; 8] = [
    1.0,
    4.231_333_070_160_091_125_2e1,
    6.871_870_074_920_579_083e2,
    5.394_196_021_424_751_107_7e3,
    2.121_379_430_158_659_586_7e4,
    3.930_789_580_009_271_061e4,
    2.872_908_573_572_194_267_4e4,
    5.226_495_278_852_854_561e3,
];
/// Near tail (`r ≤ 5`, i.e. `p ≳ 1.4e-11`): numerator in `r − 1.6`.
const NEAR_NUM: [f64; 8] = [
    1.423_437_110_749_683_577_34,
    4.630_337_846_156_545_295_9,
    5.769_497_221_460_691_405_5,
    3.647_848_324_763_204_605_04,
    1.270_458_252_452_368_382_58,
    2.417_807_251_774_506_117_7e-1,
    2.272_384_498_926_918_458_33e-2,
    7.745_450_142_783_414_076_4e-4,
];
/// Near tail: denominator in `r − 1.6`.
const NEAR_DEN: [f64; 8] = [
    1.0,
    2.053_191_626_637_758_821_87,
    1.676_384_830_183_803_849_4,
    6.897_673_349_851_000_045_5e-1,
    1.481_039_764_274_800_745_9e-1,
    1.519_866_656_361_645_719_66e-2,
    5.475_938_084_995_344_946e-4,
    1.050_750_071_644_416_843_24e-9,
];
/// Far tail (`r > 5`): numerator in `r − 5`.
const FAR_NUM: [f64; 8] = [
    6.657_904_643_501_103_777_2,
    5.463_784_911_164_114_369_9,
    1.784_826_539_917_291_335_8,
    2.965_605_718_285_048_912_3e-1,
    2.653_218_952_657_612_309_3e-2,
    1.242_660_947_388_078_438_6e-3,
    2.711_555_568_743_487_578_15e-5,
    2.010_334_399_292_288_132_65e-7,
];
/// Far tail: denominator in `r − 5`.
const FAR_DEN: [f64; 8] = [
    1.0,
    5.998_322_065_558_879_376_9e-1,
    1.369_298_809_227_358_053_1e-1,
    1.487_536_129_085_061_485_25e-2,
    7.868_691_311_456_132_591e-4,
    1.846_318_317_510_054_681_8e-5,
    1.421_511_758_316_445_888_7e-7,
    2.044_263_103_389_939_785_64e-15,
];

/// `Σ coefficients[k] xᵏ` by Horner's rule.
fn polynomial(coefficients: &[f64; 8], x: f64) -> f64 {
    coefficients.iter().rev().fold(0.0, |acc, &c| acc * x + c)
}

/// The standard normal quantile `Φ⁻¹(p)`: the `z` with `P(Z ≤ z) = p` for `Z ~ N(0, 1)`.
///
/// Returns `-∞` at `p = 0`, `+∞` at `p = 1` and NaN outside `[0, 1]` or for NaN input.
/// Accurate to about 1e-16 relative (Wichura's AS 241).
pub fn inverse_normal_cdf(p: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180_625 - q * q;
        return q * polynomial(&CENTRE_NUM, r) / polynomial(&CENTRE_DEN, r);
    }
    let tail = if q < 0.0 { p } else { 1.0 - p };
    let r = (-tail.ln()).sqrt();
    let magnitude = if r <= 5.0 {
        polynomial(&NEAR_NUM, r - 1.6) / polynomial(&NEAR_DEN, r - 1.6)
    } else {
        polynomial(&FAR_NUM, r - 5.0) / polynomial(&FAR_DEN, r - 5.0)
    };
    if q < 0.0 { -magnitude } else { magnitude }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(p, Φ⁻¹(p))` pairs, computed with `scipy.special.ndtri` (Cephes, accurate to about
    /// 1e-16 relative; scipy 1.17.1). The first few are the familiar table values; ±1 is checked
    /// through `Φ(1) = 0.8413447460685429`.
    const KNOWN: [(f64, f64); 12] = [
        (0.5, 0.0),
        (0.975, 1.959_963_984_540_054),
        (0.025, -1.959_963_984_540_054_5),
        (0.95, 1.644_853_626_951_472_2),
        (0.841_344_746_068_542_9, 1.0),
        (0.158_655_253_931_457_05, -1.0),
        (0.1, -1.281_551_565_544_600_4),
        (0.999, 3.090_232_306_167_813),
        (1e-5, -4.264_890_793_922_825),
        (1e-10, -6.361_340_902_404_056),
        (1e-20, -9.262_340_089_798_409),
        (1e-300, -37.047_096_299_361_2),
    ];

    #[test]
    fn inverse_normal_cdf_matches_known_quantiles() {
        for (p, z) in KNOWN {
            let got = inverse_normal_cdf(p);
            assert!(
                (got - z).abs() <= 1e-9 * z.abs().max(1.0),
                "Φ⁻¹({p}) = {got}, expected {z}"
            );
        }
    }

    #[test]
    fn inverse_normal_cdf_is_antisymmetric_and_monotone() {
        let mut previous = f64::NEG_INFINITY;
        for k in 1..1000 {
            let p = k as f64 / 1000.0;
            let z = inverse_normal_cdf(p);
            assert!(z > previous, "not increasing at p = {p}");
            assert!(
                (z + inverse_normal_cdf(1.0 - p)).abs() < 1e-12,
                "asymmetric at {p}"
            );
            previous = z;
        }
    }

    #[test]
    fn inverse_normal_cdf_handles_the_ends() {
        assert_eq!(inverse_normal_cdf(0.0), f64::NEG_INFINITY);
        assert_eq!(inverse_normal_cdf(1.0), f64::INFINITY);
        assert!(inverse_normal_cdf(-0.1).is_nan());
        assert!(inverse_normal_cdf(1.1).is_nan());
        assert!(inverse_normal_cdf(f64::NAN).is_nan());
    }
}
