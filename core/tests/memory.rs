//! The RAM formulas of the crate docs ("Memory on a device") against `size_of`, for both
//! scalars and several sizes: a field added to a structure without its row changing fails here.

use std::mem::size_of;

use shmc_core::{FixedGreville, FixedHmc, FixedNetwork, FixedState, Real, TrainingBuffer};

/// `x` rounded up to a multiple of 8.
fn round8(x: usize) -> usize {
    x.div_ceil(8) * 8
}

/// Each row of the table, for `b = size_of::<T>()`, with the sizes the compiler gives.
fn check<T: Real, const D: usize, const S: usize>() {
    let b = size_of::<T>();
    let network = round8(b * (D * S + 2 * S + 3 * D + 1) + 16);
    let greville = round8(b * (2 * S * S + 3 * S + 2) + 16);
    let hmc = round8(3 * b * D + 32);
    assert_eq!(
        size_of::<FixedNetwork<D, S, T>>(),
        network,
        "network D={D} S={S} b={b}"
    );
    assert_eq!(
        size_of::<FixedGreville<S, T>>(),
        greville,
        "Greville S={S} b={b}"
    );
    assert_eq!(size_of::<FixedHmc<D, T>>(), hmc, "HMC D={D} b={b}");
    assert_eq!(
        size_of::<FixedState<D, T>>(),
        b * (2 * D + 1),
        "state D={D} b={b}"
    );
    assert_eq!(
        size_of::<TrainingBuffer<T, D, 64>>(),
        round8(64 * b * (D + 1) + 16),
        "buffer D={D} b={b}"
    );
    println!(
        "b = {b}, D = {D}, S = {S}: network + Greville + HMC = {} bytes",
        network + greville + hmc
    );
}

#[test]
fn ram_formulas_match_size_of() {
    check::<f64, 2, 16>();
    check::<f32, 2, 16>();
    check::<f64, 10, 64>();
    check::<f32, 10, 64>();
    check::<f64, 3, 7>();
    check::<f32, 3, 7>();
    check::<f32, 1, 1>();
}
