//! `fabcheck`: acceptance day in one run. `fabcheck accept` derives from a delivery
//! profile the runs its checks need and runs them stage by stage as the suite's own
//! commands, then judges and signs; `fabcheck triage` asks the same of a slow job's nodes
//! against a good night. Exit codes: 0 PASS (triage: the network matches its baseline),
//! 1 FAIL (at fault), 2 usage or environment error, 130 interrupted (what was measured is
//! kept; `--resume` goes on).

mod accept;
mod args;
mod cluster;
mod execute;
mod model;
mod plan;
mod state;
mod triage;

use clap::Parser;

fn main() {
    let cli = args::Cli::parse();
    let code = match cli.resolve().and_then(|job| match job {
        args::Job::Accept(o) => accept::run(&o),
        args::Job::Triage(t) => triage::run(&t),
    }) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fabcheck: error: {e:#}");
            2
        }
    };
    std::process::exit(code);
}
