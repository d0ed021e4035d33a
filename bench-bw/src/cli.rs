//! bench-bw's command line: perftest's options (`P2pArgs` and `GpuArgs` shared with
//! bench-lat, the bandwidth ones here), resolved at the edge into the run's [`Plan`]. Every
//! combination that cannot work is refused here, before anything connects.

use anyhow::Result;
use clap::Parser;

use p2p::{self, Plan};
use p2p_cli::{GpuArgs, P2pArgs};
use transport::{self, Op};

/// Streaming bandwidth benchmark (perftest-compatible options).
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) p2p: P2pArgs,

    #[command(flatten)]
    pub(crate) gpu: GpuArgs,

    /// Measure both directions at once: bw is the sum, as perftest -b, and the JSON keeps
    /// each direction apart (`directions`). Sweeps (mpirun/srun or --hosts with a
    /// --pattern other than pairs) do this by default; see docs/directions.md.
    #[arg(short = 'b', long)]
    pub(crate) bidirectional: bool,

    /// Measure one direction only (initiator to responder), also in sweeps: today's
    /// perftest behaviour without -b.
    #[arg(
        long = "one-way",
        alias = "no-bidirectional",
        conflicts_with = "bidirectional"
    )]
    pub(crate) one_way: bool,

    /// TCP: stream i leaves from source port PORT+i, so each flow's ECMP path is chosen
    /// (and recorded in `flows`); default: the kernel picks.
    #[arg(long = "src-port", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) src_port: Option<u16>,

    /// Parallel streams: queue pairs (verbs) or connections (tcp).
    #[arg(short = 'q', long = "qps", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) qps: u32,

    /// Messages in flight per stream (verbs send queue depth).
    #[arg(short = 't', long = "tx-depth", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=16384))]
    pub(crate) tx_depth: u32,

    /// Completion moderation (verbs; perftest's -Q/--cq-mod): one request in N asks for a
    /// completion. Default: 100, every request above 8 KiB, the post list's length with
    /// -l; never more than -t.
    #[arg(short = 'Q', long = "cq-mod", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16384))]
    pub(crate) cq_mod: Option<u32>,

    /// Post list (verbs; perftest's -l/--post_list): chain N work requests in one
    /// ibv_post_send, one doorbell a chain, which lowers the CPU's cost per message where
    /// the message rate is CPU-bound (small messages on a 200-400 Gb/s NIC). Must fit in -t.
    #[arg(short = 'l', long = "post-list", alias = "post_list", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16384))]
    pub(crate) post_list: Option<u32>,

    /// RDMA write/read: fill the source with a pattern and count the bytes that arrived
    /// wrong at the end (reported as `check_wrong_bytes`; any makes the run fail).
    #[arg(long)]
    pub(crate) check: bool,

    /// Do not measure perftest's BW peak (perftest's -N/--noPeak): no clock stamp per post
    /// and per completion in the timed loop; the BW peak column is then the best interval.
    #[arg(short = 'N', long = "no-peak", alias = "noPeak")]
    pub(crate) no_peak: bool,

    /// Length of one throughput sample, milliseconds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub(crate) interval_ms: u64,
}

/// The run's plan from the command line.
pub(crate) fn plan(cli: &Cli) -> Result<Plan> {
    let a = &cli.p2p;
    check_posting(cli, &a.sizes(65536))?;
    let transport = a.transport_kind()?;
    // The audit each document embeds judges where this run's own traffic lands.
    probe::audit::set_suite_traffic(a.suite_traffic());
    let mut verbs = a.verbs_options();
    verbs.check = cli.check;
    verbs.src_port = cli.src_port;
    if cli.src_port.is_some() && transport != transport::TransportKind::Tcp {
        anyhow::bail!(
            "--src-port picks TCP source ports: use it with --transport tcp (verbs flows are \
             told apart by their QP numbers)"
        );
    }
    verbs.cq_mod = cli.cq_mod;
    verbs.post_list = cli.post_list.filter(|&n| n > 1);
    if (cli.cq_mod.is_some() || cli.post_list.is_some())
        && transport != transport::TransportKind::Verbs
    {
        anyhow::bail!(
            "-Q/--cq-mod and -l/--post-list shape how work requests are posted to a verbs \
             queue pair; over {} there is none: drop them, or run with --transport verbs",
            transport.name()
        );
    }
    cli.gpu.apply(&mut verbs);
    if cli.check && a.op == Op::Send && verbs.gpu.is_none() {
        anyhow::bail!(
            "--check verifies one-sided transfers: use it with --test write or --test read \
             (with GPU buffers, --use-cuda, it also checks sends: what the copies and the NIC \
             delivered into GPU memory)"
        );
    }
    transport::gpudirect::prepare(
        transport,
        a.op,
        transport::gpudirect::Bench::Bandwidth,
        &mut verbs,
    )?;
    a.check_verbs(transport, &verbs)?;
    let mut local = serde_json::Map::new();
    local.insert("interval_ms".into(), cli.interval_ms.into());
    local.extend(transport::gpudirect::recorded_options(&verbs));
    let mut extra = serde_json::Map::new();
    if transport == transport::TransportKind::Tcp && cli.check {
        // Staged TCP checks on the receiving side: both sides must stage and check.
        extra.insert("check".into(), true.into());
    }
    Ok(Plan {
        tool: "bench-bw",
        test: format!("{}_bw", a.op.name()),
        op: a.op,
        transport,
        sizes: a.sizes(65536),
        iterations: a.iters.unwrap_or(default_iterations(a.op)),
        duration_s: a.duration,
        // perftest streams without a warm-up in iteration mode; a verbs step posts a whole
        // queue depth, so TCP's 2 x depth steps would be hundreds of extra messages.
        warmup: a
            .warmup
            .unwrap_or(if transport == transport::TransportKind::Verbs {
                0
            } else {
                2 * u64::from(cli.tx_depth)
            }),
        streams: cli.qps,
        tx_depth: cli.tx_depth,
        bidirectional: bidirectional(cli),
        timeout: a.timeout(),
        verbs,
        extra,
        local,
    })
}

/// `-Q` and `-l` as perftest takes them (verbs only, checked once the transport is
/// known): a chain fits in the send queue; with both, the moderation divides the chain
/// (each chain's last request is then signaled). Warns, as perftest does, when moderation
/// was asked for messages above 8 KiB.
fn check_posting(cli: &Cli, sizes: &[u64]) -> Result<()> {
    let list = cli.post_list.unwrap_or(1);
    if list > cli.tx_depth {
        anyhow::bail!(
            "-l {list}: a post list must fit in the send queue (-t {}): raise -t to at \
             least {list} or shorten the list",
            cli.tx_depth
        );
    }
    if let Some(q) = cli.cq_mod {
        if list > 1 && !list.is_multiple_of(q) {
            anyhow::bail!(
                "-l {list} with -Q {q}: the post list's length must be a multiple of the \
                 completion moderation (perftest's rule), so each chain ends signaled; \
                 drop -Q (it then follows -l) or pick a divisor of {list}"
            );
        }
        let large = sizes.iter().any(|&s| s > transport::CQ_MOD_SIZE_LIMIT);
        if q > 1 && large && base::launcher::is_reporting_process() {
            eprintln!(
                "bench-bw: warning: -Q {q} with messages above {} bytes: perftest warns \
                 that large messages with completion moderation can give inaccurate results",
                transport::CQ_MOD_SIZE_LIMIT
            );
        }
    }
    Ok(())
}

/// Timed iterations per size without `-n`, as perftest's defaults: 5000 for write
/// bandwidth (`DEF_ITERS_WB`), 1000 for send and read bandwidth (`DEF_ITERS`), so a table
/// of ours and one of `ib_send_bw` / `ib_read_bw` time the same number of messages. The
/// GPU copy baselines keep 5000.
fn default_iterations(op: Op) -> u64 {
    match op {
        Op::Send | Op::Read => 1000,
        _ => 5000,
    }
}

/// Both directions at once: with `-b`, and by default in a sweep (several ranks or the
/// agents paired by a pattern other than `pairs`), where a one-way figure would miss a
/// bad transmitter on the side that never sent; `--one-way` keeps one direction.
fn bidirectional(cli: &Cli) -> bool {
    let a = &cli.p2p;
    let launched = a.hosts.is_some()
        || base::launcher::resolve_launcher(a.launcher) == base::launcher::Launcher::Mpi;
    let sweep = launched && !matches!(a.pattern, p2p::pattern::PatternSpec::Pairs);
    cli.bidirectional || (sweep && !cli.one_way)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_iterations_are_perftest_s() {
        // perftest: DEF_ITERS_WB (5000) for ib_write_bw, DEF_ITERS (1000) otherwise.
        assert_eq!(default_iterations(Op::Write), 5000);
        assert_eq!(default_iterations(Op::Send), 1000);
        assert_eq!(default_iterations(Op::Read), 1000);
    }
}
