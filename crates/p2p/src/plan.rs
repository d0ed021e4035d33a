//! The plan of a point-to-point run: everything that shapes the numbers ([`Plan`], which
//! travels to the peers and the agents), and where the peers are and how to pair them
//! ([`Launch`]).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Map, Value};

use base::launcher::Launcher;
use transport::{Op, TransportKind};

use crate::pattern::{PatternSpec, RailMode};

/// Everything that shapes the numbers of a point-to-point run. It travels from the agents'
/// coordinator to the agents; each agent's own tool name stands in for `tool`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    /// `bench-lat` or `bench-bw`.
    #[serde(skip)]
    pub tool: &'static str,
    /// `send_lat`, `write_bw`, ...
    pub test: String,
    /// The verbs operation (send, RDMA write, RDMA read) or its TCP counterpart.
    pub op: Op,
    /// TCP or verbs.
    pub transport: TransportKind,
    /// Message sizes, in order, bytes.
    pub sizes: Vec<u64>,
    /// Timed iterations per size, per stream (`-n`, as perftest counts it per QP).
    pub iterations: u64,
    /// Seconds per size instead of `-n` (`-D`).
    pub duration_s: Option<f64>,
    /// Untimed iterations before each size (`--warmup`).
    pub warmup: u64,
    /// Parallel streams (queue pairs or connections) per pair (`-q`).
    pub streams: u32,
    /// Messages in flight per stream (`-t`).
    pub tx_depth: u32,
    /// Both directions at once (`-b`).
    pub bidirectional: bool,
    /// Longest wait for the peer.
    #[serde(with = "secs")]
    pub timeout: Duration,
    /// Verbs settings (device, port, GID, MTU, inline, events, check).
    pub verbs: transport::VerbsOptions,
    /// Tool-specific options both sides must agree on (recorded in the document too).
    pub extra: Map<String, Value>,
    /// Tool-specific options only the initiator uses (recorded, not compared).
    pub local: Map<String, Value>,
}

impl Plan {
    /// Timed messages of a size over all streams: `-n` per stream (QP or connection), as
    /// perftest posts `-n` on each QP.
    pub fn messages(&self) -> u64 {
        self.iterations
            .saturating_mul(u64::from(self.streams.max(1)))
    }

    /// Options the two sides of a standalone pair must agree on.
    pub(crate) fn must_match(&self) -> Value {
        let mut m = json!({
            "test": self.test,
            "transport": self.transport.name(),
            "sizes": self.sizes,
            "streams": self.streams,
            "tx_depth": self.tx_depth,
            "bidirectional": self.bidirectional,
        });
        if let Value::Object(o) = &mut m {
            if self.transport == TransportKind::Verbs {
                // The two ends must use the same connection method and agree on checking;
                // device, port, GID, inline and events are each side's own business.
                o.insert("rdma_cm".into(), json!(self.verbs.rdma_cm));
                o.insert("check".into(), json!(self.verbs.check));
            }
            o.extend(self.extra.clone());
        }
        m
    }

    /// Options the server takes from the client (like perftest, the client decides how long).
    pub(crate) fn adoptable(&self) -> Value {
        json!({"iterations": self.iterations, "duration_s": self.duration_s, "warmup": self.warmup})
    }

    pub(crate) fn adopt(&mut self, v: &Value) {
        if let Some(n) = v["iterations"].as_u64() {
            self.iterations = n;
        }
        self.duration_s = v["duration_s"].as_f64();
        if let Some(n) = v["warmup"].as_u64() {
            self.warmup = n;
        }
    }

    /// Every option that shapes the numbers, for the document's `options`.
    pub fn options(&self) -> Map<String, Value> {
        let mut m = match self.must_match() {
            Value::Object(o) => o,
            _ => Map::new(),
        };
        m.insert("iterations".into(), json!(self.iterations));
        m.insert("duration_s".into(), json!(self.duration_s));
        m.insert("warmup".into(), json!(self.warmup));
        m.insert("timeout_s".into(), json!(self.timeout.as_secs_f64()));
        m.extend(self.local.clone());
        if self.transport == TransportKind::Verbs {
            let v = &self.verbs;
            m.insert("ib_dev".into(), json!(v.device));
            m.insert("ib_port".into(), json!(v.port));
            m.insert("gid_index".into(), json!(v.gid_index));
            m.insert("mtu".into(), json!(v.mtu));
            m.insert("inline_size".into(), json!(v.inline_size));
            m.insert("events".into(), json!(v.events));
            m.insert(
                "pcie_relaxed_ordering".into(),
                json!(!v.disable_pcie_relaxed),
            );
            m.insert("tclass".into(), json!(v.tclass));
            m.insert("sl".into(), json!(v.sl));
            if self.tool == "bench-bw" {
                // As asked (null: perftest's choice per size); each result row has the one
                // in force for its size.
                m.insert("cq_mod".into(), json!(v.cq_mod));
                m.insert("post_list".into(), json!(v.post_list.unwrap_or(1)));
            }
        }
        m
    }

    /// Longest a round can legitimately take, for the ranks that wait for it: a failing
    /// pair can spend up to a timeout in each of its waits that come one after another
    /// (its control connection, and per size the endpoint exchange, the data connections
    /// or queue pairs, the loop), plus its measuring time. A hung rank is caught after
    /// this; a dead one usually ends the MPI job at once.
    pub fn round_limit(&self) -> Duration {
        let sizes = self.sizes.len() as u32;
        let measuring = self.duration_s.map_or(0.0, |d| d * f64::from(sizes));
        self.timeout * (3 + 3 * sizes) + Duration::from_secs_f64(measuring)
    }
}

/// A duration as seconds in JSON.
mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }
}

/// `-d`: which RDMA device each rank uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The first device with an ACTIVE port.
    #[default]
    Default,
    /// That device for every rank (`-d mlx5_0`).
    One(String),
    /// One per local rank (`-d mlx5_0,mlx5_1,...`), indexed by the rank's place on its host.
    PerLocalRank(Vec<String>),
    /// The device at the local rank's place among the host's devices, in natural name
    /// order (`-d auto`): its rail, whatever its port's state.
    Auto,
}

impl DeviceChoice {
    /// The choice as `-d` takes it (`mlx5_0`, `mlx5_0,mlx5_1`, `auto`; empty by default).
    pub fn describe(&self) -> String {
        match self {
            DeviceChoice::Default => String::new(),
            DeviceChoice::One(d) => d.clone(),
            DeviceChoice::PerLocalRank(l) => l.join(","),
            DeviceChoice::Auto => "auto".into(),
        }
    }
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("an empty device name: give -d mlx5_0, -d mlx5_0,mlx5_1 or -d auto".into());
        }
        if s == "auto" {
            return Ok(DeviceChoice::Auto);
        }
        let mut list: Vec<String> = s.split(',').map(|d| d.trim().to_string()).collect();
        if list.iter().any(|d| d.is_empty()) {
            return Err(format!("-d {s}: an empty name in the device list"));
        }
        Ok(if list.len() == 1 {
            DeviceChoice::One(list.remove(0))
        } else {
            DeviceChoice::PerLocalRank(list)
        })
    }
}

/// Where the peers are and how to pair them: the options that do not shape the numbers.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Server to connect to (standalone client); `None`: be the server.
    pub host: Option<String>,
    /// Standalone handshake port.
    pub port: u16,
    /// Address for control and data connections (and their source).
    pub bind_addr: Option<IpAddr>,
    /// Where the document goes.
    pub json: Option<PathBuf>,
    /// How the ranks were started: standalone, MPI, agents.
    pub launcher: Launcher,
    /// Who meets whom.
    pub pattern: PatternSpec,
    /// Each rank counted as a node (one machine, for testing).
    pub include_local: bool,
    /// Rail-aligned pairs or every rail with every rail.
    pub rail_mode: RailMode,
    /// Which RDMA device each rank measures with (`-d`).
    pub devices: DeviceChoice,
    /// Be an agent: serve sweeps run by a coordinator (`--serve`).
    pub serve: bool,
    /// Be the agents' coordinator over the agents listed here (`--hosts`).
    pub hosts: Option<PathBuf>,
    /// The agents' shared secret (else `FABCHECK_SECRET`).
    pub secret_file: Option<PathBuf>,
    /// As an agent, answer Prometheus scrapes (`GET /metrics`) here (`--metrics`).
    pub metrics: Option<std::net::SocketAddr>,
    /// As an agent, the address its control port listens on (`--control-addr`); `None`:
    /// `bind_addr`, else every address. The data stays on `bind_addr`.
    pub control_addr: Option<IpAddr>,
    /// `--transport` as asked (the agents' coordinator checks it against the agents').
    pub transport: transport::TransportChoice,
    /// The fabric plan to order and label the rounds by (`--plan`), read by the root.
    pub fabric_plan: Option<PathBuf>,
    /// The CPUs to run the measuring thread on (`--cpu`); `None`: the NIC's NUMA node
    /// unless the launcher restricted the affinity (`placement`).
    pub cpu: Option<Vec<u32>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(transport: TransportKind) -> Plan {
        Plan {
            tool: "bench-lat",
            test: "send_lat".into(),
            op: Op::Send,
            transport,
            sizes: vec![2, 4],
            iterations: 1000,
            duration_s: Some(0.5),
            warmup: 100,
            streams: 1,
            tx_depth: 1,
            bidirectional: false,
            timeout: Duration::from_secs(10),
            verbs: Default::default(),
            extra: Default::default(),
            local: Default::default(),
        }
    }

    #[test]
    fn iterations_count_per_stream_as_perftest_counts_them_per_qp() {
        let mut p = plan(TransportKind::Verbs);
        p.iterations = 200;
        p.streams = 2;
        assert_eq!(p.messages(), 400);
        p.streams = 1;
        assert_eq!(p.messages(), 200);
    }

    #[test]
    fn the_plan_names_what_both_sides_must_share_and_what_the_server_adopts() {
        let mut server = plan(TransportKind::Verbs);
        let mut client = plan(TransportKind::Verbs);
        client.iterations = 7;
        client.duration_s = None;
        assert_eq!(
            server.must_match(),
            client.must_match(),
            "iterations are the client's call"
        );
        server.adopt(&client.adoptable());
        assert_eq!((server.iterations, server.duration_s), (7, None));
        let o = server.options();
        for k in [
            "test",
            "transport",
            "sizes",
            "iterations",
            "timeout_s",
            "ib_dev",
            "gid_index",
            "rdma_cm",
        ] {
            assert!(o.contains_key(k), "options.{k}");
        }
        assert!(!plan(TransportKind::Tcp).options().contains_key("ib_dev"));
        // Two sizes of 0.5 s: three timeouts for the connection, three per size.
        assert_eq!(
            plan(TransportKind::Tcp).round_limit(),
            Duration::from_secs(91)
        );
    }

    #[test]
    fn the_traffic_class_and_posting_options_are_recorded() {
        let mut p = plan(TransportKind::Verbs);
        p.verbs.tclass = 106;
        p.verbs.sl = 3;
        let o = p.options();
        assert_eq!(
            (o["tclass"].as_u64(), o["sl"].as_u64()),
            (Some(106), Some(3))
        );
        assert!(!o.contains_key("post_list"), "bench-lat posts no lists");
        p.tool = "bench-bw";
        p.verbs.post_list = Some(8);
        let o = p.options();
        assert_eq!(o["post_list"], 8);
        assert!(
            o["cq_mod"].is_null(),
            "-Q not given: perftest's choice per size"
        );
        assert!(!plan(TransportKind::Tcp).options().contains_key("tclass"));
    }

    #[test]
    fn device_choices_parse() {
        assert_eq!("auto".parse::<DeviceChoice>(), Ok(DeviceChoice::Auto));
        assert_eq!(
            "mlx5_0".parse::<DeviceChoice>(),
            Ok(DeviceChoice::One("mlx5_0".into()))
        );
        assert_eq!(
            "mlx5_0, mlx5_1".parse::<DeviceChoice>(),
            Ok(DeviceChoice::PerLocalRank(vec![
                "mlx5_0".into(),
                "mlx5_1".into()
            ]))
        );
        assert!("".parse::<DeviceChoice>().is_err());
        assert!("a,,b".parse::<DeviceChoice>().is_err());
    }

    #[test]
    fn the_plan_travels_to_agents_and_back() {
        let p = plan(TransportKind::Verbs);
        let back: Plan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back.timeout, p.timeout);
        assert_eq!(back.sizes, p.sizes);
        assert_eq!(back.tool, "", "each agent puts its own tool name");
    }
}
