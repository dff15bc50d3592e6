//! Potentials that are a sum over data rows, evaluated at several points in one pass over the
//! data.
//!
//! A regression's `U` streams its whole design matrix, and once that matrix is larger than the
//! caches an evaluation costs what reading it from memory costs. Chains that need their exact
//! `U` at the same moment can share that read: each row, once loaded, serves every chain's
//! point. A model offers this by implementing [`RowSum`] and returning it from
//! [`Model::row_sum`](crate::Model::row_sum); the sampler's lockstep mode
//! ([`crate::sampler::lockstep`]) then splits the rows between the chains' threads.
//!
//! # Summation order
//! A [`RowSum`] model's `U` is *defined* as its segments' partial sums added in segment order,
//! starting from zero, followed by [`RowSum::finish`] (the prior):
//! `U(q) = ((0 + P₀(q)) + P₁(q)) + … + P_{S−1}(q) + R(q)`, and the same for each coordinate of
//! `∇U`. A segment is a fixed set of rows, so the partials do not depend on which thread
//! computed them or on which other points shared the pass; [`evaluate`] (one point, one
//! thread) and the lockstep pass add the same numbers in the same order and agree bit for bit.

/// What an evaluation needs at a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// `U` only (the end point of a surrogate trajectory).
    Value,
    /// `∇U` only (a leapfrog step).
    Gradient,
    /// Both, in one pass (the end point of an exact trajectory).
    ValueAndGradient,
}

impl Need {
    /// Whether `U` is needed.
    pub fn value(self) -> bool {
        matches!(self, Need::Value | Need::ValueAndGradient)
    }

    /// Whether `∇U` is needed.
    pub fn gradient(self) -> bool {
        matches!(self, Need::Gradient | Need::ValueAndGradient)
    }
}

/// One point of a shared pass and what is needed there.
#[derive(Clone, Copy, Debug)]
pub struct Query<'a> {
    /// The point `q`, of the model's dimension.
    pub point: &'a [f64],
    /// What to compute at it.
    pub need: Need,
}

/// A potential `U(q) = Σ_segments P_s(q) + R(q)` whose row sum can be computed one segment at a
/// time for several points at once (see the module documentation for the summation order).
///
/// The model's own [`Potential`](shmc_core::Potential) methods must return what [`evaluate`]
/// returns (the simplest way is to call it), so that sharing a pass changes no result.
pub trait RowSum: Sync {
    /// The number of segments `S`: fixed groups of rows, the same for every point.
    fn segments(&self) -> usize;

    /// Writes segment `index`'s partial sums at every query into `out`, which holds one record
    /// of `1 + d` numbers per query, in query order: the partial of `U` first (if the query
    /// needs the value), then the partial of `∇U` (if it needs the gradient). What a query does
    /// not need may be left as it is. `index < segments()`.
    fn segment(&self, index: usize, queries: &[Query<'_>], out: &mut [f64]);

    /// The point the segments are computed at for a point asked for, when it differs: a row
    /// sum that is a change of variables of another (the Laplace coordinates) maps each point
    /// here, once per pass, instead of once in every segment. Callers of [`Self::segment`] pass
    /// it the mapped points ([`mapped_queries`]); [`Self::finish`] still gets the point asked
    /// for. `None`, the default, is the point itself.
    fn segment_point(&self, _point: &[f64]) -> Option<Vec<f64>> {
        None
    }

    /// The number of rows `N` the row sum adds up (its segments together).
    fn rows(&self) -> usize;

    /// Writes `Σ_{i ∈ rows} ∇ℓᵢ(point)` into `grad` (overwriting it): the gradient of the
    /// listed rows' terms alone, without the prior. Any row sum can sum a subset of its rows,
    /// which is what a minibatch estimate of `∇U` needs (SGLD rescales it by `N/n` before
    /// [`Self::finish`] adds the prior's gradient). Indices are below [`Self::rows`].
    fn rows_gradient(&self, point: &[f64], rows: &[usize], grad: &mut [f64]);

    /// Adds the part of `U` that is not a sum over rows (the prior) at `point` to the row sum:
    /// to `value` if `need` asks for the value, and its gradient to `grad` if it asks for the
    /// gradient.
    fn finish(&self, point: &[f64], need: Need, value: &mut f64, grad: &mut [f64]);
}

/// Each query's [`RowSum::segment_point`], where it has one.
pub(crate) fn segment_points<S: RowSum + ?Sized>(
    sum: &S,
    queries: &[Query<'_>],
) -> Vec<Option<Vec<f64>>> {
    queries.iter().map(|q| sum.segment_point(q.point)).collect()
}

/// The queries [`RowSum::segment`] takes: each at its mapped point from [`segment_points`], or
/// at its own.
pub(crate) fn mapped_queries<'a>(
    queries: &[Query<'a>],
    mapped: &'a [Option<Vec<f64>>],
) -> Vec<Query<'a>> {
    queries
        .iter()
        .zip(mapped)
        .map(|(q, m)| Query {
            point: m.as_deref().unwrap_or(q.point),
            need: q.need,
        })
        .collect()
}

/// The running total of one point's segment partials, in segment order.
pub(crate) struct Total<'g> {
    need: Need,
    value: f64,
    grad: &'g mut [f64],
}

impl<'g> Total<'g> {
    /// An empty total; `grad` (of length `d`, or empty when the gradient is not needed) is
    /// where the gradient accumulates.
    pub(crate) fn new(need: Need, grad: &'g mut [f64]) -> Self {
        if need.gradient() {
            grad.fill(0.0);
        }
        Self {
            need,
            value: 0.0,
            grad,
        }
    }

    /// Adds the next segment's record (`1 + d` numbers, as [`RowSum::segment`] writes them).
    #[inline]
    pub(crate) fn add(&mut self, record: &[f64]) {
        if self.need.value() {
            self.value += record[0];
        }
        if self.need.gradient() {
            for (g, p) in self.grad.iter_mut().zip(&record[1..]) {
                *g += p;
            }
        }
    }

    /// `U` (0 when only the gradient was needed) after the non-row part is added; the
    /// gradient is complete in the buffer.
    pub(crate) fn finish<S: RowSum + ?Sized>(mut self, sum: &S, point: &[f64]) -> f64 {
        sum.finish(point, self.need, &mut self.value, self.grad);
        self.value
    }
}

/// Dimensions up to this have their segment record on the stack: one evaluation then allocates
/// nothing. Larger ones allocate it once per evaluation, next to a pass over `N × d` numbers.
const STACK_RECORD: usize = 256;

/// `U(point)` (0 if `need` does not ask for it), and `∇U(point)` into `grad` if it asks for
/// the gradient (`grad` may then be empty otherwise): the segments one after the other on the
/// calling thread. This *is* a [`RowSum`] model's potential.
pub fn evaluate<S: RowSum + ?Sized>(sum: &S, point: &[f64], need: Need, grad: &mut [f64]) -> f64 {
    let width = 1 + point.len();
    let mut stack = [0.0; STACK_RECORD];
    let mut heap = Vec::new();
    let record = if width <= STACK_RECORD {
        &mut stack[..width]
    } else {
        heap.resize(width, 0.0);
        &mut heap[..]
    };
    let mapped = sum.segment_point(point);
    let query = [Query {
        point: mapped.as_deref().unwrap_or(point),
        need,
    }];
    let mut total = Total::new(need, grad);
    for index in 0..sum.segments() {
        sum.segment(index, &query, record);
        total.add(record);
    }
    total.finish(sum, point)
}

/// `U` and `∇U` at every point of `points`, in one pass over the data: the segments are shared
/// out between the threads of rayon's pool, each evaluating all the points on its rows, and
/// every point's partials are added in segment order, so each result is [`evaluate`]'s at that
/// point, bit for bit, whatever the threads. What fitting a surrogate to many states at once
/// costs: one read of the data instead of one per state.
pub fn evaluate_many<S: RowSum + ?Sized>(sum: &S, points: &[Vec<f64>]) -> Vec<(f64, Vec<f64>)> {
    use rayon::prelude::*;
    let Some(d) = points.first().map(Vec::len) else {
        return Vec::new();
    };
    let width = 1 + d;
    let queries: Vec<Query<'_>> = points
        .iter()
        .map(|point| Query {
            point,
            need: Need::ValueAndGradient,
        })
        .collect();
    let mapped = segment_points(sum, &queries);
    let queries = mapped_queries(&queries, &mapped);
    let partials: Vec<Vec<f64>> = (0..sum.segments())
        .into_par_iter()
        .map(|index| {
            let mut out = vec![0.0; queries.len() * width];
            sum.segment(index, &queries, &mut out);
            out
        })
        .collect();
    points
        .iter()
        .enumerate()
        .map(|(k, point)| {
            let mut grad = vec![0.0; d];
            let mut total = Total::new(Need::ValueAndGradient, &mut grad);
            for out in &partials {
                total.add(&out[k * width..(k + 1) * width]);
            }
            let value = total.finish(sum, point);
            (value, grad)
        })
        .collect()
}

/// Checks that `sum`'s [`RowSum::rows_gradient`] over all rows plus the prior's gradient is the
/// full `∇U` at `point`, and that two halves add up to the whole (a model's minibatch gradient
/// must be the same row terms as its full one).
#[cfg(test)]
pub(crate) fn assert_rows_gradient_adds_up<S: RowSum + shmc_core::Potential>(
    sum: &S,
    point: &[f64],
) {
    let d = point.len();
    let mut full = vec![0.0; d];
    sum.gradient(point, &mut full);
    let all: Vec<usize> = (0..sum.rows()).collect();
    let (first, second) = all.split_at(all.len() / 2);
    let (mut a, mut b) = (vec![0.0; d], vec![0.0; d]);
    sum.rows_gradient(point, first, &mut a);
    sum.rows_gradient(point, second, &mut b);
    let mut whole: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    sum.finish(point, Need::Gradient, &mut 0.0, &mut whole);
    for (j, (w, f)) in whole.iter().zip(&full).enumerate() {
        assert!(
            (w - f).abs() <= 1e-9 * (1.0 + f.abs()),
            "coordinate {j}: rows {w} against the full gradient {f}"
        );
    }
}
