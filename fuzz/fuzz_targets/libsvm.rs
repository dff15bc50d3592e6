//! The LIBSVM reader on any text, with the feature count from the file and given: an error is
//! fine, a panic, an abort on allocation or a non-finite standardized matrix is a bug.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use shmc::data::{Preprocessing, parse_libsvm};

/// What a fuzzed file may take (64 MiB): enough for any small input, and its preprocessed
/// copies stay far below the run's 1 GiB.
const MEMORY_LIMIT: u64 = 1 << 26;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    for features in [None, Some(4)] {
        let path = Path::new("fuzz.svm");
        let Ok(mut data) = parse_libsvm(text, path, features, MEMORY_LIMIT) else {
            continue;
        };
        let steps = Preprocessing {
            standardize: true,
            projection: None,
            intercept: true,
        };
        if data.preprocess(&steps).is_ok() {
            assert!(data.x.iter().all(|v| v.is_finite()), "non-finite design");
        }
    }
});
