//! The potential energy `U(q) = −log π(q) + const` and the pairing of a *proposal* potential
//! (what drives the leapfrog) with the *target* potential (what the Metropolis–Hastings step
//! judges with).
//!
//! Exact models and surrogates implement the same [`Potential`] trait. Points and gradients are
//! plain slices so that a user's own model needs no linear-algebra types, and the gradient goes
//! into a caller-owned buffer, so no evaluation allocates.
//!
//! Both traits are generic over the scalar `T` ([`Real`]) and default to `f64`, so
//! `impl Potential for MyModel` is an `f64` potential; a device with a single-precision FPU
//! implements `Potential<f32>`.

use crate::real::Real;

/// A potential energy `U` on `ℝᵈ`.
///
/// A value or gradient that cannot be computed (overflow, a point outside the support) is
/// reported as a non-finite number; samplers treat it as a divergent, rejected proposal.
pub trait Potential<T: Real = f64> {
    /// The dimension `d` of the points this potential takes.
    fn dim(&self) -> usize;

    /// `U(q)`.
    fn value(&self, q: &[T]) -> T;

    /// Writes `∇U(q)` into `grad` and returns `U(q)`, in one pass where the model allows it.
    fn value_and_gradient(&self, q: &[T], grad: &mut [T]) -> T;

    /// Writes `∇U(q)` into `grad`. Override it when the gradient alone is cheaper.
    fn gradient(&self, q: &[T], grad: &mut [T]) {
        self.value_and_gradient(q, grad);
    }

    /// `∇U(q)`: where the potential stores it, if it does (a table of precomputed gradients),
    /// else written into `buf`, which is returned. The leapfrog's steps between the ends read
    /// the gradient through this, so that a table lookup costs no copy: with a cheap proposal,
    /// the copy's store and reload sit on the step's chain of dependent operations.
    fn gradient_ref<'s>(&'s self, q: &[T], buf: &'s mut [T]) -> &'s [T] {
        self.gradient(q, buf);
        buf
    }
}

impl<T: Real, P: Potential<T> + ?Sized> Potential<T> for &P {
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn value(&self, q: &[T]) -> T {
        (**self).value(q)
    }
    fn value_and_gradient(&self, q: &[T], grad: &mut [T]) -> T {
        (**self).value_and_gradient(q, grad)
    }
    fn gradient(&self, q: &[T], grad: &mut [T]) {
        (**self).gradient(q, grad)
    }
    fn gradient_ref<'s>(&'s self, q: &[T], buf: &'s mut [T]) -> &'s [T] {
        (**self).gradient_ref(q, buf)
    }
}

/// What a trajectory needs: the proposal gradient at every step, and at the end point both the
/// proposal gradient and the *exact* `U`, obtained as cheaply as the pairing allows.
pub trait Dynamics<T: Real = f64> {
    /// The dimension of the points.
    fn dim(&self) -> usize;

    /// Writes the gradient of the proposal potential at `q` into `grad`.
    fn proposal_gradient(&self, q: &[T], grad: &mut [T]);

    /// The gradient of the proposal potential at `q`, read where the proposal stores it or
    /// written into `buf` ([`Potential::gradient_ref`]).
    fn proposal_gradient_ref<'s>(&'s self, q: &[T], buf: &'s mut [T]) -> &'s [T] {
        self.proposal_gradient(q, buf);
        buf
    }

    /// Writes the proposal gradient at `q` into `grad` and returns the exact `U(q)`.
    fn end_point(&self, q: &[T], grad: &mut [T]) -> T;
}

/// Plain HMC: the exact potential proposes and judges. The end point costs one fused
/// value-and-gradient evaluation.
#[derive(Clone, Copy, Debug)]
pub struct Exact<T>(pub T);

impl<T: Real, P: Potential<T>> Dynamics<T> for Exact<P> {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn proposal_gradient(&self, q: &[T], grad: &mut [T]) {
        self.0.gradient(q, grad);
    }
    fn proposal_gradient_ref<'s>(&'s self, q: &[T], buf: &'s mut [T]) -> &'s [T] {
        self.0.gradient_ref(q, buf)
    }
    fn end_point(&self, q: &[T], grad: &mut [T]) -> T {
        self.0.value_and_gradient(q, grad)
    }
}

/// Surrogate HMC: a cheap potential drives the trajectory and the exact one judges it. The end
/// point costs one exact *value* (no exact gradient) and one surrogate gradient.
///
/// Leapfrog with any force field is reversible and volume-preserving, so accepting with the
/// exact Hamiltonian keeps the chain exact however poor the surrogate is; a poor surrogate only
/// lowers the acceptance rate.
#[derive(Clone, Copy, Debug)]
pub struct Surrogate<E, P> {
    /// The exact potential, used only in the Metropolis–Hastings step.
    pub target: E,
    /// The cheap potential whose gradient drives the leapfrog.
    pub proposal: P,
}

impl<T: Real, E: Potential<T>, P: Potential<T>> Dynamics<T> for Surrogate<E, P> {
    fn dim(&self) -> usize {
        self.target.dim()
    }
    fn proposal_gradient(&self, q: &[T], grad: &mut [T]) {
        self.proposal.gradient(q, grad);
    }
    fn proposal_gradient_ref<'s>(&'s self, q: &[T], buf: &'s mut [T]) -> &'s [T] {
        self.proposal.gradient_ref(q, buf)
    }
    fn end_point(&self, q: &[T], grad: &mut [T]) -> T {
        self.proposal.gradient(q, grad);
        self.target.value(q)
    }
}
