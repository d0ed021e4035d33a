//! GPU copy baselines: host-to-device and device-to-host through pinned memory, device to
//! device within one GPU, and GPU to GPU between peers, measured the way the CUDA
//! `bandwidthTest` sample and nvbandwidth do (copy-engine memcpys enqueued back to back on
//! one stream, each between two events, GPU time). Beside a GPUDirect or staged result they
//! say which part is the limit: the GPU's memory, its PCIe link, or the wire.
//!
//! A small copy takes the copy engine less time than the host takes to enqueue it (a
//! `cuMemcpyAsync` and an event record cost microseconds): launched into a running stream,
//! the GPU would idle between copies and the events would time the host's enqueue rate.
//! So each block of copies is queued behind a [`Gate`], a stream wait on a host word, and
//! released at once when the block is queued, as nvbandwidth queues its copies behind a
//! blocking kernel.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// How the copies were queued: behind a gate, or not and why.
    pub timing: Timing,
}

/// How a size's copies were queued for timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timing {
    /// Each block queued behind a [`Gate`] and released whole: GPU time only.
    Gated,
    /// Launched into the running stream (the reason why): at sizes the copy engine
    /// finishes faster than the host enqueues, the figure is the host's enqueue rate.
    Ungated(String),
}

impl Timing {
    /// The document's name for it.
    pub fn name(&self) -> &'static str {
        match self {
            Timing::Gated => "gated",
            Timing::Ungated(_) => "ungated",
        }
    }
}

/// Copies queued behind one hold of the gate. Short, so the host never waits on a full
/// queue while the stream is held (nvbandwidth queues 16 behind its blocking kernel).
pub const GATED_BLOCK: u64 = 64;

/// Set to `1` to time copies without the gate (for a driver that mishandles stream waits
/// on host memory; the figures at small sizes are then the host's enqueue rate).
pub const UNGATED_ENV: &str = "FABCHECK_COPY_UNGATED";

/// No copy completing for this long means the GPU or the gate is stuck, not slow: one
/// 16 GiB copy over PCIe Gen5 takes a third of a second.
pub const STALL: Duration = Duration::from_secs(30);

/// A hold on a stream the host lifts: `cuStreamWaitValue32` on a word of pinned host
/// memory mapped into the GPU's address space. The stream stops at the wait until the host
/// writes the awaited value into the word; everything queued behind it then runs back to
/// back. Each hold awaits the next generation, so the word never needs resetting.
pub(crate) struct Gate {
    ctx: Arc<GpuContext>,
    word: *mut u32,
    device_word: cusys::CUdeviceptr,
    released: Cell<u32>,
}

/// The hold of one block; dropping it releases the stream.
pub(crate) struct Held<'a> {
    gate: &'a Gate,
    generation: u32,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // SAFETY: the word is the gate's live pinned allocation; the GPU only reads it.
        unsafe { std::ptr::write_volatile(self.gate.word, self.generation) };
        self.gate.released.set(self.generation);
    }
}

impl Gate {
    /// A gate in `ctx`, proven on `stream` (held, released, drained within [`STALL`]), so a
    /// driver that refuses or ignores stream waits on host memory is found before timing.
    pub(crate) fn new(ctx: &Arc<GpuContext>, stream: cusys::CUstream) -> Result<Gate> {
        ctx.make_current()?;
        let flags = cusys::CU_MEMHOSTALLOC_PORTABLE | cusys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: the context is current; 4 bytes.
        let word = unsafe { cu::malloc_host(std::mem::size_of::<u32>(), flags) }
            .map_err(cuda_err("allocating the copy gate's word"))?
            .cast::<u32>();
        // SAFETY: a fresh allocation of one u32.
        unsafe { std::ptr::write_volatile(word, 0) };
        let mut device_word: cusys::CUdeviceptr = 0;
        // SAFETY: word is mapped (DEVICEMAP); flags must be 0.
        let r = unsafe { cusys::cuMemHostGetDevicePointer_v2(&mut device_word, word.cast(), 0) };
        let gate = Gate {
            ctx: ctx.clone(),
            word,
            device_word,
            released: Cell::new(0),
        };
        r.result()
            .map_err(cuda_err("mapping the copy gate's word into the GPU"))?;
        drop(gate.hold(stream)?);
        let stall = Stall::new(STALL);
        // SAFETY: the caller's stream is alive for the duration of this call.
        super::poll_until(
            // SAFETY: the caller's stream is alive for the duration of this call.
            || unsafe { cusys::cuStreamQuery(stream) },
            || stall.check(0, Instant::now()),
            "releasing the copy gate",
        )?;
        Ok(gate)
    }

    /// Holds `stream` at a wait for the next generation until the result is dropped.
    pub(crate) fn hold(&self, stream: cusys::CUstream) -> Result<Held<'_>> {
        let generation = self.released.get().wrapping_add(1);
        // SAFETY: device_word maps the gate's live word; the stream is the caller's.
        unsafe {
            cusys::cuStreamWaitValue32_v2(
                stream,
                self.device_word,
                generation,
                cusys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_EQ as u32,
            )
        }
        .result()
        .map_err(cuda_err(
            "holding the stream at the copy gate (cuStreamWaitValue32)",
        ))?;
        Ok(Held {
            gate: self,
            generation,
        })
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = self.ctx.make_current();
        // SAFETY: allocated by cuMemHostAlloc in `new` and freed once; every hold was
        // released and its stream drained before the gate drops (timed_on_stream waits on
        // the last event of each block).
        let _ = unsafe { cu::free_host(self.word.cast()) };
    }
}

/// Turns "no copy has completed for `limit`" into an error, so a stuck GPU or gate ends
/// the run with a message instead of a hang.
pub struct Stall {
    limit: Duration,
    last: Cell<Option<(u64, Instant)>>,
}

impl Stall {
    pub fn new(limit: Duration) -> Stall {
        Stall {
            limit,
            last: Cell::new(None),
        }
    }

    /// `done` copies have completed by `now`: an error when that count has not moved for
    /// longer than the limit.
    pub fn check(&self, done: u64, now: Instant) -> Result<()> {
        match self.last.get() {
            Some((seen, since)) if seen == done => {
                if now.duration_since(since) > self.limit {
                    bail!(
                        "no GPU copy completed in {} s: the GPU is stuck, or it never saw \
                         the copy gate's release (set {UNGATED_ENV}=1 to time copies without \
                         the gate)",
                        self.limit.as_secs()
                    );
                }
            }
            _ => self.last.set(Some((done, now))),
        }
        Ok(())
    }
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

    /// `warmup` untimed copies, then `iters` timed ones, behind a [`Gate`] unless the
    /// driver refuses one or [`UNGATED_ENV`] is set.
    pub fn run(&self, warmup: u64, iters: u64) -> Result<CopyTimes> {
        self.src_ctx.make_current()?;
        let (gate, timing) = if std::env::var(UNGATED_ENV).is_ok_and(|v| v == "1") {
            (None, Timing::Ungated(format!("{UNGATED_ENV}=1")))
        } else {
            match Gate::new(&self.src_ctx, self.stream) {
                Ok(g) => (Some(g), Timing::Gated),
                Err(e) => (None, Timing::Ungated(format!("{e:#}"))),
            }
        };
        let done = AtomicU64::new(0);
        let stall = Stall::new(STALL);
        let per_copy_ns = super::timed_on_stream(
            self.stream,
            warmup,
            iters,
            || self.launch(),
            Some(&done),
            &|| stall.check(done.load(Ordering::Relaxed), Instant::now()),
            gate.as_ref(),
        )?;
        Ok(CopyTimes {
            per_copy_ns,
            peer_access: self.peer_access,
            timing,
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
    fn a_stall_is_an_error_only_when_nothing_completes_for_the_limit() {
        let stall = Stall::new(Duration::from_secs(30));
        let t0 = Instant::now();
        stall.check(0, t0).unwrap();
        stall.check(0, t0 + Duration::from_secs(29)).unwrap();
        // Progress restarts the clock.
        stall.check(5, t0 + Duration::from_secs(40)).unwrap();
        stall.check(5, t0 + Duration::from_secs(69)).unwrap();
        let e = stall.check(5, t0 + Duration::from_secs(71)).unwrap_err();
        let text = format!("{e:#}");
        assert!(text.contains("no GPU copy completed in 30 s"), "{text}");
        assert!(text.contains(UNGATED_ENV), "{text}");
    }

    #[test]
    fn timing_names_are_the_documents() {
        assert_eq!(Timing::Gated.name(), "gated");
        assert_eq!(Timing::Ungated("why".into()).name(), "ungated");
    }

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
