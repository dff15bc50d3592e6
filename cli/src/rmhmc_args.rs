//! The options of RMHMC's generalized leapfrog (`--method rmhmc` and `rns-rmhmc`).

use clap::Args;
use shmc::core::Steps;

use super::trajectory_args::TrajectoryArgs;
use shmc::riemannian::GeneralizedLeapfrog;
use shmc::sampler::{RmhmcSettings, StepSize};

/// How RMHMC's trajectories are integrated.
#[derive(Debug, Args)]
#[command(next_help_heading = "RMHMC (rmhmc, rns-rmhmc)")]
pub struct RmhmcArgs {
    /// rmhmc, rns-rmhmc: fixed step size of the generalized leapfrog (the papers': LR-sim 0.54,
    /// Bank 0.4, a9a 0.5, PDE 0.8). Default: rmhmc takes --step-size; without either, it is
    /// adapted by dual averaging on RMHMC's own acceptance during the warmup RMHMC runs in
    /// (rns-rmhmc: after --exact-warmup, by default half the warmup, on the acceptance under
    /// the surrogate's own Hamiltonian, as rns-hmc's surrogate warmup adapts).
    #[arg(long, value_name = "EPS", allow_negative_numbers = true)]
    pub rmhmc_step_size: Option<f64>,
    /// rmhmc, rns-rmhmc: maximum generalized leapfrog steps per trajectory, drawn from 1..=L
    /// unless --fixed-steps (default: --steps; rns-rmhmc's --steps are its exact warmup's).
    #[arg(long, value_name = "L")]
    pub rmhmc_steps: Option<u32>,
    /// The implicit equations of each step are iterated until successive iterates differ by
    /// less than this (largest coordinate in the metric's units: a position difference times
    /// the square root of the metric's diagonal entry, a momentum difference divided by it).
    #[arg(long, default_value_t = GeneralizedLeapfrog::DEFAULT_TOLERANCE, value_name = "TOL", allow_negative_numbers = true)]
    pub fixed_point_tolerance: f64,
    /// A fixed-point solve not converged after N iterations rejects the transition as
    /// divergent (counted as "not converged").
    #[arg(long, default_value_t = GeneralizedLeapfrog::DEFAULT_MAX_ITERATIONS, value_name = "N")]
    pub fixed_point_max_iterations: u32,
    /// Each step is integrated back; missing its start by more than this (in the metric's
    /// units, as --fixed-point-tolerance) rejects the transition as divergent (counted as "not
    /// reversible"). 0 skips the check (half the cost of a step, no guarantee the solves found
    /// the reversible solution).
    #[arg(long, default_value_t = GeneralizedLeapfrog::DEFAULT_REVERSE_TOLERANCE, value_name = "TOL", allow_negative_numbers = true)]
    pub reversibility_tolerance: f64,
    /// rns-rmhmc: SoftAbs's alpha; the network metric's eigenvalues are at least 1/alpha.
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "ALPHA",
        allow_negative_numbers = true
    )]
    pub softabs_alpha: f64,
    /// rns-rmhmc: the SoftAbs'd diagonal of the network's Hessian as the metric instead of the
    /// whole (the papers' choice for the PDE problem).
    #[arg(long)]
    pub diagonal_metric: bool,
}

impl RmhmcArgs {
    /// The settings; `exact`: for rmhmc, which falls back on --step-size and --steps, else for
    /// rns-rmhmc, whose --step-size is its exact warmup's.
    pub fn settings(&self, trajectory: &TrajectoryArgs, exact: bool) -> RmhmcSettings {
        let fixed = self
            .rmhmc_step_size
            .or(trajectory.step_size.filter(|_| exact));
        let steps = self.rmhmc_steps.unwrap_or(trajectory.max_steps());
        RmhmcSettings {
            step_size: match fixed {
                Some(eps) => StepSize::Fixed(eps),
                None => StepSize::Adapt {
                    target: trajectory.target_accept,
                },
            },
            steps: if trajectory.fixed_steps {
                Steps::Fixed(steps)
            } else {
                Steps::Jittered(steps)
            },
            tolerance: self.fixed_point_tolerance,
            max_iterations: self.fixed_point_max_iterations,
            reverse_tolerance: (self.reversibility_tolerance != 0.0)
                .then_some(self.reversibility_tolerance),
            softabs_alpha: self.softabs_alpha,
            diagonal: self.diagonal_metric,
        }
    }
}
