//! Every method runs with its own default settings and the `Sampler`'s defaults (1000 warmup
//! iterations and 1000 draws): a library user who names a method and nothing else gets a run,
//! not a refusal of one default by another.

use shmc::Sampler;
use shmc::core::Potential;
use shmc::models::banana::Banana;
use shmc::models::logistic::LogisticRegression;
use shmc::sampler::{
    Method, NutsSettings, RmhmcSettings, SgldSettings, SurrogateSettings, VhmcSettings,
};

#[test]
fn every_method_runs_with_the_default_settings() {
    // The banana offers the Riemannian metric RMHMC needs; SGLD needs a sum over data rows.
    let banana = Banana::simulate(Banana::PAPER_N, 1).unwrap();
    let logistic = LogisticRegression::simulate(500, 3, 1).unwrap();
    let methods = [
        Method::Hmc,
        Method::Nuts(NutsSettings::default()),
        Method::RnsHmc(SurrogateSettings::default()),
        Method::ArnsHmc(SurrogateSettings::default()),
        Method::Vhmc(VhmcSettings::default()),
        Method::Rmhmc(RmhmcSettings::default()),
        Method::RnsRmhmc(SurrogateSettings::default(), RmhmcSettings::default()),
    ];
    for method in methods {
        let name = method.name();
        let fit = Sampler::new(&banana)
            .method(method)
            .chains(2)
            .run()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(fit.run().chains[0].kept(), 1000, "{name}");
    }
    let fit = Sampler::new(&logistic)
        .method(Method::Sgld(SgldSettings::default()))
        .chains(2)
        .run()
        .unwrap();
    assert_eq!(fit.run().chains[0].kept(), 1000, "sgld");
}

/// A density given as one value-and-gradient function needs nothing more: `FnModel` samples
/// the same draws, bit for bit, as the same density written as a `Potential` of its own.
#[test]
fn a_value_and_gradient_function_is_a_model() {
    use shmc::models::gaussian::CorrelatedGaussian;
    use shmc::{FnModel, Model};
    let gaussian = CorrelatedGaussian::new(3, 1.0, 0.1).unwrap();
    let names = gaussian.parameter_names();
    let function = FnModel::new(names, |q: &[f64], g: &mut [f64]| {
        gaussian.value_and_gradient(q, g)
    });
    for method in [Method::Hmc, Method::RnsHmc(SurrogateSettings::default())] {
        let draws = |model: &dyn Model| {
            let fit = Sampler::new(model)
                .method(method.clone())
                .chains(2)
                .warmup(300)
                .draws(200)
                .run()
                .unwrap();
            fit.run()
                .chains
                .iter()
                .map(|c| c.columns.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(&function), draws(&gaussian), "{}", method.name());
    }
}
