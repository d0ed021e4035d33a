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
    /// A clock started now.
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

    /// Cost in ns that the timed loop adds to each iteration: one clock read and one store
    /// (what [`BlockStamps::run`] does around the measured operation). Reported in every
    /// document so readers know the floor under each figure.
    pub fn loop_overhead_ns(&self) -> f64 {
        const BLOCKS: usize = 200;
        let mut stamps = BlockStamps::new();
        let start = self.raw();
        for _ in 0..BLOCKS {
            stamps
                .run(self, BLOCK, || Ok::<(), ()>(()))
                .expect("empty op cannot fail");
            std::hint::black_box(stamps.last());
        }
        self.nanos(start, self.raw()) as f64 / (BLOCKS * BLOCK) as f64
    }
}

/// Iterations timed between two looks at the clock budget and Ctrl-C.
pub const BLOCK: usize = 1024;

/// Timestamps for one block of a latency loop, taken as perftest does: one clock read after
/// each iteration into a preallocated array, so the loop holds the measured operation, a
/// clock read and a store, nothing else. Differences of consecutive stamps are the
/// iteration times; they go into the histogram after the block, outside the timed path.
pub struct BlockStamps {
    stamps: Vec<u64>,
    len: usize,
}

impl Default for BlockStamps {
    fn default() -> Self {
        Self::new()
    }
}

impl BlockStamps {
    /// No stamps yet.
    pub fn new() -> Self {
        Self {
            stamps: vec![0; BLOCK + 1],
            len: 0,
        }
    }

    /// Runs `op` `n` times (at most [`BLOCK`]), stamping before the first and after each.
    /// A fresh first stamp per block keeps the histogram work of the previous block out.
    #[inline(always)]
    pub fn run<E>(
        &mut self,
        clock: &LoopClock,
        n: usize,
        mut op: impl FnMut() -> Result<(), E>,
    ) -> Result<(), E> {
        let n = n.min(BLOCK);
        self.len = 0;
        self.stamps[0] = clock.raw();
        for slot in &mut self.stamps[1..=n] {
            op()?;
            *slot = clock.raw();
        }
        self.len = n;
        Ok(())
    }

    /// Iterations stamped by the last [`run`](Self::run).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was stamped.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Raw stamp after the last iteration of the block.
    pub fn last(&self) -> u64 {
        self.stamps[self.len]
    }

    /// Records each iteration's time, in ns shifted right by `shift` (1 halves a round
    /// trip into one-way latency).
    pub fn record_into(&self, clock: &LoopClock, hist: &mut LatencyHistogram, shift: u32) {
        for w in self.stamps[..=self.len].windows(2) {
            hist.record(clock.nanos(w[0], w[1]) >> shift);
        }
    }
}

impl LoopClock {
    /// nccl-tests' timed loop: one clock read before `iters` calls of `op` and one after,
    /// nothing between two calls but the loop counter (the watchdog's progress counter is
    /// bumped once per 1024 calls). Returns the loop's nanoseconds; stops at the first
    /// error.
    #[inline]
    pub fn time_loop<E>(
        &self,
        iters: u64,
        progress: &std::sync::atomic::AtomicU64,
        mut op: impl FnMut() -> Result<(), E>,
    ) -> Result<u64, E> {
        let start = self.raw();
        let mut done = 0u64;
        while done < iters {
            let n = (iters - done).min(PROGRESS_EVERY as u64);
            for _ in 0..n {
                op()?;
            }
            done += n;
            progress.store(done, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(self.nanos(start, self.raw()))
    }
}

/// Iterations between two updates of a loop's progress counter (for the watchdog).
const PROGRESS_EVERY: usize = 1024;

/// Timestamps of one whole timed loop, for collectives' per-iteration view: one
/// cycle-counter read before the first iteration and one after each, stored into a
/// preallocated array, and nothing else per iteration (the watchdog's progress counter is
/// bumped once per 1024 iterations, outside the inner loop). Unlike [`BlockStamps`], no
/// iteration is left out of the span: consecutive differences are the iteration times and
/// tile the loop from the first stamp to the last.
pub struct LoopStamps {
    stamps: Vec<u64>,
}

impl LoopStamps {
    /// Runs `op` `iters` times, stamping before the first and after each; stops at the
    /// first error. Allocates and touches the stamps before the first one is taken.
    #[inline]
    pub fn run<E>(
        clock: &LoopClock,
        iters: usize,
        progress: &std::sync::atomic::AtomicU64,
        mut op: impl FnMut() -> Result<(), E>,
    ) -> Result<Self, E> {
        // Written before the loop (a non-zero fill is never left to lazily mapped zero
        // pages), so no page fault lands inside the timed loop: in a VM a first touch
        // costs microseconds.
        let mut stamps = vec![u64::MAX; iters + 1];
        std::hint::black_box(&mut stamps);
        stamps[0] = clock.raw();
        let mut done = 0u64;
        for chunk in stamps[1..].chunks_mut(PROGRESS_EVERY) {
            for slot in chunk.iter_mut() {
                op()?;
                *slot = clock.raw();
            }
            done += chunk.len() as u64;
            progress.store(done, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(Self { stamps })
    }

    /// Timed iterations.
    pub fn len(&self) -> usize {
        self.stamps.len() - 1
    }

    /// Whether no interval was stamped.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Nanoseconds from the first stamp to the last: the whole loop.
    pub fn total_ns(&self, clock: &LoopClock) -> u64 {
        clock.nanos(self.stamps[0], self.stamps[self.len()])
    }

    /// Each iteration's nanoseconds.
    pub fn iteration_ns(&self, clock: &LoopClock) -> Vec<u64> {
        self.stamps
            .windows(2)
            .map(|w| clock.nanos(w[0], w[1]))
            .collect()
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
    fn block_stamps_time_each_iteration() {
        let c = LoopClock::new();
        let mut b = BlockStamps::new();
        b.run(&c, 5, || {
            std::thread::sleep(std::time::Duration::from_millis(2));
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(b.len(), 5);
        let mut h = LatencyHistogram::new();
        b.record_into(&c, &mut h, 0);
        assert_eq!(h.len(), 5);
        assert!(
            h.value_at_quantile_ns(0.0) >= 1_500_000,
            "each sample covers one 2 ms sleep"
        );
        let mut half = LatencyHistogram::new();
        b.record_into(&c, &mut half, 1);
        assert!(half.value_at_quantile_ns(1.0) < h.value_at_quantile_ns(1.0));
        // An error stops the block and stamps nothing more.
        let mut calls = 0;
        assert!(b
            .run(&c, 10, || {
                calls += 1;
                if calls == 3 {
                    Err(())
                } else {
                    Ok(())
                }
            })
            .is_err());
        assert_eq!(calls, 3);
        assert!(b.is_empty());
    }

    #[test]
    fn overhead_is_measured_and_positive() {
        let o = LoopClock::new().loop_overhead_ns();
        assert!(o > 0.0 && o < 100_000.0, "overhead {o}");
    }

    #[test]
    fn loop_stamps_cover_the_whole_loop() {
        let c = LoopClock::new();
        let progress = std::sync::atomic::AtomicU64::new(0);
        let s = LoopStamps::run(&c, 3, &progress, || {
            std::thread::sleep(std::time::Duration::from_millis(2));
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(progress.load(std::sync::atomic::Ordering::Relaxed), 3);
        let each = s.iteration_ns(&c);
        assert_eq!(each.len(), 3);
        assert!(each.iter().all(|&t| t >= 1_500_000), "{each:?}");
        // The iterations tile the loop: their sum is the total, up to rounding per
        // conversion.
        let sum: u64 = each.iter().sum();
        let total = s.total_ns(&c);
        assert!(sum.abs_diff(total) <= 3, "{sum} vs {total}");
        let mut calls = 0;
        assert!(LoopStamps::run(&c, 10, &progress, || {
            calls += 1;
            if calls == 4 {
                Err(())
            } else {
                Ok(())
            }
        })
        .is_err());
        assert_eq!(calls, 4);
    }

    #[test]
    fn time_loop_times_the_whole_loop() {
        let c = LoopClock::new();
        let progress = std::sync::atomic::AtomicU64::new(0);
        let mut calls = 0;
        let ns = c
            .time_loop(3, &progress, || {
                calls += 1;
                std::thread::sleep(std::time::Duration::from_millis(2));
                Ok::<(), ()>(())
            })
            .unwrap();
        assert_eq!(calls, 3);
        assert_eq!(progress.load(std::sync::atomic::Ordering::Relaxed), 3);
        assert!(ns >= 5_500_000, "three 2 ms sleeps took {ns} ns");
        let mut calls = 0;
        assert!(c
            .time_loop(10, &progress, || {
                calls += 1;
                if calls == 2 {
                    Err(())
                } else {
                    Ok(())
                }
            })
            .is_err());
        assert_eq!(calls, 2);
    }
}
