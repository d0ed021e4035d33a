//! One size of a ping-pong between a pair ([`PairTool`]): the timed loop in blocks (the
//! ping-pong and one timestamp per iteration), the histogram, the peer's report, the row;
//! and the table perftest prints.

use anyhow::Result;

use base::clock::{BlockStamps, LoopClock, BLOCK};
use base::interrupt;
use base::link::{recv_json, send_json};
use p2p::{self, PairTool, Plan, SizeRun};
use results::{LatencyHistogram, LatencyResult, TestResult};
use transport::{self, LatencyEndpoint, Op, Role, SideReport};

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

/// The latency tool.
pub(crate) struct Latency;

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
