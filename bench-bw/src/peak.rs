//! Which peak the "BW peak" column shows: perftest's where perftest would measure one,
//! else the best interval sample.
//!
//! perftest's peak ([`results::peak`]) needs a clock stamp per post and per completion,
//! and perftest takes them only in iteration mode with at most 20000 iterations (per QP),
//! never with `-N`; over TCP there is no completion that says a message arrived. Where
//! it is measured the JSON has it as `bw_gbit_s.perftest_peak`, beside `peak`, the best
//! interval, so both can be compared with other runs.

use base::clock::LoopClock;
use results::peak::MessageStamps;
use results::units::gbit_s;

use p2p::Plan;

/// perftest's ceiling: above it the quadratic search is skipped (`perftest_parameters.c`,
/// "BW peak won't be measured in this run").
pub const MAX_ITERATIONS: u64 = 20_000;

/// Why a plan's sizes get no perftest peak; `None`: they do.
pub fn not_measured(plan: &Plan, no_peak: bool) -> Option<String> {
    why_not(
        plan.transport,
        plan.duration_s.is_some(),
        plan.iterations,
        no_peak,
    )
}

fn why_not(
    transport: transport::TransportKind,
    timed: bool,
    iterations: u64,
    no_peak: bool,
) -> Option<String> {
    if no_peak {
        Some("-N".into())
    } else if transport != transport::TransportKind::Verbs {
        Some(format!(
            "over {} no completion says a message arrived",
            transport.name()
        ))
    } else if timed {
        Some("perftest measures none with -D".into())
    } else if iterations > MAX_ITERATIONS {
        Some(format!(
            "perftest measures none above {MAX_ITERATIONS} iterations"
        ))
    } else {
        None
    }
}

/// The header's line on the peak column.
pub fn describe(plan: &Plan, no_peak: bool, interval_ms: u64) -> String {
    match not_measured(plan, no_peak) {
        None => "BW peak: perftest's (the fastest run of messages, post to completion)".into(),
        Some(why) => format!("BW peak: the best {interval_ms} ms interval ({why})"),
    }
}

/// perftest's BW peak of one side's loop, Gb/s: `size` bytes a message over the fastest
/// window of the stamps.
pub fn gbit_s_of(stamps: &MessageStamps, clock: &LoopClock, size: u64) -> Option<f64> {
    let w = stamps.fastest()?;
    let ns = clock.nanos(w.posted_tick, w.completed_tick);
    (ns > 0).then(|| gbit_s(w.messages() * size, ns as f64 / 1e9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_as_perftest_measures_it() {
        use transport::TransportKind::{Tcp, Verbs};
        assert_eq!(why_not(Verbs, false, 5000, false), None);
        assert_eq!(why_not(Verbs, false, MAX_ITERATIONS, false), None);
        for (got, why) in [
            (why_not(Verbs, false, 5000, true), "-N"),
            (why_not(Verbs, true, 5000, false), "-D"),
            (
                why_not(Verbs, false, MAX_ITERATIONS + 1, false),
                "above 20000",
            ),
            (why_not(Tcp, false, 5000, false), "over tcp"),
        ] {
            let got = got.expect(why);
            assert!(got.contains(why), "{got}");
        }
    }

    #[test]
    fn peak_is_the_fastest_window_in_gbit_s() {
        let clock = LoopClock::new();
        let t0 = clock.raw();
        // Spin until some time has passed so the window is measurable on any clock.
        let mut t1 = clock.raw();
        while clock.nanos(t0, t1) < 1_000_000 {
            t1 = clock.raw();
        }
        let mut s = MessageStamps::default();
        s.post(0, t0);
        s.complete(9, t1);
        let ns = clock.nanos(t0, t1) as f64;
        let want = 10.0 * 4096.0 * 8.0 / ns;
        let got = gbit_s_of(&s, &clock, 4096).unwrap();
        assert!((got - want).abs() < want * 1e-9, "{got} {want}");
        assert_eq!(gbit_s_of(&MessageStamps::default(), &clock, 4096), None);
    }
}
