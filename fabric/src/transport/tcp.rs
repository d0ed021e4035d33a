//! TCP, the baseline RDMA is sold against: one kernel socket per stream, `TCP_NODELAY` so a
//! ping leaves at once (as sockperf does), blocking calls with a timeout so a dead peer is
//! an error, not a hang.
//!
//! Each test size gets fresh data connections to a listener the responder opens on an
//! ephemeral port and announces over the control link. A connection must open with a
//! token from that announcement, so a stray client on the port cannot join a measurement.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::{BandwidthEndpoint, EndpointSpec, LatencyEndpoint, Role};
use crate::bootstrap::{recv_json, send_json, PeerLink};

const DATA_MAGIC: &[u8; 4] = b"FBDT";
/// Receive buffer for streams: large reads keep the receiver from being the bottleneck
/// whatever the message size (TCP has no message boundaries).
const RECV_CHUNK: usize = 256 << 10;

#[derive(Debug, Serialize, Deserialize)]
struct DataListener {
    addr: SocketAddr,
    token: u64,
}

fn token() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15
}

/// Opens `spec.streams` data connections between the pair.
fn establish(spec: &EndpointSpec, link: &mut dyn PeerLink) -> Result<Vec<TcpStream>> {
    let n = spec.streams.max(1) as usize;
    let streams = match spec.role {
        Role::Responder => {
            let listener = TcpListener::bind(SocketAddr::new(spec.local_ip, 0))
                .with_context(|| format!("opening a data listener on {}", spec.local_ip))?;
            let info = DataListener {
                addr: listener.local_addr()?,
                token: token(),
            };
            send_json(link, &info)?;
            accept_streams(&listener, n, info.token, spec.timeout)?
        }
        Role::Initiator => {
            let info: DataListener = recv_json(link)?;
            (0..n)
                .map(|_| {
                    let mut s = crate::sockets::connect_from(info.addr, Some(spec.local_ip), spec.timeout).with_context(|| {
                        format!(
                            "connecting the data stream to the peer at {} (firewall? wrong --bind-addr?)",
                            info.addr
                        )
                    })?;
                    let mut hello = DATA_MAGIC.to_vec();
                    hello.extend_from_slice(&info.token.to_be_bytes());
                    s.write_all(&hello)?;
                    Ok(s)
                })
                .collect::<Result<Vec<_>>>()?
        }
    };
    for s in &streams {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(spec.timeout))?;
        s.set_write_timeout(Some(spec.timeout))?;
    }
    Ok(streams)
}

fn accept_streams(
    listener: &TcpListener,
    n: usize,
    token: u64,
    timeout: Duration,
) -> Result<Vec<TcpStream>> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + timeout;
    let mut streams = Vec::with_capacity(n);
    while streams.len() < n {
        match listener.accept() {
            Ok((mut s, from)) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(timeout.min(Duration::from_secs(5))))?;
                let mut hello = [0u8; 12];
                let ok = s.read_exact(&mut hello).is_ok()
                    && &hello[..4] == DATA_MAGIC
                    && hello[4..] == token.to_be_bytes();
                if ok {
                    streams.push(s);
                } else {
                    eprintln!("ignored a data connection from {from} without the session token");
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    bail!(
                        "the peer opened {} of {n} data connections within {} s",
                        streams.len(),
                        timeout.as_secs_f64()
                    );
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e).context("accepting a data connection"),
        }
    }
    Ok(streams)
}

/// Turns a socket error inside a test into a sentence about the peer.
fn peer_error(e: std::io::Error, timeout: Duration, doing: &str) -> anyhow::Error {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => anyhow!(
            "no progress from the peer for {} s while {doing}: it died or hangs (raise --timeout if it is only slow)",
            timeout.as_secs_f64()
        ),
        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => {
            anyhow!("the peer closed the connection while {doing}: it exited or was killed")
        }
        _ => anyhow!("{doing}: {e}"),
    }
}

/// Ping-pong over one TCP connection.
pub struct TcpLatency {
    stream: TcpStream,
    buf: Vec<u8>,
    timeout: Duration,
}

impl TcpLatency {
    pub fn connect(spec: &EndpointSpec, link: &mut dyn PeerLink) -> Result<Self> {
        let single = EndpointSpec {
            streams: 1,
            ..spec.clone()
        };
        let stream = establish(&single, link)?.pop().expect("one stream");
        Ok(Self {
            stream,
            buf: vec![0xa5; spec.size.max(1) as usize],
            timeout: spec.timeout,
        })
    }
}

impl LatencyEndpoint for TcpLatency {
    #[inline]
    fn ping(&mut self) -> Result<()> {
        self.stream
            .write_all(&self.buf)
            .and_then(|_| self.stream.read_exact(&mut self.buf))
            .map_err(|e| peer_error(e, self.timeout, "waiting for a pong"))
    }

    #[inline]
    fn pong(&mut self) -> Result<bool> {
        // The first read tells a clean end (EOF at a message boundary) from a message.
        let got = loop {
            match self.stream.read(&mut self.buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(peer_error(e, self.timeout, "waiting for a ping")),
            }
        };
        if got == 0 {
            return Ok(false);
        }
        self.stream
            .read_exact(&mut self.buf[got..])
            .and_then(|_| self.stream.write_all(&self.buf))
            .map_err(|e| peer_error(e, self.timeout, "answering a ping"))?;
        Ok(true)
    }

    fn finish(&mut self) -> Result<()> {
        self.stream.shutdown(Shutdown::Write)?;
        // Wait for the responder to see the end and close: the next test then starts clean.
        let mut rest = Vec::new();
        self.stream
            .read_to_end(&mut rest)
            .map_err(|e| peer_error(e, self.timeout, "closing the ping-pong"))?;
        Ok(())
    }
}

/// Streams of `size`-byte messages over one or more connections.
pub struct TcpBandwidth {
    streams: Vec<TcpStream>,
    next: usize,
    buf: Vec<u8>,
    timeout: Duration,
    bidirectional: bool,
    /// Bidirectional: threads counting what the peer sends, until its end of stream.
    receivers: Vec<JoinHandle<std::io::Result<u64>>>,
}

/// Reads a stream to its end, counting bytes.
fn drain(mut s: TcpStream) -> std::io::Result<(u64, TcpStream)> {
    let mut buf = vec![0u8; RECV_CHUNK];
    let mut total = 0u64;
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok((total, s)),
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

impl TcpBandwidth {
    pub fn connect(spec: &EndpointSpec, link: &mut dyn PeerLink) -> Result<Self> {
        let streams = establish(spec, link)?;
        let mut receivers = Vec::new();
        if spec.bidirectional {
            for s in &streams {
                let r = s.try_clone()?;
                receivers.push(std::thread::spawn(move || drain(r).map(|(n, _)| n)));
            }
        }
        Ok(Self {
            streams,
            next: 0,
            buf: vec![0x5a; spec.size.max(1) as usize],
            timeout: spec.timeout,
            bidirectional: spec.bidirectional,
            receivers,
        })
    }
}

impl BandwidthEndpoint for TcpBandwidth {
    #[inline]
    fn step(&mut self) -> Result<u64> {
        let s = &mut self.streams[self.next];
        s.write_all(&self.buf)
            .map_err(|e| peer_error(e, self.timeout, "streaming to the peer"))?;
        self.next += 1;
        if self.next == self.streams.len() {
            self.next = 0;
        }
        Ok(1)
    }

    fn finish(&mut self) -> Result<u64> {
        for s in &self.streams {
            s.shutdown(Shutdown::Write)?;
        }
        if self.bidirectional {
            let mut bytes = 0;
            for h in self.receivers.drain(..) {
                bytes += h
                    .join()
                    .map_err(|_| anyhow!("receiver thread panicked"))?
                    .map_err(|e| peer_error(e, self.timeout, "receiving the peer's stream"))?;
            }
            return Ok(bytes / self.buf.len() as u64);
        }
        // The receiver acknowledges with its byte count once it has read everything, so
        // the sender's clock stops when the data has arrived, not when it left.
        for s in &mut self.streams {
            let mut ack = [0u8; 8];
            s.read_exact(&mut ack).map_err(|e| {
                peer_error(
                    e,
                    self.timeout,
                    "waiting for the receiver's acknowledgement",
                )
            })?;
        }
        Ok(0)
    }

    fn serve(&mut self) -> Result<u64> {
        let handles: Vec<_> = self
            .streams
            .iter()
            .map(|s| s.try_clone().map(|s| std::thread::spawn(move || drain(s))))
            .collect::<std::io::Result<_>>()?;
        let mut total = 0;
        for h in handles {
            let (n, mut s) = h
                .join()
                .map_err(|_| anyhow!("receiver thread panicked"))?
                .map_err(|e| peer_error(e, self.timeout, "receiving the stream"))?;
            s.write_all(&n.to_be_bytes())
                .map_err(|e| peer_error(e, self.timeout, "acknowledging the stream"))?;
            total += n;
        }
        Ok(total)
    }
}
