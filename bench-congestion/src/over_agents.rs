//! The run over the agents (`bench-congestion --hosts FILE`): this process is the
//! coordinator, not a rank. Every `bench-bw --serve` agent of the host file is a rank and
//! runs exactly what an MPI rank runs (`traffic::congestion::run`, or `traffic::incast` with
//! `--mode incast`); their barriers and exchanges go through this process
//! (`agents::conduct::gang`), which gets every rank's report at the end, recomputes the
//! split from the same host names and seed, and writes the document (`launcher:
//! "agents"`). There is no MPI, so no allreduce canary: the document lists it as skipped,
//! with why.

use std::time::Duration;

use agents::conduct::{self, GangRan, GangSpec};
use agents::proto::{Command, CongestionOrder, IncastOrder};
use anyhow::Result;
use traffic::endpoint_flows::Carrier;
use transport::{Op, TransportChoice};

use crate::Cli;

pub fn run(cli: &Cli) -> i32 {
    base::interrupt::install();
    match coordinate(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bench-congestion: error: {e:#}");
            base::exit::ERROR
        }
    }
}

fn coordinate(cli: &Cli) -> Result<i32> {
    let transport: TransportChoice = cli
        .transport
        .parse()
        .map_err(|e| anyhow::anyhow!("--transport: {e}"))?;
    let hosts = cli
        .hosts
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("--hosts: no host file given"))?;
    let spec = |what, step| GangSpec {
        tool: "bench-congestion",
        what,
        hosts,
        port: cli.port,
        secret_file: cli.secret_file.as_deref(),
        transport,
        op: Op::Send,
        timeout: Duration::from_secs(cli.timeout),
        step,
    };
    match cli.incast() {
        Some(senders) => incast(cli, senders, &spec),
        None => congestion(cli, &spec),
    }
}

/// How the ranks' messages were carried, as the gang reports its transport.
fn carrier_of(ran: &GangRan, timeout: Duration) -> Carrier {
    Carrier::of(
        ran.transport,
        &ran.verbs,
        Op::Send,
        None,
        timeout,
        Default::default(),
    )
}

/// `--mode incast`: every agent a rank of `traffic::incast`, the document assembled here.
fn incast<'a>(
    cli: &'a Cli,
    senders: u32,
    spec: &dyn Fn(&'static str, Duration) -> GangSpec<'a>,
) -> Result<i32> {
    let opts = cli.options()?;
    let started_at = results::provenance::now_rfc3339();
    let timeout = Duration::from_secs(cli.timeout);
    let step = timeout * 3 + Duration::from_secs_f64(cli.phase_seconds) * 4;
    let ran = conduct::gang(&spec("an incast", step), &|rank, size| {
        Command::Incast(Box::new(IncastOrder {
            rank,
            size,
            senders,
            window_s: cli.phase_seconds,
            op: Op::Send,
            timeout_s: opts.timeout_s,
        }))
    })?;
    let carrier = carrier_of(&ran, timeout);
    let size = ran.hosts.len() as u32;
    let run = traffic::incast::assemble(&ran.hosts, senders, size, &ran.reports, &carrier)?;
    traffic::incast::print_table(&run);
    let mut doc = traffic::incast::document(
        "bench-congestion",
        "agents",
        size,
        started_at,
        ran.hosts,
        run,
        cli.phase_seconds,
        cli.seed,
    );
    let o = &mut doc.options;
    o.insert("mode".into(), format!("incast:{senders}").into());
    o.insert("phase-seconds".into(), cli.phase_seconds.into());
    o.insert("agents".into(), serde_json::json!(ran.agents));
    carrier.record(o);
    write(cli, doc)
}

/// The congestion run: every agent a rank of `traffic::congestion::run`.
fn congestion<'a>(
    cli: &'a Cli,
    spec: &dyn Fn(&'static str, Duration) -> GangSpec<'a>,
) -> Result<i32> {
    let opts = cli.options()?;
    let started_at = results::provenance::now_rfc3339();
    let step = agents::serve::congestion_step(&opts);
    let ran = conduct::gang(&spec("a congestion run", step), &|rank, size| {
        Command::Congestion(Box::new(CongestionOrder {
            rank,
            size,
            options: opts.clone(),
        }))
    })?;
    let carrier = carrier_of(&ran, Duration::from_secs(cli.timeout));
    let reports = traffic::congestion::decode_reports(&ran.reports)?;
    let mut doc = traffic::congestion::document(
        "bench-congestion",
        "agents",
        started_at,
        &opts,
        ran.hosts,
        &reports,
        &carrier,
        false,
    )?;
    doc.options
        .insert("agents".into(), serde_json::json!(ran.agents));
    write(cli, doc)
}

fn write(cli: &Cli, mut doc: results::Document) -> Result<i32> {
    doc.finish(base::interrupt::interrupted().then(|| "interrupted".to_string()));
    base::output::write_document(cli.json.as_deref(), &doc)?;
    Ok(base::exit::OK)
}
