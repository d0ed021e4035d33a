//! The one harness (nccl-tests' `common.cu`): start the MPI job and the backend, walk the
//! collectives and sizes together on every rank, time, check, reduce the times across
//! ranks, print rank 0's table and write its document.
//!
//! Timing: each rank stamps every iteration of its own loop. Afterwards an element-wise
//! MAX across ranks gives, per iteration, the time of the slowest rank: a collective is
//! only as fast as its last participant. `time_us` is the mean of those maxima, the
//! histogram holds them all, and `slowest_rank` is the rank whose own mean was largest.
//!
//! Faults: every wait on other ranks is guarded by the watchdog (a barrier, the reduction
//! of the times, NCCL start-up), and the timed loop bumps a progress counter that the
//! watchdog watches, so a rank that dies or never arrives ends the run on the others
//! within `--timeout` with a message, instead of a hang. Ctrl-C stops at the next size,
//! agreed by all ranks, and the document is written marked incomplete.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use mpi::collective::SystemOperation;
use mpi::traits::*;
use serde_json::{json, Map, Value};

use fabric::bootstrap::mpi::MpiJob;
use fabric::clock::LoopClock;
use fabric::{exit, interrupt};
use results::{
    CollectiveResult, CollectiveTiming, Document, HostInfo, LatencyHistogram, TestResult,
};

use crate::backend::mpi::MpiBackend;
use crate::backend::{Backend, Buf, Step};
use crate::colls::{Collective, Ctx};
use crate::{data, report, BackendKind, Cli, Plan};

/// Byte every output buffer is filled with before a checked call: NaN in every float
/// type, -1 or the maximum in integer types, none of which a correct result can be.
const POISON: u8 = 0xff;

/// Test hook (not a user option): `FABCHECK_COLLECTIVE_FAULT=die:R|hang:R|corrupt:R`
/// makes rank R abort, stop taking part, or corrupt one checked element, so the tests can
/// prove that faults end the run and that `--check` finds wrong data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Die,
    Hang,
    Corrupt,
}

fn fault_for(rank: u32) -> Option<Fault> {
    let v = std::env::var("FABCHECK_COLLECTIVE_FAULT").ok()?;
    let (kind, r) = v.split_once(':')?;
    if r.parse::<u32>().ok()? != rank {
        return None;
    }
    match kind {
        "die" => Some(Fault::Die),
        "hang" => Some(Fault::Hang),
        "corrupt" => Some(Fault::Corrupt),
        _ => None,
    }
}

/// What one rank contributes to the document's host list.
#[derive(serde::Serialize, serde::Deserialize)]
struct RankInfo {
    host: HostInfo,
    pid: u32,
    device: String,
}

pub fn run(cli: &Cli, plan: Plan) -> i32 {
    interrupt::install();
    let timeout = Duration::from_secs_f64(cli.timeout);
    let job = match MpiJob::init(timeout) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("bench-collective: error: {e:#}");
            return exit::ERROR;
        }
    };
    match run_job(cli, plan, &job) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bench-collective: rank {}: error: {e:#}", job.rank());
            // The other ranks may be waiting in a collective: end them too.
            if job.size() > 1 {
                job.abort(exit::ERROR);
            }
            exit::ERROR
        }
    }
}

/// Every rank learns whether any rank failed `local`; the failing ranks say why, and all
/// end with exit code 2 together instead of leaving the others waiting.
fn agree(job: &MpiJob, local: Result<()>) -> Result<(), i32> {
    let failed = local.is_err();
    if let Err(e) = &local {
        eprintln!("bench-collective: rank {}: error: {e:#}", job.rank());
    }
    if job.any(failed) {
        Err(exit::ERROR)
    } else {
        Ok(())
    }
}

fn run_job(cli: &Cli, plan: Plan, job: &MpiJob) -> Result<i32> {
    let (rank, ranks) = (job.rank(), job.size());
    let me = rank == 0;
    // Checks every rank agrees on before anything is measured.
    let root_ok = if cli.root < ranks {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "-r/--root {} is not a rank of this {ranks}-rank job (0 .. {})",
            cli.root,
            ranks - 1
        ))
    };
    if let Err(code) = agree(job, if me { root_ok } else { Ok(()) }) {
        return Ok(code);
    }
    let out_ok = if me {
        fabric::output::check_writable(cli.json.as_deref())
    } else {
        Ok(())
    };
    if let Err(code) = agree(job, out_ok) {
        return Ok(code);
    }
    let started_at = results::provenance::now_rfc3339();

    let mut backend: Box<dyn Backend + '_> = match cli.backend {
        BackendKind::Mpi => Box::new(MpiBackend::new(job.world(), rank as usize)),
        BackendKind::Nccl => match nccl_backend(job) {
            Ok(b) => b,
            Err(code) => return Ok(code),
        },
    };
    let clock_name = backend.clock();
    let overhead_ns =
        (cli.backend == BackendKind::Mpi).then(|| LoopClock::new().loop_overhead_ns());

    // Who is who: every rank's host facts and device, at rank 0.
    let mut host = fabric::host::collect();
    host.rank = Some(rank);
    host.gpus.extend(backend.gpu());
    let info = RankInfo {
        host,
        pid: std::process::id(),
        device: backend.device_line(),
    };
    let infos: Option<Vec<RankInfo>> = job
        .gather_to_root(&serde_json::to_vec(&info)?)
        .map(|all| {
            all.iter()
                .map(|b| fabric::wire::decode_json(b).context("a rank sent unreadable host facts"))
                .collect::<Result<_>>()
        })
        .transpose()?;

    let (link, link_source) = match cli.link_gbit_s {
        Some(l) => (Some(l), Some("--link-gbit-s".to_string())),
        None => match fabric::host::link_rate_gbit_s(&info.host) {
            Some((l, src)) => (Some(l), Some(src)),
            None => (None, None),
        },
    };
    let mut warnings = Vec::new();
    if link.is_none() {
        warnings.push(
            "no link rate known (no RDMA port or interface reports one): efficiency left out; \
             pass --link-gbit-s"
                .to_string(),
        );
    }

    if me {
        print_preamble(cli, &plan, infos.as_deref().unwrap_or_default());
    }

    let mut all_rows: Vec<CollectiveResult> = Vec::new();
    let mut stopped: Option<String> = None;
    let fault = fault_for(rank);
    let probe = fabric::quality::Probe::start();
    'colls: for coll in &plan.collectives {
        if me {
            println!(
                "# {}: backend {}, {} ranks, {}{}",
                coll.name,
                backend.name(),
                ranks,
                cli.datatype.name(),
                if coll.reduces {
                    format!(", {}", cli.op.name())
                } else {
                    String::new()
                }
            );
            println!("{}", report::header());
        }
        let mut rows = Vec::new();
        for &size in &plan.sizes {
            job.barrier("before the next size");
            if job.any(interrupt::interrupted()) {
                stopped = Some("interrupted (Ctrl-C or SIGTERM)".into());
                if me {
                    println!("{}", report::footer(&rows));
                }
                all_rows.extend(rows);
                break 'colls;
            }
            match fault {
                Some(Fault::Die) => {
                    eprintln!("rank {rank}: test fault: dying");
                    std::process::abort();
                }
                Some(Fault::Hang) => {
                    eprintln!("rank {rank}: test fault: no longer taking part");
                    loop {
                        std::thread::sleep(Duration::from_secs(3600));
                    }
                }
                _ => {}
            }
            let r = measure_size(
                cli,
                job,
                &mut *backend,
                coll,
                size,
                fault == Some(Fault::Corrupt),
                link,
            )?;
            if me {
                println!("{}", report::row(&r, cli.datatype.nccl_tests_name()));
            }
            rows.push(r);
        }
        if me {
            println!("{}", report::footer(&rows));
        }
        all_rows.extend(rows);
    }

    let quality = fabric::quality::gather(job, &probe.finish(&info.host))?;
    let wrong: u64 = all_rows
        .iter()
        .map(|r| r.out_of_place.wrong + r.in_place.wrong)
        .sum();
    if me {
        let mut doc = Document::new("bench-collective", "mpi", ranks, started_at);
        doc.loop_overhead_ns = overhead_ns;
        doc.clock = Some(clock_name);
        doc.hosts = infos
            .unwrap_or_default()
            .into_iter()
            .map(|i| i.host)
            .collect();
        doc.options = options(cli, &plan, link, link_source);
        doc.results = all_rows.into_iter().map(TestResult::Collective).collect();
        doc.warnings = warnings;
        doc.attach_quality(quality.unwrap_or_default());
        doc.finish(stopped.clone());
        fabric::output::write_document(cli.json.as_deref(), &doc)?;
    }
    Ok(if stopped.is_some() {
        exit::INTERRUPTED
    } else if wrong > 0 {
        if me {
            eprintln!("bench-collective: {wrong} wrong element(s) found by --check: the results are not correct");
        }
        exit::CHECK_FAILED
    } else {
        exit::OK
    })
}

#[cfg(feature = "cuda")]
fn nccl_backend(job: &MpiJob) -> Result<Box<dyn Backend + '_>, i32> {
    use crate::backend::nccl::NcclBackend;
    agree(job, fabric::cuda::check_available())?;
    let b = NcclBackend::new(job);
    let ok = b.as_ref().map(|_| ()).map_err(|e| anyhow::anyhow!("{e:#}"));
    agree(job, ok)?;
    Ok(Box::new(b.expect("checked")))
}

#[cfg(not(feature = "cuda"))]
fn nccl_backend(job: &MpiJob) -> Result<Box<dyn Backend + '_>, i32> {
    agree(
        job,
        Err(anyhow::anyhow!(
            "this build has no NCCL backend (feature `cuda`): rebuild with default features"
        )),
    )?;
    unreachable!("agree fails on every rank")
}

fn print_preamble(cli: &Cli, plan: &Plan, infos: &[RankInfo]) {
    let step = match cli.stepbytes {
        Some(b) => format!("{b}(bytes)"),
        None => format!("{}(factor)", cli.stepfactor.unwrap_or(2)),
    };
    println!(
        "# nThread 1 nGpus 1 minBytes {} maxBytes {} step: {step} warmup iters: {} iters: {} agg iters: 1 validation: {} graph: 0",
        plan.sizes.first().copied().unwrap_or(cli.minbytes),
        cli.maxbytes,
        cli.warmup,
        cli.iters,
        cli.check
    );
    println!("#");
    println!("# Using devices");
    for (r, i) in infos.iter().enumerate() {
        println!(
            "#  Rank {r:2} Group  0 Pid {:6} on {:>10} {}",
            i.pid, i.host.hostname, i.device
        );
    }
}

/// Every option that shapes the numbers, for the document.
fn options(
    cli: &Cli,
    plan: &Plan,
    link: Option<f64>,
    link_source: Option<String>,
) -> Map<String, Value> {
    let v = json!({
        "collectives": plan.collectives.iter().map(|c| c.name).collect::<Vec<_>>(),
        "backend": cli.backend.name(),
        "minbytes": cli.minbytes,
        "maxbytes": cli.maxbytes,
        "stepfactor": if cli.stepbytes.is_none() { Some(cli.stepfactor.unwrap_or(2)) } else { None },
        "stepbytes": cli.stepbytes,
        "sizes": plan.sizes,
        "iters": cli.iters,
        "warmup_iters": cli.warmup,
        "check": cli.check,
        "op": cli.op.name(),
        "datatype": cli.datatype.name(),
        "root": cli.root,
        "timeout_s": cli.timeout,
        "link_gbit_s": link,
        "link_source": link_source,
    });
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// One size of one collective: out of place, then in place.
fn measure_size(
    cli: &Cli,
    job: &MpiJob,
    backend: &mut dyn Backend,
    coll: &Collective,
    size: u64,
    corrupt: bool,
    link: Option<f64>,
) -> Result<CollectiveResult> {
    let ranks = job.size() as usize;
    let rank = job.rank() as usize;
    let dt = cli.datatype;
    let ts = dt.size();
    let counts = (coll.counts)(size as usize / ts, ranks);
    let size_bytes = (counts.send.max(counts.recv) * ts) as u64;
    let op = coll.reduces.then_some(cli.op);
    backend.prepare((counts.send.max(counts.recv) * ts).max(1))?;
    let input = data::fill_input(dt, op, rank, counts.send);
    let ctx = Ctx {
        ranks,
        root: cli.root as usize,
        op,
        counts,
    };
    let factor = (coll.bus_factor)(ranks);
    let mut timings = Vec::with_capacity(2);
    for in_place in [false, true] {
        let step = Step {
            coll,
            in_place,
            count: counts.param,
            datatype: dt,
            op: cli.op,
            root: cli.root as usize,
        };
        let layout = backend.layout(coll, in_place, rank, cli.root as usize, counts.param);
        backend.write(layout.input.0, layout.input.1 * ts, &input)?;
        job.barrier("before the timed loop");
        let progress = Arc::new(AtomicU64::new(0));
        let times = {
            let _g = job.watchdog().arm_progress(
                format!(
                    "in {} at {size} bytes: an iteration made no progress (a rank stopped taking part)",
                    coll.name
                ),
                Arc::clone(&progress),
            );
            backend.run(&step, cli.warmup, cli.iters, &progress)?
        };
        let wrong = if cli.check == 1 {
            backend.fill(Buf::Recv, POISON)?;
            backend.write(layout.input.0, layout.input.1 * ts, &input)?;
            {
                let _g = job
                    .watchdog()
                    .arm(format!("in the checked call of {}", coll.name));
                backend.run(&step, 0, 1, &progress)?;
            }
            let mut out = vec![0u8; counts.recv * ts];
            backend.read(layout.output.0, layout.output.1 * ts, &mut out)?;
            if corrupt && !out.is_empty() {
                out[..ts].fill(POISON);
            }
            Some(data::count_wrong(dt, op, ranks, &out, |j| {
                (coll.expected)(&ctx, rank, j)
            }))
        } else {
            None
        };
        timings.push(combine(job, &times, wrong, size_bytes, factor, link)?);
    }
    let in_place = timings.pop().expect("two modes");
    let out_of_place = timings.pop().expect("two modes");
    Ok(CollectiveResult {
        collective: coll.name.into(),
        backend: backend.name().into(),
        ranks: ranks as u32,
        size_bytes,
        count: counts.param as u64,
        datatype: dt.name().into(),
        op: if coll.reduces { cli.op.name() } else { "none" }.into(),
        root: coll.root_of(cli.root as usize),
        iterations: cli.iters,
        warmup_iterations: cli.warmup,
        busbw_factor: factor,
        link_gbit_s: link,
        out_of_place,
        in_place,
        complete: true,
    })
}

/// Reduces one mode's per-iteration times and wrong counts across ranks (every rank
/// calls it; every rank gets the same figures).
fn combine(
    job: &MpiJob,
    times: &[u64],
    wrong: Option<u64>,
    size_bytes: u64,
    factor: f64,
    link: Option<f64>,
) -> Result<CollectiveTiming> {
    let world = job.world();
    let _g = job
        .watchdog()
        .arm("combining the iteration times of all ranks");
    let mut slowest = vec![0u64; times.len()];
    world.all_reduce_into(times, &mut slowest[..], SystemOperation::max());
    let mean_ns = |v: &[u64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().map(|&t| t as f64).sum::<f64>() / v.len() as f64
        }
    };
    let mine = mean_ns(times);
    let mut means = vec![0f64; world.size() as usize];
    world.all_gather_into(&mine, &mut means[..]);
    let slowest_rank = means
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(r, _)| r as u32);
    let local_wrong = wrong.unwrap_or(0);
    let mut total_wrong = 0u64;
    world.all_reduce_into(&local_wrong, &mut total_wrong, SystemOperation::sum());

    let mut hist = LatencyHistogram::new();
    for &t in &slowest {
        hist.record(t);
    }
    let time_us = mean_ns(&slowest) / 1000.0;
    let algbw = results::units::gbyte_s(size_bytes, time_us / 1e6);
    let busbw = algbw * factor;
    Ok(CollectiveTiming {
        time_us,
        algbw_gbyte_s: algbw,
        busbw_gbyte_s: busbw,
        efficiency: link.map(|l| busbw * 8.0 / l),
        wrong: total_wrong,
        checked: wrong.is_some(),
        latency_us: hist.summary_us(),
        histogram: hist.encode(),
        slowest_rank,
    })
}
