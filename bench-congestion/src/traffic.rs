//! The run on every rank: the roster, the split, the TCP connections of the canaries' ring
//! and of the congestor groups, the two phases, and at rank 0 the document.

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
use p2p::flows::{
    accept_all, connect, figures, ping_pong, ports_of, serve, Sinks, BW_BYTES, KIND_BW,
    KIND_CONGEST, KIND_LAT, LAT_BYTES,
};

/// The congestors' message (GPCNeT: 4 KiB all-to-all and incast).
const CONGEST_BYTES: usize = 4096;

/// One directed TCP connection of the plan.
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

pub fn run_job(cli: &Cli, job: &MpiJob) -> Result<i32> {
    let rank = job.rank();
    let started_at = results::provenance::now_rfc3339();
    let phase = Duration::from_secs_f64(cli.phase_seconds);
    let timeout = Duration::from_secs(cli.timeout);
    if let Some(n) = cli.incast() {
        let Some((inc, hosts)) = p2p::incast::run_job(job, cli.bind_addr, n, phase, timeout)?
        else {
            return Ok(base::exit::OK);
        };
        p2p::incast::print_table(&inc);
        let mut doc = p2p::incast::document(
            "bench-congestion",
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
        doc.finish(base::interrupt::interrupted().then(|| "interrupted".to_string()));
        base::output::write_document(cli.json.as_deref(), &doc)?;
        return Ok(base::exit::OK);
    }
    let (listener, roster) = p2p::flows::roster(job, cli.bind_addr)?;
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

    // Servers of the incoming connections: echo for the ring, sink for the congestors.
    let idle = timeout + phase * 7;
    let received: Sinks = Arc::default();
    let mut servers: Vec<JoinHandle<()>> = Vec::new();
    for (kind, s) in incoming {
        s.set_read_timeout(Some(idle))?;
        let received = Arc::clone(&received);
        servers.push(std::thread::spawn(move || serve(kind, s, received)));
    }

    let devices = ports_of(&roster[rank as usize].host);
    let mut report = RankReport::default();
    for (p, loaded) in [false, true].into_iter().enumerate() {
        let before: Vec<_> = devices
            .iter()
            .map(|(d, n)| probe::counters::read(d, *n))
            .collect();
        job.barrier(if loaded {
            "loaded phase"
        } else {
            "isolated phase"
        });
        let t0 = Instant::now();
        if canary {
            let team = team.as_ref().expect("canaries are in the team");
            report.hist.push(canary_phase(&outgoing, team, t0, phase)?);
        } else if loaded {
            congest(&outgoing, t0 + phase * 3 + Duration::from_millis(200))?;
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
            // The congestors closed their connections: the sinks end and report.
            let t_loaded = t0;
            drop(outgoing);
            for s in servers {
                let _ = s.join();
            }
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
    let run = assemble(cli, &sp, &ring, &reports)?;
    print_table(&run);
    let mut doc = Document::new("bench-congestion", "mpi", job.size(), started_at);
    doc.hosts = roster.into_iter().map(|h| h.host).collect();
    let o = &mut doc.options;
    o.insert("seed".into(), cli.seed.into());
    o.insert("canaries".into(), cli.canaries.into());
    o.insert("phase-seconds".into(), cli.phase_seconds.into());
    o.insert("include-local".into(), cli.include_local.into());
    if let Some(b) = cli.bind_addr {
        o.insert("bind-addr".into(), b.to_string().into());
    }
    doc.warnings.push(
        "one-sided put/get congestors are not run (two-sided all-to-all and incast only)".into(),
    );
    doc.congestion = Some(run);
    let stopped = base::interrupt::interrupted().then(|| "interrupted".to_string());
    doc.finish(stopped);
    base::output::write_document(cli.json.as_deref(), &doc)?;
    Ok(base::exit::OK)
}

/// Every connection of the run: each canary to the next of the ring twice (latency and
/// bandwidth), every ordered pair of an all-to-all group, every incast sender to its
/// group's first rank.
fn plan_links(sp: &Split, ring: &[u32]) -> Vec<Link> {
    let mut links = Vec::new();
    for (i, &r) in ring.iter().enumerate() {
        let next = ring[(i + 1) % ring.len()];
        links.push(Link {
            from: r,
            to: next,
            kind: KIND_LAT,
        });
        links.push(Link {
            from: r,
            to: next,
            kind: KIND_BW,
        });
    }
    for (g, (pattern, nodes)) in sp.groups.iter().enumerate() {
        let ranks: Vec<u32> = nodes.iter().flat_map(|n| n.ranks.clone()).collect();
        let kind = KIND_CONGEST + g as u32;
        if pattern == "incast" {
            for &s in &ranks[1..] {
                links.push(Link {
                    from: s,
                    to: ranks[0],
                    kind,
                });
            }
        } else {
            for &a in &ranks {
                for &b in ranks.iter().filter(|&&b| b != a) {
                    links.push(Link {
                        from: a,
                        to: b,
                        kind,
                    });
                }
            }
        }
    }
    links
}

/// One canary phase: the three tests one after another, each until its slot of the
/// phase ends (`t0 + k * phase`).
fn canary_phase(
    out: &[(Link, TcpStream)],
    team: &Team<'_>,
    t0: Instant,
    phase: Duration,
) -> Result<[String; 3]> {
    let stream = |kind| {
        out.iter()
            .find(|(l, _)| l.kind == kind)
            .map(|(_, s)| s)
            .expect("every canary has its ring connections")
    };
    let lat = ping_pong(stream(KIND_LAT), LAT_BYTES, t0 + phase)?;
    let bw = ping_pong(stream(KIND_BW), BW_BYTES, t0 + phase * 2)?;
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

/// A congestor's senders: one thread per outgoing connection writing 4 KiB messages until
/// `until`, then closing.
fn congest(out: &[(Link, TcpStream)], until: Instant) -> Result<()> {
    let mut threads = Vec::new();
    for (_, s) in out {
        let mut s = s.try_clone()?;
        // A shaped link drains slowly: a blocked write must not carry the congestion past
        // `until`, and neither may the send buffer after it.
        s.set_write_timeout(Some(Duration::from_millis(50)))?;
        threads.push(std::thread::spawn(move || {
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
        }));
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

fn assemble(cli: &Cli, sp: &Split, ring: &[u32], reports: &[RankReport]) -> Result<CongestionRun> {
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
                bytes,
                seconds,
                gbit_s: if seconds > 0.0 {
                    bytes as f64 * 8.0 / seconds / 1e9
                } else {
                    0.0
                },
            }
        })
        .collect();
    Ok(CongestionRun {
        seed: cli.seed,
        canary_percent: cli.canaries,
        phase_seconds: cli.phase_seconds,
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
            "# congestor group {} ({}, {} B messages): {:.3} Gbit/s received over {:.3} s",
            c.group, c.pattern, c.message_bytes, c.gbit_s, c.seconds
        );
    }
}
