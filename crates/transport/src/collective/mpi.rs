//! MPI collectives on host memory, out-of-place and in-place.
//!
//! rsmpi (the `mpi` crate) has typed, safe wrappers for the out-of-place collectives but no
//! way to pass `MPI_IN_PLACE`, whose value differs between implementations (`(void *)1` in
//! Open MPI, `(void *)-1` in MPICH), and it needs a Rust type per MPI datatype while the
//! benchmark picks the type at run time. So this module calls the C functions through
//! `mpi::ffi` on byte buffers, with `MPI_IN_PLACE` taken from a two-line C shim compiled
//! against the same `mpi.h` (see `build.rs`).
//!
//! Every primitive goes through one checked path, [`Collectives::prepare`]: it resolves the
//! datatype and operation, checks the root, the rank count and every count against
//! `c_int`, and checks that each buffer holds what the call will read or write
//! ([`Primitive::elements`]) at the offsets MPI's in-place rules give
//! ([`InPlaceRules::Mpi`]). Only then does one `unsafe` block hand raw pointers to MPI,
//! with one arm per primitive and no further arithmetic that could leave the slices. A
//! prepared call can be made many times with nothing else per call, so a timed loop
//! holds the MPI call alone, as a C loop would.

use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};

use anyhow::{ensure, Result};
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use mpi::traits::Communicator;

use super::{DataType, InPlaceRules, Primitive, RedOp};

extern "C" {
    /// `MPI_IN_PLACE` of the MPI this crate was built against (`src/collective/mpi_shim.c`).
    fn fabcheck_mpi_in_place() -> *mut c_void;
}

/// The buffers of one call.
pub enum Buffers<'a> {
    /// Out of place: the input in `send`, the output in `recv`.
    Separate { send: &'a [u8], recv: &'a mut [u8] },
    /// In place: one buffer holds the input and receives the output where
    /// `MPI_IN_PLACE`'s rules put them ([`InPlaceRules::Mpi`]: MPI decides, not the caller).
    InPlace(&'a mut [u8]),
}

/// One call, fully specified (the buffers apart).
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub primitive: Primitive,
    /// The count the library call takes (see [`Primitive::elements`]).
    pub count: usize,
    pub datatype: DataType,
    /// Used by reducing primitives only.
    pub op: RedOp,
    /// Used by rooted primitives only.
    pub root: usize,
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
            DataType::Float16
            | DataType::Bfloat16
            | DataType::Float8e4m3
            | DataType::Float8e5m2 => return None,
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

fn c_count(n: usize) -> Result<c_int> {
    c_int::try_from(n).map_err(|_| {
        anyhow::anyhow!("{n} elements exceed what one MPI call can take (2^31 - 1): use a smaller size or a wider datatype")
    })
}

fn need(what: &str, have: usize, from: usize, elems: usize, ts: usize) -> Result<()> {
    let end = (from + elems) * ts;
    ensure!(
        have >= end,
        "internal error: the {what} buffer holds {have} bytes, the call needs bytes {} .. {end}",
        from * ts
    );
    Ok(())
}

/// Pointers and counts that passed every check of [`Collectives::run`].
struct Checked {
    t: ffi::MPI_Datatype,
    o: ffi::MPI_Op,
    /// Start of the input (the in-place buffer's start for in-place calls).
    send: *const c_void,
    /// Start of the output region (in place: the buffer plus the output offset).
    recv: *mut c_void,
    /// In place: the whole buffer (for primitives whose arm addresses blocks of it).
    whole: *mut c_void,
    in_place: bool,
    mpi_in_place: *mut c_void,
    n: c_int,
    block_bytes: usize,
    root: c_int,
    is_root: bool,
    rank: usize,
    ranks: usize,
}

/// A checked call, ready to be made: see [`Collectives::prepare`].
pub struct Prepared<'b> {
    colls: &'b Collectives<'b>,
    p: Primitive,
    c: Checked,
    /// The buffers stay borrowed (mutably) while the call can be made.
    _buffers: PhantomData<&'b mut [u8]>,
}

impl Prepared<'_> {
    /// Makes the call (blocking, as MPI's collectives are).
    #[inline]
    pub fn call(&self) -> Result<()> {
        // SAFETY: `c` was built by `prepare` from slices that stay borrowed for this
        // value's lifetime, after checking that each holds every element the primitive
        // reads or writes at the offsets used, that every count fits a c_int and that the
        // root is a rank.
        let rc = unsafe { self.colls.call_mpi(self.p, &self.c) };
        if rc != 0 {
            anyhow::bail!("MPI call for {:?} failed with MPI error code {rc}", self.p);
        }
        Ok(())
    }
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

    /// Runs one collective call: checks everything MPI will touch, then makes the call.
    pub fn run(&self, call: &Call, bufs: Buffers) -> Result<()> {
        self.prepare(call, bufs)?.call()
    }

    /// Checks everything MPI will touch for `call` on `bufs` once, and returns the call
    /// ready to be made any number of times with nothing else per call (the timed loop's
    /// body): it holds the buffers' borrow, so nothing else can touch them meanwhile.
    pub fn prepare<'b>(&'b self, call: &Call, bufs: Buffers<'b>) -> Result<Prepared<'b>> {
        let p = call.primitive;
        supports(call.datatype, p.reduces().then_some(call.op))?;
        let t = datatype(call.datatype).expect("checked by supports");
        // SAFETY: predefined constant handle (ignored by data-movement primitives).
        let o = operation(call.op).unwrap_or(unsafe { ffi::RSMPI_SUM });
        p.runs_on(self.ranks).map_err(anyhow::Error::msg)?;
        ensure!(call.root < self.ranks, "root {} is not a rank", call.root);
        let ts = call.datatype.size();
        let (send_n, recv_n) = p.elements(call.count, self.ranks);
        let n = c_count(call.count)?;
        c_count(send_n)?;
        c_count(recv_n)?;
        let (send, recv, whole, in_place) = match bufs {
            Buffers::Separate { send, recv } => {
                need("send", send.len(), 0, send_n, ts)?;
                need("receive", recv.len(), 0, recv_n, ts)?;
                let r = recv.as_mut_ptr().cast::<c_void>();
                (send.as_ptr().cast::<c_void>(), r, r, false)
            }
            Buffers::InPlace(buf) => {
                let (i, o) = p.in_place_offsets(InPlaceRules::Mpi, self.rank, call.count);
                need("in-place input", buf.len(), i, send_n, ts)?;
                need("in-place output", buf.len(), o, recv_n, ts)?;
                let base = buf.as_mut_ptr();
                // Both offsets lie inside `buf` (checked just above).
                let (input, output) = (base.wrapping_add(i * ts), base.wrapping_add(o * ts));
                (input.cast_const().cast(), output.cast(), base.cast(), true)
            }
        };
        Ok(Prepared {
            colls: self,
            p,
            c: Checked {
                t,
                o,
                send,
                recv,
                whole,
                in_place,
                // SAFETY: returns the MPI_IN_PLACE constant of the linked MPI.
                mpi_in_place: unsafe { fabcheck_mpi_in_place() },
                n,
                block_bytes: call.count * ts,
                root: call.root as c_int,
                is_root: self.rank == call.root,
                rank: self.rank,
                ranks: self.ranks,
            },
            _buffers: PhantomData,
        })
    }

    /// One arm per primitive: the MPI calls themselves.
    ///
    /// # Safety
    /// `c` must come from [`Self::prepare`]'s checks, with the buffers it points into
    /// alive and unaliased for the duration of the call.
    unsafe fn call_mpi(&self, p: Primitive, c: &Checked) -> c_int {
        let comm = self.comm.as_raw();
        let ip = c.mpi_in_place;
        // In place, MPI takes MPI_IN_PLACE as the send (or, for a rooted gather-like
        // call, receive) argument and finds the input in the one buffer.
        let send = if c.in_place { ip.cast_const() } else { c.send };
        match p {
            Primitive::AllReduce => ffi::MPI_Allreduce(send, c.recv, c.n, c.t, c.o, comm),
            Primitive::AllGather => ffi::MPI_Allgather(send, c.n, c.t, c.whole, c.n, c.t, comm),
            Primitive::ReduceScatter => {
                ffi::MPI_Reduce_scatter_block(send, c.recv, c.n, c.t, c.o, comm)
            }
            Primitive::AllToAll => ffi::MPI_Alltoall(send, c.n, c.t, c.recv, c.n, c.t, comm),
            // MPI_Bcast has one buffer: out of place the root sends from its send buffer
            // (MPI only reads it there) and the others receive into their receive buffer.
            Primitive::Broadcast => {
                let buf = if c.is_root && !c.in_place {
                    c.send.cast_mut()
                } else {
                    c.recv
                };
                ffi::MPI_Bcast(buf, c.n, c.t, c.root, comm)
            }
            // MPI allows MPI_IN_PLACE only at the root; a non-root in-place rank sends
            // from the buffer and passes no receive buffer (not significant there).
            Primitive::Reduce => match (c.in_place, c.is_root) {
                (true, true) => ffi::MPI_Reduce(ip, c.recv, c.n, c.t, c.o, c.root, comm),
                (true, false) => {
                    ffi::MPI_Reduce(c.send, std::ptr::null_mut(), c.n, c.t, c.o, c.root, comm)
                }
                (false, _) => ffi::MPI_Reduce(c.send, c.recv, c.n, c.t, c.o, c.root, comm),
            },
            Primitive::SendRecv => {
                let next = ((c.rank + 1) % c.ranks) as c_int;
                let prev = ((c.rank + c.ranks - 1) % c.ranks) as c_int;
                if c.in_place {
                    ffi::MPI_Sendrecv_replace(
                        c.recv,
                        c.n,
                        c.t,
                        next,
                        0,
                        prev,
                        0,
                        comm,
                        ffi::RSMPI_STATUS_IGNORE,
                    )
                } else {
                    ffi::MPI_Sendrecv(
                        c.send,
                        c.n,
                        c.t,
                        next,
                        0,
                        c.recv,
                        c.n,
                        c.t,
                        prev,
                        0,
                        comm,
                        ffi::RSMPI_STATUS_IGNORE,
                    )
                }
            }
            // In place the root's own block stays where it is (MPI_IN_PLACE as the receive
            // buffer); other ranks have no in-place form and receive at their block.
            Primitive::Scatter => {
                let recv = if c.in_place && c.is_root { ip } else { c.recv };
                ffi::MPI_Scatter(c.send, c.n, c.t, recv, c.n, c.t, c.root, comm)
            }
            Primitive::Gather => {
                let send = if c.in_place && c.is_root { ip } else { c.send };
                ffi::MPI_Gather(send, c.n, c.t, c.whole, c.n, c.t, c.root, comm)
            }
            Primitive::HyperCube => self.hypercube(c),
        }
    }

    /// AllGather by recursive doubling, as nccl-tests' hypercube: the rank's own block
    /// goes to block `rank` of the output (a copy, out of place), then in step k the rank
    /// swaps its 2^k gathered blocks with partner `rank ^ 2^k`.
    ///
    /// # Safety
    /// As [`Self::call_mpi`]: `whole` holds `ranks` blocks of `block_bytes`, `send` one.
    unsafe fn hypercube(&self, c: &Checked) -> c_int {
        let comm = self.comm.as_raw();
        let out = c.whole.cast::<u8>();
        let block = c.block_bytes;
        if !c.in_place {
            std::ptr::copy_nonoverlapping(c.send.cast::<u8>(), out.add(c.rank * block), block);
        }
        let mut mask = 1;
        while mask < c.ranks {
            let mine = c.rank & !(mask - 1);
            let theirs = mine ^ mask;
            let peer = (c.rank ^ mask) as c_int;
            // Both ranges are `mask` whole blocks inside the `ranks` blocks of `out`, and
            // disjoint (they differ in bit `mask` of the block index).
            let rc = ffi::MPI_Sendrecv(
                out.add(mine * block).cast_const().cast(),
                c.n * mask as c_int,
                c.t,
                peer,
                0,
                out.add(theirs * block).cast(),
                c.n * mask as c_int,
                c.t,
                peer,
                0,
                comm,
                ffi::RSMPI_STATUS_IGNORE,
            );
            if rc != 0 {
                return rc;
            }
            mask <<= 1;
        }
        0
    }
}

/// An irregular all-to-all of fixed-size rows (`MPI_Alltoallv`): expert-parallel
/// dispatch and combine send each peer a different number of rows (tokens), each row a
/// token's hidden vector. Counts and displacements are in rows of a committed
/// contiguous datatype of `row_bytes` bytes, so a peer's share may exceed 2 GiB while the
/// counts stay inside `c_int`.
///
/// Rows bound for peer p sit contiguously, peers in rank order (row displacements are
/// the running sums of the counts); received rows are laid out the same way by source.
pub struct RowExchange<'a> {
    comm: &'a SimpleCommunicator,
    row: ffi::MPI_Datatype,
    row_bytes: usize,
    send_counts: Vec<c_int>,
    send_displs: Vec<c_int>,
    recv_counts: Vec<c_int>,
    recv_displs: Vec<c_int>,
    send_rows: usize,
    recv_rows: usize,
}

/// Running sums of `counts`, checked against `c_int`; the total comes last.
fn displacements(counts: &[usize]) -> Result<(Vec<c_int>, Vec<c_int>, usize)> {
    let mut c = Vec::with_capacity(counts.len());
    let mut d = Vec::with_capacity(counts.len());
    let mut at = 0usize;
    for &n in counts {
        c.push(c_count(n)?);
        d.push(c_count(at)?);
        at += n;
    }
    c_count(at)?;
    Ok((c, d, at))
}

impl<'a> RowExchange<'a> {
    /// `send_counts[p]` rows go to rank p, `recv_counts[p]` rows come from it (one entry
    /// per rank of `comm`; the peers' counts must mirror these, which the count exchange
    /// that comes before guarantees).
    pub fn new(
        comm: &'a SimpleCommunicator,
        row_bytes: usize,
        send_counts: &[usize],
        recv_counts: &[usize],
    ) -> Result<Self> {
        let ranks = comm.size() as usize;
        ensure!(
            send_counts.len() == ranks && recv_counts.len() == ranks,
            "internal error: {} send and {} receive counts for {ranks} ranks",
            send_counts.len(),
            recv_counts.len()
        );
        ensure!(row_bytes > 0, "internal error: rows of 0 bytes");
        let width = c_count(row_bytes)?;
        let (sc, sd, send_rows) = displacements(send_counts)?;
        let (rc, rd, recv_rows) = displacements(recv_counts)?;
        // SAFETY: MPI_Type_contiguous writes one handle into `row`, which then is
        // committed; both take only the handle and constant inputs. A zeroed handle is a
        // valid placeholder for an output argument.
        let row = unsafe {
            let mut row: ffi::MPI_Datatype = std::mem::zeroed();
            let rc = ffi::MPI_Type_contiguous(width, ffi::RSMPI_UINT8_T, &mut row);
            ensure!(
                rc == 0,
                "MPI_Type_contiguous failed with MPI error code {rc}"
            );
            let rc = ffi::MPI_Type_commit(&mut row);
            ensure!(rc == 0, "MPI_Type_commit failed with MPI error code {rc}");
            row
        };
        Ok(Self {
            comm,
            row,
            row_bytes,
            send_counts: sc,
            send_displs: sd,
            recv_counts: rc,
            recv_displs: rd,
            send_rows,
            recv_rows,
        })
    }

    /// Bytes the send buffer must hold.
    pub fn send_bytes(&self) -> usize {
        self.send_rows * self.row_bytes
    }

    /// Bytes the receive buffer must hold.
    pub fn recv_bytes(&self) -> usize {
        self.recv_rows * self.row_bytes
    }

    /// One exchange (blocking). `send` and `recv` must hold at least
    /// [`send_bytes`](Self::send_bytes) and [`recv_bytes`](Self::recv_bytes).
    #[inline]
    pub fn run(&self, send: &[u8], recv: &mut [u8]) -> Result<()> {
        need("send", send.len(), 0, self.send_rows, self.row_bytes)?;
        need("receive", recv.len(), 0, self.recv_rows, self.row_bytes)?;
        // SAFETY: the four count and displacement arrays hold one c_int per rank of the
        // communicator (checked in `new`) and stay alive in `self`; every displacement
        // plus its count stays inside the row totals, and `send`/`recv` hold at least
        // those many rows of `row_bytes` (checked just above), so MPI reads and writes
        // inside the two slices only; `row` is a committed datatype of `row_bytes` bytes.
        let rc = unsafe {
            ffi::MPI_Alltoallv(
                send.as_ptr().cast(),
                self.send_counts.as_ptr(),
                self.send_displs.as_ptr(),
                self.row,
                recv.as_mut_ptr().cast(),
                self.recv_counts.as_ptr(),
                self.recv_displs.as_ptr(),
                self.row,
                self.comm.as_raw(),
            )
        };
        ensure!(rc == 0, "MPI_Alltoallv failed with MPI error code {rc}");
        Ok(())
    }
}

impl Drop for RowExchange<'_> {
    fn drop(&mut self) {
        // SAFETY: `row` was committed in `new` and is freed once, here; no call that
        // uses it can be in flight (`run` is blocking and borrows `self`).
        unsafe {
            ffi::MPI_Type_free(&mut self.row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn need_names_the_buffer_and_range() {
        assert!(need("send", 40, 0, 10, 4).is_ok());
        let e = need("receive", 40, 5, 10, 4).unwrap_err().to_string();
        assert!(e.contains("receive") && e.contains("20 .. 60"), "{e}");
    }
}
