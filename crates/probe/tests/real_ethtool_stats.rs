//! `ethtool -S` of real NICs (tests/corpus/real-outputs/ethtool-S; SOURCES.md names each
//! sample's origin) through the reader every measurement and audit uses, and the audit's
//! filter of the counters worth keeping.

use std::path::PathBuf;

use probe::audit::parse::relevant_counter;
use probe::ethtool::parse_stats;

fn sample(name: &str) -> std::collections::BTreeMap<String, i64> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/real-outputs/ethtool-S")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_stats(&text)
}

#[test]
fn bnxt_en_port_counters_are_read_and_its_pfc_time_and_bits_kept() {
    let s = sample("bnxt_en-6.6.43.txt");
    // The per-queue `[N]: name: value` lines are no port counters.
    assert!(
        !s.keys().any(|k| k.starts_with('[')),
        "{:?}",
        s.keys().next()
    );
    assert_eq!(s["rx_stat_discard"], 49337);
    assert_eq!(s["rx_total_ring_discards"], 655_430_134);
    for name in [
        "pfc_pri3_rx_duration_us",
        "pfc_pri3_tx_duration_us",
        "rx_bits",
        "rx_corrected_bits",
        "rx_fec_uncorrectable_blocks",
        "rx_pfc_ena_frames_pri3",
        "link_down_events",
    ] {
        assert!(s.contains_key(name), "{name} not read");
        assert!(
            relevant_counter(name),
            "{name} dropped by the audit's filter"
        );
    }
    assert!(!relevant_counter("rx_ucast_packets"));
}

#[test]
fn ice_and_mlx5_samples_are_read_whole() {
    let ice = sample("ice.txt");
    assert_eq!(ice["rx_bytes.nic"], 848_255_752);
    assert!(relevant_counter("rx_crc_errors.nic"));
    let mlx5 = sample("mlx5_core-4.15.txt");
    assert_eq!(mlx5["rx_packets"], 845_320_277);
    assert!(relevant_counter("rx_global_pause_duration"));
    assert!(relevant_counter("rx_corrected_bits_phy"));
}
