//! One side of a verbs test: device, memory, queues and queue pairs, connected to the
//! peer's over the bootstrap's [`PeerLink`] (the standalone TCP handshake or MPI).
//!
//! A pair connects once and keeps the connection for every size it measures, as perftest
//! does with `-a`: opening the device, pinning and registering memory, and creating and
//! connecting queue pairs are firmware commands that cost milliseconds each on a real
//! adapter, paid once per pair per round instead of once per size. The memory is sized
//! for the largest message of the sweep; between sizes [`Session::rearm`] only settles the
//! queues, clears the words the peer writes and moves the message views.
//!
//! Two registered regions per side, the same layout on both:
//!
//! ```text
//! control (host memory, 4 KiB): words the peer writes by RDMA
//! data (host or GPU memory):    [ src slot 0 .. src slot q-1 | dst slot 0 .. dst slot q-1 ]
//! ```
//!
//! Queue pair `i` sends or writes from its src slot into the peer's dst slot `i`, and reads
//! the peer's src slot `i` into its own dst slot `i`. The control page holds words the peer
//! writes by RDMA: "I have finished, after N messages" and a heartbeat target. Ending a
//! test that way costs nothing inside the timed loop: the passive side looks at the word,
//! the active side writes it once, after its loop. The control words stay in host memory
//! whatever the data is, because the CPU polls them.
//!
//! Every work request's local and remote views are made once here, bounds-checked
//! ([`Local`], [`Remote`]); the loops only pick them.

use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use rdma_sys::*;
use serde::{Deserialize, Serialize};

use super::cq::{self, Channel, CompletionQueue};
use super::device::{self, Context, DeviceList, PortInfo};
use super::memory::{Local, MemoryRegion, ProtectionDomain, Remote, RemoteRegion};
use super::qp::{Path, QpCaps, QueuePair, SendOp};
use crate::endpoint::{EndpointSpec, Role};
use crate::gpu::{pattern_bytes, wrong_bytes};
use base::link::{recv_json, send_json, PeerLink};
use probe::counters::{self, Snapshot};
use results::{MemorySide, PortCounters};

/// Size of the control region.
pub const CTRL: usize = 4096;
/// Written by the peer: non-zero once it has finished.
pub const IN_STOP: usize = 0;
/// Written by the peer with IN_STOP: its message count.
pub const IN_COUNT: usize = 8;
/// Target of the peer's heartbeat writes.
pub const IN_BEAT: usize = 16;
/// Our staging copy of (stop, count), the source of our control write.
const OUT_STOP: usize = 64;
const OUT_BEAT: usize = 96;
/// wr_id of control writes (never a data message).
pub const CTRL_WR: u64 = 1 << 62;
/// wr_id of the writes that settle the queues between sizes.
const SETTLE_WR: u64 = (1 << 62) | 1;

/// What the peer needs to reach our queue pairs and memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PeerInfo {
    device: String,
    lid: u16,
    gid: Option<[u8; 16]>,
    gid_kind: Option<String>,
    mtu: u32,
    ctrl: RemoteRegion,
    data: RemoteRegion,
    slot: u64,
    qpns: Vec<u32>,
    psns: Vec<u32>,
    rd_atomic: u32,
}

/// Queue sizes an endpoint asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub qps: u32,
    /// Send work requests in flight per QP (data, not counting control writes).
    pub send_depth: u32,
    /// Receives kept posted per QP (0: none, one-sided operations).
    pub recv_depth: u32,
    /// Inline size when `-I` is not given.
    pub default_inline: u32,
    /// This side is the passive responder of a one-sided test: it sleeps on a completion
    /// channel until the peer's closing send wakes it, leaving the CPU to the adapter (on
    /// Soft-RoCE, to the kernel doing the adapter's work).
    pub passive: bool,
    /// The peer is that passive side: end with a send that wakes it.
    pub peer_passive: bool,
    /// The CPU polls the data buffer for the last byte of the peer's RDMA write (write
    /// latency): registered without relaxed ordering there, which could land that byte
    /// before the others.
    pub polled: bool,
}

/// A connected side. The objects hold each other (queue pairs hold their regions, queues
/// and protection domain; those hold the device context), so no drop order is needed.
pub struct Session {
    pub qps: Vec<QueuePair>,
    pub send_cq: Rc<CompletionQueue>,
    pub recv_cq: Rc<CompletionQueue>,
    /// Control words (host memory).
    pub ctrl: Rc<MemoryRegion>,
    /// Message slots (host or GPU memory).
    pub data: Rc<MemoryRegion>,
    ctx: Rc<Context>,
    /// Per QP: our src and dst slot, the peer's src and dst slot.
    src: Vec<Local>,
    dst: Vec<Local>,
    remote_src: Vec<Remote>,
    remote_dst: Vec<Remote>,
    /// Per QP: our dst slot whole, where receives land (posted at the slot's full length,
    /// so a receive posted for one size takes a message of any later size).
    recv_dst: Vec<Local>,
    /// The peer's data region, to view its slots at each size.
    peer_data: RemoteRegion,
    /// Control writes: our staging words, the peer's stop and heartbeat words.
    out_stop: Local,
    out_stop_send: Local,
    out_beat: Local,
    in_stop: Remote,
    in_beat: Remote,
    /// Per QP: the GRH flow label its packets carry (RoCE; `None` when routed by LID).
    pub flow_labels: Vec<Option<u32>>,
    /// Bytes per slot (the largest message size rounded up to 64).
    pub slot: usize,
    /// The largest message the memory holds.
    capacity: usize,
    /// The message size of the current test.
    pub size: usize,
    /// Inline limit in effect (0: never inline).
    pub inline: u32,
    pub timeout: Duration,
    pub role: Role,
    port: u8,
    peer_passive: bool,
    shape: Shape,
    before: Snapshot,
    /// This side's memory record for the result (`None`: plain host memory).
    pub memory: Option<MemorySide>,
}

fn psn(salt: u32) -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (t ^ std::process::id().rotate_left(8) ^ salt.wrapping_mul(0x9e37_79b9)) & 0x00ff_ffff
}

/// Exchanges `mine` for the peer's, initiator first, so the two never both wait.
fn exchange<T: Serialize + serde::de::DeserializeOwned>(
    role: Role,
    link: &mut dyn PeerLink,
    mine: &T,
) -> Result<T> {
    match role {
        Role::Initiator => {
            send_json(link, mine)?;
            recv_json(link)
        }
        Role::Responder => {
            let theirs = recv_json(link)?;
            send_json(link, mine)?;
            Ok(theirs)
        }
    }
}

/// Whether the data slots are registered with relaxed ordering: yes as perftest does,
/// unless `--disable-pcie-relaxed` or the CPU polls them (write latency).
pub fn relaxed_ordering(disabled: bool, polled: bool) -> bool {
    !disabled && !polled
}

/// The data region this spec asks for (host memory, host dma-buf, or GPU memory along the
/// path the start-up trial found) and its memory record.
fn data_region(
    pd: &Rc<ProtectionDomain>,
    spec: &EndpointSpec,
    len: usize,
    relaxed: bool,
) -> Result<(Rc<MemoryRegion>, Option<MemorySide>)> {
    let dev = pd.context().name.clone();
    if spec.verbs.host_dmabuf {
        let mr = MemoryRegion::host_dmabuf(pd, len, relaxed).map_err(|e| anyhow!(e.message))?;
        let side = MemorySide {
            kind: "host".into(),
            path: mr.path().name().into(),
            nic: Some(dev),
            ..Default::default()
        };
        return Ok((mr, Some(side)));
    }
    match &spec.verbs.gpu {
        None => Ok((MemoryRegion::host(pd, len, relaxed)?, None)),
        Some(g) => gpu_region(pd, g, len, relaxed),
    }
}

#[cfg(feature = "cuda")]
fn gpu_region(
    pd: &Rc<ProtectionDomain>,
    g: &crate::gpu::GpuOptions,
    len: usize,
    relaxed: bool,
) -> Result<(Rc<MemoryRegion>, Option<MemorySide>)> {
    use crate::cuda::memory::{DeviceMemory, GpuContext};
    use crate::gpu::CudaMem;
    let r = g
        .resolved
        .as_ref()
        .ok_or_else(|| anyhow!("internal error: GPU options were not resolved at start-up"))?;
    let ctx = GpuContext::open(r.ordinal)?;
    let buf = DeviceMemory::alloc(&ctx, len)?;
    let path = match r.path.as_deref() {
        Some("peermem") => CudaMem::Peermem,
        _ => CudaMem::Dmabuf,
    };
    let mr = MemoryRegion::gpu(pd, Box::new(buf), path, relaxed).map_err(|e| anyhow!(e.message))?;
    Ok((mr, Some(g.side(Some(path.name())))))
}

#[cfg(not(feature = "cuda"))]
fn gpu_region(
    _: &Rc<ProtectionDomain>,
    _: &crate::gpu::GpuOptions,
    _: usize,
    _: bool,
) -> Result<(Rc<MemoryRegion>, Option<MemorySide>)> {
    bail!("this binary was built without CUDA support (cargo feature `cuda`): leave out --use-cuda")
}

/// The pair's session for `spec`: the one kept from its last size, re-armed, or a new one
/// when there is none yet (or it cannot hold this size). Returns whether it connected.
pub fn open<'a>(
    kept: &'a mut Option<Session>,
    spec: &EndpointSpec,
    shape: Shape,
    link: &mut dyn PeerLink,
) -> Result<(&'a mut Session, bool)> {
    match kept.take() {
        Some(mut s) if s.fits(spec, &shape) => {
            s.rearm(spec, link)?;
            Ok((kept.insert(s), false))
        }
        old => {
            // The old session (if any) is released before the new one registers memory.
            drop(old);
            Ok((kept.insert(Session::establish(spec, shape, link)?), true))
        }
    }
}

impl Session {
    pub fn establish(spec: &EndpointSpec, shape: Shape, link: &mut dyn PeerLink) -> Result<Self> {
        let opts = &spec.verbs;
        let list = DeviceList::get()?;
        let ctx = Rc::new(list.open(opts.device.as_deref(), opts.port)?);
        drop(list);
        let port: PortInfo = ctx.port(opts.port)?;
        let gid = ctx.choose_gid(&port, opts.gid_index)?;
        let what = format!("{} port {}", ctx.name, opts.port);
        let mtu = device::path_mtu(opts.mtu, port.active_mtu, &what)?;

        let qps_n = shape.qps.max(1) as usize;
        let size = spec.size.max(1) as usize;
        let capacity = spec.largest.max(spec.size).max(1) as usize;
        let slot = capacity.div_ceil(64) * 64;
        let data_len = 2 * qps_n * slot;
        let pd = ProtectionDomain::new(&ctx)?;
        if opts.gpu.is_none() && !opts.host_dmabuf {
            // Both regions are pinned host memory: check the limit for the pair at once.
            super::memory::check_memlock((CTRL + data_len.max(64)) as u64, &ctx.name)?;
        }
        // Control words are polled by the CPU: always strictly ordered. The data slots
        // take relaxed ordering as perftest's do, unless the CPU polls them.
        let ctrl = MemoryRegion::host(&pd, CTRL, false)?;
        let relaxed = relaxed_ordering(opts.disable_pcie_relaxed, shape.polled);
        let (data, memory) = data_region(&pd, spec, data_len, relaxed)?;
        let channel = if opts.events || shape.passive {
            Some(Channel::new(&ctx)?)
        } else {
            None
        };
        let max_wr = port.max_qp_wr;
        // Room for the control and fence writes beside the data.
        let send_wr = (shape.send_depth + 4).min(max_wr);
        let recv_wr = shape.recv_depth.clamp(1, max_wr);
        let send_cq = CompletionQueue::new(
            &ctx,
            send_wr * qps_n as u32 + 8,
            channel.as_ref().filter(|_| opts.events),
        )?;
        let recv_cq = CompletionQueue::new(&ctx, recv_wr * qps_n as u32 + 8, channel.as_ref())?;
        // The CPU cannot read GPU memory, so it is never sent inline (perftest refuses the
        // combination too).
        let want_inline = if data.host_accessible() {
            opts.inline_size.unwrap_or(shape.default_inline)
        } else {
            0
        };
        let regions = [ctrl.clone(), data.clone()];
        let mut qps = Vec::with_capacity(qps_n);
        for _ in 0..qps_n {
            qps.push(QueuePair::new(
                &pd,
                &send_cq,
                &recv_cq,
                &regions,
                QpCaps {
                    send_wr,
                    recv_wr,
                    inline: want_inline,
                },
            )?);
        }
        let inline = qps
            .iter()
            .map(|q| q.max_inline)
            .min()
            .unwrap_or(0)
            .min(want_inline);
        if data.host_accessible() && opts.inline_size.is_some_and(|i| i > inline) {
            eprintln!(
                "warning: {} allows {inline} bytes inline, not the {} asked with -I",
                ctx.name,
                opts.inline_size.unwrap_or(0)
            );
        }
        let rd_atomic = port.max_qp_rd_atom.min(16);
        let psns: Vec<u32> = (0..qps_n as u32).map(psn).collect();
        let mine = PeerInfo {
            device: ctx.name.clone(),
            lid: port.lid,
            gid: gid.as_ref().map(|(_, raw)| *raw),
            gid_kind: gid.as_ref().and_then(|(e, _)| e.kind.clone()),
            mtu,
            ctrl: ctrl.advertise(),
            data: data.advertise(),
            slot: slot as u64,
            qpns: qps.iter().map(|q| q.qpn).collect(),
            psns: psns.clone(),
            rd_atomic,
        };
        let peer: PeerInfo = exchange(spec.role, link, &mine)?;
        if peer.qpns.len() != qps_n || peer.slot != slot as u64 {
            bail!(
                "the peer set up {} queue pair(s) of {}-byte slots, this side {qps_n} of {slot}: \
                 both sides must run the same version with the same -q and sizes (the slot \
                 holds the largest)",
                peer.qpns.len(),
                peer.slot
            );
        }
        if let (Some(a), Some(b)) = (&mine.gid_kind, &peer.gid_kind) {
            if a != b {
                bail!(
                    "GID type mismatch: this side ({} {}) sends {a}, the peer ({}) {b}; the two \
                     cannot talk. Pick GIDs of the same type on both sides with -x (RoCE v2 \
                     with an IPv4-mapped address is the usual choice)",
                    ctx.name,
                    gid.as_ref().map_or(String::new(), |(e, _)| e.describe()),
                    peer.device
                );
            }
        }
        if gid.is_some() != peer.gid.is_some() {
            bail!(
                "one side routes by GID and the other by LID only: give -x on both sides \
                 (or on neither, on InfiniBand)"
            );
        }
        let path_mtu = mtu.min(peer.mtu);
        let mtu_enum = device::mtu_enum(path_mtu).unwrap_or(ibv_mtu::IBV_MTU_1024);
        let sgid_index = gid.as_ref().map(|(e, _)| e.index as u8);
        for (i, qp) in qps.iter().enumerate() {
            qp.connect(&Path {
                port: opts.port,
                mtu: mtu_enum,
                sgid_index,
                dgid: peer.gid.unwrap_or([0; 16]),
                dlid: peer.lid,
                local_psn: psns[i],
                remote_psn: peer.psns[i],
                remote_qpn: peer.qpns[i],
                rd_atomic: rd_atomic.min(peer.rd_atomic) as u8,
                flow_label: super::qp::flow_label(i),
                sl: opts.sl,
                traffic_class: opts.tclass,
            })?;
        }
        let recv_dst = (0..qps_n)
            .map(|q| data.local((qps_n + q) * slot, slot))
            .collect::<Result<Vec<_>>>()?;
        let flow_labels = (0..qps.len())
            .map(|i| sgid_index.map(|_| super::qp::flow_label(i)))
            .collect();
        let mut me = Self {
            flow_labels,
            out_stop: ctrl.local(OUT_STOP, 16)?,
            out_stop_send: ctrl.local(OUT_STOP, 0)?,
            out_beat: ctrl.local(OUT_BEAT, 8)?,
            in_stop: peer.ctrl.at(IN_STOP, 16)?,
            in_beat: peer.ctrl.at(IN_BEAT, 8)?,
            qps,
            send_cq,
            recv_cq,
            ctrl,
            data,
            ctx,
            src: Vec::new(),
            dst: Vec::new(),
            remote_src: Vec::new(),
            remote_dst: Vec::new(),
            recv_dst,
            peer_data: peer.data,
            slot,
            capacity,
            size,
            inline,
            timeout: spec.timeout,
            role: spec.role,
            port: opts.port,
            peer_passive: shape.peer_passive,
            before: Snapshot::default(),
            memory,
            shape,
        };
        me.set_size(size)?;
        if me.shape.recv_depth > 0 || me.shape.passive {
            for q in 0..qps_n {
                for _ in 0..recv_wr {
                    me.post_recv(q)?;
                }
            }
        }
        me.ready(spec.role, link)?;
        Ok(me)
    }

    /// Whether this session can run `spec` with `shape` (the same queues, a message that
    /// fits its memory). Both sides decide alike: they share the plan and the slot size.
    pub fn fits(&self, spec: &EndpointSpec, shape: &Shape) -> bool {
        self.shape == *shape && spec.size.max(1) as usize <= self.capacity && spec.role == self.role
    }

    /// Makes the connected pair ready for the next size, both sides in step:
    ///
    /// 1. a signaled 8-byte write on every QP (into the peer's heartbeat word): RC completes
    ///    a queue's requests in order, so once it completes, every request of the last
    ///    size has, and its completion has been polled here and checked;
    /// 2. receives the last size consumed without reposting (the closing send, the peer's
    ///    end marker) are reposted, so each QP again has its full receive depth;
    /// 3. the words the peer writes (stop, count) are cleared, the message views moved to
    ///    the new size, the source pattern written and the destination slots zeroed (a
    ///    ping-pong by RDMA write watches the last byte, which must not hold a stale mark);
    /// 4. the two sides meet over the control link before anyone sends, and the counters
    ///    start again from here.
    ///
    /// Everything the peer sent in the last size completed before the sizes' reports were
    /// exchanged, so nothing of it is still on the wire.
    pub fn rearm(&mut self, spec: &EndpointSpec, link: &mut dyn PeerLink) -> Result<()> {
        self.settle_sends()?;
        self.repost_consumed()?;
        self.ctrl.write_u64(IN_STOP, 0);
        self.ctrl.write_u64(IN_COUNT, 0);
        self.set_size(spec.size.max(1) as usize)?;
        self.timeout = spec.timeout;
        self.ready(spec.role, link)
    }

    /// Step 1 of [`rearm`](Self::rearm).
    fn settle_sends(&mut self) -> Result<()> {
        let what = "settling the queues between sizes";
        for q in 0..self.qps.len() {
            self.post_fence(q, SETTLE_WR)?;
        }
        let mut left = self.qps.len();
        let mut wcs: [ibv_wc; 8] = std::array::from_fn(|_| cq::empty_wc());
        while left > 0 {
            let n = self.send_cq.wait(&mut wcs, self.timeout, what)?;
            for wc in &wcs[..n] {
                cq::check(wc, what)?;
                if wc.wr_id == SETTLE_WR {
                    left -= 1;
                }
            }
        }
        Ok(())
    }

    /// Step 2 of [`rearm`](Self::rearm).
    fn repost_consumed(&mut self) -> Result<()> {
        let mut wcs: [ibv_wc; 8] = std::array::from_fn(|_| cq::empty_wc());
        loop {
            let n = self.recv_cq.poll(&mut wcs)?;
            if n == 0 {
                return Ok(());
            }
            for wc in &wcs[..n] {
                cq::check(wc, "settling the receive queue between sizes")?;
                self.post_recv(wc.wr_id as usize)?;
            }
        }
    }

    /// Points the message views at the first `size` bytes of each slot, writes the source
    /// pattern for that size and zeroes as much of each destination slot.
    fn set_size(&mut self, size: usize) -> Result<()> {
        let (mut src, mut dst, mut remote_src, mut remote_dst) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let zero = vec![0u8; size];
        for q in 0..self.qps.len() {
            let (s_off, d_off) = (self.src_off(q), self.dst_off(q));
            self.data.write_bytes(s_off, &pattern_bytes(q, size))?;
            self.data.write_bytes(d_off, &zero)?;
            src.push(self.data.local(s_off, size)?);
            dst.push(self.data.local(d_off, size)?);
            remote_src.push(self.peer_data.at(s_off, size)?);
            remote_dst.push(self.peer_data.at(d_off, size)?);
        }
        (self.src, self.dst, self.remote_src, self.remote_dst) = (src, dst, remote_src, remote_dst);
        self.size = size;
        Ok(())
    }

    /// Both sides' receives are posted and QPs in RTS before anyone sends; the counter
    /// deltas of the test start here.
    fn ready(&mut self, role: Role, link: &mut dyn PeerLink) -> Result<()> {
        let _: bool = exchange(role, link, &true)?;
        self.before = counters::read(&self.ctx.name, u32::from(self.port));
        Ok(())
    }

    pub fn device(&self) -> &str {
        &self.ctx.name
    }

    /// Offset of src slot `q` in the data region.
    #[inline(always)]
    pub fn src_off(&self, q: usize) -> usize {
        q * self.slot
    }

    /// Offset of dst slot `q` in the data region.
    #[inline(always)]
    pub fn dst_off(&self, q: usize) -> usize {
        (self.qps.len() + q) * self.slot
    }

    /// Our src slot `q` as a work request's local bytes.
    #[inline(always)]
    pub fn src(&self, q: usize) -> &Local {
        &self.src[q]
    }

    /// Our dst slot `q`.
    #[inline(always)]
    pub fn dst(&self, q: usize) -> &Local {
        &self.dst[q]
    }

    /// The peer's dst slot `q` (target of writes).
    #[inline(always)]
    pub fn remote_dst(&self, q: usize) -> Remote {
        self.remote_dst[q]
    }

    /// The peer's src slot `q` (source of reads).
    #[inline(always)]
    pub fn remote_src(&self, q: usize) -> Remote {
        self.remote_src[q]
    }

    /// Whether a message of this session's size goes inline when `may_inline`.
    #[inline(always)]
    pub fn inline(&self, may_inline: bool) -> bool {
        may_inline && self.size as u32 <= self.inline
    }

    /// Posts one receive into dst slot `q` (wr_id = q), the whole slot.
    #[inline(always)]
    pub fn post_recv(&self, q: usize) -> Result<()> {
        self.qps[q].post_recv(&self.recv_dst[q], q as u64)
    }

    /// A harmless 8-byte write on QP `q`: our heartbeat staging word into the peer's
    /// heartbeat slot. Used as a signaled "fence" behind unsignaled requests.
    pub fn post_fence(&self, q: usize, wr_id: u64) -> Result<()> {
        self.qps[q].post_send(
            SendOp::Write(self.in_beat),
            Some(&self.out_beat),
            true,
            false,
            wr_id,
        )
    }

    /// Has the peer written its stop word?
    #[inline(always)]
    pub fn peer_stopped(&self) -> bool {
        self.ctrl.read_u64_volatile(IN_STOP) != 0
    }

    /// The count the peer wrote with its stop word.
    pub fn peer_count(&self) -> u64 {
        self.ctrl.read_u64_volatile(IN_COUNT)
    }

    /// Posts a small control request on QP 0 and waits for its completion. `service` runs
    /// while waiting (e.g. reposting receives).
    fn control_post(
        &mut self,
        op: SendOp,
        local: Local,
        what: &str,
        service: &mut dyn FnMut(&Session) -> Result<()>,
    ) -> Result<()> {
        self.qps[0].post_send(op, Some(&local), true, false, CTRL_WR)?;
        let mut wcs: [ibv_wc; 8] = std::array::from_fn(|_| cq::empty_wc());
        let start = Instant::now();
        loop {
            let n = self.send_cq.poll(&mut wcs)?;
            for wc in &wcs[..n] {
                cq::check(wc, what)?;
                if wc.wr_id == CTRL_WR {
                    return Ok(());
                }
            }
            service(self)?;
            if n == 0 {
                if start.elapsed() > self.timeout {
                    return Err(cq::stalled(what, self.timeout));
                }
                std::hint::spin_loop();
            }
        }
    }

    /// Tells the peer this side has finished, after `count` messages (after all data WRs
    /// completed: RC keeps the order, so the peer sees the data before the word).
    pub fn send_stop(
        &mut self,
        count: u64,
        service: &mut dyn FnMut(&Session) -> Result<()>,
    ) -> Result<()> {
        self.ctrl.write_u64(OUT_STOP, 1);
        self.ctrl.write_u64(OUT_STOP + 8, count);
        let what = "telling the peer the test ended";
        self.control_post(SendOp::Write(self.in_stop), self.out_stop, what, service)?;
        if self.peer_passive {
            // A zero-byte send lands in the receive the sleeping peer posted and wakes it;
            // RC delivers it after the word.
            self.control_post(SendOp::Send, self.out_stop_send, what, service)?;
        }
        Ok(())
    }

    /// Passive side: an 8-byte write to the peer, so a peer that died is noticed (its QP
    /// is gone and the write fails with IBV_WC_RETRY_EXC_ERR) instead of waiting forever.
    pub fn heartbeat(&mut self) -> Result<()> {
        self.ctrl.write_u64(OUT_BEAT, 1);
        self.control_post(
            SendOp::Write(self.in_beat),
            self.out_beat,
            "checking that the initiator is alive (heartbeat)",
            &mut |_| Ok(()),
        )
        .map_err(|e| e.context("the initiator stopped answering: did it exit or crash?"))
    }

    /// Passive side: sleeps on the completion channel until the peer's closing send
    /// arrives (or its stop word shows), sending a heartbeat every second.
    pub fn wait_stop_passive(&mut self) -> Result<()> {
        let mut beat = Instant::now();
        let mut wcs: [ibv_wc; 4] = std::array::from_fn(|_| cq::empty_wc());
        while !self.peer_stopped() {
            self.recv_cq.block(Duration::from_millis(250))?;
            let n = self.recv_cq.poll(&mut wcs)?;
            for wc in &wcs[..n] {
                cq::check(wc, "waiting for the end of the test")?;
                // The closing send took a receive: put it back for the next size.
                self.post_recv(wc.wr_id as usize)?;
            }
            if n == 0 && beat.elapsed() >= Duration::from_secs(1) {
                self.heartbeat()?;
                beat = Instant::now();
            }
        }
        Ok(())
    }

    /// Counter deltas since the session was connected.
    pub fn counters(&self) -> Option<PortCounters> {
        let after = counters::read(&self.ctx.name, u32::from(self.port));
        if after.counters.is_empty() && after.hw_counters.is_empty() {
            return None;
        }
        Some(counters::delta(&self.before, &after))
    }

    /// `--check`: bytes of the dst slots that differ from the pattern (GPU memory is
    /// copied back to the host to compare).
    pub fn wrong_bytes(&self) -> Result<u64> {
        let mut wrong = 0u64;
        let mut buf = vec![0u8; self.size];
        for q in 0..self.qps.len() {
            self.data.read_bytes(self.dst_off(q), &mut buf)?;
            wrong += wrong_bytes(q, &buf);
        }
        Ok(wrong)
    }
}
