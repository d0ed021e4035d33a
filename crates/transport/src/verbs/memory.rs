//! Protection domain, registered memory, and the typed views of it that work requests take.
//!
//! Registering memory pins its pages (they may not move while the adapter DMAs into them)
//! and gives the adapter the translation, returning an lkey for local work requests and an
//! rkey the peer names in RDMA reads and writes. Pinned host pages count against
//! `RLIMIT_MEMLOCK` for unprivileged users, the usual cause of `ibv_reg_mr` failing.
//!
//! A [`MemoryRegion`] is one of:
//!
//! - host memory (page-aligned, `ibv_reg_mr`);
//! - host memory exported as a dma-buf (`ibv_reg_dmabuf_mr`, `--host-dmabuf`);
//! - GPU memory ([`GpuBuffer`], `--use-cuda`): exported as a dma-buf by the GPU driver and
//!   registered with `ibv_reg_dmabuf_mr`, or registered with `ibv_reg_mr` on the device
//!   pointer, which the nvidia_peermem kernel module resolves ("peermem").
//!
//! Work requests never see raw addresses and keys: a region hands out [`Local`] views
//! (bounds-checked, carrying the region's identity) and the peer's advertised region
//! becomes a [`RemoteRegion`] that hands out bounds-checked [`Remote`]s. A queue pair holds
//! the regions it may post from (see `qp`), so a wrong key, length or a region freed under
//! a pending request cannot come from safe code.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fmt;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Result};
use rdma_sys::*;
use serde::{Deserialize, Serialize};

use super::device::Context;
use super::dmabuf::HostDmabuf;
use super::{errno_text, last_errno};
use crate::gpu::{AttemptOutcome, CudaMem, GpuBuffer};

/// A protection domain: memory regions and queue pairs of one PD may be used together.
pub struct ProtectionDomain {
    pub(crate) pd: *mut ibv_pd,
    ctx: Rc<Context>,
}

impl ProtectionDomain {
    pub fn new(ctx: &Rc<Context>) -> Result<Rc<Self>> {
        // SAFETY: ctx is an open device context, kept alive by the Rc this PD holds.
        let pd = unsafe { ibv_alloc_pd(ctx.ctx) };
        if pd.is_null() {
            bail!(
                "cannot allocate a protection domain on {}: {}",
                ctx.name,
                errno_text(last_errno())
            );
        }
        Ok(Rc::new(Self {
            pd,
            ctx: ctx.clone(),
        }))
    }

    pub fn context(&self) -> &Rc<Context> {
        &self.ctx
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: pd came from ibv_alloc_pd; every MR and QP of it holds an Rc to this PD,
        // so they are all gone; the context outlives it (held by self.ctx).
        unsafe {
            ibv_dealloc_pd(self.pd);
        }
    }
}

/// `(soft limit in bytes, None if unlimited)` of RLIMIT_MEMLOCK.
fn memlock_limit() -> Option<u64> {
    // SAFETY: rlimit is plain data; getrlimit only writes it.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: r is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return None;
    }
    if r.rlim_cur == libc::RLIM_INFINITY {
        None
    } else {
        Some(r.rlim_cur)
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `64 KiB`, `16 MiB`, `1000 bytes`.
fn human(b: u64) -> String {
    for (div, unit) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if b >= div && b.is_multiple_of(div) {
            return format!("{} {unit}", b / div);
        }
    }
    format!("{b} bytes")
}

/// The sentence for a memlock limit below what the buffers need.
pub fn memlock_advice(limit: u64, needed: u64) -> String {
    format!(
        "the locked-memory limit (ulimit -l) is {} but the buffers need {}: raise it \
         (`ulimit -l unlimited` in the shell, `* - memlock unlimited` in \
         /etc/security/limits.conf, LimitMEMLOCK=infinity for a systemd service; \
         under MPI or Slurm the limit of the launching daemon applies)",
        human(limit),
        human(needed)
    )
}

/// Fails before registering when `needed` bytes of host memory cannot be pinned by this
/// (unprivileged) user.
pub fn check_memlock(needed: u64, dev: &str) -> Result<()> {
    if !is_root() {
        if let Some(limit) = memlock_limit() {
            if needed > limit {
                bail!(
                    "cannot register {} on {dev}: {}",
                    human(needed),
                    memlock_advice(limit, needed)
                );
            }
        }
    }
    Ok(())
}

/// How the adapter reaches a region's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegPath {
    /// `ibv_reg_mr` on host memory.
    Host,
    /// `ibv_reg_dmabuf_mr` on a dma-buf of host memory.
    HostDmabuf,
    /// `ibv_reg_dmabuf_mr` on a dma-buf the GPU driver exported.
    Dmabuf,
    /// `ibv_reg_mr` on the GPU pointer (nvidia_peermem).
    Peermem,
}

impl RegPath {
    /// The name the JSON's `memory.*.path` uses.
    pub fn name(self) -> &'static str {
        match self {
            RegPath::Host => "host",
            RegPath::HostDmabuf => "host_dmabuf",
            RegPath::Dmabuf => "dmabuf",
            RegPath::Peermem => "peermem",
        }
    }
}

/// A registration that failed, with what the diagnostics need.
#[derive(Debug, Clone)]
pub struct RegError {
    pub outcome: AttemptOutcome,
    pub message: String,
}

impl fmt::Display for RegError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RegError {}

/// Page-aligned, zeroed host memory.
struct HostAlloc {
    ptr: *mut u8,
    layout: Layout,
}

impl HostAlloc {
    fn new(len: usize) -> Result<Self> {
        let Ok(layout) = Layout::from_size_align(len.max(64), 4096) else {
            bail!("buffer of {len} bytes is too large to allocate");
        };
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            bail!("out of memory allocating a {} buffer", human(len as u64));
        }
        Ok(Self { ptr, layout })
    }
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        // SAFETY: ptr came from alloc_zeroed with this layout; the region that owned it has
        // deregistered it, so the adapter no longer touches it.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

/// Where a region's bytes live; dropped after the registration is released.
enum Backing {
    Host(HostAlloc),
    HostDmabuf(HostDmabuf),
    Gpu(Box<dyn GpuBuffer>),
}

/// Regions get process-unique ids, so a [`Local`] names the region it came from even after
/// that region is gone and its lkey reused.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Registered memory (host or GPU) for local writes and remote reads and writes.
pub struct MemoryRegion {
    mr: *mut ibv_mr,
    id: u64,
    /// The address work requests use for byte 0 (the host pointer, or the GPU address /
    /// dma-buf iova).
    base: u64,
    len: usize,
    lkey: u32,
    rkey: u32,
    path: RegPath,
    /// Declared after the registration and before the PD: released after the MR (see Drop).
    backing: Backing,
    pd: Rc<ProtectionDomain>,
}

const ACCESS: ibv_access_flags = ibv_access_flags(
    ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
        | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
        | ibv_access_flags::IBV_ACCESS_REMOTE_READ.0,
);

/// The access flags of a registration: local and remote write, remote read, and with
/// `relaxed` IBV_ACCESS_RELAXED_ORDERING, as perftest 26.04 registers every buffer unless
/// given `--disable-pcie-relaxed`. Relaxed ordering lets the NIC's PCIe writes to this
/// memory pass each other (a large gain on hosts whose root complex or GPU orders
/// strictly). It is one of the optional access flags (IBV_ACCESS_OPTIONAL_RANGE):
/// libibverbs removes it where the kernel does not take optional flags, and providers
/// that cannot honour it ignore it, so it never makes a registration fail. It must be off
/// where the CPU polls a buffer for the last byte of an RDMA write (write latency): with
/// relaxed ordering the last byte may land before the ones before it.
pub fn access_flags(relaxed: bool) -> i32 {
    let relaxed = if relaxed {
        ibv_access_flags::IBV_ACCESS_RELAXED_ORDERING.0
    } else {
        0
    };
    (ACCESS.0 | relaxed) as i32
}

impl MemoryRegion {
    fn finish(
        pd: &Rc<ProtectionDomain>,
        mr: *mut ibv_mr,
        base: u64,
        len: usize,
        path: RegPath,
        backing: Backing,
    ) -> Rc<Self> {
        // SAFETY: mr is a live registration just returned by libibverbs.
        let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
        Rc::new(Self {
            mr,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            base,
            len,
            lkey,
            rkey,
            path,
            backing,
            pd: pd.clone(),
        })
    }

    /// Allocates and registers `len` bytes of zeroed host memory.
    pub fn host(pd: &Rc<ProtectionDomain>, len: usize, relaxed: bool) -> Result<Rc<Self>> {
        let dev = &pd.ctx.name;
        let len = len.max(64);
        check_memlock(len as u64, dev)?;
        let buf = HostAlloc::new(len)?;
        // SAFETY: pd is live; buf.ptr..+len is our allocation, which stays allocated until
        // after the MR is deregistered (Backing is released after ibv_dereg_mr in Drop).
        let mr = unsafe { ibv_reg_mr(pd.pd, buf.ptr.cast(), len, access_flags(relaxed)) };
        if mr.is_null() {
            let errno = last_errno();
            let hint = match (errno, memlock_limit()) {
                (libc::ENOMEM | libc::EPERM | libc::EAGAIN, Some(limit)) if !is_root() => {
                    memlock_advice(limit, len as u64)
                }
                _ => "check `ulimit -l` and the device's free resources (`rdma resource`)".into(),
            };
            bail!(
                "memory registration (ibv_reg_mr) of {} on {dev} failed: {}; {hint}",
                human(len as u64),
                errno_text(errno)
            );
        }
        let ptr = buf.ptr as u64;
        Ok(Self::finish(
            pd,
            mr,
            ptr,
            len,
            RegPath::Host,
            Backing::Host(buf),
        ))
    }

    /// Registers a dma-buf of `len` bytes of host memory with `ibv_reg_dmabuf_mr`.
    pub fn host_dmabuf(
        pd: &Rc<ProtectionDomain>,
        len: usize,
        relaxed: bool,
    ) -> Result<Rc<Self>, RegError> {
        let buf = HostDmabuf::alloc(len).map_err(|e| RegError {
            outcome: AttemptOutcome::Unavailable(format!("{e:#}")),
            message: format!("{e:#}"),
        })?;
        let iova = buf.ptr() as u64;
        // SAFETY: pd is live; fd is an open dma-buf of buf.len() bytes, mapped at iova in
        // this process; the buffer outlives the registration (released after it in Drop).
        let mr = unsafe {
            ibv_reg_dmabuf_mr(pd.pd, 0, buf.len(), iova, buf.fd(), access_flags(relaxed))
        };
        if mr.is_null() {
            let errno = last_errno();
            return Err(RegError {
                outcome: AttemptOutcome::RegisterFailed(errno),
                message: format!(
                    "registering {} of host memory from {} with ibv_reg_dmabuf_mr on {} failed: {}",
                    human(buf.len() as u64),
                    buf.exporter,
                    pd.ctx.name,
                    errno_text(errno)
                ),
            });
        }
        let len = buf.len();
        Ok(Self::finish(
            pd,
            mr,
            iova,
            len,
            RegPath::HostDmabuf,
            Backing::HostDmabuf(buf),
        ))
    }

    /// Registers GPU memory along `path` (`Dmabuf` or `Peermem`).
    pub fn gpu(
        pd: &Rc<ProtectionDomain>,
        buf: Box<dyn GpuBuffer>,
        path: CudaMem,
        relaxed: bool,
    ) -> Result<Rc<Self>, RegError> {
        let dev = &pd.ctx.name;
        let (ptr, len) = (buf.device_ptr(), buf.len());
        let (mr, reg) = match path {
            CudaMem::Dmabuf | CudaMem::Auto => {
                let (fd, offset) = buf.export_dmabuf().map_err(|e| RegError {
                    outcome: AttemptOutcome::ExportFailed(format!("{e:#}")),
                    message: format!("exporting GPU memory as a dma-buf failed: {e:#}"),
                })?;
                // SAFETY: pd is live; fd is the dma-buf of the GPU allocation [ptr, ptr+len)
                // starting `offset` bytes before ptr; the allocation outlives the
                // registration (Backing is released after ibv_dereg_mr). The fd may be
                // closed once registered (the MR holds its own reference).
                let mr = unsafe {
                    ibv_reg_dmabuf_mr(
                        pd.pd,
                        offset,
                        len,
                        ptr,
                        std::os::fd::AsRawFd::as_raw_fd(&fd),
                        access_flags(relaxed),
                    )
                };
                (mr, RegPath::Dmabuf)
            }
            CudaMem::Peermem => {
                // SAFETY: pd is live; ptr..ptr+len is a GPU allocation the kernel's
                // nvidia_peermem resolves (the CPU never dereferences it); it outlives the
                // registration.
                let mr = unsafe { ibv_reg_mr(pd.pd, ptr as *mut _, len, access_flags(relaxed)) };
                (mr, RegPath::Peermem)
            }
        };
        if mr.is_null() {
            let errno = last_errno();
            return Err(RegError {
                outcome: AttemptOutcome::RegisterFailed(errno),
                message: format!(
                    "registering {} of GPU memory ({}) on {dev} failed: {}",
                    human(len as u64),
                    reg.name(),
                    errno_text(errno)
                ),
            });
        }
        Ok(Self::finish(pd, mr, ptr, len, reg, Backing::Gpu(buf)))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn path(&self) -> RegPath {
        self.path
    }

    /// CPU pointer to byte 0 when the CPU can address the memory (not for GPU memory).
    #[inline(always)]
    fn cpu_base(&self) -> Option<*mut u8> {
        match &self.backing {
            Backing::Host(h) => Some(h.ptr),
            Backing::HostDmabuf(d) => Some(d.ptr()),
            Backing::Gpu(_) => None,
        }
    }

    /// The CPU can read and write the bytes directly (host memory).
    pub fn host_accessible(&self) -> bool {
        self.cpu_base().is_some()
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn pd(&self) -> &Rc<ProtectionDomain> {
        &self.pd
    }

    /// The bytes `off..off+len` as the source or target of a local work request.
    pub fn local(&self, off: usize, len: usize) -> Result<Local> {
        if off.checked_add(len).is_none_or(|end| end > self.len) || len > u32::MAX as usize {
            bail!(
                "internal error: {len} bytes at offset {off} exceed a {}-byte registered region",
                self.len
            );
        }
        Ok(Local {
            region: self.id,
            addr: self.base + off as u64,
            len: len as u32,
            lkey: self.lkey,
            host: self.host_accessible(),
        })
    }

    /// What the peer needs to target this region.
    pub fn advertise(&self) -> RemoteRegion {
        RemoteRegion {
            addr: self.base,
            rkey: self.rkey,
            len: self.len as u64,
        }
    }

    /// The CPU pointer of byte `off` of host memory. GPU memory never gets here: the
    /// callers (control words, write-latency polling) use host regions only, and the plan
    /// refuses write latency with GPU buffers.
    #[inline(always)]
    fn host_ptr(&self, off: usize, n: usize) -> *mut u8 {
        assert!(off + n <= self.len, "region access out of bounds");
        let p = self
            .cpu_base()
            .expect("internal error: CPU access to GPU memory (the plan refuses it)");
        // SAFETY: off + n <= len, inside the mapping.
        unsafe { p.add(off) }
    }

    /// Copies `data` into the region at `off` (GPU memory: through the driver).
    pub fn write_bytes(&self, off: usize, data: &[u8]) -> Result<()> {
        match &self.backing {
            Backing::Gpu(g) => g.copy_in(off, data),
            _ => {
                let p = self.host_ptr(off, data.len());
                // SAFETY: in bounds (host_ptr checked); the source is a distinct Rust slice.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
                Ok(())
            }
        }
    }

    /// Copies `out.len()` bytes from `off` (GPU memory: through the driver). The adapter
    /// may be writing concurrently; u8 has no invalid values, so the worst is stale bytes.
    pub fn read_bytes(&self, off: usize, out: &mut [u8]) -> Result<()> {
        match &self.backing {
            Backing::Gpu(g) => g.copy_out(off, out),
            _ => {
                let p = self.host_ptr(off, out.len());
                // SAFETY: in bounds; the destination is a distinct Rust slice.
                unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
                Ok(())
            }
        }
    }

    /// Reads one byte the adapter may change behind the compiler's back (host memory).
    #[inline(always)]
    pub fn read_volatile(&self, off: usize) -> u8 {
        // SAFETY: in bounds of the mapping (host_ptr checks); volatile so every poll
        // reloads memory.
        unsafe { std::ptr::read_volatile(self.host_ptr(off, 1)) }
    }

    /// Reads an aligned u64 the adapter may change (control words written by the peer).
    #[inline(always)]
    pub fn read_u64_volatile(&self, off: usize) -> u64 {
        assert!(off.is_multiple_of(8));
        // SAFETY: in bounds and 8-byte aligned (host regions are page-aligned).
        unsafe { std::ptr::read_volatile(self.host_ptr(off, 8).cast::<u64>()) }
    }

    #[inline(always)]
    pub fn write_volatile(&self, off: usize, v: u8) {
        // SAFETY: in bounds; volatile so the store is not elided or reordered past the post.
        unsafe { std::ptr::write_volatile(self.host_ptr(off, 1), v) }
    }

    pub fn write_u64(&self, off: usize, v: u64) {
        assert!(off.is_multiple_of(8));
        // SAFETY: in bounds and aligned.
        unsafe { std::ptr::write_volatile(self.host_ptr(off, 8).cast::<u64>(), v) }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: mr is live; every queue pair that could post on it holds an Rc to this
        // region, so none is left. After deregistration the adapter no longer touches the
        // memory, which `backing` releases next (fields drop after this body), then the PD.
        unsafe {
            ibv_dereg_mr(self.mr);
        }
    }
}

/// Bytes of a registered region as the local side of a work request. Only
/// [`MemoryRegion::local`] makes one, in bounds; a queue pair takes it only from a region
/// it holds (checked by `region`), so the lkey, address and length always match live
/// registered memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local {
    pub(crate) region: u64,
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) lkey: u32,
    /// The CPU can read the bytes (a condition for sending them inline).
    pub(crate) host: bool,
}

impl Local {
    pub fn len(&self) -> u32 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A region as the peer advertised it: base address, rkey and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteRegion {
    addr: u64,
    rkey: u32,
    len: u64,
}

impl RemoteRegion {
    /// The peer's bytes `off..off+len`, as the target of an RDMA write or the source of a read.
    pub fn at(&self, off: usize, len: usize) -> Result<Remote> {
        let end = (off as u64).checked_add(len as u64);
        if end.is_none_or(|e| e > self.len) || len > u32::MAX as usize {
            bail!(
                "{len} bytes at offset {off} lie outside the peer's {}-byte region: both sides \
                 must run the same version with the same -q and sizes",
                self.len
            );
        }
        Ok(Remote {
            addr: self.addr + off as u64,
            rkey: self.rkey,
            len: len as u32,
        })
    }
}

/// Bytes of the peer's region, for one-sided operations; made by [`RemoteRegion::at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    pub(crate) addr: u64,
    pub(crate) rkey: u32,
    pub(crate) len: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memlock_advice_says_limit_size_and_fix() {
        let t = memlock_advice(64 << 10, 16 << 20);
        assert!(t.contains("64 KiB"), "{t}");
        assert!(t.contains("16 MiB"), "{t}");
        assert!(t.contains("ulimit -l unlimited"), "{t}");
    }

    #[test]
    fn remote_views_stay_inside_the_advertised_region() {
        let r = RemoteRegion {
            addr: 0x1000,
            rkey: 7,
            len: 4096,
        };
        let v = r.at(4000, 96).unwrap();
        assert_eq!((v.addr, v.rkey, v.len), (0x1000 + 4000, 7, 96));
        assert!(r.at(4000, 97).is_err());
        assert!(r.at(usize::MAX, 2).is_err());
        let e = r.at(0, 8192).unwrap_err().to_string();
        assert!(e.contains("outside the peer's 4096-byte region"), "{e}");
    }

    #[test]
    fn relaxed_ordering_is_the_optional_flag_beside_the_usual_access() {
        let relaxed = ibv_access_flags::IBV_ACCESS_RELAXED_ORDERING.0 as i32;
        // libibverbs' IBV_ACCESS_OPTIONAL_FIRST: the flag a kernel without it drops.
        assert_eq!(relaxed, 1 << 20);
        assert_eq!(access_flags(true), ACCESS.0 as i32 | relaxed);
        assert_eq!(access_flags(false), ACCESS.0 as i32);
        assert_eq!(access_flags(false) & relaxed, 0);
        // Local write, remote write and remote read in both.
        assert_eq!(access_flags(false) & 0b111, 0b111);
        assert!(
            !super::super::session::relaxed_ordering(false, true),
            "write latency polls"
        );
        assert!(
            !super::super::session::relaxed_ordering(true, false),
            "disabled"
        );
        assert!(super::super::session::relaxed_ordering(false, false));
    }

    #[test]
    fn path_names_are_the_json_names() {
        assert_eq!(RegPath::HostDmabuf.name(), "host_dmabuf");
        assert_eq!(RegPath::Peermem.name(), "peermem");
    }
}
