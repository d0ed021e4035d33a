//! Where GPUs and NICs sit on the PCI tree, read from sysfs, and how far apart they are.
//!
//! GPUDirect RDMA moves data between a GPU and a NIC as PCIe peer-to-peer transactions.
//! When both hang off the same PCIe switch the transactions turn around inside the switch
//! at full speed; when they must climb to a CPU's host bridge they pass through the root
//! complex (often at a fraction of the bandwidth); across sockets they also cross the
//! inter-socket link (UPI/xGMI), the classic "half the bandwidth" acceptance failure.
//! [`Relation`] names those cases the way `nvidia-smi topo -m` does, so an operator can
//! compare with the tool they know.
//!
//! Everything is plain file reads under a root directory (`/` on a real host; a fixture tree
//! in tests): `sys/bus/pci/devices/*` (symlinks into `sys/devices/pciDDDD:BB/...`, whose
//! path *is* the chain of bridges above the device), `numa_node`, `class`, `vendor`,
//! `config` (for the ACS capability, see [`acs`]), `sys/class/infiniband/*/device` and the
//! ports' `state`. Facts that cannot be read are `None`, never an error.
//!
//! The entry point for choosing a NIC for a GPU is [`Topology::nearest_nic`] (used by
//! `--use-cuda` when no `-d` is given, and meant for `-d auto`).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::sysfs::{dir_names, read_trim};

pub mod acs;
#[cfg(test)]
pub(crate) mod fixtures;

pub use acs::{AcsControl, AcsState};

/// PCI vendor id of NVIDIA.
pub const NVIDIA_VENDOR: u16 = 0x10de;

/// How two PCI devices reach each other, nearest first, as `nvidia-smi topo -m` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Relation {
    /// Through at most one PCIe switch (`PIX`): peer-to-peer stays inside the switch.
    Pix,
    /// Through several PCIe switches, without a host bridge (`PXB`).
    Pxb,
    /// Through a PCIe host bridge, i.e. the CPU's root complex (`PHB`).
    Phb,
    /// Across host bridges within one NUMA node (`NODE`).
    Node,
    /// Across NUMA nodes: the inter-socket link (`SYS`).
    Sys,
}

impl Relation {
    /// The nvidia-smi abbreviation.
    pub fn code(self) -> &'static str {
        match self {
            Relation::Pix => "PIX",
            Relation::Pxb => "PXB",
            Relation::Phb => "PHB",
            Relation::Node => "NODE",
            Relation::Sys => "SYS",
        }
    }

    /// What it means, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Relation::Pix => "same PCIe switch",
            Relation::Pxb => "across PCIe switches, below one host bridge",
            Relation::Phb => "through the CPU's PCIe host bridge",
            Relation::Node => "across PCIe host bridges of one NUMA node",
            Relation::Sys => "across sockets (the inter-socket link)",
        }
    }

    /// Parses an nvidia-smi abbreviation (any case).
    pub fn parse(code: &str) -> Option<Relation> {
        Some(match code.to_ascii_uppercase().as_str() {
            "PIX" => Relation::Pix,
            "PXB" => Relation::Pxb,
            "PHB" => Relation::Phb,
            "NODE" => Relation::Node,
            "SYS" => Relation::Sys,
            _ => return None,
        })
    }

    /// Peer-to-peer can stay below the host bridge (PIX, PXB): only then can an ACS setting
    /// on a switch port push it up to the root complex.
    pub fn below_host_bridge(self) -> bool {
        matches!(self, Relation::Pix | Relation::Pxb)
    }
}

/// One PCI function as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciDevice {
    /// `0000:1b:00.0` (lower case, four-digit domain).
    pub bus_id: String,
    /// The host bridge it hangs off (`pci0000:17`).
    pub host_bridge: String,
    /// Bridges from the root port down to the device's parent, in order.
    pub upstream: Vec<String>,
    /// The NUMA node sysfs gives the function (`None`: unknown, or -1 from the firmware).
    pub numa_node: Option<u32>,
    /// PCI vendor id (`0x15b3` Mellanox, `0x10de` NVIDIA).
    pub vendor: Option<u16>,
    /// PCI class code (`0x030200` for a 3D controller).
    pub class: Option<u32>,
}

/// An RDMA device and the PCI function behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    /// `mlx5_0`.
    pub name: String,
    /// `None` for virtual devices (Soft-RoCE's rxe has no PCI function of its own).
    pub bus_id: Option<String>,
    /// Ports whose state is ACTIVE.
    pub active_ports: Vec<u8>,
}

/// A GPU found on the PCI bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuDevice {
    /// Position in PCI bus order: nvidia-smi's index (and CUDA's with
    /// `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    pub index: u32,
    /// Its PCI address (`0000:17:00.0`).
    pub bus_id: String,
}

/// A NIC with its relation to a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicChoice {
    /// The NIC.
    pub nic: Nic,
    /// `None` when either side's place on the PCI tree is unknown (virtual NIC, missing sysfs).
    pub relation: Option<Relation>,
}

/// The PCI tree of a host, as far as GPUs and RDMA NICs are concerned.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    root: PathBuf,
    devices: BTreeMap<String, PciDevice>,
    nics: Vec<Nic>,
    gpus: Vec<GpuDevice>,
    /// NUMA node -> socket (physical package), where the CPU topology says.
    sockets: BTreeMap<u32, u32>,
}

/// `00000000:1B:00.0` (CUDA), `0000:1b:00.0` (sysfs), `1b:00.0` -> `0000:1b:00.0`.
pub fn normalize_bus_id(s: &str) -> Option<String> {
    let s = s.trim();
    let (dom, rest) = match s.matches(':').count() {
        2 => {
            let (d, r) = s.split_once(':')?;
            (u32::from_str_radix(d, 16).ok()?, r)
        }
        1 => (0, s),
        _ => return None,
    };
    let (bus, devfn) = rest.split_once(':')?;
    let (dev, func) = devfn.split_once('.')?;
    let bus = u8::from_str_radix(bus, 16).ok()?;
    let dev = u8::from_str_radix(dev, 16).ok()?;
    let func = u8::from_str_radix(func, 16).ok()?;
    if dev > 0x1f || func > 7 || dom > 0xffff {
        return None;
    }
    Some(format!("{dom:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

fn read_hex(p: &Path) -> Option<u32> {
    let s = read_trim(p)?;
    u32::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

fn is_bus_id(s: &str) -> bool {
    normalize_bus_id(s).as_deref() == Some(s)
}

impl Topology {
    /// The topology of this host.
    pub fn read() -> Topology {
        Self::read_from(Path::new("/"))
    }

    /// The topology of the tree under `root` (`/` on a host; a fixture in tests).
    pub fn read_from(root: &Path) -> Topology {
        let mut t = Topology {
            root: root.to_path_buf(),
            ..Default::default()
        };
        let pci = root.join("sys/bus/pci/devices");
        if let Ok(rd) = fs::read_dir(&pci) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(d) = t.device_at(&pci.join(&name)) {
                    t.devices.insert(d.bus_id.clone(), d);
                }
            }
        }
        let mut gpus: Vec<&PciDevice> = t
            .devices
            .values()
            .filter(|d| d.vendor == Some(NVIDIA_VENDOR) && d.class.is_some_and(|c| c >> 16 == 0x03))
            .collect();
        gpus.sort_by(|a, b| a.bus_id.cmp(&b.bus_id));
        t.gpus = gpus
            .iter()
            .enumerate()
            .map(|(i, d)| GpuDevice {
                index: i as u32,
                bus_id: d.bus_id.clone(),
            })
            .collect();
        let ib = root.join("sys/class/infiniband");
        for name in dir_names(&ib) {
            let dir = ib.join(&name);
            let bus_id = fs::canonicalize(dir.join("device"))
                .ok()
                .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
                .filter(|b| is_bus_id(b));
            let mut active_ports: Vec<u8> = fs::read_dir(dir.join("ports"))
                .map(|rd| {
                    rd.flatten()
                        .filter_map(|e| e.file_name().to_string_lossy().parse::<u8>().ok())
                        .filter(|p| {
                            read_trim(dir.join(format!("ports/{p}/state")))
                                .is_some_and(|s| s.contains("ACTIVE"))
                        })
                        .collect()
                })
                .unwrap_or_default();
            active_ports.sort();
            t.nics.push(Nic {
                name,
                bus_id,
                active_ports,
            });
        }
        let nodes = root.join("sys/devices/system/node");
        if let Ok(rd) = fs::read_dir(&nodes) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(node) = name
                    .strip_prefix("node")
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                let socket = read_trim(e.path().join("cpulist"))
                    .and_then(|l| crate::numa::parse_cpulist(&l)?.first().copied())
                    .and_then(|cpu| {
                        read_trim(root.join(format!(
                            "sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"
                        )))
                    })
                    .and_then(|s| s.parse().ok());
                if let Some(s) = socket {
                    t.sockets.insert(node, s);
                }
            }
        }
        t
    }

    /// Reads one PCI function from its `sys/bus/pci/devices/BUS` link.
    fn device_at(&self, link: &Path) -> Option<PciDevice> {
        let real = fs::canonicalize(link).ok()?;
        let devices = fs::canonicalize(self.root.join("sys/devices")).ok()?;
        let rel = real.strip_prefix(&devices).ok()?;
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let (host_bridge, chain) = parts.split_first()?;
        if !host_bridge.starts_with("pci") {
            return None;
        }
        let (me, upstream) = chain.split_last()?;
        if !is_bus_id(me) || !upstream.iter().all(|b| is_bus_id(b)) {
            return None;
        }
        Some(PciDevice {
            bus_id: me.clone(),
            host_bridge: host_bridge.clone(),
            upstream: upstream.to_vec(),
            numa_node: crate::numa::numa_node_file(&real.join("numa_node")),
            vendor: read_hex(&real.join("vendor")).map(|v| v as u16),
            class: read_hex(&real.join("class")),
        })
    }

    /// Every PCI function, by bus id.
    pub fn device(&self, bus_id: &str) -> Option<&PciDevice> {
        self.devices.get(&normalize_bus_id(bus_id)?)
    }

    /// NVIDIA GPUs in PCI bus order.
    pub fn gpus(&self) -> &[GpuDevice] {
        &self.gpus
    }

    /// RDMA devices in name order.
    pub fn nics(&self) -> &[Nic] {
        &self.nics
    }

    /// The RDMA device of that name, if the host has it.
    pub fn nic(&self, name: &str) -> Option<&Nic> {
        self.nics.iter().find(|n| n.name == name)
    }

    /// The socket (physical package) of a NUMA node; the node itself when the CPU topology
    /// is not readable.
    pub fn socket_of_node(&self, node: u32) -> u32 {
        self.sockets.get(&node).copied().unwrap_or(node)
    }

    /// How `a` and `b` (bus ids) reach each other; `None` when either is not on the tree.
    pub fn relation(&self, a: &str, b: &str) -> Option<Relation> {
        let (a, b) = (self.device(a)?, self.device(b)?);
        Some(if a.host_bridge == b.host_bridge {
            let common = common_prefix(&a.upstream, &b.upstream);
            if common == 0 {
                Relation::Phb
            } else if a.upstream.len() - common <= 1 && b.upstream.len() - common <= 1 {
                Relation::Pix
            } else {
                Relation::Pxb
            }
        } else {
            match (a.numa_node, b.numa_node) {
                (Some(x), Some(y)) if x != y => Relation::Sys,
                _ => Relation::Node,
            }
        })
    }

    /// True when `a` and `b` sit on different sockets (both NUMA nodes known).
    pub fn crosses_sockets(&self, a: &str, b: &str) -> bool {
        match (
            self.device(a).and_then(|d| d.numa_node),
            self.device(b).and_then(|d| d.numa_node),
        ) {
            (Some(x), Some(y)) => self.socket_of_node(x) != self.socket_of_node(y),
            _ => false,
        }
    }

    /// Every RDMA device with its relation to the GPU at `gpu_bus_id`, nearest first
    /// (unknown relations last, then by name).
    pub fn nics_by_distance(&self, gpu_bus_id: &str) -> Vec<NicChoice> {
        let mut v: Vec<NicChoice> = self
            .nics
            .iter()
            .map(|n| NicChoice {
                relation: n
                    .bus_id
                    .as_deref()
                    .and_then(|b| self.relation(gpu_bus_id, b)),
                nic: n.clone(),
            })
            .collect();
        v.sort_by(|a, b| {
            (a.relation.is_none(), a.relation, &a.nic.name).cmp(&(
                b.relation.is_none(),
                b.relation,
                &b.nic.name,
            ))
        });
        v
    }

    /// The RDMA device to pair with the GPU at `gpu_bus_id`: the nearest one whose `port`
    /// is ACTIVE (ties broken by name). `None` when no device has that port ACTIVE.
    ///
    /// This is the library call behind "pick the NIC for this GPU" (`--use-cuda` without
    /// `-d`, and `-d auto` with a GPU selected).
    pub fn nearest_nic(&self, gpu_bus_id: &str, port: u8) -> Option<NicChoice> {
        self.nics_by_distance(gpu_bus_id)
            .into_iter()
            .find(|c| c.nic.active_ports.contains(&port))
    }

    /// ACS state of the PCIe bridges peer-to-peer traffic between `a` and `b` crosses
    /// below their common switch; empty when the path climbs to a host bridge anyway (then
    /// ACS changes nothing) or either device is unknown.
    pub fn acs_on_path(&self, a: &str, b: &str) -> Vec<(String, AcsState)> {
        let (Some(da), Some(db)) = (self.device(a), self.device(b)) else {
            return Vec::new();
        };
        if !self.relation(a, b).is_some_and(Relation::below_host_bridge) {
            return Vec::new();
        }
        let common = common_prefix(&da.upstream, &db.upstream);
        let mut bridges: Vec<&String> = Vec::new();
        bridges.extend(da.upstream[common - 1..].iter());
        bridges.extend(db.upstream[common..].iter());
        bridges
            .into_iter()
            .map(|b| (b.clone(), self.acs_of(b)))
            .collect()
    }

    /// ACS state of one bridge, from its config space.
    pub fn acs_of(&self, bus_id: &str) -> AcsState {
        let path = self
            .root
            .join("sys/bus/pci/devices")
            .join(bus_id)
            .join("config");
        match fs::read(&path) {
            Ok(bytes) => acs::parse(&bytes),
            Err(e) => AcsState::Unknown(format!("cannot read {}: {e}", path.display())),
        }
    }
}

fn common_prefix(a: &[String], b: &[String]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A problem of a GPU-NIC pairing a buyer would want fixed, in one sentence with the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairingIssue {
    /// GPU and NIC on different sockets.
    Sockets(String),
    /// A PCIe switch port between them redirects peer-to-peer to the root complex.
    Acs(String),
}

impl PairingIssue {
    /// The issue in words, for messages and the document.
    pub fn text(&self) -> &str {
        match self {
            PairingIssue::Sockets(t) | PairingIssue::Acs(t) => t,
        }
    }
}

/// The problems of pairing the GPU at `gpu_bus` with RDMA device `nic`: crossing sockets,
/// or ACS redirecting their peer-to-peer traffic. Empty when the pairing is sound (or
/// cannot be judged).
pub fn pairing_issues(t: &Topology, gpu_bus: &str, nic: &str) -> Vec<PairingIssue> {
    let mut w = Vec::new();
    let Some(nic_bus) = t.nic(nic).and_then(|n| n.bus_id.clone()) else {
        return w;
    };
    if let Some(rel) = t.relation(gpu_bus, &nic_bus) {
        if rel == Relation::Sys || t.crosses_sockets(gpu_bus, &nic_bus) {
            let better = t
                .nics_by_distance(gpu_bus)
                .into_iter()
                .find(|c| {
                    c.relation.is_some_and(|r| r < Relation::Sys) && !c.nic.active_ports.is_empty()
                })
                .map(|c| {
                    format!(
                        "; {} is on the GPU's side ({}): use -d {}",
                        c.nic.name,
                        c.relation.map_or("?", Relation::code),
                        c.nic.name
                    )
                })
                .unwrap_or_else(|| {
                    "; no NIC with an active port is on the GPU's socket: move the GPU or the NIC, \
                     or pick the GPU nearest the NIC with --use-cuda"
                        .into()
                });
            w.push(PairingIssue::Sockets(format!(
                "GPU {gpu_bus} and {nic} ({nic_bus}) are on different sockets (SYS): GPUDirect \
                 traffic crosses the inter-socket link, often at half the bandwidth or less{better}"
            )));
        }
    }
    for (bridge, state) in t.acs_on_path(gpu_bus, &nic_bus) {
        if let AcsState::Enabled(c) = state {
            if c.redirects() {
                w.push(PairingIssue::Acs(acs::advice(&bridge, c, gpu_bus, nic)));
            }
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::fixtures::{self, Fixture};
    use super::*;

    #[test]
    fn bus_ids_normalize_from_cuda_and_sysfs_spellings() {
        assert_eq!(
            normalize_bus_id("00000000:1B:00.0").as_deref(),
            Some("0000:1b:00.0")
        );
        assert_eq!(
            normalize_bus_id("0000:1b:00.0").as_deref(),
            Some("0000:1b:00.0")
        );
        assert_eq!(normalize_bus_id("1b:00.1").as_deref(), Some("0000:1b:00.1"));
        assert_eq!(
            normalize_bus_id("0001:c1:1f.7").as_deref(),
            Some("0001:c1:1f.7")
        );
        for bad in [
            "",
            "pci0000:00",
            "1b:00",
            "zz:00.0",
            "0000:1b:20.0",
            "0000:1b:00.8",
        ] {
            assert_eq!(normalize_bus_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn eight_gpu_node_pairs_each_gpu_with_the_nic_behind_its_switch() {
        let f = fixtures::eight_gpu_node(false);
        let t = Topology::read_from(f.root());
        assert_eq!(t.gpus().len(), 8, "{:?}", t.gpus());
        // 8 GPU NICs and the management NIC on the CPU's own root port.
        assert_eq!(t.nics().len(), 9);
        for (i, gpu) in t.gpus().iter().enumerate() {
            assert_eq!(gpu.index as usize, i);
            let best = t.nearest_nic(&gpu.bus_id, 1).expect("a NIC");
            assert_eq!(best.nic.name, format!("mlx5_{i}"), "GPU {i}");
            assert_eq!(best.relation, Some(Relation::Pix), "GPU {i}");
            assert!(pairing_issues(&t, &gpu.bus_id, &best.nic.name).is_empty());
        }
        let g0 = &t.gpus()[0].bus_id;
        let by = t.nics_by_distance(g0);
        let rel = |n: &str| by.iter().find(|c| c.nic.name == n).unwrap().relation;
        // Other switches on the same socket: across host bridges of one node.
        assert_eq!(rel("mlx5_1"), Some(Relation::Node));
        assert_eq!(rel("mlx5_3"), Some(Relation::Node));
        // The other socket.
        assert_eq!(rel("mlx5_4"), Some(Relation::Sys));
        assert_eq!(rel("mlx5_7"), Some(Relation::Sys));
        // The management NIC sits on socket 0's first host bridge, as GPU 0 does not.
        assert_eq!(rel("mlx5_8"), Some(Relation::Node));
        assert_eq!(by[0].nic.name, "mlx5_0");
        assert_eq!(by.last().unwrap().relation, Some(Relation::Sys));
        // A socket-crossing choice is named, with the better NIC.
        let w = pairing_issues(&t, g0, "mlx5_5");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            matches!(&w[0], PairingIssue::Sockets(t) if t.contains("different sockets") && t.contains("-d mlx5_0")),
            "{w:?}"
        );
        // GPU-GPU relations follow the same rules.
        assert_eq!(t.relation(g0, &t.gpus()[1].bus_id), Some(Relation::Node));
        assert_eq!(t.relation(g0, &t.gpus()[7].bus_id), Some(Relation::Sys));
        assert!(t.crosses_sockets(g0, &t.gpus()[7].bus_id));
    }

    #[test]
    fn a_down_nic_is_passed_over_for_an_active_one() {
        let f = fixtures::eight_gpu_node(false);
        f.set_port_state("mlx5_2", 1, "1: DOWN");
        let t = Topology::read_from(f.root());
        let g2 = &t.gpus()[2].bus_id;
        let best = t.nearest_nic(g2, 1).unwrap();
        assert_ne!(best.nic.name, "mlx5_2");
        assert_eq!(best.relation, Some(Relation::Node));
        assert!(t.nearest_nic(g2, 2).is_none(), "no NIC has a port 2");
    }

    #[test]
    fn two_socket_server_warns_for_the_far_gpu() {
        let f = fixtures::two_socket_server();
        let t = Topology::read_from(f.root());
        assert_eq!(t.gpus().len(), 2);
        let (g0, g1) = (&t.gpus()[0].bus_id, &t.gpus()[1].bus_id);
        assert_eq!(g0, "0000:17:00.0");
        assert_eq!(g1, "0000:ca:00.0");
        let near = t.nearest_nic(g0, 1).unwrap();
        assert_eq!(
            (near.nic.name.as_str(), near.relation),
            ("mlx5_0", Some(Relation::Phb))
        );
        // mlx5_1 is the second port of the same card but its link is down.
        assert!(t.nic("mlx5_1").unwrap().active_ports.is_empty());
        let far = t.nearest_nic(g1, 1).unwrap();
        assert_eq!(
            (far.nic.name.as_str(), far.relation),
            ("mlx5_0", Some(Relation::Sys))
        );
        let w = pairing_issues(&t, g1, "mlx5_0");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].text().contains("different sockets"), "{w:?}");
        assert!(
            w[0].text()
                .contains("no NIC with an active port is on the GPU's socket"),
            "{w:?}"
        );
        assert_eq!(t.socket_of_node(1), 1);
        assert!(pairing_issues(&t, g0, "mlx5_0").is_empty());
        // No switch between GPU 0 and the NIC: ACS cannot matter.
        assert!(t
            .acs_on_path(g0, t.nic("mlx5_0").unwrap().bus_id.as_deref().unwrap())
            .is_empty());
    }

    #[test]
    fn acs_on_a_switch_port_between_gpu_and_nic_is_reported() {
        let f = fixtures::eight_gpu_node(true);
        let t = Topology::read_from(f.root());
        let g3 = &t.gpus()[3].bus_id;
        let nic = t.nic("mlx5_3").unwrap().bus_id.clone().unwrap();
        let path = t.acs_on_path(g3, &nic);
        // Upstream port of the switch, and the two downstream ports.
        assert_eq!(path.len(), 3, "{path:?}");
        assert!(path
            .iter()
            .any(|(_, s)| matches!(s, AcsState::Enabled(c) if c.redirects())));
        let w = pairing_issues(&t, g3, "mlx5_3");
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w.iter()
                .all(|w| matches!(w, PairingIssue::Acs(t) if t.contains("setpci"))),
            "{w:?}"
        );
        assert!(w[0].text().contains("ReqRedir+"), "{w:?}");
        // The other switches have ACS off (capability present, control 0) or absent.
        let g0 = &t.gpus()[0].bus_id;
        let nic0 = t.nic("mlx5_0").unwrap().bus_id.clone().unwrap();
        assert!(t
            .acs_on_path(g0, &nic0)
            .iter()
            .all(|(_, s)| matches!(s, AcsState::Enabled(c) if !c.redirects())
                || *s == AcsState::Absent));
    }

    #[test]
    fn unreadable_config_space_is_unknown_not_an_error() {
        let f = fixtures::eight_gpu_node(false);
        f.truncate_config("0000:16:00.0", 64);
        let t = Topology::read_from(f.root());
        match t.acs_of("0000:16:00.0") {
            AcsState::Unknown(why) => assert!(why.contains("root"), "{why}"),
            s => panic!("{s:?}"),
        }
        assert!(matches!(t.acs_of("0000:99:99.9"), AcsState::Unknown(_)));
    }

    #[test]
    fn a_host_without_pci_or_rdma_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let t = Topology::read_from(dir.path());
        assert!(t.gpus().is_empty() && t.nics().is_empty());
        assert!(t.nearest_nic("0000:01:00.0", 1).is_none());
        assert_eq!(t.relation("0000:01:00.0", "0000:02:00.0"), None);
        // Soft-RoCE: a NIC with no PCI function has no relation, but is still listed.
        let f = Fixture::new();
        f.rdma_device("rxe0", None, &[(1, "4: ACTIVE")]);
        let t = Topology::read_from(f.root());
        assert_eq!(t.nics()[0].bus_id, None);
        let c = t.nearest_nic("0000:01:00.0", 1).unwrap();
        assert_eq!((c.nic.name.as_str(), c.relation), ("rxe0", None));
    }

    #[test]
    fn relations_order_nearest_first_and_parse_back() {
        let all = [
            Relation::Pix,
            Relation::Pxb,
            Relation::Phb,
            Relation::Node,
            Relation::Sys,
        ];
        for w in all.windows(2) {
            assert!(w[0] < w[1]);
        }
        for r in all {
            assert_eq!(Relation::parse(r.code()), Some(r));
            assert_eq!(Relation::parse(&r.code().to_lowercase()), Some(r));
        }
        assert_eq!(Relation::parse("NV12"), None);
    }
}
