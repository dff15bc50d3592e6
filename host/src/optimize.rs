//! The posterior mode (MAP) and the Hessian there: what variational HMC's Laplace regularizer
//! needs (see [`crate::surrogates::laplace`]).
//!
//! [`find_map`] minimizes `U` with argmin's L-BFGS and More–Thuente line search, then takes the
//! Hessian `∇²U` at the result by central differences of the exact gradient (its `2d` gradients
//! in parallel). Where L-BFGS stops short of the tolerance (an ill-conditioned posterior such as
//! Bank Marketing's, whose Hessian's condition number is about 3000), Newton steps with that
//! Hessian finish the search, and the Hessian is taken again at their end. [`regularized`]
//! lifts a Hessian that is not positive definite (a saddle, a flat direction, a search stopped
//! early) to one that is, so that it can serve as a Gaussian precision.
//!
//! # Cost accounting
//! Every call into the potential is counted in [`MapEstimate::evaluations`], including the
//! `2d` gradient calls of the Hessian: they are part of a surrogate method's training budget.
//! The objective handed to argmin evaluates `U` and `∇U` in one fused call and remembers the last
//! point, so the line search's `cost` then `gradient` at one point, and L-BFGS's second gradient
//! call at the accepted point, cost one evaluation, not three.
//!
//! # Non-finite potentials
//! A non-finite `U` or `∇U` met during the search is reported to argmin as an error, which ends
//! that line search (argmin's More–Thuente search cannot backtrack from an infinite value). The
//! search then restarts from the best point seen with ever more cautious steps (initial step
//! `10^-k`, at most `10^(1-k)` times the search direction, `k = 1, …, 6`), returning to ordinary
//! steps after a few successful iterations. If even the most cautious search cannot move,
//! [`find_map`] returns an error naming the point's `U` and `‖∇U‖`; it never panics.

use std::cell::{Cell, RefCell};

use argmin::core::{CostFunction, Executor, Gradient, LineSearch, State, TerminationReason};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use nalgebra::{DMatrix, SymmetricEigen};
use rayon::prelude::*;
use shmc_core::Potential;

use crate::{Error, Result};

/// Options of [`find_map`].
#[derive(Clone, Debug, PartialEq)]
pub struct MapOptions {
    /// The most L-BFGS iterations, over all restarts (default 200). Each iteration costs one
    /// line search, usually one or two evaluations.
    pub max_iterations: u64,
    /// The search has converged when `‖∇U(θ)‖₂ ≤ gradient_tolerance · max(1, ‖∇U(start)‖₂)`:
    /// relative to the starting gradient, absolute when that is small (default `1e-8`).
    pub gradient_tolerance: f64,
    /// How many past steps L-BFGS remembers (default 10).
    pub history: usize,
}

impl Default for MapOptions {
    fn default() -> Self {
        Self {
            max_iterations: 200,
            gradient_tolerance: 1e-8,
            history: 10,
        }
    }
}

impl MapOptions {
    fn validate(&self) -> Result<()> {
        if self.max_iterations == 0 {
            return Err(Error::invalid("the MAP search needs max_iterations ≥ 1"));
        }
        if !(self.gradient_tolerance.is_finite() && self.gradient_tolerance >= 0.0) {
            return Err(Error::invalid(format!(
                "the MAP search's gradient tolerance must be finite and ≥ 0, got {}",
                self.gradient_tolerance
            )));
        }
        if self.history == 0 {
            return Err(Error::invalid("the MAP search needs history ≥ 1"));
        }
        Ok(())
    }
}

/// The result of [`find_map`].
#[derive(Clone, Debug)]
pub struct MapEstimate {
    /// The mode `θ_L`: the point with the lowest `U` the search found.
    pub position: Vec<f64>,
    /// `U(θ_L)`.
    pub potential: f64,
    /// `‖∇U(θ_L)‖₂`.
    pub gradient_norm: f64,
    /// Whether `gradient_norm` met [`MapOptions::gradient_tolerance`]. When not, the search ran
    /// out of iterations or stalled (see [`MapEstimate::termination`]) and `position` is only the
    /// best point found.
    pub converged: bool,
    /// Why the search stopped, for messages.
    pub termination: String,
    /// `∇²U(θ_L)` by central differences of the gradient, symmetrized.
    pub hessian: DMatrix<f64>,
    /// Whether `hessian` is positive definite (has a Cholesky factor). A Laplace approximation
    /// needs it to be; see [`MapEstimate::laplace_precision`] and [`regularized`].
    pub positive_definite: bool,
    /// L-BFGS iterations over all restarts.
    pub iterations: u64,
    /// Calls into the potential: fused value-and-gradient calls during the search (the start
    /// included) plus the `2d` gradient calls of the Hessian.
    pub evaluations: u64,
}

/// The floor [`MapEstimate::laplace_precision`] lifts eigenvalues to, relative to the largest
/// eigenvalue magnitude.
pub const RELATIVE_EIGENVALUE_FLOOR: f64 = 1e-6;

impl MapEstimate {
    /// The precision of the Laplace approximation `N(θ_L, H⁻¹)`: the Hessian itself when it is
    /// positive definite, otherwise [`regularized`] with a floor of
    /// [`RELATIVE_EIGENVALUE_FLOOR`] times its largest eigenvalue magnitude (1 for a zero matrix).
    pub fn laplace_precision(&self) -> Result<DMatrix<f64>> {
        if self.positive_definite {
            return Ok(self.hessian.clone());
        }
        let eigen = symmetric_eigen(&self.hessian)?;
        let largest = eigen.eigenvalues.amax();
        let floor = if largest > 0.0 {
            RELATIVE_EIGENVALUE_FLOOR * largest
        } else {
            1.0
        };
        regularized(&self.hessian, floor)
    }
}

/// The symmetric part of `h`, eigen-decomposed; an error for a non-square or non-finite matrix
/// or one the iteration cannot decompose.
fn symmetric_eigen(h: &DMatrix<f64>) -> Result<SymmetricEigen<f64, nalgebra::Dyn>> {
    if !h.is_square() {
        return Err(Error::invalid(format!(
            "a Hessian must be square, got {} × {}",
            h.nrows(),
            h.ncols()
        )));
    }
    if h.iter().any(|x| !x.is_finite()) {
        return Err(Error::invalid("the Hessian has non-finite entries"));
    }
    let symmetric = (h + h.transpose()) * 0.5;
    SymmetricEigen::try_new(symmetric, f64::EPSILON, 10_000)
        .ok_or_else(|| Error::invalid("the Hessian's eigen-decomposition did not converge"))
}

/// `h` with every eigenvalue below `floor` raised to `floor`: `V max(Λ, floor) Vᵀ` from the
/// eigen-decomposition `V Λ Vᵀ` of `h`'s symmetric part, so a positive definite precision with
/// the same eigenvectors. A symmetric `h` whose eigenvalues are all at least `floor` is returned
/// unchanged (bit for bit).
///
/// `floor` must be finite and positive; a sensible choice is a small multiple (say `1e-6`) of
/// the largest eigenvalue, as [`MapEstimate::laplace_precision`] does. Errors for a non-square
/// or non-finite `h`.
pub fn regularized(h: &DMatrix<f64>, floor: f64) -> Result<DMatrix<f64>> {
    if !(floor.is_finite() && floor > 0.0) {
        return Err(Error::invalid(format!(
            "the eigenvalue floor must be finite and positive, got {floor}"
        )));
    }
    let eigen = symmetric_eigen(h)?;
    if eigen.eigenvalues.min() >= floor && h == &h.transpose() {
        return Ok(h.clone());
    }
    let lifted = eigen.eigenvalues.map(|l| l.max(floor));
    let v = &eigen.eigenvectors;
    let out = v * DMatrix::from_diagonal(&lifted) * v.transpose();
    Ok((&out + out.transpose()) * 0.5)
}

/// One finite evaluation of the potential.
#[derive(Clone, Debug)]
struct Evaluation {
    point: Vec<f64>,
    value: f64,
    gradient: Vec<f64>,
}

/// The potential as argmin sees it: fused, cached, counted, and with non-finite results turned
/// into errors.
struct Objective<'a> {
    potential: &'a dyn Potential,
    evaluations: Cell<u64>,
    non_finite: Cell<u64>,
    last: RefCell<Option<Evaluation>>,
    best: RefCell<Option<Evaluation>>,
}

impl<'a> Objective<'a> {
    fn new(potential: &'a dyn Potential) -> Self {
        Self {
            potential,
            evaluations: Cell::new(0),
            non_finite: Cell::new(0),
            last: RefCell::new(None),
            best: RefCell::new(None),
        }
    }

    /// `U(q)` and `∇U(q)`, from the cache when `q` is the last point evaluated or the best.
    fn evaluate(&self, q: &[f64]) -> Result<(f64, Vec<f64>), argmin::core::Error> {
        for cached in [&self.last, &self.best] {
            if let Some(c) = cached.borrow().as_ref()
                && c.point == q
            {
                return Ok((c.value, c.gradient.clone()));
            }
        }
        if q.iter().any(|x| !x.is_finite()) {
            // A degenerate search direction; the potential is not asked.
            self.non_finite.set(self.non_finite.get() + 1);
            return Err(argmin::core::Error::msg(
                "the search reached a non-finite point",
            ));
        }
        let mut gradient = vec![0.0; q.len()];
        let value = self.potential.value_and_gradient(q, &mut gradient);
        self.evaluations.set(self.evaluations.get() + 1);
        if !value.is_finite() || gradient.iter().any(|g| !g.is_finite()) {
            self.non_finite.set(self.non_finite.get() + 1);
            return Err(argmin::core::Error::msg(format!(
                "the potential is not finite there (U = {value})"
            )));
        }
        let evaluation = Evaluation {
            point: q.to_vec(),
            value,
            gradient: gradient.clone(),
        };
        let mut best = self.best.borrow_mut();
        if best.as_ref().is_none_or(|b| value < b.value) {
            *best = Some(evaluation.clone());
        }
        *self.last.borrow_mut() = Some(evaluation);
        Ok((value, gradient))
    }

    fn best(&self) -> Evaluation {
        self.best
            .borrow()
            .clone()
            .expect("the start is evaluated before the search")
    }
}

impl CostFunction for &Objective<'_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, param: &Vec<f64>) -> Result<f64, argmin::core::Error> {
        self.evaluate(param).map(|(value, _)| value)
    }
}

impl Gradient for &Objective<'_> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;

    fn gradient(&self, param: &Vec<f64>) -> Result<Vec<f64>, argmin::core::Error> {
        self.evaluate(param).map(|(_, gradient)| gradient)
    }
}

fn norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// The most cautious restart level: initial step `10^-k`, steps at most `10^(1-k)`.
const MAX_CAUTION: i32 = 6;
/// Iterations a cautious restart runs before ordinary steps are tried again.
const CAUTIOUS_ITERATIONS: u64 = 5;

fn argmin_error(e: argmin::core::Error) -> Error {
    Error::invalid(format!("the MAP search could not be set up: {e}"))
}

/// The L-BFGS solver at a caution level (0: argmin's defaults).
type Solver = LBFGS<MoreThuenteLineSearch<Vec<f64>, Vec<f64>, f64>, Vec<f64>, Vec<f64>, f64>;

fn solver(caution: i32, tolerance: Tolerances, history: usize) -> Result<Solver> {
    let mut line_search = MoreThuenteLineSearch::new();
    if caution > 0 {
        line_search = line_search
            .with_bounds(f64::EPSILON.sqrt(), 10f64.powi(1 - caution))
            .map_err(argmin_error)?;
        line_search
            .initial_step_length(10f64.powi(-caution))
            .map_err(argmin_error)?;
    }
    LBFGS::new(line_search, history)
        .with_tolerance_grad(tolerance.gradient)
        .and_then(|s| s.with_tolerance_cost(tolerance.cost))
        .map_err(argmin_error)
}

/// When an L-BFGS run stops: the gradient norm it meets, and the least decrease of `U` an
/// iteration must make (argmin's default, `ε`, or [`ROUNDING_STALL`] for a MAP search).
#[derive(Clone, Copy, Debug)]
struct Tolerances {
    gradient: f64,
    cost: f64,
}

/// A MAP search's L-BFGS stops at an iteration that lowers `U` by less than this times
/// `max(|U(start)|, 1)`: `U` has reached its rounding, and where the gradient has not met its
/// tolerance yet, the Newton finish with the finite-difference Hessian takes over (one or two
/// steps). Measured on pde-fine's 60×60 level: the gradient fell to 2e-6 in 20 evaluations,
/// then its line searches spent 580 more at `U`'s rounding (changes of 1e-14 in 54) before one
/// met the 1e-7 tolerance by chance; with the rule, 103 evaluations in all, the Hessians'
/// included (the 120×120 mesh: 139 against 213). At `2ε` the 8×8 PDE still spends 226; at
/// `16ε` the rule stops well-conditioned searches (logistic regression) before their gradient
/// tolerance, where the Newton finish then costs another Hessian; `4ε` leaves them as they were
/// (`tests/same_draws.sh`: 89 files, 0 differ).
const ROUNDING_STALL: f64 = 4.0 * f64::EPSILON;

/// The mode of `exp(−U)` from `start`, with the Hessian there; see the [module docs](self) for
/// the stopping rule, the cost accounting and what happens where `U` is not finite.
///
/// Errors when `start` has the wrong length or is not finite, when `U` or `∇U` is not finite at
/// `start`, when the search cannot move away from non-finite values, and when the gradient is
/// not finite at the finite-difference points of the Hessian. Not converging within
/// [`MapOptions::max_iterations`] is not an error: see [`MapEstimate::converged`].
pub fn find_map(
    potential: &(dyn Potential + Sync),
    start: &[f64],
    options: &MapOptions,
) -> Result<MapEstimate> {
    options.validate()?;
    let d = potential.dim();
    check_start(start, d)?;
    let objective = Objective::new(potential);
    let (start_value, start_gradient) = objective.evaluate(start).map_err(|e| {
        Error::invalid(format!(
            "the MAP search cannot start: at the starting point {e}"
        ))
    })?;
    let tolerance = options.gradient_tolerance * norm(&start_gradient).max(1.0);
    let tolerances = Tolerances {
        gradient: tolerance,
        cost: ROUNDING_STALL * start_value.abs().max(1.0),
    };
    let search = lbfgs_search(&objective, options, tolerances)?;
    let mut best = search.converged_at.unwrap_or_else(|| objective.best());
    let mut hessian = hessian(potential, &best.point)?;
    let mut hessians = 1;
    let mut termination = search.termination;
    if norm(&best.gradient) > tolerance
        && let Some(finished) = newton_finish(&objective, &best, &hessian, tolerance)
    {
        best = finished;
        hessian = self::hessian(potential, &best.point)?;
        hessians += 1;
        termination = format!(
            "{termination}; Newton steps with the finite-difference Hessian then met the \
             gradient tolerance"
        );
    }
    let gradient_norm = norm(&best.gradient);
    let positive_definite = hessian.clone().cholesky().is_some();
    Ok(MapEstimate {
        converged: gradient_norm <= tolerance,
        termination,
        potential: best.value,
        gradient_norm,
        position: best.point,
        positive_definite,
        hessian,
        iterations: search.iterations,
        evaluations: objective.evaluations.get() + hessians * 2 * d as u64,
    })
}

/// The lowest point of `potential` that L-BFGS finds from `start`: [`find_map`]'s search
/// (its stopping rule and its cautious restarts where the potential is not finite) without the
/// Hessian at the end, for objectives whose Hessian nobody needs (a Gaussian process's
/// negative log evidence, whose every gradient costs a Cholesky factorization).
///
/// Errors as [`find_map`] does, except that no Hessian is taken.
pub fn minimize(
    potential: &(dyn Potential + Sync),
    start: &[f64],
    options: &MapOptions,
) -> Result<Minimum> {
    options.validate()?;
    check_start(start, potential.dim())?;
    let objective = Objective::new(potential);
    let (_, start_gradient) = objective.evaluate(start).map_err(|e| {
        Error::invalid(format!(
            "the search cannot start: at the starting point {e}"
        ))
    })?;
    let tolerance = options.gradient_tolerance * norm(&start_gradient).max(1.0);
    let tolerances = Tolerances {
        gradient: tolerance,
        cost: f64::EPSILON,
    };
    let search = lbfgs_search(&objective, options, tolerances)?;
    let best = search.converged_at.unwrap_or_else(|| objective.best());
    Ok(Minimum {
        converged: norm(&best.gradient) <= tolerance,
        position: best.point,
        value: best.value,
        iterations: search.iterations,
        evaluations: objective.evaluations.get(),
    })
}

/// The result of [`minimize`].
#[derive(Clone, Debug)]
pub struct Minimum {
    /// The lowest point found.
    pub position: Vec<f64>,
    /// The potential there.
    pub value: f64,
    /// Whether the gradient met the tolerance there.
    pub converged: bool,
    /// L-BFGS iterations over all restarts.
    pub iterations: u64,
    /// Value-and-gradient evaluations, the start included.
    pub evaluations: u64,
}

/// Errors unless the potential has a dimension and `start` is a finite point of it.
fn check_start(start: &[f64], d: usize) -> Result<()> {
    if d == 0 {
        return Err(Error::invalid(
            "the MAP search needs a potential of dimension ≥ 1",
        ));
    }
    if start.len() != d {
        return Err(Error::invalid(format!(
            "the MAP search's start has {} coordinates, the potential {d}",
            start.len()
        )));
    }
    if start.iter().any(|x| !x.is_finite()) {
        return Err(Error::invalid("the MAP search's start is not finite"));
    }
    Ok(())
}

/// Why [`lbfgs_search`] stopped when the gradient met the tolerance.
const GRADIENT_MET: &str = "the gradient norm met the tolerance";

/// How the L-BFGS search ended.
struct LbfgsSearch {
    /// Why it stopped, for messages.
    termination: String,
    /// L-BFGS iterations over all restarts.
    iterations: u64,
    /// argmin's own end point (not the lowest point seen), when it met the tolerance: the answer.
    converged_at: Option<Evaluation>,
}

/// L-BFGS runs from the objective's best point until the gradient meets `tolerance`, the
/// iterations run out or a run stops for another reason. A run that met non-finite values is
/// followed by a more cautious one (up to [`MAX_CAUTION`], then an error), and a cautious run
/// that used its [`CAUTIOUS_ITERATIONS`] by an ordinary one again.
fn lbfgs_search(
    objective: &Objective<'_>,
    options: &MapOptions,
    tolerances: Tolerances,
) -> Result<LbfgsSearch> {
    let tolerance = tolerances.gradient;
    let mut iterations = 0u64;
    let mut caution = 0i32;
    let ended = |termination: String, iterations, converged_at| {
        Ok(LbfgsSearch {
            termination,
            iterations,
            converged_at,
        })
    };
    loop {
        let best = objective.best();
        if norm(&best.gradient) <= tolerance {
            return ended(GRADIENT_MET.to_string(), iterations, None);
        }
        let remaining = options.max_iterations - iterations;
        if remaining == 0 {
            return ended(
                TerminationReason::MaxItersReached.to_string(),
                iterations,
                None,
            );
        }
        let budget = if caution == 0 {
            remaining
        } else {
            remaining.min(CAUTIOUS_ITERATIONS)
        };
        let non_finite_before = objective.non_finite.get();
        let solver = solver(caution, tolerances, options.history)?;
        let run = lbfgs_run(objective, solver, &best, budget);
        let hit_non_finite = objective.non_finite.get() > non_finite_before;
        iterations += run.iterations;
        if let Some(end) = run.end
            && norm(&end.gradient) <= tolerance
        {
            return ended(GRADIENT_MET.to_string(), iterations, Some(end));
        }
        if hit_non_finite {
            if caution == MAX_CAUTION {
                return Err(cannot_proceed(objective, iterations, &run.reason));
            }
            caution += 1;
        } else if caution > 0 && run.reason == TerminationReason::MaxItersReached.to_string() {
            caution = 0;
        } else {
            return ended(run.reason, iterations, None);
        }
    }
}

/// How one L-BFGS run ended.
struct LbfgsRun {
    /// The iterations it used, at least one.
    iterations: u64,
    /// Why it stopped: argmin's termination reason or its error.
    reason: String,
    /// Its end point, when argmin reports one.
    end: Option<Evaluation>,
}

/// One L-BFGS run of at most `budget` iterations from `best`.
fn lbfgs_run(
    objective: &Objective<'_>,
    solver: Solver,
    best: &Evaluation,
    budget: u64,
) -> LbfgsRun {
    let run = Executor::new(objective, solver)
        // Not `.cost(best.value)`: L-BFGS's `init` sets the cost again, and with the cost
        // given twice its |previous − current cost| < ε test stops the run at iteration 0,
        // reporting convergence. Without it, `init` asks for the cost, which the cache of
        // the best point answers without an evaluation.
        .configure(|state| {
            state
                .param(best.point.clone())
                .gradient(best.gradient.clone())
                .max_iters(budget)
        })
        .run();
    match run {
        Ok(result) => {
            let state = result.state;
            let end = match (state.get_param(), state.get_gradient()) {
                (Some(p), Some(g)) => Some(Evaluation {
                    point: p.clone(),
                    value: state.get_cost(),
                    gradient: g.clone(),
                }),
                _ => None,
            };
            LbfgsRun {
                // argmin counts an iteration even when its line search fails, so every run
                // uses up budget and the search ends.
                iterations: state.get_iter().max(1),
                reason: state
                    .get_termination_reason()
                    .map_or_else(|| "unknown".to_string(), ToString::to_string),
                end,
            }
        }
        Err(e) => LbfgsRun {
            iterations: 1,
            reason: e.to_string(),
            end: None,
        },
    }
}

/// The error when even the most cautious run from the best point met non-finite values.
fn cannot_proceed(objective: &Objective<'_>, iterations: u64, reason: &str) -> Error {
    let best = objective.best();
    Error::invalid(format!(
        "the MAP search cannot proceed: every step from its best point \
         (U = {}, ‖∇U‖ = {:.3e}, after {iterations} iterations) leads where the \
         potential is not finite ({reason})",
        best.value,
        norm(&best.gradient)
    ))
}

/// The most Newton steps [`newton_finish`] takes.
const NEWTON_STEPS: usize = 20;

/// How far, relative to `max(|U|, 1)`, [`newton_finish`] lets `U` rise on a step that shrinks
/// the gradient: rounding, not a climb. A sum of `n` terms rounds to within about `n·ε` of its
/// magnitude, 10⁻¹⁰ at a million rows; a step that climbs out of a basin rises by far more.
const U_ROUNDING: f64 = 1e-10;

/// Newton steps `x ← x − t H⁻¹∇U(x)` from `start` with the fixed Hessian `hessian` (taken at
/// `start`), `t` halved until `U` decreases, until the gradient norm meets `tolerance`. Near a
/// mode a finite-difference Hessian makes each step shrink the gradient by orders of magnitude,
/// where L-BFGS on an ill-conditioned posterior can stall for hundreds of iterations.
///
/// "Decreases" allows `U`'s rounding ([`U_ROUNDING`]) on a step that shrinks the gradient: this
/// close to a mode a step lowers `U` by `½ ∇Uᵀ H⁻¹ ∇U`, which can be below that rounding (a
/// logistic regression of 10⁵ rows, `U` ≈ 7·10⁴ summed from 10⁵ terms, `‖∇U‖` 3·10⁻⁵: a fall of
/// 10⁻¹³ against an ulp of 1.5·10⁻¹¹), so the computed `U` rose as often as it fell and every
/// step was refused (L-BFGS had stopped there for the same reason). A smaller gradient alone is
/// not enough: a step into a saddle or a maximum has one too, and a climb there would end the
/// search on a point that is not a mode. `None` when the Hessian is not positive definite or
/// the steps do not reach the tolerance (the L-BFGS result stands).
fn newton_finish(
    objective: &Objective<'_>,
    start: &Evaluation,
    hessian: &DMatrix<f64>,
    tolerance: f64,
) -> Option<Evaluation> {
    let factor = hessian.clone().cholesky()?;
    let mut at = start.clone();
    let progress = |at: &Evaluation, value: f64, gradient: &[f64]| {
        let rounding = U_ROUNDING * at.value.abs().max(1.0);
        value <= at.value || (value <= at.value + rounding && norm(gradient) < norm(&at.gradient))
    };
    for _ in 0..NEWTON_STEPS {
        let step = factor.solve(&nalgebra::DVector::from_column_slice(&at.gradient));
        let mut t = 1.0;
        let next = loop {
            let point: Vec<f64> = at
                .point
                .iter()
                .zip(step.iter())
                .map(|(x, s)| x - t * s)
                .collect();
            match objective.evaluate(&point) {
                Ok((value, gradient)) if progress(&at, value, &gradient) => {
                    break Some(Evaluation {
                        point,
                        value,
                        gradient,
                    });
                }
                _ if t < 1e-4 => break None,
                _ => t *= 0.5,
            }
        };
        at = next?;
        if norm(&at.gradient) <= tolerance {
            return Some(at);
        }
    }
    None
}

/// `∇²U(x)` by central differences of the exact gradient, symmetrized: column `j` is
/// `(∇U(x + hⱼeⱼ) − ∇U(x − hⱼeⱼ)) / 2hⱼ` with `hⱼ = ε^(1/3) · max(|xⱼ|, 1)` (`ε` the machine
/// epsilon), the step that balances the `O(h²)` truncation error against rounding. `2d` gradient
/// evaluations, the columns in parallel (each on its own, so the result does not depend on the
/// threads).
fn hessian(potential: &(dyn Potential + Sync), x: &[f64]) -> Result<DMatrix<f64>> {
    let d = x.len();
    let relative_step = f64::EPSILON.cbrt();
    let columns: Vec<Result<Vec<f64>>> = (0..d)
        .into_par_iter()
        .map(|j| {
            let step = relative_step * x[j].abs().max(1.0);
            let (hi, lo) = (x[j] + step, x[j] - step);
            let mut shifted = x.to_vec();
            let (mut up, mut down) = (vec![0.0; d], vec![0.0; d]);
            shifted[j] = hi;
            potential.gradient(&shifted, &mut up);
            shifted[j] = lo;
            potential.gradient(&shifted, &mut down);
            if up.iter().chain(down.iter()).any(|g| !g.is_finite()) {
                return Err(Error::invalid(format!(
                    "the gradient is not finite within {step:.1e} of the mode in coordinate {}, \
                     so the Hessian there cannot be taken",
                    j + 1
                )));
            }
            // `hi − lo` is the step actually taken after rounding.
            let width = hi - lo;
            Ok(up.iter().zip(&down).map(|(u, l)| (u - l) / width).collect())
        })
        .collect();
    let mut h = DMatrix::zeros(d, d);
    for (j, column) in columns.into_iter().enumerate() {
        h.set_column(j, &nalgebra::DVector::from_vec(column?));
    }
    Ok((&h + h.transpose()) * 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::logistic::LogisticRegression;
    use crate::models::probit::ProbitRegression;
    use nalgebra::DVector;

    /// `U(q) = ½ (q − m)ᵀ P (q − m)` with a dense precision.
    struct Gaussian {
        mean: DVector<f64>,
        precision: DMatrix<f64>,
        calls: std::sync::atomic::AtomicU64,
    }

    impl Gaussian {
        fn correlated() -> Self {
            let a = DMatrix::from_row_slice(
                4,
                4,
                &[
                    2.0, 0.5, -0.3, 0.1, //
                    0.0, 1.5, 0.7, -0.2, //
                    0.4, 0.0, 0.8, 0.6, //
                    -0.1, 0.3, 0.0, 3.0,
                ],
            );
            let precision = &a * a.transpose() + DMatrix::identity(4, 4) * 0.5;
            Self {
                mean: DVector::from_column_slice(&[1.5, -2.0, 0.25, 4.0]),
                precision,
                calls: std::sync::atomic::AtomicU64::new(0),
            }
        }
    }

    impl Potential for Gaussian {
        fn dim(&self) -> usize {
            self.mean.len()
        }
        fn value(&self, q: &[f64]) -> f64 {
            self.calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let delta = DVector::from_column_slice(q) - &self.mean;
            0.5 * delta.dot(&(&self.precision * &delta))
        }
        fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
            self.calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let delta = DVector::from_column_slice(q) - &self.mean;
            let g = &self.precision * &delta;
            grad.copy_from_slice(g.as_slice());
            0.5 * delta.dot(&g)
        }
    }

    #[test]
    fn find_map_recovers_gaussian_mean_and_precision() {
        let target = Gaussian::correlated();
        let map = find_map(&target, &[0.0; 4], &MapOptions::default()).unwrap();
        assert!(map.converged, "{}", map.termination);
        for (x, m) in map.position.iter().zip(target.mean.iter()) {
            assert!((x - m).abs() < 1e-6, "position {:?}", map.position);
        }
        assert!(map.potential.abs() < 1e-10);
        assert!(
            (&map.hessian - &target.precision).amax() < 1e-5,
            "hessian {} vs precision {}",
            map.hessian,
            target.precision
        );
        assert_eq!(map.hessian, map.hessian.transpose());
        assert!(map.positive_definite);
        assert_eq!(map.laplace_precision().unwrap(), map.hessian);
    }

    #[test]
    fn find_map_counts_every_call_into_the_potential() {
        let target = Gaussian::correlated();
        let map = find_map(&target, &[3.0, 1.0, -1.0, 0.0], &MapOptions::default()).unwrap();
        assert_eq!(
            map.evaluations,
            target.calls.load(std::sync::atomic::Ordering::Relaxed)
        );
        // The start, at least one line-search point, and the Hessian's 2d gradients.
        assert!(map.evaluations >= 2 + 8);
        assert!(map.iterations >= 1);
        // The cache: one evaluation per line-search point, not a cost and a gradient call each
        // plus L-BFGS's own gradient call at the accepted point.
        assert!(map.evaluations <= 1 + 2 * map.iterations + 8);
    }

    fn check_regression(potential: &(dyn Potential + Sync), name: &str) {
        let d = potential.dim();
        let options = MapOptions::default();
        let start = vec![0.0; d];
        let mut g0 = vec![0.0; d];
        potential.gradient(&start, &mut g0);
        let map = find_map(potential, &start, &options).unwrap();
        let mut g = vec![0.0; d];
        let u = potential.value_and_gradient(&map.position, &mut g);
        let tolerance = options.gradient_tolerance * norm(&g0).max(1.0);
        eprintln!(
            "{name} d = {d}: {} iterations, {} evaluations ({} for the Hessian), \
             ‖∇U‖ = {:.2e} (tolerance {tolerance:.2e}), {}",
            map.iterations,
            map.evaluations,
            2 * d,
            norm(&g),
            map.termination
        );
        assert!(map.converged, "{}", map.termination);
        assert!(norm(&g) <= tolerance, "‖∇U‖ = {}", norm(&g));
        assert_eq!(u, map.potential);
        assert!((norm(&g) - map.gradient_norm).abs() <= 1e-12 * norm(&g0));
        assert!(map.positive_definite);
        // The mode of a log-concave posterior beats every nearby point.
        for j in 0..d {
            let mut q = map.position.clone();
            q[j] += 1e-3;
            assert!(potential.value(&q) > u);
        }
    }

    #[test]
    fn find_map_meets_the_gradient_tolerance_on_logistic_regression() {
        let model = LogisticRegression::simulate(500, 5, 7).unwrap();
        check_regression(&model, "logistic");
    }

    /// With 10⁵ rows `U` is some 7·10⁴, summed from 10⁵ terms, and near the mode a step lowers
    /// it by less than its rounding: L-BFGS stopped with `‖∇U‖` 3·10⁻⁵ against a tolerance some
    /// hundred times smaller (argmin's "Solver converged"), and the Newton finish, which took
    /// only steps whose computed `U` fell, refused every one; `bench grid --seed 2` then stopped
    /// at its sweep's Laplace box. The Newton finish now also takes a step that shrinks the
    /// gradient. (This data set's seed is the one that failed; 3 of 18 seeds and dimensions did.)
    #[test]
    fn find_map_meets_the_gradient_tolerance_where_u_outgrows_its_rounding() {
        let model = LogisticRegression::simulate(100_000, 2, 2).unwrap();
        check_regression(&model, "logistic, 10⁵ rows");
    }

    #[test]
    fn find_map_meets_the_gradient_tolerance_on_probit_regression() {
        let model = ProbitRegression::simulate(500, 5, 11).unwrap();
        check_regression(&model, "probit");
    }

    #[test]
    fn regularized_lifts_a_non_positive_definite_matrix() {
        // Eigenvalues 3, −1 (eigenvectors (1, 1)/√2 and (1, −1)/√2).
        let h = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
        assert!(h.clone().cholesky().is_none());
        let lifted = regularized(&h, 0.5).unwrap();
        assert!(lifted.clone().cholesky().is_some());
        let expected = DMatrix::from_row_slice(2, 2, &[1.75, 1.25, 1.25, 1.75]);
        assert!((&lifted - &expected).amax() < 1e-12, "{lifted}");
        let eigenvalues = lifted.symmetric_eigenvalues();
        assert!((eigenvalues.min() - 0.5).abs() < 1e-12);
        assert!((eigenvalues.max() - 3.0).abs() < 1e-12);
    }

    #[test]
    fn regularized_leaves_a_positive_definite_matrix_unchanged() {
        let h = DMatrix::from_row_slice(3, 3, &[4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0]);
        assert_eq!(regularized(&h, 1e-6).unwrap(), h);
        // A floor above the smallest eigenvalue does change it.
        assert_ne!(regularized(&h, 10.0).unwrap(), h);
        assert!(regularized(&h, 0.0).is_err());
        assert!(regularized(&DMatrix::from_element(2, 2, f64::NAN), 1.0).is_err());
        assert!(regularized(&DMatrix::zeros(2, 3), 1.0).is_err());
    }

    #[test]
    fn laplace_precision_of_a_saddle_is_positive_definite() {
        struct Saddle;
        impl Potential for Saddle {
            fn dim(&self) -> usize {
                2
            }
            fn value(&self, q: &[f64]) -> f64 {
                q[0] * q[0] - q[1] * q[1]
            }
            fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
                grad[0] = 2.0 * q[0];
                grad[1] = -2.0 * q[1];
                self.value(q)
            }
        }
        // Started on the saddle's stable line, the search stays at the saddle point.
        let map = find_map(&Saddle, &[1.0, 0.0], &MapOptions::default()).unwrap();
        assert!(map.position[0].abs() < 1e-6 && map.position[1] == 0.0);
        assert!(!map.positive_definite);
        let precision = map.laplace_precision().unwrap();
        assert!(precision.clone().cholesky().is_some());
        assert!((precision[(0, 0)] - 2.0).abs() < 1e-6);
        assert!((precision[(1, 1)] - 2.0 * RELATIVE_EIGENVALUE_FLOOR).abs() < 1e-9);
    }

    /// `U(q) = Σ (c qᵢ − log qᵢ)`: NaN for `qᵢ < 0`, infinite at 0, mode at `qᵢ = 1/c`.
    struct LogBarrier {
        c: f64,
    }

    impl Potential for LogBarrier {
        fn dim(&self) -> usize {
            2
        }
        fn value(&self, q: &[f64]) -> f64 {
            q.iter().map(|x| self.c * x - x.ln()).sum()
        }
        fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
            for (g, x) in grad.iter_mut().zip(q) {
                *g = self.c - 1.0 / x;
            }
            self.value(q)
        }
    }

    #[test]
    fn find_map_recovers_from_steps_into_a_nan_region() {
        // The first L-BFGS step, −∇U(1, 2) = −(9, 9.5), lands where U is NaN.
        let target = LogBarrier { c: 10.0 };
        let map = find_map(&target, &[1.0, 2.0], &MapOptions::default()).unwrap();
        assert!(map.converged, "{}", map.termination);
        for x in &map.position {
            assert!((x - 0.1).abs() < 1e-6, "{:?}", map.position);
        }
        assert!(
            (map.hessian[(0, 0)] - 100.0).abs() < 1e-3,
            "{}",
            map.hessian
        );
    }

    #[test]
    fn find_map_never_panics_when_the_potential_is_nan_outside_a_region() {
        /// `½ ‖q − (5, 0)‖²` inside the unit disc, NaN outside: the mode is out of reach.
        struct Disc;
        impl Potential for Disc {
            fn dim(&self) -> usize {
                2
            }
            fn value(&self, q: &[f64]) -> f64 {
                if q[0] * q[0] + q[1] * q[1] > 1.0 {
                    f64::NAN
                } else {
                    0.5 * ((q[0] - 5.0).powi(2) + q[1] * q[1])
                }
            }
            fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
                let inside = q[0] * q[0] + q[1] * q[1] <= 1.0;
                grad[0] = if inside { q[0] - 5.0 } else { f64::NAN };
                grad[1] = if inside { q[1] } else { f64::NAN };
                self.value(q)
            }
        }
        match find_map(&Disc, &[0.0, 0.5], &MapOptions::default()) {
            Ok(map) => {
                // Whatever it returns must be a finite point inside the region, not a mode.
                assert!(!map.converged);
                assert!(map.potential.is_finite());
                assert!(map.position.iter().all(|x| x.is_finite()));
                assert!(map.position[0].powi(2) + map.position[1].powi(2) <= 1.0);
            }
            Err(e) => {
                let message = e.to_string();
                assert!(message.contains("not finite"), "{message}");
            }
        }
        // NaN at the start is an error at once.
        let error = find_map(&Disc, &[2.0, 0.0], &MapOptions::default()).unwrap_err();
        assert!(error.to_string().contains("cannot start"), "{error}");
    }

    #[test]
    fn find_map_rejects_bad_input() {
        let target = Gaussian::correlated();
        assert!(find_map(&target, &[0.0; 3], &MapOptions::default()).is_err());
        assert!(find_map(&target, &[0.0, f64::NAN, 0.0, 0.0], &MapOptions::default()).is_err());
        let options = MapOptions {
            max_iterations: 0,
            ..MapOptions::default()
        };
        assert!(find_map(&target, &[0.0; 4], &options).is_err());
        let options = MapOptions {
            gradient_tolerance: -1.0,
            ..MapOptions::default()
        };
        assert!(find_map(&target, &[0.0; 4], &options).is_err());
    }

    /// Rosenbrock's banana valley, `(1 − x)² + 100 (y − x²)²`: far from its mode the Hessian
    /// changes too fast for Newton steps with a fixed one to finish an L-BFGS search stopped
    /// after two iterations.
    struct Rosenbrock;

    impl Potential for Rosenbrock {
        fn dim(&self) -> usize {
            2
        }
        fn value(&self, q: &[f64]) -> f64 {
            (1.0 - q[0]).powi(2) + 100.0 * (q[1] - q[0] * q[0]).powi(2)
        }
        fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
            let r = q[1] - q[0] * q[0];
            grad[0] = -2.0 * (1.0 - q[0]) - 400.0 * q[0] * r;
            grad[1] = 200.0 * r;
            self.value(q)
        }
    }

    #[test]
    fn find_map_reports_running_out_of_iterations() {
        let options = MapOptions {
            max_iterations: 2,
            ..MapOptions::default()
        };
        let map = find_map(&Rosenbrock, &[-1.2, 1.0], &options).unwrap();
        assert!(!map.converged, "{}", map.termination);
        assert_eq!(map.iterations, 2);
        assert!(map.potential.is_finite());
    }

    /// `U = x⁴/4 − x²/2`: modes at ±1, a maximum at 0.
    struct DoubleWell;

    impl Potential for DoubleWell {
        fn dim(&self) -> usize {
            1
        }
        fn value(&self, q: &[f64]) -> f64 {
            q[0].powi(4) / 4.0 - q[0] * q[0] / 2.0
        }
        fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
            g[0] = q[0].powi(3) - q[0];
            self.value(q)
        }
    }

    /// A Hessian that is positive definite but too flat sends the first Newton step from
    /// `x = 1.05`, beside the mode at 1, onto the maximum at 0, where the gradient vanishes:
    /// taking a step for its smaller gradient alone would end the search there, `U` 0.25
    /// above where it started. Only `U`'s rounding may be given up for a smaller gradient, so
    /// the step is halved back into the basin, and the finish ends at the mode.
    #[test]
    fn newton_steps_never_climb_for_a_smaller_gradient() {
        let objective = Objective::new(&DoubleWell);
        let x = 1.05;
        let (value, gradient) = objective.evaluate(&[x]).unwrap();
        let start = Evaluation {
            point: vec![x],
            value,
            gradient: gradient.clone(),
        };
        // The step −g/h lands on 0.
        let flat = DMatrix::from_element(1, 1, gradient[0] / x);
        let finished = newton_finish(&objective, &start, &flat, 1e-8);
        let end = finished.expect("the halved steps reach the mode");
        assert!(end.value <= start.value, "{:?} from {x}", end.point);
        assert!((end.point[0] - 1.0).abs() < 1e-6, "{:?}", end.point);
    }

    /// Near a mode, Newton steps with the finite-difference Hessian finish what two L-BFGS
    /// iterations left, and the Hessian is the one at their end.
    #[test]
    fn newton_steps_finish_a_search_stopped_short_near_the_mode() {
        let model = LogisticRegression::simulate(200, 5, 3).unwrap();
        let options = MapOptions {
            max_iterations: 2,
            ..MapOptions::default()
        };
        let map = find_map(&model, &[0.0; 5], &options).unwrap();
        assert!(map.converged, "{}", map.termination);
        assert!(map.termination.contains("Newton"), "{}", map.termination);
        assert_eq!(map.iterations, 2);
        let full = find_map(&model, &[0.0; 5], &MapOptions::default()).unwrap();
        for (a, b) in map.position.iter().zip(&full.position) {
            assert!(
                (a - b).abs() < 1e-6,
                "{:?} vs {:?}",
                map.position,
                full.position
            );
        }
        assert_eq!(map.hessian, hessian(&model, &map.position).unwrap());
    }

    /// The elliptic PDE's adjoint gradient carries its solver's rounding, about 1e-7 here,
    /// near the tolerance: on this 8×8 problem L-BFGS without the stall rule spent 254
    /// evaluations (line searches at `U`'s rounding) where it now stops and lets the Newton
    /// finish meet the tolerance, 140 evaluations with both Hessians.
    #[test]
    fn find_map_stops_where_u_stops_falling_beyond_its_rounding() {
        use crate::models::elliptic_pde::{EllipticPde, PdeSettings};
        let model = EllipticPde::simulate(PdeSettings {
            mesh: 8,
            data_seed: 1,
            ..PdeSettings::default()
        })
        .unwrap();
        let map = find_map(&model, &[0.0; 20], &MapOptions::default()).unwrap();
        assert!(map.converged, "{}", map.termination);
        assert!(map.evaluations < 150, "{} evaluations", map.evaluations);
    }
}
