//! GPCNeT's congestion method made reproducible (`bench-congestion`): a seed splits the
//! nodes into canaries and congestor groups; the canaries measure a random-ring latency, a
//! random-ring bandwidth and, under MPI, an 8-byte allreduce, first alone (isolated), then
//! while the congestors run all-to-all, incast, put-incast and get-broadcast traffic
//! (loaded); the impact factors compare the two.
//!
//! ```text
//! split:    the seeded split and the ring (pure arithmetic on the gathered host names)
//! run:      one rank's run over a Gang (MPI's ranks, or the agents'): the roster, the
//!           connections, the warm-up, the two phases; every rank's report to the root
//! assemble: the reports into the document's `congestion` block, and GPCNeT's table
//! ```
//!
//! The run is written once against [`bootstrap::gang::Gang`]: under mpirun/srun rank 0 is
//! the root; over the agents (`bench-congestion --hosts`) the coordinator is, and it
//! recomputes the split from the same host names and seed. The allreduce canary is MPI's
//! ([`CanaryCollective`]); over the agents there is no MPI, and the document says the test
//! was not run and why, rather than filling the row.

mod assemble;
mod run;
pub mod split;

use std::time::Instant;

use anyhow::Result;
use results::{LatencyHistogram, PortCounters};
use serde::{Deserialize, Serialize};

pub use assemble::{assemble, document, print_table};
pub use run::{run, Finish};

/// What every rank of a run must agree on (the coordinator sends it to the agents).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// Seed of the split and of the canaries' ring.
    pub seed: u64,
    /// Share of the nodes that are canaries, percent.
    pub canaries: u32,
    /// Length of each canary test in each phase, seconds.
    pub phase_seconds: f64,
    /// Every rank counts as a node (one machine rehearsing the method).
    pub include_local: bool,
    /// Longest wait for a peer, seconds.
    pub timeout_s: f64,
    /// Canaries from one tenant, congestors from another (`--canary-tenant`,
    /// `--congestor-tenant`): the noisy-neighbour run. `None`: GPCNeT's seeded split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<split::TenantRoles>,
}

/// The canaries' collective test, GPCNeT's third canary: an 8-byte allreduce among the
/// canaries. MPI provides it (`bench-congestion` under mpirun/srun); the agents do not.
pub trait CanaryCollective {
    /// Called on every rank once the roles are known (MPI makes the canaries'
    /// communicator here: a collective call, so every rank must make it).
    fn join(&mut self, canary: bool);
    /// 8-byte allreduces among the canaries until `deadline`, each timed; every canary
    /// stops after the same count.
    fn allreduce(&self, deadline: Instant) -> LatencyHistogram;
}

/// The canary tests, in the order each phase runs them: (name, unit).
pub const TESTS: [(&str, &str); 3] = [
    ("ring_latency_8b", "us"),
    ("ring_bandwidth_128kib", "gbit_s"),
    ("allreduce_8b", "us"),
];

/// Why the allreduce canary has no row over the agents.
pub const NO_ALLREDUCE: &str =
    "not run: the allreduce canary is MPI's, and this run is over the agents, without MPI \
     (run bench-congestion under mpirun or srun to measure it)";

/// What one rank measured, gathered at the root.
#[derive(Debug, Serialize, Deserialize, Default)]
pub struct RankReport {
    /// Per phase (isolated, loaded): the canary tests' histograms, encoded, in [`TESTS`]
    /// order (empty on congestors; two without the allreduce).
    pub hist: Vec<Vec<String>>,
    /// (group, bytes, seconds) this rank counted for a congestor group in the loaded phase.
    pub congest: Vec<(u32, u64, f64)>,
    /// Port counter deltas over each phase.
    pub counters: [Vec<PortCounters>; 2],
}

/// The canaries' warm-up per test: a tenth of the phase, between 50 ms and 1 s.
pub fn warmup(phase: std::time::Duration) -> std::time::Duration {
    use std::time::Duration;
    (phase / 10).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// Decodes the gathered reports.
pub fn decode_reports(raw: &[Vec<u8>]) -> Result<Vec<RankReport>> {
    use anyhow::Context;
    raw.iter()
        .map(|b| base::wire::decode_json::<RankReport>(b).context("an unreadable report"))
        .collect()
}
