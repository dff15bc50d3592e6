//! Online score matching: ridge least squares for the output weights on *gradients*,
//! `v = argmin Σₙ ‖∇z(θₙ) − ∇U(θₙ)‖² + λ‖v‖²` (the bias drops out), updated one state at a time
//! (variational-HMC paper, Proposition 1).
//!
//! Each state contributes `d` rows at once: `A` (`d × s`, column `i` is `∇φᵢ(θ)`) with targets
//! `∇U(θ)`. With `C = (Σ AᵀA + λI)⁻¹` the update is a block recursive-least-squares step:
//! `K = AC`, `M = I_d + KAᵀ`, `W = M⁻¹K`, `v ← v + Wᵀ(∇U − Av)`, `C ← C − KᵀW`, starting from
//! `v = 0`, `C = I/λ`. It costs O(d·s² + d²·s + d³) and O(s²) memory.

use nalgebra::{DefaultAllocator, Dim, OMatrix, OVector, U1, allocator::Allocator};

use crate::error::{Error, check_dim, check_positive};
use crate::network::Network;

/// The score-matching state for input dimension `D` and `S` hidden units.
#[derive(Clone, Debug)]
pub struct OnlineScoreMatching<D: Dim, S: Dim>
where
    DefaultAllocator: Allocator<D>
        + Allocator<S>
        + Allocator<D, S>
        + Allocator<S, D>
        + Allocator<S, S>
        + Allocator<D, D>,
{
    weights: OVector<f64, S>,
    cov: OMatrix<f64, S, S>,
    /// Scratch: the design block `A`.
    design: OMatrix<f64, D, S>,
    /// Scratch: `K = AC`.
    k: OMatrix<f64, D, S>,
    /// Scratch: `W = M⁻¹K`.
    w: OMatrix<f64, D, S>,
    /// Scratch: `Aᵀ`, then `Wᵀ`.
    transposed: OMatrix<f64, S, D>,
    /// Scratch: `M = I + KAᵀ`.
    m: OMatrix<f64, D, D>,
    /// Scratch: the residual `∇U − Av`.
    residual: OVector<f64, D>,
    updates: usize,
}

impl<D: Dim, S: Dim> OnlineScoreMatching<D, S>
where
    DefaultAllocator: Allocator<D>
        + Allocator<S>
        + Allocator<D, S>
        + Allocator<S, D>
        + Allocator<S, S>
        + Allocator<D, D>,
{
    /// The state for no data with ridge parameter `λ > 0`: `v = 0`, `C = I/λ`.
    pub fn new(dim: D, hidden: S, lambda: f64) -> Result<Self, Error> {
        check_positive(lambda, "ridge parameter")?;
        let mut cov = OMatrix::zeros_generic(hidden, hidden);
        cov.fill_diagonal(1.0 / lambda);
        Ok(Self {
            weights: OVector::zeros_generic(hidden, U1),
            cov,
            design: OMatrix::zeros_generic(dim, hidden),
            k: OMatrix::zeros_generic(dim, hidden),
            w: OMatrix::zeros_generic(dim, hidden),
            transposed: OMatrix::zeros_generic(hidden, dim),
            m: OMatrix::zeros_generic(dim, dim),
            residual: OVector::zeros_generic(dim, U1),
            updates: 0,
        })
    }

    /// Adds the state `q` with exact gradient `grad_u`, taking the design block from `network`
    /// (whose output weights are not read).
    pub fn update_from_network(
        &mut self,
        network: &Network<D, S>,
        q: &[f64],
        grad_u: &[f64],
    ) -> Result<(), Error> {
        check_dim(network.dim(), q.len())?;
        check_dim(self.design.ncols(), network.hidden())?;
        network.feature_gradients(q, self.design.as_mut_slice());
        self.apply(grad_u)
    }

    /// Adds one block: `design` is `A` (`d × s`, column-major) and `grad_u` the target `∇U`.
    pub fn update(&mut self, design: &[f64], grad_u: &[f64]) -> Result<(), Error> {
        check_dim(self.design.len(), design.len())?;
        self.design.as_mut_slice().copy_from_slice(design);
        self.apply(grad_u)
    }

    fn apply(&mut self, grad_u: &[f64]) -> Result<(), Error> {
        check_dim(self.residual.len(), grad_u.len())?;
        if grad_u.iter().any(|g| !g.is_finite()) {
            return Err(Error::NotFinite("gradient target"));
        }
        // Every product below is a plain `gemm` (no transposed operand): the transposes are
        // O(d·s) copies into `transposed`, so the host's gemm (matrixmultiply) runs the two
        // O(d·s²) products at full speed.
        self.k.gemm(1.0, &self.design, &self.cov, 0.0);
        self.transposed.tr_copy_from(&self.design);
        self.m.fill(0.0);
        self.m.fill_diagonal(1.0);
        self.m.gemm(1.0, &self.k, &self.transposed, 1.0);
        let chol = nalgebra::Cholesky::new(self.m.clone())
            .ok_or(Error::NotPositive("score-matching system"))?;
        self.w.copy_from(&self.k);
        chol.solve_mut(&mut self.w);
        self.residual.as_mut_slice().copy_from_slice(grad_u);
        self.residual.gemv(-1.0, &self.design, &self.weights, 1.0);
        self.weights.gemv_tr(1.0, &self.w, &self.residual, 1.0);
        self.transposed.tr_copy_from(&self.w);
        self.cov.gemm(-1.0, &self.transposed, &self.k, 1.0);
        self.updates += 1;
        Ok(())
    }

    /// The current output weights `v`.
    pub fn weights(&self) -> &[f64] {
        self.weights.as_slice()
    }

    /// The number of states added.
    pub fn updates(&self) -> usize {
        self.updates
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::{SplitMix64, fill_standard_normal};
    use nalgebra::{DMatrix, DVector, Dyn};

    #[test]
    fn online_equals_batch_ridge_solution() {
        let (d, s, n, lambda) = (3, 15, 12, 0.1);
        let mut rng = SplitMix64(5);
        let mut online = OnlineScoreMatching::new(Dyn(d), Dyn(s), lambda).unwrap();
        let mut normal = DMatrix::<f64>::identity(s, s) * lambda;
        let mut rhs = DVector::<f64>::zeros(s);
        for _ in 0..n {
            let mut a = DMatrix::<f64>::zeros(d, s);
            fill_standard_normal(&mut rng, a.as_mut_slice());
            let mut g = DVector::<f64>::zeros(d);
            fill_standard_normal(&mut rng, g.as_mut_slice());
            online.update(a.as_slice(), g.as_slice()).unwrap();
            normal += a.transpose() * &a;
            rhs += a.transpose() * &g;
        }
        let expected = normal.cholesky().unwrap().solve(&rhs);
        let diff = (DVector::from_column_slice(online.weights()) - &expected).norm();
        assert!(
            diff <= 1e-8 * expected.norm(),
            "relative error {}",
            diff / expected.norm()
        );
        assert_eq!(online.updates(), n);
    }

    #[test]
    fn rejects_non_finite_targets_and_wrong_sizes() {
        let mut online = OnlineScoreMatching::new(Dyn(2), Dyn(3), 1.0).unwrap();
        assert!(online.update(&[0.0; 6], &[f64::NAN, 0.0]).is_err());
        assert!(online.update(&[0.0; 5], &[0.0, 0.0]).is_err());
        assert_eq!(online.updates(), 0);
    }
}
