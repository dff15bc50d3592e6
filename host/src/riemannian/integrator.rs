//! The generalized leapfrog (Störmer–Verlet) for the non-separable Hamiltonian
//! `H = φ(q) + ½ pᵀG(q)⁻¹p`, `φ = U + ½ log det G` (Girolami & Calderhead 2011, eqs. 16–18):
//!
//! ```text
//! p½ = p  − ε/2 [∇φ(q)  − ½ ν(q,  p½)]          implicit in p½
//! q' = q  + ε/2 [G(q)⁻¹ + G(q')⁻¹] p½            implicit in q'
//! p' = p½ − ε/2 [∇φ(q') − ½ ν(q', p½)]           explicit
//! νᵢ(q, p) = (G⁻¹p)ᵀ ∂ᵢG (G⁻¹p)
//! ```
//!
//! Both implicit equations are solved by fixed-point iteration *to a tolerance*: a fixed number
//! of iterations makes the map irreversible, and the Metropolis–Hastings correction is exact
//! only for a reversible, volume-preserving map. Where the iteration does not converge within
//! the maximum count, or the converged step, integrated back from `(q', −p')`, does not return
//! to `(q, −p)` within the reversibility tolerance (mici's check: a fixed point the iteration
//! found may not be the one the reverse step finds), the step fails and the trajectory is
//! divergent. The step is reversible and volume preserving for *any* `φ` and `G`, so the
//! surrogate can drive it while the exact `U` judges it.
//!
//! # Tolerances in the metric's units
//! Both tolerances compare coordinates in the units the metric at the step's start gives them:
//! a position difference `δqₖ` as `δqₖ √Gₖₖ`, a momentum difference `δpₖ` as `δpₖ / √Gₖₖ`.
//! Where the posterior's scale is `σ`, momenta are of scale `1/σ` and the last kick turns a
//! position error `δq` into a momentum error of about `ε δq / σ²`: with one absolute tolerance
//! for both, the check of a stiff posterior (Bank Marketing's `σ` is 0.006) fails steps whose
//! solves met the fixed-point tolerance, and a wide one's passes steps that did not. In the
//! metric's units both errors are of the same size, `ε δq / σ` against `δq / σ`, on every
//! posterior, and mici's tolerances (meant for unit scales) mean the same everywhere.

use std::rc::Rc;

use nalgebra::{DMatrix, DVector};

use shmc_core::Potential;

use super::{MetricAt, RiemannianMetric, max_weighted_difference};
use crate::{Error, Result};

/// The settings of the generalized leapfrog.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeneralizedLeapfrog {
    /// The step size ε.
    pub step_size: f64,
    /// The fixed-point iterations stop once successive iterates differ by less than this in the
    /// largest coordinate, in the metric's units (see the module's note; mici's default: 10⁻⁹).
    pub tolerance: f64,
    /// A fixed-point solve not converged after this many iterations fails the step.
    pub max_iterations: u32,
    /// A step integrated back that misses its start by more than this (largest coordinate of
    /// position or momentum, in the metric's units) fails; `None` skips the check, halving the
    /// cost of a step (mici's default: 2·10⁻⁸).
    pub reverse_tolerance: Option<f64>,
}

impl GeneralizedLeapfrog {
    /// mici's fixed-point tolerance.
    pub const DEFAULT_TOLERANCE: f64 = 1e-9;
    /// The default limit of fixed-point iterations per solve.
    pub const DEFAULT_MAX_ITERATIONS: u32 = 100;
    /// mici's reversibility tolerance.
    pub const DEFAULT_REVERSE_TOLERANCE: f64 = 2e-8;

    /// A validated integrator with mici's tolerances: fixed point to 10⁻⁹ in at most 100
    /// iterations, reversibility to 2·10⁻⁸.
    pub fn new(step_size: f64) -> Result<Self> {
        let integrator = Self {
            step_size,
            tolerance: Self::DEFAULT_TOLERANCE,
            max_iterations: Self::DEFAULT_MAX_ITERATIONS,
            reverse_tolerance: Some(Self::DEFAULT_REVERSE_TOLERANCE),
        };
        integrator.validate()?;
        Ok(integrator)
    }

    /// Checks the step size, the tolerances and the iteration limit.
    pub fn validate(&self) -> Result<()> {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !positive(self.step_size) {
            return Err(Error::invalid(format!(
                "the step size must be finite and positive, got {}",
                self.step_size
            )));
        }
        if !positive(self.tolerance) || !self.reverse_tolerance.is_none_or(positive) {
            return Err(Error::invalid(
                "the fixed-point and reversibility tolerances must be finite and positive",
            ));
        }
        if self.max_iterations == 0 {
            return Err(Error::invalid(
                "the fixed-point solves need at least one iteration",
            ));
        }
        Ok(())
    }
}

/// Why a generalized leapfrog step failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepFailure {
    /// `G` is not positive definite (or not finite) at a point the step visited.
    NotPositiveDefinite,
    /// A fixed-point solve did not reach the tolerance within the maximum iterations (or its
    /// iterates diverged to non-finite values).
    NotConverged,
    /// The step integrated back missed its start by more than the reversibility tolerance.
    NotReversible,
    /// A gradient, momentum or position turned non-finite.
    NonFinite,
}

/// A point of a trajectory: the position, the metric there, and `∇φ = ∇U + ½ tr(G⁻¹∂G)`.
pub struct Trajectory<'m> {
    /// The position `q`.
    pub position: Vec<f64>,
    /// The metric at `q`, shared (not recomputed) by the reversibility check's backward step:
    /// one metric point is the dearest thing a step computes (145 ms for the Fisher information
    /// at N = 10⁵, d = 50).
    pub metric: Rc<dyn MetricAt + 'm>,
    /// `∇φ(q)` with the proposal potential.
    pub force: Vec<f64>,
    /// Fixed-point iterations so far (both solves, forward and reverse steps).
    pub iterations: u64,
}

impl<'m> Trajectory<'m> {
    /// The start of a trajectory at `q`: the metric there and `∇φ(q)` with `proposal`'s `∇U`.
    pub fn start(
        proposal: &dyn Potential,
        metric: &'m dyn RiemannianMetric,
        q: &[f64],
    ) -> Result<Self, StepFailure> {
        let at = metric.at(q).ok_or(StepFailure::NotPositiveDefinite)?;
        let force = force(proposal, &*at, q)?;
        Ok(Self {
            position: q.to_vec(),
            metric: at.into(),
            force,
            iterations: 0,
        })
    }
}

/// The weights that put differences in the units of the metric at a step's start (see the
/// module's note): `√Gₖₖ` for positions, `1/√Gₖₖ` for momenta.
struct Scales {
    position: Vec<f64>,
    momentum: Vec<f64>,
}

impl Scales {
    fn of(at: &dyn MetricAt) -> Self {
        let position: Vec<f64> = at.matrix().diagonal().iter().map(|g| g.sqrt()).collect();
        let momentum = position.iter().map(|s| 1.0 / s).collect();
        Self { position, momentum }
    }
}

/// `∇φ(q) = ∇U(q) + ½ tr(G⁻¹∂G)`.
fn force(proposal: &dyn Potential, at: &dyn MetricAt, q: &[f64]) -> Result<Vec<f64>, StepFailure> {
    let d = q.len();
    let (mut grad, mut trace) = (vec![0.0; d], vec![0.0; d]);
    proposal.gradient(q, &mut grad);
    at.trace_derivatives(&mut trace);
    for (g, t) in grad.iter_mut().zip(&trace) {
        *g += 0.5 * t;
    }
    if grad.iter().all(|x| x.is_finite()) {
        Ok(grad)
    } else {
        Err(StepFailure::NonFinite)
    }
}

/// `p − ε/2 [∇φ − ½ ν(q, p½)]` for the current guess `p½`.
fn kick(at: &dyn MetricAt, force: &[f64], half: f64, p: &[f64], p_half: &[f64], out: &mut [f64]) {
    let d = p.len();
    let (mut u, mut nu) = (vec![0.0; d], vec![0.0; d]);
    at.solve(p_half, &mut u);
    at.quadratic_derivatives(&u, &mut nu);
    for k in 0..d {
        out[k] = p[k] - half * (force[k] - 0.5 * nu[k]);
    }
}

impl GeneralizedLeapfrog {
    /// One step from `(point, p)`, with the reversibility check if configured. On success the
    /// point and `p` are the end of the step; on failure they are left in an unspecified state.
    pub fn step<'m>(
        &self,
        proposal: &dyn Potential,
        metric: &'m dyn RiemannianMetric,
        point: &mut Trajectory<'m>,
        p: &mut [f64],
    ) -> Result<(), StepFailure> {
        let start = (point.position.clone(), p.to_vec());
        let scales = Scales::of(&*point.metric);
        self.bare_step(proposal, metric, point, p)?;
        if let Some(tol) = self.reverse_tolerance {
            // Integrate back from (q', −p') on a copy and compare with (q, −p).
            let mut back = Trajectory {
                position: point.position.clone(),
                metric: Rc::clone(&point.metric),
                force: point.force.clone(),
                iterations: 0,
            };
            let mut p_back: Vec<f64> = p.iter().map(|x| -x).collect();
            let result = self.bare_step(proposal, metric, &mut back, &mut p_back);
            point.iterations += back.iterations;
            result?;
            p_back.iter_mut().for_each(|x| *x = -*x);
            if max_weighted_difference(&back.position, &start.0, &scales.position) > tol
                || max_weighted_difference(&p_back, &start.1, &scales.momentum) > tol
            {
                return Err(StepFailure::NotReversible);
            }
        }
        Ok(())
    }

    /// One step without the reversibility check.
    fn bare_step<'m>(
        &self,
        proposal: &dyn Potential,
        metric: &'m dyn RiemannianMetric,
        point: &mut Trajectory<'m>,
        p: &mut [f64],
    ) -> Result<(), StepFailure> {
        let d = p.len();
        let half = 0.5 * self.step_size;
        let scales = Scales::of(&*point.metric);

        // p½ = p − ε/2 [∇φ(q) − ½ ν(q, p½)], iterated from p½ = p.
        let mut p_half = p.to_vec();
        let mut next = vec![0.0; d];
        let mut converged = false;
        for _ in 0..self.max_iterations {
            point.iterations += 1;
            kick(&*point.metric, &point.force, half, p, &p_half, &mut next);
            let change = max_weighted_difference(&next, &p_half, &scales.momentum);
            std::mem::swap(&mut p_half, &mut next);
            if change < self.tolerance {
                converged = true;
                break;
            }
        }
        if !converged {
            return Err(StepFailure::NotConverged);
        }

        // q' = q + ε/2 [G(q)⁻¹ + G(q')⁻¹] p½.
        let mut velocity = vec![0.0; d];
        point.metric.solve(&p_half, &mut velocity);
        let (q_new, at) =
            self.solve_position(metric, point, &p_half, &velocity, &scales.position)?;

        // p' = p½ − ε/2 [∇φ(q') − ½ ν(q', p½)] at the new point.
        let new_force = force(proposal, &*at, &q_new)?;
        kick(&*at, &new_force, half, &p_half, &p_half, p);
        if !p.iter().all(|x| x.is_finite()) {
            return Err(StepFailure::NonFinite);
        }
        point.position = q_new;
        point.metric = at.into();
        point.force = new_force;
        Ok(())
    }

    /// Solves the position equation `q' = T(q') = q + ε/2 [v + G(q')⁻¹p½]` (`v = G(q)⁻¹p½`,
    /// `point` at `q`) and returns `q'` with the metric there.
    ///
    /// A solution is a point whose update `T(q')` moves it by less than the tolerance, judged
    /// with the metric evaluated at that very point; the point itself is returned, not one
    /// update on, so its metric is the one the test evaluated (one evaluation per solve fewer
    /// than testing the update and evaluating again where it lands).
    ///
    /// A metric evaluation is the dearest thing a step does (a Gram matrix, or a network's
    /// Hessian, and a factorization), and plain fixed-point iteration, `q' ← T(q')`, makes one
    /// per iteration. Two things cut their number:
    ///
    /// - A metric with a cheap product ([`RiemannianMetric::product`]) first finds the solution
    ///   without factoring: `x ← x + G(q)⁻¹(p½ − G(q')x)` (the start's metric as the
    ///   preconditioner) together with `q' ← q + ε/2 (v + x)`, whose fixed point is the same,
    ///   for as long as each update moves `q'` less than half as far as the one before. The
    ///   evaluated iteration then starts from where it got to, and on a smooth metric accepts
    ///   that point at its first evaluation.
    /// - The evaluated iteration is Broyden's quasi-Newton method on `R(q') = q' − T(q')`: each
    ///   update `−H R` with an inverse Jacobian `H` corrected by the last secant, which converges
    ///   superlinearly where `q' ← T(q')` converges linearly. `H` starts as `(I − J)⁻¹` with
    ///   `J = ε/2 ∂(G⁻¹p½)/∂q` at the start where the metric gives the velocity's derivative
    ///   ([`MetricAt::velocity_derivative`]; the first guess is then Newton's step from `q`),
    ///   else as `I`, whose updates are the plain iteration's (the first guess the explicit
    ///   Euler step `q + ε v`). Should the updates stop shrinking, `H` goes back to `I`.
    ///
    /// Either way only the evaluated metric decides what is accepted: an approximate product or
    /// Jacobian costs iterations, never exactness.
    fn solve_position<'m>(
        &self,
        metric: &'m dyn RiemannianMetric,
        point: &mut Trajectory<'m>,
        p_half: &[f64],
        velocity: &[f64],
        scale: &[f64],
    ) -> Result<(Vec<f64>, Box<dyn MetricAt + 'm>), StepFailure> {
        let equation = PositionEquation {
            q: &point.position,
            velocity,
            p_half,
            scale,
            half: 0.5 * self.step_size,
        };
        let (mut broyden, mut q_new) = Broyden::start(&*point.metric, &equation);
        let mut x = velocity.to_vec();
        let mut iterations =
            self.product_phase(metric, &*point.metric, &equation, &mut q_new, &mut x);
        point.iterations += u64::from(iterations);
        if iterations > 0 {
            // The product phase moved the guess: the first secant is not the last update.
            broyden.secant = None;
        }

        // The evaluated iteration: Broyden's method on R(q') = q' − T(q').
        let d = velocity.len();
        let mut next = vec![0.0; d];
        let mut previous = f64::INFINITY;
        while iterations < self.max_iterations {
            iterations += 1;
            point.iterations += 1;
            let at = metric.at(&q_new).ok_or(StepFailure::NotPositiveDefinite)?;
            at.solve(p_half, &mut x);
            equation.update(&x, &mut next);
            let change = max_weighted_difference(&next, &q_new, scale);
            if change < self.tolerance {
                return Ok((q_new, at));
            }
            let latest = DVector::from_iterator(d, (0..d).map(|k| q_new[k] - next[k]));
            let step = broyden.step(latest, change < previous);
            previous = change;
            if step.iter().all(|s| s.is_finite()) {
                q_new.iter_mut().zip(step.iter()).for_each(|(a, b)| *a += b);
                broyden.secant = Some(step);
            } else {
                std::mem::swap(&mut q_new, &mut next);
                broyden.secant = None;
            }
        }
        Err(StepFailure::NotConverged)
    }

    /// The position solve's first phase, for a metric with a cheap product: the unevaluated
    /// iteration `x ← x + G(q)⁻¹(p½ − G(q')x)`, `q' ← T(x)` from the guess `(q_new, x)`, for as
    /// long as each update moves `q'` less than half as far as the one before (or until it meets
    /// the tolerance or the iteration limit). Returns the iterations it took: none when the
    /// metric has no product.
    fn product_phase(
        &self,
        metric: &dyn RiemannianMetric,
        start: &dyn MetricAt,
        equation: &PositionEquation<'_>,
        q_new: &mut Vec<f64>,
        x: &mut [f64],
    ) -> u32 {
        let d = x.len();
        let mut iterations = 0;
        let (mut product, mut correction, mut next) = (vec![0.0; d], vec![0.0; d], vec![0.0; d]);
        let mut previous = f64::INFINITY;
        while iterations < self.max_iterations && metric.product(q_new, x, &mut product) {
            iterations += 1;
            for k in 0..d {
                product[k] = equation.p_half[k] - product[k];
            }
            start.solve(&product, &mut correction);
            for k in 0..d {
                x[k] += correction[k];
            }
            equation.update(x, &mut next);
            let change = max_weighted_difference(&next, q_new, equation.scale);
            if !change.is_finite() {
                // Leave the guess where it was: the evaluated iteration starts from there.
                break;
            }
            std::mem::swap(q_new, &mut next);
            if change < self.tolerance || change > 0.5 * previous {
                break;
            }
            previous = change;
        }
        iterations
    }
}

/// The implicit position equation of a step, `q' = T(q') = q + ε/2 (v + G(q')⁻¹p½)` with
/// `v = G(q)⁻¹p½`, and the scales its iterates are compared in.
struct PositionEquation<'a> {
    /// The step's start `q`.
    q: &'a [f64],
    /// `v = G(q)⁻¹p½`.
    velocity: &'a [f64],
    /// The half-step momentum `p½`.
    p_half: &'a [f64],
    /// The metric's units of the position's coordinates (see the module's note).
    scale: &'a [f64],
    /// `ε/2`.
    half: f64,
}

impl PositionEquation<'_> {
    /// `out = q + ε/2 (v + x)`: `T(q')` for `x = G(q')⁻¹p½`.
    fn update(&self, x: &[f64], out: &mut [f64]) {
        for k in 0..self.q.len() {
            out[k] = self.q[k] + self.half * (self.velocity[k] + x[k]);
        }
    }
}

/// The state of Broyden's method on `R(q') = q' − T(q')`: the inverse Jacobian its updates
/// use, corrected by each secant.
struct Broyden {
    identity: DMatrix<f64>,
    /// `H`, the inverse Jacobian of `R`: each update is `−H R`.
    inverse: DMatrix<f64>,
    /// `R` at the guess before the latest update.
    residual: DVector<f64>,
    /// The latest update, while it is the step to the current guess (`None` once something
    /// else moved the guess).
    secant: Option<DVector<f64>>,
}

impl Broyden {
    /// The method at the step's start `q`, where `R(q) = −ε v`, with `at` the metric there, and
    /// the first guess: Newton's update from `q`.
    ///
    /// `H` starts as `(I − ε/2 ∂(G⁻¹p½)/∂q)⁻¹` at the start where the metric has the derivative,
    /// else as `I` (the plain iteration's update, `R`'s Jacobian without the metric's
    /// variation), whose first guess is the explicit Euler step `q + ε v`.
    fn start(at: &dyn MetricAt, equation: &PositionEquation<'_>) -> (Self, Vec<f64>) {
        let (q, velocity, half) = (equation.q, equation.velocity, equation.half);
        let d = velocity.len();
        let identity = DMatrix::<f64>::identity(d, d);
        let inverse = at
            .velocity_derivative(velocity)
            .and_then(|jacobian| inverse(&identity - jacobian * half))
            .filter(|m| m.iter().all(|x| x.is_finite()))
            .unwrap_or_else(|| identity.clone());
        let residual = DVector::from_iterator(d, velocity.iter().map(|v| -2.0 * half * v));
        let first = -(&inverse * &residual);
        let q_new: Vec<f64> = (0..d).map(|k| q[k] + first[k]).collect();
        let broyden = Self {
            identity,
            inverse,
            residual,
            secant: Some(first),
        };
        (broyden, q_new)
    }

    /// The next update `−H R` for the residual `latest` at the current guess. While the
    /// updates shrink, `H` first takes Broyden's correction from the latest secant; once they
    /// stop shrinking, `H` goes back to `I`, the plain iteration.
    fn step(&mut self, latest: DVector<f64>, shrinking: bool) -> DVector<f64> {
        if shrinking {
            // Broyden's update of the inverse Jacobian from the latest secant s (the last
            // update) and y (the change of R along it).
            if let Some(s) = self.secant.take() {
                let y = &latest - &self.residual;
                let hy = &self.inverse * &y;
                let denominator = s.dot(&hy);
                if denominator.is_finite() && denominator.abs() > f64::MIN_POSITIVE {
                    let sh = s.transpose() * &self.inverse;
                    self.inverse += (s - hy) * sh / denominator;
                }
            }
        } else {
            self.inverse = self.identity.clone();
        }
        self.residual = latest;
        -(&self.inverse * &self.residual)
    }
}

/// The inverse of the small square matrix `a` by its LU factorization with partial pivoting,
/// `None` if a pivot is zero (singular). The same arithmetic as nalgebra's `try_inverse`, in
/// plain loops down the columns of the column-major storage: for the d ≤ 100 or so Jacobians
/// of the position solve it is several times faster than nalgebra's generic triangular solves,
/// which made the inverse the dearest part of an RNS-RMHMC step outside the exact `U`.
pub(crate) fn inverse(mut a: DMatrix<f64>) -> Option<DMatrix<f64>> {
    let d = a.nrows();
    if a.ncols() != d {
        return None;
    }
    // P A = L U in place: L below the diagonal (unit diagonal implied), U on and above it;
    // `swaps[k]` is the row swapped with row k at step k.
    let mut swaps = vec![0; d];
    let lu = a.as_mut_slice();
    for k in 0..d {
        let column = &lu[k * d..(k + 1) * d];
        let (pivot, largest) =
            column
                .iter()
                .enumerate()
                .skip(k)
                .fold((k, -1.0f64), |(p, m), (i, x)| {
                    if x.abs() > m { (i, x.abs()) } else { (p, m) }
                });
        if largest == 0.0 || !largest.is_finite() {
            return None;
        }
        swaps[k] = pivot;
        if pivot != k {
            for j in 0..d {
                lu.swap(j * d + k, j * d + pivot);
            }
        }
        let diagonal = lu[k * d + k];
        for x in &mut lu[k * d + k + 1..(k + 1) * d] {
            *x /= diagonal;
        }
        let (left, right) = lu.split_at_mut((k + 1) * d);
        let multipliers = &left[k * d + k + 1..(k + 1) * d];
        for column in right.chunks_exact_mut(d) {
            let ukj = column[k];
            for (x, l) in column[k + 1..].iter_mut().zip(multipliers) {
                *x -= l * ukj;
            }
        }
    }
    // The inverse solves L U X = P I: every column at once, step k over all of them, so the
    // columns' chains of dependent operations interleave (one column at a time waits on each
    // division and subtraction in turn).
    let mut out = DMatrix::identity(d, d);
    let x = out.as_mut_slice();
    for (k, &p) in swaps.iter().enumerate() {
        if p != k {
            for j in 0..d {
                x.swap(j * d + k, j * d + p);
            }
        }
    }
    for k in 0..d {
        let multipliers = &lu[k * d + k + 1..(k + 1) * d];
        for column in x.chunks_exact_mut(d) {
            let xk = column[k];
            for (xi, l) in column[k + 1..].iter_mut().zip(multipliers) {
                *xi -= l * xk;
            }
        }
    }
    for k in (0..d).rev() {
        let reciprocal = 1.0 / lu[k * d + k];
        let above = &lu[k * d..k * d + k];
        for column in x.chunks_exact_mut(d) {
            column[k] *= reciprocal;
            let xk = column[k];
            for (xi, u) in column[..k].iter_mut().zip(above) {
                *xi -= u * xk;
            }
        }
    }
    Some(out)
}
