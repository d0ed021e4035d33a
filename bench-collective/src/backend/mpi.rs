//! The MPI backend: host memory, MPI's own collectives (`MPI_Allreduce`, ...), each
//! iteration timed with the loop clock (the CPU cycle counter where it is invariant).
//! The timed loop holds the call, two clock reads and a store into a preallocated vector.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Result;
use fabric::clock::LoopClock;
use fabric::collective::mpi::{Collectives, Input};
use fabric::collective::Primitive;
use mpi::topology::SimpleCommunicator;

use super::{nccl_layout, Backend, Buf, Layout, Step};
use crate::colls::Collective;

pub struct MpiBackend<'a> {
    colls: Collectives<'a>,
    rank: usize,
    clock: LoopClock,
    // Heap buffers from the system allocator: 16-byte aligned (page aligned when large),
    // which every element type needs at most.
    send: Vec<u8>,
    recv: Vec<u8>,
}

impl<'a> MpiBackend<'a> {
    pub fn new(world: &'a SimpleCommunicator, rank: usize) -> Self {
        Self {
            colls: Collectives::new(world),
            rank,
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

    /// One call of the collective.
    #[inline]
    fn call(&mut self, s: &Step) -> Result<()> {
        let (dt, op, n, root) = (s.datatype, s.op, s.count, s.root);
        let c = &self.colls;
        let input = if s.in_place {
            Input::InPlace
        } else {
            Input::Buf(&self.send)
        };
        match s.coll.primitive {
            Primitive::AllReduce => c.all_reduce(input, &mut self.recv, n, dt, op),
            Primitive::AllGather => c.all_gather(input, &mut self.recv, n, dt),
            Primitive::ReduceScatter => c.reduce_scatter(input, &mut self.recv, n, dt, op),
            Primitive::AllToAll => c.alltoall(input, &mut self.recv, n, dt),
            Primitive::Reduce => c.reduce(input, &mut self.recv, n, dt, op, root),
            // MPI_Bcast has one buffer: out of place the root sends from its send buffer
            // and the others receive into their receive buffer, so no copy is timed.
            Primitive::Broadcast if !s.in_place && self.rank == root => {
                c.broadcast(&mut self.send, n, dt, root)
            }
            Primitive::Broadcast => c.broadcast(&mut self.recv, n, dt, root),
        }
    }
}

impl Backend for MpiBackend<'_> {
    fn name(&self) -> &'static str {
        "mpi"
    }

    fn clock(&self) -> String {
        LoopClock::source().into()
    }

    fn layout(
        &self,
        coll: &Collective,
        in_place: bool,
        rank: usize,
        root: usize,
        param: usize,
    ) -> Layout {
        match coll.primitive {
            // MPI_Reduce_scatter_block in place writes the result at the start of the
            // buffer, not at the rank's block as NCCL does.
            Primitive::ReduceScatter if in_place => Layout {
                input: (Buf::Recv, 0),
                output: (Buf::Recv, 0),
            },
            // Out-of-place broadcast: the root's data stays in its send buffer.
            Primitive::Broadcast if !in_place && rank == root => Layout {
                input: (Buf::Send, 0),
                output: (Buf::Send, 0),
            },
            _ => nccl_layout(coll, in_place, rank, param),
        }
    }

    fn prepare(&mut self, bytes: usize) -> Result<()> {
        for b in [Buf::Send, Buf::Recv] {
            let v = self.buf(b);
            if v.len() != bytes {
                *v = vec![0u8; bytes];
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

    fn fill(&mut self, buf: Buf, byte: u8) -> Result<()> {
        self.buf(buf).fill(byte);
        Ok(())
    }

    fn run(
        &mut self,
        step: &Step,
        warmup: u64,
        iters: u64,
        progress: &Arc<AtomicU64>,
    ) -> Result<Vec<u64>> {
        for _ in 0..warmup {
            self.call(step)?;
        }
        let mut times = Vec::with_capacity(iters as usize);
        let clock = self.clock.clone();
        for i in 0..iters {
            let t0 = clock.raw();
            self.call(step)?;
            let t1 = clock.raw();
            times.push(clock.nanos(t0, t1));
            progress.store(i + 1, Ordering::Relaxed);
        }
        Ok(times)
    }

    fn device_line(&self) -> String {
        "host memory (MPI)".into()
    }
}
