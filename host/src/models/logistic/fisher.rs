//! The Fisher information of logistic regression as a Riemannian metric: the journal paper's
//! metric for RMHMC on this model.

use nalgebra::{DMatrix, DVector};
use shmc_core::fastmath::logistic;

use super::LogisticRegression;
use crate::metric::{DenseFactor, MetricAt, RiemannianMetric};

/// The Fisher information of logistic regression plus the prior precision,
/// `G(β) = Xᵀ diag(π(1−π)) X + I/σ²` with `π = σ(Xβ)`: the expected Hessian of `U`, positive
/// definite everywhere, the journal paper's metric for RMHMC. Its derivatives are
/// `∂ᵢG = Xᵀ diag(π(1−π)(1−2π) x·ᵢ) X`.
///
/// Costs O(N·d²) per point (the Gram matrix, and the `N` solves of `tr(G⁻¹∂ᵢG)`): the metric
/// work that makes exact RMHMC slower than HMC per effective sample in the paper.
#[derive(Clone, Debug)]
pub struct LogisticFisher {
    /// The design, `N × d`.
    x: DMatrix<f64>,
    precision: f64,
}

impl LogisticFisher {
    /// The Fisher metric of `model` (it copies the design into a column-major matrix).
    pub fn new(model: &LogisticRegression) -> Self {
        let data = model.data();
        Self {
            x: DMatrix::from_row_slice(data.n, data.p, &data.x),
            precision: 1.0 / model.prior_variance(),
        }
    }
}

struct FisherAt<'a> {
    x: &'a DMatrix<f64>,
    factor: DenseFactor,
    matrix: DMatrix<f64>,
    /// `π(1−π)(1−2π)` per row.
    third: DVector<f64>,
}

impl RiemannianMetric for LogisticFisher {
    fn dim(&self) -> usize {
        self.x.ncols()
    }

    fn at(&self, q: &[f64]) -> Option<Box<dyn MetricAt + '_>> {
        let z = &self.x * DVector::from_column_slice(q);
        let mut root = DVector::zeros(z.len());
        let mut third = DVector::zeros(z.len());
        for (n, &zn) in z.iter().enumerate() {
            let pi = logistic(zn);
            let w = pi * (1.0 - pi);
            third[n] = w * (1.0 - 2.0 * pi);
            root[n] = w.sqrt();
        }
        let mut scaled = self.x.clone();
        for mut column in scaled.column_iter_mut() {
            column.component_mul_assign(&root);
        }
        // An explicit transpose and `*`, which runs matrixmultiply's blocked gemm (`tr_mul`
        // runs one dot product per entry, several times slower at N = 100 000).
        let mut matrix = scaled.transpose() * &scaled;
        for k in 0..matrix.nrows() {
            matrix[(k, k)] += self.precision;
        }
        let factor = DenseFactor::new(matrix.clone())?;
        Some(Box::new(FisherAt {
            x: &self.x,
            factor,
            matrix,
            third,
        }))
    }

    /// `Xᵀ diag(π(1−π)) X x + x/σ²`, in two passes over the design (`Xq` and `Xx` together,
    /// then `Xᵀ`): O(N·d), where [`at`](RiemannianMetric::at) forms the O(N·d²) Gram matrix.
    fn product(&self, q: &[f64], x: &[f64], out: &mut [f64]) -> bool {
        let mut both = DMatrix::zeros(q.len(), 2);
        both.column_mut(0).copy_from_slice(q);
        both.column_mut(1).copy_from_slice(x);
        let zt = &self.x * both;
        let weighted = DVector::from_iterator(
            zt.nrows(),
            zt.row_iter().map(|row| {
                let pi = logistic(row[0]);
                pi * (1.0 - pi) * row[1]
            }),
        );
        let gx = self.x.tr_mul(&weighted);
        for ((o, g), xk) in out.iter_mut().zip(gx.iter()).zip(x) {
            *o = g + self.precision * xk;
        }
        true
    }
}

impl MetricAt for FisherAt<'_> {
    fn matrix(&self) -> DMatrix<f64> {
        self.matrix.clone()
    }
    fn solve(&self, p: &[f64], out: &mut [f64]) {
        self.factor.solve(p, out);
    }
    fn factor_times(&self, z: &[f64], out: &mut [f64]) {
        self.factor.factor_times(z, out);
    }
    fn log_det(&self) -> f64 {
        self.factor.log_det()
    }

    /// `Σₙ π(1−π)(1−2π)ₙ (xₙᵀG⁻¹xₙ) xₙᵢ`, with every `xₙᵀG⁻¹xₙ` from one gemm `X G⁻¹`.
    fn trace_derivatives(&self, out: &mut [f64]) {
        let mut b = self.x * self.factor.cholesky().inverse();
        b.component_mul_assign(self.x);
        let mut weights = b.column_sum();
        weights.component_mul_assign(&self.third);
        out.copy_from_slice(self.x.tr_mul(&weights).as_slice());
    }

    /// `Σₙ π(1−π)(1−2π)ₙ (xₙ·u)² xₙᵢ`.
    fn quadratic_derivatives(&self, u: &[f64], out: &mut [f64]) {
        let mut t = self.x * DVector::from_column_slice(u);
        t.iter_mut()
            .zip(self.third.iter())
            .for_each(|(tn, w)| *tn = w * *tn * *tn);
        out.copy_from_slice(self.x.tr_mul(&t).as_slice());
    }
}
