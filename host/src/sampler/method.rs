//! Which sampler a chain runs: exact HMC, or one of the surrogate-accelerated methods that learn
//! a cheap potential from the chain's own history and use it only to propose.
//!
//! Every method here except VHMC's approximate acceptance keeps the exact `U` in the
//! Metropolis–Hastings step, so the chain targets the exact posterior. The surrogate adapts only
//! during warmup; the kept draws come from a fixed proposal, an ordinary MCMC kernel.

use std::path::PathBuf;

use crate::train::TrainOptions;
use crate::{Error, Result};

/// The sampler.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    /// Exact HMC: the exact gradient drives every leapfrog step.
    Hmc,
    /// RNS-HMC (journal Alg. 3): exact HMC through warmup collecting the accepted states
    /// (from `train_after` on), a network trained on them at the end of warmup, then surrogate
    /// proposals with the exact MH step.
    RnsHmc(SurrogateSettings),
    /// ARNS-HMC (journal Alg. 4): the network starts after `start_after` collected states and is
    /// updated online (Greville, O(s²) per state) through the rest of warmup, the sampler
    /// swapping in the updated weights with probability `t^(−κ)`.
    ArnsHmc(SurrogateSettings),
}

/// The settings shared by the surrogate methods.
#[derive(Clone, Debug, PartialEq)]
pub struct SurrogateSettings {
    /// How the network is built and fitted.
    pub train: TrainOptions,
    /// Warmup iterations before states are collected (the papers: 1000).
    pub train_after: usize,
    /// ARNS-HMC: collected states before the first fit (the online updates follow).
    pub start_after: usize,
    /// ARNS-HMC: the surrogate starts proposing once its held-out relative gradient error is
    /// at most this (or when warmup ends); until then exact HMC goes on collecting states.
    pub start_error: f64,
    /// ARNS-HMC: the swap probability is `t^(−κ)` with this `κ ∈ (0, 1]`.
    pub adapt_rate: f64,
    /// Surrogate trajectories take this many times the exact phase's steps (surrogate leapfrog
    /// steps cost almost nothing, longer trajectories decorrelate more).
    pub steps_factor: u32,
    /// A saved surrogate to use instead of training one (`shmc train --save`).
    pub surrogate_file: Option<PathBuf>,
}

impl Default for SurrogateSettings {
    fn default() -> Self {
        Self {
            train: TrainOptions::default(),
            train_after: 1000,
            start_after: 300,
            start_error: 0.1,
            adapt_rate: 0.5,
            steps_factor: 1,
            surrogate_file: None,
        }
    }
}

impl Method {
    /// The method's name on the command line and in the output.
    pub fn name(&self) -> &'static str {
        match self {
            Method::Hmc => "hmc",
            Method::RnsHmc(_) => "rns-hmc",
            Method::ArnsHmc(_) => "arns-hmc",
        }
    }

    /// The surrogate settings, for the surrogate methods.
    pub fn surrogate(&self) -> Option<&SurrogateSettings> {
        match self {
            Method::Hmc => None,
            Method::RnsHmc(s) | Method::ArnsHmc(s) => Some(s),
        }
    }

    /// Checks the settings against the run's warmup length.
    pub fn validate(&self, warmup: usize) -> Result<()> {
        let Some(s) = self.surrogate() else {
            return Ok(());
        };
        if s.train.hidden == 0 {
            return Err(Error::invalid("--hidden must be at least 1"));
        }
        if !(s.train.ridge.is_finite() && s.train.ridge > 0.0) {
            return Err(Error::invalid("--ridge must be a finite positive number"));
        }
        if !(s.adapt_rate > 0.0 && s.adapt_rate <= 1.0) {
            return Err(Error::invalid("--adapt-rate must lie in (0, 1]"));
        }
        if s.steps_factor == 0 {
            return Err(Error::invalid(
                "--surrogate-steps-factor must be at least 1",
            ));
        }
        if s.surrogate_file.is_none() && s.train_after >= warmup {
            return Err(Error::invalid(format!(
                "--train-after ({}) must be below --warmup ({warmup}): the surrogate trains on warmup states",
                s.train_after
            )));
        }
        Ok(())
    }
}
