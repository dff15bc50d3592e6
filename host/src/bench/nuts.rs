//! The general-purpose sampler the all-in row is measured against, in the same process: NUTS
//! from `nuts-rs`, the Rust crate that nutpie wraps, with nutpie's protocol (diagonal mass matrix
//! adapted from gradients, 4 chains × (1000 warmup + 5000 draws) on the machine's cores).
//!
//! It calls the model's own fused `U`/`∇U` kernel, so it is nutpie's sampler with this project's
//! gradient, a harder baseline than nutpie itself, which evaluates a compiled PyMC graph (on the
//! LR simulation that gradient costs ~3× ours). Run on the same machine in the same process, its
//! ratio to the all-in row does not depend on which machine the bench runs on.

use std::collections::HashMap;
use std::time::Instant;

use nuts_rs::{Chain, CpuLogpFunc, CpuMath, CpuMathError, DiagNutsSettings, LogpError, Settings};
use rayon::prelude::*;
use shmc_core::random::uniform;

use crate::random::chain_rng;
use crate::{Error, Model, Result};

/// The first random stream of the NUTS chains' own generators.
const NUTS_STREAMS: usize = 0x4e_5554;

/// What a NUTS run left: each chain's kept draws by parameter, and what they cost.
#[derive(Clone, Debug)]
pub struct NutsRun {
    /// `draws[chain][parameter]`: the kept draws.
    pub draws: Vec<Vec<Vec<f64>>>,
    /// Wall time of the whole run, warmup included.
    pub wall_seconds: f64,
    /// Gradient evaluations per kept draw, warmup included.
    pub gradients_per_draw: f64,
    /// Divergent kept draws over all chains.
    pub divergences: usize,
    /// `finished[chain][i]`: seconds from the start until kept draw `i` was made, so that the
    /// time to any number of draws can be read off after the run.
    pub finished: Vec<Vec<f64>>,
}

impl NutsRun {
    /// Each chain's kept draws of parameter `p`, in chain order (as [`crate::sampler::Run`]).
    pub fn series(&self, p: usize) -> Vec<&[f64]> {
        self.draws.iter().map(|c| c[p].as_slice()).collect()
    }
}

/// `log p = −U` and its gradient, for nuts-rs.
struct LogDensity<'a> {
    model: &'a dyn Model,
}

/// A non-finite density: NUTS rejects that point and goes on (a recoverable error).
#[derive(Debug, thiserror::Error)]
#[error("the potential is not finite")]
struct NotFinite;

impl LogpError for NotFinite {
    fn is_recoverable(&self) -> bool {
        true
    }
}

impl nuts_rs::HasDims for LogDensity<'_> {
    fn dim_sizes(&self) -> HashMap<String, u64> {
        HashMap::from([(
            "unconstrained_parameter".to_string(),
            self.model.dim() as u64,
        )])
    }
}

impl CpuLogpFunc for LogDensity<'_> {
    type LogpError = NotFinite;
    type FlowParameters = ();
    type ExpandedVector = Vec<f64>;

    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn logp(
        &mut self,
        position: &[f64],
        gradient: &mut [f64],
    ) -> std::result::Result<f64, NotFinite> {
        let u = self.model.value_and_gradient(position, gradient);
        if !u.is_finite() || gradient.iter().any(|g| !g.is_finite()) {
            return Err(NotFinite);
        }
        gradient.iter_mut().for_each(|g| *g = -*g);
        Ok(-u)
    }

    fn expand_vector<R: rand::Rng + ?Sized>(
        &mut self,
        _rng: &mut R,
        array: &[f64],
    ) -> std::result::Result<Vec<f64>, CpuMathError> {
        Ok(array.to_vec())
    }
}

/// One NUTS chain's kept draws (per parameter), gradients, divergences and the seconds at
/// which its draws finished.
type ChainDraws = (Vec<Vec<f64>>, u64, usize, Vec<f64>);

/// Runs `chains` NUTS chains of `warmup + draws` iterations on `model` in parallel (rayon's pool:
/// one thread per core), each from a uniform draw on `(−2, 2)` per coordinate as Stan starts.
pub fn run_nuts(
    model: &dyn Model,
    chains: usize,
    warmup: usize,
    draws: usize,
    seed: u64,
) -> Result<NutsRun> {
    let dim = model.dim();
    let settings = DiagNutsSettings {
        num_tune: warmup as u64,
        num_draws: draws as u64,
        num_chains: chains,
        seed,
        ..DiagNutsSettings::default()
    };
    let start = Instant::now();
    let runs = (0..chains)
        .into_par_iter()
        .map(|chain| -> Result<ChainDraws> {
            let fail = |e: anyhow::Error| Error::invalid(format!("NUTS chain {chain}: {e}"));
            // Streams apart from the chains' own (1-based) and from the start points'.
            let mut rng = chain_rng(seed, NUTS_STREAMS + chain);
            let mut sampler = settings
                .new_chain(chain as u64, CpuMath::new(LogDensity { model }), &mut rng)
                .map_err(fail)?;
            let mut init = chain_rng(seed, chain + 1);
            let q: Vec<f64> = (0..dim).map(|_| 4.0 * uniform(&mut init) - 2.0).collect();
            sampler.set_position(&q).map_err(fail)?;
            let mut kept = vec![Vec::with_capacity(draws); dim];
            let mut finished = Vec::with_capacity(draws);
            let (mut gradients, mut divergences) = (0, 0);
            for _ in 0..warmup + draws {
                let (position, progress) = sampler.draw().map_err(fail)?;
                gradients += progress.num_gradients;
                if !progress.tuning {
                    divergences += usize::from(progress.diverging);
                    for (column, x) in kept.iter_mut().zip(position.iter()) {
                        column.push(*x);
                    }
                    finished.push(start.elapsed().as_secs_f64());
                }
            }
            Ok((kept, gradients, divergences, finished))
        })
        .collect::<Result<Vec<_>>>()?;
    let wall_seconds = start.elapsed().as_secs_f64();
    let gradients: u64 = runs.iter().map(|r| r.1).sum();
    Ok(NutsRun {
        gradients_per_draw: gradients as f64 / (chains * (warmup + draws)) as f64,
        divergences: runs.iter().map(|r| r.2).sum(),
        finished: runs.iter().map(|r| r.3.clone()).collect(),
        draws: runs.into_iter().map(|r| r.0).collect(),
        wall_seconds,
    })
}
