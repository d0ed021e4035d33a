//! The measuring flows the canaries and the incast's victim share: 8 B ping-pong and
//! 128 KiB transfers answered with 8 B (GPCNeT's random-ring latency and bandwidth over
//! TCP), the far end that echoes or counts, and the figures of a histogram of them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};
use results::congestion::CanaryFigures;
use results::{HostInfo, LatencyHistogram};

/// The canaries' ping-pong message (GPCNeT: 8 B random-ring latency).
pub(crate) const LAT_BYTES: usize = 8;
/// The canaries' bandwidth transfer (GPCNeT: 128 KiB random-ring bandwidth).
pub(crate) const BW_BYTES: usize = 128 * 1024;
/// Kinds of connection, in the second half of its 8-byte header.
pub(crate) const KIND_LAT: u32 = 0;
pub(crate) const KIND_BW: u32 = 1;
/// Congestor links carry `KIND_CONGEST + group`.
pub(crate) const KIND_CONGEST: u32 = 16;

/// What each congestor sink received: (group, bytes, time of the last byte).
pub(crate) type Sinks = Arc<Mutex<Vec<(u32, u64, Option<Instant>)>>>;

/// The far end of a connection: echo 8 B pings, acknowledge 128 KiB transfers with 8 B,
/// count what congestors send. Ends at the peer's close (or the idle timeout).
pub(crate) fn serve(kind: u32, mut s: TcpStream, received: Sinks) {
    match kind {
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
                .unwrap()
                .push((kind - KIND_CONGEST, bytes, last));
        }
    }
}

/// Sends `size` bytes and waits for the 8-byte answer, until `deadline`; one sample per
/// round trip, and at least one (a window that an earlier test overran still gives a
/// figure, not an empty histogram whose mean would be 0/0).
pub(crate) fn ping_pong(
    mut s: &TcpStream,
    size: usize,
    deadline: Instant,
) -> Result<LatencyHistogram> {
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
pub(crate) fn ports_of(host: &HostInfo) -> Vec<(String, u32)> {
    host.rdma_devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d.name.clone(), p.port)))
        .collect()
}

pub(crate) fn figures(h: &LatencyHistogram, bandwidth: bool) -> CanaryFigures {
    let mean_ns = h.summary_us().mean * 1e3;
    let p99_ns = h.value_at_quantile_ns(0.99) as f64;
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
            p50: Some(h.value_at_quantile_ns(0.5) as f64 / 1e3),
            p99: p99_ns / 1e3,
            p999: Some(h.value_at_quantile_ns(0.999) as f64 / 1e3),
            histogram: h.encode(),
        }
    }
}
