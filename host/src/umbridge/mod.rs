//! UM-Bridge, the UQ community's HTTP protocol for numerical models: shmc samples a model
//! served by any UM-Bridge server (`--model umbridge`, [`crate::models::umbridge`]) and serves
//! its own models to any UM-Bridge client (`shmc serve`, [`crate::serve`]).
//!
//! An expensive model then scales out through UM-Bridge's load balancer (SLURM, HyperQueue,
//! Kubernetes) instead of through anything of shmc's: the sampler keeps one call per chain in
//! flight, and the server side decides how many evaluations run at once. A few instances on
//! reachable machines need no balancer: the client spreads its calls over a list of them
//! ([`pool::Pool`]), or over the instances a cluster engine started and listed in a folder
//! ([`discovery`]).
//!
//! The [`protocol`] and the [`client`] sit here, below the models (the served posterior is a
//! model); the server and what it serves sit above them, in [`crate::serve`].

pub mod client;
pub mod discovery;
pub mod pool;
pub mod protocol;
