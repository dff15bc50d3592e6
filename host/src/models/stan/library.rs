//! A Stan model loaded from a shared library with BridgeStan's C interface, through the
//! `bridgestan` crate (nutpie's way in): `U(q) = −log p(q | data)` on Stan's unconstrained
//! space, with the Jacobian and without constants, as CmdStan's `lp__` has it; the reported
//! values are Stan's constrained parameters, transformed parameters and generated quantities
//! under Stan's own names.
//!
//! The library is thread-safe (the crate refuses one built without `STAN_THREADS`), so every
//! chain calls it at the same time, with no lock. An exception inside Stan (a `reject()`, a
//! domain error) comes back as an error value: `U` is then infinite and the gradient NaN, a
//! rejected, divergent proposal; the run counts them and reports the first message.

use std::ffi::CString;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use bridgestan::{Model as Loaded, StanLibrary};
use shmc_core::Potential;

use crate::model::Levels;
use crate::{Error, Model, Result};

/// A Stan model with its data, ready for every chain.
pub struct StanModel {
    model: Loaded<StanLibrary>,
    dim: usize,
    names: Vec<String>,
    seed: u32,
    origin: String,
    rejected: AtomicU64,
    first_rejection: Mutex<Option<String>>,
    /// Coarser versions of the program ([`super::levels`]), held by their trait so that this
    /// module, which they are made of, does not name them.
    levels: Option<Box<dyn Levels>>,
}

impl StanModel {
    /// Loads the library at `path` and builds its model from `data` (CmdStan's JSON text, or
    /// empty for a program without data), seeding its construction and its generated
    /// quantities' random numbers with `seed`. `origin` says in notes where the library came
    /// from.
    pub fn load(path: &Path, data: &str, seed: u32, origin: String) -> Result<Self> {
        let library = bridgestan::open_library(path).map_err(|e| {
            Error::invalid(format!(
                "{}: not a Stan library with BridgeStan's interface: {e}",
                path.display()
            ))
        })?;
        let data = CString::new(data)
            .map_err(|_| Error::invalid("the Stan data holds a NUL byte".to_string()))?;
        let model = Loaded::new(library, Some(&data), seed).map_err(|e| {
            Error::invalid(format!(
                "the Stan model could not be built from its data: {e}"
            ))
        })?;
        let names = split_names(model.param_names(true, true));
        Ok(Self {
            dim: model.param_unc_num(),
            names,
            model,
            seed,
            origin,
            rejected: AtomicU64::new(0),
            first_rejection: Mutex::new(None),
            levels: None,
        })
    }

    /// The model with coarser `levels` for multilevel samplers.
    pub fn with_levels(self, levels: impl Levels + 'static) -> Self {
        Self {
            levels: Some(Box::new(levels)),
            ..self
        }
    }

    /// Constrained values of `constrained` (Stan's parameters only, in their order) moved to
    /// the unconstrained space: an initial point given as a user would write it.
    pub fn unconstrain(&self, constrained: &[f64]) -> Result<Vec<f64>> {
        let mut out = vec![0.0; self.dim];
        self.model
            .param_unconstrain(constrained, &mut out)
            .map_err(|e| Error::invalid(format!("Stan could not unconstrain the values: {e}")))?;
        Ok(out)
    }

    /// Counts a failed evaluation, keeping the first message.
    fn reject(&self, message: String) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        let mut first = self
            .first_rejection
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        first.get_or_insert(message);
    }

    /// The seed of a draw's generated quantities: the run's model seed and the draw's bits, so
    /// that the same draw gets the same values whichever thread writes it and in what order.
    fn draw_seed(&self, q: &[f64]) -> u32 {
        // SplitMix64's finaliser folded over the bits: stable across builds and platforms.
        let mix = |mut z: u64| {
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let folded = q
            .iter()
            .fold(mix(u64::from(self.seed)), |h, x| mix(h ^ x.to_bits()));
        (folded >> 32) as u32
    }
}

/// Stan's comma-separated names as a list (no name holds a comma).
fn split_names(names: &str) -> Vec<String> {
    names
        .split(',')
        .filter(|n| !n.is_empty())
        .map(String::from)
        .collect()
}

impl Potential for StanModel {
    fn dim(&self) -> usize {
        self.dim
    }

    fn value(&self, q: &[f64]) -> f64 {
        match self.model.log_density(q, true, true) {
            Ok(lp) => -lp,
            Err(e) => {
                self.reject(e.to_string());
                f64::INFINITY
            }
        }
    }

    fn value_and_gradient(&self, q: &[f64], gradient: &mut [f64]) -> f64 {
        match self.model.log_density_gradient(q, true, true, gradient) {
            Ok(lp) => {
                gradient.iter_mut().for_each(|g| *g = -*g);
                -lp
            }
            Err(e) => {
                self.reject(e.to_string());
                gradient.fill(f64::NAN);
                f64::INFINITY
            }
        }
    }
}

impl Model for StanModel {
    fn parameter_names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn write_parameters(&self, q: &[f64], out: &mut Vec<f64>) {
        let start = out.len();
        out.resize(start + self.names.len(), f64::NAN);
        let written = self.model.new_rng(self.draw_seed(q)).and_then(|mut rng| {
            self.model
                .param_constrain(q, true, true, &mut out[start..], Some(&mut rng))
        });
        if let Err(e) = written {
            // A generated quantity that threw: its row says NaN, and the run says why.
            out[start..].fill(f64::NAN);
            self.reject(e.to_string());
        }
    }

    /// CmdStan's init JSON through the library's own reader (Stan's `transform_inits`): every
    /// parameter must be there; Stan's message names one that is missing or out of its support.
    fn unconstrain_named(&self, json: &str) -> Option<Result<Vec<f64>>> {
        let unconstrained = CString::new(json)
            .map_err(|_| Error::invalid("the initial values hold a NUL byte"))
            .and_then(|json| {
                let mut out = vec![0.0; self.dim];
                self.model
                    .param_unconstrain_json(&json, &mut out)
                    .map_err(|e| Error::invalid(format!("Stan could not read them: {e}")))?;
                Ok(out)
            });
        Some(unconstrained)
    }

    fn levels(&self) -> Option<&dyn Levels> {
        self.levels.as_deref()
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "Stan model {} from {}: {} unconstrained parameters, {} columns",
            self.model.name().unwrap_or("?"),
            self.origin,
            self.dim,
            self.names.len()
        )]
    }

    fn history(&self) -> Vec<String> {
        let rejected = self.rejected.load(Ordering::Relaxed);
        if rejected == 0 {
            return Vec::new();
        }
        let first = self
            .first_rejection
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        vec![format!(
            "Stan rejected {rejected} evaluations (each a rejected, divergent proposal); the \
             first said: {}",
            first.as_deref().unwrap_or("?")
        )]
    }
}
