//! RDMA port counters from sysfs: `/sys/class/infiniband/DEV/ports/N/counters/*` (the
//! InfiniBand PortCounters the subnet manager also sees: data, packets, link errors) and
//! `hw_counters/*` (what the driver adds: retransmissions, out-of-sequence packets,
//! congestion notifications, ...). Names are kept exactly as the kernel gives them, because
//! every vendor has its own; later reports judge loss from the deltas.
//!
//! Plain file reads: no verbs call, no unsafe. A file that cannot be read or does not hold
//! a number (some mlx5 files are write-only or need privileges) is skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use results::PortCounters;

/// Root of the RDMA devices in sysfs.
pub const SYSFS_ROOT: &str = "/sys/class/infiniband";

/// All counter values of one port at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The RDMA device (`mlx5_0`).
    pub device: String,
    /// Its port, from 1.
    pub port: u32,
    /// `ports/N/counters/*`: the InfiniBand port counters every RDMA port has.
    pub counters: BTreeMap<String, i64>,
    /// `ports/N/hw_counters/*`: the vendor's (for mlx5: out_of_buffer, ECN/CNP counters).
    pub hw_counters: BTreeMap<String, i64>,
    /// The port's netdev (RoCE) and its driver's counters (`ethtool -S`); empty on
    /// InfiniBand and where ethtool is missing.
    pub netdev: Option<String>,
    /// `ethtool -S NETDEV`: the driver's counters (per priority pause frames, discards).
    pub driver: BTreeMap<String, i64>,
    /// Why `driver` is empty where the port has a netdev (ethtool's own words).
    pub driver_unknown: Option<String>,
    /// The port's rate (`ports/N/rate`: `100 Gb/sec (4X EDR)`), Gbit/s.
    pub rate_gbit_s: Option<f64>,
}

/// Reads every counter of `device` port `port` under `root` (normally [`SYSFS_ROOT`]).
pub fn read_at(root: &Path, device: &str, port: u32) -> Snapshot {
    let dir = root.join(device).join("ports").join(port.to_string());
    Snapshot {
        device: device.to_string(),
        port,
        counters: read_dir(&dir.join("counters")),
        hw_counters: read_dir(&dir.join("hw_counters")),
        netdev: netdev_of(&dir),
        driver: BTreeMap::new(),
        driver_unknown: None,
        rate_gbit_s: crate::sysfs::read_trim(dir.join("rate"))
            .and_then(|r| crate::sysfs::parse_rate_gbit_s(&r)),
    }
}

/// The kernel interface behind a RoCE port: the netdev of its first GID
/// (`gid_attrs/ndevs/0`); `None` on InfiniBand.
fn netdev_of(port_dir: &Path) -> Option<String> {
    crate::sysfs::read_trim(port_dir.join("gid_attrs/ndevs/0"))
}

/// Reads every counter of `device` port `port` from sysfs.
///
/// The kernel caches `hw_counters` for `hw_counters/lifespan` milliseconds (10 by default):
/// a read within that time of the previous one returns the old values, so a short test
/// would show no traffic at all. Waiting out the lifespan first (outside any timed loop)
/// makes each snapshot fresh.
pub fn read(device: &str, port: u32) -> Snapshot {
    let dir = Path::new(SYSFS_ROOT)
        .join(device)
        .join("ports")
        .join(port.to_string());
    if let Some(ms) = std::fs::read_to_string(dir.join("hw_counters/lifespan"))
        .ok()
        .and_then(|t| parse_value(&t))
    {
        std::thread::sleep(std::time::Duration::from_millis(
            ms.clamp(0, 1000) as u64 + 1,
        ));
    }
    let mut s = read_at(Path::new(SYSFS_ROOT), device, port);
    if let Some(nd) = &s.netdev {
        match crate::ethtool::stats(nd) {
            Ok(m) => s.driver = m,
            Err(why) => s.driver_unknown = Some(why),
        }
    }
    s
}

/// Every readable number in a counters directory, by file name (some mlx5 files are
/// write-only or need privileges; those and non-numbers are skipped).
pub fn read_dir(dir: &Path) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        if let Some(v) = std::fs::read_to_string(e.path())
            .ok()
            .and_then(|t| parse_value(&t))
        {
            out.insert(name, v);
        }
    }
    out
}

/// A counter file holds one decimal number (some drivers pad it or add a newline).
fn parse_value(text: &str) -> Option<i64> {
    let t = text.trim();
    t.parse::<i64>()
        .ok()
        .or_else(|| t.parse::<u64>().ok().map(|v| v as i64))
}

/// `after - before`, per name present in both (a counter that appeared or vanished between
/// the two reads says nothing about the test). Two cases give only a lower bound, and the
/// counter is named in `at_least`: a PortCounters field at its ceiling
/// ([`results::pma::ceiling`]) after the window, and a counter lower after than before
/// (cleared in the window: `after` is what it counted since, so that is the delta).
pub fn delta(before: &Snapshot, after: &Snapshot) -> PortCounters {
    let mut at_least = BTreeSet::new();
    let mut sub = |a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>, pma: bool| {
        b.iter()
            .filter_map(|(k, &new)| {
                let old = *a.get(k)?;
                if new < old {
                    at_least.insert(k.clone());
                    return Some((k.clone(), new));
                }
                if pma && results::pma::ceiling(k) == Some(new) {
                    at_least.insert(k.clone());
                }
                Some((k.clone(), new - old))
            })
            .collect::<BTreeMap<_, _>>()
    };
    let counters = sub(&before.counters, &after.counters, true);
    let hw_counters = sub(&before.hw_counters, &after.hw_counters, false);
    let driver_counters = sub(&before.driver, &after.driver, false);
    PortCounters {
        device: after.device.clone(),
        port: after.port,
        counters,
        hw_counters,
        driver_counters,
        netdev: after.netdev.clone(),
        rate_gbit_s: after.rate_gbit_s,
        at_least,
        driver_counters_unknown: after.driver_unknown.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, value: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), value).unwrap();
    }

    #[test]
    fn reads_both_directories_and_subtracts() {
        let root = tempfile::tempdir().unwrap();
        let port = root.path().join("rxe0/ports/1");
        write(&port.join("hw_counters"), "sent_pkts", "100\n");
        write(&port.join("hw_counters"), "lifespan", "10\n");
        write(&port.join("hw_counters"), "garbage", "n/a\n");
        write(&port.join("counters"), "port_xmit_data", "  7\n");
        write(&port.join("gid_attrs/ndevs"), "0", "eth1\n");
        let before = read_at(root.path(), "rxe0", 1);
        assert_eq!(before.hw_counters.len(), 2, "{before:?}");
        assert_eq!(before.counters["port_xmit_data"], 7);
        write(&port.join("hw_counters"), "sent_pkts", "250\n");
        write(&port.join("hw_counters"), "rcvd_seq_err", "3\n");
        let after = read_at(root.path(), "rxe0", 1);
        let d = delta(&before, &after);
        assert_eq!(d.device, "rxe0");
        assert_eq!(d.hw_counters["sent_pkts"], 150);
        assert_eq!(d.hw_counters["lifespan"], 0);
        assert!(!d.hw_counters.contains_key("rcvd_seq_err"));
        assert_eq!(d.counters["port_xmit_data"], 0);
        assert_eq!(d.netdev.as_deref(), Some("eth1"));
        assert_eq!(d.rate_gbit_s, None, "no rate file: unknown");
        // The port's rate travels with the deltas (pre-FEC BER needs it).
        std::fs::write(port.join("rate"), "100 Gb/sec (4X EDR)\n").unwrap();
        assert_eq!(
            delta(&before, &read_at(root.path(), "rxe0", 1)).rate_gbit_s,
            Some(100.0)
        );
        // Driver counters (ethtool -S) are differenced like the others.
        let (mut b, mut a) = (before.clone(), after.clone());
        b.driver.insert("rx_prio3_pause".into(), 10);
        a.driver.insert("rx_prio3_pause".into(), 25);
        a.driver.insert("np_cnp_sent".into(), 4);
        let d = delta(&b, &a);
        assert_eq!(d.driver_counters["rx_prio3_pause"], 15);
        assert!(!d.driver_counters.contains_key("np_cnp_sent"));
    }

    #[test]
    fn saturated_and_cleared_counters_are_lower_bounds() {
        let snap = |counters: &[(&str, i64)], hw: &[(&str, i64)]| Snapshot {
            device: "mlx5_0".into(),
            port: 1,
            counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            hw_counters: hw.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Default::default()
        };
        let before = snap(
            &[
                ("symbol_error", 65_000),
                ("link_downed", 255),
                ("local_link_integrity_errors", 3),
                ("port_rcv_errors", 10),
                ("port_xmit_data", 65_535),
            ],
            &[("out_of_sequence", 900)],
        );
        let after = snap(
            &[
                ("symbol_error", 65_535),
                ("link_downed", 255),
                ("local_link_integrity_errors", 15),
                ("port_rcv_errors", 12),
                ("port_xmit_data", 65_535),
            ],
            &[("out_of_sequence", 40)],
        );
        let d = delta(&before, &after);
        // At the 16-bit ceiling: at least 535 more.
        assert_eq!(d.counters["symbol_error"], 535);
        // Stuck at the 8-bit ceiling the whole window: at least 0 says nothing.
        assert_eq!(d.counters["link_downed"], 0);
        assert_eq!(d.counters["local_link_integrity_errors"], 12);
        // Cleared in the window: what it counted since.
        assert_eq!(d.hw_counters["out_of_sequence"], 40);
        let want: BTreeSet<String> = [
            "symbol_error",
            "link_downed",
            "local_link_integrity_errors",
            "out_of_sequence",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(d.at_least, want);
        // Below their ceilings, and counters of unknown width, are exact.
        assert_eq!(d.counters["port_rcv_errors"], 2);
        assert!(delta(&before, &before).at_least.contains("link_downed"));
    }

    #[test]
    fn a_missing_device_gives_empty_maps() {
        let s = read_at(Path::new("/nonexistent"), "mlx5_9", 1);
        assert!(s.counters.is_empty() && s.hw_counters.is_empty());
    }
}
