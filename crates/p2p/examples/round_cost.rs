//! What the root of a sweep spends per round on results: decoding every rank's round
//! report and adding it to the document, for a round of PAIRS pairs (default 4096: a
//! 1024-node, 8-rail all-pairs sweep), with bandwidth rows shaped like real ones (four
//! interval samples, counters on both sides). Run:
//! `cargo run --release --example round_cost -p p2p [PAIRS]`.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::time::Instant;

use p2p::coordinator::RoundReport;
use results::{
    BandwidthResult, BandwidthSummary, CounterDeltas, CpuUse, Pair, Peer, PortCounters, TestResult,
};

fn row(i: u32) -> TestResult {
    let counters = |dev: &str| PortCounters {
        device: dev.into(),
        port: 1,
        counters: [
            ("port_xmit_data", 1 << 28),
            ("port_rcv_data", 1 << 20),
            ("port_xmit_packets", 250_000),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        hw_counters: [
            ("out_of_sequence", 0),
            ("packet_seq_err", 0),
            ("rx_write_requests", 250_000),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        ..Default::default()
    };
    TestResult::Bandwidth(BandwidthResult {
        test: "write_bw".into(),
        transport: "verbs".into(),
        size_bytes: 1 << 20,
        iterations: 5000,
        duration_s: 0.43,
        bidirectional: false,
        streams: 1,
        tx_depth: 128,
        cq_mod: None,
        post_list: None,
        bw_gbit_s: BandwidthSummary {
            avg: 97.31,
            peak: 97.52,
            perftest_peak: None,
        },
        msg_rate_mpps: 0.0116,
        interval_s: 0.1,
        interval_gbit_s: vec![97.2, 97.4, 97.5, 97.3],
        cpu: CpuUse {
            initiator_cores: 0.12,
            responder_cores: 0.02,
        },
        pair: Pair {
            initiator: Peer {
                rank: Some(2 * i),
                host: format!("node{:04}", i / 4),
                device: Some("mlx5_3".into()),
                port: Some(1),
            },
            responder: Peer {
                rank: Some(2 * i + 1),
                host: format!("node{:04}", 512 + i / 4),
                device: Some("mlx5_3".into()),
                port: Some(1),
            },
            round: Some(17),
        },
        complete: true,
        counters: Some(CounterDeltas {
            initiator: Some(counters("mlx5_3")),
            responder: Some(counters("mlx5_3")),
        }),
        check_wrong_bytes: None,
        memory: None,
        setup: None,
        directions: Vec::new(),
        flows: Vec::new(),
    })
}

fn main() {
    let pairs: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4096);
    // Every rank sends a report; initiators carry the row (responders an empty report).
    let reports: Vec<Vec<u8>> = (0..pairs * 2)
        .map(|r| {
            let rep = RoundReport {
                results: if r % 2 == 0 { vec![row(r / 2)] } else { vec![] },
                ..Default::default()
            };
            serde_json::to_vec(&rep).unwrap()
        })
        .collect();
    let bytes: usize = reports.iter().map(Vec::len).sum();
    let t = Instant::now();
    let mut kept = Vec::new();
    for b in &reports {
        let rep: RoundReport = serde_json::from_slice(b).unwrap();
        kept.extend(rep.results);
    }
    let decode = t.elapsed();
    println!(
        "{pairs} pairs ({} ranks): {:.1} MB of round reports gathered, decoded in {:.1} ms ({:.2} us per pair)",
        pairs * 2,
        bytes as f64 / 1e6,
        decode.as_secs_f64() * 1e3,
        decode.as_secs_f64() * 1e6 / f64::from(pairs)
    );
    let t = Instant::now();
    let text = serde_json::to_vec(&kept).unwrap();
    println!(
        "one round's rows as document JSON: {:.1} MB in {:.1} ms (a checkpoint of R rounds costs R times this)",
        text.len() as f64 / 1e6,
        t.elapsed().as_secs_f64() * 1e3
    );
}
