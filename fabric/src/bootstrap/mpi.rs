//! MPI bootstrap (`mpirun`, `srun --mpi=pmix`): ranks pair up as (0,1), (2,3), ...; the
//! even rank of a pair is the initiator (perftest's client), so rank 0 holds results of
//! its own and writes the document. Control messages travel as MPI point-to-point between
//! the two ranks of a pair. MPI calls block forever on a dead rank, so every wait is
//! guarded by the watchdog.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::{bail, Result};
use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::watchdog::Watchdog;
use super::PeerLink;

/// An initialised MPI job.
pub struct MpiJob {
    // Dropping the universe finalises MPI: keep it alive as long as the job.
    _universe: Universe,
    world: SimpleCommunicator,
    watchdog: Watchdog,
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
        Ok(Self {
            _universe: universe,
            world,
            watchdog,
        })
    }

    pub fn rank(&self) -> u32 {
        self.world.rank() as u32
    }

    pub fn size(&self) -> u32 {
        self.world.size() as u32
    }

    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }

    pub fn watchdog(&self) -> &Watchdog {
        &self.watchdog
    }

    /// Waits for every rank, within the timeout.
    pub fn barrier(&self, what: &str) {
        let _g = self
            .watchdog
            .arm(format!("in a barrier ({what}) waiting for all ranks"));
        self.world.barrier();
    }

    /// True on every rank when any rank passes true (used to stop a sweep together).
    pub fn any(&self, local: bool) -> bool {
        let _g = self
            .watchdog
            .arm("agreeing with all ranks whether to go on");
        let mine = i32::from(local);
        let mut all = 0i32;
        self.world
            .all_reduce_into(&mine, &mut all, SystemOperation::max());
        all != 0
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
                    crate::wire::MAX_GATHERED - total.min(crate::wire::MAX_GATHERED),
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

    /// Receives one byte message from `rank`, at most `wire::MAX_FRAME` and `room` bytes:
    /// its size is probed first, and a larger one ends the job with a message instead of
    /// an allocation of whatever a broken rank announced.
    fn receive_bounded(&self, rank: u32, room: usize) -> Vec<u8> {
        let (msg, status) = self.world.process_at_rank(rank as i32).matched_probe();
        let len = status.count(u8::equivalent_datatype());
        let limit = crate::wire::MAX_FRAME.min(room);
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

    /// A control link to `peer`.
    pub fn link_to(&self, peer: u32) -> MpiLink<'_> {
        MpiLink { job: self, peer }
    }

    /// Ends every rank of the job with `code`.
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }
}

/// Point-to-point control messages between the two ranks of a pair.
pub struct MpiLink<'a> {
    job: &'a MpiJob,
    peer: u32,
}

impl PeerLink for MpiLink<'_> {
    fn send(&mut self, payload: &[u8]) -> Result<()> {
        let _g = self
            .job
            .watchdog
            .arm(format!("sending to rank {}", self.peer));
        self.job
            .world
            .process_at_rank(self.peer as i32)
            .send(payload);
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        let _g = self
            .job
            .watchdog
            .arm(format!("waiting for rank {}", self.peer));
        Ok(self.job.receive_bounded(self.peer, crate::wire::MAX_FRAME))
    }

    fn local_ip(&self) -> Option<IpAddr> {
        None
    }
}
