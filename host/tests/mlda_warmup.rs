//! MLDA's warmup judged by the finest coarse level: it pays (almost) no fine solve, and from
//! the first kept draw on the state's potential is the model's own, so the exact `U` judges
//! every kept draw against the right value.

use shmc::core::Potential;
use shmc::models::elliptic_pde::{EllipticPde, PdeSettings};
use shmc::sampler::{Method, MldaSettings, SAMPLER_COLUMNS, SampleConfig};

mod common;
use common::run;

const WARMUP: usize = 150;
const DRAWS: usize = 100;

/// A 12×12 PDE with 4 modes under MLDA over 4×4 and 6×6 meshes: its fine forward solves over
/// the run (one chain), and the largest gap between a kept draw's `lp__` and `−U` there.
fn mlda_run(fine_warmup: bool) -> (u64, f64) {
    let model = EllipticPde::simulate(PdeSettings {
        mesh: 12,
        modes: 4,
        ..PdeSettings::default()
    })
    .unwrap();
    let config = SampleConfig {
        chains: 1,
        warmup: WARMUP,
        draws: DRAWS,
        seed: 5,
        method: Method::Mlda(MldaSettings {
            fine_warmup,
            ..MldaSettings::new(vec![4, 6])
        }),
        ..SampleConfig::default()
    };
    let before = model.solves()[0].1;
    let result = run(&model, &config);
    let solves = model.solves()[0].1 - before;
    let chain = &result.chains[0];
    let lp = SAMPLER_COLUMNS.iter().position(|c| *c == "lp__").unwrap();
    let offset = SAMPLER_COLUMNS.len();
    let gap = (0..DRAWS)
        .map(|i| {
            let q: Vec<f64> = (0..model.dim())
                .map(|p| chain.columns[offset + p][i])
                .collect();
            (chain.columns[lp][i] + model.value(&q)).abs()
        })
        .fold(0.0, f64::max);
    (solves, gap)
}

/// The default warmup costs no fine solve per iteration: over 150 warmup and 100 kept
/// iterations the fine mesh solves at most once per kept draw plus the start's step-size
/// search, where the fine-judged warmup pays one per warmup iteration too. In both, every kept
/// draw's `lp__` is `−U` of the model itself at the draw (a stale coarse value carried over the
/// end of warmup would show here).
#[test]
fn mlda_warmup_judged_coarse_pays_no_fine_solve_and_keeps_exact_potentials() {
    let (coarse, coarse_gap) = mlda_run(false);
    let (fine, fine_gap) = mlda_run(true);
    assert!(
        coarse <= (DRAWS + 20) as u64,
        "coarse-judged warmup: {coarse} fine solves"
    );
    assert!(
        fine >= (WARMUP + DRAWS) as u64 * 9 / 10,
        "fine-judged warmup: {fine}"
    );
    assert!(
        coarse_gap < 1e-9 && fine_gap < 1e-9,
        "{coarse_gap} {fine_gap}"
    );
}
