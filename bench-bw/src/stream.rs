//! The timed loop of one side of a bandwidth run: the warm-up (bounded in bytes), then
//! the transfer advanced, stamped, and sampled at each interval boundary. Everything else
//! (figures, JSON, the peer's report) waits until the loop is over.

use anyhow::Result;

use base::clock::LoopClock;
use base::cpu::CpuMeter;
use base::interrupt;
use p2p::Plan;
use transport::BandwidthEndpoint;

/// What the timed loop of one side saw.
pub(crate) struct Transfer {
    pub(crate) sent: u64,
    pub(crate) received: u64,
    pub(crate) seconds: f64,
    pub(crate) samples: Vec<u64>,
    pub(crate) cores: f64,
    pub(crate) complete: bool,
    /// perftest's post and completion stamps, when the loop took them.
    pub(crate) stamps: Option<results::peak::MessageStamps>,
}

/// At most this much data is sent to warm up, whatever the message count says: 2 x depth
/// messages of 1 GiB would be half a terabyte before the first timed byte, with no point
/// where Ctrl-C or SIGTERM could stop it.
const WARMUP_MAX_BYTES: u64 = 256 << 20;

/// The warm-up messages of a size: the plan's count, bounded by [`WARMUP_MAX_BYTES`], at
/// least one when the plan asks for any.
pub(crate) fn warmup_messages(warmup: u64, size: u64) -> u64 {
    if warmup == 0 {
        return 0;
    }
    warmup.min((WARMUP_MAX_BYTES / size.max(1)).max(1))
}

/// The timed loop: advance the transfer, stamp, and at each interval boundary note the
/// messages completed. Everything else waits until the loop is over.
pub(crate) fn stream(
    ep: &mut dyn BandwidthEndpoint,
    clock: &LoopClock,
    (plan, size): (&Plan, u64),
    interval_ns: u64,
    stamp: bool,
) -> Result<Transfer> {
    for _ in 0..warmup_messages(plan.warmup, size) {
        if interrupt::interrupted() {
            break;
        }
        ep.step()?;
    }
    ep.quiesce()?;
    if stamp {
        ep.stamp_messages(clock, plan.messages());
    }
    let limit = if plan.duration_s.is_some() {
        u64::MAX
    } else {
        plan.messages()
    };
    let budget_ns = plan.duration_s.map_or(u64::MAX, |d| (d * 1e9) as u64);
    let mut samples = Vec::new();
    let mut next_ns = interval_ns;
    let (mut sent, mut at_last) = (0u64, 0u64);
    let mut complete = true;
    let cpu = CpuMeter::start();
    let start = clock.raw();
    // The loop's last clock read: right after the last completion it reaped.
    let mut last;
    loop {
        sent += ep.step()?;
        last = clock.raw();
        let elapsed = clock.nanos(start, last);
        if elapsed >= next_ns {
            // A step that stalled across several boundaries closes each of them: the
            // intervals it spanned get what completed in them (nothing), so a stall shows
            // up as a dip instead of vanishing from the samples.
            while elapsed >= next_ns {
                samples.push(sent - at_last);
                at_last = sent;
                next_ns += interval_ns;
            }
            if interrupt::interrupted() {
                complete = false;
                break;
            }
        }
        if sent >= limit || elapsed >= budget_ns {
            break;
        }
    }
    let received = ep.finish()?;
    let stamps = ep.take_stamps();
    let seconds = if ep.complete_when_reaped() {
        // Verbs: what completed by the last read is what arrived by then (perftest's end
        // stamp); a duration's tail completing in `finish` is outside the window.
        clock.seconds(start, last)
    } else {
        // TCP: the receiver's acknowledgement in `finish` is when the bytes arrived.
        sent += ep.drained();
        clock.seconds(start, clock.raw())
    };
    Ok(Transfer {
        sent,
        received,
        seconds,
        samples,
        cores: cpu.cores(),
        complete,
        stamps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_is_bounded_in_bytes_not_only_in_messages() {
        // TCP's default, 2 x depth 128: unchanged at the sizes people measure.
        assert_eq!(warmup_messages(256, 64 << 10), 256);
        assert_eq!(warmup_messages(256, 1 << 20), 256);
        // 256 MiB at most: 32 messages of 8 MiB, one of 1 GiB (it was 256 GiB).
        assert_eq!(warmup_messages(256, 8 << 20), 32);
        assert_eq!(warmup_messages(256, 1 << 30), 1);
        assert_eq!(warmup_messages(0, 1 << 30), 0);
    }
}
