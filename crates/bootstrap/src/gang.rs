//! What a run whose ranks all work at once (an incast's rounds, not a sweep's disjoint
//! pairs) needs from whatever launched it: who it is, barriers, one flag agreed by all, the
//! roster exchange, and every rank's result brought to the one that writes the document.
//!
//! An MPI job provides it (`mpi::MpiJob`: rank 0 is the root); so do the agents (the
//! `agents` crate: the coordinator, not a rank, is the root and relays the rest). The run
//! itself is written once against this trait. Every wait is bounded: a rank that stops
//! answering ends the run with an error that names the wait, never a hang.

use std::time::Duration;

use anyhow::Result;

/// The ranks of a run that all work at once (MPI's, or the agents' through their
/// coordinator): who this is, how many, and the few collective waits many-to-many traffic needs.
pub trait Gang {
    /// `mpi` or `agents`, for the document.
    fn launcher(&self) -> &'static str;
    /// This rank, from 0.
    fn rank(&self) -> u32;
    /// How many ranks there are.
    fn size(&self) -> u32;
    /// Waits for every rank (`what` names the wait in errors).
    fn barrier(&mut self, what: &str) -> Result<()>;
    /// True on every rank when any rank passes true, within `limit`. The wait sleeps: the
    /// ranks that are done must not take the cores of those still measuring.
    fn any_within(&mut self, local: bool, what: &str, limit: Duration) -> Result<bool>;
    /// Every rank's bytes, in rank order, on every rank (the roster).
    fn all_gather(&mut self, mine: &[u8], what: &str) -> Result<Vec<Vec<u8>>>;
    /// Every rank's bytes in rank order where this process writes the document (`None`
    /// on the ranks that do not). The last call of a run.
    fn gather(&mut self, mine: &[u8], what: &str) -> Result<Option<Vec<Vec<u8>>>>;
}
