//! The isolation sweep (`bench-lat --pattern isolation`): every rank tries to reach every
//! other on the data fabric, as a tenant's job would, while the ranks talk to each other
//! over the launcher (MPI's or the agents' management network). Inside a tenant every
//! attempt must reach; across tenants none may: a partition (VLAN, VRF, P_Key) that lets
//! one through is a breach, and the sweep writes down each attempt so `aggregate` can name
//! the pair and its path.
//!
//! Each rank listens on its data address; a connection is answered with the listener's
//! identity (a magic and its rank), so an attempt that lands on somebody else's host with
//! the same address (tenants often reuse address space in their own VRFs) is told apart
//! from reaching the peer. Every attempt leaves from the rank's own data address and waits
//! a short, bounded time; many run at once, so a sweep over a partitioned fabric, where
//! half the attempts wait out their timeout, takes seconds, not pairs x timeout.

mod icmp;

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bootstrap::gang::Gang;
use results::reach::{ReachAttempt, ReachEndpoint, ReachOutcome, ReachRun};
use results::tenants::Tenants;
use results::HostInfo;

use crate::flows;

/// Longest one attempt waits for an answer: a partitioned fabric drops packets silently,
/// and a breach answers within milliseconds.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
/// Attempts one rank has in flight at once.
const IN_FLIGHT: usize = 64;
/// What a listener answers: the magic, then its rank (little endian).
const MAGIC: &[u8; 8] = b"fcreach1";

/// How one sweep tries: which peers, how long, by which methods.
#[derive(Debug, Clone)]
pub struct ReachSettings {
    /// The rank's data address (`--bind-addr`); the attempts leave from it.
    pub bind: Option<IpAddr>,
    /// Every rank's address (`true`) or the same local rank's on every other node.
    pub all_rails: bool,
    /// Longest wait for one attempt (TCP connect, an echo reply).
    pub timeout: Duration,
    /// Tried beside TCP when this host lets the process open an ICMP socket.
    pub icmp: bool,
}

/// The sweep as the root writes it: the run and the hosts.
pub struct Swept {
    /// Every endpoint and attempt.
    pub run: ReachRun,
    /// Every rank's host facts.
    pub hosts: Vec<HostInfo>,
    /// What the run could not do, for the document's warnings.
    pub warnings: Vec<String>,
}

/// Runs the sweep on this rank; the root (`Some`) gets every rank's attempts.
pub fn run_job(
    gang: &mut dyn Gang,
    settings: &ReachSettings,
    tenants: Option<&Tenants>,
) -> Result<Option<Swept>> {
    if gang.size() < 2 {
        anyhow::bail!(
            "an isolation sweep needs at least 2 ranks on 2 nodes, and this run has {}: start \
             it under mpirun or srun across the nodes",
            gang.size()
        );
    }
    let (listener, roster) = flows::roster(gang, settings.bind)?;
    let mut endpoints = endpoints(&roster, tenants);
    // Each rank names the interface its data address sits on (the plan's NIC name).
    let mine = settings
        .bind
        .and_then(probe::discovery::netif::interface_of)
        .unwrap_or_default();
    let names = gang.all_gather(mine.as_bytes(), "data interfaces")?;
    for (e, name) in endpoints.iter_mut().zip(names) {
        e.interface = Some(String::from_utf8_lossy(&name).into_owned()).filter(|n| !n.is_empty());
    }
    let me = gang.rank();
    let stop = AtomicBool::new(false);
    let icmp = settings.icmp && icmp::available(settings.bind);
    let attempts = std::thread::scope(|s| -> Result<Vec<ReachAttempt>> {
        let answer = s.spawn(|| answer(&listener, me, &stop));
        gang.barrier("every listener up")?;
        let targets = targets(&endpoints, me, settings.all_rails);
        let attempts = attempt_all(me, &targets, &endpoints, settings, icmp);
        // Listeners stay up until every rank is done trying.
        let done = gang.barrier("every rank's attempts done");
        stop.store(true, Ordering::Relaxed);
        let _ = answer.join();
        done.map(|_| attempts)
    })?;
    let gathered = gang.gather(&serde_json::to_vec(&attempts)?, "every rank's attempts")?;
    let Some(parts) = gathered else {
        return Ok(None);
    };
    let mut all = Vec::new();
    for (rank, bytes) in parts.iter().enumerate() {
        let mine: Vec<ReachAttempt> = base::wire::decode_json(bytes)
            .with_context(|| format!("rank {rank} sent unreadable attempts"))?;
        all.extend(mine);
    }
    let mut warnings = Vec::new();
    if settings.icmp && !icmp {
        warnings.push(
            "ICMP was not tried: this host refused an ICMP socket (ping_group_range excludes \
             this user and raw sockets need CAP_NET_RAW); reach was judged over TCP alone"
                .to_string(),
        );
    }
    let mut methods = vec!["tcp".to_string()];
    if icmp {
        methods.push("icmp".to_string());
    }
    Ok(Some(Swept {
        run: ReachRun {
            timeout_ms: settings.timeout.as_millis() as u64,
            methods,
            rail_mode: if settings.all_rails { "all" } else { "aligned" }.into(),
            endpoints,
            attempts: all,
            tenants_source: tenants.map(|t| t.source.clone()),
        },
        hosts: roster.into_iter().map(|p| p.host).collect(),
        warnings,
    }))
}

/// Every rank's data address, its node, its local rank (its place among its host's ranks)
/// and its tenant.
fn endpoints(roster: &[flows::Peer], tenants: Option<&Tenants>) -> Vec<ReachEndpoint> {
    let mut seen: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    roster
        .iter()
        .enumerate()
        .map(|(rank, p)| {
            let node = p.host.hostname.as_str();
            let local = seen.entry(node).or_insert(0);
            let local_rank = *local;
            *local += 1;
            ReachEndpoint {
                rank: rank as u32,
                node: node.to_string(),
                local_rank: Some(local_rank),
                interface: None,
                address: p.addr.ip().to_string(),
                port: p.addr.port(),
                tenant: tenants
                    .and_then(|t| t.of_node(node))
                    .map(|t| t.name.clone()),
            }
        })
        .collect()
}

/// The ranks `me` tries: on every other node, the same local rank (rail-aligned) or all.
fn targets(endpoints: &[ReachEndpoint], me: u32, all_rails: bool) -> Vec<u32> {
    let mine = &endpoints[me as usize];
    endpoints
        .iter()
        .filter(|e| e.node != mine.node)
        .filter(|e| all_rails || e.local_rank == mine.local_rank)
        .map(|e| e.rank)
        .collect()
}

/// Answers every connection with this rank's identity until `stop`.
fn answer(listener: &TcpListener, me: u32, stop: &AtomicBool) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&me.to_le_bytes());
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = s.write_all(&hello);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Every attempt of `me`, [`IN_FLIGHT`] at a time, in target order.
fn attempt_all(
    me: u32,
    targets: &[u32],
    endpoints: &[ReachEndpoint],
    settings: &ReachSettings,
    icmp: bool,
) -> Vec<ReachAttempt> {
    let next = AtomicUsize::new(0);
    let out = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..IN_FLIGHT.min(targets.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&to) = targets.get(i) else { break };
                let peer = &endpoints[to as usize];
                let mut mine = vec![tcp_attempt(me, peer, settings)];
                if icmp {
                    mine.push(icmp_attempt(me, peer, settings));
                }
                out.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .extend(mine.into_iter().map(|a| (i, a)));
            });
        }
    });
    let mut all = out
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.sort_by(|a, b| (a.0, &a.1.method).cmp(&(b.0, &b.1.method)));
    all.into_iter().map(|(_, a)| a).collect()
}

/// One attempt toward `peer` by `method`: `try_peer` tries its address; timed here.
fn attempt(
    me: u32,
    peer: &ReachEndpoint,
    method: &str,
    try_peer: impl FnOnce(IpAddr) -> (ReachOutcome, Option<String>),
) -> ReachAttempt {
    let started = Instant::now();
    let (outcome, detail) = match peer.address.parse::<IpAddr>() {
        Ok(ip) => try_peer(ip),
        Err(_) => (
            ReachOutcome::Error,
            Some(format!("{:?} is not an address", peer.address)),
        ),
    };
    ReachAttempt {
        from: me,
        to: peer.rank,
        method: method.into(),
        outcome,
        ms: started.elapsed().as_secs_f64() * 1e3,
        detail,
    }
}

/// One TCP attempt: connect from the data address, read who answered.
fn tcp_attempt(me: u32, peer: &ReachEndpoint, settings: &ReachSettings) -> ReachAttempt {
    attempt(me, peer, "tcp", |ip| {
        let to = SocketAddr::new(ip, peer.port);
        match base::sockets::connect_from(to, settings.bind, settings.timeout) {
            Ok(mut s) => identify(&mut s, peer.rank, settings.timeout),
            Err(e) => failed(&e),
        }
    })
}

/// Who answered a connection: the peer, another rank of the sweep, or a stranger.
fn identify(
    s: &mut std::net::TcpStream,
    want: u32,
    timeout: Duration,
) -> (ReachOutcome, Option<String>) {
    let _ = s.set_read_timeout(Some(timeout));
    let mut hello = [0u8; 12];
    match s.read_exact(&mut hello) {
        Ok(()) if &hello[..8] == MAGIC => {
            let rank = u32::from_le_bytes([hello[8], hello[9], hello[10], hello[11]]);
            if rank == want {
                (ReachOutcome::Reached, None)
            } else {
                (
                    ReachOutcome::ReachedOther,
                    Some(format!("rank {rank} answered in rank {want}'s place")),
                )
            }
        }
        Ok(()) => (
            ReachOutcome::ReachedOther,
            Some("a listener that is not this sweep's answered".into()),
        ),
        Err(e) => (
            ReachOutcome::ReachedOther,
            Some(format!(
                "connected, but no identity came back ({e}): a host that is not the peer took \
                 the connection"
            )),
        ),
    }
}

/// What a failed connect means for reach.
fn failed(e: &std::io::Error) -> (ReachOutcome, Option<String>) {
    let outcome = match (e.kind(), e.raw_os_error()) {
        (ErrorKind::ConnectionRefused, _) => ReachOutcome::Refused,
        (ErrorKind::TimedOut | ErrorKind::WouldBlock, _) => ReachOutcome::TimedOut,
        (_, Some(code)) if code == nix::libc::EHOSTUNREACH || code == nix::libc::ENETUNREACH => {
            ReachOutcome::Unreachable
        }
        _ => ReachOutcome::Error,
    };
    (outcome, Some(e.to_string()))
}

/// One ICMP echo from the data address.
fn icmp_attempt(me: u32, peer: &ReachEndpoint, settings: &ReachSettings) -> ReachAttempt {
    attempt(me, peer, "icmp", |ip| {
        icmp::echo(settings.bind, ip, me, settings.timeout)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(rank: u32, node: &str, local: u32) -> ReachEndpoint {
        ReachEndpoint {
            rank,
            node: node.into(),
            local_rank: Some(local),
            address: "127.0.0.1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn aligned_targets_are_the_same_rail_on_other_nodes() {
        let eps = [
            ep(0, "a", 0),
            ep(1, "a", 1),
            ep(2, "b", 0),
            ep(3, "b", 1),
            ep(4, "c", 0),
        ];
        assert_eq!(targets(&eps, 0, false), [2, 4]);
        assert_eq!(targets(&eps, 1, false), [3]);
        assert_eq!(targets(&eps, 0, true), [2, 3, 4]);
    }

    #[test]
    fn a_listener_names_itself_and_a_closed_port_is_refused() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = AtomicBool::new(false);
        let settings = ReachSettings {
            bind: None,
            all_rails: false,
            timeout: Duration::from_secs(2),
            icmp: false,
        };
        std::thread::scope(|s| {
            s.spawn(|| answer(&l, 7, &stop));
            let mut peer = ep(7, "b", 0);
            peer.port = port;
            let a = tcp_attempt(0, &peer, &settings);
            assert_eq!(a.outcome, ReachOutcome::Reached, "{a:?}");
            peer.rank = 3;
            let a = tcp_attempt(0, &peer, &settings);
            assert_eq!(a.outcome, ReachOutcome::ReachedOther, "{a:?}");
            assert!(a.detail.unwrap().contains("rank 7 answered"));
            stop.store(true, Ordering::Relaxed);
        });
        drop(l);
        let closed = ep(1, "b", 0);
        let a = tcp_attempt(0, &ReachEndpoint { port, ..closed }, &settings);
        assert_eq!(a.outcome, ReachOutcome::Refused, "{a:?}");
        assert!(a.outcome.delivered());
    }
}
