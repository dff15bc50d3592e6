//! On-device online training without an allocator: a fixed-capacity history of recent accepted
//! states, from which a device updates its surrogate as it samples (ARNS-HMC on the device) and
//! refactorizes the Greville state when the recursion has drifted.
//!
//! [`TrainingBuffer`] keeps the last `N` states (position and exact `U`) in a ring over a
//! [`heapless::Vec`]: pushing into a full buffer overwrites the oldest state, so the buffer
//! always holds the `N` most recent. Each state also goes to the online Greville update as it
//! arrives; the buffer is what a *restart* replays. (heapless's own ring, `HistoryBuf`, indexes
//! its storage with a cursor the compiler cannot bound, which leaves a formatting panic on the
//! device's path; the `Vec` is only ever reached through `get_mut` and `split_at_checked`.)
//!
//! # Single precision
//! The Greville recursion updates `Θ = H†H†ᵀ` by rank-one and rank-two corrections, whose
//! rounding errors build up where the rows are ill-conditioned, and the hidden-unit outputs of
//! nearby states are: over 10⁴ updates on the banana (d = 2, s = 16, cond(H) ~ 10⁴), an `f32`
//! recursion from the pseudoinverse start is off the least-squares fit by 0.08–0.2 of `U`'s
//! spread and does not settle, where `f64` stays at 10⁻⁷ (the core's test
//! `tests/single_precision.rs` measures it). The rule: in `f32`, start from
//! [`OnlineGreville::ridge`] at λ = [`F32_RIDGE`]; that recursion then tracks its `f64` twin
//! within 2.1·10⁻³ of `U`'s spread over the 10⁴ updates (4.1·10⁻³ with micromath's
//! activations), and needs no restart. [`TrainingBuffer::refit`] restarts the state
//! ([`OnlineGreville::restart`]) and replays the buffer oldest first, for a device that changes
//! its network (new random units, a new input transform) and must fit it afresh without the
//! rows it no longer has.

use heapless::Vec;
use nalgebra::Const;

use crate::error::Error;
use crate::greville::OnlineGreville;
use crate::network::Network;
use crate::real::Real;

/// The ridge parameter of an `f32` Greville start (features of order one; see the module docs).
pub const F32_RIDGE: f64 = 1e-2;

/// One accepted state: its position and its exact potential.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample<T, const D: usize> {
    /// The position `q`.
    pub position: [T; D],
    /// The exact `U(q)`.
    pub potential: T,
}

/// The `N` most recent accepted states of a `D`-dimensional chain, in `T`.
#[derive(Clone, Debug)]
pub struct TrainingBuffer<T, const D: usize, const N: usize> {
    /// The states in arrival order until full; then a ring whose oldest entry is at `next`.
    samples: Vec<Sample<T, D>, N>,
    /// Where the next state goes once the buffer is full (the oldest state).
    next: usize,
}

impl<T: Real, const D: usize, const N: usize> Default for TrainingBuffer<T, D, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Real, const D: usize, const N: usize> TrainingBuffer<T, D, N> {
    /// An empty buffer.
    pub const fn new() -> Self {
        Self {
            samples: Vec::new(),
            next: 0,
        }
    }

    /// Adds a state, overwriting the oldest one when the buffer is full. A position of the
    /// wrong length is refused.
    pub fn push(&mut self, position: &[T], potential: T) -> Result<(), Error> {
        let position: [T; D] = position.try_into().map_err(|_| Error::DimensionMismatch {
            expected: D,
            found: position.len(),
        })?;
        let sample = Sample {
            position,
            potential,
        };
        if let Err(sample) = self.samples.push(sample) {
            // Full: overwrite the oldest.
            if let Some(slot) = self.samples.get_mut(self.next) {
                *slot = sample;
            }
            self.next = if self.next + 1 < N { self.next + 1 } else { 0 };
        }
        Ok(())
    }

    /// How many states it holds (at most `N`).
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether it holds no state.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// `N`.
    pub fn capacity(&self) -> usize {
        N
    }

    /// The states, oldest first.
    pub fn oldest_first(&self) -> impl Iterator<Item = &Sample<T, D>> {
        let (newer, older) = self
            .samples
            .split_at_checked(self.next)
            .unwrap_or((&[], &[]));
        older.iter().chain(newer)
    }

    /// Restarts `greville` and replays the buffer into it, oldest first, with the hidden-unit
    /// outputs of `network` as the rows (`S` of them, computed into a stack array). Afterwards
    /// its weights are the fit to the buffer's states alone; set them on the network with
    /// [`Network::set_output`].
    pub fn refit<const S: usize>(
        &self,
        network: &Network<Const<D>, Const<S>, T>,
        greville: &mut OnlineGreville<Const<S>, T>,
    ) {
        greville.restart();
        let mut row = [T::zero(); S];
        for sample in self.oldest_first() {
            network.features(&sample.position, &mut row);
            greville.update(&row, sample.potential);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn firsts<const N: usize>(buffer: &TrainingBuffer<f64, 2, N>) -> Vec<f64> {
        buffer.oldest_first().map(|s| s.position[0]).collect()
    }

    /// Below capacity every state is kept in arrival order; past it the oldest is overwritten,
    /// the length stays at the capacity and the order is still oldest first.
    #[test]
    fn overwrites_the_oldest_state_once_full() {
        let mut buffer = TrainingBuffer::<f64, 2, 4>::new();
        assert!(buffer.is_empty());
        assert_eq!(buffer.capacity(), 4);
        for k in 0..3 {
            buffer.push(&[k as f64, 0.0], 10.0 + k as f64).unwrap();
        }
        assert_eq!(buffer.len(), 3);
        assert_eq!(firsts(&buffer), [0.0, 1.0, 2.0]);
        for k in 3..10 {
            buffer.push(&[k as f64, -1.0], 10.0 + k as f64).unwrap();
            assert_eq!(buffer.len(), (k + 1).min(4));
        }
        assert_eq!(firsts(&buffer), [6.0, 7.0, 8.0, 9.0]);
        let last = buffer.oldest_first().last().unwrap();
        assert_eq!(
            *last,
            Sample {
                position: [9.0, -1.0],
                potential: 19.0
            }
        );
    }

    /// A refit after the buffer has wrapped gives exactly the state of a fresh recursion fed
    /// the buffer's states: the older rows are forgotten.
    #[test]
    fn refit_replays_exactly_the_buffered_states() {
        use crate::greville::DEFAULT_TOLERANCE;
        use crate::network::{InputTransform, NetworkConfig};
        use crate::random::{SplitMix64, fill_standard_normal};
        use crate::{FixedGreville, FixedNetwork};
        let mut rng = SplitMix64(3);
        let transform = InputTransform::identity(Const::<2>);
        let config = NetworkConfig::default();
        let network = FixedNetwork::<2, 6>::random(&config, transform, Const, &mut rng).unwrap();
        let mut buffer = TrainingBuffer::<f64, 2, 8>::new();
        let mut online = FixedGreville::<6>::new(Const, DEFAULT_TOLERANCE).unwrap();
        let mut row = [0.0; 6];
        for _ in 0..30 {
            let mut q = [0.0; 2];
            fill_standard_normal(&mut rng, &mut q);
            let u = q[0] * q[0] + 0.5 * q[1];
            buffer.push(&q, u).unwrap();
            network.features(&q, &mut row);
            online.update(&row, u);
        }
        buffer.refit(&network, &mut online);
        let mut fresh = FixedGreville::<6>::new(Const, DEFAULT_TOLERANCE).unwrap();
        for sample in buffer.oldest_first() {
            network.features(&sample.position, &mut row);
            fresh.update(&row, sample.potential);
        }
        assert_eq!(online.rows(), 8);
        assert_eq!(online.weights(), fresh.weights());
    }

    #[test]
    fn refuses_a_position_of_the_wrong_dimension() {
        let mut buffer = TrainingBuffer::<f32, 2, 3>::new();
        assert_eq!(
            buffer.push(&[1.0, 2.0, 3.0], 0.0),
            Err(Error::DimensionMismatch {
                expected: 2,
                found: 3
            })
        );
        assert!(buffer.is_empty());
    }
}
