//! MPI collectives on host memory, out-of-place and in-place.
//!
//! rsmpi (the `mpi` crate) has typed, safe wrappers for the out-of-place collectives but no
//! way to pass `MPI_IN_PLACE`, whose value differs between implementations (`(void *)1` in
//! Open MPI, `(void *)-1` in MPICH), and it needs a Rust type per MPI datatype while the
//! benchmark picks the type at run time. So this module calls the C functions through
//! `mpi::ffi` on byte buffers, with `MPI_IN_PLACE` taken from a two-line C shim compiled
//! against the same `mpi.h` (see `build.rs`). It is the only `unsafe` of the MPI backend:
//! every call checks first that each buffer is long enough for what MPI will read or
//! write, which is everything MPI needs to stay inside the slices.

use std::os::raw::{c_int, c_void};

use anyhow::{ensure, Result};
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use mpi::traits::Communicator;

use super::{DataType, RedOp};

extern "C" {
    /// `MPI_IN_PLACE` of the MPI this crate was built against (`src/collective/mpi_shim.c`).
    fn fabcheck_mpi_in_place() -> *mut c_void;
}

/// The input of a collective: its own buffer (out-of-place) or the output buffer itself
/// (in-place, `MPI_IN_PLACE`).
#[derive(Clone, Copy)]
pub enum Input<'a> {
    Buf(&'a [u8]),
    InPlace,
}

/// The MPI datatype of `dt`, or `None` when MPI has none (float16, bfloat16: MPI 4.1 and
/// Open MPI 4 define no 16-bit float type).
fn datatype(dt: DataType) -> Option<ffi::MPI_Datatype> {
    // SAFETY: the RSMPI_* handles are constants initialised by the C library at load time
    // and only read here.
    unsafe {
        Some(match dt {
            DataType::Int8 => ffi::RSMPI_INT8_T,
            DataType::Uint8 => ffi::RSMPI_UINT8_T,
            DataType::Int32 => ffi::RSMPI_INT32_T,
            DataType::Uint32 => ffi::RSMPI_UINT32_T,
            DataType::Int64 => ffi::RSMPI_INT64_T,
            DataType::Uint64 => ffi::RSMPI_UINT64_T,
            DataType::Float32 => ffi::RSMPI_FLOAT,
            DataType::Float64 => ffi::RSMPI_DOUBLE,
            DataType::Float16 | DataType::Bfloat16 => return None,
        })
    }
}

/// The predefined MPI reduction of `op`, or `None` (avg has none).
fn operation(op: RedOp) -> Option<ffi::MPI_Op> {
    // SAFETY: as above, predefined constant handles.
    unsafe {
        Some(match op {
            RedOp::Sum => ffi::RSMPI_SUM,
            RedOp::Prod => ffi::RSMPI_PROD,
            RedOp::Min => ffi::RSMPI_MIN,
            RedOp::Max => ffi::RSMPI_MAX,
            RedOp::Avg => return None,
        })
    }
}

/// Whether MPI can run `dt` (and `op`, for reductions); the error says why not.
pub use super::mpi_supports as supports;

fn handles(dt: DataType, op: Option<RedOp>) -> Result<(ffi::MPI_Datatype, ffi::MPI_Op)> {
    supports(dt, op)?;
    let t = datatype(dt).expect("checked");
    // SAFETY: predefined constant handle.
    let o = op.and_then(operation).unwrap_or(unsafe { ffi::RSMPI_SUM });
    Ok((t, o))
}

fn c_count(n: usize) -> Result<c_int> {
    c_int::try_from(n).map_err(|_| {
        anyhow::anyhow!("{n} elements exceed what one MPI call can take (2^31 - 1): use a smaller size or a wider datatype")
    })
}

fn need(what: &str, have: usize, elems: usize, dt: DataType) -> Result<()> {
    let bytes = elems * dt.size();
    ensure!(
        have >= bytes,
        "internal error: {what} buffer holds {have} bytes, the call needs {bytes}"
    );
    Ok(())
}

fn check(rc: c_int, call: &str) -> Result<()> {
    // The default error handler (MPI_ERRORS_ARE_FATAL) aborts before we get here; this is
    // for jobs that installed MPI_ERRORS_RETURN.
    ensure!(rc == 0, "{call} failed with MPI error code {rc}");
    Ok(())
}

/// The collectives of one communicator.
pub struct Collectives<'a> {
    comm: &'a SimpleCommunicator,
    ranks: usize,
    rank: usize,
}

impl<'a> Collectives<'a> {
    pub fn new(comm: &'a SimpleCommunicator) -> Self {
        Self {
            comm,
            ranks: comm.size() as usize,
            rank: comm.rank() as usize,
        }
    }

    fn send_ptr(&self, input: Input, in_place: *const c_void) -> *const c_void {
        match input {
            Input::Buf(b) => b.as_ptr().cast(),
            Input::InPlace => in_place,
        }
    }

    /// `MPI_Allreduce`: every rank ends with the reduction of `count` elements of all ranks.
    pub fn all_reduce(
        &self,
        input: Input,
        out: &mut [u8],
        count: usize,
        dt: DataType,
        op: RedOp,
    ) -> Result<()> {
        let (t, o) = handles(dt, Some(op))?;
        if let Input::Buf(b) = input {
            need("send", b.len(), count, dt)?;
        }
        need("receive", out.len(), count, dt)?;
        let n = c_count(count)?;
        // SAFETY: the send side (or `out` itself, in place) holds `count` elements of `dt`
        // and `out` has room for `count` (checked above); both outlive this blocking call.
        let rc = unsafe {
            let send = self.send_ptr(input, fabcheck_mpi_in_place());
            ffi::MPI_Allreduce(send, out.as_mut_ptr().cast(), n, t, o, self.comm.as_raw())
        };
        check(rc, "MPI_Allreduce")
    }

    /// `MPI_Allgather`: rank r's `count` elements land at block r of every rank's `out`
    /// (in place: rank r's input is already at block r of `out`).
    pub fn all_gather(
        &self,
        input: Input,
        out: &mut [u8],
        count: usize,
        dt: DataType,
    ) -> Result<()> {
        let (t, _) = handles(dt, None)?;
        if let Input::Buf(b) = input {
            need("send", b.len(), count, dt)?;
        }
        need("receive", out.len(), count * self.ranks, dt)?;
        let n = c_count(count)?;
        c_count(count * self.ranks)?;
        // SAFETY: the send buffer holds `count` elements, `out` holds `ranks * count`
        // (checked above); with MPI_IN_PLACE the send count and type are ignored.
        let rc = unsafe {
            let send = self.send_ptr(input, fabcheck_mpi_in_place());
            ffi::MPI_Allgather(
                send,
                n,
                t,
                out.as_mut_ptr().cast(),
                n,
                t,
                self.comm.as_raw(),
            )
        };
        check(rc, "MPI_Allgather")
    }

    /// `MPI_Reduce_scatter_block`: block r (`count` elements) of the reduction of all ranks'
    /// `ranks * count` elements lands on rank r. In place the input is the whole of `out`
    /// and the result is written at its start (MPI's layout; NCCL writes it at block r).
    pub fn reduce_scatter(
        &self,
        input: Input,
        out: &mut [u8],
        count: usize,
        dt: DataType,
        op: RedOp,
    ) -> Result<()> {
        let (t, o) = handles(dt, Some(op))?;
        match input {
            Input::Buf(b) => need("send", b.len(), count * self.ranks, dt)?,
            Input::InPlace => need("in-place", out.len(), count * self.ranks, dt)?,
        }
        need("receive", out.len(), count, dt)?;
        let n = c_count(count)?;
        c_count(count * self.ranks)?;
        // SAFETY: the input holds `ranks * count` elements and `out` at least `count`
        // (checked above); both outlive the blocking call.
        let rc = unsafe {
            let send = self.send_ptr(input, fabcheck_mpi_in_place());
            ffi::MPI_Reduce_scatter_block(
                send,
                out.as_mut_ptr().cast(),
                n,
                t,
                o,
                self.comm.as_raw(),
            )
        };
        check(rc, "MPI_Reduce_scatter_block")
    }

    /// `MPI_Alltoall`: block p (`count` elements) of rank r's input lands at block r of
    /// rank p's `out`.
    pub fn alltoall(&self, input: Input, out: &mut [u8], count: usize, dt: DataType) -> Result<()> {
        let (t, _) = handles(dt, None)?;
        if let Input::Buf(b) = input {
            need("send", b.len(), count * self.ranks, dt)?;
        }
        need("receive", out.len(), count * self.ranks, dt)?;
        let n = c_count(count)?;
        c_count(count * self.ranks)?;
        // SAFETY: both buffers hold `ranks * count` elements (checked above).
        let rc = unsafe {
            let send = self.send_ptr(input, fabcheck_mpi_in_place());
            ffi::MPI_Alltoall(
                send,
                n,
                t,
                out.as_mut_ptr().cast(),
                n,
                t,
                self.comm.as_raw(),
            )
        };
        check(rc, "MPI_Alltoall")
    }

    /// `MPI_Bcast`: `count` elements of `buf` on `root` are copied into `buf` everywhere
    /// (MPI has only this one buffer: out-of-place, the root passes its send buffer and the
    /// others their receive buffer).
    pub fn broadcast(&self, buf: &mut [u8], count: usize, dt: DataType, root: usize) -> Result<()> {
        let (t, _) = handles(dt, None)?;
        ensure!(root < self.ranks, "root {root} is not a rank");
        need("broadcast", buf.len(), count, dt)?;
        let n = c_count(count)?;
        // SAFETY: `buf` holds `count` elements (checked above).
        let rc = unsafe {
            ffi::MPI_Bcast(
                buf.as_mut_ptr().cast(),
                n,
                t,
                root as c_int,
                self.comm.as_raw(),
            )
        };
        check(rc, "MPI_Bcast")
    }

    /// `MPI_Reduce`: the reduction of `count` elements of all ranks lands in `out` on
    /// `root`; `out` is not touched elsewhere. In place, non-root ranks send from `out`.
    pub fn reduce(
        &self,
        input: Input,
        out: &mut [u8],
        count: usize,
        dt: DataType,
        op: RedOp,
        root: usize,
    ) -> Result<()> {
        let (t, o) = handles(dt, Some(op))?;
        ensure!(root < self.ranks, "root {root} is not a rank");
        if let Input::Buf(b) = input {
            need("send", b.len(), count, dt)?;
        }
        need("receive", out.len(), count, dt)?;
        let n = c_count(count)?;
        let is_root = self.rank == root;
        // SAFETY: the send side and `out` hold `count` elements (checked above). MPI allows
        // MPI_IN_PLACE only at the root; a non-root in-place rank sends from `out` and
        // passes no receive buffer (it is not significant there).
        let rc = unsafe {
            let (send, recv): (*const c_void, *mut c_void) = match (input, is_root) {
                (Input::Buf(b), _) => (b.as_ptr().cast(), out.as_mut_ptr().cast()),
                (Input::InPlace, true) => (fabcheck_mpi_in_place(), out.as_mut_ptr().cast()),
                (Input::InPlace, false) => (out.as_ptr().cast(), std::ptr::null_mut()),
            };
            ffi::MPI_Reduce(send, recv, n, t, o, root as c_int, self.comm.as_raw())
        };
        check(rc, "MPI_Reduce")
    }
}
