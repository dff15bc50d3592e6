//! Exactness of the MLDA kernel: two and three levels, with deliberately biased coarse levels,
//! give the exact target's moments within 4 MCSE; judged by a coarse level instead, they are
//! far off.

use nalgebra::DVector;
use rand::SeedableRng;
use shmc_core::{HmcConfig, Steps};

use super::super::test_targets::{Bent, Shifted, coordinate_errors};
use super::*;
use crate::models::gaussian::CorrelatedGaussian;

/// `n` draws of MLDA over `levels` (bottom first, the judging one last) with `subchains`, HMC
/// at the bottom with `step_size` and about `steps` leapfrog steps, from the origin.
fn run(
    levels: &[&dyn Potential],
    subchains: &[u32],
    n: usize,
    (step_size, steps): (f64, u32),
) -> Vec<Vec<f64>> {
    let dim = levels[0].dim();
    let mut rng = Pcg64::seed_from_u64(17);
    let metric = DiagonalMetric::new(DVector::from_element(dim, 1.0)).unwrap();
    let config = HmcConfig {
        step_size,
        steps: Steps::Jittered(steps),
        max_energy_error: 1000.0,
    };
    let mut hmc = Hmc::new(Dyn(dim), config).unwrap();
    let top = levels[levels.len() - 1];
    let mut state = State::new(DVector::from_element(dim, 0.01), &Exact(top)).unwrap();
    let mut kernel = Mlda {
        coarse: Vec::new(),
        subchains: subchains.to_vec(),
        scratch: Vec::new(),
        current: None,
        network: false,
        fine_warmup: false,
        judged: None,
    };
    (0..n)
        .map(|_| {
            kernel
                .step(&mut state, levels, subchains, &mut hmc, &metric, &mut rng)
                .unwrap();
            state.position.as_slice().to_vec()
        })
        .collect()
}

/// The largest error, in MCSE, of any coordinate's mean or mean square.
fn worst(errors: &[f64]) -> f64 {
    errors.iter().copied().fold(0.0, f64::max)
}

/// Runs MLDA on each case (the levels bottom first, the exact one last, and the subchains) and
/// checks it twice: every coordinate's mean and mean square within 4 MCSE of `moments` at
/// 40 000 draws; and with `coarsest` judging in place of the exact level, the first `off`
/// coordinates' means more than 20 MCSE off (what shows the test can tell the two apart).
fn assert_exact_and_far_off_when_judged_coarse(
    cases: [(&[&dyn Potential], &[u32]); 2],
    coarsest: &dyn Potential,
    (means, squares): (&[f64], &[f64]),
    off: usize,
    hmc: (f64, u32),
) {
    for (levels, subchains) in cases {
        let draws = run(levels, subchains, 40_000, hmc);
        let errors = coordinate_errors(&draws, means, squares);
        assert!(worst(&errors) < 4.0, "{} levels: {errors:?}", levels.len());
        let mut judged_coarse = levels.to_vec();
        *judged_coarse.last_mut().unwrap() = coarsest;
        let draws = run(&judged_coarse, subchains, 40_000, hmc);
        let errors = coordinate_errors(&draws, means, squares);
        assert!(
            errors[..off].iter().all(|&e| e > 20.0),
            "{} levels judged coarse: {errors:?}",
            levels.len()
        );
    }
}

/// The journal's 32-D Gaussian (variance 1 along `(1, …, 1)`, 0.01 across) with coarse levels
/// moved along `(1, …, 1)` by 0.5 and 0.25 of its sd: two and three levels within 4 MCSE of
/// every coordinate's mean and second moment at 40 000 draws; the same kernels judged by the
/// coarsest level instead of the exact one are more than 20 MCSE off.
#[test]
fn mlda_is_exact_on_the_32_d_gaussian_with_biased_coarse_levels() {
    let exact = CorrelatedGaussian::journal();
    let d = CorrelatedGaussian::JOURNAL_DIM;
    let along = |by: f64| vec![by / (d as f64).sqrt(); d];
    let coarsest = Shifted {
        inner: &exact,
        shift: along(0.5),
    };
    let middle = Shifted {
        inner: &exact,
        shift: along(0.25),
    };
    let variance = exact.covariance()[(0, 0)];
    let (means, squares) = (vec![0.0; d], vec![variance; d]);
    let hmc = (0.05, 20);
    let cases: [(&[&dyn Potential], &[u32]); 2] = [
        (&[&coarsest, &exact], &[4]),
        (&[&coarsest, &middle, &exact], &[3, 2]),
    ];
    assert_exact_and_far_off_when_judged_coarse(cases, &coarsest, (&means, &squares), d, hmc);
}

/// The banana `x₂ | x₁ ~ N(0.5(x₁² − 1), 1)` with coarse levels of another bend and moved
/// along `x₁` (0.3 and 0.4 bends, moved by 0.3 and 0.15): two and three levels give its four
/// moments within 4 MCSE at 40 000 draws; judged by the coarsest level, `x₁`'s mean is more
/// than 20 MCSE off.
#[test]
fn mlda_is_exact_on_the_banana_with_biased_coarse_levels() {
    let exact = Bent(0.5);
    let (bent_coarsest, bent_middle) = (Bent(0.3), Bent(0.4));
    let coarsest = Shifted {
        inner: &bent_coarsest,
        shift: vec![0.3, 0.0],
    };
    let middle = Shifted {
        inner: &bent_middle,
        shift: vec![0.15, 0.0],
    };
    let [m1, m2, s1, s2] = exact.moments();
    let hmc = (0.25, 8);
    let cases: [(&[&dyn Potential], &[u32]); 2] = [
        (&[&coarsest, &exact], &[4]),
        (&[&coarsest, &middle, &exact], &[3, 2]),
    ];
    assert_exact_and_far_off_when_judged_coarse(cases, &coarsest, (&[m1, m2], &[s1, s2]), 1, hmc);
}

/// Subchain lengths: one per coarse level, each at least 1.
#[test]
fn subchain_lengths_are_checked() {
    let coarse: Vec<Arc<dyn Model>> = vec![Arc::new(CorrelatedGaussian::journal())];
    assert!(Mlda::new(coarse.clone(), vec![3], false, false).is_ok());
    assert!(Mlda::new(coarse.clone(), vec![3, 2], true, false).is_ok());
    for (bad, network) in [
        (vec![], false),
        (vec![0], false),
        (vec![3, 2], false),
        (vec![3], true),
    ] {
        let message = Mlda::new(coarse.clone(), bad, network, false)
            .err()
            .unwrap()
            .to_string();
        assert!(message.contains("one length of at least 1"), "{message}");
    }
}

/// `inner` stretched by `by` about the origin: `U(q) = inner(q / by)`, every variance `by²`
/// times the inner one's; a deliberately poor stand-in for a trained network.
struct Stretched<'p> {
    inner: &'p dyn Potential,
    by: f64,
}

impl Potential for Stretched<'_> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn value(&self, q: &[f64]) -> f64 {
        let scaled: Vec<f64> = q.iter().map(|x| x / self.by).collect();
        self.inner.value(&scaled)
    }
    fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
        let scaled: Vec<f64> = q.iter().map(|x| x / self.by).collect();
        let u = self.inner.value_and_gradient(&scaled, g);
        g.iter_mut().for_each(|x| *x /= self.by);
        u
    }
}

/// The network level under the meshes, on the 32-D Gaussian: a poor network (the target
/// stretched by 1.3 and moved along `(1, …, 1)` by 0.8 sd) below a coarse level moved by 0.5 sd,
/// and below a middle one moved by 0.25 sd: every coordinate's mean and second moment within
/// 4 MCSE at 40 000 draws; judged by the coarse level instead, more than 20 MCSE off.
#[test]
fn mlda_with_a_network_level_is_exact_on_the_32_d_gaussian() {
    let exact = CorrelatedGaussian::journal();
    let d = CorrelatedGaussian::JOURNAL_DIM;
    let along = |by: f64| vec![by / (d as f64).sqrt(); d];
    let stretched = Stretched {
        inner: &exact,
        by: 1.3,
    };
    let network = Shifted {
        inner: &stretched,
        shift: along(0.8),
    };
    let coarsest = Shifted {
        inner: &exact,
        shift: along(0.5),
    };
    let middle = Shifted {
        inner: &exact,
        shift: along(0.25),
    };
    let variance = exact.covariance()[(0, 0)];
    let (means, squares) = (vec![0.0; d], vec![variance; d]);
    let cases: [(&[&dyn Potential], &[u32]); 2] = [
        (&[&network, &coarsest, &exact], &[4, 2]),
        (&[&network, &coarsest, &middle, &exact], &[4, 2, 2]),
    ];
    assert_exact_and_far_off_when_judged_coarse(
        cases,
        &coarsest,
        (&means, &squares),
        d,
        (0.05, 20),
    );
}

/// The network level under the meshes, on the banana: a poor network that misses the bend
/// altogether (a Gaussian moved by (−0.3, 0.2)) below the biased coarse levels of
/// [`mlda_is_exact_on_the_banana_with_biased_coarse_levels`]: the four moments within 4 MCSE at
/// 40 000 draws; judged by the coarsest level, `x₁`'s mean more than 20 MCSE off.
#[test]
fn mlda_with_a_network_level_is_exact_on_the_banana() {
    let exact = Bent(0.5);
    let (flat, bent_coarsest, bent_middle) = (Bent(0.0), Bent(0.3), Bent(0.4));
    let network = Shifted {
        inner: &flat,
        shift: vec![-0.3, 0.2],
    };
    let coarsest = Shifted {
        inner: &bent_coarsest,
        shift: vec![0.3, 0.0],
    };
    let middle = Shifted {
        inner: &bent_middle,
        shift: vec![0.15, 0.0],
    };
    let [m1, m2, s1, s2] = exact.moments();
    let cases: [(&[&dyn Potential], &[u32]); 2] = [
        (&[&network, &coarsest, &exact], &[4, 2]),
        (&[&network, &coarsest, &middle, &exact], &[4, 2, 2]),
    ];
    assert_exact_and_far_off_when_judged_coarse(
        cases,
        &coarsest,
        (&[m1, m2], &[s1, s2]),
        1,
        (0.25, 8),
    );
}

/// The state's potential follows its judge: a coarse-judged warmup step puts the finest coarse
/// level's `U` in it (no exact evaluation counted), the first exact-judged step the model's
/// own (one counted), and a step with the same judge evaluates nothing. A fresh kernel in
/// sampling re-evaluates the exact `U` unless the exact `U` judged warmup too (a resumed
/// chain's checkpoint from the end of a coarse-judged warmup holds the coarse value).
#[test]
fn the_state_holds_its_judges_potential_across_the_end_of_warmup() {
    let exact = CorrelatedGaussian::journal();
    let d = CorrelatedGaussian::JOURNAL_DIM;
    let coarse = Shifted {
        inner: &exact,
        shift: vec![0.1; d],
    };
    let levels: [&dyn Potential; 2] = [&coarse, &exact];
    let q = vec![0.3; d];
    let mut state = State::new(DVector::from_column_slice(&q), &Exact(&exact)).unwrap();
    let kernel = |fine_warmup| Mlda {
        coarse: Vec::new(),
        subchains: vec![1],
        scratch: Vec::new(),
        current: None,
        network: false,
        fine_warmup,
        judged: None,
    };
    let mut counts = Evaluations::default();
    let mut mlda = kernel(false);
    mlda.rejudge(&mut state, &levels[..1], false, &mut counts);
    assert_eq!(
        (state.potential, counts.exact_values),
        (coarse.value(&q), 0)
    );
    mlda.rejudge(&mut state, &levels, true, &mut counts);
    assert_eq!((state.potential, counts.exact_values), (exact.value(&q), 1));
    mlda.rejudge(&mut state, &levels, true, &mut counts);
    assert_eq!(counts.exact_values, 1);

    state.potential = coarse.value(&q);
    kernel(false).rejudge(&mut state, &levels, true, &mut counts);
    assert_eq!((state.potential, counts.exact_values), (exact.value(&q), 2));
    let kept = state.potential;
    kernel(true).rejudge(&mut state, &levels, true, &mut counts);
    assert_eq!((state.potential, counts.exact_values), (kept, 2));
}
