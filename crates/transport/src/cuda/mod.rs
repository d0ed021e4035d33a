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
pub mod device;
pub mod facts;
pub mod memory;
pub mod nccl_error;

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

/// The node-local rank from the launcher's variables (Open MPI, Slurm, MPICH/Hydra), for
/// tools that pick a GPU before or without MPI (`bench-bw --use-cuda auto`). Under MPI,
/// bench-collective asks MPI instead (`bootstrap::node`), which works under any launcher.
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

/// An NCCL failure outside a communicator (unique id, group calls): the code, NCCL's
/// text and last error, the NCCL_DEBUG hint ([`nccl_error`]).
fn nccl_err(what: &str) -> impl FnOnce(nccl::NcclError) -> anyhow::Error + '_ {
    move |e| anyhow!(nccl_error::describe(what, e.0, std::ptr::null_mut()))
}

/// An NCCL failure of a call on `comm` (its last error is the communicator's).
fn nccl_comm_err(
    what: &str,
    comm: ncclsys::ncclComm_t,
) -> impl FnOnce(nccl::NcclError) -> anyhow::Error + '_ {
    move |e| anyhow!(nccl_error::describe(what, e.0, comm))
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

    /// Opens the GPU of the rank that is `node.rank` of `node.size` on its node
    /// ([`device::pick`]: the override variable, the only visible GPU, or the local rank).
    /// Returns the GPU and why it was chosen.
    pub fn open_for(local_rank: u32, local_size: u32) -> Result<(Self, device::Why)> {
        let visible = Self::count()?;
        let over = std::env::var(device::OVERRIDE).ok();
        let (ordinal, why) = device::pick(local_rank, local_size, visible, over.as_deref())
            .map_err(anyhow::Error::msg)?;
        Ok((Self::open(ordinal)?, why))
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

    /// Copies `data` to `offset` and waits until it is in device memory. A pageable
    /// `cuMemcpyHtoD` returns once the bytes are staged, before the DMA to the device is
    /// done, on the legacy stream, with which the collectives' non-blocking stream does not
    /// synchronise: without the wait, a collective could read the poison under the input.
    /// nccl-tests does the same (`cudaDeviceSynchronize` after initialising data).
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        let dst = self.range(offset, data.len())?;
        // SAFETY: `dst .. dst + data.len()` lies inside the allocation (checked above).
        unsafe { cu::memcpy_htod_sync(dst, data) }.map_err(cuda_err("copying to the GPU"))?;
        device_synchronize("copying to the GPU")
    }

    /// Copies `out.len()` bytes from `offset` (synchronous).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let src = self.range(offset, out.len())?;
        // SAFETY: the source range lies inside the allocation (checked above).
        unsafe { cu::memcpy_dtoh_sync(out, src) }.map_err(cuda_err("copying from the GPU"))
    }

    /// Sets every byte to `byte` and waits until it is done (`cuMemsetD8` on device
    /// memory is asynchronous to the host, on the legacy stream: see [`Self::write`]).
    pub fn fill(&mut self, byte: u8) -> Result<()> {
        // SAFETY: the whole allocation, `len` bytes.
        unsafe { cu::memset_d8_sync(self.ptr, byte, self.len) }
            .map_err(cuda_err("filling GPU memory"))?;
        device_synchronize("filling GPU memory")
    }
}

/// `cuCtxSynchronize`: waits for all work of the current context on every stream.
fn device_synchronize(what: &str) -> Result<()> {
    cu::ctx::synchronize().map_err(cuda_err(what))
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
        DataType::Float8e4m3 => ncclFloat8e4m3,
        DataType::Float8e5m2 => ncclFloat8e5m2,
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
    /// Set once `ncclCommAbort` has run (after an asynchronous error): the communicator
    /// is gone and must not be destroyed again.
    aborted: std::cell::Cell<bool>,
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
            .map_err(nccl_comm_err("creating the NCCL communicator", comm))?;
        Ok(Self {
            comm,
            stream: gpu.stream,
            ranks: ranks as usize,
            rank: rank as usize,
            aborted: std::cell::Cell::new(false),
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    fn stream(&self) -> ncclsys::cudaStream_t {
        self.stream as ncclsys::cudaStream_t
    }

    /// `ncclCommGetAsyncError`: an error NCCL met while the GPU ran the enqueued calls
    /// (a peer died, the network failed). On one, the communicator is aborted
    /// (`ncclCommAbort`, as nccl-tests does: its kernels would otherwise spin forever) and
    /// the error says what NCCL said.
    fn check_async(&self) -> Result<()> {
        ensure!(
            !self.aborted.get(),
            "the NCCL communicator was aborted after an earlier error"
        );
        let mut state = ncclsys::ncclResult_t::ncclSuccess;
        // SAFETY: a live communicator and a valid out-pointer.
        let r = unsafe { ncclsys::ncclCommGetAsyncError(self.comm, &mut state) };
        use ncclsys::ncclResult_t::{ncclInProgress, ncclSuccess};
        let bad = [r, state]
            .into_iter()
            .find(|c| !matches!(c, ncclSuccess | ncclInProgress));
        if let Some(code) = bad {
            let msg = nccl_error::describe(
                "while the GPU ran the collective (ncclCommGetAsyncError)",
                code,
                self.comm,
            );
            // SAFETY: aborted once; `aborted` keeps Drop from destroying it again.
            let _ = unsafe { nccl::comm_abort(self.comm) };
            self.aborted.set(true);
            bail!("{msg}; the NCCL communicator was aborted");
        }
        Ok(())
    }

    /// Waits until the stream has run everything enqueued, polling (`cuStreamQuery`) and
    /// reading NCCL's asynchronous error between polls, as nccl-tests'
    /// `testStreamSynchronize` does: a network error ends the wait with NCCL's reason,
    /// not with the watchdog's.
    fn synchronize(&self) -> Result<()> {
        poll_until(
            // SAFETY: the stream belongs to the Gpu, which outlives this communicator.
            || unsafe { cusys::cuStreamQuery(self.stream) },
            || self.check_async(),
            "waiting for the GPU",
        )
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
            nccl::group_start().map_err(nccl_comm_err("ncclGroupStart", comm))?;
            let r = body();
            let end = nccl::group_end().map_err(nccl_comm_err("ncclGroupEnd", comm));
            r.and(end.map(|_| ()))
        };
        // SAFETY (for every block below): `send` holds `send_elems` and `recv` holds
        // `recv_elems` elements of the call (checked above against the allocations), and
        // each arm addresses only whole `block`-byte blocks inside those ranges: at most
        // `ranks` blocks of whichever side holds `ranks * count` elements. The
        // communicator and the stream are alive; NCCL permits send == recv (in place).
        let peer_send = |buf: *const u8, n: usize, peer: usize| {
            // SAFETY: the ranges, communicator and stream checked in the comment above.
            unsafe { nccl::send(buf.cast(), n, t, peer as i32, comm, s) }
                .map(|_| ())
                .map_err(nccl_comm_err("ncclSend", comm))
        };
        let peer_recv = |buf: *mut u8, n: usize, peer: usize| {
            // SAFETY: the ranges, communicator and stream checked in the comment above.
            unsafe { nccl::recv(buf.cast(), n, t, peer as i32, comm, s) }
                .map(|_| ())
                .map_err(nccl_comm_err("ncclRecv", comm))
        };
        let (sb, rb) = (send.cast::<u8>(), recv.cast::<u8>());
        let count = c.count;
        match c.primitive {
            // SAFETY: the ranges, communicator and stream checked in the comment above.
            Primitive::AllReduce => unsafe { nccl::all_reduce(send, recv, count, t, op, comm, s) }
                .map(|_| ())
                .map_err(nccl_comm_err("ncclAllReduce", comm)),
            // SAFETY: the ranges, communicator and stream checked in the comment above.
            Primitive::AllGather => unsafe { nccl::all_gather(send, recv, count, t, comm, s) }
                .map(|_| ())
                .map_err(nccl_comm_err("ncclAllGather", comm)),
            Primitive::ReduceScatter => {
                // SAFETY: the ranges, communicator and stream checked in the comment above.
                unsafe { nccl::reduce_scatter(send, recv, count, t, op, comm, s) }
                    .map(|_| ())
                    .map_err(nccl_comm_err("ncclReduceScatter", comm))
            }
            // SAFETY: the ranges, communicator and stream checked in the comment above.
            Primitive::Broadcast => unsafe { nccl::broadcast(send, recv, count, t, root, comm, s) }
                .map(|_| ())
                .map_err(nccl_comm_err("ncclBroadcast", comm)),
            // SAFETY: the ranges, communicator and stream checked in the comment above.
            Primitive::Reduce => unsafe { nccl::reduce(send, recv, count, t, op, root, comm, s) }
                .map(|_| ())
                .map_err(nccl_comm_err("ncclReduce", comm)),
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
                    // SAFETY: both blocks lie in the checked ranges of `send` and `recv`, and
                    // the stream is alive.
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

    /// Rows to and from every peer in one group, and the wait for them: NCCL has no
    /// all-to-all-v, so as DeepEP's and UCCL-EP's NCCL baselines do, one `ncclSend` and one
    /// `ncclRecv` of bytes per peer with rows for it, between `ncclGroupStart` and
    /// `ncclGroupEnd`. `send_counts[p]` rows of `row` bytes, packed in peer order from the
    /// start of `send`, go to rank p; `recv_counts[p]` come from it, packed likewise into
    /// `recv` (the counts must mirror the peers', as the count exchange before makes them).
    pub fn exchange_rows(
        &self,
        send: &DeviceBuffer,
        recv: &DeviceBuffer,
        row: usize,
        send_counts: &[usize],
        recv_counts: &[usize],
    ) -> Result<()> {
        ensure!(
            send_counts.len() == self.ranks && recv_counts.len() == self.ranks,
            "internal error: {} send and {} receive counts for {} ranks",
            send_counts.len(),
            recv_counts.len(),
            self.ranks
        );
        let (sent, got): (usize, usize) = (send_counts.iter().sum(), recv_counts.iter().sum());
        let sb = send.range(0, sent * row)? as *const u8;
        let rb = recv.range(0, got * row)? as *mut u8;
        let (comm, s, t) = (self.comm, self.stream(), ncclsys::ncclDataType_t::ncclUint8);
        nccl::group_start().map_err(nccl_comm_err("ncclGroupStart", comm))?;
        let (mut at_s, mut at_r) = (0usize, 0usize);
        let mut body = || -> Result<()> {
            for p in 0..self.ranks {
                let (ns, nr) = (send_counts[p] * row, recv_counts[p] * row);
                if ns > 0 {
                    // SAFETY: `at_s + ns` never exceeds `sent * row`, the range checked
                    // inside `send` above; the communicator and stream are alive.
                    unsafe { nccl::send(sb.wrapping_add(at_s).cast(), ns, t, p as i32, comm, s) }
                        .map_err(nccl_comm_err("ncclSend", comm))?;
                }
                if nr > 0 {
                    // SAFETY: as above, inside the `got * row` bytes checked in `recv`.
                    unsafe { nccl::recv(rb.wrapping_add(at_r).cast(), nr, t, p as i32, comm, s) }
                        .map_err(nccl_comm_err("ncclRecv", comm))?;
                }
                at_s += ns;
                at_r += nr;
            }
            Ok(())
        };
        let r = body();
        let end = nccl::group_end().map_err(nccl_comm_err("ncclGroupEnd", comm));
        r.and(end.map(|_| ()))?;
        self.synchronize()
    }

    /// Launches `call` `n` times and waits for all of them: warm-up, and the checked call.
    pub fn calls(&self, call: &NcclCall, n: u64) -> Result<()> {
        for _ in 0..n {
            self.launch(call)?;
        }
        self.synchronize()
    }

    /// nccl-tests' timed loop: one host timer around `iters` back-to-back launches and
    /// the wait for the stream to drain. Returns the loop's nanoseconds.
    ///
    /// `progress` counts completed calls, not launches (a launch returns at once; a long
    /// healthy queue of GiB calls would otherwise look stalled to the watchdog while the
    /// final wait drains it): an event is recorded after every `stride`-th launch
    /// ([`mark_stride`], at most [`MARKS`] events per loop), and between launches and during
    /// the final wait the events that completed move `progress` on, while NCCL's
    /// asynchronous error is read ([`Self::check_async`]). Recording an event costs the
    /// host about a microsecond per mark, next to an NCCL launch's several.
    pub fn loop_time(&self, call: &NcclCall, iters: u64, progress: &AtomicU64) -> Result<u64> {
        let stride = mark_stride(iters);
        let events = Events::new(iters.div_ceil(stride) as usize)?;
        let mut marks: Vec<(cusys::CUevent, u64)> = Vec::with_capacity(events.0.len());
        let mut seen = 0;
        let start = std::time::Instant::now();
        for i in 0..iters {
            self.launch(call)?;
            let n = i + 1;
            if n % stride == 0 || n == iters {
                let e = events.0[marks.len()];
                // SAFETY: event and stream are alive for this call.
                unsafe { cu::event::record(e, self.stream) }
                    .map_err(cuda_err("recording an event"))?;
                marks.push((e, n));
                seen = count_done(&marks, seen, progress)?;
            }
        }
        for &(e, n) in &marks[seen.min(marks.len())..] {
            poll_until(
                // SAFETY: recorded on the stream above; alive until `events` drops.
                || unsafe { cusys::cuEventQuery(e) },
                || self.check_async(),
                "waiting for the GPU",
            )?;
            progress.store(n, Ordering::Relaxed);
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
        timed_on_stream(
            self.stream,
            0,
            iters,
            || self.launch(call),
            Some(progress),
            &|| self.check_async(),
            None,
        )
    }
}

/// At most this many completion marks (CUDA events) per timed loop.
pub const MARKS: u64 = 64;

/// Launches between two completion marks of a loop of `iters` launches: every launch up
/// to [`MARKS`] iterations, then evenly spaced so a loop records at most [`MARKS`] events.
pub fn mark_stride(iters: u64) -> u64 {
    iters.div_ceil(MARKS).max(1)
}

/// CUDA events made for one call, destroyed when dropped.
struct Events(Vec<cusys::CUevent>);

impl Events {
    fn new(n: usize) -> Result<Self> {
        let mut v = Events(Vec::with_capacity(n));
        for _ in 0..n {
            v.0.push(
                cu::event::create(cusys::CUevent_flags::CU_EVENT_DEFAULT)
                    .map_err(cuda_err("creating CUDA events"))?,
            );
        }
        Ok(v)
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        for e in &self.0 {
            // SAFETY: each event is destroyed once; destroying a pending event is allowed.
            let _ = unsafe { cu::event::destroy(*e) };
        }
    }
}

/// Moves `progress` over the marks from `seen` on that have completed (non-blocking
/// `cuEventQuery`); returns the new count of completed marks.
fn count_done(
    marks: &[(cusys::CUevent, u64)],
    mut seen: usize,
    progress: &AtomicU64,
) -> Result<usize> {
    while let Some(&(e, n)) = marks.get(seen) {
        // SAFETY: the event was recorded and is alive (owned by the caller's `Events`).
        match unsafe { cusys::cuEventQuery(e) } {
            cusys::CUresult::CUDA_SUCCESS => {
                progress.store(n, Ordering::Relaxed);
                seen += 1;
            }
            cusys::CUresult::CUDA_ERROR_NOT_READY => break,
            other => return Err(cuda_err("waiting for the GPU")(cu::DriverError(other))),
        }
    }
    Ok(seen)
}

/// Polls `query` (a `cuStreamQuery` or `cuEventQuery`) until it says done, calling `check`
/// (NCCL's asynchronous error) between polls. The host spins, yielding the CPU, as
/// nccl-tests' `testStreamSynchronize` does; the watchdog bounds the wait.
fn poll_until(
    query: impl Fn() -> cusys::CUresult,
    check: impl Fn() -> Result<()>,
    what: &str,
) -> Result<()> {
    loop {
        match query() {
            cusys::CUresult::CUDA_SUCCESS => return Ok(()),
            cusys::CUresult::CUDA_ERROR_NOT_READY => {
                check()?;
                std::thread::yield_now();
            }
            other => return Err(cuda_err(what)(cu::DriverError(other))),
        }
    }
}

/// Runs `warmup` untimed and then `iters` timed calls of `launch` (which enqueues work on
/// `stream`), each timed iteration between two CUDA events recorded on the stream, and
/// returns per-iteration GPU times in ns. The host only enqueues; it waits on the events,
/// so the times are the GPU's, not the enqueue's (nccl-tests' and the CUDA bandwidth
/// samples' method). `progress` is bumped as iterations complete.
///
/// With a `gate` the stream is held before each block and released once the whole block
/// is queued ([`copy::Gate`]): work shorter than its own enqueue (a small memcpy) then
/// runs back to back on the GPU, and the events time the work, not the host's rate.
pub(crate) fn timed_on_stream(
    stream: cusys::CUstream,
    warmup: u64,
    iters: u64,
    mut launch: impl FnMut() -> Result<()>,
    progress: Option<&AtomicU64>,
    check: &dyn Fn() -> Result<()>,
    gate: Option<&copy::Gate>,
) -> Result<Vec<u64>> {
    for _ in 0..warmup {
        launch()?;
    }
    // SAFETY: the caller's stream is alive for the duration of this call.
    let query_stream = || unsafe { cusys::cuStreamQuery(stream) };
    poll_until(query_stream, check, "waiting for the GPU")?;
    // Events are reused block by block, so memory stays bounded for any -n; between
    // blocks the host drains the stream, a gap that falls outside every timed pair.
    // A held block stays short (nvbandwidth queues 16 copies behind its blocking kernel):
    // the host must never block on a full queue before it releases the gate.
    let block_len: u64 = if gate.is_some() {
        copy::GATED_BLOCK
    } else {
        1024
    };
    let events = (0..=iters.clamp(1, block_len))
        .map(|_| cu::event::create(cusys::CUevent_flags::CU_EVENT_DEFAULT))
        .collect::<Result<Vec<_>, _>>()
        .map_err(cuda_err("creating CUDA events"))?;
    let s = stream;
    let run = (|| -> Result<Vec<u64>> {
        let mut times = Vec::with_capacity(iters as usize);
        let mut done = 0;
        while done < iters {
            let block = (iters - done).min(block_len) as usize;
            // Released when dropped: on every path out of the block, errors included.
            let held = gate.map(|g| g.hold(s)).transpose()?;
            // SAFETY: events and stream are alive until the end of this function.
            unsafe { cu::event::record(events[0], s) }.map_err(cuda_err("recording an event"))?;
            for e in &events[1..=block] {
                launch()?;
                // SAFETY: as above.
                unsafe { cu::event::record(*e, s) }.map_err(cuda_err("recording an event"))?;
            }
            drop(held);
            for w in events[..=block].windows(2) {
                // SAFETY: both events were recorded on `s`; waiting on the later one
                // makes the pair's elapsed time readable.
                let later = w[1];
                poll_until(
                    // SAFETY: `later` was recorded on `s` and lives until `events` drops.
                    || unsafe { cusys::cuEventQuery(later) },
                    check,
                    "waiting for the GPU",
                )?;
                // SAFETY: both events were recorded on `s`, and the later one has completed.
                let ms = unsafe {
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
        if self.aborted.get() {
            return;
        }
        // SAFETY: the communicator came from ncclCommInitRank and is destroyed once, after
        // the harness synchronised the stream (an aborted one is already gone).
        let _ = unsafe { nccl::comm_destroy(self.comm) };
    }
}
