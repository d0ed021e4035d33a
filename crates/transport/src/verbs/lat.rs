//! Ping-pong latency over verbs, as perftest measures it:
//!
//! - `send`: two-sided. Each side keeps receives posted; the initiator sends and spins on
//!   its receive queue for the answer, the responder does the reverse. The end is a
//!   zero-byte send with immediate data `END`.
//! - `write`: one-sided. Each side RDMA-writes the message into the peer's buffer and
//!   spins on the last byte of its own buffer until the peer's write lands there (the
//!   adapter places a write in order, so the last byte arriving means the message has);
//!   no receive queue, no completion in the critical path.
//! - `read`: the initiator RDMA-reads the peer's buffer and waits for the completion: one
//!   round trip, reported whole. The responder's CPU does nothing; it waits for the stop
//!   word in its control page.
//!
//! Sends and writes are signaled one in [`SIGNAL_EVERY`] (perftest's selective signaling):
//! the send queue slots of unsignaled requests are freed by the next signaled completion.

use std::time::Instant;

use anyhow::{bail, Result};
use rdma_sys::*;

use super::cq;
use super::qp::SendOp;
use super::session::{self, Session, Shape};
use super::RdmaOp;
use crate::endpoint::{EndpointSpec, LatencyEndpoint, Op, Role, SideReport};
use base::link::PeerLink;

/// One send in this many asks for a completion.
const SIGNAL_EVERY: u64 = 16;
/// Immediate data of the initiator's closing send.
const END: u32 = 0x454e_4421;
/// wr_id of data sends (their completions only free the send queue).
const DATA_WR: u64 = 1;
/// wr_id of the closing send.
const END_WR: u64 = 2;
/// Receives kept posted for send latency.
const RX_DEPTH: u32 = 64;
/// Inline by default for small messages (perftest's default for latency tests).
const DEFAULT_INLINE: u32 = 220;

pub struct VerbsLatency<'a> {
    s: &'a mut Session,
    op: RdmaOp,
    size: usize,
    seq: u64,
    posted: u64,
    /// Signaled sends whose completion has not been polled yet.
    unreaped: u32,
    wcs: [ibv_wc; 8],
}

impl<'a> VerbsLatency<'a> {
    /// The pair's session, kept in `kept` from size to size, ready for `spec`; also says
    /// whether it connected anew.
    pub fn connect(
        spec: &EndpointSpec,
        link: &mut dyn PeerLink,
        kept: &'a mut Option<Session>,
    ) -> Result<(Self, bool)> {
        let (s, connected) = session::open(
            kept,
            spec,
            Shape {
                qps: 1,
                send_depth: 4 * SIGNAL_EVERY as u32,
                recv_depth: if spec.op == Op::Send { RX_DEPTH } else { 0 },
                default_inline: DEFAULT_INLINE,
                passive: spec.op == Op::Read && spec.role == Role::Responder,
                peer_passive: spec.op == Op::Read && spec.role == Role::Initiator,
                polled: spec.op == Op::Write,
            },
            link,
        )?;
        let me = Self {
            size: s.size,
            s,
            op: RdmaOp::of(spec.op)?,
            seq: 0,
            posted: 0,
            unreaped: 0,
            wcs: std::array::from_fn(|_| cq::empty_wc()),
        };
        Ok((me, connected))
    }

    /// The value the last byte carries in round `seq` (never 0, never equal to the last).
    #[inline(always)]
    fn mark(seq: u64) -> u8 {
        (seq % 255) as u8 + 1
    }

    /// Polls the send queue once for completions of signaled sends, without waiting.
    #[inline(always)]
    fn reap(&mut self) -> Result<()> {
        if self.unreaped > 0 {
            let n = self.s.send_cq.poll(&mut self.wcs)?;
            for wc in &self.wcs[..n] {
                cq::check(wc, "completing a latency message")?;
            }
            self.unreaped -= n as u32;
        }
        Ok(())
    }

    /// Posts the message (send or RDMA write), signaling one in SIGNAL_EVERY.
    #[inline(always)]
    fn post_message(&mut self) -> Result<()> {
        self.posted += 1;
        let signaled = self.posted.is_multiple_of(SIGNAL_EVERY);
        if signaled {
            // At most one signaled send outstanding: the queue never fills.
            while self.unreaped > 0 {
                let n = self.s.send_cq.wait(
                    &mut self.wcs,
                    self.s.timeout,
                    "waiting for a send completion",
                )?;
                for wc in &self.wcs[..n] {
                    cq::check(wc, "completing a latency message")?;
                }
                self.unreaped -= n as u32;
            }
            self.unreaped += 1;
        }
        let op = match self.op {
            RdmaOp::Send => SendOp::Send,
            _ => SendOp::Write(self.s.remote_dst(0)),
        };
        let inline = self.s.inline(true);
        self.s.qps[0].post_send(op, Some(self.s.src(0)), signaled, inline, DATA_WR)
    }

    /// Waits for one receive; `Ok(false)` if it was the initiator's END.
    #[inline(always)]
    fn wait_recv(&mut self, what: &str) -> Result<bool> {
        let n = self
            .s
            .recv_cq
            .wait(&mut self.wcs[..1], self.s.timeout, what)?;
        debug_assert_eq!(n, 1);
        let wc = &self.wcs[0];
        cq::check(wc, what)?;
        if wc.wc_flags & ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0
            // SAFETY: with IBV_WC_WITH_IMM set, the union holds the immediate data.
            && u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data }) == END
        {
            // The test is over: the receive goes back for the pair's next size.
            self.s.post_recv(0)?;
            return Ok(false);
        }
        self.s.post_recv(0)?;
        Ok(true)
    }

    /// Spins on the last byte of the dst slot until it carries `mark`; `Ok(false)` if the
    /// peer's stop word shows up instead (checked every 1024 spins: off the fast path).
    #[inline(always)]
    fn wait_mark(&self, mark: u8, watch_stop: bool, what: &str) -> Result<bool> {
        let off = self.s.dst_off(0) + self.size - 1;
        let mut spins = 0u64;
        let mut start: Option<Instant> = None;
        while self.s.data.read_volatile(off) != mark {
            spins += 1;
            if spins & 0x3ff == 0 {
                if watch_stop && self.s.peer_stopped() {
                    return Ok(false);
                }
                if spins & 0xffff == 0 {
                    let t = *start.get_or_insert_with(Instant::now);
                    if t.elapsed() > self.s.timeout {
                        return Err(cq::stalled(what, self.s.timeout));
                    }
                }
            }
            // No PAUSE (spin_loop hint) here, as perftest's ib_write_lat: on x86 a PAUSE
            // costs up to ~140 cycles and delays seeing the byte land.
        }
        Ok(true)
    }
}

impl LatencyEndpoint for VerbsLatency<'_> {
    #[inline]
    fn ping(&mut self) -> Result<()> {
        match self.op {
            RdmaOp::Send => {
                self.post_message()?;
                if !self.wait_recv("waiting for the pong (send)")? {
                    bail!("the responder ended the test in the middle of a ping-pong");
                }
                self.reap()
            }
            RdmaOp::Write => {
                self.seq += 1;
                let mark = Self::mark(self.seq);
                let last = self.s.src_off(0) + self.size - 1;
                self.s.data.write_volatile(last, mark);
                self.post_message()?;
                self.wait_mark(mark, false, "waiting for the pong (RDMA write)")?;
                self.reap()
            }
            RdmaOp::Read => {
                self.s.qps[0].post_send(
                    SendOp::Read(self.s.remote_src(0)),
                    Some(self.s.dst(0)),
                    true,
                    false,
                    DATA_WR,
                )?;
                let n = self.s.send_cq.wait(
                    &mut self.wcs[..1],
                    self.s.timeout,
                    "waiting for an RDMA read",
                )?;
                debug_assert_eq!(n, 1);
                cq::check(&self.wcs[0], "completing an RDMA read")
            }
        }
    }

    #[inline]
    fn pong(&mut self) -> Result<bool> {
        match self.op {
            RdmaOp::Send => {
                if !self.wait_recv("waiting for a ping (send)")? {
                    return Ok(false);
                }
                self.post_message()?;
                self.reap()?;
                Ok(true)
            }
            RdmaOp::Write => {
                self.seq += 1;
                let mark = Self::mark(self.seq);
                if !self.wait_mark(mark, true, "waiting for a ping (RDMA write)")? {
                    return Ok(false);
                }
                let last = self.s.src_off(0) + self.size - 1;
                self.s.data.write_volatile(last, mark);
                self.post_message()?;
                self.reap()?;
                Ok(true)
            }
            RdmaOp::Read => {
                // The adapter answers reads on its own; wait for the end.
                self.s.wait_stop_passive()?;
                Ok(false)
            }
        }
    }

    fn finish(&mut self) -> Result<()> {
        match self.op {
            RdmaOp::Send => {
                self.s.qps[0].post_send(SendOp::SendImm(END), None, true, false, END_WR)?;
                let start = Instant::now();
                loop {
                    let n = self.s.send_cq.poll(&mut self.wcs)?;
                    for wc in &self.wcs[..n] {
                        cq::check(wc, "sending the end of the test")?;
                        if wc.wr_id == END_WR {
                            return Ok(());
                        }
                    }
                    if n == 0 && start.elapsed() > self.s.timeout {
                        return Err(cq::stalled("sending the end of the test", self.s.timeout));
                    }
                }
            }
            _ => self.s.send_stop(self.seq, &mut |_| Ok(())),
        }
    }

    fn side_report(&mut self) -> Result<SideReport> {
        Ok(SideReport {
            counters: self.s.counters(),
            check_wrong_bytes: None,
            memory: self.s.memory.clone(),
            ..Default::default()
        })
    }
}
