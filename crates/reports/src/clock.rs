//! The phase clock: how long each phase of a report or a trend took, on standard error
//! when `AGGREGATE_TIMINGS` is set.

/// Phase timings on standard error when `AGGREGATE_TIMINGS` is set, for the scale
/// benchmark: which phase to optimise is a measurement, not a guess.
pub(crate) struct PhaseClock(Option<std::time::Instant>);

impl PhaseClock {
    pub(crate) fn new() -> Self {
        PhaseClock(std::env::var_os("AGGREGATE_TIMINGS").map(|_| std::time::Instant::now()))
    }
    /// Runs `f` and, with timings on, prints its own wall time as `phase`: for a phase
    /// that runs on a thread of its own beside another, whose shared lap follows.
    pub(crate) fn own<R>(&self, phase: &str, f: impl FnOnce() -> R) -> R {
        let start = self.0.map(|_| std::time::Instant::now());
        let r = f();
        if let Some(t) = start {
            eprintln!("aggregate: {phase}: {:.3} s", t.elapsed().as_secs_f64());
        }
        r
    }
    pub(crate) fn lap(&mut self, phase: &str) {
        if let Some(t) = self.0 {
            eprintln!("aggregate: {phase}: {:.3} s", t.elapsed().as_secs_f64());
            self.0 = Some(std::time::Instant::now());
        }
    }
}
