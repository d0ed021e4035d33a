//! bench-collective: collective benchmarks the way nccl-tests runs them (AllReduce,
//! AllGather, ReduceScatter, AlltoAll, Broadcast, Reduce), over MPI on host memory or
//! NCCL on GPU memory, with nccl-tests' options, table and bus-bandwidth arithmetic, plus
//! what nccl-tests lacks: a histogram of per-iteration times per size, the slowest rank
//! named, efficiency against the link rate, and the suite's JSON schema.
//!
//! Data flow: options (this file) -> plan (sizes, counts) -> MPI job and backend
//! (`backend/`) -> per size, out of place then in place: time every iteration on every
//! rank, take the element-wise maximum across ranks (the slowest rank's time per
//! iteration), check one extra call's output (`data`) -> rows (`report`) -> one JSON
//! document written by rank 0. Each collective is one small file in `colls/`.

// Without MPI there is nothing to launch: the backends and harness compile out.
#![cfg_attr(not(feature = "mpi"), allow(dead_code))]

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Parser, ValueEnum};

use fabric::collective::{DataType, RedOp};

mod backend;
mod colls;
mod data;
#[cfg(feature = "mpi")]
mod harness;
mod report;

use colls::Collective;

/// Backend: which library moves the data, and where the buffers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// MPI collectives on host memory.
    Mpi,
    /// NCCL collectives on GPU memory (one GPU per rank).
    Nccl,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Mpi => "mpi",
            BackendKind::Nccl => "nccl",
        }
    }
}

fn parse_size(s: &str) -> Result<u64, String> {
    let v = results::units::parse_size(s)?;
    if v == 0 {
        return Err("size must be at least 1 byte".into());
    }
    Ok(v)
}

fn parse_positive(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err("must be a positive number".into());
    }
    Ok(v)
}

/// Collective benchmarks with nccl-tests' options and table (MPI or NCCL backend).
///
/// Run under mpirun or srun, one rank per GPU for --backend nccl:
///   mpirun -np 8 bench-collective all_reduce -b 8 -e 128M -f 2 --backend nccl --json r.json
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
pub struct Cli {
    /// Collectives to run, in this order: all_reduce, all_gather, reduce_scatter, alltoall,
    /// broadcast, reduce, or `all` for every one.
    #[arg(value_name = "COLLECTIVE", default_value = "all_reduce")]
    pub collectives: Vec<String>,

    /// Smallest size in bytes (K, M, G suffixes), as nccl-tests' size column.
    #[arg(short = 'b', long = "minbytes", default_value = "32M", value_parser = parse_size)]
    pub minbytes: u64,

    /// Largest size in bytes.
    #[arg(short = 'e', long = "maxbytes", default_value = "32M", value_parser = parse_size)]
    pub maxbytes: u64,

    /// Multiply the size by this factor between steps (default 2).
    #[arg(short = 'f', long = "stepfactor", value_parser = clap::value_parser!(u64).range(2..))]
    pub stepfactor: Option<u64>,

    /// Add this many bytes between steps instead of multiplying.
    #[arg(short = 'i', long = "stepbytes", value_parser = parse_size, conflicts_with = "stepfactor")]
    pub stepbytes: Option<u64>,

    /// Timed iterations per size and mode.
    #[arg(short = 'n', long = "iters", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub iters: u64,

    /// Untimed iterations before the timed ones.
    #[arg(
        short = 'w',
        long = "warmup_iters",
        visible_alias = "warmup-iters",
        default_value_t = 5
    )]
    pub warmup: u64,

    /// Check results (nccl-tests -c): 1 = count wrong elements of one extra call per size
    /// and mode (the #wrong column), 0 = don't. `-c` alone means 1.
    #[arg(short = 'c', long = "check", default_value_t = 1, num_args = 0..=1, default_missing_value = "1",
          value_parser = clap::value_parser!(u32).range(0..=1))]
    pub check: u32,

    /// Reduction for all_reduce, reduce_scatter and reduce (avg: NCCL only).
    #[arg(short = 'o', long = "op", value_enum, default_value = "sum")]
    pub op: RedOp,

    /// Element type (float16, bfloat16: NCCL only).
    #[arg(short = 'd', long = "datatype", value_enum, default_value = "float32")]
    pub datatype: DataType,

    /// Root rank of broadcast and reduce.
    #[arg(short = 'r', long = "root", default_value_t = 0)]
    pub root: u32,

    /// mpi: host memory; nccl: GPU memory, one GPU per rank picked by the node-local rank.
    #[arg(long, value_enum, default_value = "mpi")]
    pub backend: BackendKind,

    /// Write the JSON result document here (rank 0, atomically; checked before measuring).
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Longest time any rank waits for the others (start-up, a barrier, an iteration that
    /// makes no progress), seconds; then the run ends with an error instead of hanging.
    #[arg(long, default_value_t = 60.0, value_parser = parse_positive)]
    pub timeout: f64,

    /// Reference link rate for the efficiency figure, 10^9 bit/s (default: read from the
    /// RDMA port's sysfs rate, else the network interface speed).
    #[arg(long = "link-gbit-s", value_parser = parse_positive)]
    pub link_gbit_s: Option<f64>,
}

/// What the options resolve to, before any process talks to another.
pub struct Plan {
    pub collectives: Vec<&'static Collective>,
    pub sizes: Vec<u64>,
}

/// Validates the options and expands sizes and collectives.
pub fn plan(cli: &Cli) -> Result<Plan> {
    let mut collectives = Vec::new();
    for name in &cli.collectives {
        let name = name.replace('-', "_").to_ascii_lowercase();
        if name == "all" {
            collectives.extend(colls::ALL);
            continue;
        }
        let alias = match name.as_str() {
            "allreduce" => "all_reduce",
            "allgather" => "all_gather",
            "reducescatter" => "reduce_scatter",
            "all_to_all" | "alltoall" => "alltoall",
            "bcast" => "broadcast",
            other => other,
        };
        match colls::by_name(alias) {
            Some(c) => collectives.push(c),
            None => bail!(
                "unknown collective '{name}': choose from {}, or all",
                colls::ALL.map(|c| c.name).join(", ")
            ),
        }
    }
    if cli.minbytes > cli.maxbytes {
        bail!(
            "-b/--minbytes {} is larger than -e/--maxbytes {}: the sweep would be empty",
            cli.minbytes,
            cli.maxbytes
        );
    }
    let mut sizes = Vec::new();
    let mut s = cli.minbytes;
    while s <= cli.maxbytes {
        sizes.push(s);
        s = match (cli.stepbytes, cli.stepfactor) {
            (Some(step), _) => s.saturating_add(step),
            (None, f) => s.saturating_mul(f.unwrap_or(2)),
        };
        if sizes.len() > 10_000 {
            bail!("more than 10000 sizes: use a larger -f/--stepfactor or -i/--stepbytes");
        }
        if s == u64::MAX {
            break;
        }
    }
    if cli.backend == BackendKind::Mpi {
        for c in &collectives {
            fabric::collective::mpi_supports(cli.datatype, c.reduces.then_some(cli.op))?;
        }
    }
    Ok(Plan { collectives, sizes })
}

fn main() {
    let cli = Cli::parse();
    let code = match plan(&cli) {
        Ok(plan) => run(&cli, plan),
        Err(e) => {
            if fabric::bootstrap::is_reporting_process() {
                eprintln!("bench-collective: error: {e:#}");
            }
            fabric::exit::ERROR
        }
    };
    std::process::exit(code);
}

#[cfg(feature = "mpi")]
fn run(cli: &Cli, plan: Plan) -> i32 {
    harness::run(cli, plan)
}

#[cfg(not(feature = "mpi"))]
fn run(_: &Cli, _: Plan) -> i32 {
    eprintln!("bench-collective: error: built without MPI (feature `mpi`); rebuild with it");
    fabric::exit::ERROR
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        let mut v = vec!["bench-collective"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).unwrap()
    }

    #[test]
    fn sizes_step_like_nccl_tests() {
        let p = plan(&cli(&["-b", "8", "-e", "64"])).unwrap();
        assert_eq!(p.sizes, vec![8, 16, 32, 64]);
        let p = plan(&cli(&["-b", "8", "-e", "100", "-i", "40"])).unwrap();
        assert_eq!(p.sizes, vec![8, 48, 88]);
        let p = plan(&cli(&["-b", "1K", "-e", "1M", "-f", "4"])).unwrap();
        assert_eq!(p.sizes.len(), 6);
    }

    #[test]
    fn bad_requests_are_refused_with_a_reason() {
        let e = plan(&cli(&["-b", "64", "-e", "8"])).err().unwrap();
        assert!(e.to_string().contains("minbytes"), "{e}");
        let e = plan(&cli(&["all_sum"])).err().unwrap();
        assert!(e.to_string().contains("unknown collective"), "{e}");
        let e = plan(&cli(&["-d", "bfloat16"])).err().unwrap();
        assert!(e.to_string().contains("bfloat16"), "{e}");
        let e = plan(&cli(&["-o", "avg"])).err().unwrap();
        assert!(e.to_string().contains("avg"), "{e}");
        // A data-movement collective ignores the reduction.
        assert!(plan(&cli(&["all_gather", "-o", "avg"])).is_ok());
        assert!(plan(&cli(&["-d", "bfloat16", "--backend", "nccl"])).is_ok());
        assert!(Cli::try_parse_from(["x", "-d", "complex"]).is_err());
        assert!(Cli::try_parse_from(["x", "-b", "0"]).is_err());
        assert!(Cli::try_parse_from(["x", "-f", "1"]).is_err());
    }

    #[test]
    fn all_expands_and_aliases_resolve() {
        let p = plan(&cli(&["all"])).unwrap();
        assert_eq!(p.collectives.len(), 6);
        let p = plan(&cli(&["allreduce", "bcast"])).unwrap();
        assert_eq!(p.collectives[1].name, "broadcast");
    }
}
