//! Who meets whom: the one point-to-point driver of `bench-lat` and `bench-bw`
//! (nccl-tests' `common.cu` for pairs) and the coordinators it runs under.
//!
//! ```text
//! plan (plan: options that shape the numbers; where the peers are)
//!   -> a coordinator (coordinator: the trait; standalone | mpi here, the agents' in the
//!      agents crate): the roster of ranks, barriers, gathers
//!   -> pattern: rounds of disjoint pairs (pairs, all-pairs, ring, random, file)
//!   -> per round (driver): each pair opens its control link (pairlink), walks the sizes
//!      (pair) through the tool's loop (tool), records results or its failure
//!   -> the root gathers the round, checkpoints, prints (record, progress)
//!   -> one document, written atomically
//! ```
//!
//! The driver knows the [`coordinator::Coordinator`] trait only; which coordinator runs is
//! picked by the launch code above this crate (`p2p-cli::launch`). A tool supplies only its
//! plan, its loop for one size and its table rows ([`tool::PairTool`]). Many-to-many traffic
//! (incast, congestion, the isolation sweep) is the `traffic` crate's, on these
//! coordinators. No `unsafe` here.

// Every public item says what it is, and the compiler keeps the rule.
#![warn(missing_docs)]

pub mod coordinator;
pub mod driver;
pub mod fabric;
#[cfg(feature = "mpi")]
pub mod mpi;
mod pair;
pub mod pairlink;
pub mod pattern;
pub mod placement;
pub mod plan;
pub mod progress;
pub mod record;
pub mod standalone;
pub mod tool;

pub use plan::{DeviceChoice, Launch, Plan};
pub use tool::{PairTool, SizeRun};
