//! SIGINT / SIGTERM / SIGHUP during `--apply`.
//!
//! While a run only reads (discovery, parsing, planning) a signal ends the
//! process at once with exit code 130: nothing has been written. Once the
//! write phase has begun, the handler only raises a flag: the file being
//! written is finished (renamed into place whole, or its temporary file
//! removed on failure), no further file is started, and the run reports how
//! many files it wrote and exits 130. Every file is thus either entirely old
//! or entirely new, and no temporary file is left behind.
//!
//! The handler is installed once per process, by the first run that writes;
//! runs that write nothing keep the default disposition (the signal kills the
//! process, which is just as safe there).

use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// The exit code of a run ended by a signal (128 + SIGINT, as shells report).
pub const EXIT_CODE: i32 = 130;

const ANALYSIS: u8 = 0;
const WRITING: u8 = 1;
const EXITING: u8 = 2;

static PHASE: AtomicU8 = AtomicU8::new(ANALYSIS);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

fn on_signal() {
    INTERRUPTED.store(true, Ordering::SeqCst);
    // Still reading: nothing to finish, stop now. The exchange makes the
    // switch to the write phase and this exit mutually exclusive.
    if PHASE
        .compare_exchange(ANALYSIS, EXITING, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        exit_now();
    }
}

fn exit_now() -> ! {
    eprintln!("hookfence: interrupted; no file was rewritten");
    std::process::exit(EXIT_CODE);
}

/// Installs the handler (once per process) and starts a run in the analysis
/// phase. If the handler cannot be installed (another one already owns the
/// signals in this process), signals keep their previous disposition.
pub fn arm() {
    INSTALL.call_once(|| {
        let _ = ctrlc::set_handler(on_signal);
    });
    INTERRUPTED.store(false, Ordering::SeqCst);
    PHASE.store(ANALYSIS, Ordering::SeqCst);
}

/// Enters the write phase: from now on a signal only sets the flag. Returns
/// false if a signal already arrived (the process is exiting; write nothing).
#[must_use]
pub fn begin_writes() -> bool {
    PHASE
        .compare_exchange(ANALYSIS, WRITING, Ordering::SeqCst, Ordering::SeqCst)
        .map_or_else(|phase| phase == WRITING, |_| true)
}

/// Runs `write` (a file hookfence owns, such as the `--decisions` record,
/// written while the run is still reading) so that a signal cannot cut it
/// short: the signal waits for it, then ends the run as it would have.
pub fn critical<T>(write: impl FnOnce() -> T) -> T {
    let entered = PHASE
        .compare_exchange(ANALYSIS, WRITING, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok();
    let result = write();
    if entered {
        PHASE.store(ANALYSIS, Ordering::SeqCst);
        if INTERRUPTED.load(Ordering::SeqCst)
            && PHASE
                .compare_exchange(ANALYSIS, EXITING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            exit_now();
        }
    }
    result
}

/// Whether a signal arrived since [`arm`]: no further file may be started.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Test hooks, compiled into debug builds only: `VAR=<ms>` sleeps that many
/// milliseconds; `VAR=<path>` opens that path (a FIFO the test holds) for
/// reading and reads it to the end, so the test decides when the run goes on.
#[cfg(debug_assertions)]
pub(crate) fn test_pause(var: &str) {
    let Some(value) = std::env::var_os(var) else {
        return;
    };
    match value.to_str().and_then(|v| v.parse::<u64>().ok()) {
        Some(ms) => std::thread::sleep(std::time::Duration::from_millis(ms)),
        None => {
            let _ = std::fs::read(&value);
        }
    }
}

#[cfg(not(debug_assertions))]
#[inline(always)]
pub(crate) fn test_pause(_var: &str) {}
