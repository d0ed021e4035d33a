//! TCP, the baseline RDMA is sold against: one kernel socket per stream, `TCP_NODELAY` so a
//! ping leaves at once (as sockperf does), blocking calls with a timeout so a dead peer is
//! an error, not a hang: a peer that moves no byte for `--timeout` ends the test within a
//! quarter of `--timeout` more ([`DataStream`]).
//!
//! Each test size gets fresh data connections to a listener the responder opens on an
//! ephemeral port and announces over the control link. A connection must open with a
//! token from that announcement, so a stray client on the port cannot join a measurement.
//!
//! With `--use-cuda` the messages live in GPU memory and every one is staged through pinned
//! host memory: copied device-to-host before the socket sends it and host-to-device after
//! the socket received it ([`StagedBuffer`]). That is what moving GPU data costs on a
//! fabric without GPUDirect, the baseline a GPUDirect result is put beside.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::{BandwidthEndpoint, EndpointSpec, LatencyEndpoint, Role, SideReport, StreamReceipt};
use crate::gpu::{pattern_bytes, wrong_bytes, StageMaker, StagedBuffer};
use base::link::{recv_json, send_json, PeerLink};
use results::MemorySide;

const DATA_MAGIC: &[u8; 4] = b"FBDT";
/// Receive buffer for streams: large reads keep the receiver from being the bottleneck
/// whatever the message size (TCP has no message boundaries).
const RECV_CHUNK: usize = 256 << 10;
/// How many slices of `--timeout` a data connection's blocking call waits in ([`DataStream`]).
const STALL_SLICES: u32 = 4;

/// A data connection whose blocking calls wait for the peer in slices of `--timeout`.
///
/// The kernel's socket timeouts (`SO_SNDTIMEO`, `SO_RCVTIMEO`) bound one call, and a send
/// that moved part of a message before its timeout returns that part as a success: with
/// the whole `--timeout` per call, a peer that stopped mid-message was named only after up
/// to twice `--timeout` (the call that filled the buffers, then the next). Here each call
/// waits a slice, a call that moved anything counts as progress, and only `STALL_SLICES`
/// slices in a row without a byte end it: a stall is named between `--timeout` and a
/// slice more. The normal path is the same single system call.
struct DataStream(TcpStream);

impl DataStream {
    fn new(s: TcpStream, timeout: Duration) -> std::io::Result<Self> {
        let slice = (timeout / STALL_SLICES).max(Duration::from_millis(1));
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(slice))?;
        s.set_write_timeout(Some(slice))?;
        Ok(Self(s))
    }

    fn try_clone(&self) -> std::io::Result<Self> {
        self.0.try_clone().map(Self)
    }
}

impl std::ops::Deref for DataStream {
    type Target = TcpStream;
    fn deref(&self) -> &TcpStream {
        &self.0
    }
}

impl Read for DataStream {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        patiently(|| self.0.read(buf))
    }
}

impl Write for DataStream {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        patiently(|| self.0.write(buf))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Runs a socket call again while it times out without a byte, up to `STALL_SLICES`
/// slices; its first result with bytes, an error, or the last timeout is the answer.
#[inline(always)]
fn patiently(mut call: impl FnMut() -> std::io::Result<usize>) -> std::io::Result<usize> {
    let mut slices = 1;
    loop {
        match call() {
            Err(e)
                if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
                    && slices < STALL_SLICES =>
            {
                slices += 1;
            }
            r => return r,
        }
    }
}

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

/// The staging buffers `spec` asks for: GPU memory through pinned host memory with
/// `--use-cuda`, none otherwise.
fn stage_maker(spec: &EndpointSpec) -> Result<Option<Box<dyn StageMaker>>> {
    match &spec.verbs.gpu {
        None => Ok(None),
        Some(g) => cuda_stage_maker(g).map(Some),
    }
}

#[cfg(feature = "cuda")]
fn cuda_stage_maker(g: &crate::gpu::GpuOptions) -> Result<Box<dyn StageMaker>> {
    let r = g
        .resolved
        .as_ref()
        .ok_or_else(|| anyhow!("internal error: GPU options were not resolved at start-up"))?;
    Ok(Box::new(crate::cuda::memory::CudaStageMaker::new(
        r.ordinal,
        g.side(Some("staged")),
    )?))
}

#[cfg(not(feature = "cuda"))]
fn cuda_stage_maker(_: &crate::gpu::GpuOptions) -> Result<Box<dyn StageMaker>> {
    bail!("this binary was built without CUDA support (cargo feature `cuda`): leave out --use-cuda")
}

/// A source stage holding stream 0's `--check` pattern in device memory.
fn source_stage(maker: &dyn StageMaker, size: usize) -> Result<Box<dyn StagedBuffer>> {
    let mut st = maker.make(size)?;
    st.write_device(&pattern_bytes(0, size))?;
    Ok(st)
}

/// Wrong bytes in a stage's device memory against stream 0's pattern.
fn stage_wrong(st: &mut dyn StagedBuffer, size: usize) -> Result<u64> {
    let mut got = vec![0u8; size];
    st.read_device(&mut got)?;
    Ok(wrong_bytes(0, &got))
}

fn io_err(e: anyhow::Error) -> std::io::Error {
    std::io::Error::other(format!("{e:#}"))
}

/// The initiator's data connection number `i`: from the kernel's choice of source port,
/// or from `--src-port` + i so each flow's 5-tuple, and with it its ECMP path, is chosen.
fn connect_stream(spec: &EndpointSpec, to: SocketAddr, i: usize) -> Result<TcpStream> {
    let hint = "(firewall? wrong --bind-addr?)";
    match spec.verbs.src_port {
        None => base::sockets::connect_from(to, Some(spec.local_ip), spec.timeout)
            .with_context(|| format!("connecting the data stream to the peer at {to} {hint}")),
        Some(base) => {
            let port = flow_port(base, i)?;
            base::sockets::connect_from_port(to, spec.local_ip, port, spec.timeout).with_context(
                || {
                    format!(
                        "connecting data stream {i} from source port {port} to the peer at {to} \
                         (another process or pair holds that port? pick another --src-port) {hint}"
                    )
                },
            )
        }
    }
}

/// Source port of stream `i` under `--src-port BASE`: BASE + i, which must stay a port.
pub fn flow_port(base: u16, i: usize) -> Result<u16> {
    u16::try_from(usize::from(base) + i)
        .ok()
        .filter(|&p| p != 0)
        .ok_or_else(|| {
            anyhow!("--src-port {base} with stream {i} passes port 65535: pick a lower --src-port")
        })
}

/// Opens `spec.streams` data connections between the pair, in the initiator's order on
/// both sides (each connection's hello carries its index).
fn establish(spec: &EndpointSpec, link: &mut dyn PeerLink) -> Result<Vec<DataStream>> {
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
                .map(|i| {
                    let mut s = connect_stream(spec, info.addr, i)?;
                    let mut hello = DATA_MAGIC.to_vec();
                    hello.extend_from_slice(&info.token.to_be_bytes());
                    hello.extend_from_slice(&(i as u32).to_be_bytes());
                    s.write_all(&hello)?;
                    Ok(s)
                })
                .collect::<Result<Vec<_>>>()?
        }
    };
    Ok(streams
        .into_iter()
        .map(|s| DataStream::new(s, spec.timeout))
        .collect::<std::io::Result<_>>()?)
}

fn accept_streams(
    listener: &TcpListener,
    n: usize,
    token: u64,
    timeout: Duration,
) -> Result<Vec<TcpStream>> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + timeout;
    let mut streams: Vec<(u32, TcpStream)> = Vec::with_capacity(n);
    while streams.len() < n {
        match listener.accept() {
            Ok((mut s, from)) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(timeout.min(Duration::from_secs(5))))?;
                let mut hello = [0u8; 16];
                let ok = s.read_exact(&mut hello).is_ok()
                    && &hello[..4] == DATA_MAGIC
                    && hello[4..12] == token.to_be_bytes();
                let index = u32::from_be_bytes([hello[12], hello[13], hello[14], hello[15]]);
                if ok && (index as usize) < n && !streams.iter().any(|(i, _)| *i == index) {
                    streams.push((index, s));
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
    streams.sort_by_key(|(i, _)| *i);
    Ok(streams.into_iter().map(|(_, s)| s).collect())
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

/// The bytes a message lives in on the host: the stage's pinned memory, or `buf`.
#[inline(always)]
fn message<'a>(stage: &'a mut Option<Box<dyn StagedBuffer>>, buf: &'a mut [u8]) -> &'a mut [u8] {
    match stage {
        Some(st) => st.host(),
        None => buf,
    }
}

/// Reads one whole message into `msg`; `Ok(false)` at a clean end (EOF at a message
/// boundary, which the first read tells apart from a message).
#[inline(always)]
fn read_message(s: &mut DataStream, msg: &mut [u8]) -> std::io::Result<bool> {
    let got = loop {
        match s.read(msg) {
            Ok(n) => break n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    };
    if got == 0 {
        return Ok(false);
    }
    s.read_exact(&mut msg[got..])?;
    Ok(true)
}

/// Ping-pong over one TCP connection.
pub struct TcpLatency {
    stream: DataStream,
    buf: Vec<u8>,
    timeout: Duration,
    /// `--use-cuda`: the message lives in GPU memory, staged through pinned host memory
    /// (then `buf` is unused).
    stage: Option<Box<dyn StagedBuffer>>,
    memory: Option<MemorySide>,
}

impl TcpLatency {
    pub fn connect(spec: &EndpointSpec, link: &mut dyn PeerLink) -> Result<Self> {
        let maker = stage_maker(spec)?;
        Self::connect_with(spec, link, maker.as_deref())
    }

    /// Connects with staging buffers from `maker` (`None`: plain host memory).
    pub fn connect_with(
        spec: &EndpointSpec,
        link: &mut dyn PeerLink,
        maker: Option<&dyn StageMaker>,
    ) -> Result<Self> {
        let single = EndpointSpec {
            streams: 1,
            ..spec.clone()
        };
        let size = spec.size.max(1) as usize;
        let stage = maker.map(|m| source_stage(m, size)).transpose()?;
        let stream = establish(&single, link)?.pop().expect("one stream");
        Ok(Self {
            stream,
            buf: vec![0xa5; if stage.is_some() { 0 } else { size }],
            timeout: spec.timeout,
            stage,
            memory: maker.map(|m| m.side()),
        })
    }
}

impl LatencyEndpoint for TcpLatency {
    #[inline]
    fn ping(&mut self) -> Result<()> {
        let Self {
            stream,
            buf,
            stage,
            timeout,
            ..
        } = self;
        if let Some(st) = stage.as_mut() {
            st.download()?;
        }
        let msg = message(stage, buf);
        stream
            .write_all(msg)
            .and_then(|_| stream.read_exact(msg))
            .map_err(|e| peer_error(e, *timeout, "waiting for a pong"))?;
        if let Some(st) = stage.as_mut() {
            st.upload()?;
        }
        Ok(())
    }

    #[inline]
    fn pong(&mut self) -> Result<bool> {
        let Self {
            stream,
            buf,
            stage,
            timeout,
            ..
        } = self;
        if !read_message(stream, message(stage, buf))
            .map_err(|e| peer_error(e, *timeout, "waiting for a ping"))?
        {
            return Ok(false);
        }
        if let Some(st) = stage.as_mut() {
            // The echo goes back out through the GPU, as a staged fabric would move it.
            st.upload()?;
            st.download()?;
        }
        stream
            .write_all(message(stage, buf))
            .map_err(|e| peer_error(e, *timeout, "answering a ping"))?;
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

    fn side_report(&mut self) -> Result<SideReport> {
        Ok(SideReport {
            memory: self.memory.clone(),
            ..Default::default()
        })
    }
}

/// Streams of `size`-byte messages over one or more connections.
pub struct TcpBandwidth {
    streams: Vec<DataStream>,
    next: usize,
    buf: Vec<u8>,
    size: usize,
    timeout: Duration,
    bidirectional: bool,
    /// Bidirectional: threads counting what the peer sends, until its end of stream.
    receivers: Vec<JoinHandle<std::io::Result<Drained>>>,
    /// `--use-cuda`: the sending side's message in GPU memory, staged out before each send.
    source: Option<Box<dyn StagedBuffer>>,
    maker: Option<Box<dyn StageMaker>>,
    /// Receiving side's stages after the stream ended (for `--check`).
    received: Vec<Box<dyn StagedBuffer>>,
    /// What arrived on each stream, counted here (for the direction and flow figures).
    receipts: Vec<StreamReceipt>,
    check: bool,
}

/// What a receiving thread hands back.
struct Drained {
    bytes: u64,
    /// First byte to end of stream, on this side's clock.
    seconds: f64,
    /// The sender's port, read while the connection was up (after both ends closed the
    /// kernel no longer answers for the peer).
    sender_port: u16,
    stream: DataStream,
    stage: Option<Box<dyn StagedBuffer>>,
}

impl Drained {
    /// This stream as its receiver counted it (stream `index` of the pair).
    fn receipt(&self, index: usize) -> StreamReceipt {
        StreamReceipt {
            index: index as u32,
            sender_port: self.sender_port,
            bytes: self.bytes,
            seconds: self.seconds,
        }
    }
}

/// Reads a stream to its end, counting bytes and timing them from the first byte. With a
/// stage, reads whole messages into its pinned host memory and copies each into the GPU,
/// as a staged receiver must.
fn drain(mut s: DataStream, mut stage: Option<Box<dyn StagedBuffer>>) -> std::io::Result<Drained> {
    let sender_port = s.peer_addr()?.port();
    let mut total = 0u64;
    let mut first: Option<Instant> = None;
    match stage.as_mut() {
        None => {
            let mut buf = vec![0u8; RECV_CHUNK];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        first.get_or_insert_with(Instant::now);
                        total += n as u64;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Some(st) => {
            while read_message(&mut s, st.host())? {
                first.get_or_insert_with(Instant::now);
                total += st.host().len() as u64;
                st.upload().map_err(io_err)?;
            }
        }
    }
    Ok(Drained {
        bytes: total,
        seconds: first.map_or(0.0, |t| t.elapsed().as_secs_f64()),
        sender_port,
        stream: s,
        stage,
    })
}

impl TcpBandwidth {
    pub fn connect(spec: &EndpointSpec, link: &mut dyn PeerLink) -> Result<Self> {
        let maker = stage_maker(spec)?;
        Self::connect_with(spec, link, maker)
    }

    /// Connects with staging buffers from `maker` (`None`: plain host memory).
    pub fn connect_with(
        spec: &EndpointSpec,
        link: &mut dyn PeerLink,
        maker: Option<Box<dyn StageMaker>>,
    ) -> Result<Self> {
        let size = spec.size.max(1) as usize;
        let sends = spec.role == Role::Initiator || spec.bidirectional;
        let source = match (&maker, sends) {
            (Some(m), true) => Some(source_stage(m.as_ref(), size)?),
            _ => None,
        };
        let mut receivers = Vec::new();
        let streams = if spec.bidirectional {
            // Each direction on connections of its own, as iperf3 --bidir does: data both
            // ways on one connection would carry one direction's acknowledgements behind
            // the other's data, so a slow direction would slow the other too. The first
            // `streams` connections carry the initiator's data, the rest the responder's.
            let n = spec.streams.max(1) as usize;
            let both = EndpointSpec {
                streams: 2 * n as u32,
                ..spec.clone()
            };
            let mut all = establish(&both, link)?;
            let theirs = all.split_off(n);
            let (send, recv) = match spec.role {
                Role::Initiator => (all, theirs),
                Role::Responder => (theirs, all),
            };
            for r in recv {
                let stage = maker.as_ref().map(|m| m.make(size)).transpose()?;
                receivers.push(std::thread::spawn(move || drain(r, stage)));
            }
            send
        } else {
            establish(spec, link)?
        };
        Ok(Self {
            streams,
            next: 0,
            buf: vec![0x5a; if source.is_some() { 0 } else { size }],
            size,
            timeout: spec.timeout,
            bidirectional: spec.bidirectional,
            receivers,
            source,
            maker,
            received: Vec::new(),
            receipts: Vec::new(),
            check: spec.verbs.check,
        })
    }
}

impl BandwidthEndpoint for TcpBandwidth {
    #[inline]
    fn step(&mut self) -> Result<u64> {
        let s = &mut self.streams[self.next];
        let msg = match self.source.as_mut() {
            Some(st) => {
                st.download()?;
                st.host()
            }
            None => &mut self.buf[..],
        };
        s.write_all(msg)
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
            for (i, h) in self.receivers.drain(..).enumerate() {
                let d = h
                    .join()
                    .map_err(|_| anyhow!("receiver thread panicked"))?
                    .map_err(|e| peer_error(e, self.timeout, "receiving the peer's stream"))?;
                bytes += d.bytes;
                self.receipts.push(d.receipt(i));
                self.received.extend(d.stage);
            }
            return Ok(bytes / self.size as u64);
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
        let mut handles = Vec::new();
        for s in &self.streams {
            let s = s.try_clone()?;
            let stage = self.maker.as_ref().map(|m| m.make(self.size)).transpose()?;
            handles.push(std::thread::spawn(move || drain(s, stage)));
        }
        let mut total = 0;
        for (i, h) in handles.into_iter().enumerate() {
            let mut d = h
                .join()
                .map_err(|_| anyhow!("receiver thread panicked"))?
                .map_err(|e| peer_error(e, self.timeout, "receiving the stream"))?;
            d.stream
                .write_all(&d.bytes.to_be_bytes())
                .map_err(|e| peer_error(e, self.timeout, "acknowledging the stream"))?;
            total += d.bytes;
            self.receipts.push(d.receipt(i));
            self.received.extend(d.stage);
        }
        Ok(total)
    }

    fn side_report(&mut self) -> Result<SideReport> {
        let mut wrong = None;
        if self.check && !self.received.is_empty() {
            let mut n = 0;
            for st in &mut self.received {
                n += stage_wrong(st.as_mut(), self.size)?;
            }
            wrong = Some(n);
        }
        Ok(SideReport {
            check_wrong_bytes: wrong,
            memory: self.maker.as_ref().map(|m| m.side()),
            received: self.receipts.clone(),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    //! The staging path over real loopback sockets, with host memory standing in for the
    //! GPU behind the same [`StagedBuffer`] interface (the CUDA implementation only swaps
    //! the copies for cuMemcpy between device and pinned memory).
    use std::net::Ipv4Addr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::{channel, Receiver, Sender};
    use std::sync::Arc;

    use super::*;
    use crate::endpoint::{Op, VerbsOptions};
    use crate::gpu::{HostStage, HostStageMaker};

    /// A control link between two threads of one test.
    struct ChannelLink {
        tx: Sender<Vec<u8>>,
        rx: Receiver<Vec<u8>>,
    }

    impl PeerLink for ChannelLink {
        fn send(&mut self, payload: &[u8]) -> Result<()> {
            self.tx
                .send(payload.to_vec())
                .map_err(|_| anyhow!("peer gone"))
        }
        fn recv(&mut self) -> Result<Vec<u8>> {
            self.rx
                .recv_timeout(Duration::from_secs(20))
                .map_err(|_| anyhow!("no message from the peer"))
        }
        fn local_ip(&self) -> Option<std::net::IpAddr> {
            None
        }
    }

    fn links() -> (ChannelLink, ChannelLink) {
        let (a_tx, b_rx) = channel();
        let (b_tx, a_rx) = channel();
        (
            ChannelLink { tx: a_tx, rx: a_rx },
            ChannelLink { tx: b_tx, rx: b_rx },
        )
    }

    fn spec(role: Role, size: u64, streams: u32, bidirectional: bool) -> EndpointSpec {
        EndpointSpec {
            op: Op::Send,
            role,
            size,
            largest: size,
            streams,
            tx_depth: 1,
            bidirectional,
            timeout: Duration::from_secs(20),
            local_ip: Ipv4Addr::LOCALHOST.into(),
            verbs: VerbsOptions {
                check: true,
                ..Default::default()
            },
            iterations: None,
        }
    }

    /// Host staging that counts its copies; `broken` skips the device-to-host copy, as a
    /// staging bug would.
    struct Counting {
        inner: HostStage,
        downloads: Arc<AtomicUsize>,
        uploads: Arc<AtomicUsize>,
        broken: bool,
    }

    impl StagedBuffer for Counting {
        fn host(&mut self) -> &mut [u8] {
            self.inner.host()
        }
        fn download(&mut self) -> Result<()> {
            self.downloads.fetch_add(1, Ordering::Relaxed);
            if self.broken {
                return Ok(());
            }
            self.inner.download()
        }
        fn upload(&mut self) -> Result<()> {
            self.uploads.fetch_add(1, Ordering::Relaxed);
            self.inner.upload()
        }
        fn write_device(&mut self, data: &[u8]) -> Result<()> {
            self.inner.write_device(data)
        }
        fn read_device(&mut self, out: &mut [u8]) -> Result<()> {
            self.inner.read_device(out)
        }
    }

    #[derive(Clone, Default)]
    struct CountingMaker {
        downloads: Arc<AtomicUsize>,
        uploads: Arc<AtomicUsize>,
        broken: bool,
    }

    impl StageMaker for CountingMaker {
        fn make(&self, size: usize) -> Result<Box<dyn StagedBuffer>> {
            Ok(Box::new(Counting {
                inner: HostStage::new(size),
                downloads: self.downloads.clone(),
                uploads: self.uploads.clone(),
                broken: self.broken,
            }))
        }
        fn side(&self) -> MemorySide {
            HostStageMaker.side()
        }
    }

    /// Streams `n` messages of `size` bytes over `streams` connections, both sides
    /// staging; returns (responder's bytes, responder's report, initiator's report).
    fn stream(
        size: u64,
        streams: u32,
        n: u64,
        sender: CountingMaker,
        receiver: CountingMaker,
    ) -> (u64, SideReport, SideReport) {
        let (mut a, mut b) = links();
        let server = std::thread::spawn(move || {
            let mut ep = TcpBandwidth::connect_with(
                &spec(Role::Responder, size, streams, false),
                &mut b,
                Some(Box::new(receiver)),
            )
            .unwrap();
            let bytes = ep.serve().unwrap();
            (bytes, ep.side_report().unwrap())
        });
        let mut ep = TcpBandwidth::connect_with(
            &spec(Role::Initiator, size, streams, false),
            &mut a,
            Some(Box::new(sender)),
        )
        .unwrap();
        for _ in 0..n {
            ep.step().unwrap();
        }
        ep.finish().unwrap();
        let mine = ep.side_report().unwrap();
        let (bytes, theirs) = server.join().unwrap();
        (bytes, theirs, mine)
    }

    #[test]
    fn staged_stream_copies_every_message_and_checks_clean() {
        let (send, recv) = (CountingMaker::default(), CountingMaker::default());
        let (bytes, theirs, mine) = stream(100_000, 2, 50, send.clone(), recv.clone());
        assert_eq!(bytes, 50 * 100_000);
        assert_eq!(
            send.downloads.load(Ordering::Relaxed),
            50,
            "one D2H per message sent"
        );
        assert_eq!(
            recv.uploads.load(Ordering::Relaxed),
            50,
            "one H2D per message received"
        );
        assert_eq!(theirs.check_wrong_bytes, Some(0));
        assert_eq!(
            mine.check_wrong_bytes, None,
            "the sender has nothing to check"
        );
        let m = theirs.memory.unwrap();
        assert_eq!(m.path, "staged");
    }

    #[test]
    fn a_stage_that_skips_its_copy_is_caught_by_the_check() {
        let broken = CountingMaker {
            broken: true,
            ..Default::default()
        };
        let (_, theirs, _) = stream(4096, 1, 10, broken, CountingMaker::default());
        assert_eq!(
            theirs.check_wrong_bytes,
            Some(4096),
            "zeros arrived, not the pattern"
        );
    }

    #[test]
    fn staged_ping_pong_goes_through_both_gpus_each_round() {
        let (mut a, mut b) = links();
        let (cli, srv) = (CountingMaker::default(), CountingMaker::default());
        let srv2 = srv.clone();
        let server = std::thread::spawn(move || {
            let mut ep = TcpLatency::connect_with(
                &spec(Role::Responder, 1000, 1, false),
                &mut b,
                Some(&srv2),
            )
            .unwrap();
            let mut pongs = 0;
            while ep.pong().unwrap() {
                pongs += 1;
            }
            pongs
        });
        let mut ep =
            TcpLatency::connect_with(&spec(Role::Initiator, 1000, 1, false), &mut a, Some(&cli))
                .unwrap();
        for _ in 0..20 {
            ep.ping().unwrap();
        }
        ep.finish().unwrap();
        assert_eq!(server.join().unwrap(), 20);
        for m in [&cli, &srv] {
            assert_eq!(m.downloads.load(Ordering::Relaxed), 20);
            assert_eq!(m.uploads.load(Ordering::Relaxed), 20);
        }
        assert_eq!(ep.side_report().unwrap().memory.unwrap().path, "staged");
    }

    #[test]
    fn staged_bidirectional_checks_both_directions() {
        let (mut a, mut b) = links();
        let server = std::thread::spawn(move || {
            let mut ep = TcpBandwidth::connect_with(
                &spec(Role::Responder, 8192, 1, true),
                &mut b,
                Some(Box::new(HostStageMaker)),
            )
            .unwrap();
            for _ in 0..30 {
                ep.step().unwrap();
            }
            let got = ep.finish().unwrap();
            (got, ep.side_report().unwrap())
        });
        let mut ep = TcpBandwidth::connect_with(
            &spec(Role::Initiator, 8192, 1, true),
            &mut a,
            Some(Box::new(HostStageMaker)),
        )
        .unwrap();
        for _ in 0..30 {
            ep.step().unwrap();
        }
        assert_eq!(ep.finish().unwrap(), 30);
        assert_eq!(ep.side_report().unwrap().check_wrong_bytes, Some(0));
        let (got, report) = server.join().unwrap();
        assert_eq!(got, 30);
        assert_eq!(report.check_wrong_bytes, Some(0));
    }

    #[test]
    fn ping_pong_and_a_stream_over_loopback() {
        // Latency: three round trips, then the initiator's end reaches the responder.
        let (mut a, mut b) = links();
        let resp = std::thread::spawn(move || {
            let mut ep = TcpLatency::connect(&spec(Role::Responder, 64, 1, false), &mut b).unwrap();
            let mut pongs = 0;
            while ep.pong().unwrap() {
                pongs += 1;
            }
            pongs
        });
        let mut ep = TcpLatency::connect(&spec(Role::Initiator, 64, 1, false), &mut a).unwrap();
        for _ in 0..3 {
            ep.ping().unwrap();
        }
        ep.finish().unwrap();
        assert_eq!(resp.join().unwrap(), 3);

        // Bandwidth over two streams: everything the sender counts, the receiver received.
        let (mut a, mut b) = links();
        let plain = |role| {
            let mut sp = spec(role, 4096, 2, false);
            sp.verbs.check = false;
            sp
        };
        let (si, sr) = (plain(Role::Initiator), plain(Role::Responder));
        let resp = std::thread::spawn(move || {
            let mut ep = TcpBandwidth::connect(&sr, &mut b).unwrap();
            ep.serve().unwrap()
        });
        let mut ep = TcpBandwidth::connect(&si, &mut a).unwrap();
        let mut sent = 0;
        for _ in 0..100 {
            sent += ep.step().unwrap();
        }
        ep.finish().unwrap();
        assert_eq!(sent, 100);
        assert_eq!(resp.join().unwrap(), 100 * 4096, "bytes received");
    }

    /// A peer that stops reading mid-message (hung, or SIGSTOPped) is named once nothing
    /// moved for `--timeout`. Its kernel still takes bytes for a while (about a second on
    /// loopback here, in parts, as it squeezes its queue), so the bound is counted from the
    /// last of them: under twice the timeout from the start here. With the whole timeout
    /// per system call it took at least twice as long: the call that filled the buffers
    /// returned its part at the timeout as a success and the next waited it again.
    #[test]
    fn a_peer_that_stops_reading_is_named_within_a_slice_of_the_timeout() {
        let timeout = Duration::from_secs(4);
        let with = |role| EndpointSpec {
            timeout,
            ..spec(role, 64 << 20, 1, false)
        };
        let (mut a, mut b) = links();
        let (si, sr) = (with(Role::Initiator), with(Role::Responder));
        let (done, wait) = channel::<()>();
        let resp = std::thread::spawn(move || {
            let ep = TcpBandwidth::connect(&sr, &mut b).unwrap();
            let _ = wait.recv_timeout(Duration::from_secs(30));
            drop(ep);
        });
        let mut ep = TcpBandwidth::connect(&si, &mut a).unwrap();
        let started = Instant::now();
        let e = loop {
            if let Err(e) = ep.step() {
                break e.to_string();
            }
        };
        let took = started.elapsed();
        done.send(()).unwrap();
        resp.join().unwrap();
        assert!(e.contains("no progress from the peer for 4 s"), "{e}");
        assert!(
            took >= timeout && took < 2 * timeout,
            "named after {took:?} with --timeout {timeout:?}"
        );
    }

    #[test]
    fn a_peer_that_goes_away_is_an_error_not_a_hang() {
        let (mut a, mut b) = links();
        let resp = std::thread::spawn(move || {
            // Connects, then leaves without answering a single ping.
            TcpLatency::connect(&spec(Role::Responder, 8, 1, false), &mut b).map(|_| ())
        });
        let mut ep = TcpLatency::connect(&spec(Role::Initiator, 8, 1, false), &mut a).unwrap();
        resp.join().unwrap().unwrap();
        let e = ep.ping().unwrap_err().to_string();
        assert!(e.contains("closed the connection"), "{e}");
    }
}
