//! One size of a bandwidth run between a pair ([`PairTool`]): both sides stream (or the
//! passive one serves), the responder hands its figures over the control link, and the
//! initiator writes the row: perftest's average and peak, each direction apart when both
//! ran, the flows, the CPU of both sides, the NIC counters' deltas. Also the table
//! perftest prints.

use anyhow::Result;

use base::cpu::CpuMeter;
use base::link::{recv_json, send_json};
use p2p::{PairTool, Plan, SizeRun};
use results::units::{gbit_s, mpps};
use results::{BandwidthResult, BandwidthSummary, CpuUse, TestResult};
use transport::{self, Role, SideReport};

use crate::directions::{self, LoopFigures};
use crate::peak;
use crate::stream::{stream, warmup_messages, Transfer};

/// The bandwidth tool: the interval of its samples, and whether perftest's peak is off.
pub(crate) struct Bandwidth {
    pub(crate) interval_ms: u64,
    pub(crate) no_peak: bool,
}

/// What the responder hands the initiator after its loop: its CPU, its side's report,
/// and (both directions at once) its own direction's loop figures.
struct Theirs {
    cores: f64,
    report: SideReport,
    their_loop: Option<LoopFigures>,
}

impl PairTool for Bandwidth {
    fn run_size(&mut self, run: &mut SizeRun) -> Result<Option<TestResult>> {
        let plan = run.plan;
        let size = run.spec.size;
        let interval_ns = self.interval_ms * 1_000_000;
        let (mut ep, setup) =
            transport::connect_bandwidth(plan.transport, &run.spec, run.link, run.conn)?;
        let active = run.spec.role == Role::Initiator || plan.bidirectional;
        if !active {
            let (cores, report) = serve(&mut *ep)?;
            drop(ep);
            send_json(run.link, &cores)?;
            send_json(run.link, &report)?;
            return Ok(None);
        }
        let stamp = peak::not_measured(plan, self.no_peak).is_none();
        let t = stream(&mut *ep, run.clock, (plan, size), interval_ns, stamp)?;
        let report = ep.side_report()?;
        drop(ep);
        let interval_s = interval_ns as f64 / 1e9;
        let my_loop = loop_figures(&t, run, interval_s);
        if run.spec.role == Role::Responder {
            send_json(run.link, &t.cores)?;
            send_json(run.link, &report)?;
            // Bidirectional only: this side's own direction, for the per-direction figures.
            send_json(run.link, &my_loop)?;
            return Ok(None);
        }
        let theirs = Theirs {
            cores: recv_json(run.link)?,
            report: recv_json(run.link)?,
            their_loop: if plan.bidirectional {
                Some(recv_json(run.link)?)
            } else {
                None
            },
        };
        Ok(Some(TestResult::Bandwidth(row(
            run, &t, &report, &my_loop, &theirs, interval_s, setup,
        ))))
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

/// The passive side of a one-way run: it only receives; its CPU and report go to the
/// initiator once the endpoint is closed.
fn serve(ep: &mut dyn transport::BandwidthEndpoint) -> Result<(f64, SideReport)> {
    let cpu = CpuMeter::start();
    ep.serve()?;
    let cores = cpu.cores();
    Ok((cores, ep.side_report()?))
}

/// This side's own direction: what it sent in how long, its best interval, perftest's peak
/// over its stamps.
fn loop_figures(t: &Transfer, run: &SizeRun, interval_s: f64) -> LoopFigures {
    let size = run.spec.size;
    LoopFigures {
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
    }
}

/// The flows of a run of several streams (or with chosen source ports): per QP over verbs,
/// per connection over TCP.
fn flows(
    run: &SizeRun,
    t: &Transfer,
    report: &SideReport,
    theirs: &Theirs,
) -> Vec<results::FlowFigures> {
    let plan = run.plan;
    if plan.streams <= 1 && plan.verbs.src_port.is_none() {
        Vec::new()
    } else if plan.transport == transport::TransportKind::Verbs {
        directions::verbs_flows(
            run.pair,
            run.spec.size,
            plan.bidirectional,
            (&report.sent, t.seconds),
            (
                &theirs.report.sent,
                theirs.their_loop.as_ref().map_or(0.0, |l| l.seconds),
            ),
        )
    } else {
        directions::tcp_flows(
            run.pair,
            plan.bidirectional,
            &report.received,
            &theirs.report.received,
        )
    }
}

/// The initiator's row: both sides' figures together, as perftest prints them.
fn row(
    run: &SizeRun,
    t: &Transfer,
    report: &SideReport,
    my_loop: &LoopFigures,
    theirs: &Theirs,
    interval_s: f64,
    setup: results::Setup,
) -> BandwidthResult {
    let plan = run.plan;
    let size = run.spec.size;
    let directions = match &theirs.their_loop {
        Some(tl) => directions::directions(
            run.pair,
            size,
            [my_loop, tl],
            [&report.received, &theirs.report.received],
        ),
        None => Vec::new(),
    };
    // The peer's warm-up messages reach our receiver too; they are not part of the run.
    let messages = t.sent
        + t.received
            .saturating_sub(warmup_messages(plan.warmup, size));
    let avg = gbit_s(messages * size, t.seconds);
    let interval_gbit_s: Vec<f64> = t
        .samples
        .iter()
        .map(|&m| gbit_s(m * size, interval_s))
        .collect();
    let peak = interval_gbit_s.iter().copied().fold(avg, f64::max);
    // perftest -b adds the two sides' peaks, each over its own stamps.
    let perftest_peak = match &theirs.their_loop {
        Some(tl) => my_loop
            .perftest_peak_gbit_s
            .zip(tl.perftest_peak_gbit_s)
            .map(|(a, b)| a + b),
        None => my_loop.perftest_peak_gbit_s,
    };
    let verbs = plan.transport == transport::TransportKind::Verbs;
    BandwidthResult {
        test: plan.test.clone(),
        transport: plan.transport.name().into(),
        size_bytes: size,
        iterations: messages,
        duration_s: t.seconds,
        bidirectional: plan.bidirectional,
        streams: plan.streams,
        tx_depth: plan.tx_depth,
        cq_mod: verbs.then(|| plan.verbs.moderation(size, u64::from(plan.tx_depth.max(1)))),
        post_list: verbs.then(|| plan.verbs.post_list.unwrap_or(1)),
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
            responder_cores: theirs.cores,
        },
        pair: run.pair.clone(),
        complete: t.complete,
        counters: transport::counter_deltas(report, &theirs.report),
        check_wrong_bytes: transport::check_wrong_bytes(report, &theirs.report),
        memory: transport::memory_use(report, &theirs.report),
        setup: Some(setup),
        directions,
        flows: flows(run, t, report, theirs),
    }
}
