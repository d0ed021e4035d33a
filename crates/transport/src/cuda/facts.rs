//! Which GPU `--use-cuda` names, and what it can do for a NIC.

use std::ffi::{c_char, CStr, CString};

use anyhow::{anyhow, bail, Result};
use cudarc::driver::{result as cu, sys as cusys};

use crate::gpu::GpuSelector;
use probe::topology::normalize_bus_id;
use results::GpuInfo;

/// A GPU and its GPUDirect abilities, as the driver reports them.
#[derive(Debug, Clone)]
pub struct GpuFacts {
    pub ordinal: u32,
    pub info: GpuInfo,
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED` (`None`: the driver does not say).
    pub gpudirect_rdma: Option<bool>,
    /// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`.
    pub dmabuf: Option<bool>,
    /// An integrated GPU (Tegra) shares host memory: GPUDirect there measures host memory.
    pub integrated: bool,
}

impl GpuFacts {
    /// `GPU 0 (NVIDIA H200, 0000:18:00.0)`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "GPU {} ({}, {})",
            self.ordinal,
            self.info.name,
            self.info.pci_bus_id.as_deref().unwrap_or("bus id unknown")
        )
    }
}

fn err_text(e: cu::DriverError) -> String {
    let name = e
        .error_name()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name}: {}", s.to_string_lossy()),
        Err(_) => name,
    }
}

/// The CUDA error's name (`CUDA_ERROR_NOT_SUPPORTED`), for diagnostics.
pub fn error_name(e: cu::DriverError) -> String {
    e.error_name()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0))
}

/// Checks that the CUDA driver library loads and finds a GPU, before any other cudarc call
/// (cudarc panics on the first call into a library it cannot find). Returns the GPU count.
pub fn check_driver() -> Result<u32> {
    // SAFETY: only tries to dlopen the candidate library names; calls nothing in them.
    if !unsafe { cusys::is_culib_present() } {
        bail!(
            "no CUDA driver on this machine (libcuda.so not found): GPU buffers (--use-cuda) and \
             the GPU copy tests (--test h2d|d2h|d2d|p2p) need an NVIDIA GPU with its driver \
             installed; on this host measure with host memory (leave out --use-cuda)"
        );
    }
    cu::init().map_err(|e| {
        let why = err_text(e);
        if why.starts_with("CUDA_ERROR_NO_DEVICE") {
            anyhow!(
                "the CUDA driver is installed but sees no GPU ({why}): check `nvidia-smi` and \
                 CUDA_VISIBLE_DEVICES"
            )
        } else {
            anyhow!("the CUDA driver failed to start ({why}): check `nvidia-smi` and `dmesg`")
        }
    })?;
    let n = cu::device::get_count().map_err(|e| anyhow!("counting GPUs: {}", err_text(e)))?;
    if n <= 0 {
        bail!("the CUDA driver sees no GPU: check `nvidia-smi` and CUDA_VISIBLE_DEVICES");
    }
    Ok(n as u32)
}

/// Is `name` exported by the loaded libcuda? (A driver older than the call would make
/// cudarc panic.) Call only after [`check_driver`].
pub fn has_symbol(name: &str) -> bool {
    // SAFETY: culib() is loaded (check_driver succeeded); looking a symbol up runs no code.
    unsafe {
        cusys::culib()
            .get::<unsafe extern "C" fn()>(name.as_bytes())
            .is_ok()
    }
}

fn bus_id(dev: cusys::CUdevice) -> Option<String> {
    let mut buf = [0 as c_char; 32];
    // SAFETY: buf holds len bytes; the driver writes a NUL-terminated string into it.
    let r = unsafe { cusys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, dev) };
    r.result().ok()?;
    // SAFETY: NUL-terminated by the driver within buf.
    let s = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
    normalize_bus_id(&s)
}

fn uuid(dev: cusys::CUdevice) -> Option<String> {
    let u = cu::device::get_uuid(dev).ok()?;
    let b: Vec<u8> = u.bytes.iter().map(|c| *c as u8).collect();
    let hex =
        |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    Some(format!(
        "GPU-{}-{}-{}-{}-{}",
        hex(0..4),
        hex(4..6),
        hex(6..8),
        hex(8..10),
        hex(10..16)
    ))
}

fn attr(dev: cusys::CUdevice, a: cusys::CUdevice_attribute) -> Option<i32> {
    // SAFETY: valid device handle; an attribute unknown to an older driver is an error, not UB.
    unsafe { cu::device::get_attribute(dev, a) }.ok()
}

/// Facts of GPU `ordinal` (the driver must be loaded: [`check_driver`]).
pub fn facts(ordinal: u32) -> Result<GpuFacts> {
    let dev = cu::device::get(ordinal as i32)
        .map_err(|e| anyhow!("opening GPU {ordinal}: {}", err_text(e)))?;
    use cusys::CUdevice_attribute::*;
    let bus = bus_id(dev);
    let topo_numa = bus.as_deref().and_then(|b| {
        probe::topology::Topology::read()
            .device(b)
            .and_then(|d| d.numa_node)
    });
    Ok(GpuFacts {
        ordinal,
        info: GpuInfo {
            index: ordinal,
            name: cu::device::get_name(dev).unwrap_or_else(|_| "NVIDIA GPU".into()),
            pci_bus_id: bus,
            uuid: uuid(dev),
            // SAFETY: valid device handle.
            memory_bytes: unsafe { cu::device::total_mem(dev) }.ok().map(|m| m as u64),
            numa_node: topo_numa,
            ..Default::default()
        },
        gpudirect_rdma: attr(dev, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED).map(|v| v != 0),
        dmabuf: attr(dev, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED).map(|v| v != 0),
        integrated: attr(dev, CU_DEVICE_ATTRIBUTE_INTEGRATED).is_some_and(|v| v != 0),
    })
}

/// Resolves `--use-cuda` / `--use-cuda-bus-id` to a GPU, checking the driver first.
pub fn select(sel: &GpuSelector) -> Result<GpuFacts> {
    let count = check_driver()?;
    let ordinal = match sel {
        GpuSelector::Ordinal(n) => *n,
        // The launcher's local rank, through the one rule (override, only GPU, local rank).
        GpuSelector::LocalRank => {
            let over = std::env::var(super::device::OVERRIDE).ok();
            let local = super::local_rank().unwrap_or(0);
            super::device::pick(local, local + 1, count, over.as_deref())
                .map_err(anyhow::Error::msg)?
                .0
        }
        GpuSelector::BusId(b) => {
            let want = normalize_bus_id(b).ok_or_else(|| {
                anyhow!("--use-cuda-bus-id {b} is not a PCI bus id (e.g. 0000:18:00.0, as nvidia-smi prints it)")
            })?;
            let c = CString::new(want.clone()).map_err(|_| anyhow!("bad bus id {b}"))?;
            let mut dev: cusys::CUdevice = 0;
            // SAFETY: dev is a valid out-pointer, c a NUL-terminated string.
            let r = unsafe { cusys::cuDeviceGetByPCIBusId(&mut dev, c.as_ptr()) };
            if r.result().is_err() {
                let list = (0..count)
                    .filter_map(|i| {
                        cu::device::get(i as i32)
                            .ok()
                            .and_then(bus_id)
                            .map(|b| format!("{i}: {b}"))
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                bail!("no GPU at PCI bus id {want}; the GPUs are {list}");
            }
            (0..count)
                .find(|i| {
                    cu::device::get(*i as i32).ok().and_then(bus_id).as_deref() == Some(&want)
                })
                .unwrap_or(dev as u32)
        }
    };
    if ordinal >= count {
        let how = if *sel == GpuSelector::LocalRank {
            format!(
                "the node-local rank is {ordinal} but this host has {count} GPU(s): run at most \
                 {count} rank(s) per host with --use-cuda auto"
            )
        } else {
            format!("this host has {count} GPU(s), numbered 0..{}", count - 1)
        };
        bail!("GPU {ordinal} does not exist: {how}");
    }
    facts(ordinal)
}
