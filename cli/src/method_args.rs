//! The sampler options shared by `shmc sample` and `shmc sbc`: which method, its trajectories and
//! its surrogate, turned into the library's [`Method`] in one place.

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser};

use super::rmhmc_args::RmhmcArgs;
use super::surrogate_args::{SurrogateArgs, TrainFromArg};
use super::trajectory_args::TrajectoryArgs;
use shmc::sampler::{METHODS, Method, MldaSettings, NutsSettings, SgldSettings, SurrogateSettings};
use shmc::surrogates::SurrogateKind;
use shmc::surrogates::grids::GridKind;
use shmc::{Error, Result};

/// Which sampler runs the chains, and how.
#[derive(Debug, Args)]
#[command(next_help_heading = "Method")]
pub struct MethodArgs {
    /// Sampling method (each in one line below; the surrogate methods keep the exact MH step,
    /// so their draws target the exact posterior). auto times the model's gradient before the
    /// chains start and picks nuts with the low-rank metric or the Laplace-trained surrogate
    /// plan; it prints the plan and why, records it in the CSV headers (shmc_auto), and refuses
    /// the options that would set the plan it chooses. nuts refuses --step-size, --no-adapt-mass,
    /// --steps and --fixed-steps; grid-hmc and sg-hmc take the Grid options, rmhmc and
    /// rns-rmhmc the RMHMC ones, sgld its own; --approximate-acceptance makes vhmc, grid-hmc
    /// and sg-hmc APPROXIMATE (the published rules). docs/methods.md has the formulas.
    #[arg(long, default_value = "hmc", value_parser = method_names())]
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
    /// mesh; the model's own --mesh is the finest, which judges) [default: 10,15]. `net` first
    /// (`net,10,15`) puts a network surrogate below the meshes, trained as rns-hmc trains it
    /// (the Surrogate options: on the warmup's states, --exact-warmup, or --surrogate FILE):
    /// once fitted, its HMC subchains propose to the coarsest mesh, which then pays one forward
    /// solve per proposal instead of a forward and an adjoint solve per leapfrog step.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "[net,]SIZES",
        help_heading = "MLDA (mlda)"
    )]
    pub levels: Option<Vec<String>>,
    /// mlda: each level's steps per proposal to the level above, one per coarser level,
    /// coarsest first, the network's first with `net` [default: 4 for the network and for the
    /// coarsest mesh, 2 above it].
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "STEPS",
        help_heading = "MLDA (mlda)"
    )]
    pub subchains: Option<Vec<u32>>,
    /// mlda: let the exact model judge warmup too, as MUQ's MLDA does. By default the finest
    /// coarser level judges warmup, which then pays no fine solve: warmup adapts the coarse
    /// levels' step size and metric and its draws are not kept; every kept draw is judged by
    /// the model itself.
    #[arg(long, help_heading = "MLDA (mlda)")]
    pub fine_warmup: bool,
    /// auto: the plan a first run chose, as its line reports it; saved with the run so that
    /// `--resume` makes the same choice without timing the model again.
    #[arg(long, value_name = "LINE", hide = true)]
    pub auto_chose: Option<String>,
}

/// The `--method` value that lets the run choose ([`shmc::sampler::auto`]).
const AUTO: &str = "auto";

impl MethodArgs {
    /// Whether the run's method is `auto`'s to choose once the model is built.
    pub fn is_auto(&self) -> bool {
        self.method == AUTO
    }

    /// The method for a run with seed `seed`: the registry's method of that name
    /// ([`Method::named`]) with these options in place of its defaults. For `auto`, NUTS until
    /// the model is measured and [`shmc::sampler::auto`] puts its plan in place; the options
    /// that would set a plan are refused.
    pub fn method(&self, seed: u64) -> Result<Method> {
        if self.is_auto() {
            self.refuse_for_auto()?;
            return Ok(Method::Nuts(NutsSettings::default()));
        }
        if self.auto_chose.is_some() {
            return Err(Error::invalid(format!(
                "--auto-chose is --method auto's own record; {} chooses nothing",
                self.method
            )));
        }
        let defaults = Method::named(&self.method)?;
        self.refuse_misplaced(&defaults)?;
        Ok(match defaults {
            Method::Hmc => Method::Hmc,
            Method::Nuts(_) => {
                self.trajectory.refuse_steps(
                    "nuts",
                    "ends each trajectory where it turns back (at most 2^--max-depth - 1 steps)",
                )?;
                Method::Nuts(NutsSettings {
                    max_depth: self.max_depth,
                })
            }
            Method::RnsHmc(defaults) => Method::RnsHmc(self.surrogate_settings(&defaults, seed)?),
            Method::ArnsHmc(_) => Method::ArnsHmc(self.surrogate.settings(seed)?),
            Method::Vhmc(_) => Method::Vhmc(self.surrogate.vhmc(seed)?),
            Method::Rmhmc(_) => Method::Rmhmc(self.rmhmc.settings(&self.trajectory, true)),
            Method::RnsRmhmc(..) => Method::RnsRmhmc(
                self.surrogate.settings(seed)?,
                self.rmhmc.settings(&self.trajectory, false),
            ),
            Method::Sgld(_) => {
                self.trajectory
                    .refuse_steps("sgld", "takes one Langevin step per iteration")?;
                Method::Sgld(SgldSettings {
                    batch: self.sgld_batch,
                    a: self.sgld_a,
                    b: self.sgld_b,
                    gamma: self.sgld_gamma,
                })
            }
            Method::Mlda(mut settings) => {
                if let Some(levels) = &self.levels {
                    settings = self.mlda_levels(levels, seed)?;
                }
                if let Some(subchains) = &self.subchains {
                    settings.subchains.clone_from(subchains);
                }
                settings.fine_warmup = self.fine_warmup;
                Method::Mlda(settings)
            }
        })
    }

    /// An error naming the first option given that `defaults`' method would ignore: a network
    /// option for a method that trains none, MLDA's options for another method.
    fn refuse_misplaced(&self, defaults: &Method) -> Result<()> {
        let network_level = self
            .levels
            .as_ref()
            .and_then(|l| l.first())
            .is_some_and(|l| l == "net");
        if self.surrogate.train_from != TrainFromArg::Warmup
            && defaults.surrogate().is_none()
            && !network_level
        {
            return Err(Error::invalid(format!(
                "--train-from laplace is for rns-hmc's network; {} trains none",
                self.method
            )));
        }
        let trains_none = matches!(
            defaults,
            Method::Hmc | Method::Nuts(_) | Method::Rmhmc(_) | Method::Sgld(_) | Method::Mlda(_)
        ) && !network_level;
        if trains_none && let Some(flag) = self.surrogate.network_option() {
            return Err(Error::invalid(format!(
                "{flag} is for the surrogate methods (rns-hmc, arns-hmc, vhmc, rns-rmhmc, mlda \
                 with --levels net,...); {} trains no surrogate, so it would change nothing",
                self.method
            )));
        }
        if self.method != "mlda"
            && (self.levels.is_some() || self.subchains.is_some() || self.fine_warmup)
        {
            let flag = if self.levels.is_some() {
                "--levels"
            } else if self.subchains.is_some() {
                "--subchains"
            } else {
                "--fine-warmup"
            };
            return Err(Error::invalid(format!(
                "{flag} is for --method mlda; {} has no levels",
                self.method
            )));
        }
        Ok(())
    }

    /// An error naming the first option given that sets a method's trajectories or surrogate:
    /// `auto` chooses its own plan, and an option it would not apply must not look applied.
    fn refuse_for_auto(&self) -> Result<()> {
        let t = &self.trajectory;
        let given = [
            ("--step-size", t.step_size.is_some()),
            ("--steps", t.steps.is_some()),
            ("--fixed-steps", t.fixed_steps),
            ("--jitter-steps", t.jitter_steps),
            (
                "--max-depth",
                self.max_depth != NutsSettings::default().max_depth,
            ),
            (
                "--train-from",
                self.surrogate.train_from != TrainFromArg::Warmup,
            ),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
        .or_else(|| self.surrogate.network_option());
        match given {
            Some(flag) => Err(Error::invalid(format!(
                "{flag}: auto chooses its own plan; name the method to set it (the line auto \
                 prints names the method it chose)"
            ))),
            None => Ok(()),
        }
    }

    /// MLDA's settings from `--levels`: mesh sizes, after `net` for the network level.
    fn mlda_levels(&self, levels: &[String], seed: u64) -> Result<MldaSettings> {
        let network = levels.first().is_some_and(|l| l == "net");
        let sizes = levels[usize::from(network)..]
            .iter()
            .map(|level| {
                level.parse::<usize>().map_err(|_| {
                    Error::invalid(format!(
                        "--levels: {level:?} is neither a mesh size nor `net` (which only the \
                         first level may be)"
                    ))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        if !network {
            return Ok(MldaSettings::new(sizes));
        }
        Ok(MldaSettings::with_network(
            sizes,
            self.surrogate.settings(seed)?,
        ))
    }

    /// RNS-HMC's settings from the surrogate options, of the kind the registry's `defaults`
    /// name: the network, or a grid (grid-hmc, sg-hmc) built from the grid options.
    fn surrogate_settings(
        &self,
        defaults: &SurrogateSettings,
        seed: u64,
    ) -> Result<SurrogateSettings> {
        let mut settings = self.surrogate.settings(seed)?;
        let Some(grid) = defaults.kind.grid() else {
            return Ok(settings);
        };
        if settings.surrogate_file.is_some() {
            return Err(Error::invalid(
                "--surrogate loads a saved surrogate: use it with --method rns-hmc",
            ));
        }
        let kind = match grid.kind {
            GridKind::Force { .. } => "force-grid",
            _ => "sparse-grid",
        };
        settings.kind = SurrogateKind::Grid(self.surrogate.grid(kind)?);
        Ok(settings)
    }
}

/// `--method`'s values, each with its line from the registry, and `auto`.
fn method_names() -> PossibleValuesParser {
    let auto = PossibleValue::new(AUTO).help(
        "nuts (low-rank metric) or the Laplace-trained surrogate plan, whichever the model's \
         measured gradient cost pays for",
    );
    PossibleValuesParser::new(
        METHODS
            .iter()
            .map(|m| PossibleValue::new(m.name).help(m.summary))
            .chain([auto]),
    )
}
