//! Ctrl-C: the first one asks the run to stop at the next safe point and write what it
//! measured (marked incomplete); a second one exits at once.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Why a run that stopped on Ctrl-C or SIGTERM stopped: the `stopped` text of its document
/// and of the pair's stop message.
pub const REASON: &str = "interrupted (Ctrl-C or SIGTERM)";

/// Installs the SIGINT/SIGTERM handler. Safe to call more than once.
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            eprintln!("interrupted again: exiting without writing results");
            std::process::exit(crate::exit::INTERRUPTED);
        }
        eprintln!(
            "interrupted: stopping after the current block and writing what was measured \
             (Ctrl-C again to abort)"
        );
    });
}

/// True once Ctrl-C (or SIGTERM) arrived.
#[inline]
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}
