//! Host facts that go into every document: a number is only comparable with another when
//! the kernel, CPU, NUMA layout and NICs behind it are known. Everything is read from
//! `/proc` and `/sys`; a fact that cannot be read is left empty, never an error.

use std::fs;
use std::path::Path;

use results::{HostInfo, NetDevice, RdmaDevice};

use crate::inventory::{dir_names, read_trim};

/// This host's name as the kernel knows it.
pub fn hostname() -> String {
    read_trim("/proc/sys/kernel/hostname").unwrap_or_else(|| "localhost".into())
}

/// Collects the facts of this host.
pub fn collect() -> HostInfo {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    let numa_nodes = dir_names("/sys/devices/system/node")
        .iter()
        .filter(|n| {
            n.strip_prefix("node")
                .is_some_and(|d| d.chars().all(|c| c.is_ascii_digit()))
        })
        .count()
        .max(1) as u32;
    HostInfo {
        rank: None,
        role: None,
        hostname: hostname(),
        kernel: read_trim("/proc/sys/kernel/osrelease").unwrap_or_default(),
        cpu_model,
        cores,
        numa_nodes,
        net_devices: net_devices(),
        rdma_devices: rdma_devices(),
        gpus: Vec::new(),
        local_rank: None,
        device: None,
    }
}

/// Kernel network interfaces with MTU, speed and state.
pub fn net_devices() -> Vec<NetDevice> {
    let base = Path::new("/sys/class/net");
    dir_names(base)
        .into_iter()
        .map(|name| {
            let d = base.join(&name);
            NetDevice {
                mtu: read_trim(d.join("mtu")).and_then(|v| v.parse().ok()),
                // Drivers without a speed report -1 or fail the read (EINVAL on loopback).
                speed_mbit_s: read_trim(d.join("speed"))
                    .and_then(|v| v.parse::<i64>().ok())
                    .filter(|&v| v > 0)
                    .map(|v| v as u64),
                operstate: read_trim(d.join("operstate")).unwrap_or_default(),
                mac: read_trim(d.join("address")),
                name,
            }
        })
        .collect()
}

/// RDMA devices, their ports and PCIe links (see [`crate::inventory`]); empty without
/// RDMA support.
pub fn rdma_devices() -> Vec<RdmaDevice> {
    crate::inventory::rdma_devices(&crate::inventory::SysRoot::default())
}

/// The reference link rate for efficiency figures, 10^9 bit/s, and where it came from:
/// the fastest ACTIVE RDMA port (`/sys/class/infiniband/DEV/ports/N/rate`), else the
/// fastest up network interface that reports a speed (`/sys/class/net/DEV/speed`).
/// `None` where nothing reports a rate (loopback, virtio, emulated devices).
pub fn link_rate_gbit_s(host: &HostInfo) -> Option<(f64, String)> {
    let rdma = host
        .rdma_devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .filter(|(_, p)| p.state.contains("ACTIVE"))
        .filter_map(|(d, p)| Some((p.rate_gbit_s?, format!("{}/{} rate", d.name, p.port))))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    rdma.or_else(|| {
        host.net_devices
            .iter()
            .filter(|n| n.name != "lo" && n.operstate == "up")
            .filter_map(|n| Some((n.speed_mbit_s? as f64 / 1000.0, format!("{} speed", n.name))))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    })
}

/// `100 Gb/sec (4X EDR)` -> 100.0.
pub fn parse_rate_gbit_s(rate: &str) -> Option<f64> {
    rate.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::RdmaPort;

    #[test]
    fn this_host_is_described() {
        let h = collect();
        assert!(!h.hostname.is_empty());
        assert!(!h.kernel.is_empty());
        assert!(h.cores >= 1);
        assert!(h.net_devices.iter().any(|d| d.name == "lo"));
    }

    #[test]
    fn link_rate_prefers_active_rdma_ports_then_netdevs() {
        let mut h = HostInfo::default();
        assert_eq!(link_rate_gbit_s(&h), None);
        h.net_devices.push(NetDevice {
            name: "eth0".into(),
            speed_mbit_s: Some(25_000),
            operstate: "up".into(),
            ..Default::default()
        });
        assert_eq!(link_rate_gbit_s(&h), Some((25.0, "eth0 speed".into())));
        h.rdma_devices.push(RdmaDevice {
            name: "mlx5_0".into(),
            ports: vec![RdmaPort {
                port: 1,
                state: "4: ACTIVE".into(),
                rate_gbit_s: Some(400.0),
                ..Default::default()
            }],
            ..Default::default()
        });
        assert_eq!(link_rate_gbit_s(&h), Some((400.0, "mlx5_0/1 rate".into())));
    }

    #[test]
    fn sysfs_rates_parse() {
        assert_eq!(parse_rate_gbit_s("100 Gb/sec (4X EDR)"), Some(100.0));
        assert_eq!(parse_rate_gbit_s("2.5 Gb/sec (1X SDR)"), Some(2.5));
        assert_eq!(parse_rate_gbit_s(""), None);
    }
}
