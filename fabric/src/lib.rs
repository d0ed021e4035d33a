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

pub mod agents;
pub mod bootstrap;
pub mod clock;
pub mod collective;
pub mod counters;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod errno;
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

/// Process exit codes shared by every tool (design.md: 0 ok, 1 measured but failed a
/// check, 2 usage or environment error). An interrupted run exits 130 after writing what it
/// measured.
pub mod exit {
    pub const OK: i32 = 0;
    pub const CHECK_FAILED: i32 = 1;
    pub const ERROR: i32 = 2;
    pub const INTERRUPTED: i32 = 130;
}
