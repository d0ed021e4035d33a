//! Completion queues: where the adapter reports finished work requests.
//!
//! By default the CPU busy-polls the queue (`ibv_poll_cq` reads the adapter's completion
//! ring in user space, no system call), as perftest does: lowest latency, one core busy.
//! With `-e` the queue is armed (`ibv_req_notify_cq`) and the thread sleeps on a completion
//! channel's file descriptor until the adapter raises an event: a core freed at the price
//! of an interrupt and a wake-up per event.

use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use rdma_sys::*;

use super::device::Context;
use super::{errno_text, last_errno};

/// A completion channel (`-e`): the fd the thread sleeps on.
pub struct Channel {
    pub(crate) ch: *mut ibv_comp_channel,
    _ctx: Rc<Context>,
}

impl Channel {
    pub fn new(ctx: &Rc<Context>) -> Result<Rc<Self>> {
        // SAFETY: ctx is an open device context, kept alive by the Rc the channel holds.
        let ch = unsafe { ibv_create_comp_channel(ctx.ctx) };
        if ch.is_null() {
            bail!(
                "cannot create a completion channel on {} for -e: {} (run without -e to poll)",
                ctx.name,
                errno_text(last_errno())
            );
        }
        Ok(Rc::new(Self {
            ch,
            _ctx: ctx.clone(),
        }))
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: every CQ using the channel holds an Rc to it, so all are destroyed.
        unsafe {
            ibv_destroy_comp_channel(self.ch);
        }
    }
}

/// A completion queue; `events` when it reports through a [`Channel`].
pub struct CompletionQueue {
    pub(crate) cq: *mut ibv_cq,
    channel: *mut ibv_comp_channel,
    pub depth: u32,
    _channel: Option<Rc<Channel>>,
    _ctx: Rc<Context>,
}

/// A zeroed work completion to poll into.
pub fn empty_wc() -> ibv_wc {
    // SAFETY: ibv_wc is plain C data (integers and a union of integers); zero is valid.
    unsafe { std::mem::zeroed() }
}

impl CompletionQueue {
    pub fn new(ctx: &Rc<Context>, depth: u32, channel: Option<&Rc<Channel>>) -> Result<Rc<Self>> {
        let ch = channel.map_or(std::ptr::null_mut(), |c| c.ch);
        // SAFETY: ctx is open; ch is NULL or a live channel; the CQ holds Rcs to both.
        let cq = unsafe { ibv_create_cq(ctx.ctx, depth as i32, std::ptr::null_mut(), ch, 0) };
        if cq.is_null() {
            bail!(
                "cannot create a completion queue of {depth} entries on {}: {} (lower -t/-q)",
                ctx.name,
                errno_text(last_errno())
            );
        }
        let me = Self {
            cq,
            channel: ch,
            depth,
            _channel: channel.cloned(),
            _ctx: ctx.clone(),
        };
        if !ch.is_null() {
            me.arm()?;
        }
        Ok(Rc::new(me))
    }

    /// Polls up to `wcs.len()` completions without blocking; returns how many.
    #[inline(always)]
    pub fn poll(&self, wcs: &mut [ibv_wc]) -> Result<usize> {
        // SAFETY: cq is live; wcs has room for len entries.
        let n = unsafe { ibv_poll_cq(self.cq, wcs.len() as i32, wcs.as_mut_ptr()) };
        if n < 0 {
            bail!(
                "polling the completion queue failed ({n}): the device reported an error \
                 (see `dmesg`)"
            );
        }
        Ok(n as usize)
    }

    fn arm(&self) -> Result<()> {
        // SAFETY: cq is live and was created with a channel.
        let rc = unsafe { ibv_req_notify_cq(self.cq, 0) };
        if rc != 0 {
            bail!(
                "cannot arm the completion queue for events: {}",
                errno_text(rc)
            );
        }
        Ok(())
    }

    /// Event mode: sleeps until the adapter signals a completion on this CQ (or `limit`).
    /// The caller polls afterwards. Re-arms before returning, so no completion is missed:
    /// one that arrives between the poll and the sleep raises an event on the armed CQ.
    fn sleep(&self, limit: Duration) -> Result<bool> {
        // SAFETY: channel is live (only set when created with one).
        let fd = unsafe { (*self.channel).fd };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = limit.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: pfd is a valid pollfd array of length 1.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = last_errno();
            if e == libc::EINTR {
                return Ok(false);
            }
            bail!("waiting for a completion event: {}", errno_text(e));
        }
        if rc == 0 {
            return Ok(false);
        }
        let mut cq: *mut ibv_cq = std::ptr::null_mut();
        let mut ctx: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: the fd is readable, so this does not block; out-pointers are valid.
        let rc = unsafe { ibv_get_cq_event(self.channel, &mut cq, &mut ctx) };
        if rc != 0 {
            bail!("reading a completion event: {}", errno_text(last_errno()));
        }
        // SAFETY: cq is the CQ the event was for (one of ours, live); ack exactly one.
        unsafe { ibv_ack_cq_events(cq, 1) };
        // Re-arm the CQ that fired (it may be the sibling sharing the channel).
        // SAFETY: cq is live.
        let rc = unsafe { ibv_req_notify_cq(cq, 0) };
        if rc != 0 {
            bail!("cannot re-arm the completion queue: {}", errno_text(rc));
        }
        Ok(true)
    }

    /// Event mode: sleeps until a completion event or `limit`; `Ok(true)` when one came.
    /// Polling mode: returns `Ok(false)` at once.
    pub fn block(&self, limit: Duration) -> Result<bool> {
        if self.channel.is_null() {
            return Ok(false);
        }
        self.sleep(limit)
    }

    /// Waits for at least one completion (polling, or sleeping with events) for at most
    /// `timeout`; `what` names what is awaited for the error message.
    pub fn wait(&self, wcs: &mut [ibv_wc], timeout: Duration, what: &str) -> Result<usize> {
        let n = self.poll(wcs)?;
        if n > 0 {
            return Ok(n);
        }
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if !self.channel.is_null() {
                self.sleep(Duration::from_millis(100))?;
            }
            let n = self.poll(wcs)?;
            if n > 0 {
                return Ok(n);
            }
            spins = spins.wrapping_add(1);
            if (spins & 0x3fff == 0 || !self.channel.is_null()) && start.elapsed() > timeout {
                return Err(stalled(what, timeout));
            }
        }
    }
}

/// The error for a peer that stopped making progress.
pub fn stalled(what: &str, timeout: Duration) -> anyhow::Error {
    anyhow!(
        "no completion for {} s while {what}: the peer died or hangs, or the link lost its \
         packets (raise --timeout if it is only slow)",
        timeout.as_secs_f64()
    )
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // SAFETY: every QP using this CQ holds an Rc to it, so all are destroyed; the
        // channel and context are released after this body.
        unsafe {
            ibv_destroy_cq(self.cq);
        }
    }
}

/// Name of a work completion status, as verbs.h spells it.
pub fn status_name(s: ibv_wc_status::Type) -> &'static str {
    use ibv_wc_status::*;
    match s {
        IBV_WC_SUCCESS => "IBV_WC_SUCCESS",
        IBV_WC_LOC_LEN_ERR => "IBV_WC_LOC_LEN_ERR",
        IBV_WC_LOC_QP_OP_ERR => "IBV_WC_LOC_QP_OP_ERR",
        IBV_WC_LOC_EEC_OP_ERR => "IBV_WC_LOC_EEC_OP_ERR",
        IBV_WC_LOC_PROT_ERR => "IBV_WC_LOC_PROT_ERR",
        IBV_WC_WR_FLUSH_ERR => "IBV_WC_WR_FLUSH_ERR",
        IBV_WC_MW_BIND_ERR => "IBV_WC_MW_BIND_ERR",
        IBV_WC_BAD_RESP_ERR => "IBV_WC_BAD_RESP_ERR",
        IBV_WC_LOC_ACCESS_ERR => "IBV_WC_LOC_ACCESS_ERR",
        IBV_WC_REM_INV_REQ_ERR => "IBV_WC_REM_INV_REQ_ERR",
        IBV_WC_REM_ACCESS_ERR => "IBV_WC_REM_ACCESS_ERR",
        IBV_WC_REM_OP_ERR => "IBV_WC_REM_OP_ERR",
        IBV_WC_RETRY_EXC_ERR => "IBV_WC_RETRY_EXC_ERR",
        IBV_WC_RNR_RETRY_EXC_ERR => "IBV_WC_RNR_RETRY_EXC_ERR",
        IBV_WC_LOC_RDD_VIOL_ERR => "IBV_WC_LOC_RDD_VIOL_ERR",
        IBV_WC_REM_INV_RD_REQ_ERR => "IBV_WC_REM_INV_RD_REQ_ERR",
        IBV_WC_REM_ABORT_ERR => "IBV_WC_REM_ABORT_ERR",
        IBV_WC_INV_EECN_ERR => "IBV_WC_INV_EECN_ERR",
        IBV_WC_INV_EEC_STATE_ERR => "IBV_WC_INV_EEC_STATE_ERR",
        IBV_WC_FATAL_ERR => "IBV_WC_FATAL_ERR",
        IBV_WC_RESP_TIMEOUT_ERR => "IBV_WC_RESP_TIMEOUT_ERR",
        IBV_WC_GENERAL_ERR => "IBV_WC_GENERAL_ERR",
        _ => "IBV_WC_(unknown status)",
    }
}

/// What a failed status usually means, in operator's terms.
pub fn status_meaning(s: ibv_wc_status::Type) -> &'static str {
    use ibv_wc_status::*;
    match s {
        IBV_WC_RETRY_EXC_ERR => {
            "the peer never acknowledged within the transport retry budget: it is unreachable \
             (wrong GID/-x, wrong subnet or VLAN, link down, packets dropped) or its queue pair \
             is gone (the process exited)"
        }
        IBV_WC_RNR_RETRY_EXC_ERR => {
            "the receiver had no receive buffer posted (Receiver Not Ready) for too long: the \
             peer is stuck or stopped reposting receives"
        }
        IBV_WC_REM_ACCESS_ERR => {
            "the peer refused the RDMA access: wrong rkey or address, or the region lacks \
             remote read/write permission"
        }
        IBV_WC_REM_INV_REQ_ERR => {
            "the peer found the request invalid: message larger than its receive buffer or \
             than the port's max message size, or an operation its QP does not allow"
        }
        IBV_WC_REM_OP_ERR => "the peer failed to carry out the operation (its QP went to error)",
        IBV_WC_LOC_LEN_ERR => "a message did not fit the local receive buffer (or exceeded limits)",
        IBV_WC_LOC_PROT_ERR => {
            "the local buffer is not covered by a registration of this protection domain (bad lkey)"
        }
        IBV_WC_LOC_QP_OP_ERR => {
            "the local queue pair could not execute the request (bad WR or state)"
        }
        IBV_WC_WR_FLUSH_ERR => {
            "the queue pair was already in the error state because of an earlier failure; this \
             request was flushed, look at the first error"
        }
        IBV_WC_LOC_ACCESS_ERR => "a local protection error while writing the incoming data",
        IBV_WC_BAD_RESP_ERR => "the peer answered with an unexpected transport opcode",
        IBV_WC_REM_ABORT_ERR => "the peer aborted the operation",
        IBV_WC_RESP_TIMEOUT_ERR => "the response did not arrive in time",
        IBV_WC_FATAL_ERR => "the adapter reported a fatal error (see `dmesg`)",
        _ => "see the status in the InfiniBand specification / `man ibv_poll_cq`",
    }
}

/// `Ok` for a successful completion, else an error naming the status and its meaning.
#[inline(always)]
pub fn check(wc: &ibv_wc, what: &str) -> Result<()> {
    if wc.status == ibv_wc_status::IBV_WC_SUCCESS {
        return Ok(());
    }
    Err(anyhow!(
        "work completion with error while {what}: {} (status {}, vendor error 0x{:x}): {}",
        status_name(wc.status),
        wc.status,
        wc.vendor_err,
        status_meaning(wc.status)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_completions_are_named_and_explained() {
        let mut wc = empty_wc();
        assert!(check(&wc, "x").is_ok());
        wc.status = ibv_wc_status::IBV_WC_RETRY_EXC_ERR;
        let e = check(&wc, "streaming RDMA writes").unwrap_err().to_string();
        assert!(e.contains("IBV_WC_RETRY_EXC_ERR"), "{e}");
        assert!(e.contains("unreachable"), "{e}");
        assert!(e.contains("streaming RDMA writes"), "{e}");
        assert_eq!(
            status_name(ibv_wc_status::IBV_WC_WR_FLUSH_ERR),
            "IBV_WC_WR_FLUSH_ERR"
        );
    }
}
