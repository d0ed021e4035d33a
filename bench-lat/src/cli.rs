//! bench-lat's command line (perftest's options, shared with bench-bw in `p2p_cli`),
//! resolved at the edge into the run's [`Plan`].

use anyhow::Result;
use clap::Parser;

use p2p::Plan;
use p2p_cli::{GpuArgs, P2pArgs};

/// Ping-pong latency benchmark (perftest-compatible options).
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) p2p: P2pArgs,

    #[command(flatten)]
    pub(crate) gpu: GpuArgs,
}

/// The run's plan from the command line.
pub(crate) fn plan(cli: &Cli) -> Result<Plan> {
    let a = &cli.p2p;
    if a.op.is_copy() {
        anyhow::bail!(
            "--test {} is a GPU copy baseline of bench-bw (bench-bw --test {} --use-cuda N)",
            a.op.name(),
            a.op.name()
        );
    }
    let transport = a.transport_kind()?;
    // The audit each document embeds judges where this run's own traffic lands.
    probe::audit::set_suite_traffic(a.suite_traffic());
    let mut verbs = a.verbs_options();
    cli.gpu.apply(&mut verbs);
    transport::gpudirect::prepare(
        transport,
        a.op,
        transport::gpudirect::Bench::Latency,
        &mut verbs,
    )?;
    a.check_verbs(transport, &verbs)?;
    Ok(Plan {
        tool: "bench-lat",
        test: format!("{}_lat", a.op.name()),
        op: a.op,
        transport,
        sizes: a.sizes(2),
        iterations: a.iters.unwrap_or(1000),
        duration_s: a.duration,
        warmup: a.warmup.unwrap_or(100),
        streams: 1,
        tx_depth: 1,
        bidirectional: false,
        timeout: a.timeout(),
        local: transport::gpudirect::recorded_options(&verbs),
        verbs,
        extra: Default::default(),
    })
}
