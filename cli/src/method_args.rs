//! The sampler options shared by `shmc sample` and `shmc sbc`: which method, its trajectories and
//! its surrogate, turned into the library's [`Method`] in one place.

use clap::Args;

use super::rmhmc_args::RmhmcArgs;
use super::surrogate_args::{SurrogateArgs, TrainFromArg};
use super::trajectory_args::TrajectoryArgs;
use shmc::sampler::{Method, MldaSettings, NutsSettings, SgldSettings};
use shmc::surrogates::kinds::SurrogateKind;
use shmc::{Error, Result};

/// Which sampler runs the chains, and how.
#[derive(Debug, Args)]
#[command(next_help_heading = "Method")]
pub struct MethodArgs {
    /// Sampling method: exact HMC; nuts, Stan's default sampler (nuts-rs: trajectories doubled
    /// until they turn back, at most --max-depth times; step size and diagonal mass matrix
    /// adapted in warmup to --target-accept; it refuses --step-size, --no-adapt-mass, --steps
    /// and --fixed-steps); or a surrogate-accelerated one with the exact MH step (the
    /// draws target the exact posterior): rns-hmc trains a random network on warmup states,
    /// arns-hmc updates it online, vhmc trains it online by score matching inside a Laplace
    /// approximation (APPROXIMATE with --approximate-acceptance); grid-hmc precomputes the
    /// force on a grid of --cell cells (read per --force-interpolation), sg-hmc a sparse-grid
    /// interpolant of --level (or to --tolerance), over --domain (the paper's "complete"
    /// variant, which also accepts with the grid's U: --approximate-acceptance, APPROXIMATE). rmhmc is Riemannian-manifold HMC
    /// with the model's own metric (logistic: the Fisher information; elliptic-pde: the
    /// Gauss-Newton diagonal frozen at the start), rns-rmhmc RNS-HMC's network fitted on the
    /// exact warmup, then RMHMC on its potential and SoftAbs'd Hessian (both judged by the
    /// exact U; the generalized leapfrog's options: --rmhmc-step-size and below). sgld is
    /// stochastic-gradient Langevin dynamics (Welling & Teh), the VHMC paper's baseline: one
    /// Langevin step per iteration on a minibatch gradient, no MH step (APPROXIMATE; logistic
    /// and probit only; --sgld-batch and below). mlda is multilevel delayed acceptance: HMC on
    /// the model's coarsest level (--levels), each level's subchain (--subchains) proposing to
    /// the next, the model itself judging every draw (elliptic-pde's levels are coarser meshes).
    #[arg(long, default_value = "hmc",
          value_parser = ["hmc", "nuts", "rns-hmc", "arns-hmc", "vhmc", "grid-hmc", "sg-hmc",
                          "rmhmc", "rns-rmhmc", "sgld", "mlda"])]
    pub method: String,
    /// nuts: the most doublings of a trajectory, at most 2^DEPTH - 1 leapfrog steps (Stan's
    /// max_depth). Transitions that reach it (treedepth__ = DEPTH) mean the step size is small
    /// for the posterior's scale.
    #[arg(long, default_value_t = NutsSettings::default().max_depth, value_name = "DEPTH")]
    pub max_depth: u64,
    /// sgld: rows per minibatch (the VHMC paper's 500).
    #[arg(long, default_value_t = SgldSettings::default().batch, value_name = "ROWS", help_heading = "SGLD (sgld)")]
    pub sgld_batch: usize,
    /// sgld: the scale a of the step size a (b + t)^-gamma at iteration t (warmup included).
    /// It must suit the posterior's scale (a step well below its smallest variance).
    #[arg(long, default_value_t = SgldSettings::default().a, help_heading = "SGLD (sgld)", allow_negative_numbers = true)]
    pub sgld_a: f64,
    /// sgld: the offset b of the step size a (b + t)^-gamma.
    #[arg(long, default_value_t = SgldSettings::default().b, help_heading = "SGLD (sgld)", allow_negative_numbers = true)]
    pub sgld_b: f64,
    /// sgld: the decay gamma of the step size a (b + t)^-gamma (Welling & Teh's 0.55).
    #[arg(long, default_value_t = SgldSettings::default().gamma, help_heading = "SGLD (sgld)", allow_negative_numbers = true)]
    pub sgld_gamma: f64,
    #[command(flatten)]
    pub trajectory: TrajectoryArgs,
    #[command(flatten)]
    pub surrogate: SurrogateArgs,
    #[command(flatten)]
    pub rmhmc: RmhmcArgs,
    /// mlda: the coarser levels, coarsest first (elliptic-pde: elements per side of each coarser
    /// mesh; the model's own --mesh is the finest, which judges) [default: 10,15].
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "SIZES",
        help_heading = "MLDA (mlda)"
    )]
    pub levels: Option<Vec<usize>>,
    /// mlda: each level's steps per proposal to the level above, one per coarser level,
    /// coarsest first [default: 4 for the coarsest, 2 above it].
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "STEPS",
        help_heading = "MLDA (mlda)"
    )]
    pub subchains: Option<Vec<u32>>,
}

impl MethodArgs {
    /// The method for a run with seed `seed`.
    pub fn method(&self, seed: u64) -> Result<Method> {
        let surrogate_methods = ["rns-hmc", "arns-hmc", "grid-hmc", "sg-hmc", "rns-rmhmc"];
        if self.surrogate.train_from != TrainFromArg::Warmup
            && !surrogate_methods.contains(&self.method.as_str())
        {
            return Err(Error::invalid(format!(
                "--train-from laplace is for rns-hmc's network; {} trains none",
                self.method
            )));
        }
        if self.method != "mlda" && (self.levels.is_some() || self.subchains.is_some()) {
            let flag = if self.levels.is_some() {
                "--levels"
            } else {
                "--subchains"
            };
            return Err(Error::invalid(format!(
                "{flag} is for --method mlda; {} has no levels",
                self.method
            )));
        }
        Ok(match self.method.as_str() {
            "rns-hmc" => Method::RnsHmc(self.surrogate.settings(seed)?),
            "grid-hmc" | "sg-hmc" => {
                let mut settings = self.surrogate.settings(seed)?;
                if settings.surrogate_file.is_some() {
                    return Err(Error::invalid(
                        "--surrogate loads a saved surrogate: use it with --method rns-hmc",
                    ));
                }
                let kind = if self.method == "grid-hmc" {
                    "force-grid"
                } else {
                    "sparse-grid"
                };
                settings.kind = SurrogateKind::Grid(self.surrogate.grid(kind)?);
                Method::RnsHmc(settings)
            }
            "nuts" => {
                self.trajectory.refuse_steps(
                    "nuts",
                    "ends each trajectory where it turns back (at most 2^--max-depth - 1 steps)",
                )?;
                Method::Nuts(NutsSettings {
                    max_depth: self.max_depth,
                })
            }
            "sgld" => {
                self.trajectory
                    .refuse_steps("sgld", "takes one Langevin step per iteration")?;
                Method::Sgld(SgldSettings {
                    batch: self.sgld_batch,
                    a: self.sgld_a,
                    b: self.sgld_b,
                    gamma: self.sgld_gamma,
                })
            }
            "arns-hmc" => Method::ArnsHmc(self.surrogate.settings(seed)?),
            "vhmc" => Method::Vhmc(self.surrogate.vhmc(seed)?),
            "rmhmc" => Method::Rmhmc(self.rmhmc.settings(&self.trajectory, true)),
            "rns-rmhmc" => Method::RnsRmhmc(
                self.surrogate.settings(seed)?,
                self.rmhmc.settings(&self.trajectory, false),
            ),
            "mlda" => {
                let levels = self.levels.clone().unwrap_or(vec![10, 15]);
                let mut settings = MldaSettings::new(levels);
                if let Some(subchains) = &self.subchains {
                    settings.subchains.clone_from(subchains);
                }
                Method::Mlda(settings)
            }
            _ => Method::Hmc,
        })
    }
}
