//! Stopping cleanly on a signal: Ctrl-C (SIGINT) and SIGTERM, what batch schedulers and
//! container runtimes send before they kill, both set one flag, on which a run's chains stop
//! after their iteration with every finished draw flushed, a checkpoint and the files' end
//! blocks written. SIGHUP keeps its own disposition, so `nohup` still keeps a run going.

use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGINT, SIGTERM};

/// Set by SIGINT or SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);
/// The signal that set [`STOP`] (the last, if several came).
static SIGNAL: AtomicUsize = AtomicUsize::new(0);

/// The flag SIGINT and SIGTERM set, its handlers installed on the first call. If they cannot
/// be installed the signals keep their default, ending the process as before; the run itself
/// is not refused for that.
pub fn on_signals() -> &'static AtomicBool {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        for signal in [SIGINT, SIGTERM] {
            // In this order: the signal is recorded before the flag that is read first is set.
            let _ = signal_hook::flag::register_usize(signal, &SIGNAL, signal as usize);
            let _ = signal_hook::flag::register(signal, &STOP);
        }
    });
    &STOP
}

/// The exit code of a run the signal stopped: 128 + the signal's number, as a shell reports a
/// process the signal ended (130 for Ctrl-C, 143 for SIGTERM).
pub fn exit_code() -> i32 {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => 128 + SIGINT,
        signal => 128 + signal as i32,
    }
}
