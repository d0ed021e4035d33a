//! The NCCL backend: GPU memory, one GPU per rank (the node-local rank from MPI picks it,
//! `transport::cuda::device`; `FABCHECK_CUDA_DEVICE` overrides), an NCCL
//! communicator over the ranks of the team (the job, or one sub-communicator of a scaling
//! sweep) whose unique id the team's rank 0 creates and MPI broadcasts.
//!
//! Timing, in two passes per step: first nccl-tests' loop (one host timer around
//! back-to-back launches and the final stream synchronisation: `time_us`), then the
//! per-iteration view, each launch between two CUDA events on the stream. Two passes
//! because recording and reading events costs host time between launches that
//! nccl-tests' loop does not spend; the MPI backend on host memory runs the same two
//! passes for its own reason, the clock reads and stores per iteration (see `mpi`).

use std::sync::atomic::AtomicU64;

use anyhow::{Context, Result};
use bootstrap::mpi::Team;
use mpi::traits::*;
use transport::collective::InPlaceRules;
use transport::cuda::{self, DeviceBuffer, Gpu, NcclCall, NcclComm};

use super::{Backend, Buf, Step, Timed};

pub struct NcclBackend {
    // Field order is drop order: buffers and communicator go before the GPU's stream.
    send: Option<DeviceBuffer>,
    recv: Option<DeviceBuffer>,
    comm: NcclComm,
    gpu: Gpu,
}

impl NcclBackend {
    /// Opens this rank's GPU and joins an NCCL communicator over `team`. Every rank of
    /// the team must call this (it contains MPI and NCCL collectives, each guarded by the
    /// watchdog).
    pub fn new(team: &Team) -> Result<Self> {
        let node = team.node();
        let (gpu, _) = Gpu::open_for(node.rank, node.size).with_context(|| {
            format!(
                "rank {} (local rank {} of {} on host {}) opening its GPU",
                team.rank(),
                node.rank,
                node.size,
                probe::host::hostname()
            )
        })?;
        let mut id = [0u8; 128];
        if team.rank() == 0 {
            id = cuda::nccl_unique_id()?;
        }
        {
            let _g = team
                .watchdog()
                .arm("receiving the NCCL unique id from rank 0");
            team.comm().process_at_rank(0).broadcast_into(&mut id[..]);
        }
        let comm = {
            let _g = team
                .watchdog()
                .arm("creating the NCCL communicator (ncclCommInitRank waits for every rank)");
            NcclComm::init(&gpu, id, team.size(), team.rank())?
        };
        Ok(Self {
            send: None,
            recv: None,
            comm,
            gpu,
        })
    }

    /// This rank's GPU (for buffers the harness does not own: the EP rows).
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The team's NCCL communicator.
    pub fn comm(&self) -> &NcclComm {
        &self.comm
    }

    fn buf(&self, b: Buf) -> Result<&DeviceBuffer> {
        match b {
            Buf::Send => self.send.as_ref(),
            Buf::Recv => self.recv.as_ref(),
        }
        .context("internal error: GPU buffers used before prepare")
    }

    fn buf_mut(&mut self, b: Buf) -> Result<&mut DeviceBuffer> {
        match b {
            Buf::Send => self.send.as_mut(),
            Buf::Recv => self.recv.as_mut(),
        }
        .context("internal error: GPU buffers used before prepare")
    }

    /// The call of `step`, its buffers where the step's layout puts them.
    fn call<'b>(&'b self, step: &Step) -> Result<NcclCall<'b>> {
        let ts = step.datatype.size();
        let (input, output) = (step.layout.input, step.layout.output);
        Ok(NcclCall {
            primitive: step.coll.primitive,
            send: (self.buf(input.0)?, input.1 * ts),
            recv: (self.buf(output.0)?, output.1 * ts),
            count: step.count,
            datatype: step.datatype,
            op: step.op,
            root: step.root as u32,
        })
    }
}

impl Backend for NcclBackend {
    fn rules(&self) -> InPlaceRules {
        InPlaceRules::Nccl
    }

    fn prepare(&mut self, bytes: usize) -> Result<()> {
        if self.send.as_ref().is_none_or(|b| b.len() < bytes) {
            // Free before allocating so two sizes never coexist on the GPU.
            self.gpu.synchronize()?;
            self.send = None;
            self.recv = None;
            self.send = Some(self.gpu.alloc(bytes)?);
            self.recv = Some(self.gpu.alloc(bytes)?);
        }
        Ok(())
    }

    fn write(&mut self, buf: Buf, offset: usize, data: &[u8]) -> Result<()> {
        self.buf_mut(buf)?.write(offset, data)
    }

    fn read(&mut self, buf: Buf, offset: usize, out: &mut [u8]) -> Result<()> {
        self.buf(buf)?.read(offset, out)
    }

    fn fill(&mut self, buf: Buf, byte: u8, len: usize) -> Result<()> {
        let b = self.buf_mut(buf)?;
        anyhow::ensure!(
            len <= b.len(),
            "internal error: filling {len} bytes of a {}-byte GPU buffer",
            b.len()
        );
        // `DeviceBuffer` has no ranged memset, and copying `len` poison bytes from the
        // host would cost far more than the device memset of the whole allocation (well
        // under a millisecond even at 1 GiB); bytes past `len` are never read.
        b.fill(byte)
    }

    fn calls(&mut self, step: &Step, n: u64) -> Result<()> {
        self.comm.calls(&self.call(step)?, n)
    }

    fn timed(&mut self, step: &Step, iters: u64, progress: &AtomicU64) -> Result<Timed> {
        let call = self.call(step)?;
        let loop_ns = self.comm.loop_time(&call, iters, progress)?;
        let iteration_ns = self.comm.iteration_times(&call, iters, progress)?;
        Ok(Timed {
            loop_ns,
            iteration_ns,
        })
    }
}

/// This rank's GPU for the document, and its line in the `# Using devices` list (opens
/// the GPU the node-local rank `node` picks; the CUDA libraries must have been checked
/// present).
pub fn device_facts(node: bootstrap::node::NodeRank) -> Result<(results::GpuInfo, String)> {
    let (gpu, why) = Gpu::open_for(node.rank, node.size)?;
    let g = gpu.info();
    let line = format!(
        "device {:2} [{}] {} (NCCL {}; local rank {} of {}, {})",
        g.index,
        g.pci_bus_id.clone().unwrap_or_else(|| "?".into()),
        g.name,
        cuda::nccl_version().unwrap_or_else(|| "?".into()),
        node.rank,
        node.size,
        why.describe()
    );
    Ok((g, line))
}
