//! Streaming bandwidth over verbs, as perftest's `ib_{send,write,read}_bw` stream:
//!
//! Each queue pair keeps `tx_depth` work requests in flight. Only one in 100 asks
//! for a completion (selective signaling: completions cost the adapter a DMA write and the
//! CPU a poll); RC completes a queue's requests in order, so one completion accounts for
//! every request posted before it on that queue. Completions are polled in batches.
//! `-Q` sets the moderation and `-l` posts requests in chains of that many per
//! `ibv_post_send` (one doorbell a chain), both as perftest settles them ([`crate::VerbsOptions::moderation`]).
//!
//! - `send`: the receiver keeps `RX_DEPTH` receives posted per QP and reposts each one it
//!   polls; without one posted, the sender gets an RNR NAK and waits.
//! - `write`/`read`: one-sided; the passive side's CPU only waits for the stop word.
//!
//! The sender ends by draining (a signaled "fence" write covers an unsignaled
//! tail; an 8-byte write into the peer's heartbeat slot), then RDMA-writes its stop word and message count into the peer's control page.
//! With `-b` both sides stream and each learns the other's count from that word.

use std::time::Instant;

use anyhow::Result;
use rdma_sys::*;

use super::cq;
use super::qp::{PostList, Request, SendOp};
use super::session::{self, Session, Shape, CTRL_WR};
use super::RdmaOp;
use crate::endpoint::{BandwidthEndpoint, EndpointSpec, Op, QpSent, Role, SideReport};
use base::clock::LoopClock;
use base::link::PeerLink;
use results::peak::MessageStamps;

/// Receives posted per QP for send (perftest's default rx depth).
const RX_DEPTH: u32 = 512;
/// Completions polled at once.
const BATCH: usize = 16;
/// wr_id layout: QP index in bits 40.., message count in bits 0..40; fences flagged.
const QP_SHIFT: u32 = 40;
const COUNT_MASK: u64 = (1 << QP_SHIFT) - 1;
const FENCE: u64 = 1 << 61;

/// Polls the receive CQ once and reposts each receive it consumed; returns bytes received.
#[inline(always)]
fn recv_and_repost(s: &Session, wcs: &mut [ibv_wc]) -> Result<u64> {
    let n = s.recv_cq.poll(wcs)?;
    let mut bytes = 0;
    for wc in &wcs[..n] {
        cq::check(wc, "receiving the stream")?;
        bytes += u64::from(wc.byte_len);
        s.post_recv(wc.wr_id as usize)?;
    }
    Ok(bytes)
}

pub struct VerbsBandwidth<'a> {
    s: &'a mut Session,
    op: RdmaOp,
    role: Role,
    bidirectional: bool,
    check: bool,
    depth: u64,
    cq_mod: u64,
    /// Requests chained per post (`-l`), and the room for them.
    list: PostList,
    /// Per QP: messages posted, and completed (known from signaled completions).
    posted: Vec<u64>,
    completed: Vec<u64>,
    /// Per QP: `posted` when a fence last went behind its tail (0: none yet). Whether the
    /// last request was signaled follows from its count and the moderation.
    fenced_at: Vec<u64>,
    /// Sum of `completed` when the timed loop started.
    base: u64,
    /// Per QP: `completed` when the timed loop started.
    base_per_qp: Vec<u64>,
    /// Messages the timed loop may post (`u64::MAX` before it and in duration mode), and
    /// how many it has.
    budget: u64,
    limit: u64,
    timed_posted: u64,
    warmup_steps: u64,
    steps: u64,
    drained: u64,
    /// Empty polls in a row, and when the run of them started (stall detection).
    idle: u64,
    idle_since: Option<Instant>,
    wcs: [ibv_wc; BATCH],
    /// perftest's post and completion stamps ([`BandwidthEndpoint::stamp_messages`]), and
    /// how many timed messages they cover and have seen complete.
    stamps: Option<Stamping>,
}

struct Stamping {
    clock: LoopClock,
    messages: u64,
    done: u64,
    stamps: MessageStamps,
}

impl<'a> VerbsBandwidth<'a> {
    /// The pair's session, kept in `kept` from size to size, ready for `spec`; also says
    /// whether it connected anew.
    pub fn connect(
        spec: &EndpointSpec,
        link: &mut dyn PeerLink,
        kept: &'a mut Option<Session>,
    ) -> Result<(Self, bool)> {
        let receives = spec.op == Op::Send && (spec.role == Role::Responder || spec.bidirectional);
        let depth = u64::from(spec.tx_depth.max(1));
        let one_sided = spec.op != Op::Send && !spec.bidirectional;
        let (s, connected) = session::open(
            kept,
            spec,
            Shape {
                qps: spec.streams,
                send_depth: depth as u32,
                recv_depth: if receives { RX_DEPTH } else { 0 },
                default_inline: 0,
                passive: one_sided && spec.role == Role::Responder,
                peer_passive: one_sided && spec.role == Role::Initiator,
                polled: false,
            },
            link,
        )?;
        let n = s.qps.len();
        let me = Self {
            s,
            op: RdmaOp::of(spec.op)?,
            role: spec.role,
            bidirectional: spec.bidirectional,
            check: spec.verbs.check,
            depth,
            cq_mod: spec.verbs.moderation(spec.size, depth),
            list: PostList::new(spec.verbs.post_list.unwrap_or(1) as usize),
            posted: vec![0; n],
            completed: vec![0; n],
            fenced_at: vec![0; n],
            base_per_qp: vec![0; n],
            base: 0,
            budget: u64::MAX,
            limit: spec.iterations.unwrap_or(u64::MAX),
            timed_posted: 0,
            warmup_steps: 0,
            steps: 0,
            drained: 0,
            idle: 0,
            idle_since: None,
            wcs: std::array::from_fn(|_| cq::empty_wc()),
            stamps: None,
        };
        Ok((me, connected))
    }

    fn what(&self) -> &'static str {
        match self.op {
            RdmaOp::Send => "streaming sends",
            RdmaOp::Write => "streaming RDMA writes",
            RdmaOp::Read => "streaming RDMA reads",
        }
    }

    /// Posts the next `n` requests on QP `q` (a chain of them with `-l`) and counts them
    /// against the budget. Request number k of the QP is signaled when the moderation
    /// divides k; a QP's unsignaled tail is covered by a fence ([`Self::fence_tails`]).
    #[inline(always)]
    fn post(&mut self, q: usize, n: u64) -> Result<()> {
        if let Some(st) = &mut self.stamps {
            // perftest stamps before the post, one stamp a chain (its first message).
            if self.timed_posted < st.messages {
                st.stamps.post(self.timed_posted, st.clock.raw());
            }
        }
        let first = self.posted[q] + 1;
        self.posted[q] += n;
        self.timed_posted += n;
        let cq_mod = self.cq_mod;
        let signaled = move |count: u64| count.is_multiple_of(cq_mod);
        let s = &self.s;
        let (op, local, inline) = match self.op {
            RdmaOp::Send => (SendOp::Send, s.src(q), true),
            RdmaOp::Write => (SendOp::Write(s.remote_dst(q)), s.src(q), true),
            RdmaOp::Read => (SendOp::Read(s.remote_src(q)), s.dst(q), false),
        };
        let inline = s.inline(inline);
        let request = |i: u64| Request {
            op,
            local: Some(local),
            signaled: signaled(first + i),
            inline,
            wr_id: ((q as u64) << QP_SHIFT) | (first + i),
        };
        if n == 1 {
            let r = request(0);
            s.qps[q].post_send(r.op, r.local, r.signaled, r.inline, r.wr_id)
        } else {
            s.qps[q].post_send_list(&mut self.list, n as usize, |i| request(i as u64))
        }
    }

    /// Polls the send CQ once; returns the messages newly known complete.
    #[inline(always)]
    fn poll_send(&mut self) -> Result<u64> {
        let n = self.s.send_cq.poll(&mut self.wcs)?;
        let mut done = 0;
        // One read for the batch: perftest reads the clock per completion, right after
        // polling them, so the batch's stamps would differ by the loop's few instructions.
        let now = match &self.stamps {
            Some(st) if n > 0 => st.clock.raw(),
            _ => 0,
        };
        for i in 0..n {
            cq::check(&self.wcs[i], self.what())?;
            let id = self.wcs[i].wr_id;
            if id == CTRL_WR {
                continue;
            }
            let q = ((id & !FENCE) >> QP_SHIFT) as usize;
            let count = id & COUNT_MASK;
            if let Some(c) = self.completed.get_mut(q) {
                if count > *c {
                    let d = count - *c;
                    done += d;
                    *c = count;
                    if let Some(st) = &mut self.stamps {
                        st.done += d;
                        if st.done <= st.messages {
                            st.stamps.complete(st.done - 1, now);
                        }
                    }
                }
            }
        }
        Ok(done)
    }

    /// Polls the receive CQ once and reposts what it consumed; returns bytes received.
    #[inline(always)]
    fn service_recv(&mut self) -> Result<u64> {
        recv_and_repost(self.s, &mut self.wcs)
    }

    fn receives(&self) -> bool {
        self.op == RdmaOp::Send && (self.role == Role::Responder || self.bidirectional)
    }

    /// No progress: sleep on the channel with `-e`, and fail after the timeout.
    #[inline(always)]
    fn idle(&mut self) -> Result<()> {
        self.idle += 1;
        if self.idle & 0xfff == 0 {
            let t = *self.idle_since.get_or_insert_with(Instant::now);
            if t.elapsed() > self.s.timeout {
                let stall = cq::stalled(self.what(), self.s.timeout);
                return Err(anyhow::anyhow!("{stall:#} ({})", self.outstanding()));
            }
        }
        Ok(())
    }

    /// What each QP still waits for, for a stall's message: a queue with requests posted
    /// and none completing points at that QP's path (or the adapter), all of them at the
    /// peer or the port.
    fn outstanding(&self) -> String {
        let per_qp: Vec<String> = (0..self.posted.len())
            .map(|q| {
                format!(
                    "QP {} (qpn {}): {} posted, {} known complete (one signaled in {})",
                    q, self.s.qps[q].qpn, self.posted[q], self.completed[q], self.cq_mod
                )
            })
            .collect();
        format!("at the stall: {}", per_qp.join("; "))
    }

    #[inline(always)]
    fn progress(&mut self) {
        self.idle = 0;
        self.idle_since = None;
    }

    /// Makes the completion of every QP's last request known: a QP whose last request
    /// went unsignaled gets a signaled fence behind it (RC completes in order, so the
    /// fence's completion accounts for the tail). The budget is shared by the QPs, so which
    /// QP posts the last requests, and how many each posts, is only known once the budget
    /// is spent; without this a QP that stopped short of its next signaled request left
    /// the loop waiting for a completion that never comes (seen across the two Soft-RoCE
    /// VMs: QP 0 at 128 posted and 100 known complete, its 28 unsignaled requests long done).
    fn fence_tails(&mut self) -> Result<()> {
        for q in 0..self.posted.len() {
            let (p, c) = (self.posted[q], self.completed[q]);
            if p > c && !p.is_multiple_of(self.cq_mod) && self.fenced_at[q] != p {
                let wr_id = FENCE | ((q as u64) << QP_SHIFT) | p;
                // 8 bytes into the peer's heartbeat slot: harmless there, and not zero-length
                // (a zero-byte RDMA write threw Soft-RoCE into a retransmission storm).
                self.s.post_fence(q, wr_id)?;
                self.fenced_at[q] = p;
            }
        }
        Ok(())
    }

    /// Waits until every posted message has completed, fencing unsignaled tails.
    fn drain(&mut self) -> Result<u64> {
        let mut done = 0;
        self.fence_tails()?;
        while self.posted.iter().zip(&self.completed).any(|(p, c)| p > c) {
            let d = self.poll_send()?;
            done += d;
            if self.bidirectional && self.receives() {
                self.service_recv()?;
            }
            if d == 0 {
                self.idle()?;
            } else {
                self.progress();
            }
        }
        self.progress();
        Ok(done)
    }

    fn total_completed(&self) -> u64 {
        self.completed.iter().sum()
    }
}

impl BandwidthEndpoint for VerbsBandwidth<'_> {
    #[inline]
    fn step(&mut self) -> Result<u64> {
        self.steps += 1;
        let mut posted_any = false;
        let chain = self.list.len() as u64;
        for q in 0..self.posted.len() {
            // A whole chain when it fits in the queue; the budget's last one may be shorter
            // (`-n` not a multiple of `-l`).
            loop {
                let n = chain.min(self.budget - self.timed_posted);
                if n == 0 || self.posted[q] - self.completed[q] + n > self.depth {
                    break;
                }
                self.post(q, n)?;
                posted_any = true;
            }
        }
        if posted_any && self.timed_posted == self.budget {
            // The budget is spent: no QP posts again, so each one's tail must be signaled.
            self.fence_tails()?;
        }
        let mut done = self.poll_send()?;
        if self.bidirectional && self.op == RdmaOp::Send {
            self.service_recv()?;
        }
        if done == 0 && !posted_any {
            // With -e, sleep until the adapter raises a completion event.
            if self
                .s
                .send_cq
                .block(std::time::Duration::from_millis(100))?
            {
                done = self.poll_send()?;
            }
            if done == 0 {
                self.idle()?;
            }
        }
        if done > 0 {
            self.progress();
        }
        Ok(done)
    }

    fn quiesce(&mut self) -> Result<()> {
        self.drain()?;
        self.base = self.total_completed();
        self.base_per_qp = self.completed.clone();
        self.warmup_steps = self.steps;
        self.timed_posted = 0;
        self.budget = self.limit;
        Ok(())
    }

    fn finish(&mut self) -> Result<u64> {
        self.drained = self.drain()?;
        let timed = self.total_completed() - self.base;
        let bidir_send = self.bidirectional && self.op == RdmaOp::Send;
        let mut wcs: [ibv_wc; BATCH] = std::array::from_fn(|_| cq::empty_wc());
        // Keep the peer's stream flowing (reposting receives) while our word travels.
        let mut service = |s: &Session| -> Result<()> {
            if bidir_send {
                recv_and_repost(s, &mut wcs)?;
            }
            Ok(())
        };
        self.s.send_stop(timed, &mut service)?;
        if !self.bidirectional {
            return Ok(0);
        }
        // Wait for the peer's end, still reposting receives for its sends.
        let start = Instant::now();
        while !self.s.peer_stopped() {
            if bidir_send {
                self.service_recv()?;
            }
            if start.elapsed() > self.s.timeout {
                return Err(cq::stalled(
                    "waiting for the peer to finish its direction",
                    self.s.timeout,
                ));
            }
            std::hint::spin_loop();
        }
        // The caller subtracts one warm-up step's worth per step, as a TCP receiver counts
        // the peer's warm-up messages; the peer's count here is timed messages only.
        Ok(self.s.peer_count() + self.warmup_steps)
    }

    fn drained(&self) -> u64 {
        self.drained
    }

    fn stamp_messages(&mut self, clock: &LoopClock, messages: u64) {
        let qps = self.posted.len();
        let chain = self.list.len().max(1) as u64;
        // Every chain, every signaled request and every QP's fenced tail, reserved now so
        // the loop never allocates.
        self.stamps = Some(Stamping {
            clock: clock.clone(),
            messages,
            done: 0,
            stamps: MessageStamps::with_capacity(
                (messages / chain) as usize + qps,
                (messages / self.cq_mod.max(1)) as usize + 2 * qps,
            ),
        });
    }

    fn take_stamps(&mut self) -> Option<MessageStamps> {
        self.stamps.take().map(|st| st.stamps)
    }

    fn complete_when_reaped(&self) -> bool {
        true
    }

    fn serve(&mut self) -> Result<u64> {
        if self.op != RdmaOp::Send {
            self.s.wait_stop_passive()?;
            return Ok(self.s.peer_count() * self.s.size as u64);
        }
        let mut bytes = 0u64;
        let mut empty = 0u64;
        let mut last = Instant::now();
        loop {
            let b = self.service_recv()?;
            if b > 0 {
                bytes += b;
                empty = 0;
                continue;
            }
            empty += 1;
            if empty & 0xff == 0 && self.s.peer_stopped() {
                // Everything the peer sent completed before it wrote the word: take the rest.
                loop {
                    let b = self.service_recv()?;
                    if b == 0 {
                        break;
                    }
                    bytes += b;
                }
                return Ok(bytes);
            }
            if empty & 0xffff == 0 {
                if empty == 0x10000 {
                    last = Instant::now();
                } else if last.elapsed() > self.s.timeout {
                    return Err(cq::stalled("receiving the stream", self.s.timeout));
                }
            }
        }
    }

    fn side_report(&mut self) -> Result<SideReport> {
        let checks_dst = match self.op {
            RdmaOp::Write => self.role == Role::Responder || self.bidirectional,
            RdmaOp::Read => self.role == Role::Initiator || self.bidirectional,
            // Receives land in the dst slots too (`--check` with send: GPU buffers only).
            RdmaOp::Send => self.role == Role::Responder || self.bidirectional,
        };
        Ok(SideReport {
            counters: self.s.counters(),
            check_wrong_bytes: if self.check && checks_dst {
                Some(self.s.wrong_bytes()?)
            } else {
                None
            },
            memory: self.s.memory.clone(),
            sent: self
                .completed
                .iter()
                .zip(&self.base_per_qp)
                .enumerate()
                .map(|(q, (c, b))| QpSent {
                    index: q as u32,
                    qp_num: self.s.qps[q].qpn,
                    flow_label: self.s.flow_labels.get(q).copied().flatten(),
                    messages: c.saturating_sub(*b),
                })
                .collect(),
            ..Default::default()
        })
    }
}
