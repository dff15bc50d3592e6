//! The built-in models served over UM-Bridge (`shmc serve`): what each served model answers
//! ([`served`]: a posterior's log-density and gradient, the PDE's forward map and its Jacobian
//! actions) and the HTTP server that answers for them ([`server`]). Above the models it serves;
//! the protocol it speaks is [`crate::umbridge::protocol`].

mod queue;
pub mod served;
pub mod server;
