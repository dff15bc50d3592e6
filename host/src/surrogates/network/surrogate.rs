//! The network as a [`Surrogate`], and how it is fitted ([`NetworkFitter`]).

use std::path::Path;

use shmc_core::Potential;

use super::fit::{fit_potential, fit_score};
use super::online::OnlineFit;
use super::options::{DynNetwork, TrainOptions};
use super::reach::Reach;
use super::record;
use crate::surrogates::file::SurrogateFile;
use crate::surrogates::states::TrainingSet;
use crate::surrogates::{
    Curvature, FitMethod, Fitted, Fitter, NetworkForm, Online, Surrogate, SurrogateMeta,
};
use crate::{Error, Result};

/// A fitted random network as a surrogate. Its domain is the [`Reach`] of its training states
/// (everywhere for a network saved without one), it knows its curvature exactly, and it learns
/// online as its batch fit would: by Greville's recursion after a potential fit, by score
/// matching after a gradient fit, each learned state extending its reach.
#[derive(Clone, Debug)]
pub struct NetworkSurrogate {
    network: DynNetwork,
    method: FitMethod,
    ridge: f64,
    reach: Option<Reach>,
    online: Option<OnlineFit>,
    /// The reach with the states learned online since the last publish.
    pending_reach: Option<Reach>,
}

impl NetworkSurrogate {
    /// The surrogate `network`, whose output weights were fitted to `method`'s quantity with
    /// ridge `ridge` (an online fit goes on with both).
    pub fn new(network: DynNetwork, method: FitMethod, ridge: f64) -> Self {
        Self {
            network,
            method,
            ridge,
            reach: None,
            online: None,
            pending_reach: None,
        }
    }

    /// The surrogate standing for `U` only within `reach` (`None`: everywhere).
    pub fn with_reach(mut self, reach: Option<Reach>) -> Self {
        self.pending_reach = reach.clone();
        self.reach = reach;
        self
    }

    /// Where it stands for `U`, if it was fitted to states.
    pub fn reach(&self) -> Option<&Reach> {
        self.reach.as_ref()
    }

    /// The network.
    pub fn network(&self) -> &DynNetwork {
        &self.network
    }

    /// The network a surrogate file of this kind holds (the fit's method and ridge from its
    /// meta), and the meta.
    pub fn read(file: &SurrogateFile) -> Result<(Self, SurrogateMeta)> {
        let (network, reach, meta) = record::read(file)?;
        Ok((
            Self::new(network, meta.method, meta.ridge).with_reach(reach),
            meta,
        ))
    }
}

impl Potential for NetworkSurrogate {
    fn dim(&self) -> usize {
        self.network.dim()
    }
    fn value(&self, q: &[f64]) -> f64 {
        self.network.value(q)
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        self.network.value_and_gradient(q, grad)
    }
    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        self.network.gradient(q, grad)
    }
}

impl Curvature for DynNetwork {
    fn hessian(&self, q: &[f64], out: &mut [f64]) {
        DynNetwork::hessian(self, q, out);
    }
}

impl Surrogate for NetworkSurrogate {
    fn contains(&self, q: &[f64]) -> bool {
        self.reach.as_ref().is_none_or(|r| r.contains(q))
    }

    fn curvature(&self) -> Option<&dyn Curvature> {
        Some(&self.network)
    }

    fn network(&self) -> Option<NetworkForm<'_>> {
        Some(NetworkForm {
            network: &self.network,
            shift: 0.0,
        })
    }

    fn online(&mut self) -> Option<&mut dyn Online> {
        Some(self)
    }

    fn save(&self, path: &Path, meta: &SurrogateMeta) -> Result<()> {
        record::write(&self.network, self.reach.as_ref(), path, meta)
    }
}

impl Online for NetworkSurrogate {
    fn begin(&mut self, states: &TrainingSet) -> Result<()> {
        self.online = Some(OnlineFit::begin(
            self.method,
            &self.network,
            states,
            self.ridge,
        )?);
        Ok(())
    }

    fn learn(&mut self, q: &[f64], potential: f64, gradient: Option<&[f64]>) -> Result<()> {
        let fit = self.online.as_mut().ok_or_else(not_begun)?;
        fit.learn(&self.network, q, potential, gradient)?;
        if let Some(reach) = self.pending_reach.as_mut() {
            reach.extend(q);
        }
        Ok(())
    }

    fn publish(&mut self) -> Result<()> {
        let (output, bias) = self.online.as_ref().ok_or_else(not_begun)?.output();
        self.network.set_output(output, bias)?;
        self.reach.clone_from(&self.pending_reach);
        Ok(())
    }
}

/// Learning or publishing before [`Online::begin`].
fn not_begun() -> Error {
    Error::invalid("the network's online fit has not begun")
}

/// How a network is fitted: its options, and whether to the potential values or the gradients.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct NetworkFitter {
    /// How the network is built and fitted.
    pub options: TrainOptions,
    /// What it is fitted to.
    pub method: FitMethod,
}

impl NetworkFitter {
    /// The network of `options` fitted to the states' potential values (the papers).
    pub fn potential(options: TrainOptions) -> Self {
        Self {
            options,
            method: FitMethod::Potential,
        }
    }

    /// The network of `options` fitted to the states' gradients (score matching).
    pub fn score(options: TrainOptions) -> Self {
        Self {
            options,
            method: FitMethod::Score,
        }
    }
}

impl Fitter for NetworkFitter {
    /// Fitted to `states` alone; the model is not evaluated.
    fn fit(&self, _model: &(dyn Potential + Sync), states: &TrainingSet) -> Result<Fitted> {
        let trained = match self.method {
            FitMethod::Potential => fit_potential(states, &self.options)?,
            FitMethod::Score => fit_score(states, &self.options)?,
        };
        Ok(Fitted {
            surrogate: Box::new(
                NetworkSurrogate::new(trained.network, self.method, self.options.ridge)
                    .with_reach(Reach::of(states)),
            ),
            scale: trained.scale,
            holdout_gradient_error: trained.holdout_gradient_error,
            seconds: trained.seconds,
            exact_evaluations: 0,
        })
    }

    fn learns_online(&self) -> bool {
        true
    }
}
