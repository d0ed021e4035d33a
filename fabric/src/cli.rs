//! Command-line options shared by the point-to-point benchmarks, named as perftest names
//! them so existing habits and scripts carry over (`-d -i -x -s -a -n -D -m -I -e -R`,
//! no host = server). Options that belong to one tool live in that tool.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

use crate::bootstrap::Launcher;
use crate::p2p::pattern::{PatternSpec, RailMode};
use crate::p2p::{DeviceChoice, Launch};
use crate::transport::{Op, TransportChoice};

/// Default port of the standalone handshake. perftest uses 18515; ours differs so both
/// can run side by side on the same hosts.
pub const DEFAULT_PORT: u16 = 18555;

fn parse_size(s: &str) -> Result<u64, String> {
    let v = results::units::parse_size(s)?;
    if v == 0 {
        return Err("size must be at least 1 byte".into());
    }
    Ok(v)
}

fn parse_positive_secs(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err("must be a positive number of seconds".into());
    }
    Ok(v)
}

#[derive(Debug, Clone, Args)]
pub struct P2pArgs {
    /// Server to connect to (client mode). Without it this process is the server.
    /// Ignored under mpirun/srun, where --pattern pairs the ranks.
    pub host: Option<String>,

    /// Operation to measure: send (two-sided; the only one TCP has), write, read (RDMA).
    #[arg(long = "test", value_enum, default_value = "send")]
    pub op: Op,

    /// Transport: verbs when an RDMA device is present, tcp otherwise (auto).
    #[arg(long, value_enum, default_value = "auto")]
    pub transport: TransportChoice,

    /// How the processes were started: auto detects mpirun/srun from the environment.
    #[arg(long, value_enum, default_value = "auto")]
    pub launcher: Launcher,

    /// Message size (bytes; K, M, G suffixes). Default: 2 for latency, 64K for bandwidth.
    #[arg(short = 's', long = "size", value_parser = parse_size)]
    pub size: Option<u64>,

    /// Run all sizes from 2 B to 8 MiB in powers of two.
    #[arg(short = 'a', long = "all", conflicts_with = "size")]
    pub all: bool,

    /// Timed iterations per size (default: 1000 for latency, 5000 for bandwidth).
    #[arg(short = 'n', long = "iters", value_parser = clap::value_parser!(u64).range(1..))]
    pub iters: Option<u64>,

    /// Run each size for this many seconds instead of a fixed iteration count.
    #[arg(short = 'D', long = "duration", value_parser = parse_positive_secs, conflicts_with = "iters")]
    pub duration: Option<f64>,

    /// Untimed iterations before the timed loop (default: 100 for latency, 2 x tx depth for bandwidth).
    #[arg(long)]
    pub warmup: Option<u64>,

    /// TCP port of the standalone handshake.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,

    /// Local address to listen on and advertise for data connections (default: the address
    /// the peer reached us on; under MPI, loopback for same-host pairs, else the hostname's).
    #[arg(long)]
    pub bind_addr: Option<IpAddr>,

    /// Write the JSON result document here (atomically; checked before measuring).
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Longest wait for a peer anywhere, in seconds: a server for its client, a client for its
    /// server, either side for a reply, a completion or the next control message.
    #[arg(long, default_value_t = 60.0, value_parser = parse_positive_secs)]
    pub timeout: f64,

    /// RDMA device (verbs): a name (mlx5_0); under mpirun/srun a list indexed by each
    /// rank's local rank on its host (mlx5_0,mlx5_1,...), or `auto` (the local rank's
    /// ACTIVE device, in name order). Default: the first device with an ACTIVE port.
    #[arg(short = 'd', long = "ib-dev")]
    pub ib_dev: Option<DeviceChoice>,

    /// Which pairs to measure under mpirun/srun, in rounds of disjoint pairs: pairs
    /// (ranks (0,1), (2,3), ...), all-pairs (every node pair once), ring, random[:ROUNDS[:SEED]],
    /// or file:PATH (a list of `hostA hostB` lines, as `aggregate` writes for a retest).
    #[arg(long, default_value = "pairs", value_name = "PATTERN")]
    pub pattern: PatternSpec,

    /// Count every rank as a node of its own, so ranks of one host are paired too (to try
    /// a pattern on one machine).
    #[arg(long)]
    pub include_local: bool,

    /// Be an agent: listen on the control port (-p) and take part in the sweeps a
    /// coordinator (`--hosts`) runs, until killed. Needs the shared secret.
    #[arg(long, conflicts_with_all = ["host", "hosts", "json"])]
    pub serve: bool,

    /// Coordinate a sweep over the agents listed in FILE (`host[:port]` per line, port
    /// default -p), without MPI. Needs the shared secret.
    #[arg(long, value_name = "FILE", conflicts_with = "host")]
    pub hosts: Option<PathBuf>,

    /// File holding the agents' shared secret (else the FABCHECK_SECRET environment
    /// variable). Never give the secret itself on the command line.
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,

    /// With several ranks per node (one per NIC): aligned pairs local rank r with local
    /// rank r on the other node (rail-optimised wiring); all crosses every rail with every rail.
    #[arg(long, default_value = "aligned", value_name = "aligned|all")]
    pub rails: RailMode,

    /// RDMA device port (verbs).
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u8,

    /// GID index (verbs, RoCE). Default: the RoCE v2 GID with an IPv4-mapped address.
    #[arg(short = 'x', long = "gid-index")]
    pub gid_index: Option<u32>,

    /// Path MTU in bytes (verbs: 256..4096), clamped to the port's active MTU.
    #[arg(short = 'm', long = "mtu")]
    pub mtu: Option<u32>,

    /// Largest message sent inline in the work request (verbs).
    #[arg(short = 'I', long = "inline-size")]
    pub inline_size: Option<u32>,

    /// Sleep on completion events instead of polling (verbs).
    #[arg(short = 'e', long = "events")]
    pub events: bool,

    /// Connect queue pairs through rdma_cm instead of the out-of-band exchange (verbs).
    #[arg(short = 'R', long = "rdma-cm")]
    pub rdma_cm: bool,
}

impl P2pArgs {
    /// Sizes to run: `-a`, `-s`, or the tool's default.
    pub fn sizes(&self, default: u64) -> Vec<u64> {
        if self.all {
            results::units::power_of_two_sizes(2, 8 << 20)
        } else {
            vec![self.size.unwrap_or(default)]
        }
    }

    /// The verbs settings of these options (`check` is bench-bw's and starts false).
    pub fn verbs_options(&self) -> crate::transport::VerbsOptions {
        crate::transport::VerbsOptions {
            // A per-rank list or `auto` is settled once the rank knows its place.
            device: match &self.ib_dev {
                Some(DeviceChoice::One(d)) => Some(d.clone()),
                _ => None,
            },
            port: self.ib_port,
            gid_index: self.gid_index,
            mtu: self.mtu,
            inline_size: self.inline_size,
            events: self.events,
            rdma_cm: self.rdma_cm,
            check: false,
        }
    }

    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.timeout)
    }

    /// The transport of the run, checked against this host's hardware, with the note that
    /// says what `auto` chose. The agents' coordinator (`--hosts`) may run where no NIC is:
    /// there the agents resolve `auto` and check their devices, and the plan's transport
    /// is settled once they have answered.
    pub fn transport_kind(&self) -> anyhow::Result<crate::transport::TransportKind> {
        use crate::transport::{self, TransportKind};
        if self.hosts.is_some() {
            return Ok(match self.transport {
                TransportChoice::Verbs => TransportKind::Verbs,
                _ => TransportKind::Tcp,
            });
        }
        let (kind, why) = transport::resolve(self.transport)?;
        transport::check_supported(kind, self.op)?;
        if self.transport == TransportChoice::Auto && crate::bootstrap::is_reporting_process() {
            eprintln!("transport: {why}");
        }
        Ok(kind)
    }

    /// Checks the verbs settings against this host's devices (not on the agents'
    /// coordinator, which has none to check).
    pub fn check_verbs(
        &self,
        kind: crate::transport::TransportKind,
        verbs: &crate::transport::VerbsOptions,
    ) -> anyhow::Result<()> {
        if self.hosts.is_some() {
            return Ok(());
        }
        crate::transport::check_verbs_options(kind, verbs)
    }

    /// Where the peers are and how to pair them.
    pub fn launch(&self) -> Launch {
        Launch {
            host: self.host.clone(),
            port: self.port,
            bind_addr: self.bind_addr,
            json: self.json.clone(),
            launcher: self.launcher,
            pattern: self.pattern.clone(),
            include_local: self.include_local,
            rail_mode: self.rails,
            devices: self.ib_dev.clone().unwrap_or_default(),
            serve: self.serve,
            hosts: self.hosts.clone(),
            secret_file: self.secret_file.clone(),
            transport: self.transport,
        }
    }
}
