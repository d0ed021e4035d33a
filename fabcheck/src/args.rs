//! The command line, resolved at the edge into `accept::Options`: paths made absolute
//! (the steps run in the output directory), the launcher and the cluster's shape found
//! from the flags and the environment, stages and budgets parsed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use verdict::feed::Stage;

use crate::accept::Options;
use crate::cluster::{self, Cluster, Launcher};
use crate::plan::Settings;

#[derive(Parser)]
#[command(
    name = "fabcheck",
    version,
    about = "Acceptance day in one run: the runs a delivery profile needs, stage by stage, then the signed report",
    long_about = "Reads a delivery profile, derives the runs its checks need (the table \
                  `aggregate profile explain` prints) and runs them stage by stage - config \
                  (fabric-doctor), links (all-pairs latency and bandwidth, every rail, both \
                  directions), the retest of suspects, collectives, load - as the suite's own \
                  commands under mpirun, srun or on this host, then `aggregate report`. Exit \
                  codes: 0 PASS, 1 FAIL, 2 usage or environment error, 130 interrupted \
                  (resume with --resume)."
)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the acceptance a profile asks for and judge it.
    Accept(AcceptArgs),
    /// Is a slow job the network's fault? The job's nodes' audits and links, judged
    /// against a good night: exit 0 "matches its baseline", 1 "at fault: <parts>".
    Triage(TriageArgs),
}

/// What the binary was asked to do, resolved.
pub enum Job {
    Accept(Options),
    Triage(crate::triage::Triage),
}

#[derive(Args)]
struct TriageArgs {
    /// Delivery profile whose link and configuration checks judge the nodes.
    #[arg(short, long)]
    profile: String,
    /// The job's nodes: a host file (one per line).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["job", "local"])]
    hosts: Option<PathBuf>,
    /// The job's nodes: a Slurm job id (its NodeList, through scontrol).
    #[arg(long, value_name = "ID", conflicts_with = "local")]
    job: Option<String>,
    /// Rehearse on this host: N ranks, each counted as a node.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=64))]
    local: Option<u32>,
    /// A good night's directory (its results/ are the baseline), e.g. history/last-good.
    #[arg(long, value_name = "DIR")]
    baseline: PathBuf,
    /// Ranks per node: one per NIC (rail).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    nics_per_node: u32,
    /// Extra launcher arguments, passed as they are.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    launcher_args: Option<String>,
    /// A command every rank runs the tool through, as `accept --wrap` takes it.
    #[arg(long, value_name = "CMD", allow_hyphen_values = true)]
    wrap: Option<String>,
    /// The fabric plan (names leaves and uplinks among the suspects).
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// Output directory (results/, report/, compare.md, accept.json).
    #[arg(short, long)]
    out: PathBuf,
    /// A change must exceed this percentage of the baseline to count (aggregate compare).
    #[arg(long, default_value_t = 5.0)]
    tolerance: f64,
    /// ... and this many standard deviations of the baseline's own spread.
    #[arg(long, default_value_t = 3.0)]
    sigmas: f64,
    /// Seconds each pair measures each size in a bandwidth sweep (bench-bw -D).
    #[arg(long, default_value_t = 0.5)]
    per_pair: f64,
    /// Longest wait for a peer in any run, seconds.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=3600))]
    timeout: u32,
    /// Directory of the suite's binaries (default: this binary's own).
    #[arg(long, value_name = "DIR")]
    bin: Option<PathBuf>,
}

impl TriageArgs {
    fn resolve(self) -> Result<crate::triage::Triage> {
        let out = absolute(&self.out)?;
        // A job's nodes become a host file in the output directory, for mpirun.
        let hosts = match (&self.job, &self.hosts) {
            (Some(job), _) => {
                let list = crate::triage::job_hosts(job)?;
                std::fs::create_dir_all(&out)
                    .with_context(|| format!("{}: cannot create", out.display()))?;
                let file = out.join("job.hosts");
                results::write::write_atomic(&file, format!("{}\n", list.join("\n")).as_bytes())
                    .with_context(|| format!("{}: cannot write", file.display()))?;
                Some(file)
            }
            (None, h) => h.clone(),
        };
        let accept = AcceptArgs {
            profile: self.profile,
            hosts,
            local: self.local,
            agents: None,
            lat_agents: None,
            nics_per_node: self.nics_per_node,
            gpus_per_node: None,
            nodes: None,
            launcher_args: self.launcher_args,
            wrap: self.wrap,
            plan: self.plan,
            out: self.out,
            sign: None,
            identity: "fabcheck".into(),
            dry_run: false,
            // The nodes' own configuration and links: the parts of the network a job
            // touches, in minutes.
            stages: Some(vec![Stage::Config, Stage::Links]),
            budget: vec![],
            resume: false,
            stop_on: None,
            no_retest: false,
            per_pair: self.per_pair,
            timeout: self.timeout,
            bin: self.bin,
        };
        let (tolerance, sigmas) = (self.tolerance, self.sigmas);
        Ok(crate::triage::Triage {
            run: accept.resolve()?,
            baseline: self.baseline,
            tolerance_pct: tolerance,
            sigmas,
        })
    }
}

#[derive(Args)]
struct AcceptArgs {
    /// Delivery profile: a TOML file, or a shipped one by name (`aggregate profile list`).
    #[arg(short, long)]
    profile: String,
    /// Host file (one node per line): runs go through `mpirun --hostfile`.
    #[arg(long, value_name = "FILE", conflicts_with = "local")]
    hosts: Option<PathBuf>,
    /// Rehearse on this host: N ranks under mpirun, each counted as a node.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=64))]
    local: Option<u32>,
    /// Run over `bench-bw --serve` agents instead of MPI (their `host:port` a line, a
    /// node's agents its rails in order): the sweeps, incast and congestion; the audits
    /// and collectives are recorded as not run. See docs/agents.md.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["hosts", "local", "wrap", "launcher_args"])]
    agents: Option<PathBuf>,
    /// With --agents: the `bench-lat --serve` agents for the latency sweeps.
    #[arg(long, value_name = "FILE", requires = "agents")]
    lat_agents: Option<PathBuf>,
    /// Ranks per node for the point-to-point runs: one per NIC (rail).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    nics_per_node: u32,
    /// Ranks per node for the collectives: one per GPU (default: one per NIC).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    gpus_per_node: Option<u32>,
    /// Nodes to project for with --dry-run when no host file or allocation says.
    #[arg(long, requires = "dry_run", value_parser = clap::value_parser!(u32).range(2..))]
    nodes: Option<u32>,
    /// Extra launcher arguments, passed as they are (e.g. "--mca btl_tcp_if_include eth0").
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    launcher_args: Option<String>,
    /// A command every rank runs the tool through (e.g. "numactl --cpunodebind=0", a
    /// container's exec, the simulated fabric's rank wrapper), placed between the launcher
    /// and the tool.
    #[arg(long, value_name = "CMD", allow_hyphen_values = true)]
    wrap: Option<String>,
    /// The fabric plan, given to the sweeps and the report (`aggregate --plan`).
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// Output directory: results/, logs beside them, report/, accept.json (the state).
    #[arg(short, long)]
    out: PathBuf,
    /// Sign the report with this OpenSSH Ed25519 private key (`aggregate keygen`).
    #[arg(long, value_name = "KEY")]
    sign: Option<PathBuf>,
    /// Principal written to the report's allowed_signers.
    #[arg(long, default_value = "fabcheck")]
    identity: String,
    /// Print every command and the projected time of each stage; run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Only these stages (comma list of config, links, collectives, load).
    #[arg(long, value_delimiter = ',', value_parser = parse_stage)]
    stages: Option<Vec<Stage>>,
    /// Bound a stage's wall time: STAGE=DURATION (links=30m); repeatable.
    #[arg(long, value_name = "STAGE=DURATION", value_parser = parse_budget)]
    budget: Vec<(Stage, Duration)>,
    /// Go on with the run in --out: steps whose document is there are kept.
    #[arg(long)]
    resume: bool,
    /// Stop before the links when the configuration stage finds a fault (`config`).
    #[arg(long, value_name = "STAGE", value_parser = ["config"])]
    stop_on: Option<String>,
    /// Do not retest the links' suspects next to known-good nodes.
    #[arg(long)]
    no_retest: bool,
    /// Seconds each pair measures each size in a bandwidth sweep (bench-bw -D).
    #[arg(long, default_value_t = 0.5)]
    per_pair: f64,
    /// Longest wait for a peer in any run, seconds (every tool's --timeout).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=3600))]
    timeout: u32,
    /// Directory of the suite's binaries (default: this binary's own).
    #[arg(long, value_name = "DIR")]
    bin: Option<PathBuf>,
}

fn parse_stage(s: &str) -> Result<Stage, String> {
    Stage::ALL
        .into_iter()
        .find(|st| st.name() == s)
        .ok_or_else(|| {
            format!(
                "'{s}' is not a stage: {}",
                Stage::ALL.map(|s| s.name()).join(", ")
            )
        })
}

fn parse_budget(s: &str) -> Result<(Stage, Duration), String> {
    let (stage, d) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}': give STAGE=DURATION, e.g. links=30m"))?;
    let d = humantime::parse_duration(d)
        .map_err(|e| format!("'{d}' is not a duration ({e}); e.g. 30m, 1h, 90s"))?;
    Ok((parse_stage(stage)?, d))
}

fn absolute(p: &Path) -> Result<PathBuf> {
    std::path::absolute(p).with_context(|| format!("{}: cannot resolve", p.display()))
}

/// An existing file, absolute.
fn existing(p: &Path, what: &str) -> Result<PathBuf> {
    if !p.is_file() {
        bail!("{what} {}: no such file", p.display());
    }
    absolute(p)
}

impl Cli {
    pub fn resolve(self) -> Result<Job> {
        Ok(match self.cmd {
            Cmd::Accept(a) => Job::Accept(a.resolve()?),
            Cmd::Triage(t) => Job::Triage(t.resolve()?),
        })
    }
}

impl AcceptArgs {
    fn resolve(self) -> Result<Options> {
        let cluster = self.cluster()?;
        let profile = if Path::new(&self.profile).exists() {
            absolute(Path::new(&self.profile))?.display().to_string()
        } else {
            self.profile.clone()
        };
        // A bad profile is said before anything runs.
        verdict::profile::load(&profile)?;
        if !(self.per_pair > 0.0 && self.per_pair <= 60.0) {
            bail!("--per-pair {}: give seconds in (0, 60]", self.per_pair);
        }
        let bin = match &self.bin {
            Some(b) => absolute(b)?,
            None => std::env::current_exe()
                .context("cannot find this binary's directory; give --bin")?
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
        };
        if !self.dry_run && !bin.join("aggregate").is_file() {
            bail!(
                "{}: no aggregate binary there; build the suite (cargo build --release) or give \
                 --bin DIR",
                bin.display()
            );
        }
        Ok(Options {
            profile,
            settings: Settings {
                per_pair_s: self.per_pair,
                peer_timeout_s: self.timeout,
                fabric_plan: self
                    .plan
                    .as_deref()
                    .map(|p| existing(p, "--plan"))
                    .transpose()?,
                bin,
            },
            cluster,
            out: absolute(&self.out)?,
            sign: self
                .sign
                .as_deref()
                .map(|k| existing(k, "--sign"))
                .transpose()?,
            identity: self.identity,
            stages: self.stages.unwrap_or_else(|| Stage::ALL.to_vec()),
            budgets: self.budget.into_iter().collect::<BTreeMap<_, _>>(),
            dry_run: self.dry_run,
            resume: self.resume,
            stop_on_config: self.stop_on.is_some(),
            retest: !self.no_retest,
        })
    }

    /// Over agents: the nodes are the agents' hosts, their agents the rails; every agent
    /// on one host is a rehearsal (each agent a node). The latency agents must be as many.
    fn over_agents(&self, bw: &Path) -> Result<Cluster> {
        let (hosts, rails) = Cluster::agents_of(bw)?;
        let one_host = hosts.len() == 1;
        let (nodes, nics) = if one_host {
            (rails, 1)
        } else {
            (hosts.len() as u32, rails)
        };
        if let Some(lat) = &self.lat_agents {
            let (lat_hosts, lat_rails) = Cluster::agents_of(lat)?;
            if lat_hosts != hosts || lat_rails != rails {
                bail!(
                    "{} lists {} host(s) with {lat_rails} agent(s) on the first, {} lists {} with {rails}: \
                     the latency agents must stand on the same hosts and rails as the bandwidth agents",
                    lat.display(),
                    lat_hosts.len(),
                    bw.display(),
                    hosts.len()
                );
            }
        }
        if nodes < 2 {
            bail!("{}: one agent: an acceptance run measures links between nodes and needs at least two", bw.display());
        }
        Ok(Cluster {
            launcher: Launcher::Agents {
                bw: absolute(bw)?,
                lat: self.lat_agents.as_deref().map(absolute).transpose()?,
                one_host,
            },
            nodes,
            nics,
            gpus: self.gpus_per_node.unwrap_or(nics),
            launcher_args: Vec::new(),
            wrap: Vec::new(),
        })
    }

    /// The launcher and shape: --local, --hosts, a Slurm allocation, or (dry run) --nodes.
    fn cluster(&self) -> Result<Cluster> {
        let launcher_args = self
            .launcher_args
            .as_deref()
            .map(|a| a.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        let (launcher, nodes) = if let Some(n) = self.local {
            (Launcher::Local, n)
        } else if let Some(bw) = &self.agents {
            return self.over_agents(bw);
        } else if let Some(h) = &self.hosts {
            let hosts = Cluster::hosts_of(h)?;
            (
                Launcher::Mpirun {
                    hostfile: absolute(h)?,
                },
                hosts.len() as u32,
            )
        } else if let Some(n) = cluster::slurm_nodes() {
            (Launcher::Srun, self.nodes.unwrap_or(n))
        } else if let (true, Some(n)) = (self.dry_run, self.nodes) {
            (
                Launcher::Mpirun {
                    hostfile: "hosts".into(),
                },
                n,
            )
        } else {
            bail!(
                "where should the runs go? give --hosts FILE (mpirun), run inside a Slurm \
                 allocation (srun), --local N to rehearse on this host, or --dry-run --nodes N \
                 to see the plan"
            );
        };
        if nodes < 2 {
            bail!("{nodes} node(s): an acceptance run measures links between nodes and needs at least two");
        }
        Ok(Cluster {
            launcher,
            nodes,
            nics: self.nics_per_node,
            gpus: self.gpus_per_node.unwrap_or(self.nics_per_node),
            launcher_args,
            wrap: self
                .wrap
                .as_deref()
                .map(|w| w.split_whitespace().map(String::from).collect())
                .unwrap_or_default(),
        })
    }
}
