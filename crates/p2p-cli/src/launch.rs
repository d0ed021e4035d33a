//! The launch: which coordinator a point-to-point run gets, picked here, above the
//! driver and every coordinator, so the driver knows the trait only. `--serve` makes this
//! process an agent, `--hosts` the agents' coordinator; otherwise an MPI launcher's
//! environment (or `--launcher mpi`) gives the MPI coordinator, and no launcher the
//! standalone handshake (perftest's server and client).

use anyhow::Result;

use base::clock::LoopClock;
use base::launcher::{is_reporting_process, resolve_launcher, Launcher};
use base::{exit, interrupt};
use p2p::coordinator::Coordinator;
use p2p::driver::{run_rank, RunCtx};
use p2p::{Launch, PairTool, Plan};

/// Runs a point-to-point tool to completion and returns the process exit code.
pub fn run(launch: &Launch, plan: Plan, tool: &mut dyn PairTool) -> i32 {
    if launch.serve {
        return agents::serve::run(launch, plan, tool);
    }
    if launch.hosts.is_some() {
        return agents::conduct::run(launch, plan, tool);
    }
    interrupt::install();
    match drive(launch, plan, tool) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}: error: {e:#}", base::output::tool_name());
            exit::ERROR
        }
    }
}

/// Starts this process's coordinator and runs its part of the run.
fn drive(launch: &Launch, mut plan: Plan, tool: &mut dyn PairTool) -> Result<i32> {
    let clock = LoopClock::new();
    let mpi = resolve_launcher(launch.launcher) == Launcher::Mpi;
    if !mpi || is_reporting_process() {
        base::output::check_writable(launch.json.as_deref())?;
    }
    let started_at = results::provenance::now_rfc3339();
    let overhead_ns = clock.loop_overhead_ns();
    let mut coord: Box<dyn Coordinator> = if mpi {
        start_mpi(launch, &mut plan)?
    } else {
        Box::new(p2p::standalone::Standalone::start(launch, &mut plan)?)
    };
    let ctx = RunCtx {
        clock: &clock,
        started_at,
        overhead_ns,
    };
    run_rank(coord.as_mut(), launch, &plan, tool, ctx)
}

#[cfg(feature = "mpi")]
fn start_mpi(launch: &Launch, plan: &mut Plan) -> Result<Box<dyn Coordinator>> {
    Ok(Box::new(p2p::mpi::Mpi::start(launch, plan)?))
}

#[cfg(not(feature = "mpi"))]
fn start_mpi(_: &Launch, _: &mut Plan) -> Result<Box<dyn Coordinator>> {
    anyhow::bail!("this binary was built without MPI support (feature `mpi`): rebuild with it, or run standalone (--launcher standalone)")
}
