//! Protection domain and registered memory.
//!
//! Registering memory pins its pages (they may not move while the adapter DMAs into them)
//! and gives the adapter the translation, returning an lkey for local work requests and an
//! rkey the peer names in RDMA reads and writes. Pinned pages count against
//! `RLIMIT_MEMLOCK` for unprivileged users, the usual cause of `ibv_reg_mr` failing.

use std::alloc::{alloc_zeroed, dealloc, Layout};

use anyhow::{bail, Result};
use rdma_sys::*;

use super::device::Context;
use super::{errno_text, last_errno};

/// A protection domain: memory regions and queue pairs of one PD may be used together.
pub struct ProtectionDomain {
    pub(crate) pd: *mut ibv_pd,
}

impl ProtectionDomain {
    pub fn new(ctx: &Context) -> Result<Self> {
        // SAFETY: ctx is an open device context.
        let pd = unsafe { ibv_alloc_pd(ctx.ctx) };
        if pd.is_null() {
            bail!(
                "cannot allocate a protection domain on {}: {}",
                ctx.name,
                errno_text(last_errno())
            );
        }
        Ok(Self { pd })
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: pd came from ibv_alloc_pd; its MRs and QPs are dropped before it.
        unsafe {
            ibv_dealloc_pd(self.pd);
        }
    }
}

/// Page-aligned, zeroed host memory registered for local write and remote read/write.
pub struct Region {
    mr: *mut ibv_mr,
    ptr: *mut u8,
    layout: Layout,
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

impl Region {
    /// Allocates and registers `len` bytes.
    pub fn new(ctx: &Context, pd: &ProtectionDomain, len: usize) -> Result<Self> {
        let len = len.max(64);
        if !is_root() {
            if let Some(limit) = memlock_limit() {
                if (len as u64) > limit {
                    bail!(
                        "cannot register {} on {}: {}",
                        human(len as u64),
                        ctx.name,
                        memlock_advice(limit, len as u64)
                    );
                }
            }
        }
        let Ok(layout) = Layout::from_size_align(len, 4096) else {
            bail!("buffer of {len} bytes is too large to allocate");
        };
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            bail!("out of memory allocating a {} buffer", human(len as u64));
        }
        let access = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_READ;
        // SAFETY: pd is live; ptr..ptr+len is our allocation, which outlives the MR
        // (Drop deregisters before freeing).
        let mr = unsafe { ibv_reg_mr(pd.pd, ptr.cast(), len, access.0 as i32) };
        if mr.is_null() {
            let errno = last_errno();
            // SAFETY: ptr came from alloc_zeroed with this layout and is not registered.
            unsafe { dealloc(ptr, layout) };
            let hint = match (errno, memlock_limit()) {
                (libc::ENOMEM | libc::EPERM | libc::EAGAIN, Some(limit)) if !is_root() => {
                    memlock_advice(limit, len as u64)
                }
                _ => "check `ulimit -l` and the device's free resources (`rdma resource`)".into(),
            };
            bail!(
                "memory registration (ibv_reg_mr) of {} on {} failed: {}; {hint}",
                human(len as u64),
                ctx.name,
                errno_text(errno)
            );
        }
        Ok(Self { mr, ptr, layout })
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn is_empty(&self) -> bool {
        self.layout.size() == 0
    }

    /// Start address as the adapter sees it (the virtual address: the MR is not iova-based).
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    pub fn lkey(&self) -> u32 {
        // SAFETY: mr is a live registration.
        unsafe { (*self.mr).lkey }
    }

    pub fn rkey(&self) -> u32 {
        // SAFETY: mr is a live registration.
        unsafe { (*self.mr).rkey }
    }

    /// The bytes `off..off+len`. The adapter may write them concurrently (RDMA from the
    /// peer), so callers read polled bytes with [`read_volatile`](Self::read_volatile).
    pub fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.len(), "region slice out of bounds");
        // SAFETY: in bounds of our allocation; u8 has no invalid values, so concurrent
        // DMA can at worst make the content stale, never undefined.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }
    }

    pub fn slice_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        assert!(off + len <= self.len(), "region slice out of bounds");
        // SAFETY: in bounds; &mut self gives exclusive access on the CPU side.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) }
    }

    /// Reads one byte the adapter may change behind the compiler's back.
    #[inline(always)]
    pub fn read_volatile(&self, off: usize) -> u8 {
        debug_assert!(off < self.len());
        // SAFETY: in bounds of the allocation; volatile so every poll reloads memory.
        unsafe { std::ptr::read_volatile(self.ptr.add(off)) }
    }

    /// Reads an aligned u64 the adapter may change (control words written by the peer).
    #[inline(always)]
    pub fn read_u64_volatile(&self, off: usize) -> u64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len());
        // SAFETY: in bounds and 8-byte aligned (the region is page-aligned).
        unsafe { std::ptr::read_volatile(self.ptr.add(off).cast::<u64>()) }
    }

    #[inline(always)]
    pub fn write_volatile(&mut self, off: usize, v: u8) {
        debug_assert!(off < self.len());
        // SAFETY: in bounds; volatile so the store is not elided or reordered past the post.
        unsafe { std::ptr::write_volatile(self.ptr.add(off), v) }
    }

    pub fn write_u64(&mut self, off: usize, v: u64) {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len());
        // SAFETY: in bounds and aligned.
        unsafe { std::ptr::write_volatile(self.ptr.add(off).cast::<u64>(), v) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: mr is live and its QPs are gone (Session field order); after
        // deregistration the adapter no longer touches ptr, which we then free.
        unsafe {
            ibv_dereg_mr(self.mr);
            dealloc(self.ptr, self.layout);
        }
    }
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
}
