//! Adaptation schedules.
//!
//! - [`adaptation_probability`]: the probability `a_t = t^(−κ)` with which an adaptive sampler
//!   swaps in its updated surrogate at iteration `t`. It vanishes (`a_t → 0`, diminishing
//!   adaptation) but not too fast (`Σ a_t = ∞` for `0 < κ ≤ 1`), the conditions under which an
//!   adaptive chain stays ergodic (Roberts & Rosenthal 2007).
//! - [`surrogate_weight`]: `μ_t = 1 − exp(−t/τ)`, the weight of the learned surrogate against the
//!   Laplace approximation in variational HMC's regularized potential.

/// `a_t = t^(−κ)` for `t ≥ 1` (and 1 at `t = 0`); `κ` should lie in `(0, 1]`.
pub fn adaptation_probability(t: u64, kappa: f64) -> f64 {
    if t == 0 {
        1.0
    } else {
        libm::pow(t as f64, -kappa).min(1.0)
    }
}

/// `μ_t = 1 − exp(−t/τ)` for `τ > 0`.
pub fn surrogate_weight(t: u64, tau: f64) -> f64 {
    1.0 - libm::exp(-(t as f64) / tau)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptation_probability_vanishes_slowly() {
        assert_eq!(adaptation_probability(0, 0.5), 1.0);
        assert_eq!(adaptation_probability(1, 0.5), 1.0);
        assert!((adaptation_probability(100, 0.5) - 0.1).abs() < 1e-15);
        assert!(adaptation_probability(10_000, 1.0) < adaptation_probability(100, 1.0));
    }

    #[test]
    fn surrogate_weight_goes_from_zero_to_one() {
        assert_eq!(surrogate_weight(0, 200.0), 0.0);
        assert!((surrogate_weight(200, 200.0) - (1.0 - (-1.0f64).exp())).abs() < 1e-15);
        assert!(surrogate_weight(10_000, 200.0) > 0.9999);
    }
}
