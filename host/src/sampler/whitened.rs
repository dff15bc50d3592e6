//! The model as the chains see it under the Laplace metric: in the standard coordinates `z` of
//! its Laplace approximation ([`crate::whitening`]), `U_z(z) = U(θ̂ + C⁻ᵀ z)` with
//! `∇U_z = C⁻¹ ∇U`. The chains, their adaptation, their surrogates and NUTS all run on `z`
//! unchanged; what leaves the sampler (the reported values, hence the CSV rows and summaries)
//! is in the model's own coordinates.
//!
//! A model whose `U` is a row sum stays one, so chains in lockstep still share their passes:
//! each segment is evaluated at the points' `q`, its partial gradients summed on `q`, and the
//! total pulled back once, after the prior, in [`RowSum::finish`]. The wrapper's own `U` and
//! `∇U` go through the same row sum, so the shared pass and a chain's own evaluation agree bit
//! for bit, as the lockstep guarantees.

use std::sync::Arc;

use shmc_core::Potential;

use super::{ChainResult, Checkpoint, DrawSink, InverseMetric};
use crate::row_sum::{self, Need, Query, RowSum};
use crate::surrogates::Surrogate;
use crate::whitening::Laplace;
use crate::{Generative, Model, Result};

/// `model` in the standard coordinates of `laplace` (see the module docs).
pub(super) struct Whitened<'m> {
    model: &'m dyn Model,
    laplace: &'m Laplace,
}

impl<'m> Whitened<'m> {
    pub(super) fn new(model: &'m dyn Model, laplace: &'m Laplace) -> Self {
        Self { model, laplace }
    }

    fn position(&self, z: &[f64]) -> Vec<f64> {
        let mut q = vec![0.0; z.len()];
        self.laplace.position(z, &mut q);
        q
    }
}

impl Potential for Whitened<'_> {
    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn value(&self, z: &[f64]) -> f64 {
        if self.model.row_sum().is_some() {
            return row_sum::evaluate(self, z, Need::Value, &mut []);
        }
        self.model.value(&self.position(z))
    }

    fn value_and_gradient(&self, z: &[f64], grad: &mut [f64]) -> f64 {
        if self.model.row_sum().is_some() {
            return row_sum::evaluate(self, z, Need::ValueAndGradient, grad);
        }
        let u = self.model.value_and_gradient(&self.position(z), grad);
        self.laplace.pull_back(grad);
        u
    }

    fn gradient(&self, z: &[f64], grad: &mut [f64]) {
        if self.model.row_sum().is_some() {
            row_sum::evaluate(self, z, Need::Gradient, grad);
            return;
        }
        self.model.gradient(&self.position(z), grad);
        self.laplace.pull_back(grad);
    }
}

impl Model for Whitened<'_> {
    fn parameter_names(&self) -> Vec<String> {
        self.model.parameter_names()
    }

    fn write_parameters(&self, z: &[f64], out: &mut Vec<f64>) {
        self.model.write_parameters(&self.position(z), out);
    }

    fn notes(&self) -> Vec<String> {
        self.model.notes()
    }

    fn work(&self) -> Vec<(&'static str, u64)> {
        self.model.work()
    }

    fn row_sum(&self) -> Option<&dyn RowSum> {
        self.model.row_sum().map(|_| self as &dyn RowSum)
    }

    /// A run's chains need no generative form (simulation-based calibration asks the model it
    /// was given, before any run).
    fn generative(&self) -> Option<&dyn Generative> {
        None
    }

    fn failure(&self) -> Option<String> {
        self.model.failure()
    }

    fn bytes_per_chain(&self) -> u128 {
        self.model.bytes_per_chain()
    }

    fn concurrency(&self) -> Option<usize> {
        self.model.concurrency()
    }
}

/// The model's row sum at the points' `q`. Partial gradients (of segments, and of
/// [`RowSum::rows_gradient`]) stay on `q`; [`RowSum::finish`] adds the prior there and pulls
/// the total back to `z`.
impl RowSum for Whitened<'_> {
    fn segments(&self) -> usize {
        self.inner().segments()
    }

    /// The queries' points are already on `q` ([`RowSum::segment_point`]).
    fn segment(&self, index: usize, queries: &[Query<'_>], out: &mut [f64]) {
        self.inner().segment(index, queries, out);
    }

    /// `q = θ̂ + C⁻ᵀ z`, then whatever the model's own row sum maps `q` to.
    fn segment_point(&self, z: &[f64]) -> Option<Vec<f64>> {
        let q = self.position(z);
        Some(self.inner().segment_point(&q).unwrap_or(q))
    }

    fn rows(&self) -> usize {
        self.inner().rows()
    }

    fn rows_gradient(&self, z: &[f64], rows: &[usize], grad: &mut [f64]) {
        self.inner().rows_gradient(&self.position(z), rows, grad);
    }

    fn finish(&self, z: &[f64], need: Need, value: &mut f64, grad: &mut [f64]) {
        self.inner().finish(&self.position(z), need, value, grad);
        if need.gradient() {
            self.laplace.pull_back(grad);
        }
    }
}

impl Whitened<'_> {
    /// The model's row sum; only called when it has one ([`Model::row_sum`] offers this one
    /// only then).
    fn inner(&self) -> &dyn RowSum {
        self.model
            .row_sum()
            .expect("a whitened row sum wraps a model that has one")
    }
}

/// A chain's sink under the Laplace metric: the diagonal inverse mass matrix adapted on `z` is
/// reported as the dense one it is on the model's parameters (what CmdStan's `dense_e` files
/// hold); everything else passes through.
pub(super) struct DenseAdaptation {
    sink: Box<dyn DrawSink>,
    laplace: Arc<Laplace>,
}

impl DenseAdaptation {
    pub(super) fn new(sink: Box<dyn DrawSink>, laplace: Arc<Laplace>) -> Self {
        Self { sink, laplace }
    }
}

impl DrawSink for DenseAdaptation {
    fn adaptation(&mut self, step_size: f64, inverse_metric: &InverseMetric) -> Result<()> {
        let dense = match inverse_metric {
            InverseMetric::Diagonal(diagonal) => {
                InverseMetric::Dense(self.laplace.inverse_mass(diagonal))
            }
            dense => dense.clone(),
        };
        self.sink.adaptation(step_size, &dense)
    }
    fn transitions_chosen(&mut self, chosen: &super::transitions::Chosen) -> Result<()> {
        self.sink.transitions_chosen(chosen)
    }
    fn draw(&mut self, row: &[f64]) -> Result<()> {
        self.sink.draw(row)
    }
    fn finish(&mut self, chain: &ChainResult) -> Result<()> {
        self.sink.finish(chain)
    }
    fn failed(&mut self, message: &str) -> Result<()> {
        self.sink.failed(message)
    }
    fn checkpoint(
        &mut self,
        checkpoint: &Checkpoint,
        surrogate: Option<&dyn Surrogate>,
    ) -> Result<()> {
        self.sink.checkpoint(checkpoint, surrogate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::banana::Banana;
    use crate::models::logistic::LogisticRegression;

    /// `U_z(z) = U(q(z))` and `∇U_z` against central differences of `U_z`, for a row-sum model
    /// and one without; and the row sum's one-point pass is the wrapper's own `U` bit for bit.
    #[test]
    fn the_whitened_potential_is_u_in_z_with_its_gradient() {
        let logistic = LogisticRegression::simulate(300, 3, 2).unwrap();
        let banana = Banana::simulate(Banana::PAPER_N, 4).unwrap();
        let models: [&dyn Model; 2] = [&logistic, &banana];
        for model in models {
            let d = model.dim();
            let laplace = Laplace::find(model, &vec![0.0; d]).unwrap();
            let whitened = Whitened::new(model, &laplace);
            let z: Vec<f64> = (0..d).map(|i| 0.4 * i as f64 - 0.5).collect();
            let mut q = vec![0.0; d];
            laplace.position(&z, &mut q);
            assert_eq!(whitened.value(&z), model.value(&q));
            let mut grad = vec![0.0; d];
            let u = whitened.value_and_gradient(&z, &mut grad);
            assert_eq!(u, whitened.value(&z));
            for j in 0..d {
                let h = 1e-6;
                let (mut up, mut down) = (z.clone(), z.clone());
                up[j] += h;
                down[j] -= h;
                let fd = (whitened.value(&up) - whitened.value(&down)) / (2.0 * h);
                assert!(
                    (fd - grad[j]).abs() < 1e-5 * (1.0 + fd.abs()),
                    "{j}: {fd} vs {}",
                    grad[j]
                );
            }
            let mut alone = vec![0.0; d];
            whitened.gradient(&z, &mut alone);
            assert_eq!(alone, grad);
            let mut out = Vec::new();
            whitened.write_parameters(&z, &mut out);
            assert_eq!(out, q);
        }
    }

    /// Several points share a pass through the wrapper's row sum and get, bit for bit, what
    /// each gets alone (the lockstep's promise, kept under the change of variables).
    #[test]
    fn a_shared_pass_equals_each_points_own_evaluation() {
        let model = LogisticRegression::simulate(2500, 4, 7).unwrap();
        let laplace = Laplace::find(&model, &[0.0; 4]).unwrap();
        let whitened = Whitened::new(&model, &laplace);
        let sum = whitened.row_sum().unwrap();
        let points = [[0.1, -0.3, 0.2, 1.0], [-1.0, 0.5, 0.0, 0.3]];
        let queries: Vec<Query<'_>> = points
            .iter()
            .map(|p| Query {
                point: p,
                need: Need::ValueAndGradient,
            })
            .collect();
        let mut totals = [(0.0, [0.0; 4]), (0.0, [0.0; 4])];
        let mut out = vec![0.0; 2 * 5];
        let mapped = row_sum::segment_points(sum, &queries);
        let queries = row_sum::mapped_queries(&queries, &mapped);
        for index in 0..sum.segments() {
            sum.segment(index, &queries, &mut out);
            for (k, (value, grad)) in totals.iter_mut().enumerate() {
                let record = &out[5 * k..5 * k + 5];
                *value += record[0];
                for (g, r) in grad.iter_mut().zip(&record[1..]) {
                    *g += r;
                }
            }
        }
        for ((value, grad), point) in totals.iter_mut().zip(&points) {
            sum.finish(point, Need::ValueAndGradient, value, grad);
            let mut own = [0.0; 4];
            let u = whitened.value_and_gradient(point, &mut own);
            assert_eq!(value.to_bits(), u.to_bits());
            assert_eq!(grad.map(f64::to_bits), own.map(f64::to_bits));
        }
    }
}
