//! The one harness of the point-to-point benchmarks (nccl-tests' `common.cu` for pairs):
//! bootstrap the pair (standalone or MPI), walk the sizes in step with the peer, hand each
//! size to the tool's measurement function, stop together on Ctrl-C or a fault, gather the
//! results and write one document. A tool supplies only its plan, its loop and its rows.

use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};
use std::time::Duration;

#[cfg(not(feature = "mpi"))]
use anyhow::bail;
use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use results::{Document, HostInfo, Pair, Peer, TestResult};

use crate::bootstrap::standalone::{self, Hello};
use crate::bootstrap::{self, recv_json, send_json, Launcher, PeerLink};
use crate::cli::P2pArgs;
use crate::clock::LoopClock;
use crate::transport::{EndpointSpec, Op, Role, TransportKind};
use crate::{exit, host, interrupt};

/// Everything that shapes the numbers of a point-to-point run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `bench-lat` or `bench-bw`.
    pub tool: &'static str,
    /// `send_lat`, `write_bw`, ...
    pub test: String,
    pub op: Op,
    pub transport: TransportKind,
    pub sizes: Vec<u64>,
    pub iterations: u64,
    pub duration_s: Option<f64>,
    pub warmup: u64,
    pub streams: u32,
    pub tx_depth: u32,
    pub bidirectional: bool,
    pub timeout: Duration,
    /// Verbs settings (device, port, GID, MTU, inline, events, check).
    pub verbs: crate::transport::VerbsOptions,
    /// Tool-specific options both sides must agree on (recorded in the document too).
    pub extra: Map<String, Value>,
    /// Tool-specific options only the initiator uses (recorded, not compared).
    pub local: Map<String, Value>,
}

impl Plan {
    /// Options the two sides of a standalone pair must agree on.
    fn must_match(&self) -> Value {
        let mut m = json!({
            "test": self.test,
            "transport": self.transport.name(),
            "sizes": self.sizes,
            "streams": self.streams,
            "tx_depth": self.tx_depth,
            "bidirectional": self.bidirectional,
        });
        if let Value::Object(o) = &mut m {
            if self.transport == TransportKind::Verbs {
                // The two ends must use the same connection method and agree on checking;
                // device, port, GID, inline and events are each side's own business.
                o.insert("rdma_cm".into(), json!(self.verbs.rdma_cm));
                o.insert("check".into(), json!(self.verbs.check));
            }
            o.extend(self.extra.clone());
        }
        m
    }

    /// Options the server takes from the client (like perftest, the client decides how long).
    fn adoptable(&self) -> Value {
        json!({"iterations": self.iterations, "duration_s": self.duration_s, "warmup": self.warmup})
    }

    fn adopt(&mut self, v: &Value) {
        if let Some(n) = v["iterations"].as_u64() {
            self.iterations = n;
        }
        self.duration_s = v["duration_s"].as_f64();
        if let Some(n) = v["warmup"].as_u64() {
            self.warmup = n;
        }
    }

    /// Every option that shapes the numbers, for the document's `options`.
    pub fn options(&self) -> Map<String, Value> {
        let mut m = match self.must_match() {
            Value::Object(o) => o,
            _ => Map::new(),
        };
        m.insert("iterations".into(), json!(self.iterations));
        m.insert("duration_s".into(), json!(self.duration_s));
        m.insert("warmup".into(), json!(self.warmup));
        m.insert("timeout_s".into(), json!(self.timeout.as_secs_f64()));
        m.extend(self.local.clone());
        if self.transport == TransportKind::Verbs {
            let v = &self.verbs;
            m.insert("ib_dev".into(), json!(v.device));
            m.insert("ib_port".into(), json!(v.port));
            m.insert("gid_index".into(), json!(v.gid_index));
            m.insert("mtu".into(), json!(v.mtu));
            m.insert("inline_size".into(), json!(v.inline_size));
            m.insert("events".into(), json!(v.events));
        }
        m
    }
}

/// What a tool's measurement function gets for one size.
pub struct SizeRun<'a> {
    pub plan: &'a Plan,
    pub spec: EndpointSpec,
    pub link: &'a mut dyn PeerLink,
    pub clock: &'a LoopClock,
    pub pair: &'a Pair,
}

/// A tool: its loop for one size, and its human output.
pub trait PairTool {
    /// Runs one size. The initiator returns its result; the responder returns `None`
    /// unless it measured something itself.
    fn run_size(&mut self, run: &mut SizeRun) -> Result<Option<TestResult>>;
    /// Column header (perftest layout).
    fn print_header(&self, plan: &Plan);
    /// One table row.
    fn print_row(&self, result: &TestResult);
}

/// Per-size instruction from initiator to responder in standalone mode.
#[derive(Serialize, Deserialize)]
enum Step {
    Size(u64),
    Stop(String),
}

/// What one rank contributes to the gathered document.
#[derive(Serialize, Deserialize)]
struct RankReport {
    host: HostInfo,
    results: Vec<TestResult>,
}

/// Outcome of a sweep on one process.
struct Sweep {
    results: Vec<TestResult>,
    /// Why it ended early, if it did.
    stopped: Option<String>,
    failed: bool,
}

/// Runs a point-to-point tool to completion and returns the process exit code.
pub fn run(args: &P2pArgs, plan: Plan, tool: &mut dyn PairTool) -> i32 {
    interrupt::install();
    match run_inner(args, plan, tool) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}: error: {e:#}", plan_tool_name());
            exit::ERROR
        }
    }
}

fn plan_tool_name() -> String {
    crate::output::tool_name()
}

fn run_inner(args: &P2pArgs, plan: Plan, tool: &mut dyn PairTool) -> Result<i32> {
    let clock = LoopClock::new();
    match bootstrap::resolve_launcher(args.launcher) {
        Launcher::Mpi => run_mpi(args, plan, tool, &clock),
        _ => run_standalone(args, plan, tool, &clock),
    }
}

/// Common start: where the document goes, checked before anything is measured.
fn check_output(args: &P2pArgs) -> Result<()> {
    crate::output::check_writable(args.json.as_deref())
}

struct Context0 {
    started_at: String,
    overhead_ns: f64,
}

fn start(clock: &LoopClock) -> Context0 {
    Context0 {
        started_at: results::provenance::now_rfc3339(),
        overhead_ns: clock.loop_overhead_ns(),
    }
}

fn run_standalone(
    args: &P2pArgs,
    mut plan: Plan,
    tool: &mut dyn PairTool,
    clock: &LoopClock,
) -> Result<i32> {
    check_output(args)?;
    if args.host.is_none() && bootstrap::under_srun() {
        eprintln!(
            "note: started by srun without an MPI environment: use `srun --mpi=pmix` to pair ranks, \
             or give a HOST to run as a standalone client"
        );
    }
    let ctx = start(clock);
    let mut me = host::collect();
    let timeout = plan.timeout;
    let (mut link, role, peer_host) = match &args.host {
        None => {
            let (link, hello) = standalone::serve(
                args.port,
                args.bind_addr,
                timeout,
                plan.tool,
                &plan.must_match(),
                &me,
            )?;
            plan.adopt(&hello.adopt);
            (link, Role::Responder, hello.host)
        }
        Some(server) => {
            let hello = Hello {
                protocol: standalone::PROTOCOL_VERSION,
                tool: plan.tool.to_string(),
                tool_version: results::provenance::TOOL_VERSION.to_string(),
                plan: plan.must_match(),
                adopt: plan.adoptable(),
                host: me.clone(),
            };
            let (link, server_host) = standalone::connect(server, args.port, timeout, &hello)?;
            (link, Role::Initiator, server_host)
        }
    };
    me.role = Some(role_name(role).into());
    let mut peer_host = peer_host;
    peer_host.role = Some(role_name(other(role)).into());
    let pair = pair_of(role, &me, None, &peer_host, None);
    let local_ip = args
        .bind_addr
        .or(link.local_ip())
        .unwrap_or(Ipv4Addr::LOCALHOST.into());

    if role == Role::Initiator {
        tool.print_header(&plan);
    }
    // The client keeps a checkpoint of what it measured after every size, so a kill -9
    // or a dead machine loses at most the size in flight.
    let checkpoint_hosts = vec![me.clone(), peer_host.clone()];
    let mut checkpoint = |done: &[TestResult]| {
        if role == Role::Initiator {
            write_checkpoint(args, &plan, "standalone", 2, &checkpoint_hosts, done, &ctx);
        }
    };
    let sweep = sweep(
        &plan,
        role,
        &mut link,
        clock,
        &pair,
        local_ip,
        tool,
        &mut checkpoint,
        None,
    )?;

    let code = exit_code(&sweep);
    let hosts = match role {
        Role::Initiator => vec![me, peer_host],
        Role::Responder => vec![peer_host, me],
    };
    match role {
        Role::Initiator => {
            let doc = document(
                &plan,
                "standalone",
                2,
                hosts,
                sweep.results,
                &ctx,
                &sweep.stopped,
            );
            // The server prints and optionally keeps the same document.
            if sweep.stopped.is_none() || !sweep.failed {
                let _ = send_json(&mut link, &doc);
            }
            finish_document(args, &doc)?;
        }
        Role::Responder if !sweep.failed => {
            if let Ok(doc) = recv_json::<Document>(&mut link) {
                tool.print_header(&plan);
                for r in &doc.results {
                    tool.print_row(r);
                }
                finish_document(args, &doc)?;
            }
        }
        Role::Responder => {}
    }
    Ok(code)
}

fn exit_code(s: &Sweep) -> i32 {
    let check_failed = s
        .results
        .iter()
        .any(|r| matches!(r, TestResult::Bandwidth(b) if b.check_wrong_bytes.unwrap_or(0) > 0));
    if s.failed {
        exit::ERROR
    } else if check_failed {
        eprintln!("check failed: some bytes arrived wrong (see check_wrong_bytes)");
        exit::CHECK_FAILED
    } else if s.stopped.is_some() {
        exit::INTERRUPTED
    } else {
        exit::OK
    }
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Initiator => "client",
        Role::Responder => "server",
    }
}

fn other(r: Role) -> Role {
    match r {
        Role::Initiator => Role::Responder,
        Role::Responder => Role::Initiator,
    }
}

fn pair_of(
    role: Role,
    me: &HostInfo,
    my_rank: Option<u32>,
    peer: &HostInfo,
    peer_rank: Option<u32>,
) -> Pair {
    let mine = Peer {
        rank: my_rank,
        host: me.hostname.clone(),
    };
    let theirs = Peer {
        rank: peer_rank,
        host: peer.hostname.clone(),
    };
    match role {
        Role::Initiator => Pair {
            initiator: mine,
            responder: theirs,
        },
        Role::Responder => Pair {
            initiator: theirs,
            responder: mine,
        },
    }
}

/// Walks the sizes in step with the peer. In standalone mode the initiator tells the
/// responder each next size or why it stops; under MPI all ranks agree collectively.
#[allow(clippy::too_many_arguments)]
fn sweep(
    plan: &Plan,
    role: Role,
    link: &mut dyn PeerLink,
    clock: &LoopClock,
    pair: &Pair,
    local_ip: IpAddr,
    tool: &mut dyn PairTool,
    checkpoint: &mut dyn FnMut(&[TestResult]),
    #[cfg(feature = "mpi")] job: Option<&crate::bootstrap::mpi::MpiJob>,
    #[cfg(not(feature = "mpi"))] job: Option<&()>,
) -> Result<Sweep> {
    let mut out = Sweep {
        results: Vec::new(),
        stopped: None,
        failed: false,
    };
    let sizes: Vec<u64> = plan.sizes.clone();
    let mut sizes = sizes.into_iter();
    loop {
        let next = sizes.next();
        let size = match job {
            #[cfg(feature = "mpi")]
            Some(job) => {
                job.barrier("before the next size");
                if job.any(interrupt::interrupted()) {
                    out.stopped = Some("interrupted (Ctrl-C or SIGTERM)".into());
                    break;
                }
                match next {
                    Some(s) => s,
                    None => break,
                }
            }
            #[cfg(not(feature = "mpi"))]
            Some(_) => unreachable!(),
            None => match role {
                Role::Initiator => {
                    let step = match (next, interrupt::interrupted()) {
                        (_, true) => Step::Stop("interrupted (Ctrl-C or SIGTERM)".into()),
                        (Some(s), false) => Step::Size(s),
                        (None, false) => Step::Stop(String::new()),
                    };
                    send_json(link, &step)?;
                    match step {
                        Step::Size(s) => s,
                        Step::Stop(why) => {
                            if !why.is_empty() {
                                out.stopped = Some(why);
                            }
                            break;
                        }
                    }
                }
                Role::Responder => match recv_json::<Step>(link)? {
                    Step::Size(s) => s,
                    Step::Stop(why) => {
                        if !why.is_empty() {
                            out.stopped = Some(why);
                        }
                        break;
                    }
                },
            },
        };
        let spec = EndpointSpec {
            op: plan.op,
            role,
            size,
            streams: plan.streams,
            tx_depth: plan.tx_depth,
            bidirectional: plan.bidirectional,
            timeout: plan.timeout,
            local_ip,
            verbs: plan.verbs.clone(),
            iterations: plan.duration_s.is_none().then_some(plan.iterations),
        };
        let mut run = SizeRun {
            plan,
            spec,
            link: &mut *link,
            clock,
            pair,
        };
        match tool.run_size(&mut run) {
            Ok(Some(r)) => {
                // Under MPI rank 0 prints its own pair live; the others come after the gather.
                if job.is_none() || pair.initiator.rank == Some(0) {
                    tool.print_row(&r);
                }
                let partial = !result_complete(&r);
                out.results.push(r);
                checkpoint(&out.results);
                if partial {
                    out.stopped = Some("interrupted (Ctrl-C or SIGTERM)".into());
                    if job.is_none() {
                        // Tell the responder nothing more is coming.
                        let _ = send_json(link, &Step::Stop("interrupted".into()));
                    }
                    break;
                }
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("error at {} bytes: {e:#}", size);
                out.stopped = Some(format!("failed at {size} bytes: {e:#}"));
                out.failed = true;
                break;
            }
        }
    }
    Ok(out)
}

fn result_complete(r: &TestResult) -> bool {
    match r {
        TestResult::Latency(l) => l.complete,
        TestResult::Bandwidth(b) => b.complete,
        TestResult::Collective(c) => c.complete,
    }
}

fn document(
    plan: &Plan,
    launcher: &str,
    ranks: u32,
    hosts: Vec<HostInfo>,
    results: Vec<TestResult>,
    ctx: &Context0,
    stopped: &Option<String>,
) -> Document {
    let mut doc = Document::new(plan.tool, launcher, ranks, ctx.started_at.clone());
    doc.loop_overhead_ns = Some(ctx.overhead_ns);
    doc.clock = Some(LoopClock::source().into());
    doc.hosts = hosts;
    doc.options = plan.options();
    doc.results = results;
    doc.finish(stopped.clone());
    doc
}

/// Writes what is measured so far, marked incomplete; the final document replaces it.
fn write_checkpoint(
    args: &P2pArgs,
    plan: &Plan,
    launcher: &str,
    ranks: u32,
    hosts: &[HostInfo],
    done: &[TestResult],
    ctx: &Context0,
) {
    let Some(path) = &args.json else { return };
    let reason = Some(format!(
        "checkpoint: {} of {} sizes measured when this was written; the run did not finish",
        done.len(),
        plan.sizes.len()
    ));
    let doc = document(
        plan,
        launcher,
        ranks,
        hosts.to_vec(),
        done.to_vec(),
        ctx,
        &reason,
    );
    if let Err(e) = results::write::write_json_atomic(path, &doc) {
        eprintln!(
            "warning: cannot write the checkpoint {}: {e}",
            path.display()
        );
    }
}

fn finish_document(args: &P2pArgs, doc: &Document) -> Result<()> {
    crate::output::write_document(args.json.as_deref(), doc)
}

/// Address this rank advertises to its peer for data connections under MPI.
fn mpi_local_ip(args: &P2pArgs, me: &HostInfo, peer: &HostInfo) -> Result<IpAddr> {
    if let Some(ip) = args.bind_addr {
        return Ok(ip);
    }
    if me.hostname == peer.hostname {
        return Ok(Ipv4Addr::LOCALHOST.into());
    }
    (me.hostname.as_str(), 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.find(|a| !a.ip().is_loopback()).map(|a| a.ip()))
        .ok_or_else(|| {
            anyhow!(
                "cannot find an address of {} that {} can reach (the hostname resolves to loopback \
                 only): pass --bind-addr with this host's IP on the test network",
                me.hostname,
                peer.hostname
            )
        })
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &P2pArgs, _: Plan, _: &mut dyn PairTool, _: &LoopClock) -> Result<i32> {
    bail!("this binary was built without MPI support (feature `mpi`): rebuild with it, or run standalone (--launcher standalone)")
}

#[cfg(feature = "mpi")]
fn run_mpi(args: &P2pArgs, plan: Plan, tool: &mut dyn PairTool, clock: &LoopClock) -> Result<i32> {
    use crate::bootstrap::mpi::MpiJob;

    let job = MpiJob::init(plan.timeout)?;
    let (rank, size) = (job.rank(), job.size());
    if size < 2 || size % 2 != 0 {
        let hint = if size == 1 && bootstrap::under_srun() {
            " (under srun, MPI needs `srun --mpi=pmix`)"
        } else {
            ""
        };
        if rank == 0 {
            eprintln!(
                "{}: error: {size} rank(s) cannot be paired{hint}: ranks pair up as (0,1), (2,3), ..., \
                 so launch an even number (e.g. mpirun -np 2)",
                plan.tool
            );
        }
        return Ok(exit::ERROR);
    }
    if rank == 0 {
        check_output(args)?;
    }
    let ctx = start(clock);
    let role = if rank % 2 == 0 {
        Role::Initiator
    } else {
        Role::Responder
    };
    let peer_rank = rank ^ 1;
    let mut me = host::collect();
    me.rank = Some(rank);
    let mut link = job.link_to(peer_rank);
    // Exchange host facts in a fixed order (initiator first) so the two never both wait.
    let peer_host: HostInfo = if role == Role::Initiator {
        send_json(&mut link, &me)?;
        recv_json(&mut link)?
    } else {
        let h = recv_json(&mut link)?;
        send_json(&mut link, &me)?;
        h
    };
    let pair = pair_of(role, &me, Some(rank), &peer_host, Some(peer_rank));
    let local_ip = match mpi_local_ip(args, &me, &peer_host) {
        Ok(ip) => ip,
        Err(e) => {
            eprintln!("rank {rank}: error: {e:#}");
            job.abort(exit::ERROR);
        }
    };
    if rank == 0 {
        tool.print_header(&plan);
    }
    // Rank 0 checkpoints its own pair after every size: under mpirun a Ctrl-C or a killed
    // job can end every rank before the final gather, and what was measured must survive.
    let checkpoint_hosts = vec![me.clone()];
    let mut checkpoint = |done: &[TestResult]| {
        if rank == 0 {
            write_checkpoint(args, &plan, "mpi", size, &checkpoint_hosts, done, &ctx);
        }
    };
    let sweep = sweep(
        &plan,
        role,
        &mut link,
        clock,
        &pair,
        local_ip,
        tool,
        &mut checkpoint,
        Some(&job),
    )?;
    if sweep.failed {
        eprintln!("rank {rank}: aborting the job after the error above");
        if rank == 0 {
            let doc = document(
                &plan,
                "mpi",
                size,
                vec![me],
                sweep.results,
                &ctx,
                &sweep.stopped,
            );
            let _ = finish_document(args, &doc);
        }
        job.abort(exit::ERROR);
    }
    let code = exit_code(&sweep);
    let report = serde_json::to_vec(&RankReport {
        host: me,
        results: sweep.results,
    })?;
    if let Some(all) = job.gather_to_root(&report) {
        let mut hosts = Vec::new();
        let mut results = Vec::new();
        for bytes in all {
            let r: RankReport =
                serde_json::from_slice(&bytes).context("a rank sent an unreadable report")?;
            hosts.push(r.host);
            results.extend(r.results);
        }
        // Rows of the other pairs (rank 0 printed its own as they came).
        let others: Vec<&TestResult> = results
            .iter()
            .filter(|r| pair_initiator_rank(r) != Some(0))
            .collect();
        if !others.is_empty() {
            let mut current = None;
            for r in others {
                let label = pair_label(r);
                if current.as_ref() != Some(&label) {
                    println!("# pair {label}");
                    current = Some(label);
                }
                tool.print_row(r);
            }
        }
        let doc = document(&plan, "mpi", size, hosts, results, &ctx, &sweep.stopped);
        finish_document(args, &doc)?;
    }
    Ok(code)
}

fn pair_initiator_rank(r: &TestResult) -> Option<u32> {
    match r {
        TestResult::Latency(l) => l.pair.initiator.rank,
        TestResult::Bandwidth(b) => b.pair.initiator.rank,
        TestResult::Collective(_) => None,
    }
}

fn pair_label(r: &TestResult) -> String {
    match r {
        TestResult::Latency(l) => l.pair.label(),
        TestResult::Bandwidth(b) => b.pair.label(),
        TestResult::Collective(_) => String::new(),
    }
}
