//! The NCCL backend: GPU memory, one GPU per rank (the node-local rank picks it), an NCCL
//! communicator over all ranks whose unique id rank 0 creates and MPI broadcasts, every
//! iteration timed between two CUDA events on the collective's stream.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use anyhow::{Context, Result};
use fabric::bootstrap::mpi::MpiJob;
use fabric::cuda::{self, DeviceBuffer, Gpu, NcclCall, NcclComm};
use mpi::traits::*;

use super::{Backend, Buf, Step};

pub struct NcclBackend {
    // Field order is drop order: buffers and communicator go before the GPU's stream.
    send: Option<DeviceBuffer>,
    recv: Option<DeviceBuffer>,
    comm: NcclComm,
    gpu: Gpu,
}

impl NcclBackend {
    /// Opens this rank's GPU and joins the NCCL communicator. Every rank must call this
    /// (it contains MPI and NCCL collectives, each guarded by the watchdog).
    pub fn new(job: &MpiJob) -> Result<Self> {
        let local = cuda::local_rank().unwrap_or(0);
        let gpu = Gpu::open(local)
            .with_context(|| format!("rank {} (local rank {local}) opening its GPU", job.rank()))?;
        let mut id = [0u8; 128];
        if job.rank() == 0 {
            id = cuda::nccl_unique_id()?;
        }
        {
            let _g = job
                .watchdog()
                .arm("receiving the NCCL unique id from rank 0");
            job.world().process_at_rank(0).broadcast_into(&mut id[..]);
        }
        let comm = {
            let _g = job
                .watchdog()
                .arm("creating the NCCL communicator (ncclCommInitRank waits for every rank)");
            NcclComm::init(&gpu, id, job.size(), job.rank())?
        };
        Ok(Self {
            send: None,
            recv: None,
            comm,
            gpu,
        })
    }

    fn buf(&mut self, b: Buf) -> Result<&mut DeviceBuffer> {
        match b {
            Buf::Send => self.send.as_mut(),
            Buf::Recv => self.recv.as_mut(),
        }
        .context("internal error: GPU buffers used before prepare")
    }
}

impl Backend for NcclBackend {
    fn name(&self) -> &'static str {
        "nccl"
    }

    fn clock(&self) -> String {
        "cuda_event".into()
    }

    fn prepare(&mut self, bytes: usize) -> Result<()> {
        if self.send.as_ref().map(DeviceBuffer::len) != Some(bytes) {
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
        self.buf(buf)?.write(offset, data)
    }

    fn read(&mut self, buf: Buf, offset: usize, out: &mut [u8]) -> Result<()> {
        self.buf(buf)?.read(offset, out)
    }

    fn fill(&mut self, buf: Buf, byte: u8) -> Result<()> {
        self.buf(buf)?.fill(byte)
    }

    fn run(
        &mut self,
        step: &Step,
        warmup: u64,
        iters: u64,
        progress: &Arc<AtomicU64>,
    ) -> Result<Vec<u64>> {
        let (send, recv) = match (&self.send, &self.recv) {
            (Some(s), Some(r)) => (s, r),
            _ => anyhow::bail!("internal error: GPU buffers used before prepare"),
        };
        let ts = step.datatype.size();
        // In place, NCCL takes the same buffer twice with nccl-tests' offsets.
        let (send_at, recv_at) = if step.in_place {
            let (i, o) = (step.coll.in_place)(self.comm.rank(), step.count);
            ((recv, i * ts), (recv, o * ts))
        } else {
            ((send, 0), (recv, 0))
        };
        let call = NcclCall {
            primitive: step.coll.primitive,
            send: send_at,
            recv: recv_at,
            count: step.count,
            datatype: step.datatype,
            op: step.op,
            root: step.root as u32,
        };
        self.comm.timed(&call, warmup, iters, progress)
    }

    fn gpu(&self) -> Option<results::GpuInfo> {
        Some(self.gpu.info())
    }

    fn device_line(&self) -> String {
        let g = self.gpu.info();
        format!(
            "device {:2} [{}] {} (NCCL {})",
            g.index,
            g.pci_bus_id.unwrap_or_else(|| "?".into()),
            g.name,
            cuda::nccl_version().unwrap_or_else(|| "?".into())
        )
    }
}
