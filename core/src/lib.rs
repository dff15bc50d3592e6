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
//! - [`random`]: uniform and normal draws from a bare `rand_core` generator.
//! - [`fastmath`]: branch-free `exp`, logistic, softplus and `tanh` that vectorize in loops.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

pub mod dual_averaging;
pub mod error;
pub mod fastmath;
pub mod greville;
pub mod hmc;
pub mod leapfrog;
pub mod linalg;
pub mod metric;
pub mod network;
pub mod potential;
pub mod random;
pub mod schedule;
pub mod score_matching;

pub use dual_averaging::DualAveraging;
pub use error::Error;
pub use greville::OnlineGreville;
pub use hmc::{Hmc, HmcConfig, State, Steps, Transition};
pub use leapfrog::leapfrog;
pub use metric::{DiagonalMetric, IdentityMetric, Metric};
pub use network::{Activation, InputTransform, Network, NetworkConfig, Nodes, WeightDistribution};
pub use potential::{Dynamics, Exact, Potential, Surrogate};
pub use score_matching::OnlineScoreMatching;

pub use nalgebra;
pub use nalgebra::{Const, Dyn};

/// A network with input dimension `D` and `S` hidden units fixed at compile time.
pub type FixedNetwork<const D: usize, const S: usize> = Network<Const<D>, Const<S>>;
/// Online Greville state for `S` hidden units fixed at compile time.
pub type FixedGreville<const S: usize> = OnlineGreville<Const<S>>;
/// Online score-matching state with dimensions fixed at compile time.
pub type FixedScoreMatching<const D: usize, const S: usize> =
    OnlineScoreMatching<Const<D>, Const<S>>;
/// An HMC workspace for a dimension fixed at compile time.
pub type FixedHmc<const D: usize> = Hmc<Const<D>>;
/// A chain state for a dimension fixed at compile time.
pub type FixedState<const D: usize> = State<Const<D>>;
