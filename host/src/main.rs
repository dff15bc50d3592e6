//! The `shmc` binary: parse, run, and turn any error into one line and a non-zero exit.

use clap::Parser;

fn main() {
    let cli = shmc::cli::Cli::parse();
    match shmc::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(1);
        }
    }
}
