//! Simulation-based calibration at CI size: 100 replications of the 2-D conjugate Gaussian
//! (data simulated from a prior draw each time, N = 100 points), one chain of 500 warmup and
//! 1000 draws each, thinned from the measured ESS. HMC and RNS-HMC (its network trained on each
//! replication's own warmup) must pass; a leapfrog with a mis-scaled gradient and no
//! Metropolis–Hastings step, which samples about exp(−U/4) (twice the posterior's sd), must
//! fail, so the test can fail.
//!
//! Under correct sampling the Bonferroni-adjusted p-value is (at least) uniform, so a correct
//! sampler fails the `TEST_ALPHA` check with probability at most 1 % whatever the seeds. Twice
//! the sd moves the rank of the truth to the middle: with 10 bins their probabilities become
//! 0.005, 0.041, 0.101, 0.159, 0.194 (and back), a noncentrality of 49.5 for 100 replications,
//! so each parameter's χ² (9 df, mean 58.5, sd 14.7) exceeds the 23.6 at which it rejects at
//! 0.01/2 with probability about 0.99, and the verdict misses only if both parameters do
//! (about 1e-4).

use shmc::Model;
use shmc::models::{ModelSpec, build};
use shmc::sampler::{Method, SampleConfig, SurrogateSettings};
use shmc::sbc::{PosteriorDraws, PosteriorSampler, SbcRun, SbcSettings, Thinning, run};
use shmc::surrogates::SurrogateKind;
use shmc::surrogates::network::NetworkFitter;
use shmc::surrogates::network::TrainOptions;

/// The level at which a correct sampler may fail: the chance of a false alarm.
const TEST_ALPHA: f64 = 0.01;

fn model() -> Box<dyn Model> {
    build(&ModelSpec::named("gaussian-conjugate")).expect("the model builds")
}

fn settings(replications: usize, jobs: usize) -> SbcSettings {
    SbcSettings {
        replications,
        seed: 16,
        thin: None,
        jobs,
        part: None,
        memory_limit: shmc::memory::machine_default_limit(),
    }
}

fn config(method: Method) -> SampleConfig {
    SampleConfig {
        chains: 1,
        warmup: 500,
        draws: 1000,
        method,
        ..SampleConfig::default()
    }
}

fn calibrate(sampler: &dyn PosteriorSampler, replications: usize, jobs: usize) -> SbcRun {
    let model = model();
    run(
        model.as_ref(),
        sampler,
        &settings(replications, jobs),
        &|_| {},
        None,
    )
    .expect("calibration runs")
}

fn describe(run: &SbcRun) -> String {
    shmc::sbc::format_report(run, "the conjugate Gaussian", None)
}

#[test]
fn hmc_is_calibrated() {
    let run = calibrate(&config(Method::Hmc), 100, 0);
    assert_eq!(run.replications.len(), 100);
    assert!(run.verdict.adjusted_p >= TEST_ALPHA, "{}", describe(&run));
}

#[test]
fn rns_hmc_with_a_network_trained_per_replication_is_calibrated() {
    let surrogate = SurrogateSettings {
        kind: SurrogateKind::Network(NetworkFitter::potential(TrainOptions {
            hidden: 100,
            ..TrainOptions::default()
        })),
        train_after: Some(100),
        ..SurrogateSettings::default()
    };
    let run = calibrate(&config(Method::RnsHmc(surrogate)), 100, 0);
    assert!(run.verdict.adjusted_p >= TEST_ALPHA, "{}", describe(&run));
}

/// Leapfrog trajectories driven by `scale · ∇U`, every end point accepted: no MH step to undo
/// the wrong gradient, so the chain targets roughly `exp(−scale · U)`. A fixed step size well
/// inside the leapfrog's stability limit for this posterior (its stiffest direction has
/// precision about 500) and a number of steps drawn from 1..=20 each iteration (a fixed
/// number resonates: half a period of the stiff direction only flips it); 200 iterations of
/// burn-in from the origin.
struct MisScaledLeapfrog {
    scale: f64,
}

impl PosteriorSampler for MisScaledLeapfrog {
    fn sample(&self, posterior: &dyn Model, seed: u64) -> shmc::Result<PosteriorDraws> {
        use rand::SeedableRng;
        use shmc::core::random::{fill_standard_normal, uniform_below};
        let (step, max_steps, burn_in, draws) = (0.02, 20, 200, 1000);
        let d = posterior.dim();
        let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
        let (mut q, mut p, mut g) = (vec![0.0; d], vec![0.0; d], vec![0.0; d]);
        let mut kept = vec![Vec::with_capacity(draws); d];
        for iteration in 0..burn_in + draws {
            fill_standard_normal(&mut rng, &mut p);
            posterior.value_and_gradient(&q, &mut g);
            for _ in 0..=uniform_below(&mut rng, max_steps) {
                for i in 0..d {
                    p[i] -= 0.5 * step * self.scale * g[i];
                    q[i] += step * p[i];
                }
                posterior.value_and_gradient(&q, &mut g);
                for i in 0..d {
                    p[i] -= 0.5 * step * self.scale * g[i];
                }
            }
            if iteration >= burn_in {
                for (series, &x) in kept.iter_mut().zip(&q) {
                    series.push(x);
                }
            }
        }
        Ok(PosteriorDraws {
            chains: vec![kept],
            divergences: 0,
        })
    }
}

#[test]
fn a_leapfrog_with_a_mis_scaled_gradient_and_no_mh_fails() {
    let run = calibrate(&MisScaledLeapfrog { scale: 0.25 }, 100, 0);
    assert!(run.verdict.adjusted_p < TEST_ALPHA, "{}", describe(&run));
    // Too wide a posterior puts the truth near the middle of the draws (∩): with twice the
    // posterior's sd, the two outer tenths expect about 1 of 100 ranks instead of 20.
    for test in &run.tests {
        let (first, last) = (test.counts[0], test.counts[test.counts.len() - 1]);
        let two_bins = 2 * run.replications.len() / test.counts.len();
        assert!(first + last < two_bins, "{:?}", test.counts);
    }
    // The same sampler with the right gradient passes: the check catches the scale.
    let right = calibrate(&MisScaledLeapfrog { scale: 1.0 }, 100, 0);
    assert!(
        right.verdict.adjusted_p >= TEST_ALPHA,
        "{}",
        describe(&right)
    );
}

#[test]
fn replications_do_not_depend_on_the_number_of_threads() {
    let one = calibrate(&config(Method::Hmc), 20, 1);
    let two = calibrate(&config(Method::Hmc), 20, 2);
    assert_eq!(one.replications.len(), 20);
    for (a, b) in one.replications.iter().zip(&two.replications) {
        assert_eq!((a.data_seed, a.sampler_seed), (b.data_seed, b.sampler_seed));
        assert_eq!(a.ranks, b.ranks);
    }
    assert_eq!(one.thin, two.thin);
}

/// HMC, except that a third of the replications (by their sampler seed) return a random walk
/// of tiny steps from the origin: chains that barely move.
struct SometimesStuck(SampleConfig);

impl PosteriorSampler for SometimesStuck {
    fn sample(&self, posterior: &dyn Model, seed: u64) -> shmc::Result<PosteriorDraws> {
        if !seed.is_multiple_of(3) {
            return self.0.sample(posterior, seed);
        }
        use rand::SeedableRng;
        let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
        let mut steps = vec![0.0; self.0.draws];
        let chains = vec![
            (0..posterior.dim())
                .map(|_| {
                    shmc::core::random::fill_standard_normal(&mut rng, &mut steps);
                    steps
                        .iter()
                        .scan(0.0, |x, s| {
                            *x += 1e-4 * s;
                            Some(*x)
                        })
                        .collect()
                })
                .collect(),
        ];
        Ok(PosteriorDraws {
            chains,
            divergences: 0,
        })
    }
}

/// 300 replications: with 100 the stuck third was not always enough to show (over the seeds
/// 10..30, one adjusted p-value of 20 was 0.015, above `TEST_ALPHA`, as was this seed's after
/// a change of the random stream); with 300 the largest of the 20 was 3e-30.
#[test]
fn thinning_stops_at_twenty_kept_draws_when_many_chains_barely_move_and_the_ranks_show_it() {
    let run = calibrate(&SometimesStuck(config(Method::Hmc)), 300, 0);
    let Thinning::FromEss {
        lowered_from: Some(wanted),
        ..
    } = run.thinning
    else {
        panic!("the thinning was not lowered: {:?}", run.thinning);
    };
    assert!(wanted > 50, "{wanted}");
    assert_eq!((run.thin, run.max_rank), (50, 20));
    assert!(run.underthinned() >= 20, "{}", describe(&run));
    // The stuck third sits at the origin, far out in most posteriors: ranks 0 or 20.
    assert!(run.verdict.adjusted_p < TEST_ALPHA, "{}", describe(&run));
    assert!(describe(&run).contains("lowered to keep 20"));
}
