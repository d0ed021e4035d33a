//! The clock of the measurement loop.
//!
//! Every iteration of a latency loop takes two timestamps, so the clock must cost a few
//! nanoseconds: `Instant::now()` is a vDSO call that costs about 24 ns on a host with a
//! stable TSC and about 1 us in a VM whose kernel fell back to hpet, which would measure the
//! clock instead of the fabric. `quanta` reads the CPU cycle counter directly (as perftest
//! does with `get_cycles()`) when the CPU has an invariant TSC, calibrated against the
//! monotonic clock, and falls back to the monotonic clock otherwise.

use results::LatencyHistogram;

/// A calibrated raw clock: read with [`raw`](Self::raw), convert differences with
/// [`nanos`](Self::nanos) (a multiply and a shift).
#[derive(Clone)]
pub struct LoopClock {
    inner: quanta::Clock,
}

impl Default for LoopClock {
    fn default() -> Self {
        Self::new()
    }
}

impl LoopClock {
    pub fn new() -> Self {
        Self {
            inner: quanta::Clock::new(),
        }
    }

    /// Raw counter value; only differences between two reads mean anything.
    #[inline(always)]
    pub fn raw(&self) -> u64 {
        self.inner.raw()
    }

    /// Nanoseconds between two raw reads.
    #[inline(always)]
    pub fn nanos(&self, start: u64, end: u64) -> u64 {
        self.inner.delta_as_nanos(start, end)
    }

    /// Seconds between two raw reads.
    pub fn seconds(&self, start: u64, end: u64) -> f64 {
        self.nanos(start, end) as f64 / 1e9
    }

    /// Which counter backs the clock: `tsc` when the CPU advertises an invariant TSC
    /// (`constant_tsc` and `nonstop_tsc`), which is what quanta then uses; else `monotonic`.
    pub fn source() -> &'static str {
        let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let invariant = flags.lines().any(|l| {
            l.starts_with("flags") && l.contains(" constant_tsc") && l.contains(" nonstop_tsc")
        });
        if invariant && cfg!(any(target_arch = "x86", target_arch = "x86_64")) {
            "tsc"
        } else {
            "monotonic"
        }
    }

    /// Cost in ns of one empty loop iteration: two clock reads, the conversion and a
    /// histogram record, exactly what the latency loop adds around the measured operation.
    /// Reported in every document so readers know the floor under each figure.
    pub fn loop_overhead_ns(&self) -> f64 {
        const N: u64 = 200_000;
        let mut h = LatencyHistogram::new();
        let outer = self.raw();
        for _ in 0..N {
            let t0 = self.raw();
            let t1 = self.raw();
            h.record(self.nanos(t0, t1));
        }
        let total = self.nanos(outer, self.raw());
        std::hint::black_box(&h);
        total as f64 / N as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_advances_with_real_time() {
        let c = LoopClock::new();
        let t0 = c.raw();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let ns = c.nanos(t0, c.raw());
        assert!(ns >= 15_000_000, "20 ms sleep measured as {ns} ns");
        assert!(ns < 2_000_000_000, "20 ms sleep measured as {ns} ns");
    }

    #[test]
    fn overhead_is_measured_and_positive() {
        let o = LoopClock::new().loop_overhead_ns();
        assert!(o > 0.0 && o < 100_000.0, "overhead {o}");
    }
}
