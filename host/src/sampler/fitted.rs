//! RNS-HMC and ARNS-HMC's side of a chain ([`FittedPhase`]): exact HMC collecting the accepted
//! warmup states, a surrogate fitted to them, for ARNS-HMC updated online through the rest of
//! warmup, and the decision when the proposal changes. Whatever the surrogate's kind: this phase
//! knows it only as a [`Surrogate`] made by a [`Fitter`] (or loaded from a file).

use std::sync::Arc;
use std::time::Instant;

use rand_pcg::Pcg64;
use shmc_core::random::uniform;
use shmc_core::schedule::adaptation_probability;
use shmc_core::{Dyn, Potential, State, Steps};

use super::laplace_training;
use super::proposer::{ForResume, Precompute, Proposer, SurrogateReport};
use super::surrogate_settings::SurrogateSettings;
use super::trajectory::{AUTO_CAP_FACTOR, SurrogateSteps, choose_steps, lengthen};
use crate::surrogates::states::TrainingSet;
use crate::surrogates::{Fallback, Held, Surrogate, kinds};
use crate::{Error, Model, Result};

/// The fewest collected states a fit accepts.
const MIN_TRAINING_STATES: usize = 20;

/// A surrogate fitted once before sampling (a grid over a box known in advance, a network on
/// the Laplace approximation's draws), shared by every chain, with what fitting it cost.
#[derive(Clone, Debug)]
pub struct Precomputed {
    /// The surrogate.
    pub surrogate: Arc<dyn Surrogate>,
    /// Exact evaluations the fit made.
    pub evaluations: u64,
    /// Wall time of the fit, in seconds.
    pub seconds: f64,
    /// The states it was fitted to, if any (the trajectory lengths are chosen at them).
    pub training: Option<Arc<TrainingSet>>,
    /// The fit's input scale (NaN for a kind without one).
    pub scale: f64,
    /// The fit's held-out relative gradient error (NaN if unknown).
    pub holdout_gradient_error: f64,
}

/// The surrogate of `settings` fitted before sampling ([`SurrogateSettings::before_sampling`]);
/// `None` otherwise.
pub fn precompute(settings: &SurrogateSettings, model: &dyn Model) -> Result<Option<Precomputed>> {
    if !settings.before_sampling() {
        return Ok(None);
    }
    let (fitted, training) = match settings.laplace_states() {
        Some(states) => {
            let (fitted, training) = laplace_training::fit(settings, model, states)?;
            (fitted, Some(Arc::new(training)))
        }
        None => {
            // A grid's nodes (and its box's Hessian) are one batch: on every instance of a
            // served model.
            let box_only = TrainingSet::new(model.dim());
            let fit = || settings.fitter().fit(model, &box_only);
            (crate::batch::spread(model.concurrency(), fit)??, None)
        }
    };
    Ok(Some(Precomputed {
        surrogate: Arc::from(fitted.surrogate),
        evaluations: fitted.exact_evaluations,
        seconds: fitted.seconds,
        training,
        scale: fitted.scale,
        holdout_gradient_error: fitted.holdout_gradient_error,
    }))
}

/// The estimated `KL ≤ 2‖U − Ũ‖∞` of accepting with `surrogate`'s own `Ũ`, when `settings` do
/// (a grid's complete variant) and the kind estimates its error.
fn kl_bound(settings: &SurrogateSettings, surrogate: &dyn Surrogate) -> Option<f64> {
    settings
        .approximate_acceptance
        .then(|| surrogate.sup_error_estimate())
        .flatten()
        .map(|e| 2.0 * e)
}

/// RNS-HMC and ARNS-HMC's surrogate machinery for one chain on the exact potential of
/// lifetime `'m`.
pub struct FittedPhase<'m> {
    adaptive: bool,
    settings: SurrogateSettings,
    /// Warmup iterations before states are collected ([`SurrogateSettings::collect_after`]).
    collect_after: usize,
    /// The warmup iterations after which the surrogate is fitted and proposes, when that is
    /// before the end of warmup ([`crate::sampler::Method::exact_warmup`]).
    exact_warmup: Option<usize>,
    exact: &'m (dyn Potential + Sync),
    training: TrainingSet,
    /// The surrogate, once fitted (or loaded), with the exact potential outside its domain.
    proposal: Option<Fallback<'m>>,
    /// ARNS-HMC: the iterations since the surrogate began learning online, which set the
    /// probability `t^(−κ)` of swapping its updated fit into the proposal.
    online_since: Option<u64>,
    report: SurrogateReport,
}

impl<'m> FittedPhase<'m> {
    /// The phase of RNS-HMC (`adaptive`: of ARNS-HMC) with `settings` on the exact potential
    /// `exact`, in a warmup of `warmup` iterations whose exact part ends after `exact_warmup`
    /// (`None`: at its end). A saved surrogate is loaded here; a precomputed one proposes from
    /// the start.
    pub fn new(
        adaptive: bool,
        settings: &SurrogateSettings,
        (warmup, exact_warmup): (usize, Option<usize>),
        exact: &'m (dyn Potential + Sync),
        precomputed: Option<&Precomputed>,
    ) -> Result<Self> {
        let mut report = SurrogateReport::default();
        let proposal = match (&settings.surrogate_file, precomputed) {
            (None, Some(p)) => {
                report.training_seconds = p.seconds;
                report.extra_exact_evaluations = p.evaluations;
                report.scale = p.scale;
                report.holdout_gradient_error = p.holdout_gradient_error;
                report.training_states = p.training.as_ref().map_or(0, |t| t.len());
                report.started_at = Some(0);
                report.precompute = Some(Precompute {
                    evaluations: p.evaluations,
                    seconds: p.seconds,
                    before_sampling: true,
                });
                report.kl_bound_estimate = kl_bound(settings, p.surrogate.as_ref());
                Some(Fallback::new(Held::Shared(Arc::clone(&p.surrogate)), exact))
            }
            (Some(path), _) => {
                let (surrogate, meta) = kinds::load(path, exact.dim())?;
                report.scale = meta.scale;
                report.holdout_gradient_error = meta.holdout_gradient_error;
                report.started_at = Some(0);
                Some(Fallback::new(surrogate.into(), exact))
            }
            (None, None) => None,
        };
        Ok(Self {
            adaptive,
            settings: settings.clone(),
            collect_after: settings.collect_after(warmup, exact_warmup),
            exact_warmup,
            exact,
            // A network precomputed on states chooses its trajectories at them.
            training: precomputed
                .and_then(|p| p.training.as_deref().cloned())
                .unwrap_or_else(|| TrainingSet::new(exact.dim())),
            proposal,
            online_since: None,
            report,
        })
    }

    /// The batch fit on the collected states; for ARNS-HMC also the start of online learning,
    /// whose replay of the collected states leaves the same fit of them.
    ///
    /// ARNS-HMC starts proposing only once the held-out gradient error is at most
    /// `start_error` (or warmup ends): a poor early surrogate is accepted so rarely that few new
    /// states arrive to improve it. Until then it keeps exact HMC and tries again with half as
    /// many states again. Returns whether the surrogate now proposes.
    fn fit(&mut self, i: usize, last: bool) -> Result<bool> {
        if self.training.len() < MIN_TRAINING_STATES {
            return Err(Error::setting(
                "train_after",
                format!(
                    "({}) leaves only {} accepted warmup states to train the surrogate on (at \
                     least {MIN_TRAINING_STATES}): lower it or lengthen the warmup",
                    self.collect_after,
                    self.training.len()
                ),
            ));
        }
        let fitted = self.settings.fitter().fit(self.exact, &self.training)?;
        self.report.training_seconds += fitted.seconds;
        self.report.extra_exact_evaluations += fitted.exact_evaluations;
        if fitted.exact_evaluations > 0 {
            self.report.precompute = Some(Precompute {
                evaluations: fitted.exact_evaluations,
                seconds: fitted.seconds,
                before_sampling: false,
            });
        }
        self.report.kl_bound_estimate = kl_bound(&self.settings, fitted.surrogate.as_ref());
        let good_enough = fitted.holdout_gradient_error <= self.settings.start_error;
        if self.adaptive && !last && !good_enough {
            self.settings.start_after = self.training.len() * 3 / 2;
            return Ok(false);
        }
        self.report.training_states = self.training.len();
        self.report.scale = fitted.scale;
        self.report.holdout_gradient_error = fitted.holdout_gradient_error;
        self.report.started_at = Some(i + 1);
        let mut surrogate = fitted.surrogate;
        // A fit at the end of warmup gets no online updates: the batch fit is the one the
        // replay would give (the ridge fit of the same states), so the replay is skipped.
        if self.adaptive
            && !last
            && let Some(online) = surrogate.online()
        {
            let start = Instant::now();
            online.begin(&self.training)?;
            online.publish()?;
            let seconds = start.elapsed().as_secs_f64();
            self.report.online_updates += self.training.len() as u64;
            self.report.online_seconds += seconds;
            self.report.training_seconds += seconds;
            self.online_since = Some(0);
        }
        self.proposal = Some(Fallback::new(surrogate.into(), self.exact));
        Ok(true)
    }
}

impl Proposer for FittedPhase<'_> {
    fn proposal(&self) -> Option<&dyn Potential> {
        self.proposal.as_ref().map(|p| p as &dyn Potential)
    }

    fn fallback(&self) -> Option<&Fallback<'_>> {
        self.proposal.as_ref()
    }

    /// A multiple of `base`, or (`Auto`) the range the fitted surrogate's curvature predicts
    /// mixes best, reported; `base` where no prediction applies (a loaded surrogate, which has
    /// no training states, a kind without curvature, or a curvature that is not positive
    /// definite).
    fn trajectory(&mut self, base: Steps, inv_mass: &[f64], step_size: f64) -> Steps {
        match self.settings.trajectory {
            SurrogateSteps::Factor(k) => return lengthen(base, k),
            // NUTS's trees find their own lengths.
            SurrogateSteps::Nuts => {
                self.report.nuts_trees = true;
                return base;
            }
            SurrogateSteps::Auto => {}
        }
        let chosen = self
            .proposal
            .as_ref()
            .and_then(|p| p.surrogate.curvature())
            .and_then(|curvature| {
                choose_steps(
                    curvature,
                    &self.training,
                    inv_mass,
                    step_size,
                    AUTO_CAP_FACTOR * base.max(),
                )
            });
        self.report.trajectory = chosen;
        chosen.map_or(base, |c| c.steps)
    }

    /// The grids' "complete" variant: the MH step judges with the proposal's own `Û`.
    fn approximate(&self) -> bool {
        self.settings.approximate_acceptance
    }

    fn report(&self) -> &SurrogateReport {
        &self.report
    }

    /// ARNS-HMC, once learning online: the batch states it replayed and every state learned
    /// since (its proposal swaps these updates in at random times, so it may lag a little).
    fn learned(&self) -> usize {
        match self.online_since {
            Some(_) => self.report.online_updates as usize,
            None => self.report.training_states,
        }
    }

    fn surrogate(&self) -> Option<&dyn Surrogate> {
        self.proposal.as_ref().map(|p| &*p.surrogate)
    }

    fn take_outside(&self) -> u64 {
        self.proposal.as_ref().map_or(0, Fallback::take_outside)
    }

    fn for_resume(&self) -> ForResume<'_> {
        let precomputed = self.report.precompute.is_some_and(|p| p.before_sampling);
        match self.surrogate() {
            Some(surrogate) if !precomputed => ForResume::Save(surrogate),
            _ => ForResume::Rebuilt,
        }
    }

    fn into_surrogate(self: Box<Self>) -> Option<Box<dyn Surrogate>> {
        self.proposal.map(|p| p.surrogate.into_box())
    }

    /// Collects the accepted states of the exact phase (their `U` and exact `∇U` are in
    /// `state`), fits when due, and for ARNS-HMC lets the surrogate learn online afterwards
    /// (from `U` alone: once the surrogate proposes, the gradient a state holds is its own).
    fn observe(
        &mut self,
        _model: &dyn Potential,
        i: usize,
        warmup: usize,
        state: &State<Dyn>,
        accepted: bool,
        rng: &mut Pcg64,
    ) -> Result<bool> {
        if i >= warmup || self.settings.surrogate_file.is_some() {
            return Ok(false);
        }
        let last = i + 1 == warmup;
        if self.proposal.is_none() {
            if accepted && i >= self.collect_after {
                self.training.push(
                    state.position.as_slice(),
                    state.potential,
                    Some(state.gradient.as_slice()),
                );
            }
            let ready = if self.adaptive {
                self.training.len() >= self.settings.start_after || last
            } else {
                last || self.exact_warmup == Some(i + 1)
            };
            return if ready { self.fit(i, last) } else { Ok(false) };
        }
        let (Some(since), Some(proposal)) = (self.online_since.as_mut(), self.proposal.as_mut())
        else {
            return Ok(false);
        };
        let Some(online) = proposal.surrogate.online() else {
            return Ok(false);
        };
        if accepted {
            let start = Instant::now();
            online.learn(state.position.as_slice(), state.potential, None)?;
            let seconds = start.elapsed().as_secs_f64();
            self.report.online_updates += 1;
            self.report.online_seconds += seconds;
            self.report.training_seconds += seconds;
        }
        *since += 1;
        let swap = last || uniform(rng) < adaptation_probability(*since, self.settings.adapt_rate);
        if swap {
            online.publish()?;
            self.report.swaps += 1;
        }
        Ok(swap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::gaussian::CorrelatedGaussian;
    use crate::random::chain_rng;
    use crate::surrogates::SurrogateKind;
    use crate::surrogates::network::{NetworkFitter, Scale, TrainOptions};
    use nalgebra::DVector;
    use shmc_core::Exact;
    use shmc_core::random::fill_standard_normal;

    /// ARNS-HMC fits once `start_after` states are collected, then learns online from every
    /// accepted state until warmup ends, when the online fit is swapped in for certain: its
    /// proposal is then, bit for bit, the surrogate fitted to the first states that learned
    /// the rest.
    #[test]
    fn arns_proposes_its_first_fit_learned_on_to_the_end_of_warmup() {
        let model = CorrelatedGaussian::new(3, 1.0, 0.5).unwrap();
        let settings = SurrogateSettings {
            kind: SurrogateKind::Network(NetworkFitter::potential(TrainOptions {
                hidden: 40,
                ridge: 1e-3,
                scale: Scale::Fixed(2.0),
                ..TrainOptions::default()
            })),
            train_after: Some(0),
            start_after: 50,
            start_error: f64::INFINITY,
            ..SurrogateSettings::default()
        };
        let (warmup, start_after) = (200, settings.start_after);
        let mut phase = FittedPhase::new(true, &settings, (warmup, None), &model, None).unwrap();
        let mut rng = chain_rng(5, 0);
        let mut states = Vec::new();
        for i in 0..warmup {
            let mut q = vec![0.0; 3];
            fill_standard_normal(&mut rng, &mut q);
            let state = State::new(DVector::from_column_slice(&q), &Exact(&model)).unwrap();
            phase
                .observe(&model, i, warmup, &state, true, &mut rng)
                .unwrap();
            states.push((q, state.potential, state.gradient.as_slice().to_vec()));
        }
        assert_eq!(phase.report.started_at, Some(start_after));
        assert_eq!(phase.report.training_states, start_after);
        assert_eq!(phase.report.online_updates, warmup as u64);
        assert!(phase.report.swaps >= 1);

        let mut first = TrainingSet::new(3);
        for (q, u, g) in &states[..start_after] {
            first.push(q, *u, Some(g));
        }
        let mut reference = settings.fitter().fit(&model, &first).unwrap().surrogate;
        let online = reference.online().unwrap();
        online.begin(&first).unwrap();
        for (q, u, _) in &states[start_after..] {
            online.learn(q, *u, None).unwrap();
        }
        online.publish().unwrap();
        let proposal = phase.proposal().unwrap();
        let (mut got, mut want) = ([0.0; 3], [0.0; 3]);
        for (q, _, _) in states.iter().step_by(20) {
            let (a, b) = (
                proposal.value_and_gradient(q, &mut got),
                reference.value_and_gradient(q, &mut want),
            );
            assert_eq!(a.to_bits(), b.to_bits());
            assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits));
        }
    }
}
