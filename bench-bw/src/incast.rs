//! `--pattern incast[:N]`: N senders to one receiver, every rank the receiver in turn (the
//! next N ranks send; default all others), with a victim flow beside each round and
//! Jain's fairness index of the senders (`traffic::incast`, the rounds `bench-congestion
//! --mode incast` runs too). Not rounds of disjoint pairs, so not the pair driver: many
//! ranks meet one at once. Over verbs (`--test send|write`: senders stream 64 KiB
//! messages on one QP each, the victim ping-pongs sends) or TCP; `-D` sets each window's
//! length.

use p2p_cli::P2pArgs;
use traffic::endpoint_flows::Carrier;
use transport::Op;

/// Each window's length without `-D`, seconds.
const DEFAULT_WINDOW_S: f64 = 2.0;

fn refuse(what: &str) -> i32 {
    eprintln!("bench-bw: error: {what}");
    base::exit::ERROR
}

/// Runs the incast under mpirun/srun, or over the agents of `--hosts` (`plan` gives the
/// coordinator the test's settings as the agents' sweeps get them).
pub fn run(
    a: &P2pArgs,
    n: u32,
    bidirectional: bool,
    plan: impl FnOnce() -> anyhow::Result<p2p::Plan>,
) -> i32 {
    if bidirectional {
        return refuse(
            "--pattern incast is one-way by nature (N senders to one receiver): drop -b",
        );
    }
    if a.op == Op::Read {
        return refuse(
            "--pattern incast moves data from the senders into one receiver: use --test send \
             or --test write (a read would pull it the other way)",
        );
    }
    if a.host.is_some() || a.serve {
        return refuse(
            "--pattern incast runs under mpirun/srun or over agents (--hosts), not with a host \
             or --serve (agents serve incasts as they serve sweeps: start them without --pattern)",
        );
    }
    if let Err(e) = base::output::check_writable(a.json.as_deref()) {
        return refuse(&format!("{e:#}"));
    }
    let window = a.duration.unwrap_or(DEFAULT_WINDOW_S);
    if a.hosts.is_some() {
        return match plan() {
            Ok(plan) => agents::conduct::incast(&a.launch(), plan, n, window),
            Err(e) => refuse(&format!("{e:#}")),
        };
    }
    if base::launcher::resolve_launcher(a.launcher) != base::launcher::Launcher::Mpi {
        return refuse(
            "--pattern incast needs mpirun or srun, or agents: N senders and their receiver are \
             N + 1 ranks (e.g. mpirun -np 4 bench-bw --pattern incast --transport tcp, or \
             bench-bw --pattern incast --hosts agents.txt)",
        );
    }
    let carrier = match a.transport_kind() {
        Ok(kind) => Carrier::of(
            kind,
            &a.verbs_options(),
            a.op,
            a.bind_addr,
            a.timeout(),
            a.ib_dev.clone().unwrap_or_default(),
        ),
        Err(e) => return refuse(&format!("{e:#}")),
    };
    run_mpi(a, n, window, &carrier)
}

#[cfg(feature = "mpi")]
fn run_mpi(a: &P2pArgs, n: u32, window: f64, carrier: &Carrier) -> i32 {
    base::interrupt::install();
    let timeout = std::time::Duration::from_secs_f64(a.timeout);
    let job = match bootstrap::mpi::MpiJob::init(timeout) {
        Ok(j) => j,
        Err(e) => return refuse(&format!("{e:#}")),
    };
    let started_at = results::provenance::now_rfc3339();
    let rank = job.rank();
    let res = traffic::incast::run_job(
        &mut &job,
        a.bind_addr,
        n,
        std::time::Duration::from_secs_f64(window),
        timeout,
        carrier,
    )
    .and_then(|got| {
        let Some((inc, hosts)) = got else {
            return Ok(());
        };
        traffic::incast::print_table(&inc);
        let mut doc = traffic::incast::document(
            "bench-bw",
            "mpi",
            job.size(),
            started_at,
            hosts,
            inc,
            window,
            0,
        );
        doc.options
            .insert("pattern".into(), a.pattern.to_string().into());
        let (transport, test) = match carrier {
            Carrier::Tcp => ("tcp", "send"),
            Carrier::Endpoints { settings, op, .. } => (settings.kind.name(), op.name()),
        };
        doc.options.insert("transport".into(), transport.into());
        doc.options.insert("test".into(), test.into());
        doc.options.insert("duration".into(), window.into());
        doc.finish(base::interrupt::interrupted().then(|| "interrupted".to_string()));
        base::output::write_document(a.json.as_deref(), &doc)
    });
    match res {
        Ok(()) => base::exit::OK,
        Err(e) => {
            base::output::error_line(&format!("bench-bw: rank {rank}: error: {e:#}"));
            if job.size() > 1 {
                job.abort(base::exit::ERROR);
            }
            base::exit::ERROR
        }
    }
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &P2pArgs, _: u32, _: f64, _: &Carrier) -> i32 {
    refuse("this bench-bw was built without MPI (feature `mpi`), which --pattern incast needs")
}
