//! How bytes move: the transports of the measured loops and the memory they move.
//!
//! ```text
//! gpu (memory kinds, options, staging traits; diagnose: why GPUDirect failed)
//!   <- endpoint (shared types and the two loop traits)
//!   <- cuda (feature `cuda`: GPU memory, copies, NCCL) and collective (primitives; MPI FFI)
//!   <- tcp, verbs (feature `verbs`): the endpoints
//!   <- connect (auto resolved, options checked, endpoints made ready per size)
//!   <- gpudirect (start-up checks of `--use-cuda`: GPU, nearest NIC, trial registration)
//! ```
//!
//! `unsafe` lives in the FFI modules only: `verbs` (libibverbs through rdma-sys), `cuda`
//! (the CUDA driver and NCCL through cudarc) and `collective::mpi` (MPI collectives), each
//! block with a SAFETY comment. The workspace denies `unsafe_code` everywhere else; these
//! three modules allow it by name.

pub mod collective;
pub mod connect;
#[cfg(feature = "cuda")]
#[allow(unsafe_code)]
pub mod cuda;
pub mod endpoint;
pub mod gpu;
pub mod gpudirect;
pub mod tcp;
#[cfg(feature = "verbs")]
#[allow(unsafe_code)]
pub mod verbs;

pub use connect::*;
pub use endpoint::*;
