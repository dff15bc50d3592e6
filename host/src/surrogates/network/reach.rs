//! Where a network has seen training states: the ellipsoid `‖L⁻¹(q − m)‖ ≤ r` of their mean `m`
//! and covariance `LLᵀ` (their standard deviations, when the covariance is singular), whose
//! radius `r` is the farthest state's distance with a margin. A random network's units are
//! defined everywhere, but what it learned holds only where it saw states: far out its gradient
//! is whatever the fit left there. A chain that wanders into such a tail proposes with that
//! gradient, is rejected again and again, and stays: on the banana a surrogate-driven chain of
//! 100 000 draws sat 8 829 draws at `β₁ = −2.8` and estimated `E[β₁²]` at 1.40 against 0.48.
//! Outside its reach the sampler proposes with the exact gradient instead
//! ([`crate::surrogates::Fallback`]), as it does outside a grid's box, so the tails are sampled
//! as exact HMC samples them; inside, which is nearly everywhere a chain goes, nothing changes.

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use crate::surrogates::states::TrainingSet;

/// The radius is the farthest training state's distance times this.
const MARGIN: f64 = 1.1;

/// The region a network's training states cover (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reach {
    /// `m`.
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    centre: Vec<f64>,
    /// `L`, lower triangular, row-major `d × d`.
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    factor: Vec<f64>,
    /// `r`.
    #[serde(with = "crate::surrogates::exact_floats")]
    radius: f64,
}

impl Reach {
    /// The reach of `states`; `None` (everywhere) for fewer than two states or a coordinate
    /// they never moved in.
    pub fn of(states: &TrainingSet) -> Option<Self> {
        let (n, d) = (states.len(), states.dim());
        if n < 2 || d == 0 {
            return None;
        }
        let mut centre = vec![0.0; d];
        for i in 0..n {
            for (c, x) in centre.iter_mut().zip(states.position(i)) {
                *c += x / n as f64;
            }
        }
        let mut covariance = DMatrix::zeros(d, d);
        for i in 0..n {
            let delta = DVector::from_iterator(
                d,
                states.position(i).iter().zip(&centre).map(|(x, c)| x - c),
            );
            covariance += &delta * delta.transpose() / (n - 1) as f64;
        }
        let lower = match covariance.clone().cholesky() {
            Some(cholesky) => cholesky.unpack(),
            None => {
                let sd = covariance.diagonal().map(f64::sqrt);
                if sd.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
                    return None;
                }
                DMatrix::from_diagonal(&sd)
            }
        };
        let mut reach = Self {
            centre,
            factor: lower.transpose().as_slice().to_vec(),
            radius: 0.0,
        };
        let farthest = (0..n)
            .map(|i| reach.distance(states.position(i)))
            .fold(0.0, f64::max);
        if !farthest.is_finite() {
            return None;
        }
        reach.radius = MARGIN * farthest;
        Some(reach)
    }

    /// `‖L⁻¹(q − m)‖`, by forward substitution (`d²` flops, nothing allocated beyond `d`).
    fn distance(&self, q: &[f64]) -> f64 {
        let d = self.centre.len();
        let mut u = vec![0.0; d];
        let mut sum = 0.0;
        for i in 0..d {
            let row = &self.factor[i * d..i * d + i + 1];
            let mut x = q[i] - self.centre[i];
            for j in 0..i {
                x -= row[j] * u[j];
            }
            u[i] = x / row[i];
            sum += u[i] * u[i];
        }
        sum.sqrt()
    }

    /// Whether `q` lies within the reach (a point of another dimension, or with a NaN
    /// coordinate, does not).
    pub fn contains(&self, q: &[f64]) -> bool {
        q.len() == self.centre.len() && self.distance(q) <= self.radius
    }

    /// Widens the radius to take `q` in, with the margin: a state learned online extends what
    /// the network has seen.
    pub fn extend(&mut self, q: &[f64]) {
        if q.len() == self.centre.len() {
            let distance = self.distance(q);
            if distance.is_finite() {
                self.radius = self.radius.max(MARGIN * distance);
            }
        }
    }

    /// Whether the record read from a file is consistent (a square lower factor with a positive
    /// diagonal, a positive finite radius) for dimension `dim`.
    pub fn check(&self, dim: usize) -> Result<(), String> {
        let d = self.centre.len();
        if d != dim || self.factor.len() != d * d {
            return Err(format!(
                "the reach has {} coordinates and {} factor entries for dimension {dim}",
                d,
                self.factor.len()
            ));
        }
        if self
            .centre
            .iter()
            .chain(&self.factor)
            .any(|x| !x.is_finite())
            || !self.radius.is_finite()
        {
            return Err("the reach is not finite".into());
        }
        if (0..d).any(|i| self.factor[i * d + i] <= 0.0) || self.radius <= 0.0 {
            return Err("the reach's factor or radius is not positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64;
    use shmc_core::random::fill_standard_normal;

    /// States of `N(m, diag(4, 1/4))` rotated by 45°: the reach holds every one of them, the
    /// same distance along the long axis is outside along the short one, and extending by a far
    /// point takes it in.
    #[test]
    fn the_reach_holds_the_states_and_follows_their_shape() {
        let mut rng = Pcg64::seed_from_u64(1);
        let mut set = TrainingSet::new(2);
        let (c, s) = (
            std::f64::consts::FRAC_1_SQRT_2,
            std::f64::consts::FRAC_1_SQRT_2,
        );
        for _ in 0..500 {
            let mut z = [0.0; 2];
            fill_standard_normal(&mut rng, &mut z);
            let (a, b) = (2.0 * z[0], 0.5 * z[1]);
            set.push(&[1.0 + c * a - s * b, -1.0 + s * a + c * b], 0.0, None);
        }
        let mut reach = Reach::of(&set).unwrap();
        for i in 0..set.len() {
            assert!(reach.contains(set.position(i)));
        }
        let along = [1.0 + c * 5.0, -1.0 + s * 5.0];
        let across = [1.0 - s * 5.0, -1.0 + c * 5.0];
        assert!(reach.contains(&along), "{reach:?}");
        assert!(!reach.contains(&across));
        assert!(!reach.contains(&[f64::NAN, 0.0]));
        reach.extend(&across);
        assert!(reach.contains(&across));
        assert!(reach.check(2).is_ok());
        assert!(reach.check(3).is_err());
    }
}
