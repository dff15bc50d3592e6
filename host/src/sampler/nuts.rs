//! NUTS, Stan's default sampler and the one users compare against, as one chain of the driver:
//! nuts-rs (the Rust crate nutpie wraps) transitions and adapts, and this module puts its draws
//! through the same outlets as every other method, so files, progress, interruption, failed
//! chains and the target ESS work unchanged. `shmc sample --method nuts` and `shmc bench`'s
//! NUTS rows both run it.
//!
//! Settings: Stan's target acceptance (0.8 by default, [`SampleConfig::step_size`]), maximum
//! tree depth ([`NutsSettings::max_depth`], 10) and step size fixed after warmup; the rest are
//! nuts-rs's defaults, among them its warmup schedule, which adapts a diagonal mass matrix from
//! the draws *and* their gradients (nutpie's estimator) rather than from the draws alone in
//! Stan's windows. With [`MassMatrix::LowRank`] it adapts nutpie's low-rank metric instead: the
//! diagonal, corrected along the few directions where the draws' and gradients' covariances
//! disagree most (Seyboldt, Carlson and Carpenter 2026), which a correlated posterior needs. It
//! calls the model's own fused `U`/`∇U`.
//!
//! The sampler columns are filled as CmdStan fills them: `accept_stat__` is the mean acceptance
//! over the tree, `treedepth__` and `n_leapfrog__` its doublings and steps, `energy__` the
//! Hamiltonian `U + ½ vᵀ M⁻¹ v` at the draw, and `stepsize__` the step size the transition
//! integrated with. nuts-rs finds its first step size inside its first transition without
//! reporting it, so the first warmup row (written only when warmup is saved) holds NaN there.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use nuts_rs::{
    Chain, CpuLogpFunc, CpuMath, CpuMathError, DiagNutsSettings, LogpError, LowRankNutsSettings,
    Settings,
};
use shmc_core::Potential;

use super::chain::start::initial_state;
use super::chain::{Leave, Outlets, tree_depth};
use super::config::{MassMatrix, SampleConfig};
use super::method::NutsSettings;
use super::method::StepSize;
use super::target_ess::Verdict;
use super::{ChainResult, Evaluations, InverseMetric, Phase, PhaseReport, SAMPLER_COLUMNS};
use crate::random::chain_rng;
use crate::{Error, Model, Result};

/// `log p = −U` and its gradient, as nuts-rs asks for them.
struct LogDensity<'a> {
    potential: &'a (dyn Potential + Sync),
}

/// A non-finite density: nuts-rs ends the trajectory there as divergent and goes on (a
/// recoverable error), as HMC rejects such a proposal.
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
            self.potential.dim() as u64,
        )])
    }
}

impl CpuLogpFunc for LogDensity<'_> {
    type LogpError = NotFinite;
    type FlowParameters = ();
    type ExpandedVector = Vec<f64>;

    fn dim(&self) -> usize {
        self.potential.dim()
    }

    fn logp(
        &mut self,
        position: &[f64],
        gradient: &mut [f64],
    ) -> std::result::Result<f64, NotFinite> {
        let u = self.potential.value_and_gradient(position, gradient);
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

/// nuts-rs's settings for a run of `config` with `nuts`: Stan's target acceptance and tree
/// depth, and the adapted mass matrix reported with every change of it (for the CSV's
/// adaptation block), for either metric's adaptation.
macro_rules! nuts_rs_settings {
    ($kind:ty, $config:expr, $nuts:expr) => {{
        let (config, nuts): (&SampleConfig, &NutsSettings) = ($config, $nuts);
        let mut settings = <$kind>::default();
        settings.num_tune = config.warmup as u64;
        settings.num_draws = config.draws as u64;
        settings.maxdepth = nuts.max_depth;
        settings.max_energy_error = config.max_energy_error;
        let step_size = &mut settings.adapt_options.step_size_settings;
        if let StepSize::Adapt { target } = config.step_size {
            step_size.target_accept = target;
        }
        // Stan's step size is fixed once warmup ends (nutpie jitters it by ±10 % per draw).
        step_size.jitter = None;
        settings.adapt_options.mass_matrix_options.store_mass_matrix = true;
        settings
    }};
}

/// The nuts-rs chains this module drives: the diagonal metric's and the low-rank one's.
type DiagChain<'a> = <DiagNutsSettings as Settings>::Chain<CpuMath<LogDensity<'a>>>;
type LowRankChain<'a> = <LowRankNutsSettings as Settings>::Chain<CpuMath<LogDensity<'a>>>;

/// A nuts-rs chain of either metric.
enum NutsRsChain<'a> {
    Diag(Box<DiagChain<'a>>),
    LowRank(Box<LowRankChain<'a>>),
}

/// What a transition of nuts-rs reports that a row and the counts need.
struct Transition {
    position: Box<[f64]>,
    logp: f64,
    mean_tree_accept: f64,
    kinetic_energy: f64,
    /// The metric's standard deviations `σ`, when they changed in this transition.
    std_devs: Option<Vec<f64>>,
    progress: nuts_rs::Progress,
}

impl<'a> NutsRsChain<'a> {
    /// A chain for `config`'s metric (the low-rank one, or nuts-rs's diagonal), started at
    /// `start`.
    fn new(
        config: &SampleConfig,
        nuts: &NutsSettings,
        number: usize,
        potential: &'a (dyn Potential + Sync),
        start: &[f64],
        rng: &mut rand_pcg::Pcg64,
    ) -> anyhow::Result<Self> {
        let math = CpuMath::new(LogDensity { potential });
        let mut chain = if config.metric == MassMatrix::LowRank {
            let settings = nuts_rs_settings!(LowRankNutsSettings, config, nuts);
            Self::LowRank(Box::new(settings.new_chain(number as u64, math, rng)?))
        } else {
            let settings = nuts_rs_settings!(DiagNutsSettings, config, nuts);
            Self::Diag(Box::new(settings.new_chain(number as u64, math, rng)?))
        };
        match &mut chain {
            Self::Diag(c) => c.set_position(start)?,
            Self::LowRank(c) => c.set_position(start)?,
        }
        Ok(chain)
    }

    /// One transition. The two metrics' statistics differ in type only where the metric is
    /// reported (the diagonal's `mass_matrix_inv` holds `σ`, as the low-rank's `stds` do).
    fn draw(&mut self) -> anyhow::Result<Transition> {
        macro_rules! transition {
            ($chain:expr, $std_devs:ident) => {{
                let (position, _, stats, progress) = $chain.expanded_draw()?;
                Transition {
                    position,
                    logp: stats.point.logp,
                    mean_tree_accept: stats.adapt.step_size.mean_tree_accept,
                    kinetic_energy: stats.point.kinetic_energy,
                    std_devs: stats.hamiltonian.transformation.$std_devs,
                    progress,
                }
            }};
        }
        Ok(match self {
            Self::Diag(c) => transition!(c, mass_matrix_inv),
            Self::LowRank(c) => transition!(c, mass_matrix_stds),
        })
    }
}

/// A nuts-rs error of chain `number`, as the driver reports a failed chain, in one line: the
/// message's first paragraph. nuts-rs formats an error it wraps with `{:?}`, and an anyhow
/// error's `{:?}` appends the backtrace captured with it ("\n\nStack backtrace:\n   0: ..."):
/// that is for a debugger, not for the line a user reads.
fn failed(number: usize, error: anyhow::Error) -> Error {
    let text = error.to_string();
    let first = text.split("\n\n").next().unwrap_or_default();
    let message = first.split_whitespace().collect::<Vec<_>>().join(" ");
    Error::invalid(format!("chain {number}: NUTS: {message}"))
}

/// Runs chain `number` (1-based) of NUTS with `nuts` on `model` to completion, until the run's
/// target ESS is reached, or until it is interrupted. The start is drawn as HMC's is, from the
/// chain's own stream, which then seeds nuts-rs's generator: the same seed gives the same
/// draws.
pub(super) fn run_chain<M: Model + ?Sized>(
    model: &M,
    config: &SampleConfig,
    nuts: &NutsSettings,
    number: usize,
    outlets: Outlets<'_>,
) -> Result<ChainResult> {
    let potential: &(dyn Potential + Sync) = &model;
    let mut rng = chain_rng(config.seed, number);
    let start = initial_state(potential, &config.init, number, &mut rng)?;
    let mut sampler = NutsRsChain::new(
        config,
        nuts,
        number,
        potential,
        start.position.as_slice(),
        &mut rng,
    )
    .map_err(|e| failed(number, e))?;
    let names = model.parameter_names().len();
    let _leave = Leave(outlets.monitor, number);
    let mut chain = NutsChain {
        result: ChainResult::new(number, names, config.draws),
        row: Vec::with_capacity(SAMPLER_COLUMNS.len() + names),
        step_size: f64::NAN,
        std_devs: vec![1.0; model.dim()],
        done: 0,
        outlets,
    };

    let clock = (chain.done, Instant::now());
    while chain.done < config.warmup && chain.iterate(&mut sampler, model, config)? {}
    chain.result.warmup_seconds = chain.lap(Phase::ExactWarmup, clock);
    if chain.done == config.warmup {
        let inv_mass = chain.inv_mass();
        chain
            .outlets
            .sink
            .adaptation(chain.step_size, &InverseMetric::Diagonal(inv_mass))?;
    }

    let clock = (chain.done, Instant::now());
    while chain.done < config.warmup + config.draws && chain.iterate(&mut sampler, model, config)? {
        if let Some(monitor) = chain.outlets.monitor
            && chain.result.kept().is_multiple_of(monitor.every())
            && monitor.block_done(number, &chain.result, chain.outlets.interrupt) == Verdict::Stop
        {
            break;
        }
    }
    chain.result.sampling_seconds = chain.lap(Phase::Sampling, clock);
    chain.result.step_size = chain.step_size;
    chain.result.inv_mass = chain.inv_mass();
    chain.outlets.sink.finish(&chain.result)?;
    Ok(chain.result)
}

/// A NUTS chain's bookkeeping between transitions.
struct NutsChain<'o> {
    result: ChainResult,
    row: Vec<f64>,
    /// The step size the next transition integrates with (NaN before the first: nuts-rs finds
    /// it inside that transition and does not report it).
    step_size: f64,
    /// The adapted metric's standard deviations `σ`: nuts-rs samples `(q − μ)/σ` under the
    /// identity metric, which is HMC on `q` with inverse mass matrix `diag(σ²)`.
    std_devs: Vec<f64>,
    /// Iterations done, warmup included.
    done: usize,
    outlets: Outlets<'o>,
}

impl NutsChain<'_> {
    /// One transition (warmup while fewer than `config.warmup` are done), counted, written when
    /// kept (or when warmup is saved) and reported; `false` once the run is interrupted.
    fn iterate<M: Model + ?Sized>(
        &mut self,
        sampler: &mut NutsRsChain<'_>,
        model: &M,
        config: &SampleConfig,
    ) -> Result<bool> {
        if self.outlets.interrupt.load(Ordering::Relaxed) {
            self.result.interrupted = true;
            return Ok(false);
        }
        let warmup = self.done < config.warmup;
        let Transition {
            position,
            logp,
            mean_tree_accept,
            kinetic_energy,
            std_devs,
            progress,
        } = sampler.draw().map_err(|e| failed(self.result.chain, e))?;
        if let Some(std_devs) = std_devs {
            self.std_devs = std_devs;
        }
        let counts: &mut Evaluations = if warmup {
            &mut self.result.warmup_evaluations
        } else {
            &mut self.result.sampling_evaluations
        };
        counts.iterations += 1;
        counts.exact_gradients += progress.num_gradients;
        if warmup {
            self.result.warmup_divergences += usize::from(progress.diverging);
        }
        if !warmup || config.save_warmup {
            self.row.clear();
            self.row.extend_from_slice(&[
                logp,
                mean_tree_accept,
                self.step_size,
                f64::from(tree_depth(progress.num_steps)),
                progress.num_steps as f64,
                f64::from(u8::from(progress.diverging)),
                // Stan's energy: nuts-rs's own subtracts log det M / 2, a constant per metric.
                kinetic_energy - logp,
            ]);
            model.write_parameters(&position, &mut self.row);
            self.outlets.sink.draw(&self.row)?;
            if !warmup {
                self.result.record(&self.row);
            }
        }
        // nuts-rs adapts after the transition: this is the next one's step size.
        self.step_size = progress.step_size;
        self.done += 1;
        (self.outlets.progress)(self.result.chain, self.done);
        Ok(true)
    }

    /// The inverse mass matrix's diagonal.
    fn inv_mass(&self) -> Vec<f64> {
        self.std_devs.iter().map(|s| s * s).collect()
    }

    /// Records the phase that began at `clock` (iterations done, time) and returns its seconds.
    fn lap(&mut self, phase: Phase, (done, start): (usize, Instant)) -> f64 {
        let seconds = start.elapsed().as_secs_f64();
        self.result.phases.push(PhaseReport {
            phase,
            iterations: self.done - done,
            seconds,
        });
        seconds
    }
}

#[cfg(test)]
mod tests {
    use super::failed;

    /// nuts-rs's text of a refused start, with the backtrace its `{:?}` appends.
    #[test]
    fn a_nuts_rs_error_is_one_line_without_its_backtrace() {
        let error = anyhow::anyhow!(
            "Could not initialize state because of bad initial gradient: Invalid initial \
             point\n\nStack backtrace:\n   0: <unknown>\n  10: start_thread\n             at \
             ./nptl/pthread_create.c:442:8"
        );
        assert_eq!(
            failed(2, error).to_string(),
            "chain 2: NUTS: Could not initialize state because of bad initial gradient: Invalid \
             initial point"
        );
    }
}
