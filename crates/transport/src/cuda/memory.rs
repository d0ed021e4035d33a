//! GPU memory a NIC can use: device allocations (never managed memory, which would
//! silently measure host memory), their dma-buf export, pinned host memory, and the
//! staging buffers of TCP with `--use-cuda`.
//!
//! Allocation follows what GPUDirect needs: sizes rounded up to the GPU's 64 KiB page (the
//! granularity nvidia_peermem and dma-buf pin), `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` set so
//! the driver's copies are synchronous with respect to RDMA into the same memory, and the
//! pointer checked to be plain device memory.

use std::cell::Cell;
use std::ffi::c_void;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;

use anyhow::{anyhow, bail, ensure, Result};
use cudarc::driver::{result as cu, sys as cusys};

use super::facts;
use crate::gpu::{GpuBuffer, StageMaker, StagedBuffer};
use results::MemorySide;

/// GPU page size: the granularity GPU memory is pinned and exported at.
pub const GPU_PAGE: usize = 64 << 10;

fn cuda_err(what: &str) -> impl FnOnce(cu::DriverError) -> anyhow::Error + '_ {
    move |e| anyhow!("{what}: {}", facts::error_name(e))
}

thread_local! {
    /// The context this thread made current last (cuCtxSetCurrent is cheap, but not free
    /// inside a staged ping-pong).
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// One GPU's primary context, retained for the life of the process.
pub struct GpuContext {
    ordinal: u32,
    ctx: cusys::CUcontext,
}

// SAFETY: a CUDA context handle may be made current on any thread (the driver API is
// thread-safe); this type only hands it to cuCtxSetCurrent and the copy calls.
unsafe impl Send for GpuContext {}
// SAFETY: as above; no interior state besides the handle.
unsafe impl Sync for GpuContext {}

impl GpuContext {
    /// Retains GPU `ordinal`'s primary context (the one the runtime and NCCL use too) and
    /// makes it current on this thread. The driver must be checked first
    /// ([`facts::check_driver`]).
    pub fn open(ordinal: u32) -> Result<Arc<GpuContext>> {
        let dev = cu::device::get(ordinal as i32).map_err(cuda_err("opening the GPU"))?;
        // SAFETY: dev is a valid device; the primary context is retained and never
        // released, so the handle stays valid for the process.
        let ctx =
            unsafe { cu::primary_ctx::retain(dev) }.map_err(cuda_err("creating a CUDA context"))?;
        let me = Arc::new(GpuContext { ordinal, ctx });
        me.make_current()?;
        Ok(me)
    }

    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// Makes the context current on the calling thread (a no-op when it already is).
    pub fn make_current(&self) -> Result<()> {
        let id = self.ctx as usize;
        if CURRENT.with(|c| c.get()) == id {
            return Ok(());
        }
        // SAFETY: ctx is a retained primary context (valid for the process).
        unsafe { cu::ctx::set_current(self.ctx) }
            .map_err(cuda_err("making the CUDA context current"))?;
        CURRENT.with(|c| c.set(id));
        Ok(())
    }

    pub(crate) fn raw(&self) -> cusys::CUcontext {
        self.ctx
    }
}

/// Device memory from cuMemAlloc, a whole number of GPU pages.
pub struct DeviceMemory {
    ctx: Arc<GpuContext>,
    ptr: cusys::CUdeviceptr,
    len: usize,
}

impl DeviceMemory {
    /// Allocates at least `len` bytes on the context's GPU, zeroed.
    pub fn alloc(ctx: &Arc<GpuContext>, len: usize) -> Result<DeviceMemory> {
        ctx.make_current()?;
        let len = len.max(1).div_ceil(GPU_PAGE) * GPU_PAGE;
        // SAFETY: the context is current on this thread; len > 0.
        let ptr = unsafe { cu::malloc_sync(len) }.map_err(|e| {
            anyhow!(
                "allocating {len} bytes on GPU {}: {} (is the GPU's memory used by another process? see nvidia-smi)",
                ctx.ordinal,
                facts::error_name(e)
            )
        })?;
        let me = DeviceMemory {
            ctx: ctx.clone(),
            ptr,
            len,
        };
        // GPUDirect RDMA needs synchronous memory operations on the range: a cuMemcpy that
        // returned must be visible to the NIC, and RDMA writes to later copies.
        let one: u32 = 1;
        // SAFETY: ptr is our live allocation; the attribute takes a pointer to an unsigned int.
        unsafe {
            cusys::cuPointerSetAttribute(
                (&one as *const u32).cast(),
                cusys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                ptr,
            )
        }
        .result()
        .map_err(cuda_err("setting SYNC_MEMOPS on GPU memory"))?;
        let (mut kind, mut managed): (u32, u32) = (0, 0);
        // SAFETY: out-pointers sized for the attributes (CUmemorytype and a bool as unsigned int).
        let ok = unsafe {
            cusys::cuPointerGetAttribute(
                (&mut kind as *mut u32).cast(),
                cusys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                ptr,
            )
            .result()
            .and_then(|_| {
                cusys::cuPointerGetAttribute(
                    (&mut managed as *mut u32).cast(),
                    cusys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
                    ptr,
                )
                .result()
            })
        };
        ok.map_err(cuda_err("checking the GPU pointer"))?;
        ensure!(
            kind == cusys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 && managed == 0,
            "GPU memory from cuMemAlloc reports memory type {kind}, managed {managed}: refusing to \
             measure what might be host memory"
        );
        me.fill(0)?;
        Ok(me)
    }

    fn range(&self, off: usize, n: usize) -> Result<cusys::CUdeviceptr> {
        ensure!(
            off.checked_add(n).is_some_and(|e| e <= self.len),
            "internal error: {n} bytes at {off} exceed a {}-byte GPU buffer",
            self.len
        );
        Ok(self.ptr + off as u64)
    }

    /// Sets every byte (synchronous).
    pub fn fill(&self, byte: u8) -> Result<()> {
        self.ctx.make_current()?;
        // SAFETY: the whole allocation.
        unsafe { cu::memset_d8_sync(self.ptr, byte, self.len) }
            .map_err(cuda_err("filling GPU memory"))
    }

    pub(crate) fn raw(&self) -> cusys::CUdeviceptr {
        self.ptr
    }

    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }
}

impl GpuBuffer for DeviceMemory {
    fn device_ptr(&self) -> u64 {
        self.ptr
    }

    fn len(&self) -> usize {
        self.len
    }

    fn export_dmabuf(&self) -> Result<(OwnedFd, u64)> {
        if !facts::has_symbol("cuMemGetHandleForAddressRange") {
            bail!(
                "CUDA_ERROR_NOT_FOUND: this libcuda has no cuMemGetHandleForAddressRange (driver \
                 older than CUDA 11.7)"
            );
        }
        self.ctx.make_current()?;
        // Export the whole allocation the pointer lies in, as the driver knows it
        // (cuMemGetAddressRange: its base and size, page-aligned as the export requires),
        // and hand the NIC our offset inside it. cuMemAlloc does not promise more than
        // host-page alignment, so rounding our own pointer could step outside the
        // allocation (CUDA_ERROR_INVALID_VALUE). NCCL and UCX export the same way.
        let (mut base, mut alloc_size): (cusys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: valid out-pointers; `ptr` is a live device pointer of this context.
        let r = unsafe { cusys::cuMemGetAddressRange_v2(&mut base, &mut alloc_size, self.ptr) };
        if let Err(e) = r.result() {
            bail!(
                "asking the driver for the allocation's range: {}",
                facts::error_name(e)
            );
        }
        let (start, size, offset) =
            dmabuf_range(self.ptr, self.len as u64, base, alloc_size as u64)
                .map_err(anyhow::Error::msg)?;
        let mut fd: i32 = -1;
        // SAFETY: fd is a valid out-pointer for the int the DMA_BUF_FD handle type writes;
        // the range is the allocation's own, as the driver reported it.
        let r = unsafe {
            cusys::cuMemGetHandleForAddressRange(
                (&mut fd as *mut i32).cast::<c_void>(),
                start,
                size as usize,
                cusys::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                0,
            )
        };
        if let Err(e) = r.result() {
            bail!("{}", facts::error_name(e));
        }
        ensure!(fd >= 0, "cuMemGetHandleForAddressRange returned no fd");
        // SAFETY: the driver gave us a new fd that nothing else owns.
        Ok((unsafe { OwnedFd::from_raw_fd(fd) }, offset))
    }

    fn copy_in(&self, off: usize, data: &[u8]) -> Result<()> {
        let dst = self.range(off, data.len())?;
        self.ctx.make_current()?;
        // SAFETY: dst..dst+len lies in the allocation (checked).
        unsafe { cu::memcpy_htod_sync(dst, data) }.map_err(cuda_err("copying to the GPU"))
    }

    fn copy_out(&self, off: usize, out: &mut [u8]) -> Result<()> {
        let src = self.range(off, out.len())?;
        self.ctx.make_current()?;
        // SAFETY: the source range lies in the allocation (checked).
        unsafe { cu::memcpy_dtoh_sync(out, src) }.map_err(cuda_err("copying from the GPU"))
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc in `alloc`, freed once; the NIC registration of
        // this memory (which holds a Box of it) is released before it is dropped.
        let _ = self.ctx.make_current();
        // SAFETY: allocated by cuMemAlloc in `alloc` and freed once, here (see above).
        let _ = unsafe { cu::free_sync(self.ptr) };
    }
}

/// Page-locked host memory from cuMemHostAlloc (portable to every context): what copies to
/// and from the GPU stream through at full PCIe speed.
pub struct PinnedHost {
    ctx: Arc<GpuContext>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: plain memory owned by this value; the pointer is used only through &/&mut self.
unsafe impl Send for PinnedHost {}

impl PinnedHost {
    pub fn alloc(ctx: &Arc<GpuContext>, len: usize) -> Result<PinnedHost> {
        ctx.make_current()?;
        let len = len.max(1);
        // SAFETY: the context is current; len > 0.
        let ptr = unsafe { cu::malloc_host(len, cusys::CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(cuda_err("allocating pinned host memory"))?;
        // SAFETY: a fresh allocation of len bytes.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, len) };
        Ok(PinnedHost {
            ctx: ctx.clone(),
            ptr: ptr.cast(),
            len,
        })
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr..ptr+len is our allocation, initialised at allocation.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    pub(crate) fn raw(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        let _ = self.ctx.make_current();
        // SAFETY: allocated by cuMemHostAlloc, freed once, no copy in flight (copies here
        // are synchronous or synchronised before buffers drop).
        let _ = unsafe { cu::free_host(self.ptr.cast()) };
    }
}

/// A staged message: device memory and the pinned host memory it crosses PCIe through,
/// with a stream of its own. The synchronous `cuMemcpyDtoH`/`HtoD` would run on the legacy
/// default stream, which serialises all work of the context: a bidirectional run's
/// download (sending side) and upload (receiving side) would take turns on one copy queue.
/// On two non-blocking streams they run at once on the GPU's two copy engines, as a real
/// application's staging does.
pub struct CudaStage {
    dev: DeviceMemory,
    host: PinnedHost,
    size: usize,
    stream: cusys::CUstream,
}

// SAFETY: owns its memory; the context is made current on whichever thread uses it.
unsafe impl Send for CudaStage {}

impl StagedBuffer for CudaStage {
    fn host(&mut self) -> &mut [u8] {
        &mut self.host.as_mut_slice()[..self.size]
    }

    fn download(&mut self) -> Result<()> {
        self.dev.ctx.make_current()?;
        let s = self.stream;
        // SAFETY: host holds size bytes; the device range is within the allocation; the
        // stream is this stage's own and synchronised before the bytes are used.
        unsafe {
            cusys::cuMemcpyDtoHAsync_v2(self.host.raw().cast(), self.dev.raw(), self.size, s)
        }
        .result()
        .map_err(cuda_err("staging GPU memory to the host"))?;
        self.sync("staging GPU memory to the host")
    }

    fn upload(&mut self) -> Result<()> {
        self.dev.ctx.make_current()?;
        let s = self.stream;
        // SAFETY: as above, the other way.
        unsafe {
            cusys::cuMemcpyHtoDAsync_v2(self.dev.raw(), self.host.raw().cast(), self.size, s)
        }
        .result()
        .map_err(cuda_err("staging host memory to the GPU"))?;
        self.sync("staging host memory to the GPU")
    }

    fn write_device(&mut self, data: &[u8]) -> Result<()> {
        self.dev.copy_in(0, data)
    }

    fn read_device(&mut self, out: &mut [u8]) -> Result<()> {
        self.dev.copy_out(0, out)
    }
}

impl CudaStage {
    /// Waits for this stage's copy: the bytes are in place when it returns.
    fn sync(&self, what: &str) -> Result<()> {
        // SAFETY: the stream is this stage's own, alive until drop.
        unsafe { cu::stream::synchronize(self.stream) }.map_err(cuda_err(what))
    }
}

impl Drop for CudaStage {
    fn drop(&mut self) {
        let _ = self.dev.ctx.make_current();
        // SAFETY: created in `make`, destroyed once; every copy on it was synchronised.
        let _ = unsafe { cu::stream::destroy(self.stream) };
    }
}

/// Makes [`CudaStage`]s on one GPU.
pub struct CudaStageMaker {
    ctx: Arc<GpuContext>,
    side: MemorySide,
}

impl CudaStageMaker {
    pub fn new(ordinal: u32, side: MemorySide) -> Result<CudaStageMaker> {
        facts::check_driver()?;
        Ok(CudaStageMaker {
            ctx: GpuContext::open(ordinal)?,
            side,
        })
    }
}

impl StageMaker for CudaStageMaker {
    fn make(&self, size: usize) -> Result<Box<dyn StagedBuffer>> {
        let dev = DeviceMemory::alloc(&self.ctx, size)?;
        let host = PinnedHost::alloc(&self.ctx, size)?;
        self.ctx.make_current()?;
        let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map_err(cuda_err("creating a CUDA stream for staging"))?;
        Ok(Box::new(CudaStage {
            dev,
            host,
            size: size.max(1),
            stream,
        }))
    }

    fn side(&self) -> MemorySide {
        self.side.clone()
    }
}

/// The range to export as a dma-buf for `len` bytes at `ptr`, inside the allocation the
/// driver reports as `base .. base + size`: the whole allocation, and `ptr`'s offset in it
/// (what `ibv_reg_dmabuf_mr` takes). An error when the buffer does not lie inside it.
pub fn dmabuf_range(ptr: u64, len: u64, base: u64, size: u64) -> Result<(u64, u64, u64), String> {
    let inside = ptr >= base
        && ptr
            .checked_add(len)
            .is_some_and(|end| end <= base.saturating_add(size));
    if !inside || size == 0 {
        return Err(format!(
            "internal error: {len} bytes at {ptr:#x} are not inside the allocation \
             {base:#x}+{size} the driver reports"
        ));
    }
    Ok((base, size, ptr - base))
}

#[cfg(test)]
mod range_tests {
    use super::dmabuf_range;

    #[test]
    fn the_export_covers_the_allocation_and_gives_the_offset() {
        // A buffer at the start of its allocation: offset 0, the allocation's size.
        assert_eq!(
            dmabuf_range(0x7f00_0020_0000, 65536, 0x7f00_0020_0000, 2 << 20),
            Ok((0x7f00_0020_0000, 2 << 20, 0))
        );
        // Not page-aligned inside a larger allocation: the allocation, never a rounded guess.
        assert_eq!(
            dmabuf_range(0x1000_0200, 4096, 0x1000_0000, 1 << 16),
            Ok((0x1000_0000, 1 << 16, 0x200))
        );
        assert!(dmabuf_range(0x1000_0000, 1 << 17, 0x1000_0000, 1 << 16).is_err());
        assert!(dmabuf_range(0x0fff_f000, 16, 0x1000_0000, 1 << 16).is_err());
    }
}
