//! The TCP flows of the runs where many ranks meet at once rather than in disjoint pairs
//! (`bench-congestion`'s canaries and congestors, the incast and its victim): the roster
//! of every rank's host and listening address, connections that announce themselves with
//! an 8-byte header (rank, kind), 8 B ping-pong and 128 KiB transfers answered with 8 B
//! (GPCNeT's random-ring latency and bandwidth), the far end that echoes or counts, and
//! the figures of a histogram of them.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bootstrap::gang::Gang;
use results::congestion::CanaryFigures;
use results::{HostInfo, LatencyHistogram};
use serde::{Deserialize, Serialize};

/// One rank as the others reach it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Peer {
    /// Its host facts.
    pub host: HostInfo,
    /// Where its flow listener is.
    pub addr: SocketAddr,
}

/// Binds this rank's listener (to `bind`, else every address) and gathers every rank's
/// host facts and the address it is reached at (`bind`, else its host name's address,
/// else loopback).
pub fn roster(gang: &mut dyn Gang, bind: Option<IpAddr>) -> Result<(TcpListener, Vec<Peer>)> {
    let mut host = probe::host::collect();
    host.rank = Some(gang.rank());
    let any = bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let listener = TcpListener::bind((any, 0)).with_context(|| format!("binding {any}"))?;
    let port = listener.local_addr()?.port();
    let advertise = p2p::coordinator::advertised_ip(bind, &host.hostname)
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let me = Peer {
        host,
        addr: SocketAddr::new(advertise, port),
    };
    let peers = gang
        .all_gather(&serde_json::to_vec(&me)?, "host facts and addresses")?
        .iter()
        .map(|b| base::wire::decode_json(b).context("a rank sent an unreadable roster entry"))
        .collect::<Result<_>>()?;
    Ok((listener, peers))
}

/// Opens a connection from `rank` to `to` (from `bind` when given) and announces it with
/// its header: the rank, then the kind.
pub fn connect(
    rank: u32,
    kind: u32,
    to: SocketAddr,
    bind: Option<IpAddr>,
    timeout: Duration,
) -> Result<TcpStream> {
    let mut s = base::sockets::connect_from(to, bind, timeout)?;
    s.set_nodelay(true)?;
    let mut hdr = [0u8; 8];
    hdr[..4].copy_from_slice(&rank.to_le_bytes());
    hdr[4..].copy_from_slice(&kind.to_le_bytes());
    s.write_all(&hdr)?;
    Ok(s)
}

/// The canaries' ping-pong message (GPCNeT: 8 B random-ring latency).
pub const LAT_BYTES: usize = 8;
/// The canaries' bandwidth transfer (GPCNeT: 128 KiB random-ring bandwidth).
pub const BW_BYTES: usize = 128 * 1024;
/// Kinds of connection, in the second half of its 8-byte header.
pub const KIND_LAT: u32 = 0;
/// A bandwidth flow (128 KiB messages).
pub const KIND_BW: u32 = 1;
/// Congestor links carry `KIND_CONGEST + group` (the connecting end sends).
pub const KIND_CONGEST: u32 = 16;
/// Congestor links whose far end sends carry `KIND_SOURCE + group`: over TCP a get is the
/// reader connecting and the root streaming to it until the reader closes.
pub const KIND_SOURCE: u32 = 32;
/// A congestor's message (GPCNeT: 4 KiB all-to-all, incast, puts and gets).
pub const CONGEST_BYTES: usize = 4096;

/// What each congestor sink received: (group, bytes, time of the last byte).
pub type Sinks = Arc<Mutex<Vec<(u32, u64, Option<Instant>)>>>;

/// The far end of a connection: echo 8 B pings, acknowledge 128 KiB transfers with 8 B,
/// count what congestors send, stream to a reader. Ends at the peer's close (or the idle
/// timeout: the read timeout the caller set).
pub fn serve(kind: u32, mut s: TcpStream, received: Sinks) {
    match kind {
        k if k >= KIND_SOURCE => {
            // A shaped link drains slowly: short write timeouts, so a reader that went
            // away is noticed within the idle timeout even when no write fails.
            let idle = s
                .read_timeout()
                .ok()
                .flatten()
                .unwrap_or(Duration::from_secs(60));
            let _ = s.set_write_timeout(Some(Duration::from_millis(50)));
            let msg = vec![0x3cu8; CONGEST_BYTES];
            let mut ok = Instant::now();
            loop {
                match s.write(&msg) {
                    Ok(_) => ok = Instant::now(),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        if ok.elapsed() > idle {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        }
        KIND_LAT | KIND_BW => {
            let mut buf = vec![
                0u8;
                if kind == KIND_LAT {
                    LAT_BYTES
                } else {
                    BW_BYTES
                }
            ];
            while s.read_exact(&mut buf).is_ok() {
                if s.write_all(&buf[..LAT_BYTES]).is_err() {
                    break;
                }
            }
        }
        _ => {
            let mut buf = vec![0u8; 64 * 1024];
            let (mut bytes, mut last) = (0u64, None);
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                bytes += n as u64;
                last = Some(Instant::now());
            }
            received
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((kind - KIND_CONGEST, bytes, last));
        }
    }
}

/// A reader of a TCP get: counts what the root streams until `until`, then resets the
/// connection (linger 0), so the congestion ends then. Returns the bytes and the time of
/// the last one.
pub fn read_until(mut s: TcpStream, until: Instant) -> (u64, Option<Instant>) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = vec![0u8; 64 * 1024];
    let (mut bytes, mut last) = (0u64, None);
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                bytes += n as u64;
                last = Some(Instant::now());
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
    (bytes, last)
}

/// Sends `size` bytes and waits for the 8-byte answer, until `deadline`; one sample per
/// round trip, and at least one (a window that an earlier test overran still gives a
/// figure, not an empty histogram whose mean would be 0/0).
pub fn ping_pong(mut s: &TcpStream, size: usize, deadline: Instant) -> Result<LatencyHistogram> {
    let msg = vec![0x5au8; size];
    let mut ack = [0u8; LAT_BYTES];
    let mut h = LatencyHistogram::new();
    loop {
        let t = Instant::now();
        s.write_all(&msg).context("canary send")?;
        s.read_exact(&mut ack).context("canary answer")?;
        h.record(t.elapsed().as_nanos() as u64);
        if Instant::now() >= deadline {
            break;
        }
    }
    Ok(h)
}

/// The RDMA ports of this host, for counter snapshots (none without RDMA hardware).
pub fn ports_of(host: &HostInfo) -> Vec<(String, u32)> {
    host.rdma_devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d.name.clone(), p.port)))
        .collect()
}

/// A canary's figures from its samples: latency percentiles, or (`bandwidth`) the rate
/// each sample's message moved at.
pub fn figures(h: &LatencyHistogram, bandwidth: bool) -> CanaryFigures {
    figures_of(
        h,
        h.summary_us().mean * 1e3,
        &|q| h.value_at_quantile_ns(q) as f64,
        bandwidth,
    )
}

/// Several canaries' figures, each canary weighing the same, as GPCNeT's do: the mean of
/// the canaries' means, and the quantiles of the canaries' distributions mixed in equal
/// shares. GPCNeT runs a fixed count of operations on every rank; these phases are bounded
/// by time, so a canary on a fast hop records more samples than one on a slow hop, and a
/// merge of the samples would lean to the fast hops (a ring of two fast and two slow hops
/// measured x1.7 where its slow hops measured x2000). Canaries that recorded nothing are
/// left out. `merged` is every sample, kept in the document.
pub fn figures_per_canary(
    canaries: &[LatencyHistogram],
    merged: &LatencyHistogram,
    bandwidth: bool,
) -> CanaryFigures {
    let live: Vec<&LatencyHistogram> = canaries.iter().filter(|h| !h.is_empty()).collect();
    if live.len() < 2 {
        return figures(merged, bandwidth);
    }
    let mean_ns = live.iter().map(|h| h.summary_us().mean * 1e3).sum::<f64>() / live.len() as f64;
    let mix = equal_mix(&live);
    let quantile = |q: f64| {
        mix.iter()
            .find(|(_, cum)| *cum >= q - 1e-12)
            .or(mix.last())
            .map_or(f64::NAN, |(v, _)| *v as f64)
    };
    let mut f = figures_of(merged, mean_ns, &quantile, bandwidth);
    f.samples = merged.len();
    f
}

/// The canaries' samples as one distribution where each canary weighs the same: every
/// recorded value with the cumulative share at and below it.
fn equal_mix(live: &[&LatencyHistogram]) -> Vec<(u64, f64)> {
    let share = 1.0 / live.len() as f64;
    let mut points: Vec<(u64, f64)> = live
        .iter()
        .flat_map(|h| {
            let n = h.len() as f64;
            h.buckets()
                .into_iter()
                .map(move |(v, c)| (v, share * c as f64 / n))
        })
        .collect();
    points.sort_by_key(|p| p.0);
    let mut cum = 0.0;
    for p in &mut points {
        cum += p.1;
        p.1 = cum;
    }
    points
}

/// The figures from a mean and a quantile function (ns) of one distribution.
fn figures_of(
    h: &LatencyHistogram,
    mean_ns: f64,
    quantile: &dyn Fn(f64) -> f64,
    bandwidth: bool,
) -> CanaryFigures {
    let p99_ns = quantile(0.99);
    let bits = (BW_BYTES * 8) as f64;
    if bandwidth {
        CanaryFigures {
            samples: h.len(),
            mean: bits / mean_ns,
            p50: None,
            p99: bits / p99_ns,
            p999: None,
            histogram: h.encode(),
        }
    } else {
        CanaryFigures {
            samples: h.len(),
            mean: mean_ns / 1e3,
            p50: Some(quantile(0.5) / 1e3),
            p99: p99_ns / 1e3,
            p999: Some(quantile(0.999) / 1e3),
            histogram: h.encode(),
        }
    }
}

/// Accepts `expected` connections within `deadline`; each is returned with the kind its
/// header announced.
pub fn accept_all(
    l: &TcpListener,
    expected: usize,
    deadline: Instant,
) -> Result<Vec<(u32, TcpStream)>> {
    l.set_nonblocking(true)?;
    let mut out = Vec::new();
    while out.len() < expected {
        match l.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(
                    deadline
                        .saturating_duration_since(Instant::now())
                        .max(Duration::from_millis(1)),
                ))?;
                let mut hdr = [0u8; 8];
                s.read_exact(&mut hdr)
                    .context("reading a connection's header")?;
                let kind = u32::from_le_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
                out.push((kind, s));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    bail!("only {} of {expected} peers connected in time", out.len());
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e).context("accepting a peer"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canary(us: u64, n: u64) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for _ in 0..n {
            h.record(us * 1000);
        }
        h
    }

    /// A canary on a fast hop (1000 samples of 10 us) and one on a slow hop (10 samples
    /// of 1000 us): merged, the slow hop is 1 % of the samples and vanishes from the mean
    /// and the p99; each canary weighing the same, the mean is halfway and the p99 is the
    /// slow hop's, as GPCNeT (a fixed count per rank) would say.
    #[test]
    fn each_canary_weighs_the_same_whatever_its_sample_count() {
        let each = [canary(10, 1000), canary(1000, 10)];
        let mut merged = LatencyHistogram::new();
        each.iter().for_each(|h| merged.merge(h));
        let by_sample = figures(&merged, false);
        assert!(by_sample.mean < 20.0, "{}", by_sample.mean);
        assert!(by_sample.p99 < 11.0, "{}", by_sample.p99);
        let f = figures_per_canary(&each, &merged, false);
        assert!((f.mean - 505.0).abs() < 1.0, "{}", f.mean);
        assert!((f.p99 - 1000.0).abs() < 1.0, "{}", f.p99);
        assert!((f.p50.unwrap() - 10.0).abs() < 0.1, "{:?}", f.p50);
        assert_eq!(f.samples, 1010);
        // Bandwidth: 128 KiB over the mean of the canaries' mean transfer times.
        let bw = figures_per_canary(&each, &merged, true);
        let want = (BW_BYTES * 8) as f64 / 505_000.0;
        assert!(
            (bw.mean - want).abs() / want < 1e-3,
            "{} vs {want}",
            bw.mean
        );
        // A canary that recorded nothing is left out; one canary is its own figures.
        let one = figures_per_canary(
            &[canary(10, 5), LatencyHistogram::new()],
            &canary(10, 5),
            false,
        );
        assert!((one.mean - 10.0).abs() < 0.1, "{}", one.mean);
    }
}
