//! The command line of the point-to-point benchmarks (`bench-lat`, `bench-bw`), named as
//! perftest names its options so habits and scripts carry over (`-d -i -x -s -a -n -D -m
//! -I -e -R`, no host = server). The binaries own their CLI: this crate is theirs, and it
//! resolves the options at the edge into what the `p2p` library takes (a
//! [`Launch`](p2p::Launch) and the parts of a [`Plan`](p2p::Plan)); the
//! libraries never see a clap type. Options that belong to one tool live in that tool.
//! [`launch::run`] then picks the coordinator (standalone, MPI or the agents) and runs.

// Every public item says what it is, and the compiler keeps the rule.
#![warn(missing_docs)]

pub mod launch;

use std::net::IpAddr;
use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;

use base::launcher::Launcher;
use p2p::pattern::{PatternSpec, RailMode};
use p2p::{DeviceChoice, Launch};
use transport::{Op, TransportChoice};

/// Default port of the standalone handshake. perftest uses 18515; ours differs so both
/// can run side by side on the same hosts.
pub const DEFAULT_PORT: u16 = 18555;

/// A parser for one of fabric's named enums that lists the choices in `--help` and in
/// errors, as clap does for its own enums.
fn one_of<T>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
{
    PossibleValuesParser::new(names).map(|s| match s.parse::<T>() {
        Ok(v) => v,
        Err(_) => unreachable!("the parser only passes listed names"),
    })
}

/// `--test` for a tool that measures only pairs (bench-lat): its help lists what it runs;
/// bench-bw's GPU copy baselines stay accepted but hidden, so naming one gets the
/// tool's own explanation (run it with bench-bw) rather than a bare list.
pub fn pair_tests_only(cmd: clap::Command) -> clap::Command {
    let values: Vec<clap::builder::PossibleValue> = Op::NAMES
        .iter()
        .map(|n| {
            let copy = n.parse::<Op>().is_ok_and(Op::is_copy);
            clap::builder::PossibleValue::new(*n).hide(copy)
        })
        .collect();
    cmd.mut_arg("op", |a| {
        a.value_parser(
            PossibleValuesParser::new(values).map(|s| match s.parse::<Op>() {
                Ok(v) => v,
                Err(_) => unreachable!("the parser only passes listed names"),
            }),
        )
    })
}

/// The largest message bench-lat and bench-bw send: each side holds at least one buffer
/// of it (registered and pinned with verbs), and a TCP step writes a whole message, so a
/// larger one costs gigabytes of memory and seconds between the points where a run can
/// stop. A link's bandwidth is flat long before (perftest's -a stops at 8 MiB).
pub const MAX_MESSAGE_BYTES: u64 = 1 << 30;

fn parse_size(s: &str) -> Result<u64, String> {
    let v = results::units::parse_size(s)?;
    if v == 0 {
        return Err("size must be at least 1 byte".into());
    }
    if v > MAX_MESSAGE_BYTES {
        return Err(format!(
            "{s} is larger than the largest message, 1G: each side would hold (and with verbs \
             pin) at least that much memory per buffer; a link's bandwidth is flat long before, \
             so measure at 1G or below"
        ));
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

/// perftest's options shared by `bench-lat` and `bench-bw`, resolved at the edge into the
/// driver's launch and plan.
#[derive(Debug, Clone, Args)]
pub struct P2pArgs {
    /// Server to connect to (client mode). Without it this process is the server.
    /// Ignored under mpirun/srun, where --pattern pairs the ranks.
    pub host: Option<String>,

    /// Operation to measure: send (two-sided; the only one TCP has), write, read (RDMA).
    #[arg(long = "test", default_value = "send", value_parser = one_of::<Op>(Op::NAMES))]
    pub op: Op,

    /// Transport: verbs when an RDMA device is present, tcp otherwise (auto).
    #[arg(long, default_value = "auto", value_parser = one_of::<TransportChoice>(TransportChoice::NAMES))]
    pub transport: TransportChoice,

    /// How the processes were started: auto detects mpirun/srun from the environment.
    #[arg(long, default_value = "auto", value_parser = one_of::<Launcher>(Launcher::NAMES))]
    pub launcher: Launcher,

    /// Message size (bytes; K, M, G suffixes). Default: 2 for latency, 64K for bandwidth.
    #[arg(short = 's', long = "size", value_parser = parse_size)]
    pub size: Option<u64>,

    /// Run all sizes from 2 B to 8 MiB in powers of two.
    #[arg(short = 'a', long = "all", conflicts_with = "size")]
    pub all: bool,

    /// With -a: the largest size (default 8 MiB, as perftest's -a), so a sweep measures
    /// only the sizes a contract bounds (`-a --max-size 64`: 2..64 B).
    #[arg(long = "max-size", requires = "all", value_parser = parse_size)]
    pub max_size: Option<u64>,

    /// Timed iterations per size (default, as perftest: 1000 for latency, send and read
    /// bandwidth, 5000 for write bandwidth).
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
    /// device at its place in the host's devices, in natural name order: its rail, which a
    /// down port never shifts). Default: the first device with an ACTIVE port.
    #[arg(short = 'd', long = "ib-dev")]
    pub ib_dev: Option<DeviceChoice>,

    /// Which pairs to measure under mpirun/srun, in rounds of disjoint pairs: pairs
    /// (ranks (0,1), (2,3), ...), all-pairs (every node pair once), ring, random[:ROUNDS[:SEED]],
    /// or file:PATH (a list of `hostA hostB` lines, as `aggregate` writes for a retest);
    /// bench-bw also incast[:N] (N ranks to one, each rank the receiver in turn);
    /// bench-lat also isolation (every rank tries to reach every other, for tenants).
    #[arg(long, default_value = "pairs", value_name = "PATTERN")]
    pub pattern: PatternSpec,

    /// Count every rank as a node of its own, so ranks of one host are paired too (to try
    /// a pattern on one machine).
    #[arg(long)]
    pub include_local: bool,

    /// The fabric plan (the file `aggregate --plan` reads: native TOML, Slurm
    /// topology.conf, NetBox CSV or ibnetdiscover output, detected): nodes are scheduled
    /// group by group in its order, planned nodes missing from the run and hosts it does
    /// not know are warned about before the first round and kept in the document, and the
    /// pairs are counted by hop (one leaf, across the spines).
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,

    /// The tenants (a tenants file, docs/tenants.md; else the plan's `[[tenant]]` tables):
    /// `--pattern isolation` labels every rank with its node's tenant and flags, as it
    /// goes, an attempt that crossed between tenants or failed inside one.
    #[arg(long, value_name = "FILE")]
    pub tenants: Option<PathBuf>,

    /// Run the measuring thread on these CPUs (a cpulist: `2`, `0-7,16`), every rank of
    /// the host alike. Without it each rank is bound to its NIC's NUMA node, as perftest
    /// does, unless the launcher already restricted its CPUs (`mpirun --bind-to`,
    /// `srun --cpu-bind`, `taskset`), which is left as it is. Recorded per rank in the
    /// JSON (`hosts[].placement`).
    #[arg(long, value_name = "LIST", value_parser = parse_cpu_list)]
    pub cpu: Option<CpuList>,

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

    /// As an agent (--serve), also answer Prometheus scrapes (HTTP GET /metrics) on
    /// ADDR:PORT with this node's live port and driver counters and the last sweep's results.
    #[arg(long, value_name = "ADDR:PORT", requires = "serve")]
    pub metrics: Option<std::net::SocketAddr>,

    /// As an agent (--serve), listen for coordinators on this address (default: the
    /// --bind-addr, else every address). Give the management network's address when the
    /// data goes over a rail the coordinator cannot reach (`--bind-addr` the rail's).
    #[arg(long, value_name = "ADDR", requires = "serve")]
    pub control_addr: Option<IpAddr>,

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

    /// Register the data buffers without PCIe relaxed ordering (verbs; perftest's flag). By
    /// default they take IBV_ACCESS_RELAXED_ORDERING, as perftest's do, except where the
    /// CPU polls them (write latency).
    #[arg(long = "disable-pcie-relaxed", alias = "disable_pcie_relaxed")]
    pub disable_pcie_relaxed: bool,

    /// GRH traffic class of the queue pairs, 0..255 (verbs; perftest's -T): on RoCE v2 the
    /// IP header's DSCP (upper 6 bits) and ECN (lower 2), e.g. 106 for DSCP 26 with ECT.
    #[arg(short = 'T', long = "tclass", default_value_t = 0)]
    pub tclass: u8,

    /// Service level of the queue pairs' address vector, 0..15 (verbs; perftest's -S).
    #[arg(short = 'S', long = "sl", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..16))]
    pub sl: u8,
}

impl P2pArgs {
    /// Sizes to run: `-a`, `-s`, or the tool's default.
    pub fn sizes(&self, default: u64) -> Vec<u64> {
        if self.all {
            results::units::power_of_two_sizes(2, self.max_size.unwrap_or(8 << 20))
        } else {
            vec![self.size.unwrap_or(default)]
        }
    }

    /// The verbs settings of these options (`check` is bench-bw's and starts false).
    pub fn verbs_options(&self) -> transport::VerbsOptions {
        transport::VerbsOptions {
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
            disable_pcie_relaxed: self.disable_pcie_relaxed,
            tclass: self.tclass,
            sl: self.sl,
            ..Default::default()
        }
    }

    /// The traffic these options send (`--tclass`, `--sl`, `--gid-index`), as the audit
    /// every document embeds records and judges it.
    pub fn suite_traffic(&self) -> results::audit::SuiteTraffic {
        results::audit::SuiteTraffic {
            traffic_class: self.tclass,
            service_level: self.sl,
            gid_index: self.gid_index,
        }
    }

    /// `--timeout`: the longest wait for a peer.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.timeout)
    }

    /// The transport of the run, checked against this host's hardware, with the note that
    /// says what `auto` chose. The agents' coordinator (`--hosts`) may run where no NIC is:
    /// there the agents resolve `auto` and check their devices, and the plan's transport
    /// is settled once they have answered.
    pub fn transport_kind(&self) -> anyhow::Result<transport::TransportKind> {
        use transport::{self, TransportKind};
        if self.hosts.is_some() {
            return Ok(match self.transport {
                TransportChoice::Verbs => TransportKind::Verbs,
                _ => TransportKind::Tcp,
            });
        }
        let (kind, why) = transport::resolve(self.transport)?;
        self.refuse_silent_tcp(kind, &why)?;
        transport::check_supported(kind, self.op)?;
        if self.transport == TransportChoice::Auto && base::launcher::is_reporting_process() {
            eprintln!("transport: {why}");
        }
        Ok(kind)
    }

    /// Refuses a run that would measure TCP while the command line asked for RDMA: `-d`
    /// naming a device that `auto` could not find (a typo, a missing driver) would
    /// otherwise measure the kernel's TCP stack and label it with the device, and `-R`
    /// (rdma_cm) means nothing over TCP. TCP is measured when asked (`--transport tcp`)
    /// or when no device was named.
    fn refuse_silent_tcp(&self, kind: transport::TransportKind, why: &str) -> anyhow::Result<()> {
        if kind != transport::TransportKind::Tcp {
            return Ok(());
        }
        if let (Some(d), TransportChoice::Auto) = (&self.ib_dev, self.transport) {
            anyhow::bail!(
                "-d {} names an RDMA device, but the transport resolved to {why}: this host \
                 offers no verbs device to measure. Check the name with `ibv_devices` (or \
                 `rdma link`), load the RDMA driver, or measure TCP on purpose with \
                 --transport tcp and no -d",
                d.describe()
            );
        }
        if self.rdma_cm {
            anyhow::bail!(
                "-R (rdma_cm) connects RDMA queue pairs, but the transport is {why}: drop -R, \
                 or use --transport verbs on a host with an RDMA device"
            );
        }
        Ok(())
    }

    /// Checks the verbs settings against this host's devices (not on the agents'
    /// coordinator, which has none to check).
    pub fn check_verbs(
        &self,
        kind: transport::TransportKind,
        verbs: &transport::VerbsOptions,
    ) -> anyhow::Result<()> {
        if self.hosts.is_some() {
            return Ok(());
        }
        transport::check_verbs_options(kind, verbs)
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
            metrics: self.metrics,
            control_addr: self.control_addr,
            transport: self.transport,
            fabric_plan: self.plan.clone(),
            cpu: self.cpu.clone().map(|c| c.0),
        }
    }
}

/// `--cpu`: the CPUs of a kernel cpulist, one value (clap would take a `Vec` for many).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<u32>);

fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    match probe::numa::parse_cpulist(s) {
        Some(v) if !v.is_empty() => Ok(CpuList(v)),
        _ => Err(format!(
            "not a CPU list: {s:?} (give CPU numbers and ranges, e.g. 2 or 0-7,16)"
        )),
    }
}

/// `--use-cuda` values: a CUDA device ordinal, or `auto` for the node-local rank's GPU.
fn parse_gpu(s: &str) -> Result<transport::gpu::GpuSelector, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(transport::gpu::GpuSelector::LocalRank);
    }
    s.parse()
        .map(transport::gpu::GpuSelector::Ordinal)
        .map_err(|_| format!("'{s}' is not a GPU number (0, 1, ...) or `auto`"))
}

/// GPU buffers for bench-lat and bench-bw (perftest's `--use_cuda` family). Flattened into
/// each tool's options beside [`P2pArgs`].
#[derive(Debug, Clone, Args)]
pub struct GpuArgs {
    /// Buffers in GPU N's memory (`auto`: the node-local rank's GPU under mpirun/srun).
    /// Over verbs: GPUDirect RDMA; over tcp: staged through pinned host memory.
    #[arg(long = "use-cuda", alias = "use_cuda", value_name = "N|auto", value_parser = parse_gpu)]
    pub use_cuda: Option<transport::gpu::GpuSelector>,

    /// Buffers in the memory of the GPU at this PCI bus id (e.g. 0000:18:00.0).
    #[arg(
        long = "use-cuda-bus-id",
        alias = "use_cuda_bus_id",
        value_name = "PCI",
        conflicts_with = "use_cuda"
    )]
    pub use_cuda_bus_id: Option<String>,

    /// How GPU memory is registered with the NIC: dmabuf (cuMemGetHandleForAddressRange +
    /// ibv_reg_dmabuf_mr), peermem (ibv_reg_mr through nvidia_peermem), auto (dmabuf where
    /// the GPU supports it, then peermem).
    #[arg(long = "cuda-mem", default_value = "auto", value_parser = one_of::<transport::gpu::CudaMem>(transport::gpu::CudaMem::NAMES))]
    pub cuda_mem: transport::gpu::CudaMem,

    /// perftest's spelling of `--cuda-mem dmabuf`.
    #[arg(long = "use_cuda_dmabuf", hide = true)]
    pub use_cuda_dmabuf: bool,

    /// Measure even when ACS on a PCIe switch redirects GPU-NIC traffic (recorded as a warning).
    #[arg(long = "ignore-acs")]
    pub ignore_acs: bool,

    /// Register host buffers through a dma-buf (ibv_reg_dmabuf_mr), to check whether the
    /// NIC, its driver and the kernel take dma-buf memory at all, without a GPU (verbs).
    #[arg(long = "host-dmabuf")]
    pub host_dmabuf: bool,
}

impl GpuArgs {
    /// The GPU options these flags ask for (`None`: host memory).
    pub fn gpu_options(&self) -> Option<transport::gpu::GpuOptions> {
        let gpu = match (&self.use_cuda, &self.use_cuda_bus_id) {
            (Some(g), _) => g.clone(),
            (None, Some(b)) => transport::gpu::GpuSelector::BusId(b.clone()),
            (None, None) => return None,
        };
        Some(transport::gpu::GpuOptions {
            gpu,
            mem: if self.use_cuda_dmabuf {
                transport::gpu::CudaMem::Dmabuf
            } else {
                self.cuda_mem
            },
            ignore_acs: self.ignore_acs,
            resolved: None,
        })
    }

    /// Puts the memory choice into the plan's verbs options.
    pub fn apply(&self, verbs: &mut transport::VerbsOptions) {
        verbs.gpu = self.gpu_options();
        verbs.host_dmabuf = self.host_dmabuf;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        p2p: P2pArgs,
    }

    fn parse(args: &[&str]) -> Result<P2pArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.p2p)
    }

    #[test]
    fn options_resolve_into_the_launch() {
        let a = parse(&[
            "hostA",
            "-d",
            "mlx5_0,mlx5_1",
            "--pattern",
            "random:3:9",
            "--rails",
            "all",
        ])
        .unwrap();
        let l = a.launch();
        assert_eq!(l.host.as_deref(), Some("hostA"));
        assert_eq!(
            l.devices,
            DeviceChoice::PerLocalRank(vec!["mlx5_0".into(), "mlx5_1".into()])
        );
        assert_eq!(l.pattern.to_string(), "random:3:9");
        assert_eq!(l.rail_mode, RailMode::All);
        assert_eq!(
            a.verbs_options().device,
            None,
            "a per-rank list is settled later"
        );
        let a = parse(&["-d", "mlx5_3", "--test", "write", "-a"]).unwrap();
        assert_eq!(a.verbs_options().device.as_deref(), Some("mlx5_3"));
        assert_eq!(a.op, Op::Write);
        assert_eq!(a.sizes(2).len(), 23);
        assert_eq!(
            parse(&["-d", "auto"]).unwrap().launch().devices,
            DeviceChoice::Auto
        );
    }

    #[test]
    fn relaxed_ordering_is_on_unless_disabled_as_perftest_spells_it() {
        assert!(!parse(&[]).unwrap().verbs_options().disable_pcie_relaxed);
        for flag in ["--disable-pcie-relaxed", "--disable_pcie_relaxed"] {
            assert!(
                parse(&[flag]).unwrap().verbs_options().disable_pcie_relaxed,
                "{flag}"
            );
        }
    }

    #[test]
    fn traffic_class_and_service_level_as_perftest_spells_them() {
        let v = parse(&[]).unwrap().verbs_options();
        assert_eq!((v.tclass, v.sl), (0, 0));
        let v = parse(&["-T", "106", "-S", "3"]).unwrap().verbs_options();
        assert_eq!((v.tclass, v.sl), (106, 3));
        let v = parse(&["--tclass", "255", "--sl", "15"])
            .unwrap()
            .verbs_options();
        assert_eq!((v.tclass, v.sl), (255, 15));
        assert!(parse(&["--sl", "16"]).is_err(), "SL is 4 bits");
        assert!(
            parse(&["--tclass", "256"]).is_err(),
            "traffic class is 8 bits"
        );
    }

    #[test]
    fn bad_values_name_the_choices() {
        for (args, needle) in [
            (
                &["--test", "atomic"][..],
                "possible values: send, write, read",
            ),
            (
                &["--transport", "rdma"][..],
                "possible values: auto, tcp, verbs",
            ),
            (&["--pattern", "mesh"][..], "unknown pattern"),
            (&["-s", "0"][..], "at least 1 byte"),
            (&["--timeout=-1"][..], "positive number of seconds"),
            (&["--serve", "hostA"][..], "cannot be used with"),
        ] {
            let e = parse(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} accepted"))
                .to_string();
            assert!(e.contains(needle), "{args:?}: {e}");
        }
    }
}
