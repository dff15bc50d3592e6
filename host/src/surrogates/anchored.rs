//! A surrogate for a posterior in the standard coordinates of its Laplace approximation (the
//! chains' coordinates under the Laplace metric, [`crate::whitening`]): the quadratic the
//! approximation says `U` is there, `u₀ + g₀·x + ½‖x‖²`, plus a random network fitted to what
//! the quadratic misses.
//!
//! Near-Gaussian posteriors are almost all quadratic: on the logistic-regression simulation
//! (d = 50, N = 20 000) the quadratic alone has a relative gradient error of 0.012 at draws of
//! the approximation, and with a residual network of 100–500 units 0.0044, where a network
//! fitted to all of `U` needs s ≥ d(d+1)/2 units to hold a quadratic at all (s = 1500: 0.059;
//! s = 1000: 0.32). The residual is small, so a small network suffices, which is cheap to fit
//! and to evaluate. Measured on Bank Marketing and a9a the quadratic alone gives 0.060 and
//! 0.080, the anchored fit 0.037 and 0.063; on the elliptic PDE, further from Gaussian, 0.14 and
//! 0.13.

use std::path::Path;

use serde::{Deserialize, Serialize};
use shmc_core::Potential;
use shmc_core::linalg::dot;

use super::cubic::Cubic;
use super::file::{self, SurrogateFile};
use super::network::{
    DynNetwork, NetworkFitter, NetworkRecord, NetworkSurrogate, Reach, is_held_out,
};
use super::states::TrainingSet;
use super::{Curvature, Fitted, Fitter, NetworkForm, Surrogate, SurrogateMeta};
use crate::{Error, Result};

/// The kind name of an anchored surrogate in a surrogate file.
pub const KIND: &str = "laplace-anchored-network";

/// `Ũ(x) = u₀ + g₀·x + ½‖x‖² + c(x) + z(x)`: the standard normal's potential moved to the
/// posterior's level and slope at the origin (the mode), optionally a cubic `c`
/// ([`super::cubic`]), plus the residual network `z`.
#[derive(Clone, Debug)]
pub struct Anchored {
    /// `u₀`, `U` at the origin.
    value: f64,
    /// `g₀`, `∇U` at the origin (zero at an exact mode).
    gradient: Vec<f64>,
    /// `z`, fitted to `U − u₀ − g₀·x − ½‖x‖² − c(x)`.
    residual: NetworkSurrogate,
    /// `c`, fitted before the network to what the quadratic misses; `None`: no cubic term.
    cubic: Option<Cubic>,
}

impl Anchored {
    /// The quadratic `u₀ + g₀·x + ½‖x‖²` plus `residual`.
    pub fn new(value: f64, gradient: Vec<f64>, residual: NetworkSurrogate) -> Result<Self> {
        if gradient.len() != residual.dim() {
            return Err(Error::invalid(format!(
                "the anchor's gradient has {} entries for a network of dimension {}",
                gradient.len(),
                residual.dim()
            )));
        }
        if !value.is_finite() || gradient.iter().any(|g| !g.is_finite()) {
            return Err(Error::invalid(
                "the anchor's value or gradient is not finite",
            ));
        }
        Ok(Self {
            value,
            gradient,
            residual,
            cubic: None,
        })
    }

    /// With the cubic term `cubic`; an error if its dimension is not the surrogate's.
    pub fn with_cubic(mut self, cubic: Option<Cubic>) -> Result<Self> {
        if let Some(c) = &cubic {
            c.check(self.gradient.len()).map_err(Error::invalid)?;
        }
        self.cubic = cubic;
        Ok(self)
    }

    /// The residual network.
    pub fn residual(&self) -> &DynNetwork {
        self.residual.network()
    }
}

/// The quadratic `u₀ + g₀·x + ½‖x‖²` at `x`, its gradient `g₀ + x` written into `grad`.
fn quadratic(u0: f64, g0: &[f64], x: &[f64], grad: &mut [f64]) -> f64 {
    for ((g, g0), xi) in grad.iter_mut().zip(g0).zip(x) {
        *g = g0 + xi;
    }
    u0 + dot(g0, x) + 0.5 * dot(x, x)
}

impl Potential for Anchored {
    fn dim(&self) -> usize {
        self.gradient.len()
    }

    fn value(&self, x: &[f64]) -> f64 {
        let cubic = self.cubic.as_ref().map_or(0.0, |c| c.value(x));
        self.value + dot(&self.gradient, x) + 0.5 * dot(x, x) + cubic + self.residual.value(x)
    }

    fn value_and_gradient(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let z = self.residual.value_and_gradient(x, grad);
        let mut anchor = vec![0.0; x.len()];
        let q = quadratic(self.value, &self.gradient, x, &mut anchor);
        for (g, a) in grad.iter_mut().zip(&anchor) {
            *g += a;
        }
        let c = match &self.cubic {
            Some(c) => {
                c.add_gradient(x, grad);
                c.value(x)
            }
            None => 0.0,
        };
        q + c + z
    }

    /// The residual network's gradient alone (no unit's value: RNS-RMHMC's generalized leapfrog
    /// asks for gradients only), plus the quadratic's `g₀ + x` and the cubic's.
    fn gradient(&self, x: &[f64], grad: &mut [f64]) {
        self.residual.gradient(x, grad);
        for ((g, g0), xi) in grad.iter_mut().zip(&self.gradient).zip(x) {
            *g += g0 + xi;
        }
        if let Some(c) = &self.cubic {
            c.add_gradient(x, grad);
        }
    }
}

/// The identity plus the network's Hessian. The cubic term's Hessian is left out, as it is of
/// RNS-RMHMC's metric ([`Surrogate::network`]): it vanishes at the mode, and the metric and the
/// trajectory lengths the curvature picks need the posterior's scales, not its skew (any metric
/// keeps the chain exact).
impl Curvature for Anchored {
    fn hessian(&self, x: &[f64], out: &mut [f64]) {
        let d = self.dim();
        self.residual.network().hessian(x, out);
        for i in 0..d {
            out[i * d + i] += 1.0;
        }
    }
}

/// The record of an anchored surrogate in a surrogate file.
#[derive(Serialize, Deserialize)]
struct AnchoredRecord {
    #[serde(with = "crate::surrogates::exact_floats")]
    value: f64,
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    gradient: Vec<f64>,
    network: NetworkRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reach: Option<Reach>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cubic: Option<Cubic>,
}

/// Within the reach of the states the residual was fitted to: outside, the residual network is
/// whatever its fit left there.
impl Surrogate for Anchored {
    fn contains(&self, x: &[f64]) -> bool {
        self.residual.contains(x)
    }

    fn curvature(&self) -> Option<&dyn Curvature> {
        Some(self)
    }

    /// The residual network: the surrogate's Hessian is its Hessian plus the identity.
    fn network(&self) -> Option<NetworkForm<'_>> {
        Some(NetworkForm {
            network: self.residual.network(),
            shift: 1.0,
        })
    }

    fn save(&self, path: &Path, meta: &SurrogateMeta) -> Result<()> {
        let record = AnchoredRecord {
            value: self.value,
            gradient: self.gradient.clone(),
            network: NetworkRecord::from_network(self.residual.network())
                .map_err(|m| Error::invalid(format!("{}: {m}", path.display())))?,
            reach: self.residual.reach().cloned(),
            cubic: self.cubic.clone(),
        };
        file::write(path, KIND, meta, &record)
    }
}

impl Anchored {
    /// The anchored surrogate a file of kind [`KIND`] holds, and the meta of its fit.
    pub fn read(file: &SurrogateFile) -> Result<(Self, SurrogateMeta)> {
        let (record, meta): (AnchoredRecord, SurrogateMeta) = file.read()?;
        let network = record.network.build().map_err(|m| file.invalid(m))?;
        if let Some(reach) = &record.reach {
            reach.check(network.dim()).map_err(|m| file.invalid(m))?;
        }
        let residual =
            NetworkSurrogate::new(network, meta.method, meta.ridge).with_reach(record.reach);
        let anchored = Self::new(record.value, record.gradient, residual)
            .and_then(|a| a.with_cubic(record.cubic))
            .map_err(|e| file.invalid(e))?;
        Ok((anchored, meta))
    }
}

/// Fits an [`Anchored`] surrogate: the network of `network` to the residuals of the states
/// against the quadratic with `u₀ = value` and `g₀ = gradient` (and, with `cubic`, against a
/// cubic fitted first to the residuals' gradients). The states are independent draws (of the
/// Laplace approximation whose quadratic anchors the surrogate), and the residual network's
/// reach is theirs ([`Reach::of_draws`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AnchoredFitter {
    /// `U` at the origin.
    pub value: f64,
    /// `∇U` at the origin.
    pub gradient: Vec<f64>,
    /// How the residual network is fitted.
    pub network: NetworkFitter,
    /// Whether a cubic term ([`super::cubic`]) is fitted, to the states the network's fit does
    /// not hold out, before the network: for small dimensions only (1540 coefficients at
    /// d = 20), where the posterior's departure from its Laplace approximation is mostly skew.
    pub cubic: bool,
}

impl Fitter for AnchoredFitter {
    /// The residual network fitted to `states` minus the quadratic. The held-out gradient
    /// error reported is the whole surrogate's, relative to `∇U` (not to the residual's
    /// gradient), on the states the network's fit held out.
    fn fit(&self, model: &(dyn Potential + Sync), states: &TrainingSet) -> Result<Fitted> {
        let d = self.gradient.len();
        if states.dim() != d {
            return Err(Error::invalid(format!(
                "training states of dimension {} for an anchor of dimension {d}",
                states.dim()
            )));
        }
        let mut residuals = TrainingSet::new(d);
        let mut slope = vec![0.0; d];
        for i in 0..states.len() {
            let x = states.position(i);
            let level = quadratic(self.value, &self.gradient, x, &mut slope);
            let gradient = states.gradient(i).map(|g| {
                g.iter()
                    .zip(&slope)
                    .map(|(gi, si)| gi - si)
                    .collect::<Vec<f64>>()
            });
            residuals.push(x, states.potential(i) - level, gradient.as_deref());
        }
        let cubic = if self.cubic {
            let fraction = self.network.options.holdout_fraction;
            let gradient = |i: usize| residuals.gradient(i).map(<[f64]>::to_vec);
            let c = Cubic::fit(&residuals, &|i| gradient(i).unwrap_or_default(), &|i| {
                !is_held_out(i, fraction) && gradient(i).is_some()
            })?;
            residuals = without_cubic(&residuals, &c);
            Some(c)
        } else {
            None
        };
        let fitted = self.network.fit(model, &residuals)?;
        let residual = match fitted.surrogate.network() {
            Some(form) => NetworkSurrogate::new(
                form.network.clone(),
                self.network.method,
                self.network.options.ridge,
            )
            .with_reach(Reach::of_draws(states)),
            None => return Err(Error::invalid("the residual fit gave no network")),
        };
        let surrogate =
            Anchored::new(self.value, self.gradient.clone(), residual)?.with_cubic(cubic)?;
        let holdout_gradient_error =
            held_out_error(&surrogate, states, self.network.options.holdout_fraction);
        Ok(Fitted {
            surrogate: Box::new(surrogate),
            holdout_gradient_error,
            ..fitted
        })
    }
}

/// `states` with the cubic `c` taken from their potentials and gradients.
fn without_cubic(states: &TrainingSet, c: &Cubic) -> TrainingSet {
    let mut out = TrainingSet::new(states.dim());
    let mut slope = vec![0.0; states.dim()];
    for i in 0..states.len() {
        let x = states.position(i);
        slope.fill(0.0);
        c.add_gradient(x, &mut slope);
        let gradient = states.gradient(i).map(|g| {
            g.iter()
                .zip(&slope)
                .map(|(a, b)| a - b)
                .collect::<Vec<f64>>()
        });
        out.push(x, states.potential(i) - c.value(x), gradient.as_deref());
    }
    out
}

/// `√(Σ‖∇Ũ − ∇U‖² / Σ‖∇U‖²)` over the held-out states of `states` that carry a gradient; NaN
/// when none do.
fn held_out_error(surrogate: &Anchored, states: &TrainingSet, fraction: f64) -> f64 {
    let mut approx = vec![0.0; states.dim()];
    let (mut error, mut norm) = (0.0, 0.0);
    for i in (0..states.len()).filter(|&i| is_held_out(i, fraction)) {
        let Some(exact) = states.gradient(i) else {
            continue;
        };
        surrogate.gradient(states.position(i), &mut approx);
        for (a, e) in approx.iter().zip(exact) {
            error += (a - e) * (a - e);
            norm += e * e;
        }
    }
    if norm > 0.0 {
        (error / norm).sqrt()
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surrogates::FitMethod;
    use crate::surrogates::kinds;
    use crate::surrogates::network::{Scale, TrainOptions};
    use rand::SeedableRng;
    use rand_pcg::Pcg64;
    use shmc_core::random::fill_standard_normal;

    /// Asserts that `surrogate`'s gradient at `x` is its values' (central differences, 1e-6),
    /// that `value_and_gradient`'s value is `value`'s, and that the gradient alone is
    /// `value_and_gradient`'s bit for bit.
    fn assert_gradient_is_the_values(surrogate: &dyn Surrogate, x: [f64; 3]) {
        let mut grad = [0.0; 3];
        let u = surrogate.value_and_gradient(&x, &mut grad);
        assert_eq!(u, surrogate.value(&x));
        for k in 0..3 {
            let h = 1e-6;
            let (mut up, mut down) = (x, x);
            up[k] += h;
            down[k] -= h;
            let fd = (surrogate.value(&up) - surrogate.value(&down)) / (2.0 * h);
            assert!((fd - grad[k]).abs() < 1e-6, "{k}: {fd} vs {}", grad[k]);
        }
        let mut alone = [0.0; 3];
        surrogate.gradient(&x, &mut alone);
        assert_eq!(alone.map(f64::to_bits), grad.map(f64::to_bits));
    }

    /// `U(x) = 3 + 0.1·x₀ + ½‖x‖² + 0.05 Σ xᵢ³/3 + 0.02 Σ xᵢ⁴`: a standard normal's potential
    /// with a small skew and tails, the shape of a near-Gaussian posterior in its Laplace
    /// coordinates.
    struct NearlyNormal;

    impl Potential for NearlyNormal {
        fn dim(&self) -> usize {
            3
        }
        fn value(&self, x: &[f64]) -> f64 {
            let mut g = [0.0; 3];
            self.value_and_gradient(x, &mut g)
        }
        fn value_and_gradient(&self, x: &[f64], grad: &mut [f64]) -> f64 {
            let mut u = 3.0 + 0.1 * x[0];
            for (g, &xi) in grad.iter_mut().zip(x) {
                u += 0.5 * xi * xi + 0.05 * xi.powi(3) / 3.0 + 0.02 * xi.powi(4);
                *g = xi + 0.05 * xi * xi + 0.08 * xi.powi(3);
            }
            grad[0] += 0.1;
            u
        }
    }

    fn states(n: usize) -> TrainingSet {
        let mut rng = Pcg64::seed_from_u64(4);
        let mut set = TrainingSet::new(3);
        for _ in 0..n {
            let mut x = [0.0; 3];
            fill_standard_normal(&mut rng, &mut x);
            let mut g = [0.0; 3];
            let u = NearlyNormal.value_and_gradient(&x, &mut g);
            set.push(&x, u, Some(&g));
        }
        set
    }

    fn fitter(hidden: usize, cubic: bool) -> AnchoredFitter {
        let mut g0 = [0.0; 3];
        let u0 = NearlyNormal.value_and_gradient(&[0.0; 3], &mut g0);
        AnchoredFitter {
            value: u0,
            gradient: g0.to_vec(),
            network: NetworkFitter {
                options: TrainOptions {
                    hidden,
                    scale: Scale::Auto,
                    ..TrainOptions::default()
                },
                method: FitMethod::Score,
            },
            cubic,
        }
    }

    /// The residual network takes the error of the quadratic (about 0.1 here) down by an order
    /// of magnitude, the reported held-out error is the whole surrogate's, and the gradient is
    /// the derivative of the value.
    #[test]
    fn the_residual_network_fits_what_the_quadratic_misses() {
        let set = states(200);
        let fitted = fitter(60, false).fit(&NearlyNormal, &set).unwrap();
        let surrogate = fitted.surrogate.as_ref();
        let (mut error, mut quadratic, mut norm) = (0.0, 0.0, 0.0);
        let mut approx = [0.0; 3];
        for i in 0..set.len() {
            let (x, g) = (set.position(i), set.gradient(i).unwrap());
            surrogate.gradient(x, &mut approx);
            for k in 0..3 {
                error += (approx[k] - g[k]).powi(2);
                quadratic += (x[k] + if k == 0 { 0.1 } else { 0.0 } - g[k]).powi(2);
                norm += g[k] * g[k];
            }
        }
        let (error, quadratic) = ((error / norm).sqrt(), (quadratic / norm).sqrt());
        assert!(quadratic > 0.05, "the quadratic alone: {quadratic}");
        assert!(
            error < quadratic / 10.0,
            "anchored {error}, quadratic alone {quadratic}"
        );
        let held = fitted.holdout_gradient_error;
        assert!(held < quadratic / 5.0 && held > 0.0, "held-out {held}");
        let x = [0.3, -0.7, 1.1];
        assert_gradient_is_the_values(surrogate, x);
        let mut hessian = [0.0; 9];
        surrogate.curvature().unwrap().hessian(&x, &mut hessian);
        assert!(hessian[0] > 0.5 && (hessian[1] - hessian[3]).abs() < 1e-12);
        // The network RNS-RMHMC's metric is built from, and its shift, give the same Hessian.
        let mut network = [0.0; 9];
        let form = surrogate.network().unwrap();
        form.network.hessian(&x, &mut network);
        for k in 0..3 {
            network[4 * k] += form.shift;
        }
        for (a, b) in hessian.iter().zip(&network) {
            assert!((a - b).abs() < 1e-12, "{hessian:?} vs {network:?}");
        }
    }

    /// `U(x) = ½‖x‖² + 0.1·x₀²x₁ − 0.05·x₀x₁x₂ + 0.08·x₂³`: a standard normal's potential with
    /// a skew across coordinates, the shape the PDE's posterior has in its Laplace coordinates.
    struct Skewed;

    impl Potential for Skewed {
        fn dim(&self) -> usize {
            3
        }
        fn value(&self, x: &[f64]) -> f64 {
            0.5 * dot(x, x) + 0.1 * x[0] * x[0] * x[1] - 0.05 * x[0] * x[1] * x[2]
                + 0.08 * x[2].powi(3)
        }
        fn value_and_gradient(&self, x: &[f64], grad: &mut [f64]) -> f64 {
            grad.copy_from_slice(x);
            grad[0] += 0.2 * x[0] * x[1] - 0.05 * x[1] * x[2];
            grad[1] += 0.1 * x[0] * x[0] - 0.05 * x[0] * x[2];
            grad[2] += -0.05 * x[0] * x[1] + 0.24 * x[2] * x[2];
            self.value(x)
        }
    }

    /// With a cubic term the surrogate fits a skew the network alone does not (to rounding, at
    /// held-out states too), and its gradient is still the derivative of its value.
    #[test]
    fn a_cubic_term_fits_the_skew() {
        let mut rng = Pcg64::seed_from_u64(5);
        let mut set = TrainingSet::new(3);
        for _ in 0..100 {
            let mut x = [0.0; 3];
            fill_standard_normal(&mut rng, &mut x);
            let mut g = [0.0; 3];
            let u = Skewed.value_and_gradient(&x, &mut g);
            set.push(&x, u, Some(&g));
        }
        let fit = |cubic: bool| AnchoredFitter {
            value: 0.0,
            gradient: vec![0.0; 3],
            ..fitter(5, cubic)
        };
        let without = fit(false).fit(&Skewed, &set).unwrap();
        let with = fit(true).fit(&Skewed, &set).unwrap();
        let (a, b) = (without.holdout_gradient_error, with.holdout_gradient_error);
        assert!(a > 0.02 && b < 1e-3, "without the cubic {a}, with it {b}");
        assert_gradient_is_the_values(with.surrogate.as_ref(), [0.3, -0.7, 1.1]);
    }

    /// Saved and loaded, the surrogate (with and without a cubic term) proposes bit for bit as
    /// before.
    #[test]
    fn an_anchored_surrogate_round_trips_bit_for_bit() {
        for cubic in [false, true] {
            round_trip(cubic);
        }
    }

    fn round_trip(cubic: bool) {
        let fitted = fitter(20, cubic).fit(&NearlyNormal, &states(60)).unwrap();
        let path = std::env::temp_dir().join(format!("shmc-anchored-{}.json", std::process::id()));
        let meta = SurrogateMeta {
            method: FitMethod::Score,
            ridge: 1e-6,
            ..SurrogateMeta::default()
        };
        fitted.surrogate.save(&path, &meta).unwrap();
        let (loaded, _) = kinds::load(&path, 3).unwrap();
        let _ = std::fs::remove_file(&path);
        for x in [[0.1, 0.2, -0.3], [2.0, -1.5, 0.4]] {
            let (mut a, mut b) = ([0.0; 3], [0.0; 3]);
            let (u, v) = (
                fitted.surrogate.value_and_gradient(&x, &mut a),
                loaded.value_and_gradient(&x, &mut b),
            );
            assert_eq!(u.to_bits(), v.to_bits());
            assert_eq!(a.map(f64::to_bits), b.map(f64::to_bits));
        }
    }
}
