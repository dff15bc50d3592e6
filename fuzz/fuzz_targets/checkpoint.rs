//! Chain checkpoints (`NAME-k.checkpoint.json`) on any text, for the 2-parameter banana: a
//! checkpoint that parses is checked as `shmc sample --resume` checks it, and one that passes
//! is compared with the model's `U` at its position. An error is fine; a panic is a bug, and so
//! is a checkpoint that passes with a position, potential or step size a chain cannot run from.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use shmc::models::banana::Banana;
use shmc::sampler::Checkpoint;

fuzz_target!(|bytes: &[u8]| {
    static MODEL: OnceLock<Banana> = OnceLock::new();
    let model = MODEL.get_or_init(|| Banana::simulate(Banana::PAPER_N, 1).unwrap());
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let Ok(checkpoint) = serde_json::from_str::<Checkpoint>(text) else {
        return;
    };
    if checkpoint.problem(2).is_some() {
        return;
    }
    assert!(checkpoint.position.iter().all(|x| x.is_finite()));
    assert!(checkpoint.potential.is_finite());
    assert!(checkpoint.step_size > 0.0 && checkpoint.step_size.is_finite());
    assert!(checkpoint.inv_mass.iter().all(|m| *m > 0.0 && m.is_finite()));
    let _ = checkpoint.potential_problem(model);
});
