//! Mass matrices: the kinetic energy `K(p) = ½ pᵀM⁻¹p`, the drift `q ← q + ε M⁻¹p`, and
//! momentum draws `p ~ N(0, M)`, in the scalar `T` of the chain (`f64` unless named).

use nalgebra::{DefaultAllocator, Dim, OVector, allocator::Allocator};
use rand_core::Rng;

use crate::error::{Error, check_dim, check_positive};
use crate::linalg::{all_finite, axpy, axpy_finite};
use crate::random::fill_standard_normal;
use crate::real::Real;

/// A mass matrix `M` for the kinetic energy.
pub trait Metric<T: Real = f64> {
    /// `K(p) = ½ pᵀM⁻¹p`.
    fn kinetic(&self, p: &[T]) -> T;
    /// `q ← q + ε M⁻¹p`.
    fn drift(&self, eps: T, p: &[T], q: &mut [T]);
    /// Draws `p ~ N(0, M)` into `p`.
    fn draw_momentum<R: Rng + ?Sized>(&self, rng: &mut R, p: &mut [T]);

    /// A leapfrog step's half kick and drift, `p ← p − h g` then `q ← q + ε M⁻¹p`; returns
    /// whether every entry of `q` is finite. The default makes three passes ([`axpy`],
    /// [`Metric::drift`], a finiteness check); a metric may fuse them into one pass that does,
    /// coordinate by coordinate, the same operations in the same order, so with the same
    /// results bit for bit: in low dimension the passes' loop overhead outweighs their
    /// arithmetic. Out of line with the `compact` feature (one copy for the leapfrog and
    /// [`Metric::kick_kick_drift`]'s default).
    #[cfg_attr(feature = "compact", inline(never))]
    fn kick_drift(&self, half: T, eps: T, grad: &[T], p: &mut [T], q: &mut [T]) -> bool {
        axpy(-half, grad, p);
        self.drift(eps, p, q);
        all_finite(q)
    }

    /// One leapfrog step's closing half kick and the next step's half kick and drift, about the
    /// gradient `grad` between them: `p ← p − h g` twice, then `q ← q + ε M⁻¹p`; returns whether
    /// every entry of `grad` and of `q` is finite. The default makes the passes one after the
    /// other ([`axpy_finite`], [`Metric::kick_drift`]); a metric may fuse them coordinate by
    /// coordinate with the same results bit for bit, which keeps `p` out of memory between the
    /// kicks and the drift: a shorter dependency chain per leapfrog step.
    fn kick_kick_drift(&self, half: T, eps: T, grad: &[T], p: &mut [T], q: &mut [T]) -> bool {
        axpy_finite(-half, grad, p) && self.kick_drift(half, eps, grad, p, q)
    }
}

/// `M = I`.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdentityMetric;

impl<T: Real> Metric<T> for IdentityMetric {
    fn kinetic(&self, p: &[T]) -> T {
        T::of(0.5) * crate::linalg::dot(p, p)
    }
    fn drift(&self, eps: T, p: &[T], q: &mut [T]) {
        crate::linalg::axpy(eps, p, q);
    }
    fn draw_momentum<R: Rng + ?Sized>(&self, rng: &mut R, p: &mut [T]) {
        fill_standard_normal(rng, p);
    }
}

/// A diagonal `M`, stored as its inverse (the posterior variances an adaptation estimates) and
/// the square root of `M` (to scale momentum draws).
#[derive(Clone, Debug)]
pub struct DiagonalMetric<D: Dim, T: Real = f64>
where
    DefaultAllocator: Allocator<D>,
{
    inv_mass: OVector<T, D>,
    sqrt_mass: OVector<T, D>,
}

/// `√(1/m)`, in `f64` (not on a hot path).
fn sqrt_mass<T: Real>(m: T) -> T {
    T::of(libm::sqrt(1.0 / m.to_f64()))
}

impl<D: Dim, T: Real> DiagonalMetric<D, T>
where
    DefaultAllocator: Allocator<D>,
{
    /// A metric with `M⁻¹ = diag(inv_mass)`; every entry must be finite and positive.
    pub fn new(inv_mass: OVector<T, D>) -> Result<Self, Error> {
        for &m in inv_mass.iter() {
            check_positive(m.to_f64(), "inverse mass")?;
        }
        let sqrt_mass = inv_mass.map(sqrt_mass);
        Ok(Self {
            inv_mass,
            sqrt_mass,
        })
    }

    /// Replaces `M⁻¹` (for instance after a warmup window), keeping the storage.
    pub fn set_inv_mass(&mut self, inv_mass: &[T]) -> Result<(), Error> {
        check_dim(self.inv_mass.len(), inv_mass.len())?;
        for &m in inv_mass {
            check_positive(m.to_f64(), "inverse mass")?;
        }
        let stored = self.inv_mass.iter_mut().zip(self.sqrt_mass.iter_mut());
        for ((inv, sqrt), &m) in stored.zip(inv_mass) {
            *inv = m;
            *sqrt = sqrt_mass(m);
        }
        Ok(())
    }

    /// The diagonal of `M⁻¹`.
    pub fn inv_mass(&self) -> &[T] {
        self.inv_mass.as_slice()
    }

    /// The fused leapfrog pass, coordinate by coordinate: `KICKS` half kicks `pᵢ += (−h) gᵢ`,
    /// then the drift `qᵢ += (ε mᵢ) pᵢ`; whether every `qᵢ` is finite and, with two kicks,
    /// every `gᵢ` (a gradient between two steps is new; the first step's was checked when it
    /// was computed).
    #[inline(always)]
    fn kicks_then_drift<const KICKS: usize>(
        &self,
        half: T,
        eps: T,
        grad: &[T],
        p: &mut [T],
        q: &mut [T],
    ) -> bool {
        let minus_half = -half;
        let mut finite = true;
        let coordinates = q.iter_mut().zip(p.iter_mut()).zip(grad);
        for (((qi, pi), &gi), &mi) in coordinates.zip(self.inv_mass.as_slice()) {
            if KICKS > 1 {
                finite &= gi.is_finite();
            }
            for _ in 0..KICKS {
                *pi += minus_half * gi;
            }
            *qi += eps * mi * *pi;
            finite &= qi.is_finite();
        }
        finite
    }
}

impl<D: Dim, T: Real> Metric<T> for DiagonalMetric<D, T>
where
    DefaultAllocator: Allocator<D>,
{
    fn kinetic(&self, p: &[T]) -> T {
        let m = self.inv_mass.as_slice();
        let sum = p
            .iter()
            .zip(m)
            .fold(T::zero(), |acc, (&pi, &mi)| acc + pi * pi * mi);
        T::of(0.5) * sum
    }
    // The drift and the draw walk the diagonal as a slice: nalgebra's matrix iterator steps
    // through rows and columns, which in a 2-D leapfrog costs more than the arithmetic.
    fn drift(&self, eps: T, p: &[T], q: &mut [T]) {
        for ((qi, &pi), &mi) in q.iter_mut().zip(p).zip(self.inv_mass.as_slice()) {
            *qi += eps * mi * pi;
        }
    }
    fn draw_momentum<R: Rng + ?Sized>(&self, rng: &mut R, p: &mut [T]) {
        fill_standard_normal(rng, p);
        for (pi, &si) in p.iter_mut().zip(self.sqrt_mass.as_slice()) {
            *pi *= si;
        }
    }
    /// One pass: `pᵢ += (−h) gᵢ`, then `qᵢ += (ε mᵢ) pᵢ`, as [`crate::linalg::axpy`] and
    /// [`Metric::drift`] compute them.
    fn kick_drift(&self, half: T, eps: T, grad: &[T], p: &mut [T], q: &mut [T]) -> bool {
        self.kicks_then_drift::<1>(half, eps, grad, p, q)
    }
    /// One pass: `pᵢ += (−h) gᵢ` twice, then `qᵢ += (ε mᵢ) pᵢ`, as [`axpy_finite`] and
    /// [`Metric::kick_drift`] compute them (`p` and `q` are updated even where `grad` is not
    /// finite; the leapfrog then discards them).
    fn kick_kick_drift(&self, half: T, eps: T, grad: &[T], p: &mut [T], q: &mut [T]) -> bool {
        self.kicks_then_drift::<2>(half, eps, grad, p, q)
    }
}
