//! CPU cost of a transfer: the field figure is "cores busy to drive the link" (TCP needs tens
//! of cores for 100 Gb/s, RDMA under one), so we report (user + sys CPU seconds of this
//! process) / wall seconds over the timed loop.

use nix::sys::resource::{getrusage, UsageWho};
use std::time::Instant;

/// A start mark; [`cores`](Self::cores) gives the average number of busy cores since.
pub struct CpuMeter {
    cpu_s: f64,
    wall: Instant,
}

fn process_cpu_seconds() -> f64 {
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            tv(u.user_time()) + tv(u.system_time())
        }
        Err(_) => 0.0,
    }
}

impl CpuMeter {
    pub fn start() -> Self {
        Self {
            cpu_s: process_cpu_seconds(),
            wall: Instant::now(),
        }
    }

    /// Average busy cores since `start`.
    pub fn cores(&self) -> f64 {
        let wall = self.wall.elapsed().as_secs_f64();
        if wall <= 0.0 {
            return 0.0;
        }
        (process_cpu_seconds() - self.cpu_s).max(0.0) / wall
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_loop_shows_more_cores_than_a_sleep() {
        let m = CpuMeter::start();
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 200 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let busy = m.cores();
        // Process-wide: tests running in parallel threads add to both phases, and a loaded
        // machine takes some of the busy thread's time; the busy phase still dominates.
        assert!(busy > 0.2, "busy loop measured {busy} cores");
        let m = CpuMeter::start();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let idle = m.cores();
        assert!(idle < busy, "sleep measured {idle} cores, busy loop {busy}");
    }
}
