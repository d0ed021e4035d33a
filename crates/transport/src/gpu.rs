//! GPU buffers for the point-to-point tests: which GPU, how its memory reaches the NIC
//! (GPUDirect RDMA through dma-buf or nvidia_peermem, or staged through pinned host memory
//! over TCP), and the diagnostics when it cannot.
//!
//! This module has no `unsafe` and no CUDA or verbs calls: it holds the options (resolved
//! from the command line into [`GpuOptions`], carried by the plan's
//! `endpoint::VerbsOptions` to every endpoint), the small traits the
//! CUDA module implements and the transports use ([`GpuBuffer`] for registration,
//! [`StagedBuffer`] for TCP staging), and the logic that turns failed registration attempts
//! into one message naming each cause and its fix ([`diagnose`]). The CUDA side lives in
//! the `cuda` module (feature `cuda`), the verbs side in `verbs`.
//!
//! Flow of `--use-cuda` at start-up ([`plan::prepare`]): CUDA driver present? -> the GPU and
//! its facts (GPUDirect and dma-buf support) -> the NIC (`-d`, else the nearest one with an
//! ACTIVE port) and their relation, warnings for crossing sockets, ACS on the switch between
//! them -> a trial registration of GPU memory with the chosen paths -> the path that worked
//! goes into the options, so every test size registers the same way.

use std::os::fd::OwnedFd;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use results::{GpuInfo, MemorySide};

pub mod diagnose;

pub use diagnose::{diagnose, explain, paths_to_try, Attempt, AttemptOutcome, HostFacts};

/// Which GPU `--use-cuda` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuSelector {
    /// CUDA device ordinal.
    Ordinal(u32),
    /// PCI bus id (`--use-cuda-bus-id`), any spelling `normalize_bus_id` accepts.
    BusId(String),
    /// The node-local rank under mpirun/srun (ordinal 0 when run alone).
    LocalRank,
}

/// How GPU memory is registered with the NIC (`--cuda-mem`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CudaMem {
    /// dma-buf where the GPU reports support, then nvidia_peermem.
    Auto,
    /// Export with cuMemGetHandleForAddressRange, register with ibv_reg_dmabuf_mr.
    Dmabuf,
    /// ibv_reg_mr on the device pointer, served by the nvidia_peermem kernel module.
    Peermem,
}

base::named_enum!(CudaMem { Auto => "auto", Dmabuf => "dmabuf", Peermem => "peermem" });

/// The GPU as resolved at start-up: what every endpoint needs without asking CUDA again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ResolvedGpu {
    /// CUDA ordinal.
    pub ordinal: u32,
    /// Name, bus id, UUID, NUMA node (for the JSON).
    pub info: GpuInfo,
    /// The registration path that worked in the trial (`dmabuf` or `peermem`); `None`
    /// over TCP (staged).
    pub path: Option<String>,
    /// The NIC, its bus id and its relation to the GPU (`PIX` ...).
    pub nic: Option<String>,
    pub nic_pci_bus_id: Option<String>,
    pub relation: Option<String>,
    /// Warnings printed at start-up, repeated in every result's memory record.
    pub warnings: Vec<String>,
}

/// GPU buffer settings of a point-to-point run (`--use-cuda`, `--use-cuda-bus-id`,
/// `--cuda-mem`, `--ignore-acs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuOptions {
    pub gpu: GpuSelector,
    pub mem: CudaMem,
    /// Measure even when ACS redirects GPU-NIC traffic (a warning instead of an error).
    pub ignore_acs: bool,
    /// Filled by [`plan::prepare`].
    pub resolved: Option<ResolvedGpu>,
}

impl GpuOptions {
    /// The memory record of this side for a result.
    pub fn side(&self, path_override: Option<&str>) -> MemorySide {
        let r = self.resolved.clone().unwrap_or_default();
        MemorySide {
            kind: "cuda".into(),
            path: path_override
                .map(str::to_string)
                .or(r.path.clone())
                .unwrap_or_else(|| "staged".into()),
            gpu: Some(r.info.clone()),
            nic: r.nic,
            nic_pci_bus_id: r.nic_pci_bus_id,
            relation: r.relation,
            warnings: r.warnings,
        }
    }
}

/// Device memory the NIC can be given: what verbs registration needs from the CUDA side.
/// Implemented by the `cuda` module's `DeviceMemory`.
pub trait GpuBuffer {
    /// The device virtual address (what `ibv_reg_mr` and the work requests use).
    fn device_ptr(&self) -> u64;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Exports the allocation as a dma-buf: the fd, and the offset of
    /// [`device_ptr`](Self::device_ptr) inside the exported range.
    fn export_dmabuf(&self) -> Result<(OwnedFd, u64)>;
    /// Copies host bytes into the buffer at `off` (synchronous).
    fn copy_in(&self, off: usize, data: &[u8]) -> Result<()>;
    /// Copies `out.len()` bytes from `off` to the host (synchronous).
    fn copy_out(&self, off: usize, out: &mut [u8]) -> Result<()>;
}

/// One message's worth of device memory and the pinned host memory it is staged through,
/// for TCP with `--use-cuda` (what a fabric without GPUDirect does: every message crosses
/// PCIe to host memory before the socket sees it, and back on the other side).
pub trait StagedBuffer: Send {
    /// The pinned host bytes the socket reads and writes.
    fn host(&mut self) -> &mut [u8];
    /// Device -> host, before a send.
    fn download(&mut self) -> Result<()>;
    /// Host -> device, after a receive.
    fn upload(&mut self) -> Result<()>;
    /// Writes `data` into the device buffer (for `--check` patterns).
    fn write_device(&mut self, data: &[u8]) -> Result<()>;
    /// Reads the device buffer (for `--check`).
    fn read_device(&mut self, out: &mut [u8]) -> Result<()>;
}

/// Makes staging buffers of a size; one per stream and direction.
pub trait StageMaker: Send + Sync {
    fn make(&self, size: usize) -> Result<Box<dyn StagedBuffer>>;
    /// This side's memory record.
    fn side(&self) -> MemorySide;
}

/// The byte `--check` expects at offset `i` of stream `q`'s message (never 0, the content
/// of fresh memory), shared by every transport so both ends agree.
#[inline]
pub fn pattern(q: usize, i: usize) -> u8 {
    ((i * 7 + q * 13) % 251) as u8 + 1
}

/// `q`'s whole pattern of `len` bytes.
pub fn pattern_bytes(q: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| pattern(q, i)).collect()
}

/// Bytes of `got` that differ from stream `q`'s pattern.
pub fn wrong_bytes(q: usize, got: &[u8]) -> u64 {
    got.iter()
        .enumerate()
        .filter(|(i, b)| **b != pattern(q, *i))
        .count() as u64
}

/// Host-memory staging: the same [`StagedBuffer`] interface with a plain vector standing in
/// for device memory. It runs the staging code path (copies in and out of a separate
/// buffer around every send and receive) on machines without a GPU; it is what the TCP
/// transport's staging tests use, and never what a user measures.
pub struct HostStage {
    device: Vec<u8>,
    host: Vec<u8>,
}

impl HostStage {
    pub fn new(size: usize) -> HostStage {
        HostStage {
            device: vec![0; size],
            host: vec![0; size],
        }
    }
}

impl StagedBuffer for HostStage {
    fn host(&mut self) -> &mut [u8] {
        &mut self.host
    }
    fn download(&mut self) -> Result<()> {
        self.host.copy_from_slice(&self.device);
        Ok(())
    }
    fn upload(&mut self) -> Result<()> {
        self.device.copy_from_slice(&self.host);
        Ok(())
    }
    fn write_device(&mut self, data: &[u8]) -> Result<()> {
        self.device[..data.len()].copy_from_slice(data);
        Ok(())
    }
    fn read_device(&mut self, out: &mut [u8]) -> Result<()> {
        let n = out.len();
        out.copy_from_slice(&self.device[..n]);
        Ok(())
    }
}

/// Makes [`HostStage`]s (tests of the staging path without a GPU).
pub struct HostStageMaker;

impl StageMaker for HostStageMaker {
    fn make(&self, size: usize) -> Result<Box<dyn StagedBuffer>> {
        Ok(Box::new(HostStage::new(size)))
    }
    fn side(&self) -> MemorySide {
        MemorySide {
            kind: "host".into(),
            path: "staged".into(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_never_matches_zeroed_memory_and_differs_per_stream() {
        for q in 0..4 {
            assert!(pattern_bytes(q, 10_000).iter().all(|b| *b != 0));
        }
        assert_ne!(pattern(0, 1), pattern(1, 1));
        let mut p = pattern_bytes(2, 100);
        assert_eq!(wrong_bytes(2, &p), 0);
        p[7] ^= 0xff;
        p[99] = 0;
        assert_eq!(wrong_bytes(2, &p), 2);
    }

    #[test]
    fn host_stage_moves_bytes_only_when_asked() {
        let mut s = HostStage::new(4);
        s.write_device(&[1, 2, 3, 4]).unwrap();
        assert_eq!(s.host(), &[0, 0, 0, 0]);
        s.download().unwrap();
        assert_eq!(s.host(), &[1, 2, 3, 4]);
        s.host().copy_from_slice(&[9, 9, 9, 9]);
        let mut out = [0u8; 4];
        s.read_device(&mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        s.upload().unwrap();
        s.read_device(&mut out).unwrap();
        assert_eq!(out, [9, 9, 9, 9]);
    }

    #[test]
    fn side_record_carries_the_resolved_gpu() {
        let o = GpuOptions {
            gpu: GpuSelector::Ordinal(0),
            mem: CudaMem::Auto,
            ignore_acs: false,
            resolved: Some(ResolvedGpu {
                ordinal: 0,
                info: GpuInfo {
                    name: "NVIDIA H200".into(),
                    pci_bus_id: Some("0000:18:00.0".into()),
                    ..Default::default()
                },
                path: Some("dmabuf".into()),
                nic: Some("mlx5_0".into()),
                relation: Some("PIX".into()),
                ..Default::default()
            }),
        };
        let s = o.side(None);
        assert_eq!((s.kind.as_str(), s.path.as_str()), ("cuda", "dmabuf"));
        assert_eq!(s.gpu.unwrap().name, "NVIDIA H200");
        assert_eq!(s.relation.as_deref(), Some("PIX"));
        assert_eq!(o.side(Some("staged")).path, "staged");
    }
}
