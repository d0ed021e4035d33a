//! The health figures from real `ethtool -S` outputs of three drivers
//! (tests/corpus/real-outputs/ethtool-S; SOURCES.md names each sample's origin), each
//! sample read as if it were one row's deltas: what is known is known (0 is a figure), and
//! what the driver has no counter for stays unknown, never 0.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::collections::BTreeMap;
use std::path::PathBuf;

use results::{CounterDeltas, PortCounters};
use verdict::metric::{health, Metric};

/// A sample's `name: value` lines (the per-queue `[N]: name: value` lines of bnxt_en are
/// skipped, as the probe's reader skips them).
fn sample(name: &str) -> BTreeMap<String, i64> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/real-outputs/ethtool-S")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            Some((k.trim().to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

fn deltas(driver: BTreeMap<String, i64>, rate: f64) -> CounterDeltas {
    let side = PortCounters {
        driver_counters: driver,
        rate_gbit_s: Some(rate),
        ..Default::default()
    };
    CounterDeltas {
        initiator: Some(side.clone()),
        responder: Some(side),
    }
}

const SECONDS: f64 = 10.0;

#[test]
fn bnxt_en_gives_pause_share_ber_and_post_fec_errors() {
    // bnxt_en on kernel 6.6.43: pfc_pri{p}_{rx,tx}_duration_us, rx_corrected_bits over
    // rx_bits, rx_fec_uncorrectable_blocks. They were read as no counter at all: every
    // figure unknown on a Broadcom NIC.
    let s = sample("bnxt_en-6.6.43.txt");
    assert_eq!(s["rx_bits"], 4_621_497_487_696_704);
    let h = health(&deltas(s.clone(), 100.0));
    assert_eq!(h.metric(Metric::PauseShare, SECONDS), Some(0.0));
    assert_eq!(h.metric(Metric::PreFecBer, SECONDS), Some(0.0));
    assert!(!h.ber_by_rate(), "bnxt_en counts the bits it received");
    assert_eq!(h.metric(Metric::PostFecErrors, SECONDS), Some(0.0));
    // A priority paused 2.5 s of the 10: 25 %, whichever direction.
    let mut paused = s.clone();
    paused.insert("pfc_pri3_tx_duration_us".into(), 2_500_000);
    let share = health(&deltas(paused, 100.0))
        .metric(Metric::PauseShare, SECONDS)
        .unwrap();
    assert!((share - 25.0).abs() < 1e-9, "{share}");
    // Corrected bits over the bits the port itself counted.
    let mut noisy = s.clone();
    noisy.insert("rx_corrected_bits".into(), 4_621_497);
    let ber = health(&deltas(noisy, 100.0))
        .metric(Metric::PreFecBer, SECONDS)
        .unwrap();
    assert!((ber - 1e-9).abs() < 1e-12, "{ber}");
    // Discards count packets: the byte counters beside them are not packets.
    let before = health(&deltas(s.clone(), 100.0)).metric(Metric::Discards, SECONDS);
    let mut bytes = s;
    bytes.insert("rx_discard_bytes_cos3".into(), 9_000_000);
    let after = health(&deltas(bytes, 100.0)).metric(Metric::Discards, SECONDS);
    assert_eq!(before, after);
}

#[test]
fn mlx5_link_pause_counts_and_its_ber_is_over_the_ports_rate() {
    // ConnectX-4 on kernel 4.15, PFC off: only the 802.3x link pause durations.
    let s = sample("mlx5_core-4.15.txt");
    assert!(!s.contains_key("rx_bits_phy"));
    let h = health(&deltas(s, 25.0));
    assert_eq!(h.metric(Metric::PauseShare, SECONDS), Some(0.0));
    assert_eq!(h.metric(Metric::PreFecBer, SECONDS), Some(0.0));
    // No received-bits counter: the BER is over 25 Gb/s x 10 s, an estimate, and a
    // check's line says so (verdict::judge's BER_BY_RATE warning).
    assert!(h.ber_by_rate());
    assert_eq!(h.metric(Metric::PostFecErrors, SECONDS), Some(0.0));
    assert_eq!(h.metric(Metric::Discards, SECONDS), Some(0.0));
}

#[test]
fn ice_says_no_pause_time_and_no_fec_so_those_stay_unknown() {
    // ice prints PFC frames (rx_priority_{p}_xoff.nic), not how long a priority was
    // paused, and no FEC counters: unknown, so a check on them is MISSING, not PASS.
    let s = sample("ice.txt");
    assert!(s.contains_key("rx_priority_3_xoff.nic"));
    let h = health(&deltas(s, 100.0));
    assert_eq!(h.metric(Metric::PauseShare, SECONDS), None);
    assert_eq!(h.metric(Metric::PreFecBer, SECONDS), None);
    assert_eq!(h.metric(Metric::PostFecErrors, SECONDS), None);
}
