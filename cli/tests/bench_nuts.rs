//! The benches' NUTS baseline (`shmc_cli::experiments::nuts`) is a correct sampler.

#[path = "../../host/tests/common/mod.rs"]
mod common;

use common::assert_mean_within_4_mcse;
use shmc::models::gaussian::CorrelatedGaussian;
use shmc::sampler::MassMatrix;

/// The bench's general-purpose baseline is a correct sampler through the sampler's nuts-rs
/// adapter: NUTS on a correlated Gaussian recovers its means and variances within 4 MCSE (`log p`
/// reaches it with the right sign and in the right parameter order) and mixes as NUTS does (its
/// gradient is right too: a wrong force field leaves the target right and the ESS tiny), and the
/// bench has the time of every kept draw.
#[test]
fn nuts_recovers_a_gaussian_through_the_adapter() {
    let model = CorrelatedGaussian::new(4, 1.0, 0.1).unwrap();
    let cov = model.covariance();
    let run =
        shmc_cli::experiments::nuts::run_nuts(&model, MassMatrix::Diagonal, 2, (300, 2000), 3)
            .unwrap();
    assert_eq!(run.run.chains.len(), 2);
    for times in &run.finished {
        assert_eq!(times.len(), 2000);
        assert!(
            times.windows(2).all(|t| t[0] <= t[1]),
            "draw times increase"
        );
    }
    for p in 0..4 {
        let x: Vec<Vec<f64>> = run.series(p).into_iter().map(<[f64]>::to_vec).collect();
        assert_mean_within_4_mcse(&format!("mean {p}"), &x, 0.0);
        let squares: Vec<Vec<f64>> = x
            .iter()
            .map(|c| c.iter().map(|v| v * v).collect())
            .collect();
        assert_mean_within_4_mcse(&format!("variance {p}"), &squares, cov[(p, p)]);
    }
    let gradients = run.gradients_per_draw();
    assert!(gradients >= 1.0, "{gradients}");
    for p in 0..4 {
        let ess =
            shmc::diagnostics::ess_bulk(&shmc::diagnostics::Draws::new(&run.series(p)).unwrap());
        // ~1150 of 4000 with the right gradient; a wrong one (halved, wrong sign) still samples
        // the right target, but at ESS 10–30.
        assert!(ess > 400.0, "parameter {p}: ESS_bulk {ess} of 4000 draws");
    }
}
