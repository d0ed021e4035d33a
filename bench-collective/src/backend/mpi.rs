//! The MPI backend: host memory, MPI's own collectives (`MPI_Allreduce`, ...) through
//! `transport::collective::mpi`, timed with the loop clock (the CPU cycle counter where it
//! is invariant). The call is checked once per step (`Collectives::prepare`), so a timed
//! loop holds the MPI call alone.
//!
//! Two passes per step, as on GPUs: nccl-tests' loop (one clock read before the loop
//! and one after: `time_us`), then the per-iteration view (`base::clock::LoopStamps`:
//! one clock read and a store per iteration). The stamps cost 4.4-6.5 ns per iteration
//! here (`transport/examples/collective_stamp_cost.rs`), 2-3% of a 0.22 us shared-memory
//! AllReduce of 8 B: more than the 2% allowed in the loop that makes `time_us`.

use std::sync::atomic::AtomicU64;

use anyhow::Result;
use base::clock::{LoopClock, LoopStamps};
use mpi::topology::SimpleCommunicator;
use transport::collective::mpi::{Buffers, Call, Collectives, Prepared};
use transport::collective::InPlaceRules;

use super::{Backend, Buf, Step, Timed};

/// What fresh buffers hold until a size writes its input.
const POISON_FILL: u8 = 0x5a;

pub struct MpiBackend<'a> {
    colls: Collectives<'a>,
    clock: LoopClock,
    // Heap buffers from the system allocator: 16-byte aligned (page aligned when large),
    // which every element type needs at most.
    send: Vec<u8>,
    recv: Vec<u8>,
}

impl<'a> MpiBackend<'a> {
    pub fn new(comm: &'a SimpleCommunicator) -> Self {
        Self {
            colls: Collectives::new(comm),
            clock: LoopClock::new(),
            send: Vec::new(),
            recv: Vec::new(),
        }
    }

    fn buf(&mut self, b: Buf) -> &mut Vec<u8> {
        match b {
            Buf::Send => &mut self.send,
            Buf::Recv => &mut self.recv,
        }
    }

    /// The call of `s`, checked, on this backend's buffers.
    fn prepare(&mut self, s: &Step) -> Result<Prepared<'_>> {
        let call = Call {
            primitive: s.coll.primitive,
            count: s.count,
            datatype: s.datatype,
            op: s.op,
            root: s.root,
        };
        // The layout came from `layout(.., InPlaceRules::Mpi, ..)`: in place, MPI finds
        // the input and leaves the output where those rules say, inside `recv`.
        let bufs = if s.in_place {
            Buffers::InPlace(&mut self.recv)
        } else {
            Buffers::Separate {
                send: &self.send,
                recv: &mut self.recv,
            }
        };
        self.colls.prepare(&call, bufs)
    }
}

impl Backend for MpiBackend<'_> {
    fn rules(&self) -> InPlaceRules {
        InPlaceRules::Mpi
    }

    fn prepare(&mut self, bytes: usize) -> Result<()> {
        for b in [Buf::Send, Buf::Recv] {
            let v = self.buf(b);
            if v.len() < bytes {
                // Written, not `vec![0; n]`: a zeroed allocation is lazily mapped zero
                // pages, and the first call to touch each page would pay its fault
                // inside a timed loop (the reference's buffers are written before it
                // times anything).
                *v = vec![POISON_FILL; bytes];
            }
        }
        Ok(())
    }

    fn write(&mut self, buf: Buf, offset: usize, data: &[u8]) -> Result<()> {
        self.buf(buf)[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn read(&mut self, buf: Buf, offset: usize, out: &mut [u8]) -> Result<()> {
        let n = out.len();
        out.copy_from_slice(&self.buf(buf)[offset..offset + n]);
        Ok(())
    }

    fn fill(&mut self, buf: Buf, byte: u8, len: usize) -> Result<()> {
        let v = self.buf(buf);
        anyhow::ensure!(
            len <= v.len(),
            "internal error: filling {len} bytes of a {}-byte host buffer",
            v.len()
        );
        v[..len].fill(byte);
        Ok(())
    }

    fn calls(&mut self, step: &Step, n: u64) -> Result<()> {
        let call = self.prepare(step)?;
        for _ in 0..n {
            call.call()?;
        }
        Ok(())
    }

    fn timed(&mut self, step: &Step, iters: u64, progress: &AtomicU64) -> Result<Timed> {
        let clock = self.clock.clone();
        let call = self.prepare(step)?;
        let loop_ns = clock.time_loop(iters, progress, || call.call())?;
        let stamps = LoopStamps::run(&clock, iters as usize, progress, || call.call())?;
        Ok(Timed {
            loop_ns,
            iteration_ns: stamps.iteration_ns(&clock),
        })
    }
}
