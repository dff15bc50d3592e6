//! Your own model through shmc's driver: a Bayesian linear regression written as a Rust type.
//!
//! `y ~ N(Xβ, σ²)` with priors `β ~ N(0, 10² I)` and `σ ~ Exponential(1)`. HMC works on the
//! unconstrained space, so the sampler sees `θ = log σ`; the change of variables adds the log
//! Jacobian `log |dσ/dθ| = θ` to the log density (so `−θ` to the potential `U`). The draws
//! report `σ = exp θ`, as Stan reports a `<lower=0>` parameter.
//!
//! It is sampled with NUTS, as Stan would, through the short API ([`shmc::Sampler`]): the draws
//! in memory with their summary, and CmdStan CSVs for ArviZ or CmdStanPy.
//!
//! Run with `cargo run --release -p shmc-examples --example linear_regression`.

use shmc::core::Potential;
use shmc::core::random::fill_standard_normal;
use shmc::model::indexed_names;
use shmc::random::chain_rng;
use shmc::sampler::{Method, NutsSettings};
use shmc::{Model, Sampler};

/// The data and the potential of the regression.
struct LinearRegression {
    /// Row-major `n × k` design.
    x: Vec<f64>,
    y: Vec<f64>,
    k: usize,
}

impl LinearRegression {
    /// Splits `q = (β, θ)`.
    fn split<'a>(&self, q: &'a [f64]) -> (&'a [f64], f64) {
        (&q[..self.k], q[self.k])
    }
}

impl Potential for LinearRegression {
    fn dim(&self) -> usize {
        self.k + 1
    }

    fn value(&self, q: &[f64]) -> f64 {
        let mut scratch = vec![0.0; self.dim()];
        self.value_and_gradient(q, &mut scratch)
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let (beta, theta) = self.split(q);
        let n = self.y.len() as f64;
        let inv_var = (-2.0 * theta).exp();
        grad.fill(0.0);
        let mut sum_sq = 0.0;
        for (row, &y) in self.x.chunks_exact(self.k).zip(&self.y) {
            let r = y - row.iter().zip(beta).map(|(a, b)| a * b).sum::<f64>();
            sum_sq += r * r;
            for (g, a) in grad[..self.k].iter_mut().zip(row) {
                *g -= inv_var * r * a;
            }
        }
        let sigma = theta.exp();
        let prior_beta: f64 = beta.iter().map(|b| b * b).sum::<f64>() / 200.0;
        for (g, b) in grad[..self.k].iter_mut().zip(beta) {
            *g += b / 100.0;
        }
        // Likelihood n·θ + Σr²/2σ², prior σ, Jacobian −θ.
        grad[self.k] = n - sum_sq * inv_var + sigma - 1.0;
        n * theta + 0.5 * sum_sq * inv_var + prior_beta + sigma - theta
    }
}

impl Model for LinearRegression {
    fn parameter_names(&self) -> Vec<String> {
        let mut names = indexed_names("beta", self.k);
        names.push("sigma".into());
        names
    }

    fn write_parameters(&self, q: &[f64], out: &mut Vec<f64>) {
        out.extend_from_slice(&q[..self.k]);
        out.push(q[self.k].exp());
    }
}

/// Simulates `n` observations from known coefficients and `σ = 0.5`.
fn simulate(n: usize) -> LinearRegression {
    let truth = [1.0, -2.0, 0.5];
    let k = truth.len();
    let mut rng = chain_rng(2024, 0);
    let mut x = vec![0.0; n * k];
    fill_standard_normal(&mut rng, &mut x);
    let mut noise = vec![0.0; n];
    fill_standard_normal(&mut rng, &mut noise);
    let y = x
        .chunks_exact(k)
        .zip(&noise)
        .map(|(row, e)| row.iter().zip(&truth).map(|(a, b)| a * b).sum::<f64>() + 0.5 * e)
        .collect();
    LinearRegression { x, y, k }
}

fn main() -> shmc::Result<()> {
    let model = simulate(200);
    let fit = Sampler::new(&model)
        .method(Method::Nuts(NutsSettings::default()))
        .draws(2000)
        .seed(7)
        .name("linear_regression")
        .run()?;
    print!("{}", fit.summary_table());
    println!("true values: beta = (1, -2, 0.5), sigma = 0.5");
    let dir = std::env::temp_dir().join("shmc-linear-regression");
    fit.write_cmdstan(&dir)?;
    println!("CmdStan CSVs in {}", dir.display());
    Ok(())
}
