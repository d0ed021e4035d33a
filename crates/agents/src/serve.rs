//! The agent (`bench-bw --serve`, `bench-lat --serve`): one long-lived process per node or
//! per NIC that takes part in the sweeps a coordinator runs.
//!
//! It listens on one control port. A connection must open with the coordinator's hello
//! and prove the shared secret (see [`secret`](super::secret)); anything else is logged
//! and dropped, and the agent goes on listening. An authenticated coordinator sends
//! sweeps; in each the agent is one rank of the run and does exactly what an MPI rank
//! does (`p2p::driver::run_rank`): it waits for the coordinator's go for each round, measures its
//! pair over the pair's own control connection, and reports. While it serves one
//! coordinator, another one is told that it is busy. A coordinator that goes away ends its
//! sweep on the agent, which then waits for the next.
//!
//! Runs whose ranks all work at once go the same way: an incast (`bench-bw --pattern
//! incast --hosts`) and, on `bench-bw` agents, a congestion run (`bench-congestion
//! --hosts`), each agent one rank of the gang ([`crate::gang`]).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;

use results::{Document, HostInfo};

use crate::gang::AgentGang;
use crate::metrics;
use crate::proto::{
    self, AgentHello, AgentMsg, AuthReply, Command, CongestionOrder, CoordAuth, CoordHello,
    IncastOrder, SweepOrder, Welcome,
};
use crate::secret::{self, Secret};
use base::clock::LoopClock;
use base::link::PeerLink;
use base::wire;
use bootstrap::standalone::TcpLink;
use p2p::coordinator::{self, Coordinator, Member, RoundReport, Shared};
use p2p::driver::RunCtx;
use p2p::pairlink::{self, ControlListener, Ticket};
use p2p::pattern::RankPair;
use p2p::{Launch, PairTool, Plan};
use traffic::endpoint_flows::Carrier;
use transport::{Op, TransportKind};

/// How long a silent but connected coordinator is waited for between sweeps.
const IDLE: Duration = Duration::from_secs(600);
/// How long a new connection has to say hello or answer the challenge.
const HANDSHAKE: Duration = Duration::from_secs(5);

/// Runs the agent until it is killed (Ctrl-C ends it between sweeps). Returns the exit
/// code: 2 when it cannot start (no secret, port in use, a bad device).
pub fn run(launch: &Launch, mut plan: Plan, tool: &mut dyn PairTool) -> i32 {
    match start(launch, &mut plan) {
        Ok(agent) => agent.serve(launch, &plan, tool),
        Err(e) => {
            eprintln!("{}: error: {e:#}", plan.tool);
            base::exit::ERROR
        }
    }
}

struct Agent {
    secret: Secret,
    listener: Arc<TcpListener>,
    pairs: ControlListener,
    host: HostInfo,
    options: serde_json::Map<String, serde_json::Value>,
    clock: LoopClock,
    /// The last sweep's results, for `--metrics` scrapes.
    last: metrics::Shared,
}

/// The agent's own options that every agent of a sweep must share.
fn own_options(plan: &Plan) -> serde_json::Map<String, serde_json::Value> {
    let v = &plan.verbs;
    let mut m = serde_json::Map::new();
    m.insert("transport".into(), json!(plan.transport.name()));
    if plan.transport == TransportKind::Verbs {
        m.insert("ib_port".into(), json!(v.port));
        m.insert("gid_index".into(), json!(v.gid_index));
        m.insert("mtu".into(), json!(v.mtu));
        m.insert("inline_size".into(), json!(v.inline_size));
        m.insert("events".into(), json!(v.events));
    } else {
        m.insert("mtu".into(), json!(v.mtu));
    }
    m
}

fn start(launch: &Launch, plan: &mut Plan) -> Result<Agent> {
    let secret = Secret::load(launch.secret_file.as_deref())?;
    // The agent's device is its own business: -d NAME, or auto (its host's first ACTIVE
    // device: run one agent per NIC with -d to cover every rail).
    coordinator::settle_device(plan, &launch.devices, 0)?;
    // Control on --control-addr (the management network), data on --bind-addr (the rail).
    let ip = launch
        .control_addr
        .or(launch.bind_addr)
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let listener = TcpListener::bind(SocketAddr::new(ip, launch.port)).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow!(
                "port {} is already in use (another agent?): pick another with -p",
                launch.port
            )
        } else {
            anyhow!("cannot listen on {ip}:{}: {e}", launch.port)
        }
    })?;
    let pairs = ControlListener::open(launch.bind_addr)?;
    let mut host = probe::host::collect();
    // The rail this agent's rows name, as an MPI rank's: its RDMA device, or over TCP the
    // interface holding --bind-addr (`rail0`).
    host.device = coordinator::rail_of(plan, launch.bind_addr);
    host.placement = Some(p2p::placement::place(
        plan,
        launch.bind_addr,
        launch.cpu.as_deref(),
    )?);
    eprintln!(
        "{} agent {}: listening on {ip}:{} (pairs on port {}), transport {}{}; waiting for a coordinator",
        plan.tool,
        host.hostname,
        launch.port,
        pairs.addr().port(),
        plan.transport.name(),
        host.device.as_ref().map_or(String::new(), |d| format!(", device {d}")),
    );
    let last = metrics::Shared::default();
    if let Some(addr) = launch.metrics {
        let bound = metrics::serve(
            addr,
            host.hostname.clone(),
            last.clone(),
            metrics::Node::Live,
        )?;
        eprintln!(
            "{} agent {}: metrics on http://{bound}/metrics",
            plan.tool, host.hostname
        );
    }
    Ok(Agent {
        secret,
        last,
        listener: Arc::new(listener),
        pairs,
        host,
        options: own_options(plan),
        clock: LoopClock::new(),
    })
}

impl Agent {
    fn serve(self, launch: &Launch, plan: &Plan, tool: &mut dyn PairTool) -> i32 {
        base::interrupt::install();
        // Every connection is authenticated on a thread of its own, so a silent or hostile
        // one cannot hold the door; an authenticated coordinator is handed to this thread,
        // or told the agent is busy with another's sweep.
        let busy: Arc<Mutex<Option<String>>> = Arc::default();
        let (tx, rx) = mpsc::channel::<(TcpStream, SocketAddr)>();
        let door = Door {
            secret: self.secret.clone(),
            tool: plan.tool,
            busy: Arc::clone(&busy),
            welcome: Welcome {
                host: self.host.clone(),
                options: self.options.clone(),
                device: self.host.device.clone(),
                port: (plan.transport == TransportKind::Verbs)
                    .then_some(u32::from(plan.verbs.port)),
                pair_addr: self.pairs.addr(),
            },
        };
        {
            let listener = Arc::clone(&self.listener);
            std::thread::spawn(move || loop {
                let Ok((stream, from)) = listener.accept() else {
                    continue;
                };
                let (door, tx) = (door.clone(), tx.clone());
                std::thread::spawn(move || {
                    if let Some(s) = door.admit(stream, from) {
                        let _ = tx.send((s, from));
                    }
                });
            });
        }
        loop {
            let (stream, from) = match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(c) => c,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if base::interrupt::interrupted() {
                        eprintln!("agent: interrupted, exiting");
                        return base::exit::INTERRUPTED;
                    }
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return base::exit::ERROR,
            };
            match self.session(stream, launch, plan, tool) {
                Ok(()) => eprintln!("agent: coordinator {from} is done; waiting for the next"),
                Err(e) => eprintln!("agent: coordinator {from}: {e:#}; waiting for the next"),
            }
            if let Ok(mut b) = busy.lock() {
                *b = None;
            }
        }
    }

    /// An authenticated coordinator's sweeps, until it is done or goes away.
    fn session(
        &self,
        mut s: TcpStream,
        launch: &Launch,
        plan: &Plan,
        tool: &mut dyn PairTool,
    ) -> Result<()> {
        loop {
            let cmd: Command = wire::recv_json(&mut s, IDLE)
                .context("waiting for the coordinator's next command")?;
            match cmd {
                Command::Done => return Ok(()),
                Command::Stop { .. } | Command::Round { .. } | Command::Gang(_) => continue,
                Command::Incast(order) => self.incast(&mut s, &order, launch, plan)?,
                Command::Congestion(order) => self.congestion(&mut s, &order, launch, plan)?,
                Command::Sweep(order) => {
                    let order = *order;
                    let (sweep_launch, sweep_plan) = match self.accept_order(&order, launch, plan) {
                        Ok(x) => x,
                        Err(e) => {
                            let why = format!("{e:#}");
                            eprintln!("agent: refused a sweep: {why}");
                            wire::send_json(&mut s, &AgentMsg::Refused(why))?;
                            continue;
                        }
                    };
                    wire::send_json(&mut s, &AgentMsg::Ready)?;
                    let mut side = AgentSide {
                        conn: &mut s,
                        listener: &self.pairs,
                        members: order.members,
                        rank: order.rank,
                        shared: order.shared,
                        gone: HashMap::new(),
                        bind: launch.bind_addr,
                        link: None,
                        timeout: sweep_plan.timeout,
                        lost: None,
                        last: &self.last,
                    };
                    if let Ok(mut l) = self.last.lock() {
                        l.results.clear();
                    }
                    let ctx = RunCtx {
                        clock: &self.clock,
                        started_at: results::provenance::now_rfc3339(),
                        overhead_ns: self.clock.loop_overhead_ns(),
                    };
                    let r = p2p::driver::run_rank(&mut side, &sweep_launch, &sweep_plan, tool, ctx);
                    if let Some(lost) = side.lost.take() {
                        bail!("the coordinator went away during the sweep: {lost}");
                    }
                    r?;
                }
            }
        }
    }

    /// One incast as rank `order.rank`: this agent's transport and device, the
    /// coordinator's operation and windows.
    fn incast(
        &self,
        s: &mut TcpStream,
        order: &IncastOrder,
        launch: &Launch,
        plan: &Plan,
    ) -> Result<()> {
        let refused = transport::check_supported(plan.transport, order.op)
            .err()
            .map(|e| format!("{e:#}"));
        let timeout = Duration::from_secs_f64(order.timeout_s);
        let window = Duration::from_secs_f64(order.window_s);
        let carrier = Carrier::of(
            plan.transport,
            &plan.verbs,
            order.op,
            launch.bind_addr,
            timeout,
            launch.devices.clone(),
        );
        eprintln!(
            "agent: incast rank {} of {}, {} s windows",
            order.rank, order.size, order.window_s
        );
        let gang = (order.rank, order.size, timeout * 3 + window * 4);
        gang_run(s, "incast", refused, gang, |g| {
            traffic::incast::run_job(
                g,
                launch.bind_addr,
                order.senders,
                window,
                timeout,
                &carrier,
            )
            .map(drop)
        })
    }

    /// One congestion run as rank `order.rank`: this agent's transport and device, the
    /// coordinator's seed, split and phases. No allreduce canary: that one is MPI's.
    fn congestion(
        &self,
        s: &mut TcpStream,
        order: &CongestionOrder,
        launch: &Launch,
        plan: &Plan,
    ) -> Result<()> {
        let o = &order.options;
        let timeout = Duration::from_secs_f64(o.timeout_s);
        let carrier = Carrier::of(
            plan.transport,
            &plan.verbs,
            Op::Send,
            launch.bind_addr,
            timeout,
            launch.devices.clone(),
        );
        eprintln!(
            "agent: congestion run rank {} of {}, seed {}, {} s phases",
            order.rank, order.size, o.seed, o.phase_seconds
        );
        let gang = (order.rank, order.size, congestion_step(o));
        gang_run(s, "congestion run", None, gang, |g| {
            traffic::congestion::run(g, o, launch.bind_addr, &carrier, None).map(drop)
        })
    }

    /// The plan of a sweep as this agent runs it: the coordinator's test, sizes and
    /// timing, this agent's device and verbs settings.
    fn accept_order(
        &self,
        order: &SweepOrder,
        launch: &Launch,
        own: &Plan,
    ) -> Result<(Launch, Plan)> {
        let mut plan = order.plan.clone();
        plan.tool = own.tool;
        if plan.transport != own.transport {
            bail!(
                "the sweep is over {}, and this agent runs {} (start it with --transport {})",
                plan.transport.name(),
                own.transport.name(),
                plan.transport.name()
            );
        }
        transport::check_supported(plan.transport, plan.op)?;
        let check = plan.verbs.check;
        plan.verbs = own.verbs.clone();
        plan.verbs.check = check;
        let me = order.members.get(order.rank as usize).ok_or_else(|| {
            anyhow!(
                "the coordinator named rank {} of {} members",
                order.rank,
                order.members.len()
            )
        })?;
        if me.device != self.host.device {
            bail!(
                "the coordinator thinks this agent uses {:?}, it uses {:?}",
                me.device,
                self.host.device
            );
        }
        let sweep_launch = Launch {
            host: None,
            port: launch.port,
            bind_addr: launch.bind_addr,
            json: None,
            launcher: launch.launcher,
            pattern: order.pattern.parse().map_err(|e: String| anyhow!(e))?,
            include_local: order.include_local,
            rail_mode: order.rails.parse().map_err(|e: String| anyhow!(e))?,
            devices: launch.devices.clone(),
            serve: false,
            hosts: None,
            secret_file: None,
            metrics: None,
            control_addr: None,
            transport: launch.transport,
            // The plan is read by the coordinator (the root) and shared with the roster.
            fabric_plan: None,
            cpu: launch.cpu.clone(),
        };
        Ok((sweep_launch, plan))
    }
}

/// The longest a congestion run's rank waits for one gang step (the coordinator allows
/// the same): a phase's two canary slots with the congestors' tail and the counter reads,
/// the connections, the far ends' close, each within the timeout.
pub fn congestion_step(o: &traffic::congestion::Options) -> Duration {
    Duration::from_secs_f64(o.timeout_s * 3.0 + o.phase_seconds * 8.0)
}

/// A run in which this agent is rank `rank` of `size` of a gang (an incast, a congestion
/// run; `wait` bounds each step): refused with why, or `Ready` and then `body`. A failure
/// is told to the coordinator, which ends the run for every agent; only a broken
/// connection ends the session.
fn gang_run(
    s: &mut TcpStream,
    what: &str,
    refused: Option<String>,
    (rank, size, wait): (u32, u32, Duration),
    body: impl FnOnce(&mut AgentGang<'_>) -> Result<()>,
) -> Result<()> {
    if let Some(why) = refused {
        eprintln!("agent: refused a {what}: {why}");
        return wire::send_json(s, &AgentMsg::Refused(why));
    }
    wire::send_json(s, &AgentMsg::Ready)?;
    let mut gang = AgentGang::new(s, rank, size, wait);
    if let Err(e) = body(&mut gang) {
        let why = format!("{e:#}");
        eprintln!("agent: the {what} failed: {why}");
        wire::send_json(s, &AgentMsg::Failed(why))?;
    }
    Ok(())
}

/// Why this agent will not talk to a coordinator that said `hello`, if it will not.
fn mismatch(hello: &CoordHello, tool: &str) -> Option<String> {
    if hello.protocol != proto::PROTOCOL {
        return Some(format!(
            "agents' protocol: coordinator {} (fabcheck {}) vs agent {} (fabcheck {}): run the same release",
            hello.protocol,
            hello.version,
            proto::PROTOCOL,
            results::provenance::TOOL_VERSION
        ));
    }
    let serving = agent_tool_for(&hello.tool);
    if serving != tool {
        return Some(format!(
            "tool: the coordinator runs {} and this agent is {tool}: start `{serving} --serve` agents for it",
            hello.tool
        ));
    }
    None
}

/// The agents a coordinator runs over: its own tool's, except `bench-congestion`, whose
/// canaries and congestors run on `bench-bw` agents (it has no agent of its own).
pub fn agent_tool_for(coordinator: &str) -> &str {
    match coordinator {
        "bench-congestion" => "bench-bw",
        t => t,
    }
}

/// What the door needs to admit a coordinator: the secret, and who holds the agent now.
#[derive(Clone)]
struct Door {
    secret: Secret,
    tool: &'static str,
    busy: Arc<Mutex<Option<String>>>,
    welcome: Welcome,
}

impl Door {
    /// The handshake of one connection, within a few seconds; the stream when it is an
    /// authenticated coordinator and the agent is free (then marked busy with it).
    fn admit(&self, mut s: TcpStream, from: SocketAddr) -> Option<TcpStream> {
        match self.handshake(&mut s, from) {
            Ok(true) => Some(s),
            Ok(false) => None,
            Err(e) => {
                eprintln!("agent: ignored a connection from {from}: {e:#}");
                None
            }
        }
    }

    fn handshake(&self, s: &mut TcpStream, from: SocketAddr) -> Result<bool> {
        s.set_nodelay(true)?;
        let hello: CoordHello = wire::recv_json(s, HANDSHAKE).context("no coordinator hello")?;
        if let Some(why) = mismatch(&hello, self.tool) {
            eprintln!("agent: refused {from}: {why}");
            let _ = wire::send_json(s, &AgentHello::Refused(why));
            return Ok(false);
        }
        let mine = secret::nonce();
        wire::send_json(
            s,
            &AgentHello::Challenge {
                protocol: proto::PROTOCOL,
                tool: self.tool.into(),
                version: results::provenance::TOOL_VERSION.into(),
                nonce: mine,
                proof: self.secret.proof("agent", &mine, &hello.nonce),
            },
        )?;
        let auth: CoordAuth =
            wire::recv_json(s, HANDSHAKE).context("no answer to the challenge")?;
        if !self
            .secret
            .verify("coordinator", &hello.nonce, &mine, &auth.proof)
        {
            eprintln!("agent: refused {from}: authentication failed (it does not hold this agent's secret)");
            let _ = wire::send_json(
                s,
                &AuthReply::Refused("authentication failed: the coordinator and the agent do not share the same secret".into()),
            );
            return Ok(false);
        }
        let mut busy = self
            .busy
            .lock()
            .map_err(|_| anyhow!("agent state poisoned"))?;
        if let Some(who) = busy.as_ref() {
            eprintln!("agent: told {from} that a sweep of {who} is running");
            let _ = wire::send_json(
                s,
                &AuthReply::Busy(format!("taking part in a sweep run by {who}")),
            );
            return Ok(false);
        }
        *busy = Some(from.to_string());
        drop(busy);
        wire::send_json(s, &AuthReply::Welcome(Box::new(self.welcome.clone())))?;
        eprintln!("agent: coordinator {from} authenticated");
        Ok(true)
    }
}

/// The agent as one rank of a sweep: rounds start when the coordinator says so, reports
/// go back to it, pairs connect as under MPI.
struct AgentSide<'a> {
    conn: &'a mut TcpStream,
    listener: &'a ControlListener,
    members: Vec<Member>,
    rank: u32,
    shared: Shared,
    gone: HashMap<u32, String>,
    bind: Option<IpAddr>,
    link: Option<TcpLink>,
    timeout: Duration,
    /// The coordinator's connection broke: why.
    lost: Option<String>,
    /// Where this agent's results of the sweep are kept for `--metrics`.
    last: &'a metrics::Shared,
}

impl Coordinator for AgentSide<'_> {
    fn launcher(&self) -> &'static str {
        "agents"
    }
    fn rank(&self) -> u32 {
        self.rank
    }
    fn is_root(&self) -> bool {
        false
    }
    fn members(&self) -> &[Member] {
        &self.members
    }
    fn hosts(&self) -> Vec<HostInfo> {
        Vec::new()
    }
    fn ranks_in_results(&self) -> bool {
        true
    }
    fn share(&mut self, _root: Shared) -> Result<Shared> {
        Ok(self.shared.clone())
    }
    fn begin_round(&mut self, round: u32, limit: Duration) -> bool {
        self.link = None;
        if self.lost.is_some() {
            return false;
        }
        // The coordinator says go once every pair of the last round reported: up to the
        // slowest pair's whole budget.
        match wire::recv_json::<Command>(self.conn, limit + self.timeout) {
            Ok(Command::Round { round: r, gone }) if r == round => {
                self.gone = gone.into_iter().collect();
                true
            }
            Ok(Command::Round { round: r, .. }) => {
                self.lost = Some(format!("it sent round {r} when round {round} was due"));
                false
            }
            Ok(Command::Stop { reason }) => {
                eprintln!("agent: the coordinator stopped the sweep: {reason}");
                false
            }
            Ok(_) => false,
            Err(e) => {
                self.lost = Some(format!("{e:#}"));
                false
            }
        }
    }
    fn pair_link(&mut self, round: u32, pair: RankPair, seed: u64) -> Result<&mut dyn PeerLink> {
        let link = pairlink::open(
            Ticket::new(seed, round, pair),
            self.rank,
            &self.members,
            self.listener,
            self.bind,
            self.timeout,
        )?;
        Ok(self.link.insert(link))
    }
    fn end_round(&mut self, report: RoundReport, _limit: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        self.link = None;
        if let Ok(mut l) = self.last.lock() {
            l.results.extend(report.results.iter().cloned());
            l.finished_unix_s = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs_f64());
        }
        if let Err(e) = wire::send_json(self.conn, &AgentMsg::Report(report)) {
            self.lost = Some(format!("{e:#}"));
        }
        Ok(None)
    }
    fn peer_gone(&self, rank: u32) -> Option<String> {
        self.gone.get(&rank).cloned()
    }
    fn finish(&mut self, _doc: Option<&Document>) -> Result<Option<Document>> {
        Ok(None)
    }
}
