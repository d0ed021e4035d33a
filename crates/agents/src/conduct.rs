//! The agents' coordinator (`bench-bw --hosts FILE ...`): drives a sweep over agents
//! without MPI.
//!
//! tokio lives here and only here: at a thousand nodes the coordinator holds a thousand
//! control connections that all wait at once, each with its own deadline (the handshake,
//! the sweep order, each round's report). The measuring happens in the agents, each on
//! its own thread, never under this runtime.
//!
//! The run, like an MPI sweep's rank 0: connect to every agent and authenticate both ways;
//! refuse to start when agents run other versions or options (naming them); build the
//! roster and the schedule (the same patterns, the same code); send each agent the sweep;
//! then round by round tell every agent to go, wait for every report, and record. An agent
//! that does not answer or drops is named, its pairs are recorded as failed (its peers are
//! told not to wait for it), and the sweep goes on. The document has the same schema as an
//! MPI sweep's, with `launcher: "agents"`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use results::HostInfo;

use crate::proto::{
    self, AgentHello, AgentMsg, AuthReply, Command, CoordAuth, CoordHello, GangAnswer, GangAsk,
    IncastOrder, SweepOrder, Welcome,
};
use crate::secret::{self, Secret};
use crate::AgentAddr;
use base::wire::{MAGIC, MAX_FRAME};
use base::{exit, interrupt};
use p2p::coordinator::{Member, RoundReport, Shared, SideFailure};
use p2p::pattern::Schedule;
use p2p::{record, Launch, PairTool, Plan};
use traffic::endpoint_flows::Carrier;
use transport::{Op, Role, TransportChoice, TransportKind, VerbsOptions};

/// Runs a sweep over the agents of `launch.hosts`; returns the exit code.
pub fn run(launch: &Launch, plan: Plan, tool: &mut dyn PairTool) -> i32 {
    interrupt::install();
    match conduct(launch, plan, tool) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}: error: {e:#}", base::output::tool_name());
            exit::ERROR
        }
    }
}

/// Runs an incast over the agents of `launch.hosts` (`bench-bw --pattern incast --hosts`):
/// every agent is a rank and runs the rounds as an MPI rank would (`traffic::incast`); the
/// coordinator relays their barriers and exchanges ([`crate::gang`]), then writes the
/// document. Every agent must answer: an incast's rounds need every rank. Returns the exit
/// code.
pub fn incast(launch: &Launch, plan: Plan, senders: u32, window_s: f64) -> i32 {
    interrupt::install();
    match incast_run(launch, &plan, senders, window_s) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}: error: {e:#}", base::output::tool_name());
            exit::ERROR
        }
    }
}

fn incast_run(launch: &Launch, plan: &Plan, senders: u32, window_s: f64) -> Result<i32> {
    let path = launch.hosts.as_ref().expect("--hosts");
    base::output::check_writable(launch.json.as_deref())?;
    let started_at = results::provenance::now_rfc3339();
    let spec = GangSpec {
        tool: plan.tool,
        what: "an incast",
        hosts: path,
        port: launch.port,
        secret_file: launch.secret_file.as_deref(),
        transport: launch.transport,
        op: plan.op,
        timeout: plan.timeout,
        // A step waits for the slowest agent: a window (two with the victim's) and the
        // connections and counter reads around it.
        step: plan.timeout * 3 + Duration::from_secs_f64(window_s * 4.0),
    };
    let ran = gang(&spec, &|rank, size| {
        Command::Incast(Box::new(IncastOrder {
            rank,
            size,
            senders,
            window_s,
            op: plan.op,
            timeout_s: plan.timeout.as_secs_f64(),
        }))
    })?;
    let carrier = Carrier::of(
        ran.transport,
        &ran.verbs,
        plan.op,
        None,
        plan.timeout,
        Default::default(),
    );
    let size = ran.hosts.len() as u32;
    let run = traffic::incast::assemble(&ran.hosts, senders, size, &ran.reports, &carrier)?;
    traffic::incast::print_table(&run);
    let mut doc = traffic::incast::document(
        plan.tool, "agents", size, started_at, ran.hosts, run, window_s, 0,
    );
    let o = &mut doc.options;
    o.insert("pattern".into(), launch.pattern.to_string().into());
    carrier.record(o);
    o.insert("test".into(), plan.op.name().into());
    o.insert("duration".into(), window_s.into());
    o.insert("agents".into(), serde_json::json!(ran.agents));
    doc.finish(interrupt::interrupted().then(|| "interrupted".to_string()));
    base::output::write_document(launch.json.as_deref(), &doc)?;
    Ok(exit::OK)
}

/// A run whose agents all work at once (an incast, a congestion run), as its tool asks it.
pub struct GangSpec<'a> {
    /// The coordinating tool, as the agents' hello names it.
    pub tool: &'static str,
    /// The run in words with its article, for messages (`an incast`, `a congestion run`).
    pub what: &'static str,
    /// The host file, and the agents' port where a line gives none.
    pub hosts: &'a Path,
    /// The agents' port where a host file line gives none.
    pub port: u16,
    /// The shared secret's file (`--secret-file`), else the default.
    pub secret_file: Option<&'a Path>,
    /// The transport asked on the command line (the agents' must match).
    pub transport: TransportChoice,
    /// What the run's messages are over verbs (checked against the agents' transport).
    pub op: Op,
    /// Longest wait for an agent's handshake and answer to the order.
    pub timeout: Duration,
    /// Longest wait for every agent to reach one gang step.
    pub step: Duration,
}

/// What a gang run brought back to the coordinator.
pub struct GangRan {
    /// The agents as the host file names them, in rank order.
    pub agents: Vec<String>,
    /// The agents' transport and, over verbs, their port and GID index (agreed by all).
    pub transport: TransportKind,
    /// Their verbs settings (port, GID index) when the transport is verbs.
    pub verbs: VerbsOptions,
    /// Each rank's host facts (from the run's roster exchange) and report, in rank order.
    pub hosts: Vec<HostInfo>,
    /// Each rank's report, encoded, in rank order.
    pub reports: Vec<Vec<u8>>,
}

/// Runs a gang over the agents of `spec.hosts`: enlists every agent (all must answer:
/// each rank takes part in every step), checks their options and transport, sends each
/// the order `order(rank, size)`, relays the run's barriers and exchanges, and brings back
/// the roster and the reports. A failure stops every agent and is named.
pub fn gang(spec: &GangSpec<'_>, order: &dyn Fn(u32, u32) -> Command) -> Result<GangRan> {
    let addrs = super::read_hosts(spec.hosts, spec.port)?;
    let secret = Secret::load(spec.secret_file)?;
    let what = spec.what;
    let the = format!("the {}", what.split_once(' ').map_or(what, |w| w.1));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the coordinator's runtime")?;
    rt.block_on(async {
        let mut agents = enlist(addrs, &secret, spec.tool, spec.timeout).await?;
        if let Some(a) = agents.iter().find(|a| !a.live()) {
            let (name, why) = (a.addr.name.clone(), a.gone.clone().unwrap_or_default());
            done_all(&mut agents).await;
            bail!(
                "agent {name} did not answer ({why}): every rank of {what} takes part in \
                 every step; start it, or leave it out of the host file"
            );
        }
        if agents.len() < 2 {
            bail!(
                "{what} needs at least 2 agents; the host file lists {}",
                agents.len()
            );
        }
        agree(&agents)?;
        let transport = settle_transport(&agents, spec.transport, spec.op)?;
        let size = agents.len() as u32;
        let frames = (0..size)
            .map(|rank| frame(&order(rank, size)).ok())
            .collect();
        let replies = round_trip(&mut agents, frames, spec.timeout).await;
        let mut refused = Vec::new();
        for (a, r) in agents.iter().zip(replies) {
            match r.map(|r| r.map(|b| base::wire::decode_json::<AgentMsg>(&b))) {
                Some(Ok(Ok(AgentMsg::Ready))) => {}
                Some(Ok(Ok(AgentMsg::Refused(why)))) => {
                    refused.push(format!("{}: {why}", a.addr.name))
                }
                Some(Err(e)) => refused.push(format!("{}: {e}", a.addr.name)),
                _ => refused.push(format!("{}: no answer to the order", a.addr.name)),
            }
        }
        if !refused.is_empty() {
            done_all(&mut agents).await;
            bail!("agents refused {the}: {}", refused.join("; "));
        }
        eprintln!(
            "coordinator: {the} over {size} agents ({})",
            transport.name()
        );
        let (roster, reports) = match relay(&mut agents, spec.step).await {
            Ok(x) => x,
            Err(e) => {
                if let Ok(f) = frame(&Command::Stop {
                    reason: format!("{e:#}"),
                }) {
                    send_all(&mut agents, &f).await;
                }
                done_all(&mut agents).await;
                return Err(e.context(format!("{the} ended early")));
            }
        };
        done_all(&mut agents).await;
        let hosts: Vec<HostInfo> = roster
            .iter()
            .map(|b| base::wire::decode_json::<traffic::flows::Peer>(b).map(|p| p.host))
            .collect::<Result<_>>()
            .context("an agent sent an unreadable roster entry")?;
        Ok(GangRan {
            agents: agents.iter().map(|a| a.addr.name.clone()).collect(),
            transport,
            verbs: agents_verbs(&agents),
            hosts,
            reports,
        })
    })
}

/// One agent as the coordinator knows it.
pub(crate) struct Agent {
    pub(crate) addr: AgentAddr,
    conn: Option<TcpStream>,
    welcome: Option<Welcome>,
    /// The address the coordinator reached it at.
    reached: Option<SocketAddr>,
    /// Why it no longer takes part (it never answered, or dropped).
    gone: Option<String>,
}

impl Agent {
    fn live(&self) -> bool {
        self.gone.is_none() && self.conn.is_some()
    }
    fn drop_out(&mut self, why: String) {
        eprintln!("agent {} dropped out: {why}", self.addr.name);
        self.conn = None;
        self.gone = Some(why);
    }
}

/// Why an agent could not be enlisted.
enum Fault {
    /// It did not answer: it takes no part, and its pairs are recorded as failed.
    Silent(String),
    /// It answered and refused (protocol, tool, secret): a set-up error.
    Refused(String),
    /// It serves another coordinator's sweep: asked again until the timeout, then a
    /// set-up error.
    Busy(String),
}

/// How long a busy agent is left before it is asked again.
const BUSY_PAUSE: Duration = Duration::from_millis(250);

fn conduct(launch: &Launch, mut plan: Plan, tool: &mut dyn PairTool) -> Result<i32> {
    let path = launch.hosts.as_ref().expect("--hosts");
    let addrs = super::read_hosts(path, launch.port)?;
    let secret = Secret::load(launch.secret_file.as_deref())?;
    base::output::check_writable(launch.json.as_deref())?;
    let started_at = results::provenance::now_rfc3339();
    let clock = base::clock::LoopClock::new();
    let overhead_ns = clock.loop_overhead_ns();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the coordinator's runtime")?;
    rt.block_on(async {
        let mut agents = enlist_live(addrs, &secret, &plan).await?;
        agree(&agents)?;
        plan.transport = settle_transport(&agents, launch.transport, plan.op)?;
        let members = roster(&agents);
        let shared = p2p::driver::root_inputs(launch);
        if let Some(e) = &shared.error {
            bail!("{e}");
        }
        let schedule = p2p::driver::schedule_for(launch, &members, &shared)?;
        order_sweep(&mut agents, &members, &shared, &plan, launch).await?;

        let mut rec = sweep_recorder(
            launch,
            &plan,
            &agents,
            &members,
            &schedule,
            started_at,
            overhead_ns,
        );
        tool.print_header(&plan);
        let mut progress = p2p::progress::Progress::new(true, &schedule);
        let mut stopped = run_rounds(
            &mut agents,
            &members,
            &schedule,
            &plan,
            tool,
            &mut rec,
            &mut progress,
        )
        .await?;
        done_all(&mut agents).await;
        if stopped.is_none() && rec.interrupted {
            stopped = Some(interrupt::REASON.to_string());
        }
        let doc = rec.document(&[], stopped);
        progress.summary(&doc);
        base::output::write_document(launch.json.as_deref(), &doc)?;
        Ok(record::exit_code(&doc, false))
    })
}

/// Every agent of the host file asked to join: those that answered and authenticated,
/// the others kept as gone (their pairs are recorded failed). Fewer than two live: an
/// error naming why each of the others is gone.
async fn enlist_live(addrs: Vec<AgentAddr>, secret: &Secret, plan: &Plan) -> Result<Vec<Agent>> {
    let t0 = Instant::now();
    let agents = enlist(addrs, secret, plan.tool, plan.timeout).await?;
    let live = agents.iter().filter(|a| a.live()).count();
    eprintln!(
        "coordinator: {live} of {} agents answered and authenticated in {:.2} s{}",
        agents.len(),
        t0.elapsed().as_secs_f64(),
        if live < agents.len() {
            "; the pairs of the others will be recorded as failed"
        } else {
            ""
        }
    );
    if live < 2 {
        bail!(
            "{live} agent(s) answered: a sweep needs two; {}",
            agents
                .iter()
                .filter_map(|a| a.gone.as_ref().map(|g| format!("{}: {g}", a.addr.name)))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(agents)
}

/// The schedule's rounds, each ordered to every agent and recorded (checkpointed) as it
/// ends; an interrupt stops them (said to the agents). The reason they stopped, if they did.
async fn run_rounds(
    agents: &mut [Agent],
    members: &[Member],
    schedule: &Schedule,
    plan: &Plan,
    tool: &mut dyn PairTool,
    rec: &mut record::Recorder<'_>,
    progress: &mut p2p::progress::Progress,
) -> Result<Option<String>> {
    let limit = plan.round_limit() + plan.timeout;
    for (ri, round) in schedule.rounds.iter().enumerate() {
        let ri = ri as u32;
        if interrupt::interrupted() {
            let stop = frame(&Command::Stop {
                reason: "the coordinator was interrupted".into(),
            })?;
            send_all(agents, &stop).await;
            return Ok(Some(interrupt::REASON.to_string()));
        }
        let started = Instant::now();
        let reports = conduct_round(agents, members, schedule, ri, limit).await?;
        if round.len() <= p2p::tool::ROWS_PER_ROUND {
            p2p::tool::print_others(tool, &reports, u32::MAX);
        }
        rec.add_round(reports, started.elapsed().as_secs_f64());
        rec.checkpoint(&[], false);
        progress.round_done(ri, round.len(), rec.failed_pairs());
    }
    Ok(None)
}

/// The sweep's recorder: the agents' hosts, the sweep's options with the agents named.
fn sweep_recorder<'a>(
    launch: &'a Launch,
    plan: &'a Plan,
    agents: &[Agent],
    members: &[Member],
    schedule: &Schedule,
    started_at: String,
    overhead_ns: f64,
) -> record::Recorder<'a> {
    let hosts = hosts_of(agents, members);
    let mut options = p2p::driver::sweep_options(plan, launch);
    options.insert(
        "agents".into(),
        serde_json::json!(agents
            .iter()
            .map(|a| a.addr.name.clone())
            .collect::<Vec<_>>()),
    );
    let mut rec = record::Recorder::new(
        launch.json.as_deref(),
        plan,
        "agents",
        members.len() as u32,
        hosts,
        started_at,
        overhead_ns,
        options,
    );
    rec.sweep = Some(p2p::driver::sweep_info(schedule));
    rec
}

/// Sends every agent the roster, the plan and its rank, and waits for each to be ready;
/// an agent that refuses ends the sweep before it starts.
async fn order_sweep(
    agents: &mut [Agent],
    members: &[Member],
    shared: &Shared,
    plan: &Plan,
    launch: &Launch,
) -> Result<()> {
    let frames: Vec<Option<Vec<u8>>> = (0..agents.len())
        .map(|i| {
            frame(&Command::Sweep(Box::new(SweepOrder {
                rank: i as u32,
                members: members.to_vec(),
                shared: shared.clone(),
                plan: plan.clone(),
                pattern: launch.pattern.to_string(),
                include_local: launch.include_local,
                rails: launch.rail_mode.name().into(),
            })))
            .ok()
        })
        .collect();
    let replies = round_trip(agents, frames, plan.timeout).await;
    let mut refused = Vec::new();
    for (a, r) in agents.iter_mut().zip(replies) {
        match r {
            Some(Ok(bytes)) => match base::wire::decode_json::<AgentMsg>(&bytes) {
                Ok(AgentMsg::Ready) => {}
                Ok(AgentMsg::Refused(why)) => refused.push(format!("{}: {why}", a.addr.name)),
                _ => a.drop_out("it answered the sweep order with something else".into()),
            },
            Some(Err(e)) => a.drop_out(e),
            None => {}
        }
    }
    if !refused.is_empty() {
        done_all(agents).await;
        bail!("agents refused the sweep: {}", refused.join("; "));
    }
    Ok(())
}

/// The host facts of every rank, as each agent described its host when it enlisted (a
/// bare name for an agent that never answered).
fn hosts_of(agents: &[Agent], members: &[Member]) -> Vec<HostInfo> {
    agents
        .iter()
        .zip(members)
        .map(|(a, m)| {
            let mut h = a
                .welcome
                .as_ref()
                .map(|w| w.host.clone())
                .unwrap_or_else(|| HostInfo {
                    hostname: m.host.clone(),
                    ..Default::default()
                });
            h.rank = Some(m.rank);
            h.local_rank = Some(m.local_rank);
            h
        })
        .collect()
}

/// Runs round `ri` on every agent and collects their reports, plus a report for the side
/// of every pair whose agent is gone (it cannot speak for itself).
async fn conduct_round(
    agents: &mut [Agent],
    members: &[Member],
    schedule: &Schedule,
    ri: u32,
    limit: Duration,
) -> Result<Vec<RoundReport>> {
    let round = &schedule.rounds[ri as usize];
    let gone: Vec<(u32, String)> = agents
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            a.gone
                .clone()
                .map(|g| (i as u32, format!("agent {} {g}", a.addr.name)))
        })
        .collect();
    let go = frame(&Command::Round { round: ri, gone })?;
    let frames = agents.iter().map(|_| Some(go.clone())).collect();
    let replies = round_trip(agents, frames, limit).await;
    let mut reports = Vec::new();
    for (a, r) in agents.iter_mut().zip(replies) {
        match r {
            Some(Ok(bytes)) => match base::wire::decode_json::<AgentMsg>(&bytes) {
                Ok(AgentMsg::Report(rep)) => reports.push(rep),
                Ok(_) => a.drop_out(format!("it did not report round {ri}")),
                Err(e) => a.drop_out(format!("its report of round {ri} is unreadable ({e})")),
            },
            Some(Err(e)) => a.drop_out(format!("during round {ri}: {e}")),
            None => {}
        }
    }
    // The side of a gone agent in this round's pairs: recorded here, since it
    // cannot speak for itself.
    let mut missing = RoundReport::default();
    for rp in round {
        for (rank, role) in [
            (rp.initiator, Role::Initiator),
            (rp.responder, Role::Responder),
        ] {
            let a = &agents[rank as usize];
            if let Some(g) = &a.gone {
                missing.failures.push(SideFailure {
                    round: ri,
                    pair: p2p::driver::pair_of_members(
                        members,
                        true,
                        *rp,
                        (schedule.rounds.len() > 1).then_some(ri),
                    ),
                    role,
                    size_bytes: None,
                    error: format!("agent {} {g}", a.addr.name),
                    port_state: None,
                });
            }
        }
    }
    reports.push(missing);
    Ok(reports)
}

/// Connects to every agent at once, each within `timeout`, and authenticates both ways.
/// Agents that do not answer are kept (their pairs will fail); agents that refuse make the
/// sweep a set-up error, all of them named. An agent that serves another coordinator is
/// asked again until `timeout`: a coordinator just stopped (a runner's step interrupted
/// and resumed at once) leaves its agents finishing their pair for a moment; one still
/// busy after `timeout` is a set-up error too.
async fn enlist(
    addrs: Vec<AgentAddr>,
    secret: &Secret,
    tool: &str,
    timeout: Duration,
) -> Result<Vec<Agent>> {
    let mut set = JoinSet::new();
    for (i, addr) in addrs.iter().enumerate() {
        let (addr, secret, tool) = (addr.clone(), secret.clone(), tool.to_string());
        set.spawn(async move { (i, patient_handshake(&addr, &secret, &tool, timeout).await) });
    }
    let mut agents: Vec<Agent> = addrs
        .into_iter()
        .map(|addr| Agent {
            addr,
            conn: None,
            welcome: None,
            reached: None,
            gone: None,
        })
        .collect();
    let mut refusals = Vec::new();
    while let Some(joined) = set.join_next().await {
        let (i, r) = joined.map_err(|e| anyhow!("an agent's handshake task failed: {e}"))?;
        let a = &mut agents[i];
        match r {
            Ok((conn, welcome, reached)) => {
                a.conn = Some(conn);
                a.welcome = Some(welcome);
                a.reached = Some(reached);
            }
            Err(Fault::Silent(why)) => {
                eprintln!("agent {}: {why}", a.addr.name);
                a.gone = Some(why);
            }
            Err(Fault::Refused(why)) => refusals.push(format!("{}: {why}", a.addr.name)),
            Err(Fault::Busy(why)) => refusals.push(format!(
                "{}: busy: {why} (still after {} s: wait for that sweep or stop it)",
                a.addr.name,
                timeout.as_secs_f64()
            )),
        }
    }
    if !refusals.is_empty() {
        refusals.sort();
        bail!("agents refused this coordinator: {}", refusals.join("; "));
    }
    Ok(agents)
}

/// One agent's handshake within `timeout`, asked again while it is busy with another
/// coordinator's sweep (said once on the terminal).
async fn patient_handshake(
    addr: &AgentAddr,
    secret: &Secret,
    tool: &str,
    timeout: Duration,
) -> Result<(TcpStream, Welcome, SocketAddr), Fault> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut said = false;
    loop {
        match tokio::time::timeout_at(deadline, handshake(addr, secret, tool)).await {
            Err(_) => {
                return Err(Fault::Silent(format!(
                    "did not answer within {} s",
                    timeout.as_secs_f64()
                )))
            }
            Ok(Err(Fault::Busy(why))) if tokio::time::Instant::now() + BUSY_PAUSE < deadline => {
                if !said {
                    eprintln!(
                        "agent {}: busy: {why}; asking again until {} s have passed",
                        addr.name,
                        timeout.as_secs_f64()
                    );
                    said = true;
                }
                tokio::time::sleep(BUSY_PAUSE).await;
            }
            Ok(r) => return r,
        }
    }
}

async fn handshake(
    addr: &AgentAddr,
    secret: &Secret,
    tool: &str,
) -> Result<(TcpStream, Welcome, SocketAddr), Fault> {
    let silent = |e: String| Fault::Silent(e);
    let targets = addr.resolve().map_err(|e| silent(format!("{e:#}")))?;
    let mut last = String::from("no address");
    let mut conn = None;
    for t in targets {
        match TcpStream::connect(t).await {
            Ok(c) => {
                conn = Some((c, t));
                break;
            }
            Err(e) => last = format!("cannot connect to {t}: {e}"),
        }
    }
    let (mut conn, reached) = conn.ok_or_else(|| silent(last))?;
    let _ = conn.set_nodelay(true);
    let mine = secret::nonce();
    send(
        &mut conn,
        &CoordHello {
            protocol: proto::PROTOCOL,
            tool: tool.into(),
            version: results::provenance::TOOL_VERSION.into(),
            nonce: mine,
        },
    )
    .await
    .map_err(silent)?;
    let (theirs, proof) = match recv::<AgentHello>(&mut conn)
        .await
        .map_err(|e| silent(format!("not a fabcheck agent? {e}")))?
    {
        AgentHello::Challenge {
            protocol,
            tool: their_tool,
            version,
            nonce,
            proof,
        } => {
            if protocol != proto::PROTOCOL || their_tool != crate::serve::agent_tool_for(tool) {
                return Err(Fault::Refused(format!(
                    "it runs {their_tool} (fabcheck {version}, agents' protocol {protocol}); this coordinator is {tool} \
                     (fabcheck {}, protocol {})",
                    results::provenance::TOOL_VERSION,
                    proto::PROTOCOL
                )));
            }
            (nonce, proof)
        }
        AgentHello::Refused(why) => return Err(Fault::Refused(why)),
    };
    let agent_proved = secret.verify("agent", &theirs, &mine, &proof);
    // Our proof goes out either way, so an agent of another secret logs the failure too.
    send(
        &mut conn,
        &CoordAuth {
            proof: secret.proof("coordinator", &mine, &theirs),
        },
    )
    .await
    .map_err(silent)?;
    if !agent_proved {
        return Err(Fault::Refused(
            "it could not prove it holds the shared secret (another secret, or not our agent)"
                .into(),
        ));
    }
    match recv::<AuthReply>(&mut conn).await.map_err(silent)? {
        AuthReply::Welcome(w) => Ok((conn, *w, reached)),
        AuthReply::Refused(why) => Err(Fault::Refused(why)),
        AuthReply::Busy(why) => Err(Fault::Busy(why)),
    }
}

/// Agents of one sweep must run the same options; names every option that differs and
/// which agents hold which value.
fn agree(agents: &[Agent]) -> Result<()> {
    let live: Vec<&Agent> = agents.iter().filter(|a| a.live()).collect();
    let mut keys: Vec<&String> = live
        .iter()
        .filter_map(|a| a.welcome.as_ref())
        .flat_map(|w| w.options.keys())
        .collect();
    keys.sort();
    keys.dedup();
    let mut diffs = Vec::new();
    for k in keys {
        let mut by_value: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for a in &live {
            let v = a
                .welcome
                .as_ref()
                .and_then(|w| w.options.get(k))
                .map_or("(unset)".to_string(), |v| v.to_string());
            by_value.entry(v).or_default().push(&a.addr.name);
        }
        if by_value.len() > 1 {
            let parts: Vec<String> = by_value
                .iter()
                .map(|(v, who)| {
                    if who.len() > 4 {
                        format!("{v} on {} agents ({}, ...)", who.len(), who[..3].join(", "))
                    } else {
                        format!("{v} on {}", who.join(", "))
                    }
                })
                .collect();
            diffs.push(format!("{k}: {}", parts.join(" vs ")));
        }
    }
    if !diffs.is_empty() {
        bail!(
            "the agents run different options, so their figures would not compare: {}. Restart them alike",
            diffs.join("; ")
        );
    }
    Ok(())
}

/// The sweep's transport is the agents' (they resolved `auto` where the NICs are); a
/// transport asked for here must match it.
fn settle_transport(agents: &[Agent], asked: TransportChoice, op: Op) -> Result<TransportKind> {
    let theirs = agents
        .iter()
        .filter_map(|a| a.welcome.as_ref())
        .filter_map(|w| w.options.get("transport").and_then(|t| t.as_str()))
        .next()
        .unwrap_or("tcp");
    let kind = if theirs == "verbs" {
        TransportKind::Verbs
    } else {
        TransportKind::Tcp
    };
    let wanted = match asked {
        TransportChoice::Auto => kind,
        TransportChoice::Tcp => TransportKind::Tcp,
        TransportChoice::Verbs => TransportKind::Verbs,
    };
    if wanted != kind {
        bail!(
            "--transport {} asked, and the agents run {}: restart the agents with --transport {}, or leave --transport out here",
            wanted.name(),
            kind.name(),
            wanted.name()
        );
    }
    transport::check_supported(kind, op)?;
    Ok(kind)
}

/// The verbs settings the agents run with, as their welcomes said (`agree` has checked
/// that all say the same), for the document.
fn agents_verbs(agents: &[Agent]) -> VerbsOptions {
    let options = agents
        .iter()
        .find_map(|a| a.welcome.as_ref())
        .map(|w| &w.options);
    let number = |k: &str| options.and_then(|o| o.get(k)).and_then(|v| v.as_u64());
    // Ports count from 1; an agent over TCP has none.
    let mut v = VerbsOptions {
        port: 1,
        ..Default::default()
    };
    if let Some(p) = number("ib_port").and_then(|p| u8::try_from(p).ok()) {
        v.port = p;
    }
    v.gid_index = number("gid_index").and_then(|x| u32::try_from(x).ok());
    v
}

/// The roster: one member per agent in host-file order; the local rank of an agent is its
/// place among the agents of its host (one agent per NIC gives the rails).
fn roster(agents: &[Agent]) -> Vec<Member> {
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    agents
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let host = a
                .welcome
                .as_ref()
                .map_or_else(|| a.addr.host.clone(), |w| w.host.hostname.clone());
            let local = seen.entry(host.clone()).or_default();
            let local_rank = *local;
            *local += 1;
            let ctrl = a.welcome.as_ref().map(|w| {
                let ip: IpAddr = if w.pair_addr.ip().is_unspecified() {
                    a.reached.map_or(w.pair_addr.ip(), |r| r.ip())
                } else {
                    w.pair_addr.ip()
                };
                SocketAddr::new(ip, w.pair_addr.port())
            });
            Member {
                rank: i as u32,
                host,
                local_rank,
                device: a.welcome.as_ref().and_then(|w| w.device.clone()),
                port: a.welcome.as_ref().and_then(|w| w.port),
                ctrl,
            }
        })
        .collect()
}

pub(crate) fn frame<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    let payload = serde_json::to_vec(v)?;
    if payload.len() > MAX_FRAME {
        bail!(
            "a control message of {} bytes exceeds the {MAX_FRAME}-byte limit",
            payload.len()
        );
    }
    let mut f = Vec::with_capacity(8 + payload.len());
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(&payload);
    Ok(f)
}

async fn send<T: Serialize>(s: &mut TcpStream, v: &T) -> Result<(), String> {
    let f = frame(v).map_err(|e| format!("{e:#}"))?;
    s.write_all(&f)
        .await
        .map_err(|e| format!("sending to it: {e}"))
}

async fn recv_frame(s: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            "it closed the connection (exited or was killed)".to_string()
        }
        _ => format!("reading from it: {e}"),
    })?;
    if &h[..4] != MAGIC {
        return Err(format!(
            "it sent bytes that are not a fabcheck message ({:02x?})",
            &h[..4]
        ));
    }
    let len = u32::from_be_bytes([h[4], h[5], h[6], h[7]]) as usize;
    if len > MAX_FRAME {
        return Err(format!(
            "it announced a {len}-byte message, over the {MAX_FRAME}-byte limit"
        ));
    }
    let mut p = vec![0u8; len];
    s.read_exact(&mut p)
        .await
        .map_err(|e| format!("reading from it: {e}"))?;
    Ok(p)
}

async fn recv<T: DeserializeOwned>(s: &mut TcpStream) -> Result<T, String> {
    let p = recv_frame(s).await?;
    base::wire::decode_json(&p).map_err(|e| format!("{e:#}"))
}

/// Sends each live agent its frame and waits for one frame back from each, all at once,
/// each within `limit`. An agent whose exchange fails is dropped (its answer is the error);
/// agents already gone, or without a frame, get `None`.
async fn round_trip(
    agents: &mut [Agent],
    frames: Vec<Option<Vec<u8>>>,
    limit: Duration,
) -> Replies {
    let mut set = JoinSet::new();
    for (i, (a, f)) in agents.iter_mut().zip(frames).enumerate() {
        let (Some(f), true) = (f, a.live()) else {
            continue;
        };
        let mut conn = a.conn.take().expect("live agents have a connection");
        set.spawn(async move {
            let r = tokio::time::timeout(limit, async {
                conn.write_all(&f)
                    .await
                    .map_err(|e| format!("sending to it: {e}"))?;
                recv_frame(&mut conn).await
            })
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {} s", limit.as_secs_f64())));
            (i, conn, r)
        });
    }
    collect(set, agents).await
}

/// Each agent's reply (by index; `None` where nothing was asked), from tasks that took its
/// connection: the connections of those that answered go back to them.
type Replies = Vec<Option<Result<Vec<u8>, String>>>;

async fn collect(
    mut set: JoinSet<(usize, TcpStream, Result<Vec<u8>, String>)>,
    agents: &mut [Agent],
) -> Replies {
    let mut out: Replies = agents.iter().map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        let Ok((i, conn, r)) = joined else { continue };
        if r.is_ok() {
            agents[i].conn = Some(conn);
        }
        out[i] = Some(r);
    }
    out
}

/// Reads one frame from every live agent at once, each within `limit` (an agent whose
/// read fails keeps no connection).
pub(crate) async fn receive_all(agents: &mut [Agent], limit: Duration) -> Replies {
    let mut set = JoinSet::new();
    for (i, a) in agents.iter_mut().enumerate() {
        if !a.live() {
            continue;
        }
        let mut conn = a.conn.take().expect("live agents have a connection");
        set.spawn(async move {
            let r = tokio::time::timeout(limit, recv_frame(&mut conn))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {} s", limit.as_secs_f64())));
            (i, conn, r)
        });
    }
    collect(set, agents).await
}

/// Sends one frame to every agent; an error names the first one it could not reach.
pub(crate) async fn send_each(agents: &mut [Agent], f: &[u8]) -> Result<()> {
    for a in agents.iter_mut() {
        let name = a.addr.name.clone();
        let c = a
            .conn
            .as_mut()
            .ok_or_else(|| anyhow!("agent {name} is gone"))?;
        tokio::time::timeout(Duration::from_secs(10), c.write_all(f))
            .await
            .map_err(|_| anyhow!("agent {name} took no message for 10 s"))?
            .map_err(|e| anyhow!("sending to agent {name}: {e}"))?;
    }
    Ok(())
}

/// Sends one frame to every live agent (best effort, briefly).
async fn send_all(agents: &mut [Agent], f: &[u8]) {
    for a in agents.iter_mut().filter(|a| a.live()) {
        if let Some(c) = a.conn.as_mut() {
            let _ = tokio::time::timeout(Duration::from_secs(2), c.write_all(f)).await;
        }
    }
}

/// Tells every live agent the sweep is over, so it waits for the next.
async fn done_all(agents: &mut [Agent]) {
    if let Ok(f) = frame(&Command::Done) {
        send_all(agents, &f).await;
    }
    for a in agents.iter_mut() {
        a.conn = None;
    }
}

/// The coordinator's side of an agents' gang ([`crate::gang`]): answers every gang step once every agent has asked it, until
/// all have sent their reports; returns the first exchange (the roster) and the reports,
/// each in rank order. `limit` bounds the wait for each step.
pub(crate) async fn relay(
    agents: &mut [Agent],
    limit: Duration,
) -> Result<(Vec<Vec<u8>>, Vec<Vec<u8>>)> {
    let mut roster: Option<Vec<Vec<u8>>> = None;
    for seq in 0.. {
        let replies = receive_all(agents, limit).await;
        let mut asks = Vec::with_capacity(agents.len());
        for (a, r) in agents.iter().zip(replies) {
            let name = &a.addr.name;
            let bytes = r
                .ok_or_else(|| anyhow!("agent {name} is gone"))?
                .map_err(|e| anyhow!("agent {name}: {e}"))?;
            match base::wire::decode_json::<AgentMsg>(&bytes) {
                Ok(AgentMsg::Gang(ask)) => asks.push(ask),
                Ok(AgentMsg::Failed(why)) => bail!("agent {name} failed: {why}"),
                Ok(other) => bail!("agent {name} sent {other:?} in the middle of the run"),
                Err(e) => bail!("agent {name} sent an unreadable message: {e:#}"),
            }
        }
        let at = |ask: &GangAsk| match ask {
            GangAsk::Barrier { seq }
            | GangAsk::Flag { seq, .. }
            | GangAsk::AllGather { seq, .. }
            | GangAsk::Gather { seq, .. } => *seq,
        };
        let kind = std::mem::discriminant(&asks[0]);
        if let Some((i, a)) = asks
            .iter()
            .enumerate()
            .find(|(_, a)| at(a) != seq || std::mem::discriminant(*a) != kind)
        {
            bail!(
                "agent {} is out of step: it asked {a:?} at step {seq}, the first agent {:?}",
                agents[i].addr.name,
                asks[0]
            );
        }
        let answer = match &asks[0] {
            GangAsk::Barrier { .. } => GangAnswer::Go { seq },
            GangAsk::Flag { .. } => GangAnswer::Any {
                seq,
                any: asks
                    .iter()
                    .any(|a| matches!(a, GangAsk::Flag { local: true, .. })),
            },
            GangAsk::AllGather { .. } => {
                let data: Vec<String> = asks
                    .iter()
                    .map(|a| match a {
                        GangAsk::AllGather { data, .. } => data.clone(),
                        _ => unreachable!("checked: one kind"),
                    })
                    .collect();
                if roster.is_none() {
                    roster = Some(
                        data.iter()
                            .map(|d| crate::gang::unb64(d))
                            .collect::<Result<_>>()?,
                    );
                }
                GangAnswer::All { seq, data }
            }
            GangAsk::Gather { .. } => {
                let reports = asks
                    .iter()
                    .map(|a| match a {
                        GangAsk::Gather { data, .. } => crate::gang::unb64(data),
                        _ => unreachable!("checked: one kind"),
                    })
                    .collect::<Result<_>>()?;
                let roster = roster.ok_or_else(|| anyhow!("the agents sent no roster"))?;
                return Ok((roster, reports));
            }
        };
        let f = frame(&Command::Gang(answer))?;
        send_each(agents, &f).await?;
    }
    unreachable!("the loop returns")
}
