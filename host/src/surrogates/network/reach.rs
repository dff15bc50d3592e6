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

/// A training state's distance from the mean and under the covariance of the *other* states,
/// given its distance `inside` under all `n` (Sherman–Morrison on the covariance with the state
/// taken out): `D₋ᵢ² = n²(n − 2) dᵢ² / ((n − 1)³ − n(n − 1) dᵢ²)`.
///
/// Why not the in-sample distance: a state pulls the mean and covariance towards itself, so the
/// states sit closer to the ellipsoid's centre than new points from where they came. With 200
/// states in 50 dimensions the in-sample distances average √50 ≈ 7.1 while new points from the
/// same distribution average about 8.2, and an in-sample radius left a chain's leapfrog outside
/// the reach at one step in nine (each an exact gradient instead of the network's). The
/// leave-one-out distance is what a new point sees; `∞` when the other states do not span the
/// space without this one.
fn left_out_distance(inside: f64, n: usize) -> f64 {
    let (n, d2) = (n as f64, inside * inside);
    let denominator = (n - 1.0).powi(3) - n * (n - 1.0) * d2;
    if n < 3.0 || denominator <= 0.0 {
        return f64::INFINITY;
    }
    (n * n * (n - 2.0) * d2 / denominator).sqrt()
}

impl Reach {
    /// The reach of a chain's `states`, by their in-sample distances: states of a chain that
    /// has not yet crossed the posterior understate its spread (on a 32-D Gaussian whose long
    /// axis the exact warmup had not crossed, a radius from leave-one-out distances let the
    /// network's extrapolation drive the chain and its variance along that axis came out at 0.025
    /// against 0.041), and the tighter radius keeps the exact gradient out there. `None`
    /// (everywhere) for fewer than two states or a coordinate they never moved in.
    pub fn of(states: &TrainingSet) -> Option<Self> {
        Self::fit(states, false)
    }

    /// The reach of `states` that are independent draws of one distribution (the Laplace
    /// approximation's), by their leave-one-out distances: a new point from that distribution
    /// sees them as a left-out draw sees the others ([`left_out_distance`]). `None` also when
    /// each state is needed to span the space.
    pub fn of_draws(states: &TrainingSet) -> Option<Self> {
        Self::fit(states, true)
    }

    /// The reach of `states`, by leave-one-out distances if `left_out`.
    fn fit(states: &TrainingSet, left_out: bool) -> Option<Self> {
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
        let (lower, full) = match covariance.clone().cholesky() {
            Some(cholesky) => (cholesky.unpack(), true),
            None => {
                let sd = covariance.diagonal().map(f64::sqrt);
                if sd.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
                    return None;
                }
                (DMatrix::from_diagonal(&sd), false)
            }
        };
        let mut reach = Self {
            centre,
            factor: lower.transpose().as_slice().to_vec(),
            radius: 0.0,
        };
        let farthest = (0..n)
            .map(|i| {
                let inside = reach.distance(states.position(i));
                if left_out && full {
                    left_out_distance(inside, n)
                } else {
                    inside
                }
            })
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

    /// The leave-one-out distance from the formula is the distance recomputed from the mean and
    /// covariance of the other states.
    #[test]
    fn the_left_out_distance_is_the_distance_from_the_other_states() {
        let mut rng = Pcg64::seed_from_u64(2);
        let (n, d) = (12, 3);
        let mut set = TrainingSet::new(d);
        for _ in 0..n {
            let mut z = [0.0; 3];
            fill_standard_normal(&mut rng, &mut z);
            set.push(&[z[0], z[0] + 0.5 * z[1], 2.0 * z[2] - z[1]], 0.0, None);
        }
        let all = Reach::of_draws(&set).unwrap();
        for i in 0..n {
            let mut others = TrainingSet::new(d);
            for k in (0..n).filter(|&k| k != i) {
                others.push(set.position(k), 0.0, None);
            }
            let direct = Reach::of_draws(&others).unwrap().distance(set.position(i));
            let formula = left_out_distance(all.distance(set.position(i)), n);
            assert!(
                (direct - formula).abs() <= 1e-10 * direct,
                "state {i}: {direct} recomputed, {formula} from the formula"
            );
        }
    }

    /// New points from the distribution independent draws came from fall inside their reach:
    /// 200 draws of a 50-D Gaussian, 4000 fresh ones. The in-sample radius (a chain's reach)
    /// leaves more than 5 % outside (the draws sit nearer their own mean than new points do;
    /// 366 at the time of writing), the left-out radius none (the
    /// farthest of 200 left-out distances is near their 99.5 % quantile, and the margin widens
    /// it). At most 0.2 % may fall outside.
    #[test]
    fn the_reach_of_draws_holds_new_points_from_where_they_came() {
        let mut rng = Pcg64::seed_from_u64(3);
        let (n, d, fresh) = (200, 50, 4000);
        let mut set = TrainingSet::new(d);
        let mut z = vec![0.0; d];
        for _ in 0..n {
            fill_standard_normal(&mut rng, &mut z);
            set.push(&z, 0.0, None);
        }
        let mut outside_of = |reach: &Reach| {
            (0..fresh)
                .filter(|_| {
                    fill_standard_normal(&mut rng, &mut z);
                    !reach.contains(&z)
                })
                .count()
        };
        let outside_chain = outside_of(&Reach::of(&set).unwrap());
        assert!(
            outside_chain > fresh / 20,
            "in-sample radius: {outside_chain} outside"
        );
        let outside = outside_of(&Reach::of_draws(&set).unwrap());
        assert!(
            outside * 500 <= fresh,
            "{outside} of {fresh} new points outside"
        );
    }
}
