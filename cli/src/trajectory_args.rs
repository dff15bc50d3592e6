//! The step-size and trajectory options shared by `shmc sample` and `shmc train`.

use clap::Args;
use shmc::core::Steps;

use shmc::sampler::StepSize;
use shmc::{Error, Result};

/// The most leapfrog steps of a trajectory when --steps is not given.
const DEFAULT_STEPS: u32 = 20;

/// How long leapfrog trajectories are and how their step size is chosen.
#[derive(Debug, Args)]
#[command(next_help_heading = "Step size and trajectory")]
pub struct TrajectoryArgs {
    /// Fixed leapfrog step size; turns step-size and metric adaptation off.
    #[arg(long, value_name = "EPS", allow_negative_numbers = true)]
    pub step_size: Option<f64>,
    /// Maximum leapfrog steps per trajectory; each iteration draws its number of steps
    /// uniformly from 1..=STEPS (mean (STEPS+1)/2) unless --fixed-steps is given [default: 20].
    /// nuts and sgld refuse it: their trajectories have no length to set.
    #[arg(long, value_name = "STEPS", allow_negative_numbers = true)]
    pub steps: Option<u32>,
    /// Draw the number of steps uniformly from 1..=STEPS each iteration, as the papers do (the
    /// default; accepted so the papers' command lines run as written).
    #[arg(long, conflicts_with = "fixed_steps")]
    pub jitter_steps: bool,
    /// Take exactly STEPS steps every iteration. A fixed trajectory length can resonate with
    /// the posterior's scale (nearly periodic orbits) and mix badly.
    #[arg(long)]
    pub fixed_steps: bool,
    /// Target acceptance of the step-size adaptation.
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
    pub target_accept: f64,
}

impl TrajectoryArgs {
    /// The step-size choice: fixed with --step-size, adapted otherwise.
    pub fn step_size(&self) -> StepSize {
        match self.step_size {
            Some(eps) => StepSize::Fixed(eps),
            None => StepSize::Adapt {
                target: self.target_accept,
            },
        }
    }

    /// The most leapfrog steps of a trajectory: --steps, or its default.
    pub fn max_steps(&self) -> u32 {
        self.steps.unwrap_or(DEFAULT_STEPS)
    }

    /// The trajectory length.
    pub fn steps(&self) -> Steps {
        if self.fixed_steps {
            Steps::Fixed(self.max_steps())
        } else {
            Steps::Jittered(self.max_steps())
        }
    }

    /// An error if a trajectory length was given to `method`, whose trajectories have none to
    /// set: NUTS ends each where it turns back, SGLD takes one Langevin step. CmdStan refuses the
    /// same (its `int_time` belongs to `engine=static`, not to `engine=nuts`), and a length
    /// silently ignored would make a user believe it shaped the run.
    pub fn refuse_steps(&self, method: &str, why: &str) -> Result<()> {
        let given = match (self.steps, self.fixed_steps) {
            (Some(_), _) => "--steps",
            (None, true) => "--fixed-steps",
            (None, false) => return Ok(()),
        };
        Err(Error::invalid(format!(
            "{given} does not apply to {method}, which {why}"
        )))
    }
}
