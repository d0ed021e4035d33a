//! The run on every rank: the roster, the split, the connections of the canaries' ring and
//! of the congestor groups, the two phases, and at rank 0 the document.
//!
//! Every flow has a TCP connection (its header names the flow's kind). Over TCP that
//! connection carries the data (`p2p::flows`); over verbs it is the flow's control link and
//! the data moves through the endpoints (`p2p::endpoint_flows`): the canaries ping-pong
//! sends and write 128 KiB one message at a time, the congestors send (all-to-all,
//! incast), RDMA WRITE into their root (put incast) or RDMA READ from it (get broadcast).

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bootstrap::mpi::{MpiJob, Team};
use mpi::collective::SystemOperation;
use mpi::traits::*;
use results::congestion::{
    bandwidth_impact, latency_impact, CanaryTest, CongestionNode, CongestionRun, CongestorGroup,
    CongestorThroughput,
};
use results::{Document, LatencyHistogram, PortCounters};
use serde::{Deserialize, Serialize};

use crate::split::{self, Split};
use crate::Cli;
use p2p::endpoint_flows::{self as ef, Carrier, FlowEnd, Measured, Shape};
use p2p::flows::{
    accept_all, connect, figures, ping_pong, ports_of, read_until, serve, Sinks, BW_BYTES,
    CONGEST_BYTES, KIND_BW, KIND_CONGEST, KIND_LAT, KIND_SOURCE, LAT_BYTES,
};
use transport::Op;

/// One directed connection of the plan (the data's, or an endpoint flow's control link).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Link {
    from: u32,
    to: u32,
    kind: u32,
}

/// What one rank measured, gathered at rank 0.
#[derive(Serialize, Deserialize, Default)]
struct RankReport {
    /// Per phase (isolated, loaded): lat, bw, allreduce histograms (empty on congestors).
    hist: Vec<[String; 3]>,
    /// (group, bytes received, seconds) during the loaded phase.
    congest: Vec<(u32, u64, f64)>,
    counters: [Vec<PortCounters>; 2],
}

const TESTS: [(&str, &str); 3] = [
    ("ring_latency_8b", "us"),
    ("ring_bandwidth_128kib", "gbit_s"),
    ("allreduce_8b", "us"),
];

pub fn run_job(cli: &Cli, job: &mut MpiJob, carrier: &Carrier) -> Result<i32> {
    let rank = job.rank();
    let started_at = results::provenance::now_rfc3339();
    let phase = Duration::from_secs_f64(cli.phase_seconds);
    let timeout = Duration::from_secs(cli.timeout);
    if let Some(n) = cli.incast() {
        let Some((inc, hosts)) =
            p2p::incast::run_job(job, cli.bind_addr, n, phase, timeout, carrier)?
        else {
            return Ok(base::exit::OK);
        };
        p2p::incast::print_table(&inc);
        let mut doc = p2p::incast::document(
            "bench-congestion",
            "mpi",
            job.size(),
            started_at,
            hosts,
            inc,
            cli.phase_seconds,
            cli.seed,
        );
        doc.options
            .insert("mode".into(), format!("incast:{n}").into());
        doc.options
            .insert("phase-seconds".into(), cli.phase_seconds.into());
        carrier.record(&mut doc.options);
        doc.finish(base::interrupt::interrupted().then(|| "interrupted".to_string()));
        base::output::write_document(cli.json.as_deref(), &doc)?;
        return Ok(base::exit::OK);
    }
    let (listener, roster) = p2p::flows::roster(job, cli.bind_addr)?;
    let host_facts: Vec<results::HostInfo> = roster.iter().map(|p| p.host.clone()).collect();
    let carrier = carrier.settled(rank, &host_facts)?;
    let hosts: Vec<String> = roster.iter().map(|h| h.host.hostname.clone()).collect();
    let nodes = split::nodes(&hosts, cli.include_local);
    let sp = match split::split(&nodes, cli.seed, cli.canaries) {
        Ok(s) => s,
        Err(e) => {
            if rank == 0 {
                eprintln!("bench-congestion: error: {e}");
            }
            return Ok(base::exit::ERROR);
        }
    };
    let ring: Vec<u32> = sp.ring.iter().flat_map(|n| n.ranks.clone()).collect();
    let canary = ring.contains(&rank);
    let links = plan_links(&sp, &ring);

    // Connections: accept the incoming ones while making the outgoing ones.
    let expected = links.iter().filter(|l| l.to == rank).count();
    let acceptor = {
        let deadline = Instant::now() + timeout;
        std::thread::spawn(move || accept_all(&listener, expected, deadline))
    };
    let mut outgoing: Vec<(Link, TcpStream)> = Vec::new();
    for l in links.iter().filter(|l| l.from == rank) {
        let to = roster[l.to as usize].addr;
        let s = connect(rank, l.kind, to, cli.bind_addr, timeout)
            .with_context(|| format!("connecting to rank {} at {to}", l.to))?;
        outgoing.push((*l, s));
    }
    let incoming = acceptor
        .join()
        .map_err(|_| anyhow::anyhow!("the accepting thread panicked"))??;
    let team = job.split(canary);
    job.barrier("connections made");

    // The far ends of the incoming connections, and this rank's own flows.
    let idle = timeout + phase * 7;
    let received: Sinks = Arc::default();
    let (out, servers) = match carrier.endpoints() {
        None => {
            let mut servers = Vec::new();
            for (kind, s) in incoming {
                s.set_read_timeout(Some(idle))?;
                let received = Arc::clone(&received);
                servers.push(std::thread::spawn(move || serve(kind, s, received)));
            }
            (Out::Tcp(outgoing), Servers::Tcp(servers))
        }
        Some((settings, _)) => {
            let servers = incoming
                .into_iter()
                .map(|(_, s)| ef::serve(s, settings, idle))
                .collect();
            let flows = outgoing
                .into_iter()
                .map(|(l, s)| {
                    let what = format!("{} flow to rank {}", kind_name(l.kind, &sp), l.to);
                    (l, FlowEnd::open(s, shape_of(l.kind, &sp), settings, what))
                })
                .collect();
            (Out::Flows(flows), Servers::Flows(servers))
        }
    };

    // Warm-up, untimed: the canaries' first exchanges pay for ARP, TCP's slow start, the
    // queue pairs' first packets and MPI's lazily made connections (the allreduce's first
    // calls took milliseconds in the simulated fabric), which the isolated phase must not
    // measure and the loaded one would not.
    let warm = warmup(phase);
    out.arm(canary)?;
    job.barrier("warm-up");
    if canary {
        let team = team.as_ref().expect("canaries are in the team");
        canary_phase(&out, team, Instant::now(), warm)?;
    }
    job.any_within(false, "waiting for the warm-up to end", warm * 4 + timeout);

    let devices = ports_of(&roster[rank as usize].host);
    let mut report = RankReport::default();
    for (p, loaded) in [false, true].into_iter().enumerate() {
        let before: Vec<_> = devices
            .iter()
            .map(|(d, n)| probe::counters::read(d, *n))
            .collect();
        // Over verbs the flows of the phase connect before it starts: the canaries' in
        // both phases, the congestors' in the loaded one.
        out.arm(canary || loaded)?;
        job.barrier(if loaded {
            "loaded phase"
        } else {
            "isolated phase"
        });
        let t0 = Instant::now();
        if canary {
            let team = team.as_ref().expect("canaries are in the team");
            report.hist.push(canary_phase(&out, team, t0, phase)?);
        } else if loaded {
            let until = t0 + phase * 3 + Duration::from_millis(200);
            report.congest.extend(congest(&out, t0, until)?);
        }
        let after: Vec<_> = devices
            .iter()
            .map(|(d, n)| probe::counters::read(d, *n))
            .collect();
        report.counters[p] = before
            .iter()
            .zip(&after)
            .map(|(b, a)| probe::counters::delta(b, a))
            .collect();
        job.any_within(
            false,
            "waiting for the phase to end on all ranks",
            phase * 4 + timeout,
        );
        if loaded {
            // The congestors close their flows: the far ends end and report.
            let t_loaded = t0;
            out.close();
            servers.join()?;
            let got = received.lock().unwrap();
            for (g, bytes, last) in got.iter() {
                let secs =
                    last.map_or(0.0, |l| l.saturating_duration_since(t_loaded).as_secs_f64());
                report.congest.push((*g, *bytes, secs));
            }
            break;
        }
    }

    let gathered = job
        .gather_bytes(&serde_json::to_vec(&report)?, "the measurements", timeout)
        .map(|all| {
            all.iter()
                .map(|b| base::wire::decode_json::<RankReport>(b).context("an unreadable report"))
                .collect::<Result<Vec<_>>>()
        })
        .transpose()?;
    let Some(reports) = gathered else {
        return Ok(base::exit::OK);
    };
    let run = assemble(cli, &sp, &ring, &reports, &carrier)?;
    print_table(&run);
    let mut doc = Document::new("bench-congestion", "mpi", job.size(), started_at);
    doc.hosts = roster.into_iter().map(|h| h.host).collect();
    let o = &mut doc.options;
    o.insert("seed".into(), cli.seed.into());
    o.insert("canaries".into(), cli.canaries.into());
    o.insert("phase-seconds".into(), cli.phase_seconds.into());
    o.insert("warmup-seconds".into(), warmup(phase).as_secs_f64().into());
    o.insert("include-local".into(), cli.include_local.into());
    if let Some(b) = cli.bind_addr {
        o.insert("bind-addr".into(), b.to_string().into());
    }
    carrier.record(o);
    if carrier.endpoints().is_none()
        && sp
            .groups
            .iter()
            .any(|g| g.0 != "alltoall" && g.0 != "incast")
    {
        doc.warnings.push(
            "over TCP there is no one-sided operation: put_incast streams into its root and \
             get_bcast streams out of it (the directions GPCNeT's puts and gets load), both \
             two-sided; over verbs they are RDMA WRITE and READ"
                .into(),
        );
    }
    doc.congestion = Some(run);
    let stopped = base::interrupt::interrupted().then(|| "interrupted".to_string());
    doc.finish(stopped);
    base::output::write_document(cli.json.as_deref(), &doc)?;
    Ok(base::exit::OK)
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
fn op_of(pattern: &str) -> Op {
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

/// The canaries' warm-up per test: a tenth of the phase, between 50 ms and 1 s.
pub fn warmup(phase: Duration) -> Duration {
    (phase / 10).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// One canary phase: the three tests one after another, each until its slot of the
/// phase ends (`t0 + k * phase`).
fn canary_phase(out: &Out, team: &Team<'_>, t0: Instant, phase: Duration) -> Result<[String; 3]> {
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
    let ar = allreduce(team, t0 + phase * 3);
    Ok([lat.encode(), bw.encode(), ar.encode()])
}

/// 8-byte MPI allreduce among the canaries until `deadline` (checked together every 32
/// operations, so every canary runs the same count).
fn allreduce(team: &Team<'_>, deadline: Instant) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    let _g = team.watchdog().arm("in the canaries' allreduce");
    loop {
        for _ in 0..32 {
            let (mine, mut sum) = (1u64, 0u64);
            let t = Instant::now();
            team.comm()
                .all_reduce_into(&mine, &mut sum, SystemOperation::sum());
            h.record(t.elapsed().as_nanos() as u64);
        }
        if team.any(Instant::now() >= deadline) {
            break;
        }
    }
    h
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

fn assemble(
    cli: &Cli,
    sp: &Split,
    ring: &[u32],
    reports: &[RankReport],
    carrier: &Carrier,
) -> Result<CongestionRun> {
    let (transport, counted_at) = match carrier.endpoints() {
        None => ("tcp", "receiver"),
        Some((settings, _)) => (settings.kind.name(), "initiator completions"),
    };
    let name = |n: &split::Node| n.name.clone();
    let mut nodes: Vec<CongestionNode> = sp
        .ring
        .iter()
        .map(|n| CongestionNode {
            node: name(n),
            ranks: n.ranks.clone(),
            role: "canary".into(),
            group: None,
        })
        .collect();
    for (g, (_, ns)) in sp.groups.iter().enumerate() {
        nodes.extend(ns.iter().map(|n| CongestionNode {
            node: name(n),
            ranks: n.ranks.clone(),
            role: "congestor".into(),
            group: Some(g as u32),
        }));
    }
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    let mut canary_tests = Vec::new();
    for (t, (test, unit)) in TESTS.iter().enumerate() {
        let mut phase = [LatencyHistogram::new(), LatencyHistogram::new()];
        for &r in ring {
            let rep = &reports[r as usize];
            for (p, h) in phase.iter_mut().enumerate() {
                h.merge_encoded(&rep.hist[p][t])
                    .context("a canary sent an unreadable histogram")?;
            }
        }
        let bandwidth = *unit == "gbit_s";
        let (iso, lod) = (figures(&phase[0], bandwidth), figures(&phase[1], bandwidth));
        let (impact_mean, impact_p99) = if bandwidth {
            (
                bandwidth_impact(iso.mean, lod.mean),
                bandwidth_impact(iso.p99, lod.p99),
            )
        } else {
            (
                latency_impact(iso.mean, lod.mean),
                latency_impact(iso.p99, lod.p99),
            )
        };
        let impact_p999 = iso.p999.zip(lod.p999).map(|(i, l)| latency_impact(i, l));
        canary_tests.push(CanaryTest {
            test: test.to_string(),
            unit: unit.to_string(),
            isolated: iso,
            loaded: lod,
            impact_mean,
            impact_p99,
            impact_p999,
        });
    }
    let congestor_throughput = sp
        .groups
        .iter()
        .enumerate()
        .map(|(g, (pattern, _))| {
            let mine: Vec<_> = reports
                .iter()
                .flat_map(|r| r.congest.iter())
                .filter(|c| c.0 == g as u32)
                .collect();
            let bytes: u64 = mine.iter().map(|c| c.1).sum();
            let seconds = mine.iter().map(|c| c.2).fold(0.0, f64::max);
            CongestorThroughput {
                group: g as u32,
                pattern: pattern.clone(),
                message_bytes: CONGEST_BYTES as u64,
                op: Some(match carrier.endpoints() {
                    None => "send".into(),
                    Some(_) => op_of(pattern).name().into(),
                }),
                counted_at: Some(counted_at.into()),
                bytes,
                seconds,
                gbit_s: results::units::gbit_s(bytes, seconds),
            }
        })
        .collect();
    Ok(CongestionRun {
        seed: cli.seed,
        canary_percent: cli.canaries,
        phase_seconds: cli.phase_seconds,
        transport: Some(transport.into()),
        canaries: sp
            .ring
            .iter()
            .map(name)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        ring: sp.ring.iter().map(name).collect(),
        congestor_groups: sp
            .groups
            .iter()
            .map(|(p, ns)| CongestorGroup {
                pattern: p.clone(),
                nodes: ns.iter().map(name).collect(),
            })
            .collect(),
        nodes,
        canary_tests,
        congestor_throughput,
        counters_isolated: reports.iter().flat_map(|r| r.counters[0].clone()).collect(),
        counters_loaded: reports.iter().flat_map(|r| r.counters[1].clone()).collect(),
        incast: None,
    })
}

/// GPCNeT's table, with the factors unrounded.
fn print_table(run: &CongestionRun) {
    println!(
        "# bench-congestion: seed {}, {} canary nodes, {} congestor groups, {} s per test and phase",
        run.seed,
        run.canaries.len(),
        run.congestor_groups.len(),
        run.phase_seconds
    );
    println!(
        "{:<24} {:>7} {:>14} {:>14} {:>14} {:>14} {:>20} {:>20}",
        "canary test",
        "unit",
        "isolated avg",
        "loaded avg",
        "isolated p99",
        "loaded p99",
        "impact avg",
        "impact p99"
    );
    for t in &run.canary_tests {
        println!(
            "{:<24} {:>7} {:>14.3} {:>14.3} {:>14.3} {:>14.3} {:>20} {:>20}",
            t.test,
            t.unit,
            t.isolated.mean,
            t.loaded.mean,
            t.isolated.p99,
            t.loaded.p99,
            t.impact_mean,
            t.impact_p99
        );
    }
    for c in &run.congestor_throughput {
        println!(
            "# congestor group {} ({}, {} B {} messages): {:.3} Gbit/s over {:.3} s, counted at the {}",
            c.group,
            c.pattern,
            c.message_bytes,
            c.op.as_deref().unwrap_or("send"),
            c.gbit_s,
            c.seconds,
            c.counted_at.as_deref().unwrap_or("receiver")
        );
    }
}
