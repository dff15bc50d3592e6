//! What a sampling run is asked to do, validated once before any chain starts.

use std::sync::Arc;

use shmc_core::Steps;

use super::SAMPLER_COLUMNS;
use super::method::{Method, SgldSettings, StepSize};
use super::multilevel::MldaSettings;

use crate::{Error, Model, Result};

/// Where chains start.
#[derive(Clone, Debug, PartialEq)]
pub enum Init {
    /// Uniform on `(−r, r)` per unconstrained coordinate (Stan: `r = 2`), redrawn until `U` and
    /// `∇U` are finite.
    Random {
        /// The half-width `r`.
        radius: f64,
    },
    /// The same point for every chain.
    Values(Vec<f64>),
}

/// The mass matrix of HMC's kinetic energy (Stan's `metric`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MassMatrix {
    /// Diagonal, adapted in warmup from the draws' variances (Stan's `diag_e`).
    #[default]
    Diagonal,
    /// Dense: the Hessian of `U` at the MAP, the precision of the Laplace approximation
    /// ([`crate::whitening`]), found before the chains start; the chains run in its standard
    /// coordinates (Stan's `dense_e`, set from the curvature at the mode instead of from warmup
    /// draws). A warmup of 500 iterations or more adapts a diagonal on top (Stan's windows); a
    /// shorter one the step size only: a diagonal estimated from a short warmup's draws is
    /// mostly noise in many dimensions. Random initial values are drawn around the mode,
    /// `radius` Laplace standard deviations along each principal axis.
    Laplace,
    /// NUTS only: nutpie's low-rank adaptation (nuts-rs's), the diagonal corrected along the
    /// directions where the warmup draws' and gradients' covariances disagree most; for a
    /// correlated posterior, what a dense metric gives at the cost of a few directions.
    LowRank,
}

/// The settings of a sampling run.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleConfig {
    /// The number of chains (run in parallel).
    pub chains: usize,
    /// The id of the first chain (CmdStan's `id`): the chains are `chain_id..chain_id + chains`,
    /// and each id keeps its own random stream, initial values, file name and checkpoint, so
    /// that a run split into shards of a few chains (one process each, on several machines)
    /// makes exactly the chains of the one run of them all.
    pub chain_id: usize,
    /// Warmup iterations per chain.
    pub warmup: usize,
    /// Kept draws per chain.
    pub draws: usize,
    /// The seed from which every chain's stream is derived.
    pub seed: u64,
    /// Step-size choice.
    pub step_size: StepSize,
    /// Trajectory length. The default draws it uniformly from `1..=20` each iteration: a
    /// fixed length can resonate with the posterior's scale and mix badly.
    pub steps: Steps,
    /// Whether warmup adapts a diagonal mass matrix (Stan's windows).
    pub adapt_mass: bool,
    /// The mass matrix: adapted diagonal, or the Laplace approximation's dense one.
    pub metric: MassMatrix,
    /// Starting points.
    pub init: Init,
    /// Whether warmup draws are written to the output too.
    pub save_warmup: bool,
    /// The energy error above which a trajectory is divergent.
    pub max_energy_error: f64,
    /// The sampler.
    pub method: Method,
    /// Stop sampling once every parameter's bulk and tail ESS over all chains reach this
    /// (checked every [`Self::ess_check_every`] draws); `draws` is then the most each chain
    /// makes.
    pub target_ess: Option<f64>,
    /// Kept draws between checks of the target ESS.
    pub ess_check_every: usize,
    /// Whether chains evaluate their exact `U` together, in one pass over the data shared out
    /// between one thread per chain, when the model allows it (a
    /// [`RowSum`](crate::row_sum::RowSum) model, two chains or more). The draws are the same
    /// either way; off, every chain reads all the data for each of its evaluations.
    pub lockstep: bool,
    /// The most bytes the kept draws may take in memory (every chain's rows are kept for the
    /// summary: chains × draws × (7 + parameters) × 8 bytes); a run above it is refused before
    /// it starts.
    pub memory_limit: u64,
    /// The model's coarser level (a resolution, see [`crate::model::Levels`]) on which the
    /// run's design is evaluated: the Laplace approximation's MAP search and Hessian, and a
    /// surrogate's training evaluations made before sampling. The model itself judges every
    /// draw, so the chains stay exact; a level close to the model gives nearly its design for a
    /// fraction of the solves (pde-fine's 60×60 mesh: a fifth of a 120×120 solve, and MLDA's
    /// fine acceptance from it is 0.999). `None`: the model itself.
    pub design_level: Option<usize>,
}

impl Default for SampleConfig {
    fn default() -> Self {
        Self {
            chains: 4,
            chain_id: 1,
            warmup: 1000,
            draws: 1000,
            seed: 1,
            step_size: StepSize::Adapt { target: 0.8 },
            steps: Steps::Jittered(20),
            adapt_mass: true,
            metric: MassMatrix::Diagonal,
            init: Init::Random { radius: 2.0 },
            save_warmup: false,
            max_energy_error: 1000.0,
            method: Method::Hmc,
            target_ess: None,
            ess_check_every: 100,
            lockstep: true,
            memory_limit: u64::MAX,
            design_level: None,
        }
    }
}

impl SampleConfig {
    /// The mass matrix the chains run with: [`Self::metric`], or the Laplace one when the
    /// surrogate trains on the Laplace approximation's draws (the chains then run in its
    /// coordinates, where its quadratic is the standard normal's).
    pub fn mass_matrix(&self) -> MassMatrix {
        let trains_on_laplace = self
            .method
            .surrogate()
            .is_some_and(|s| s.laplace_states().is_some());
        if trains_on_laplace {
            MassMatrix::Laplace
        } else {
            self.metric
        }
    }

    /// The chains' ids, first to last (see [`Self::chain_id`]); meaningful once validated.
    pub fn chain_ids(&self) -> std::ops::RangeInclusive<usize> {
        self.chain_id..=self.chain_id.saturating_add(self.chains.saturating_sub(1))
    }

    /// Refuses chain ids that cannot be counted, and a shard (a first id above 1) stopping at a
    /// target ESS: that check needs every chain's draws in one process, and a shard that
    /// stopped on its own chains would not be a part of the one run of them all.
    fn check_chain_ids(&self) -> Result<()> {
        if self.chain_id == 0 {
            return Err(Error::setting("chain_id", "must be at least 1"));
        }
        if self.chain_id.checked_add(self.chains - 1).is_none() {
            return Err(Error::setting(
                "chain_id",
                format!(
                    "({}) with {} chains numbers the last chain past {}",
                    self.chain_id,
                    self.chains,
                    usize::MAX
                ),
            ));
        }
        if self.chain_id > 1 && self.target_ess.is_some() {
            return Err(Error::setting(
                "chain_id",
                format!(
                    "({}) makes this run a shard of a larger one, and a target ESS needs every \
                     chain's draws in one process: give a shard fixed draws instead",
                    self.chain_id
                ),
            ));
        }
        Ok(())
    }

    /// Checks every setting against `model`, naming the first bad one.
    pub fn validate<M: Model + ?Sized>(&self, model: &M) -> Result<()> {
        let dim = model.dim();
        if self.chains == 0 {
            return Err(Error::setting("chains", "must be at least 1"));
        }
        if self.draws == 0 {
            return Err(Error::setting("draws", "must be at least 1"));
        }
        self.check_chain_ids()?;
        self.check_iterations()?;
        self.check_memory(model)?;
        match self.step_size {
            StepSize::Adapt { target } if !(target > 0.0 && target < 1.0) => {
                return Err(Error::setting(
                    "target_accept",
                    format!("must lie strictly between 0 and 1, got {target}"),
                ));
            }
            StepSize::Fixed(eps) if !(eps.is_finite() && eps > 0.0) => {
                return Err(Error::setting(
                    "step_size",
                    format!("must be a finite positive number, got {eps}"),
                ));
            }
            _ => {}
        }
        if self.steps.max() == 0 {
            return Err(Error::setting("steps", "must be at least 1"));
        }
        match &self.init {
            Init::Random { radius } if !(radius.is_finite() && *radius > 0.0) => {
                return Err(Error::invalid("the initial radius must be positive"));
            }
            Init::Values(v) if v.len() != dim => {
                return Err(Error::invalid(format!(
                    "initial values have {} entries but the model has {dim} parameters",
                    v.len()
                )));
            }
            Init::Values(v) if v.iter().any(|x| !x.is_finite()) => {
                return Err(Error::invalid("initial values must be finite"));
            }
            _ => {}
        }
        if self.max_energy_error.is_nan() || self.max_energy_error <= 0.0 {
            return Err(Error::invalid("the divergence threshold must be positive"));
        }
        if let Some(target) = self.target_ess
            && !(target.is_finite() && target > 0.0)
        {
            return Err(Error::setting(
                "target_ess",
                format!("must be a finite positive number, got {target}"),
            ));
        }
        if self.ess_check_every == 0 {
            return Err(Error::setting("ess_check_every", "must be at least 1"));
        }
        if matches!(self.method, Method::Nuts(_)) {
            self.validate_nuts()?;
        }
        if matches!(self.method, Method::Sgld(_)) && model.row_sum().is_none() {
            return Err(SgldSettings::refusal_without_rows());
        }
        self.method.validate(self.warmup)?;
        self.check_surrogate_memory(dim)?;
        self.check_cubic()?;
        if matches!(self.method, Method::Rmhmc(_))
            && model.riemannian_metric(&vec![0.0; dim]).is_none()
        {
            return Err(Error::setting(
                "method",
                "rmhmc needs the model's Riemannian metric, and this model offers none \
                 (logistic, banana and elliptic-pde do; rns-rmhmc uses its network's)",
            ));
        }
        if self.mass_matrix() == MassMatrix::Laplace {
            self.validate_laplace()?;
        }
        if self.mass_matrix() == MassMatrix::LowRank && !matches!(self.method, Method::Nuts(_)) {
            return Err(Error::setting(
                "metric",
                format!(
                    "low-rank is adapted by NUTS alone, not by {}: use the diagonal or the \
                     Laplace metric",
                    self.method.name()
                ),
            ));
        }
        if let Method::Mlda(settings) = &self.method {
            self.validate_mlda(model, settings)?;
        }
        self.design_model(model)?;
        Ok(())
    }

    /// The level [`Self::design_level`] names (built now, once: the model keeps it), or `None`
    /// without one. Refused for a model without levels, a level that is not coarser, and a run
    /// with no design to evaluate (neither the Laplace metric nor a surrogate fitted before
    /// sampling).
    pub(crate) fn design_model<M: Model + ?Sized>(
        &self,
        model: &M,
    ) -> Result<Option<Arc<dyn Model>>> {
        let Some(resolution) = self.design_level else {
            return Ok(None);
        };
        let before_sampling = self.method.surrogate().is_some_and(|s| s.before_sampling());
        if self.mass_matrix() != MassMatrix::Laplace && !before_sampling {
            return Err(Error::setting(
                "design_level",
                "evaluates the Laplace approximation and a surrogate fitted before sampling on \
                 a coarser level; this run has neither (use the Laplace metric or a surrogate \
                 trained on the Laplace approximation)",
            ));
        }
        let Some(levels) = model.levels() else {
            return Err(Error::setting(
                "design_level",
                "needs a model with coarser levels; this model has none",
            ));
        };
        levels
            .coarser(resolution, self.memory_limit)
            .map(Some)
            .map_err(|e| match e {
                Error::Setting { problem, .. } => Error::setting("design_level", problem),
                other => other,
            })
    }

    /// MLDA needs the model's levels, each coarser than the model and within the memory limit
    /// (built now, once: the chains share them), and runs on the model's own coordinates.
    fn validate_mlda<M: Model + ?Sized>(&self, model: &M, settings: &MldaSettings) -> Result<()> {
        settings.coarse_levels(model, self.memory_limit)?;
        if self.mass_matrix() == MassMatrix::Laplace {
            return Err(Error::setting(
                "metric",
                "laplace moves the chains to the Laplace approximation's coordinates, which \
                 the model's coarser levels do not share: use the diagonal metric with mlda",
            ));
        }
        Ok(())
    }

    /// Refuses a cubic term where nothing would fit it: only a network trained on the Laplace
    /// approximation has the quadratic the cubic corrects (every front end gets this rule).
    fn check_cubic(&self) -> Result<()> {
        let Some(s) = self.method.surrogate() else {
            return Ok(());
        };
        match s.cubic && !matches!(s.train_from, super::TrainFrom::Laplace { .. }) {
            true => Err(Error::setting(
                "cubic",
                "is for a network trained on the Laplace approximation (train from laplace), not \
                 on the warmup's states: the cubic sits between the approximation's quadratic \
                 and the network",
            )),
            false => Ok(()),
        }
    }

    /// Refuses, before the warmup runs, a surrogate fit on the warmup's states that the memory
    /// limit would refuse when it is made (a full GP's `n × n`): at most one state per warmup
    /// iteration between
    /// [`super::method::SurrogateSettings::collect_after`] and the end of the exact phase.
    fn check_surrogate_memory(&self, dim: usize) -> Result<()> {
        let Some(s) = self.method.surrogate() else {
            return Ok(());
        };
        if s.surrogate_file.is_some() || s.before_sampling() {
            return Ok(());
        }
        let exact_warmup = self.method.exact_warmup(self.warmup);
        let collect_after = s.collect_after(self.warmup, exact_warmup);
        let states = exact_warmup
            .unwrap_or(self.warmup)
            .saturating_sub(collect_after);
        s.fitter().check_memory(states, dim)
    }

    /// Refuses a run whose iterations, over all its chains, a `u64` cannot count (the run's
    /// records and report add them up): `--warmup 18000000000000000000` once overflowed the
    /// warmup schedule instead. The setting named is the larger of warmup and draws.
    fn check_iterations(&self) -> Result<()> {
        let total = self
            .warmup
            .checked_add(self.draws)
            .and_then(|per_chain| u64::try_from(per_chain).ok())
            .and_then(|per_chain| per_chain.checked_mul(self.chains as u64));
        if total.is_some() {
            return Ok(());
        }
        let (setting, count, other, other_count) = if self.warmup >= self.draws {
            ("warmup", self.warmup, "draws", self.draws)
        } else {
            ("draws", self.draws, "warmup iterations", self.warmup)
        };
        Err(Error::setting(
            setting,
            format!(
                "({count}) with {other_count} {other} per chain, over {} chains, is more \
                 iterations than a run can count ({} in all)",
                self.chains,
                u64::MAX
            ),
        ))
    }

    /// Refuses, before any chain allocates, what the chains would hold together: each chain's
    /// vectors of the model's dimension ([`crate::memory::CHAIN_VECTORS`]), the kept draws (every
    /// chain's rows are kept for the summary) and the model's scratch of each chain evaluating
    /// at once.
    fn check_memory<M: Model + ?Sized>(&self, model: &M) -> Result<()> {
        let dim = model.dim();
        crate::memory::check(
            &format!("{} chains of {dim} parameters each", self.chains),
            "chains",
            crate::memory::f64s([self.chains, dim, crate::memory::CHAIN_VECTORS]),
            self.memory_limit,
        )?;
        let columns = SAMPLER_COLUMNS.len().saturating_add(dim);
        crate::memory::check(
            &format!(
                "keeping {} draws of {} chains with {columns} columns in memory",
                self.draws, self.chains
            ),
            "draws",
            crate::memory::f64s([self.chains, self.draws, columns]),
            self.memory_limit,
        )?;
        let scratch = model.bytes_per_chain();
        crate::memory::check(
            &format!(
                "{} chains evaluating at once, with {scratch} bytes of the model's scratch each",
                self.chains
            ),
            "chains",
            scratch.checked_mul(self.chains as u128),
            self.memory_limit,
        )
    }

    /// The methods a Laplace mass matrix does not apply to: RMHMC integrates under its own
    /// position-dependent metric (RNS-RMHMC trained on the Laplace approximation runs in its
    /// coordinates, as every chain whose network trains there, but under the network's metric
    /// in them), SGLD has no momentum, and a saved surrogate was fitted in the coordinates of
    /// the run that trained it, not in these.
    fn validate_laplace(&self) -> Result<()> {
        let refusal = match &self.method {
            Method::RnsRmhmc(s, _)
                if s.laplace_states().is_some() && self.metric != MassMatrix::Laplace =>
            {
                None
            }
            Method::Rmhmc(_) | Method::RnsRmhmc(..) => {
                Some("rmhmc and rns-rmhmc integrate under their own position-dependent metric")
            }
            Method::Sgld(_) => Some("sgld takes Langevin steps without a mass matrix"),
            method
                if method
                    .surrogate()
                    .is_some_and(|s| s.surrogate_file.is_some()) =>
            {
                Some("a saved surrogate was fitted in the coordinates of the run that trained it")
            }
            _ => None,
        };
        match refusal {
            Some(why) => Err(Error::setting(
                "metric",
                format!("laplace does not apply here: {why}"),
            )),
            None => Ok(()),
        }
    }

    /// What NUTS cannot do of the settings HMC accepts. nuts-rs adapts its step size and mass
    /// matrix together in its own windows, and has no switch to keep either fixed; and it finds
    /// its first step size inside its first transition without reporting it, so only a warmup
    /// gives the kept draws a step size to report (and the adaptation block its values).
    fn validate_nuts(&self) -> Result<()> {
        if let StepSize::Fixed(_) = self.step_size {
            return Err(Error::setting(
                "step_size",
                "does not apply to nuts, which adapts its step size in warmup",
            ));
        }
        if !self.adapt_mass {
            return Err(Error::invalid(
                "nuts adapts its diagonal mass matrix in warmup and cannot keep the identity",
            ));
        }
        if self.warmup == 0 {
            return Err(Error::setting(
                "warmup",
                "must be at least 1 for nuts, which adapts its step size and mass matrix in \
                 warmup",
            ));
        }
        Ok(())
    }
}
