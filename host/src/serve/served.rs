//! What `shmc serve` computes for each model name it serves: any model's log-density, and the
//! elliptic PDE model's forward map `u(θ)` at its observed points.
//!
//! A log-density is the model's own `−U` (the served value and gradient are the in-process
//! ones, bit for bit), so another sampler gets the same posterior shmc samples; the forward map
//! lets a tool put its own likelihood or prior on the PDE.

use std::sync::Arc;

use shmc_core::Potential;

use crate::models::elliptic_pde::EllipticPde;
use crate::{Error, Model, Result};

/// One served model: a map from one input vector to one output vector, with the derivative
/// actions UM-Bridge asks for. Inputs arrive checked for their lengths.
pub trait Served: Send + Sync {
    /// The length of the input vector.
    fn input_size(&self) -> usize;
    /// The length of the output vector.
    fn output_size(&self) -> usize;
    /// The output at `x`.
    fn evaluate(&self, x: &[f64]) -> Result<Vec<f64>>;
    /// `sensᵀ J` at `x`, as long as the input.
    fn gradient(&self, x: &[f64], sens: &[f64]) -> Result<Vec<f64>>;
    /// `J v` at `x`, as long as the output.
    fn apply_jacobian(&self, x: &[f64], v: &[f64]) -> Result<Vec<f64>>;
}

/// A model's log-density `−U`: one output.
pub struct LogDensity(pub Arc<dyn Model>);

impl LogDensity {
    /// `∇(−U)` at `x`, or an error where `U` or its gradient is not finite.
    fn gradient_at(&self, x: &[f64]) -> Result<Vec<f64>> {
        let mut g = vec![0.0; x.len()];
        let u = self.0.value_and_gradient(x, &mut g);
        if !(u.is_finite() && g.iter().all(|v| v.is_finite())) {
            return Err(not_finite());
        }
        Ok(g.iter().map(|v| -v).collect())
    }
}

fn not_finite() -> Error {
    Error::invalid(
        "the log-density or its gradient is not finite at this input (outside the model's \
         support, or an overflow)",
    )
}

impl Served for LogDensity {
    fn input_size(&self) -> usize {
        self.0.dim()
    }

    fn output_size(&self) -> usize {
        1
    }

    fn evaluate(&self, x: &[f64]) -> Result<Vec<f64>> {
        let u = self.0.value(x);
        if !u.is_finite() {
            return Err(not_finite());
        }
        Ok(vec![-u])
    }

    fn gradient(&self, x: &[f64], sens: &[f64]) -> Result<Vec<f64>> {
        Ok(self.gradient_at(x)?.iter().map(|g| sens[0] * g).collect())
    }

    fn apply_jacobian(&self, x: &[f64], v: &[f64]) -> Result<Vec<f64>> {
        let g = self.gradient_at(x)?;
        Ok(vec![g.iter().zip(v).map(|(a, b)| a * b).sum()])
    }
}

/// The elliptic PDE model's forward map: `u(θ)` at the observed points.
pub struct PdeForward(pub Arc<EllipticPde>);

impl Served for PdeForward {
    fn input_size(&self) -> usize {
        self.0.dim()
    }

    fn output_size(&self) -> usize {
        self.0.observation_count()
    }

    fn evaluate(&self, x: &[f64]) -> Result<Vec<f64>> {
        self.0.forward(x)
    }

    fn gradient(&self, x: &[f64], sens: &[f64]) -> Result<Vec<f64>> {
        self.0.forward_gradient(x, sens)
    }

    fn apply_jacobian(&self, x: &[f64], v: &[f64]) -> Result<Vec<f64>> {
        self.0.forward_jacobian_action(x, v)
    }
}

/// The names and maps `shmc serve` offers for the model `name`: its log-density under `name`,
/// and for the elliptic PDE model also its forward map under `name-forward`.
pub fn served_maps(
    name: &str,
    model: Arc<dyn Model>,
    pde: Option<Arc<EllipticPde>>,
) -> Vec<(String, Arc<dyn Served>)> {
    let mut maps: Vec<(String, Arc<dyn Served>)> =
        vec![(name.to_string(), Arc::new(LogDensity(model)))];
    if let Some(pde) = pde {
        maps.push((format!("{name}-forward"), Arc::new(PdeForward(pde))));
    }
    maps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::banana::Banana;

    #[test]
    fn the_log_density_is_the_models_own_minus_u() {
        let banana = Arc::new(Banana::simulate(100, 1).unwrap());
        let served = LogDensity(banana.clone());
        let x = [0.3, -0.7];
        assert_eq!(served.evaluate(&x).unwrap(), [-banana.value(&x)]);
        let mut g = [0.0; 2];
        banana.value_and_gradient(&x, &mut g);
        assert_eq!(served.gradient(&x, &[1.0]).unwrap(), [-g[0], -g[1]]);
        assert_eq!(
            served.gradient(&x, &[2.0]).unwrap(),
            [-2.0 * g[0], -2.0 * g[1]]
        );
        assert_eq!(
            served.apply_jacobian(&x, &[1.0, 0.0]).unwrap(),
            [-g[0] + -g[1] * 0.0]
        );
        // Far out U overflows: an error, not an infinite number JSON cannot carry.
        assert!(served.evaluate(&[1e200, 1e200]).is_err());
    }
}
