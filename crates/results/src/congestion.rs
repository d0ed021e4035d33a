//! A congestion run (`bench-congestion`, GPCNeT's method): which nodes were canaries and
//! which congestors (from a seed, so the split can be repeated), what each canary test
//! measured alone and while the congestors ran, the impact factors between the two, and
//! what the congestors moved meanwhile.

use serde::{Deserialize, Serialize};

use crate::PortCounters;

/// The whole congestion run, carried in [`crate::Document::congestion`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CongestionRun {
    /// Seed of the split and of the canaries' ring permutation.
    pub seed: u64,
    /// Share of the nodes that were canaries, as asked (`--canaries`).
    pub canary_percent: u32,
    /// Length of each canary test in each phase.
    pub phase_seconds: f64,
    /// The transport of the canaries' and congestors' flows (`tcp`, `verbs`; absent in
    /// older documents: tcp). The allreduce canary is MPI's whatever this says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// Every node and its role.
    pub nodes: Vec<CongestionNode>,
    pub canaries: Vec<String>,
    /// The congestor groups, each a list of nodes, with the pattern it ran.
    pub congestor_groups: Vec<CongestorGroup>,
    /// The canaries' ring order (node names), from the seed.
    pub ring: Vec<String>,
    pub canary_tests: Vec<CanaryTest>,
    pub congestor_throughput: Vec<CongestorThroughput>,
    /// Port counter deltas over each phase, per rank with an RDMA port (empty without one).
    #[serde(default)]
    pub counters_isolated: Vec<PortCounters>,
    #[serde(default)]
    pub counters_loaded: Vec<PortCounters>,
    /// The incast rounds (`--mode incast`); the canary fields are empty then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incast: Option<IncastRun>,
    /// Canary tests of the method that this run could not take, each with why (over the
    /// agents there is no MPI for the allreduce canary). Absent: every test ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_tests: Vec<SkippedTest>,
    /// A noisy-neighbour run (`--canary-tenant`, `--congestor-tenant`): every canary is
    /// this tenant's node, every congestor the other's. Absent: GPCNeT's split over every
    /// node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestor_tenant: Option<String>,
}

/// A canary test that was not run, and why: unknown, not zero.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SkippedTest {
    pub test: String,
    pub why: String,
}

/// One node (a host; with `--include-local`, one rank) and its role.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CongestionNode {
    pub node: String,
    pub ranks: Vec<u32>,
    /// `canary` or `congestor`.
    pub role: String,
    /// Index into `congestor_groups` (congestors only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CongestorGroup {
    /// `alltoall` or `incast`.
    pub pattern: String,
    pub nodes: Vec<String>,
}

/// One canary test in both phases.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CanaryTest {
    /// `ring_latency_8b`, `ring_bandwidth_128kib`, `allreduce_8b`.
    pub test: String,
    /// `us` (latency: lower is better) or `gbit_s` (bandwidth: higher is better).
    pub unit: String,
    pub isolated: CanaryFigures,
    pub loaded: CanaryFigures,
    /// Latency: loaded mean / isolated mean; bandwidth: isolated mean / loaded mean. Above
    /// 1 means the congestors hurt. Unrounded.
    pub impact_mean: f64,
    /// The same on the 99th percentile (bandwidth: its low tail, the 1st percentile).
    pub impact_p99: f64,
    /// Latency only: the same on the 99.9th percentile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact_p999: Option<f64>,
}

/// The figures of one canary test in one phase, over all canaries.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CanaryFigures {
    pub samples: u64,
    /// Mean in `unit`. This and the percentiles weigh each canary the same (GPCNeT's
    /// figures: a fixed count per rank); documents before 2026-12-07 merged the samples,
    /// which leans to the canaries on fast hops.
    pub mean: f64,
    /// Latency only: the median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50: Option<f64>,
    /// Latency: 99th percentile; bandwidth: the bandwidth 99 % of the transfers beat.
    pub p99: f64,
    /// Latency only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p999: Option<f64>,
    /// The time of each operation (ns; bandwidth: of each transfer), base64 HDR V2+deflate.
    pub histogram: String,
}

/// What one congestor group moved during the loaded phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CongestorThroughput {
    pub group: u32,
    pub pattern: String,
    pub message_bytes: u64,
    /// The operation its messages were: `send` (two-sided), `write` (one-sided put),
    /// `read` (one-sided get; absent in older documents: send).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Where its bytes were counted: `receiver` (TCP) or `initiator completions` (verbs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_at: Option<String>,
    pub bytes: u64,
    pub seconds: f64,
    /// Moved by the group's flows, all together, 10^9 bit/s.
    pub gbit_s: f64,
}

/// Latency impact: how many times slower under load.
pub fn latency_impact(isolated: f64, loaded: f64) -> f64 {
    loaded / isolated
}

/// Bandwidth impact: how many times less bandwidth under load.
pub fn bandwidth_impact(isolated: f64, loaded: f64) -> f64 {
    isolated / loaded
}

/// `--mode incast[:N]`: N senders to one receiver, every node the receiver in turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IncastRun {
    pub senders_per_round: u32,
    /// How the flows moved their bytes: `tcp`, or `verbs` with `op` `send` or `write`
    /// (absent in documents before verbs incasts: tcp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Where a sender's bytes were counted: `receiver` (TCP: bytes read, up to the last
    /// one) or `sender completions` (verbs: completions reaped in the window, each the
    /// receiver's acknowledgement, up to the last one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_at: Option<String>,
    pub rounds: Vec<IncastRound>,
    /// Why the rounds carry no victim flow (too few nodes outside each round).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_victim: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IncastRound {
    pub receiver: String,
    pub senders: Vec<String>,
    /// Each sender's bandwidth at the receiver, 10^9 bit/s, in `senders` order.
    pub sender_gbit_s: Vec<f64>,
    pub aggregate_gbit_s: f64,
    /// The receiver's line rate where the host reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_rate_gbit_s: Option<f64>,
    /// Jain's fairness index of `sender_gbit_s`: 1 when all get the same, 1/N when one
    /// sender takes everything.
    pub jain_fairness: f64,
    /// The flow beside the incast: two nodes outside the round, alone then during it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub victim: Option<VictimFlow>,
    /// Port counter deltas over the incast window of every rank of the round that has an
    /// RDMA port (receiver, senders, victim): pauses, CNPs, ECN marks, discards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<RoundCounters>,
}

/// One rank's counter deltas over an incast window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RoundCounters {
    pub node: String,
    /// `receiver`, `sender`, `victim sender` or `victim receiver`.
    pub role: String,
    pub ports: Vec<PortCounters>,
}

/// A victim flow: a sender and a receiver that share the switches of an incast round but
/// neither its receiver nor its senders, measured alone and while the incast runs. Its
/// bandwidth falling or its latency tail rising under the incast is congestion spreading
/// (PFC pausing ports the victim crosses) or head-of-line blocking in a shared queue.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VictimFlow {
    pub sender: String,
    pub receiver: String,
    /// 8 B ping-pong round trips (us), then 128 KiB transfers each answered with 8 B
    /// (gbit_s), as the canaries measure them.
    pub alone: VictimFigures,
    pub loaded: VictimFigures,
    /// Bandwidth alone / bandwidth loaded (means); above 1: the incast hurt the victim.
    pub bandwidth_impact: f64,
    /// Latency loaded / latency alone on the 99th percentile.
    pub latency_impact_p99: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VictimFigures {
    /// `us`.
    pub latency: CanaryFigures,
    /// `gbit_s`.
    pub bandwidth: CanaryFigures,
}

/// Jain's fairness index, (sum x)^2 / (n * sum x^2); 0 for no flows or no bytes.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if x.is_empty() || s2 == 0.0 {
        0.0
    } else {
        s * s / (x.len() as f64 * s2)
    }
}
