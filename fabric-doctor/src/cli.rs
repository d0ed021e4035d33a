//! fabric-doctor's command line, resolved at the edge into the audit's options.

use std::path::PathBuf;

use base::launcher::Launcher;
use clap::Parser;
use probe::audit::Options;
use results::audit::SuiteTraffic;

#[derive(Parser, Debug)]
#[command(name = "fabric-doctor", version, about)]
pub struct Cli {
    /// Write the audit as a fabcheck document (hosts[0].audit) to FILE (atomic write).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Save every file and command output read into DIR (new or empty).
    #[arg(long, value_name = "DIR", conflicts_with = "from")]
    pub capture: Option<PathBuf>,
    /// Audit a capture directory instead of this machine.
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Traffic class the suite sends with (DSCP = tclass >> 2), as perftest's --tclass.
    #[arg(long, default_value_t = 0)]
    pub tclass: u8,
    /// Service level (InfiniBand), as perftest's --sl.
    #[arg(long, default_value_t = 0)]
    pub sl: u8,
    /// GID index (-x); default: the IPv4-mapped RoCE v2 GID, as the benchmarks pick it.
    #[arg(short = 'x', long)]
    pub gid_index: Option<u32>,
    /// Priorities that must carry PFC (comma list, e.g. 3); judged when given.
    #[arg(long, value_delimiter = ',')]
    pub lossless_priorities: Vec<u8>,
    /// Only these interfaces or RDMA devices.
    #[arg(short = 'd', long = "dev", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Keep every driver counter, not only those that tell of loss.
    #[arg(long)]
    pub all_counters: bool,
    /// How the processes were started: auto (MPI when an MPI launcher's environment is
    /// present), standalone (this node only), mpi.
    #[arg(long, default_value = "auto", value_parser = parse_launcher)]
    pub launcher: Launcher,
    /// Seconds any rank may wait for the others under MPI (the audits of every node).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
}

fn parse_launcher(s: &str) -> Result<Launcher, String> {
    s.parse::<Launcher>().map_err(|e| e.to_string())
}

impl Cli {
    /// The audit's options; priorities beyond 0..7 are refused.
    pub fn options(&self) -> Result<Options, String> {
        if self.lossless_priorities.iter().any(|&p| p > 7) {
            return Err("--lossless-priorities takes priorities 0..7".into());
        }
        Ok(Options {
            suite: SuiteTraffic {
                traffic_class: self.tclass,
                service_level: self.sl,
                gid_index: self.gid_index,
            },
            only: self.only.clone(),
            lossless: self.lossless_priorities.clone(),
            all_counters: self.all_counters,
        })
    }
}
