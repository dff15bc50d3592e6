//! How a chain starts: a finite initial point, and its method's surrogate machinery.

use nalgebra::DVector;
use rand::Rng;
use shmc_core::{Dyn, Exact, Potential, State, random::uniform};

use super::checkpoint::Checkpoint;
use crate::sampler::config::Init;
use crate::sampler::fitted::{FittedPhase, Precomputed};
use crate::sampler::method::Method;
use crate::sampler::proposer::Proposer;
use crate::sampler::variational::VhmcPhase;
use crate::{Error, Result};

/// Whether `U` and `∇U` cached in `state` are finite.
pub fn finite(state: &State<Dyn>) -> bool {
    state.potential.is_finite() && state.gradient.iter().all(|g| g.is_finite())
}

/// Draws the starting state, retrying random starts (up to 100) until `U` and `∇U` are finite.
pub fn initial_state<R: Rng + ?Sized>(
    model: &dyn Potential,
    init: &Init,
    chain: usize,
    rng: &mut R,
) -> Result<State<Dyn>> {
    let dim = model.dim();
    let dynamics = Exact(model);
    match init {
        Init::Values(values) => {
            let state = State::new(DVector::from_column_slice(values), &dynamics)?;
            if finite(&state) {
                Ok(state)
            } else {
                Err(Error::invalid(format!(
                    "chain {chain}: the potential or its gradient is not finite at the given initial values"
                )))
            }
        }
        Init::Random { radius } => {
            for _ in 0..100 {
                let q = DVector::from_fn(dim, |_, _| radius * (2.0 * uniform(rng) - 1.0));
                let state = State::new(q, &dynamics)?;
                if finite(&state) {
                    return Ok(state);
                }
            }
            Err(Error::invalid(format!(
                "chain {chain}: no finite potential at 100 random initial points in (-{radius}, {radius})"
            )))
        }
    }
}

/// The state a checkpoint saved, with the `U` and gradient cached there.
pub fn restored_state(checkpoint: &Checkpoint, dim: usize) -> Result<State<Dyn>> {
    let (position, gradient) = (&checkpoint.position, &checkpoint.gradient);
    if position.len() != dim || gradient.len() != dim {
        return Err(Error::invalid(format!(
            "chain {}: its checkpoint holds {} coordinates and {} gradient entries for a model \
             of {dim} parameters",
            checkpoint.chain,
            position.len(),
            gradient.len()
        )));
    }
    Ok(State {
        position: DVector::from_column_slice(position),
        potential: checkpoint.potential,
        gradient: DVector::from_column_slice(gradient),
    })
}

/// The surrogate machinery of `method` for a chain on `model` that starts at `start`, or `None`
/// for exact HMC. A saved surrogate is loaded here; VHMC finds its Laplace approximation here;
/// `precomputed` is the surrogate fitted before sampling, if there is one.
pub fn proposer<'m>(
    method: &Method,
    warmup: usize,
    model: &'m (dyn Potential + Sync),
    start: &[f64],
    precomputed: Option<&Precomputed>,
) -> Result<Option<Box<dyn Proposer + 'm>>> {
    Ok(match method {
        // NUTS and SGLD run their own chains (the sampler's `nuts` and `sgld` modules) and
        // only share the start.
        Method::Hmc | Method::Nuts(_) | Method::Rmhmc(_) | Method::Sgld(_) => None,
        // MLDA's network level, if it has one, is fitted as RNS-HMC's surrogate is.
        Method::RnsHmc(_) | Method::RnsRmhmc(..) | Method::Mlda(_) => {
            let Some(settings) = method.surrogate() else {
                return Ok(None);
            };
            Some(Box::new(FittedPhase::new(
                false,
                settings,
                (warmup, method.exact_warmup(warmup)),
                model,
                precomputed,
            )?))
        }
        Method::ArnsHmc(settings) => Some(Box::new(FittedPhase::new(
            true,
            settings,
            (warmup, None),
            model,
            precomputed,
        )?)),
        Method::Vhmc(settings) => Some(Box::new(VhmcPhase::new(settings, model, start)?)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::chain_rng;

    struct Flat;
    impl Potential for Flat {
        fn dim(&self) -> usize {
            1
        }
        fn value(&self, _: &[f64]) -> f64 {
            f64::NAN
        }
        fn value_and_gradient(&self, _: &[f64], g: &mut [f64]) -> f64 {
            g[0] = 0.0;
            f64::NAN
        }
    }

    #[test]
    fn nowhere_finite_potential_is_a_clear_error() {
        let err = initial_state(
            &Flat,
            &Init::Random { radius: 2.0 },
            3,
            &mut chain_rng(1, 3),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("chain 3") && err.contains("no finite potential"),
            "{err}"
        );
    }
}
