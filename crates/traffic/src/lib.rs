//! Many-to-many traffic: every rank moving data at once, where the pair driver of `p2p`
//! measures one pair at a time.
//!
//! ```text
//! flows (a roster of every rank's flow listener; TCP flows and their figures)
//!   + endpoint_flows (the same flows through the transport's endpoints: verbs, TCP)
//!   -> incast (N senders into one receiver, a victim's latency beside them)
//!   -> congestion (GPCNeT's method: canaries isolated, then beside congestors)
//!   -> reach (every node tries every other node: the tenants' isolation sweep)
//! ```
//!
//! Each runs under a `p2p` coordinator (mpirun/srun, standalone) or over the agents, and
//! returns per-rank reports the root assembles into one document. No `unsafe` here.

// Every public item says what it is, and the compiler keeps the rule.
#![warn(missing_docs)]

pub mod congestion;
pub mod endpoint_flows;
pub mod flows;
pub mod incast;
pub mod reach;
