//! GPU copy baselines: `bench-bw --test h2d|d2h|d2d|p2p [--use-cuda N]`.
//!
//! One process, one host: host-to-device and device-to-host through pinned memory, device
//! to device within the GPU, and GPU to GPU (the chosen GPU to every other one and back).
//! Each size is timed on the GPU (copies back to back on one stream, an event after each,
//! as the CUDA `bandwidthTest` sample and nvbandwidth time them, queued behind a stream
//! wait the host releases so small copies are not timed at the host's enqueue rate) and
//! written as a bandwidth
//! row of the usual schema (`test` = `h2d_bw` ..., `transport` = `cuda`), so a report puts
//! the GPU's own limits beside the GPUDirect and staged figures.

use p2p_cli::{GpuArgs, P2pArgs};

/// Runs the copy test the options name and returns the exit code.
pub fn run(args: &P2pArgs, gpu: &GpuArgs, interval_ms: u64) -> i32 {
    base::interrupt::install();
    match imp::run(args, gpu, interval_ms) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bench-bw: error: {e:#}");
            base::exit::ERROR
        }
    }
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use super::*;

    pub fn run(args: &P2pArgs, _: &GpuArgs, _: u64) -> anyhow::Result<i32> {
        anyhow::bail!(
            "--test {} needs CUDA support, and this bench-bw was built without it (cargo \
             feature `cuda`; it loads libcuda at run time, so it builds anywhere)",
            args.op.name()
        )
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use anyhow::{bail, Result};
    use serde_json::json;

    use base::cpu::CpuMeter;
    use results::units::{gbit_s, mpps};
    use results::{
        BandwidthResult, BandwidthSummary, CpuUse, Document, MemorySide, MemoryUse, Pair, Peer,
        TestResult,
    };
    use transport::cuda::copy::{CopyBench, CopyKind, Timing};
    use transport::cuda::facts::{self, GpuFacts};
    use transport::gpu::GpuSelector;
    use transport::Op;

    use super::*;

    /// Size when neither `-s` nor `-a` is given: the CUDA bandwidthTest sample's 32 MB.
    const DEFAULT_SIZE: u64 = 32 << 20;
    /// Per-copy samples kept in `interval_gbit_s` (the rest still count in the average).
    const MAX_SAMPLES: usize = 1000;

    fn kind(op: Op) -> CopyKind {
        match op {
            Op::H2d => CopyKind::H2d,
            Op::D2h => CopyKind::D2h,
            Op::D2d => CopyKind::D2d,
            _ => CopyKind::P2p,
        }
    }

    fn side(f: Option<&GpuFacts>, warnings: Vec<String>) -> MemorySide {
        MemorySide {
            kind: if f.is_some() { "cuda" } else { "host" }.into(),
            path: "copy".into(),
            gpu: f.map(|f| f.info.clone()),
            warnings,
            ..Default::default()
        }
    }

    pub fn run(args: &P2pArgs, gpu: &GpuArgs, _interval_ms: u64) -> Result<i32> {
        let kind = kind(args.op);
        let test = format!("{}_bw", kind.name());
        if args.host.is_some() {
            bail!(
                "--test {} measures this host's GPUs alone: leave out the HOST",
                kind.name()
            );
        }
        if base::launcher::resolve_launcher(args.launcher) == base::launcher::Launcher::Mpi {
            bail!(
                "--test {} runs in one process per host, not under mpirun/srun: start it \
                 directly on each host (e.g. `srun -N 8 --ntasks-per-node 1 bench-bw --test {} \
                 --launcher standalone`)",
                kind.name(),
                kind.name()
            );
        }
        if args.duration.is_some() {
            bail!("-D is not supported by the copy tests: give the copies per size with -n");
        }
        if gpu.host_dmabuf {
            bail!(
                "--host-dmabuf is a NIC registration path; the copy tests use pinned host memory"
            );
        }
        base::output::check_writable(args.json.as_deref())?;
        let sel = gpu
            .gpu_options()
            .map(|g| g.gpu)
            .unwrap_or(GpuSelector::Ordinal(0));
        let me = facts::select(&sel)?;
        let count = facts::check_driver()?;
        let peers: Vec<u32> = if kind == CopyKind::P2p {
            let others: Vec<u32> = (0..count).filter(|g| *g != me.ordinal).collect();
            if others.is_empty() {
                bail!(
                    "--test p2p copies between GPUs, and this host has {count} GPU: run it on a \
                     host with two or more"
                );
            }
            others
        } else {
            vec![me.ordinal]
        };
        let sizes = if args.all || args.size.is_some() {
            args.sizes(DEFAULT_SIZE)
        } else {
            vec![DEFAULT_SIZE]
        };
        let iters = args.iters.unwrap_or(100);
        let warmup = args.warmup.unwrap_or(10);
        let started = results::provenance::now_rfc3339();
        let host = probe::host::hostname();
        // Every direction measured: for p2p both ways between the chosen GPU and each peer.
        let mut routes: Vec<(u32, Option<u32>)> = Vec::new();
        for p in &peers {
            if kind == CopyKind::P2p {
                routes.push((me.ordinal, Some(*p)));
                routes.push((*p, Some(me.ordinal)));
            } else {
                routes.push((me.ordinal, None));
            }
        }
        println!("{}", "-".repeat(100));
        println!(
            " {test}: GPU copy baseline on {}, {iters} copies per size after {warmup} warm-up, GPU-timed",
            me.describe()
        );
        println!("{}", "-".repeat(100));
        println!(" #bytes       #copies   BW peak[Gb/sec]   BW average[Gb/sec]   BW average[GB/sec]   route");
        let mut rows = Vec::new();
        let mut stopped = None;
        // Why copies ran without the gate, if any did (said once, kept in the options).
        let mut ungated: Option<String> = None;
        'sizes: for size in &sizes {
            for (src, dst) in &routes {
                if base::interrupt::interrupted() {
                    stopped = Some(base::interrupt::REASON.to_string());
                    break 'sizes;
                }
                let cpu = CpuMeter::start();
                let bench = CopyBench::new(kind, *src, *dst, *size as usize)?;
                let t = bench.run(warmup, iters)?;
                drop(bench);
                let cores = cpu.cores();
                let total_ns: u64 = t.per_copy_ns.iter().sum::<u64>().max(1);
                let seconds = total_ns as f64 / 1e9;
                // D2D counts read plus write, as bandwidthTest does (CopyKind::bytes_counted).
                let counted = kind.bytes_counted(*size);
                let avg = gbit_s(counted * iters, seconds);
                let samples: Vec<f64> = t
                    .per_copy_ns
                    .iter()
                    .take(MAX_SAMPLES)
                    .map(|ns| gbit_s(counted, (*ns).max(1) as f64 / 1e9))
                    .collect();
                let peak = samples.iter().copied().fold(avg, f64::max);
                let src_f = facts::facts(*src)?;
                let dst_f = match dst {
                    Some(d) => Some(facts::facts(*d)?),
                    None => None,
                };
                let mut warnings = Vec::new();
                if let Timing::Ungated(why) = &t.timing {
                    let text = format!(
                        "copies timed without the gate ({why}): where a copy takes the GPU \
                         less time than its enqueue, this figure is the host's enqueue rate"
                    );
                    if ungated.is_none() {
                        eprintln!("bench-bw: warning: {text}");
                        ungated = Some(why.clone());
                    }
                    warnings.push(text);
                }
                if t.peer_access == Some(false) {
                    warnings.push(format!(
                        "GPU {src} and GPU {} cannot reach each other directly \
                         (cuDeviceCanAccessPeer = 0): the driver stages the copy through host memory",
                        dst.unwrap_or(0)
                    ));
                }
                // The source side carries the run's warnings.
                let (from, to) = match kind {
                    CopyKind::H2d => (side(None, warnings), side(Some(&src_f), vec![])),
                    CopyKind::D2h => (side(Some(&src_f), warnings), side(None, vec![])),
                    CopyKind::D2d => (side(Some(&src_f), warnings), side(Some(&src_f), vec![])),
                    CopyKind::P2p => (side(Some(&src_f), warnings), side(dst_f.as_ref(), vec![])),
                };
                let route = match (kind, dst) {
                    (CopyKind::H2d, _) => format!("host -> GPU {src}"),
                    (CopyKind::D2h, _) => format!("GPU {src} -> host"),
                    (CopyKind::D2d, _) => format!("GPU {src} -> GPU {src} (read+write counted)"),
                    (CopyKind::P2p, d) => format!("GPU {src} -> GPU {}", d.unwrap_or(0)),
                };
                println!(
                    " {:<12} {:<9} {:<17.2} {:<20.2} {:<20.2} {route}",
                    size,
                    iters,
                    peak,
                    avg,
                    avg / 8.0,
                );
                let peer = Peer {
                    rank: None,
                    host: host.clone(),
                    ..Default::default()
                };
                rows.push(TestResult::Bandwidth(BandwidthResult {
                    test: test.clone(),
                    transport: "cuda".into(),
                    size_bytes: *size,
                    iterations: iters,
                    duration_s: seconds,
                    bidirectional: false,
                    streams: 1,
                    tx_depth: 1,
                    cq_mod: None,
                    post_list: None,
                    bw_gbit_s: BandwidthSummary {
                        avg,
                        peak,
                        perftest_peak: None,
                    },
                    msg_rate_mpps: mpps(iters, seconds),
                    interval_s: seconds / iters.max(1) as f64,
                    interval_gbit_s: samples,
                    cpu: CpuUse {
                        initiator_cores: cores,
                        responder_cores: 0.0,
                    },
                    pair: Pair {
                        initiator: peer.clone(),
                        responder: peer,
                        round: None,
                    },
                    complete: true,
                    counters: None,
                    check_wrong_bytes: None,
                    memory: Some(MemoryUse {
                        initiator: Some(from),
                        responder: Some(to),
                    }),
                    setup: None,
                    directions: Vec::new(),
                    flows: Vec::new(),
                }));
            }
        }
        let mut doc = Document::new("bench-bw", "standalone", 1, started);
        doc.hosts = vec![probe::host::collect()];
        let opts = json!({
            "test": test,
            "transport": "cuda",
            "sizes": sizes,
            "iterations": iters,
            "warmup": warmup,
            "use_cuda": me.ordinal,
            // D2D counts every byte read and written (bandwidthTest's rule); the others
            // every byte copied.
            "bytes_counted": kind.counting(),
            // Copies queued behind a stream wait and released whole ("gated"), or not.
            "timing": if ungated.is_some() { "ungated" } else { "gated" },
            "timing_why": ungated,
        });
        if let serde_json::Value::Object(o) = opts {
            doc.options = o;
        }
        doc.results = rows;
        let interrupted = stopped.is_some();
        doc.finish(stopped);
        base::output::write_document(args.json.as_deref(), &doc)?;
        Ok(if interrupted {
            base::exit::INTERRUPTED
        } else {
            base::exit::OK
        })
    }
}
