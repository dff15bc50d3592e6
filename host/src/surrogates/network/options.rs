//! The network and how it is built and fitted: the number and kind of units, the ridge, the
//! input scale and transform, the seed of the random input parameters and the share of states
//! held out.

use shmc_core::Nodes;

use crate::Result;

/// The surrogate network with run-time input dimension and number of units.
pub type DynNetwork = shmc_core::Network<shmc_core::Dyn, shmc_core::Dyn>;

/// The scale factors [`Scale::Auto`] tries: powers of two from 0.5 to 64.
///
/// With the default input weights (`w ~ N(0, I/d)`, offsets `N(0, 1)`) a unit's argument moves
/// by about `1/c` per posterior standard deviation: `c ≤ 1` gives strongly nonlinear units
/// (curved targets), `c` of 8–64 units that are near-quadratic over the posterior, which is
/// what near-Gaussian posteriors want. Measured held-out gradient errors (s = 2000, 4000 states
/// of the d = 50 logistic-regression simulation, posterior sd ≈ 0.065): potential matching is
/// best at `c = 16` (our numpy reference's raw inputs, which gave HMC-level acceptance, are
/// `c ≈ 16` there) and clearly worse at 32 and 64, where the default ridge suppresses the units'
/// small quadratic parts; score matching is best at `c = 64` (2.2e-3, against 2.6e-3 at 32 and
/// 6.2e-3 at 128). On a 2-D Gaussian with s = 200 and a curved 3-D target the best is `c = 2`,
/// and 0.5 keeps room for strongly nonlinear targets. The error varies smoothly in `log c`, so
/// doubling steps are fine enough.
pub const AUTO_SCALE_GRID: [f64; 8] = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// How the scale factor `c` of the input transform `u = (q − m) / (c·sd)` is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Scale {
    /// Try every factor of [`AUTO_SCALE_GRID`] and keep the one with the smallest held-out
    /// relative gradient error (held-out value RMSE when no held-out state has a gradient).
    #[default]
    Auto,
    /// This factor (finite, positive).
    Fixed(f64),
}

/// The coordinates additive units see, before the scale factor `c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Inputs {
    /// `(q − m) / sd`: every coordinate centred and scaled by the training states' mean and
    /// standard deviation.
    Standardized,
    /// `L⁻¹(q − m)` with `LLᵀ` the training states' covariance: the posterior's correlations
    /// taken out as well, so that random unit directions are spread evenly over its shape.
    /// Correlated posteriors need it: on Bank Marketing (d = 51, posterior sds from 0.006 to
    /// 0.35 along strongly correlated directions; 3000 Laplace draws, s = 2000) the held-out
    /// gradient error of score matching is 0.29 standardized and 0.035 whitened (potential
    /// matching: 0.48 and 0.048), while on the near-isotropic logistic-regression simulation
    /// both are below 0.01. Falls back to `Standardized` when the covariance is singular (fewer
    /// states than dimensions) and for radial units, whose distances are per coordinate.
    #[default]
    Whitened,
}

/// Options of [`fit_potential`](super::fit_potential) and [`fit_score`](super::fit_score).
#[derive(Clone, Debug, PartialEq)]
pub struct TrainOptions {
    /// The number of hidden units `s`. Default 2000.
    pub hidden: usize,
    /// The kind of unit. Default softplus additive units; radial units are centred at training
    /// states drawn at random, and their width is in the transformed coordinates.
    pub nodes: Nodes,
    /// The ridge parameter `λ ≥ 0` on the output weights (never on the bias). Default 1e-6.
    pub ridge: f64,
    /// The scale factor of the input transform. Default [`Scale::Auto`].
    pub scale: Scale,
    /// The coordinates additive units see. Default [`Inputs::Whitened`].
    pub inputs: Inputs,
    /// The seed of the random input parameters (stream [`chain_rng`](crate::random::chain_rng)
    /// `(seed, 0x5EED_7EA1)`). Default 1.
    pub seed: u64,
    /// The fraction of states held out for choosing the scale and reporting errors, in
    /// `[0, 1)`: every `1/f`-th state. Default 0.2 (every 5th). With 0 nothing is held out,
    /// the errors are NaN and `Scale::Auto` is an error.
    pub holdout_fraction: f64,
    /// The most bytes the network's training may take (see [`TrainOptions::check_memory`]).
    /// Default: no limit.
    pub memory_limit: u64,
}

impl Default for TrainOptions {
    fn default() -> Self {
        Self {
            hidden: 2000,
            nodes: Nodes::default(),
            ridge: 1e-6,
            scale: Scale::Auto,
            inputs: Inputs::Whitened,
            seed: 1,
            holdout_fraction: 0.2,
            memory_limit: u64::MAX,
        }
    }
}

impl TrainOptions {
    /// Refuses, before anything is allocated, a network whose training on up to `states`
    /// states would pass [`TrainOptions::memory_limit`]: the fits hold an `s × s` normal matrix,
    /// the online updates (Greville's, score matching's) up to two more, and the design two rows
    /// of `s` per state (the score fit: the features and their projected gradients). `s` is what the user sets, and `s²` grows fastest: 300 000 units
    /// would need 2 TB.
    pub fn check_memory(&self, states: usize) -> Result<()> {
        let s = self.hidden as u128;
        let gram = s.checked_mul(s).and_then(|ss| ss.checked_mul(3));
        let features = (states as u128)
            .checked_mul(2)
            .and_then(|t| t.checked_mul(s));
        let bytes = gram
            .zip(features)
            .and_then(|(g, f)| g.checked_add(f))
            .and_then(|words| words.checked_mul(8));
        crate::memory::check(
            &format!("a network of {} hidden units", self.hidden),
            "hidden",
            bytes,
            self.memory_limit,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest sizes overflow no arithmetic: they are refused by the memory limit.
    #[test]
    fn the_largest_networks_are_refused_without_overflow() {
        for (hidden, states) in [
            (usize::MAX, 1),
            (1 << 40, usize::MAX),
            (usize::MAX, usize::MAX),
        ] {
            let options = TrainOptions {
                hidden,
                memory_limit: 1 << 30,
                ..TrainOptions::default()
            };
            let err = options.check_memory(states).unwrap_err();
            assert!(matches!(err, crate::Error::MemoryLimit { .. }), "{err}");
        }
    }
}
