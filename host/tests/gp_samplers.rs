//! GP-HMC and FITC-HMC stay exact: RNS-HMC with a Gaussian process fitted to the warmup's
//! states as its surrogate (Rasmussen 2003's method, the random-network paper's baseline) and
//! the exact `U` judging every trajectory gives the target's moments within 4 MCSE (MCSE from
//! the chains' ESS), on the journal's 32-D Gaussian (closed form) and on the banana
//! (quadrature). The GPs are deliberately small (a few hundred states, FITC with few inducing
//! points), so that their trajectories are visibly off and only the exact step keeps the chains
//! right.

use shmc::core::Potential;
use shmc::models::banana::Banana;
use shmc::models::gaussian::CorrelatedGaussian;
use shmc::sampler::{Method, Run, SAMPLER_COLUMNS, SampleConfig, SurrogateSettings};
use shmc::surrogates::SurrogateKind;
use shmc::surrogates::gp::{Approximation, GpFitter, GpOptions};

mod common;
use common::{assert_mean_within_4_mcse, banana_moments, run, series};

/// RNS-HMC with the GP `approximation` fitted to the accepted warmup states after
/// `train_after` iterations.
fn gp_hmc(approximation: Approximation, train_after: usize) -> Method {
    gp_hmc_within(approximation, train_after, u64::MAX)
}

/// [`gp_hmc`] with the GP's fit refused above `memory_limit` bytes.
fn gp_hmc_within(approximation: Approximation, train_after: usize, memory_limit: u64) -> Method {
    gp_hmc_with(
        GpOptions {
            approximation,
            memory_limit,
            ..GpOptions::default()
        },
        train_after,
    )
}

/// RNS-HMC with the GP of `options` (seed 3) fitted after `train_after` iterations.
fn gp_hmc_with(options: GpOptions, train_after: usize) -> Method {
    Method::RnsHmc(SurrogateSettings {
        kind: SurrogateKind::Gp(GpFitter {
            options: GpOptions { seed: 3, ..options },
        }),
        train_after: Some(train_after),
        ..SurrogateSettings::default()
    })
}

/// The GP proposed for every chain from the end of warmup, and the exact `U` judged.
fn assert_gp_proposed(name: &str, run: &Run) {
    for c in &run.chains {
        let report = c.surrogate.as_ref().expect("surrogate report");
        assert!(report.started_at.is_some(), "{name}: {report:?}");
        assert!(report.collapse.is_none(), "{name}: {report:?}");
        let e = &c.sampling_evaluations;
        assert!(e.exact_gradients < e.surrogate_gradients, "{name}: {e:?}");
    }
}

/// Every kept draw's `lp__` is `−U` of the model itself at the draw: the exact `U` judged it,
/// so its state carries the model's potential, not the surrogate's. A GP with gradients can be
/// accurate enough for its own `Ũ`-judged chain to pass the moment checks on the banana; its
/// `Ũ` in the state (a judge that accepts on the surrogate) shows here.
fn assert_states_carry_exact_u(name: &str, run: &Run, model: &dyn Potential) {
    let lp = SAMPLER_COLUMNS.iter().position(|c| *c == "lp__").unwrap();
    let offset = SAMPLER_COLUMNS.len();
    for c in &run.chains {
        for i in 0..c.kept() {
            let q: Vec<f64> = (0..model.dim()).map(|p| c.columns[offset + p][i]).collect();
            let u = model.value(&q);
            let gap = (c.columns[lp][i] + u).abs();
            assert!(
                gap <= 1e-9 * u.abs().max(1.0),
                "{name}: draw {i}: lp__ {} against U {u}",
                c.columns[lp][i]
            );
        }
    }
}

/// Full GP on 300 warmup states and FITC with 60 inducing points on 400, on the journal's
/// 32-D Gaussian: the long axis's mean and variance, three coordinates' means, a variance and
/// a covariance within 4 MCSE of the closed form.
#[test]
fn gp_hmc_and_fitc_hmc_are_exact_on_the_32d_gaussian() {
    let model = CorrelatedGaussian::journal();
    for (approximation, train_after, name) in [
        (Approximation::Full, 700, "gp-hmc"),
        (Approximation::Fitc { inducing: 60 }, 600, "fitc-hmc"),
    ] {
        let config = SampleConfig {
            warmup: 1000,
            draws: 2000,
            seed: 31,
            method: gp_hmc(approximation, train_after),
            ..SampleConfig::default()
        };
        let run = run(&model, &config);
        assert_gp_proposed(name, &run);
        let d = model.dim() as f64;
        let along = |q: &[f64]| q.iter().sum::<f64>() / d.sqrt();
        assert_mean_within_4_mcse(&format!("{name} mean along"), &series(&run, along), 0.0);
        let square = |q: &[f64]| along(q).powi(2);
        assert_mean_within_4_mcse(&format!("{name} var along"), &series(&run, square), 1.0);
        for i in [0, 7, 31] {
            assert_mean_within_4_mcse(&format!("{name} mean {i}"), &series(&run, |q| q[i]), 0.0);
        }
        let cov = model.covariance();
        let var_0 = series(&run, |q| q[0] * q[0]);
        assert_mean_within_4_mcse(&format!("{name} var 0"), &var_0, cov[(0, 0)]);
        let cov_05 = series(&run, |q| q[0] * q[5]);
        assert_mean_within_4_mcse(&format!("{name} cov 0,5"), &cov_05, cov[(0, 5)]);
    }
}

/// A full GP on at most 40 of the banana's warmup states (on their values, and on their values
/// and gradients, 120 observations) and FITC with 5 inducing points on at most 100 (poor fits
/// on purpose: accepted on their own `Ũ` the chains would be biased): both coordinates' first
/// two moments within 4 MCSE of quadrature, and every draw's `lp__` the model's own `−U`.
#[test]
fn gp_hmc_and_fitc_hmc_are_exact_on_the_banana() {
    let model = Banana::simulate(Banana::PAPER_N, 1).unwrap();
    let expected = banana_moments(&model);
    let gp = |approximation, gradients| GpOptions {
        approximation,
        gradients,
        ..GpOptions::default()
    };
    for (options, train_after, name) in [
        (gp(Approximation::Full, true), 560, "gp-hmc with gradients"),
        (gp(Approximation::Full, false), 560, "gp-hmc"),
        (
            gp(Approximation::Fitc { inducing: 5 }, false),
            500,
            "fitc-hmc",
        ),
    ] {
        let config = SampleConfig {
            warmup: 600,
            draws: 3000,
            seed: 4,
            method: gp_hmc_with(options, train_after),
            ..SampleConfig::default()
        };
        let run = run(&model, &config);
        assert_gp_proposed(name, &run);
        assert_states_carry_exact_u(name, &run, &model);
        let names = ["E[b1]", "E[b2]", "E[b1^2]", "E[b2^2]"];
        let fs: [fn(&[f64]) -> f64; 4] = [|q| q[0], |q| q[1], |q| q[0] * q[0], |q| q[1] * q[1]];
        for ((what, f), want) in names.iter().zip(fs).zip(expected) {
            assert_mean_within_4_mcse(&format!("{name} {what}"), &series(&run, f), want);
        }
    }
}

/// A GP whose fit on the warmup's states would pass the memory limit is refused when the run's
/// settings are checked, before the warmup runs (not after it, at the fit), naming the setting
/// that drives the size and the most states the warmup can collect: 800 of a 1000-iteration
/// warmup collecting after 200. A limit that holds them passes.
#[test]
fn a_gp_above_the_memory_limit_is_refused_before_the_warmup() {
    let model = CorrelatedGaussian::journal();
    for (approximation, driver, what) in [
        (
            Approximation::Full,
            "train_after",
            "a full Gaussian process on up to 800",
        ),
        (
            Approximation::Fitc { inducing: 500 },
            "inducing",
            "FITC with 500 inducing points on up to 800",
        ),
    ] {
        // Full: 3·800²·8 ≈ 15 MB; FITC: 6·500·800·8 ≈ 19 MB.
        let config = |limit| SampleConfig {
            warmup: 1000,
            method: gp_hmc_within(approximation, 200, limit),
            ..SampleConfig::default()
        };
        match config(10_000_000).validate(&model) {
            Err(shmc::Error::MemoryLimit { driver: d, message }) => {
                assert_eq!(d, driver, "{message}");
                assert!(message.starts_with(what), "{message}");
            }
            other => panic!("{approximation:?}: {other:?}"),
        }
        assert!(config(100_000_000).validate(&model).is_ok());
    }
}
