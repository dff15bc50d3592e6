//! The Karhunen–Loève expansion of the squared-exponential covariance
//! `C(x, y) = σ² exp(−‖x − y‖² / 2ℓ²)` on the unit square, computed numerically.
//!
//! The kernel is a product of the same one-dimensional kernel in each coordinate,
//! `C = σ² k(x₁, y₁) k(x₂, y₂)` with `k(s, t) = exp(−(s − t)² / 2ℓ²)`, so its eigenpairs on the
//! square are products of those of `k` on `[0, 1]`: `λ = σ² μ_a μ_b`, `v(x) = φ_a(x₁) φ_b(x₂)`.
//! The one-dimensional pairs come from the Nyström method on Gauss–Legendre points (nodes and
//! weights by Golub–Welsch): the symmetric matrix `W^½ K W^½` has eigenvalues `μ` and
//! eigenvectors `W^½ φ(xⱼ)`, both from nalgebra's symmetric eigensolver; between the nodes,
//! `φ(s) = μ⁻¹ Σⱼ wⱼ k(s, xⱼ) φ(xⱼ)` (the Nyström interpolant, exact at the nodes). The kernel is
//! analytic, so the eigenvalues converge exponentially in the number of nodes: 64 nodes resolve
//! every mode used here to rounding. The full two-dimensional Nyström problem on the same points
//! would be a 4096 × 4096 eigenproblem for the same answer.
//!
//! Each eigenfunction's sign is fixed so that it is positive at the first node (near 0): the
//! expansion, and so the model's parameters, are then the same on every machine.

use nalgebra::{DMatrix, SymmetricEigen};

use crate::{Error, Result};

/// Gauss–Legendre nodes per coordinate of the Nyström quadrature.
pub const NYSTROM_NODES: usize = 64;

/// The leading modes of the expansion.
#[derive(Clone, Debug)]
pub struct KarhunenLoeve {
    variance: f64,
    length_scale: f64,
    nodes: Vec<f64>,
    weights: Vec<f64>,
    /// One-dimensional eigenvalues `μ`, decreasing.
    mu: Vec<f64>,
    /// `phi[m * nodes + j] = φ_m(x_j)`.
    phi: Vec<f64>,
    /// The two-dimensional modes `(a, b, λ)`, decreasing in `λ`.
    modes: Vec<(usize, usize, f64)>,
}

impl KarhunenLoeve {
    /// The `modes` leading terms for variance `σ²` and length scale `ℓ`.
    pub fn new(variance: f64, length_scale: f64, modes: usize) -> Result<Self> {
        if !(variance.is_finite() && variance > 0.0) {
            return Err(Error::invalid(format!(
                "the covariance's variance must be positive and finite, got {variance}"
            )));
        }
        if !(length_scale.is_finite() && length_scale > 0.0) {
            return Err(Error::invalid(format!(
                "the covariance's length scale must be positive and finite, got {length_scale}"
            )));
        }
        if modes == 0 || modes > NYSTROM_NODES * NYSTROM_NODES {
            return Err(Error::invalid(format!(
                "the Karhunen–Loève expansion needs between 1 and {} modes, got {modes}",
                NYSTROM_NODES * NYSTROM_NODES
            )));
        }
        let (nodes, weights) = gauss_legendre_unit(NYSTROM_NODES);
        let m = nodes.len();
        let kernel =
            |s: f64, t: f64| (-(s - t) * (s - t) / (2.0 * length_scale * length_scale)).exp();
        let sym = DMatrix::from_fn(m, m, |i, j| {
            weights[i].sqrt() * kernel(nodes[i], nodes[j]) * weights[j].sqrt()
        });
        let eigen = SymmetricEigen::new(sym);
        let mut order: Vec<usize> = (0..m).collect();
        order.sort_by(|&a, &b| eigen.eigenvalues[b].total_cmp(&eigen.eigenvalues[a]));
        let mut mu = Vec::with_capacity(m);
        let mut phi = Vec::with_capacity(m * m);
        for &k in &order {
            mu.push(eigen.eigenvalues[k]);
            let column = eigen.eigenvectors.column(k);
            let sign = if column[0] < 0.0 { -1.0 } else { 1.0 };
            phi.extend((0..m).map(|j| sign * column[j] / weights[j].sqrt()));
        }
        // Only positive one-dimensional eigenvalues make modes; rounding leaves the tail at
        // ±1e-17 or so.
        let positive = mu.iter().take_while(|&&v| v > 0.0).count();
        let mut pairs: Vec<(usize, usize, f64)> = (0..positive)
            .flat_map(|a| (0..positive).map(move |b| (a, b)))
            .map(|(a, b)| (a, b, variance * mu[a] * mu[b]))
            .collect();
        if modes > pairs.len() {
            return Err(Error::invalid(format!(
                "the kernel resolves only {} modes on {NYSTROM_NODES} nodes, {modes} asked",
                pairs.len()
            )));
        }
        pairs.sort_by(|x, y| y.2.total_cmp(&x.2).then((x.0, x.1).cmp(&(y.0, y.1))));
        pairs.truncate(modes);
        Ok(Self {
            variance,
            length_scale,
            nodes,
            weights,
            mu,
            phi,
            modes: pairs,
        })
    }

    /// The number of modes kept.
    pub fn len(&self) -> usize {
        self.modes.len()
    }

    /// Whether no mode is kept (never, for a built expansion).
    pub fn is_empty(&self) -> bool {
        self.modes.is_empty()
    }

    /// The kept eigenvalues `λ₁ ≥ λ₂ ≥ …`.
    pub fn eigenvalues(&self) -> Vec<f64> {
        self.modes.iter().map(|m| m.2).collect()
    }

    /// The sum of every eigenvalue the quadrature resolves: `σ²` times the squared sum of the
    /// one-dimensional ones, which should match the trace `∫ C(x, x) dx = σ²`.
    pub fn resolved_trace(&self) -> f64 {
        let s: f64 = self.mu.iter().filter(|&&m| m > 0.0).sum();
        self.variance * s * s
    }

    /// The quadrature the expansion is orthonormal in: the tensor Gauss–Legendre points and
    /// weights on the unit square.
    pub fn quadrature(&self) -> (Vec<[f64; 2]>, Vec<f64>) {
        let mut points = Vec::with_capacity(self.nodes.len().pow(2));
        let mut weights = Vec::with_capacity(points.capacity());
        for (&y, &wy) in self.nodes.iter().zip(&self.weights) {
            for (&x, &wx) in self.nodes.iter().zip(&self.weights) {
                points.push([x, y]);
                weights.push(wx * wy);
            }
        }
        (points, weights)
    }

    /// Eigenfunction `i` (from 0) at the point `x`.
    pub fn eigenfunction(&self, i: usize, x: [f64; 2]) -> f64 {
        let (a, b, _) = self.modes[i];
        self.phi_1d(a, x[0]) * self.phi_1d(b, x[1])
    }

    /// `√λᵢ vᵢ(x)` at every point, row-major (`out[p · len + i]`): the table a model
    /// multiplies by `θ` to get `log c` at its quadrature points.
    pub fn tabulate(&self, points: &[[f64; 2]]) -> Vec<f64> {
        let d = self.len();
        let mut out = Vec::with_capacity(points.len() * d);
        for &x in points {
            for (i, &(_, _, lambda)) in self.modes.iter().enumerate() {
                out.push(lambda.sqrt() * self.eigenfunction(i, x));
            }
        }
        out
    }

    /// The one-dimensional eigenfunction `m` at `s` by Nyström interpolation.
    fn phi_1d(&self, m: usize, s: f64) -> f64 {
        let count = self.nodes.len();
        let row = &self.phi[m * count..(m + 1) * count];
        let l2 = 2.0 * self.length_scale * self.length_scale;
        let sum: f64 = self
            .nodes
            .iter()
            .zip(&self.weights)
            .zip(row)
            .map(|((&t, &w), &p)| w * (-(s - t) * (s - t) / l2).exp() * p)
            .sum();
        sum / self.mu[m]
    }
}

/// Gauss–Legendre nodes and weights on `[0, 1]` by Golub–Welsch: the nodes are the eigenvalues
/// of the Jacobi matrix of the Legendre recurrence, the weights the squared first components
/// of its eigenvectors.
pub fn gauss_legendre_unit(m: usize) -> (Vec<f64>, Vec<f64>) {
    let jacobi = DMatrix::from_fn(m, m, |i, j| {
        if i.abs_diff(j) == 1 {
            let k = i.max(j) as f64;
            k / (4.0 * k * k - 1.0).sqrt()
        } else {
            0.0
        }
    });
    let eigen = SymmetricEigen::new(jacobi);
    let mut pairs: Vec<(f64, f64)> = (0..m)
        .map(|k| {
            let v0 = eigen.eigenvectors[(0, k)];
            // On [−1, 1] the weights sum to 2; mapped to [0, 1] they sum to 1.
            (0.5 * (eigen.eigenvalues[k] + 1.0), v0 * v0)
        })
        .collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    pairs.into_iter().unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eigenfunctions_are_orthonormal_and_eigenvalues_positive_decreasing() {
        let kl = KarhunenLoeve::new(1.0, 0.2, 20).unwrap();
        let (points, weights) = kl.quadrature();
        let d = kl.len();
        let table: Vec<Vec<f64>> = (0..d)
            .map(|i| points.iter().map(|&x| kl.eigenfunction(i, x)).collect())
            .collect();
        for i in 0..d {
            for j in 0..d {
                let inner: f64 = weights
                    .iter()
                    .zip(&table[i])
                    .zip(&table[j])
                    .map(|((w, a), b)| w * a * b)
                    .sum();
                let expected = if i == j { 1.0 } else { 0.0 };
                assert!((inner - expected).abs() < 1e-10, "({i}, {j}): {inner}");
            }
        }
        let lambda = kl.eigenvalues();
        assert!(lambda.iter().all(|&l| l > 0.0));
        assert!(lambda.windows(2).all(|p| p[0] >= p[1]), "{lambda:?}");
        // Every resolved eigenvalue sums to the trace ∫ C(x, x) dx = σ² = 1; the 20 kept
        // hold most but not all of it.
        assert!((kl.resolved_trace() - 1.0).abs() < 1e-10);
        let kept: f64 = lambda.iter().sum();
        assert!(kept > 0.5 && kept < 1.0, "{kept}");
    }

    #[test]
    fn separable_expansion_matches_a_direct_two_dimensional_nystrom() {
        // The full 2-D Nyström problem on a 16×16 Gauss–Legendre grid, solved directly.
        let (nodes, weights) = gauss_legendre_unit(16);
        let pts: Vec<([f64; 2], f64)> = nodes
            .iter()
            .zip(&weights)
            .flat_map(|(&y, &wy)| {
                nodes
                    .iter()
                    .zip(&weights)
                    .map(move |(&x, &wx)| ([x, y], wx * wy))
            })
            .collect();
        let c = |a: [f64; 2], b: [f64; 2]| {
            (-((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)) / (2.0 * 0.04)).exp()
        };
        let m = pts.len();
        let sym = DMatrix::from_fn(m, m, |i, j| {
            pts[i].1.sqrt() * c(pts[i].0, pts[j].0) * pts[j].1.sqrt()
        });
        let mut direct: Vec<f64> = SymmetricEigen::new(sym)
            .eigenvalues
            .iter()
            .copied()
            .collect();
        direct.sort_by(|a, b| b.total_cmp(a));
        let kl = KarhunenLoeve::new(1.0, 0.2, 20).unwrap();
        for (i, (a, b)) in kl.eigenvalues().iter().zip(&direct).enumerate() {
            assert!((a - b).abs() < 1e-6 * a, "mode {i}: {a} vs {b}");
        }
    }

    #[test]
    fn eigenfunctions_solve_the_integral_equation_between_the_nodes() {
        // ∫ C(x, y) v(y) dy = λ v(x) at points that are not Nyström nodes, with the integral
        // taken on a different (finer) quadrature.
        let kl = KarhunenLoeve::new(1.0, 0.2, 12).unwrap();
        let (nodes, weights) = gauss_legendre_unit(90);
        for i in [0, 3, 11] {
            for x in [[0.0, 0.0], [0.37, 0.81], [1.0, 0.5]] {
                let mut integral = 0.0;
                for (&y2, &w2) in nodes.iter().zip(&weights) {
                    for (&y1, &w1) in nodes.iter().zip(&weights) {
                        let r2 = (x[0] - y1).powi(2) + (x[1] - y2).powi(2);
                        integral += w1 * w2 * (-r2 / 0.08).exp() * kl.eigenfunction(i, [y1, y2]);
                    }
                }
                let lambda = kl.eigenvalues()[i];
                let v = kl.eigenfunction(i, x);
                assert!((integral - lambda * v).abs() < 1e-9, "mode {i} at {x:?}");
            }
        }
    }

    #[test]
    fn gauss_legendre_integrates_polynomials_exactly() {
        let (x, w) = gauss_legendre_unit(5);
        for p in 0..10 {
            let q: f64 = x.iter().zip(&w).map(|(x, w)| w * x.powi(p)).sum();
            assert!((q - 1.0 / (p + 1) as f64).abs() < 1e-14, "degree {p}");
        }
    }

    #[test]
    fn bad_settings_are_errors() {
        assert!(KarhunenLoeve::new(1.0, 0.2, 0).is_err());
        assert!(KarhunenLoeve::new(-1.0, 0.2, 3).is_err());
        assert!(KarhunenLoeve::new(1.0, f64::NAN, 3).is_err());
    }
}
