//! Saved surrogate files (every kind: network, force grid, sparse grid) on any text, for a
//! 2-parameter model; a surrogate that loads is then evaluated where a sampler would ask it.
//! An error is fine; a panic (an inconsistent record indexing out of bounds on use) is a bug.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use shmc::surrogates::file::SurrogateFile;
use shmc::surrogates::kinds;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let Ok(file) = SurrogateFile::parse(Path::new("fuzz.json"), text.to_string()) else {
        return;
    };
    let Ok((surrogate, _meta)) = kinds::read(file, 2) else {
        return;
    };
    let mut gradient = [0.0; 2];
    let mut hessian = [0.0; 4];
    for q in [[0.0, 0.0], [0.5, -0.25], [-3.5, 3.5], [1e6, -1e6]] {
        if surrogate.contains(&q) {
            surrogate.value(&q);
            surrogate.value_and_gradient(&q, &mut gradient);
            if let Some(curvature) = surrogate.curvature() {
                curvature.hessian(&q, &mut hessian);
            }
        }
    }
});
