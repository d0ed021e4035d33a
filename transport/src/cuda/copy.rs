//! GPU copy baselines: host-to-device and device-to-host through pinned memory, device to
//! device within one GPU, and GPU to GPU between peers, measured the way the CUDA
//! `bandwidthTest` sample and nvbandwidth do (copy-engine memcpys enqueued back to back on
//! one stream, each between two events, GPU time). Beside a GPUDirect or staged result they
//! say which part is the limit: the GPU's memory, its PCIe link, or the wire.

use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use cudarc::driver::{result as cu, sys as cusys};

use super::facts;
use super::memory::{DeviceMemory, GpuContext, PinnedHost};
use crate::gpu::GpuBuffer;

/// What is copied where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyKind {
    /// Pinned host memory to the GPU.
    H2d,
    /// The GPU to pinned host memory.
    D2h,
    /// Within one GPU's memory.
    D2d,
    /// One GPU to another (NVLink or PCIe peer-to-peer where the GPUs allow it, else
    /// staged by the driver through host memory).
    P2p,
}

impl CopyKind {
    /// Bytes one copy of `size` bytes counts for bandwidth, as the CUDA `bandwidthTest`
    /// sample counts them: a device-to-device copy reads and writes the same GPU's memory,
    /// so it counts twice (`2.0f * memSize * MEMCOPY_ITERATIONS`, "In and Out"), and D2D
    /// figures compare with bandwidthTest's and with the memory's rated bandwidth. Every
    /// other copy crosses a link once.
    pub fn bytes_counted(self, size: u64) -> u64 {
        match self {
            CopyKind::D2d => 2 * size,
            _ => size,
        }
    }

    /// What [`Self::bytes_counted`] counts, for the table and the document's options.
    pub fn counting(self) -> &'static str {
        match self {
            CopyKind::D2d => "read_plus_write",
            _ => "bytes_copied",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CopyKind::H2d => "h2d",
            CopyKind::D2h => "d2h",
            CopyKind::D2d => "d2d",
            CopyKind::P2p => "p2p",
        }
    }
}

/// The timed copies of one size.
#[derive(Debug, Clone)]
pub struct CopyTimes {
    /// GPU time of each timed copy, nanoseconds.
    pub per_copy_ns: Vec<u64>,
    /// For P2p: whether the GPUs reach each other directly (cuDeviceCanAccessPeer).
    pub peer_access: Option<bool>,
}

enum End {
    Host(PinnedHost),
    Device(DeviceMemory),
}

/// A copy set up once per size and timed many times.
pub struct CopyBench {
    kind: CopyKind,
    bytes: usize,
    src_ctx: Arc<GpuContext>,
    dst_ctx: Arc<GpuContext>,
    src: End,
    dst: End,
    stream: cusys::CUstream,
    peer_access: Option<bool>,
}

fn cuda_err(what: &str) -> impl FnOnce(cu::DriverError) -> anyhow::Error + '_ {
    move |e| anyhow!("{what}: {}", facts::error_name(e))
}

fn can_access_peer(a: u32, b: u32) -> Result<bool> {
    let (da, db) = (
        cu::device::get(a as i32).map_err(cuda_err("opening a GPU"))?,
        cu::device::get(b as i32).map_err(cuda_err("opening a GPU"))?,
    );
    let mut can = 0i32;
    // SAFETY: valid device handles and out-pointer.
    unsafe { cusys::cuDeviceCanAccessPeer(&mut can, da, db) }
        .result()
        .map_err(cuda_err("asking whether two GPUs are peers"))?;
    Ok(can != 0)
}

/// Lets `from`'s context reach `to`'s memory directly (no-op when already enabled).
fn enable_peer(from: &GpuContext, to: &GpuContext) -> Result<()> {
    from.make_current()?;
    // SAFETY: both contexts are retained primary contexts.
    let r = unsafe { cusys::cuCtxEnablePeerAccess(to.raw(), 0) };
    match r {
        cusys::CUresult::CUDA_SUCCESS | cusys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
            Ok(())
        }
        e => Err(cuda_err("enabling peer access between GPUs")(
            cu::DriverError(e),
        )),
    }
}

impl CopyBench {
    /// Sets up `kind` of `bytes` on GPU `gpu` (and `peer` for P2p).
    pub fn new(kind: CopyKind, gpu: u32, peer: Option<u32>, bytes: usize) -> Result<CopyBench> {
        let count = facts::check_driver()?;
        let src_ctx = GpuContext::open(gpu)?;
        let (dst_ctx, peer_access) = match (kind, peer) {
            (CopyKind::P2p, Some(p)) => {
                if p >= count || p == gpu {
                    bail!("p2p copies need two different GPUs: asked GPU {gpu} to GPU {p} on a host with {count}");
                }
                let access = can_access_peer(gpu, p)?;
                let dst = GpuContext::open(p)?;
                if access {
                    enable_peer(&src_ctx, &dst)?;
                    enable_peer(&dst, &src_ctx)?;
                }
                (dst, Some(access))
            }
            (CopyKind::P2p, None) => bail!("internal error: p2p copy without a peer GPU"),
            _ => (src_ctx.clone(), None),
        };
        src_ctx.make_current()?;
        let (src, dst) = match kind {
            CopyKind::H2d => (
                End::Host(PinnedHost::alloc(&src_ctx, bytes)?),
                End::Device(DeviceMemory::alloc(&src_ctx, bytes)?),
            ),
            CopyKind::D2h => (
                End::Device(DeviceMemory::alloc(&src_ctx, bytes)?),
                End::Host(PinnedHost::alloc(&src_ctx, bytes)?),
            ),
            CopyKind::D2d => (
                End::Device(DeviceMemory::alloc(&src_ctx, bytes)?),
                End::Device(DeviceMemory::alloc(&src_ctx, bytes)?),
            ),
            CopyKind::P2p => (
                End::Device(DeviceMemory::alloc(&src_ctx, bytes)?),
                End::Device(DeviceMemory::alloc(&dst_ctx, bytes)?),
            ),
        };
        src_ctx.make_current()?;
        let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map_err(cuda_err("creating a CUDA stream"))?;
        Ok(CopyBench {
            kind,
            bytes,
            src_ctx,
            dst_ctx,
            src,
            dst,
            stream,
            peer_access,
        })
    }

    /// Enqueues one copy on the stream.
    fn launch(&self) -> Result<()> {
        let n = self.bytes;
        let s = self.stream;
        // SAFETY: every buffer holds at least `bytes` bytes (allocations round up) and
        // lives as long as self; the stream belongs to the source context.
        let r = unsafe {
            match (&self.src, &self.dst) {
                (End::Host(h), End::Device(d)) => {
                    cusys::cuMemcpyHtoDAsync_v2(d.device_ptr(), h.raw().cast(), n, s)
                }
                (End::Device(d), End::Host(h)) => {
                    cusys::cuMemcpyDtoHAsync_v2(h.raw().cast(), d.device_ptr(), n, s)
                }
                (End::Device(a), End::Device(b)) if self.kind == CopyKind::P2p => {
                    cusys::cuMemcpyPeerAsync(
                        b.device_ptr(),
                        self.dst_ctx.raw(),
                        a.device_ptr(),
                        self.src_ctx.raw(),
                        n,
                        s,
                    )
                }
                (End::Device(a), End::Device(b)) => {
                    cusys::cuMemcpyDtoDAsync_v2(b.device_ptr(), a.device_ptr(), n, s)
                }
                (End::Host(_), End::Host(_)) => {
                    return Err(anyhow!("internal error: host-to-host copy"))
                }
            }
        };
        r.result().map_err(cuda_err("enqueueing a copy"))
    }

    /// `warmup` untimed copies, then `iters` timed ones.
    pub fn run(&self, warmup: u64, iters: u64) -> Result<CopyTimes> {
        self.src_ctx.make_current()?;
        let per_copy_ns =
            super::timed_on_stream(self.stream, warmup, iters, || self.launch(), None, &|| {
                Ok(())
            })?;
        Ok(CopyTimes {
            per_copy_ns,
            peer_access: self.peer_access,
        })
    }
}

impl Drop for CopyBench {
    fn drop(&mut self) {
        let _ = self.src_ctx.make_current();
        // SAFETY: created in `new`; timed_on_stream synchronised every copy on it.
        let _ = unsafe { cu::stream::destroy(self.stream) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_to_device_counts_read_and_write_as_bandwidth_test_does() {
        assert_eq!(CopyKind::D2d.bytes_counted(1 << 20), 2 << 20);
        assert_eq!(CopyKind::D2d.counting(), "read_plus_write");
        for k in [CopyKind::H2d, CopyKind::D2h, CopyKind::P2p] {
            assert_eq!(k.bytes_counted(1 << 20), 1 << 20);
            assert_eq!(k.counting(), "bytes_copied");
        }
    }
}
