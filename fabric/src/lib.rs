//! The fabric library: everything the benchmarks share that touches the system.
//!
//! Data flow of a point-to-point run, and where each step lives:
//!
//! ```text
//! options (cli::P2pArgs) -> plan (p2p::Plan) -> bootstrap (standalone tcp | mpi: pairs ranks,
//! exchanges endpoint info over a PeerLink) -> transport endpoint (tcp | verbs) -> measure
//! (the binary's loop, timestamps from clock, samples into results::LatencyHistogram)
//! -> results::TestResult -> results::Document, written by the client or rank 0.
//! ```
//!
//! A collective run (bench-collective): the binary's plan -> bootstrap::mpi (the job, and
//! `Team`s of it for a scaling sweep) -> collective (the primitives, what each call
//! touches, in-place rules; `collective::mpi` makes the MPI calls, `cuda` the NCCL ones)
//! -> the loops of `clock` (`LoopClock::time_loop` for nccl-tests' time, `LoopStamps` for
//! the per-iteration view).
//!
//! Every tool ends with [`exit::code`]: one policy for what a run's exit code says.
//! `unsafe` lives in the verbs transport, `cuda` and `collective::mpi`, each block with a
//! SAFETY comment.

pub mod agents;
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
