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
    /// Starts metering: the process's CPU time and the wall clock, now.
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
    fn the_meter_counts_the_cpu_a_busy_thread_burns() {
        // Spin until this thread has burnt 150 ms of CPU (however long that takes on a
        // loaded machine), then the process-wide meter must show at least that much: it
        // counts CPU time, whatever share of a core the thread got.
        let thread_cpu = || {
            getrusage(UsageWho::RUSAGE_THREAD)
                .map(|u| {
                    let tv =
                        |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
                    tv(u.user_time()) + tv(u.system_time())
                })
                .unwrap_or(0.0)
        };
        let m = CpuMeter::start();
        let t0 = thread_cpu();
        let wall = Instant::now();
        let mut x = 0u64;
        while thread_cpu() - t0 < 0.15 {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            assert!(
                wall.elapsed().as_secs() < 60,
                "no CPU for a busy loop in 60 s"
            );
        }
        let burnt = thread_cpu() - t0;
        let measured = m.cores() * wall.elapsed().as_secs_f64();
        assert!(
            measured >= 0.95 * burnt,
            "meter says {measured:.3} CPU s, the busy thread alone burnt {burnt:.3}"
        );
    }
}
