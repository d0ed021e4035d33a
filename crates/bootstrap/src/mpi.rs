//! MPI bootstrap (`mpirun`, `srun --mpi=pmix`): the job's ranks, and the collective steps
//! a run needs from MPI: the roster exchange, barriers between rounds, agreeing to stop,
//! gathering results at rank 0. The two ranks of a measured pair talk over a TCP control
//! connection of their own (see `p2p`), so a pair that fails cannot leave MPI waiting.
//! MPI calls block forever on a dead rank, so every wait is guarded by the watchdog.

use std::time::Duration;

use anyhow::{bail, Result};
use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;

use crate::node::{self, NodeRank};
use crate::watchdog::Watchdog;

/// An initialised MPI job.
pub struct MpiJob {
    // Dropping the universe finalises MPI: keep it alive as long as the job.
    _universe: Universe,
    world: SimpleCommunicator,
    watchdog: Watchdog,
    node: NodeRank,
}

impl MpiJob {
    /// Initialises MPI. Fails (rather than pretending) when MPI sees a single rank although
    /// a launcher started us: usually `srun` without `--mpi=pmix`.
    pub fn init(timeout: Duration) -> Result<Self> {
        let Some(universe) = mpi::initialize() else {
            bail!("MPI was already initialised in this process");
        };
        let world = universe.world();
        let watchdog = Watchdog::start(timeout, format!("rank {}", world.rank()));
        let node = {
            let _g = watchdog.arm("finding the ranks of this node (MPI_Comm_split_type)");
            node::of(&world, &probe::host::hostname())
        };
        Ok(Self {
            _universe: universe,
            world,
            watchdog,
            node,
        })
    }

    /// This rank's node-local rank (see [`node`]): what picks its GPU.
    pub fn node(&self) -> NodeRank {
        self.node
    }

    /// This rank in MPI_COMM_WORLD.
    pub fn rank(&self) -> u32 {
        self.world.rank() as u32
    }

    /// How many ranks MPI_COMM_WORLD has.
    pub fn size(&self) -> u32 {
        self.world.size() as u32
    }

    /// MPI_COMM_WORLD, for the collectives that need it whole.
    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }

    /// The watchdog that ends the job when a collective wait outlives `--timeout`.
    pub fn watchdog(&self) -> &Watchdog {
        &self.watchdog
    }

    /// Waits for every rank, within the timeout.
    pub fn barrier(&self, what: &str) {
        guarded_barrier(&self.world, &self.watchdog, what);
    }

    /// Waits for every rank with no deadline: for ranks that wait while others do work of
    /// unknown length (a scaling sweep's idle ranks while a sub-communicator measures).
    /// Only where some other rank waits in the same barrier guarded, so that a dead rank
    /// still ends the job.
    pub fn barrier_unguarded(&self) {
        self.world.barrier();
    }

    /// The ranks that pass `member = true` as a [`Team`] (`None` on the others), ordered
    /// by world rank. Every rank of the job must call it (it is `MPI_Comm_split`).
    pub fn split(&self, member: bool) -> Option<Team<'_>> {
        let _g = self
            .watchdog
            .arm("splitting the job into a smaller communicator");
        let color = if member {
            Color::with_value(0)
        } else {
            Color::undefined()
        };
        self.world.split_by_color(color).map(|comm| Team {
            comm,
            watchdog: &self.watchdog,
            node: self.node,
        })
    }

    /// True on every rank when any rank passes true (used to stop a sweep together).
    pub fn any(&self, local: bool) -> bool {
        self.any_within(
            local,
            "agreeing with all ranks whether to go on",
            self.watchdog.timeout(),
        )
    }

    /// [`any`](Self::any) with its own bound on the wait: between rounds of a sweep, where
    /// the slowest pair of the round may take several timeouts before it gives up. The
    /// wait sleeps (see [`any_rank_asleep`]): the ranks that finished first must not take
    /// the cores of those still measuring.
    pub fn any_within(&self, local: bool, what: &str, limit: Duration) -> bool {
        let _g = self.watchdog.arm_for(what, limit);
        any_rank_asleep(&self.world, local)
    }

    /// Brings every rank's run-quality record to rank 0, in rank order (`None` on the
    /// other ranks). Every rank must call it, as any collective.
    pub fn gather_quality(
        &self,
        mine: &results::quality::HostQuality,
    ) -> Result<Option<Vec<results::quality::HostQuality>>> {
        use anyhow::Context;
        self.gather_to_root(&serde_json::to_vec(mine)?)
            .map(|all| {
                all.iter()
                    .map(|b| {
                        serde_json::from_slice(b)
                            .context("a rank sent an unreadable quality record")
                    })
                    .collect()
            })
            .transpose()
    }

    /// Gathers one byte message from every rank at rank 0 (in rank order); `None` elsewhere.
    /// Each message is at most `wire::MAX_FRAME` bytes and all of them together at most
    /// `wire::MAX_GATHERED`; a rank that sends more is broken, and the job is ended (MPI
    /// cannot take part of a message). Decode each with `wire::decode_json`.
    pub fn gather_to_root(&self, payload: &[u8]) -> Option<Vec<Vec<u8>>> {
        if self.rank() == 0 {
            let mut all = vec![payload.to_vec()];
            let mut total = payload.len();
            for r in 1..self.size() {
                let _g = self
                    .watchdog
                    .arm(format!("waiting for the results of rank {r}"));
                let msg = self.receive_bounded(
                    r,
                    base::wire::MAX_GATHERED - total.min(base::wire::MAX_GATHERED),
                );
                total += msg.len();
                all.push(msg);
            }
            Some(all)
        } else {
            let _g = self.watchdog.arm("sending results to rank 0");
            self.world.process_at_rank(0).send(payload);
            None
        }
    }

    /// Every rank's bytes, in rank order, on every rank (MPI_Allgatherv): how the ranks
    /// learn the roster (who runs where, on which device, reachable at which address).
    pub fn all_gather_bytes(&self, mine: &[u8], what: &str) -> Vec<Vec<u8>> {
        let _g = self
            .watchdog
            .arm(format!("exchanging {what} with all ranks"));
        let n = self.size() as usize;
        let len = i32::try_from(mine.len()).expect("a roster entry is far below 2 GiB");
        let mut counts = vec![0i32; n];
        self.world.all_gather_into(&len, &mut counts[..]);
        self.check_sizes(&counts, what);
        let displs = displacements(&counts);
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut buf = vec![0u8; total];
        {
            let mut part = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
            self.world.all_gather_varcount_into(mine, &mut part);
        }
        split(&buf, &counts)
    }

    /// Every rank's bytes on rank 0 (MPI_Gatherv), `None` elsewhere. `limit` bounds the
    /// wait: ranks arrive only when their pair of the round is done.
    pub fn gather_bytes(&self, mine: &[u8], what: &str, limit: Duration) -> Option<Vec<Vec<u8>>> {
        let _g = self
            .watchdog
            .arm_for(format!("gathering {what} at rank 0"), limit);
        let root = self.world.process_at_rank(0);
        let len = i32::try_from(mine.len()).expect("a round report is far below 2 GiB");
        if self.rank() == 0 {
            let mut counts = vec![0i32; self.size() as usize];
            root.gather_into_root(&len, &mut counts[..]);
            self.check_sizes(&counts, what);
            let displs = displacements(&counts);
            let total: usize = counts.iter().map(|&c| c as usize).sum();
            let mut buf = vec![0u8; total];
            {
                let mut part = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
                root.gather_varcount_into_root(mine, &mut part);
            }
            Some(split(&buf, &counts))
        } else {
            root.gather_into(&len);
            root.gather_varcount_into(mine);
            None
        }
    }

    /// Rank 0's bytes on every rank (`root_bytes` is read on rank 0 only).
    pub fn broadcast_bytes(&self, root_bytes: Option<Vec<u8>>, what: &str) -> Vec<u8> {
        let _g = self.watchdog.arm(format!("receiving {what} from rank 0"));
        let root = self.world.process_at_rank(0);
        let mut buf = if self.rank() == 0 {
            root_bytes.unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut len = u64::try_from(buf.len()).unwrap_or(0);
        root.broadcast_into(&mut len);
        buf.resize(len as usize, 0);
        root.broadcast_into(&mut buf[..]);
        buf
    }

    /// Ends the job, with a message, when a rank announced more than a control message
    /// may hold ([`base::wire::MAX_FRAME`]) or all together more than rank 0 gathers
    /// ([`base::wire::MAX_GATHERED`]), before anything that large is allocated.
    fn check_sizes(&self, counts: &[i32], what: &str) {
        let total: usize = counts.iter().map(|&c| c.max(0) as usize).sum();
        if let Some((r, c)) = counts
            .iter()
            .enumerate()
            .find(|(_, &c)| c < 0 || c as usize > base::wire::MAX_FRAME)
        {
            eprintln!(
                "rank {}: rank {r} announced {c} bytes of {what}, over the {}-byte limit; ending \
                 the job (a broken node or a mismatched binary?)",
                self.rank(),
                base::wire::MAX_FRAME
            );
            self.world.abort(2);
        }
        if total > base::wire::MAX_GATHERED {
            eprintln!(
                "rank {}: the ranks announced {total} bytes of {what} in all, over the {}-byte \
                 limit; ending the job",
                self.rank(),
                base::wire::MAX_GATHERED
            );
            self.world.abort(2);
        }
    }

    /// Receives one byte message from `rank`, at most `wire::MAX_FRAME` and `room` bytes:
    /// its size is probed first, and a larger one ends the job with a message instead of
    /// an allocation of whatever a broken rank announced.
    fn receive_bounded(&self, rank: u32, room: usize) -> Vec<u8> {
        let (msg, status) = self.world.process_at_rank(rank as i32).matched_probe();
        let len = status.count(u8::equivalent_datatype());
        let limit = base::wire::MAX_FRAME.min(room);
        if usize::try_from(len).map_or(true, |n| n > limit) {
            eprintln!(
                "rank {}: rank {rank} sent a control message of {len} bytes, over the \
                 {limit}-byte limit; ending the job (a broken node or a mismatched binary?)",
                self.rank()
            );
            self.world.abort(2);
        }
        (msg, status).matched_receive_vec::<u8>().0
    }

    /// Ends every rank of the job with `code`.
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }
}

/// Some ranks of the job on a communicator of their own, every wait guarded by the job's
/// watchdog: what a collective benchmark runs on (the whole job, or one sub-communicator
/// of a scaling sweep).
pub struct Team<'j> {
    comm: SimpleCommunicator,
    watchdog: &'j Watchdog,
    node: NodeRank,
}

impl Team<'_> {
    /// The node-local rank in the whole job (not in the team): a rank keeps its GPU in
    /// every team of a scaling sweep.
    pub fn node(&self) -> NodeRank {
        self.node
    }

    /// This rank in the communicator.
    pub fn rank(&self) -> u32 {
        self.comm.rank() as u32
    }

    /// How many ranks the communicator has.
    pub fn size(&self) -> u32 {
        self.comm.size() as u32
    }

    /// The communicator itself.
    pub fn comm(&self) -> &SimpleCommunicator {
        &self.comm
    }

    /// The job's watchdog (see [`MpiJob::watchdog`]).
    pub fn watchdog(&self) -> &Watchdog {
        self.watchdog
    }

    /// Waits for every rank of the team, within the timeout.
    pub fn barrier(&self, what: &str) {
        guarded_barrier(&self.comm, self.watchdog, what);
    }

    /// True on every rank of the team when any of them passes true.
    pub fn any(&self, local: bool) -> bool {
        let _g = self
            .watchdog
            .arm("agreeing with all ranks whether to go on");
        any_rank(&self.comm, local)
    }
}

/// An MPI job as a [`crate::gang::Gang`]: rank 0 is the root. A wait past its deadline
/// ends the job through the watchdog (MPI cannot leave a collective), so these never
/// return an error of their own. Implemented on a shared borrow, so a run can hold the
/// gang and a [`Team`] split from the same job at once (`&mut &job`).
impl crate::gang::Gang for &MpiJob {
    fn launcher(&self) -> &'static str {
        "mpi"
    }
    fn rank(&self) -> u32 {
        MpiJob::rank(self)
    }
    fn size(&self) -> u32 {
        MpiJob::size(self)
    }
    fn barrier(&mut self, what: &str) -> anyhow::Result<()> {
        MpiJob::barrier(self, what);
        Ok(())
    }
    fn any_within(&mut self, local: bool, what: &str, limit: Duration) -> anyhow::Result<bool> {
        Ok(MpiJob::any_within(self, local, what, limit))
    }
    fn all_gather(&mut self, mine: &[u8], what: &str) -> anyhow::Result<Vec<Vec<u8>>> {
        Ok(self.all_gather_bytes(mine, what))
    }
    fn gather(&mut self, mine: &[u8], _what: &str) -> anyhow::Result<Option<Vec<Vec<u8>>>> {
        Ok(self.gather_to_root(mine))
    }
}

fn guarded_barrier(comm: &SimpleCommunicator, watchdog: &Watchdog, what: &str) {
    let _g = watchdog.arm(format!("in a barrier ({what}) waiting for all ranks"));
    comm.barrier();
}

/// True on every rank of `comm` when any rank passes true (the caller guards the wait).
fn any_rank(comm: &SimpleCommunicator, local: bool) -> bool {
    let mine = i32::from(local);
    let mut all = 0i32;
    comm.all_reduce_into(&mine, &mut all, SystemOperation::max());
    all != 0
}

/// [`any_rank`] for ranks that may wait long while others work: a blocking collective
/// polls MPI's progress engine on its core until the last rank arrives (Open MPI spins,
/// yielding at most), so on a node whose ranks outnumber its free cores the idle ranks
/// slowed the busy ones (bench-congestion's idle congestors raised the canaries' isolated
/// p99 latency to milliseconds in the simulated fabric). Here the rank starts a
/// non-blocking allreduce and tests it every millisecond, asleep in between; the answer is
/// the same, at most about a millisecond a step later.
fn any_rank_asleep(comm: &SimpleCommunicator, local: bool) -> bool {
    let mine = i32::from(local);
    let mut all = 0i32;
    mpi::request::scope(|scope| {
        let mut req =
            comm.immediate_all_reduce_into(scope, &mine, &mut all, SystemOperation::max());
        // Each test runs MPI's progress engine: a rank that waits through a whole phase
        // must not poll a thousand times a second beside the ranks still measuring (on one
        // machine, eight waiting ranks at 1 ms cost the canaries 15-20% of their figures).
        // The sleep doubles to 16 ms, so a wait ends at most 16 ms after the last rank.
        let mut nap = Duration::from_millis(1);
        loop {
            match req.test() {
                Ok(_) => break,
                Err(r) => {
                    req = r;
                    std::thread::sleep(nap);
                    nap = (nap * 2).min(Duration::from_millis(16));
                }
            }
        }
    });
    all != 0
}

fn displacements(counts: &[i32]) -> Vec<i32> {
    counts
        .iter()
        .scan(0i32, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect()
}

fn split(buf: &[u8], counts: &[i32]) -> Vec<Vec<u8>> {
    let mut at = 0usize;
    counts
        .iter()
        .map(|&c| {
            let part = buf[at..at + c as usize].to_vec();
            at += c as usize;
            part
        })
        .collect()
}
