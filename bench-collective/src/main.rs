//! bench-collective: collective benchmarks the way nccl-tests runs them (AllReduce,
//! AllGather, ReduceScatter, AlltoAll, Broadcast, Reduce, SendRecv, Scatter, Gather,
//! HyperCube), over MPI on host memory or NCCL on GPU memory, with nccl-tests' options,
//! table, time and bus-bandwidth arithmetic, plus what nccl-tests lacks: a per-iteration
//! view (histogram of the slowest rank's iteration times, the slowest rank named),
//! efficiency against the link rate, a scaling sweep in one launch, and the suite's JSON
//! schema.
//!
//! Data flow: options (`cli`) -> plan (`plan`) -> MPI job, teams (`scaling`) and
//! backend (`backend/`) -> per size, out of place then in place (`measure`): warm up,
//! time the loop on every rank, combine the ranks' loop times as nccl-tests does and the
//! per-iteration times into the slowest rank's (`timing`), check one extra call's output
//! (`data`) -> rows (`report`) -> one JSON document written by rank 0 (`harness`). Each
//! collective is one small file in `colls/`.

// Without MPI there is nothing to launch: the backends and harness compile out.
#![cfg_attr(not(feature = "mpi"), allow(dead_code))]

use clap::Parser;

mod backend;
mod cli;
mod colls;
mod data;
mod ep;
#[cfg(feature = "mpi")]
mod ep_run;
#[cfg(feature = "mpi")]
mod fault;
mod fp8;
#[cfg(feature = "mpi")]
mod harness;
#[cfg(feature = "mpi")]
mod measure;
mod plan;
mod report;
mod scaling;
mod timing;

pub(crate) use cli::{BackendArg, Cli, EpModeArg, EpUnitArg, EpVariantArg};
use plan::Plan;

fn main() {
    let cli = Cli::parse();
    let code = match plan::resolve(cli) {
        Ok(plan) => run(&plan),
        Err(e) => {
            if base::launcher::is_reporting_process() {
                eprintln!("bench-collective: error: {e:#}");
            }
            base::exit::ERROR
        }
    };
    std::process::exit(code);
}

#[cfg(feature = "mpi")]
fn run(plan: &Plan) -> i32 {
    harness::run(plan)
}

#[cfg(not(feature = "mpi"))]
fn run(_: &Plan) -> i32 {
    eprintln!("bench-collective: error: built without MPI (feature `mpi`); rebuild with it");
    base::exit::ERROR
}
