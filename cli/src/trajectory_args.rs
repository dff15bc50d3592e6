//! The step-size and trajectory options shared by `shmc sample` and `shmc train`.

use clap::Args;
use shmc::core::Steps;

use shmc::sampler::StepSize;

/// How long leapfrog trajectories are and how their step size is chosen.
#[derive(Debug, Args)]
#[command(next_help_heading = "Step size and trajectory")]
pub struct TrajectoryArgs {
    /// Fixed leapfrog step size; turns step-size and metric adaptation off.
    #[arg(long, value_name = "EPS")]
    pub step_size: Option<f64>,
    /// Maximum leapfrog steps per trajectory; each iteration draws its number of steps
    /// uniformly from 1..=STEPS (mean (STEPS+1)/2) unless --fixed-steps is given.
    #[arg(long, default_value_t = 20)]
    pub steps: u32,
    /// Draw the number of steps uniformly from 1..=STEPS each iteration, as the papers do (the
    /// default; accepted so the papers' command lines run as written).
    #[arg(long, conflicts_with = "fixed_steps")]
    pub jitter_steps: bool,
    /// Take exactly STEPS steps every iteration. A fixed trajectory length can resonate with
    /// the posterior's scale (nearly periodic orbits) and mix badly.
    #[arg(long)]
    pub fixed_steps: bool,
    /// Target acceptance of the step-size adaptation.
    #[arg(long, default_value_t = 0.8)]
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

    /// The trajectory length.
    pub fn steps(&self) -> Steps {
        if self.fixed_steps {
            Steps::Fixed(self.steps)
        } else {
            Steps::Jittered(self.steps)
        }
    }
}
