//! The fabric inventory of a host, from sysfs: every RDMA port's state, physical state,
//! rate (lanes x lane speed), link layer, netdev with its MTU and speed, the port's
//! counters, the adapter's firmware and its PCIe link (current and maximum speed and
//! width), and its NUMA node.
//!
//! These are the facts that explain a slow link without sending a byte: a port that
//! trained at a lower rate (`2X` instead of `4X`, `HDR` instead of `NDR`), an adapter at
//! PCIe x8 or a lower generation, mixed firmware, an MTU left at 1500, error counters
//! that climb (`symbol_error` from a dirty optic). Meta's GCM compares them with a
//! manifest; `aggregate` compares them with the profile and across nodes.
//!
//! Plain file reads under a root that tests point at fixture trees; a fact that cannot be
//! read is left empty, never an error.

use std::fs;
use std::path::{Path, PathBuf};

use results::{PciLink, RdmaDevice, RdmaPort};

use crate::sysfs::{dir_names, parse_rate_gbit_s, read_trim};

/// Where the kernel exposes the facts; tests use a fixture tree with the same layout.
#[derive(Debug, Clone)]
pub struct SysRoot {
    /// `/sys/class/infiniband`
    pub infiniband: PathBuf,
    /// `/sys/class/net`
    pub net: PathBuf,
}

impl Default for SysRoot {
    fn default() -> Self {
        Self::under(Path::new("/"))
    }
}

impl SysRoot {
    /// The same layout under `root` (`/` on a real host).
    pub fn under(root: &Path) -> Self {
        Self {
            infiniband: root.join("sys/class/infiniband"),
            net: root.join("sys/class/net"),
        }
    }
}

/// Every RDMA device under `root` with its ports and PCIe link; empty without RDMA.
pub fn rdma_devices(root: &SysRoot) -> Vec<RdmaDevice> {
    dir_names(&root.infiniband)
        .into_iter()
        .map(|name| device(root, &name))
        .collect()
}

fn device(root: &SysRoot, name: &str) -> RdmaDevice {
    let d = root.infiniband.join(name);
    let ports = dir_names(d.join("ports"))
        .into_iter()
        .filter_map(|p| p.parse::<u32>().ok())
        .map(|port| self::port(root, &d.join("ports").join(port.to_string()), port))
        .collect();
    RdmaDevice {
        fw_ver: read_trim(d.join("fw_ver")),
        node_guid: read_trim(d.join("node_guid")),
        name: name.to_string(),
        ports,
        pci: pci_link(&d.join("device")),
        numa_node: read_trim(d.join("device/numa_node")).and_then(|v| v.parse().ok()),
    }
}

fn port(root: &SysRoot, pd: &Path, port: u32) -> RdmaPort {
    let rate = read_trim(pd.join("rate")).unwrap_or_default();
    let (width, speed) = width_and_speed(&rate);
    let netdev = dir_names(pd.join("gid_attrs/ndevs"))
        .first()
        .and_then(|g| read_trim(pd.join("gid_attrs/ndevs").join(g)));
    let nd = netdev.as_ref().map(|n| root.net.join(n));
    RdmaPort {
        port,
        state: read_trim(pd.join("state")).unwrap_or_default(),
        rate_gbit_s: parse_rate_gbit_s(&rate),
        rate,
        link_layer: read_trim(pd.join("link_layer")).unwrap_or_default(),
        phys_state: read_trim(pd.join("phys_state")),
        width,
        speed,
        active_mtu: None,
        netdev_mtu: nd
            .as_ref()
            .and_then(|n| read_trim(n.join("mtu")))
            .and_then(|v| v.parse().ok()),
        netdev_speed_mbit_s: nd
            .as_ref()
            .and_then(|n| read_trim(n.join("speed")))
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|&v| v > 0)
            .map(|v| v as u64),
        netdev,
        counters: crate::counters::read_dir(&pd.join("counters")),
    }
}

/// `100 Gb/sec (4X EDR)` -> (`4X`, `EDR`). RoCE ports print the same shape.
pub fn width_and_speed(rate: &str) -> (Option<String>, Option<String>) {
    let inner = rate
        .split_once('(')
        .and_then(|(_, r)| r.split_once(')'))
        .map(|(i, _)| i.trim());
    match inner.map(|i| i.split_whitespace().collect::<Vec<_>>()) {
        Some(parts) if !parts.is_empty() => (
            Some(parts[0].to_string()),
            parts.get(1).map(|s| s.to_string()),
        ),
        _ => (None, None),
    }
}

/// The PCIe link of the device directory `dev` (a symlink into `/sys/devices/pci...`).
/// Soft-RoCE and other virtual devices have none.
pub fn pci_link(dev: &Path) -> Option<PciLink> {
    let current_speed = read_trim(dev.join("current_link_speed"));
    let max_speed = read_trim(dev.join("max_link_speed"));
    if current_speed.is_none() && max_speed.is_none() {
        return None;
    }
    let address = fs::canonicalize(dev)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let gt_s = |s: &Option<String>| s.as_deref().and_then(parse_gt_s);
    Some(PciLink {
        address,
        current_speed_gt_s: gt_s(&current_speed),
        max_speed_gt_s: gt_s(&max_speed),
        current_speed,
        max_speed,
        current_width: read_trim(dev.join("current_link_width")).and_then(|v| v.parse().ok()),
        max_width: read_trim(dev.join("max_link_width")).and_then(|v| v.parse().ok()),
    })
}

/// `16.0 GT/s PCIe` (or the older `8 GT/s`) -> 16.0. `Unknown` -> None.
pub fn parse_gt_s(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.parse().ok()
}

/// State of one port as sysfs says it now (`4: ACTIVE`), for failure records.
pub fn port_state(device: &str, port: u32) -> Option<String> {
    read_trim(
        SysRoot::default()
            .infiniband
            .join(device)
            .join("ports")
            .join(port.to_string())
            .join("state"),
    )
}

/// The RDMA devices with an ACTIVE port `port`, in name order: what `-d auto` hands out
/// by local rank.
pub fn active_devices(root: &SysRoot, port: u32) -> Vec<String> {
    dir_names(&root.infiniband)
        .into_iter()
        .filter(|d| {
            read_trim(root.infiniband.join(d).join(format!("ports/{port}/state")))
                .is_some_and(|s| s.contains("ACTIVE"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sysfs fixture shaped like a ConnectX port: device dir with PCIe link files, one
    /// RoCE port with its netdev.
    pub(crate) fn fixture(root: &Path, dev: &str, pci: &str, width: u32, rate: &str) {
        let ib = root.join("sys/class/infiniband").join(dev);
        let pcidir = root.join("sys/devices/pci0000:00").join(pci);
        fs::create_dir_all(&pcidir).unwrap();
        for (f, v) in [
            ("current_link_speed", "16.0 GT/s PCIe".to_string()),
            ("max_link_speed", "16.0 GT/s PCIe".to_string()),
            ("current_link_width", width.to_string()),
            ("max_link_width", "16".to_string()),
            ("numa_node", "1".to_string()),
        ] {
            fs::write(pcidir.join(f), format!("{v}\n")).unwrap();
        }
        fs::create_dir_all(&ib).unwrap();
        std::os::unix::fs::symlink(&pcidir, ib.join("device")).unwrap();
        fs::write(ib.join("fw_ver"), "22.36.1010\n").unwrap();
        let port = ib.join("ports/1");
        fs::create_dir_all(port.join("counters")).unwrap();
        fs::create_dir_all(port.join("gid_attrs/ndevs")).unwrap();
        fs::write(port.join("state"), "4: ACTIVE\n").unwrap();
        fs::write(port.join("phys_state"), "5: LinkUp\n").unwrap();
        fs::write(port.join("rate"), format!("{rate}\n")).unwrap();
        fs::write(port.join("link_layer"), "Ethernet\n").unwrap();
        fs::write(port.join("gid_attrs/ndevs/0"), "ens1f0\n").unwrap();
        fs::write(port.join("counters/symbol_error"), "3\n").unwrap();
        fs::write(port.join("counters/port_rcv_errors"), "0\n").unwrap();
        fs::write(port.join("counters/secret"), "n/a\n").unwrap();
        let nd = root.join("sys/class/net/ens1f0");
        fs::create_dir_all(&nd).unwrap();
        fs::write(nd.join("mtu"), "4200\n").unwrap();
        fs::write(nd.join("speed"), "100000\n").unwrap();
    }

    #[test]
    fn a_connectx_port_is_described_in_full() {
        let t = tempfile::tempdir().unwrap();
        fixture(t.path(), "mlx5_0", "0000:3b:00.0", 8, "100 Gb/sec (4X EDR)");
        let devs = rdma_devices(&SysRoot::under(t.path()));
        assert_eq!(devs.len(), 1);
        let d = &devs[0];
        assert_eq!(d.fw_ver.as_deref(), Some("22.36.1010"));
        assert_eq!(d.numa_node, Some(1));
        let pci = d.pci.as_ref().expect("pci link");
        assert_eq!(pci.address, "0000:3b:00.0");
        assert_eq!(pci.current_width, Some(8));
        assert_eq!(pci.max_width, Some(16));
        assert_eq!(pci.current_speed_gt_s, Some(16.0));
        let p = &d.ports[0];
        assert_eq!(p.state, "4: ACTIVE");
        assert_eq!(p.phys_state.as_deref(), Some("5: LinkUp"));
        assert_eq!(p.width.as_deref(), Some("4X"));
        assert_eq!(p.speed.as_deref(), Some("EDR"));
        assert_eq!(p.rate_gbit_s, Some(100.0));
        assert_eq!(p.netdev.as_deref(), Some("ens1f0"));
        assert_eq!(p.netdev_mtu, Some(4200));
        assert_eq!(p.netdev_speed_mbit_s, Some(100_000));
        assert_eq!(p.counters.get("symbol_error"), Some(&3));
        assert!(!p.counters.contains_key("secret"));
        assert_eq!(
            active_devices(&SysRoot::under(t.path()), 1),
            vec!["mlx5_0".to_string()]
        );
        assert!(active_devices(&SysRoot::under(t.path()), 2).is_empty());
    }

    #[test]
    fn rates_split_into_width_and_speed() {
        assert_eq!(
            width_and_speed("400 Gb/sec (4X NDR)"),
            (Some("4X".into()), Some("NDR".into()))
        );
        assert_eq!(
            width_and_speed("2.5 Gb/sec (1X SDR)"),
            (Some("1X".into()), Some("SDR".into()))
        );
        assert_eq!(width_and_speed(""), (None, None));
        assert_eq!(parse_gt_s("8 GT/s"), Some(8.0));
        assert_eq!(parse_gt_s("Unknown"), None);
    }

    #[test]
    fn a_host_without_rdma_has_no_devices() {
        let t = tempfile::tempdir().unwrap();
        assert!(rdma_devices(&SysRoot::under(t.path())).is_empty());
    }
}
