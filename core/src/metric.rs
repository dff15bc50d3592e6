//! Mass matrices: the kinetic energy `K(p) = ½ pᵀM⁻¹p`, the drift `q ← q + ε M⁻¹p`, and
//! momentum draws `p ~ N(0, M)`.

use nalgebra::{DefaultAllocator, Dim, OVector, allocator::Allocator};
use rand_core::Rng;

use crate::error::{Error, check_dim, check_positive};
use crate::random::fill_standard_normal;

/// A mass matrix `M` for the kinetic energy.
pub trait Metric {
    /// `K(p) = ½ pᵀM⁻¹p`.
    fn kinetic(&self, p: &[f64]) -> f64;
    /// `q ← q + ε M⁻¹p`.
    fn drift(&self, eps: f64, p: &[f64], q: &mut [f64]);
    /// Draws `p ~ N(0, M)` into `p`.
    fn draw_momentum<R: Rng + ?Sized>(&self, rng: &mut R, p: &mut [f64]);
}

/// `M = I`.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdentityMetric;

impl Metric for IdentityMetric {
    fn kinetic(&self, p: &[f64]) -> f64 {
        0.5 * crate::linalg::dot(p, p)
    }
    fn drift(&self, eps: f64, p: &[f64], q: &mut [f64]) {
        crate::linalg::axpy(eps, p, q);
    }
    fn draw_momentum<R: Rng + ?Sized>(&self, rng: &mut R, p: &mut [f64]) {
        fill_standard_normal(rng, p);
    }
}

/// A diagonal `M`, stored as its inverse (the posterior variances an adaptation estimates) and
/// the square root of `M` (to scale momentum draws).
#[derive(Clone, Debug)]
pub struct DiagonalMetric<D: Dim>
where
    DefaultAllocator: Allocator<D>,
{
    inv_mass: OVector<f64, D>,
    sqrt_mass: OVector<f64, D>,
}

impl<D: Dim> DiagonalMetric<D>
where
    DefaultAllocator: Allocator<D>,
{
    /// A metric with `M⁻¹ = diag(inv_mass)`; every entry must be finite and positive.
    pub fn new(inv_mass: OVector<f64, D>) -> Result<Self, Error> {
        for &m in inv_mass.iter() {
            check_positive(m, "inverse mass")?;
        }
        let sqrt_mass = inv_mass.map(|m| libm::sqrt(1.0 / m));
        Ok(Self {
            inv_mass,
            sqrt_mass,
        })
    }

    /// Replaces `M⁻¹` (for instance after a warmup window), keeping the storage.
    pub fn set_inv_mass(&mut self, inv_mass: &[f64]) -> Result<(), Error> {
        check_dim(self.inv_mass.len(), inv_mass.len())?;
        for &m in inv_mass {
            check_positive(m, "inverse mass")?;
        }
        for i in 0..inv_mass.len() {
            self.inv_mass[i] = inv_mass[i];
            self.sqrt_mass[i] = libm::sqrt(1.0 / inv_mass[i]);
        }
        Ok(())
    }

    /// The diagonal of `M⁻¹`.
    pub fn inv_mass(&self) -> &[f64] {
        self.inv_mass.as_slice()
    }
}

impl<D: Dim> Metric for DiagonalMetric<D>
where
    DefaultAllocator: Allocator<D>,
{
    fn kinetic(&self, p: &[f64]) -> f64 {
        let m = self.inv_mass.as_slice();
        0.5 * p.iter().zip(m).map(|(pi, mi)| pi * pi * mi).sum::<f64>()
    }
    fn drift(&self, eps: f64, p: &[f64], q: &mut [f64]) {
        for ((qi, pi), mi) in q.iter_mut().zip(p).zip(self.inv_mass.iter()) {
            *qi += eps * mi * pi;
        }
    }
    fn draw_momentum<R: Rng + ?Sized>(&self, rng: &mut R, p: &mut [f64]) {
        fill_standard_normal(rng, p);
        for (pi, si) in p.iter_mut().zip(self.sqrt_mass.iter()) {
            *pi *= si;
        }
    }
}
