//! The method registry: every sampler a user can choose by name, with one line on when to use
//! it and its default settings. The command line's `--method` values and their help, the
//! Python package's `method=` and the documentation's table all read [`METHODS`]; a new method
//! is its [`Method`] variant plus one entry here.
//!
//! The approximate variants (VHMC's published acceptance, the grids' "complete" rule) are not
//! entries of their own: they are a setting of the method they vary, and [`Method::name`]
//! names them as such (`vhmc-approximate`, `grid-hmc-complete`).

use super::method::{Method, NutsSettings, RmhmcSettings, SgldSettings, VhmcSettings};
use super::multilevel::MldaSettings;
use super::surrogate_settings::SurrogateSettings;
use crate::surrogates::SurrogateKind;
use crate::surrogates::grids::{DomainChoice, GridFitter, GridKind, Interpolation};
use crate::{Error, Result};

/// One method of the registry.
pub struct MethodEntry {
    /// Its name on the command line, in the Python package and in the output.
    pub name: &'static str,
    /// When to use it, in one line.
    pub summary: &'static str,
    /// Whether its draws target only an approximation of the posterior (always, not by a
    /// setting).
    pub approximate: bool,
    defaults: fn() -> Method,
}

impl MethodEntry {
    /// The method with its default settings, which run with the sampler's default warmup and
    /// draws.
    pub fn defaults(&self) -> Method {
        (self.defaults)()
    }
}

/// Every method, in the order a user meets them: the exact baselines, the surrogate methods,
/// the Riemannian ones, the approximate one.
pub const METHODS: [MethodEntry; 11] = [
    MethodEntry {
        name: "hmc",
        summary: "exact HMC, every leapfrog step on the exact gradient: the reference",
        approximate: false,
        defaults: || Method::Hmc,
    },
    MethodEntry {
        name: "nuts",
        summary: "the No-U-Turn Sampler (nuts-rs), Stan's default: the baseline to beat",
        approximate: false,
        defaults: || Method::Nuts(NutsSettings::default()),
    },
    MethodEntry {
        name: "rns-hmc",
        summary: "a random network learned from warmup proposes, the exact U judges: expensive \
                  models",
        approximate: false,
        defaults: || Method::RnsHmc(SurrogateSettings::default()),
    },
    MethodEntry {
        name: "arns-hmc",
        summary: "rns-hmc whose network keeps learning online through warmup",
        approximate: false,
        defaults: || Method::ArnsHmc(SurrogateSettings::default()),
    },
    MethodEntry {
        name: "vhmc",
        summary: "a network score-matched online inside the Laplace approximation: big data",
        approximate: false,
        defaults: || Method::Vhmc(VhmcSettings::default()),
    },
    MethodEntry {
        name: "grid-hmc",
        summary: "the force precomputed on a grid over the Laplace box: 1-3 parameters",
        approximate: false,
        defaults: || {
            grid(GridKind::Force {
                cell: 0.1,
                interpolation: Interpolation::Constant,
            })
        },
    },
    MethodEntry {
        name: "sg-hmc",
        summary: "U interpolated on a sparse grid over the Laplace box: up to about 10 \
                  parameters",
        approximate: false,
        defaults: || grid(GridKind::SparseLevel(5)),
    },
    MethodEntry {
        name: "rmhmc",
        summary: "Riemannian-manifold HMC under the model's own metric: strongly curved \
                  posteriors",
        approximate: false,
        defaults: || Method::Rmhmc(RmhmcSettings::default()),
    },
    MethodEntry {
        name: "rns-rmhmc",
        summary: "RMHMC on the network's potential and SoftAbs'd Hessian, judged by the exact U",
        approximate: false,
        defaults: || Method::RnsRmhmc(SurrogateSettings::default(), RmhmcSettings::default()),
    },
    MethodEntry {
        name: "mlda",
        summary: "multilevel delayed acceptance over the model's coarser levels (--levels): \
                  elliptic-pde's meshes",
        approximate: false,
        defaults: || Method::Mlda(MldaSettings::new(vec![10, 15])),
    },
    MethodEntry {
        name: "sgld",
        summary: "APPROXIMATE stochastic-gradient Langevin dynamics on minibatches (row-sum \
                  models)",
        approximate: true,
        defaults: || Method::Sgld(SgldSettings::default()),
    },
];

/// RNS-HMC's single fit with a grid of `kind` over the Laplace approximation's box.
fn grid(kind: GridKind) -> Method {
    Method::RnsHmc(SurrogateSettings {
        kind: SurrogateKind::Grid(GridFitter {
            kind,
            domain: DomainChoice::Laplace { probability: 0.999 },
            memory_limit: u64::MAX,
        }),
        ..SurrogateSettings::default()
    })
}

impl Method {
    /// The registry's entry called `name`; an error listing the names otherwise.
    pub fn entry(name: &str) -> Result<&'static MethodEntry> {
        METHODS.iter().find(|m| m.name == name).ok_or_else(|| {
            let names: Vec<&str> = METHODS.iter().map(|m| m.name).collect();
            Error::setting(
                "method",
                format!(
                    "{name:?} is not a method (choose one of {})",
                    names.join(", ")
                ),
            )
        })
    }

    /// The method called `name` with its default settings.
    pub fn named(name: &str) -> Result<Method> {
        Ok(Self::entry(name)?.defaults())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each entry's defaults carry its name and its label, and pass their own checks with the
    /// sampler's default warmup: a user choosing a method by name gets settings that run.
    #[test]
    fn every_method_is_named_as_its_entry_and_its_defaults_are_valid() {
        let warmup = crate::sampler::SampleConfig::default().warmup;
        for entry in &METHODS {
            let method = entry.defaults();
            assert_eq!(method.name(), entry.name);
            assert_eq!(method.approximate(), entry.approximate, "{}", entry.name);
            method
                .validate(warmup)
                .unwrap_or_else(|e| panic!("{}: {e}", entry.name));
            assert_eq!(Method::named(entry.name).unwrap(), method);
        }
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_list() {
        let message = Method::named("hcm").unwrap_err().to_string();
        assert!(message.contains("\"hcm\" is not a method"), "{message}");
        assert!(message.contains("hmc, nuts, rns-hmc"), "{message}");
    }
}
