//! One Hamiltonian Monte Carlo transition: momentum draw, a leapfrog trajectory under the
//! proposal potential, and a Metropolis–Hastings decision with the *exact* Hamiltonian.
//!
//! The chain's [`State`] caches the exact `U` and the proposal gradient at the current point,
//! so a transition costs one trajectory and nothing more. [`Hmc`] owns the scratch vectors of
//! the proposal; neither allocates per transition.
//!
//! Positions, momenta, gradients and `U` are in the chain's scalar `T` (`f64` unless named;
//! `f32` on a single-precision device). The settings, the energies and the acceptance decision
//! are `f64`: `H = U + K` is summed in `f64` from the `T` values of `U` and `K`, so the decision
//! is exact with respect to the user's `U` for either scalar.

use nalgebra::{DefaultAllocator, Dim, OVector, allocator::Allocator};
use rand_core::Rng;

use crate::error::{Error, check_dim};
use crate::leapfrog::leapfrog;
use crate::metric::Metric;
use crate::potential::Dynamics;
use crate::random::{uniform, uniform_below};
use crate::real::Real;

/// How many leapfrog steps a trajectory takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steps {
    /// Always this many.
    Fixed(u32),
    /// Uniform on `1..=L` afresh each transition (Neal 2011), as the papers do: it avoids the
    /// periodic trajectories a fixed length can fall into.
    Jittered(u32),
    /// Uniform on `min..=max` afresh each transition: jittered, without the short trajectories
    /// that barely move (where the posterior's scales are known, e.g. from a surrogate).
    Between(u32, u32),
}

impl Steps {
    /// The largest number of steps a trajectory can take.
    pub fn max(self) -> u32 {
        match self {
            Steps::Fixed(n) | Steps::Jittered(n) | Steps::Between(_, n) => n,
        }
    }

    /// The smallest number of steps a trajectory can take.
    pub fn min(self) -> u32 {
        match self {
            Steps::Fixed(n) => n,
            Steps::Jittered(_) => 1,
            Steps::Between(n, _) => n,
        }
    }

    /// The mean number of steps per trajectory.
    pub fn mean(self) -> f64 {
        (self.min() as f64 + self.max() as f64) / 2.0
    }

    /// Draws a trajectory length.
    pub fn draw<R: Rng + ?Sized>(self, rng: &mut R) -> u32 {
        match self {
            Steps::Fixed(n) => n,
            Steps::Jittered(_) | Steps::Between(..) => {
                let (lo, hi) = (self.min(), self.max());
                lo + uniform_below(rng, u64::from(hi - lo) + 1) as u32
            }
        }
    }
}

/// The settings of a transition.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HmcConfig {
    /// The leapfrog step size ε.
    pub step_size: f64,
    /// The trajectory length.
    pub steps: Steps,
    /// An energy error `H(end) − H(start)` above this marks the trajectory divergent (Stan uses
    /// 1000).
    pub max_energy_error: f64,
}

impl HmcConfig {
    /// A validated configuration with Stan's divergence threshold of 1000.
    pub fn new(step_size: f64, steps: Steps) -> Result<Self, Error> {
        let config = Self {
            step_size,
            steps,
            max_energy_error: 1000.0,
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks the step size and the number of steps.
    pub fn validate(&self) -> Result<(), Error> {
        if !(self.step_size.is_finite() && self.step_size > 0.0) {
            return Err(Error::InvalidStepSize);
        }
        if self.steps.min() == 0 {
            return Err(Error::ZeroSteps);
        }
        if self.steps.min() > self.steps.max() {
            return Err(Error::EmptyStepRange);
        }
        if self.max_energy_error.is_nan() || self.max_energy_error <= 0.0 {
            return Err(Error::NotPositive("divergence threshold"));
        }
        Ok(())
    }
}

/// Where a chain is: the position, the exact `U` there and the proposal gradient there.
#[derive(Clone, Debug)]
pub struct State<D: Dim, T: Real = f64>
where
    DefaultAllocator: Allocator<D>,
{
    /// The position `q`.
    pub position: OVector<T, D>,
    /// The exact potential `U(q)`.
    pub potential: T,
    /// The gradient of the *proposal* potential at `q`.
    pub gradient: OVector<T, D>,
}

impl<D: Dim, T: Real> State<D, T>
where
    DefaultAllocator: Allocator<D>,
{
    /// A state at `position`, evaluating `U` and the proposal gradient there.
    pub fn new<Dy: Dynamics<T> + ?Sized>(
        position: OVector<T, D>,
        dynamics: &Dy,
    ) -> Result<Self, Error> {
        check_dim(dynamics.dim(), position.len())?;
        let mut state = Self {
            gradient: position.clone(),
            position,
            potential: T::of(f64::NAN),
        };
        state.refresh(dynamics);
        Ok(state)
    }

    /// Re-evaluates `U` and the proposal gradient, as needed after the proposal changes (a
    /// retrained or updated surrogate). Costs one exact evaluation.
    pub fn refresh<Dy: Dynamics<T> + ?Sized>(&mut self, dynamics: &Dy) {
        self.potential = dynamics.end_point(self.position.as_slice(), self.gradient.as_mut_slice());
    }

    /// Re-evaluates only the proposal gradient, keeping the cached exact `U`.
    pub fn refresh_gradient<Dy: Dynamics<T> + ?Sized>(&mut self, dynamics: &Dy) {
        dynamics.proposal_gradient(self.position.as_slice(), self.gradient.as_mut_slice());
    }
}

/// What one transition did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transition {
    /// Whether the proposal was accepted.
    pub accepted: bool,
    /// The Metropolis–Hastings acceptance probability `min(1, exp(−ΔH))` (0 when divergent).
    pub accept_prob: f64,
    /// The Hamiltonian `U + K` of the state the chain is in after the transition.
    pub energy: f64,
    /// `H(proposal) − H(start)` with the exact `U` (non-finite for a broken trajectory).
    pub energy_error: f64,
    /// Whether the trajectory failed: a non-finite energy, or an error above the threshold.
    pub divergent: bool,
    /// The number of leapfrog steps taken (proposal gradient evaluations).
    pub steps: u32,
}

/// The scratch space of an HMC transition for dimension `D`.
#[derive(Clone, Debug)]
pub struct Hmc<D: Dim, T: Real = f64>
where
    DefaultAllocator: Allocator<D>,
{
    /// The settings used by [`Hmc::transition`]; adaptation may change the step size between
    /// transitions.
    pub config: HmcConfig,
    position: OVector<T, D>,
    momentum: OVector<T, D>,
    gradient: OVector<T, D>,
}

impl<D: Dim, T: Real> Hmc<D, T>
where
    DefaultAllocator: Allocator<D>,
{
    /// A workspace for points of dimension `dim` (`Const<N>` or `Dyn(n)`).
    pub fn new(dim: D, config: HmcConfig) -> Result<Self, Error> {
        config.validate()?;
        let zeros = OVector::<T, D>::zeros_generic(dim, nalgebra::U1);
        Ok(Self {
            config,
            position: zeros.clone(),
            momentum: zeros.clone(),
            gradient: zeros,
        })
    }

    /// One transition from `state`, which is replaced by the proposal if it is accepted.
    ///
    /// The momentum is drawn from `N(0, M)`, the trajectory follows the proposal potential of
    /// `dynamics`, and the proposal is accepted with probability `min(1, exp(H₀ − H₁))` where
    /// `H` uses the exact `U`. A non-finite `H₁` or `H₁ − H₀` above the divergence threshold is
    /// rejected and reported divergent.
    pub fn transition<Dy, M, R>(
        &mut self,
        state: &mut State<D, T>,
        dynamics: &Dy,
        metric: &M,
        rng: &mut R,
    ) -> Transition
    where
        Dy: Dynamics<T> + ?Sized,
        M: Metric<T> + ?Sized,
        R: Rng + ?Sized,
    {
        let n = self.config.steps.draw(rng);
        metric.draw_momentum(rng, self.momentum.as_mut_slice());
        let h0 = state.potential.to_f64() + metric.kinetic(self.momentum.as_slice()).to_f64();
        self.position.copy_from(&state.position);
        self.gradient.copy_from(&state.gradient);
        let u1 = leapfrog(
            dynamics,
            metric,
            T::of(self.config.step_size),
            n,
            self.position.as_mut_slice(),
            self.momentum.as_mut_slice(),
            self.gradient.as_mut_slice(),
        );
        let h1 = u1.to_f64() + metric.kinetic(self.momentum.as_slice()).to_f64();
        let energy_error = h1 - h0;
        let divergent = !energy_error.is_finite() || energy_error > self.config.max_energy_error;
        let accept_prob = if divergent {
            0.0
        } else if energy_error <= 0.0 {
            // `exp` of a non-negative number is at least 1, so the minimum is 1 without it: an
            // `exp` saved on about half the transitions.
            1.0
        } else {
            // The core's inlined, branch-free `exp` (within an ulp, as `libm`'s): on a cheap
            // model `libm`'s out-of-line call was 4 % of an iteration.
            crate::fastmath::exp(-energy_error).min(1.0)
        };
        // Draw the uniform even for certain acceptance so that the random stream does not
        // depend on the energy error's sign.
        let accepted = !divergent && uniform(rng) < accept_prob;
        if accepted {
            core::mem::swap(&mut state.position, &mut self.position);
            core::mem::swap(&mut state.gradient, &mut self.gradient);
            state.potential = u1;
        }
        Transition {
            accepted,
            accept_prob,
            energy: if accepted { h1 } else { h0 },
            energy_error,
            divergent,
            steps: n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SplitMix64;

    /// Every length in the range comes up, equally often within 5 binomial sd, and none outside.
    #[test]
    fn between_draws_each_length_in_its_range_uniformly() {
        let mut rng = SplitMix64(7);
        let steps = Steps::Between(4, 9);
        let n = 60_000;
        let mut counts = [0u32; 12];
        for _ in 0..n {
            counts[steps.draw(&mut rng) as usize] += 1;
        }
        let (p, k) = (1.0 / 6.0, n as f64);
        let sd = (k * p * (1.0 - p)).sqrt();
        for (len, &c) in counts.iter().enumerate() {
            if (4..=9).contains(&len) {
                assert!((c as f64 - k * p).abs() < 5.0 * sd, "{len}: {c}");
            } else {
                assert_eq!(c, 0, "{len} is outside 4..=9");
            }
        }
        assert_eq!((steps.min(), steps.max(), steps.mean()), (4, 9, 6.5));
        assert_eq!(Steps::Jittered(6).mean(), 3.5);
    }

    #[test]
    fn step_ranges_are_validated() {
        assert_eq!(
            HmcConfig::new(0.1, Steps::Between(5, 4)),
            Err(Error::EmptyStepRange)
        );
        assert_eq!(
            HmcConfig::new(0.1, Steps::Between(0, 4)),
            Err(Error::ZeroSteps)
        );
        assert!(HmcConfig::new(0.1, Steps::Between(4, 4)).is_ok());
    }
}
