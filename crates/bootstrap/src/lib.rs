//! How the processes of a job come up and reach each other outside the measured path.
//!
//! - [`standalone`]: perftest's handshake, a server and a client over one TCP control
//!   connection ([`standalone::TcpLink`] is a `base::link::PeerLink`).
//! - [`mpi`] (feature `mpi`): the MPI job (`mpirun`/`srun`): roster, barriers, gathers with
//!   size bounds, and `Team`s of it for a collective scaling sweep.
//! - [`gang`]: what a run whose ranks all work at once needs from its launcher (MPI or the
//!   agents): barriers, an agreed flag, the roster exchange, the results at the root.
//! - [`watchdog`]: every wait on a peer ends, with a message, when its deadline passes.
//!
//! The control link's trait and the launcher's environment live in `base` (the transports
//! use them too); the pairing of ranks into rounds is the `p2p` crate's.

// Every public item says what it is, and the compiler keeps the rule.
#![warn(missing_docs)]

pub mod gang;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "mpi")]
pub mod node;
pub mod standalone;
pub mod watchdog;
