//! The model as the chains see it: a user's model, checked at every evaluation for the bugs
//! that would otherwise pass silently or leave no trace of where they happened.
//!
//! - A gradient that leaves entries unwritten (a model that fills `d − 1` of `d`) would carry
//!   the previous point's values into the trajectory: silent garbage. Each gradient buffer is
//!   filled with a NaN whose payload arithmetic never produces before the model is called, and
//!   an entry still holding it afterwards stops the chain.
//! - Reported values of another count than the parameter names would write rows that do not
//!   match the CSV header: a corrupt file. Checked before the row is written.
//! - A panic inside the model (an index past the end of a slice) is re-raised with the point it
//!   was evaluated at, so the driver's error names the chain and the parameter values.
//!
//! A NaN or infinite `U` is not an error here: the transition counts it as divergent and
//! rejects it. The checks cost two passes over `d` numbers per gradient, nothing beside a model
//! whose gradient is worth sampling.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use shmc_core::Potential;

use super::panic_message;
use crate::Model;

/// A quiet NaN with the payload "SHMC": what an unwritten gradient entry still holds.
const UNWRITTEN: u64 = 0x7ff8_5348_4d43_0000;

/// `model`, checked as the module says.
pub(super) struct Checked<'m, M: ?Sized> {
    model: &'m M,
    parameters: usize,
}

impl<'m, M: Model + ?Sized> Checked<'m, M> {
    pub(super) fn new(model: &'m M) -> Self {
        Self {
            model,
            parameters: model.parameter_names().len(),
        }
    }

    /// Runs `f` (an evaluation of the model at `q`); a panic inside it is raised again with
    /// `q` in its message.
    fn at<T>(&self, q: &[f64], f: impl FnOnce() -> T) -> T {
        catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
            resume_unwind(Box::new(format!(
                "{} (at {})",
                panic_message(payload.as_ref()),
                point(q)
            )))
        })
    }

    /// Fills `grad`, has `f` write it, and stops the chain if an entry was left unwritten.
    fn gradient_at<T>(&self, q: &[f64], grad: &mut [f64], f: impl FnOnce(&mut [f64]) -> T) -> T {
        grad.fill(f64::from_bits(UNWRITTEN));
        let out = self.at(q, || f(grad));
        if let Some(i) = grad.iter().position(|g| g.to_bits() == UNWRITTEN) {
            resume_unwind(Box::new(format!(
                "the gradient left entry {} of {} unwritten (at {})",
                i + 1,
                grad.len(),
                point(q)
            )));
        }
        out
    }
}

/// `q = [..]`, its first 8 values at most.
fn point(q: &[f64]) -> String {
    let shown: Vec<String> = q.iter().take(8).map(|x| format!("{x}")).collect();
    let more = if q.len() > 8 {
        format!(", … ({} values)", q.len())
    } else {
        String::new()
    };
    format!("q = [{}{more}]", shown.join(", "))
}

impl<M: Model + ?Sized> Potential for Checked<'_, M> {
    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn value(&self, q: &[f64]) -> f64 {
        self.at(q, || self.model.value(q))
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        self.gradient_at(q, grad, |g| self.model.value_and_gradient(q, g))
    }

    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        self.gradient_at(q, grad, |g| self.model.gradient(q, g))
    }
}

impl<M: Model + ?Sized> Model for Checked<'_, M> {
    fn parameter_names(&self) -> Vec<String> {
        self.model.parameter_names()
    }

    fn write_parameters(&self, q: &[f64], out: &mut Vec<f64>) {
        let before = out.len();
        self.at(q, || self.model.write_parameters(q, out));
        if out.len() != before + self.parameters {
            resume_unwind(Box::new(format!(
                "the model reported {} values for its {} parameter names (at {})",
                out.len().saturating_sub(before),
                self.parameters,
                point(q)
            )));
        }
    }

    fn notes(&self) -> Vec<String> {
        self.model.notes()
    }

    fn failure(&self) -> Option<String> {
        self.model.failure()
    }

    /// The model's own capabilities pass through: a row sum's shared passes and a metric
    /// are the model's code, not a user's `U` that the checks are for.
    fn row_sum(&self) -> Option<&dyn crate::row_sum::RowSum> {
        self.model.row_sum()
    }

    fn riemannian_metric(
        &self,
        start: &[f64],
    ) -> Option<Box<dyn crate::metric::RiemannianMetric + '_>> {
        self.model.riemannian_metric(start)
    }

    fn bytes_per_chain(&self) -> u128 {
        self.model.bytes_per_chain()
    }

    fn concurrency(&self) -> Option<usize> {
        self.model.concurrency()
    }

    fn work(&self) -> Vec<(&'static str, u64)> {
        self.model.work()
    }

    /// The levels are the model's own code, built from it, like its metric.
    fn levels(&self) -> Option<&dyn crate::model::Levels> {
        self.model.levels()
    }
}
