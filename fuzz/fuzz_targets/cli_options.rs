//! The option values the command line parses from text (`--domain`, `--surrogate-scale`,
//! `--surrogate-steps-factor`, an `--init` file) on any text: an error is fine, a panic or a
//! domain that is not a valid box is a bug.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use shmc_cli::options;
use shmc::models::banana::Banana;
use shmc::surrogates::grids::DomainChoice;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    if let Ok(DomainChoice::Explicit(domain)) = options::domain(text) {
        assert!(
            (0..domain.dim()).all(|i| domain.width(i) > 0.0 && domain.width(i).is_finite()),
            "{domain}"
        );
    }
    let _ = options::surrogate_scale(text);
    let _ = options::surrogate_steps(text);
    let model = Banana::new(&[1.0]).expect("the banana's parameters are valid");
    let _ = options::init_values(text, Path::new("init.json"), &model);
});
