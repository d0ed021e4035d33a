//! The flows of the runs where many ranks meet at once (`bench-congestion`, the incast and
//! its victim) over a transport's endpoints instead of plain sockets: on RDMA verbs a
//! congestor's put is an RDMA WRITE, its get an RDMA READ, its two-sided traffic
//! send/receive, and the canaries ping-pong with sends, as the fabric carries training
//! traffic (lossless class, the NIC's own congestion control), not as TCP would.
//!
//! Each flow has a control connection (the TCP connection `flows::connect` opened, with its
//! header), used as the pair's [`PeerLink`] to exchange the endpoints' info. An endpoint
//! lives on the thread that made it (a verbs session holds the device's objects), so each
//! end of a flow is a thread of its own, driven by commands:
//!
//! ```text
//! initiator (FlowEnd)                              responder (serve)
//!   arm:   Step::Window(shape) -> connect           <- connect (re-armed after the first)
//!   run:   measure until the deadline, then finish  -> pong / serve until that finish
//!   close: Step::Stop                               -> ends
//! ```
//!
//! A window is armed before the barrier that starts it, so connecting is never timed, and
//! only then: a responder waiting on an armed endpoint may spin (two-sided sends), and would
//! take a core from whatever runs before its window. Every wait has the run's timeout.

use std::net::{IpAddr, TcpStream};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use base::link::{recv_json, send_abort, send_json};
use bootstrap::standalone::TcpLink;
use p2p::coordinator::resolve_device;
use p2p::plan::DeviceChoice;
use results::{HostInfo, LatencyHistogram};
use transport::{
    connect_bandwidth, connect_latency, BandwidthEndpoint, Connection, EndpointSpec,
    LatencyEndpoint, Op, Role, TransportKind, VerbsOptions,
};

/// What a flow measures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Shape {
    /// `size`-byte two-sided ping-pong; a sample is one round trip (the canaries' and the
    /// victim's latency).
    Ping {
        /// Bytes each way.
        size: u64,
    },
    /// One `size`-byte message at a time; a sample is the time from one completion to the
    /// next, which with one in flight is a message's transfer and its acknowledgement (the
    /// canaries' and the victim's 128 KiB bandwidth).
    Sample {
        /// The operation (send, RDMA write).
        op: Op,
        /// Bytes a message.
        size: u64,
    },
    /// `size`-byte messages streamed with the transport's default depth (the congestors,
    /// the incast's senders).
    Stream {
        /// The operation (send, RDMA write).
        op: Op,
        /// Bytes a message.
        size: u64,
    },
}

impl Shape {
    fn size(&self) -> u64 {
        match *self {
            Shape::Ping { size } | Shape::Sample { size, .. } | Shape::Stream { size, .. } => size,
        }
    }
}

/// What one window of a flow measured.
#[derive(Debug)]
pub enum Measured {
    /// Ping and Sample: one sample per round trip or message, in ns.
    Samples(LatencyHistogram),
    /// Stream: messages completed by the last completion reaped before the deadline, and
    /// the time from the window's start to that completion (a verbs completion is the
    /// receiver's acknowledgement, so what completed is what arrived).
    Moved {
        /// Messages completed.
        messages: u64,
        /// Their bytes.
        bytes: u64,
        /// From the window's start to the last completion reaped.
        seconds: f64,
    },
}

/// How the flows of a run are carried: the transport and its settings.
#[derive(Debug, Clone)]
pub struct FlowSettings {
    /// The transport (TCP or verbs).
    pub kind: TransportKind,
    /// The verbs options (GID index, MTU, ...) when it is verbs.
    pub verbs: VerbsOptions,
    /// The address this rank's data leaves from (the NIC under test).
    pub local_ip: IpAddr,
    /// Longest wait for the peer inside a window (set-up, a reply, a completion).
    pub timeout: Duration,
}

impl FlowSettings {
    fn spec(&self, shape: Shape, role: Role) -> EndpointSpec {
        let (op, depth) = match shape {
            Shape::Ping { .. } => (Op::Send, 1),
            Shape::Sample { op, .. } => (op, 1),
            // perftest's default tx depth.
            Shape::Stream { op, .. } => (op, 128),
        };
        EndpointSpec {
            op,
            role,
            size: shape.size(),
            largest: shape.size(),
            streams: 1,
            tx_depth: depth,
            bidirectional: false,
            timeout: self.timeout,
            local_ip: self.local_ip,
            verbs: self.verbs.clone(),
            iterations: None,
        }
    }
}

/// How the flows of a many-to-one run move their bytes.
#[derive(Debug, Clone)]
pub enum Carrier {
    /// Plain TCP sockets (`flows`): senders write, receivers count what they read.
    Tcp,
    /// The transport's endpoints (verbs), with the operation the run's data moves with
    /// (an incast's senders, the victim's bandwidth). `devices` (`-d`) is settled per rank
    /// once the roster says its place on its host.
    Endpoints {
        /// The transport and its settings.
        settings: Box<FlowSettings>,
        /// The operation the run's data moves with.
        op: Op,
        /// `-d`, settled per rank.
        devices: DeviceChoice,
    },
}

impl Carrier {
    /// TCP sockets for `kind` TCP; otherwise that transport's endpoints with these settings
    /// (`local_ip` the address data leaves from, unspecified where not bound).
    pub fn of(
        kind: TransportKind,
        verbs: &VerbsOptions,
        op: Op,
        local_ip: Option<IpAddr>,
        timeout: Duration,
        devices: DeviceChoice,
    ) -> Carrier {
        match kind {
            TransportKind::Tcp => Carrier::Tcp,
            kind => Carrier::Endpoints {
                settings: Box::new(FlowSettings {
                    kind,
                    verbs: verbs.clone(),
                    local_ip: local_ip.unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
                    timeout,
                }),
                op,
                devices,
            },
        }
    }

    /// The endpoints' settings and operation; `None` over TCP flows.
    pub fn endpoints(&self) -> Option<(&FlowSettings, Op)> {
        match self {
            Carrier::Tcp => None,
            Carrier::Endpoints { settings, op, .. } => Some((settings, *op)),
        }
    }

    /// Writes the transport and, over verbs, the device settings into a document's options.
    pub fn record(&self, o: &mut serde_json::Map<String, serde_json::Value>) {
        match self {
            Carrier::Tcp => {
                o.insert("transport".into(), "tcp".into());
            }
            Carrier::Endpoints { settings, .. } => {
                o.insert("transport".into(), settings.kind.name().into());
                let v = &settings.verbs;
                if let Some(d) = &v.device {
                    o.insert("ib-dev".into(), d.clone().into());
                }
                o.insert("ib-port".into(), v.port.into());
                if let Some(x) = v.gid_index {
                    o.insert("gid-index".into(), x.into());
                }
            }
        }
    }

    /// This rank's carrier: its device chosen by its local rank (the ranks before it on
    /// its host) and checked as a test would.
    pub fn settled(&self, rank: u32, hosts: &[HostInfo]) -> Result<Carrier> {
        let Carrier::Endpoints {
            settings,
            op,
            devices,
        } = self
        else {
            return Ok(Carrier::Tcp);
        };
        let me = &hosts[rank as usize].hostname;
        let local_rank = hosts[..rank as usize]
            .iter()
            .filter(|h| h.hostname == *me)
            .count() as u32;
        let mut settings = settings.clone();
        let root = probe::inventory::SysRoot::default();
        if let Some(d) = resolve_device(devices, local_rank, &root)? {
            settings.verbs.device = Some(d);
        }
        transport::check_verbs_options(settings.kind, &settings.verbs)?;
        Ok(Carrier::Endpoints {
            settings,
            op: *op,
            devices: devices.clone(),
        })
    }
}

/// Initiator to responder, before each window.
#[derive(Serialize, Deserialize)]
enum Step {
    Window(Shape),
    Stop,
}

enum Cmd {
    Arm,
    Run(Instant),
    Stop,
}

/// The initiator's end of a flow: a thread holding the endpoint, driven by commands.
pub struct FlowEnd {
    cmds: Sender<Cmd>,
    replies: Receiver<Result<Option<Measured>>>,
    thread: Option<JoinHandle<()>>,
    timeout: Duration,
    what: String,
}

impl FlowEnd {
    /// Starts the initiator's thread over `ctrl` (connected, its header sent); nothing is
    /// exchanged until [`arm`](Self::arm). `what` names the flow in errors.
    pub fn open(ctrl: TcpStream, shape: Shape, settings: &FlowSettings, what: String) -> FlowEnd {
        let (cmds, rx) = channel();
        let (tx, replies) = channel();
        let s = settings.clone();
        let thread = std::thread::spawn(move || initiator(ctrl, shape, &s, &rx, &tx));
        FlowEnd {
            cmds,
            replies,
            thread: Some(thread),
            timeout: settings.timeout,
            what,
        }
    }

    /// Asks the flow to connect (or re-arm) its endpoints for the next window; see
    /// [`armed`](Self::armed).
    pub fn arm(&self) {
        let _ = self.cmds.send(Cmd::Arm);
    }

    /// Waits until the flow is armed.
    pub fn armed(&self) -> Result<()> {
        self.reply(self.timeout * 2).map(|_| ())
    }

    /// Starts the armed window; it ends at `deadline` (see [`measured`](Self::measured)).
    pub fn run(&self, deadline: Instant) {
        let _ = self.cmds.send(Cmd::Run(deadline));
    }

    /// Waits for what the window measured.
    pub fn measured(&self, deadline: Instant) -> Result<Measured> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.reply(left + self.timeout * 2)?
            .ok_or_else(|| anyhow!("{}: no measurement came back", self.what))
    }

    fn reply(&self, limit: Duration) -> Result<Option<Measured>> {
        match self.replies.recv_timeout(limit) {
            Ok(r) => r.with_context(|| self.what.clone()),
            Err(RecvTimeoutError::Timeout) => bail!(
                "{}: no answer in {:.0} s (the peer or the transport stalled)",
                self.what,
                limit.as_secs_f64()
            ),
            Err(RecvTimeoutError::Disconnected) => {
                bail!("{}: the flow ended after an earlier error", self.what)
            }
        }
    }

    /// Runs the armed window of a Ping or Sample flow until `deadline`: its samples.
    pub fn samples(&self, deadline: Instant) -> Result<LatencyHistogram> {
        self.run(deadline);
        match self.measured(deadline)? {
            Measured::Samples(h) => Ok(h),
            Measured::Moved { .. } => bail!("internal error: {} streamed", self.what),
        }
    }

    /// Tells the responder the flow is over and waits for the thread.
    pub fn close(self) {
        let FlowEnd { cmds, thread, .. } = self;
        let _ = cmds.send(Cmd::Stop);
        // Without a sender left, any wait of the thread for a command ends too.
        drop(cmds);
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

/// Arms every flow at once and waits for all of them.
pub fn arm_all<'a>(ends: impl IntoIterator<Item = &'a FlowEnd> + Clone) -> Result<()> {
    ends.clone().into_iter().for_each(FlowEnd::arm);
    ends.into_iter().try_for_each(FlowEnd::armed)
}

/// Runs one window on every flow at once, until `deadline`: what each measured, in order.
pub fn run_all<'a>(
    ends: impl IntoIterator<Item = &'a FlowEnd> + Clone,
    deadline: Instant,
) -> Result<Vec<Measured>> {
    ends.clone().into_iter().for_each(|e| e.run(deadline));
    ends.into_iter().map(|e| e.measured(deadline)).collect()
}

/// Waits for a responder thread of [`serve`]: its error, or that it panicked, with `what`.
pub fn join(responder: JoinHandle<Result<()>>, what: &str) -> Result<()> {
    responder
        .join()
        .map_err(|_| anyhow!("{what}: the responder panicked"))?
        .with_context(|| what.to_string())
}

fn initiator(
    ctrl: TcpStream,
    shape: Shape,
    s: &FlowSettings,
    cmds: &Receiver<Cmd>,
    replies: &Sender<Result<Option<Measured>>>,
) {
    let mut link = TcpLink::new(ctrl, s.timeout);
    let mut conn = Connection::default();
    loop {
        match cmds.recv() {
            Ok(Cmd::Arm) => {}
            Ok(Cmd::Run(_)) => {
                let _ = replies.send(Err(anyhow!(
                    "internal error: a window run before it was armed"
                )));
                return;
            }
            Ok(Cmd::Stop) | Err(_) => {
                let _ = send_json(&mut link, &Step::Stop);
                return;
            }
        }
        match window(&mut link, &mut conn, shape, s, cmds, replies) {
            Ok(true) => {}
            // Told to stop while armed: the endpoint finished empty; the responder waits
            // for the next step.
            Ok(false) => {
                let _ = send_json(&mut link, &Step::Stop);
                return;
            }
            Err(e) => {
                send_abort(&mut link, &format!("{e:#}"));
                let _ = replies.send(Err(e));
                return;
            }
        }
    }
}

/// One window on the initiator: arm, say so, wait for the start, measure, finish. False
/// when told to stop (or dropped) instead of starting.
fn window(
    link: &mut TcpLink,
    conn: &mut Connection,
    shape: Shape,
    s: &FlowSettings,
    cmds: &Receiver<Cmd>,
    replies: &Sender<Result<Option<Measured>>>,
) -> Result<bool> {
    send_json(link, &Step::Window(shape))?;
    let spec = s.spec(shape, Role::Initiator);
    // Ok(None) when told to stop instead of starting.
    let start = |replies: &Sender<Result<Option<Measured>>>| -> Option<Instant> {
        let _ = replies.send(Ok(None));
        match cmds.recv() {
            Ok(Cmd::Run(deadline)) => Some(deadline),
            _ => None,
        }
    };
    let measured = match shape {
        Shape::Ping { .. } => {
            let (mut ep, _) = connect_latency(s.kind, &spec, link, conn)?;
            let Some(deadline) = start(replies) else {
                ep.finish()?;
                return Ok(false);
            };
            let h = ping(&mut *ep, deadline)?;
            ep.finish()?;
            Measured::Samples(h)
        }
        Shape::Sample { .. } | Shape::Stream { .. } => {
            let (mut ep, _) = connect_bandwidth(s.kind, &spec, link, conn)?;
            ep.quiesce()?;
            let Some(deadline) = start(replies) else {
                ep.finish()?;
                return Ok(false);
            };
            let m = match shape {
                Shape::Sample { .. } => Measured::Samples(sample(&mut *ep, deadline)?),
                _ => stream(&mut *ep, shape.size(), deadline)?,
            };
            ep.finish()?;
            m
        }
    };
    let _ = replies.send(Ok(Some(measured)));
    Ok(true)
}

/// Round trips until `deadline`, at least one (a window an earlier test overran still
/// gives a figure).
fn ping(ep: &mut dyn LatencyEndpoint, deadline: Instant) -> Result<LatencyHistogram> {
    let mut h = LatencyHistogram::new();
    loop {
        let t = Instant::now();
        ep.ping()?;
        h.record(t.elapsed().as_nanos() as u64);
        if Instant::now() >= deadline {
            return Ok(h);
        }
    }
}

/// One message in flight until `deadline`: each completion closes a sample that began
/// at the one before (the endpoint posts the next message in the same step that reaps).
fn sample(ep: &mut dyn BandwidthEndpoint, deadline: Instant) -> Result<LatencyHistogram> {
    let mut h = LatencyHistogram::new();
    let mut last = Instant::now();
    loop {
        let done = ep.step()?;
        if done == 0 {
            continue;
        }
        let now = Instant::now();
        if let Some(each) = ((now - last).as_nanos() as u64).checked_div(done) {
            h.record(each);
        }
        last = now;
        if now >= deadline {
            return Ok(h);
        }
    }
}

/// Streams until `deadline`; what completed by the last completion reaped, and when.
fn stream(ep: &mut dyn BandwidthEndpoint, size: u64, deadline: Instant) -> Result<Measured> {
    let t0 = Instant::now();
    let (mut messages, mut last) = (0u64, t0);
    while Instant::now() < deadline {
        let done = ep.step()?;
        if done > 0 {
            messages += done;
            last = Instant::now();
        }
    }
    Ok(Measured::Moved {
        messages,
        bytes: messages * size,
        seconds: (last - t0).as_secs_f64(),
    })
}

/// The responder's end of a flow: on a thread of its own, it serves every window the
/// initiator announces until the initiator stops, closes, or is silent for `idle` (the
/// longest gap the caller expects between two windows, plus the timeout).
pub fn serve(ctrl: TcpStream, settings: &FlowSettings, idle: Duration) -> JoinHandle<Result<()>> {
    let s = settings.clone();
    std::thread::spawn(move || {
        let mut link = TcpLink::new(ctrl, idle);
        let mut conn = Connection::default();
        let r = responder(&mut link, &mut conn, &s);
        if let Err(e) = &r {
            send_abort(&mut link, &format!("{e:#}"));
        }
        r
    })
}

fn responder(link: &mut TcpLink, conn: &mut Connection, s: &FlowSettings) -> Result<()> {
    loop {
        let shape = match recv_json::<Step>(link)? {
            Step::Stop => return Ok(()),
            Step::Window(shape) => shape,
        };
        let spec = s.spec(shape, Role::Responder);
        match shape {
            Shape::Ping { .. } => {
                let (mut ep, _) = connect_latency(s.kind, &spec, link, conn)?;
                while ep.pong()? {}
            }
            Shape::Sample { .. } | Shape::Stream { .. } => {
                let (mut ep, _) = connect_bandwidth(s.kind, &spec, link, conn)?;
                ep.serve()?;
            }
        }
    }
}

/// Whether `kind` can carry `shape` here (TCP moves two-sided sends only).
pub fn check_shape(kind: TransportKind, shape: Shape) -> Result<()> {
    let op = match shape {
        Shape::Ping { .. } => Op::Send,
        Shape::Sample { op, .. } | Shape::Stream { op, .. } => op,
    };
    transport::check_supported(kind, op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpListener};

    /// A flow over TCP's endpoints on loopback: the initiator end and the responder thread.
    fn pair(shape: Shape) -> (FlowEnd, JoinHandle<Result<()>>) {
        let settings = FlowSettings {
            kind: TransportKind::Tcp,
            verbs: VerbsOptions::default(),
            local_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            timeout: Duration::from_secs(10),
        };
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let ctrl = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (far, _) = l.accept().unwrap();
        let responder = serve(far, &settings, Duration::from_secs(20));
        (
            FlowEnd::open(ctrl, shape, &settings, "test flow".into()),
            responder,
        )
    }

    /// Ends within `limit` or fails the test (the bug: it never ended).
    fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(limit).expect("it hung")
    }

    #[test]
    fn windows_measure_and_a_closed_flow_ends_both_sides() {
        let (f, responder) = pair(Shape::Stream {
            op: Op::Send,
            size: 4096,
        });
        for _ in 0..2 {
            f.arm();
            f.armed().unwrap();
            let deadline = Instant::now() + Duration::from_millis(100);
            f.run(deadline);
            match f.measured(deadline).unwrap() {
                Measured::Moved {
                    messages,
                    bytes,
                    seconds,
                } => {
                    assert!(messages > 0 && bytes == messages * 4096 && seconds > 0.0);
                }
                other => panic!("a stream measured {other:?}"),
            }
        }
        within(Duration::from_secs(20), move || f.close());
        within(Duration::from_secs(20), move || responder.join().unwrap()).unwrap();

        let (f, responder) = pair(Shape::Ping { size: 8 });
        f.arm();
        f.armed().unwrap();
        let deadline = Instant::now() + Duration::from_millis(50);
        f.run(deadline);
        match f.measured(deadline).unwrap() {
            Measured::Samples(h) => assert!(!h.is_empty()),
            other => panic!("a ping-pong measured {other:?}"),
        }
        within(Duration::from_secs(20), move || f.close());
        within(Duration::from_secs(20), move || responder.join().unwrap()).unwrap();
    }

    /// A flow armed for a window it never runs (the run ended before it) closes without
    /// waiting: before, its thread waited for a command that could no longer come.
    #[test]
    fn an_armed_flow_that_never_runs_closes() {
        let (f, responder) = pair(Shape::Stream {
            op: Op::Send,
            size: 4096,
        });
        f.arm();
        f.armed().unwrap();
        within(Duration::from_secs(20), move || f.close());
        within(Duration::from_secs(20), move || responder.join().unwrap()).unwrap();
    }
}
