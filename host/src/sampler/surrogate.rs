//! The surrogate side of a chain: what a chain asks of a surrogate method ([`Proposer`]), and
//! RNS-HMC and ARNS-HMC's side of it ([`NetworkPhase`]: collecting warmup states, training the
//! network, updating it online, deciding when the proposal changes). VHMC's is in
//! [`super::variational`].
//!
//! The state the chain is in is never touched here; when the proposal changes, the chain
//! refreshes only the cached proposal gradient (the exact `U` it holds stays valid).

use std::cell::RefCell;
use std::time::Instant;

use rand_pcg::Pcg64;
use shmc_core::random::uniform;
use shmc_core::schedule::adaptation_probability;
use shmc_core::{Dyn, Dynamics, OnlineGreville, Potential, State, Steps};

use super::method::{Method, SurrogateSettings};
use super::trajectory::{
    AUTO_CAP_FACTOR, SurrogateSteps, TrajectoryChoice, choose_steps, lengthen,
};
use super::variational::VhmcPhase;
use crate::surrogates::FitMethod;
use crate::surrogates::network::{DynNetwork, fit_potential, fit_score, load_network};
use crate::surrogates::states::TrainingSet;
use crate::{Error, Result};

/// What a chain needs from a surrogate method: the proposal potential (once there is one), how
/// the Metropolis–Hastings step judges it, and a look at every warmup transition.
pub trait Proposer: Send {
    /// The potential whose gradient drives the leapfrog, once there is one (before: exact HMC).
    fn proposal(&self) -> Option<&dyn Potential>;

    /// Whether the MH step uses the proposal potential itself instead of the exact `U`
    /// (VHMC's published rule): the chain then targets `exp(−V)`, an approximation.
    fn approximate(&self) -> bool {
        false
    }

    /// Whether step-size and metric adaptation go on while the surrogate proposes (VHMC, which
    /// proposes from the first iteration); otherwise they stop when it starts.
    fn adapts_while_proposing(&self) -> bool {
        false
    }

    /// Where the chain should start instead of a random point, if the method knows better.
    fn initial_position(&self, _rng: &mut Pcg64) -> Option<Vec<f64>> {
        None
    }

    /// The trajectory lengths of surrogate proposals, given the exact phase's `base` and the
    /// metric and step size the surrogate starts proposing with.
    fn trajectory(&mut self, base: Steps, _inv_mass: &[f64], _step_size: f64) -> Steps {
        base
    }

    /// Learns from warmup iteration `i` (of `warmup`), which left the chain in `state`
    /// (`accepted`: by a new proposal). Returns whether the proposal changed, so that the chain
    /// refreshes what it caches of it.
    fn observe(
        &mut self,
        model: &dyn Potential,
        i: usize,
        warmup: usize,
        state: &State<Dyn>,
        accepted: bool,
        rng: &mut Pcg64,
    ) -> Result<bool>;

    /// Where to keep the exact gradient of each end point, for a method that learns from the
    /// exact gradients of accepted states (the chain then proposes with [`Recording`]).
    fn end_gradient(&self) -> Option<&RefCell<EndGradient>> {
        None
    }

    /// The cost and fit so far.
    fn report(&self) -> &SurrogateReport;

    /// The trained network, if any.
    fn into_network(self: Box<Self>) -> Option<DynNetwork>;
}

/// The exact gradient at the latest exact end point, and where it was taken.
#[derive(Clone, Debug, Default)]
pub struct EndGradient {
    /// The end point.
    pub position: Vec<f64>,
    /// `∇U` there.
    pub gradient: Vec<f64>,
}

/// Surrogate proposals judged by the exact `U` whose end point evaluates `U` and `∇U` in one
/// fused pass and keeps `∇U` in `record`. A method that learns from the exact gradients of
/// accepted states then pays a fraction of a pass for each (the fused kernel's extra over `U`
/// alone) instead of a separate gradient pass.
pub struct Recording<'a> {
    /// The exact potential (MH step).
    pub target: &'a dyn Potential,
    /// The potential whose gradient drives the leapfrog.
    pub proposal: &'a dyn Potential,
    /// Where the end point's exact gradient goes.
    pub record: &'a RefCell<EndGradient>,
}

impl Dynamics for Recording<'_> {
    fn dim(&self) -> usize {
        self.target.dim()
    }

    fn proposal_gradient(&self, q: &[f64], grad: &mut [f64]) {
        self.proposal.gradient(q, grad);
    }

    fn end_point(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let mut record = self.record.borrow_mut();
        let EndGradient { position, gradient } = &mut *record;
        position.clear();
        position.extend_from_slice(q);
        gradient.resize(q.len(), 0.0);
        let u = self.target.value_and_gradient(q, gradient);
        self.proposal.gradient(q, grad);
        u
    }
}

/// The surrogate machinery of `method` for a chain that starts at `start`, or `None` for exact
/// HMC. A saved surrogate is loaded here; VHMC finds its Laplace approximation here.
pub fn proposer(
    method: &Method,
    model: &dyn Potential,
    start: &[f64],
) -> Result<Option<Box<dyn Proposer>>> {
    Ok(match method {
        Method::Hmc => None,
        Method::Vhmc(settings) => Some(Box::new(VhmcPhase::new(settings, model, start)?)),
        Method::RnsHmc(_) | Method::ArnsHmc(_) => {
            NetworkPhase::new(method, model.dim())?.map(|p| Box::new(p) as Box<dyn Proposer>)
        }
    })
}

/// The fewest collected states a fit accepts.
const MIN_TRAINING_STATES: usize = 20;

/// What the surrogate cost and how well it fits, for the output.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SurrogateReport {
    /// States the batch fit used.
    pub training_states: usize,
    /// Seconds spent fitting (batch fit, scale selection, online updates).
    pub training_seconds: f64,
    /// The chosen input scale factor.
    pub scale: f64,
    /// Relative RMS error of the surrogate's gradient on held-out states.
    pub holdout_gradient_error: f64,
    /// Online (Greville) updates made.
    pub online_updates: u64,
    /// Seconds spent in online updates (part of `training_seconds`).
    pub online_seconds: f64,
    /// Times the updated weights were swapped into the proposal.
    pub swaps: u64,
    /// The warmup iteration at which the surrogate started proposing (`None`: never).
    pub started_at: Option<usize>,
    /// Exact evaluations made only for training, beyond those of the chain's own transitions
    /// (VHMC: the MAP search and its Hessian, the pilot states, the score-matching targets).
    pub extra_exact_evaluations: u64,
    /// The trajectory lengths chosen from the surrogate's curvature, if they were.
    pub trajectory: Option<TrajectoryChoice>,
}

/// Online Greville state of ARNS-HMC. Features and targets are centred by the batch training
/// set's means `h̄` and `t̄` (held fixed): units that vary slowly over the posterior are nearly
/// constant, and uncentred they make the recursion badly conditioned. The network then has
/// `z = v·(h − h̄) + t̄`, i.e. bias `t̄ − h̄·v` (the bias does not change the gradient).
struct Online {
    greville: OnlineGreville<Dyn>,
    mean_features: Vec<f64>,
    mean_target: f64,
    features: Vec<f64>,
    since_start: u64,
}

impl Online {
    /// Adds the state with features `self.features` (uncentred) and potential `u`.
    fn add(&mut self, u: f64) {
        for (h, m) in self.features.iter_mut().zip(&self.mean_features) {
            *h -= m;
        }
        self.greville.update(&self.features, u - self.mean_target);
    }

    /// The bias that goes with the current weights.
    fn bias(&self) -> f64 {
        let v = self.greville.weights();
        self.mean_target
            - v.iter()
                .zip(&self.mean_features)
                .map(|(a, b)| a * b)
                .sum::<f64>()
    }
}

/// RNS-HMC and ARNS-HMC's surrogate machinery for one chain.
pub struct NetworkPhase {
    adaptive: bool,
    settings: SurrogateSettings,
    training: TrainingSet,
    network: Option<DynNetwork>,
    online: Option<Online>,
    /// What the output reports.
    pub report: SurrogateReport,
}

impl NetworkPhase {
    /// The phase for `method`, or `None` for other methods. A saved surrogate is loaded here.
    pub fn new(method: &Method, dim: usize) -> Result<Option<Self>> {
        let (adaptive, settings) = match method {
            Method::Hmc | Method::Vhmc(_) => return Ok(None),
            Method::RnsHmc(s) => (false, s.clone()),
            Method::ArnsHmc(s) => (true, s.clone()),
        };
        let mut report = SurrogateReport::default();
        let network = match &settings.surrogate_file {
            Some(path) => {
                let (network, meta) = load_network(path, dim)?;
                report.scale = meta.scale;
                report.holdout_gradient_error = meta.holdout_gradient_error;
                report.started_at = Some(0);
                Some(network)
            }
            None => None,
        };
        Ok(Some(Self {
            adaptive,
            settings,
            training: TrainingSet::new(dim),
            network,
            online: None,
            report,
        }))
    }

    /// The batch fit on the collected states; for ARNS-HMC also the online state, replaying the
    /// collected rows so that its weights are the ridge fit of the same states.
    ///
    /// ARNS-HMC starts proposing only once the held-out gradient error is at most
    /// `start_error` (or warmup ends): a poor early surrogate is accepted so rarely that few new
    /// states arrive to improve it. Until then it keeps exact HMC and tries again with half as
    /// many states again. Returns whether the surrogate now proposes.
    fn fit(&mut self, i: usize, last: bool) -> Result<bool> {
        if self.training.len() < MIN_TRAINING_STATES {
            return Err(Error::invalid(format!(
                "only {} accepted warmup states after --train-after {} to train the surrogate on \
                 (at least {MIN_TRAINING_STATES}): lengthen --warmup or lower --train-after",
                self.training.len(),
                self.settings.train_after
            )));
        }
        let trained = match self.settings.fit {
            FitMethod::Potential => fit_potential(&self.training, &self.settings.train)?,
            FitMethod::Score => fit_score(&self.training, &self.settings.train)?,
        };
        self.report.training_seconds += trained.seconds;
        let good_enough = trained.holdout_gradient_error <= self.settings.start_error;
        if self.adaptive && !last && !good_enough {
            self.settings.start_after = self.training.len() * 3 / 2;
            return Ok(false);
        }
        self.report.training_states = self.training.len();
        self.report.scale = trained.scale;
        self.report.holdout_gradient_error = trained.holdout_gradient_error;
        self.report.started_at = Some(i + 1);
        let mut network = trained.network;
        // A fit at the end of warmup gets no online updates: the batch weights are the ones the
        // replay would give (the ridge fit of the same states), so the replay is skipped.
        if self.adaptive && !last {
            let start = Instant::now();
            let hidden = network.hidden();
            let n = self.training.len();
            let mut rows = vec![0.0; n * hidden];
            for (j, row) in rows.chunks_exact_mut(hidden).enumerate() {
                network.features(self.training.position(j), row);
            }
            let mut mean_features = vec![0.0; hidden];
            for row in rows.chunks_exact(hidden) {
                for (m, h) in mean_features.iter_mut().zip(row) {
                    *m += h / n as f64;
                }
            }
            let mean_target = (0..n).map(|j| self.training.potential(j)).sum::<f64>() / n as f64;
            let mut online = Online {
                greville: OnlineGreville::ridge(Dyn(hidden), self.settings.train.ridge)?,
                mean_features,
                mean_target,
                features: vec![0.0; hidden],
                since_start: 0,
            };
            for (j, row) in rows.chunks_exact(hidden).enumerate() {
                online.features.copy_from_slice(row);
                online.add(self.training.potential(j));
            }
            network.set_output(online.greville.weights(), online.bias())?;
            let seconds = start.elapsed().as_secs_f64();
            self.report.online_updates += n as u64;
            self.report.online_seconds += seconds;
            self.report.training_seconds += seconds;
            self.online = Some(online);
        }
        self.network = Some(network);
        Ok(true)
    }
}

impl Proposer for NetworkPhase {
    fn proposal(&self) -> Option<&dyn Potential> {
        self.network.as_ref().map(|n| n as &dyn Potential)
    }

    /// A multiple of `base`, or (`Auto`) the range the fitted network's curvature predicts
    /// mixes best, reported; `base` where no prediction applies (a loaded surrogate, which has
    /// no training states, or a curvature that is not positive definite).
    fn trajectory(&mut self, base: Steps, inv_mass: &[f64], step_size: f64) -> Steps {
        if let SurrogateSteps::Factor(k) = self.settings.trajectory {
            return lengthen(base, k);
        }
        let chosen = self.network.as_ref().and_then(|network| {
            choose_steps(
                network,
                &self.training,
                inv_mass,
                step_size,
                AUTO_CAP_FACTOR * base.max(),
            )
        });
        self.report.trajectory = chosen;
        chosen.map_or(base, |c| c.steps)
    }

    fn report(&self) -> &SurrogateReport {
        &self.report
    }

    fn into_network(self: Box<Self>) -> Option<DynNetwork> {
        self.network
    }

    /// Collects the accepted states of the exact phase (their `U` and exact `∇U` are in
    /// `state`), fits when due, and for ARNS-HMC updates the weights online afterwards.
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
        let exact_gradient = self.network.is_none();
        if accepted && i >= self.settings.train_after && exact_gradient {
            self.training.push(
                state.position.as_slice(),
                state.potential,
                Some(state.gradient.as_slice()),
            );
        }
        let last = i + 1 == warmup;
        if self.network.is_none() {
            let ready = if self.adaptive {
                self.training.len() >= self.settings.start_after || last
            } else {
                last
            };
            if ready {
                return self.fit(i, last);
            }
            return Ok(false);
        }
        if !self.adaptive {
            return Ok(false);
        }
        let online = self
            .online
            .as_mut()
            .expect("the adaptive phase has its online state");
        if accepted {
            let start = Instant::now();
            let network = self.network.as_ref().expect("checked above");
            network.features(state.position.as_slice(), &mut online.features);
            online.add(state.potential);
            let seconds = start.elapsed().as_secs_f64();
            self.report.online_updates += 1;
            self.report.online_seconds += seconds;
            self.report.training_seconds += seconds;
        }
        online.since_start += 1;
        let swap = last
            || uniform(rng) < adaptation_probability(online.since_start, self.settings.adapt_rate);
        if swap {
            let network = self.network.as_mut().expect("checked above");
            network.set_output(online.greville.weights(), online.bias())?;
            self.report.swaps += 1;
        }
        Ok(swap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::gaussian::CorrelatedGaussian;
    use crate::surrogates::network::{Scale, TrainOptions};
    use nalgebra::{DMatrix, DVector};
    use shmc_core::Exact;
    use shmc_core::random::fill_standard_normal;

    /// ARNS-HMC's online weights after a batch start and online updates equal the ridge fit of
    /// all the same states (with the same centring) to 1e-6 relative.
    #[test]
    fn online_weights_equal_the_batch_ridge_fit_of_the_same_states() {
        let model = CorrelatedGaussian::new(3, 1.0, 0.5).unwrap();
        let ridge = 1e-3;
        let settings = SurrogateSettings {
            train: TrainOptions {
                hidden: 40,
                ridge,
                scale: Scale::Fixed(2.0),
                ..TrainOptions::default()
            },
            train_after: 0,
            start_after: 50,
            ..SurrogateSettings::default()
        };
        let mut phase = NetworkPhase::new(&Method::ArnsHmc(settings), 3)
            .unwrap()
            .unwrap();
        let mut rng = crate::random::chain_rng(5, 0);
        let mut states = Vec::new();
        for i in 0..200 {
            let mut q = vec![0.0; 3];
            fill_standard_normal(&mut rng, &mut q);
            let state = State::new(DVector::from_column_slice(&q), &Exact(&model)).unwrap();
            phase
                .observe(&model, i, 1000, &state, true, &mut rng)
                .unwrap();
            states.push((q, state.potential));
        }
        let online = phase.online.as_ref().expect("online phase started");
        let network = phase.network.as_ref().unwrap();
        let s = network.hidden();
        let mut h = DMatrix::<f64>::zeros(states.len(), s);
        let mut t = DVector::<f64>::zeros(states.len());
        let mut row = vec![0.0; s];
        for (j, (q, u)) in states.iter().enumerate() {
            network.features(q, &mut row);
            for k in 0..s {
                h[(j, k)] = row[k] - online.mean_features[k];
            }
            t[j] = u - online.mean_target;
        }
        let normal = h.transpose() * &h + DMatrix::identity(s, s) * ridge;
        let batch = normal.cholesky().unwrap().solve(&(h.transpose() * t));
        let got = DVector::from_column_slice(online.greville.weights());
        let rel = (&got - &batch).norm() / batch.norm();
        assert!(rel < 1e-6, "relative difference {rel}");
        assert_eq!(phase.report.online_updates, 200);
    }
}
