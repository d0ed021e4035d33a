//! `--mode incast[:N]`: rounds of N senders to one receiver, every rank the receiver in
//! turn (the next N ranks send). The receiver counts each sender's bytes; the round's
//! figures are the per-sender bandwidth, the aggregate against the receiver's line rate,
//! and Jain's fairness index across the senders. Not done yet: the victim flow.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bootstrap::mpi::MpiJob;
use results::congestion::{jain, IncastRound, IncastRun};
use results::HostInfo;

use crate::accept::accept_all;

const CHUNK: usize = 64 * 1024;

/// One receiver's view of its round: (sender rank, gbit/s).
type Round = Vec<(u32, f64)>;

pub struct Peers<'a> {
    pub addrs: &'a [SocketAddr],
    pub hosts: &'a [HostInfo],
    pub bind: Option<IpAddr>,
}

pub fn run(
    job: &MpiJob,
    peers: &Peers<'_>,
    listener: &TcpListener,
    n: u32,
    phase: Duration,
    timeout: Duration,
) -> Result<Option<IncastRun>> {
    let (rank, size) = (job.rank(), job.size());
    let n = if n == 0 { size - 1 } else { n.min(size - 1) };
    let mut mine: Option<Round> = None;
    for r in 0..size {
        let senders: Vec<u32> = (1..=n).map(|k| (r + k) % size).collect();
        job.barrier("incast round");
        let t0 = Instant::now();
        if rank == r {
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
                        (
                            from,
                            if secs > 0.0 {
                                bytes as f64 * 8.0 / secs / 1e9
                            } else {
                                0.0
                            },
                        )
                    })
                })
                .collect();
            let mut round: Round = threads.into_iter().filter_map(|t| t.join().ok()).collect();
            round.sort_by_key(|(from, _)| senders.iter().position(|s| s == from));
            mine = Some(round);
        } else if senders.contains(&rank) {
            let to = peers.addrs[r as usize];
            let mut s = base::sockets::connect_from(to, peers.bind, timeout)
                .with_context(|| format!("incast: connecting to rank {r} at {to}"))?;
            let mut hdr = [0u8; 8];
            // The kind field of the header names the sender (accept_all returns it).
            hdr[..4].copy_from_slice(&rank.to_le_bytes());
            hdr[4..].copy_from_slice(&rank.to_le_bytes());
            s.write_all(&hdr)?;
            let msg = vec![0xa5u8; CHUNK];
            while t0.elapsed() < phase {
                if s.write_all(&msg).is_err() {
                    break;
                }
            }
        }
        job.any_within(
            false,
            "waiting for the incast round to end",
            phase + timeout,
        );
    }
    let all = job.gather_to_root(&serde_json::to_vec(&mine)?);
    let Some(all) = all else {
        return Ok(None);
    };
    let name = |r: u32| peers.hosts[r as usize].hostname.clone() + &format!("#{r}");
    let mut rounds = Vec::new();
    for (r, bytes) in all.iter().enumerate() {
        let round: Option<Round> =
            base::wire::decode_json(bytes).context("a rank sent an unreadable incast round")?;
        let round = round.unwrap_or_default();
        let bw: Vec<f64> = round.iter().map(|x| x.1).collect();
        rounds.push(IncastRound {
            receiver: name(r as u32),
            senders: round.iter().map(|x| name(x.0)).collect(),
            aggregate_gbit_s: bw.iter().sum(),
            jain_fairness: jain(&bw),
            line_rate_gbit_s: probe::host::link_rate_gbit_s(&peers.hosts[r]).map(|x| x.0),
            sender_gbit_s: bw,
        });
    }
    Ok(Some(IncastRun {
        senders_per_round: n,
        rounds,
    }))
}
