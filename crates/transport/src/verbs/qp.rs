//! Reliable-connected (RC) queue pairs and their bring-up.
//!
//! A queue pair is a send queue and a receive queue the adapter works through in order.
//! RC means the adapter acknowledges every packet and retransmits what was lost, so a
//! completion on the sender says the data reached the peer's memory. A new QP is in RESET
//! and must be walked through three states before it carries traffic:
//!
//! - INIT: bound to a port and partition key, with the remote accesses it will allow;
//! - RTR (ready to receive): told its peer (QPN, start PSN, address: LID on InfiniBand,
//!   GID on RoCE, which puts a global route header on every packet), the path MTU and how
//!   many RDMA reads it will serve at once;
//! - RTS (ready to send): its own start PSN, ACK timeout and retry counts, reads in flight.
//!
//! All three transitions live in [`QueuePair::connect`]; a failure names the transition,
//! the attributes and the errno text.
//!
//! A queue pair holds what must outlive it: its protection domain, both completion queues
//! and the memory regions it may post from. Posting takes typed views ([`Local`] of one of
//! those regions, [`Remote`] of the peer's advertised region), so `post_send` and
//! `post_recv` are safe: no address, key or length comes from anywhere but a live
//! registration, and no region can be freed while the queue pair exists.

use std::rc::Rc;

use anyhow::{bail, Result};
use rdma_sys::*;

use super::cq::CompletionQueue;
use super::errno_text;
use super::memory::{Local, MemoryRegion, ProtectionDomain, Remote};

/// Queue sizes asked for at creation.
#[derive(Debug, Clone, Copy)]
pub struct QpCaps {
    pub send_wr: u32,
    pub recv_wr: u32,
    pub inline: u32,
}

/// Where the peer's QP is and how to reach it.
#[derive(Debug, Clone)]
pub struct Path {
    pub port: u8,
    pub mtu: ibv_mtu::Type,
    /// Local GID index for the global route header; `None`: route by LID only (InfiniBand).
    pub sgid_index: Option<u8>,
    pub dgid: [u8; 16],
    pub dlid: u16,
    pub local_psn: u32,
    pub remote_psn: u32,
    pub remote_qpn: u32,
    /// RDMA reads in flight, each way.
    pub rd_atomic: u8,
    /// GRH flow label (20 bits) of this QP's packets. RoCE v2 NICs derive the UDP source
    /// port from it when it is non-zero, and switches hash that port onto an ECMP path, so
    /// distinct labels spread a pair's QPs over paths (0: the NIC's own choice, from the
    /// QP numbers).
    pub flow_label: u32,
    /// Service level in the address vector (`-S`): on InfiniBand the SL the switches map
    /// onto a virtual lane; on RoCE the provider maps it onto the priority (PCP).
    pub sl: u8,
    /// GRH traffic class (`-T`): on RoCE v2 it becomes the IP header's DSCP and ECN bits,
    /// which pick the lossless priority on a PFC-configured fabric.
    pub traffic_class: u8,
}

/// The GRH flow label of a pair's QP number `i`: distinct per QP, never 0 (0 hands the
/// choice back to the NIC), within the field's 20 bits.
pub fn flow_label(i: usize) -> u32 {
    (i as u32 % 0xF_FFFF) + 1
}

/// What a send work request does.
#[derive(Debug, Clone, Copy)]
pub enum SendOp {
    /// Two-sided send into the peer's next posted receive.
    Send,
    /// Send carrying 32 bits of immediate data to the receiver's completion.
    SendImm(u32),
    /// RDMA write of the local bytes into the peer's.
    Write(Remote),
    /// RDMA read of the peer's bytes into the local ones.
    Read(Remote),
}

/// One send work request, before it is laid out for the adapter.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub op: SendOp,
    /// The local bytes (`None`: no data, e.g. a zero-byte send).
    pub local: Option<&'a Local>,
    /// Ask for a completion.
    pub signaled: bool,
    /// Copy the bytes into the request when they fit and the CPU can read them.
    pub inline: bool,
    pub wr_id: u64,
}

/// Room for a chain of send requests posted at once ([`QueuePair::post_send_list`]),
/// allocated once before the timed loop so posting a list allocates nothing.
pub struct PostList {
    wrs: Box<[ibv_send_wr]>,
    sges: Box<[ibv_sge]>,
}

impl PostList {
    /// A list of `len` requests (at least one).
    pub fn new(len: usize) -> Self {
        let len = len.max(1);
        // SAFETY: plain C structs; zero is valid (each is filled before it is posted).
        let zero = || unsafe { std::mem::zeroed::<ibv_send_wr>() };
        Self {
            wrs: (0..len).map(|_| zero()).collect(),
            sges: vec![
                ibv_sge {
                    addr: 0,
                    length: 0,
                    lkey: 0
                };
                len
            ]
            .into_boxed_slice(),
        }
    }

    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.wrs.is_empty()
    }
}

/// One RC queue pair.
pub struct QueuePair {
    pub(crate) qp: *mut ibv_qp,
    pub qpn: u32,
    /// Inline size the device granted (0: no inline).
    pub max_inline: u32,
    /// The regions work requests may name, kept alive as long as the QP (ids for the check
    /// on every post, which stays two integer compares).
    regions: Vec<Rc<MemoryRegion>>,
    region_ids: Vec<u64>,
    _send_cq: Rc<CompletionQueue>,
    _recv_cq: Rc<CompletionQueue>,
    _pd: Rc<ProtectionDomain>,
}

impl QueuePair {
    /// Creates the QP for posting from `regions` (all of `pd`); if the device refuses the
    /// inline size, retries without inline.
    pub fn new(
        pd: &Rc<ProtectionDomain>,
        send_cq: &Rc<CompletionQueue>,
        recv_cq: &Rc<CompletionQueue>,
        regions: &[Rc<MemoryRegion>],
        caps: QpCaps,
    ) -> Result<Self> {
        let dev = &pd.context().name;
        if let Some(r) = regions.iter().find(|r| !Rc::ptr_eq(r.pd(), pd)) {
            bail!(
                "internal error: a {}-byte region of another protection domain given to a queue pair on {dev}",
                r.len()
            );
        }
        let try_create = |inline: u32| {
            // SAFETY: plain C struct; zero is a valid starting point.
            let mut attr: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
            attr.send_cq = send_cq.cq;
            attr.recv_cq = recv_cq.cq;
            attr.cap.max_send_wr = caps.send_wr;
            attr.cap.max_recv_wr = caps.recv_wr;
            attr.cap.max_send_sge = 1;
            attr.cap.max_recv_sge = 1;
            attr.cap.max_inline_data = inline;
            attr.qp_type = ibv_qp_type::IBV_QPT_RC;
            attr.sq_sig_all = 0;
            // SAFETY: pd and both CQs are live and outlive the QP (it holds Rcs to them);
            // attr is fully initialised. The library writes the granted caps back.
            let qp = unsafe { ibv_create_qp(pd.pd, &mut attr) };
            (qp, attr.cap.max_inline_data, super::last_errno())
        };
        let (mut qp, mut inline, mut errno) = try_create(caps.inline);
        if qp.is_null() && caps.inline > 0 {
            (qp, inline, errno) = try_create(0);
        }
        if qp.is_null() {
            bail!(
                "cannot create an RC queue pair on {dev} (send queue {}, receive queue {}, inline {}): {} \
                 (lower -t, -q or -I)",
                caps.send_wr,
                caps.recv_wr,
                caps.inline,
                errno_text(errno)
            );
        }
        // SAFETY: qp is live.
        let qpn = unsafe { (*qp).qp_num };
        Ok(Self {
            qp,
            qpn,
            max_inline: inline,
            region_ids: regions.iter().map(|r| r.id()).collect(),
            regions: regions.to_vec(),
            _send_cq: send_cq.clone(),
            _recv_cq: recv_cq.clone(),
            _pd: pd.clone(),
        })
    }

    /// The regions this QP posts from.
    pub fn regions(&self) -> &[Rc<MemoryRegion>] {
        &self.regions
    }

    #[inline(always)]
    fn owns(&self, l: &Local) -> Result<()> {
        if !self.region_ids.contains(&l.region) {
            bail!(
                "internal error: a work request on queue pair {} names memory of a region it \
                 was not created with",
                self.qpn
            );
        }
        Ok(())
    }

    fn modify(&self, attr: &mut ibv_qp_attr, mask: ibv_qp_attr_mask, what: &str) -> Result<()> {
        // SAFETY: qp is live; attr is initialised for every bit in mask.
        let rc = unsafe { ibv_modify_qp(self.qp, attr, mask.0 as i32) };
        if rc != 0 {
            bail!(
                "queue pair {} state change {what} failed: {}",
                self.qpn,
                errno_text(rc)
            );
        }
        Ok(())
    }

    /// RESET -> INIT -> RTR -> RTS with the attributes that work on mlx5 and rxe alike.
    pub fn connect(&self, p: &Path) -> Result<()> {
        self.to_init(p)?;
        self.to_rtr(p)?;
        self.to_rts(p)
    }

    /// RESET -> INIT: the port, pkey index 0, local write and remote read/write access.
    fn to_init(&self, p: &Path) -> Result<()> {
        use ibv_qp_attr_mask as M;
        // SAFETY: plain C struct; zero is valid.
        let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv_qp_state::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = p.port;
        a.qp_access_flags = (ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_READ)
            .0;
        self.modify(
            &mut a,
            M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_ACCESS_FLAGS,
            &format!(
                "RESET->INIT (pkey index 0, port {}, access local write + remote read/write; \
                 is port {} right? -i)",
                p.port, p.port
            ),
        )
    }

    /// INIT -> RTR: the peer's address vector (its GID on RoCE, its LID on InfiniBand),
    /// QPN and PSN, the path MTU.
    fn to_rtr(&self, p: &Path) -> Result<()> {
        use ibv_qp_attr_mask as M;
        // SAFETY: plain C struct; zero is valid.
        let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv_qp_state::IBV_QPS_RTR;
        a.path_mtu = p.mtu;
        a.dest_qp_num = p.remote_qpn;
        a.rq_psn = p.remote_psn;
        a.max_dest_rd_atomic = p.rd_atomic;
        a.min_rnr_timer = 12;
        a.ah_attr.dlid = p.dlid;
        a.ah_attr.sl = p.sl;
        a.ah_attr.src_path_bits = 0;
        a.ah_attr.port_num = p.port;
        if let Some(sgid) = p.sgid_index {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid.raw = p.dgid;
            a.ah_attr.grh.sgid_index = sgid;
            a.ah_attr.grh.hop_limit = 64;
            a.ah_attr.grh.traffic_class = p.traffic_class;
            a.ah_attr.grh.flow_label = p.flow_label & 0xF_FFFF;
        }
        self.modify(
            &mut a,
            M::IBV_QP_STATE
                | M::IBV_QP_AV
                | M::IBV_QP_PATH_MTU
                | M::IBV_QP_DEST_QPN
                | M::IBV_QP_RQ_PSN
                | M::IBV_QP_MAX_DEST_RD_ATOMIC
                | M::IBV_QP_MIN_RNR_TIMER,
            &format!(
                "INIT->RTR (address vector: {}, path MTU {}, dest QPN {}, RQ PSN {}, \
                 max dest rd atomic {}: a wrong GID index (-x), an MTU above the port's, or a \
                 peer on another port type usually causes this)",
                match p.sgid_index {
                    Some(i) => format!(
                        "sgid index {i}, dgid {}, flow label {}, traffic class {}, sl {}",
                        std::net::Ipv6Addr::from(p.dgid),
                        p.flow_label,
                        p.traffic_class,
                        p.sl
                    ),
                    None => format!("dlid {}, sl {}", p.dlid, p.sl),
                },
                super::device::mtu_bytes(p.mtu),
                p.remote_qpn,
                p.remote_psn,
                p.rd_atomic
            ),
        )
    }

    /// RTR -> RTS: the send side's retry and timeout settings and our PSN.
    fn to_rts(&self, p: &Path) -> Result<()> {
        use ibv_qp_attr_mask as M;
        // SAFETY: plain C struct; zero is valid.
        let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv_qp_state::IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.sq_psn = p.local_psn;
        a.max_rd_atomic = p.rd_atomic;
        self.modify(
            &mut a,
            M::IBV_QP_STATE
                | M::IBV_QP_TIMEOUT
                | M::IBV_QP_RETRY_CNT
                | M::IBV_QP_RNR_RETRY
                | M::IBV_QP_SQ_PSN
                | M::IBV_QP_MAX_QP_RD_ATOMIC,
            &format!(
                "RTR->RTS (timeout 14, retry 7, rnr retry 7, SQ PSN {}, max rd atomic {})",
                p.local_psn, p.rd_atomic
            ),
        )
    }

    /// Fills `wr` and its one gather entry `sge` for `op` on `local` (`None`: no data, e.g.
    /// a zero-byte send). `signaled` asks for a completion; `inline` copies the bytes into
    /// the request when they fit and the CPU can read them (never for GPU memory). `wr`
    /// points at `sge` afterwards, so neither may move before the post.
    #[inline(always)]
    fn request(&self, req: Request<'_>, wr: &mut ibv_send_wr, sge: &mut ibv_sge) -> Result<()> {
        let Request {
            op,
            local,
            signaled,
            inline,
            wr_id,
        } = req;
        *sge = ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        };
        let mut flags = if signaled {
            ibv_send_flags::IBV_SEND_SIGNALED.0
        } else {
            0
        };
        if let Some(l) = local {
            self.owns(l)?;
            *sge = ibv_sge {
                addr: l.addr,
                length: l.len,
                lkey: l.lkey,
            };
            if inline && l.host && l.len <= self.max_inline {
                flags |= ibv_send_flags::IBV_SEND_INLINE.0;
            }
        }
        wr.wr_id = wr_id;
        wr.next = std::ptr::null_mut();
        wr.sg_list = sge;
        wr.num_sge = i32::from(sge.length > 0);
        wr.send_flags = flags;
        wr.opcode = match op {
            SendOp::Send => ibv_wr_opcode::IBV_WR_SEND,
            SendOp::SendImm(imm) => {
                wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
                ibv_wr_opcode::IBV_WR_SEND_WITH_IMM
            }
            SendOp::Write(r) | SendOp::Read(r) => {
                if r.len < sge.length {
                    bail!(
                        "internal error: a {}-byte transfer into a {}-byte remote view",
                        sge.length,
                        r.len
                    );
                }
                wr.wr.rdma.remote_addr = r.addr;
                wr.wr.rdma.rkey = r.rkey;
                if matches!(op, SendOp::Write(_)) {
                    ibv_wr_opcode::IBV_WR_RDMA_WRITE
                } else {
                    ibv_wr_opcode::IBV_WR_RDMA_READ
                }
            }
        };
        Ok(())
    }

    /// Hands the chain starting at `wr` to the adapter in one `ibv_post_send`.
    #[inline(always)]
    fn post_chain(&self, wr: &mut ibv_send_wr) -> Result<()> {
        let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
        // SAFETY: qp is live; every request of the chain and its gather entry were filled
        // by `request` and live across the call (the caller's stack or a PostList it
        // borrows); the local bytes lie in a registered region this QP holds (checked by
        // `owns`, bounds by Local's maker), so they stay registered while the request is
        // outstanding; inline data is read now from host memory only; the remote range was
        // bounds-checked against the peer's advertised region (the peer's adapter checks
        // the rkey).
        let rc = unsafe { ibv_post_send(self.qp, wr, &mut bad) };
        if rc != 0 {
            bail!(
                "posting a work request on queue pair {} failed: {} (send queue full, or \
                 the QP left RTS after an earlier error)",
                self.qpn,
                errno_text(rc)
            );
        }
        Ok(())
    }

    /// Posts one work request: `op` on `local` (`None`: no data, e.g. a zero-byte send).
    /// `signaled` asks for a completion; `inline` copies the bytes into the request when
    /// they fit and the CPU can read them (never for GPU memory).
    #[inline(always)]
    pub fn post_send(
        &self,
        op: SendOp,
        local: Option<&Local>,
        signaled: bool,
        inline: bool,
        wr_id: u64,
    ) -> Result<()> {
        // SAFETY: plain C structs; zero is valid.
        let (mut wr, mut sge): (ibv_send_wr, ibv_sge) = unsafe { std::mem::zeroed() };
        self.request(
            Request {
                op,
                local,
                signaled,
                inline,
                wr_id,
            },
            &mut wr,
            &mut sge,
        )?;
        self.post_chain(&mut wr)
    }

    /// Posts `count` work requests (at most `list.len()`) chained in one `ibv_post_send`
    /// (perftest's `-l`, post list): one doorbell for the whole chain, so the CPU's cost per
    /// message falls and the adapter fetches the requests in a burst. Request `i` of the
    /// chain is `make(i)`.
    #[inline(always)]
    pub fn post_send_list<'l>(
        &self,
        list: &mut PostList,
        count: usize,
        mut make: impl FnMut(usize) -> Request<'l>,
    ) -> Result<()> {
        let n = count.clamp(1, list.wrs.len());
        for i in 0..n {
            self.request(make(i), &mut list.wrs[i], &mut list.sges[i])?;
        }
        for i in 1..n {
            let next: *mut ibv_send_wr = &mut list.wrs[i];
            list.wrs[i - 1].next = next;
        }
        self.post_chain(&mut list.wrs[0])
    }

    /// Posts one receive into `local`.
    #[inline(always)]
    pub fn post_recv(&self, local: &Local, wr_id: u64) -> Result<()> {
        self.owns(local)?;
        let mut sge = ibv_sge {
            addr: local.addr,
            length: local.len,
            lkey: local.lkey,
        };
        // SAFETY: plain C struct; zero is valid.
        let mut wr: ibv_recv_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let mut bad: *mut ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: qp is live; wr and sge live across the call; the buffer is in a region
        // this QP holds, so it stays registered until the receive completes or is flushed.
        let rc = unsafe { ibv_post_recv(self.qp, &mut wr, &mut bad) };
        if rc != 0 {
            bail!(
                "posting a receive on queue pair {} failed: {} (receive queue full?)",
                self.qpn,
                errno_text(rc)
            );
        }
        Ok(())
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: qp is live; destroying it flushes its work requests. The regions, CQs
        // and PD it holds are released after this body, so they outlive it.
        unsafe {
            ibv_destroy_qp(self.qp);
        }
    }
}
