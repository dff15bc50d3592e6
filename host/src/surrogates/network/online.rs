//! The network's online learning: its output weights go on being fitted one state at a time,
//! in O(s²) per state, as the batch fit they continue would fit them. A potential fit goes on by
//! Greville's recursion on the potential values (ARNS-HMC), a gradient fit by online score
//! matching on the exact gradients (VHMC). Both start by replaying the batch fit's states, so
//! that their weights are the ridge fit of those states and every state since.

use shmc_core::{Dyn, OnlineGreville, OnlineScoreMatching};

use super::options::DynNetwork;
use crate::surrogates::FitMethod;
use crate::surrogates::states::TrainingSet;
use crate::{Error, Result};

/// The online fit of a network's output weights.
#[derive(Clone, Debug)]
pub(super) enum OnlineFit {
    /// Of the potential values.
    Values(ValueFit),
    /// Of the gradients.
    Gradients(OnlineScoreMatching<Dyn, Dyn>),
}

/// Greville's recursion on the potential values. Features and targets are centred by the batch
/// states' means `h̄` and `t̄` (held fixed): units that vary slowly over the posterior are nearly
/// constant, and uncentred they make the recursion badly conditioned. The network then has
/// `z = v·(h − h̄) + t̄`, i.e. bias `t̄ − h̄·v` (the bias does not change the gradient).
#[derive(Clone, Debug)]
pub(super) struct ValueFit {
    greville: OnlineGreville<Dyn>,
    mean_features: Vec<f64>,
    mean_target: f64,
    features: Vec<f64>,
}

impl ValueFit {
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

impl OnlineFit {
    /// The online continuation of a `method` fit of `network` on `states` with ridge `ridge`,
    /// `states` replayed.
    pub(super) fn begin(
        method: FitMethod,
        network: &DynNetwork,
        states: &TrainingSet,
        ridge: f64,
    ) -> Result<Self> {
        let (hidden, n) = (network.hidden(), states.len());
        match method {
            FitMethod::Potential => {
                let mut rows = vec![0.0; n * hidden];
                for (j, row) in rows.chunks_exact_mut(hidden).enumerate() {
                    network.features(states.position(j), row);
                }
                let mut mean_features = vec![0.0; hidden];
                for row in rows.chunks_exact(hidden) {
                    for (m, h) in mean_features.iter_mut().zip(row) {
                        *m += h / n as f64;
                    }
                }
                let mean_target = (0..n).map(|j| states.potential(j)).sum::<f64>() / n as f64;
                let mut fit = ValueFit {
                    greville: OnlineGreville::ridge(Dyn(hidden), ridge)?,
                    mean_features,
                    mean_target,
                    features: vec![0.0; hidden],
                };
                for (j, row) in rows.chunks_exact(hidden).enumerate() {
                    fit.features.copy_from_slice(row);
                    fit.add(states.potential(j));
                }
                Ok(Self::Values(fit))
            }
            FitMethod::Score => {
                let mut matcher = OnlineScoreMatching::new(Dyn(network.dim()), Dyn(hidden), ridge)?;
                for j in 0..n {
                    matcher.update_from_network(
                        network,
                        states.position(j),
                        gradient(states.gradient(j))?,
                    )?;
                }
                Ok(Self::Gradients(matcher))
            }
        }
    }

    /// Adds the state `q` with exact potential `u` and, when known, exact gradient (a gradient
    /// fit needs it).
    pub(super) fn learn(
        &mut self,
        network: &DynNetwork,
        q: &[f64],
        u: f64,
        exact_gradient: Option<&[f64]>,
    ) -> Result<()> {
        match self {
            Self::Values(fit) => {
                network.features(q, &mut fit.features);
                fit.add(u);
            }
            Self::Gradients(matcher) => {
                matcher.update_from_network(network, q, gradient(exact_gradient)?)?;
            }
        }
        Ok(())
    }

    /// The output weights and bias of the fit so far (a gradient fit leaves the level at 0).
    pub(super) fn output(&self) -> (&[f64], f64) {
        match self {
            Self::Values(fit) => (fit.greville.weights(), fit.bias()),
            Self::Gradients(matcher) => (matcher.weights(), 0.0),
        }
    }
}

/// The exact gradient a gradient fit needs of every state.
fn gradient(g: Option<&[f64]>) -> Result<&[f64]> {
    g.ok_or_else(|| Error::invalid("score matching needs the exact gradient of every state"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::chain_rng;
    use crate::surrogates::network::{Scale, TrainOptions, fit_potential};
    use nalgebra::{DMatrix, DVector};
    use shmc_core::Potential;
    use shmc_core::random::fill_standard_normal;

    /// ARNS-HMC's online weights, begun on a batch fit's 50 states and learning 150 more, equal
    /// the ridge fit of all 200 (with the same centring) to 1e-6 relative: the recursion is
    /// exact, so only rounding separates them.
    #[test]
    fn value_fit_equals_the_batch_ridge_fit_of_the_same_states() {
        let model = crate::models::gaussian::CorrelatedGaussian::new(3, 1.0, 0.5).unwrap();
        let ridge = 1e-3;
        let mut rng = chain_rng(5, 0);
        let states: Vec<(Vec<f64>, f64)> = (0..200)
            .map(|_| {
                let mut q = vec![0.0; 3];
                fill_standard_normal(&mut rng, &mut q);
                let u = model.value(&q);
                (q, u)
            })
            .collect();
        let mut first = TrainingSet::new(3);
        for (q, u) in &states[..50] {
            first.push(q, *u, None);
        }
        let options = TrainOptions {
            hidden: 40,
            ridge,
            scale: Scale::Fixed(2.0),
            ..TrainOptions::default()
        };
        let network = fit_potential(&first, &options).unwrap().network;
        let mut online = OnlineFit::begin(FitMethod::Potential, &network, &first, ridge).unwrap();
        for (q, u) in &states[50..] {
            online.learn(&network, q, *u, None).unwrap();
        }
        let OnlineFit::Values(fit) = &online else {
            panic!("a potential fit goes on with Greville's recursion")
        };
        let s = network.hidden();
        let mut h = DMatrix::<f64>::zeros(states.len(), s);
        let mut t = DVector::<f64>::zeros(states.len());
        let mut row = vec![0.0; s];
        for (j, (q, u)) in states.iter().enumerate() {
            network.features(q, &mut row);
            for k in 0..s {
                h[(j, k)] = row[k] - fit.mean_features[k];
            }
            t[j] = u - fit.mean_target;
        }
        let normal = h.transpose() * &h + DMatrix::identity(s, s) * ridge;
        let batch = normal.cholesky().unwrap().solve(&(h.transpose() * t));
        let (weights, bias) = online.output();
        let got = DVector::from_column_slice(weights);
        let rel = (&got - &batch).norm() / batch.norm();
        assert!(rel < 1e-6, "relative difference {rel}");
        // The bias goes with the weights, `t̄ − h̄·v`: off from the batch one by at most
        // |h̄|·|Δv| (Cauchy–Schwarz), with |Δv| below the bound just checked.
        let mean_features = DVector::from_column_slice(&fit.mean_features);
        let batch_bias = fit.mean_target - batch.dot(&mean_features);
        let bound = 1e-6 * batch.norm() * mean_features.norm();
        assert!(
            (bias - batch_bias).abs() <= bound,
            "{bias} vs {batch_bias} (bound {bound})"
        );
    }

    /// A gradient fit cannot learn a state without its exact gradient: a clear error.
    #[test]
    fn score_matching_needs_the_gradient() {
        let mut set = TrainingSet::new(2);
        let mut rng = chain_rng(6, 0);
        for _ in 0..30 {
            let mut q = vec![0.0; 2];
            fill_standard_normal(&mut rng, &mut q);
            set.push(&q, 0.5 * (q[0] * q[0] + q[1] * q[1]), Some(&q.clone()));
        }
        let options = TrainOptions {
            hidden: 10,
            scale: Scale::Fixed(1.0),
            ..TrainOptions::default()
        };
        let network = crate::surrogates::network::fit_score(&set, &options)
            .unwrap()
            .network;
        let mut online = OnlineFit::begin(FitMethod::Score, &network, &set, 1e-3).unwrap();
        online
            .learn(&network, &[0.1, 0.2], 0.025, Some(&[0.1, 0.2]))
            .unwrap();
        let message = online
            .learn(&network, &[0.1, 0.2], 0.025, None)
            .unwrap_err()
            .to_string();
        assert!(message.contains("exact gradient"), "{message}");
    }
}
