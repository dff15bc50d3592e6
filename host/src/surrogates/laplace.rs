//! Variational HMC's Laplace-regularized surrogate potential (Zhang, Shahbaba & Zhao,
//! *Variational Hamiltonian Monte Carlo via score matching*, Algorithm 2):
//!
//! `V_t(θ) = μ_t z(θ) + ½ (1 − μ_t) (θ − θ_L)ᵀ H (θ − θ_L)`,
//!
//! where `z` is a surrogate trained on gradients (VHMC's: the random-basis network, by score
//! matching), `θ_L` the MAP and `H = ∇²U(θ_L)` the Hessian there (both from
//! [`crate::optimize::find_map`]), and `μ_t = 1 − exp(−t/τ)`
//! ([`shmc_core::schedule::surrogate_weight`]) moves the weight from the Laplace approximation,
//! informative from the first iteration, to the surrogate as it learns.
//!
//! # Approximate or exact
//! - **VHMC as published** proposes *and accepts* with `V_t`: the Metropolis–Hastings step
//!   compares `V_t`-Hamiltonians (drive a sampler with `shmc_core::Exact(&v)`). The chain then
//!   targets `exp(−V_t)`, not the posterior: this is **approximate inference**, as good as the
//!   surrogate, and its output should say so.
//! - **Exact**: use `V_t` only as the proposal and judge with the exact `U`
//!   (`shmc_core::Surrogate { target: model, proposal: &v }`). Leapfrog under any force field is
//!   reversible and volume-preserving, so every such transition leaves the posterior invariant
//!   whatever `μ_t` and the surrogate are; a poor `V_t` only lowers the acceptance rate.
//!   (Changing `μ_t` and the surrogate between iterations is adaptation; `μ_t` converges and the
//!   surrogate's updates are the sampler's to diminish.)
//!
//! # Levels
//! `z` is trained on gradients, so its level (the bias) is arbitrary, and the quadratic is zero
//! at `θ_L` rather than `U(θ_L)`. Differences of `V_t` at one `μ_t` are meaningful; a sampler that
//! accepts with `V_t` must re-evaluate the current state's `V_t` after changing `μ_t` or the
//! surrogate, never reuse a value computed before.

use nalgebra::DMatrix;
use shmc_core::Potential;
use shmc_core::linalg::axpy;
use shmc_core::schedule::surrogate_weight;

use crate::optimize::MapEstimate;
use crate::{Error, Result};

/// `V(θ) = μ z(θ) + ½ (1 − μ) (θ − θ_L)ᵀ H (θ − θ_L)`: a surrogate potential `z` blended with
/// a Laplace approximation `N(θ_L, H⁻¹)` of the posterior; see the [module docs](self).
///
/// `S` is the surrogate, owned (VHMC's `Box<dyn Surrogate>`, retrained in place through
/// [`RegularizedSurrogate::surrogate_mut`]) or borrowed (any `&P` of a potential `P`). Value and
/// gradient cost the surrogate's and `O(d²)` more and allocate nothing; at `μ = 0` the surrogate
/// is not evaluated and at `μ = 1` the quadratic is not, so the ends are exactly the quadratic
/// and exactly the surrogate.
#[derive(Clone, Debug)]
pub struct RegularizedSurrogate<S> {
    surrogate: S,
    mode: Vec<f64>,
    /// Symmetric positive definite, column-major `d × d`.
    precision: DMatrix<f64>,
    weight: f64,
}

impl<S: Potential> RegularizedSurrogate<S> {
    /// The regularized surrogate around the mode `θ_L` with precision `H`, starting at `μ = 0`
    /// (all Laplace).
    ///
    /// `H` is symmetrized; it must be `d × d`, finite and positive definite (pass a Hessian that
    /// is not through [`crate::optimize::regularized`] first). `θ_L` must be finite and match the
    /// surrogate's dimension.
    pub fn new(surrogate: S, mode: Vec<f64>, precision: DMatrix<f64>) -> Result<Self> {
        let d = surrogate.dim();
        if mode.len() != d {
            return Err(Error::invalid(format!(
                "the Laplace mode has {} coordinates, the surrogate {d}",
                mode.len()
            )));
        }
        if precision.shape() != (d, d) {
            return Err(Error::invalid(format!(
                "the Laplace precision is {} × {}, the surrogate's dimension {d}",
                precision.nrows(),
                precision.ncols()
            )));
        }
        if mode.iter().chain(precision.iter()).any(|x| !x.is_finite()) {
            return Err(Error::invalid(
                "the Laplace mode or precision is not finite",
            ));
        }
        let precision = (&precision + precision.transpose()) * 0.5;
        if precision.clone().cholesky().is_none() {
            return Err(Error::invalid(
                "the Laplace precision is not positive definite; lift its eigenvalues with \
                 optimize::regularized (or use MapEstimate::laplace_precision)",
            ));
        }
        Ok(Self {
            surrogate,
            mode,
            precision,
            weight: 0.0,
        })
    }

    /// The regularized surrogate around a MAP estimate, with its
    /// [`MapEstimate::laplace_precision`] (the Hessian, lifted if it is not positive definite).
    pub fn from_map(surrogate: S, map: &MapEstimate) -> Result<Self> {
        Self::new(surrogate, map.position.clone(), map.laplace_precision()?)
    }

    /// The surrogate `z`.
    pub fn surrogate(&self) -> &S {
        &self.surrogate
    }

    /// The surrogate, to update it as training data arrive.
    pub fn surrogate_mut(&mut self) -> &mut S {
        &mut self.surrogate
    }

    /// Gives the surrogate back.
    pub fn into_surrogate(self) -> S {
        self.surrogate
    }

    /// The Laplace mode `θ_L`.
    pub fn mode(&self) -> &[f64] {
        &self.mode
    }

    /// The Laplace precision `H` (symmetrized).
    pub fn precision(&self) -> &DMatrix<f64> {
        &self.precision
    }

    /// The surrogate's weight `μ`.
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// Sets the surrogate's weight `μ ∈ [0, 1]`; an error (and no change) otherwise.
    pub fn set_weight(&mut self, mu: f64) -> Result<()> {
        if !(0.0..=1.0).contains(&mu) {
            return Err(Error::invalid(format!(
                "the surrogate weight μ must lie in [0, 1], got {mu}"
            )));
        }
        self.weight = mu;
        Ok(())
    }

    /// Sets `μ = μ_t = 1 − exp(−t/τ)` for iteration `t` and returns it; `τ` must be positive.
    pub fn advance(&mut self, t: u64, tau: f64) -> Result<f64> {
        if !(tau.is_finite() && tau > 0.0) {
            return Err(Error::invalid(format!(
                "the transition time τ must be finite and positive, got {tau}"
            )));
        }
        let mu = surrogate_weight(t, tau);
        self.set_weight(mu)?;
        Ok(mu)
    }

    /// `½ (q − θ_L)ᵀ H (q − θ_L)`, without allocating.
    pub fn quadratic(&self, q: &[f64]) -> f64 {
        let d = self.mode.len();
        let h = self.precision.as_slice();
        let mut total = 0.0;
        for j in 0..d {
            let column = &h[j * d..(j + 1) * d];
            let mut hd = 0.0;
            for i in 0..d {
                hd += column[i] * (q[i] - self.mode[i]);
            }
            total += (q[j] - self.mode[j]) * hd;
        }
        0.5 * total
    }

    /// Adds `c · H (q − θ_L)` to `grad`.
    fn add_quadratic_gradient(&self, c: f64, q: &[f64], grad: &mut [f64]) {
        let d = self.mode.len();
        let h = self.precision.as_slice();
        for j in 0..d {
            axpy(c * (q[j] - self.mode[j]), &h[j * d..(j + 1) * d], grad);
        }
    }
}

impl<S: Potential> Potential for RegularizedSurrogate<S> {
    fn dim(&self) -> usize {
        self.mode.len()
    }

    fn value(&self, q: &[f64]) -> f64 {
        let mu = self.weight;
        if mu == 1.0 {
            return self.surrogate.value(q);
        }
        let laplace = (1.0 - mu) * self.quadratic(q);
        if mu == 0.0 {
            laplace
        } else {
            mu * self.surrogate.value(q) + laplace
        }
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let mu = self.weight;
        if mu == 1.0 {
            return self.surrogate.value_and_gradient(q, grad);
        }
        let z = if mu == 0.0 {
            grad.fill(0.0);
            0.0
        } else {
            let z = self.surrogate.value_and_gradient(q, grad);
            grad.iter_mut().for_each(|g| *g *= mu);
            mu * z
        };
        self.add_quadratic_gradient(1.0 - mu, q, grad);
        z + (1.0 - mu) * self.quadratic(q)
    }

    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        let mu = self.weight;
        if mu == 1.0 {
            return self.surrogate.gradient(q, grad);
        }
        if mu == 0.0 {
            grad.fill(0.0);
        } else {
            self.surrogate.gradient(q, grad);
            grad.iter_mut().for_each(|g| *g *= mu);
        }
        self.add_quadratic_gradient(1.0 - mu, q, grad);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::{MapOptions, find_map};
    use nalgebra::DVector;
    use rand::SeedableRng;
    use rand_pcg::Pcg64;
    use shmc_core::random::fill_standard_normal;
    use shmc_core::{Activation, Dyn, InputTransform, Network, NetworkConfig, Nodes};

    const D: usize = 3;

    fn network(seed: u64) -> Network<Dyn, Dyn> {
        let mut rng = Pcg64::seed_from_u64(seed);
        let config = NetworkConfig {
            nodes: Nodes::Additive(Activation::Softplus),
            ..NetworkConfig::default()
        };
        let transform = InputTransform::new(
            DVector::from_column_slice(&[0.5, -1.0, 2.0]),
            DVector::from_column_slice(&[2.0, 0.5, 1.5]),
        )
        .unwrap();
        let mut net = Network::random(&config, transform, Dyn(20), &mut rng).unwrap();
        let mut v = vec![0.0; 20];
        fill_standard_normal(&mut rng, &mut v);
        net.set_output(&v, 0.3).unwrap();
        net
    }

    fn mode() -> Vec<f64> {
        vec![0.2, -0.7, 1.1]
    }

    fn precision() -> DMatrix<f64> {
        DMatrix::from_row_slice(D, D, &[4.0, 1.0, 0.5, 1.0, 3.0, -0.4, 0.5, -0.4, 2.0])
    }

    fn surrogate(mu: f64) -> RegularizedSurrogate<Network<Dyn, Dyn>> {
        let mut v = RegularizedSurrogate::new(network(1), mode(), precision()).unwrap();
        v.set_weight(mu).unwrap();
        v
    }

    fn points() -> [[f64; D]; 3] {
        [[0.0, 0.0, 0.0], [1.3, -2.1, 0.4], [-0.6, 0.9, 2.5]]
    }

    #[test]
    fn gradient_matches_central_differences() {
        for mu in [0.0, 0.35, 1.0] {
            let v = surrogate(mu);
            for q in points() {
                let mut fused = [0.0; D];
                let value = v.value_and_gradient(&q, &mut fused);
                assert_eq!(value, v.value(&q));
                let mut alone = [0.0; D];
                v.gradient(&q, &mut alone);
                for k in 0..D {
                    assert!((fused[k] - alone[k]).abs() <= 1e-14 * (1.0 + fused[k].abs()));
                    let h = 1e-5;
                    let (mut up, mut down) = (q, q);
                    up[k] += h;
                    down[k] -= h;
                    let numeric = (v.value(&up) - v.value(&down)) / (2.0 * h);
                    assert!(
                        (numeric - fused[k]).abs() < 1e-7 * (1.0 + numeric.abs()),
                        "μ = {mu}, q = {q:?}, k = {k}: {numeric} vs {}",
                        fused[k]
                    );
                }
            }
        }
    }

    #[test]
    fn the_ends_are_the_quadratic_and_the_surrogate() {
        let net = network(1);
        let laplace = surrogate(0.0);
        let learned = surrogate(1.0);
        let h = precision();
        for q in points() {
            let delta = DVector::from_column_slice(&q) - DVector::from_vec(mode());
            let hd = &h * &delta;
            let expected = 0.5 * delta.dot(&hd);
            let mut grad = [0.0; D];
            let value = laplace.value_and_gradient(&q, &mut grad);
            assert!((value - expected).abs() <= 1e-14 * expected.abs().max(1.0));
            assert!((laplace.value(&q) - expected).abs() <= 1e-14 * expected.abs().max(1.0));
            for k in 0..D {
                assert!((grad[k] - hd[k]).abs() <= 1e-14 * hd[k].abs().max(1.0));
            }

            let mut grad = [0.0; D];
            let mut expected_grad = [0.0; D];
            let z = net.value_and_gradient(&q, &mut expected_grad);
            assert_eq!(learned.value_and_gradient(&q, &mut grad), z);
            assert_eq!(grad, expected_grad);
            assert_eq!(learned.value(&q), net.value(&q));
            learned.gradient(&q, &mut grad);
            assert_eq!(grad, expected_grad);
        }
    }

    #[test]
    fn in_between_it_is_the_blend() {
        let net = network(1);
        let v = surrogate(0.25);
        for q in points() {
            let expected = 0.25 * net.value(&q) + 0.75 * v.quadratic(&q);
            assert!((v.value(&q) - expected).abs() <= 1e-12 * expected.abs().max(1.0));
        }
    }

    #[test]
    fn the_weight_follows_the_schedule_and_is_checked() {
        let mut v = surrogate(0.0);
        assert_eq!(v.advance(0, 50.0).unwrap(), 0.0);
        let mu = v.advance(50, 50.0).unwrap();
        assert_eq!(mu, surrogate_weight(50, 50.0));
        assert_eq!(v.weight(), mu);
        assert!(v.advance(10, 0.0).is_err());
        assert!(v.set_weight(1.5).is_err());
        assert!(v.set_weight(f64::NAN).is_err());
        assert_eq!(v.weight(), mu);
    }

    #[test]
    fn construction_is_checked() {
        assert!(RegularizedSurrogate::new(network(1), vec![0.0; 2], precision()).is_err());
        assert!(RegularizedSurrogate::new(network(1), mode(), DMatrix::identity(2, 2)).is_err());
        let indefinite =
            DMatrix::from_row_slice(D, D, &[1.0, 2.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        let error = RegularizedSurrogate::new(network(1), mode(), indefinite).unwrap_err();
        assert!(error.to_string().contains("positive definite"), "{error}");
        let mut nan = precision();
        nan[(0, 1)] = f64::NAN;
        assert!(RegularizedSurrogate::new(network(1), mode(), nan).is_err());
        // A borrowed surrogate works too.
        let net = network(2);
        let v = RegularizedSurrogate::new(&net, mode(), precision()).unwrap();
        assert_eq!(v.dim(), D);
    }

    /// At μ = 0 the surrogate built from `find_map` on a Gaussian is that Gaussian's potential
    /// up to its level: the Laplace approximation of a Gaussian is exact.
    #[test]
    fn from_map_on_a_gaussian_is_the_gaussian() {
        struct Gaussian;
        impl Potential for Gaussian {
            fn dim(&self) -> usize {
                D
            }
            fn value(&self, q: &[f64]) -> f64 {
                let delta = DVector::from_column_slice(q) - DVector::from_vec(mode());
                0.5 * delta.dot(&(precision() * &delta)) + 7.0
            }
            fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
                let delta = DVector::from_column_slice(q) - DVector::from_vec(mode());
                grad.copy_from_slice((precision() * &delta).as_slice());
                self.value(q)
            }
        }
        let map = find_map(&Gaussian, &[0.0; D], &MapOptions::default()).unwrap();
        let v = RegularizedSurrogate::from_map(network(3), &map).unwrap();
        for q in points() {
            let exact = Gaussian.value(&q) - 7.0;
            assert!((v.value(&q) - exact).abs() < 1e-5 * exact.max(1.0));
        }
    }
}
