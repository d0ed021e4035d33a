//! A deadline for blocking calls that have no timeout of their own (MPI receives and
//! barriers block forever when a rank died or never started). When a guarded wait overruns,
//! the watchdog says what was awaited and exits with code 2; under MPI the launcher then
//! tears the whole job down, so no rank hangs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Armed {
    what: String,
    deadline: Instant,
    limit: Duration,
    /// For long loops: a counter the loop bumps; the deadline moves on whenever it changes,
    /// so a loop that runs for hours but keeps completing iterations never expires.
    progress: Option<(Arc<AtomicU64>, u64)>,
}

/// Background thread watching at most one armed deadline at a time.
#[derive(Clone)]
pub struct Watchdog {
    slot: Arc<Mutex<Option<Armed>>>,
    timeout: Duration,
}

/// Disarms on drop.
pub struct Guard {
    slot: Arc<Mutex<Option<Armed>>>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(mut s) = self.slot.lock() {
            *s = None;
        }
    }
}

impl Watchdog {
    /// Starts the watching thread. `prefix` goes in front of the message (e.g. `rank 3`).
    pub fn start(timeout: Duration, prefix: String) -> Self {
        let slot: Arc<Mutex<Option<Armed>>> = Arc::new(Mutex::new(None));
        let watched = Arc::clone(&slot);
        let poll = (timeout / 20).clamp(Duration::from_millis(10), Duration::from_secs(1));
        std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || loop {
                // Wake rarely: every wake-up of this thread can preempt a rank that spins
                // in a measured loop on a busy machine. A twentieth of the timeout keeps
                // the overrun small (5%) with at most one wake-up per second.
                std::thread::sleep(poll);
                let expired = watched.lock().ok().and_then(|mut s| {
                    let a = s.as_mut()?;
                    if let Some((counter, seen)) = &mut a.progress {
                        let now = counter.load(Ordering::Relaxed);
                        if now != *seen {
                            *seen = now;
                            a.deadline = Instant::now() + a.limit;
                        }
                    }
                    (Instant::now() > a.deadline).then(|| (a.what.clone(), a.limit))
                });
                if let Some((what, limit)) = expired {
                    eprintln!(
                        "{prefix}: timed out after {} s {what}: the peer died, hangs, or never \
                         started. Aborting (raise --timeout if the system is just slow).",
                        limit.as_secs_f64()
                    );
                    std::process::exit(base::exit::ERROR);
                }
            })
            .expect("spawn watchdog thread");
        Self { slot, timeout }
    }

    /// Arms the deadline for the wait described by `what` ("waiting for rank 1 ...").
    pub fn arm(&self, what: impl Into<String>) -> Guard {
        self.arm_for(what, self.timeout)
    }

    /// Arms a deadline of `limit` instead of the timeout: for waits that legitimately
    /// outlast one timeout, such as a barrier behind pairs that may each use a whole one.
    pub fn arm_for(&self, what: impl Into<String>, limit: Duration) -> Guard {
        if let Ok(mut s) = self.slot.lock() {
            *s = Some(Armed {
                what: what.into(),
                deadline: Instant::now() + limit,
                limit,
                progress: None,
            });
        }
        Guard {
            slot: Arc::clone(&self.slot),
        }
    }

    /// Arms a deadline that is pushed back every time `progress` changes: for a measured
    /// loop whose total length may exceed the timeout. The loop bumps the counter with a
    /// relaxed store once per iteration (about a nanosecond), and the run ends only when no
    /// iteration completed for a whole timeout, i.e. when a peer stopped taking part.
    pub fn arm_progress(&self, what: impl Into<String>, progress: Arc<AtomicU64>) -> Guard {
        if let Ok(mut s) = self.slot.lock() {
            let seen = progress.load(Ordering::Relaxed);
            *s = Some(Armed {
                what: what.into(),
                deadline: Instant::now() + self.timeout,
                limit: self.timeout,
                progress: Some((progress, seen)),
            });
        }
        Guard {
            slot: Arc::clone(&self.slot),
        }
    }

    /// The timeout every armed wait gets.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}
