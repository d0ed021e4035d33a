//! The lowest layer of the suite's libraries: what every other layer stands on and that
//! touches neither a NIC nor a peer.
//!
//! - [`clock`]: the measured loop's clock (the invariant cycle counter where there is one)
//!   and its own overhead.
//! - [`exit`], [`interrupt`]: one exit-code policy for every tool; Ctrl-C and SIGTERM stop
//!   a run with what was measured kept.
//! - [`launcher`]: how the processes were started (standalone or MPI) and what the
//!   launcher's environment says before MPI is up.
//! - [`link`]: the control link of a pair ([`link::PeerLink`]), JSON messages and aborts on
//!   it; [`wire`]: the framing those messages travel in over TCP.
//! - [`output`]: documents written atomically, checked writable before measuring.
//! - [`names`], [`errno`], [`sockets`], [`cpu`]: enum names for command lines and
//!   documents, errno names, bind-before-connect sockets, CPU time of a process.
//!
//! No `unsafe` here.

// Every public item says what it is, and the compiler keeps the rule.
#![warn(missing_docs)]

pub mod clock;
pub mod cpu;
pub mod errno;
pub mod exit;
pub mod interrupt;
pub mod launcher;
pub mod link;
pub mod names;
pub mod output;
pub mod sockets;
pub mod splitmix;
pub mod wire;
