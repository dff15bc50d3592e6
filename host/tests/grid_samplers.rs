//! Grid HMC and sparse-grid HMC end to end: a precomputed grid changes how well the chain
//! proposes, never what it targets (the MH step keeps the exact `U`), and a saved grid proposes
//! exactly as the one it was saved from.

use shmc::models::banana::Banana;
use shmc::models::gaussian::CorrelatedGaussian;
use shmc::sampler::{Method, SampleConfig, SurrogateSettings};
use shmc::surrogates::SurrogateKind;
use shmc::surrogates::grids::{
    AdaptiveOptions, Domain, DomainChoice, GridFitter, GridKind, Interpolation,
};
use shmc::surrogates::states::TrainingSet;
use shmc::surrogates::{Fitter, SurrogateMeta};

mod common;
use common::{assert_mean_within_4_mcse, banana_moments, run, series};

const GIB: u64 = 1 << 30;

/// A function of the draw whose mean is checked.
type Moment = fn(&[f64]) -> f64;

/// The grid method with `kind` over `domain`.
fn grid_method(kind: GridKind, domain: DomainChoice) -> Method {
    Method::RnsHmc(SurrogateSettings {
        kind: SurrogateKind::Grid(GridFitter {
            kind,
            domain,
            memory_limit: GIB,
        }),
        train_after: Some(200),
        ..SurrogateSettings::default()
    })
}

/// The force grid of cell size `cell`, read as `interpolation`.
fn force(cell: f64, interpolation: Interpolation) -> GridKind {
    GridKind::Force {
        cell,
        interpolation,
    }
}

/// Grid HMC (force grid, cell 0.1, the paper's box; read constant per cell and multilinearly),
/// regular sparse-grid HMC and adaptive sparse-grid HMC over the box of the exact phase's
/// states, on the banana: the first two moments of both coordinates within 4 MCSE of
/// quadrature. Each method's steps outside its box (exact gradients) stay within its share:
/// none for the constant grid and the sparse grid in the paper's box; under 1 % for the
/// multilinear grid there, whose chains reach the arms' tips past b1 = -4 (40 of 33 128
/// steps); under 10 % for the box of the exact phase's 200 states, which the arms pass now and
/// then (2 %).
#[test]
fn grid_methods_are_exact_on_the_banana() {
    let model = Banana::simulate(Banana::PAPER_N, 1).unwrap();
    let moments = banana_moments(&model);
    let paper_box = || DomainChoice::Explicit(Domain::parse("-4:4,-4:4").unwrap());
    for (name, method, outside_share) in [
        (
            "grid-hmc",
            grid_method(force(0.1, Interpolation::Constant), paper_box()),
            0.0,
        ),
        (
            "grid-hmc multilinear",
            grid_method(force(0.1, Interpolation::Multilinear), paper_box()),
            0.01,
        ),
        (
            "sg-hmc level 5",
            grid_method(GridKind::SparseLevel(5), paper_box()),
            0.0,
        ),
        (
            "sg-hmc adaptive, states box",
            grid_method(
                GridKind::SparseAdaptive(AdaptiveOptions {
                    tolerance: 1e-2,
                    ..AdaptiveOptions::default()
                }),
                DomainChoice::States { margin: 0.1 },
            ),
            0.1,
        ),
    ] {
        let config = SampleConfig {
            warmup: 800,
            draws: 3200,
            seed: 11,
            method,
            ..SampleConfig::default()
        };
        let run = run(&model, &config);
        for c in &run.chains {
            let report = c.surrogate.as_ref().expect("surrogate report");
            let precompute = report.precompute.expect("a grid is precomputed");
            assert!(precompute.evaluations > 0, "{name}: {report:?}");
            let e = &c.sampling_evaluations;
            assert!(
                e.exact_gradients as f64 <= outside_share * e.surrogate_gradients as f64,
                "{name}: {e:?}"
            );
        }
        assert_eq!(
            run.precompute.is_some(),
            !name.contains("states"),
            "{name}: a known box is precomputed once, before sampling"
        );
        let functions: [(&str, Moment); 4] = [
            ("mean 1", |q| q[0]),
            ("mean 2", |q| q[1]),
            ("square 1", |q| q[0] * q[0]),
            ("square 2", |q| q[1] * q[1]),
        ];
        for ((what, f), expected) in functions.into_iter().zip(moments) {
            assert_mean_within_4_mcse(&format!("{name} {what}"), &series(&run, f), expected);
        }
    }
}

/// Grid HMC and sparse-grid HMC on a correlated 3-D Gaussian, over the Laplace box at 0.99 per
/// coordinate (so the chains leave the box now and then, and the exact gradient takes over):
/// means and variances within 4 MCSE, and the steps outside counted as exact gradients, a
/// small share of them.
#[test]
fn grid_methods_are_exact_on_a_3d_gaussian() {
    let model = CorrelatedGaussian::new(3, 1.0, 0.25).unwrap();
    let covariance = model.covariance();
    let laplace = || DomainChoice::Laplace { probability: 0.99 };
    for (name, method) in [
        (
            "grid-hmc",
            grid_method(force(0.2, Interpolation::Constant), laplace()),
        ),
        (
            "grid-hmc multilinear",
            grid_method(force(0.2, Interpolation::Multilinear), laplace()),
        ),
        (
            "sg-hmc level 4",
            grid_method(GridKind::SparseLevel(4), laplace()),
        ),
    ] {
        let config = SampleConfig {
            warmup: 800,
            draws: 3200,
            seed: 5,
            method,
            ..SampleConfig::default()
        };
        let run = run(&model, &config);
        assert!(run.precompute.is_some(), "{name}");
        for c in &run.chains {
            let e = &c.sampling_evaluations;
            assert!(
                e.exact_gradients > 0 && 10 * e.exact_gradients < e.surrogate_gradients,
                "{name}: {e:?}"
            );
        }
        for i in 0..3 {
            assert_mean_within_4_mcse(&format!("{name} mean {i}"), &series(&run, |q| q[i]), 0.0);
            assert_mean_within_4_mcse(
                &format!("{name} variance {i}"),
                &series(&run, |q| q[i] * q[i]),
                covariance[(i, i)],
            );
        }
    }
}

/// A grid saved to a file and loaded by `--surrogate` proposes bit for bit as the grid the
/// sampler precomputes itself: the chains' draws are identical.
#[test]
fn a_saved_grid_gives_the_same_chains_as_the_precomputed_one() {
    let model = Banana::simulate(Banana::PAPER_N, 1).unwrap();
    let dir = std::env::temp_dir();
    for (name, kind) in [
        ("force", force(0.1, Interpolation::Constant)),
        ("multilinear", force(0.1, Interpolation::Multilinear)),
        ("sparse", GridKind::SparseLevel(5)),
    ] {
        let fitter = GridFitter {
            kind,
            domain: DomainChoice::Explicit(Domain::parse("-3.7:3.9,-4.1:4.3").unwrap()),
            memory_limit: GIB,
        };
        let path = dir.join(format!(
            "shmc-grid-samplers-{}-{name}.json",
            std::process::id()
        ));
        let fitted = fitter.fit(&model, &TrainingSet::new(2)).unwrap();
        fitted
            .surrogate
            .save(&path, &SurrogateMeta::default())
            .unwrap();
        let config = |settings: SurrogateSettings| SampleConfig {
            chains: 2,
            warmup: 300,
            draws: 500,
            seed: 3,
            method: Method::RnsHmc(settings),
            ..SampleConfig::default()
        };
        let precomputed = run(
            &model,
            &config(SurrogateSettings {
                kind: SurrogateKind::Grid(fitter.clone()),
                ..SurrogateSettings::default()
            }),
        );
        let loaded = run(
            &model,
            &config(SurrogateSettings {
                surrogate_file: Some(path.clone()),
                ..SurrogateSettings::default()
            }),
        );
        for (a, b) in precomputed.chains.iter().zip(&loaded.chains) {
            for p in 0..2 {
                let bits = |c: &shmc::sampler::ChainResult| {
                    c.parameter(p)
                        .iter()
                        .map(|x| x.to_bits())
                        .collect::<Vec<_>>()
                };
                assert_eq!(bits(a), bits(b), "{name}, chain {}", a.chain);
            }
        }
        std::fs::remove_file(&path).unwrap();
    }
}
