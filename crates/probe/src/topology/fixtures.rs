//! sysfs trees shaped like real servers, for the topology and host-fact tests: the same
//! files and symlinks the kernel exposes (`sys/devices/pciDDDD:BB/...` nesting one directory
//! per bridge, `sys/bus/pci/devices/*` links, `sys/class/infiniband/*/device`, NUMA nodes,
//! CPU packages, config space with extended capabilities), so the code under test reads
//! them exactly as it reads `/sys`.

use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// PCI class codes.
pub const CLASS_BRIDGE: u32 = 0x060400;
pub const CLASS_3D: u32 = 0x030200;
pub const CLASS_INFINIBAND: u32 = 0x020700;
pub const CLASS_ETHERNET: u32 = 0x020000;
pub const MELLANOX: u16 = 0x15b3;

/// A sysfs tree in a temporary directory (removed on drop).
pub struct Fixture {
    dir: TempDir,
}

/// Config space of a PCIe bridge: 4 KiB, with an AER extended capability at 0x100 and, when
/// `acs` is given, an ACS capability at 0x148 whose control register holds it.
pub fn bridge_config(acs: Option<u16>) -> Vec<u8> {
    let mut c = vec![0u8; 4096];
    let next = if acs.is_some() { 0x148u32 } else { 0 };
    // Header: capability id (16 bits), version 1 (4 bits), next offset (12 bits).
    let aer = 0x0001 | (1 << 16) | (next << 20);
    c[0x100..0x104].copy_from_slice(&aer.to_le_bytes());
    if let Some(ctrl) = acs {
        let hdr: u32 = 0x000d | (1 << 16);
        c[0x148..0x14c].copy_from_slice(&hdr.to_le_bytes());
        // ACS capability register (all features offered), then the control register.
        c[0x14c..0x14e].copy_from_slice(&0x007fu16.to_le_bytes());
        c[0x14e..0x150].copy_from_slice(&ctrl.to_le_bytes());
    }
    c
}

impl Fixture {
    pub fn new() -> Fixture {
        let f = Fixture {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        for d in [
            "sys/bus/pci/devices",
            "sys/class/infiniband",
            "sys/devices/system/node",
        ] {
            fs::create_dir_all(f.root().join(d)).unwrap();
        }
        f
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, rel: impl AsRef<Path>, content: impl AsRef<[u8]>) {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    /// Adds the PCI function at the end of `chain` (bus ids from the root port down) below
    /// `host_bridge` (`pci0000:15`), creating its sysfs directory and bus link.
    pub fn pci(
        &self,
        host_bridge: &str,
        chain: &[&str],
        numa: i32,
        vendor: u16,
        class: u32,
        config: Option<Vec<u8>>,
    ) -> PathBuf {
        let mut dir = self.root().join("sys/devices").join(host_bridge);
        for b in chain {
            dir = dir.join(b);
        }
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("vendor"), format!("0x{vendor:04x}\n")).unwrap();
        fs::write(dir.join("class"), format!("0x{class:06x}\n")).unwrap();
        fs::write(dir.join("numa_node"), format!("{numa}\n")).unwrap();
        if let Some(c) = config {
            fs::write(dir.join("config"), c).unwrap();
        }
        let bus = chain.last().unwrap();
        let link = self.root().join("sys/bus/pci/devices").join(bus);
        if !link.exists() {
            std::os::unix::fs::symlink(&dir, link).unwrap();
        }
        dir
    }

    /// An RDMA device (`sys/class/infiniband/NAME`) on PCI function `bus` (None: virtual,
    /// like rxe), with ports and their `state` text (`4: ACTIVE`).
    pub fn rdma_device(&self, name: &str, bus: Option<&str>, ports: &[(u8, &str)]) {
        let dir = self.root().join("sys/class/infiniband").join(name);
        fs::create_dir_all(&dir).unwrap();
        if let Some(bus) = bus {
            let target =
                fs::canonicalize(self.root().join("sys/bus/pci/devices").join(bus)).unwrap();
            std::os::unix::fs::symlink(target, dir.join("device")).unwrap();
        }
        for (p, state) in ports {
            self.write(
                format!("sys/class/infiniband/{name}/ports/{p}/state"),
                format!("{state}\n"),
            );
        }
    }

    pub fn set_port_state(&self, name: &str, port: u8, state: &str) {
        self.write(
            format!("sys/class/infiniband/{name}/ports/{port}/state"),
            format!("{state}\n"),
        );
    }

    /// Cuts a device's config space to `len` bytes (what an unprivileged reader gets).
    pub fn truncate_config(&self, bus: &str, len: usize) {
        let p = self
            .root()
            .join("sys/bus/pci/devices")
            .join(bus)
            .join("config");
        let mut c = fs::read(&p).unwrap();
        c.truncate(len);
        fs::write(p, c).unwrap();
    }

    /// NUMA node `node` holding CPUs `first..=last` of package `socket`.
    pub fn numa_node(&self, node: u32, first: u32, last: u32, socket: u32) {
        self.write(
            format!("sys/devices/system/node/node{node}/cpulist"),
            format!("{first}-{last}\n"),
        );
        for cpu in [first, last] {
            self.write(
                format!("sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"),
                format!("{socket}\n"),
            );
        }
    }

    /// What the NVIDIA driver publishes under `/proc/driver/nvidia` for a GPU.
    pub fn nvidia_proc(&self, bus: &str, model: &str, uuid: &str) {
        self.write(
            format!("proc/driver/nvidia/gpus/{bus}/information"),
            format!(
                "Model: \t\t {model}\nIRQ:   \t\t 180\nGPU UUID: \t {uuid}\nVideo BIOS: \t 96.00.99.00.01\n\
                 Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n\
                 Bus Location: \t {bus}\nDevice Minor: \t 0\nGPU Excluded:\t No\n"
            ),
        );
    }

    pub fn nvidia_version(&self, text: &str) {
        self.write("proc/driver/nvidia/version", text);
    }

    pub fn module(&self, name: &str) {
        fs::create_dir_all(self.root().join("sys/module").join(name)).unwrap();
    }
}

fn bus(b: u32, dev: u32, func: u32) -> String {
    format!("0000:{b:02x}:{dev:02x}.{func}")
}

/// An 8-GPU node shaped like NVIDIA's HGX H100/H200 boards: two sockets, four PCIe switches
/// per socket, each switch below its own root port and host bridge, carrying one GPU and
/// one 400G NIC (`mlx5_0` .. `mlx5_7`, GPU i with NIC i); a management NIC `mlx5_8` on
/// socket 0's first host bridge without a switch. GPU bus numbers are a real board's.
/// With `acs_on_gpu3`, the downstream ports of GPU 3's switch have ACS redirection on
/// (`ReqRedir+ CmpltRedir+`), as a BIOS left in virtualization mode leaves them.
pub fn eight_gpu_node(acs_on_gpu3: bool) -> Fixture {
    let f = Fixture::new();
    f.numa_node(0, 0, 55, 0);
    f.numa_node(1, 56, 111, 1);
    const GPU_BUS: [u32; 8] = [0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb];
    for (i, g) in GPU_BUS.iter().enumerate() {
        let b = g - 3;
        let numa = (i / 4) as i32;
        let hb = format!("pci0000:{b:02x}");
        let (rp, us) = (bus(b, 1, 0), bus(b + 1, 0, 0));
        let (ds_gpu, ds_nic) = (bus(b + 2, 0, 0), bus(b + 2, 1, 0));
        let (gpu, nic) = (bus(b + 3, 0, 0), bus(b + 4, 0, 0));
        let ds_acs = Some(if acs_on_gpu3 && i == 3 { 0x001d } else { 0 });
        f.pci(
            &hb,
            &[&rp],
            numa,
            0x8086,
            CLASS_BRIDGE,
            Some(bridge_config(None)),
        );
        f.pci(
            &hb,
            &[&rp, &us],
            numa,
            0x1000,
            CLASS_BRIDGE,
            Some(bridge_config(None)),
        );
        for ds in [&ds_gpu, &ds_nic] {
            f.pci(
                &hb,
                &[&rp, &us, ds],
                numa,
                0x1000,
                CLASS_BRIDGE,
                Some(bridge_config(ds_acs)),
            );
        }
        f.pci(
            &hb,
            &[&rp, &us, &ds_gpu, &gpu],
            numa,
            super::NVIDIA_VENDOR,
            CLASS_3D,
            None,
        );
        f.pci(
            &hb,
            &[&rp, &us, &ds_nic, &nic],
            numa,
            MELLANOX,
            CLASS_INFINIBAND,
            None,
        );
        f.rdma_device(&format!("mlx5_{i}"), Some(&nic), &[(1, "4: ACTIVE")]);
    }
    let (rp, nic) = (bus(0, 3, 0), bus(1, 0, 0));
    f.pci(
        "pci0000:00",
        &[&rp],
        0,
        0x8086,
        CLASS_BRIDGE,
        Some(bridge_config(None)),
    );
    f.pci(
        "pci0000:00",
        &[&rp, &nic],
        0,
        MELLANOX,
        CLASS_ETHERNET,
        None,
    );
    f.rdma_device("mlx5_8", Some(&nic), &[(1, "4: ACTIVE")]);
    f
}

/// A two-socket server without PCIe switches: GPU 0 and a dual-port NIC (`mlx5_0` ACTIVE,
/// `mlx5_1` DOWN) on socket 0's host bridge, GPU 1 alone on socket 1.
pub fn two_socket_server() -> Fixture {
    let f = Fixture::new();
    f.numa_node(0, 0, 31, 0);
    f.numa_node(1, 32, 63, 1);
    let hb0 = "pci0000:16";
    f.pci(
        hb0,
        &["0000:16:01.0"],
        0,
        0x8086,
        CLASS_BRIDGE,
        Some(bridge_config(None)),
    );
    f.pci(
        hb0,
        &["0000:16:01.0", "0000:17:00.0"],
        0,
        super::NVIDIA_VENDOR,
        CLASS_3D,
        None,
    );
    f.pci(
        hb0,
        &["0000:16:02.0"],
        0,
        0x8086,
        CLASS_BRIDGE,
        Some(bridge_config(None)),
    );
    for (func, name, state) in [(0, "mlx5_0", "4: ACTIVE"), (1, "mlx5_1", "1: DOWN")] {
        let nic = bus(0x18, 0, func);
        f.pci(
            hb0,
            &["0000:16:02.0", &nic],
            0,
            MELLANOX,
            CLASS_ETHERNET,
            None,
        );
        f.rdma_device(name, Some(&nic), &[(1, state)]);
    }
    let hb1 = "pci0000:c9";
    f.pci(
        hb1,
        &["0000:c9:01.0"],
        1,
        0x8086,
        CLASS_BRIDGE,
        Some(bridge_config(None)),
    );
    f.pci(
        hb1,
        &["0000:c9:01.0", "0000:ca:00.0"],
        1,
        super::NVIDIA_VENDOR,
        CLASS_3D,
        None,
    );
    f
}
