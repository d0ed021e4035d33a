//! bench-bw: streaming bandwidth and message rate, perftest's `ib_send_bw` / `ib_write_bw`
//! / `ib_read_bw` over verbs, and the same stream over TCP as the baseline (what iperf3
//! measures). Unidirectional or `-b` bidirectional, `-q` parallel streams, `-t` messages in
//! flight; throughput is sampled every interval so stability can be judged, and the CPU
//! cores each side burned are reported beside it. With `--use-cuda` the buffers are GPU
//! memory (GPUDirect RDMA over verbs, staged over TCP); `--test h2d|d2h|d2d|p2p` measures
//! the GPU copy baselines instead (`copy.rs`).

mod copy;
mod directions;
mod incast;
mod peak;

use anyhow::Result;
use clap::Parser;

use base::clock::LoopClock;
use base::cpu::CpuMeter;
use base::interrupt;
use base::link::{recv_json, send_json};
use directions::LoopFigures;
use p2p::{self, PairTool, Plan, SizeRun};
use p2p_cli::{GpuArgs, P2pArgs};
use results::units::{gbit_s, mpps};
use results::{BandwidthResult, BandwidthSummary, CpuUse, TestResult};
use transport::{self, BandwidthEndpoint, Op, Role, SideReport};

/// Streaming bandwidth benchmark (perftest-compatible options).
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    p2p: P2pArgs,

    #[command(flatten)]
    gpu: GpuArgs,

    /// Measure both directions at once: bw is the sum, as perftest -b, and the JSON keeps
    /// each direction apart (`directions`). Sweeps (mpirun/srun or --hosts with a
    /// --pattern other than pairs) do this by default; see docs/directions.md.
    #[arg(short = 'b', long)]
    bidirectional: bool,

    /// Measure one direction only (initiator to responder), also in sweeps: today's
    /// perftest behaviour without -b.
    #[arg(
        long = "one-way",
        alias = "no-bidirectional",
        conflicts_with = "bidirectional"
    )]
    one_way: bool,

    /// TCP: stream i leaves from source port PORT+i, so each flow's ECMP path is chosen
    /// (and recorded in `flows`); default: the kernel picks.
    #[arg(long = "src-port", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    src_port: Option<u16>,

    /// Parallel streams: queue pairs (verbs) or connections (tcp).
    #[arg(short = 'q', long = "qps", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    qps: u32,

    /// Messages in flight per stream (verbs send queue depth).
    #[arg(short = 't', long = "tx-depth", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=16384))]
    tx_depth: u32,

    /// Completion moderation (verbs; perftest's -Q/--cq-mod): one request in N asks for a
    /// completion. Default: 100, every request above 8 KiB, the post list's length with
    /// -l; never more than -t.
    #[arg(short = 'Q', long = "cq-mod", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16384))]
    cq_mod: Option<u32>,

    /// Post list (verbs; perftest's -l/--post_list): chain N work requests in one
    /// ibv_post_send, one doorbell a chain, which lowers the CPU's cost per message where
    /// the message rate is CPU-bound (small messages on a 200-400 Gb/s NIC). Must fit in -t.
    #[arg(short = 'l', long = "post-list", alias = "post_list", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16384))]
    post_list: Option<u32>,

    /// RDMA write/read: fill the source with a pattern and count the bytes that arrived
    /// wrong at the end (reported as `check_wrong_bytes`; any makes the run fail).
    #[arg(long)]
    check: bool,

    /// Do not measure perftest's BW peak (perftest's -N/--noPeak): no clock stamp per post
    /// and per completion in the timed loop; the BW peak column is then the best interval.
    #[arg(short = 'N', long = "no-peak", alias = "noPeak")]
    no_peak: bool,

    /// Length of one throughput sample, milliseconds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    interval_ms: u64,
}

/// What the timed loop of one side saw.
struct Transfer {
    sent: u64,
    received: u64,
    seconds: f64,
    samples: Vec<u64>,
    cores: f64,
    complete: bool,
    /// perftest's post and completion stamps, when the loop took them.
    stamps: Option<results::peak::MessageStamps>,
}

/// At most this much data is sent to warm up, whatever the message count says: 2 x depth
/// messages of 1 GiB would be half a terabyte before the first timed byte, with no point
/// where Ctrl-C or SIGTERM could stop it.
const WARMUP_MAX_BYTES: u64 = 256 << 20;

/// The warm-up messages of a size: the plan's count, bounded by [`WARMUP_MAX_BYTES`], at
/// least one when the plan asks for any.
fn warmup_messages(warmup: u64, size: u64) -> u64 {
    if warmup == 0 {
        return 0;
    }
    warmup.min((WARMUP_MAX_BYTES / size.max(1)).max(1))
}

/// The timed loop: advance the transfer, stamp, and at each interval boundary note the
/// messages completed. Everything else waits until the loop is over.
fn stream(
    ep: &mut dyn BandwidthEndpoint,
    clock: &LoopClock,
    (plan, size): (&Plan, u64),
    interval_ns: u64,
    stamp: bool,
) -> Result<Transfer> {
    for _ in 0..warmup_messages(plan.warmup, size) {
        if interrupt::interrupted() {
            break;
        }
        ep.step()?;
    }
    ep.quiesce()?;
    if stamp {
        ep.stamp_messages(clock, plan.messages());
    }
    let limit = if plan.duration_s.is_some() {
        u64::MAX
    } else {
        plan.messages()
    };
    let budget_ns = plan.duration_s.map_or(u64::MAX, |d| (d * 1e9) as u64);
    let mut samples = Vec::new();
    let mut next_ns = interval_ns;
    let (mut sent, mut at_last) = (0u64, 0u64);
    let mut complete = true;
    let cpu = CpuMeter::start();
    let start = clock.raw();
    // The loop's last clock read: right after the last completion it reaped.
    let mut last;
    loop {
        sent += ep.step()?;
        last = clock.raw();
        let elapsed = clock.nanos(start, last);
        if elapsed >= next_ns {
            // A step that stalled across several boundaries closes each of them: the
            // intervals it spanned get what completed in them (nothing), so a stall shows
            // up as a dip instead of vanishing from the samples.
            while elapsed >= next_ns {
                samples.push(sent - at_last);
                at_last = sent;
                next_ns += interval_ns;
            }
            if interrupt::interrupted() {
                complete = false;
                break;
            }
        }
        if sent >= limit || elapsed >= budget_ns {
            break;
        }
    }
    let received = ep.finish()?;
    let stamps = ep.take_stamps();
    let seconds = if ep.complete_when_reaped() {
        // Verbs: what completed by the last read is what arrived by then (perftest's end
        // stamp); a duration's tail completing in `finish` is outside the window.
        clock.seconds(start, last)
    } else {
        // TCP: the receiver's acknowledgement in `finish` is when the bytes arrived.
        sent += ep.drained();
        clock.seconds(start, clock.raw())
    };
    Ok(Transfer {
        sent,
        received,
        seconds,
        samples,
        cores: cpu.cores(),
        complete,
        stamps,
    })
}

struct Bandwidth {
    interval_ms: u64,
    no_peak: bool,
}

impl PairTool for Bandwidth {
    fn run_size(&mut self, run: &mut SizeRun) -> Result<Option<TestResult>> {
        let plan = run.plan;
        let size = run.spec.size;
        let interval_ns = self.interval_ms * 1_000_000;
        let (mut ep, setup) =
            transport::connect_bandwidth(plan.transport, &run.spec, run.link, run.conn)?;
        let active = run.spec.role == Role::Initiator || plan.bidirectional;
        let stamp = peak::not_measured(plan, self.no_peak).is_none();
        let mine = if active {
            Some(stream(
                &mut *ep,
                run.clock,
                (plan, size),
                interval_ns,
                stamp,
            )?)
        } else {
            let cpu = CpuMeter::start();
            ep.serve()?;
            let cores = cpu.cores();
            let report = ep.side_report()?;
            drop(ep);
            send_json(run.link, &cores)?;
            send_json(run.link, &report)?;
            return Ok(None);
        };
        let t = mine.expect("active side measured");
        let report = ep.side_report()?;
        drop(ep);
        let interval_s = interval_ns as f64 / 1e9;
        let my_loop = LoopFigures {
            sent: t.sent,
            seconds: t.seconds,
            peak_gbit_s: t
                .samples
                .iter()
                .map(|&m| gbit_s(m * size, interval_s))
                .fold(0.0, f64::max),
            perftest_peak_gbit_s: t
                .stamps
                .as_ref()
                .and_then(|s| peak::gbit_s_of(s, run.clock, size)),
        };
        if run.spec.role == Role::Responder {
            send_json(run.link, &t.cores)?;
            send_json(run.link, &report)?;
            // Bidirectional only: this side's own direction, for the per-direction figures.
            send_json(run.link, &my_loop)?;
            return Ok(None);
        }
        let responder_cores: f64 = recv_json(run.link)?;
        let theirs: SideReport = recv_json(run.link)?;
        let their_loop: Option<LoopFigures> = if plan.bidirectional {
            Some(recv_json(run.link)?)
        } else {
            None
        };
        let directions = match &their_loop {
            Some(tl) => directions::directions(
                run.pair,
                size,
                [&my_loop, tl],
                [&report.received, &theirs.received],
            ),
            None => Vec::new(),
        };
        let flows = if plan.streams <= 1 && plan.verbs.src_port.is_none() {
            Vec::new()
        } else if plan.transport == transport::TransportKind::Verbs {
            directions::verbs_flows(
                run.pair,
                size,
                plan.bidirectional,
                (&report.sent, t.seconds),
                (&theirs.sent, their_loop.as_ref().map_or(0.0, |l| l.seconds)),
            )
        } else {
            directions::tcp_flows(
                run.pair,
                plan.bidirectional,
                &report.received,
                &theirs.received,
            )
        };
        // The peer's warm-up messages reach our receiver too; they are not part of the run.
        let messages = t.sent
            + t.received
                .saturating_sub(warmup_messages(plan.warmup, size));
        let bytes = messages * size;
        let avg = gbit_s(bytes, t.seconds);
        let interval_gbit_s: Vec<f64> = t
            .samples
            .iter()
            .map(|&m| gbit_s(m * size, interval_s))
            .collect();
        let peak = interval_gbit_s.iter().copied().fold(avg, f64::max);
        // perftest -b adds the two sides' peaks, each over its own stamps.
        let perftest_peak = match &their_loop {
            Some(tl) => my_loop
                .perftest_peak_gbit_s
                .zip(tl.perftest_peak_gbit_s)
                .map(|(a, b)| a + b),
            None => my_loop.perftest_peak_gbit_s,
        };
        Ok(Some(TestResult::Bandwidth(BandwidthResult {
            test: plan.test.clone(),
            transport: plan.transport.name().into(),
            size_bytes: size,
            iterations: messages,
            duration_s: t.seconds,
            bidirectional: plan.bidirectional,
            streams: plan.streams,
            tx_depth: plan.tx_depth,
            cq_mod: (plan.transport == transport::TransportKind::Verbs)
                .then(|| plan.verbs.moderation(size, u64::from(plan.tx_depth.max(1)))),
            post_list: (plan.transport == transport::TransportKind::Verbs)
                .then(|| plan.verbs.post_list.unwrap_or(1)),
            bw_gbit_s: BandwidthSummary {
                avg,
                peak,
                perftest_peak,
            },
            msg_rate_mpps: mpps(messages, t.seconds),
            interval_s,
            interval_gbit_s,
            cpu: CpuUse {
                initiator_cores: t.cores,
                responder_cores,
            },
            pair: run.pair.clone(),
            complete: t.complete,
            counters: transport::counter_deltas(&report, &theirs),
            check_wrong_bytes: transport::check_wrong_bytes(&report, &theirs),
            memory: transport::memory_use(&report, &theirs),
            setup: Some(setup),
            directions,
            flows,
        })))
    }

    fn print_header(&self, plan: &Plan) {
        let line = "-".repeat(104);
        println!("{line}");
        println!(
            " {} test over {}{}, {} stream(s), tx depth {}, {}",
            plan.test,
            plan.transport.name(),
            if plan.bidirectional {
                " (bidirectional: sum of both directions)"
            } else {
                ""
            },
            plan.streams,
            plan.tx_depth,
            plan.duration_s.map_or(
                format!(
                    "{} iterations{}",
                    plan.iterations,
                    if plan.streams > 1 { " per stream" } else { "" }
                ),
                |d| format!("{d} s per size")
            ),
        );
        if plan.transport == transport::TransportKind::Verbs {
            let v = &plan.verbs;
            let depth = u64::from(plan.tx_depth.max(1));
            let sizes = &plan.sizes;
            let mods: std::collections::BTreeSet<u64> =
                sizes.iter().map(|&s| v.moderation(s, depth)).collect();
            let mods: Vec<String> = mods.iter().map(u64::to_string).collect();
            println!(
                " CQ moderation {}{}, post list {}",
                mods.join("/"),
                if v.cq_mod.is_none() && mods.len() > 1 {
                    " (1 above 8 KiB, as perftest)"
                } else {
                    ""
                },
                v.post_list.unwrap_or(1)
            );
        }
        if let Some(m) = transport::gpudirect::describe(&plan.verbs) {
            println!(" buffers: {m}");
        }
        println!(" {}", peak::describe(plan, self.no_peak, self.interval_ms));
        println!("{line}");
        println!(
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]   CPU client[cores]   CPU server[cores]"
        );
    }

    fn print_row(&self, result: &TestResult) {
        if let TestResult::Bandwidth(r) = result {
            let check = match r.check_wrong_bytes {
                Some(0) => "  check: ok".to_string(),
                Some(n) => format!("  check: {n} WRONG BYTES"),
                None => String::new(),
            };
            println!(
                " {:<10} {:<14} {:<18.2} {:<20.2} {:<15.6} {:<19.2} {:.2}{}{check}",
                r.size_bytes,
                r.iterations,
                r.bw_gbit_s.perftest_peak.unwrap_or(r.bw_gbit_s.peak),
                r.bw_gbit_s.avg,
                r.msg_rate_mpps,
                r.cpu.initiator_cores,
                r.cpu.responder_cores,
                if r.complete { "" } else { "  (incomplete)" }
            );
        }
    }
}

fn plan(cli: &Cli) -> Result<Plan> {
    let a = &cli.p2p;
    check_posting(cli, &a.sizes(65536))?;
    let transport = a.transport_kind()?;
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

fn main() {
    let cli = Cli::parse();
    if cli.p2p.op.is_copy() {
        std::process::exit(copy::run(&cli.p2p, &cli.gpu, cli.interval_ms));
    }
    if let p2p::pattern::PatternSpec::Incast(n) = cli.p2p.pattern {
        std::process::exit(incast::run(&cli.p2p, n, cli.bidirectional, || plan(&cli)));
    }
    if let p2p::pattern::PatternSpec::Isolation = cli.p2p.pattern {
        eprintln!(
            "bench-bw: error: --pattern isolation is bench-lat's (reach, not bandwidth): \
             mpirun ... bench-lat --pattern isolation --tenants FILE"
        );
        std::process::exit(base::exit::ERROR);
    }
    let code = match plan(&cli) {
        Ok(plan) => p2p_cli::launch::run(
            &cli.p2p.launch(),
            plan,
            &mut Bandwidth {
                interval_ms: cli.interval_ms,
                no_peak: cli.no_peak,
            },
        ),
        Err(e) => {
            eprintln!("bench-bw: error: {e:#}");
            base::exit::ERROR
        }
    };
    std::process::exit(code);
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

    #[test]
    fn warm_up_is_bounded_in_bytes_not_only_in_messages() {
        // TCP's default, 2 x depth 128: unchanged at the sizes people measure.
        assert_eq!(warmup_messages(256, 64 << 10), 256);
        assert_eq!(warmup_messages(256, 1 << 20), 256);
        // 256 MiB at most: 32 messages of 8 MiB, one of 1 GiB (it was 256 GiB).
        assert_eq!(warmup_messages(256, 8 << 20), 32);
        assert_eq!(warmup_messages(256, 1 << 30), 1);
        assert_eq!(warmup_messages(0, 1 << 30), 0);
    }
}
