//! What a run needs of the process's resource limits, checked before it creates any file: a
//! run of 100 000 chains used to stop on "Too many open files" after creating 20 000 files.
//! The limits are read through `rustix` (safe wrappers of `getrlimit`, `geteuid`); where they
//! cannot be read (not Unix) nothing is refused.

use crate::{Error, Result};

/// The bytes each chain's CSV file keeps in its write buffer (`BufWriter`'s default capacity)
/// and the line it formats its row in.
const WRITE_BUFFER_BYTES: u128 = 8 * 1024 + 1024;

/// Refuses `chains` chains writing their files if they would hold more files open than the
/// process may, or their write buffers need more than `memory_limit` bytes.
pub(super) fn check_files(chains: usize, memory_limit: u64) -> Result<()> {
    crate::memory::check(
        &format!("the write buffers of {chains} chains' CSV files"),
        "chains",
        WRITE_BUFFER_BYTES.checked_mul(chains as u128),
        memory_limit,
    )?;
    match open_file_limit() {
        Some(limit) => open_files_refusal(chains, open_files_now(), limit).map_or(Ok(()), Err),
        None => Ok(()),
    }
}

/// Refuses `chains` chains, each on a thread of its own, if the process may not start that
/// many threads.
pub(super) fn check_threads(chains: usize) -> Result<()> {
    match thread_limit() {
        Some(limit) => threads_refusal(chains, threads_now(), limit).map_or(Ok(()), Err),
        None => Ok(()),
    }
}

/// The refusal of `chains` chains that hold each its CSV open for the whole run and, while it
/// saves a checkpoint, one more file, besides the folder's lock and the `open` files already
/// open, under a limit of `limit` open files.
fn open_files_refusal(chains: usize, open: u64, limit: u64) -> Option<Error> {
    let needed = (chains as u64)
        .saturating_mul(2)
        .saturating_add(1)
        .saturating_add(open);
    (needed > limit).then(|| {
        Error::setting(
            "chains",
            format!(
                "{chains} would hold up to {needed} files open at once (each chain's CSV file \
                 and, as it saves, its checkpoint; {open} open already), above this process's \
                 limit of {limit} open files (RLIMIT_NOFILE, `ulimit -n`): run fewer chains \
                 or raise the limit"
            ),
        )
    })
}

/// The refusal of one thread per chain for `chains` chains beside the `running` threads,
/// under a limit of `limit` processes and threads.
fn threads_refusal(chains: usize, running: u64, limit: u64) -> Option<Error> {
    let needed = (chains as u64).saturating_add(running);
    (needed > limit).then(|| {
        Error::setting(
            "chains",
            format!(
                "{chains} would run {chains} threads (one per chain) beside the {running} \
                 running, above this user's limit of {limit} processes and threads \
                 (RLIMIT_NPROC, `ulimit -u`): run fewer chains or raise the limit"
            ),
        )
    })
}

/// The soft limit on open files, if there is one.
fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The soft limit on this user's processes and threads, if there is one and it applies (the
/// kernel does not hold root to it).
fn thread_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        if rustix::process::geteuid().is_root() {
            return None;
        }
        rustix::process::getrlimit(rustix::process::Resource::Nproc).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The files this process has open (Linux: counted in `/proc/self/fd`, less the one that
/// reads it); elsewhere the standard three.
fn open_files_now() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .map_or(3, |entries| (entries.count() as u64).saturating_sub(1))
}

/// The threads this process runs (Linux: `/proc/self/status`); elsewhere one.
fn threads_now() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Threads:"))?;
            line["Threads:".len()..].trim().parse().ok()
        })
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_beyond_the_open_file_limit_are_refused_naming_both() {
        assert!(open_files_refusal(100, 3, 204).is_none());
        let refusal = open_files_refusal(100, 3, 203).unwrap().to_string();
        assert!(
            refusal.contains("`chains` 100 would hold up to 204 files"),
            "{refusal}"
        );
        assert!(refusal.contains("limit of 203 open files"), "{refusal}");
    }

    #[test]
    fn chains_beyond_the_thread_limit_are_refused_naming_both() {
        assert!(threads_refusal(100, 5, 105).is_none());
        let refusal = threads_refusal(100, 5, 104).unwrap().to_string();
        assert!(
            refusal.contains("`chains` 100 would run 100 threads"),
            "{refusal}"
        );
        assert!(refusal.contains("limit of 104 processes"), "{refusal}");
    }

    #[test]
    fn the_limits_of_this_process_are_read() {
        // Every Linux process has stdin, stdout and stderr, and runs this test's thread.
        assert!(open_files_now() >= 3 && threads_now() >= 1);
        assert!(cfg!(not(target_os = "linux")) || open_file_limit().is_some());
    }
}
