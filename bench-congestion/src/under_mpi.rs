//! The run under mpirun/srun: every rank is one MPI process, rank 0 writes the document,
//! and the canaries' allreduce is MPI's own (`MPI_Allreduce` on a communicator of the
//! canaries, GPCNeT's third canary test).

use std::time::{Duration, Instant};

use anyhow::Result;
use bootstrap::mpi::{MpiJob, Team};
use mpi::collective::SystemOperation;
use mpi::traits::*;
use results::LatencyHistogram;
use traffic::congestion::{CanaryCollective, Finish};
use traffic::endpoint_flows::Carrier;

use crate::Cli;

pub fn run(cli: &Cli, carrier: &Carrier) -> i32 {
    base::interrupt::install();
    let job = match MpiJob::init(Duration::from_secs(cli.timeout)) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("bench-congestion: error: {e:#}");
            return base::exit::ERROR;
        }
    };
    match run_job(cli, &job, carrier) {
        Ok(code) => code,
        Err(e) => {
            base::output::error_line(&format!(
                "bench-congestion: rank {}: error: {e:#}",
                job.rank()
            ));
            if job.size() > 1 {
                job.abort(base::exit::ERROR);
            }
            base::exit::ERROR
        }
    }
}

fn run_job(cli: &Cli, job: &MpiJob, carrier: &Carrier) -> Result<i32> {
    let started_at = results::provenance::now_rfc3339();
    let phase = Duration::from_secs_f64(cli.phase_seconds);
    let timeout = Duration::from_secs(cli.timeout);
    if let Some(n) = cli.incast() {
        let Some((inc, hosts)) =
            traffic::incast::run_job(&mut &*job, cli.bind_addr, n, phase, timeout, carrier)?
        else {
            return Ok(base::exit::OK);
        };
        traffic::incast::print_table(&inc);
        let mut doc = traffic::incast::document(
            "bench-congestion",
            "mpi",
            job.size(),
            started_at,
            hosts,
            inc,
            cli.phase_seconds,
            cli.seed,
        );
        doc.options
            .insert("mode".into(), format!("incast:{n}").into());
        doc.options
            .insert("phase-seconds".into(), cli.phase_seconds.into());
        carrier.record(&mut doc.options);
        doc.finish(base::interrupt::interrupted().then(|| "interrupted".to_string()));
        base::output::write_document(cli.json.as_deref(), &doc)?;
        return Ok(base::exit::OK);
    }
    let opts = cli.options()?;
    let mut canaries = MpiCanaries { job, team: None };
    let finish = traffic::congestion::run(
        &mut &*job,
        &opts,
        cli.bind_addr,
        carrier,
        Some(&mut canaries),
    )?;
    let (hosts, reports, carrier) = match finish {
        Finish::Root {
            hosts,
            reports,
            carrier,
        } => (hosts, reports, carrier),
        Finish::Rank => return Ok(base::exit::OK),
        Finish::TooFew(why) => {
            if job.rank() == 0 {
                eprintln!("bench-congestion: error: {why}");
            }
            return Ok(base::exit::ERROR);
        }
    };
    let reports = traffic::congestion::decode_reports(&reports)?;
    let mut doc = traffic::congestion::document(
        "bench-congestion",
        "mpi",
        started_at,
        &opts,
        hosts,
        &reports,
        &carrier,
        true,
    )?;
    if let Some(b) = cli.bind_addr {
        doc.options.insert("bind-addr".into(), b.to_string().into());
    }
    doc.finish(base::interrupt::interrupted().then(|| "interrupted".to_string()));
    base::output::write_document(cli.json.as_deref(), &doc)?;
    Ok(base::exit::OK)
}

/// The canaries' allreduce over MPI: a communicator of the canaries, split from the job
/// once the roles are known.
struct MpiCanaries<'j> {
    job: &'j MpiJob,
    team: Option<Team<'j>>,
}

impl CanaryCollective for MpiCanaries<'_> {
    fn join(&mut self, canary: bool) {
        self.team = self.job.split(canary);
    }

    /// 8-byte `MPI_Allreduce` among the canaries until `deadline`, checked together every
    /// 32 operations so every canary runs the same count.
    fn allreduce(&self, deadline: Instant) -> LatencyHistogram {
        let team = self.team.as_ref().expect("the canaries joined their team");
        let mut h = LatencyHistogram::new();
        let _g = team.watchdog().arm("in the canaries' allreduce");
        loop {
            for _ in 0..32 {
                let (mine, mut sum) = (1u64, 0u64);
                let t = Instant::now();
                team.comm()
                    .all_reduce_into(&mine, &mut sum, SystemOperation::sum());
                h.record(t.elapsed().as_nanos() as u64);
            }
            if team.any(Instant::now() >= deadline) {
                break;
            }
        }
        h
    }
}
