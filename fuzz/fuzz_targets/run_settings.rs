//! Run-settings files (`shmc-run.json`, the command line `shmc sample --resume` parses again)
//! on any text: one that reads is parsed as the resumed command line would be. An error is fine;
//! a panic is a bug.
#![no_main]

use std::path::Path;

use clap::Parser;
use libfuzzer_sys::fuzz_target;
use shmc_cli::{Cli, read_invocation};

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let Ok((_cwd, args)) = read_invocation(text, Path::new("shmc-run.json")) else {
        return;
    };
    let line = std::iter::once("shmc".to_string())
        .chain(args)
        .chain(["--resume".to_string(), "/nonexistent".to_string()]);
    let _ = Cli::try_parse_from(line);
});
