//! Uniform and normal draws from a bare `rand_core` generator, so the core needs no `rand`.
//!
//! - Uniform doubles take the top 53 bits of one `next_u64` (every multiple of 2⁻⁵³ in the
//!   interval is equally likely).
//! - Integers below `n` use Lemire's multiply-and-reject method: unbiased, one draw on average.
//! - Standard normals use the Box–Muller transform, which turns two uniforms into two
//!   independent normals; [`fill_standard_normal`] uses both of each pair.
//!
//! Draws are made in `f64` whatever the scalar of the chain, and [`fill_standard_normal`]
//! rounds them once to it: an `f32` chain's momenta keep the `f64` draw's tails (to 8.6 sd,
//! where 24-bit uniforms would stop at 5.9), and the stream of draws is the same for both.

use rand_core::Rng;

use crate::real::Real;

const TWO_POW_M53: f64 = 1.0 / (1u64 << 53) as f64;

/// A uniform draw on `[0, 1)`.
#[inline]
pub fn uniform<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * TWO_POW_M53
}

/// A uniform draw on the open interval `(0, 1)`: safe to take the logarithm of.
#[inline]
pub fn uniform_open<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    ((rng.next_u64() >> 11) as f64 + 0.5) * TWO_POW_M53
}

/// A uniform integer in `0..n` (Lemire 2019). Returns 0 when `n == 0`.
pub fn uniform_below<R: Rng + ?Sized>(rng: &mut R, n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let threshold = n.wrapping_neg() % n;
    loop {
        let m = (rng.next_u64() as u128) * (n as u128);
        if (m as u64) >= threshold {
            return (m >> 64) as u64;
        }
    }
}

/// Two independent standard normal draws (Box–Muller).
#[inline]
pub fn standard_normal_pair<R: Rng + ?Sized>(rng: &mut R) -> (f64, f64) {
    let radius = libm::sqrt(-2.0 * libm::log(uniform_open(rng)));
    let angle = core::f64::consts::TAU * uniform(rng);
    let (s, c) = libm::sincos(angle);
    (radius * c, radius * s)
}

/// One standard normal draw (half of a Box–Muller pair; use [`fill_standard_normal`] for many).
#[inline]
pub fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    standard_normal_pair(rng).0
}

/// Fills `out` with independent standard normal draws (each rounded once to `T`), a
/// Box–Muller pair per two entries; an odd last entry takes the first of a pair (the same
/// draws as [`standard_normal`]).
pub fn fill_standard_normal<T: Real, R: Rng + ?Sized>(rng: &mut R, out: &mut [T]) {
    for pair in out.chunks_mut(2) {
        let (x, y) = standard_normal_pair(rng);
        for (slot, z) in pair.iter_mut().zip([x, y]) {
            *slot = T::of(z);
        }
    }
}

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny, fast, well-mixed 64-bit generator with one
/// word of state, for devices without another source of randomness, for tests, and for
/// spreading nearby seeds apart. Not cryptographic; its period is 2⁶⁴.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64(pub u64);

impl rand_core::TryRng for SplitMix64 {
    type Error = core::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok((self.try_next_u64()? >> 32) as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Ok(z ^ (z >> 31))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for chunk in dst.chunks_mut(8) {
            let v = self.try_next_u64()?.to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_moments_within_monte_carlo_error() {
        let mut rng = SplitMix64(7);
        let n = 200_000;
        let mut x = std::vec![0.0; n];
        fill_standard_normal(&mut rng, &mut x);
        let mean = x.iter().sum::<f64>() / n as f64;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        let kurt = x.iter().map(|v| (v - mean).powi(4)).sum::<f64>() / n as f64;
        // sd(mean) = 1/√n; sd(var) = √(2/n); sd(4th moment) = √(96/n).
        assert!(mean.abs() < 4.0 / (n as f64).sqrt(), "mean {mean}");
        assert!(
            (var - 1.0).abs() < 4.0 * (2.0 / n as f64).sqrt(),
            "var {var}"
        );
        assert!(
            (kurt - 3.0).abs() < 4.0 * (96.0 / n as f64).sqrt(),
            "kurtosis {kurt}"
        );
    }

    #[test]
    fn uniform_below_is_unbiased() {
        let mut rng = SplitMix64(3);
        let n = 60_000;
        let mut counts = [0u32; 6];
        for _ in 0..n {
            counts[uniform_below(&mut rng, 6) as usize] += 1;
        }
        // Each count is Binomial(n, 1/6): sd = √(n·5/36).
        let sd = (n as f64 * 5.0 / 36.0).sqrt();
        for c in counts {
            assert!((c as f64 - n as f64 / 6.0).abs() < 4.0 * sd, "{counts:?}");
        }
    }

    #[test]
    fn uniform_stays_in_unit_interval() {
        let mut rng = SplitMix64(11);
        for _ in 0..10_000 {
            let u = uniform(&mut rng);
            let v = uniform_open(&mut rng);
            assert!((0.0..1.0).contains(&u));
            assert!(v > 0.0 && v < 1.0);
        }
    }
}
