//! Start-up checks of the buffers' memory, run by each side while its plan is built, so
//! every problem is reported (exit 2) before a peer is contacted or anything measured.

use anyhow::{bail, Result};

use crate::endpoint::{Op, TransportKind, VerbsOptions};
use crate::gpu::GpuOptions;

/// Which benchmark builds the plan (write latency polls its buffer with the CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bench {
    Latency,
    Bandwidth,
}

/// Prints a start-up note on the reporting process only (rank 0 under MPI), and every
/// warning on every process, prefixed with the rank under MPI.
#[cfg(feature = "cuda")]
fn note(text: &str) {
    if base::launcher::is_reporting_process() {
        eprintln!("{text}");
    }
}

fn warn(text: &str) {
    match base::launcher::env_rank() {
        Some(r) => base::output::error_line(&format!("rank {r}: warning: {text}")),
        None => eprintln!("warning: {text}"),
    }
}

/// Checks and resolves `--use-cuda` / `--host-dmabuf` for a run of `bench` measuring `op`
/// over `kind`: the GPU and its driver, the NIC nearest to it when `-d` is not given, the
/// GPU-NIC pairing (sockets, ACS), and a trial registration. Fills `opts.gpu.resolved`
/// (and `opts.device` when it chose the NIC).
pub fn prepare(kind: TransportKind, op: Op, bench: Bench, opts: &mut VerbsOptions) -> Result<()> {
    if opts.host_dmabuf {
        if opts.gpu.is_some() {
            bail!(
                "--host-dmabuf registers host memory through a dma-buf; with --use-cuda the GPU's \
                 memory is used instead (--cuda-mem dmabuf): give one or the other"
            );
        }
        if kind != TransportKind::Verbs {
            bail!("--host-dmabuf is a way to register memory with an RDMA NIC: use it with --transport verbs");
        }
        return host_dmabuf_trial(opts);
    }
    let Some(g) = opts.gpu.as_mut() else {
        return Ok(());
    };
    if kind == TransportKind::Verbs && bench == Bench::Latency && op == Op::Write {
        bail!(
            "write latency polls the last byte of its buffer with the CPU, which cannot read GPU \
             memory: with --use-cuda measure --test send or --test read latency (perftest: \
             \"CUDA latency tests with read/send verbs only\"), or leave out --use-cuda"
        );
    }
    if kind == TransportKind::Verbs && opts.inline_size.is_some_and(|i| i > 0) {
        warn("-I ignored: GPU memory is never sent inline (the CPU cannot read it)");
        opts.inline_size = Some(0);
    }
    resolve(kind, g, &mut opts.device, opts.port)
}

#[cfg(feature = "verbs")]
fn host_dmabuf_trial(opts: &VerbsOptions) -> Result<()> {
    crate::verbs::trial::host_dmabuf(opts.device.as_deref(), opts.port)
}

#[cfg(not(feature = "verbs"))]
fn host_dmabuf_trial(_: &VerbsOptions) -> Result<()> {
    bail!("this binary was built without the verbs transport (cargo feature `verbs`)")
}

#[cfg(not(feature = "cuda"))]
fn resolve(_: TransportKind, _: &mut GpuOptions, _: &mut Option<String>, _: u8) -> Result<()> {
    bail!(
        "this binary was built without CUDA support (cargo feature `cuda`): rebuild with it \
         (it loads libcuda at run time, so it builds anywhere), or leave out --use-cuda"
    )
}

#[cfg(feature = "cuda")]
fn resolve(
    kind: TransportKind,
    g: &mut GpuOptions,
    device: &mut Option<String>,
    port: u8,
) -> Result<()> {
    use crate::gpu::ResolvedGpu;
    use probe::topology::Topology;

    let facts = crate::cuda::facts::select(&g.gpu)?;
    let mut r = ResolvedGpu {
        ordinal: facts.ordinal,
        info: facts.info.clone(),
        ..Default::default()
    };
    if facts.integrated {
        r.warnings.push(format!(
            "{} is an integrated GPU: its memory is host memory, so these figures do not show a \
             discrete GPU's PCIe path",
            facts.describe()
        ));
    }
    if kind == TransportKind::Tcp {
        note(&format!(
            "{}: staging every message through pinned host memory (no GPUDirect over TCP)",
            facts.describe()
        ));
        for w in &r.warnings {
            warn(w);
        }
        g.resolved = Some(r);
        return Ok(());
    }
    if facts.gpudirect_rdma == Some(false) {
        bail!(crate::gpu::diagnose::no_gpudirect(&facts.describe()));
    }
    let topo = Topology::read();
    let bus = facts.info.pci_bus_id.clone();
    if device.is_none() {
        if let Some(c) = bus.as_deref().and_then(|b| topo.nearest_nic(b, port)) {
            note(&format!(
                "{} -> {} ({}: {}), the nearest RDMA device with port {port} ACTIVE (-d to choose)",
                facts.describe(),
                c.nic.name,
                c.relation.map_or("relation unknown", |r| r.code()),
                c.relation.map_or("not on the PCI tree", |r| r.describe()),
            ));
            *device = Some(c.nic.name);
        }
    }
    if let (Some(b), Some(d)) = (bus.as_deref(), device.as_deref()) {
        pair_with_nic(&topo, b, d, g.ignore_acs, &mut r)?;
    }
    let (path, earlier) = trial(device.as_deref(), port, &facts, g.mem)?;
    r.warnings.extend(earlier);
    r.path = Some(path.name().to_string());
    if r.nic.is_none() {
        r.nic = device.clone();
    }
    note(&format!(
        "{}: GPUDirect RDMA through {} on {}",
        facts.describe(),
        path.name(),
        r.nic.as_deref().unwrap_or("the first RDMA device")
    ));
    for w in &r.warnings {
        warn(w);
    }
    g.resolved = Some(r);
    Ok(())
}

/// The GPU at PCI `bus` paired with RDMA device `nic`: their relation on the PCI tree in
/// `r`, what the path between them risks as warnings; ACS redirecting their peer-to-peer
/// traffic through the root complex is an error unless `ignore_acs`.
#[cfg(feature = "cuda")]
fn pair_with_nic(
    topo: &probe::topology::Topology,
    bus: &str,
    nic: &str,
    ignore_acs: bool,
    r: &mut crate::gpu::ResolvedGpu,
) -> Result<()> {
    use probe::topology::{pairing_issues, PairingIssue};
    let nic_bus = topo.nic(nic).and_then(|n| n.bus_id.clone());
    r.nic = Some(nic.to_string());
    r.relation = nic_bus
        .as_deref()
        .and_then(|nb| topo.relation(bus, nb))
        .map(|x| x.code().to_string());
    r.nic_pci_bus_id = nic_bus;
    let mut acs = Vec::new();
    for issue in pairing_issues(topo, bus, nic) {
        match issue {
            PairingIssue::Acs(t) if !ignore_acs => acs.push(t),
            other => r.warnings.push(other.text().to_string()),
        }
    }
    if !acs.is_empty() {
        bail!(
            "{}\n(--ignore-acs measures anyway, with this as a warning in the results)",
            acs.join("\n")
        );
    }
    Ok(())
}

#[cfg(all(feature = "cuda", feature = "verbs"))]
fn trial(
    device: Option<&str>,
    port: u8,
    facts: &crate::cuda::facts::GpuFacts,
    mem: crate::gpu::CudaMem,
) -> Result<(crate::gpu::CudaMem, Vec<String>)> {
    crate::verbs::trial::gpu(device, port, facts, mem)
}

#[cfg(all(feature = "cuda", not(feature = "verbs")))]
fn trial(
    _: Option<&str>,
    _: u8,
    _: &crate::cuda::facts::GpuFacts,
    _: crate::gpu::CudaMem,
) -> Result<(crate::gpu::CudaMem, Vec<String>)> {
    bail!("this binary was built without the verbs transport (cargo feature `verbs`)")
}
/// One line for a table header: where this side's buffers are, e.g.
/// `GPU 0 (NVIDIA H200, 0000:18:00.0) memory, dmabuf on mlx5_0 (PIX)`; `None` for host memory.
pub fn describe(verbs: &VerbsOptions) -> Option<String> {
    if verbs.host_dmabuf {
        return Some("host memory registered through a dma-buf (--host-dmabuf)".into());
    }
    let r = verbs.gpu.as_ref()?.resolved.as_ref()?;
    let gpu = format!(
        "GPU {} ({}, {}) memory",
        r.ordinal,
        r.info.name,
        r.info.pci_bus_id.as_deref().unwrap_or("?")
    );
    Some(match (&r.path, &r.nic) {
        (Some(p), Some(n)) => format!(
            "{gpu}, {p} on {n}{}",
            r.relation
                .as_deref()
                .map(|x| format!(" ({x})"))
                .unwrap_or_default()
        ),
        (Some(p), None) => format!("{gpu}, {p}"),
        (None, _) => format!("{gpu}, staged through pinned host memory"),
    })
}

/// The options a document records for the buffers' memory (`use_cuda`, `cuda_mem`,
/// `host_dmabuf`); empty for host memory.
pub fn recorded_options(verbs: &VerbsOptions) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    if verbs.host_dmabuf {
        m.insert("host_dmabuf".into(), true.into());
    }
    if let Some(g) = &verbs.gpu {
        if let Some(r) = &g.resolved {
            m.insert("use_cuda".into(), r.ordinal.into());
            m.insert(
                "cuda_mem".into(),
                r.path.clone().unwrap_or_else(|| "staged".into()).into(),
            );
        }
        m.insert("cuda_mem_requested".into(), g.mem.name().into());
    }
    m
}
