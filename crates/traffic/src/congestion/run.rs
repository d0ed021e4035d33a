//! The run on every rank: the roster, the split, the connections of the canaries' ring and
//! of the congestor groups, the warm-up, the two phases, and every rank's report to the
//! root.
//!
//! Every flow has a TCP connection (its header names the flow's kind). Over TCP that
//! connection carries the data (`crate::flows`); over verbs it is the flow's control link
//! and the data moves through the endpoints (`crate::endpoint_flows`): the canaries
//! ping-pong sends and write 128 KiB one message at a time, the congestors send
//! (all-to-all, incast), RDMA WRITE into their root (put incast) or RDMA READ from it (get
//! broadcast).

use std::io::{ErrorKind, Write};
use std::net::{IpAddr, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bootstrap::gang::Gang;
use results::HostInfo;

use super::split::{self, Split};
use super::{CanaryCollective, Options, RankReport};
use crate::endpoint_flows::{self as ef, Carrier, FlowEnd, Measured, Shape};
use crate::flows::{
    accept_all, connect, ping_pong, ports_of, read_until, serve, Sinks, BW_BYTES, CONGEST_BYTES,
    KIND_BW, KIND_CONGEST, KIND_LAT, KIND_SOURCE, LAT_BYTES,
};
use transport::Op;

/// One directed connection of the plan (the data's, or an endpoint flow's control link).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Link {
    from: u32,
    to: u32,
    kind: u32,
}

/// How a rank's run ended.
pub enum Finish {
    /// At the root: every rank's host facts and report, in rank order, and the root's
    /// carrier as settled (its device, for the document).
    Root {
        /// Every rank's host facts.
        hosts: Vec<HostInfo>,
        /// Every rank's report, encoded.
        reports: Vec<Vec<u8>>,
        /// How the root's flows were carried.
        carrier: Carrier,
    },
    /// Elsewhere: this rank's report went to the root.
    Rank,
    /// The nodes cannot be split (too few); said the same on every rank, nothing ran.
    TooFew(String),
}

/// One rank's run. `collective` is the canaries' allreduce (MPI's), `None` over the
/// agents: the phases then have two canary tests, not three.
pub fn run(
    gang: &mut dyn Gang,
    opts: &Options,
    bind: Option<IpAddr>,
    carrier: &Carrier,
    mut collective: Option<&mut dyn CanaryCollective>,
) -> Result<Finish> {
    let rank = gang.rank();
    let phase = Duration::from_secs_f64(opts.phase_seconds);
    let timeout = Duration::from_secs_f64(opts.timeout_s);
    let (listener, roster) = crate::flows::roster(gang, bind)?;
    let host_facts: Vec<HostInfo> = roster.iter().map(|p| p.host.clone()).collect();
    let carrier = carrier.settled(rank, &host_facts)?;
    let hosts: Vec<String> = roster.iter().map(|h| h.host.hostname.clone()).collect();
    let nodes = split::nodes(&hosts, opts.include_local);
    let sp = match split::of(&nodes, opts) {
        Ok(s) => s,
        Err(e) => return Ok(Finish::TooFew(e)),
    };
    let ring: Vec<u32> = sp.ring.iter().flat_map(|n| n.ranks.clone()).collect();
    let canary = ring.contains(&rank);
    let links = plan_links(&sp, &ring);
    // The canary tests of each phase, one slot of the phase each.
    let slots = if collective.is_some() { 3 } else { 2 };
    let (outgoing, incoming) = connect_all(rank, &links, &roster, listener, bind, timeout)?;
    if let Some(c) = collective.as_mut() {
        c.join(canary);
    }
    let collective = collective.as_deref();
    gang.barrier("connections made")?;

    let idle = timeout + phase * (2 * slots + 1);
    let received: Sinks = Arc::default();
    let (out, servers) = start_flows(&carrier, &sp, incoming, outgoing, idle, &received)?;
    let p = Phases {
        out,
        collective,
        canary,
        phase,
        slots,
        timeout,
    };
    p.warm_up(gang)?;
    let report = p.measure(
        gang,
        &ports_of(&roster[rank as usize].host),
        servers,
        &received,
    )?;
    match gang.gather(&serde_json::to_vec(&report)?, "the measurements")? {
        Some(reports) => Ok(Finish::Root {
            hosts: host_facts,
            reports,
            carrier,
        }),
        None => Ok(Finish::Rank),
    }
}

/// This rank's connections of the plan, made by it.
type Outgoing = Vec<(Link, TcpStream)>;
/// Its connections made by the others, each with the kind its header announced.
type Incoming = Vec<(u32, TcpStream)>;

/// The plan's connections of this rank: the outgoing ones made while the incoming ones
/// are accepted.
fn connect_all(
    rank: u32,
    links: &[Link],
    roster: &[crate::flows::Peer],
    listener: std::net::TcpListener,
    bind: Option<IpAddr>,
    timeout: Duration,
) -> Result<(Outgoing, Incoming)> {
    let expected = links.iter().filter(|l| l.to == rank).count();
    let acceptor = {
        let deadline = Instant::now() + timeout;
        std::thread::spawn(move || accept_all(&listener, expected, deadline))
    };
    let mut outgoing: Outgoing = Vec::new();
    for l in links.iter().filter(|l| l.from == rank) {
        let to = roster[l.to as usize].addr;
        let s = connect(rank, l.kind, to, bind, timeout)
            .with_context(|| format!("connecting to rank {} at {to}", l.to))?;
        outgoing.push((*l, s));
    }
    let incoming = acceptor
        .join()
        .map_err(|_| anyhow::anyhow!("the accepting thread panicked"))??;
    Ok((outgoing, incoming))
}

/// The far ends of the incoming connections, and this rank's own flows: over TCP the
/// connections carry the data; over endpoints each is a flow's control link.
fn start_flows(
    carrier: &Carrier,
    sp: &Split,
    incoming: Incoming,
    outgoing: Outgoing,
    idle: Duration,
    received: &Sinks,
) -> Result<(Out, Servers)> {
    let Some((settings, _)) = carrier.endpoints() else {
        let mut servers = Vec::new();
        for (kind, s) in incoming {
            s.set_read_timeout(Some(idle))?;
            let received = Arc::clone(received);
            servers.push(std::thread::spawn(move || serve(kind, s, received)));
        }
        return Ok((Out::Tcp(outgoing), Servers::Tcp(servers)));
    };
    let servers = incoming
        .into_iter()
        .map(|(_, s)| ef::serve(s, settings, idle))
        .collect();
    let flows = outgoing
        .into_iter()
        .map(|(l, s)| {
            let what = format!("{} flow to rank {}", kind_name(l.kind, sp), l.to);
            (l, FlowEnd::open(s, shape_of(l.kind, sp), settings, what))
        })
        .collect();
    Ok((Out::Flows(flows), Servers::Flows(servers)))
}

/// What the phases of one rank share: its flows, the canaries' collective, whether it is
/// a canary, the phase's length in slots, the wait bound.
struct Phases<'a> {
    out: Out,
    collective: Option<&'a dyn CanaryCollective>,
    canary: bool,
    phase: Duration,
    slots: u32,
    timeout: Duration,
}

impl Phases<'_> {
    /// Warm-up, untimed: the canaries' first exchanges pay for ARP, TCP's slow start, the
    /// queue pairs' first packets and MPI's lazily made connections (the allreduce's
    /// first calls took milliseconds in the simulated fabric), which the isolated phase
    /// must not measure and the loaded one would not.
    fn warm_up(&self, gang: &mut dyn Gang) -> Result<()> {
        let warm = super::warmup(self.phase);
        self.out.arm(self.canary)?;
        gang.barrier("warm-up")?;
        if self.canary {
            canary_phase(&self.out, self.collective, Instant::now(), warm)?;
        }
        gang.any_within(
            false,
            "waiting for the warm-up to end",
            warm * 4 + self.timeout,
        )?;
        Ok(())
    }

    /// The isolated phase, then the loaded one; then the flows close (over TCP, dropped)
    /// and their far ends report what they received since the loaded phase began.
    fn measure(
        self,
        gang: &mut dyn Gang,
        devices: &[(String, u32)],
        servers: Servers,
        received: &Sinks,
    ) -> Result<RankReport> {
        let mut report = RankReport::default();
        self.phase(gang, devices, false, &mut report)?;
        let t_loaded = self.phase(gang, devices, true, &mut report)?;
        // The congestors close their flows: the far ends end and report.
        self.out.close();
        servers.join()?;
        let got = received
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (g, bytes, last) in got.iter() {
            let secs = last.map_or(0.0, |l| l.saturating_duration_since(t_loaded).as_secs_f64());
            report.congest.push((*g, *bytes, secs));
        }
        Ok(report)
    }

    /// One phase, isolated or loaded: the canaries measure, the congestors congest in the
    /// loaded one, every rank's port counters read before and after. Returns its start.
    fn phase(
        &self,
        gang: &mut dyn Gang,
        devices: &[(String, u32)],
        loaded: bool,
        report: &mut RankReport,
    ) -> Result<Instant> {
        let (canary, phase, slots) = (self.canary, self.phase, self.slots);
        let read = || -> Vec<_> {
            devices
                .iter()
                .map(|(d, n)| probe::counters::read(d, *n))
                .collect()
        };
        let before = read();
        // Over verbs the flows of the phase connect before it starts: the canaries' in
        // both phases, the congestors' in the loaded one.
        self.out.arm(canary || loaded)?;
        gang.barrier(if loaded {
            "loaded phase"
        } else {
            "isolated phase"
        })?;
        let t0 = Instant::now();
        if canary {
            report
                .hist
                .push(canary_phase(&self.out, self.collective, t0, phase)?);
        } else if loaded {
            let until = t0 + phase * slots + Duration::from_millis(200);
            report.congest.extend(congest(&self.out, t0, until)?);
        }
        let after = read();
        report.counters[usize::from(loaded)] = before
            .iter()
            .zip(&after)
            .map(|(b, a)| probe::counters::delta(b, a))
            .collect();
        gang.any_within(
            false,
            "waiting for the phase to end on all ranks",
            phase * (slots + 1) + self.timeout,
        )?;
        Ok(t0)
    }
}

/// This rank's outgoing flows.
enum Out {
    /// The connections themselves carry the data.
    Tcp(Vec<(Link, TcpStream)>),
    /// Each connection is the control link of an endpoint flow.
    Flows(Vec<(Link, FlowEnd)>),
}

impl Out {
    /// Over verbs, connects (or re-arms) every flow for the next phase when `now`.
    fn arm(&self, now: bool) -> Result<()> {
        match self {
            Out::Flows(f) if now => ef::arm_all(f.iter().map(|(_, e)| e)),
            _ => Ok(()),
        }
    }

    /// Ends every flow: TCP connections close (their far ends see it), endpoint flows tell
    /// their responders.
    fn close(self) {
        if let Out::Flows(f) = self {
            f.into_iter().for_each(|(_, e)| e.close());
        }
    }
}

/// The far ends of this rank's incoming connections.
enum Servers {
    Tcp(Vec<JoinHandle<()>>),
    Flows(Vec<JoinHandle<Result<()>>>),
}

impl Servers {
    fn join(self) -> Result<()> {
        match self {
            Servers::Tcp(t) => t.into_iter().for_each(|t| {
                let _ = t.join();
            }),
            Servers::Flows(t) => {
                for t in t {
                    ef::join(t, "a flow's far end")?;
                }
            }
        }
        Ok(())
    }
}

/// The operation a congestor pattern's messages are over verbs (GPCNeT: two-sided
/// all-to-all and incast, one-sided put incast and get broadcast).
pub(super) fn op_of(pattern: &str) -> Op {
    match pattern {
        "put_incast" => Op::Write,
        "get_bcast" => Op::Read,
        _ => Op::Send,
    }
}

/// The congestor group of a flow kind.
fn group_of(kind: u32) -> Option<usize> {
    match kind {
        k if k >= KIND_SOURCE => Some((k - KIND_SOURCE) as usize),
        k if k >= KIND_CONGEST => Some((k - KIND_CONGEST) as usize),
        _ => None,
    }
}

/// What an endpoint flow of `kind` measures.
fn shape_of(kind: u32, sp: &Split) -> Shape {
    match group_of(kind) {
        None if kind == KIND_LAT => Shape::Ping {
            size: LAT_BYTES as u64,
        },
        None => Shape::Sample {
            op: Op::Write,
            size: BW_BYTES as u64,
        },
        Some(g) => Shape::Stream {
            op: op_of(&sp.groups[g].0),
            size: CONGEST_BYTES as u64,
        },
    }
}

/// A flow's kind in words, for errors.
fn kind_name(kind: u32, sp: &Split) -> String {
    match group_of(kind) {
        None if kind == KIND_LAT => "canary latency".into(),
        None => "canary bandwidth".into(),
        Some(g) => format!("congestor group {g} ({})", sp.groups[g].0),
    }
}

/// Every connection of the run: each canary to the next of the ring twice (latency and
/// bandwidth), every ordered pair of an all-to-all group, every other rank of an incast or
/// put-incast group to its first rank, and every other rank of a get-broadcast group to its
/// first rank, which it reads from.
fn plan_links(sp: &Split, ring: &[u32]) -> Vec<Link> {
    let mut links = Vec::new();
    for (i, &r) in ring.iter().enumerate() {
        let next = ring[(i + 1) % ring.len()];
        for kind in [KIND_LAT, KIND_BW] {
            links.push(Link {
                from: r,
                to: next,
                kind,
            });
        }
    }
    for (g, (pattern, nodes)) in sp.groups.iter().enumerate() {
        let ranks: Vec<u32> = nodes.iter().flat_map(|n| n.ranks.clone()).collect();
        let root = ranks[0];
        let to_root = |kind: u32| {
            ranks[1..].iter().map(move |&s| Link {
                from: s,
                to: root,
                kind,
            })
        };
        match pattern.as_str() {
            "incast" | "put_incast" => links.extend(to_root(KIND_CONGEST + g as u32)),
            "get_bcast" => links.extend(to_root(KIND_SOURCE + g as u32)),
            _ => {
                for &a in &ranks {
                    for &b in ranks.iter().filter(|&&b| b != a) {
                        links.push(Link {
                            from: a,
                            to: b,
                            kind: KIND_CONGEST + g as u32,
                        });
                    }
                }
            }
        }
    }
    links
}

/// One canary phase: the tests one after another, each until its slot of the phase ends
/// (`t0 + k * phase`): the ring latency, the ring bandwidth, and the allreduce when there
/// is a collective.
fn canary_phase(
    out: &Out,
    collective: Option<&dyn CanaryCollective>,
    t0: Instant,
    phase: Duration,
) -> Result<Vec<String>> {
    let (lat, bw) = match out {
        Out::Tcp(links) => {
            let stream = |kind| {
                links
                    .iter()
                    .find(|(l, _)| l.kind == kind)
                    .map(|(_, s)| s)
                    .expect("every canary has its ring connections")
            };
            (
                ping_pong(stream(KIND_LAT), LAT_BYTES, t0 + phase)?,
                ping_pong(stream(KIND_BW), BW_BYTES, t0 + phase * 2)?,
            )
        }
        Out::Flows(flows) => {
            let samples = |kind, deadline| {
                let (_, f) = flows
                    .iter()
                    .find(|(l, _)| l.kind == kind)
                    .expect("every canary has its ring flows");
                f.samples(deadline)
            };
            (
                samples(KIND_LAT, t0 + phase)?,
                samples(KIND_BW, t0 + phase * 2)?,
            )
        }
    };
    let mut hist = vec![lat.encode(), bw.encode()];
    if let Some(c) = collective {
        hist.push(c.allreduce(t0 + phase * 3).encode());
    }
    Ok(hist)
}

/// A congestor's flows until `until`. TCP: one thread per connection writing 4 KiB
/// messages, or reading what its root streams (a get), then closing; returns what the
/// readers counted (the roots' sinks count the rest). Endpoint flows: every flow streams
/// at once; returns what each one's completions counted.
fn congest(out: &Out, t0: Instant, until: Instant) -> Result<Vec<(u32, u64, f64)>> {
    let links = match out {
        Out::Flows(flows) => {
            let measured = ef::run_all(flows.iter().map(|(_, f)| f), until)?;
            let mut got = Vec::new();
            for ((l, _), m) in flows.iter().zip(measured) {
                let g = group_of(l.kind).expect("a congestor flow") as u32;
                if let Measured::Moved { bytes, seconds, .. } = m {
                    got.push((g, bytes, seconds));
                }
            }
            return Ok(got);
        }
        Out::Tcp(links) => links,
    };
    let mut threads = Vec::new();
    for (l, s) in links {
        let mut s = s.try_clone()?;
        let kind = l.kind;
        threads.push(std::thread::spawn(move || {
            if kind >= KIND_SOURCE {
                let (bytes, last) = read_until(s, until);
                let secs = last.map_or(0.0, |l| l.saturating_duration_since(t0).as_secs_f64());
                return Some((kind - KIND_SOURCE, bytes, secs));
            }
            // A shaped link drains slowly: a blocked write must not carry the congestion
            // past `until`, and neither may the send buffer after it.
            let _ = s.set_write_timeout(Some(Duration::from_millis(50)));
            let msg = vec![0xc3u8; CONGEST_BYTES];
            while Instant::now() < until {
                match s.write(&msg) {
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
            // Linger 0: the close resets the connection and drops what is still queued, so
            // the congestion ends at `until` (the sink sees the reset as its end).
            let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
            drop(s);
            None
        }));
    }
    Ok(threads
        .into_iter()
        .filter_map(|t| t.join().ok().flatten())
        .collect())
}
