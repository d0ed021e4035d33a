//! The one harness (nccl-tests' `common.cu`): start the MPI job, agree on the request,
//! plan the teams (the job, or the sub-communicators of a scaling sweep), and on each team
//! start the backend and walk the collectives and sizes together on every rank
//! (`measure`), print rank 0's table and write its document.
//!
//! Faults: every wait on other ranks is guarded by the watchdog (a barrier, the
//! reductions of the times, NCCL start-up), and the timed loop bumps a progress counter
//! that the watchdog watches, so a rank that dies or never arrives ends the run on the
//! others within `--timeout` with a message, instead of a hang. Ctrl-C stops at the next
//! size, agreed by all ranks, and the document is written marked incomplete. The exit
//! code follows the suite's one policy (`base::exit`).

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use base::clock::LoopClock;
use base::exit::{self, Outcome};
use base::interrupt;
use base::output;
use bootstrap::mpi::{MpiJob, Team};
use bootstrap::node::NodeRank;
use results::{CollectiveResult, Document, HostInfo, TestResult};

use crate::backend::mpi::MpiBackend;
use crate::backend::Backend;

/// The schema's `clock` for the NCCL backend: `time_us` by the host's monotonic clock
/// (`Instant` around the launches and the final wait), the histogram by CUDA events.
const NCCL_CLOCK: &str = "monotonic+cuda_event";
use crate::fault::{self, Fault};
use crate::plan::{BackendKind, Plan, Selected, Stepping};
use crate::scaling::{self, TeamSpec};
use crate::{measure, report};

/// What one rank contributes to the document's host list.
#[derive(Serialize, Deserialize)]
struct RankInfo {
    host: HostInfo,
    pid: u32,
    device: String,
}

pub fn run(plan: &Plan) -> i32 {
    interrupt::install();
    let job = match MpiJob::init(plan.timeout) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("bench-collective: error: {e:#}");
            return exit::ERROR;
        }
    };
    match run_job(plan, &job) {
        Ok(code) => code,
        Err(e) => {
            output::error_line(&format!(
                "bench-collective: rank {}: error: {e:#}",
                job.rank()
            ));
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
fn agree(any: impl Fn(bool) -> bool, rank: u32, local: Result<()>) -> Result<(), i32> {
    let failed = local.is_err();
    if let Err(e) = &local {
        output::error_line(&format!("bench-collective: rank {rank}: error: {e:#}"));
    }
    if any(failed) {
        Err(exit::ERROR)
    } else {
        Ok(())
    }
}

/// What the sweep produced on this rank (rows on every rank of the teams it was in; only
/// rank 0's are printed and written).
#[derive(Default)]
struct Sweep {
    rows: Vec<CollectiveResult>,
    stopped: Option<String>,
    warnings: Vec<String>,
}

/// Who is who, known before the first team measures.
struct Setup {
    started_at: String,
    overhead_ns: Option<f64>,
    /// This rank's host facts.
    info: RankInfo,
    /// Every rank's, at rank 0.
    infos: Option<Vec<RankInfo>>,
    teams: Vec<TeamSpec>,
}

fn run_job(plan: &Plan, job: &MpiJob) -> Result<i32> {
    let setup = match setup(plan, job)? {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let me = job.rank() == 0;
    let (link, link_source) = match plan.link_gbit_s {
        Some(l) => (Some(l), Some("--link-gbit-s".to_string())),
        None => match probe::host::link_rate_gbit_s(&setup.info.host) {
            Some((l, src)) => (Some(l), Some(src)),
            None => (None, None),
        },
    };
    let mut sweep = Sweep::default();
    if link.is_none() {
        sweep.warnings.push(
            "no link rate known (no RDMA port or interface reports one): efficiency left out; \
             pass --link-gbit-s"
                .to_string(),
        );
    }
    if me {
        print_preamble(plan, setup.infos.as_deref().unwrap_or_default());
    }
    // What else ran on the hosts while they measured (probe::quality).
    let probe = probe::quality::Probe::start();
    if let Err(code) = sweep_teams(plan, job, &setup.teams, link, &mut sweep)? {
        return Ok(code);
    }
    let quality = job.gather_quality(&probe.finish(&setup.info.host))?;
    let wrong: u64 = sweep
        .rows
        .iter()
        .map(|r| r.out_of_place.wrong + r.in_place.wrong)
        .sum();
    // Ranks outside some teams hold fewer rows: agree, so every rank exits alike.
    let check_failed = job.any(wrong > 0);
    if me {
        sweep.warnings.extend(link_warnings(&sweep.rows));
        sweep.warnings.extend(unchecked_warnings(&sweep.rows));
        for w in &sweep.warnings {
            eprintln!("bench-collective: warning: {w}");
        }
        let mut doc = Document::new("bench-collective", "mpi", job.size(), setup.started_at);
        doc.loop_overhead_ns = setup.overhead_ns;
        doc.clock = Some(
            match plan.backend {
                BackendKind::Mpi => LoopClock::source(),
                // time_us from the host around launches + final wait (nccl-tests'
                // timer), the histogram from CUDA events: both named (schema `clock`).
                BackendKind::Nccl => NCCL_CLOCK,
            }
            .into(),
        );
        doc.hosts = setup
            .infos
            .unwrap_or_default()
            .into_iter()
            .map(|i| i.host)
            .collect();
        doc.options = plan.options(link, link_source);
        doc.results = sweep.rows.into_iter().map(TestResult::Collective).collect();
        doc.warnings = sweep.warnings;
        doc.attach_quality(quality.unwrap_or_default());
        doc.finish(sweep.stopped.clone());
        base::output::write_document(plan.json.as_deref(), &doc)?;
        if wrong > 0 {
            eprintln!("bench-collective: {wrong} wrong element(s) found by --check: the results are not correct");
        }
    }
    Ok(exit::code(
        [
            check_failed.then_some(Outcome::CheckFailed),
            sweep.stopped.is_some().then_some(Outcome::Interrupted),
        ]
        .into_iter()
        .flatten(),
    ))
}

/// Checks every rank agrees on before anything is measured (the request fits the job,
/// the JSON is writable, the device opens), then who is who: every rank's host facts at
/// rank 0, which plans the teams and tells every rank. `Err(code)` on every rank when
/// any check failed.
fn setup(plan: &Plan, job: &MpiJob) -> Result<Result<Setup, i32>> {
    let rank = job.rank();
    let me = rank == 0;
    let job_agree = |local| agree(|f| job.any(f), rank, local);
    let request_ok = if me {
        check_request(plan, job.size())
    } else {
        Ok(())
    };
    if let Err(code) = job_agree(request_ok) {
        return Ok(Err(code));
    }
    let out_ok = if me {
        base::output::check_writable(plan.json.as_deref())
    } else {
        Ok(())
    };
    if let Err(code) = job_agree(out_ok) {
        return Ok(Err(code));
    }
    let started_at = results::provenance::now_rfc3339();
    let device = device_facts(plan.backend, job.node());
    let device_ok = device
        .as_ref()
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("{e:#}"));
    if let Err(code) = job_agree(device_ok) {
        return Ok(Err(code));
    }
    let (gpu, device_line) = device.expect("checked on every rank");
    let overhead_ns =
        (plan.backend == BackendKind::Mpi).then(|| LoopClock::new().loop_overhead_ns());

    let mut host = probe::host::collect();
    host.rank = Some(rank);
    add_rank_gpu(&mut host.gpus, gpu);
    let info = RankInfo {
        host,
        pid: std::process::id(),
        device: device_line,
    };
    let infos: Option<Vec<RankInfo>> = job
        .gather_to_root(&serde_json::to_vec(&info)?)
        .map(|all| {
            all.iter()
                .map(|b| base::wire::decode_json(b).context("a rank sent unreadable host facts"))
                .collect::<Result<_>>()
        })
        .transpose()?;
    let teams_json = match &infos {
        Some(infos) => {
            let hosts: Vec<String> = infos.iter().map(|i| i.host.hostname.clone()).collect();
            Some(serde_json::to_vec(&scaling::plan(&hosts, plan.scaling))?)
        }
        None => None,
    };
    let teams = base::wire::decode_json(&job.broadcast_bytes(teams_json, "the team plan"))
        .context("rank 0 sent an unreadable team plan")?;
    Ok(Ok(Setup {
        started_at,
        overhead_ns,
        info,
        infos,
        teams,
    }))
}

/// The teams one after the other; `Err(code)` on every rank when a team's backend could
/// not start.
fn sweep_teams(
    plan: &Plan,
    job: &MpiJob,
    teams: &[TeamSpec],
    link: Option<f64>,
    sweep: &mut Sweep,
) -> Result<Result<(), i32>> {
    let rank = job.rank();
    let fault = fault::for_rank(rank);
    for spec in teams {
        let member = spec.has(rank);
        let team = job.split(member);
        let outcome = match &team {
            Some(team) => {
                let site = measure::Site {
                    team,
                    spec,
                    link_gbit_s: link,
                    corrupt: fault == Some(Fault::Corrupt),
                };
                on_team(plan, &site, fault, sweep)?
            }
            None => TeamEnd::Done,
        };
        // Ranks outside the team waited here while it measured, for as long as it takes:
        // their wait is not guarded, the team's members guard theirs (rank 0 is in every
        // team), so a dead rank still ends the job within the timeout.
        if member {
            job.barrier("after a scaling step");
        } else {
            job.barrier_unguarded();
        }
        if job.any(outcome == TeamEnd::Failed) {
            return Ok(Err(exit::ERROR));
        }
        if job.any(outcome == TeamEnd::Stopped || interrupt::interrupted()) {
            sweep
                .stopped
                .get_or_insert_with(|| base::interrupt::REASON.into());
            break;
        }
    }
    Ok(Ok(()))
}

/// Adds the rank's own GPU (`Gpu::info`, NCCL runs) to the GPUs the host facts listed
/// from sysfs (`probe::host::collect`), unless one of them has its PCI bus id already,
/// so a GPU is counted once (the aggregate counts GPUs by name). Both sides write
/// `0000:18:00.0` today; the ids are compared normalised (domain width, case), as CUDA's
/// own `00000000:18:00.0` would read. Where it is listed, only what sysfs lacks (the
/// memory size) is taken from it; a GPU without a bus id, or one sysfs did not list, is
/// added.
fn add_rank_gpu(gpus: &mut Vec<results::GpuInfo>, gpu: Option<results::GpuInfo>) {
    let Some(gpu) = gpu else { return };
    let key = |id: &str| {
        probe::topology::normalize_bus_id(id).unwrap_or_else(|| id.trim().to_ascii_lowercase())
    };
    let listed = gpu.pci_bus_id.as_deref().map(key).and_then(|id| {
        gpus.iter_mut()
            .find(|g| g.pci_bus_id.as_deref().map(key).as_ref() == Some(&id))
    });
    match listed {
        Some(g) => {
            g.memory_bytes = g.memory_bytes.or(gpu.memory_bytes);
        }
        None => gpus.push(gpu),
    }
}

/// Refuses what cannot run on this job before anything starts.
fn check_request(plan: &Plan, ranks: u32) -> Result<()> {
    anyhow::ensure!(
        plan.root < ranks,
        "-r/--root {} is not a rank of this {ranks}-rank job (0 .. {})",
        plan.root,
        ranks - 1
    );
    if !plan.scaling {
        for c in plan.collectives.iter().filter(|c| c.named) {
            c.coll
                .primitive
                .runs_on(ranks as usize)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("{} cannot run on this job", c.coll.name))?;
        }
    }
    Ok(())
}

/// The rank's device for the document and the `# Using devices` list.
/// `node` is the rank's node-local rank (MPI's, `fabric::bootstrap::node`), which picks
/// its GPU; errors name it, so a wrong choice shows which rank thought it was where.
fn device_facts(kind: BackendKind, node: NodeRank) -> Result<(Option<results::GpuInfo>, String)> {
    match kind {
        BackendKind::Mpi => Ok((None, "host memory (MPI)".into())),
        BackendKind::Nccl => nccl_device(node).with_context(|| {
            format!(
                "local rank {} of {} on host {}",
                node.rank,
                node.size,
                probe::host::hostname()
            )
        }),
    }
}

#[cfg(feature = "cuda")]
fn nccl_device(node: NodeRank) -> Result<(Option<results::GpuInfo>, String)> {
    transport::cuda::check_available()?;
    let (gpu, line) = crate::backend::nccl::device_facts(node)?;
    Ok((Some(gpu), line))
}

#[cfg(not(feature = "cuda"))]
fn nccl_device(_: NodeRank) -> Result<(Option<results::GpuInfo>, String)> {
    anyhow::bail!("this build has no NCCL backend (feature `cuda`): rebuild with default features")
}

/// How one team's sweep ended on this rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TeamEnd {
    Done,
    Stopped,
    /// The backend could not start (the team's ranks agreed and said why).
    Failed,
}

/// Every collective and size on one team.
fn on_team(
    plan: &Plan,
    site: &measure::Site,
    fault: Option<Fault>,
    sweep: &mut Sweep,
) -> Result<TeamEnd> {
    let team = site.team;
    let me = team.rank() == 0;
    if let Some(ep) = &plan.ep {
        return on_team_ep(plan, ep, site, sweep);
    }
    let mut backend = match make_backend(plan.backend, team) {
        Ok(b) => b,
        Err(_) => return Ok(TeamEnd::Failed),
    };
    // The largest buffers of the sweep first, once (nccl-tests allocates its buffers at
    // the largest size): every size then runs in the same memory.
    backend.prepare(largest_buffer(plan, team.size() as usize))?;
    warm_up_largest(plan, site, &mut *backend)?;
    for sel in &plan.collectives {
        let coll = sel.coll;
        if let Err(why) = coll.primitive.runs_on(team.size() as usize) {
            if me {
                let note = format!("{} skipped on {} ranks: {why}", coll.name, team.size());
                println!("# {note}");
                sweep.warnings.push(note);
            }
            continue;
        }
        let tiny = tiny_sizes(plan, coll, team.size() as usize);
        if me && !tiny.is_empty() {
            let note = format!(
                "{}: {} size(s) up to {} B skipped on {} ranks: less than one {} block per rank",
                coll.name,
                tiny.len(),
                tiny.iter().max().unwrap_or(&0),
                team.size(),
                plan.datatype.name()
            );
            println!("# {note}");
            sweep.warnings.push(note);
        }
        if me {
            println!("{}", table_title(plan, site, sel));
            println!("{}", report::header());
        }
        let mut rows = Vec::new();
        for &size in plan.sizes.iter().filter(|s| !tiny.contains(s)) {
            team.barrier("before the next size");
            if team.any(interrupt::interrupted()) {
                if me {
                    println!("{}", report::footer(&rows));
                }
                sweep.rows.extend(rows);
                return Ok(TeamEnd::Stopped);
            }
            fault::before_size(fault, team.rank());
            let r = measure::size(plan, site, &mut *backend, coll, size)?;
            if me {
                println!("{}", report::row(&r, plan.datatype.nccl_tests_name()));
            }
            rows.push(r);
        }
        if me {
            println!("{}", report::footer(&rows));
        }
        sweep.rows.extend(rows);
    }
    Ok(TeamEnd::Done)
}

/// The largest buffer any collective of the plan needs at any of its sizes on `ranks`.
fn largest_buffer(plan: &Plan, ranks: usize) -> usize {
    plan.collectives
        .iter()
        .filter(|c| c.coll.primitive.runs_on(ranks).is_ok())
        .flat_map(|c| {
            plan.sizes
                .iter()
                .map(move |&s| measure::buffer_bytes(plan, c.coll, s, ranks))
        })
        .max()
        .unwrap_or(1)
}

/// Sizes too small for one element (one aligned block) per rank: nccl-tests would run
/// them as empty calls; a row of 0 bytes carries no bandwidth, so they are skipped, said
/// once (every rank decides the same from the same numbers).
fn tiny_sizes(plan: &Plan, coll: &crate::colls::Collective, ranks: usize) -> Vec<u64> {
    let ts = plan.datatype.size();
    plan.sizes
        .iter()
        .copied()
        .filter(|&s| coll.counts(s as usize / ts, ranks, ts).param == 0)
        .collect()
}

/// The expert-parallel collectives on one team, size by size (tokens per rank).
fn on_team_ep(
    plan: &Plan,
    ep: &crate::ep::EpPlan,
    site: &measure::Site,
    sweep: &mut Sweep,
) -> Result<TeamEnd> {
    let team = site.team;
    let me = team.rank() == 0;
    // NCCL: this rank's GPU and the team's communicator, once for every size.
    #[cfg(feature = "cuda")]
    let gpu = match plan.backend {
        BackendKind::Mpi => None,
        BackendKind::Nccl => {
            let b = crate::backend::nccl::NcclBackend::new(team);
            let local = b.as_ref().map(|_| ()).map_err(|e| anyhow::anyhow!("{e:#}"));
            if agree(|f| team.any(f), team.rank(), local).is_err() {
                return Ok(TeamEnd::Failed);
            }
            b.ok()
        }
    };
    #[cfg(feature = "cuda")]
    let mover = match &gpu {
        Some(b) => crate::ep_run::Mover::Nccl(b),
        None => crate::ep_run::Mover::Mpi,
    };
    #[cfg(not(feature = "cuda"))]
    let mover = {
        if plan.backend == BackendKind::Nccl {
            let local = Err(anyhow::anyhow!(
                "this build has no NCCL backend (feature `cuda`): rebuild with default features"
            ));
            let _ = agree(|f| team.any(f), team.rank(), local);
            return Ok(TeamEnd::Failed);
        }
        crate::ep_run::Mover::Mpi
    };
    if !ep_preflight(ep, site) {
        return Ok(TeamEnd::Failed);
    }
    if me {
        println!(
            "{}",
            report::ep_title(ep, plan.backend.name(), team.size(), site.spec.nodes)
        );
        println!("{}", report::ep_header());
    }
    for &tokens in &ep.tokens {
        team.barrier("before the next size");
        if team.any(interrupt::interrupted()) {
            return Ok(TeamEnd::Stopped);
        }
        let rows = crate::ep_run::size(plan, ep, site, mover, tokens)?;
        if me {
            for r in &rows {
                println!("{}", report::ep_row(r));
            }
        }
        sweep.rows.extend(rows);
    }
    Ok(TeamEnd::Done)
}

/// What must hold before any EP size runs, agreed by the whole team: the routing fits
/// the geometry, and the largest size's buffers fit in each host's memory.
fn ep_preflight(ep: &crate::ep::EpPlan, site: &measure::Site) -> bool {
    let team = site.team;
    let me = team.rank() == 0;
    let check = crate::ep_run::ranks_per_node(ep, site).and_then(|rpn| {
        let g = crate::ep::route::Geometry::new(
            team.size() as usize,
            rpn,
            ep.experts as usize,
            ep.topk as usize,
        )?;
        crate::ep::route::check(ep.routing, &g)
    });
    if let Err(e) = check {
        if me {
            eprintln!("bench-collective: error: {e:#}");
        }
        return false;
    }
    // Every rank of a host computes the same figures: the host's first rank says them.
    let on_host = (team.size() / site.spec.nodes.max(1)).max(1);
    let fits = ep_memory_fits(ep, site, on_host);
    if team.any(fits.is_err()) {
        if let Err(e) = fits {
            if team.rank().is_multiple_of(on_host) {
                output::error_line(&format!(
                    "bench-collective: rank {}: error: {e:#}",
                    team.rank()
                ));
            }
        }
        return false;
    }
    true
}

/// The largest EP size's buffers against this host's available memory, shared by the
/// team's `on_host` ranks on it (the team's ranks over its hosts).
fn ep_memory_fits(ep: &crate::ep::EpPlan, site: &measure::Site, on_host: u32) -> Result<()> {
    let ranks = u64::from(site.team.size());
    let names: Vec<&str> = ep.collectives.iter().map(|c| c.name).collect();
    crate::ep::memory::check(
        &names.join("/"),
        ep.tokens.iter().copied().max().unwrap_or(0),
        u64::from(ep.topk),
        ranks,
        u64::from(on_host),
        ep.hidden,
        crate::ep::memory::available(),
    )
}

/// nccl-tests warms up at the largest size before it times any size (`common.cu`: the
/// warm-up loop runs at `max_bytes` first). Without it the first size measured pays for
/// what the process had not done yet: the library's first large transfers (its
/// rendezvous paths, its internal buffers), the first touch of the receive pages, the
/// caches and branch predictors of the whole call path. Out of place, at the largest
/// size of the first collective that runs on this team, `plan.warmup` calls (at least
/// one), untimed and unchecked.
fn warm_up_largest(plan: &Plan, site: &measure::Site, backend: &mut dyn Backend) -> Result<()> {
    let team = site.team;
    let ranks = team.size() as usize;
    let Some(coll) = plan
        .collectives
        .iter()
        .map(|c| c.coll)
        .find(|c| c.primitive.runs_on(ranks).is_ok())
    else {
        return Ok(());
    };
    let Some(&size) = plan.sizes.last() else {
        return Ok(());
    };
    let counts = coll.counts(
        size as usize / plan.datatype.size(),
        ranks,
        plan.datatype.size(),
    );
    if counts.param == 0 {
        return Ok(());
    }
    let rank = team.rank() as usize;
    let root = plan.root as usize;
    let step = crate::backend::Step {
        coll,
        layout: crate::backend::layout(
            coll.primitive,
            backend.rules(),
            false,
            rank,
            root,
            counts.param,
        ),
        in_place: false,
        count: counts.param,
        datatype: plan.datatype,
        op: plan.op,
        root,
    };
    let _g = team.watchdog().arm(format!(
        "in the warm-up of {} at the largest size",
        coll.name
    ));
    backend.calls(&step, plan.warmup.max(1))
}

/// `# all_reduce: backend mpi, 4 ranks on 1 node, float32, sum`
fn table_title(plan: &Plan, site: &measure::Site, sel: &Selected) -> String {
    let n = site.spec.nodes;
    format!(
        "# {}: backend {}, {} ranks on {n} node{}, {}{}",
        sel.coll.name,
        plan.backend.name(),
        site.team.size(),
        if n == 1 { "" } else { "s" },
        plan.datatype.name(),
        if sel.coll.reduces {
            format!(", {}", plan.op.name())
        } else {
            String::new()
        }
    )
}

/// The backend on `team`; every rank of the team learns whether all of them have one.
fn make_backend<'t>(kind: BackendKind, team: &'t Team) -> Result<Box<dyn Backend + 't>, i32> {
    let team_agree = |local| agree(|f| team.any(f), team.rank(), local);
    match kind {
        BackendKind::Mpi => Ok(Box::new(MpiBackend::new(team.comm()))),
        BackendKind::Nccl => nccl_backend(team, team_agree),
    }
}

#[cfg(feature = "cuda")]
fn nccl_backend<'t>(
    team: &'t Team,
    team_agree: impl Fn(Result<()>) -> Result<(), i32>,
) -> Result<Box<dyn Backend + 't>, i32> {
    use crate::backend::nccl::NcclBackend;
    let b = NcclBackend::new(team);
    team_agree(b.as_ref().map(|_| ()).map_err(|e| anyhow::anyhow!("{e:#}")))?;
    Ok(Box::new(b.expect("checked")))
}

#[cfg(not(feature = "cuda"))]
fn nccl_backend<'t>(
    _team: &'t Team,
    team_agree: impl Fn(Result<()>) -> Result<(), i32>,
) -> Result<Box<dyn Backend + 't>, i32> {
    team_agree(Err(anyhow::anyhow!(
        "this build has no NCCL backend (feature `cuda`): rebuild with default features"
    )))?;
    unreachable!("agree fails on every rank")
}

/// NCCL's busbw can exceed the NIC's rate: within a node NVLink carries the traffic, and
/// on few nodes tree and NVLS algorithms move less than the ring the bus factor assumes.
/// Efficiency then says nothing about the network.
/// One line per collective whose in-place rows `--check` could not check (the library
/// leaves them undefined): the `N/A` in the #wrong column, explained.
fn unchecked_warnings(rows: &[CollectiveResult]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        for t in [&r.out_of_place, &r.in_place] {
            if let Some(why) = &t.unchecked_reason {
                let line = format!("{} {why} (N/A in #wrong)", r.collective);
                if !out.contains(&line) {
                    out.push(line);
                }
            }
        }
    }
    out
}

fn link_warnings(rows: &[CollectiveResult]) -> Option<String> {
    let over = rows
        .iter()
        .filter(|r| r.backend == "nccl")
        .filter_map(|r| r.out_of_place.efficiency.map(|e| (e, r)))
        .filter(|(e, _)| *e > 1.0)
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    let (e, r) = over;
    Some(format!(
        "busbw exceeds the link rate ({:.0}% efficiency: {} at {} bytes on {} ranks): NCCL used \
         NVLink or a tree/NVLS algorithm, so efficiency does not measure the network here; \
         run with NCCL_ALGO=Ring (and across nodes) to measure the network alone",
        e * 100.0,
        r.collective,
        r.size_bytes,
        r.ranks
    ))
}

fn print_preamble(plan: &Plan, infos: &[RankInfo]) {
    let step = match plan.stepping {
        Stepping::Bytes(b) => format!("{b}(bytes)"),
        Stepping::Factor(f) => format!("{f}(factor)"),
    };
    println!(
        "# nThread 1 nGpus 1 minBytes {} maxBytes {} step: {step} warmup iters: {} iters: {} agg iters: 1 validation: {} graph: 0",
        plan.sizes.first().copied().unwrap_or(plan.minbytes),
        plan.maxbytes,
        plan.warmup,
        plan.iters,
        u32::from(plan.check)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::result;

    fn gpu(index: u32, name: &str, bus: Option<&str>) -> results::GpuInfo {
        results::GpuInfo {
            index,
            name: name.into(),
            pci_bus_id: bus.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn the_ranks_gpu_is_listed_once() {
        // sysfs listed the node's GPUs; CUDA names one of them, in its own spelling.
        let sysfs = vec![
            gpu(0, "NVIDIA H100", Some("0000:18:00.0")),
            gpu(1, "NVIDIA H100", Some("0000:2a:00.0")),
        ];
        for bus in ["0000:2a:00.0", "00000000:2A:00.0", " 0000:2A:00.0"] {
            let mut gpus = sysfs.clone();
            let mut cuda = gpu(1, "NVIDIA H100 80GB HBM3", Some(bus));
            cuda.memory_bytes = Some(80 << 30);
            add_rank_gpu(&mut gpus, Some(cuda));
            assert_eq!(gpus.len(), 2, "{bus}: {gpus:?}");
            assert_eq!(gpus[1].name, "NVIDIA H100", "sysfs's entry stays");
            assert_eq!(
                gpus[1].memory_bytes,
                Some(80 << 30),
                "what sysfs lacks is kept"
            );
        }
        // A GPU sysfs did not list (or no sysfs at all), or one without a bus id: added.
        for (cuda, want) in [
            (gpu(0, "NVIDIA A100", Some("0000:c1:00.0")), 3),
            (gpu(0, "NVIDIA A100", None), 3),
        ] {
            let mut gpus = sysfs.clone();
            add_rank_gpu(&mut gpus, Some(cuda.clone()));
            assert_eq!(gpus.len(), want);
            assert_eq!(gpus.last(), Some(&cuda));
        }
        let mut gpus = Vec::new();
        add_rank_gpu(&mut gpus, Some(gpu(0, "NVIDIA A100", Some("0000:c1:00.0"))));
        assert_eq!(gpus.len(), 1);
        // MPI runs have no GPU of their own.
        let mut gpus = sysfs.clone();
        add_rank_gpu(&mut gpus, None);
        assert_eq!(gpus, sysfs);
    }

    #[test]
    fn nccl_busbw_above_the_link_rate_is_named() {
        let mut r = result();
        r.backend = "nccl".into();
        r.out_of_place.efficiency = Some(1.3);
        let w = link_warnings(&[r.clone()]).expect("a warning");
        assert!(w.contains("130%") && w.contains("NCCL_ALGO=Ring"), "{w}");
        r.out_of_place.efficiency = Some(0.95);
        assert!(link_warnings(&[r.clone()]).is_none());
        // MPI on host memory: the NIC rate is not what NCCL's algorithms bypass.
        r.backend = "mpi".into();
        r.out_of_place.efficiency = Some(1.3);
        assert!(link_warnings(&[r]).is_none());
    }

    #[test]
    fn unchecked_in_place_rows_are_explained_once_per_collective() {
        let mut r = result();
        assert!(unchecked_warnings(&[r.clone()]).is_empty());
        r.collective = "alltoall".into();
        r.in_place.checked = false;
        r.in_place.unchecked_reason = crate::backend::undefined_in_place(
            transport::collective::Primitive::AllToAll,
            transport::collective::InPlaceRules::Nccl,
        )
        .map(String::from);
        let w = unchecked_warnings(&[r.clone(), r]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("alltoall in place under NCCL") && w[0].contains("N/A"),
            "{w:?}"
        );
    }
}
