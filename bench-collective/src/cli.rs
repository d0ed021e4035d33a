//! bench-collective's command line, nccl-tests' options and the suite's: `Cli`, parsed by
//! clap, which `plan::resolve` turns into the run's plan (every refusal is there).

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Parser, ValueEnum};

use transport::collective::{DataType, RedOp};

use crate::timing::Average;
use crate::{colls, ep};

/// `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum BackendArg {
    /// MPI collectives on host memory.
    Mpi,
    /// NCCL collectives on GPU memory (one GPU per rank).
    Nccl,
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

/// `-d`: the library's type names, with nccl-tests' aliases (`half`, `float`, ...).
fn datatype_parser() -> impl TypedValueParser<Value = DataType> {
    PossibleValuesParser::new(
        DataType::ALL.map(|t| PossibleValue::new(t.name()).aliases(t.aliases().iter().copied())),
    )
    .map(|s| DataType::from_name(&s).expect("a possible value"))
}

/// `-o`.
fn op_parser() -> impl TypedValueParser<Value = RedOp> {
    PossibleValuesParser::new(RedOp::ALL.map(|o| o.name()))
        .map(|s| RedOp::from_name(&s).expect("a possible value"))
}

/// Collective benchmarks with nccl-tests' options and table (MPI or NCCL backend).
///
/// Run under mpirun or srun, one rank per GPU for --backend nccl:
///   mpirun -np 8 bench-collective all_reduce -b 8 -e 128M -f 2 --backend nccl --json r.json
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
pub(crate) struct Cli {
    #[arg(value_name = "COLLECTIVE", default_value = "all_reduce", help = collectives_help())]
    pub(crate) collectives: Vec<String>,

    /// Smallest size in bytes (K, M, G suffixes), as nccl-tests' size column.
    /// ep_dispatch and ep_combine: tokens per rank (or bytes with --ep-unit bytes);
    /// default 4096 (--ep-mode ht) or 128 (ll).
    #[arg(short = 'b', long = "minbytes", value_parser = parse_size)]
    pub(crate) minbytes: Option<u64>,

    /// Largest size in bytes.
    #[arg(short = 'e', long = "maxbytes", value_parser = parse_size)]
    pub(crate) maxbytes: Option<u64>,

    /// Multiply the size by this factor between steps (default 2).
    #[arg(short = 'f', long = "stepfactor", value_parser = clap::value_parser!(u64).range(2..))]
    pub(crate) stepfactor: Option<u64>,

    /// Add this many bytes between steps instead of multiplying.
    #[arg(short = 'i', long = "stepbytes", value_parser = parse_size, conflicts_with = "stepfactor")]
    pub(crate) stepbytes: Option<u64>,

    /// GPUs per rank (nccl-tests -g): 1, the only value, as nearly every nccl-tests line
    /// gives it; launch one rank per GPU for more.
    #[arg(short = 'g', long = "ngpus", default_value_t = 1, value_parser = parse_ngpus)]
    pub(crate) ngpus: u32,

    /// Timed iterations per size and mode.
    #[arg(short = 'n', long = "iters", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub(crate) iters: u64,

    /// Untimed iterations before the timed ones, every size and mode.
    #[arg(
        short = 'w',
        long = "warmup_iters",
        visible_alias = "warmup-iters",
        default_value_t = 5
    )]
    pub(crate) warmup: u64,

    /// Check results (nccl-tests -c): 1 = count wrong elements of one extra call per size
    /// and mode (the #wrong column), 0 = don't. `-c` alone means 1.
    #[arg(short = 'c', long = "check", default_value_t = 1, num_args = 0..=1, default_missing_value = "1",
          value_parser = clap::value_parser!(u32).range(0..=1))]
    pub(crate) check: u32,

    /// Reduction for all_reduce, reduce_scatter and reduce (avg: NCCL only).
    #[arg(short = 'o', long = "op", default_value = "sum", value_parser = op_parser())]
    pub(crate) op: RedOp,

    /// Element type (float16, bfloat16: NCCL only).
    #[arg(short = 'd', long = "datatype", default_value = "float32", value_parser = datatype_parser())]
    pub(crate) datatype: DataType,

    /// Root rank of broadcast, reduce, scatter and gather.
    #[arg(short = 'r', long = "root", default_value_t = 0)]
    pub(crate) root: u32,

    /// How the ranks' loop times become the time column (nccl-tests -a): 0 rank 0's,
    /// 1 the mean, 2 the minimum, 3 the maximum.
    #[arg(short = 'a', long = "average", default_value = "1", value_parser = Average::parse)]
    pub(crate) average: Average,

    /// Also measure on sub-communicators of 2, 4, 8, ... ranks made of whole nodes (split
    /// by host; on one host, by rank), then on all ranks: the scaling curve in one launch.
    #[arg(long)]
    pub(crate) scaling: bool,

    /// mpi: host memory; nccl: GPU memory, one GPU per rank picked by the node-local rank.
    #[arg(long, value_enum, default_value = "mpi")]
    pub(crate) backend: BackendArg,

    /// Write the JSON result document here (rank 0, atomically; checked before measuring).
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,

    /// Longest time any rank waits for the others (start-up, a barrier, an iteration that
    /// makes no progress), seconds; then the run ends with an error instead of hanging.
    #[arg(long, default_value_t = 60.0, value_parser = parse_positive)]
    pub(crate) timeout: f64,

    /// Reference link rate for the efficiency figure, 10^9 bit/s (default: read from the
    /// RDMA port's sysfs rate, else the network interface speed).
    #[arg(long = "link-gbit-s", value_parser = parse_positive)]
    pub(crate) link_gbit_s: Option<f64>,

    /// ep_*: how tokens pick experts: uniform, node:G (at most G nodes per token),
    /// zipf:S (Zipf-skewed expert popularity), hot:R (rank 0 gets R times the traffic).
    /// Default: node:4 in --ep-mode ht (DeepEP's high-throughput routing), uniform in ll.
    #[arg(long, value_parser = ep::Routing::parse)]
    pub(crate) routing: Option<ep::Routing>,

    /// ep_*: seed of the router (every rank's routing follows from it and its rank).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,

    /// ep_*: experts each token selects.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) topk: u32,

    /// ep_*: experts in all, spread evenly over the ranks.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) experts: u32,

    /// ep_*: elements of a token's hidden vector (a multiple of 128).
    #[arg(long, default_value_t = 7168)]
    pub(crate) hidden: u64,

    /// ep_*: high-throughput (4096 tokens, routing node:4) or low-latency (128 tokens,
    /// uniform) defaults, as DeepEP's benchmarks.
    #[arg(long = "ep-mode", value_enum, default_value = "ht")]
    pub(crate) ep_mode: EpModeArg,

    /// ep_*: -b/-e count tokens per rank, or bytes of FP8 dispatch payload per rank's
    /// tokens (one copy each).
    #[arg(long = "ep-unit", value_enum, default_value = "tokens")]
    pub(crate) ep_unit: EpUnitArg,

    /// ep_* over MPI: flat (one Alltoallv) or two-stage (inside the node, then across
    /// nodes on the same local rank).
    #[arg(long = "ep-variant", value_enum, default_value = "flat")]
    pub(crate) ep_variant: EpVariantArg,

    /// ep_*: ranks per node (default: the job's ranks / its hosts; ranks of a node
    /// consecutive). Lets one host stand for several nodes.
    #[arg(long = "ranks-per-node", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) ranks_per_node: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum EpModeArg {
    Ht,
    Ll,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum EpUnitArg {
    Tokens,
    Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum EpVariantArg {
    Flat,
    #[value(name = "two-stage", alias = "two_stage")]
    TwoStage,
}

/// The positional argument's help, from the one list of collectives.
fn collectives_help() -> String {
    format!(
        "Collectives to run, in this order: {}, or `all` for every one; the expert-parallel \
         pair {} runs in a launch of its own",
        colls::ALL.map(|c| c.name).join(", "),
        colls::EP_ALL.map(|c| c.name).join(" and ")
    )
}

/// `-g`: nccl-tests drives several GPUs from one thread; this harness drives one GPU per
/// rank (one process per GPU, as NCCL recommends), so 1 is taken and anything else is
/// refused with the way to get it.
fn parse_ngpus(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(1) => Ok(1),
        Ok(n) => Err(format!(
            "{n} GPUs per rank: bench-collective drives one GPU per rank; launch {n} times \
             the ranks instead (mpirun -np <ranks x {n}>), each rank takes its node-local GPU"
        )),
        Err(_) => Err(format!("'{s}' is not a number of GPUs (give 1)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{self, Plan};

    fn plan(args: &[&str]) -> anyhow::Result<Plan> {
        let mut v = vec!["bench-collective"];
        v.extend_from_slice(args);
        plan::resolve(Cli::try_parse_from(v).unwrap())
    }

    #[test]
    fn sizes_step_like_nccl_tests() {
        let p = plan(&["-b", "8", "-e", "64"]).unwrap();
        assert_eq!(p.sizes, vec![8, 16, 32, 64]);
        let p = plan(&["-b", "8", "-e", "100", "-i", "40"]).unwrap();
        assert_eq!(p.sizes, vec![8, 48, 88]);
        let p = plan(&["-b", "1K", "-e", "1M", "-f", "4"]).unwrap();
        assert_eq!(p.sizes.len(), 6);
    }

    #[test]
    fn bad_requests_are_refused_with_a_reason() {
        let e = plan(&["-b", "64", "-e", "8"]).err().unwrap();
        assert!(e.to_string().contains("minbytes"), "{e}");
        let e = plan(&["all_sum"]).err().unwrap();
        assert!(e.to_string().contains("unknown collective"), "{e}");
        let e = plan(&["-d", "bfloat16"]).err().unwrap();
        assert!(e.to_string().contains("bfloat16"), "{e}");
        let e = plan(&["-o", "avg"]).err().unwrap();
        assert!(e.to_string().contains("avg"), "{e}");
        // A data-movement collective ignores the reduction.
        assert!(plan(&["all_gather", "-o", "avg"]).is_ok());
        assert!(plan(&["-d", "bfloat16", "--backend", "nccl"]).is_ok());
        // EP over NCCL: flat only (the two-stage regrouping is host code).
        assert!(plan(&["ep_dispatch", "--backend", "nccl"]).is_ok());
        let e = plan(&[
            "ep_dispatch",
            "--backend",
            "nccl",
            "--ep-variant",
            "two-stage",
        ])
        .err()
        .unwrap();
        assert!(e.to_string().contains("--ep-variant flat"), "{e}");
        assert!(Cli::try_parse_from(["x", "-d", "complex"]).is_err());
        assert!(Cli::try_parse_from(["x", "-b", "0"]).is_err());
        assert!(Cli::try_parse_from(["x", "-f", "1"]).is_err());
        assert!(Cli::try_parse_from(["x", "-a", "4"]).is_err());
    }

    #[test]
    fn all_expands_and_aliases_resolve() {
        let p = plan(&["all"]).unwrap();
        assert_eq!(p.collectives.len(), 10);
        assert!(p.collectives.iter().all(|c| !c.named));
        let p = plan(&["allreduce", "bcast", "send-recv"]).unwrap();
        assert_eq!(p.collectives[1].coll.name, "broadcast");
        assert_eq!(p.collectives[2].coll.name, "sendrecv");
        assert!(p.collectives[0].named);
    }

    #[test]
    fn types_take_nccl_tests_names_and_averages_their_numbers() {
        let p = plan(&["-d", "half", "--backend", "nccl", "-a", "3"]).unwrap();
        assert_eq!(p.datatype, DataType::Float16);
        assert_eq!(p.average, Average::Max);
        let p = plan(&["-d", "double"]).unwrap();
        assert_eq!(p.datatype, DataType::Float64);
        assert_eq!(p.average, Average::Avg, "nccl-tests' default");
    }
}
