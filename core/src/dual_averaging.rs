//! Nesterov dual averaging of the log step size towards a target acceptance rate, as in Stan
//! (Hoffman & Gelman 2014, section 3.2). Scalar state only, so warmup runs on a device too.

use crate::error::{Error, check_positive};

/// The dual-averaging state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DualAveraging {
    /// The acceptance rate aimed at (Stan: 0.8).
    pub target: f64,
    /// Shrinkage towards `μ` (Stan: 0.05).
    pub gamma: f64,
    /// Iteration offset that damps early steps (Stan: 10).
    pub t0: f64,
    /// Decay of the averaging weights (Stan: 0.75).
    pub kappa: f64,
    mu: f64,
    log_step: f64,
    log_step_avg: f64,
    error_avg: f64,
    count: u64,
}

impl DualAveraging {
    /// Starts at `step_size` with Stan's constants, shrinking towards `log(10 ε₀)`.
    pub fn new(step_size: f64, target: f64) -> Result<Self, Error> {
        check_positive(step_size, "initial step size")?;
        if !(target > 0.0 && target < 1.0) {
            return Err(Error::NotPositive("target acceptance in (0, 1)"));
        }
        let mut state = Self {
            target,
            gamma: 0.05,
            t0: 10.0,
            kappa: 0.75,
            mu: 0.0,
            log_step: 0.0,
            log_step_avg: 0.0,
            error_avg: 0.0,
            count: 0,
        };
        state.restart(step_size);
        Ok(state)
    }

    /// Forgets the history and starts again from `step_size` (Stan does so after each
    /// mass-matrix window).
    pub fn restart(&mut self, step_size: f64) {
        self.mu = libm::log(10.0 * step_size);
        self.log_step = libm::log(step_size);
        self.log_step_avg = 0.0;
        self.error_avg = 0.0;
        self.count = 0;
    }

    /// Feeds one transition's acceptance statistic and returns the next step size to use.
    pub fn update(&mut self, accept_stat: f64) -> f64 {
        let accept = if accept_stat.is_finite() {
            accept_stat.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.count += 1;
        let t = self.count as f64;
        let eta = 1.0 / (t + self.t0);
        self.error_avg = (1.0 - eta) * self.error_avg + eta * (self.target - accept);
        self.log_step = self.mu - libm::sqrt(t) / self.gamma * self.error_avg;
        let weight = libm::pow(t, -self.kappa);
        self.log_step_avg = weight * self.log_step + (1.0 - weight) * self.log_step_avg;
        libm::exp(self.log_step)
    }

    /// The step size to use once adaptation ends: the weighted average of the iterates.
    pub fn final_step_size(&self) -> f64 {
        if self.count == 0 {
            libm::exp(self.log_step)
        } else {
            libm::exp(self.log_step_avg)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy sampler whose acceptance is exp(−ε): dual averaging should find ε = −ln(target).
    #[test]
    fn converges_to_the_step_size_that_hits_the_target() {
        let mut da = DualAveraging::new(1.0, 0.8).unwrap();
        let mut eps = 1.0;
        for _ in 0..5000 {
            eps = da.update(f64::exp(-eps));
        }
        let expected = -(0.8f64).ln();
        assert!(
            (da.final_step_size() - expected).abs() < 0.01 * expected,
            "{}",
            da.final_step_size()
        );
        assert!(eps > 0.0);
    }

    #[test]
    fn rejects_bad_settings() {
        assert!(DualAveraging::new(0.0, 0.8).is_err());
        assert!(DualAveraging::new(0.1, 1.0).is_err());
    }
}
