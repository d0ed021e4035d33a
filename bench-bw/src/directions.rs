//! Both directions and every flow of a pair, each counted on its own.
//!
//! A bidirectional run (`-b`, and every sweep by default) keeps perftest's summed figure
//! in `bw_gbit_s` and adds one [`DirectionFigures`] per direction, so a matrix can tell
//! what a node sends from what it receives: a bad transmitter is slow in one direction
//! only, which a sum hides. A pair over several streams adds one [`FlowFigures`] per
//! stream with the identity an ECMP hash sees (TCP: the sender's source port), so a bad
//! path (some flows slow) is told from a bad end (every flow slow).
//!
//! Who counts: over TCP the receiver of each stream (bytes that arrived, first byte to end
//! of stream on its own clock: a sender's count would include megabytes still queued in
//! its socket buffer, seconds of wire time on a slow direction); over verbs the sender,
//! whose completions mean the data was delivered and acknowledged.

use serde::{Deserialize, Serialize};

use results::units::{gbit_s, mpps};
use results::{BandwidthSummary, DirectionFigures, FlowFigures, Pair, Peer};
use transport::{QpSent, StreamReceipt};

/// What one side's timed loop sent, as the responder reports it over the control link
/// after a bidirectional size (the initiator has its own).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopFigures {
    /// Messages this side sent in its timed loop (and drained after it).
    pub sent: u64,
    /// The loop's wall time on this side's clock.
    pub seconds: f64,
    /// The best interval sample of this side's sending, Gb/s.
    pub peak_gbit_s: f64,
    /// perftest's BW peak of this side's loop, where it took the stamps.
    #[serde(default)]
    pub perftest_peak_gbit_s: Option<f64>,
}

/// One direction's figures from what its receiver counted on each stream; `None` when
/// the receiver counted nothing per stream (verbs).
fn from_receipts(receipts: &[StreamReceipt], size: u64) -> Option<(BandwidthSummary, f64)> {
    if receipts.is_empty() {
        return None;
    }
    let bytes: u64 = receipts.iter().map(|r| r.bytes).sum();
    // The streams ran side by side: the direction lasted as long as its longest stream.
    let seconds = receipts.iter().map(|r| r.seconds).fold(0.0, f64::max);
    let avg = gbit_s(bytes, seconds);
    Some((
        BandwidthSummary {
            avg,
            peak: avg,
            perftest_peak: None,
        },
        mpps(bytes / size.max(1), seconds),
    ))
}

/// One direction's figures from its sender's loop (verbs).
fn from_loop(l: &LoopFigures, size: u64) -> (BandwidthSummary, f64) {
    let avg = gbit_s(l.sent * size, l.seconds);
    (
        BandwidthSummary {
            avg,
            peak: l.peak_gbit_s.max(avg),
            perftest_peak: l.perftest_peak_gbit_s,
        },
        mpps(l.sent, l.seconds),
    )
}

/// Both directions of a bidirectional pair: initiator to responder first. Each direction
/// is counted by its receiver where the transport counted per stream (`received` of the
/// receiving side's report), else by its sender's loop.
pub fn directions(
    pair: &Pair,
    size: u64,
    loops: [&LoopFigures; 2],
    received: [&[StreamReceipt]; 2],
) -> Vec<DirectionFigures> {
    let [initiator_loop, responder_loop] = loops;
    let [at_initiator, at_responder] = received;
    let one = |from: &Peer, to: &Peer, sender: &LoopFigures, at_receiver: &[StreamReceipt]| {
        let (bw_gbit_s, msg_rate_mpps) =
            from_receipts(at_receiver, size).unwrap_or_else(|| from_loop(sender, size));
        DirectionFigures {
            from: from.clone(),
            to: to.clone(),
            bw_gbit_s,
            msg_rate_mpps,
        }
    };
    vec![
        one(
            &pair.initiator,
            &pair.responder,
            initiator_loop,
            at_responder,
        ),
        one(
            &pair.responder,
            &pair.initiator,
            responder_loop,
            at_initiator,
        ),
    ]
}

/// Per-stream figures of a multi-stream TCP pair, from what each stream's receiver
/// counted: one-way, the responder's receipts (data from the initiator; `from` left out
/// as the contract says); bidirectional, both sides', each flow with its sender.
pub fn tcp_flows(
    pair: &Pair,
    bidirectional: bool,
    at_initiator: &[StreamReceipt],
    at_responder: &[StreamReceipt],
) -> Vec<FlowFigures> {
    let flow = |r: &StreamReceipt, from: Option<&Peer>| FlowFigures {
        index: r.index,
        flow_label: None,
        qp_num: None,
        src_port: Some(r.sender_port),
        from: from.cloned(),
        bw_gbit_s: gbit_s(r.bytes, r.seconds),
    };
    if !bidirectional {
        return at_responder.iter().map(|r| flow(r, None)).collect();
    }
    at_responder
        .iter()
        .map(|r| flow(r, Some(&pair.initiator)))
        .chain(at_initiator.iter().map(|r| flow(r, Some(&pair.responder))))
        .collect()
}

/// Per-QP figures of a multi-QP verbs pair, from each sending side's completions per
/// QP over its own loop: one-way, the initiator's QPs (`from` left out); bidirectional,
/// both sides' QPs, each with its sender. Each flow carries the sender's QP number and the
/// GRH flow label its packets carried.
pub fn verbs_flows(
    pair: &Pair,
    size: u64,
    bidirectional: bool,
    mine: (&[QpSent], f64),
    theirs: (&[QpSent], f64),
) -> Vec<FlowFigures> {
    let flow = |q: &QpSent, seconds: f64, from: Option<&Peer>| FlowFigures {
        index: q.index,
        flow_label: q.flow_label,
        qp_num: Some(q.qp_num),
        src_port: None,
        from: from.cloned(),
        bw_gbit_s: gbit_s(q.messages * size, seconds),
    };
    if !bidirectional {
        return mine.0.iter().map(|q| flow(q, mine.1, None)).collect();
    }
    mine.0
        .iter()
        .map(|q| flow(q, mine.1, Some(&pair.initiator)))
        .chain(
            theirs
                .0
                .iter()
                .map(|q| flow(q, theirs.1, Some(&pair.responder))),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> Pair {
        let peer = |h: &str, r| Peer {
            rank: Some(r),
            host: h.into(),
            ..Default::default()
        };
        Pair {
            initiator: peer("a", 0),
            responder: peer("b", 1),
            round: Some(0),
        }
    }

    fn receipt(index: u32, port: u16, bytes: u64, seconds: f64) -> StreamReceipt {
        StreamReceipt {
            index,
            sender_port: port,
            bytes,
            seconds,
        }
    }

    #[test]
    fn each_direction_is_counted_by_its_receiver_and_named_by_its_sender() {
        let p = pair();
        let lp = LoopFigures {
            sent: 1000,
            seconds: 1.0,
            peak_gbit_s: 9.0,
            perftest_peak_gbit_s: None,
        };
        // a -> b: 1e9 bytes in 1 s arrived at b (8 Gb/s); b -> a: 1e8 bytes in 2 s
        // arrived at a (0.4 Gb/s) over two streams, the longer one decides the time.
        let at_b = [receipt(0, 40000, 1_000_000_000, 1.0)];
        let at_a = [
            receipt(0, 5000, 50_000_000, 2.0),
            receipt(1, 5000, 50_000_000, 1.5),
        ];
        let d = directions(&p, 1000, [&lp, &lp], [&at_a, &at_b]);
        assert_eq!(d.len(), 2);
        assert_eq!((d[0].from.host.as_str(), d[0].to.host.as_str()), ("a", "b"));
        assert_eq!((d[1].from.host.as_str(), d[1].to.host.as_str()), ("b", "a"));
        assert!((d[0].bw_gbit_s.avg - 8.0).abs() < 1e-9, "{:?}", d[0]);
        assert!((d[1].bw_gbit_s.avg - 0.4).abs() < 1e-9, "{:?}", d[1]);
        assert!((d[0].msg_rate_mpps - 1.0).abs() < 1e-9);
    }

    #[test]
    fn without_receipts_each_sender_loop_counts_its_own_direction() {
        let p = pair();
        let fast = LoopFigures {
            sent: 2_000_000,
            seconds: 2.0,
            peak_gbit_s: 70.0,
            perftest_peak_gbit_s: None,
        };
        let slow = LoopFigures {
            sent: 100_000,
            seconds: 1.0,
            peak_gbit_s: 0.0,
            perftest_peak_gbit_s: None,
        };
        let d = directions(&p, 4096, [&fast, &slow], [&[], &[]]);
        assert!((d[0].bw_gbit_s.avg - 32.768).abs() < 1e-9, "{:?}", d[0]);
        assert_eq!(d[0].bw_gbit_s.peak, 70.0);
        assert!((d[1].bw_gbit_s.avg - 3.2768).abs() < 1e-9, "{:?}", d[1]);
        assert_eq!(
            d[1].bw_gbit_s.peak, d[1].bw_gbit_s.avg,
            "peak never below avg"
        );
        assert_eq!(d[1].from.host, "b");
    }

    #[test]
    fn flows_carry_their_source_port_and_sender() {
        let p = pair();
        let at_b = [receipt(0, 41000, 1_000, 1e-6), receipt(1, 41001, 500, 1e-6)];
        let at_a = [receipt(0, 6000, 250, 1e-6)];
        let one_way = tcp_flows(&p, false, &at_a, &at_b);
        assert_eq!(one_way.len(), 2, "one-way: what the responder received");
        assert_eq!(one_way[1].src_port, Some(41001));
        assert_eq!(one_way[1].index, 1);
        assert!(one_way.iter().all(|f| f.from.is_none()));
        assert!((one_way[0].bw_gbit_s - 8.0).abs() < 1e-6);
        let both = tcp_flows(&p, true, &at_a, &at_b);
        assert_eq!(both.len(), 3);
        assert_eq!(both[0].from.as_ref().unwrap().host, "a");
        assert_eq!(both[2].from.as_ref().unwrap().host, "b");
        assert_eq!(both[2].src_port, Some(6000));
        assert!((both[2].bw_gbit_s - 2.0).abs() < 1e-6);
    }

    #[test]
    fn verbs_flows_carry_qp_number_and_flow_label_per_sender() {
        let p = pair();
        let qp = |index, qp_num, messages| QpSent {
            index,
            qp_num,
            flow_label: Some(index + 1),
            messages,
        };
        let mine = [qp(0, 17, 1000), qp(1, 18, 250)];
        let theirs = [qp(0, 90, 500), qp(1, 91, 500)];
        let one = verbs_flows(&p, 1000, false, (&mine, 1.0), (&theirs, 2.0));
        assert_eq!(one.len(), 2);
        assert_eq!((one[1].qp_num, one[1].flow_label), (Some(18), Some(2)));
        assert!((one[0].bw_gbit_s - 8e-3).abs() < 1e-12 && (one[1].bw_gbit_s - 2e-3).abs() < 1e-12);
        assert!(one.iter().all(|f| f.from.is_none() && f.src_port.is_none()));
        let both = verbs_flows(&p, 1000, true, (&mine, 1.0), (&theirs, 2.0));
        assert_eq!(both.len(), 4);
        assert_eq!(both[2].from.as_ref().unwrap().host, "b");
        assert_eq!(both[2].qp_num, Some(90));
        assert!(
            (both[3].bw_gbit_s - 2e-3).abs() < 1e-12,
            "their own loop time"
        );
    }
}
