//! A model served over UM-Bridge ([`crate::umbridge`]) as the posterior to sample: its one
//! output is either the log-density itself, or a forward map `G(θ)` observed with Gaussian
//! noise, `y ~ N(G(θ), σ² I)` under the prior `θ ~ N(μ, s² I)`:
//!
//! `U(θ) = ‖y − G(θ)‖² / (2σ²) + ‖θ − μ‖² / (2s²)`.
//!
//! The gradient takes the cheapest exact route the server offers (ModelInfo): one Gradient
//! call (`sensᵀJ`, with `sens = 1` for a log-density and `(G − y)/σ²` for a forward map), else
//! `d` ApplyJacobian calls (`J eᵢ`), and only when neither exists `2d` more Evaluate calls of
//! central differences. A difference gradient is still a fixed function of `θ`, so the
//! leapfrog stays reversible and volume-preserving and the MH step with the exact `U` keeps
//! the chain exact; it only lowers acceptance.
//!
//! Failures: the `Potential` methods return numbers. Where the model fails at one input once
//! it has answered elsewhere (its error answer, a non-finite number), `U` is `+∞` there, as
//! the built-in models' is where their mathematics breaks: the proposal is rejected, and the
//! run reports how many were. Any other failure (the server gone or too slow after its
//! retries, a refused request, a malformed or wrong-sized answer, or the model failing at its
//! very first input) is recorded and `U` is NaN from then on, without further calls; the
//! sampler sees [`Model::failure`] after the iteration and stops every chain with it.
//!
//! Several instances of one model (`--url A,B`) share the calls ([`Pool`]): each is checked at
//! the start to serve the same model, and one that fails ends the run like a single server.
//! Instances that a cluster engine starts (`--url dir:FOLDER`, [`discovery`]) are awaited at
//! the start; one that can no longer be reached is dropped and its call sent to another, and
//! the engine's restart of it joins the pool.

use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::Value;
use shmc_core::Potential;

use super::{ModelEntry, ModelOption, ModelSpec};
use crate::model::indexed_names;
use crate::umbridge::client::{CallError, Client, Patience};
use crate::umbridge::discovery::{self, Folder};
use crate::umbridge::pool::{Lease, Pool};
use crate::umbridge::protocol::{Endpoint, PROTOCOL_VERSION};
use crate::{Error, Model, Result};

/// The registry's entry: a model served over UM-Bridge.
pub const ENTRY: ModelEntry = ModelEntry {
    name: "umbridge",
    description: "a model served over UM-Bridge (HTTP) by any UM-Bridge server or load balancer: its output read as the log-density, or as a forward map with a Gaussian likelihood on given data",
    parameters: "theta.1 .. theta.d (d from the server)",
    options: &[
        ModelOption::value(
            "url",
            "URL",
            "http://127.0.0.1:4242; URL,URL,... for instances of one model, each call to the \
             one with the fewest calls in flight; dir:FOLDER for instances a cluster engine \
             started (FOLDER/url-N.txt)",
        ),
        ModelOption::value(
            "umbridge_model",
            "NAME",
            "the server's only model by default",
        ),
        ModelOption::value(
            "umbridge_output",
            "OUTPUT",
            "log-density (default) | forward: a forward map observed as the data with \
             Gaussian noise",
        ),
        ModelOption::value(
            "data",
            "FILE",
            "a forward model's observations: numbers separated by spaces, commas or lines, \
             or a JSON array",
        ),
        ModelOption::value("noise", "SIGMA", "a forward model's noise sd"),
        ModelOption::value("prior_mean", "MEAN", "0: a forward model's prior mean"),
        ModelOption::value("prior_sd", "SD", "1: a forward model's prior sd"),
        ModelOption::value(
            "timeout",
            "SECONDS",
            "60 seconds to wait for one answer, its evaluation included",
        ),
        ModelOption::value(
            "retries",
            "N",
            "3 retries, with doubling backoff from 0.1 s, when the server cannot be reached, \
             times out or is busy",
        ),
        ModelOption::value(
            "umbridge_config",
            "JSON",
            "{}: the JSON object sent as every call's config",
        ),
    ],
    build: |spec| Ok(Box::new(connect(spec)?)),
    small: None,
};

/// The served model `spec` describes: connects to its server.
fn connect(spec: &ModelSpec) -> Result<ServedPosterior> {
    let timeout = spec.get::<f64>("timeout")?.unwrap_or(60.0);
    if !(timeout.is_finite() && timeout > 0.0) {
        return Err(Error::setting(
            "timeout",
            "must be a positive number of seconds",
        ));
    }
    let config = match spec.get::<String>("umbridge_config")? {
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| Error::setting("umbridge_config", format!("is not JSON: {e}")))?,
        None => serde_json::Value::Object(Default::default()),
    };
    let default_url = || {
        format!(
            "http://127.0.0.1:{}",
            crate::umbridge::protocol::DEFAULT_PORT
        )
    };
    let served = ServedPosterior::connect(ServedSettings {
        url: spec.get("url")?.unwrap_or_else(default_url),
        model: spec.get("umbridge_model")?,
        likelihood: likelihood(spec)?,
        patience: crate::umbridge::client::Patience {
            timeout: std::time::Duration::from_secs_f64(timeout),
            retries: spec.get("retries")?.unwrap_or(3),
        },
        config,
        memory_limit: spec.memory_limit,
    })?;
    // The dimension is the server's word (its InputSizes), and every chain holds vectors of
    // it: a server declaring 10¹² inputs made the allocator abort the client. The setting
    // that changes it is the server.
    crate::memory::check(
        &format!(
            "the {} inputs model {:?} declares (its InputSizes)",
            served.dim(),
            served.name
        ),
        "url",
        crate::memory::dimension(served.dim()),
        spec.memory_limit,
    )?;
    // A batch of independent calls runs on a thread per instance, each with its stack.
    let instances = served.instances.capacity();
    crate::memory::check(
        &format!(
            "the stacks of {instances} threads, one per instance of model {:?}",
            served.name
        ),
        "url",
        crate::batch::stack_bytes(instances),
        spec.memory_limit,
    )?;
    Ok(served)
}

/// The likelihood `spec` asks for: a served log-density is the whole posterior, and a forward
/// model takes its data, noise and prior; a setting of the one form is refused in the other.
fn likelihood(spec: &ModelSpec) -> Result<Likelihood> {
    let forward_only = ["data", "noise", "prior_mean", "prior_sd"];
    match spec.get::<String>("umbridge_output")?.as_deref() {
        None | Some("log-density") => {
            spec.refuse_any(
                &forward_only,
                "applies to a forward model (umbridge output forward), not to a served \
                 log-density",
            )?;
            Ok(Likelihood::LogDensity)
        }
        Some("forward") => {
            let data = spec.get::<std::path::PathBuf>("data")?.ok_or_else(|| {
                Error::setting("data", "must name the observations of a forward model")
            })?;
            Ok(Likelihood::Gaussian {
                data: read_observations(&data)?,
                noise_sd: spec
                    .get("noise")?
                    .ok_or_else(|| Error::setting("noise", "must be given for a forward model"))?,
                prior_mean: spec.get("prior_mean")?.unwrap_or(0.0),
                prior_sd: spec.get("prior_sd")?.unwrap_or(1.0),
            })
        }
        Some(other) => Err(Error::setting(
            "umbridge_output",
            format!("is {other:?}: use log-density or forward"),
        )),
    }
}

/// How the served model's output makes the posterior.
#[derive(Clone, Debug, PartialEq)]
pub enum Likelihood {
    /// The output is one number, `log p(θ | data)` up to a constant.
    LogDensity,
    /// The output is the forward map `G(θ)`, observed as `data` with Gaussian noise.
    Gaussian {
        /// The observations `y`, one per output entry.
        data: Vec<f64>,
        /// The noise standard deviation `σ`.
        noise_sd: f64,
        /// The prior mean `μ` of every input.
        prior_mean: f64,
        /// The prior standard deviation `s` of every input.
        prior_sd: f64,
    },
}

/// Where the served model is and how to read it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServedSettings {
    /// The server, `http://HOST:PORT`, or several instances of the same model as a
    /// comma-separated list of them.
    pub url: String,
    /// The served model's name; `None` takes the server's only model.
    pub model: Option<String>,
    /// How its output makes the posterior.
    pub likelihood: Likelihood,
    /// Timeout and retries.
    pub patience: Patience,
    /// The model-specific `config` sent with every call (a JSON object).
    pub config: Value,
    /// The most bytes what the client reads may take: the instance manifest of a cluster
    /// engine's folder (`dir:FOLDER`), the served model's dimension.
    pub memory_limit: u64,
}

/// How the gradient of `U` is computed, cheapest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GradientRoute {
    /// One Gradient call.
    Gradient,
    /// One ApplyJacobian call per input.
    ApplyJacobian,
    /// Central differences: two Evaluate calls per input.
    FiniteDifferences,
}

/// The relative step of the central differences, `∛ε`: it balances the `O(h²)` truncation
/// against the `O(ε/h)` rounding of `U`.
fn difference_step(x: f64) -> f64 {
    f64::EPSILON.cbrt() * x.abs().max(1.0)
}

/// The posterior of a served model.
#[derive(Debug)]
pub struct ServedPosterior {
    instances: Pool,
    name: String,
    dim: usize,
    outputs: usize,
    likelihood: Likelihood,
    route: GradientRoute,
    config: Value,
    evaluations: AtomicU64,
    gradients: AtomicU64,
    jacobian_actions: AtomicU64,
    /// Whether the model has answered an evaluation: after that, failing at an input rejects
    /// it; before, it is a failure of the model.
    answered: AtomicBool,
    /// Evaluations the model failed at their input, taken as `U = +∞`.
    rejected: AtomicU64,
    failure: OnceLock<String>,
}

impl ServedPosterior {
    /// Connects to the server (to every instance, if several), checks the protocol version, the
    /// model, its sizes and what it supports, and picks the gradient's route. Fails with a
    /// clear error if a server cannot be reached, the model does not fit the settings, or an
    /// instance serves another model than the first.
    pub fn connect(settings: ServedSettings) -> Result<Self> {
        check_likelihood(&settings.likelihood)?;
        if !settings.config.is_object() {
            return Err(Error::setting("umbridge_config", "must be a JSON object"));
        }
        let folder = match settings.url.strip_prefix(discovery::PREFIX) {
            Some(dir) => Some(Folder::open(Path::new(dir), settings.memory_limit)?),
            None => None,
        };
        let urls = match &folder {
            Some(folder) => folder.wait_for_all()?,
            None => settings.url.split(',').map(str::to_string).collect(),
        };
        let clients = urls
            .iter()
            .map(|url| Client::new(url.trim(), settings.patience))
            .collect::<Result<Vec<_>>>()?;
        let first = probe(&clients[0], settings.model, &settings.config)?;
        for other in &clients[1..] {
            let served = probe(other, Some(first.name.clone()), &settings.config)?;
            if let Some((endpoint, theirs, ours)) = first.differs(&served) {
                return Err(other.error(
                    endpoint,
                    format!(
                        "model {:?} has {theirs} where {} has {ours}: every URL must serve the \
                         same model",
                        first.name,
                        clients[0].url()
                    ),
                ));
            }
        }
        match &settings.likelihood {
            Likelihood::LogDensity if first.outputs != 1 => {
                return Err(Error::setting(
                    "umbridge_output",
                    format!(
                        "is log-density, but model {:?} outputs {} numbers: read it as a \
                         forward model with data and noise",
                        first.name, first.outputs
                    ),
                ));
            }
            Likelihood::Gaussian { data, .. } if data.len() != first.outputs => {
                return Err(Error::setting(
                    "data",
                    format!(
                        "holds {} observations, but model {:?} outputs {} numbers",
                        data.len(),
                        first.name,
                        first.outputs
                    ),
                ));
            }
            _ => {}
        }
        Ok(Self {
            instances: match folder {
                Some(folder) => Pool::from_folder(folder, settings.patience, clients),
                None => Pool::new(clients),
            },
            name: first.name,
            dim: first.dim,
            outputs: first.outputs,
            likelihood: settings.likelihood,
            route: first.route,
            config: settings.config,
            evaluations: AtomicU64::new(0),
            gradients: AtomicU64::new(0),
            jacobian_actions: AtomicU64::new(0),
            answered: AtomicBool::new(false),
            rejected: AtomicU64::new(0),
            failure: OnceLock::new(),
        })
    }

    /// Each instance's URL and the Evaluate calls it answered, in the order given (a
    /// restarted instance's new URL after the others).
    pub fn evaluations_per_instance(&self) -> Vec<(String, u64)> {
        self.instances.answered()
    }

    /// How the gradient is computed.
    pub fn gradient_route(&self) -> GradientRoute {
        self.route
    }

    /// The served model's output at `q`, from the leased instance.
    fn evaluate(&self, at: &Lease, q: &[f64]) -> Result<Vec<f64>, CallError> {
        let output = at
            .client()
            .evaluate(&self.name, q, &self.config, self.outputs)?;
        at.answered();
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        self.answered.store(true, Ordering::Relaxed);
        Ok(output)
    }

    /// `U` from the output at `q`.
    fn potential(&self, q: &[f64], output: &[f64]) -> f64 {
        match &self.likelihood {
            Likelihood::LogDensity => -output[0],
            Likelihood::Gaussian {
                data,
                noise_sd,
                prior_mean,
                prior_sd,
            } => {
                let misfit: f64 = data
                    .iter()
                    .zip(output)
                    .map(|(y, g)| (y - g) * (y - g))
                    .sum();
                let prior: f64 = q.iter().map(|t| (t - prior_mean) * (t - prior_mean)).sum();
                misfit / (2.0 * noise_sd * noise_sd) + prior / (2.0 * prior_sd * prior_sd)
            }
        }
    }

    /// `∂U/∂G`, the weights of the output in the gradient.
    fn output_weights(&self, output: &[f64]) -> Vec<f64> {
        match &self.likelihood {
            Likelihood::LogDensity => vec![-1.0],
            Likelihood::Gaussian { data, noise_sd, .. } => {
                let inv_var = 1.0 / (noise_sd * noise_sd);
                output
                    .iter()
                    .zip(data)
                    .map(|(g, y)| (g - y) * inv_var)
                    .collect()
            }
        }
    }

    fn prior_gradient(&self, q: &[f64], grad: &mut [f64]) {
        match &self.likelihood {
            Likelihood::LogDensity => grad.fill(0.0),
            Likelihood::Gaussian {
                prior_mean,
                prior_sd,
                ..
            } => {
                let inv_var = 1.0 / (prior_sd * prior_sd);
                for (g, t) in grad.iter_mut().zip(q) {
                    *g = (t - prior_mean) * inv_var;
                }
            }
        }
    }

    fn try_value(&self, at: &Lease, q: &[f64]) -> Result<f64, CallError> {
        let output = self.evaluate(at, q)?;
        Ok(self.potential(q, &output))
    }

    /// `call` on a leased instance; where the instance is gone and the pool replaceable, it is
    /// dropped and `call` made again on another (every call is a pure function of its input).
    fn on_an_instance<T>(
        &self,
        mut call: impl FnMut(&Lease) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        loop {
            let at = self.instances.lease().map_err(CallError::Fatal)?;
            match call(&at) {
                Err(CallError::Gone(why)) if self.instances.replaceable() => {
                    self.instances
                        .drop_instance(&at, &why)
                        .map_err(CallError::Fatal)?;
                }
                other => return other,
            }
        }
    }

    /// `U` and its gradient at `q`: every call on the one leased instance, so that a model
    /// that keeps its last solution reuses it for the gradient.
    fn try_value_and_gradient(
        &self,
        at: &Lease,
        q: &[f64],
        grad: &mut [f64],
    ) -> Result<f64, CallError> {
        let output = self.evaluate(at, q)?;
        let u = self.potential(q, &output);
        let weights = self.output_weights(&output);
        match self.route {
            GradientRoute::Gradient => {
                // Gradient answers sensᵀJ; ∂U/∂G is sens, so the sign comes with it.
                let g = at
                    .client()
                    .gradient(&self.name, q, &weights, &self.config)?;
                self.gradients.fetch_add(1, Ordering::Relaxed);
                self.prior_gradient(q, grad);
                for (out, g) in grad.iter_mut().zip(g) {
                    *out += g;
                }
            }
            GradientRoute::ApplyJacobian => {
                self.prior_gradient(q, grad);
                let mut direction = vec![0.0; self.dim];
                for i in 0..self.dim {
                    direction[i] = 1.0;
                    let column = at.client().apply_jacobian(
                        &self.name,
                        q,
                        &direction,
                        &self.config,
                        self.outputs,
                    )?;
                    self.jacobian_actions.fetch_add(1, Ordering::Relaxed);
                    direction[i] = 0.0;
                    grad[i] += column.iter().zip(&weights).map(|(j, w)| j * w).sum::<f64>();
                }
            }
            GradientRoute::FiniteDifferences => {
                let mut x = q.to_vec();
                for i in 0..self.dim {
                    let h = difference_step(q[i]);
                    x[i] = q[i] + h;
                    let up = self.try_value(at, &x)?;
                    let above = x[i];
                    x[i] = q[i] - h;
                    let down = self.try_value(at, &x)?;
                    // The points' exact distance, not 2h: x ± h rounds.
                    grad[i] = (up - down) / (above - x[i]);
                    x[i] = q[i];
                }
            }
        }
        Ok(u)
    }

    /// `U` from a call's result: `+∞` where the model failed at this input after answering
    /// elsewhere; any other failure is recorded (the first one wins) and is NaN.
    fn settle(&self, result: Result<f64, CallError>) -> f64 {
        match result {
            Ok(u) => u,
            Err(CallError::AtInput(_)) if self.answered.load(Ordering::Relaxed) => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                f64::INFINITY
            }
            Err(e) => {
                let _ = self.failure.set(Error::from(e).to_string());
                f64::NAN
            }
        }
    }
}

/// What one instance serves under the model's name.
struct Probe {
    name: String,
    dim: usize,
    outputs: usize,
    route: GradientRoute,
}

impl Probe {
    /// Where `other` (another instance's) differs from this: the endpoint that tells, and
    /// what each has.
    fn differs(&self, other: &Probe) -> Option<(Endpoint, String, String)> {
        let route = |r: GradientRoute| match r {
            GradientRoute::Gradient => "/Gradient",
            GradientRoute::ApplyJacobian => "/ApplyJacobian but no /Gradient",
            GradientRoute::FiniteDifferences => "neither /Gradient nor /ApplyJacobian",
        };
        if other.dim != self.dim {
            let inputs = |p: &Probe| format!("input size {}", p.dim);
            Some((Endpoint::InputSizes, inputs(other), inputs(self)))
        } else if other.outputs != self.outputs {
            let outputs = |p: &Probe| format!("output size {}", p.outputs);
            Some((Endpoint::OutputSizes, outputs(other), outputs(self)))
        } else if other.route != self.route {
            Some((
                Endpoint::ModelInfo,
                route(other.route).into(),
                route(self.route).into(),
            ))
        } else {
            None
        }
    }
}

/// Asks `client` for the protocol version, the model `model` (`None`: its only one), its
/// sizes and what it supports; fails naming the server where it does not fit.
fn probe(client: &Client, model: Option<String>, config: &Value) -> Result<Probe> {
    let info = client.info()?;
    if info.protocol_version != PROTOCOL_VERSION {
        return Err(client.error(
            Endpoint::Info,
            format!(
                "speaks UM-Bridge protocol {}, shmc speaks {PROTOCOL_VERSION}",
                info.protocol_version
            ),
        ));
    }
    let served = info.models.join(", ");
    let name = match (model, info.models.as_slice()) {
        (Some(name), models) if models.contains(&name) => name,
        (Some(name), _) => {
            return Err(client.error(
                Endpoint::Info,
                format!("serves no model named {name:?}; it serves: {served}"),
            ));
        }
        (None, [only]) => only.clone(),
        (None, _) => {
            return Err(Error::setting(
                "umbridge_model",
                format!("must name one of the server's models: {served}"),
            ));
        }
    };
    let support = client.support(&name)?;
    if !support.evaluate {
        return Err(client.error(
            Endpoint::ModelInfo,
            format!("model {name:?} does not support Evaluate"),
        ));
    }
    let dim = match client.input_sizes(&name, config)?.as_slice() {
        &[d] if d > 0 => d,
        sizes => {
            return Err(client.error(
                Endpoint::InputSizes,
                format!(
                    "model {name:?} takes input vectors of sizes {sizes:?}; shmc samples \
                     models with one non-empty input vector"
                ),
            ));
        }
    };
    let outputs = match client.output_sizes(&name, config)?.as_slice() {
        &[m] => m,
        sizes => {
            return Err(client.error(
                Endpoint::OutputSizes,
                format!(
                    "model {name:?} has output vectors of sizes {sizes:?}; shmc reads one \
                     output vector"
                ),
            ));
        }
    };
    let route = if support.gradient {
        GradientRoute::Gradient
    } else if support.apply_jacobian {
        GradientRoute::ApplyJacobian
    } else {
        GradientRoute::FiniteDifferences
    };
    Ok(Probe {
        name,
        dim,
        outputs,
        route,
    })
}

/// Checks the numbers of a Gaussian likelihood.
fn check_likelihood(likelihood: &Likelihood) -> Result<()> {
    let Likelihood::Gaussian {
        data,
        noise_sd,
        prior_mean,
        prior_sd,
    } = likelihood
    else {
        return Ok(());
    };
    if data.is_empty() {
        return Err(Error::setting("data", "holds no observations"));
    }
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !positive(*noise_sd) {
        return Err(Error::setting(
            "noise",
            format!("must be positive and finite, got {noise_sd}"),
        ));
    }
    if !positive(*prior_sd) {
        return Err(Error::setting(
            "prior_sd",
            format!("must be positive and finite, got {prior_sd}"),
        ));
    }
    if !prior_mean.is_finite() {
        return Err(Error::setting("prior_mean", "must be finite"));
    }
    Ok(())
}

/// Reads observations from `path`: a JSON array of numbers, or numbers separated by
/// whitespace or commas. Fails naming the line of a value that is not a finite number.
pub fn read_observations(path: &Path) -> Result<Vec<f64>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    if text.trim_start().starts_with('[') {
        return serde_json::from_str::<Vec<f64>>(&text).map_err(|e| Error::Data {
            path: path.to_path_buf(),
            line: e.line(),
            message: format!("expected a JSON array of numbers: {e}"),
        });
    }
    let mut values = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for field in line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|f| !f.is_empty())
        {
            match field.parse::<f64>() {
                Ok(v) if v.is_finite() => values.push(v),
                _ => {
                    return Err(Error::Data {
                        path: path.to_path_buf(),
                        line: i + 1,
                        message: format!("{field:?} is not a finite number"),
                    });
                }
            }
        }
    }
    Ok(values)
}

impl Potential for ServedPosterior {
    fn dim(&self) -> usize {
        self.dim
    }

    fn value(&self, q: &[f64]) -> f64 {
        if self.failure.get().is_some() {
            return f64::NAN;
        }
        self.settle(self.on_an_instance(|at| self.try_value(at, q)))
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        if self.failure.get().is_some() {
            grad.fill(f64::NAN);
            return f64::NAN;
        }
        let result = self.on_an_instance(|at| self.try_value_and_gradient(at, q, grad));
        if result.is_err() {
            grad.fill(f64::NAN);
        }
        self.settle(result)
    }
}

impl Model for ServedPosterior {
    fn parameter_names(&self) -> Vec<String> {
        indexed_names("theta", self.dim)
    }

    fn notes(&self) -> Vec<String> {
        let reading = match &self.likelihood {
            Likelihood::LogDensity => "its output read as the log-density".to_string(),
            Likelihood::Gaussian {
                noise_sd,
                prior_mean,
                prior_sd,
                ..
            } => format!(
                "its {} outputs a forward map observed with Gaussian noise sd {noise_sd}, prior \
                 N({prior_mean}, {prior_sd}^2) on every input",
                self.outputs
            ),
        };
        let d = self.dim;
        let gradient = match self.route {
            GradientRoute::Gradient => "gradient by /Gradient (one call per gradient)".into(),
            GradientRoute::ApplyJacobian => format!(
                "gradient by /ApplyJacobian ({d} calls per gradient: the server offers no \
                 Gradient)"
            ),
            GradientRoute::FiniteDifferences => format!(
                "gradient by central FINITE DIFFERENCES ({} more Evaluate calls per gradient): \
                 the server offers neither Gradient nor ApplyJacobian",
                2 * d
            ),
        };
        let urls = self.instances.urls();
        let at = match (urls.as_slice(), self.instances.folder()) {
            ([one], None) => one.to_string(),
            (many, None) => format!(
                "{} instances ({}, each call to the one with the fewest in flight)",
                many.len(),
                many.join(", ")
            ),
            (many, Some(folder)) => format!(
                "{} instances listed in {} ({}, each call to the one with the fewest in \
                 flight; one that dies is dropped and its restart joins)",
                many.len(),
                folder.dir().display(),
                many.join(", ")
            ),
        };
        vec![format!(
            "served model {:?} at {at}: {d} inputs, {reading}; {gradient}",
            self.name
        )]
    }

    fn work(&self) -> Vec<(&'static str, u64)> {
        vec![
            (
                "served Evaluate calls",
                self.evaluations.load(Ordering::Relaxed),
            ),
            (
                "served Gradient calls",
                self.gradients.load(Ordering::Relaxed),
            ),
            (
                "served ApplyJacobian calls",
                self.jacobian_actions.load(Ordering::Relaxed),
            ),
            (
                "served evaluations failed at their input (rejected)",
                self.rejected.load(Ordering::Relaxed),
            ),
        ]
    }

    fn failure(&self) -> Option<String> {
        self.failure.get().cloned()
    }

    /// Every instance: a batch's calls wait here on HTTP while the instances compute.
    fn concurrency(&self) -> Option<usize> {
        Some(self.instances.capacity())
    }

    fn history(&self) -> Vec<String> {
        let mut lines = self.instances.history();
        if self.instances.replaceable() {
            let calls: Vec<String> = self
                .instances
                .answered()
                .iter()
                .map(|(url, n)| format!("{url} {n}"))
                .collect();
            lines.push(format!("Evaluate calls per instance: {}", calls.join(", ")));
            lines.push(format!(
                "at most {} calls were in flight at once, over {} instances",
                self.instances.peak_in_flight(),
                self.instances.capacity()
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, text: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("shmc-served-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn observations_are_read_from_json_or_plain_text() {
        let json = temp("a.json", "[1, 2.5, -3e-1]");
        assert_eq!(read_observations(&json).unwrap(), [1.0, 2.5, -0.3]);
        let text = temp("b.txt", "1 2.5\n-3e-1, 4\n");
        assert_eq!(read_observations(&text).unwrap(), [1.0, 2.5, -0.3, 4.0]);
        let bad = temp("c.txt", "1\n2 x\n");
        let err = read_observations(&bad).unwrap_err().to_string();
        assert!(err.ends_with(":2: \"x\" is not a finite number"), "{err}");
        let nan = temp("d.txt", "1 NaN");
        assert!(read_observations(&nan).is_err());
        for p in [json, text, bad, nan] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn a_gaussian_likelihoods_numbers_are_checked() {
        let gaussian = |noise_sd: f64, prior_sd: f64, data: Vec<f64>| Likelihood::Gaussian {
            data,
            noise_sd,
            prior_mean: 0.0,
            prior_sd,
        };
        let err = |l: Likelihood| check_likelihood(&l).unwrap_err().to_string();
        assert_eq!(
            err(gaussian(0.0, 1.0, vec![1.0])),
            "setting `noise` must be positive and finite, got 0"
        );
        assert!(err(gaussian(1.0, f64::NAN, vec![1.0])).contains("prior_sd"));
        assert!(err(gaussian(1.0, 1.0, vec![])).contains("no observations"));
        assert!(check_likelihood(&gaussian(0.1, 1.0, vec![1.0])).is_ok());
    }

    #[test]
    fn instances_differ_by_sizes_then_by_the_gradients_route() {
        let probe = |dim, outputs, route| Probe {
            name: "m".into(),
            dim,
            outputs,
            route,
        };
        let first = probe(2, 1, GradientRoute::Gradient);
        assert!(
            first
                .differs(&probe(2, 1, GradientRoute::Gradient))
                .is_none()
        );
        let says = |p: Probe| first.differs(&p).unwrap();
        assert_eq!(
            says(probe(3, 4, GradientRoute::FiniteDifferences)),
            (
                Endpoint::InputSizes,
                "input size 3".into(),
                "input size 2".into()
            )
        );
        assert_eq!(
            says(probe(2, 4, GradientRoute::Gradient)),
            (
                Endpoint::OutputSizes,
                "output size 4".into(),
                "output size 1".into()
            )
        );
        assert_eq!(
            says(probe(2, 1, GradientRoute::ApplyJacobian)),
            (
                Endpoint::ModelInfo,
                "/ApplyJacobian but no /Gradient".into(),
                "/Gradient".into()
            )
        );
    }

    #[test]
    fn the_difference_step_scales_with_the_point() {
        assert_eq!(difference_step(0.0), f64::EPSILON.cbrt());
        assert_eq!(difference_step(-100.0), 100.0 * f64::EPSILON.cbrt());
    }
}
