//! The squared-exponential kernel with one length scale per coordinate (ARD),
//! `k(x, x') = σ_f² exp(−½ Σₖ (xₖ − x'ₖ)² / ℓₖ²)`, and the predictive mean built on it.
//!
//! Both kinds predict with the same form, `Ũ(x) = c + Σᵢ vᵢ exp(−½ Σₖ (xₖ − zᵢₖ)² / ℓₖ²)`: the
//! full GP with a centre `zᵢ` at every training state, FITC with one at every inducing point.
//! So one [`Predictor`] serves both, and a surrogate file holds exactly its fields, from which it
//! is rebuilt bit for bit. A full GP fitted to gradients too (derivative observations) adds a
//! slope `wᵢ` to each centre's weight, `vᵢ + wᵢ·(x − zᵢ)` (the covariance of `f(x)` with
//! `∂f(zᵢ)` is the kernel times `(x − zᵢ) ⊙ ℓ⁻²`), still `O(m·d)` per evaluation.

use super::quadratic::Quadratic;

/// The kernel's correlation part `exp(−½ Σₖ (aₖ − bₖ)² iₖ)`, with `iₖ = 1/ℓₖ²`.
pub(super) fn correlation(a: &[f64], b: &[f64], inverse_squares: &[f64]) -> f64 {
    let mut sum = 0.0;
    for ((x, y), i) in a.iter().zip(b).zip(inverse_squares) {
        let t = x - y;
        sum += t * t * i;
    }
    (-0.5 * sum).exp()
}

/// `1/ℓₖ²` for each length scale: computed one way wherever a kernel is built from its length
/// scales, so that a fit and a loaded file agree bit for bit.
pub(super) fn inverse_squares(lengths: &[f64]) -> Vec<f64> {
    lengths.iter().map(|l| 1.0 / (l * l)).collect()
}

/// The predictive mean `Ũ(x) = offset + Σᵢ vᵢ exp(−½ Σₖ (xₖ − zᵢₖ)² / ℓₖ²)` and its gradient
/// `∇Ũ(x) = −Σᵢ vᵢ eᵢ (x − zᵢ) ⊙ ℓ⁻²`: `O(m·d)` per evaluation for `m` centres.
#[derive(Clone, Debug)]
pub struct Predictor {
    /// `m × d`, row-major: the centres `zᵢ`.
    centres: Vec<f64>,
    /// `vᵢ`, in units of `U` (the signal variance and the value scale folded in).
    weights: Vec<f64>,
    /// `ℓₖ`.
    lengths: Vec<f64>,
    /// `1/ℓₖ²`.
    inverse_squares: Vec<f64>,
    /// The constant `c`: the mean function, in units of `U`.
    offset: f64,
    /// The quadratic mean function added to it, if the GP was fitted on its residuals.
    quadratic: Option<Quadratic>,
    /// `m × d`, row-major: the slopes `wᵢ` of a GP fitted to gradients too.
    slopes: Option<Vec<f64>>,
}

impl Predictor {
    /// The predictive mean with these centres (`m × d` row-major, `d` = `lengths.len()`),
    /// weights, length scales and offset; an error naming the first inconsistency.
    pub(super) fn new(
        centres: Vec<f64>,
        weights: Vec<f64>,
        lengths: Vec<f64>,
        offset: f64,
    ) -> Result<Self, String> {
        let d = lengths.len();
        if d == 0 {
            return Err("the kernel has no length scales".into());
        }
        if centres.len() != weights.len() * d {
            return Err(format!(
                "{} centre coordinates for {} weights in dimension {d}",
                centres.len(),
                weights.len()
            ));
        }
        if let Some(l) = lengths.iter().find(|l| !(l.is_finite() && **l > 0.0)) {
            return Err(format!("a length scale is {l}, not finite and positive"));
        }
        let finite = |x: &[f64]| x.iter().all(|v| v.is_finite());
        if !(finite(&centres) && finite(&weights) && offset.is_finite()) {
            return Err("the centres, weights or offset are not all finite".into());
        }
        Ok(Self {
            inverse_squares: inverse_squares(&lengths),
            centres,
            weights,
            lengths,
            offset,
            quadratic: None,
            slopes: None,
        })
    }

    /// This mean with the slopes `slopes` (`m × d`, row-major) added to its centres' weights;
    /// an error when they do not match the centres or are not finite.
    pub(super) fn with_slopes(self, slopes: Vec<f64>) -> Result<Self, String> {
        if slopes.len() != self.centres.len() {
            return Err(format!(
                "{} slopes for {} centre coordinates",
                slopes.len(),
                self.centres.len()
            ));
        }
        if !slopes.iter().all(|w| w.is_finite()) {
            return Err("the slopes are not all finite".into());
        }
        Ok(Self {
            slopes: Some(slopes),
            ..self
        })
    }

    /// The slopes of a GP fitted to gradients too (`m × d`, row-major), if it was.
    pub fn slopes(&self) -> Option<&[f64]> {
        self.slopes.as_deref()
    }

    /// This mean plus the quadratic `quadratic` (a GP fitted to the residuals of it).
    pub(super) fn with_quadratic(self, quadratic: Option<Quadratic>) -> Self {
        Self { quadratic, ..self }
    }

    /// The quadratic mean function, if there is one.
    pub fn quadratic(&self) -> Option<&Quadratic> {
        self.quadratic.as_ref()
    }

    /// The dimension `d`.
    pub fn dim(&self) -> usize {
        self.lengths.len()
    }

    /// The length scales `ℓₖ`.
    pub fn lengths(&self) -> &[f64] {
        &self.lengths
    }

    /// The number of centres `m`.
    pub fn centres(&self) -> usize {
        self.weights.len()
    }

    /// The fields as [`Predictor::new`] takes them: centres, weights, lengths, offset.
    pub(super) fn parts(&self) -> (&[f64], &[f64], &[f64], f64) {
        (&self.centres, &self.weights, &self.lengths, self.offset)
    }

    /// `Ũ(x)`.
    pub fn value(&self, x: &[f64]) -> f64 {
        if self.slopes.is_some() {
            return self.value_and_gradient(x, &mut vec![0.0; self.dim()]);
        }
        let d = self.dim();
        let mut sum = self.offset;
        for (z, v) in self.centres.chunks_exact(d).zip(&self.weights) {
            sum += v * correlation(x, z, &self.inverse_squares);
        }
        match &self.quadratic {
            Some(q) => sum + q.add_value_and_gradient(x, None),
            None => sum,
        }
    }

    /// Writes `∇Ũ(x)` into `grad` and returns `Ũ(x)`.
    pub fn value_and_gradient(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let d = self.dim();
        grad.fill(0.0);
        let mut sum = self.offset;
        if let Some(slopes) = &self.slopes {
            sum += self.add_sloped(x, slopes, grad);
        } else {
            for (z, v) in self.centres.chunks_exact(d).zip(&self.weights) {
                let term = v * correlation(x, z, &self.inverse_squares);
                sum += term;
                for (((g, xk), zk), i) in grad.iter_mut().zip(x).zip(z).zip(&self.inverse_squares) {
                    *g -= term * (xk - zk) * i;
                }
            }
        }
        match &self.quadratic {
            Some(q) => sum + q.add_value_and_gradient(x, Some(grad)),
            None => sum,
        }
    }

    /// `Σᵢ eᵢ (vᵢ + wᵢ·(x − zᵢ))` with `eᵢ` the correlation of `x` with centre `i`; adds its
    /// gradient `Σᵢ eᵢ (wᵢ − (vᵢ + wᵢ·(x − zᵢ)) (x − zᵢ) ⊙ ℓ⁻²)` to `grad`.
    fn add_sloped(&self, x: &[f64], slopes: &[f64], grad: &mut [f64]) -> f64 {
        let d = self.dim();
        let mut sum = 0.0;
        let rows = self.centres.chunks_exact(d).zip(slopes.chunks_exact(d));
        for ((z, w), v) in rows.zip(&self.weights) {
            let e = correlation(x, z, &self.inverse_squares);
            let weight = v + w
                .iter()
                .zip(x.iter().zip(z))
                .map(|(w, (a, b))| w * (a - b))
                .sum::<f64>();
            sum += e * weight;
            for k in 0..d {
                grad[k] += e * (w[k] - weight * (x[k] - z[k]) * self.inverse_squares[k]);
            }
        }
        sum
    }
}
