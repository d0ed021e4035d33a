//! bench-congestion: GPCNeT's method made reproducible. A seed splits the nodes into
//! canaries and congestors; the canaries measure a random-ring latency, a random-ring
//! bandwidth and an 8-byte allreduce first alone (isolated), then while the congestors run
//! all-to-all and incast traffic (loaded); the impact factors compare the two.
//!
//! The run itself is `traffic::congestion`, written once for every launcher: under mpirun/srun
//! (`under_mpi`: MPI gives the ranks, barriers and gathers, and the allreduce canary) or
//! over the agents (`over_agents`: `bench-congestion --hosts FILE` coordinates `bench-bw
//! --serve` agents, no MPI, so no allreduce canary). The data moves between the ranks over
//! RDMA verbs when a device is present (sends, RDMA WRITE puts, RDMA READ gets:
//! `traffic::endpoint_flows`) or over plain TCP sockets (`traffic::flows`), each bound to
//! `--bind-addr` when given. The incast rounds are `traffic::incast`, which `bench-bw --pattern
//! incast` runs too.

mod over_agents;
mod under_mpi;

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use p2p::DeviceChoice;
use traffic::endpoint_flows::Carrier;
use transport::{Op, TransportChoice, VerbsOptions};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "bench-congestion",
    about = "Canary latency, bandwidth and allreduce alone and under congestor load (GPCNeT's method), with a seeded split"
)]
pub struct Cli {
    /// Seed of the canary/congestor split and of the canaries' ring.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Share of the nodes that are canaries, percent (rounded up, at least 2 nodes).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=90))]
    pub canaries: u32,
    /// Length of each canary test in each phase, seconds.
    #[arg(long, default_value_t = 2.0)]
    pub phase_seconds: f64,
    /// Count every rank as a node (one machine rehearsing the method); default: one node per host.
    #[arg(long)]
    pub include_local: bool,
    /// Address this rank's sockets bind to and the others reach it at (over verbs, the
    /// flows' control connections).
    #[arg(long)]
    pub bind_addr: Option<IpAddr>,
    /// Transport of the canaries' and congestors' flows: verbs when an RDMA device is
    /// present, tcp otherwise (auto). The allreduce canary is MPI's either way.
    #[arg(long, default_value = "auto", value_parser = ["auto", "tcp", "verbs"])]
    pub transport: String,
    /// RDMA device (verbs): a name (mlx5_0), a list indexed by each rank's local rank on
    /// its host (mlx5_0,mlx5_1,...), or `auto` (the device at the local rank's place, in name
    /// order). Default: the first device with an ACTIVE port.
    #[arg(short = 'd', long = "ib-dev")]
    pub ib_dev: Option<DeviceChoice>,
    /// Device port (verbs).
    #[arg(short = 'i', long = "ib-port", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..))]
    pub ib_port: u8,
    /// GID index (verbs); default: the RoCE v2 GID with an IPv4-mapped address.
    #[arg(short = 'x', long = "gid-index")]
    pub gid_index: Option<u32>,
    /// Give up on any wait after this many seconds.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// `canaries` (GPCNeT's method) or `incast[:N]` (N senders to each node in turn; all others without N).
    #[arg(long, default_value = "canaries")]
    pub mode: String,
    /// Write the result document here (atomic).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Coordinate the run over the `bench-bw --serve` agents listed in FILE (`host[:port]`
    /// per line, port default -p), without MPI: every agent is a rank. The allreduce
    /// canary is MPI's and is not run then. Needs the shared secret. The device, port, GID
    /// and bind address are each agent's own (`bench-bw --serve -d ... -x ...`).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["ib_dev", "ib_port", "gid_index", "bind_addr"])]
    pub hosts: Option<PathBuf>,
    /// The agents' control port where a line of --hosts gives none.
    #[arg(short = 'p', long, default_value_t = p2p_cli::DEFAULT_PORT)]
    pub port: u16,
    /// File holding the agents' shared secret (else the FABCHECK_SECRET environment
    /// variable). Never give the secret itself on the command line.
    #[arg(long, value_name = "FILE", requires = "hosts")]
    pub secret_file: Option<PathBuf>,
    /// Noisy neighbours: every node of this tenant is a canary (the tenant that may be
    /// crowded out), every node of --congestor-tenant a congestor; launch the run on the
    /// two tenants' nodes only. --canaries does not apply. The tenants come from --tenants,
    /// else the --plan's [[tenant]] tables.
    #[arg(long, value_name = "TENANT", requires = "congestor_tenant")]
    pub canary_tenant: Option<String>,
    /// Noisy neighbours: the tenant whose nodes load the fabric (see --canary-tenant).
    #[arg(long, value_name = "TENANT", requires = "canary_tenant")]
    pub congestor_tenant: Option<String>,
    /// The tenants file (docs/tenants.md) --canary-tenant and --congestor-tenant name.
    #[arg(long, value_name = "FILE")]
    pub tenants: Option<PathBuf>,
    /// A fabric plan whose [[tenant]] tables name the tenants (when no --tenants).
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
}

impl Cli {
    /// What every rank must agree on; an error names what is wrong with the tenants.
    pub fn options(&self) -> anyhow::Result<traffic::congestion::Options> {
        Ok(traffic::congestion::Options {
            seed: self.seed,
            canaries: self.canaries,
            phase_seconds: self.phase_seconds,
            include_local: self.include_local,
            timeout_s: self.timeout as f64,
            tenants: self.tenant_roles()?,
        })
    }

    /// The two tenants' roles and nodes of a noisy-neighbour run, `None` without one.
    fn tenant_roles(&self) -> anyhow::Result<Option<traffic::congestion::split::TenantRoles>> {
        use anyhow::bail;
        let (Some(canary), Some(congestor)) = (&self.canary_tenant, &self.congestor_tenant) else {
            return Ok(None);
        };
        if self.incast().is_some() {
            bail!("--canary-tenant and --congestor-tenant place GPCNeT's canaries and congestors: not with --mode incast");
        }
        if canary == congestor {
            bail!("--canary-tenant and --congestor-tenant both name {canary:?}: a noisy neighbour is another tenant");
        }
        let tenants = match (&self.tenants, &self.plan) {
            (Some(path), _) => results::tenants::Tenants::load(path).map_err(|e| anyhow::anyhow!(e.0))?,
            (None, Some(path)) => results::fabric_plan::load(path, None)
                .map_err(|e| anyhow::anyhow!(e.0))?
                .tenants()
                .map_err(|e| anyhow::anyhow!(e.0))?,
            (None, None) => bail!("--canary-tenant and --congestor-tenant need the tenants: give --tenants FILE (docs/tenants.md) or a --plan with [[tenant]] tables"),
        };
        let nodes = |name: &str| -> anyhow::Result<Vec<String>> {
            match tenants.get(name) {
                Some(t) => Ok(t.nodes.clone()),
                None => bail!(
                    "no tenant {name:?} in {} (its tenants: {})",
                    tenants.source,
                    tenants.names().join(", ")
                ),
            }
        };
        Ok(Some(traffic::congestion::split::TenantRoles {
            canary: canary.clone(),
            canary_nodes: nodes(canary)?,
            congestor: congestor.clone(),
            congestor_nodes: nodes(congestor)?,
        }))
    }

    /// `Some(N)` in incast mode (0: all other ranks send).
    pub fn incast(&self) -> Option<u32> {
        let rest = self.mode.strip_prefix("incast")?;
        rest.strip_prefix(':').map_or(Some(0), |n| n.parse().ok())
    }

    /// How the flows move their bytes, with the note that says what `auto` chose (said
    /// once, by the reporting process). Verbs devices are settled per rank later.
    pub fn carrier(&self) -> anyhow::Result<Carrier> {
        let choice: TransportChoice = self
            .transport
            .parse()
            .map_err(|e| anyhow::anyhow!("--transport: {e}"))?;
        let (kind, why) = transport::resolve(choice)?;
        if choice == TransportChoice::Auto && base::launcher::is_reporting_process() {
            eprintln!("bench-congestion: transport: {why}");
        }
        // An incast's senders and its victim send two-sided, as the TCP one does.
        Ok(Carrier::of(
            kind,
            &VerbsOptions {
                port: self.ib_port,
                gid_index: self.gid_index,
                ..Default::default()
            },
            Op::Send,
            self.bind_addr,
            Duration::from_secs(self.timeout),
            self.ib_dev.clone().unwrap_or_default(),
        ))
    }
}

fn main() {
    let cli = Cli::parse();
    let mode_ok = cli.mode == "canaries"
        || cli.mode == "incast"
        || cli
            .mode
            .strip_prefix("incast:")
            .is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n > 0));
    if !mode_ok {
        eprintln!(
            "bench-congestion: error: --mode {} is neither `canaries` nor `incast[:N]` (N > 0)",
            cli.mode
        );
        std::process::exit(base::exit::ERROR);
    }
    if !(cli.phase_seconds > 0.0 && cli.phase_seconds <= 3600.0) {
        eprintln!("bench-congestion: error: --phase-seconds must be in (0, 3600]");
        std::process::exit(base::exit::ERROR);
    }
    if let Err(e) = base::output::check_writable(cli.json.as_deref()) {
        eprintln!("bench-congestion: error: {e:#}");
        std::process::exit(base::exit::ERROR);
    }
    if let Err(e) = cli.options() {
        eprintln!("bench-congestion: error: {e:#}");
        std::process::exit(base::exit::ERROR);
    }
    if cli.hosts.is_some() {
        std::process::exit(over_agents::run(&cli));
    }
    let carrier = match cli.carrier() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bench-congestion: error: {e:#}");
            std::process::exit(base::exit::ERROR);
        }
    };
    std::process::exit(under_mpi::run(&cli, &carrier));
}
