//! Endpoints: the types every transport shares (options, ops, roles, what a side reports)
//! and the two traits the measured loops are written against.
//!
//! The benchmarks' loops are written once against two small traits, [`LatencyEndpoint`]
//! (ping-pong) and [`BandwidthEndpoint`] (streaming with messages in flight); each transport
//! implements them. Endpoints are made ready per test size by [`connect_latency`] /
//! [`connect_bandwidth`], which exchange endpoint info over the control link (`base::link::PeerLink`)
//! and return a ready, connected endpoint, so nothing but the measured operation remains
//! for the loop. What a transport can keep from one size to the next lives in the pair's
//! [`Connection`]: verbs connects once per pair and re-arms between sizes.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::gpu::GpuOptions;
use base::clock::LoopClock;
use results::peak::MessageStamps;
use results::{CounterDeltas, MemorySide, MemoryUse, PortCounters};

/// Verbs settings from the command line (perftest's `-d -i -x -m -I -e -R` and bench-bw's
/// `--check`), and the buffers' memory (`--use-cuda`, `--host-dmabuf`). Carried by every
/// plan; the TCP transport uses only `check` and `gpu` (staging through pinned memory).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerbsOptions {
    /// RDMA device name (`-d`); `None`: the first with an ACTIVE port.
    pub device: Option<String>,
    /// Device port (`-i`), counted from 1.
    pub port: u8,
    /// GID index (`-x`); `None`: the RoCE v2 GID with an IPv4-mapped address.
    pub gid_index: Option<u32>,
    /// Path MTU in bytes (`-m`); `None`: the port's active MTU.
    pub mtu: Option<u32>,
    /// Largest message put inline in the work request (`-I`); `None`: the default.
    pub inline_size: Option<u32>,
    /// Sleep on completion events instead of busy polling (`-e`).
    pub events: bool,
    /// Connect through rdma_cm (`-R`).
    pub rdma_cm: bool,
    /// Fill the source with a pattern and count wrong bytes at the end (bench-bw `--check`).
    pub check: bool,
    /// GPU buffers (`--use-cuda`): verbs registers GPU memory with the NIC (GPUDirect
    /// RDMA), TCP stages every message through pinned host memory. Resolved at start-up
    /// by `gpudirect::prepare`.
    #[serde(default)]
    pub gpu: Option<GpuOptions>,
    /// Host buffers exported as a dma-buf and registered with `ibv_reg_dmabuf_mr`
    /// (`--host-dmabuf`): the dma-buf path without a GPU.
    #[serde(default)]
    pub host_dmabuf: bool,
    /// TCP (`--src-port`): stream i of a pair leaves from source port `src_port + i`, so a
    /// test can pick which ECMP path each flow hashes onto; `None`: the kernel's choice.
    #[serde(default)]
    pub src_port: Option<u16>,
    /// Register the data buffers without IBV_ACCESS_RELAXED_ORDERING
    /// (`--disable-pcie-relaxed`, perftest's name); by default they take it, as perftest's do.
    #[serde(default)]
    pub disable_pcie_relaxed: bool,
    /// GRH traffic class of the QPs (`-T`/`--tclass`): DSCP and ECN on RoCE v2.
    #[serde(default)]
    pub tclass: u8,
    /// Service level of the QPs' address vector (`-S`/`--sl`), 0..15.
    #[serde(default)]
    pub sl: u8,
    /// Streaming bandwidth: one request in this many asks for a completion (`-Q`,
    /// perftest's `--cq-mod`); `None`: perftest's choice for the size (100, 1 above 8 KiB,
    /// the post list's length with `-l`).
    #[serde(default)]
    pub cq_mod: Option<u32>,
    /// Streaming bandwidth: requests chained in one `ibv_post_send` (`-l`, perftest's
    /// `--post_list`); `None`: one at a time.
    #[serde(default)]
    pub post_list: Option<u32>,
}

/// perftest's default completion moderation (`DEF_CQ_MOD`): one signaled request in 100.
pub const CQ_MOD: u64 = 100;
/// Above this message size perftest signals every request (`MSG_SIZE_CQ_MOD_LIMIT`): with
/// large messages, completions are rare anyway, and refilling the queue one message at a
/// time as each completes keeps the wire paced instead of posting bursts of 100 large
/// messages (which overflow Soft-RoCE's queues into retransmission storms).
pub const CQ_MOD_SIZE_LIMIT: u64 = 8192;

impl VerbsOptions {
    /// The completion moderation of streaming `size`-byte messages `depth` deep, as
    /// perftest settles it: what `-Q` asked for, else the post list's length when `-l`
    /// chains requests (each chain then ends signaled), else one in [`CQ_MOD`], or every
    /// request above [`CQ_MOD_SIZE_LIMIT`]; never more than the queue depth (a queue that
    /// holds fewer requests than one completion accounts for would wait forever).
    /// perftest applies the size rule to a single `-s` size and keeps 100 for every size
    /// of `-a`; here it applies to each size of `-a` too, so a sweep's large sizes are
    /// timed as a single-size run of that size is.
    pub fn moderation(&self, size: u64, depth: u64) -> u64 {
        let list = u64::from(self.post_list.unwrap_or(1));
        let m = match self.cq_mod {
            Some(q) => u64::from(q),
            None if list > 1 => list,
            None if size > CQ_MOD_SIZE_LIMIT => 1,
            None => CQ_MOD,
        };
        m.clamp(1, depth.max(1))
    }
}

/// What one side reports after a size: its device counter deltas and, with `--check`, the
/// bytes it found wrong. The responder sends its report to the initiator over the
/// control link after the timed loop, so nothing of this happens inside it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SideReport {
    pub counters: Option<PortCounters>,
    pub check_wrong_bytes: Option<u64>,
    /// Where this side's buffers lived (`None`: plain host memory).
    #[serde(default)]
    pub memory: Option<MemorySide>,
    /// What this side received on each data stream, counted where it arrived (TCP): the
    /// figures of the direction toward this side and of each flow. Empty where the
    /// transport does not count per stream (verbs counts its own completions instead).
    #[serde(default)]
    pub received: Vec<StreamReceipt>,
    /// What this side's timed loop sent on each queue pair (verbs), with the identity that
    /// picks its ECMP path; the loop's time is the side's own.
    #[serde(default)]
    pub sent: Vec<QpSent>,
}

/// One queue pair's share of a side's timed loop (verbs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QpSent {
    /// QP index within the pair (0-based).
    pub index: u32,
    /// This side's QP number.
    pub qp_num: u32,
    /// The GRH flow label its packets carried (RoCE); `None` when routed by LID.
    pub flow_label: Option<u32>,
    /// Messages of this QP completed in the timed loop.
    pub messages: u64,
}

/// One data stream as its receiver counted it: the bytes that arrived and how long they
/// took, from the first byte to the end of the stream, on the receiver's clock. Counting
/// at the receiver keeps bytes still queued in the sender's socket buffer out of the
/// figure (on a slow direction they are megabytes, seconds of wire time).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamReceipt {
    /// Stream index within the pair (0-based, the initiator's connection order).
    pub index: u32,
    /// The sender's source port: with the addresses, what an L4 ECMP hash sees.
    pub sender_port: u16,
    /// Bytes received, warm-up included (the time covers them too).
    pub bytes: u64,
    /// First byte to end of stream.
    pub seconds: f64,
}

/// Initiator: both sides' counters as the result's `counters` field (`None` when neither
/// side has any, e.g. over TCP).
pub fn counter_deltas(mine: &SideReport, theirs: &SideReport) -> Option<CounterDeltas> {
    if mine.counters.is_none() && theirs.counters.is_none() {
        return None;
    }
    Some(CounterDeltas {
        initiator: mine.counters.clone(),
        responder: theirs.counters.clone(),
    })
}

/// Initiator: both sides' buffers as the result's `memory` field (`None` when both used
/// plain host memory, so host-memory documents stay as they were).
pub fn memory_use(mine: &SideReport, theirs: &SideReport) -> Option<MemoryUse> {
    if mine.memory.is_none() && theirs.memory.is_none() {
        return None;
    }
    let host = || MemorySide {
        kind: "host".into(),
        path: "host".into(),
        ..Default::default()
    };
    Some(MemoryUse {
        initiator: Some(mine.memory.clone().unwrap_or_else(host)),
        responder: Some(theirs.memory.clone().unwrap_or_else(host)),
    })
}

/// Initiator: wrong bytes found by either side (`None` when nobody checked).
pub fn check_wrong_bytes(mine: &SideReport, theirs: &SideReport) -> Option<u64> {
    match (mine.check_wrong_bytes, theirs.check_wrong_bytes) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

/// Transport the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportChoice {
    /// verbs when an RDMA device is present, tcp otherwise (and say which).
    Auto,
    Tcp,
    Verbs,
}

base::named_enum!(TransportChoice { Auto => "auto", Tcp => "tcp", Verbs => "verbs" });

/// Transport actually used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportKind {
    Tcp,
    Verbs,
}

impl TransportKind {
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Tcp => "tcp",
            TransportKind::Verbs => "verbs",
        }
    }
}

/// The operation under test, as perftest names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Two-sided send/receive (TCP: write/read on a socket).
    Send,
    /// One-sided RDMA write (verbs only).
    Write,
    /// One-sided RDMA read (verbs only).
    Read,
    /// GPU copy baseline (bench-bw): pinned host memory to the GPU (`--use-cuda N`).
    H2d,
    /// GPU copy baseline: the GPU to pinned host memory.
    D2h,
    /// GPU copy baseline: within one GPU's memory.
    D2d,
    /// GPU copy baseline: from the GPU to every other GPU and back.
    P2p,
}

base::named_enum!(Op {
    Send => "send",
    Write => "write",
    Read => "read",
    H2d => "h2d",
    D2h => "d2h",
    D2d => "d2d",
    P2p => "p2p",
});

impl Op {
    /// A GPU copy baseline (one process, no peer, no transport).
    pub fn is_copy(self) -> bool {
        matches!(self, Op::H2d | Op::D2h | Op::D2d | Op::P2p)
    }
}

/// Which end of the pair this process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// perftest's client: drives the loop and owns the clock.
    Initiator,
    /// perftest's server: answers pings, receives streams, exposes memory.
    Responder,
}

/// Settings an endpoint needs, fixed for one test size.
#[derive(Debug, Clone)]
pub struct EndpointSpec {
    pub op: Op,
    pub role: Role,
    pub size: u64,
    /// The largest size the pair will measure: verbs registers its memory once, for it.
    pub largest: u64,
    /// Parallel streams (TCP connections, queue pairs).
    pub streams: u32,
    /// Messages in flight per stream.
    pub tx_depth: u32,
    pub bidirectional: bool,
    /// Longest wait for the peer anywhere (connection set-up, a reply, a completion).
    pub timeout: Duration,
    /// Address to listen on / advertise for data connections.
    pub local_ip: IpAddr,
    /// Verbs settings (device, port, GID, MTU, inline, events, check).
    pub verbs: VerbsOptions,
    /// Timed messages to send over all streams (`None` in duration mode): `-n` per stream
    /// times the streams, as perftest posts `-n` on each QP. A streaming endpoint that
    /// keeps many in flight stops posting there, so the count is exact.
    pub iterations: Option<u64>,
}

/// Ping-pong, driven by the initiator.
pub trait LatencyEndpoint {
    /// Initiator: one round trip (send `size` bytes, wait for the peer's `size` bytes).
    fn ping(&mut self) -> Result<()>;
    /// Responder: wait for one message and answer it. `Ok(false)` when the initiator has
    /// finished (after its [`finish`](Self::finish)).
    fn pong(&mut self) -> Result<bool>;
    /// Initiator, after the timed loop: tell the responder the test is over.
    fn finish(&mut self) -> Result<()>;
    /// After the test (both sides): counter deltas since the endpoint was connected.
    fn side_report(&mut self) -> Result<SideReport> {
        Ok(SideReport::default())
    }
}

/// Streaming transfer with messages in flight.
pub trait BandwidthEndpoint {
    /// Sender: advance the transfer by posting what fits and reaping completions; returns
    /// how many messages completed. Called in the timed loop, so it does nothing else.
    fn step(&mut self) -> Result<u64>;
    /// Sender, after the timed loop: wait until every message posted has arrived at the
    /// peer (and, when bidirectional, until the peer's stream has ended). Returns messages
    /// received from the peer (0 unless bidirectional).
    fn finish(&mut self) -> Result<u64>;
    /// Passive responder (unidirectional tests): take part until the sender finishes.
    /// Returns the bytes received.
    fn serve(&mut self) -> Result<u64>;
    /// Sender, after the warm-up: wait until every warm-up message has completed, so the
    /// timed loop starts with an empty pipe (perftest's iteration mode).
    fn quiesce(&mut self) -> Result<()> {
        Ok(())
    }
    /// Sender, after [`finish`](Self::finish): messages of its own that completed inside
    /// `finish` (posted in the loop, still in flight when it ended). Their time is in the
    /// measured interval, so they count.
    fn drained(&self) -> u64 {
        0
    }
    /// Whether a completion means the peer has the data (RC verbs: the adapter completes
    /// a request when the peer's acknowledgement is back). Then the timed loop's last
    /// clock read, right after the final completion was reaped, ends the measurement, as
    /// perftest stamps it; the closing exchange in [`finish`](Self::finish) is not timed,
    /// and in duration mode what completes after the window does not count. A TCP write
    /// completes into the kernel's buffer, so its measurement ends in `finish`, when the
    /// receiver has acknowledged every byte.
    fn complete_when_reaped(&self) -> bool {
        false
    }
    /// After the test (both sides): counter deltas since the endpoint was connected and,
    /// with `--check`, the wrong bytes this side found in what it received.
    fn side_report(&mut self) -> Result<SideReport> {
        Ok(SideReport::default())
    }
    /// Sender, after [`quiesce`](Self::quiesce): stamp on `clock` the post and the
    /// completion of each of the next `messages` timed messages, as perftest's `tposted`
    /// and `tcompleted`, for its BW peak ([`results::peak`]). Only verbs takes them: an RC
    /// completion says a message arrived, a TCP write only that the kernel took it.
    fn stamp_messages(&mut self, _clock: &LoopClock, _messages: u64) {}
    /// The stamps taken since [`stamp_messages`](Self::stamp_messages), once the loop is
    /// over; `None` when none were.
    fn take_stamps(&mut self) -> Option<MessageStamps> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(cq_mod: Option<u32>, post_list: Option<u32>) -> VerbsOptions {
        VerbsOptions {
            cq_mod,
            post_list,
            ..Default::default()
        }
    }

    #[test]
    fn moderation_is_settled_as_perftest_settles_it() {
        // Defaults: one in 100, every request above 8 KiB.
        assert_eq!(with(None, None).moderation(8192, 128), 100);
        assert_eq!(with(None, None).moderation(8193, 128), 1);
        // Never deeper than the queue.
        assert_eq!(with(None, None).moderation(64, 16), 16);
        assert_eq!(with(Some(500), None).moderation(64, 128), 128);
        // -Q wins over the size rule (perftest warns, and so does bench-bw).
        assert_eq!(with(Some(10), None).moderation(1 << 20, 128), 10);
        // -l without -Q: the chain's length, also above 8 KiB (perftest's order).
        assert_eq!(with(None, Some(8)).moderation(64, 128), 8);
        assert_eq!(with(None, Some(8)).moderation(65536, 128), 8);
        assert_eq!(with(Some(4), Some(8)).moderation(64, 128), 4);
        // 0 asked never reaches the loop as "never signal".
        assert_eq!(with(Some(0), None).moderation(64, 128), 1);
    }
}
