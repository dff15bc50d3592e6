//! `auto` chooses NUTS with the low-rank metric on a model whose gradient costs about what the
//! surrogate's does, and the Laplace-trained surrogate plan on one whose gradient costs
//! milliseconds (the same Gaussian, made slow by a sleep); either way the draws have the
//! Gaussian's moments, and the plan it applies is the one an explicit run names.

use std::time::Duration;

use shmc::Model;
use shmc::core::Potential;
use shmc::models::gaussian::CorrelatedGaussian;
use shmc::sampler::auto::{self, AutoPlan};
use shmc::sampler::{MassMatrix, Method, SampleConfig};

mod common;
use common::{assert_mean_within_4_mcse, run, series};

/// A Gaussian whose every evaluation first sleeps: an expensive model at no cost in CPU.
struct Slow {
    gaussian: CorrelatedGaussian,
    sleep: Duration,
}

impl Potential for Slow {
    fn dim(&self) -> usize {
        self.gaussian.dim()
    }
    fn value(&self, q: &[f64]) -> f64 {
        std::thread::sleep(self.sleep);
        self.gaussian.value(q)
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        std::thread::sleep(self.sleep);
        self.gaussian.value_and_gradient(q, grad)
    }
}

impl Model for Slow {
    fn parameter_names(&self) -> Vec<String> {
        self.gaussian.parameter_names()
    }
    fn write_parameters(&self, q: &[f64], out: &mut Vec<f64>) {
        self.gaussian.write_parameters(q, out);
    }
}

/// A 4-D Gaussian, variance 4 along (1, 1, 1, 1) and 0.25 across it.
fn gaussian() -> CorrelatedGaussian {
    CorrelatedGaussian::new(4, 4.0, 0.25).unwrap()
}

fn config() -> SampleConfig {
    SampleConfig {
        chains: 2,
        warmup: 300,
        draws: 600,
        seed: 3,
        ..SampleConfig::default()
    }
}

/// The chosen run's means and variances against the Gaussian's (variance of a coordinate:
/// `λ⊥ + (λ∥ − λ⊥)/d`).
fn assert_moments(model: &dyn Model, config: &SampleConfig) {
    let run = run(model, config);
    let variance = 0.25 + (4.0 - 0.25) / 4.0;
    for i in [0, 3] {
        assert_mean_within_4_mcse(&format!("mean {i}"), &series(&run, |q| q[i]), 0.0);
        assert_mean_within_4_mcse(
            &format!("var {i}"),
            &series(&run, |q| q[i] * q[i]),
            variance,
        );
    }
}

#[test]
fn auto_chooses_nuts_on_a_cheap_model_and_its_draws_have_the_moments() {
    let model = gaussian();
    let choice = auto::choose(&model, &config()).unwrap();
    assert_eq!(choice.plan, AutoPlan::Nuts, "{}", choice.line());
    assert!(
        choice.line().starts_with("nuts-low-rank ("),
        "{}",
        choice.line()
    );
    let chosen = choice.apply(&config());
    assert!(matches!(chosen.method, Method::Nuts(_)));
    assert_eq!(chosen.metric, MassMatrix::LowRank);
    assert_moments(&model, &chosen);
}

#[test]
fn auto_chooses_the_surrogate_plan_on_a_slow_model_and_its_draws_have_the_moments() {
    let model = Slow {
        gaussian: gaussian(),
        sleep: Duration::from_millis(2),
    };
    let choice = auto::choose(&model, &config()).unwrap();
    assert_eq!(choice.plan, AutoPlan::LaplaceSurrogate, "{}", choice.line());
    assert!(choice.gradient_seconds >= 2e-3, "{}", choice.line());
    let chosen = choice.apply(&config());
    assert_eq!(
        chosen.method,
        Method::RnsHmc(auto::surrogate_plan(config().seed))
    );
    assert_eq!(chosen.mass_matrix(), MassMatrix::Laplace);
    assert_moments(&model, &chosen);
}

#[test]
fn the_rule_pays_for_the_surrogate_only_past_its_ratio() {
    let ratio = auto::PAYING_RATIO;
    assert_eq!(
        auto::decide(ratio * 1e-5, 1e-5).plan,
        AutoPlan::LaplaceSurrogate
    );
    assert_eq!(auto::decide(0.99 * ratio * 1e-5, 1e-5).plan, AutoPlan::Nuts);
    // A model never finite at the start points is timed NaN: NUTS, whose start reports it.
    let choice = auto::decide(f64::NAN, 1e-5);
    assert_eq!(choice.plan, AutoPlan::Nuts);
    assert!(
        choice.line().contains("no finite start point"),
        "{}",
        choice.line()
    );
}

#[test]
fn a_line_names_the_plan_it_reports() {
    for plan in AutoPlan::ALL {
        let choice = auto::AutoChoice {
            plan,
            gradient_seconds: 1e-3,
            surrogate_seconds: 2e-5,
            no_laplace: None,
        };
        assert_eq!(
            AutoPlan::of_line(&choice.line()),
            Some(plan),
            "{}",
            choice.line()
        );
    }
    assert_eq!(AutoPlan::of_line("nuts (the method, not a plan)"), None);
    assert_eq!(AutoPlan::of_line(""), None);
}

/// An expensive model with no mode inside its support: `U = −Σq` on the box `|q| < 3`, infinite
/// outside, so the MAP search walks into the wall. The surrogate plan, whose network is trained
/// on the Laplace approximation, cannot be made; auto says so and runs NUTS.
struct Tilted;

impl Potential for Tilted {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        std::thread::sleep(Duration::from_millis(2));
        match q.iter().all(|x| x.abs() < 3.0) {
            true => -q.iter().sum::<f64>(),
            false => f64::INFINITY,
        }
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        grad.iter_mut().for_each(|g| *g = -1.0);
        self.value(q)
    }
}

impl Model for Tilted {
    fn parameter_names(&self) -> Vec<String> {
        vec!["a".into(), "b".into()]
    }
    fn write_parameters(&self, q: &[f64], out: &mut Vec<f64>) {
        out.extend_from_slice(q);
    }
}

#[test]
fn auto_runs_nuts_where_the_surrogate_would_pay_but_the_map_search_fails() {
    let config = SampleConfig {
        init: shmc::sampler::Init::Random { radius: 1.0 },
        ..config()
    };
    let choice = auto::choose(&Tilted, &config).unwrap();
    assert_eq!(choice.plan, AutoPlan::Nuts, "{}", choice.line());
    assert!(choice.no_laplace.is_some(), "{}", choice.line());
    assert!(
        choice
            .line()
            .contains("the Laplace approximation it trains on failed"),
        "{}",
        choice.line()
    );
}
