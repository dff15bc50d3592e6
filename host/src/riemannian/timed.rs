//! A metric that counts its evaluations and clocks them: the metric's work in an RMHMC step
//! (the factorizations and derivative contractions) is what separates RMHMC's cost from HMC's,
//! so the output reports it apart from the rest of the step (the potential's gradients and the
//! fixed-point arithmetic). Its products (`G(q)x` without a factorization) are counted apart
//! from its evaluations: they cost a fraction of one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use nalgebra::DMatrix;

use super::{MetricAt, RiemannianMetric};

/// What a metric cost so far: points evaluated ([`RiemannianMetric::at`]), products
/// ([`RiemannianMetric::product`]), and the seconds spent in them and in every use of them.
#[derive(Debug, Default)]
pub struct MetricWork {
    evaluations: AtomicU64,
    products: AtomicU64,
    nanoseconds: AtomicU64,
}

impl MetricWork {
    /// Points evaluated so far.
    pub fn evaluations(&self) -> u64 {
        self.evaluations.load(Ordering::Relaxed)
    }

    /// Products computed so far.
    pub fn products(&self) -> u64 {
        self.products.load(Ordering::Relaxed)
    }

    /// Seconds spent in the metric so far.
    pub fn seconds(&self) -> f64 {
        self.nanoseconds.load(Ordering::Relaxed) as f64 * 1e-9
    }

    fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanoseconds.fetch_add(nanos, Ordering::Relaxed);
        out
    }
}

/// `metric`, with its work added to `work`.
pub struct Timed<'a> {
    /// The metric.
    pub metric: &'a dyn RiemannianMetric,
    /// Where its work is counted.
    pub work: &'a MetricWork,
}

struct TimedAt<'a> {
    at: Box<dyn MetricAt + 'a>,
    work: &'a MetricWork,
}

impl RiemannianMetric for Timed<'_> {
    fn dim(&self) -> usize {
        self.metric.dim()
    }

    fn at(&self, q: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        self.work.evaluations.fetch_add(1, Ordering::Relaxed);
        let at = self.work.time(|| self.metric.at(q))?;
        Some(Box::new(TimedAt {
            at,
            work: self.work,
        }))
    }

    fn product(&self, q: &[f64], x: &[f64], out: &mut [f64]) -> bool {
        let offered = self.work.time(|| self.metric.product(q, x, out));
        self.work
            .products
            .fetch_add(u64::from(offered), Ordering::Relaxed);
        offered
    }
}

impl MetricAt for TimedAt<'_> {
    fn matrix(&self) -> DMatrix<f64> {
        self.work.time(|| self.at.matrix())
    }
    fn solve(&self, p: &[f64], out: &mut [f64]) {
        self.work.time(|| self.at.solve(p, out));
    }
    fn factor_times(&self, z: &[f64], out: &mut [f64]) {
        self.work.time(|| self.at.factor_times(z, out));
    }
    fn log_det(&self) -> f64 {
        self.at.log_det()
    }
    fn trace_derivatives(&self, out: &mut [f64]) {
        self.work.time(|| self.at.trace_derivatives(out));
    }
    fn quadratic_derivatives(&self, u: &[f64], out: &mut [f64]) {
        self.work.time(|| self.at.quadratic_derivatives(u, out));
    }
    fn velocity_derivative(&self, v: &[f64]) -> Option<DMatrix<f64>> {
        self.work.time(|| self.at.velocity_derivative(v))
    }
}
