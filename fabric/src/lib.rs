//! The fabric library: everything the benchmarks share that touches the system.
//!
//! Data flow of a point-to-point run, and where each step lives:
//!
//! ```text
//! options (the binaries' p2p-cli crate) -> launch + plan (p2p::Launch, p2p::Plan)
//!   -> coordinator (p2p::coordinator: standalone handshake | MPI roster and barriers |
//!      agents, see agents/) -> pattern (p2p::pattern: rounds of disjoint pairs)
//!   -> per pair: a control link (p2p::pairlink) -> transport endpoint (tcp | verbs)
//!   -> measure (the binary's loop, timestamps from clock, samples into
//!      results::LatencyHistogram) -> results::TestResult
//!   -> the root gathers each round (p2p::record) -> results::Document, written atomically.
//! ```
//!
//! The project's architecture and conventions are described in the README (its layout
//! section and the acceptance-day section) and in docs/.
//!
//! A collective run (bench-collective): the binary's plan -> bootstrap::mpi (the job, and
//! `Team`s of it for a scaling sweep) -> collective (the primitives, what each call
//! touches, in-place rules; `collective::mpi` makes the MPI calls, `cuda` the NCCL ones)
//! -> the loops of `clock` (`LoopClock::time_loop` for nccl-tests' time, `LoopStamps` for
//! the per-iteration view).
//!
//! Every tool ends with [`exit::code`]: one policy for what a run's exit code says.
//! `unsafe` lives in the verbs transport (`transport::verbs`), the CUDA module (`cuda`) and
//! the MPI calls of the collectives (`collective::mpi`), each block with a SAFETY comment;
//! nowhere else (the point-to-point driver, the agents, the inventory and topology readers
//! are safe code over sysfs and sockets).

pub mod agents;
pub mod audit;
pub mod bootstrap;
pub mod clock;
pub mod collective;
pub mod counters;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod errno;
pub mod exit;
pub mod gpu;
pub mod host;
pub mod interrupt;
pub mod inventory;
pub mod names;
pub mod output;
pub mod p2p;
pub mod quality;
pub mod sockets;
pub mod topology;
pub mod transport;
pub mod wire;
