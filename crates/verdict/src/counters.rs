//! One table of the counter names NIC drivers give the facts the link-health metrics are
//! made of (pause time, FEC-corrected and received bits, errors FEC left, CNPs), each with
//! the driver and the source that prints it. A driver missing from the table, or a fact it
//! has no counter for, leaves that figure unknown (the check MISSING), never 0.
//!
//! Discards are every counter named `*discard*` that counts packets, whatever the driver
//! (mlx5 `rx_discards_phy`, `rx_prio{p}_discards`; bnxt_en `rx_discard_packets_cos{c}`,
//! `rx_stat_discard`; the PMA's `port_xmit_discards`); bnxt_en's `rx_discard_bytes_cos{c}`
//! count bytes and are left out.
//!
//! What stays unknown, by driver: ice prints PFC frames (`rx_priority_{p}_xoff.nic`), no
//! pause time, so no pause share; mlx5 prints no bits-received counter, so its BER's
//! denominator is the port's rate times the window; bnxt_re's and irdma's retransmission
//! counters are not in the loss tally (no real sample of them here yet).

/// The counter families a figure is summed from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Family {
    Loss = 1,
    Pause = 2,
    Discards = 4,
    Cnp = 8,
    PostFec = 16,
    Corrected = 32,
    /// Bits received: a lower bound here makes the BER an upper bound, so this family
    /// makes no figure "at least".
    RxBits = 64,
}

/// One counter name: `{p}` stands for a priority digit 0-7.
pub struct CounterName {
    pub pattern: &'static str,
    pub(crate) family: Family,
    pub driver: &'static str,
    /// Where the driver prints it, and its unit where that matters.
    pub source: &'static str,
}

const fn name(
    pattern: &'static str,
    family: Family,
    driver: &'static str,
    source: &'static str,
) -> CounterName {
    CounterName {
        pattern,
        family,
        driver,
        source,
    }
}

/// The table, by driver.
pub const NAMES: &[CounterName] = &[
    // mlx5_core: Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst
    name(
        "rx_prio{p}_pause_duration",
        Family::Pause,
        "mlx5_core",
        "ethtool -S, per-priority port counters (us)",
    ),
    name(
        "tx_prio{p}_pause_duration",
        Family::Pause,
        "mlx5_core",
        "ethtool -S, per-priority port counters (us)",
    ),
    name(
        "rx_global_pause_duration",
        Family::Pause,
        "mlx5_core",
        "ethtool -S, 802.3x link pause (us)",
    ),
    name(
        "tx_global_pause_duration",
        Family::Pause,
        "mlx5_core",
        "ethtool -S, 802.3x link pause (us)",
    ),
    name(
        "rx_corrected_bits_phy",
        Family::Corrected,
        "mlx5_core",
        "ethtool -S, physical port counters",
    ),
    name(
        "rx_bits_phy",
        Family::RxBits,
        "mlx5_core",
        "ethtool -S, physical port counters, where the firmware reports it",
    ),
    name(
        "rx_pcs_symbol_err_phy",
        Family::PostFec,
        "mlx5_core",
        "ethtool -S, physical port counters",
    ),
    name(
        "rx_crc_errors_phy",
        Family::PostFec,
        "mlx5_core",
        "ethtool -S, physical port counters",
    ),
    name(
        "rx_symbol_err_phy",
        Family::PostFec,
        "mlx5_core",
        "ethtool -S, physical port counters",
    ),
    name(
        "np_cnp_sent",
        Family::Cnp,
        "mlx5_ib",
        "/sys/class/infiniband/DEV/ports/N/hw_counters",
    ),
    // The InfiniBand PMA (PortCounters), every HCA.
    name(
        "symbol_error",
        Family::PostFec,
        "PMA",
        "/sys/class/infiniband/DEV/ports/N/counters",
    ),
    // bnxt_en: drivers/net/ethernet/broadcom/bnxt/bnxt_ethtool.c (port and PFC statistics);
    // proven on a real `ethtool -S` (tests/corpus/real-outputs/ethtool-S/bnxt_en-*.txt).
    name(
        "pfc_pri{p}_rx_duration_us",
        Family::Pause,
        "bnxt_en",
        "ethtool -S, PFC statistics (us)",
    ),
    name(
        "pfc_pri{p}_tx_duration_us",
        Family::Pause,
        "bnxt_en",
        "ethtool -S, PFC statistics (us)",
    ),
    name(
        "rx_corrected_bits",
        Family::Corrected,
        "bnxt_en",
        "ethtool -S, extended port statistics",
    ),
    name(
        "rx_bits",
        Family::RxBits,
        "bnxt_en",
        "ethtool -S, extended port statistics",
    ),
    name(
        "rx_fec_uncorrectable_blocks",
        Family::PostFec,
        "bnxt_en",
        "ethtool -S, extended port statistics (RS-FEC codewords)",
    ),
    // bnxt_re: drivers/infiniband/hw/bnxt_re/hw_counters.c (renamed np_cnp_pkts in 2025).
    name(
        "tx_cnp_pkts",
        Family::Cnp,
        "bnxt_re",
        "/sys/class/infiniband/DEV/ports/N/hw_counters",
    ),
    name(
        "np_cnp_pkts",
        Family::Cnp,
        "bnxt_re",
        "/sys/class/infiniband/DEV/ports/N/hw_counters",
    ),
    // irdma (Intel E810 / X722): drivers/infiniband/hw/irdma/verbs.c hw stats.
    name(
        "cnpSent",
        Family::Cnp,
        "irdma",
        "/sys/class/infiniband/DEV/ports/N/hw_counters",
    ),
];

/// Whether `name` is `pattern` with `{p}` standing for one priority digit.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once("{p}") {
        None => pattern == name,
        Some((head, tail)) => name
            .strip_prefix(head)
            .and_then(|rest| rest.strip_suffix(tail))
            .is_some_and(|p| p.len() == 1 && matches!(p.as_bytes()[0], b'0'..=b'7')),
    }
}

/// The table's entry for a counter name.
pub fn lookup(name: &str) -> Option<&'static CounterName> {
    NAMES.iter().find(|n| matches(n.pattern, name))
}

/// The family a health counter belongs to, by the table or, for discards, its name.
pub(crate) fn family(name: &str) -> Option<Family> {
    if let Some(n) = lookup(name) {
        return Some(n.family);
    }
    (name.contains("discard") && !name.contains("bytes")).then_some(Family::Discards)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_take_one_priority_digit_and_names_nothing_twice() {
        assert!(matches(
            "pfc_pri{p}_rx_duration_us",
            "pfc_pri3_rx_duration_us"
        ));
        assert!(!matches(
            "pfc_pri{p}_rx_duration_us",
            "pfc_pri8_rx_duration_us"
        ));
        assert!(!matches(
            "pfc_pri{p}_rx_duration_us",
            "pfc_pri_rx_duration_us"
        ));
        assert!(!matches("rx_bits", "rx_bits_phy"));
        for (i, a) in NAMES.iter().enumerate() {
            for b in &NAMES[i + 1..] {
                assert_ne!(a.pattern, b.pattern, "one home for each name");
            }
        }
    }

    #[test]
    fn discards_count_packets_not_bytes() {
        assert_eq!(family("rx_discard_packets_cos3"), Some(Family::Discards));
        assert_eq!(family("rx_discards_phy"), Some(Family::Discards));
        assert_eq!(family("rx_discard_bytes_cos3"), None);
    }
}
