//! The delimited (CSV) reader on any text, under both missing-value policies, then every
//! preprocessing step a run may apply: an error is fine, a panic or a non-finite design matrix
//! is a bug.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use shmc::data::{Missing, Preprocessing, Projection, parse_csv};

/// What a fuzzed file may take (64 MiB): enough for any small input, and its preprocessed
/// copies stay far below the run's 1 GiB.
const MEMORY_LIMIT: u64 = 1 << 26;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    for missing in [Missing::Error, Missing::DropRows] {
        let Ok(mut data) = parse_csv(text, Path::new("fuzz.csv"), "y", missing, MEMORY_LIMIT)
        else {
            continue;
        };
        let steps = Preprocessing {
            standardize: true,
            projection: Some(Projection {
                k: 3,
                seed: 1,
                memory_limit: MEMORY_LIMIT,
            }),
            intercept: true,
        };
        if data.preprocess(&steps).is_ok() {
            assert!(data.x.iter().all(|v| v.is_finite()), "non-finite design");
        }
    }
});
