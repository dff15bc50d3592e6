//! The building blocks of the elliptic PDE inverse problem (journal paper section 5.2,
//! precomputing paper section 4.4): a finite-element solver for `∇·(c∇u) = 0` on the unit
//! square ([`fem`]) and the Karhunen–Loève expansion of the log-coefficient's Gaussian-process
//! prior ([`kl`]). The posterior itself is [`crate::models::elliptic_pde::EllipticPde`].

pub mod fem;
pub mod kl;

pub use fem::{Mesh, Workspace};
pub use kl::KarhunenLoeve;
