//! The random-network surrogate: a shallow network `z(q) = Σ vᵢ a(wᵢ·q + dᵢ) + b` whose input
//! parameters are drawn once at random, so that fitting it to the states an exact HMC phase
//! visited is a ridge problem in the output weights `(v, b)`.
//!
//! Two fits:
//! * [`fit_potential`]: ELM "potential matching", ridge least squares of `z(qₙ)` on `U(qₙ)`
//!   (journal paper's RNS-HMC training; the bias is not penalized);
//! * [`fit_score`]: score matching, ridge least squares of `∇z(qₙ)` on `∇U(qₙ)` (VHMC), with
//!   the bias set so that `z − U` has mean zero over the training states.
//!
//! Both see the input through `u = (q − m) / (c·sd)`, with `m` and `sd` the mean and
//! per-coordinate standard deviation of the training positions (or, for additive units by
//! default, through the whitened `u = L⁻¹(q − m) / c` with `LLᵀ` their covariance: see
//! [`Inputs`]) and `c` a scale factor: the larger `c`, the more slowly the random units vary
//! over the posterior (near-quadratic pieces, good for near-Gaussian targets); the smaller, the
//! more nonlinear. [`Scale::Auto`] picks `c` from [`AUTO_SCALE_GRID`] by the held-out gradient
//! error. Every fit holds out every k-th state (k = 1/[`TrainOptions::holdout_fraction`]), fits
//! on the rest to measure honest held-out errors (and choose `c`), then refits on all states at
//! the chosen `c`; the refit reuses the training states' normal matrix, so it costs only the
//! held-out states' share.
//!
//! As a [`Surrogate`](crate::surrogates::Surrogate), [`NetworkSurrogate`]: fitted by
//! [`NetworkFitter`], learning online after its batch fit (Greville's recursion after a
//! potential fit, score matching after a gradient fit), with its exact Hessian for the
//! trajectory chooser, standing for `U` within the [`Reach`] of its training states, saved as
//! kind [`KIND`].

mod design;
mod fit;
mod online;
mod options;
mod reach;
mod record;
mod surrogate;

pub(crate) use design::is_held_out;
pub use fit::{ScaleCandidate, TrainedNetwork, fit_potential, fit_score};
pub use options::{AUTO_SCALE_GRID, DynNetwork, Inputs, Scale, TrainOptions};
pub use reach::Reach;
pub use record::KIND;
pub(crate) use record::NetworkRecord;
pub use surrogate::{NetworkFitter, NetworkSurrogate};

#[cfg(test)]
mod tests;
