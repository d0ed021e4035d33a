//! What GPUDirect RDMA needs on this host, step by step, without measuring anything:
//! the GPUs and RDMA devices on the PCI tree and how far apart they are (nvidia-smi's
//! `topo -m` relations, from sysfs), the nearest NIC of each GPU and any ACS or socket
//! problem, then per GPU: the CUDA facts, a device allocation, its dma-buf export, and a
//! trial registration along every path with the diagnostic when one fails.
//!
//! ```sh
//! cargo run --release --example gpudirect_probe -p transport --features cuda,verbs
//! ```
//!
//! Prints `ok` / `FAILED` per step; exits 1 when a CUDA step failed on a host with a GPU
//! (scripts/gpu-check.sh runs it), 0 otherwise.

use probe::topology::{pairing_issues, Topology};

fn main() {
    let topo = Topology::read();
    println!("== PCI topology (sysfs)");
    if topo.gpus().is_empty() {
        println!("no NVIDIA GPU on the PCI bus");
    }
    if topo.nics().is_empty() {
        println!("no RDMA device under /sys/class/infiniband");
    }
    if !topo.gpus().is_empty() && !topo.nics().is_empty() {
        print!("{:<8}", "");
        for n in topo.nics() {
            print!(" {:>8}", n.name);
        }
        println!();
        for g in topo.gpus() {
            print!("GPU{:<5}", g.index);
            for n in topo.nics() {
                let rel = n
                    .bus_id
                    .as_deref()
                    .and_then(|b| topo.relation(&g.bus_id, b))
                    .map_or("?", |r| r.code());
                print!(" {rel:>8}");
            }
            println!();
        }
        println!("(PIX same PCIe switch, PXB several switches, PHB host bridge, NODE same NUMA node, SYS across sockets)");
    }
    for g in topo.gpus() {
        match topo.nearest_nic(&g.bus_id, 1) {
            Some(c) => {
                println!(
                    "GPU {} ({}): nearest RDMA device with port 1 ACTIVE: {} ({})",
                    g.index,
                    g.bus_id,
                    c.nic.name,
                    c.relation.map_or("relation unknown", |r| r.describe())
                );
                for issue in pairing_issues(&topo, &g.bus_id, &c.nic.name) {
                    println!("  warning: {}", issue.text());
                }
            }
            None => println!(
                "GPU {} ({}): no RDMA device with port 1 ACTIVE",
                g.index, g.bus_id
            ),
        }
    }
    let failed = cuda_steps();
    std::process::exit(i32::from(failed));
}

/// The CUDA steps; true when one failed on a host that has a GPU.
#[cfg(feature = "cuda")]
fn cuda_steps() -> bool {
    use transport::cuda::facts;
    use transport::cuda::memory::{DeviceMemory, GpuContext, GPU_PAGE};
    use transport::gpu::GpuBuffer;

    println!("== CUDA");
    let n = match facts::check_driver() {
        Ok(n) => n,
        Err(e) => {
            println!("no usable CUDA driver: {e:#}");
            return false;
        }
    };
    let mut failed = false;
    let mut step = |what: &str, r: anyhow::Result<String>| match r {
        Ok(s) => println!("ok      {what}{s}"),
        Err(e) => {
            failed = true;
            println!("FAILED  {what}: {e:#}");
        }
    };
    for i in 0..n {
        let f = match facts::facts(i) {
            Ok(f) => f,
            Err(e) => {
                step(&format!("GPU {i} facts"), Err(e));
                continue;
            }
        };
        println!(
            "{}: uuid {}, GPUDirect RDMA {}, dma-buf {}{}",
            f.describe(),
            f.info.uuid.as_deref().unwrap_or("?"),
            yes_no(f.gpudirect_rdma),
            yes_no(f.dmabuf),
            if f.integrated { ", integrated" } else { "" }
        );
        let mem = GpuContext::open(i).and_then(|c| DeviceMemory::alloc(&c, 4 * GPU_PAGE));
        let mem = match mem {
            Ok(m) => {
                step(
                    &format!("GPU {i}: cuMemAlloc"),
                    Ok(format!(" {} bytes at 0x{:x}", m.len(), m.device_ptr())),
                );
                m
            }
            Err(e) => {
                step(&format!("GPU {i}: cuMemAlloc"), Err(e));
                continue;
            }
        };
        let pattern = transport::gpu::pattern_bytes(0, mem.len());
        let mut back = vec![0u8; mem.len()];
        step(
            &format!("GPU {i}: copy in and back"),
            mem.copy_in(0, &pattern)
                .and_then(|_| mem.copy_out(0, &mut back))
                .and_then(|_| {
                    anyhow::ensure!(back == pattern, "the bytes read back differ");
                    Ok(String::new())
                }),
        );
        if f.dmabuf != Some(false) {
            step(
                &format!("GPU {i}: dma-buf export (cuMemGetHandleForAddressRange)"),
                mem.export_dmabuf()
                    .map(|(fd, off)| format!(" fd {fd:?}, offset {off}")),
            );
        } else {
            println!("skip    GPU {i}: dma-buf export (the GPU reports no dma-buf support)");
        }
        drop(mem);
        registration(i, &f);
    }
    failed
}

#[cfg(feature = "cuda")]
fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    }
}

/// A trial registration on the nearest RDMA device, with the diagnostic when it fails.
/// Without an RDMA device this prints why; that is not a failure of the GPU steps.
#[cfg(all(feature = "cuda", feature = "verbs"))]
fn registration(i: u32, f: &transport::cuda::facts::GpuFacts) {
    let dev = f
        .info
        .pci_bus_id
        .as_deref()
        .and_then(|b| Topology::read().nearest_nic(b, 1))
        .map(|c| c.nic.name);
    match transport::verbs::trial::gpu(dev.as_deref(), 1, f, transport::gpu::CudaMem::Auto) {
        Ok((path, earlier)) => {
            println!(
                "ok      GPU {i}: registered with the NIC through {}",
                path.name()
            );
            for e in earlier {
                println!("        ({e})");
            }
        }
        Err(e) => println!("no GPUDirect registration for GPU {i}:\n{e:#}"),
    }
}

#[cfg(all(feature = "cuda", not(feature = "verbs")))]
fn registration(_: u32, _: &transport::cuda::facts::GpuFacts) {
    println!("(built without verbs: no registration attempt)");
}

#[cfg(not(feature = "cuda"))]
fn cuda_steps() -> bool {
    println!("(built without the `cuda` feature: no CUDA steps)");
    false
}
