//! Warmup's adaptation of the step size (dual averaging) and the diagonal metric (Stan's
//! windows), fed by whichever dynamics proposes: the exact leapfrog in the exact phase, the
//! surrogate's in the surrogate phase.

use shmc_core::{DiagonalMetric, DualAveraging, Dyn};

use crate::Result;
use crate::sampler::config::{MassMatrix, SampleConfig};
use crate::sampler::method::StepSize;
use crate::sampler::trajectory::SurrogateSteps;
use crate::sampler::warmup::{VarianceEstimator, WindowSchedule};

/// What an iteration's adaptation changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changed {
    /// A metric window ended: the metric is new and the step size must be found again for it
    /// (Stan's heuristic, then [`Adaptation::restart`]).
    pub metric: bool,
}

/// The least acceptance the step size is adapted to while a surrogate proposes trajectories
/// whose lengths are chosen for the step size ([`SurrogateSteps::Auto`]). Exact HMC's target
/// (Stan's 0.8) trades leapfrog steps, each an exact gradient, against rejections; under a
/// surrogate every proposal costs one exact `U` however many (nearly free) steps it takes, so
/// a rejection wastes the iteration's whole cost and a smaller step costs almost nothing, as
/// long as the trajectory takes more of them (with a fixed number of steps a smaller step only
/// shortens it: on the banana, grid HMC's 1..=20 steps at the higher target left its chains
/// in parts of the posterior). On the 50-D logistic simulation with an anchored surrogate,
/// raising it from 0.8 to 0.95 raised the tail ESS per draw from 0.54 to 0.71 for 5–6 surrogate
/// steps per iteration instead of 3.
pub const SURROGATE_TARGET_ACCEPT: f64 = 0.95;

/// The shortest warmup that adapts a diagonal on top of the Laplace mass matrix: its last
/// window then has at least 200 draws (Stan's schedule).
pub const MIN_WARMUP_ON_LAPLACE: usize = 500;

/// Step-size and metric adaptation through one chain's warmup.
pub struct Adaptation {
    dual: DualAveraging,
    schedule: WindowSchedule,
    variance: VarianceEstimator,
    warmup: usize,
    /// The acceptance the step size is adapted to on exact trajectories (the run's target).
    target: f64,
    /// The acceptance it is adapted to on surrogate trajectories.
    surrogate_target: f64,
}

impl Adaptation {
    /// The adaptation `config` asks for, from `step_size`, on surrogate trajectories if
    /// `proposing` (see [`Adaptation::propose_with`]); `None` for a fixed step size.
    pub fn new(
        config: &SampleConfig,
        step_size: f64,
        dim: usize,
        proposing: bool,
    ) -> Result<Option<Self>> {
        let StepSize::Adapt { target } = config.step_size else {
            return Ok(None);
        };
        // The Laplace metric is already an estimate of the posterior's covariance, and a better
        // one than a short warmup's: on the 50-D logistic simulation the diagonal a
        // 150-iteration warmup estimated on top of it ranged from 0.35 to 1.23 around the true
        // 1, spreading the frequencies the trajectories had to cover (tail ESS per draw 0.42
        // against 0.54 without it). A long warmup's estimate corrects where the approximation
        // is poor (the banana's, taken at the saddle between its arms).
        let adapts_diagonal = config.adapt_mass
            && (config.mass_matrix() == MassMatrix::Diagonal
                || config.warmup >= MIN_WARMUP_ON_LAPLACE);
        let windows = if adapts_diagonal { config.warmup } else { 0 };
        let lengths_follow_step_size = config
            .method
            .surrogate()
            .is_some_and(|s| s.trajectory == SurrogateSteps::Auto);
        let surrogate_target = if lengths_follow_step_size {
            target.max(SURROGATE_TARGET_ACCEPT)
        } else {
            target
        };
        let mut adaptation = Self {
            dual: DualAveraging::new(step_size, target)?,
            schedule: WindowSchedule::new(windows),
            variance: VarianceEstimator::new(dim),
            warmup: config.warmup,
            target,
            surrogate_target,
        };
        if proposing {
            adaptation.propose_with(true, step_size)?;
        }
        Ok(Some(adaptation))
    }

    /// Starts the step size's averaging again from `step_size` for what proposes now: the
    /// surrogate (`surrogate`), adapted to at least [`SURROGATE_TARGET_ACCEPT`] of its own
    /// Hamiltonian when its trajectory lengths follow the step size, or exact trajectories, to
    /// the run's target.
    pub fn propose_with(&mut self, surrogate: bool, step_size: f64) -> Result<()> {
        let target = if surrogate {
            self.surrogate_target
        } else {
            self.target
        };
        self.dual = DualAveraging::new(step_size, target)?;
        Ok(())
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
