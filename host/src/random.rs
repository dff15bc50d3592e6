//! The host's reproducible random streams. Chains, the surrogate's random input weights, VHMC's
//! pilot draws and the benchmark's NUTS chains all draw from one seed, each from its own stream,
//! so any of them can be rerun alone and give the same numbers; the seeding lives below every
//! layer that uses it, so none of them has to import another for it.

use rand::Rng;
use rand_pcg::Pcg64;
use shmc_core::random::SplitMix64;

/// Independent, reproducible streams: the seed fixes the state, the stream number the stream.
/// Chains use their small chain numbers; other users pick large stream numbers that cannot
/// collide with them.
pub fn chain_rng(seed: u64, stream: usize) -> Pcg64 {
    // SplitMix64 spreads nearby seeds over the whole state space.
    let z = SplitMix64(seed).next_u64();
    let state = ((z as u128) << 64) | (seed as u128);
    Pcg64::new(state, stream as u128)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_differ_and_repeat() {
        let (mut a, mut b, mut c) = (chain_rng(1, 1), chain_rng(1, 2), chain_rng(1, 1));
        let (x, y, z) = (a.next_u64(), b.next_u64(), c.next_u64());
        assert_ne!(x, y);
        assert_eq!(x, z);
    }
}
