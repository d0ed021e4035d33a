//! Host memory exported as a dma-buf (`--host-dmabuf`): the same `ibv_reg_dmabuf_mr`
//! registration GPU memory takes, without a GPU. It answers "does this NIC, its provider
//! and this kernel take dma-buf memory at all?" on any host, and it is how the dma-buf
//! refusal diagnostics run for real on Soft-RoCE (which refuses dma-buf).
//!
//! Two exporters, as the kernel offers them: the system DMA heap
//! (`/dev/dma_heap/system`, `CONFIG_DMABUF_HEAPS_SYSTEM`; what perftest's
//! `--use_system_dmabuf` uses) and, where the kernel has no heaps (Debian 12's), a dumb
//! buffer of the `vgem` virtual GPU driver exported through DRM PRIME. Either way the
//! buffer is ordinary RAM, mapped into this process so the CPU can read and write it.

use std::fs::{self, File, OpenOptions};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};

use super::{errno_text, last_errno};

/// `_IOWR('H', 0, struct dma_heap_allocation_data)`.
const DMA_HEAP_IOCTL_ALLOC: u64 = 0xC018_4800;
/// `DRM_IOWR(0xB2, struct drm_mode_create_dumb)`.
const DRM_IOCTL_MODE_CREATE_DUMB: u64 = 0xC020_64B2;
/// `DRM_IOWR(0x2d, struct drm_prime_handle)`.
const DRM_IOCTL_PRIME_HANDLE_TO_FD: u64 = 0xC00C_642D;

#[repr(C)]
struct DmaHeapAllocationData {
    len: u64,
    fd: u32,
    fd_flags: u32,
    heap_flags: u64,
}

#[repr(C)]
struct DrmModeCreateDumb {
    height: u32,
    width: u32,
    bpp: u32,
    flags: u32,
    handle: u32,
    pitch: u32,
    size: u64,
}

#[repr(C)]
struct DrmPrimeHandle {
    handle: u32,
    flags: u32,
    fd: i32,
}

/// A dma-buf of host memory, mapped into this process.
pub struct HostDmabuf {
    fd: OwnedFd,
    ptr: *mut u8,
    len: usize,
    /// The DRM device the buffer came from (vgem), kept open while the buffer lives.
    _card: Option<File>,
    /// `dma_heap system` or `vgem (/dev/dri/card1)`.
    pub exporter: String,
}

/// The vgem card, if the vgem module is loaded.
fn vgem_card(root: &Path) -> Option<PathBuf> {
    let mut cards: Vec<PathBuf> = fs::read_dir(root.join("sys/class/drm"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("card") && !n.contains('-'))
        })
        .collect();
    cards.sort();
    cards.into_iter().find_map(|c| {
        let real = fs::canonicalize(&c).ok()?;
        let name = c.file_name()?;
        real.to_string_lossy()
            .contains("/vgem/")
            .then(|| Path::new("/dev/dri").join(name))
    })
}

fn ioctl<T>(fd: &impl AsRawFd, req: u64, arg: &mut T) -> Result<(), i32> {
    // SAFETY: `arg` is the repr(C) struct the request number encodes (its size is part of
    // the number), valid for reads and writes for the duration of the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg as *mut T) };
    if rc < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

impl HostDmabuf {
    /// Allocates `len` bytes (rounded up to pages) from the first exporter available.
    pub fn alloc(len: usize) -> Result<HostDmabuf> {
        let len = len.max(1).div_ceil(4096) * 4096;
        let heap = Path::new("/dev/dma_heap/system");
        if heap.exists() {
            return Self::from_heap(heap, len);
        }
        if let Some(card) = vgem_card(Path::new("/")) {
            return Self::from_vgem(&card, len);
        }
        bail!(
            "no host dma-buf exporter on this machine: neither /dev/dma_heap/system (a kernel \
             with CONFIG_DMABUF_HEAPS_SYSTEM) nor a vgem device exists; load vgem as root \
             (`modprobe vgem`) and retry"
        )
    }

    fn from_heap(heap: &Path, len: usize) -> Result<HostDmabuf> {
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(heap)
            .map_err(|e| anyhow!("opening {}: {e} (run as root?)", heap.display()))?;
        let mut a = DmaHeapAllocationData {
            len: len as u64,
            fd: 0,
            fd_flags: (libc::O_RDWR | libc::O_CLOEXEC) as u32,
            heap_flags: 0,
        };
        ioctl(&f, DMA_HEAP_IOCTL_ALLOC, &mut a).map_err(|e| {
            anyhow!(
                "allocating {len} bytes from {}: {}",
                heap.display(),
                errno_text(e)
            )
        })?;
        // SAFETY: the ioctl installed a new fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(a.fd as i32) };
        Self::map(fd, len, None, "dma_heap system".into())
    }

    fn from_vgem(card: &Path, len: usize) -> Result<HostDmabuf> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(card)
            .map_err(|e| {
                anyhow!(
                    "opening the vgem device {}: {e} (run as root?)",
                    card.display()
                )
            })?;
        // One row of 4 KiB (1024 pixels of 32 bits) per page.
        let mut d = DrmModeCreateDumb {
            height: (len / 4096) as u32,
            width: 1024,
            bpp: 32,
            flags: 0,
            handle: 0,
            pitch: 0,
            size: 0,
        };
        ioctl(&f, DRM_IOCTL_MODE_CREATE_DUMB, &mut d).map_err(|e| {
            anyhow!(
                "creating a {len}-byte vgem buffer on {}: {}",
                card.display(),
                errno_text(e)
            )
        })?;
        let mut p = DrmPrimeHandle {
            handle: d.handle,
            flags: (libc::O_CLOEXEC | libc::O_RDWR) as u32,
            fd: -1,
        };
        ioctl(&f, DRM_IOCTL_PRIME_HANDLE_TO_FD, &mut p)
            .map_err(|e| anyhow!("exporting the vgem buffer as a dma-buf: {}", errno_text(e)))?;
        // SAFETY: PRIME_HANDLE_TO_FD installed a new fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(p.fd) };
        let exporter = format!("vgem ({})", card.display());
        Self::map(fd, (d.size as usize).max(len), Some(f), exporter)
    }

    fn map(fd: OwnedFd, len: usize, card: Option<File>, exporter: String) -> Result<HostDmabuf> {
        // SAFETY: maps `len` bytes of the dma-buf, shared, at an address the kernel picks;
        // the mapping is unmapped exactly once in Drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            bail!(
                "mapping the {exporter} dma-buf: {}",
                errno_text(last_errno())
            );
        }
        Ok(HostDmabuf {
            fd,
            ptr: ptr.cast(),
            len,
            _card: card,
            exporter,
        })
    }

    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for HostDmabuf {
    fn drop(&mut self) {
        // SAFETY: ptr/len is the mapping made in `map`; the NIC registration on it is
        // released first (the region owning this buffer deregisters before dropping it).
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_encode_the_struct_sizes() {
        let size = |req: u64| (req >> 16) & 0x3fff;
        assert_eq!(
            size(DMA_HEAP_IOCTL_ALLOC) as usize,
            std::mem::size_of::<DmaHeapAllocationData>()
        );
        assert_eq!(
            size(DRM_IOCTL_MODE_CREATE_DUMB) as usize,
            std::mem::size_of::<DrmModeCreateDumb>()
        );
        assert_eq!(
            size(DRM_IOCTL_PRIME_HANDLE_TO_FD) as usize,
            std::mem::size_of::<DrmPrimeHandle>()
        );
        assert_eq!(DRM_IOCTL_MODE_CREATE_DUMB >> 30, 3, "read-write");
    }

    #[test]
    fn vgem_is_found_by_its_sysfs_path_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(vgem_card(root), None);
        let real = root.join("sys/devices/pci0000:00/0000:00:02.0/drm/card0");
        fs::create_dir_all(&real).unwrap();
        let vgem = root.join("sys/devices/platform/vgem/drm/card1");
        fs::create_dir_all(&vgem).unwrap();
        fs::create_dir_all(root.join("sys/class/drm")).unwrap();
        std::os::unix::fs::symlink(&real, root.join("sys/class/drm/card0")).unwrap();
        std::os::unix::fs::symlink(&vgem, root.join("sys/class/drm/card1")).unwrap();
        std::os::unix::fs::symlink(&real, root.join("sys/class/drm/card0-HDMI-A-1")).unwrap();
        assert_eq!(vgem_card(root), Some(PathBuf::from("/dev/dri/card1")));
    }

    #[test]
    fn without_an_exporter_the_error_says_how_to_get_one() {
        if Path::new("/dev/dma_heap/system").exists() || vgem_card(Path::new("/")).is_some() {
            // This host has an exporter: the real path must work instead.
            let b = HostDmabuf::alloc(10_000).expect("host dma-buf");
            assert!(b.len() >= 10_000 && b.fd() >= 0);
            // SAFETY: in bounds of the fresh mapping.
            unsafe { b.ptr().write(7) };
            return;
        }
        let e = HostDmabuf::alloc(4096).err().unwrap().to_string();
        assert!(
            e.contains("no host dma-buf exporter") && e.contains("modprobe vgem"),
            "{e}"
        );
    }
}
