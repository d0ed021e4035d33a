//! GPU memory and NCCL through cudarc, loaded at run time.
//!
//! - this file: the NCCL backend of bench-collective (GPU, buffers, communicator, timing);
//! - [`facts`]: which GPU `--use-cuda` names and what it can do for a NIC;
//! - [`memory`]: device memory for GPUDirect (dma-buf export), pinned host memory, TCP staging;
//! - [`copy`]: the GPU copy baselines of `bench-bw --test h2d|d2h|d2d|p2p`.
//!
//! cudarc is built with `dynamic-loading`: nothing links against libcuda or libnccl, so
//! every fabcheck binary builds and starts on machines without CUDA. The price is that
//! cudarc panics on the first call into a library it cannot find, so [`check_available`]
//! must succeed before anything else here is used; it turns a missing library into an
//! error that says what to install.
//!
//! `unsafe` lives here, in the verbs transport and in the MPI collective calls
//! (`collective/mpi.rs`): device pointers are plain integers to Rust, so every copy and
//! every collective checks its offsets and lengths against the allocation (and a
//! collective against [`Primitive::elements`]) before handing pointers to the driver or
//! NCCL.
//!
//! Timing follows nccl-tests' rule that a GPU collective is done when its stream says so:
//! the host only enqueues. nccl-tests' time is one host timer around back-to-back
//! launches and the final stream synchronisation ([`NcclComm::loop_time`]); the
//! per-iteration view brackets each launch with CUDA events recorded on the collective's
//! stream, in a pass of its own ([`NcclComm::iteration_times`], GPU clock, about 0.5 us
//! resolution).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{anyhow, bail, ensure, Result};
use cudarc::driver::{result as cu, sys as cusys};
use cudarc::nccl::{result as nccl, sys as ncclsys};

use crate::collective::{DataType, Primitive, RedOp};

pub mod copy;
pub mod facts;
pub mod memory;

/// Checks that the CUDA driver library and NCCL can be loaded, before any cudarc call
/// (which would panic without them). The error names what is missing and what to do.
pub fn check_available() -> Result<()> {
    // SAFETY: only tries to dlopen the candidate library names; loads nothing we call.
    let cuda = unsafe { cusys::is_culib_present() };
    if !cuda {
        bail!(
            "no CUDA driver on this machine (libcuda.so not found): the nccl backend needs an \
             NVIDIA GPU with its driver installed; use --backend mpi for host memory"
        );
    }
    // SAFETY: as above.
    let nccl_found = unsafe { ncclsys::is_culib_present() };
    if !nccl_found {
        let hint = if nccl_runtime_only() {
            " (libnccl.so.2 is installed but cudarc loads libnccl.so: install the NCCL \
             development package (libnccl-dev), or link libnccl.so to libnccl.so.2 in a \
             directory on LD_LIBRARY_PATH, as scripts/gpu-check.sh does)"
        } else {
            " (install NCCL, e.g. the libnccl2 and libnccl-dev packages, or put the directory \
             holding libnccl.so on LD_LIBRARY_PATH)"
        };
        bail!("the CUDA driver is present but NCCL is not{hint}");
    }
    Ok(())
}

/// True when the versioned runtime library `libnccl.so.2` loads although `libnccl.so`
/// does not (the usual state with only the runtime package installed).
fn nccl_runtime_only() -> bool {
    // SAFETY: dlopen of a library whose initialisers are known to be benign; it is
    // closed again at once.
    unsafe { libloading::Library::new("libnccl.so.2").is_ok() }
}

/// The node-local rank that picks this process's GPU: Open MPI, Slurm, MPICH/Hydra.
pub fn local_rank() -> Option<u32> {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_LOCALID",
        "MPI_LOCALRANKID",
        "PMI_LOCAL_RANK",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

fn cuda_err(what: &str) -> impl FnOnce(cu::DriverError) -> anyhow::Error + '_ {
    move |e| anyhow!("{what}: CUDA error {e:?}")
}

fn nccl_err(what: &str) -> impl FnOnce(nccl::NcclError) -> anyhow::Error + '_ {
    move |e| anyhow!("{what}: NCCL error {e:?}")
}

/// One GPU, its primary context made current on this thread, and one stream for the
/// collectives (non-blocking, so it never serialises with the legacy default stream).
pub struct Gpu {
    ordinal: u32,
    device: cusys::CUdevice,
    stream: cusys::CUstream,
}

impl Gpu {
    /// Number of GPUs the driver sees.
    pub fn count() -> Result<u32> {
        cu::init().map_err(cuda_err("initialising the CUDA driver"))?;
        Ok(cu::device::get_count().map_err(cuda_err("counting GPUs"))? as u32)
    }

    /// Opens GPU `ordinal` and makes its primary context current on the calling thread.
    pub fn open(ordinal: u32) -> Result<Self> {
        let n = Self::count()?;
        ensure!(
            ordinal < n,
            "GPU {ordinal} does not exist: this host has {n} GPU(s); run at most {n} rank(s) \
             per host (one GPU per rank)"
        );
        let device = cu::device::get(ordinal as i32).map_err(cuda_err("opening the GPU"))?;
        // SAFETY: `device` is a valid device handle from cuDeviceGet; the primary context
        // is retained for the life of the process (never released, so never invalid).
        let stream = unsafe {
            let ctx = cu::primary_ctx::retain(device).map_err(cuda_err("creating a context"))?;
            cu::ctx::set_current(ctx).map_err(cuda_err("making the context current"))?;
            cu::stream::create(cu::stream::StreamKind::NonBlocking)
                .map_err(cuda_err("creating a stream"))?
        };
        Ok(Self {
            ordinal,
            device,
            stream,
        })
    }

    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// Facts for the document's `hosts[].gpus`.
    pub fn info(&self) -> results::GpuInfo {
        // SAFETY: valid device handle.
        let memory = unsafe { cu::device::total_mem(self.device).ok() };
        let bus = |attr| {
            // SAFETY: valid device handle and a documented attribute.
            unsafe { cu::device::get_attribute(self.device, attr).ok() }
        };
        use cusys::CUdevice_attribute::*;
        let pci_bus_id = match (
            bus(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
            bus(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
            bus(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID),
        ) {
            (Some(d), Some(b), Some(s)) => Some(format!("{d:04x}:{b:02x}:{s:02x}.0")),
            _ => None,
        };
        results::GpuInfo {
            index: self.ordinal,
            name: cu::device::get_name(self.device).unwrap_or_default(),
            pci_bus_id,
            memory_bytes: memory.map(|m| m as u64),
            ..Default::default()
        }
    }

    /// Allocates `bytes` of device memory.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer> {
        // SAFETY: the context is current on this thread (set in `open`); a zero-byte
        // request is rounded up because cuMemAlloc refuses it.
        let ptr = unsafe { cu::malloc_sync(bytes.max(1)) }
            .map_err(|e| anyhow!("allocating {bytes} bytes on GPU {}: {e:?}", self.ordinal))?;
        Ok(DeviceBuffer { ptr, len: bytes })
    }

    /// Waits until everything enqueued on the stream has run.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the stream was created in `open` and lives as long as `self`.
        unsafe { cu::stream::synchronize(self.stream) }.map_err(cuda_err("waiting for the GPU"))
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: created in `open`; nothing uses it after this.
        let _ = unsafe { cu::stream::destroy(self.stream) };
    }
}

/// A device allocation; offsets and lengths in bytes.
pub struct DeviceBuffer {
    ptr: cusys::CUdeviceptr,
    len: usize,
}

impl DeviceBuffer {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn range(&self, offset: usize, bytes: usize) -> Result<cusys::CUdeviceptr> {
        ensure!(
            offset.checked_add(bytes).is_some_and(|end| end <= self.len),
            "internal error: {bytes} bytes at offset {offset} exceed a {}-byte GPU buffer",
            self.len
        );
        Ok(self.ptr + offset as u64)
    }

    /// Copies `data` to `offset` (synchronous).
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        let dst = self.range(offset, data.len())?;
        // SAFETY: `dst .. dst + data.len()` lies inside the allocation (checked above).
        unsafe { cu::memcpy_htod_sync(dst, data) }.map_err(cuda_err("copying to the GPU"))
    }

    /// Copies `out.len()` bytes from `offset` (synchronous).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let src = self.range(offset, out.len())?;
        // SAFETY: the source range lies inside the allocation (checked above).
        unsafe { cu::memcpy_dtoh_sync(out, src) }.map_err(cuda_err("copying from the GPU"))
    }

    /// Sets every byte to `byte` (synchronous).
    pub fn fill(&mut self, byte: u8) -> Result<()> {
        // SAFETY: the whole allocation, `len` bytes.
        unsafe { cu::memset_d8_sync(self.ptr, byte, self.len) }
            .map_err(cuda_err("filling GPU memory"))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc in `Gpu::alloc`, freed once; callers synchronise
        // the stream before dropping buffers it still uses (the harness does after each size).
        let _ = unsafe { cu::free_sync(self.ptr) };
    }
}

/// A new NCCL unique id (rank 0 makes it, every rank gets it over MPI), as bytes.
pub fn nccl_unique_id() -> Result<[u8; 128]> {
    let id = nccl::get_uniqueid().map_err(nccl_err("creating the NCCL unique id"))?;
    Ok(id.internal.map(|c| c as u8))
}

/// NCCL's version as `major.minor.patch`.
pub fn nccl_version() -> Option<String> {
    let v = nccl::get_nccl_version().ok()?;
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
    Some(format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100))
}

fn nccl_type(dt: DataType) -> ncclsys::ncclDataType_t {
    use ncclsys::ncclDataType_t::*;
    match dt {
        DataType::Int8 => ncclInt8,
        DataType::Uint8 => ncclUint8,
        DataType::Int32 => ncclInt32,
        DataType::Uint32 => ncclUint32,
        DataType::Int64 => ncclInt64,
        DataType::Uint64 => ncclUint64,
        DataType::Float16 => ncclFloat16,
        DataType::Bfloat16 => ncclBfloat16,
        DataType::Float32 => ncclFloat32,
        DataType::Float64 => ncclFloat64,
    }
}

fn nccl_op(op: RedOp) -> ncclsys::ncclRedOp_t {
    use ncclsys::ncclRedOp_t::*;
    match op {
        RedOp::Sum => ncclSum,
        RedOp::Prod => ncclProd,
        RedOp::Min => ncclMin,
        RedOp::Max => ncclMax,
        RedOp::Avg => ncclAvg,
    }
}

/// One collective call: buffers with byte offsets (send and receive may be the same buffer
/// for in-place runs, as NCCL allows), the count NCCL takes, type, reduction and root.
pub struct NcclCall<'a> {
    pub primitive: Primitive,
    pub send: (&'a DeviceBuffer, usize),
    pub recv: (&'a DeviceBuffer, usize),
    pub count: usize,
    pub datatype: DataType,
    pub op: RedOp,
    pub root: u32,
}

/// An NCCL communicator over all ranks of the job, bound to one GPU and its stream.
/// Drop it before the [`Gpu`] whose stream it uses.
pub struct NcclComm {
    comm: ncclsys::ncclComm_t,
    stream: cusys::CUstream,
    ranks: usize,
    rank: usize,
}

impl NcclComm {
    /// `ncclCommInitRank`: blocks until all `ranks` ranks have called it with the same id
    /// (the caller guards it with the watchdog).
    pub fn init(gpu: &Gpu, id: [u8; 128], ranks: u32, rank: u32) -> Result<Self> {
        let id = ncclsys::ncclUniqueId {
            internal: id.map(|b| b as _),
        };
        let mut comm: ncclsys::ncclComm_t = std::ptr::null_mut();
        // SAFETY: `comm` is a valid out-pointer; the GPU's context is current on this thread.
        unsafe { nccl::comm_init_rank(&mut comm, ranks as i32, id, rank as i32) }
            .map_err(nccl_err("creating the NCCL communicator"))?;
        Ok(Self {
            comm,
            stream: gpu.stream,
            ranks: ranks as usize,
            rank: rank as usize,
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    fn stream(&self) -> ncclsys::cudaStream_t {
        self.stream as ncclsys::cudaStream_t
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: the stream belongs to the Gpu, which outlives this communicator.
        unsafe { cu::stream::synchronize(self.stream) }.map_err(cuda_err("waiting for the GPU"))
    }

    /// Enqueues one collective on the stream (returns before it runs). One arm per
    /// primitive; the buffer ranges every arm touches are checked first against
    /// [`Primitive::elements`], the one definition of what a call reads and writes.
    pub fn launch(&self, c: &NcclCall) -> Result<()> {
        let ts = c.datatype.size();
        c.primitive
            .runs_on(self.ranks)
            .map_err(anyhow::Error::msg)?;
        ensure!(
            (c.root as usize) < self.ranks,
            "root {} is not a rank",
            c.root
        );
        let (send_elems, recv_elems) = c.primitive.elements(c.count, self.ranks);
        let send = c.send.0.range(c.send.1, send_elems * ts)? as *const c_void;
        let recv = c.recv.0.range(c.recv.1, recv_elems * ts)? as *mut c_void;
        let (t, op, root, s) = (
            nccl_type(c.datatype),
            nccl_op(c.op),
            c.root as i32,
            self.stream(),
        );
        let (comm, rank, ranks, block) = (self.comm, self.rank, self.ranks, c.count * ts);
        let group = |body: &dyn Fn() -> Result<()>| -> Result<()> {
            nccl::group_start().map_err(nccl_err("ncclGroupStart"))?;
            let r = body();
            let end = nccl::group_end().map_err(nccl_err("ncclGroupEnd"));
            r.and(end.map(|_| ()))
        };
        // SAFETY (for every block below): `send` holds `send_elems` and `recv` holds
        // `recv_elems` elements of the call (checked above against the allocations), and
        // each arm addresses only whole `block`-byte blocks inside those ranges: at most
        // `ranks` blocks of whichever side holds `ranks * count` elements. The
        // communicator and the stream are alive; NCCL permits send == recv (in place).
        let peer_send = |buf: *const u8, n: usize, peer: usize| {
            unsafe { nccl::send(buf.cast(), n, t, peer as i32, comm, s) }
                .map(|_| ())
                .map_err(nccl_err("ncclSend"))
        };
        let peer_recv = |buf: *mut u8, n: usize, peer: usize| {
            unsafe { nccl::recv(buf.cast(), n, t, peer as i32, comm, s) }
                .map(|_| ())
                .map_err(nccl_err("ncclRecv"))
        };
        let (sb, rb) = (send.cast::<u8>(), recv.cast::<u8>());
        let count = c.count;
        match c.primitive {
            Primitive::AllReduce => unsafe { nccl::all_reduce(send, recv, count, t, op, comm, s) }
                .map(|_| ())
                .map_err(nccl_err("ncclAllReduce")),
            Primitive::AllGather => unsafe { nccl::all_gather(send, recv, count, t, comm, s) }
                .map(|_| ())
                .map_err(nccl_err("ncclAllGather")),
            Primitive::ReduceScatter => {
                unsafe { nccl::reduce_scatter(send, recv, count, t, op, comm, s) }
                    .map(|_| ())
                    .map_err(nccl_err("ncclReduceScatter"))
            }
            Primitive::Broadcast => unsafe { nccl::broadcast(send, recv, count, t, root, comm, s) }
                .map(|_| ())
                .map_err(nccl_err("ncclBroadcast")),
            Primitive::Reduce => unsafe { nccl::reduce(send, recv, count, t, op, root, comm, s) }
                .map(|_| ())
                .map_err(nccl_err("ncclReduce")),
            // NCCL has no alltoall call: a group of one send and one receive per peer, as
            // nccl-tests does it.
            Primitive::AllToAll => group(&|| {
                for p in 0..ranks {
                    peer_send(sb.wrapping_add(p * block), count, p)?;
                    peer_recv(rb.wrapping_add(p * block), count, p)?;
                }
                Ok(())
            }),
            // A ring shift: send to the next rank, receive from the previous one.
            Primitive::SendRecv => group(&|| {
                peer_send(sb, count, (rank + 1) % ranks)?;
                peer_recv(rb, count, (rank + ranks - 1) % ranks)
            }),
            Primitive::Scatter => group(&|| {
                if rank == c.root as usize {
                    for p in 0..ranks {
                        peer_send(sb.wrapping_add(p * block), count, p)?;
                    }
                }
                peer_recv(rb, count, c.root as usize)
            }),
            Primitive::Gather => group(&|| {
                peer_send(sb, count, c.root as usize)?;
                if rank == c.root as usize {
                    for p in 0..ranks {
                        peer_recv(rb.wrapping_add(p * block), count, p)?;
                    }
                }
                Ok(())
            }),
            // Recursive doubling (nccl-tests' hypercube): the own block to block `rank`
            // of the output unless it is already there (in place), then log2(n)
            // exchanges of the 2^k blocks gathered so far with partner rank ^ 2^k.
            Primitive::HyperCube => {
                let own = rb.wrapping_add(rank * block);
                if own.cast_const() != sb {
                    unsafe { cu::memcpy_dtod_async(own as u64, sb as u64, block, self.stream) }
                        .map_err(cuda_err("copying the own block"))?;
                }
                let mut mask = 1;
                while mask < ranks {
                    let mine = rank & !(mask - 1);
                    let theirs = mine ^ mask;
                    group(&|| {
                        peer_send(rb.wrapping_add(mine * block), count * mask, rank ^ mask)?;
                        peer_recv(rb.wrapping_add(theirs * block), count * mask, rank ^ mask)
                    })?;
                    mask <<= 1;
                }
                Ok(())
            }
        }
    }

    /// Launches `call` `n` times and waits for all of them: warm-up, and the checked call.
    pub fn calls(&self, call: &NcclCall, n: u64) -> Result<()> {
        for _ in 0..n {
            self.launch(call)?;
        }
        self.synchronize()
    }

    /// nccl-tests' timed loop: one host timer around `iters` back-to-back launches and
    /// the wait for the stream to drain, nothing between launches. Returns the loop's
    /// nanoseconds. `progress` is bumped per launch: when the GPU stalls, launches block
    /// (NCCL's queue fills) or the final wait does, so a stalled peer stops it.
    pub fn loop_time(&self, call: &NcclCall, iters: u64, progress: &AtomicU64) -> Result<u64> {
        let start = std::time::Instant::now();
        for i in 0..iters {
            self.launch(call)?;
            progress.store(i + 1, Ordering::Relaxed);
        }
        self.synchronize()?;
        Ok(start.elapsed().as_nanos() as u64)
    }

    /// The per-iteration view, in a pass of its own after [`Self::loop_time`]: each
    /// launch between two CUDA events on the stream ([`timed_on_stream`]); returns
    /// per-iteration GPU times in ns. A separate pass because recording and reading
    /// events costs host time between launches that nccl-tests' loop does not spend.
    pub fn iteration_times(
        &self,
        call: &NcclCall,
        iters: u64,
        progress: &AtomicU64,
    ) -> Result<Vec<u64>> {
        timed_on_stream(self.stream, 0, iters, || self.launch(call), Some(progress))
    }
}

/// Runs `warmup` untimed and then `iters` timed calls of `launch` (which enqueues work on
/// `stream`), each timed iteration between two CUDA events recorded on the stream, and
/// returns per-iteration GPU times in ns. The host only enqueues; it waits on the events,
/// so the times are the GPU's, not the enqueue's (nccl-tests' and the CUDA bandwidth
/// samples' method). `progress` is bumped as iterations complete.
pub(crate) fn timed_on_stream(
    stream: cusys::CUstream,
    warmup: u64,
    iters: u64,
    mut launch: impl FnMut() -> Result<()>,
    progress: Option<&AtomicU64>,
) -> Result<Vec<u64>> {
    for _ in 0..warmup {
        launch()?;
    }
    // SAFETY: the caller's stream is alive for the duration of this call.
    unsafe { cu::stream::synchronize(stream) }.map_err(cuda_err("waiting for the GPU"))?;
    // Events are reused block by block, so memory stays bounded for any -n; between
    // blocks the host drains the stream, a gap that falls outside every timed pair.
    const BLOCK: u64 = 1024;
    let events = (0..=iters.clamp(1, BLOCK))
        .map(|_| cu::event::create(cusys::CUevent_flags::CU_EVENT_DEFAULT))
        .collect::<Result<Vec<_>, _>>()
        .map_err(cuda_err("creating CUDA events"))?;
    let s = stream;
    let run = (|| -> Result<Vec<u64>> {
        let mut times = Vec::with_capacity(iters as usize);
        let mut done = 0;
        while done < iters {
            let block = (iters - done).min(BLOCK) as usize;
            // SAFETY: events and stream are alive until the end of this function.
            unsafe { cu::event::record(events[0], s) }.map_err(cuda_err("recording an event"))?;
            for e in &events[1..=block] {
                launch()?;
                // SAFETY: as above.
                unsafe { cu::event::record(*e, s) }.map_err(cuda_err("recording an event"))?;
            }
            for w in events[..=block].windows(2) {
                // SAFETY: both events were recorded on `s`; waiting on the later one
                // makes the pair's elapsed time readable.
                let ms = unsafe {
                    cu::event::synchronize(w[1]).map_err(cuda_err("waiting for the GPU"))?;
                    cu::event::elapsed(w[0], w[1]).map_err(cuda_err("reading CUDA event times"))?
                };
                if let Some(p) = progress {
                    p.fetch_add(1, Ordering::Relaxed);
                }
                times.push((f64::from(ms) * 1e6).round() as u64);
            }
            done += block as u64;
        }
        Ok(times)
    })();
    for e in events {
        // SAFETY: each event is destroyed once; the stream has passed all of them or
        // the run failed (destroying a pending event is allowed).
        let _ = unsafe { cu::event::destroy(e) };
    }
    run
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        // SAFETY: the communicator came from ncclCommInitRank and is destroyed once, after
        // the harness synchronised the stream.
        let _ = unsafe { nccl::comm_destroy(self.comm) };
    }
}
