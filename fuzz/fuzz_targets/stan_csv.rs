//! The CmdStan CSV reader behind `shmc summary` and `shmc report` on any bytes (it reads line
//! by line, so invalid UTF-8 is input too), and the reader of its `# shmc` footer lines: an
//! error is fine, a panic is a bug.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use shmc::output::{ChainFooter, parse_stan_csv};

fuzz_target!(|bytes: &[u8]| {
    if let Ok(csv) = parse_stan_csv(bytes, Path::new("fuzz.csv")) {
        assert_eq!(csv.names.len(), csv.columns.len());
        let rows = csv.columns.first().map_or(0, Vec::len);
        assert!(
            csv.columns.iter().all(|c| c.len() == rows),
            "ragged columns"
        );
        let footer = ChainFooter::parse(&csv.shmc);
        assert!(footer.other.len() + footer.unreadable.len() <= csv.shmc.len());
    }
});
