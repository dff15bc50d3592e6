//! The `shmc` binary: parse, run, and turn any error into one line and a non-zero exit.
//!
//! A panic, too: the sampler turns a model's panic into an error naming the chain, and anything
//! else is caught here, so the user sees one line, not a backtrace note. `RUST_BACKTRACE=1`
//! brings Rust's own report back for debugging.

use clap::Parser;

fn main() {
    if std::env::var_os("RUST_BACKTRACE").is_none() {
        std::panic::set_hook(Box::new(|_| {}));
    }
    // `shmc sample --resume DIR` is parsed as the command line saved in DIR.
    let cli = match shmc_cli::command_line(std::env::args_os().collect()) {
        Ok(args) => shmc_cli::Cli::parse_from(args),
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(1);
        }
    };
    let result = std::panic::catch_unwind(|| shmc_cli::run(cli)).unwrap_or_else(|payload| {
        let message = shmc::sampler::panic_message(payload.as_ref());
        Err(stdout_failure(&message)
            .unwrap_or_else(|| shmc::Error::invalid(format!("internal error: {message}"))))
    });
    match result {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(1);
        }
    }
}

/// `print!` panics when standard output cannot be written: that is the user's pipe or disk, not
/// a bug. A reader that closed the pipe early (`shmc summary … | head`) ends the run as SIGPIPE
/// would, silently with status 141; any other failure (a full disk) is one line naming it.
fn stdout_failure(message: &str) -> Option<shmc::Error> {
    let cause = message.strip_prefix("failed printing to stdout: ")?;
    if cause.starts_with("Broken pipe") {
        std::process::exit(141);
    }
    Some(shmc::Error::invalid(format!(
        "cannot write to standard output: {cause}"
    )))
}
