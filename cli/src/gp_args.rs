//! The Gaussian-process surrogate's options, `--gp full|fitc`, `--inducing M`, `--gp-mean
//! constant|quadratic` and `--gp-gradients`: rns-hmc's surrogate a full GP or FITC instead of the network
//! ([`shmc::surrogates::gp`]).

use clap::Args;
use shmc::surrogates::gp::{Approximation, GpFitter, GpOptions, MeanFunction};
use shmc::surrogates::kinds::SurrogateKind;
use shmc::{Error, Result};

/// FITC's inducing points when `--inducing` is not given.
const DEFAULT_INDUCING: usize = 500;

/// `--gp` and `--inducing`.
#[derive(Debug, Args)]
pub struct GpArgs {
    /// A Gaussian process instead of the network as rns-hmc's surrogate: full (every training
    /// state; O(n^3) to fit, 3 n^2 x 8 bytes, O(n d) per gradient) or fitc (--inducing points
    /// drawn from the training states; O(n M^2) to fit, O(M d) per gradient). Hyperparameters
    /// by maximising the marginal likelihood; the exact MH step keeps the chain exact.
    #[arg(long, value_parser = ["full", "fitc"])]
    pub gp: Option<String>,
    /// FITC's number of inducing points M (with --gp fitc) [default: 500].
    #[arg(long, value_name = "M")]
    pub inducing: Option<usize>,
    /// The GP's mean function (with --gp): constant (fitted with the hyperparameters; far
    /// from the training states the mean reverts to it and its gradient to zero) or quadratic
    /// (a full quadratic fitted by least squares first, the GP on its residuals; far out the
    /// mean is the quadratic; (1 + d + d(d+1)/2)^2 x 16 bytes) [default: constant].
    #[arg(long, value_parser = ["constant", "quadratic"], value_name = "MEAN")]
    pub gp_mean: Option<String>,
    /// Fit the full GP (--gp full) to the training states' gradients too, as derivative
    /// observations (Rasmussen 2003): n(d+1) observations from n states, so far fewer states
    /// for the same fit, at O((n(d+1))^3) to fit and 3 (n(d+1))^2 x 8 bytes; still O(n d) per
    /// gradient. Not for FITC.
    #[arg(long)]
    pub gp_gradients: bool,
}

impl GpArgs {
    /// Refuses `--gp` and `--inducing` where they would be ignored (`why`: what is used
    /// instead).
    pub fn refuse(&self, why: &str) -> Result<()> {
        if self.gp.is_none() && self.gp_mean.is_some() {
            return Err(Error::invalid(format!(
                "--gp-mean is for rns-hmc --gp: {why}"
            )));
        }
        if self.gp.is_none() && self.gp_gradients {
            return Err(Error::invalid(format!(
                "--gp-gradients is for rns-hmc --gp full: {why}"
            )));
        }
        match (&self.gp, self.inducing) {
            (None, None) => Ok(()),
            (Some(_), _) => Err(Error::invalid(format!("--gp is for rns-hmc: {why}"))),
            (None, Some(_)) => Err(Error::invalid(format!(
                "--inducing is for rns-hmc --gp fitc: {why}"
            ))),
        }
    }

    /// The GP kind `--gp` asks for (seed `seed` for FITC's inducing points, the fit refused
    /// above `memory_limit` bytes), or `network` without `--gp`.
    pub fn kind_or(
        &self,
        network: SurrogateKind,
        seed: u64,
        memory_limit: u64,
    ) -> Result<SurrogateKind> {
        let approximation = match (self.gp.as_deref(), self.inducing) {
            (None, None) if self.gp_mean.is_some() => {
                return Err(Error::invalid("--gp-mean is for --gp full or fitc"));
            }
            (None, None) if self.gp_gradients => {
                return Err(Error::invalid("--gp-gradients is for --gp full"));
            }
            (None, None) => return Ok(network),
            (Some("fitc"), Some(0)) => return Err(Error::invalid("--inducing must be at least 1")),
            (Some("fitc"), inducing) => Approximation::Fitc {
                inducing: inducing.unwrap_or(DEFAULT_INDUCING),
            },
            (Some(_), None) => Approximation::Full,
            (_, Some(_)) => return Err(Error::invalid("--inducing is for --gp fitc")),
        };
        Ok(SurrogateKind::Gp(GpFitter {
            options: GpOptions {
                approximation,
                mean: match self.gp_mean.as_deref() {
                    Some("quadratic") => MeanFunction::Quadratic,
                    _ => MeanFunction::Constant,
                },
                gradients: self.gp_gradients,
                seed,
                memory_limit,
                ..GpOptions::default()
            },
        }))
    }
}
