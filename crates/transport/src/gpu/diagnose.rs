//! Why GPU memory could not be given to the NIC, in the terms of the fix.
//!
//! The failures users meet with perftest's `--use_cuda` are few and well known: the
//! nvidia_peermem module not loaded (perftest's bare "Couldn't allocate MR"), dma-buf
//! refused by the GPU driver (the proprietary kernel modules cannot export it), by the
//! kernel (before 5.12) or by the RDMA provider (Soft-RoCE never takes it), a consumer GPU
//! without GPUDirect RDMA at all. Each registration path tried at start-up leaves an
//! [`Attempt`]; [`diagnose`] turns them into one message that names every path, why it
//! failed and what to do. Pure functions of their inputs, so every case is tested here.

use std::fmt::Write as _;

use super::CudaMem;

/// What the message needs to know about the host.
#[derive(Debug, Clone, Default)]
pub struct HostFacts {
    /// RDMA device name (`mlx5_0`).
    pub device: String,
    /// Its kernel driver (`mlx5_core`), or `rxe` for Soft-RoCE.
    pub provider: String,
    /// `uname -r`.
    pub kernel: String,
    /// NVIDIA driver version, `open` appended for the open kernel modules.
    pub gpu_driver: Option<String>,
    /// `/sys/module/nvidia_peermem` exists.
    pub peermem_loaded: bool,
}

/// How one registration path went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// To be tried.
    Pending,
    Ok,
    /// Not tried, and why (e.g. the GPU reports no dma-buf support).
    Skipped(String),
    /// The GPU driver would not export the memory as a dma-buf (the CUDA error).
    ExportFailed(String),
    /// The NIC side refused the registration (errno of ibv_reg_dmabuf_mr / ibv_reg_mr).
    RegisterFailed(i32),
    /// A library lacks the call (an old libcuda or libibverbs): the sentence says which.
    Unavailable(String),
}

/// One registration path tried at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub path: CudaMem,
    pub outcome: AttemptOutcome,
}

pub use base::errno;
pub use base::errno::text as errno_name;

/// `(major, minor)` of a kernel release such as `6.1.0-18-amd64`.
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

fn kernel_too_old_for_dmabuf(f: &HostFacts) -> bool {
    kernel_version(&f.kernel).is_some_and(|v| v < (5, 12))
}

fn open_modules(f: &HostFacts) -> Option<bool> {
    f.gpu_driver.as_ref().map(|d| d.ends_with(" open"))
}

/// Why the GPU reports no dma-buf support, and what to do.
pub fn dmabuf_unsupported_by_gpu(f: &HostFacts) -> String {
    let driver = match (&f.gpu_driver, open_modules(f)) {
        (Some(d), Some(false)) => format!(
            "; this host runs the proprietary kernel modules ({d}), which cannot export dma-buf: \
             install the open ones (e.g. nvidia-open or nvidia-dkms-XXX-open)"
        ),
        (Some(d), _) => format!("; driver {d}"),
        (None, _) => String::new(),
    };
    format!(
        "the GPU reports no dma-buf support (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0): dma-buf \
         needs the NVIDIA open kernel modules (driver 515 or newer), a Turing or newer \
         data-center GPU and Linux 5.12 or newer (this kernel: {}){driver}",
        if f.kernel.is_empty() { "?" } else { &f.kernel }
    )
}

/// One sentence for one attempt.
pub fn explain(a: &Attempt, f: &HostFacts) -> String {
    match (&a.outcome, a.path) {
        (AttemptOutcome::Ok, _) => "worked".into(),
        (AttemptOutcome::Pending, _) => "not tried".into(),
        (AttemptOutcome::Skipped(why), _) => format!("not tried: {why}"),
        (AttemptOutcome::Unavailable(why), _) => why.clone(),
        (AttemptOutcome::ExportFailed(cuda), _) => export_failed(cuda, f),
        (AttemptOutcome::RegisterFailed(e), CudaMem::Dmabuf | CudaMem::Auto) => {
            dmabuf_refused(*e, f)
        }
        (AttemptOutcome::RegisterFailed(e), CudaMem::Peermem) => peermem_refused(*e, f),
    }
}

/// The driver would not export the GPU memory as a dma-buf: the modules or the kernel.
fn export_failed(cuda: &str, f: &HostFacts) -> String {
    let mut s = format!(
        "the NVIDIA driver would not export the memory as a dma-buf \
         (cuMemGetHandleForAddressRange: {cuda})"
    );
    if open_modules(f) == Some(false) {
        s.push_str(
            ": the proprietary kernel modules cannot; install the open kernel modules \
             (nvidia-open, driver 515 or newer)",
        );
    } else if kernel_too_old_for_dmabuf(f) {
        let _ = write!(s, ": kernel {} is older than 5.12", f.kernel);
    }
    s
}

/// The NIC refused the dma-buf registration with errno `e`: why, by errno.
fn dmabuf_refused(e: i32, f: &HostFacts) -> String {
    use errno::*;
    let what = format!(
        "{} refused the dma-buf registration (ibv_reg_dmabuf_mr: {})",
        f.device,
        errno_name(e)
    );
    match e {
        EOPNOTSUPP | EPROTONOSUPPORT | ENOSYS => {
            let kernel = if kernel_too_old_for_dmabuf(f) {
                format!(
                    " This kernel ({}) is older than 5.12, which added dma-buf memory \
                     regions: upgrade it.",
                    f.kernel
                )
            } else {
                String::new()
            };
            let provider = if f.provider == "rxe" {
                "Soft-RoCE (rxe) never takes dma-buf memory".to_string()
            } else {
                format!(
                    "its RDMA provider ({}) does not take dma-buf memory: mlx5 does from \
                     Linux 5.12 and rdma-core 34 (MLNX_OFED 5.5) on",
                    if f.provider.is_empty() {
                        "?"
                    } else {
                        &f.provider
                    }
                )
            };
            format!("{what}: {provider}.{kernel}")
        }
        EINVAL | EFAULT => format!(
            "{what}: the kernel could not map the GPU pages for the NIC (a kernel built \
             without CONFIG_DMABUF_MOVE_NOTIFY or PCI peer-to-peer DMA support, or a GPU \
             and NIC the platform cannot pair; see `dmesg`)"
        ),
        ENOMEM | EAGAIN => format!(
            "{what}: the NIC ran out of translation resources or locked memory (check \
             `ulimit -l` and `rdma resource`)"
        ),
        EPERM | EACCES => {
            format!("{what}: permission denied (run as root, or check /dev/infiniband access)")
        }
        _ => what,
    }
}

/// ibv_reg_mr on GPU memory failed with errno `e` (the nvidia_peermem path).
fn peermem_refused(e: i32, f: &HostFacts) -> String {
    if !f.peermem_loaded {
        format!(
            "nvidia_peermem is not loaded, so {} cannot pin GPU memory (ibv_reg_mr: {}; \
             perftest prints \"Couldn't allocate MR\" here): run `modprobe \
             nvidia_peermem` as root (it ships with the NVIDIA driver; older MLNX_OFED \
             setups call it nv_peer_mem)",
            f.device,
            errno_name(e)
        )
    } else {
        format!(
            "ibv_reg_mr on GPU memory failed on {} ({}) although nvidia_peermem is \
             loaded: see `dmesg` (a nvidia_peermem built for another driver version, or \
             a GPU that cannot do GPUDirect RDMA)",
            f.device,
            errno_name(e)
        )
    }
}

/// The whole error for GPU memory that no path could register: every attempt, its cause
/// and fix, and the way to measure anyway.
pub fn diagnose(gpu: &str, attempts: &[Attempt], f: &HostFacts) -> String {
    let mut s = format!(
        "cannot register {gpu} memory with {} for GPUDirect RDMA.",
        f.device
    );
    for a in attempts {
        let _ = write!(s, "\n  {}: {}", a.path.name(), explain(a, f));
    }
    s.push_str(
        "\nFix one of the paths above (--cuda-mem picks one), or measure what the fabric costs \
         without GPUDirect: --transport tcp --use-cuda stages through pinned host memory.",
    );
    s
}

/// The error for a GPU that cannot do GPUDirect RDMA at all.
pub fn no_gpudirect(gpu: &str) -> String {
    format!(
        "{gpu} does not support GPUDirect RDMA (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 0): \
         GeForce and other consumer GPUs cannot give their memory to a NIC. Use a data-center \
         GPU, or measure the staged path with --transport tcp --use-cuda"
    )
}

/// Which paths `--cuda-mem` tries, in order, given whether the GPU reports dma-buf support
/// (`None`: unknown, e.g. a driver too old to answer).
pub fn paths_to_try(mem: CudaMem, gpu_dmabuf: Option<bool>, f: &HostFacts) -> Vec<Attempt> {
    let dmabuf = match gpu_dmabuf {
        Some(false) => Attempt {
            path: CudaMem::Dmabuf,
            outcome: AttemptOutcome::Skipped(dmabuf_unsupported_by_gpu(f)),
        },
        _ => Attempt {
            path: CudaMem::Dmabuf,
            outcome: AttemptOutcome::Pending,
        },
    };
    let peermem = Attempt {
        path: CudaMem::Peermem,
        outcome: AttemptOutcome::Pending,
    };
    match mem {
        CudaMem::Dmabuf => vec![dmabuf],
        CudaMem::Peermem => vec![peermem],
        CudaMem::Auto => vec![dmabuf, peermem],
    }
}

#[cfg(test)]
mod tests {
    use super::errno::*;
    use super::*;

    fn facts() -> HostFacts {
        HostFacts {
            device: "mlx5_0".into(),
            provider: "mlx5_core".into(),
            kernel: "6.1.0-18-amd64".into(),
            gpu_driver: Some("550.54.15 open".into()),
            peermem_loaded: false,
        }
    }

    fn attempt(path: CudaMem, outcome: AttemptOutcome) -> Attempt {
        Attempt { path, outcome }
    }

    #[test]
    fn peermem_not_loaded_says_modprobe() {
        let e = explain(
            &attempt(CudaMem::Peermem, AttemptOutcome::RegisterFailed(EFAULT)),
            &facts(),
        );
        assert!(e.contains("nvidia_peermem is not loaded"), "{e}");
        assert!(e.contains("modprobe nvidia_peermem"), "{e}");
        assert!(e.contains("Couldn't allocate MR"), "{e}");
        assert!(e.contains("EFAULT"), "{e}");
        let loaded = HostFacts {
            peermem_loaded: true,
            ..facts()
        };
        let e = explain(
            &attempt(CudaMem::Peermem, AttemptOutcome::RegisterFailed(EINVAL)),
            &loaded,
        );
        assert!(
            e.contains("although nvidia_peermem is loaded") && e.contains("dmesg"),
            "{e}"
        );
    }

    #[test]
    fn dmabuf_refusals_name_the_layer_that_refused() {
        let f = facts();
        // The RDMA provider.
        let e = explain(
            &attempt(CudaMem::Dmabuf, AttemptOutcome::RegisterFailed(EOPNOTSUPP)),
            &f,
        );
        assert!(e.contains("mlx5_0 refused the dma-buf registration"), "{e}");
        assert!(
            e.contains("EOPNOTSUPP") && e.contains("provider (mlx5_core)"),
            "{e}"
        );
        let rxe = HostFacts {
            device: "rxe0".into(),
            provider: "rxe".into(),
            ..facts()
        };
        let e = explain(
            &attempt(CudaMem::Dmabuf, AttemptOutcome::RegisterFailed(EOPNOTSUPP)),
            &rxe,
        );
        assert!(e.contains("Soft-RoCE (rxe) never takes dma-buf"), "{e}");
        // The kernel.
        let old = HostFacts {
            kernel: "5.4.0-150-generic".into(),
            ..facts()
        };
        let e = explain(
            &attempt(CudaMem::Dmabuf, AttemptOutcome::RegisterFailed(EOPNOTSUPP)),
            &old,
        );
        assert!(e.contains("older than 5.12"), "{e}");
        let e = explain(
            &attempt(CudaMem::Dmabuf, AttemptOutcome::RegisterFailed(EINVAL)),
            &f,
        );
        assert!(e.contains("CONFIG_DMABUF_MOVE_NOTIFY"), "{e}");
        // The GPU driver.
        let closed = HostFacts {
            gpu_driver: Some("535.104.05".into()),
            ..facts()
        };
        let e = explain(
            &attempt(
                CudaMem::Dmabuf,
                AttemptOutcome::ExportFailed("CUDA_ERROR_NOT_SUPPORTED".into()),
            ),
            &closed,
        );
        assert!(
            e.contains("cuMemGetHandleForAddressRange: CUDA_ERROR_NOT_SUPPORTED"),
            "{e}"
        );
        assert!(e.contains("proprietary kernel modules cannot"), "{e}");
        // The GPU itself.
        let s = dmabuf_unsupported_by_gpu(&closed);
        assert!(
            s.contains("DMA_BUF_SUPPORTED = 0") && s.contains("open ones"),
            "{s}"
        );
        assert!(s.contains("6.1.0-18-amd64"), "{s}");
    }

    #[test]
    fn auto_tries_dmabuf_then_peermem_and_skips_dmabuf_the_gpu_cannot_do() {
        let f = facts();
        let p = paths_to_try(CudaMem::Auto, Some(true), &f);
        assert_eq!(
            p.iter().map(|a| a.path).collect::<Vec<_>>(),
            [CudaMem::Dmabuf, CudaMem::Peermem]
        );
        assert!(p.iter().all(|a| a.outcome == AttemptOutcome::Pending));
        let p = paths_to_try(CudaMem::Auto, Some(false), &f);
        assert!(
            matches!(&p[0].outcome, AttemptOutcome::Skipped(w) if w.contains("no dma-buf support"))
        );
        assert_eq!(p[1].outcome, AttemptOutcome::Pending);
        assert_eq!(paths_to_try(CudaMem::Peermem, Some(true), &f).len(), 1);
        // Asked for dma-buf explicitly on a GPU without it: nothing to fall back to.
        let p = paths_to_try(CudaMem::Dmabuf, Some(false), &f);
        assert_eq!(p.len(), 1);
        assert!(matches!(p[0].outcome, AttemptOutcome::Skipped(_)));
        // Unknown support (old driver): try it.
        assert_eq!(
            paths_to_try(CudaMem::Dmabuf, None, &f)[0].outcome,
            AttemptOutcome::Pending
        );
    }

    #[test]
    fn the_whole_message_lists_every_path_and_the_way_out() {
        let f = facts();
        let m = diagnose(
            "GPU 0 (NVIDIA H200, 0000:18:00.0)",
            &[
                attempt(CudaMem::Dmabuf, AttemptOutcome::RegisterFailed(EOPNOTSUPP)),
                attempt(CudaMem::Peermem, AttemptOutcome::RegisterFailed(EFAULT)),
            ],
            &f,
        );
        assert!(
            m.starts_with("cannot register GPU 0 (NVIDIA H200, 0000:18:00.0) memory with mlx5_0"),
            "{m}"
        );
        assert!(m.contains("\n  dmabuf: mlx5_0 refused"), "{m}");
        assert!(
            m.contains("\n  peermem: nvidia_peermem is not loaded"),
            "{m}"
        );
        assert!(m.contains("--transport tcp --use-cuda"), "{m}");
        let n = no_gpudirect("GPU 0 (NVIDIA GeForce RTX 4090)");
        assert!(
            n.contains("GeForce") && n.contains("GPU_DIRECT_RDMA_SUPPORTED = 0"),
            "{n}"
        );
    }

    #[test]
    fn kernel_versions_parse() {
        assert_eq!(kernel_version("6.1.0-18-amd64"), Some((6, 1)));
        assert_eq!(kernel_version("5.4.0-150-generic"), Some((5, 4)));
        assert_eq!(
            kernel_version("5.15.133.1-microsoft-standard-WSL2"),
            Some((5, 15))
        );
        assert_eq!(kernel_version("x"), None);
    }
}
