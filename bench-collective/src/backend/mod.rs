//! Backends: where the buffers live and which library moves them. The harness sees only
//! this trait; `mpi` runs on host memory through MPI's collectives, `nccl` on GPU memory
//! through NCCL. Both are launched and coordinated by MPI (`mpirun`/`srun`), which also
//! carries the NCCL unique id and the per-iteration times for the cross-rank maximum.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use anyhow::Result;
use fabric::collective::{DataType, RedOp};

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

/// Where one run puts its input and finds its output: buffer and element offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub input: (Buf, usize),
    pub output: (Buf, usize),
}

/// The layout NCCL (and nccl-tests) uses: out of place, send buffer to receive buffer;
/// in place, the collective's in-place offsets inside the receive buffer.
pub fn nccl_layout(coll: &Collective, in_place: bool, rank: usize, param: usize) -> Layout {
    if in_place {
        let (i, o) = (coll.in_place)(rank, param);
        Layout {
            input: (Buf::Recv, i),
            output: (Buf::Recv, o),
        }
    } else {
        Layout {
            input: (Buf::Send, 0),
            output: (Buf::Recv, 0),
        }
    }
}

/// One call, fully specified.
pub struct Step<'a> {
    pub coll: &'a Collective,
    pub in_place: bool,
    /// The count the library call takes (`Counts::param`).
    pub count: usize,
    pub datatype: DataType,
    /// Meaningful for reducing collectives only.
    pub op: RedOp,
    pub root: usize,
}

pub trait Backend {
    /// `mpi` or `nccl` (the JSON `backend`).
    fn name(&self) -> &'static str;
    /// What times the iterations (`tsc`/`monotonic` for host loops, `cuda_event`).
    fn clock(&self) -> String;
    /// Where input and output sit for `coll` on `rank` (backends differ for a few
    /// in-place cases; see the MPI backend).
    fn layout(
        &self,
        coll: &Collective,
        in_place: bool,
        rank: usize,
        root: usize,
        param: usize,
    ) -> Layout {
        let _ = root;
        nccl_layout(coll, in_place, rank, param)
    }
    /// Makes both buffers at least `bytes` long.
    fn prepare(&mut self, bytes: usize) -> Result<()>;
    fn write(&mut self, buf: Buf, offset: usize, data: &[u8]) -> Result<()>;
    fn read(&mut self, buf: Buf, offset: usize, out: &mut [u8]) -> Result<()>;
    /// Sets every byte of `buf` to `byte` (poison before a checked call).
    fn fill(&mut self, buf: Buf, byte: u8) -> Result<()>;
    /// Runs `warmup` untimed, then `iters` timed calls; returns each timed call's
    /// duration in ns, and bumps `progress` as calls complete (for the watchdog).
    fn run(
        &mut self,
        step: &Step,
        warmup: u64,
        iters: u64,
        progress: &Arc<AtomicU64>,
    ) -> Result<Vec<u64>>;
    /// Device facts for the document (GPU name and bus id), if any.
    fn gpu(&self) -> Option<results::GpuInfo> {
        None
    }
    /// One line for the `# Using devices` list.
    fn device_line(&self) -> String;
}
