//! bench-lat: one-way latency by ping-pong, perftest's `ib_send_lat` / `ib_write_lat` /
//! `ib_read_lat` over verbs, and the same ping-pong over TCP as the baseline.
//!
//! `bench-lat` alone is the server, `bench-lat HOST` the client; under `mpirun`/`srun` ranks
//! pair up (0,1), (2,3), ... and measure at the same time. The harness (the `p2p` crate)
//! pairs, sweeps sizes and writes JSON; this file holds the loop and the table.

mod isolation;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser};

use base::clock::{BlockStamps, LoopClock, BLOCK};
use base::interrupt;
use base::link::{recv_json, send_json};
use p2p::{self, PairTool, Plan, SizeRun};
use p2p_cli::{GpuArgs, P2pArgs};
use results::{LatencyHistogram, LatencyResult, TestResult};
use transport::{self, LatencyEndpoint, Op, Role, SideReport};

/// Ping-pong latency benchmark (perftest-compatible options).
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    p2p: P2pArgs,

    #[command(flatten)]
    gpu: GpuArgs,
}

/// The timed loop, in blocks of [`BLOCK`] iterations: inside a block only the ping-pong and
/// one timestamp per iteration; between blocks the stamps go into the histogram and the
/// clock budget and Ctrl-C are checked. Returns the histogram (one-way ns, or full round
/// trips for reads), iterations done, seconds, and whether it ran to the end.
fn measure(
    ep: &mut dyn LatencyEndpoint,
    clock: &LoopClock,
    iterations: u64,
    duration_s: Option<f64>,
    halve: bool,
) -> Result<(LatencyHistogram, u64, f64, bool)> {
    let mut hist = LatencyHistogram::new();
    let mut stamps = BlockStamps::new();
    let limit = if duration_s.is_some() {
        u64::MAX
    } else {
        iterations
    };
    let budget_ns = duration_s.map_or(u64::MAX, |d| (d * 1e9) as u64);
    let shift = u32::from(halve);
    let mut done = 0u64;
    let mut complete = true;
    let start = clock.raw();
    while done < limit {
        let block = (BLOCK as u64).min(limit - done) as usize;
        stamps.run(clock, block, || ep.ping())?;
        stamps.record_into(clock, &mut hist, shift);
        done += block as u64;
        if clock.nanos(start, stamps.last()) >= budget_ns {
            break;
        }
        if interrupt::interrupted() {
            complete = false;
            break;
        }
    }
    let seconds = clock.seconds(start, clock.raw());
    Ok((hist, done, seconds, complete))
}

struct Latency;

impl PairTool for Latency {
    fn run_size(&mut self, run: &mut SizeRun) -> Result<Option<TestResult>> {
        let plan = run.plan;
        let (mut ep, setup) =
            transport::connect_latency(plan.transport, &run.spec, run.link, run.conn)?;
        match run.spec.role {
            Role::Responder => {
                while ep.pong()? {}
                let report = ep.side_report()?;
                drop(ep);
                send_json(run.link, &report)?;
                Ok(None)
            }
            Role::Initiator => {
                for _ in 0..plan.warmup {
                    ep.ping()?;
                }
                // A read is one round trip by nature; perftest reports it whole.
                let halve = plan.op != Op::Read;
                let (hist, iterations, duration_s, complete) =
                    measure(&mut *ep, run.clock, plan.iterations, plan.duration_s, halve)?;
                ep.finish()?;
                let mine = ep.side_report()?;
                drop(ep);
                let theirs: SideReport = recv_json(run.link)?;
                Ok(Some(TestResult::Latency(LatencyResult {
                    test: plan.test.clone(),
                    transport: plan.transport.name().into(),
                    size_bytes: run.spec.size,
                    iterations,
                    warmup_iterations: plan.warmup,
                    duration_s,
                    latency_us: hist.summary_us(),
                    perftest_us: hist.perftest_us(),
                    histogram: hist.encode(),
                    pair: run.pair.clone(),
                    complete,
                    counters: transport::counter_deltas(&mine, &theirs),
                    memory: transport::memory_use(&mine, &theirs),
                    setup: Some(setup),
                })))
            }
        }
    }

    fn print_header(&self, plan: &Plan) {
        let line = "-".repeat(113);
        println!("{line}");
        println!(
            " {} test over {} ({}), {} iterations{}",
            plan.test,
            plan.transport.name(),
            if plan.op == Op::Read {
                "full round trip"
            } else {
                "one-way = round trip / 2"
            },
            plan.duration_s
                .map_or(plan.iterations.to_string(), |d| format!("{d} s of")),
            if plan.warmup > 0 {
                format!(" after {} warm-up", plan.warmup)
            } else {
                String::new()
            },
        );
        if let Some(m) = transport::gpudirect::describe(&plan.verbs) {
            println!(" buffers: {m}");
        }
        println!(
            " t_max, t_typical, t_avg, t_stdev and percentiles as perftest computes them (the two \
             largest samples dropped); every sample in the JSON's latency_us"
        );
        println!("{line}");
        println!(
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
        );
    }

    fn print_row(&self, result: &TestResult) {
        if let TestResult::Latency(r) = result {
            let l = &r.latency_us;
            // perftest's own figures where it computes them differently (the two largest
            // samples dropped), so the table reads as ib_*_lat's would; every sample's
            // figures are in the JSON's latency_us.
            let p = r.perftest_us.unwrap_or(results::PerftestLatency {
                t_max: l.max,
                t_typical: l.p50,
                t_avg: l.mean,
                t_stdev: l.stdev,
                p99: l.p99,
                p999: l.p999,
            });
            println!(
                " {:<7} {:<10}  {:<13.2}  {:<13.2}  {:<15.2}  {:<13.2}  {:<15.2}  {:<21.2}  {:<.2}{}",
                r.size_bytes,
                r.iterations,
                l.min,
                p.t_max,
                p.t_typical,
                p.t_avg,
                p.t_stdev,
                p.p99,
                p.p999,
                if r.complete { "" } else { "  (incomplete)" }
            );
        }
    }
}

fn plan(cli: &Cli) -> Result<Plan> {
    let a = &cli.p2p;
    if a.op.is_copy() {
        anyhow::bail!(
            "--test {} is a GPU copy baseline of bench-bw (bench-bw --test {} --use-cuda N)",
            a.op.name(),
            a.op.name()
        );
    }
    let transport = a.transport_kind()?;
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

fn main() {
    let matches = p2p_cli::pair_tests_only(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if matches!(cli.p2p.pattern, p2p::pattern::PatternSpec::Isolation) {
        std::process::exit(isolation::run(&cli.p2p));
    }
    let code = match plan(&cli) {
        Ok(plan) => p2p_cli::launch::run(&cli.p2p.launch(), plan, &mut Latency),
        Err(e) => {
            eprintln!("bench-lat: error: {e:#}");
            base::exit::ERROR
        }
    };
    std::process::exit(code);
}
