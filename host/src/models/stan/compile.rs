//! A Stan program compiled into a shared library with BridgeStan's C interface: `stanc`
//! translates it to C++, and the system compiler builds that together with shmc's own bridge
//! (`bridge.cpp`) against a [`Toolchain`].
//!
//! Libraries are cached by a SHA-256 of everything that decides their bytes (the program, the
//! bridge's source, the flags, the toolchain and its version), so a second run of the same
//! program starts at once. A build happens in a folder of its own and is renamed into place
//! only when complete, beside the library's own SHA-256; an entry whose library does not match
//! it (a crash mid-write, a disk error, a hand edit) is removed and rebuilt, never loaded.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::toolchain::{Toolchain, compiler};
use crate::digest::{file_sha256, hex};
use crate::{Error, Result};

/// shmc's implementation of BridgeStan's C interface over stanc's model class.
const BRIDGE: &str = include_str!("bridge.cpp");

/// The compiler flags of every build: httpstan's own (its prebuilt libraries were built with the
/// old C++ ABI and `STAN_THREADS`), plus what a shared library loaded by `dlopen` needs.
/// `-ftls-model=initial-exec`: with `STAN_THREADS` every autodiff variable reaches its thread's
/// tape through a `thread_local`, which in a `dlopen`ed library is otherwise a `__tls_get_addr`
/// call each time; that cost diamonds' gradient 65 µs against 41 µs in an executable (with it,
/// 42 µs). The library's thread-locals are 128 bytes, well inside the static TLS glibc keeps
/// for libraries loaded late.
const FLAGS: [&str; 13] = [
    "-O3",
    "-std=c++14",
    "-fPIC",
    "-shared",
    "-fvisibility=hidden",
    "-Wno-sign-compare",
    "-DBOOST_DISABLE_ASSERTS",
    "-DBOOST_PHOENIX_NO_VARIADIC_EXPRESSION",
    "-DSTAN_THREADS",
    "-D_REENTRANT",
    "-D_GLIBCXX_USE_CXX11_ABI=0",
    "-g0",
    "-ftls-model=initial-exec",
];

/// The libraries stanc's output may call (ODE solvers, the thread pool), from the toolchain.
const LIBRARIES: [&str; 4] = [
    "-lsundials_cvodes",
    "-lsundials_idas",
    "-lsundials_nvecserial",
    "-ltbb",
];

/// A Stan program to compile: its text and the name its messages should give it.
pub struct Program<'a> {
    /// The program's text.
    pub code: &'a str,
    /// The file it came from (or a name for text given directly), used in stanc's messages.
    pub origin: &'a str,
}

/// The cache's root: `SHMC_CACHE_DIR/stan`, else `XDG_CACHE_HOME/shmc/stan`, else
/// `~/.cache/shmc/stan`.
pub fn cache_root() -> PathBuf {
    let env = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(root) = env("SHMC_CACHE_DIR") {
        return root.join("stan");
    }
    let base = env("XDG_CACHE_HOME")
        .or_else(|| env("HOME").map(|h| h.join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("shmc").join("stan")
}

/// The library of `program`: from the cache under `root` if a sound entry is there, else
/// compiled now (and cached). `note` hears what takes time, before it starts.
pub fn library(
    program: &Program,
    toolchain: &Toolchain,
    root: &Path,
    note: &mut dyn FnMut(&str),
) -> Result<PathBuf> {
    let key = cache_key(program, toolchain);
    let entry = root.join(&key);
    if let Some(library) = sound_entry(&entry) {
        return Ok(library);
    }
    if entry.exists() {
        note(&format!(
            "the cached library {} does not match its checksum: rebuilding it",
            entry.display()
        ));
        std::fs::remove_dir_all(&entry).map_err(|e| Error::io(&entry, e))?;
    }
    std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
    let build = root.join(format!("{key}.build-{}-{}", std::process::id(), nanos()));
    std::fs::create_dir(&build).map_err(|e| Error::io(&build, e))?;
    note(&format!(
        "compiling the Stan program {} (a minute or so; cached in {} after)",
        program.origin,
        root.display()
    ));
    let log = root.join(format!("{key}.failed.log"));
    match compile(program, toolchain, &build, &log) {
        Ok(()) => publish(&build, &entry),
        Err(e) => {
            // The failed build's log stays for the user; its other files go.
            let _ = std::fs::rename(build.join("build.log"), &log);
            let _ = std::fs::remove_dir_all(&build);
            Err(e)
        }
    }
}

/// The cache key: a SHA-256, in hex, of what decides the library's bytes (the origin too: it
/// names the model and the file in Stan's messages).
fn cache_key(program: &Program, toolchain: &Toolchain) -> String {
    let mut hash = Sha256::new();
    for part in [
        program.code,
        program.origin,
        BRIDGE,
        &FLAGS.join(" "),
        &LIBRARIES.join(" "),
        &toolchain.version,
        &toolchain.home.to_string_lossy(),
        &compiler(),
    ] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    hex(&hash.finalize())
}

/// The library in `entry` if the entry is complete and its checksum matches.
fn sound_entry(entry: &Path) -> Option<PathBuf> {
    let library = entry.join("model.so");
    let recorded = std::fs::read_to_string(entry.join("model.sha256")).ok()?;
    (file_sha256(&library).ok()? == recorded.trim()).then_some(library)
}

/// Moves a finished build into place; a concurrent run that got there first wins, and ours goes.
fn publish(build: &Path, entry: &Path) -> Result<PathBuf> {
    let digest = file_sha256(&build.join("model.so"))?;
    let sum = build.join("model.sha256");
    std::fs::write(&sum, digest).map_err(|e| Error::io(&sum, e))?;
    if std::fs::rename(build, entry).is_err() {
        let _ = std::fs::remove_dir_all(build);
    }
    sound_entry(entry).ok_or_else(|| {
        Error::invalid(format!(
            "{}: the compiled Stan library could not be put in the cache",
            entry.display()
        ))
    })
}

/// stanc, then the C++ compiler, in `build`; their messages go to `build/build.log`, which a
/// failed build leaves at `failed_log` (the compiler's error names it).
fn compile(
    program: &Program,
    toolchain: &Toolchain,
    build: &Path,
    failed_log: &Path,
) -> Result<()> {
    let stan = build.join("model.stan");
    std::fs::write(&stan, program.code).map_err(|e| Error::io(&stan, e))?;
    let hpp = build.join("model.hpp");
    let mut stanc = Command::new(toolchain.stanc());
    stanc
        .arg(format!("--name={}", model_name(program.origin)))
        .arg(format!("--filename-in-msg={}", program.origin))
        .arg(format!("--o={}", hpp.display()))
        .arg(&stan);
    run(&mut stanc, build, |log| {
        // stanc's message already names the file and line: it is the whole story.
        format!("the Stan program did not compile:\n{}", log.trim_end())
    })?;
    let bridge = build.join("bridge.cpp");
    std::fs::write(&bridge, BRIDGE).map_err(|e| Error::io(&bridge, e))?;
    let mut cxx = Command::new(compiler());
    cxx.args(FLAGS)
        .arg(format!("-DSHMC_STAN_MODEL_HPP=\"{}\"", hpp.display()))
        .arg("-I")
        .arg(toolchain.include())
        .arg(&bridge)
        .arg("-o")
        .arg(build.join("model.so"))
        .arg("-L")
        .arg(toolchain.lib())
        .args(LIBRARIES)
        .arg(format!("-Wl,-rpath,{}", toolchain.lib().display()));
    run(&mut cxx, build, |log| {
        let first = log
            .lines()
            .find(|l| l.contains("error"))
            .unwrap_or("(no line says error)");
        format!(
            "the C++ compiler failed on the Stan program's code: {first}\n(the full log: {})",
            failed_log.display()
        )
    })
}

/// CmdStan's name for the model of a program file: its stem and `_model`, made an identifier.
fn model_name(origin: &str) -> String {
    let stem = Path::new(origin)
        .file_stem()
        .map_or("program".into(), |s| s.to_string_lossy());
    let mut name: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name.insert(0, 'm');
    }
    name + "_model"
}

/// Runs `command`, appending its output to `build/build.log`; on failure, the error `explain`
/// makes of the output.
fn run(command: &mut Command, build: &Path, explain: impl Fn(&str) -> String) -> Result<()> {
    let output = command
        .output()
        .map_err(|e| Error::invalid(format!("cannot run {:?}: {e}", command.get_program())))?;
    let mut log = String::from_utf8_lossy(&output.stdout).into_owned();
    log.push_str(&String::from_utf8_lossy(&output.stderr));
    let path = build.join("build.log");
    let mut all = std::fs::read_to_string(&path).unwrap_or_default();
    all.push_str(&log);
    std::fs::write(&path, all).map_err(|e| Error::io(&path, e))?;
    match output.status.success() {
        true => Ok(()),
        false => Err(Error::invalid(explain(&log))),
    }
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
