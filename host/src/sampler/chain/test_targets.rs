//! Test targets for the chain's kernels: a curved 2-D posterior whose moments are known and a
//! surrogate of it that is wrong on purpose, with the check of a run's moments against them.

use shmc_core::Potential;

use crate::diagnostics::{Draws, mcse_mean};

/// A twisted Gaussian: `x₁ ~ N(0, 1)`, `x₂ | x₁ ~ N(x₁² − 1, 1)`. Its moments are known:
/// `E x₁ = E x₂ = 0`, `E x₁² = 1`, `E x₂² = 1 + Var(x₁²) = 3`.
pub struct Twisted;

impl Potential for Twisted {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        let r = q[1] - q[0] * q[0] + 1.0;
        0.5 * q[0] * q[0] + 0.5 * r * r
    }
    fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
        let r = q[1] - q[0] * q[0] + 1.0;
        g[0] = q[0] - 2.0 * q[0] * r;
        g[1] = r;
        self.value(q)
    }
}

/// A Gaussian surrogate of the wrong place and shape: mean `(0.5, 0)`, variances `(1, 2)`.
pub struct Misplaced;

impl Potential for Misplaced {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        0.5 * (q[0] - 0.5).powi(2) + 0.25 * q[1] * q[1]
    }
    fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
        g[0] = q[0] - 0.5;
        g[1] = 0.5 * q[1];
        self.value(q)
    }
}

/// A correlated Gaussian: mean 0, covariance `[[0.8, 0.3], [0.3, 1.2]]`. Its precision exceeds
/// [`Misplaced`]'s in every direction, so the ratio of the two densities is bounded.
pub struct Correlated;

impl Correlated {
    /// `E x₁, E x₂, E x₁², E x₂²`.
    pub const MOMENTS: [f64; 4] = [0.0, 0.0, 0.8, 1.2];
    /// The precision, the covariance's inverse (its determinant is 0.87).
    const PRECISION: [[f64; 2]; 2] = [[1.2 / 0.87, -0.3 / 0.87], [-0.3 / 0.87, 0.8 / 0.87]];
}

impl Potential for Correlated {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        let mut g = [0.0; 2];
        self.value_and_gradient(q, &mut g)
    }
    fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
        let p = Self::PRECISION;
        g[0] = p[0][0] * q[0] + p[0][1] * q[1];
        g[1] = p[1][0] * q[0] + p[1][1] * q[1];
        0.5 * (q[0] * g[0] + q[1] * g[1])
    }
}

/// How many MCSE each of `E x₁, E x₂, E x₁², E x₂²` lies from the twisted Gaussian's.
pub fn errors_in_mcse(draws: &[[f64; 2]]) -> [f64; 4] {
    errors_from(draws, [0.0, 0.0, 1.0, 3.0])
}

/// How many MCSE each of `E x₁, E x₂, E x₁², E x₂²` lies from `exact`.
pub fn errors_from(draws: &[[f64; 2]], exact: [f64; 4]) -> [f64; 4] {
    let functions: [fn(&[f64; 2]) -> f64; 4] =
        [|q| q[0], |q| q[1], |q| q[0] * q[0], |q| q[1] * q[1]];
    let mut errors = [0.0; 4];
    for (k, f) in functions.into_iter().enumerate() {
        let values: Vec<f64> = draws.iter().map(f).collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        errors[k] = (mean - exact[k]).abs() / mcse_mean(&Draws::from_chain(&values));
    }
    errors
}
