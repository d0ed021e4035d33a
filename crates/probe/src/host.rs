//! Host facts that go into every document: a number is only comparable with another when
//! the kernel, CPU, NUMA layout and NICs behind it are known. Everything is read from
//! `/proc` and `/sys`; a fact that cannot be read is left empty, never an error.

use std::fs;
use std::path::Path;

use results::{GpuInfo, HostInfo, NetDevice, RdmaDevice};

use crate::sysfs::{dir_names, read_trim};

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
    let numa_nodes = crate::numa::nodes(Path::new("/")).len().max(1) as u32;
    let mut h = HostInfo {
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
        gpu_driver: None,
        nvidia_peermem: None,
        // Who each port is plugged into (bounded; FABCHECK_DISCOVERY=off skips it).
        neighbors: crate::discovery::neighbors_from_env(),
        // Bounded: commands stop being run after 10 s (FABCHECK_AUDIT=0 turns it off).
        audit: crate::audit::collect_bounded(std::time::Duration::from_secs(10)),
        // Set by the tool that places its measuring thread (p2p::placement).
        placement: None,
    };
    add_gpu_facts(&mut h, Path::new("/"));
    h
}

/// Adds the GPU facts a host carries without touching CUDA (so every document has them,
/// cheaply): NVIDIA GPUs from the PCI bus under `root`, their model and UUID from the
/// driver's `/proc` files, the nearest RDMA device of each, the driver version and whether
/// `nvidia_peermem` is loaded.
pub fn add_gpu_facts(h: &mut HostInfo, root: &Path) {
    let topo = crate::topology::Topology::read_from(root);
    h.gpus = gpus(&topo, root);
    if !h.gpus.is_empty() {
        h.gpu_driver = gpu_driver(root);
        h.nvidia_peermem = Some(root.join("sys/module/nvidia_peermem").is_dir());
    }
}

/// The GPUs of a topology with what the NVIDIA driver says about them.
pub fn gpus(topo: &crate::topology::Topology, root: &Path) -> Vec<GpuInfo> {
    topo.gpus()
        .iter()
        .map(|g| {
            let info = fs::read_to_string(
                root.join("proc/driver/nvidia/gpus")
                    .join(&g.bus_id)
                    .join("information"),
            )
            .unwrap_or_default();
            let field = |name: &str| {
                info.lines()
                    .find_map(|l| l.strip_prefix(name)?.trim_start().strip_prefix(':'))
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
            };
            let nearest = topo.nearest_nic(&g.bus_id, 1);
            GpuInfo {
                index: g.index,
                name: field("Model").unwrap_or_else(|| "NVIDIA GPU".into()),
                pci_bus_id: Some(g.bus_id.clone()),
                memory_bytes: None,
                uuid: field("GPU UUID"),
                numa_node: topo.device(&g.bus_id).and_then(|d| d.numa_node),
                nearest_rdma_device: nearest.as_ref().map(|c| c.nic.name.clone()),
                rdma_relation: nearest
                    .and_then(|c| c.relation)
                    .map(|r| r.code().to_string()),
            }
        })
        .collect()
}

/// `535.104.05` or `535.104.05 open` (the open kernel modules), from the driver's banner:
/// `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build ...`.
pub fn gpu_driver(root: &Path) -> Option<String> {
    let text = fs::read_to_string(root.join("proc/driver/nvidia/version")).ok()?;
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    let version = line
        .split_whitespace()
        .find(|w| w.split('.').count() >= 2 && w.split('.').all(|p| p.parse::<u32>().is_ok()))?;
    Some(if line.contains("Open Kernel Module") {
        format!("{version} open")
    } else {
        version.to_string()
    })
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
    fn gpu_facts_come_from_sysfs_and_the_driver_without_cuda() {
        let f = crate::topology::fixtures::eight_gpu_node(false);
        f.nvidia_proc(
            "0000:18:00.0",
            "NVIDIA H200",
            "GPU-8a0b2c1d-0000-1111-2222-333344445555",
        );
        f.nvidia_version(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  \
             (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\nGCC version:  gcc 12\n",
        );
        let mut h = HostInfo::default();
        add_gpu_facts(&mut h, f.root());
        assert_eq!(h.gpus.len(), 8);
        let g = &h.gpus[0];
        assert_eq!(g.name, "NVIDIA H200");
        assert_eq!(
            g.uuid.as_deref(),
            Some("GPU-8a0b2c1d-0000-1111-2222-333344445555")
        );
        assert_eq!(g.pci_bus_id.as_deref(), Some("0000:18:00.0"));
        assert_eq!(g.numa_node, Some(0));
        assert_eq!(g.nearest_rdma_device.as_deref(), Some("mlx5_0"));
        assert_eq!(g.rdma_relation.as_deref(), Some("PIX"));
        assert_eq!(h.gpus[7].numa_node, Some(1));
        assert_eq!(h.gpus[7].nearest_rdma_device.as_deref(), Some("mlx5_7"));
        // A GPU the driver has not published keeps a generic name, never a made-up one.
        assert_eq!(h.gpus[1].name, "NVIDIA GPU");
        assert_eq!(h.gpu_driver.as_deref(), Some("550.54.15 open"));
        assert_eq!(h.nvidia_peermem, Some(false));
        f.module("nvidia_peermem");
        f.nvidia_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n");
        add_gpu_facts(&mut h, f.root());
        assert_eq!(h.nvidia_peermem, Some(true));
        assert_eq!(h.gpu_driver.as_deref(), Some("535.104.05"));
        // No GPU: nothing GPU-related in the document.
        let none = tempfile::tempdir().unwrap();
        let mut h = HostInfo::default();
        add_gpu_facts(&mut h, none.path());
        assert!(h.gpus.is_empty() && h.gpu_driver.is_none() && h.nvidia_peermem.is_none());
    }

    #[test]
    fn sysfs_rates_parse() {
        assert_eq!(
            crate::sysfs::parse_rate_gbit_s("100 Gb/sec (4X EDR)"),
            Some(100.0)
        );
        assert_eq!(
            crate::sysfs::parse_rate_gbit_s("2.5 Gb/sec (1X SDR)"),
            Some(2.5)
        );
        assert_eq!(crate::sysfs::parse_rate_gbit_s(""), None);
    }
}
