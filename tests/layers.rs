//! The crates keep their layers: the library `shmc`, with its default features, depends on none
//! of the command line's crates, so a program that only samples compiles no argument parser,
//! progress bar or signal handler. Checked on the dependency tree cargo resolves for the library
//! alone (`cargo tree -p shmc`), so a new dependency of the library that pulls one in fails here.

use std::process::Command;

/// Crates that belong to the `shmc` binary (`shmc-cli`), never to the library.
const CLI_ONLY: [&str; 4] = ["clap", "indicatif", "signal-hook", "shmc-cli"];

/// The names of the crates in `package`'s normal (not dev, not build) dependency tree.
fn dependency_names(package: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn the_library_depends_on_no_crate_of_the_command_line() {
    let library = dependency_names("shmc");
    assert!(library.iter().any(|n| n == "shmc-core"), "{library:?}");
    let leaked: Vec<&&str> = CLI_ONLY
        .iter()
        .filter(|c| library.iter().any(|n| n == *c))
        .collect();
    assert!(
        leaked.is_empty(),
        "the library shmc depends on {leaked:?}, which belong to the shmc binary (shmc-cli)"
    );
}

/// The check can fail: the binary's own tree has every one of them.
#[test]
fn the_command_line_has_the_crates_the_library_must_not() {
    let cli = dependency_names("shmc-cli");
    for crate_name in CLI_ONLY.iter().filter(|c| **c != "shmc-cli") {
        assert!(cli.iter().any(|n| n == crate_name), "{crate_name}: {cli:?}");
    }
}
