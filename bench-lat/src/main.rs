//! bench-lat: one-way latency by ping-pong, perftest's `ib_send_lat` / `ib_write_lat` /
//! `ib_read_lat` over verbs, and the same ping-pong over TCP as the baseline.
//!
//! `bench-lat` alone is the server, `bench-lat HOST` the client; under `mpirun`/`srun` ranks
//! pair up (0,1), (2,3), ... and measure at the same time. The harness (the `p2p` crate)
//! pairs, sweeps sizes and writes JSON; `latency` holds the loop and the table, `cli` the
//! options and the plan, `isolation` the tenants' reach sweep.

mod cli;
mod isolation;
mod latency;

use clap::{CommandFactory, FromArgMatches};

use cli::{plan, Cli};
use latency::Latency;

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
