//! Schema version 1 of the result document. `docs/schema.md` is the field reference;
//! keep the two in step. Field names are a contract with old scripts and with `aggregate`:
//! add fields freely, never rename or change the unit of one without bumping
//! [`SCHEMA_VERSION`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::histogram::{LatencySummary, PerftestLatency};

/// Version of the document layout. Readers refuse versions they do not know.
pub const SCHEMA_VERSION: u32 = 1;

/// One run of one tool: everything needed to judge and to reproduce the numbers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Document {
    pub schema_version: u32,
    /// `bench-lat`, `bench-bw`, `bench-collective`.
    pub tool: String,
    pub tool_version: String,
    pub git_commit: String,
    /// argv of the process that wrote the document (rank 0 or the client).
    pub command_line: Vec<String>,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339.
    pub finished_at: String,
    /// False when the run stopped early (interrupt, dead peer, timeout); `results` then holds
    /// what was measured before, each result marked with its own `complete`.
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_reason: Option<String>,
    /// `standalone` (server/client over TCP) or `mpi` (mpirun/srun).
    pub launcher: String,
    /// Ranks in the job (2 for a standalone pair).
    pub ranks: u32,
    /// Cost the timed loop adds to each iteration (one clock read and a store), measured
    /// at start-up on the writing host. Latencies below a few times this
    /// are not trustworthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_overhead_ns: Option<f64>,
    /// Clock used to timestamp the loop (`tsc` or `monotonic`). Where two clocks time one
    /// result, both, joined by `+`: the clock of the reported time first, then the clock
    /// of the histogram (bench-collective on NCCL: `monotonic+cuda_event`, `time_us` from
    /// the host's monotonic clock around the launches and the final wait as nccl-tests
    /// times it, the per-iteration histogram from CUDA events on the stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// One entry per participating host or rank.
    pub hosts: Vec<HostInfo>,
    /// Every option that shapes the numbers, by its long flag name.
    pub options: Map<String, Value>,
    pub results: Vec<TestResult>,
    /// Things a reader should know (noisy run, MTU clamped, auto-chosen transport ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What could have disturbed the run (load, steal, preemptions, foreign port traffic),
    /// measured on every host around it; absent in documents of older writers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<crate::quality::RunQuality>,
    /// How pairs were scheduled, for point-to-point runs over many ranks (`--pattern`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepInfo>,
    /// Pairs that could not be measured (QPs would not connect, port down, failed work
    /// completions, a peer that missed the timeout); the sweep went on without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_pairs: Vec<FailedPair>,
    /// The switch-to-switch links of the whole fabric, discovered by one rank
    /// (InfiniBand: `ibnetdiscover`); absent when not asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<crate::discovery::FabricDiscovery>,
    /// A congestion run (`bench-congestion`): the split, the canaries alone and loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<crate::congestion::CongestionRun>,
    /// An isolation sweep (`bench-lat --pattern isolation`): who reached whom.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<crate::reach::ReachRun>,
}

/// The schedule of a point-to-point sweep: which pattern, over which nodes, in how many
/// rounds of disjoint pairs, and how far it got.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SweepInfo {
    /// `pairs`, `all-pairs`, `ring`, `random`, `file`.
    pub pattern: String,
    /// Seed of `random` (to repeat the same matchings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Pair list of `file:PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Node names in schedule order (a node is a host, or a rank with `--include-local`).
    pub nodes: Vec<String>,
    /// Ranks per node that take part (one per rail).
    pub rails: u32,
    /// `aligned` (local rank r with local rank r) or `all` (every rail with every rail).
    pub rail_mode: String,
    /// Ranks of one host counted as separate nodes (`--include-local`).
    pub include_local: bool,
    /// Rounds in the schedule.
    pub rounds: u32,
    /// Rounds finished (all its pairs measured or failed) when the document was written.
    pub rounds_done: u32,
    /// Rank pairs in the whole schedule (measured, failed or not reached).
    pub planned_pairs: u64,
    /// Wall time of each finished round on the root, from the barrier that opens it to
    /// the gathered results: with the pairs' own `duration_s`, what a round costs beyond
    /// measuring (barrier, connection set-up and teardown, exchanges, gathering).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_seconds: Vec<f64>,
    /// The fabric plan the sweep was given (`--plan`): what it found and the pairs by hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<SweepPlan>,
}

/// A sweep against the fabric plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepPlan {
    /// Where the plan came from (`native plan.toml`).
    pub source: String,
    /// Planned nodes with no rank in the run: their links were never measured.
    #[serde(default)]
    pub missing: Vec<String>,
    /// Hosts of the run the plan does not name.
    #[serde(default)]
    pub unplanned: Vec<String>,
    /// Scheduled rank pairs with both NICs on one leaf (one switch).
    pub same_leaf_pairs: u64,
    /// Scheduled rank pairs across the spines (leaf, spine, leaf).
    pub cross_leaf_pairs: u64,
    /// Scheduled rank pairs with an end the plan does not place.
    pub unknown_pairs: u64,
    /// Groups whose uplinks the plan's rates say are oversubscribed, and the pairs across
    /// the spines each round held them to (what the uplinks carry at line rate).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cross_leaf_cap: BTreeMap<String, u32>,
    /// Rounds the schedule had before that cap (it has `rounds` now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds_uncapped: Option<u64>,
    /// `node nic` -> the planned leaf discovery (LLDP, SMP) found it on instead of its
    /// own: its pairs were held by that leaf's uplinks (hops still count by the plan).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub held_as_built: BTreeMap<String, String>,
}

/// A pair that was scheduled but could not be measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FailedPair {
    pub round: u32,
    pub pair: Pair,
    /// Message size in flight when it failed (absent: before the first size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// What the initiator saw, and what the responder saw (each side names its own cause:
    /// a work-completion status, a port state, a timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiator_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responder_error: Option<String>,
    /// Port state of each side's device when the failure was seen (`4: ACTIVE`, `1: DOWN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiator_port_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responder_port_state: Option<String>,
}

/// Facts about one host (or one rank on it).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HostInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// `server`/`client` in standalone runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: u32,
    pub numa_nodes: u32,
    pub net_devices: Vec<NetDevice>,
    #[serde(default)]
    pub rdma_devices: Vec<RdmaDevice>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuInfo>,
    /// Index of this rank among the ranks of its host (MPI), which picks its rail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// RDMA device this rank measured with (`-d`, or chosen by `-d auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// NVIDIA kernel driver version, with `open` for the open kernel modules (the only ones
    /// that export GPU memory as dma-buf), from `/proc/driver/nvidia/version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_driver: Option<String>,
    /// Whether the `nvidia_peermem` module (GPUDirect RDMA through `ibv_reg_mr` on GPU
    /// memory) is loaded; present only on hosts with NVIDIA GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia_peermem: Option<bool>,
    /// What each of this rank's ports is plugged into (LLDP or SMPs); empty when not
    /// discovered (older documents, or discovery not asked for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neighbors: Vec<crate::discovery::Neighbor>,
    /// The lossless-configuration audit of this rank's node (PFC, ECN, DSCP, FEC, optics,
    /// host settings; see `results::audit`); absent in older documents or when opted out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<crate::audit::NodeAudit>,
    /// Where this rank's measuring thread ran (CPUs, NUMA node) and why; absent in older
    /// documents and in tools that do not place their thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// The CPUs a rank's measuring thread was allowed and who chose them. perftest 26.04 binds
/// to the NIC's NUMA node unless the launcher already restricted the process's affinity;
/// the suite does the same, and `--cpu` chooses by hand. Buffers are touched first by that
/// thread, so the kernel's first-touch policy puts their pages on its node.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Placement {
    /// The CPUs, as a kernel cpulist (`0-15,32-47`).
    pub cpus: String,
    /// The NUMA node holding all of them, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// The NIC's NUMA node, when sysfs says (`None`: virtual interfaces, single-node
    /// hosts whose firmware reports -1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_node: Option<u32>,
    /// `cpu-option` (`--cpu`), `nic-node` (bound to the NIC's node), `launcher` (the
    /// launcher or `taskset` had restricted the affinity: left as it was), or `unbound`
    /// (left on every CPU; `note` says why).
    pub source: String,
    /// Why the thread was not bound, or what else a reader should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A kernel network interface (`/sys/class/net`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NetDevice {
    pub name: String,
    pub mtu: Option<u32>,
    /// Link speed from sysfs; `None` where the driver does not say (loopback, virtio).
    pub speed_mbit_s: Option<u64>,
    pub operstate: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// An RDMA device (`/sys/class/infiniband`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RdmaDevice {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fw_ver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_guid: Option<String>,
    pub ports: Vec<RdmaPort>,
    /// The adapter's PCIe link (`/sys/class/infiniband/DEV/device`): a NIC that trained at
    /// x8 or at a lower generation halves its bandwidth without any error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<PciLink>,
    /// NUMA node the adapter hangs off (-1: not reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<i32>,
}

/// PCIe link of a device as sysfs reports it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PciLink {
    /// Bus address, `0000:3b:00.0`.
    pub address: String,
    /// `16.0 GT/s PCIe` as the kernel prints it, and the number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_speed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_speed_gt_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_speed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_speed_gt_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_width: Option<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RdmaPort {
    pub port: u32,
    /// e.g. `4: ACTIVE`.
    pub state: String,
    /// e.g. `100 Gb/sec (4X EDR)`.
    pub rate: String,
    /// Parsed from `rate`, 10^9 bit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_gbit_s: Option<f64>,
    /// `Ethernet` (RoCE) or `InfiniBand`.
    pub link_layer: String,
    /// Kernel netdev behind a RoCE port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
    /// e.g. `5: LinkUp`; `3: Disabled` or `2: Polling` for a dark or dirty link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phys_state: Option<String>,
    /// Lanes and lane speed from `rate`: `4X` and `EDR` (InfiniBand names; RoCE ports give
    /// the Ethernet equivalents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<String>,
    /// Active MTU of the port in bytes, from verbs (`ibv_query_port`), where it was opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_mtu: Option<u32>,
    /// MTU and speed of the netdev behind a RoCE port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev_mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev_speed_mbit_s: Option<u64>,
    /// Absolute values of `ports/N/counters/*` when the facts were read (the error
    /// counters among them betray optics and cables: `symbol_error`,
    /// `link_error_recovery`, `link_downed`, `port_rcv_errors`, `port_xmit_discards`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, i64>,
}

/// A GPU. `index` is the position in PCI bus order (nvidia-smi's numbering, and CUDA's
/// with `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// `GPU-xxxxxxxx-...` as nvidia-smi prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// NUMA node of the GPU's PCI device (`None` where the kernel does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// The RDMA device nearest to this GPU on the PCI tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nearest_rdma_device: Option<String>,
    /// How the GPU reaches that device, in nvidia-smi's terms (`PIX`, `PXB`, `PHB`,
    /// `NODE`, `SYS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_relation: Option<String>,
}

/// One end of a measured pair.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Peer {
    /// MPI rank; absent in standalone runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    pub host: String,
    /// RDMA device and port of this end (verbs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
}

/// The two ends a point-to-point result measured. The initiator is perftest's client:
/// it sends the pings, issues the writes and reads, and owns the clock.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pair {
    pub initiator: Peer,
    pub responder: Peer,
    /// Round of the sweep this pair was measured in (absent for a standalone pair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
}

impl Pair {
    /// `host-a:0 <-> host-b:1`, for tables and messages.
    pub fn label(&self) -> String {
        let side = |p: &Peer| match p.rank {
            Some(r) => format!("{}:{r}", p.host),
            None => p.host.clone(),
        };
        format!("{} <-> {}", side(&self.initiator), side(&self.responder))
    }
}

/// One row of a result table. The `kind` tag says which.
///
/// Read by [`row`]: fabcheck writes `kind` first, and a row whose first key is `kind` is
/// read straight into its variant; serde's own internally tagged reading buffers every
/// row (its histogram's base64 text included) before it knows the variant, which was a
/// sixth of the time `aggregate` spent parsing a 1024-rank result set.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TestResult {
    Latency(LatencyResult),
    Bandwidth(BandwidthResult),
    Collective(CollectiveResult),
}

impl TestResult {
    /// What a row without a `kind` is told.
    pub const MISSING_KIND: &'static str = "missing result kind";

    /// What a row of a `kind` this schema does not know is told.
    pub fn unknown_kind(other: &str) -> String {
        format!("unknown result kind `{other}` (known: latency, bandwidth, collective)")
    }
}

impl<'de> Deserialize<'de> for TestResult {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(row::RowVisitor)
    }
}

/// Reading a [`TestResult`]: the variant from its `kind`, wherever it stands in the row.
mod row {
    use std::fmt;

    use serde::de::{self, value::MapAccessDeserializer, Deserialize, MapAccess, Visitor};
    use serde_json::{Map, Value};

    use super::{BandwidthResult, CollectiveResult, LatencyResult, TestResult};

    /// The variant a `kind` names; the messages are the ones `aggregate` shows.
    enum Kind {
        Latency,
        Bandwidth,
        Collective,
    }

    impl Kind {
        fn of<E: de::Error>(name: &str) -> Result<Kind, E> {
            match name {
                "latency" => Ok(Kind::Latency),
                "bandwidth" => Ok(Kind::Bandwidth),
                "collective" => Ok(Kind::Collective),
                other => Err(E::custom(TestResult::unknown_kind(other))),
            }
        }

        fn read<'de, D: de::Deserializer<'de>>(self, d: D) -> Result<TestResult, D::Error> {
            Ok(match self {
                Kind::Latency => TestResult::Latency(LatencyResult::deserialize(d)?),
                Kind::Bandwidth => TestResult::Bandwidth(BandwidthResult::deserialize(d)?),
                Kind::Collective => TestResult::Collective(CollectiveResult::deserialize(d)?),
            })
        }
    }

    pub(super) struct RowVisitor;

    impl<'de> Visitor<'de> for RowVisitor {
        type Value = TestResult;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a result row (an object with a `kind`)")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TestResult, A::Error> {
            let Some(first) = map.next_key::<String>()? else {
                return Err(de::Error::custom(TestResult::MISSING_KIND));
            };
            if first == "kind" {
                // fabcheck's own rows: the rest of the row is the variant's fields.
                let name: String = map.next_value()?;
                return Kind::of(&name)?.read(MapAccessDeserializer::new(map));
            }
            // Written otherwise: the row is buffered, then read as its variant.
            let mut row = Map::new();
            row.insert(first, map.next_value::<Value>()?);
            while let Some((k, v)) = map.next_entry::<String, Value>()? {
                row.insert(k, v);
            }
            let kind = match row.remove("kind") {
                Some(Value::String(name)) => Kind::of(&name)?,
                Some(other) => {
                    return Err(de::Error::custom(format!(
                        "result kind is {other}, not a string"
                    )))
                }
                None => return Err(de::Error::custom(TestResult::MISSING_KIND)),
            };
            kind.read(Value::Object(row)).map_err(de::Error::custom)
        }
    }
}

impl TestResult {
    /// Test name: `send_lat`, `write_bw`, `all_reduce`, ...
    pub fn test(&self) -> &str {
        match self {
            TestResult::Latency(r) => &r.test,
            TestResult::Bandwidth(r) => &r.test,
            TestResult::Collective(r) => &r.collective,
        }
    }

    pub fn size_bytes(&self) -> u64 {
        match self {
            TestResult::Latency(r) => r.size_bytes,
            TestResult::Bandwidth(r) => r.size_bytes,
            TestResult::Collective(r) => r.size_bytes,
        }
    }
}

/// Ping-pong latency for one message size on one pair.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LatencyResult {
    /// `send_lat`, `write_lat`, `read_lat`.
    pub test: String,
    /// `tcp` or `verbs`.
    pub transport: String,
    pub size_bytes: u64,
    /// Timed iterations (warm-up excluded).
    pub iterations: u64,
    pub warmup_iterations: u64,
    /// Wall time of the timed loop.
    pub duration_s: f64,
    /// One-way latency (round trip / 2, as perftest reports; `read_lat` is the full read
    /// round trip, as `ib_read_lat` reports it).
    pub latency_us: LatencySummary,
    /// The same samples as perftest's `ib_*_lat` reports them (the two largest dropped
    /// before the average, median, deviation and percentiles), which is what bench-lat's
    /// table prints; absent in older documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perftest_us: Option<PerftestLatency>,
    /// Base64 HDR V2+deflate histogram of the same samples, in nanoseconds.
    pub histogram: String,
    pub pair: Pair,
    /// False when the loop was cut short; the figures cover the iterations done.
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<CounterDeltas>,
    /// Where each side's buffers lived (GPU or host) and how they were registered; absent
    /// when both sides used plain host memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryUse>,
    /// How the pair's endpoints were made ready for this size; absent in documents written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<Setup>,
}

/// Streaming bandwidth and message rate for one message size on one pair.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BandwidthResult {
    /// `send_bw`, `write_bw`, `read_bw`.
    pub test: String,
    pub transport: String,
    pub size_bytes: u64,
    /// Messages completed by the timed loop, all streams and directions together.
    pub iterations: u64,
    pub duration_s: f64,
    /// Both directions at once; figures are the sum of both, as perftest `-b` reports.
    pub bidirectional: bool,
    /// Parallel streams (TCP connections or queue pairs).
    pub streams: u32,
    /// Messages in flight per stream.
    pub tx_depth: u32,
    /// Verbs: one request in this many asked for a completion, as in force for this size
    /// (`-Q`, or perftest's default for the size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cq_mod: Option<u64>,
    /// Verbs: requests chained per `ibv_post_send` (`-l`; 1: one at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_list: Option<u32>,
    pub bw_gbit_s: BandwidthSummary,
    pub msg_rate_mpps: f64,
    /// Length of one interval sample.
    pub interval_s: f64,
    /// Throughput of each interval of the run, in order, so stability can be judged.
    pub interval_gbit_s: Vec<f64>,
    pub cpu: CpuUse,
    pub pair: Pair,
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<CounterDeltas>,
    /// `--check` (RDMA write/read): bytes that differed from the pattern at the end, summed
    /// over both sides; absent when the run did not check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_wrong_bytes: Option<u64>,
    /// Where each side's buffers lived (GPU or host) and how they were registered; absent
    /// when both sides used plain host memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryUse>,
    /// How the pair's endpoints were made ready for this size; absent in documents written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<Setup>,
    /// A bidirectional run measured both directions at once and counted each on its own:
    /// one entry per direction (data from `from` to `to`), so a matrix can keep what a node
    /// sends apart from what it receives. Empty for one-way runs, where the data direction
    /// follows the test (send/write: initiator to responder; read: responder to initiator).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directions: Vec<DirectionFigures>,
    /// Per-flow figures when the pair ran several streams with distinct, recorded flow
    /// identities (verbs: QP number and GRH flow label; TCP: source port): on RoCE each
    /// flow may hash onto a different ECMP path, so some slow flows mean a bad path, every
    /// flow slow a bad end. Empty when not recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowFigures>,
}

/// One direction of a bidirectional pair, measured at the same time as the other.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DirectionFigures {
    /// The end that sent this direction's data.
    pub from: Peer,
    /// The end that received it.
    pub to: Peer,
    pub bw_gbit_s: BandwidthSummary,
    pub msg_rate_mpps: f64,
}

/// One stream of a multi-stream pair, with what decides its path through the fabric.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FlowFigures {
    /// Stream index within the pair (0-based).
    pub index: u32,
    /// RoCE: the GRH flow label that went into the UDP source-port hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_label: Option<u32>,
    /// Verbs: the initiator's QP number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp_num: Option<u32>,
    /// TCP: the source port of the data connection (what an L4 ECMP hash sees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_port: Option<u16>,
    /// The data direction of this flow, when the pair ran both ways.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Peer>,
    pub bw_gbit_s: f64,
}

/// How a pair's endpoints were made ready for one size, outside the timed loop.
///
/// A pair connects once per round and keeps the connection for all its sizes where the
/// transport allows (verbs: the device, the registered memory and the connected queue
/// pairs); TCP opens its data connections for each size, because a stream ends with its
/// connection (the receiver reads to end of file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// True: connected for this size (verbs: device opened, memory registered, queue pairs
    /// created and connected; TCP: data connections opened). False: the connection of the
    /// pair's earlier size, re-armed (queues settled, views moved, both sides met).
    pub connected: bool,
    /// Seconds the initiator spent on it, control messages included.
    pub seconds: f64,
}

/// `verbs`, or `verbs+cuda` / `verbs+mixed` / `tcp+cuda` for rows whose buffers were not
/// host memory on both sides: how merged tables keep GPU and host figures apart. GPU copy
/// rows (`transport` = `cuda`) keep their transport.
pub fn transport_label(transport: &str, memory: Option<&MemoryUse>) -> String {
    match memory.map(MemoryUse::class) {
        Some(class) if class != "host" && transport != "cuda" => format!("{transport}+{class}"),
        _ => transport.to_string(),
    }
}

/// The inverse of [`transport_label`]: `(transport, memory class)`.
pub fn split_transport_label(label: &str) -> (&str, &str) {
    label.split_once('+').unwrap_or((label, "host"))
}

impl LatencyResult {
    /// `host`, `cuda` or `mixed` (see [`MemoryUse::class`]).
    pub fn memory_class(&self) -> &'static str {
        self.memory.as_ref().map_or("host", MemoryUse::class)
    }
}

impl BandwidthResult {
    /// `host`, `cuda` or `mixed` (see [`MemoryUse::class`]).
    pub fn memory_class(&self) -> &'static str {
        self.memory.as_ref().map_or("host", MemoryUse::class)
    }
}

/// The buffers of both sides of a point-to-point result (for a GPU copy baseline: the
/// source as `initiator`, the destination as `responder`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MemoryUse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiator: Option<MemorySide>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responder: Option<MemorySide>,
}

impl MemoryUse {
    /// `host` when both sides used host memory, `cuda` when both used GPU memory,
    /// `mixed` otherwise. A side that did not report counts as host memory.
    pub fn class(&self) -> &'static str {
        let gpu = |s: &Option<MemorySide>| s.as_ref().is_some_and(|m| m.kind == "cuda");
        match (gpu(&self.initiator), gpu(&self.responder)) {
            (true, true) => "cuda",
            (false, false) => "host",
            _ => "mixed",
        }
    }
}

/// One side's buffers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MemorySide {
    /// `host` or `cuda` (device memory from cuMemAlloc; never managed memory).
    pub kind: String,
    /// How the NIC reaches the buffer: `host` (ibv_reg_mr on host memory), `host_dmabuf`
    /// (host memory exported as a dma-buf, ibv_reg_dmabuf_mr), `dmabuf` (GPU memory
    /// exported with cuMemGetHandleForAddressRange, ibv_reg_dmabuf_mr), `peermem`
    /// (ibv_reg_mr on the GPU pointer, through nvidia_peermem), `staged` (TCP: copied
    /// through pinned host memory), `copy` (GPU copy baselines).
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuInfo>,
    /// The RDMA device the buffers were registered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_pci_bus_id: Option<String>,
    /// GPU-NIC relation in nvidia-smi's terms: `PIX` (same PCIe switch), `PXB` (several
    /// switches, no host bridge), `PHB` (through a host bridge), `NODE` (across host
    /// bridges of one NUMA node), `SYS` (across sockets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<String>,
    /// What a reader should know: the GPU and the NIC on different sockets, ACS
    /// redirecting peer-to-peer traffic, a registration path that failed before the one used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct BandwidthSummary {
    /// Bytes over the whole timed loop.
    pub avg: f64,
    /// Best interval.
    pub peak: f64,
    /// perftest's BW peak: message size over the least time per message of any run of
    /// consecutive messages, from a post to a completion after it (`results::peak`).
    /// Measured where perftest measures it (verbs, iteration mode, at most 20000
    /// iterations, not `-N`); absent elsewhere and in documents written before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perftest_peak: Option<f64>,
}

/// Cores busy on each side: (user + sys CPU seconds) / wall seconds over the timed loop.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuUse {
    pub initiator_cores: f64,
    pub responder_cores: f64,
}

/// Device counter deltas over one test, per side, names exactly as the kernel gives them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CounterDeltas {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiator: Option<PortCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responder: Option<PortCounters>,
}

/// Deltas of `/sys/class/infiniband/DEV/ports/PORT/{counters,hw_counters}/*`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PortCounters {
    pub device: String,
    pub port: u32,
    #[serde(default)]
    pub counters: BTreeMap<String, i64>,
    #[serde(default)]
    pub hw_counters: BTreeMap<String, i64>,
    /// The Ethernet driver's counters of the port's netdev (`ethtool -S`, RoCE): per-priority
    /// pause frames and duration, discards, ECN marks, CNPs, FEC corrections, by the
    /// driver's names; empty on InfiniBand, where the port has no netdev, or without ethtool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub driver_counters: BTreeMap<String, i64>,
    /// The netdev those driver counters are of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
    /// The port's rate at the end of the window (`ports/N/rate`), so error counts become
    /// rates (pre-FEC BER = corrected bits over the bits the link carried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_gbit_s: Option<f64>,
    /// Counters (by name, in whichever map) whose delta is only a lower bound: an
    /// InfiniBand PortCounters error field that reached its ceiling (they stop there
    /// instead of wrapping: `symbol_error` 16 bits, `link_downed` 8, `local_link_integrity_errors`
    /// 4, ...), or a counter that went down in the window (cleared by `perfquery -R`, a
    /// subnet manager's PerfMgr or a driver reload: the delta is what it counted since).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub at_least: BTreeSet<String>,
    /// Why `driver_counters` is empty where the port has a netdev (ethtool missing, the
    /// driver keeps no statistics, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_counters_unknown: Option<String>,
}

/// One size of one collective (a row of the nccl-tests table).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CollectiveResult {
    /// `all_reduce`, `all_gather`, `reduce_scatter`, `alltoall`, `broadcast`, `reduce`.
    pub collective: String,
    /// `mpi` or `nccl`.
    pub backend: String,
    /// Ranks in the communicator that ran it (the job, or one sub-communicator of a
    /// `--scaling` sweep).
    pub ranks: u32,
    /// Hosts those ranks run on (absent in documents written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// Bytes per rank as nccl-tests' `size` column.
    pub size_bytes: u64,
    /// Elements per rank.
    pub count: u64,
    pub datatype: String,
    /// Reduction (`sum`, ...), `none` for data movement.
    pub op: String,
    /// Root rank, or -1 where the collective has none.
    pub root: i32,
    pub iterations: u64,
    pub warmup_iterations: u64,
    /// nccl-tests bus-bandwidth factor used (2(n-1)/n for AllReduce ...).
    pub busbw_factor: f64,
    /// Reference link rate used for `efficiency`, 10^9 bit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_gbit_s: Option<f64>,
    pub out_of_place: CollectiveTiming,
    pub in_place: CollectiveTiming,
    pub complete: bool,
    /// Expert-parallel rows (`ep_dispatch`, `ep_combine`) only: routing, byte counts and
    /// step times (absent on every other row, and in older documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep: Option<crate::collective::EpFigures>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CollectiveTiming {
    /// nccl-tests' time: each rank's loop time / iterations, combined across ranks as
    /// `-a/--average` says (mean by default; see `rank_time_us`).
    pub time_us: f64,
    pub algbw_gbyte_s: f64,
    pub busbw_gbyte_s: f64,
    /// busbw / link rate (both in bytes/s), when a link rate is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<f64>,
    /// Wrong elements found by `--check` (0 when not checked; see `checked`).
    pub wrong: u64,
    pub checked: bool,
    /// Why the mode was timed but not checked although `--check` asked for it: the
    /// library leaves the result undefined (NCCL's in-place AllToAll and SendRecv send
    /// and receive through the same bytes at once; nccl-tests times them and never
    /// checks them). Absent when checked, or when no check was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchecked_reason: Option<String>,
    /// The per-iteration view: percentiles of the slowest rank's time for each iteration.
    pub latency_us: LatencySummary,
    /// Per-iteration times (slowest rank), base64 HDR V2+deflate, nanoseconds.
    pub histogram: String,
    /// Rank (of the job) with the largest loop time.
    pub slowest_rank: u32,
    /// Each rank's loop time / iterations combined the four ways `-a` can (absent in
    /// documents written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_time_us: Option<RankTimes>,
}

/// One figure per rank (loop time / iterations, microseconds) reduced across ranks the
/// ways nccl-tests' `-a, --average` offers: rank 0's own (0), the mean (1), the minimum
/// (2), the maximum (3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RankTimes {
    pub rank0: f64,
    pub avg: f64,
    pub min: f64,
    pub max: f64,
}

/// Errors reading a document.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("schema_version {found} is not supported (this build reads version {SCHEMA_VERSION}); use the fabcheck release that wrote it")]
    Version { found: u64 },
    #[error("no schema_version field: not a fabcheck result document")]
    NoVersion,
}

impl Document {
    /// Parses and version-checks a document. Errors carry serde's line/column and path.
    pub fn from_json(text: &str) -> Result<Self, DocumentError> {
        let value: Value = serde_json::from_str(text)?;
        match value.get("schema_version").and_then(Value::as_u64) {
            None => return Err(DocumentError::NoVersion),
            Some(v) if v != u64::from(SCHEMA_VERSION) => {
                return Err(DocumentError::Version { found: v })
            }
            Some(_) => {}
        }
        Ok(serde_json::from_value(value)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Document {
        Document {
            schema_version: SCHEMA_VERSION,
            tool: "bench-lat".into(),
            tool_version: "0.1.0".into(),
            git_commit: "abc".into(),
            command_line: vec!["bench-lat".into()],
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:00:01Z".into(),
            complete: true,
            incomplete_reason: None,
            launcher: "standalone".into(),
            ranks: 2,
            loop_overhead_ns: Some(20.0),
            clock: Some("tsc".into()),
            hosts: vec![HostInfo::default()],
            options: Map::new(),
            sweep: None,
            failed_pairs: vec![],
            fabric: None,
            congestion: None,
            reach: None,
            results: vec![TestResult::Latency(LatencyResult {
                test: "send_lat".into(),
                transport: "tcp".into(),
                size_bytes: 2,
                iterations: 1000,
                warmup_iterations: 100,
                duration_s: 0.1,
                latency_us: LatencySummary::default(),
                perftest_us: None,
                histogram: crate::LatencyHistogram::new().encode(),
                pair: Pair::default(),
                complete: true,
                counters: None,
                memory: None,
                setup: None,
            })],
            warnings: vec![],
            quality: None,
        }
    }

    #[test]
    fn kind_tag_and_unit_keys_are_in_the_json() {
        let text = serde_json::to_string(&sample()).unwrap();
        assert!(text.contains(r#""kind":"latency""#));
        assert!(text.contains(r#""size_bytes":2"#));
        assert!(text.contains(r#""latency_us":{"#));
        let back = Document::from_json(&text).unwrap();
        assert_eq!(back.results[0].test(), "send_lat");
    }

    #[test]
    fn a_row_reads_alike_with_its_kind_first_last_or_absent() {
        let text = serde_json::to_string(&sample().results[0]).unwrap();
        let row: Value = serde_json::from_str(&text).unwrap();
        assert!(row.is_object());
        assert!(text.starts_with(r#"{"kind":"latency""#), "{text}");
        let first: TestResult = serde_json::from_str(&text).unwrap();
        // The same row with `kind` elsewhere (a Value's keys are sorted): buffered, then
        // read as its variant.
        let mut obj = row.as_object().unwrap().clone();
        let kind = obj.remove("kind").unwrap();
        obj.insert("kind".into(), kind);
        let last_text = Value::Object(obj.clone()).to_string();
        assert!(!last_text.starts_with(r#"{"kind""#));
        let last: TestResult = serde_json::from_str(&last_text).unwrap();
        assert_eq!(
            serde_json::to_value(&first).unwrap(),
            serde_json::to_value(&last).unwrap()
        );
        // Both ways, a bad field of the variant is refused.
        let bad = text.replace(r#""size_bytes":2"#, r#""size_bytes":"two""#);
        assert_ne!(bad, text);
        let e = serde_json::from_str::<TestResult>(&bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid type"), "{e}");
        let mut bad = obj.clone();
        bad.insert("size_bytes".into(), "two".into());
        let e = serde_json::from_value::<TestResult>(Value::Object(bad)).unwrap_err();
        assert!(e.to_string().contains("invalid type"), "{e}");
        for (text, want) in [
            (r#"{"kind":"lat"}"#, "unknown result kind `lat`"),
            (r#"{"test":"x","kind":"lat"}"#, "unknown result kind `lat`"),
            (r#"{"test":"x"}"#, "missing result kind"),
            (r#"{}"#, "missing result kind"),
            (r#"{"test":"x","kind":3}"#, "result kind is 3, not a string"),
            (r#"[1]"#, "expected a result row"),
        ] {
            let e = serde_json::from_str::<TestResult>(text)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn memory_records_classify_rows_and_old_documents_read_as_host() {
        let gpu = |path: &str| MemorySide {
            kind: "cuda".into(),
            path: path.into(),
            ..Default::default()
        };
        let host = MemorySide {
            kind: "host".into(),
            path: "host".into(),
            ..Default::default()
        };
        let both = MemoryUse {
            initiator: Some(gpu("dmabuf")),
            responder: Some(gpu("peermem")),
        };
        let one = MemoryUse {
            initiator: Some(gpu("dmabuf")),
            responder: Some(host.clone()),
        };
        assert_eq!(both.class(), "cuda");
        assert_eq!(one.class(), "mixed");
        assert_eq!(MemoryUse::default().class(), "host");
        assert_eq!(transport_label("verbs", Some(&both)), "verbs+cuda");
        assert_eq!(transport_label("tcp", Some(&one)), "tcp+mixed");
        assert_eq!(transport_label("verbs", None), "verbs");
        assert_eq!(
            transport_label("cuda", Some(&one)),
            "cuda",
            "copy rows keep theirs"
        );
        assert_eq!(split_transport_label("verbs+cuda"), ("verbs", "cuda"));
        assert_eq!(split_transport_label("tcp"), ("tcp", "host"));
        // A document written before the field existed has no `memory`: host memory.
        let text = serde_json::to_string(&sample()).unwrap();
        assert!(
            !text.contains("memory"),
            "host-memory rows stay as they were"
        );
        let back = Document::from_json(&text).unwrap();
        match &back.results[0] {
            TestResult::Latency(l) => assert_eq!(l.memory_class(), "host"),
            _ => unreachable!(),
        }
        // And a GPU row round-trips.
        let mut d = sample();
        if let TestResult::Latency(l) = &mut d.results[0] {
            l.memory = Some(both.clone());
        }
        let back = Document::from_json(&serde_json::to_string(&d).unwrap()).unwrap();
        match &back.results[0] {
            TestResult::Latency(l) => {
                assert_eq!(l.memory.as_ref(), Some(&both));
                assert_eq!(l.memory_class(), "cuda");
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn foreign_versions_and_shapes_are_refused() {
        let mut v = serde_json::to_value(sample()).unwrap();
        v["schema_version"] = 99.into();
        assert!(matches!(
            Document::from_json(&v.to_string()),
            Err(DocumentError::Version { found: 99 })
        ));
        assert!(matches!(
            Document::from_json("{}"),
            Err(DocumentError::NoVersion)
        ));
        assert!(Document::from_json("{\"schema_version\":1}").is_err());
        let text = serde_json::to_string(&sample()).unwrap();
        assert!(Document::from_json(&text[..text.len() / 2]).is_err());
    }
}
