//! InfiniBand PortCounters (IBA vol. 1, the PMA's PortCounters attribute) as the kernel
//! shows them under `/sys/class/infiniband/DEV/ports/N/counters/` (its `PORT_PMA_ATTR`
//! table in drivers/infiniband/core/sysfs.c): the link's own error fields and their widths.
//!
//! These fields saturate instead of wrapping: at its ceiling a field stops counting, so a
//! port nobody cleared since it was cabled can sit at `symbol_error` 65535 and show no rise
//! however bad the link is. A window that ends at the ceiling saw at least its delta. The
//! data and packet counters are not here: the kernel shows PortCountersExtended's 64-bit
//! ones where the port has them and the 32-bit ones otherwise, and sysfs does not say which.

/// The error fields, with their width in bits: they rise only on a physical or link-level
/// fault (optics, cables, switch ports), unlike retransmission counters.
pub const ERROR_FIELDS: &[(&str, u32)] = &[
    ("symbol_error", 16),
    ("link_error_recovery", 8),
    ("link_downed", 8),
    ("port_rcv_errors", 16),
    ("port_rcv_remote_physical_errors", 16),
    ("port_rcv_switch_relay_errors", 16),
    ("port_xmit_discards", 16),
    ("port_xmit_constraint_errors", 8),
    ("port_rcv_constraint_errors", 8),
    ("local_link_integrity_errors", 4),
    ("excessive_buffer_overrun_errors", 4),
    ("VL15_dropped", 16),
];

/// Ticks the port had data to send and could not (no credits: back-pressure), 32 bits.
pub const XMIT_WAIT: (&str, u32) = ("port_xmit_wait", 32);

/// True for one of the link's own error fields ([`ERROR_FIELDS`]).
pub fn is_error_field(name: &str) -> bool {
    ERROR_FIELDS.iter().any(|(n, _)| *n == name)
}

/// The width in bits of a saturating field; `None` for counters that do not saturate (or
/// whose width sysfs does not tell).
pub fn width(name: &str) -> Option<u32> {
    ERROR_FIELDS
        .iter()
        .chain(std::iter::once(&XMIT_WAIT))
        .find(|(n, _)| *n == name)
        .map(|(_, bits)| *bits)
}

/// The value a saturating field stops at (see [`width`]).
pub fn ceiling(name: &str) -> Option<i64> {
    width(name).map(|bits| (1i64 << bits) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_follow_the_widths() {
        assert_eq!(ceiling("symbol_error"), Some(65_535));
        assert_eq!(ceiling("link_downed"), Some(255));
        assert_eq!(ceiling("local_link_integrity_errors"), Some(15));
        assert_eq!(ceiling("port_xmit_wait"), Some(u32::MAX as i64));
        assert_eq!(ceiling("port_xmit_data"), None);
        assert!(is_error_field("VL15_dropped") && !is_error_field("port_xmit_wait"));
        assert_eq!(width("port_rcv_errors"), Some(16));
    }
}
