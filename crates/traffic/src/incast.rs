//! Incast (`bench-bw --pattern incast[:N]`, `bench-congestion --mode incast[:N]`): rounds
//! of N senders to one receiver, every rank the receiver in
//! turn (the next N ranks send). The receiver counts each sender's bytes; the round's
//! figures are the per-sender bandwidth, the aggregate against the receiver's line rate,
//! and Jain's fairness index across the senders.
//!
//! Beside each round runs a victim flow: the two ranks after the senders (in rank order)
//! measure 8 B latency and 128 KiB bandwidth between themselves, first alone, then while
//! the incast runs. They touch neither the hot receiver nor a sender, so whatever the
//! incast does to them it does through what they share: a switch queue, an uplink, a port
//! that PFC pauses upstream. Each window's port counter deltas (pauses, CNPs, ECN marks)
//! are kept for every rank of the round.
//!
//! A round is two windows of `--phase-seconds` between barriers:
//!
//! ```text
//! alone:   victim sender -> victim receiver: latency for half the window, then bandwidth
//! loaded:  N senders -> receiver for the window; the victim as above, at the same time
//! ```

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bootstrap::gang::Gang;
use results::congestion::{
    bandwidth_impact, jain, latency_impact, IncastRound, IncastRun, RoundCounters, VictimFigures,
    VictimFlow,
};
use results::{HostInfo, LatencyHistogram, PortCounters};
use serde::{Deserialize, Serialize};

use crate::endpoint_flows::{self as ef, Carrier, FlowEnd, Measured, Shape};
use crate::flows::{self, accept_all, BW_BYTES, KIND_BW, KIND_LAT, LAT_BYTES};

const CHUNK: usize = 64 * 1024;

/// One receiver's view of its round: (sender rank, gbit/s).
type Round = Vec<(u32, f64)>;

struct Peers<'a> {
    addrs: &'a [SocketAddr],
    hosts: &'a [HostInfo],
    bind: Option<IpAddr>,
}

/// What every connection of a round is made with: the peers, this rank's listener, the
/// run's bounds and how the flows are carried.
struct Net<'a> {
    peers: &'a Peers<'a>,
    listener: &'a TcpListener,
    timeout: Duration,
    phase: Duration,
    carrier: &'a Carrier,
}

/// Every rank: the roster, then the rounds. Rank 0 gets the run and every rank's host
/// facts; the others `None`. `n` 0: all other ranks send.
pub fn run_job(
    gang: &mut dyn Gang,
    bind: Option<IpAddr>,
    n: u32,
    phase: Duration,
    timeout: Duration,
    carrier: &Carrier,
) -> Result<Option<(IncastRun, Vec<HostInfo>)>> {
    if gang.size() < 2 {
        anyhow::bail!(
            "an incast needs at least 2 ranks (a receiver and a sender), and this run has {}: \
             start it under mpirun -np N or srun -n N",
            gang.size()
        );
    }
    let (listener, roster) = flows::roster(gang, bind)?;
    let addrs: Vec<SocketAddr> = roster.iter().map(|p| p.addr).collect();
    let hosts: Vec<HostInfo> = roster.into_iter().map(|p| p.host).collect();
    let peers = Peers {
        addrs: &addrs,
        hosts: &hosts,
        bind,
    };
    let carrier = carrier.settled(gang.rank(), &hosts)?;
    let net = Net {
        peers: &peers,
        listener: &listener,
        timeout,
        phase,
        carrier: &carrier,
    };
    Ok(run(gang, &net, n)?.map(|r| (r, hosts)))
}

/// Senders per round as asked (`incast:N`, 0 for all the others), at most the other ranks.
fn senders_per_round(n: u32, size: u32) -> u32 {
    if n == 0 {
        size - 1
    } else {
        n.min(size - 1)
    }
}

/// The ranks of round `r` of `size` with `n` senders.
struct Roles {
    receiver: u32,
    senders: Vec<u32>,
    /// (sender, receiver) of the victim flow, when two ranks are left outside the round.
    victim: Option<(u32, u32)>,
}

impl Roles {
    fn of(r: u32, n: u32, size: u32) -> Roles {
        Roles {
            receiver: r,
            senders: (1..=n).map(|k| (r + k) % size).collect(),
            victim: (size >= n + 3).then(|| ((r + n + 1) % size, (r + n + 2) % size)),
        }
    }

    fn role(&self, rank: u32) -> Option<&'static str> {
        if rank == self.receiver {
            Some("receiver")
        } else if self.senders.contains(&rank) {
            Some("sender")
        } else {
            match self.victim {
                Some((s, _)) if s == rank => Some("victim sender"),
                Some((_, d)) if d == rank => Some("victim receiver"),
                _ => None,
            }
        }
    }
}

/// What one rank measured over all rounds, gathered at rank 0.
#[derive(Serialize, Deserialize, Default)]
struct RankIncast {
    /// As the receiver of its round.
    round: Option<Round>,
    /// As the victim sender: (round, [latency alone, bandwidth alone, latency loaded,
    /// bandwidth loaded]) histograms.
    victim: Option<(u32, [String; 4])>,
    /// (round, role, deltas over the loaded window) where this rank took part.
    counters: Vec<(u32, String, Vec<PortCounters>)>,
    /// As a sender over endpoints: (round, gbit/s) from its own completions.
    #[serde(default)]
    sent: Vec<(u32, f64)>,
}

/// This rank's end of a round's victim flow.
enum VictimEnd {
    None,
    /// The latency and the bandwidth connection.
    Sender(TcpStream, TcpStream),
    /// The echo servers of both connections; they end when the sender closes.
    Receiver(Vec<JoinHandle<()>>),
    /// Over endpoints: the latency and the bandwidth flow.
    Flows(FlowEnd, FlowEnd),
    /// Over endpoints: the responders of both flows.
    Served(Vec<JoinHandle<Result<()>>>),
}

impl VictimEnd {
    /// Over endpoints, connects the sender's flows for the next window.
    fn arm(&self) -> Result<()> {
        match self {
            VictimEnd::Flows(lat, bw) => ef::arm_all([lat, bw]),
            _ => Ok(()),
        }
    }

    /// The sender's window: 8 B round trips for the first half, 128 KiB transfers for the
    /// second.
    fn measure(&self, t0: Instant, phase: Duration) -> Result<Option<[LatencyHistogram; 2]>> {
        match self {
            VictimEnd::Sender(lat, bw) => {
                let l =
                    flows::ping_pong(lat, LAT_BYTES, t0 + phase / 2).context("victim latency")?;
                let b = flows::ping_pong(bw, BW_BYTES, t0 + phase).context("victim bandwidth")?;
                Ok(Some([l, b]))
            }
            VictimEnd::Flows(lat, bw) => Ok(Some([
                lat.samples(t0 + phase / 2)?,
                bw.samples(t0 + phase)?,
            ])),
            _ => Ok(None),
        }
    }

    /// Ends the round's flow: the sender closes, the receiver waits for its servers.
    fn end(self) -> Result<()> {
        match self {
            VictimEnd::Flows(lat, bw) => {
                lat.close();
                bw.close();
            }
            VictimEnd::Receiver(servers) => {
                for s in servers {
                    let _ = s.join();
                }
            }
            VictimEnd::Served(servers) => {
                for s in servers {
                    ef::join(s, "victim flow (responder)")?;
                }
            }
            VictimEnd::Sender(..) | VictimEnd::None => {}
        }
        Ok(())
    }
}

/// This rank's part of a round's incast over endpoints, made before its window.
enum IncastEnd {
    None,
    Sender(FlowEnd),
    /// The responders, in the order the senders connected, with their ranks.
    Receiver(Vec<(u32, JoinHandle<Result<()>>)>),
}

fn run(gang: &mut dyn Gang, net: &Net<'_>, n: u32) -> Result<Option<IncastRun>> {
    let (rank, size) = (gang.rank(), gang.size());
    let (peers, listener, timeout, phase) = (net.peers, net.listener, net.timeout, net.phase);
    let n = senders_per_round(n, size);
    let devices = flows::ports_of(&peers.hosts[rank as usize]);
    let mut mine = RankIncast::default();
    for r in 0..size {
        let roles = Roles::of(r, n, size);
        gang.barrier("incast round")?;
        let flow = victim_connect(rank, &roles, net)?;
        flow.arm()?;
        gang.barrier("victim alone")?;
        let alone = flow.measure(Instant::now(), phase)?;
        gang.any_within(
            false,
            "waiting for the victim's window alone",
            phase + timeout,
        )?;

        // Over endpoints the incast's flows connect before its window, and the victim's
        // re-arm: nothing of that is timed.
        let inc = incast_connect(rank, r, &roles, net)?;
        flow.arm()?;
        let role = roles.role(rank);
        let before = snapshot_ports(role.is_some(), &devices);
        gang.barrier("incast round loaded")?;
        let t0 = Instant::now();
        let mut loaded = None;
        match inc {
            IncastEnd::Sender(f) => {
                f.run(t0 + phase);
                let m = f.measured(t0 + phase);
                f.close();
                if let Measured::Moved { bytes, seconds, .. } = m? {
                    mine.sent.push((r, results::units::gbit_s(bytes, seconds)));
                }
            }
            IncastEnd::Receiver(servers) => {
                for (from, h) in servers {
                    ef::join(h, &format!("incast from rank {from} (responder)"))?;
                }
            }
            IncastEnd::None if rank == r => {
                mine.round = Some(receive(listener, &roles.senders, t0, phase, timeout)?);
            }
            IncastEnd::None if roles.senders.contains(&rank) => {
                send(rank, peers, r, t0, phase, timeout)?;
            }
            IncastEnd::None => loaded = flow.measure(t0, phase)?,
        }
        if let Some(role) = role {
            let deltas = port_deltas(&before, &devices);
            if !deltas.is_empty() {
                mine.counters.push((r, role.to_string(), deltas));
            }
        }
        if let (Some([la, ba]), Some([ll, bl])) = (alone, loaded) {
            mine.victim = Some((r, [la.encode(), ba.encode(), ll.encode(), bl.encode()]));
        }
        gang.any_within(
            false,
            "waiting for the incast round to end",
            phase + timeout,
        )?;
        flow.end()?;
    }
    let all = gang.gather(&serde_json::to_vec(&mine)?, "the incast reports")?;
    let Some(all) = all else {
        return Ok(None);
    };
    assemble(peers.hosts, n, size, &all, net.carrier).map(Some)
}

/// The ports' counters before a round, read by the round's ranks only (`in_round`): a
/// read waits out the kernel's hw_counters lifespan and runs ethtool -S, per port.
fn snapshot_ports(in_round: bool, devices: &[(String, u32)]) -> Vec<probe::counters::Snapshot> {
    if !in_round {
        return Vec::new();
    }
    devices
        .iter()
        .map(|(d, p)| probe::counters::read(d, *p))
        .collect()
}

/// What each port counted since `before`, read again now.
fn port_deltas(
    before: &[probe::counters::Snapshot],
    devices: &[(String, u32)],
) -> Vec<PortCounters> {
    before
        .iter()
        .zip(devices.iter())
        .map(|(b, (d, p))| probe::counters::delta(b, &probe::counters::read(d, *p)))
        .collect()
}

/// Over endpoints, the round's incast flows before its window: each sender opens its
/// control connection to the receiver and arms a stream; the receiver accepts them and
/// serves each on a thread. Over TCP nothing (the senders connect in the window).
fn incast_connect(rank: u32, r: u32, roles: &Roles, net: &Net<'_>) -> Result<IncastEnd> {
    let Some((settings, op)) = net.carrier.endpoints() else {
        return Ok(IncastEnd::None);
    };
    let (peers, timeout) = (net.peers, net.timeout);
    if roles.senders.contains(&rank) {
        let to = peers.addrs[r as usize];
        // The kind field of the header names the sender (accept_all returns it).
        let ctrl = flows::connect(rank, rank, to, peers.bind, timeout)
            .with_context(|| format!("incast: connecting to rank {r} at {to}"))?;
        let shape = Shape::Stream {
            op,
            size: CHUNK as u64,
        };
        let f = FlowEnd::open(ctrl, shape, settings, format!("incast to rank {r}"));
        ef::arm_all([&f])?;
        Ok(IncastEnd::Sender(f))
    } else if rank == r {
        let conns = accept_all(net.listener, roles.senders.len(), Instant::now() + timeout)
            .context("incast: waiting for the senders to connect")?;
        Ok(IncastEnd::Receiver(
            conns
                .into_iter()
                .map(|(from, s)| (from, ef::serve(s, settings, timeout + net.phase * 2)))
                .collect(),
        ))
    } else {
        Ok(IncastEnd::None)
    }
}

/// Connects the round's victim flow: the sender opens a latency and a bandwidth
/// connection to the receiver, which serves both (TCP: echo, as the canaries' ring does;
/// endpoints: a ping-pong of sends, and 128 KiB messages one at a time with the incast's
/// operation).
fn victim_connect(rank: u32, roles: &Roles, net: &Net<'_>) -> Result<VictimEnd> {
    let Some((vs, vr)) = roles.victim else {
        return Ok(VictimEnd::None);
    };
    let (peers, timeout, carrier) = (net.peers, net.timeout, net.carrier);
    if rank == vs {
        let to = peers.addrs[vr as usize];
        let open = |kind: u32| -> Result<TcpStream> {
            let s = flows::connect(rank, kind, to, peers.bind, timeout)
                .with_context(|| format!("victim flow: connecting to rank {vr} at {to}"))?;
            s.set_read_timeout(Some(timeout))?;
            Ok(s)
        };
        let (lat, bw) = (open(KIND_LAT)?, open(KIND_BW)?);
        Ok(match carrier.endpoints() {
            None => VictimEnd::Sender(lat, bw),
            Some((settings, op)) => {
                let what = |x: &str| format!("victim {x} to rank {vr}");
                let ping = Shape::Ping {
                    size: LAT_BYTES as u64,
                };
                let sample = Shape::Sample {
                    op,
                    size: BW_BYTES as u64,
                };
                VictimEnd::Flows(
                    FlowEnd::open(lat, ping, settings, what("latency")),
                    FlowEnd::open(bw, sample, settings, what("bandwidth")),
                )
            }
        })
    } else if rank == vr {
        let conns = accept_all(net.listener, 2, Instant::now() + timeout)
            .context("victim flow: waiting for its sender")?;
        match carrier.endpoints() {
            None => {
                let mut servers = Vec::new();
                for (kind, s) in conns {
                    s.set_read_timeout(Some(timeout * 2))?;
                    servers.push(std::thread::spawn(move || {
                        flows::serve(kind, s, Default::default())
                    }));
                }
                Ok(VictimEnd::Receiver(servers))
            }
            Some((settings, _)) => Ok(VictimEnd::Served(
                conns
                    .into_iter()
                    .map(|(_, s)| ef::serve(s, settings, timeout + net.phase * 2))
                    .collect(),
            )),
        }
    } else {
        Ok(VictimEnd::None)
    }
}

/// The receiver of a round: accepts its senders and counts each one's bytes until it
/// closes; a sender's bandwidth is its bytes over the time to its last byte.
fn receive(
    listener: &TcpListener,
    senders: &[u32],
    t0: Instant,
    phase: Duration,
    timeout: Duration,
) -> Result<Round> {
    let conns = accept_all(listener, senders.len(), t0 + timeout)?;
    let threads: Vec<_> = conns
        .into_iter()
        .map(|(from, mut s)| {
            s.set_read_timeout(Some(timeout + phase)).ok();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; CHUNK];
                let (mut bytes, mut last) = (0u64, t0);
                while let Ok(k) = s.read(&mut buf) {
                    if k == 0 {
                        break;
                    }
                    bytes += k as u64;
                    last = Instant::now();
                }
                let secs = last.duration_since(t0).as_secs_f64();
                (from, results::units::gbit_s(bytes, secs))
            })
        })
        .collect();
    let mut round: Round = threads.into_iter().filter_map(|t| t.join().ok()).collect();
    round.sort_by_key(|(from, _)| senders.iter().position(|s| s == from));
    Ok(round)
}

/// A sender of a round: streams 64 KiB writes to the receiver for the window.
fn send(
    rank: u32,
    peers: &Peers<'_>,
    to_rank: u32,
    t0: Instant,
    phase: Duration,
    timeout: Duration,
) -> Result<()> {
    let to = peers.addrs[to_rank as usize];
    // The kind field of the header names the sender (accept_all returns it).
    let mut s = flows::connect(rank, rank, to, peers.bind, timeout)
        .with_context(|| format!("incast: connecting to rank {to_rank} at {to}"))?;
    let msg = vec![0xa5u8; CHUNK];
    while t0.elapsed() < phase {
        if s.write_all(&msg).is_err() {
            break;
        }
    }
    Ok(())
}

/// The run from every rank's serialized report, in rank order (rank 0 under MPI, the
/// agents' coordinator), with every rank's host facts.
pub fn assemble(
    hosts: &[HostInfo],
    n: u32,
    size: u32,
    reports: &[Vec<u8>],
    carrier: &Carrier,
) -> Result<IncastRun> {
    let reports: Vec<RankIncast> = reports
        .iter()
        .map(|b| base::wire::decode_json(b).context("a rank sent an unreadable incast report"))
        .collect::<Result<_>>()?;
    let n = senders_per_round(n, size);
    let name = |r: u32| hosts[r as usize].hostname.clone() + &format!("#{r}");
    let mut rounds = Vec::new();
    for r in 0..size {
        let roles = Roles::of(r, n, size);
        // TCP: what the receiver counted; endpoints: what each sender's completions say.
        let round = match &reports[r as usize].round {
            Some(round) => round.clone(),
            None => roles
                .senders
                .iter()
                .map(|&s| {
                    let sent = reports[s as usize].sent.iter().find(|x| x.0 == r);
                    sent.map(|x| (s, x.1))
                        .with_context(|| format!("sender rank {s} sent no figure for round {r}"))
                })
                .collect::<Result<_>>()?,
        };
        let bw: Vec<f64> = round.iter().map(|x| x.1).collect();
        let victim = match roles.victim {
            Some((vs, vr)) => Some(victim_flow(&reports[vs as usize], r, name(vs), name(vr))?),
            None => None,
        };
        let counters = reports
            .iter()
            .enumerate()
            .flat_map(|(k, rep)| {
                rep.counters
                    .iter()
                    .filter(|c| c.0 == r)
                    .map(move |c| (k as u32, c))
            })
            .map(|(k, (_, role, ports))| RoundCounters {
                node: name(k),
                role: role.clone(),
                ports: ports.clone(),
            })
            .collect();
        rounds.push(IncastRound {
            receiver: name(r),
            senders: round.iter().map(|x| name(x.0)).collect(),
            aggregate_gbit_s: bw.iter().sum(),
            jain_fairness: jain(&bw),
            line_rate_gbit_s: probe::host::link_rate_gbit_s(&hosts[r as usize]).map(|x| x.0),
            sender_gbit_s: bw,
            victim,
            counters,
        });
    }
    let no_victim = (size < n + 3).then(|| {
        format!(
            "no victim flow: {size} nodes leave fewer than 2 outside a round of {n} senders and a receiver (use incast:{} or more nodes)",
            size.saturating_sub(3).max(1)
        )
    });
    let (transport, op, counted_at) = match carrier.endpoints() {
        None => ("tcp", "send", "receiver"),
        Some((settings, op)) => (settings.kind.name(), op.name(), "sender completions"),
    };
    Ok(IncastRun {
        senders_per_round: n,
        transport: Some(transport.into()),
        op: Some(op.into()),
        counted_at: Some(counted_at.into()),
        rounds,
        no_victim,
    })
}

/// Round `r`'s victim flow from its sender's report (`vs`, named `sender`): its latency
/// and bandwidth alone and beside the incast, and what the incast cost it.
fn victim_flow(vs: &RankIncast, r: u32, sender: String, receiver: String) -> Result<VictimFlow> {
    let Some((_, h)) = vs.victim.as_ref().filter(|v| v.0 == r) else {
        anyhow::bail!("{sender} sent no victim figures for round {r}");
    };
    let fig = |i: usize, bandwidth: bool| -> Result<_> {
        let mut hist = LatencyHistogram::new();
        hist.merge_encoded(&h[i])
            .context("a victim sent an unreadable histogram")?;
        Ok(flows::figures(&hist, bandwidth))
    };
    let alone = VictimFigures {
        latency: fig(0, false)?,
        bandwidth: fig(1, true)?,
    };
    let loaded = VictimFigures {
        latency: fig(2, false)?,
        bandwidth: fig(3, true)?,
    };
    Ok(VictimFlow {
        sender,
        receiver,
        bandwidth_impact: bandwidth_impact(alone.bandwidth.mean, loaded.bandwidth.mean),
        latency_impact_p99: latency_impact(alone.latency.p99, loaded.latency.p99),
        alone,
        loaded,
    })
}

/// The document of an incast run, as rank 0 writes it for `tool`: the hosts, the rounds
/// under `congestion.incast` and, when there is no victim, why in `warnings`. The caller
/// adds its options, then finishes and writes it.
#[allow(clippy::too_many_arguments)]
pub fn document(
    tool: &str,
    launcher: &str,
    ranks: u32,
    started_at: String,
    hosts: Vec<HostInfo>,
    run: IncastRun,
    phase_seconds: f64,
    seed: u64,
) -> results::Document {
    let mut doc = results::Document::new(tool, launcher, ranks, started_at);
    doc.hosts = hosts;
    doc.warnings.extend(run.no_victim.clone());
    doc.congestion = Some(results::congestion::CongestionRun {
        seed,
        phase_seconds,
        incast: Some(run),
        ..Default::default()
    });
    doc
}

/// One line per round: the aggregate, the fairness, each sender, and the victim alone and
/// loaded.
pub fn print_table(inc: &IncastRun) {
    println!("# incast: {} senders per round", inc.senders_per_round);
    if let Some(w) = &inc.no_victim {
        println!("# {w}");
    }
    println!(
        "{:<22} {:>10} {:>8} {:>24} {:>24} {:>12}  per-sender gbit_s",
        "receiver",
        "agg gbit_s",
        "jain",
        "victim gbit_s alone/load",
        "victim p99 us alone/load",
        "victim x bw"
    );
    for r in &inc.rounds {
        let (bw, lat, x) = match &r.victim {
            Some(v) => (
                format!(
                    "{:.3}/{:.3}",
                    v.alone.bandwidth.mean, v.loaded.bandwidth.mean
                ),
                format!("{:.1}/{:.1}", v.alone.latency.p99, v.loaded.latency.p99),
                format!("{:.3}", v.bandwidth_impact),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let each: Vec<String> = r.sender_gbit_s.iter().map(|g| format!("{g:.3}")).collect();
        println!(
            "{:<22} {:>10.3} {:>8.4} {:>24} {:>24} {:>12}  {}",
            r.receiver,
            r.aggregate_gbit_s,
            r.jain_fairness,
            bw,
            lat,
            x,
            each.join(" ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::Roles;

    #[test]
    fn the_victim_pair_is_outside_the_round_and_absent_when_no_two_are_left() {
        for size in 3..12u32 {
            for n in 1..size {
                for r in 0..size {
                    let roles = Roles::of(r, n, size);
                    assert_eq!(roles.senders.len(), n as usize);
                    assert!(!roles.senders.contains(&r));
                    match roles.victim {
                        Some((s, d)) => {
                            assert!(n + 3 <= size);
                            assert_ne!(s, d);
                            for v in [s, d] {
                                assert_ne!(v, r);
                                assert!(!roles.senders.contains(&v));
                            }
                            assert_eq!(roles.role(s), Some("victim sender"));
                        }
                        None => assert!(n + 3 > size),
                    }
                }
            }
        }
    }
}
