//! The Gaussian-process hyperparameter posterior of the precomputing (sparse-grid HMC) paper,
//! section 4.3.
//!
//! Data `Y ~ N(0, Σ)` with the squared-exponential kernel plus a nugget,
//! `Σ_ij = η exp(−l ‖x_i − x_j‖²) + J δ_ij`, and log-normal priors
//! `log η, log l, log J ~ N(−1, 1)`. Sampling runs on `β = (log η, log l, log J)`:
//!
//! `U(β) = ½ log|Σ| + ½ Yᵀ Σ⁻¹ Y + ½ Σ_k (β_k + 1)²`,
//! `∂U/∂β_k = ½ tr(Σ⁻¹ ∂_k Σ) − ½ αᵀ (∂_k Σ) α + (β_k + 1)` with `α = Σ⁻¹ Y`,
//!
//! where `∂Σ/∂log η = η E`, `∂Σ/∂log l = −l η (D ∘ E)` and `∂Σ/∂log J = J I`
//! (`E_ij = exp(−l D_ij)`, `D_ij = ‖x_i − x_j‖²`). (The paper prints the force with its signs
//! garbled; this is the gradient of its `U`.)
//!
//! Cost: the value is one Cholesky factorization `Σ = LLᵀ` (nalgebra's, `n³/3` flops) and one
//! triangular solve. The gradient adds `M = L⁻¹` (a triangular solve against the identity) and
//! one matrix product: `Σ⁻¹ = MᵀM`, so `tr Σ⁻¹ = ‖M‖²_F`, `α = Mᵀ L⁻¹Y` and
//! `tr(Σ⁻¹B) = Σ_kj (MB)_kj M_kj`; `tr(Σ⁻¹K) = n − J tr Σ⁻¹` needs no product at all.
//!
//! The paper gives the kernel, the priors and the domain of interest
//! `[−1.6, 1.6]² × [−1.2, 0.4]` for `(log η, log l, log J)`, but not its data. Our choices
//! ([`GpHyper::simulate`]): `n = 100` points (the size of the paper's other simulated data
//! sets), inputs uniform on the unit square (the paper says only "2D"), and `Y` drawn from the
//! model itself at `(log η, log l, log J) = (0, 0, −0.4)`, the centre of that domain. With
//! these, the posterior's 99% intervals (checked for seeds 1–4) lie within or close to the
//! paper's domain: `log η` and `log l` are weakly identified (posterior sd ≈ 0.6), `log J` well
//! (sd ≈ 0.15), the same shape as the domain.

use nalgebra::{Cholesky, DMatrix, DVector, Dyn};
use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::Potential;
use shmc_core::random::{fill_standard_normal, uniform};

use super::{ModelEntry, ModelOption};
use crate::model::{Generative, Simulated};
use crate::{Error, Model, Result};

/// The registry's entry: the precomputing paper's Gaussian-process hyperparameters, their
/// data simulated.
pub const ENTRY: ModelEntry = ModelEntry {
    name: "gp-hyper",
    description: "Gaussian-process hyperparameters, priors N(-1, 1) on the logs (precomputing paper 4.3)",
    parameters: "log_eta, log_l, log_J",
    options: &[
        ModelOption::value("n", "N", "100 points"),
        ModelOption::value("data_seed", "SEED", "1: the simulated data's seed"),
    ],
    build: |spec| {
        let n = spec.get("n")?.unwrap_or(GpHyper::DEFAULT_N);
        // The squared distances, the covariance and its Cholesky factor (and the copy the
        // factorization takes), each n × n.
        crate::memory::check(
            &format!("the {n} × {n} covariance of {n} GP points"),
            "n",
            crate::memory::f64s([n, n, 4]),
            spec.memory_limit,
        )?;
        Ok(Box::new(GpHyper::simulate(
            n,
            spec.get("data_seed")?.unwrap_or(1),
        )?))
    },
    small: Some(|spec| {
        spec.set("n", 30);
        "N 30"
    }),
};

/// The posterior of the GP hyperparameters `(log η, log l, log J)`.
#[derive(Clone, Debug)]
pub struct GpHyper {
    /// Squared distances `D_ij = ‖x_i − x_j‖²`.
    sq_dist: DMatrix<f64>,
    /// The observations `Y`.
    y: DVector<f64>,
}

impl GpHyper {
    /// The mean of each log-normal prior (paper: −1).
    pub const PRIOR_MEAN: f64 = -1.0;
    /// The standard deviation of each log-normal prior (paper: 1).
    pub const PRIOR_SD: f64 = 1.0;
    /// The default number of simulated points (the paper does not say).
    pub const DEFAULT_N: usize = 100;
    /// The default `(log η, log l, log J)` the data are simulated from (the paper does not say).
    pub const DEFAULT_LOG_TRUTH: [f64; 3] = [0.0, 0.0, -0.4];
    /// The dimension of the simulated inputs (paper: a "2D Gaussian process").
    pub const INPUT_DIM: usize = 2;

    /// The posterior given inputs `x` (one point per row, any input dimension) and observations
    /// `y`, one per row of `x`. Fails on empty, non-finite or mismatched data.
    pub fn new(x: &DMatrix<f64>, y: &[f64]) -> Result<Self> {
        let n = x.nrows();
        if n == 0 || x.ncols() == 0 {
            return Err(Error::invalid(
                "GP model needs at least one input point of dimension ≥ 1",
            ));
        }
        if y.len() != n {
            return Err(Error::invalid(format!(
                "GP model: {} observations for {n} input points",
                y.len()
            )));
        }
        if x.iter().chain(y).any(|v| !v.is_finite()) {
            return Err(Error::invalid(
                "GP model: an input or observation is not finite",
            ));
        }
        let sq_dist = DMatrix::from_fn(n, n, |i, j| (x.row(i) - x.row(j)).norm_squared());
        Ok(Self {
            sq_dist,
            y: DVector::from_column_slice(y),
        })
    }

    /// [`GpHyper::simulate_from`] at [`GpHyper::DEFAULT_LOG_TRUTH`].
    pub fn simulate(n: usize, seed: u64) -> Result<Self> {
        Self::simulate_from(n, Self::DEFAULT_LOG_TRUTH, seed)
    }

    /// `n` inputs uniform on `[0, 1]²` and `Y = L z ~ N(0, Σ)` at the hyperparameters
    /// `log_truth = (log η, log l, log J)`, all drawn from a PCG-64 seeded with `seed`.
    /// Fails if `n == 0` or the hyperparameters are not finite.
    pub fn simulate_from(n: usize, log_truth: [f64; 3], seed: u64) -> Result<Self> {
        if n == 0 {
            return Err(Error::invalid("GP model needs at least one input point"));
        }
        if log_truth.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid(format!(
                "GP model: hyperparameters {log_truth:?} are not finite"
            )));
        }
        let mut rng = Pcg64::seed_from_u64(seed);
        let x = DMatrix::from_fn(n, Self::INPUT_DIM, |_, _| uniform(&mut rng));
        let mut z = DVector::zeros(n);
        fill_standard_normal(&mut rng, z.as_mut_slice());
        let zero = DVector::zeros(n);
        let shape = Self::new(&x, zero.as_slice())?;
        let l = Cholesky::new(shape.covariance(&log_truth))
            .ok_or_else(|| {
                Error::invalid("GP model: simulated covariance is not positive definite")
            })?
            .unpack();
        Self::new(&x, (l * z).as_slice())
    }

    /// The covariance `Σ(β)` at `q = (log η, log l, log J)`.
    pub fn covariance(&self, q: &[f64]) -> DMatrix<f64> {
        let (eta, l, jitter) = (q[0].exp(), q[1].exp(), q[2].exp());
        let n = self.sq_dist.nrows();
        let mut sigma = DMatrix::zeros(n, n);
        // Symmetric: one exponential per pair.
        for j in 0..n {
            sigma[(j, j)] = eta + jitter;
            for i in j + 1..n {
                let v = eta * (-l * self.sq_dist[(i, j)]).exp();
                sigma[(i, j)] = v;
                sigma[(j, i)] = v;
            }
        }
        sigma
    }

    /// `U` from the factor `L` of `Σ`, `½ log|Σ| + ½ ‖z‖² + prior` with `z = L⁻¹Y`, and `z`.
    fn energy(&self, q: &[f64], cholesky: &Cholesky<f64, Dyn>) -> (f64, DVector<f64>) {
        let z = cholesky.l_dirty().solve_lower_triangular_unchecked(&self.y);
        let prior: f64 = q[..3]
            .iter()
            .map(|b| ((b - Self::PRIOR_MEAN) / Self::PRIOR_SD).powi(2))
            .sum();
        let u = 0.5 * (cholesky.ln_determinant() + z.norm_squared() + prior);
        (u, z)
    }
}

impl Potential for GpHyper {
    fn dim(&self) -> usize {
        3
    }

    fn value(&self, q: &[f64]) -> f64 {
        match Cholesky::new(self.covariance(q)) {
            Some(cholesky) => self.energy(q, &cholesky).0,
            None => f64::INFINITY,
        }
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let sigma = self.covariance(q);
        let n = sigma.nrows();
        let Some(cholesky) = Cholesky::new(sigma.clone()) else {
            grad[..3].fill(f64::NAN);
            return f64::INFINITY;
        };
        let (u, z) = self.energy(q, &cholesky);
        let (l, jitter) = (q[1].exp(), q[2].exp());
        // M = L⁻¹, so Σ⁻¹ = MᵀM, α = Mᵀz, tr Σ⁻¹ = ‖M‖²_F and tr(Σ⁻¹B) = Σ_kj (MB)_kj M_kj.
        // Column j of M is zero above row j, so only the trailing block of L is solved with.
        let mut m = DMatrix::identity(n, n);
        for j in 0..n {
            let block = cholesky.l_dirty().view((j, j), (n - j, n - j));
            block.solve_lower_triangular_unchecked_mut(&mut m.view_mut((j, j), (n - j, 1)));
        }
        let alpha = m.tr_mul(&z);
        let (trace, alpha_sq) = (m.norm_squared(), alpha.norm_squared());
        // B = ∂Σ/∂log l / (−l) = D ∘ K with K = Σ − J I = η E; D_ii = 0, so D ∘ K = D ∘ Σ.
        let b = sigma.component_mul(&self.sq_dist);
        let trace_b = (&m * &b).dot(&m);
        let quad_b = alpha.dot(&(&b * &alpha));
        // tr(Σ⁻¹K) = n − J tr Σ⁻¹ and αᵀKα = yᵀα − J‖α‖² = ‖z‖² − J‖α‖².
        let trace_k = n as f64 - jitter * trace;
        let quad_k = z.norm_squared() - jitter * alpha_sq;
        let prior = |b: f64| (b - Self::PRIOR_MEAN) / (Self::PRIOR_SD * Self::PRIOR_SD);
        grad[0] = 0.5 * (trace_k - quad_k) + prior(q[0]);
        grad[1] = -0.5 * l * (trace_b - quad_b) + prior(q[1]);
        grad[2] = 0.5 * jitter * (trace - alpha_sq) + prior(q[2]);
        u
    }
}

impl Model for GpHyper {
    fn parameter_names(&self) -> Vec<String> {
        vec!["log_eta".into(), "log_l".into(), "log_J".into()]
    }

    fn generative(&self) -> Option<&dyn Generative> {
        Some(self)
    }
}

/// The inputs stay this model's; `(log η, log l, log J)` are drawn from the priors
/// `N(−1, 1)` and `Y = L z ~ N(0, Σ)` at them. From the stream, in order: the three normals
/// behind the hyperparameters, then the `n` behind `z`.
impl Generative for GpHyper {
    fn simulate(&self, seed: u64) -> Result<Simulated> {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut truth = vec![0.0; 3];
        fill_standard_normal(&mut rng, &mut truth);
        truth
            .iter_mut()
            .for_each(|b| *b = Self::PRIOR_MEAN + Self::PRIOR_SD * *b);
        let mut z = DVector::zeros(self.y.len());
        fill_standard_normal(&mut rng, z.as_mut_slice());
        let l = Cholesky::new(self.covariance(&truth))
            .ok_or_else(|| {
                Error::invalid("GP model: simulated covariance is not positive definite")
            })?
            .unpack();
        Ok(Simulated {
            truth,
            posterior: Box::new(Self {
                sq_dist: self.sq_dist.clone(),
                y: l * z,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Central-difference step; the O(H²) truncation error is ~1e-10 relative here.
    const H: f64 = 1e-5;
    /// Relative tolerance for gradients against central differences.
    const FD_TOL: f64 = 1e-6;

    const POINTS: [[f64; 3]; 4] = [
        [0.0, 0.0, -0.4],
        [-1.0, -1.0, -1.0],
        [1.2, -1.5, 0.3],
        [-0.5, 1.4, -1.1],
    ];

    #[test]
    fn gradient_matches_central_differences() {
        let model = GpHyper::simulate(GpHyper::DEFAULT_N, 1).unwrap();
        for q in POINTS {
            crate::models::fd_check::assert_gradient_matches_central_differences(
                &model, &q, H, FD_TOL,
            );
        }
    }

    #[test]
    fn value_and_gradient_value_equals_value() {
        let model = GpHyper::simulate(30, 2).unwrap();
        for q in POINTS {
            let mut grad = [0.0; 3];
            assert_eq!(model.value_and_gradient(&q, &mut grad), model.value(&q));
        }
    }

    #[test]
    fn potential_equals_dense_computation() {
        // A 4-point problem in 3-D inputs: U by an explicit inverse and an LU determinant.
        let x = DMatrix::from_row_slice(
            4,
            3,
            &[0.1, 0.2, 0.3, 0.9, 0.4, 0.0, 0.5, 0.5, 0.8, 0.3, 0.7, 0.6],
        );
        let y = [0.7, -1.2, 0.4, 2.0];
        let model = GpHyper::new(&x, &y).unwrap();
        let yv = DVector::from_column_slice(&y);
        for q in POINTS {
            let (eta, l, jitter) = (q[0].exp(), q[1].exp(), q[2].exp());
            let sigma = DMatrix::from_fn(4, 4, |i, j| {
                let d2: f64 = (0..3).map(|k| (x[(i, k)] - x[(j, k)]).powi(2)).sum();
                eta * (-l * d2).exp() + if i == j { jitter } else { 0.0 }
            });
            let inverse = sigma.clone().try_inverse().unwrap();
            let prior: f64 = q.iter().map(|b| (b + 1.0) * (b + 1.0)).sum();
            let direct =
                0.5 * sigma.determinant().ln() + 0.5 * yv.dot(&(&inverse * &yv)) + 0.5 * prior;
            let u = model.value(&q);
            assert!(
                (u - direct).abs() <= 1e-12 * direct.abs().max(1.0),
                "{u} vs {direct}"
            );
        }
    }

    #[test]
    fn simulation_is_seeded_and_fails_cleanly() {
        let a = GpHyper::simulate(10, 3).unwrap();
        let b = GpHyper::simulate(10, 3).unwrap();
        let c = GpHyper::simulate(10, 4).unwrap();
        assert_eq!(a.y, b.y);
        assert_ne!(a.y, c.y);
        assert!(GpHyper::simulate(0, 1).is_err());
        assert!(GpHyper::simulate_from(5, [0.0, f64::NAN, 0.0], 1).is_err());
        // A covariance that is numerically singular is reported as infinite U, not a panic.
        let twins = GpHyper::new(&DMatrix::from_element(2, 2, 0.5), &[1.0, 1.0]).unwrap();
        let mut grad = [0.0; 3];
        assert!(
            twins
                .value_and_gradient(&[5.0, 0.0, -60.0], &mut grad)
                .is_infinite()
        );
        assert!(twins.value(&[5.0, 0.0, -60.0]).is_infinite());
    }

    #[test]
    fn constructor_validates() {
        let x = DMatrix::from_element(3, 2, 0.1);
        assert!(GpHyper::new(&x, &[1.0, 2.0]).is_err());
        assert!(GpHyper::new(&DMatrix::zeros(0, 2), &[]).is_err());
        assert!(GpHyper::new(&x, &[1.0, f64::NAN, 2.0]).is_err());
        let model = GpHyper::new(&x, &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(model.parameter_names(), ["log_eta", "log_l", "log_J"]);
    }
}
