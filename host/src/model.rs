//! A model is a potential with names: what the sampler driver, the diagnostics and the CSV
//! output need beyond `U` and `∇U`. Built-in models and a user's own go through this one path.

use std::sync::Arc;

use shmc_core::Potential;

use crate::error::Result;
use crate::metric::RiemannianMetric;
use crate::row_sum::RowSum;

/// A posterior to sample: `U(q) = −log p(q | data)` on the unconstrained space, plus what the
/// output needs to report draws.
///
/// Implement [`Potential`] (`dim`, `value`, `value_and_gradient`) and [`Model::parameter_names`];
/// override [`Model::write_parameters`] when the reported values are not the unconstrained
/// coordinates themselves (for example `σ = exp(log σ)`).
pub trait Model: Potential + Send + Sync {
    /// The names of the reported values, CmdStan style (`beta.1`, `sigma`).
    fn parameter_names(&self) -> Vec<String>;

    /// Appends the reported values at the unconstrained point `q` to `out`, one per name.
    fn write_parameters(&self, q: &[f64], out: &mut Vec<f64>) {
        out.extend_from_slice(q);
    }

    /// What the user should know about how the model was built from their input (for example
    /// which data columns were read as categorical, or rows dropped), one sentence each; a run
    /// prints them before it starts. A note that begins `warning: ` asks the user to act (the
    /// command line prints it on stderr).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Initial values written by name on the model's own scale, in its front end's notation
    /// (a Stan model: CmdStan's init JSON, `{"sigma": 1.5, "theta": [0.1, 0.2]}`), moved to the
    /// unconstrained space the samplers run in. `None`, the default: the model has no such
    /// notation, and takes initial values as unconstrained numbers only.
    fn unconstrain_named(&self, _json: &str) -> Option<Result<Vec<f64>>> {
        None
    }

    /// The model's own expensive work so far, by name (for example PDE solves), for models
    /// whose cost is not simply one `U` or `∇U` evaluation: the run reports it per iteration
    /// and per effective sample. Counters only grow; take differences to cost one run.
    fn work(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// The model's `U` as a sum over data rows that several points can share one pass over,
    /// if it is one (see [`RowSum`]): chains then evaluate their exact `U` together instead of
    /// each reading all the data. `None` (the default) keeps every evaluation per chain.
    fn row_sum(&self) -> Option<&dyn RowSum> {
        None
    }

    /// The model's generative form, if it has one (a proper prior and a way to simulate data
    /// like its own): what simulation-based calibration needs.
    fn generative(&self) -> Option<&dyn Generative> {
        None
    }

    /// The first failure the model's values could not express, if there was one: a model whose
    /// evaluations can fail outside the mathematics (a served model's lost connection) returns
    /// NaN from `U` (a rejected, divergent transition) and records why here. The sampler
    /// checks after every iteration, stops every chain and returns it as
    /// [`crate::Error::ModelFailed`], so a failure mid-run is one clear error with the draws
    /// made so far kept, not a run of rejections or a panic.
    fn failure(&self) -> Option<String> {
        None
    }

    /// What happened to the model during the run that the user should know, one sentence
    /// each (a served model's instances that died and came back); a run prints them after
    /// its report.
    fn history(&self) -> Vec<String> {
        Vec::new()
    }

    /// The position-dependent metric RMHMC integrates with, when the model offers one (logistic
    /// regression: its Fisher information; the banana: its Fisher metric). `start` is where the
    /// chain starts, where a model whose metric is frozen evaluates it (the elliptic PDE: its
    /// Gauss–Newton diagonal). `None`, the default: the model cannot run RMHMC, and a run asking
    /// for it is refused before it starts.
    fn riemannian_metric(&self, _start: &[f64]) -> Option<Box<dyn RiemannianMetric + '_>> {
        None
    }

    /// How many calls the model serves at once, when that is more than this machine's cores:
    /// a served model's instances, each computing elsewhere while a thread here waits on it.
    /// A batch of independent evaluations (the Laplace draws, the Hessian's columns, a grid's
    /// nodes) then runs on that many threads ([`crate::batch::spread`]). `None`, the default:
    /// the model computes here, one call per core.
    fn concurrency(&self) -> Option<usize> {
        None
    }

    /// The memory one more chain evaluating at the same time adds to the model's own: the
    /// scratch an evaluation works in (the elliptic PDE: a factorization workspace and its
    /// vectors), so that a run's chains are sized against the memory limit before they start.
    /// 0, the default: evaluations need nothing the model does not already hold.
    fn bytes_per_chain(&self) -> u128 {
        0
    }

    /// Cheaper versions of the same posterior, if the model has them (the elliptic PDE: the
    /// same inverse problem on coarser meshes). Multilevel delayed acceptance proposes from
    /// them and judges by the model itself, so a model that offers them pays fewer of its own
    /// expensive evaluations per draw. A capability and not a constructor of the CLI's, because
    /// only the model knows what "the same posterior, coarser" means (which parts it shares:
    /// the PDE's prior, modes, observation points and data). `None`, the default: no levels.
    fn levels(&self) -> Option<&dyn Levels> {
        None
    }
}

/// A model's cheaper versions of itself, indexed by a resolution (the elliptic PDE: elements
/// per side of the mesh), for multilevel samplers.
pub trait Levels: Send + Sync {
    /// The model's own resolution: a coarser level has a smaller one.
    fn resolution(&self) -> usize;

    /// The posterior at `resolution` (below [`Levels::resolution`]), built on first request
    /// and shared after that, so that every chain's evaluations of one level count in one
    /// place: the model's [`Model::work`] reports each level's work beside its own. Fails on a
    /// resolution that is not coarser, or that `memory_limit` bytes cannot hold.
    fn coarser(&self, resolution: usize, memory_limit: u64) -> Result<Arc<dyn Model>>;
}

/// A model that can play its own data-generating process: draw parameters from its prior, then
/// data of the same shape as its own (the same covariates, group sizes or mesh) from them.
/// Simulation-based calibration checks a sampler against exactly this: the posterior of
/// simulated data must put the drawn parameters at a uniformly distributed rank.
pub trait Generative: Send + Sync {
    /// One draw of the generative process from a PCG-64 stream seeded with `seed`: the
    /// parameters (on the unconstrained space) and the posterior given the data simulated from
    /// them, with the same prior.
    fn simulate(&self, seed: u64) -> Result<Simulated>;
}

/// What one draw of a [`Generative`] process gives.
pub struct Simulated {
    /// The parameters drawn from the prior, on the unconstrained space.
    pub truth: Vec<f64>,
    /// The posterior given the data simulated from `truth`.
    pub posterior: Box<dyn Model>,
}

/// `prefix.1 … prefix.n`, CmdStan's names for the entries of a vector parameter.
pub fn indexed_names(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}.{i}")).collect()
}

/// A model made of one function, `U(q)` returned and `∇U(q)` written into the slice it is
/// given, and the parameters' names: all a density of one's own needs to be sampled (a closure,
/// an automatic-differentiation callback, a binding's call into another language).
///
/// `U` alone is the same function with a scratch gradient, allocated per call: the samplers ask
/// for `U` alone once per surrogate trajectory, which for a model worth a surrogate is small
/// beside the evaluation itself. A model with a cheaper `U` implements [`Potential`] itself.
pub struct FnModel<F> {
    names: Vec<String>,
    value_and_gradient: F,
}

impl<F: Fn(&[f64], &mut [f64]) -> f64 + Send + Sync> FnModel<F> {
    /// The model on `names.len()` parameters whose `U` and `∇U` `value_and_gradient` gives.
    pub fn new(names: Vec<String>, value_and_gradient: F) -> Self {
        Self {
            names,
            value_and_gradient,
        }
    }
}

impl<F: Fn(&[f64], &mut [f64]) -> f64> Potential for FnModel<F> {
    fn dim(&self) -> usize {
        self.names.len()
    }

    fn value(&self, q: &[f64]) -> f64 {
        let mut gradient = vec![0.0; q.len()];
        (self.value_and_gradient)(q, &mut gradient)
    }

    fn value_and_gradient(&self, q: &[f64], gradient: &mut [f64]) -> f64 {
        (self.value_and_gradient)(q, gradient)
    }
}

impl<F: Fn(&[f64], &mut [f64]) -> f64 + Send + Sync> Model for FnModel<F> {
    fn parameter_names(&self) -> Vec<String> {
        self.names.clone()
    }
}
