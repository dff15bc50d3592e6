//! What RMHMC's kernel ([`super::generalized`]) did and cost, as a chain's result and its
//! checkpoint keep it: apart from the kernel, so that the kernel seam ([`super::kernel`]) can
//! name it without importing a kernel.

use serde::{Deserialize, Serialize};

use crate::riemannian::RmhmcCounts;

/// What RMHMC's transitions did and cost in one part of a chain (warmup or sampling).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelWork {
    /// Transitions made with the generalized leapfrog.
    pub transitions: u64,
    /// Fixed-point iterations, steps, and the trajectories each failure ended.
    pub counts: RmhmcCounts,
    /// Points at which the metric was evaluated (factorized).
    pub metric_evaluations: u64,
    /// Products `G(q)x` without a factorization (the position solves' first phase).
    #[serde(default)]
    pub metric_products: u64,
    /// Seconds in the metric: its evaluations and every solve and derivative with them.
    pub metric_seconds: f64,
    /// Seconds in the transitions, the metric's included.
    pub seconds: f64,
}

/// RMHMC's side of a chain's result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RiemannianReport {
    /// The step size the kept draws used.
    pub step_size: f64,
    /// Warmup's transitions.
    pub warmup: KernelWork,
    /// The kept draws' transitions.
    pub sampling: KernelWork,
}
