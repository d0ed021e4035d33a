//! A rank's place among the ranks of its node: its node-local rank, which picks its GPU
//! (`cuda::device`). Launcher variables cannot be trusted for it: MVAPICH, Cray PALS and
//! bare PMIx set names of their own (every rank then took GPU 0), so MPI answers instead.
//!
//! The node is where ranks share memory and carry the same host name:
//! `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` (MPI's own notion of a node, what the
//! launcher knows), refined by the host name as nccl-tests computes `localRank` (a
//! host-name hash over MPI_COMM_WORLD). On a real cluster the two agree; where they do
//! not, the finer one wins: ranks with host names of their own (simulated hosts, or
//! containers on one machine) each form their own node.

use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;

/// This rank's index among the ranks of its node and how many there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRank {
    /// This rank among its node's, from 0 (the local rank).
    pub rank: u32,
    /// How many ranks the node has.
    pub size: u32,
}

/// The node-local rank of the calling rank on `world` whose host is named `host`. A
/// collective: every rank of `world` must call it (the caller guards the wait).
pub fn of(world: &SimpleCommunicator, host: &str) -> NodeRank {
    let shared = world.split_shared(world.rank());
    let same_host = shared
        .split_by_color(Color::with_value(host_color(host)))
        .expect("every rank passes a defined colour, so every rank gets a communicator");
    NodeRank {
        rank: same_host.rank() as u32,
        size: same_host.size() as u32,
    }
}

/// A non-negative colour for `MPI_Comm_split` from a host name (FNV-1a, 31 bits). Only
/// ranks that already share memory compare colours, so a collision would need two host
/// names on one machine that hash alike.
pub fn host_color(host: &str) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in host.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h & 0x7fff_ffff) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_colours_are_valid_and_tell_names_apart() {
        let names = [
            "gpu-a01",
            "gpu-a02",
            "sim-node0",
            "sim-node1",
            "",
            "localhost",
        ];
        let colours: Vec<i32> = names.iter().map(|n| host_color(n)).collect();
        for (i, c) in colours.iter().enumerate() {
            assert!(*c >= 0, "MPI colours must be non-negative");
            assert_eq!(*c, host_color(names[i]), "stable");
            for d in &colours[i + 1..] {
                assert_ne!(c, d);
            }
        }
    }
}
