//! The cubic polynomial `c(x) = Σ_{a≤b≤c} w_abc x_a x_b x_c` an anchored surrogate
//! ([`super::anchored`]) can carry between its quadratic and its residual network, score-fitted
//! to what the quadratic misses.
//!
//! Why: the elliptic PDE's posterior in its Laplace coordinates is the quadratic plus mostly a
//! cubic term (the forward map's curvature), and random softplus units do not fit a cubic in
//! 20 dimensions. Measured on 2000 exact gradients at draws of the approximation 1.2× wider
//! (seed 1): the quadratic alone has a held-out relative gradient error of 0.19, 50-600 random
//! units 0.16-0.18, the cubic score-fitted on 400 draws 0.076; the sd of `U − Ũ` falls from
//! 0.78 to 0.25. RNS-RMHMC's rare long stays come from dips of that error (see the PDE bench),
//! and with the cubic its min ESS no longer drops to a third on some seeds.
//!
//! The fit is linear least squares on the gradients (`d` equations per state) with a small
//! ridge, its normal matrix accumulated term by term: component `i` of a state's gradient
//! involves only the terms holding `x_i`. A cubic has `d(d+1)(d+2)/6` coefficients, 1540 at
//! d = 20, so it is for small `d` only ([`MAX_TERMS`]).

use faer::linalg::solvers::Solve;
use faer::{Mat, Side};
use serde::{Deserialize, Serialize};

use super::states::TrainingSet;
use crate::{Error, Result};

/// The most coefficients a cubic may have: its normal matrix holds their square (5456 at
/// d = 30, 240 MB), and its solve costs their cube.
pub const MAX_TERMS: usize = 5456;

/// The ridge on the coefficients (the fit is well determined with `d` equations per state and
/// a few hundred states at d = 20; the ridge only guards a short or degenerate set).
const RIDGE: f64 = 1e-3;

/// `Σ_{a≤b≤c} w_abc x_a x_b x_c`, the coefficients in the order of the loops `a ≤ b ≤ c`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cubic {
    dim: usize,
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    weights: Vec<f64>,
}

/// The number of terms `a ≤ b ≤ c` of `d` coordinates.
fn terms(d: usize) -> usize {
    d * (d + 1) * (d + 2) / 6
}

/// Calls `f(t, a, b, c)` for every term `t` in order.
fn for_each_term(d: usize, mut f: impl FnMut(usize, usize, usize, usize)) {
    let mut t = 0;
    for a in 0..d {
        for b in a..d {
            for c in b..d {
                f(t, a, b, c);
                t += 1;
            }
        }
    }
}

impl Cubic {
    /// The cubic whose gradient fits `targets(i)` at position `i` of `states`, for every `i`
    /// with `use_state(i)` (a least-squares fit with a small ridge). An error for a dimension
    /// with more than [`MAX_TERMS`] terms or a set that determines no fit.
    pub fn fit(
        states: &TrainingSet,
        targets: &dyn Fn(usize) -> Vec<f64>,
        use_state: &dyn Fn(usize) -> bool,
    ) -> Result<Self> {
        let d = states.dim();
        let n = terms(d);
        if n > MAX_TERMS {
            return Err(Error::invalid(format!(
                "a cubic term in {d} dimensions has {n} coefficients, more than the {MAX_TERMS} \
                 a fit can hold"
            )));
        }
        let used: Vec<usize> = (0..states.len()).filter(|&s| use_state(s)).collect();
        let targets: Vec<Vec<f64>> = used.iter().map(|&s| targets(s)).collect();
        let mut normal = Mat::<f64>::zeros(n, n);
        let mut right = Mat::<f64>::zeros(n, 1);
        // Component `i` of a gradient involves only the terms holding `x_i`: each coordinate
        // adds one dense block `AᵢᵀAᵢ` (states × those terms), a matrix product rather than a
        // scattered sum per state (0.4 s of the 30×30 PDE's 0.6 s training at 400 states).
        let triples = term_triples(d);
        for (i, holding) in terms_holding(&triples, d).iter().enumerate() {
            let a = Mat::<f64>::from_fn(used.len(), holding.len(), |r, k| {
                term_derivative(triples[holding[k]], i, states.position(used[r]))
            });
            let b = Mat::<f64>::from_fn(used.len(), 1, |r, _| targets[r][i]);
            let block = a.transpose() * &a;
            let rhs = a.transpose() * &b;
            for (k, &t) in holding.iter().enumerate() {
                right[(t, 0)] += rhs[(k, 0)];
                for (l, &u) in holding.iter().enumerate() {
                    normal[(t, u)] += block[(k, l)];
                }
            }
        }
        for t in 0..n {
            normal[(t, t)] += RIDGE;
        }
        let weights = normal
            .llt(Side::Lower)
            .map_err(|_| Error::invalid("the cubic term's normal equations are singular"))?
            .solve(&right);
        let weights: Vec<f64> = (0..n).map(|t| weights[(t, 0)]).collect();
        if weights.iter().any(|w| !w.is_finite()) {
            return Err(Error::invalid("the cubic term's fit is not finite"));
        }
        Ok(Self { dim: d, weights })
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Checks a cubic read from a file against the dimension `d` it is for.
    pub fn check(&self, d: usize) -> std::result::Result<(), String> {
        if self.dim != d || self.weights.len() != terms(d) {
            return Err(format!(
                "a cubic term of dimension {} with {} coefficients, for dimension {d}",
                self.dim,
                self.weights.len()
            ));
        }
        Ok(())
    }

    /// `c(x)`.
    pub fn value(&self, x: &[f64]) -> f64 {
        let mut sum = 0.0;
        for_each_term(self.dim, |t, a, b, c| {
            sum += self.weights[t] * x[a] * x[b] * x[c]
        });
        sum
    }

    /// Adds `∇c(x)` to `grad`.
    pub fn add_gradient(&self, x: &[f64], grad: &mut [f64]) {
        for_each_term(self.dim, |t, a, b, c| {
            let w = self.weights[t];
            grad[a] += w * x[b] * x[c];
            grad[b] += w * x[a] * x[c];
            grad[c] += w * x[a] * x[b];
        });
    }
}

/// The coordinates `[a, b, c]` of every term, in order.
fn term_triples(d: usize) -> Vec<[usize; 3]> {
    let mut triples = Vec::with_capacity(terms(d));
    for_each_term(d, |_, a, b, c| triples.push([a, b, c]));
    triples
}

/// For each coordinate, the indices of the terms holding it.
fn terms_holding(triples: &[[usize; 3]], d: usize) -> Vec<Vec<usize>> {
    let mut holding: Vec<Vec<usize>> = vec![Vec::new(); d];
    for (t, &[a, b, c]) in triples.iter().enumerate() {
        holding[a].push(t);
        if b != a {
            holding[b].push(t);
        }
        if c != b {
            holding[c].push(t);
        }
    }
    holding
}

/// `∂(x_a x_b x_c)/∂x_i`.
fn term_derivative([a, b, c]: [usize; 3], i: usize, x: &[f64]) -> f64 {
    let mut v = 0.0;
    if a == i {
        v += x[b] * x[c];
    }
    if b == i {
        v += x[a] * x[c];
    }
    if c == i {
        v += x[a] * x[b];
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64;
    use shmc_core::random::fill_standard_normal;

    /// The gradient of a known cubic in 4 dimensions (every kind of term: `x_a³`, `x_a²x_b`,
    /// `x_a x_b x_c`).
    fn known(x: &[f64]) -> (f64, Vec<f64>) {
        let value = 0.3 * x[0].powi(3) - 0.2 * x[1] * x[1] * x[2] + 0.5 * x[0] * x[2] * x[3];
        let grad = vec![
            0.9 * x[0] * x[0] + 0.5 * x[2] * x[3],
            -0.4 * x[1] * x[2],
            -0.2 * x[1] * x[1] + 0.5 * x[0] * x[3],
            0.5 * x[0] * x[2],
        ];
        (value, grad)
    }

    /// The fit recovers a cubic from its gradients alone (value included: a cubic has no
    /// constant to lose), and its gradient is the derivative of its value.
    #[test]
    fn a_cubic_is_recovered_from_its_gradients() {
        let mut rng = Pcg64::seed_from_u64(3);
        let mut states = TrainingSet::new(4);
        for _ in 0..40 {
            let mut x = [0.0; 4];
            fill_standard_normal(&mut rng, &mut x);
            let (u, g) = known(&x);
            states.push(&x, u, Some(&g));
        }
        let cubic = Cubic::fit(&states, &|i| states.gradient(i).unwrap().to_vec(), &|_| {
            true
        })
        .unwrap();
        let x = [0.7, -1.2, 0.4, 1.9];
        let (u, g) = known(&x);
        assert!(
            (cubic.value(&x) - u).abs() < 1e-3,
            "{} vs {u}",
            cubic.value(&x)
        );
        let mut grad = vec![0.0; 4];
        cubic.add_gradient(&x, &mut grad);
        for k in 0..4 {
            assert!(
                (grad[k] - g[k]).abs() < 1e-3,
                "{k}: {} vs {}",
                grad[k],
                g[k]
            );
            let h = 1e-6;
            let (mut up, mut down) = (x, x);
            up[k] += h;
            down[k] -= h;
            let fd = (cubic.value(&up) - cubic.value(&down)) / (2.0 * h);
            assert!((fd - grad[k]).abs() < 1e-6, "{k}: {fd} vs {}", grad[k]);
        }
        assert!(cubic.check(4).is_ok() && cubic.check(5).is_err());
    }

    /// Too many coefficients is an error before anything is allocated.
    #[test]
    fn a_cubic_of_too_many_terms_is_refused() {
        let states = TrainingSet::new(40);
        let err = Cubic::fit(&states, &|_| vec![0.0; 40], &|_| true).unwrap_err();
        assert!(err.to_string().contains("11480 coefficients"), "{err}");
    }
}
