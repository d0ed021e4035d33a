//! The one driver of the point-to-point benchmarks (nccl-tests' `common.cu` for pairs).
//!
//! ```text
//! plan (options that shape the numbers) + launch (where the peers are, how to pair)
//!   -> coordinator (standalone handshake | MPI): the roster of ranks
//!   -> pattern: rounds of disjoint pairs (pairs, all-pairs, ring, random, file)
//!   -> per round: each pair connects, walks the sizes, records results or its failure
//!   -> the root gathers the round, checkpoints, prints
//!   -> one document (record), written atomically
//! ```
//!
//! A tool supplies only its plan, its loop for one size and its table rows ([`PairTool`]).
//! Launch modes differ only in the coordinator, patterns only in the schedule they
//! produce, transports only behind the endpoint traits.

pub mod coordinator;
mod pair;
pub mod pairlink;
pub mod pattern;
pub mod progress;
pub mod record;

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use serde_json::{json, Map, Value};

use results::{Pair, Peer, SweepInfo, TestResult};

use crate::bootstrap::{self, Launcher, PeerLink};
use crate::clock::LoopClock;
use crate::transport::{EndpointSpec, Op, Role, TransportKind};
use crate::{exit, interrupt};
use coordinator::{Coordinator, RoundReport, Shared, SideFailure};
use pattern::{PatternSpec, RailMode, RankPair, Schedule};

/// Everything that shapes the numbers of a point-to-point run. It travels from the agents'
/// coordinator to the agents; each agent's own tool name stands in for `tool`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    /// `bench-lat` or `bench-bw`.
    #[serde(skip)]
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
    #[serde(with = "secs")]
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

    /// Longest a round can legitimately take, for the ranks that wait for it: a failing
    /// pair can spend up to a timeout in each of its waits that come one after another
    /// (its control connection, and per size the endpoint exchange, the data connections
    /// or queue pairs, the loop), plus its measuring time. A hung rank is caught after
    /// this; a dead one usually ends the MPI job at once.
    pub fn round_limit(&self) -> Duration {
        let sizes = self.sizes.len() as u32;
        let measuring = self.duration_s.map_or(0.0, |d| d * f64::from(sizes));
        self.timeout * (3 + 3 * sizes) + Duration::from_secs_f64(measuring)
    }
}

/// A duration as seconds in JSON.
mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }
}

/// `-d`: which RDMA device each rank uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The first device with an ACTIVE port.
    #[default]
    Default,
    One(String),
    /// One per local rank (`-d mlx5_0,mlx5_1,...`), indexed by the rank's place on its host.
    PerLocalRank(Vec<String>),
    /// The local rank's ACTIVE device, in name order (`-d auto`).
    Auto,
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("an empty device name: give -d mlx5_0, -d mlx5_0,mlx5_1 or -d auto".into());
        }
        if s == "auto" {
            return Ok(DeviceChoice::Auto);
        }
        let mut list: Vec<String> = s.split(',').map(|d| d.trim().to_string()).collect();
        if list.iter().any(|d| d.is_empty()) {
            return Err(format!("-d {s}: an empty name in the device list"));
        }
        Ok(if list.len() == 1 {
            DeviceChoice::One(list.remove(0))
        } else {
            DeviceChoice::PerLocalRank(list)
        })
    }
}

/// Where the peers are and how to pair them: the options that do not shape the numbers.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Server to connect to (standalone client); `None`: be the server.
    pub host: Option<String>,
    /// Standalone handshake port.
    pub port: u16,
    /// Address for control and data connections (and their source).
    pub bind_addr: Option<IpAddr>,
    /// Where the document goes.
    pub json: Option<PathBuf>,
    pub launcher: Launcher,
    pub pattern: PatternSpec,
    pub include_local: bool,
    pub rail_mode: RailMode,
    pub devices: DeviceChoice,
    /// Be an agent: serve sweeps run by a coordinator (`--serve`).
    pub serve: bool,
    /// Be the agents' coordinator over the agents listed here (`--hosts`).
    pub hosts: Option<PathBuf>,
    /// The agents' shared secret (else `FABCHECK_SECRET`).
    pub secret_file: Option<PathBuf>,
    /// `--transport` as asked (the agents' coordinator checks it against the agents').
    pub transport: crate::transport::TransportChoice,
}

/// What a tool's measurement function gets for one size.
pub struct SizeRun<'a> {
    pub plan: &'a Plan,
    pub spec: EndpointSpec,
    pub link: &'a mut dyn PeerLink,
    /// What the pair keeps from size to size (hand it to the transport's connect).
    pub conn: &'a mut crate::transport::Connection,
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

/// Rounds with at most this many pairs print every row; larger ones a summary line.
pub const ROWS_PER_ROUND: usize = 16;

/// Runs a point-to-point tool to completion and returns the process exit code.
pub fn run(launch: &Launch, plan: Plan, tool: &mut dyn PairTool) -> i32 {
    if launch.serve {
        return crate::agents::serve::run(launch, plan, tool);
    }
    if launch.hosts.is_some() {
        return crate::agents::conduct::run(launch, plan, tool);
    }
    interrupt::install();
    match drive(launch, plan, tool) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}: error: {e:#}", crate::output::tool_name());
            exit::ERROR
        }
    }
}

fn drive(launch: &Launch, mut plan: Plan, tool: &mut dyn PairTool) -> Result<i32> {
    let clock = LoopClock::new();
    let mpi = bootstrap::resolve_launcher(launch.launcher) == Launcher::Mpi;
    let standalone = !mpi;
    if standalone || bootstrap::is_reporting_process() {
        crate::output::check_writable(launch.json.as_deref())?;
    }
    let started_at = results::provenance::now_rfc3339();
    let overhead_ns = clock.loop_overhead_ns();
    let mut coord: Box<dyn Coordinator> = if mpi {
        start_mpi(launch, &mut plan)?
    } else {
        Box::new(coordinator::Standalone::start(launch, &mut plan)?)
    };
    let ctx = RunCtx {
        clock: &clock,
        started_at,
        overhead_ns,
    };
    run_rank(coord.as_mut(), launch, &plan, tool, ctx)
}

/// What every process of a run shares: the loop clock and the run's start.
pub struct RunCtx<'a> {
    pub clock: &'a LoopClock,
    pub started_at: String,
    pub overhead_ns: f64,
}

/// The schedule of a run from its roster: every process computes the same rounds from
/// the same members and the root's shared inputs.
pub fn schedule_for(
    launch: &Launch,
    members: &[coordinator::Member],
    shared: &Shared,
) -> Result<Schedule> {
    let slots: Vec<_> = members.iter().map(|m| m.slot()).collect();
    pattern::schedule(&pattern::Request {
        pattern: &launch.pattern,
        slots: &slots,
        rail_mode: launch.rail_mode,
        include_local: launch.include_local,
        fallback_seed: shared.seed,
        file_text: shared.file_text.as_deref(),
    })
}

/// The document's `options` of a sweep: the plan's, and how pairs were scheduled.
pub fn sweep_options(plan: &Plan, launch: &Launch) -> Map<String, Value> {
    let mut options = plan.options();
    options.insert("pattern".into(), json!(launch.pattern.to_string()));
    options.insert("include_local".into(), json!(launch.include_local));
    options.insert("rails".into(), json!(launch.rail_mode.name()));
    options
}

/// One process's part of a run once its coordinator is up (standalone side, MPI rank,
/// or agent): agree on the schedule, take part in every round, and on the root gather,
/// print and write the document. Returns the exit code.
pub fn run_rank(
    coord: &mut dyn Coordinator,
    launch: &Launch,
    plan: &Plan,
    tool: &mut dyn PairTool,
    ctx: RunCtx,
) -> Result<i32> {
    let RunCtx {
        clock,
        started_at,
        overhead_ns,
    } = ctx;
    let standalone = coord.launcher() == "standalone";
    let mpi = !standalone;
    let root = coord.is_root();
    let me = coord.rank();

    // The schedule: the root decides what only it can (seed, the pair list), every rank
    // computes the same rounds from the same roster.
    let shared = coord.share(if root {
        root_inputs(launch)
    } else {
        Shared::default()
    })?;
    if let Some(e) = &shared.error {
        if root {
            eprintln!("{}: error: {e}", plan.tool);
        }
        return Ok(exit::ERROR);
    }
    let schedule = match schedule_for(launch, coord.members(), &shared) {
        Ok(s) => s,
        Err(e) => {
            if root {
                eprintln!("{}: error: {e:#}", plan.tool);
            }
            return Ok(exit::ERROR);
        }
    };
    let sweeping = mpi;
    let options = if sweeping {
        sweep_options(plan, launch)
    } else {
        plan.options()
    };
    let mut rec = record::Recorder::new(
        launch.json.as_deref(),
        plan,
        coord.launcher(),
        coord.members().len() as u32,
        coord.hosts(),
        started_at,
        overhead_ns,
        options,
    );
    rec.sweep = sweeping.then(|| sweep_info(&schedule));
    if root {
        tool.print_header(plan);
    }
    let mut progress = progress::Progress::new(root && schedule.rounds.len() > 1, &schedule);
    let mut stopped = None;
    // Whether this rank's own pair failed (the root learns of every pair from the reports).
    let mut my_pair_failed = false;
    let limit = plan.round_limit();
    // What disturbs the run (load, steal, preemptions of this, the measuring, thread) is
    // read before the first round and after the last; it travels with the last report.
    let mut probe = Some(crate::quality::Probe::start());
    for (ri, round) in schedule.rounds.iter().enumerate() {
        let ri = ri as u32;
        let round_start = std::time::Instant::now();
        if !coord.begin_round(ri, limit) {
            stopped = Some(interrupt::REASON.to_string());
            break;
        }
        let mut report = RoundReport::default();
        if let Some(rp) = schedule.pair_of(ri as usize, me) {
            let pair = pair_record(&*coord, rp, (schedule.rounds.len() > 1).then_some(ri));
            let role = if rp.initiator == me {
                Role::Initiator
            } else {
                Role::Responder
            };
            let live = root && role == Role::Initiator;
            if live && schedule.rounds.len() > 1 {
                println!("# pair round {ri}: {}", pair.label());
            }
            let out = {
                let mut checkpoint = |done: &[TestResult]| {
                    if live {
                        rec.checkpoint(done, false);
                    }
                };
                let peer = if role == Role::Initiator {
                    rp.responder
                } else {
                    rp.initiator
                };
                let link = match coord.peer_gone(peer) {
                    Some(why) => Err(anyhow::anyhow!("the peer is gone: {why}")),
                    None => coord.pair_link(ri, rp, shared.seed),
                };
                match link {
                    Ok(link) => {
                        let local_ip = launch
                            .bind_addr
                            .or(link.local_ip())
                            .unwrap_or(Ipv4Addr::LOCALHOST.into());
                        let ctx = pair::PairCtx {
                            plan,
                            role,
                            clock,
                            pair: &pair,
                            local_ip,
                            print_live: live,
                        };
                        pair::run(&ctx, link, tool, &mut checkpoint)
                    }
                    Err(e) => pair::PairOutcome {
                        failure: Some((None, format!("{e:#}"))),
                        ..Default::default()
                    },
                }
            };
            if let Some((size, error)) = out.failure {
                my_pair_failed = true;
                eprintln!(
                    "{}pair {} failed{}: {error}",
                    if mpi {
                        format!("rank {me}: ")
                    } else {
                        String::new()
                    },
                    pair.label(),
                    size.map_or(String::new(), |s| format!(" at {s} bytes"))
                );
                let dev = if role == Role::Initiator {
                    &pair.initiator
                } else {
                    &pair.responder
                };
                report.failures.push(SideFailure {
                    round: ri,
                    pair: pair.clone(),
                    role,
                    size_bytes: size,
                    port_state: dev
                        .device
                        .as_deref()
                        .and_then(|d| crate::inventory::port_state(d, dev.port.unwrap_or(1))),
                    error,
                });
            }
            report.results = out.results;
            report.interrupted = out.interrupted;
        }
        if ri as usize + 1 == schedule.rounds.len() {
            let host = coord.members()[me as usize].host.clone();
            report.quality = probe
                .take()
                .map(|p| p.finish_as(&host, coord.ranks_in_results().then_some(me)));
        }
        if let Some(raw) = coord.end_round(report, limit)? {
            let seconds = round_start.elapsed().as_secs_f64();
            if round.len() <= ROWS_PER_ROUND {
                let all = record::decode_round(&raw);
                print_others(tool, &all, me);
                rec.add_round(all, seconds);
            } else {
                rec.add_round_raw(raw, seconds);
            }
            rec.checkpoint(&[], false);
            progress.round_done(ri, round.len(), rec.failed_pairs());
        }
    }
    rec.drain();
    if stopped.is_none() && rec.interrupted {
        stopped = Some(interrupt::REASON.to_string());
    }
    if rec.failed_pairs() > 0 && stopped.is_none() && standalone {
        stopped = rec_failure_reason(&rec);
    }
    if root {
        let doc = rec.document(&[], stopped.clone());
        let code = record::exit_code(&doc, standalone);
        if sweeping
            && doc
                .sweep
                .as_ref()
                .is_some_and(|s| s.rounds > 1 || rec.failed_pairs() > 0)
        {
            progress.summary(&doc);
        }
        if doc.failed_pairs.is_empty() || !standalone {
            coord.finish(Some(&doc))?;
        }
        crate::output::write_document(launch.json.as_deref(), &doc)?;
        Ok(code)
    } else if standalone {
        // The server prints the client's document (and keeps it with --json).
        if !my_pair_failed {
            if let Some(doc) = coord.finish(None)? {
                tool.print_header(plan);
                for r in &doc.results {
                    tool.print_row(r);
                }
                crate::output::write_document(launch.json.as_deref(), &doc)?;
                return Ok(record::exit_code(&doc, true));
            }
        }
        Ok(if my_pair_failed {
            exit::ERROR
        } else {
            exit::OK
        })
    } else {
        Ok(exit::OK)
    }
}

fn rec_failure_reason(rec: &record::Recorder) -> Option<String> {
    rec.first_failure().map(|f| {
        let size = f
            .size_bytes
            .map_or(String::new(), |s| format!(" at {s} bytes"));
        let why = f
            .initiator_error
            .clone()
            .or_else(|| f.responder_error.clone())
            .unwrap_or_default();
        format!("failed{size}: {why}")
    })
}

#[cfg(feature = "mpi")]
fn start_mpi(launch: &Launch, plan: &mut Plan) -> Result<Box<dyn Coordinator>> {
    Ok(Box::new(coordinator::Mpi::start(launch, plan)?))
}

#[cfg(not(feature = "mpi"))]
fn start_mpi(_: &Launch, _: &mut Plan) -> Result<Box<dyn Coordinator>> {
    anyhow::bail!("this binary was built without MPI support (feature `mpi`): rebuild with it, or run standalone (--launcher standalone)")
}

/// What only the root decides: the seed (also the job nonce of pair tickets) and the
/// pair list's text.
pub fn root_inputs(launch: &Launch) -> Shared {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ (u64::from(std::process::id()) << 20);
    let mut shared = Shared {
        seed,
        ..Default::default()
    };
    if let PatternSpec::File(path) = &launch.pattern {
        match std::fs::read_to_string(path) {
            Ok(t) => shared.file_text = Some(t),
            Err(e) => {
                shared.error = Some(format!(
                    "cannot read the pair list {}: {e} (write one `hostA hostB` per line; \
                     `aggregate report` writes suspects.pairs)",
                    path.display()
                ))
            }
        }
    }
    shared
}

pub fn sweep_info(s: &Schedule) -> SweepInfo {
    SweepInfo {
        pattern: s.pattern.name().into(),
        seed: s.seed,
        file: match &s.pattern {
            PatternSpec::File(p) => Some(p.display().to_string()),
            _ => None,
        },
        nodes: s.nodes.clone(),
        rails: s.rails,
        rail_mode: s.rail_mode.name().into(),
        include_local: s.include_local,
        rounds: s.rounds.len() as u32,
        rounds_done: 0,
        planned_pairs: s.planned_pairs(),
        round_seconds: Vec::new(),
    }
}

/// Both ends of a scheduled pair as results name them.
fn pair_record(coord: &dyn Coordinator, rp: RankPair, round: Option<u32>) -> Pair {
    pair_of_members(coord.members(), coord.ranks_in_results(), rp, round)
}

/// Both ends of a scheduled pair from the roster; ranks only where the launcher has them.
pub fn pair_of_members(
    members: &[coordinator::Member],
    ranks: bool,
    rp: RankPair,
    round: Option<u32>,
) -> Pair {
    let peer = |r: u32| {
        let m = &members[r as usize];
        Peer {
            rank: ranks.then_some(r),
            host: m.host.clone(),
            device: m.device.clone(),
            port: m.port,
        }
    };
    Pair {
        initiator: peer(rp.initiator),
        responder: peer(rp.responder),
        round,
    }
}

/// Rows of the pairs the root did not print live (it prints its own pair's as they come
/// when it initiates), after the round; rounds of many pairs only get the progress line.
pub fn print_others(tool: &mut dyn PairTool, all: &[RoundReport], me: u32) {
    let printed_live =
        |r: &TestResult| pair_of(r).is_some_and(|p| p.initiator.rank.is_none_or(|i| i == me));
    let mut current = None;
    for r in all.iter().flat_map(|rep| rep.results.iter()) {
        if printed_live(r) {
            continue;
        }
        let label = pair_of(r).map(|p| match p.round {
            Some(k) => format!("round {k}: {}", p.label()),
            None => p.label(),
        });
        if current != label {
            if let Some(l) = &label {
                println!("# pair {l}");
            }
            current = label;
        }
        tool.print_row(r);
    }
}

fn pair_of(r: &TestResult) -> Option<&Pair> {
    match r {
        TestResult::Latency(l) => Some(&l.pair),
        TestResult::Bandwidth(b) => Some(&b.pair),
        TestResult::Collective(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(transport: TransportKind) -> Plan {
        Plan {
            tool: "bench-lat",
            test: "send_lat".into(),
            op: Op::Send,
            transport,
            sizes: vec![2, 4],
            iterations: 1000,
            duration_s: Some(0.5),
            warmup: 100,
            streams: 1,
            tx_depth: 1,
            bidirectional: false,
            timeout: Duration::from_secs(10),
            verbs: Default::default(),
            extra: Default::default(),
            local: Default::default(),
        }
    }

    #[test]
    fn the_plan_names_what_both_sides_must_share_and_what_the_server_adopts() {
        let mut server = plan(TransportKind::Verbs);
        let mut client = plan(TransportKind::Verbs);
        client.iterations = 7;
        client.duration_s = None;
        assert_eq!(
            server.must_match(),
            client.must_match(),
            "iterations are the client's call"
        );
        server.adopt(&client.adoptable());
        assert_eq!((server.iterations, server.duration_s), (7, None));
        let o = server.options();
        for k in [
            "test",
            "transport",
            "sizes",
            "iterations",
            "timeout_s",
            "ib_dev",
            "gid_index",
            "rdma_cm",
        ] {
            assert!(o.contains_key(k), "options.{k}");
        }
        assert!(!plan(TransportKind::Tcp).options().contains_key("ib_dev"));
        // Two sizes of 0.5 s: three timeouts for the connection, three per size.
        assert_eq!(
            plan(TransportKind::Tcp).round_limit(),
            Duration::from_secs(91)
        );
    }

    #[test]
    fn device_choices_parse() {
        assert_eq!("auto".parse::<DeviceChoice>(), Ok(DeviceChoice::Auto));
        assert_eq!(
            "mlx5_0".parse::<DeviceChoice>(),
            Ok(DeviceChoice::One("mlx5_0".into()))
        );
        assert_eq!(
            "mlx5_0, mlx5_1".parse::<DeviceChoice>(),
            Ok(DeviceChoice::PerLocalRank(vec![
                "mlx5_0".into(),
                "mlx5_1".into()
            ]))
        );
        assert!("".parse::<DeviceChoice>().is_err());
        assert!("a,,b".parse::<DeviceChoice>().is_err());
    }

    #[test]
    fn the_plan_travels_to_agents_and_back() {
        let p = plan(TransportKind::Verbs);
        let back: Plan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back.timeout, p.timeout);
        assert_eq!(back.sizes, p.sizes);
        assert_eq!(back.tool, "", "each agent puts its own tool name");
    }
}
