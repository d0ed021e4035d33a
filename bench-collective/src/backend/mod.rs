//! Backends: where the buffers live and which library moves them. The harness sees only
//! this trait; `mpi` runs on host memory through MPI's collectives, `nccl` on GPU memory
//! through NCCL. Both are launched and coordinated by MPI (`mpirun`/`srun`), which also
//! carries the NCCL unique id and the times for the cross-rank reductions.
//!
//! Where a call's input and output sit is decided once per call by [`layout`], from the
//! library's in-place rules, and handed to the backend inside the [`Step`]: the harness
//! fills and checks exactly the regions the backend passes to the library.

use std::sync::atomic::AtomicU64;

use anyhow::Result;
use transport::collective::{DataType, InPlaceRules, Primitive, RedOp};

use crate::colls::Collective;

#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(all(feature = "mpi", feature = "cuda"))]
pub mod nccl;

/// One of the two buffers of a rank. In-place runs use `Recv` alone, as nccl-tests does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buf {
    Send,
    Recv,
}

/// Where one call puts its input and finds its output: buffer and element offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub input: (Buf, usize),
    pub output: (Buf, usize),
    /// False where the library does not define the result ([`undefined_in_place`]):
    /// timed, not checked, as nccl-tests.
    pub defined: bool,
    /// Why not, when not ([`undefined_in_place`]); goes to the output and the JSON.
    pub undefined: Option<&'static str>,
}

/// Why an in-place call of `primitive` under `rules` has no defined result, if it has
/// none. Under NCCL, in-place SendRecv and AllToAll send and receive through the same
/// bytes at once: NCCL runs a peer's send and receive concurrently on different
/// channels, so a block can be overwritten by the incoming one before it has been sent.
/// nccl-tests times both and never checks them (alltoall.cu: "We don't support
/// in-place alltoall", `reportErrors = in_place ? 0 : 1`). MPI defines both
/// (`MPI_IN_PLACE` makes the library stage the data).
pub fn undefined_in_place(primitive: Primitive, rules: InPlaceRules) -> Option<&'static str> {
    match (rules, primitive) {
        (InPlaceRules::Nccl, Primitive::SendRecv) => Some(
            "in place under NCCL, sendrecv sends and receives through the same bytes at once              (undefined): timed, not checked, as nccl-tests does",
        ),
        (InPlaceRules::Nccl, Primitive::AllToAll) => Some(
            "in place under NCCL, alltoall sends and receives each block through the same              bytes at once (undefined): timed, not checked, as nccl-tests does",
        ),
        _ => None,
    }
}

/// The layout of one call. Out of place: send buffer to receive buffer (MPI's broadcast
/// root keeps its data in its send buffer: `MPI_Bcast` has one buffer). In place: the
/// receive buffer alone, at the offsets the library's in-place rules give.
pub fn layout(
    primitive: Primitive,
    rules: InPlaceRules,
    in_place: bool,
    rank: usize,
    root: usize,
    param: usize,
) -> Layout {
    if !in_place {
        let bcast_root =
            rules == InPlaceRules::Mpi && primitive == Primitive::Broadcast && rank == root;
        return Layout {
            input: (Buf::Send, 0),
            output: (if bcast_root { Buf::Send } else { Buf::Recv }, 0),
            defined: true,
            undefined: None,
        };
    }
    let (i, o) = primitive.in_place_offsets(rules, rank, param);
    let undefined = undefined_in_place(primitive, rules);
    Layout {
        input: (Buf::Recv, i),
        output: (Buf::Recv, o),
        defined: undefined.is_none(),
        undefined,
    }
}

/// One call, fully specified.
pub struct Step<'a> {
    pub coll: &'a Collective,
    pub layout: Layout,
    pub in_place: bool,
    /// The count the library call takes (`Counts::param`).
    pub count: usize,
    pub datatype: DataType,
    /// Meaningful for reducing collectives only.
    pub op: RedOp,
    pub root: usize,
}

pub use crate::timing::Timed;

pub trait Backend {
    /// Whose in-place rules the library follows (see [`layout`]).
    fn rules(&self) -> InPlaceRules;
    /// Makes both buffers at least `bytes` long. Buffers only grow: the harness asks for
    /// the largest size of a team's sweep first, so every size runs in the same two
    /// allocations, as nccl-tests allocates its buffers once.
    fn prepare(&mut self, bytes: usize) -> Result<()>;
    fn write(&mut self, buf: Buf, offset: usize, data: &[u8]) -> Result<()>;
    fn read(&mut self, buf: Buf, offset: usize, out: &mut [u8]) -> Result<()>;
    /// Sets the first `len` bytes of `buf` to `byte` (poison before a checked call: the
    /// bytes the size at hand uses, not the whole buffer prepared for the largest size).
    /// An error if `len` exceeds the buffer.
    fn fill(&mut self, buf: Buf, byte: u8, len: usize) -> Result<()>;
    /// Runs `n` untimed calls and waits until they are done (warm-up, the checked call).
    fn calls(&mut self, step: &Step, n: u64) -> Result<()>;
    /// Runs `iters` timed calls; bumps `progress` as calls complete (for the watchdog).
    fn timed(&mut self, step: &Step, iters: u64, progress: &AtomicU64) -> Result<Timed>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_follow_each_library() {
        let l = layout(Primitive::ReduceScatter, InPlaceRules::Nccl, true, 2, 0, 10);
        assert_eq!((l.input, l.output), ((Buf::Recv, 0), (Buf::Recv, 20)));
        let l = layout(Primitive::ReduceScatter, InPlaceRules::Mpi, true, 2, 0, 10);
        assert_eq!((l.input, l.output), ((Buf::Recv, 0), (Buf::Recv, 0)));
        let l = layout(Primitive::AllGather, InPlaceRules::Mpi, true, 2, 0, 10);
        assert_eq!(l.input, (Buf::Recv, 20));
        let l = layout(Primitive::Broadcast, InPlaceRules::Mpi, false, 1, 1, 10);
        assert_eq!(l.output, (Buf::Send, 0));
        let l = layout(Primitive::Broadcast, InPlaceRules::Nccl, false, 1, 1, 10);
        assert_eq!(l.output, (Buf::Recv, 0));
        assert!(!layout(Primitive::SendRecv, InPlaceRules::Nccl, true, 0, 0, 10).defined);
        assert!(layout(Primitive::SendRecv, InPlaceRules::Mpi, true, 0, 0, 10).defined);
        assert!(layout(Primitive::SendRecv, InPlaceRules::Nccl, false, 0, 0, 10).defined);
    }

    /// nccl-tests' rule: in-place alltoall (like sendrecv) is timed and never checked
    /// under NCCL; out of place, and under MPI, both are checked.
    #[test]
    fn in_place_alltoall_is_unchecked_under_nccl_only() {
        let l = layout(Primitive::AllToAll, InPlaceRules::Nccl, true, 1, 0, 10);
        assert!(!l.defined);
        assert!(l.undefined.unwrap().contains("alltoall"));
        assert!(layout(Primitive::AllToAll, InPlaceRules::Nccl, false, 1, 0, 10).defined);
        assert!(layout(Primitive::AllToAll, InPlaceRules::Mpi, true, 1, 0, 10).defined);
        // Every other NCCL primitive in place stays checked.
        for p in [
            Primitive::AllReduce,
            Primitive::AllGather,
            Primitive::ReduceScatter,
            Primitive::Broadcast,
            Primitive::Reduce,
            Primitive::Scatter,
            Primitive::Gather,
            Primitive::HyperCube,
        ] {
            assert!(
                layout(p, InPlaceRules::Nccl, true, 1, 0, 10).defined,
                "{p:?}"
            );
        }
    }
}
