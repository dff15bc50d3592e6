//! SGLD against a posterior known in closed form: Bayesian linear regression with a Gaussian
//! prior, a row-sum model defined here.
//!
//! With a fixed step size (`γ = 0`) SGLD on this model is a linear autoregression, so its
//! stationary law is known exactly: the mean is the posterior mean (the minibatch noise has
//! mean zero), and the covariance `Σ_ε` solves `Σ = A Σ Aᵀ + Q` with `A = I − (ε/2) Λ`
//! (`Λ` the posterior precision) and `Q = ε I + (ε²/4) V`, `V` the covariance of the minibatch
//! gradient (rows drawn without replacement). The test checks both against the draws, within
//! the Monte Carlo error the run's ESS implies, at two step sizes, and that the smaller step
//! size's variance is nearer the posterior's. A likelihood gradient scaled by anything but
//! `N/n` moves the stationary covariance far from `Σ_ε` and fails it.

use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc::core::Potential;
use shmc::core::random::fill_standard_normal;
use shmc::model::indexed_names;
use shmc::row_sum::{self, Need, Query, RowSum};
use shmc::sampler::{DrawSink, Init, Method, NullSink, SampleConfig, SgldSettings, sample};
use shmc::{Error, Model};

const D: usize = 2;

/// `yᵢ = xᵢ·β + N(0, 1)`, `β ~ N(0, PRIOR_VARIANCE I)`: `U = Σᵢ ½(yᵢ − xᵢ·β)² + ‖β‖²/(2σ²)`.
struct LinearGaussian {
    x: Vec<f64>,
    y: Vec<f64>,
}

const PRIOR_VARIANCE: f64 = 100.0;

impl LinearGaussian {
    fn simulate(n: usize, seed: u64) -> Self {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut x = vec![0.0; n * D];
        let mut noise = vec![0.0; n];
        fill_standard_normal(&mut rng, &mut x);
        fill_standard_normal(&mut rng, &mut noise);
        let beta = [0.5, -1.0];
        let y = x
            .chunks_exact(D)
            .zip(&noise)
            .map(|(row, e)| row[0] * beta[0] + row[1] * beta[1] + e)
            .collect();
        Self { x, y }
    }

    fn n(&self) -> usize {
        self.y.len()
    }

    /// Row `i`'s term's gradient `xᵢ (xᵢ·β − yᵢ)`.
    fn row_gradient(&self, i: usize, beta: &[f64]) -> [f64; D] {
        let row = &self.x[i * D..(i + 1) * D];
        let r = row[0] * beta[0] + row[1] * beta[1] - self.y[i];
        [r * row[0], r * row[1]]
    }

    /// The posterior precision `XᵀX + I/σ²` and mean.
    fn posterior(&self) -> ([[f64; D]; D], [f64; D]) {
        let mut precision = [[0.0; D]; D];
        let mut xty = [0.0; D];
        for (row, y) in self.x.chunks_exact(D).zip(&self.y) {
            for j in 0..D {
                xty[j] += row[j] * y;
                for k in 0..D {
                    precision[j][k] += row[j] * row[k];
                }
            }
        }
        for (j, row) in precision.iter_mut().enumerate() {
            row[j] += 1.0 / PRIOR_VARIANCE;
        }
        let mean = solve(&precision, xty);
        (precision, mean)
    }

    /// The covariance of SGLD's gradient estimate `(N/n) Σ_{i∈B} ∇ℓᵢ(β)` over minibatches of
    /// `n` rows without replacement: `N² (1/n − 1/N) S`, `S` the rows' gradients' covariance
    /// (with divisor `N − 1`).
    fn minibatch_covariance(&self, beta: &[f64], n: usize) -> [[f64; D]; D] {
        let big = self.n();
        let grads: Vec<[f64; D]> = (0..big).map(|i| self.row_gradient(i, beta)).collect();
        let mut mean = [0.0; D];
        for g in &grads {
            for j in 0..D {
                mean[j] += g[j] / big as f64;
            }
        }
        let mut s = [[0.0; D]; D];
        for g in &grads {
            for j in 0..D {
                for k in 0..D {
                    s[j][k] += (g[j] - mean[j]) * (g[k] - mean[k]) / (big - 1) as f64;
                }
            }
        }
        let factor = (big * big) as f64 * (1.0 / n as f64 - 1.0 / big as f64);
        s.map(|row| row.map(|v| factor * v))
    }
}

fn solve(a: &[[f64; D]; D], b: [f64; D]) -> [f64; D] {
    let det = a[0][0] * a[1][1] - a[0][1] * a[1][0];
    [
        (a[1][1] * b[0] - a[0][1] * b[1]) / det,
        (a[0][0] * b[1] - a[1][0] * b[0]) / det,
    ]
}

/// The stationary covariance of `q ← A q + noise(Q)`: `Σ = Σ_k A^k Q (Aᵀ)^k`, summed until
/// the terms vanish (`‖A‖ < 1` here).
fn stationary_covariance(a: [[f64; D]; D], q: [[f64; D]; D]) -> [[f64; D]; D] {
    let mul = |x: [[f64; D]; D], y: [[f64; D]; D]| {
        let mut z = [[0.0; D]; D];
        for i in 0..D {
            for j in 0..D {
                z[i][j] = (0..D).map(|k| x[i][k] * y[k][j]).sum();
            }
        }
        z
    };
    let transpose = |x: [[f64; D]; D]| [[x[0][0], x[1][0]], [x[0][1], x[1][1]]];
    let mut sigma = [[0.0; D]; D];
    let mut term = q;
    for _ in 0..100_000 {
        for i in 0..D {
            for j in 0..D {
                sigma[i][j] += term[i][j];
            }
        }
        term = mul(mul(a, term), transpose(a));
        if term.iter().flatten().all(|v| v.abs() < 1e-18) {
            break;
        }
    }
    sigma
}

impl Potential for LinearGaussian {
    fn dim(&self) -> usize {
        D
    }
    fn value(&self, q: &[f64]) -> f64 {
        row_sum::evaluate(self, q, Need::Value, &mut [])
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        row_sum::evaluate(self, q, Need::ValueAndGradient, grad)
    }
}

impl RowSum for LinearGaussian {
    fn segments(&self) -> usize {
        1
    }
    fn segment(&self, _: usize, queries: &[Query<'_>], out: &mut [f64]) {
        for (query, record) in queries.iter().zip(out.chunks_exact_mut(1 + D)) {
            record.fill(0.0);
            for i in 0..self.n() {
                let row = &self.x[i * D..(i + 1) * D];
                let r = row[0] * query.point[0] + row[1] * query.point[1] - self.y[i];
                record[0] += 0.5 * r * r;
                record[1] += r * row[0];
                record[2] += r * row[1];
            }
        }
    }
    fn rows(&self) -> usize {
        self.n()
    }
    fn rows_gradient(&self, point: &[f64], rows: &[usize], grad: &mut [f64]) {
        grad.fill(0.0);
        for &i in rows {
            let g = self.row_gradient(i, point);
            grad[0] += g[0];
            grad[1] += g[1];
        }
    }
    fn finish(&self, point: &[f64], need: Need, value: &mut f64, grad: &mut [f64]) {
        if need.value() {
            *value += point.iter().map(|b| b * b).sum::<f64>() / (2.0 * PRIOR_VARIANCE);
        }
        if need.gradient() {
            for (g, b) in grad.iter_mut().zip(point) {
                *g += b / PRIOR_VARIANCE;
            }
        }
    }
}

impl Model for LinearGaussian {
    fn parameter_names(&self) -> Vec<String> {
        indexed_names("beta", D)
    }
    fn row_sum(&self) -> Option<&dyn RowSum> {
        Some(self)
    }
}

const ROWS: usize = 1000;
const BATCH: usize = 200;

/// The draws' means, variances and bulk ESS per coordinate of SGLD at fixed step size `eps`.
fn run(model: &LinearGaussian, mean: [f64; D], eps: f64) -> Vec<(f64, f64, f64, f64)> {
    let config = SampleConfig {
        chains: 4,
        warmup: 2000,
        draws: 40_000,
        seed: 7,
        init: Init::Values(mean.to_vec()),
        method: Method::Sgld(SgldSettings {
            batch: BATCH,
            a: eps,
            b: 1.0,
            gamma: 0.0,
        }),
        ..SampleConfig::default()
    };
    let sinks: Vec<Box<dyn DrawSink>> = (0..4).map(|_| Box::new(NullSink) as _).collect();
    let run = sample(model, &config, sinks, &|_, _| {}, None).unwrap();
    run.summary()
        .iter()
        .map(|p| (p.mean, p.sd * p.sd, p.ess_bulk, p.mcse_mean))
        .collect()
}

#[test]
fn sgld_recovers_the_mean_and_its_variance_bias_shrinks_with_the_step_size() {
    let model = LinearGaussian::simulate(ROWS, 3);
    let (precision, mean) = model.posterior();
    let inverse = {
        let det = precision[0][0] * precision[1][1] - precision[0][1] * precision[1][0];
        [
            [precision[1][1] / det, -precision[0][1] / det],
            [-precision[1][0] / det, precision[0][0] / det],
        ]
    };
    let v = model.minibatch_covariance(&mean, BATCH);
    let mut errors = Vec::new();
    // ελ_max ≈ 0.4 and 0.1 (the posterior precision is ≈ 1000 I).
    for eps in [4e-4, 1e-4] {
        let a = [
            [
                1.0 - 0.5 * eps * precision[0][0],
                -0.5 * eps * precision[0][1],
            ],
            [
                -0.5 * eps * precision[1][0],
                1.0 - 0.5 * eps * precision[1][1],
            ],
        ];
        let q = [
            [eps + 0.25 * eps * eps * v[0][0], 0.25 * eps * eps * v[0][1]],
            [0.25 * eps * eps * v[1][0], eps + 0.25 * eps * eps * v[1][1]],
        ];
        let predicted = stationary_covariance(a, q);
        let draws = run(&model, mean, eps);
        let mut error = 0.0f64;
        for (j, &(m, var, ess, mcse)) in draws.iter().enumerate() {
            // The stationary mean is exact: only Monte Carlo error.
            assert!(
                (m - mean[j]).abs() <= 4.0 * mcse,
                "ε = {eps}: mean {m} of beta.{} against the posterior's {} (MCSE {mcse})",
                j + 1,
                mean[j]
            );
            // A variance estimate from ESS draws has relative sd ≈ √(2/ESS).
            let tolerance = 4.0 * (2.0 / ess).sqrt();
            let relative = var / predicted[j][j] - 1.0;
            assert!(
                relative.abs() <= tolerance,
                "ε = {eps}: variance {var:.4e} of beta.{} against SGLD's stationary {:.4e} \
                 (relative {relative:.3}, tolerance {tolerance:.3}; the posterior's {:.4e})",
                j + 1,
                predicted[j][j],
                inverse[j][j]
            );
            error = error.max((var / inverse[j][j] - 1.0).abs());
        }
        errors.push(error);
    }
    // Predicted: ≈ 0.55 at the larger step and ≈ 0.13 at the smaller.
    assert!(
        errors[1] < 0.5 * errors[0],
        "the variance's relative error should shrink with the step size: {errors:?}"
    );
}

#[test]
fn sgld_refuses_a_model_without_rows() {
    struct Plain;
    impl Potential for Plain {
        fn dim(&self) -> usize {
            1
        }
        fn value(&self, q: &[f64]) -> f64 {
            0.5 * q[0] * q[0]
        }
        fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
            grad[0] = q[0];
            self.value(q)
        }
    }
    impl Model for Plain {
        fn parameter_names(&self) -> Vec<String> {
            vec!["x".into()]
        }
    }
    let config = SampleConfig {
        chains: 1,
        method: Method::Sgld(SgldSettings::default()),
        ..SampleConfig::default()
    };
    let sinks: Vec<Box<dyn DrawSink>> = vec![Box::new(NullSink)];
    let error = sample(&Plain, &config, sinks, &|_, _| {}, None).unwrap_err();
    assert!(matches!(error, Error::Invalid(_)), "{error}");
    assert!(error.to_string().contains("sum over data rows"), "{error}");
}
