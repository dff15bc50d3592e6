//! `shmc-core`: the allocation-free heart of surrogate-accelerated Hamiltonian Monte Carlo.
//!
//! Everything a device needs to *run* a surrogate-accelerated chain lives here, written once and
//! generic over [`nalgebra`] dimensions: `Const<N>` when the sizes are fixed at compile time on a
//! microcontroller, `Dyn` when the host picks them at run time (the host turns on nalgebra's
//! allocator; this crate never allocates and never names a heap type).
//!
//! - [`Potential`]: `U(q)` and `∇U(q)`, implemented by exact models and by surrogates alike.
//! - [`Network`]: the random-basis shallow network `z(q) = Σ vᵢ a(wᵢ·q + dᵢ) + b`.
//! - [`leapfrog`](fn@leapfrog), [`Hmc`]: trajectories driven by any proposal potential, accepted with the
//!   *exact* Hamiltonian, so the chain targets the exact posterior whatever the surrogate.
//! - [`OnlineGreville`], [`OnlineScoreMatching`]: O(s²) online updates of the output weights.
//! - [`schedule`]: the vanishing adaptation probability and the surrogate-weight transition.
//! - [`training`]: a fixed-capacity (heapless) buffer of recent accepted states from which a
//!   device trains its surrogate online and refactorizes the Greville state.
//! - [`random`]: uniform and normal draws from a bare `rand_core` generator.
//! - [`fastmath`]: branch-free `exp`, logistic, softplus and `tanh` that vectorize in loops;
//!   [`fastmath32`]: the same in single precision, for an `f32` network.
//! - [`real`]: the scalar, `f64` (the default of every type and trait) or `f32` for a
//!   single-precision FPU; each algorithm above is written once for both.
//!
//! # Single precision on a host
//! `f32` also runs faster where the loops vectorize: four lanes per SSE2 register against two
//! (and a degree-7 `exp` where `f64` needs degree 13). Measured with `benches/scalar.rs`
//! (x86-64 baseline build, thread CPU time), `f32` throughput relative to `f64`:
//!
//! | (d, s) | network gradient (softplus) | Greville update (ridge start) |
//! | --- | --- | --- |
//! | (2, 16) | 1.52 | 1.07 |
//! | (10, 64) | 1.48 | 1.32 |
//! | (50, 256) | 1.91 | 1.70 |
//!
//! At (2, 16) the dot products and the Greville columns are too short to vectorize; the
//! gradient gains from the single-precision activations alone. With the `micromath` feature
//! the `f32` gradient runs at 0.56–1.07 of the `f64` throughput (its `exp` does not vectorize).
//!
//! # Memory on a device
//! Nothing is allocated: a device's RAM is the size of the structures it keeps, with
//! `b = size_of::<T>()` (8 for `f64`, 4 for `f32`), each structure rounded up to a multiple of
//! 8 bytes (`⌈·⌉₈`):
//!
//! | structure | bytes |
//! | --- | --- |
//! | [`FixedNetwork<D, S, T>`] | `⌈b·(D·S + 2S + 3D + 1) + 16⌉₈` (weights, offsets, output weights, transform, radial precisions, bias; the kind of unit) |
//! | [`FixedGreville<S, T>`] | `⌈b·(2S² + 3S + 2) + 16⌉₈` (the two `S × S` matrices dominate) |
//! | [`FixedHmc<D, T>`] | `⌈3b·D + 32⌉₈` (three scratch vectors, the settings) |
//! | [`FixedState<D, T>`] | `b·(2D + 1)` (aligned to `b` only) |
//! | [`TrainingBuffer<T, D, N>`] | `⌈N·b·(D + 1) + 16⌉₈` |
//!
//! So network, Greville state and HMC workspace together take
//! `⌈b·(DS + 2S + 3D + 1) + 16⌉₈ + ⌈b·(2S² + 3S + 2) + 16⌉₈ + ⌈3bD + 32⌉₈` bytes: 5,176 for
//! `f64` at D = 2, S = 16, 2,624 for `f32`; 73,784 and 36,928 at D = 10, S = 64.
//! `tests/memory.rs` checks every row against `size_of`. A chain's peak stack adds the
//! evaluation buffers (two `[T; 64]` blocks in a gradient) and whatever a constructor's
//! `Result` copies; the no_std probe measures it (`bash tests/no_std/check.sh`).
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

pub mod dual_averaging;
pub mod error;
pub mod fastmath;
pub mod fastmath32;
pub mod greville;
pub mod hmc;
pub mod leapfrog;
pub mod linalg;
pub mod metric;
pub mod network;
pub mod potential;
pub mod random;
pub mod real;
pub mod schedule;
pub mod score_matching;
pub mod training;

pub use dual_averaging::DualAveraging;
pub use error::Error;
pub use greville::OnlineGreville;
pub use hmc::{Hmc, HmcConfig, State, Steps, Transition};
pub use leapfrog::leapfrog;
pub use metric::{DiagonalMetric, IdentityMetric, Metric};
pub use network::{Activation, InputTransform, Network, NetworkConfig, Nodes, WeightDistribution};
pub use potential::{Dynamics, Exact, Potential, Surrogate};
pub use real::Real;
pub use score_matching::OnlineScoreMatching;
pub use training::{Sample, TrainingBuffer};

pub use nalgebra;
pub use nalgebra::{Const, Dyn};

/// A network with input dimension `D` and `S` hidden units fixed at compile time, computing in
/// `T` (`f64` unless named).
pub type FixedNetwork<const D: usize, const S: usize, T = f64> = Network<Const<D>, Const<S>, T>;
/// Online Greville state for `S` hidden units fixed at compile time.
pub type FixedGreville<const S: usize, T = f64> = OnlineGreville<Const<S>, T>;
/// Online score-matching state with dimensions fixed at compile time.
pub type FixedScoreMatching<const D: usize, const S: usize> =
    OnlineScoreMatching<Const<D>, Const<S>>;
/// An HMC workspace for a dimension fixed at compile time.
pub type FixedHmc<const D: usize, T = f64> = Hmc<Const<D>, T>;
/// A chain state for a dimension fixed at compile time.
pub type FixedState<const D: usize, T = f64> = State<Const<D>, T>;
