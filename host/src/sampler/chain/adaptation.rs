//! Warmup's adaptation of the step size (dual averaging) and the diagonal metric (Stan's
//! windows), fed by whichever dynamics proposes: the exact leapfrog in the exact phase, the
//! surrogate's in the surrogate phase.

use shmc_core::{DiagonalMetric, DualAveraging, Dyn};

use crate::Result;
use crate::sampler::config::SampleConfig;
use crate::sampler::method::StepSize;
use crate::sampler::warmup::{VarianceEstimator, WindowSchedule};

/// What an iteration's adaptation changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changed {
    /// A metric window ended: the metric is new and the step size must be found again for it
    /// (Stan's heuristic, then [`Adaptation::restart`]).
    pub metric: bool,
}

/// Step-size and metric adaptation through one chain's warmup.
pub struct Adaptation {
    dual: DualAveraging,
    schedule: WindowSchedule,
    variance: VarianceEstimator,
    warmup: usize,
}

impl Adaptation {
    /// The adaptation `config` asks for, from `step_size`; `None` for a fixed step size.
    pub fn new(config: &SampleConfig, step_size: f64, dim: usize) -> Result<Option<Self>> {
        let StepSize::Adapt { target } = config.step_size else {
            return Ok(None);
        };
        let windows = if config.adapt_mass { config.warmup } else { 0 };
        Ok(Some(Self {
            dual: DualAveraging::new(step_size, target)?,
            schedule: WindowSchedule::new(windows),
            variance: VarianceEstimator::new(dim),
            warmup: config.warmup,
        }))
    }

    /// Learns from warmup iteration `i`, which ended at `position` with acceptance statistic
    /// `accept_stat`: the next step size goes into `step_size` (the final one after the last
    /// warmup iteration), a new metric into `metric` when a window ends.
    pub fn update(
        &mut self,
        i: usize,
        accept_stat: f64,
        position: &[f64],
        metric: &mut DiagonalMetric<Dyn>,
        step_size: &mut f64,
    ) -> Result<Changed> {
        *step_size = self.dual.update(accept_stat);
        if self.schedule.in_slow_window(i) {
            self.variance.add(position);
        }
        let mut changed = Changed::default();
        if self.schedule.window_ends_at(i) {
            metric.set_inv_mass(&self.variance.regularized_variance())?;
            self.variance.reset();
            changed.metric = true;
        }
        if i + 1 == self.warmup {
            *step_size = self.dual.final_step_size();
        }
        Ok(changed)
    }

    /// Starts the step size's averaging again from `step_size` (after a new metric, or when
    /// the dynamics that proposes changes).
    pub fn restart(&mut self, step_size: f64) {
        self.dual.restart(step_size);
    }
}
