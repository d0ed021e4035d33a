//! Registrations tried at start-up, before anything is measured: GPU memory along each
//! path `--cuda-mem` allows (the first that works is the one every test size then uses),
//! and host memory through a dma-buf for `--host-dmabuf`. A failure becomes one message
//! naming each path's cause and fix ([`crate::gpu::diagnose`]), exit code 2.

use std::path::Path;
use std::rc::Rc;

use anyhow::{bail, Result};

use super::device::DeviceList;
use super::memory::{MemoryRegion, ProtectionDomain};
use crate::gpu::{explain, Attempt, CudaMem, HostFacts};
use probe::counters::SYSFS_ROOT;

/// The kernel driver behind an RDMA device (`mlx5_core`), `rxe`/`siw` for the software ones.
pub fn provider_of(dev: &str) -> String {
    for soft in ["rxe", "siw"] {
        if dev.starts_with(soft) {
            return soft.into();
        }
    }
    std::fs::canonicalize(Path::new(SYSFS_ROOT).join(dev).join("device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "?".into())
}

/// What the diagnostics need to know about this host and `dev`.
pub fn host_facts(dev: &str) -> HostFacts {
    HostFacts {
        device: dev.to_string(),
        provider: provider_of(dev),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        gpu_driver: probe::host::gpu_driver(Path::new("/")),
        peermem_loaded: Path::new("/sys/module/nvidia_peermem").is_dir(),
    }
}

/// `--host-dmabuf`: registers 64 KiB of host memory through a dma-buf on the device the
/// test will use.
pub fn host_dmabuf(device: Option<&str>, port: u8) -> Result<()> {
    let list = DeviceList::get()?;
    let ctx = Rc::new(list.open(device, port)?);
    let pd = ProtectionDomain::new(&ctx)?;
    match MemoryRegion::host_dmabuf(&pd, 64 << 10, true) {
        Ok(_) => Ok(()),
        Err(e) => {
            let f = host_facts(&ctx.name);
            let why = explain(
                &Attempt {
                    path: CudaMem::Dmabuf,
                    outcome: e.outcome,
                },
                &f,
            );
            bail!(
                "cannot register host memory through a dma-buf on {}: {why}",
                ctx.name
            )
        }
    }
}

/// `--use-cuda` over verbs: registers one GPU page along each allowed path and returns the
/// first that worked, with a sentence for each path that failed before it.
#[cfg(feature = "cuda")]
pub fn gpu(
    device: Option<&str>,
    port: u8,
    facts: &crate::cuda::facts::GpuFacts,
    mem: CudaMem,
) -> Result<(CudaMem, Vec<String>)> {
    use crate::cuda::memory::{DeviceMemory, GpuContext, GPU_PAGE};
    let list = DeviceList::get()?;
    let ctx = Rc::new(list.open(device, port)?);
    let pd = ProtectionDomain::new(&ctx)?;
    let hf = host_facts(&ctx.name);
    let gctx = GpuContext::open(facts.ordinal)?;
    let mut attempts = crate::gpu::paths_to_try(mem, facts.dmabuf, &hf);
    for i in 0..attempts.len() {
        if attempts[i].outcome != crate::gpu::AttemptOutcome::Pending {
            continue;
        }
        let buf = DeviceMemory::alloc(&gctx, GPU_PAGE)?;
        match MemoryRegion::gpu(&pd, Box::new(buf), attempts[i].path, true) {
            Ok(_) => {
                let earlier = attempts[..i]
                    .iter()
                    .map(|a| format!("{} not used: {}", a.path.name(), explain(a, &hf)))
                    .collect();
                return Ok((attempts[i].path, earlier));
            }
            Err(e) => attempts[i].outcome = e.outcome,
        }
    }
    bail!(crate::gpu::diagnose(&facts.describe(), &attempts, &hf))
}
