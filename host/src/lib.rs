//! `shmc`: the host side of surrogate-accelerated HMC.
pub use shmc_core as core;
