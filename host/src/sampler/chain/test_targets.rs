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

/// A gentler banana than [`Twisted`]: `x₁ ~ N(0, 1)`, `x₂ | x₁ ~ N(b(x₁² − 1), 1)`, so
/// `E x₁ = E x₂ = 0`, `E x₁² = 1`, `E x₂² = 1 + 2b²`. Its tail stays within reach of HMC at a
/// fixed step size, so a run's MCSE can be trusted.
pub struct Bent(pub f64);

impl Bent {
    /// `E x₁, E x₂, E x₁², E x₂²`.
    pub fn moments(&self) -> [f64; 4] {
        [0.0, 0.0, 1.0, 1.0 + 2.0 * self.0 * self.0]
    }
}

impl Potential for Bent {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        let r = q[1] - self.0 * (q[0] * q[0] - 1.0);
        0.5 * q[0] * q[0] + 0.5 * r * r
    }
    fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
        let r = q[1] - self.0 * (q[0] * q[0] - 1.0);
        g[0] = q[0] - 2.0 * self.0 * q[0] * r;
        g[1] = r;
        self.value(q)
    }
}

/// `inner` moved by `shift`: `U(q) = inner(q − shift)`, a biased stand-in for a coarse level.
pub struct Shifted<'p> {
    pub inner: &'p dyn Potential,
    pub shift: Vec<f64>,
}

impl Shifted<'_> {
    fn moved(&self, q: &[f64]) -> Vec<f64> {
        q.iter().zip(&self.shift).map(|(x, s)| x - s).collect()
    }
}

impl Potential for Shifted<'_> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn value(&self, q: &[f64]) -> f64 {
        self.inner.value(&self.moved(q))
    }
    fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
        self.inner.value_and_gradient(&self.moved(q), g)
    }
}

/// How many MCSE the mean of each coordinate and of its square lie from `means` and
/// `squares` (all the means first, then the squares).
pub fn coordinate_errors(draws: &[Vec<f64>], means: &[f64], squares: &[f64]) -> Vec<f64> {
    let error = |f: &dyn Fn(&[f64]) -> f64, exact: f64| {
        let values: Vec<f64> = draws.iter().map(|q| f(q)).collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        (mean - exact).abs() / mcse_mean(&Draws::from_chain(&values))
    };
    let first = means.iter().enumerate().map(|(i, &m)| error(&|q| q[i], m));
    let second = squares
        .iter()
        .enumerate()
        .map(|(i, &m)| error(&|q| q[i] * q[i], m));
    first.chain(second).collect()
}
