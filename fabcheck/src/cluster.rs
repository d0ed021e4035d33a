//! Where the runs go: the launcher that starts the suite's binaries on the cluster and the
//! cluster's shape (nodes, NICs and GPUs per node), resolved once from the command line
//! and the environment.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use verdict::feed::Launch;

/// How the runs are started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launcher {
    /// `mpirun --hostfile FILE`, one slot list per node.
    Mpirun { hostfile: PathBuf },
    /// `srun` inside a Slurm allocation.
    Srun,
    /// `mpirun` on this machine, every rank counted as a node (`--include-local`): a
    /// rehearsal of the procedure on one host.
    Local,
    /// `bench-bw --serve` agents (and `bench-lat --serve` ones for the latency sweeps)
    /// driven by the tools' own coordinators (`--hosts FILE`), no MPI: the sweeps, incast
    /// and congestion run; the audits and collectives cannot (see [`Cluster::not_here`]).
    /// `one_host`: every agent on this machine, each counted as a node (a rehearsal).
    Agents {
        bw: PathBuf,
        lat: Option<PathBuf>,
        one_host: bool,
    },
}

/// The cluster the runs go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub launcher: Launcher,
    /// Nodes (with `Local`: ranks, each counted as a node).
    pub nodes: u32,
    /// Ranks per node for the point-to-point runs: one per NIC (rail).
    pub nics: u32,
    /// Ranks per node for the collectives: one per GPU.
    pub gpus: u32,
    /// Extra launcher arguments, given as they are (`--mca btl_tcp_if_include eth0`).
    pub launcher_args: Vec<String>,
    /// What every rank runs the tool through (`numactl ...`, a rank wrapper), if anything.
    pub wrap: Vec<String>,
}

impl Cluster {
    /// The hosts of a host file: one per non-empty line, `#` comments and `slots=`
    /// settings left out, each host once.
    pub fn hosts_of(file: &Path) -> Result<Vec<String>> {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("{}: cannot read the host file", file.display()))?;
        let mut hosts: Vec<String> = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some(host) = line.split_whitespace().next() else {
                continue;
            };
            if !hosts.iter().any(|h| h == host) {
                hosts.push(host.to_string());
            }
        }
        if hosts.len() < 2 {
            bail!(
                "{}: {} host(s); an acceptance run measures links between nodes and needs at \
                 least two (one host name per line)",
                file.display(),
                hosts.len()
            );
        }
        Ok(hosts)
    }

    /// The agents of an agents file (`host` or `host:port` a line, `#` comments): their
    /// hosts in order, each once, and how many agents the first host has (its rails).
    pub fn agents_of(file: &Path) -> Result<(Vec<String>, u32)> {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("{}: cannot read the agents file", file.display()))?;
        let mut hosts: Vec<String> = Vec::new();
        let mut first = 0;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let host = match line.rsplit_once(':') {
                Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
                _ => line,
            };
            if hosts.is_empty() || hosts[0] == host {
                first += 1;
            }
            if !hosts.iter().any(|h| h == host) {
                hosts.push(host.to_string());
            }
        }
        if first == 0 {
            bail!(
                "{}: no agent listed (one `host:port` a line)",
                file.display()
            );
        }
        Ok((hosts, first))
    }

    /// Why a run cannot go through this launcher, if it cannot: a run per ordered pair
    /// of tenants is made by hand; over agents there is no MPI and no process on each node
    /// but the agents.
    pub fn not_here(&self, tool: &str, launch: Launch) -> Option<String> {
        if launch == Launch::EachTenantPair {
            return Some(
                "not made by the runner: one run per ordered pair of tenants on their nodes \
                 (bench-congestion --tenants FILE --canary-tenant A --congestor-tenant B, \
                 docs/tenants.md); judge those documents with the others"
                    .into(),
            );
        }
        let Launcher::Agents { lat, .. } = &self.launcher else {
            return None;
        };
        match tool {
            "fabric-doctor" => Some(
                "not over agents: fabric-doctor audits each node where it runs (run it there, \
                 `fabric-doctor --json`, or use mpirun/srun)"
                    .into(),
            ),
            "bench-collective" => Some(
                "not over agents: the collectives need MPI (use mpirun or srun for this stage)"
                    .into(),
            ),
            "bench-lat" if lat.is_none() => Some(
                "no bench-lat agents: start `bench-lat --serve` on every node and pass \
                 --lat-agents FILE"
                    .into(),
            ),
            _ => None,
        }
    }

    /// The agents file a tool's coordinator takes (`--hosts`), over agents.
    pub fn agents_for(&self, tool: &str) -> Option<&Path> {
        match &self.launcher {
            Launcher::Agents { lat, .. } if tool == "bench-lat" => lat.as_deref(),
            Launcher::Agents { bw, .. } => Some(bw),
            _ => None,
        }
    }

    /// Ranks per node for a launch kind.
    pub fn ranks_per_node(&self, launch: Launch) -> u32 {
        if self.is_local() {
            return 1;
        }
        match launch {
            Launch::EveryNode | Launch::EachTenantPair => 1,
            Launch::EveryRank => self.nics,
            Launch::EveryGpu => self.gpus,
        }
    }

    /// Every rank of a launch kind.
    pub fn ranks(&self, launch: Launch) -> u32 {
        match (&self.launcher, launch) {
            // One machine: the audit once, every other run over every rank-node.
            (Launcher::Local, Launch::EveryNode) => 1,
            _ => self.nodes * self.ranks_per_node(launch),
        }
    }

    /// The launcher's words before the tool.
    pub fn prefix(&self, launch: Launch) -> Vec<String> {
        let per_node = self.ranks_per_node(launch).to_string();
        let np = self.ranks(launch).to_string();
        let mut v: Vec<String> = match &self.launcher {
            Launcher::Mpirun { hostfile } => vec![
                "mpirun".into(),
                "--hostfile".into(),
                hostfile.display().to_string(),
                "--map-by".into(),
                format!("ppr:{per_node}:node"),
                "--bind-to".into(),
                "none".into(),
                "-np".into(),
                np,
            ],
            Launcher::Srun => vec![
                "srun".into(),
                format!("--nodes={}", self.nodes),
                format!("--ntasks-per-node={per_node}"),
                "--kill-on-bad-exit=1".into(),
            ],
            Launcher::Local => vec![
                "mpirun".into(),
                "--oversubscribe".into(),
                "--bind-to".into(),
                "none".into(),
                "-np".into(),
                np,
            ],
            // The tool is its own coordinator (`--hosts`): nothing before it.
            Launcher::Agents { .. } => return Vec::new(),
        };
        v.extend(self.launcher_args.iter().cloned());
        v.extend(self.wrap.iter().cloned());
        v
    }

    /// Every rank on this machine, each counted as a node (`--include-local`).
    pub fn is_local(&self) -> bool {
        matches!(
            self.launcher,
            Launcher::Local | Launcher::Agents { one_host: true, .. }
        )
    }

    /// One line for the terminal and the state file.
    pub fn describe(&self) -> String {
        match &self.launcher {
            Launcher::Mpirun { hostfile } => format!(
                "{} node(s) of {} under mpirun, {} NIC(s) and {} GPU(s) a node",
                self.nodes,
                hostfile.display(),
                self.nics,
                self.gpus
            ),
            Launcher::Srun => format!(
                "{} node(s) of the Slurm allocation under srun, {} NIC(s) and {} GPU(s) a node",
                self.nodes, self.nics, self.gpus
            ),
            Launcher::Local => format!(
                "{} rank(s) on this host, each counted as a node (a rehearsal)",
                self.nodes
            ),
            Launcher::Agents { bw, lat, one_host } => format!(
                "{} {} of {}{} over agents, {} NIC(s) a node{}",
                self.nodes,
                if *one_host {
                    "agent(s) on this host, each counted as a node,"
                } else {
                    "node(s)"
                },
                bw.display(),
                lat.as_ref()
                    .map(|l| format!(" and {}", l.display()))
                    .unwrap_or_default(),
                self.nics,
                if *one_host { " (a rehearsal)" } else { "" }
            ),
        }
    }
}

/// The node count of the Slurm allocation this process runs in, if any.
pub fn slurm_nodes() -> Option<u32> {
    ["SLURM_JOB_NUM_NODES", "SLURM_NNODES"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(launcher: Launcher) -> Cluster {
        Cluster {
            launcher,
            nodes: 16,
            nics: 8,
            gpus: 8,
            launcher_args: vec![],
            wrap: vec![],
        }
    }

    #[test]
    fn the_prefix_places_a_rank_per_nic_or_per_node() {
        let c = cluster(Launcher::Mpirun {
            hostfile: "hosts".into(),
        });
        assert_eq!(
            c.prefix(Launch::EveryRank).join(" "),
            "mpirun --hostfile hosts --map-by ppr:8:node --bind-to none -np 128"
        );
        assert_eq!(
            c.prefix(Launch::EveryNode).join(" "),
            "mpirun --hostfile hosts --map-by ppr:1:node --bind-to none -np 16"
        );
        let s = cluster(Launcher::Srun);
        assert_eq!(
            s.prefix(Launch::EveryGpu).join(" "),
            "srun --nodes=16 --ntasks-per-node=8 --kill-on-bad-exit=1"
        );
        let l = Cluster {
            nodes: 4,
            ..cluster(Launcher::Local)
        };
        assert_eq!(l.ranks(Launch::EveryRank), 4);
        assert_eq!(l.ranks(Launch::EveryNode), 1);
    }

    #[test]
    fn a_host_file_counts_each_host_once_and_needs_two() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("hosts");
        std::fs::write(&f, "# rack 1\nnode01 slots=8\nnode02\n\nnode01\n").unwrap();
        assert_eq!(Cluster::hosts_of(&f).unwrap(), ["node01", "node02"]);
        std::fs::write(&f, "node01\n").unwrap();
        let e = Cluster::hosts_of(&f).unwrap_err().to_string();
        assert!(e.contains("at least two"), "{e}");
    }
}
