//! The design level (`SampleConfig::design_level`): the Laplace approximation and the
//! surrogate's training evaluations on a coarser level of the model, every draw judged by the
//! model itself.

use shmc::models::elliptic_pde::{EllipticPde, PdeSettings};
use shmc::models::logistic::LogisticRegression;
use shmc::sampler::{Method, SampleConfig, SurrogateSettings, SurrogateSteps};
use shmc::{Error, Model};

mod common;
use common::run;

fn model() -> EllipticPde {
    EllipticPde::simulate(PdeSettings {
        mesh: 12,
        modes: 4,
        ..PdeSettings::default()
    })
    .unwrap()
}

fn config(design_level: Option<usize>) -> SampleConfig {
    SampleConfig {
        chains: 2,
        warmup: 30,
        draws: 60,
        seed: 4,
        method: Method::RnsHmc(SurrogateSettings {
            trajectory: SurrogateSteps::Auto,
            cubic: true,
            ..SurrogateSettings::laplace_trained(10, 40, 4)
        }),
        design_level,
        ..SampleConfig::default()
    }
}

/// The count of `what` in the model's work report.
fn work(model: &dyn Model, what: &str) -> u64 {
    model
        .work()
        .iter()
        .find(|(name, _)| *name == what)
        .map_or(0, |(_, n)| *n)
}

/// With level 6, the 6×6 mesh makes every evaluation of the MAP search, its Hessian and the
/// 40 training draws, and nothing else; the 12×12 model makes exactly the chains' own exact
/// evaluations (the judgements, and each chain's start), none of the design's. Without it, the model makes both.
#[test]
fn the_design_is_evaluated_on_the_level_and_every_draw_judged_by_the_model() {
    let fine = model();
    let result = run(&fine, &config(Some(6)));
    let design = result.laplace.unwrap().evaluations + result.precompute.unwrap().evaluations;
    assert_eq!(work(&fine, "forward solves (6x6)"), design);
    let e = result.evaluations();
    // Plus one evaluation of each chain's starting point.
    assert_eq!(
        work(&fine, "forward solves"),
        e.exact_values + e.exact_gradients + 2,
        "{:?}",
        fine.work()
    );
    assert!(e.exact_values >= 120, "{e:?}");

    let plain = model();
    let result = run(&plain, &config(None));
    let e = result.evaluations();
    assert_eq!(work(&plain, "forward solves (6x6)"), 0);
    assert_eq!(
        work(&plain, "forward solves"),
        e.exact_values + e.exact_gradients + 2
    );
}

/// A model without levels, a level that is not coarser, and a run with no design to evaluate
/// are refused before anything runs, each naming the setting.
#[test]
fn a_design_level_without_a_design_or_levels_is_refused() {
    let refusal = |model: &dyn Model, config: SampleConfig| {
        let sinks = (0..config.chains)
            .map(|_| Box::new(shmc::sampler::NullSink) as _)
            .collect();
        match shmc::sampler::sample(model, &config, sinks, &|_, _| {}, None) {
            Err(Error::Setting { setting, problem }) => {
                assert_eq!(setting, "design_level", "{problem}");
                problem
            }
            other => panic!("not refused: {:?}", other.map(|_| ())),
        }
    };
    let logistic = LogisticRegression::simulate(100, 3, 1).unwrap();
    let why = refusal(&logistic, config(Some(6)));
    assert!(why.contains("no"), "{why}");
    let why = refusal(&model(), config(Some(12)));
    assert!(why.contains("12"), "{why}");
    let hmc = SampleConfig {
        method: Method::Hmc,
        ..config(Some(6))
    };
    let why = refusal(&model(), hmc);
    assert!(why.contains("neither"), "{why}");
}
