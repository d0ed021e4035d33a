//! RDMA verbs transport over `rdma-sys` (libibverbs): what perftest's `ib_send_lat`,
//! `ib_write_lat`, `ib_read_lat`, `ib_send_bw`, `ib_write_bw` and `ib_read_bw` do, behind
//! the transport traits so the benchmarks' one loop drives them.
//!
//! The module is layered like the hardware objects it wraps, each a small typed owner
//! whose `Drop` releases what it holds:
//!
//! - [`device`]: device list, opening a device by name, port attributes, GID choice;
//! - [`memory`]: protection domain, registered memory (host, host dma-buf, GPU) and the
//!   typed views work requests take (memlock checked first);
//! - [`dmabuf`]: host memory exported as a dma-buf (`--host-dmabuf`);
//! - [`cq`]: completion queues, polled or woken by a completion channel (`-e`);
//! - [`qp`]: RC queue pairs and their RESET -> INIT -> RTR -> RTS bring-up, in one place;
//! - [`session`]: one side's set of the above, connected to the peer over the bootstrap's
//!   [`PeerLink`](base::link::PeerLink);
//! - [`lat`] and [`bw`]: the latency and bandwidth endpoints;
//! - [`trial`]: registrations tried at start-up, so a GPU or dma-buf path that cannot work
//!   is diagnosed before anything is measured.
//!
//! This is the only home of `unsafe` verbs code (besides CUDA); every block says why it
//! is sound. Errors name the object, the cause and the next step; a work completion
//! with an error carries its status name and what it usually means.

pub mod bw;
pub mod cq;
pub mod device;
pub mod dmabuf;
pub mod gid;
pub mod lat;
pub mod memory;
pub mod qp;
pub mod session;
pub mod trial;

pub use bw::VerbsBandwidth;
pub use lat::VerbsLatency;

use anyhow::{bail, Result};

use crate::endpoint::Op;

/// The operations verbs endpoints perform: the transport's view of [`Op`], which also names
/// tests that never reach a transport (GPU copies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmaOp {
    Send,
    Write,
    Read,
}

impl RdmaOp {
    pub fn of(op: Op) -> Result<RdmaOp> {
        Ok(match op {
            Op::Send => RdmaOp::Send,
            Op::Write => RdmaOp::Write,
            Op::Read => RdmaOp::Read,
            other => bail!("internal error: {} is not a verbs operation", other.name()),
        })
    }
}

/// Is the verbs transport usable here? Lists the devices (cheap) and says why not:
/// no kernel support, no device, or no provider library.
pub fn probe() -> Result<()> {
    device::DeviceList::get().map(|_| ())
}

/// Opens the device and checks port, GID and MTU choices as a test would, then closes it.
pub fn validate_local(opts: &crate::endpoint::VerbsOptions) -> Result<()> {
    let list = device::DeviceList::get()?;
    let ctx = list.open(opts.device.as_deref(), opts.port)?;
    let port = ctx.port(opts.port)?;
    ctx.choose_gid(&port, opts.gid_index)?;
    if let Some(m) = opts.mtu {
        if device::mtu_enum(m).is_none() {
            bail!(
                "-m {m} is not a path MTU: use 256, 512, 1024, 2048 or 4096 (the port's active MTU is {})",
                port.active_mtu
            );
        }
    }
    Ok(())
}

/// `strerror` text and symbolic name of an errno value, for messages.
pub fn errno_text(errno: i32) -> String {
    base::errno::text(errno)
}

/// The errno of the last failed libc/libibverbs call on this thread.
pub(crate) fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
