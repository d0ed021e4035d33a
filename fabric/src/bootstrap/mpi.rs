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
use mpi::topology::{Color, SimpleCommunicator};
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
        guarded_barrier(&self.world, &self.watchdog, what);
    }

    /// Waits for every rank with no deadline: for ranks that wait while others do work of
    /// unknown length (a scaling sweep's idle ranks while a sub-communicator measures).
    /// Only where some other rank waits in the same barrier guarded, so that a dead rank
    /// still ends the job.
    pub fn barrier_unguarded(&self) {
        self.world.barrier();
    }

    /// True on every rank when any rank passes true (used to stop a sweep together).
    pub fn any(&self, local: bool) -> bool {
        guarded_any(&self.world, &self.watchdog, local)
    }

    /// Every rank of the job as a [`Team`] (a duplicate of the world communicator, so
    /// the team's traffic never mixes with the job's).
    pub fn whole(&self) -> Team<'_> {
        let _g = self.watchdog.arm("duplicating the world communicator");
        Team {
            comm: self.world.duplicate(),
            watchdog: &self.watchdog,
        }
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
        })
    }

    /// Rank 0's `payload` on every rank (the argument is ignored elsewhere).
    pub fn broadcast_from_root(&self, payload: &[u8]) -> Vec<u8> {
        let _g = self.watchdog.arm("receiving rank 0's plan");
        let root = self.world.process_at_rank(0);
        let mut len = payload.len() as u64;
        root.broadcast_into(&mut len);
        let mut buf = if self.rank() == 0 {
            payload.to_vec()
        } else {
            vec![0u8; len as usize]
        };
        root.broadcast_into(&mut buf[..]);
        buf
    }

    /// Gathers one byte message from every rank at rank 0 (in rank order); `None` elsewhere.
    pub fn gather_to_root(&self, payload: &[u8]) -> Option<Vec<Vec<u8>>> {
        if self.rank() == 0 {
            let mut all = vec![payload.to_vec()];
            for r in 1..self.size() {
                let _g = self
                    .watchdog
                    .arm(format!("waiting for the results of rank {r}"));
                let (msg, _) = self.world.process_at_rank(r as i32).receive_vec::<u8>();
                all.push(msg);
            }
            Some(all)
        } else {
            let _g = self.watchdog.arm("sending results to rank 0");
            self.world.process_at_rank(0).send(payload);
            None
        }
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

/// Some ranks of the job on a communicator of their own, every wait guarded by the job's
/// watchdog: what a collective benchmark runs on (the whole job, or one sub-communicator
/// of a scaling sweep).
pub struct Team<'j> {
    comm: SimpleCommunicator,
    watchdog: &'j Watchdog,
}

impl Team<'_> {
    pub fn rank(&self) -> u32 {
        self.comm.rank() as u32
    }

    pub fn size(&self) -> u32 {
        self.comm.size() as u32
    }

    pub fn comm(&self) -> &SimpleCommunicator {
        &self.comm
    }

    pub fn watchdog(&self) -> &Watchdog {
        self.watchdog
    }

    /// Waits for every rank of the team, within the timeout.
    pub fn barrier(&self, what: &str) {
        guarded_barrier(&self.comm, self.watchdog, what);
    }

    /// True on every rank of the team when any of them passes true.
    pub fn any(&self, local: bool) -> bool {
        guarded_any(&self.comm, self.watchdog, local)
    }
}

fn guarded_barrier(comm: &SimpleCommunicator, watchdog: &Watchdog, what: &str) {
    let _g = watchdog.arm(format!("in a barrier ({what}) waiting for all ranks"));
    comm.barrier();
}

fn guarded_any(comm: &SimpleCommunicator, watchdog: &Watchdog, local: bool) -> bool {
    let _g = watchdog.arm("agreeing with all ranks whether to go on");
    let mine = i32::from(local);
    let mut all = 0i32;
    comm.all_reduce_into(&mine, &mut all, SystemOperation::max());
    all != 0
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
        let (msg, _) = self
            .job
            .world
            .process_at_rank(self.peer as i32)
            .receive_vec::<u8>();
        Ok(msg)
    }

    fn local_ip(&self) -> Option<IpAddr> {
        None
    }
}
