//! One size (tokens per rank) of the EP collectives on one team: route, count exchange
//! (timed apart, over MPI), then per collective: warm up, line the ranks up, time each
//! iteration on every rank (the step is the slowest rank's), check one extra call, and
//! the figures (`results::collective::EpFigures`). The rows move over MPI on host memory
//! (`MPI_Alltoallv`, flat or two-stage) or over NCCL on GPU memory (one group of
//! `ncclSend`/`ncclRecv` per call, flat): [`Mover`].

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use anyhow::{ensure, Result};
use mpi::collective::SystemOperation;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;

use base::clock::{LoopClock, LoopStamps};
use results::collective::{EpFigures, EP_BYTE_FORMULA};
use results::CollectiveResult;
use transport::collective::mpi::RowExchange;

use crate::ep::route::{self, Geometry, RankRouting};
use crate::ep::{EpCollective, EpPlan, Payload, Variant};
use crate::measure::{self, Site};
use crate::plan::Plan;
use crate::timing::Timed;

/// Value of element i of rank r's token t in the dispatch payload (a small integer, so
/// every sum the check makes is exact in BF16).
fn value(r: usize, t: usize, i: usize) -> u8 {
    ((r * 3 + t + i) % 4) as u8
}

/// Scale j of rank r's token t.
fn scale(r: usize, t: usize, j: usize) -> f32 {
    ((r + t + j) % 7) as f32
}

/// What expert e does to a token: multiplies it by (e mod 3) + 1.
fn expert_factor(e: u32) -> f32 {
    (e % 3 + 1) as f32
}

/// Writes rank r's dispatch rows in `order` (destination ranks in buffer order).
fn fill_dispatch(buf: &mut [u8], r: usize, to: &[Vec<u32>], order: &[usize], hidden: usize) {
    let row = Payload::Fp8.bytes_per_copy(hidden);
    let mut at = 0;
    for &p in order {
        for &t in &to[p] {
            let dst = &mut buf[at..at + row];
            for (i, b) in dst[..hidden].iter_mut().enumerate() {
                *b = value(r, t as usize, i);
            }
            for (j, s) in dst[hidden..].chunks_exact_mut(4).enumerate() {
                s.copy_from_slice(&scale(r, t as usize, j).to_le_bytes());
            }
            at += row;
        }
    }
}

/// The rows this rank receives, in order: (source rank, token), sources ascending (both
/// variants deliver in this order).
fn incoming(all: &[RankRouting], g: &Geometry, me: usize) -> Vec<(usize, u32)> {
    let mut v = Vec::new();
    for (s, r) in all.iter().enumerate() {
        for t in &route::copies(r, g)[me] {
            v.push((s, *t));
        }
    }
    v
}

/// Wrong bytes among the received dispatch rows.
fn check_dispatch(recv: &[u8], rows: &[(usize, u32)], hidden: usize) -> u64 {
    let row = Payload::Fp8.bytes_per_copy(hidden);
    let mut wrong = 0u64;
    for (k, &(s, t)) in rows.iter().enumerate() {
        let got = &recv[k * row..(k + 1) * row];
        for (i, &b) in got[..hidden].iter().enumerate() {
            wrong += u64::from(b != value(s, t as usize, i));
        }
        for (j, c) in got[hidden..].chunks_exact(4).enumerate() {
            wrong += u64::from(c != scale(s, t as usize, j).to_le_bytes());
        }
    }
    wrong
}

/// The expert rank's combine rows: for each received token, the gate-weighted sum of this
/// rank's experts' outputs, computed from the bytes that arrived.
fn expert_outputs(
    recv: &[u8],
    rows: &[(usize, u32)],
    all: &[RankRouting],
    g: &Geometry,
    me: usize,
    hidden: usize,
    out: &mut [u8],
) {
    let row_in = Payload::Fp8.bytes_per_copy(hidden);
    let row_out = Payload::Bf16.bytes_per_copy(hidden);
    for (k, &(s, t)) in rows.iter().enumerate() {
        let mut w = 0f32;
        for (j, &e) in all[s].selections(t as usize).iter().enumerate() {
            if g.rank_of(e as usize) == me {
                w += route::gate_weight(j) * expert_factor(e);
            }
        }
        let x = &recv[k * row_in..k * row_in + hidden];
        let y = &mut out[k * row_out..(k + 1) * row_out];
        for (i, c) in y.chunks_exact_mut(2).enumerate() {
            c.copy_from_slice(&half::bf16::from_f32(w * f32::from(x[i])).to_le_bytes());
        }
    }
}

/// Wrong elements of the combined tokens: the owner adds the copies that came back and
/// compares with sum_j w_j * factor(e_j) * its own token.
fn check_combine(
    recv: &[u8],
    mine: &RankRouting,
    to: &[Vec<u32>],
    order: &[usize],
    me: usize,
    hidden: usize,
) -> u64 {
    let row = Payload::Bf16.bytes_per_copy(hidden);
    let mut sum = vec![0f32; mine.tokens * hidden];
    let mut at = 0;
    for &p in order {
        for &t in &to[p] {
            let base = t as usize * hidden;
            for (i, c) in recv[at..at + row].chunks_exact(2).enumerate() {
                sum[base + i] += half::bf16::from_le_bytes([c[0], c[1]]).to_f32();
            }
            at += row;
        }
    }
    let mut wrong = 0u64;
    for t in 0..mine.tokens {
        let w: f32 = mine
            .selections(t)
            .iter()
            .enumerate()
            .map(|(j, &e)| route::gate_weight(j) * expert_factor(e))
            .sum();
        for i in 0..hidden {
            wrong += u64::from(sum[t * hidden + i] != w * f32::from(value(me, t, i)));
        }
    }
    wrong
}

/// Which library moves an EP run's rows, and from which memory.
#[derive(Clone, Copy)]
pub enum Mover<'b> {
    /// MPI on host memory.
    Mpi,
    /// NCCL on this rank's GPU (the backend's GPU and communicator).
    #[cfg(feature = "cuda")]
    Nccl(&'b crate::backend::nccl::NcclBackend),
    #[doc(hidden)]
    #[cfg(not(feature = "cuda"))]
    _Unused(std::marker::PhantomData<&'b ()>),
}

/// One direction's rows on the GPU: the send rows uploaded once per content (`load`), the
/// exchange on the device each call, the received rows downloaded for the check (`fetch`).
#[cfg(feature = "cuda")]
struct GpuRows<'b> {
    nccl: &'b crate::backend::nccl::NcclBackend,
    send: transport::cuda::DeviceBuffer,
    recv: transport::cuda::DeviceBuffer,
    row: usize,
    send_counts: Vec<usize>,
    recv_counts: Vec<usize>,
}

/// How one direction's rows move: one exchange, or two with a regrouping between, or one
/// on the GPU. One `Path` per direction of a run, made outside the timed loop: its size
/// does not matter.
#[allow(clippy::large_enum_variant)]
enum Path<'c> {
    One(RowExchange<'c>),
    #[cfg(feature = "cuda")]
    Gpu(GpuRows<'c>),
    Two {
        first: RowExchange<'c>,
        /// (from row, to row, rows) block copies between the two stages.
        regroup: Vec<(usize, usize, usize)>,
        second: RowExchange<'c>,
        row: usize,
        mid_a: Vec<u8>,
        mid_b: Vec<u8>,
    },
}

impl Path<'_> {
    /// Puts the rows to send where the exchange reads them (GPU: uploads them; host
    /// paths read `send` in each `run`).
    fn load(&mut self, send: &[u8]) -> Result<()> {
        match self {
            #[cfg(feature = "cuda")]
            Path::Gpu(g) => g.send.write(0, send),
            _ => {
                let _ = send;
                Ok(())
            }
        }
    }

    /// Brings the received rows into `recv` (GPU: downloads them; host paths wrote them
    /// there in `run`).
    fn fetch(&mut self, recv: &mut [u8]) -> Result<()> {
        match self {
            #[cfg(feature = "cuda")]
            Path::Gpu(g) => g.recv.read(0, recv),
            _ => {
                let _ = recv;
                Ok(())
            }
        }
    }

    /// Poisons the rows to be received, where the exchange writes them.
    fn poison(&mut self, recv: &mut [u8]) -> Result<()> {
        recv.fill(0xff);
        match self {
            #[cfg(feature = "cuda")]
            Path::Gpu(g) => g.recv.fill(0xff),
            _ => Ok(()),
        }
    }

    fn run(&mut self, send: &[u8], recv: &mut [u8]) -> Result<()> {
        match self {
            Path::One(x) => x.run(send, recv),
            #[cfg(feature = "cuda")]
            Path::Gpu(g) => {
                g.nccl
                    .comm()
                    .exchange_rows(&g.send, &g.recv, g.row, &g.send_counts, &g.recv_counts)
            }
            Path::Two {
                first,
                regroup,
                second,
                row,
                mid_a,
                mid_b,
            } => {
                first.run(send, mid_a)?;
                for &(from, to, n) in regroup.iter() {
                    mid_b[to * *row..(to + n) * *row]
                        .copy_from_slice(&mid_a[from * *row..(from + n) * *row]);
                }
                second.run(mid_b, recv)
            }
        }
    }
}

/// The per-peer counts of both variants, from the count exchange.
struct Counts {
    /// Destination ranks in send-buffer order.
    order: Vec<usize>,
    send_rows: usize,
    recv_rows: usize,
    /// Flat: per rank of the team.
    flat: Option<(Vec<usize>, Vec<usize>)>,
    /// Two-stage: stage 1 (node communicator) send/receive per local rank, the
    /// regrouping, stage 2 (rail communicator) send/receive per node.
    two: Option<TwoCounts>,
    /// Rows this rank sent off its node.
    off_node_rows: usize,
}

struct TwoCounts {
    s1: Vec<usize>,
    r1: Vec<usize>,
    regroup: Vec<(usize, usize, usize)>,
    s2: Vec<usize>,
    r2: Vec<usize>,
}

fn all_to_all(comm: &SimpleCommunicator, send: &[u64]) -> Vec<u64> {
    let mut recv = vec![0u64; send.len()];
    comm.all_to_all_into(send, &mut recv[..]);
    recv
}

/// The count exchange: every rank learns how many rows come from every other.
fn exchange_counts(
    variant: Variant,
    comm: &SimpleCommunicator,
    node: Option<&SimpleCommunicator>,
    rail: Option<&SimpleCommunicator>,
    g: &Geometry,
    me: usize,
    to: &[Vec<u32>],
) -> Counts {
    let rpn = g.ranks_per_node;
    let nodes = g.nodes();
    let my_node = me / rpn;
    match variant {
        Variant::Flat => {
            let send: Vec<u64> = to.iter().map(|v| v.len() as u64).collect();
            let recv = all_to_all(comm, &send);
            let s: Vec<usize> = send.iter().map(|&x| x as usize).collect();
            let r: Vec<usize> = recv.iter().map(|&x| x as usize).collect();
            let off = (0..g.ranks)
                .filter(|&p| p / rpn != my_node)
                .map(|p| s[p])
                .sum();
            Counts {
                order: (0..g.ranks).collect(),
                send_rows: s.iter().sum(),
                recv_rows: r.iter().sum(),
                flat: Some((s, r)),
                two: None,
                off_node_rows: off,
            }
        }
        Variant::TwoStage => {
            let (node, rail) = (node.expect("node comm"), rail.expect("rail comm"));
            // Stage 1: to local rank l, the rows for (n, l), nodes ascending.
            let mut per: Vec<u64> = Vec::with_capacity(rpn * nodes);
            let mut order = Vec::with_capacity(g.ranks);
            for l in 0..rpn {
                for n in 0..nodes {
                    per.push(to[n * rpn + l].len() as u64);
                    order.push(n * rpn + l);
                }
            }
            let got = all_to_all(node, &per);
            let s1: Vec<usize> = (0..rpn)
                .map(|l| per[l * nodes..(l + 1) * nodes].iter().sum::<u64>() as usize)
                .collect();
            let r1: Vec<usize> = (0..rpn)
                .map(|s| got[s * nodes..(s + 1) * nodes].iter().sum::<u64>() as usize)
                .collect();
            // Stage 2 (rail): to node n, from every local source s in turn.
            let s2: Vec<usize> = (0..nodes)
                .map(|n| (0..rpn).map(|s| got[s * nodes + n] as usize).sum())
                .collect();
            let regroup = regroup_by_node(&got, rpn, nodes);
            let r2: Vec<usize> =
                all_to_all(rail, &s2.iter().map(|&x| x as u64).collect::<Vec<_>>())
                    .into_iter()
                    .map(|x| x as usize)
                    .collect();
            let off = (0..nodes).filter(|&n| n != my_node).map(|n| s2[n]).sum();
            Counts {
                order,
                send_rows: s1.iter().sum(),
                recv_rows: r2.iter().sum(),
                flat: None,
                two: Some(TwoCounts {
                    s1,
                    r1,
                    regroup,
                    s2,
                    r2,
                }),
                off_node_rows: off,
            }
        }
    }
}

/// Between the two stages a rank holds, from each local source s in turn, the rows for
/// every node n (`got[s * nodes + n]` of them); the rail stage sends them node by node.
/// The copies that regroup them: (from, to, rows), empty runs left out.
fn regroup_by_node(got: &[u64], rpn: usize, nodes: usize) -> Vec<(usize, usize, usize)> {
    let mut src_at = vec![0usize; rpn * nodes];
    let mut at = 0;
    for s in 0..rpn {
        for n in 0..nodes {
            src_at[s * nodes + n] = at;
            at += got[s * nodes + n] as usize;
        }
    }
    let mut regroup = Vec::new();
    let mut dst = 0;
    for n in 0..nodes {
        for s in 0..rpn {
            let k = got[s * nodes + n] as usize;
            if k > 0 {
                regroup.push((src_at[s * nodes + n], dst, k));
            }
            dst += k;
        }
    }
    regroup
}

/// The path of one direction (`back`: combine, counts swapped, stages reversed).
fn path<'c>(
    c: &Counts,
    mover: Mover<'c>,
    comm: &'c SimpleCommunicator,
    node: Option<&'c SimpleCommunicator>,
    rail: Option<&'c SimpleCommunicator>,
    row: usize,
    back: bool,
) -> Result<Path<'c>> {
    if let Some((s, r)) = &c.flat {
        let (s, r) = if back { (r, s) } else { (s, r) };
        return match mover {
            Mover::Mpi => Ok(Path::One(RowExchange::new(comm, row, s, r)?)),
            #[cfg(feature = "cuda")]
            Mover::Nccl(nccl) => Ok(Path::Gpu(GpuRows {
                nccl,
                send: nccl.gpu().alloc(s.iter().sum::<usize>() * row)?,
                recv: nccl.gpu().alloc(r.iter().sum::<usize>() * row)?,
                row,
                send_counts: s.clone(),
                recv_counts: r.clone(),
            })),
            #[cfg(not(feature = "cuda"))]
            Mover::_Unused(_) => unreachable!(),
        };
    }
    ensure!(
        matches!(mover, Mover::Mpi),
        "internal error: the two-stage variant over NCCL (the plan refuses it)"
    );
    let t = c.two.as_ref().expect("one variant");
    let (node, rail) = (node.expect("node comm"), rail.expect("rail comm"));
    let mid_rows: usize = t.r1.iter().sum();
    let (first, second, regroup) = if back {
        let inverse = t.regroup.iter().map(|&(a, b, n)| (b, a, n)).collect();
        (
            RowExchange::new(rail, row, &t.r2, &t.s2)?,
            RowExchange::new(node, row, &t.r1, &t.s1)?,
            inverse,
        )
    } else {
        (
            RowExchange::new(node, row, &t.s1, &t.r1)?,
            RowExchange::new(rail, row, &t.s2, &t.r2)?,
            t.regroup.clone(),
        )
    };
    Ok(Path::Two {
        first,
        regroup,
        second,
        row,
        mid_a: vec![0u8; mid_rows * row],
        mid_b: vec![0u8; mid_rows * row],
    })
}

/// Per iteration, the slowest rank's nanoseconds.
fn slowest(comm: &SimpleCommunicator, ns: &[u64]) -> Vec<u64> {
    let mut out = vec![0u64; ns.len()];
    comm.all_reduce_into(ns, &mut out[..], SystemOperation::max());
    out
}

/// Nearest-rank percentile of `v` (sorted here), microseconds.
fn pct_us(v: &[u64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    if s.is_empty() {
        return 0.0;
    }
    let k = ((p * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[k] as f64 / 1000.0
}

fn sum_u64(comm: &SimpleCommunicator, x: u64) -> u64 {
    let mut out = 0u64;
    comm.all_reduce_into(&x, &mut out, SystemOperation::sum());
    out
}

fn max_u64(comm: &SimpleCommunicator, x: u64) -> u64 {
    let mut out = 0u64;
    comm.all_reduce_into(&x, &mut out, SystemOperation::max());
    out
}

/// Ranks per node of this team: the option, or its ranks over its hosts.
pub fn ranks_per_node(ep: &EpPlan, site: &Site) -> Result<usize> {
    let ranks = site.team.size() as usize;
    let rpn = match ep.ranks_per_node {
        Some(n) => n as usize,
        None => ranks / (site.spec.nodes.max(1) as usize),
    };
    ensure!(
        rpn > 0 && ranks.is_multiple_of(rpn),
        "{ranks} ranks on {} hosts do not form nodes of equal size: pass --ranks-per-node",
        site.spec.nodes
    );
    Ok(rpn)
}

/// Every EP collective of the plan at `tokens` tokens per rank: the routing, the count
/// exchange (timed apart), the buffers and paths, then each collective timed, checked
/// and described.
pub fn size(
    plan: &Plan,
    ep: &EpPlan,
    site: &Site,
    mover: Mover<'_>,
    tokens: u64,
) -> Result<Vec<CollectiveResult>> {
    let team = site.team;
    let comm = team.comm();
    let ranks = team.size() as usize;
    let me = team.rank() as usize;
    let hidden = ep.hidden as usize;
    let g = Geometry::new(
        ranks,
        ranks_per_node(ep, site)?,
        ep.experts as usize,
        ep.topk as usize,
    )?;
    route::check(ep.routing, &g)?;
    let tokens = tokens as usize;
    let mine = route::route(ep.routing, ep.seed, &g, me, tokens);
    let to = route::copies(&mine, &g);
    let (node_comm, rail_comm) = stage_comms(ep.variant, comm, &g, me);
    let (node, rail) = (node_comm.as_ref(), rail_comm.as_ref());
    let r = AtTokens {
        plan,
        site,
        g,
        me,
        tokens,
        clock: LoopClock::new(),
        progress: Arc::new(AtomicU64::new(0)),
    };
    let (counts, notify) = r.count_exchange(ep.variant, node, rail, &to);
    let row_d = Payload::Fp8.bytes_per_copy(hidden);
    let row_c = Payload::Bf16.bytes_per_copy(hidden);
    let mut b = Buffers::new(&counts, row_d, row_c);
    fill_dispatch(&mut b.d_send, me, &to, &counts.order, hidden);
    let mut dispatch = path(&counts, mover, comm, node, rail, row_d, false)?;
    let mut combine = path(&counts, mover, comm, node, rail, row_c, true)?;
    let check = plan.check.then(|| Checked::of(ep, &r.g, me, tokens));
    let totals = Totals::of(comm, &counts, &mine, &r.g);
    let mut out = Vec::new();
    for coll in &ep.collectives {
        if coll.backwards {
            r.expert_outputs(coll, &mut dispatch, &mut b, check.as_ref(), hidden)?;
        }
        let (p, send, recv): (&mut Path, &[u8], &mut [u8]) = if coll.backwards {
            (&mut combine, &b.c_send, &mut b.c_recv)
        } else {
            (&mut dispatch, &b.d_send, &mut b.d_recv)
        };
        let timed = r.time(coll, p, send, recv)?;
        let wrong = match &check {
            Some(c) => {
                let _g = r.guard(format!("in the checked call of {}", coll.name));
                p.poison(recv)?;
                p.run(send, recv)?;
                p.fetch(recv)?;
                if site.corrupt {
                    if let Some(b) = recv.first_mut() {
                        *b ^= 0x41;
                    }
                }
                Some(if coll.backwards {
                    check_combine(recv, &mine, &to, &counts.order, me, hidden)
                } else {
                    check_dispatch(recv, &c.rows, hidden)
                })
            }
            None => None,
        };
        out.push(r.row(ep, coll, &timed, wrong, &totals, &notify)?);
    }
    Ok(out)
}

/// The payload buffers: dispatch send and receive, combine send (one row per received
/// token) and receive (one per sent copy).
struct Buffers {
    d_send: Vec<u8>,
    d_recv: Vec<u8>,
    c_send: Vec<u8>,
    c_recv: Vec<u8>,
}

impl Buffers {
    /// Rows of `row_d` bytes (an FP8 copy) for the dispatch, `row_c` (BF16) for the combine.
    fn new(counts: &Counts, row_d: usize, row_c: usize) -> Self {
        Buffers {
            d_send: vec![0u8; counts.send_rows * row_d],
            d_recv: vec![0x5au8; counts.recv_rows * row_d],
            c_send: vec![0x5au8; counts.recv_rows * row_c],
            c_recv: vec![0x5au8; counts.send_rows * row_c],
        }
    }
}

/// The two-stage variant's communicators: this rank's node, and its rail across the
/// nodes (none for the flat one).
fn stage_comms(
    variant: Variant,
    comm: &SimpleCommunicator,
    g: &Geometry,
    me: usize,
) -> (Option<SimpleCommunicator>, Option<SimpleCommunicator>) {
    match variant {
        Variant::Flat => (None, None),
        Variant::TwoStage => (
            comm.split_by_color(Color::with_value((me / g.ranks_per_node) as i32)),
            comm.split_by_color(Color::with_value((me % g.ranks_per_node) as i32)),
        ),
    }
}

/// Everyone's routing and the rows this rank must receive, when the run is checked.
struct Checked {
    all: Vec<RankRouting>,
    rows: Vec<(usize, u32)>,
}

impl Checked {
    /// Everyone's routing, for the check (what each rank must receive, and the gates).
    fn of(ep: &EpPlan, g: &Geometry, me: usize, tokens: usize) -> Self {
        let all: Vec<RankRouting> = (0..g.ranks)
            .map(|x| route::route(ep.routing, ep.seed, g, x, tokens))
            .collect();
        let rows = incoming(&all, g, me);
        Checked { all, rows }
    }
}

/// What every rank agrees on: the most copies one rank received, all copies sent, those
/// sent off their node, and the copies DeepEP's count takes (one per node reached).
struct Totals {
    received_max: u64,
    copies: u64,
    off_node: u64,
    node_copies: u64,
    ranks: usize,
}

impl Totals {
    fn of(comm: &SimpleCommunicator, counts: &Counts, mine: &RankRouting, g: &Geometry) -> Self {
        Totals {
            received_max: max_u64(comm, counts.recv_rows as u64),
            copies: sum_u64(comm, counts.send_rows as u64),
            off_node: sum_u64(comm, counts.off_node_rows as u64),
            node_copies: sum_u64(comm, route::node_copies(mine, g)),
            ranks: g.ranks,
        }
    }

    fn mean_received(&self) -> f64 {
        self.copies as f64 / self.ranks as f64
    }
}

/// One token count's run on this rank: what every step of it shares.
struct AtTokens<'a, 's, 't> {
    plan: &'a Plan,
    site: &'a Site<'s, 't>,
    g: Geometry,
    me: usize,
    tokens: usize,
    clock: LoopClock,
    progress: Arc<AtomicU64>,
}

impl AtTokens<'_, '_, '_> {
    /// The watchdog armed on this run's progress while the guard lives.
    fn guard(&self, what: String) -> bootstrap::watchdog::Guard {
        self.site
            .team
            .watchdog()
            .arm_progress(what, Arc::clone(&self.progress))
    }

    /// The count exchange, timed apart (DeepEP's "notify"): the counts, and the slowest
    /// rank's time of each iteration.
    fn count_exchange(
        &self,
        variant: Variant,
        node: Option<&SimpleCommunicator>,
        rail: Option<&SimpleCommunicator>,
        to: &[Vec<u32>],
    ) -> (Counts, Vec<u64>) {
        let team = self.site.team;
        let comm = team.comm();
        let _g = self.guard(format!("in the count exchange at {} tokens", self.tokens));
        let once = || exchange_counts(variant, comm, node, rail, &self.g, self.me, to);
        for _ in 0..self.plan.warmup {
            once();
        }
        team.barrier("before the timed count exchange");
        let stamps = LoopStamps::run(
            &self.clock,
            self.plan.iters as usize,
            &self.progress,
            || {
                once();
                Ok::<(), ()>(())
            },
        )
        .expect("infallible");
        let notify = slowest(comm, &stamps.iteration_ns(&self.clock));
        (once(), notify)
    }

    /// Before a combine: the tokens dispatched, and the experts' outputs in place (a
    /// known pattern when unchecked).
    fn expert_outputs(
        &self,
        coll: &EpCollective,
        dispatch: &mut Path,
        b: &mut Buffers,
        check: Option<&Checked>,
        hidden: usize,
    ) -> Result<()> {
        let _g = self.guard(format!("in the dispatch before {}", coll.name));
        dispatch.load(&b.d_send)?;
        dispatch.run(&b.d_send, &mut b.d_recv)?;
        dispatch.fetch(&mut b.d_recv)?;
        match check {
            Some(c) => expert_outputs(
                &b.d_recv,
                &c.rows,
                &c.all,
                &self.g,
                self.me,
                hidden,
                &mut b.c_send,
            ),
            None => b.c_send.fill(0x3c),
        }
        Ok(())
    }

    /// Warm-up, the ranks lined up, then every iteration timed.
    fn time(
        &self,
        coll: &EpCollective,
        p: &mut Path,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<Timed> {
        {
            let _g = self.guard(format!("in the warm-up of {}", coll.name));
            p.load(send)?;
            for _ in 0..self.plan.warmup {
                p.run(send, recv)?;
            }
        }
        self.site.team.barrier("before the timed loop");
        let _g = self.guard(format!(
            "in {} at {} tokens: an iteration made no progress (a rank stopped taking part)",
            coll.name, self.tokens
        ));
        let stamps = LoopStamps::run(
            &self.clock,
            self.plan.iters as usize,
            &self.progress,
            || p.run(send, recv),
        )?;
        Ok(Timed {
            loop_ns: stamps.total_ns(&self.clock),
            iteration_ns: stamps.iteration_ns(&self.clock),
        })
    }

    /// The collective's row: nccl-tests' timing over the mean bytes a rank sends, and the
    /// EP figures from the slowest rank's steps.
    fn row(
        &self,
        ep: &EpPlan,
        coll: &EpCollective,
        timed: &Timed,
        wrong: Option<u64>,
        totals: &Totals,
        notify: &[u64],
    ) -> Result<CollectiveResult> {
        let (plan, site) = (self.plan, self.site);
        let ranks = totals.ranks;
        let row = coll.payload.bytes_per_copy(ep.hidden as usize);
        let size_bytes = (totals.copies as usize * row / ranks) as u64;
        let timing = measure::combine(plan, site, timed, wrong, size_bytes, 1.0)?;
        let step = slowest(site.team.comm(), &timed.iteration_ns);
        Ok(CollectiveResult {
            collective: coll.name.into(),
            backend: plan.backend.name().into(),
            ranks: ranks as u32,
            nodes: Some(site.spec.nodes),
            size_bytes,
            count: self.tokens as u64,
            datatype: coll.payload.name().into(),
            op: if coll.backwards { "sum" } else { "none" }.into(),
            root: -1,
            iterations: plan.iters,
            warmup_iterations: plan.warmup,
            busbw_factor: 1.0,
            link_gbit_s: site.link_gbit_s,
            in_place: timing.clone(),
            out_of_place: timing,
            complete: true,
            ep: Some(self.figures(ep, coll, row, totals, &step, notify)),
        })
    }

    /// The EP figures: the step's percentiles, the bytes on the network and DeepEP's
    /// count of them, per-rank rates at the median step, and the receive imbalance.
    fn figures(
        &self,
        ep: &EpPlan,
        coll: &EpCollective,
        row: usize,
        totals: &Totals,
        step: &[u64],
        notify: &[u64],
    ) -> EpFigures {
        let p50 = pct_us(step, 0.5);
        let network_bytes = totals.off_node * row as u64;
        let deepep_bytes = totals.node_copies * row as u64;
        let per_rank_rate = |b: u64| results::units::gbyte_s(b / totals.ranks as u64, p50 / 1e6);
        let mean_recv = totals.mean_received();
        EpFigures {
            byte_formula: EP_BYTE_FORMULA.into(),
            variant: ep.variant.name().into(),
            routing: ep.routing.name(),
            seed: ep.seed,
            tokens_per_rank: self.tokens as u64,
            hidden: ep.hidden,
            topk: ep.topk,
            experts: ep.experts,
            ranks_per_node: self.g.ranks_per_node as u32,
            payload: coll.payload.name().into(),
            bytes_per_copy: row as u64,
            copies: totals.copies,
            network_bytes,
            deepep_bytes,
            step_p50_us: p50,
            step_p99_us: pct_us(step, 0.99),
            step_max_us: pct_us(step, 1.0),
            notify_p50_us: pct_us(notify, 0.5),
            notify_max_us: pct_us(notify, 1.0),
            network_gbyte_s: per_rank_rate(network_bytes),
            deepep_gbyte_s: per_rank_rate(deepep_bytes),
            received_max_copies: totals.received_max,
            received_mean_copies: mean_recv,
            imbalance: if mean_recv > 0.0 {
                totals.received_max as f64 / mean_recv
            } else {
                0.0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::regroup_by_node;

    /// Two local sources, two nodes: rows arrive source by source and leave node by node.
    #[test]
    fn regrouping_puts_each_nodes_rows_together_in_source_order() {
        // got[s * nodes + n]: source 0 holds 2 rows for node 0 and 1 for node 1, source 1
        // holds 1 for node 0 and 2 for node 1; a source with none for a node adds no copy.
        assert_eq!(
            regroup_by_node(&[2, 1, 1, 2], 2, 2),
            [(0, 0, 2), (3, 2, 1), (2, 3, 1), (4, 4, 2)]
        );
        assert_eq!(regroup_by_node(&[0, 3, 1, 0], 2, 2), [(3, 0, 1), (0, 1, 3)]);
    }
}
