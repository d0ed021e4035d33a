//! bench-bw: streaming bandwidth and message rate, perftest's `ib_send_bw` / `ib_write_bw`
//! / `ib_read_bw` over verbs, and the same stream over TCP as the baseline (what iperf3
//! measures). Unidirectional or `-b` bidirectional, `-q` parallel streams, `-t` messages in
//! flight; throughput is sampled every interval so stability can be judged, and the CPU
//! cores each side burned are reported beside it. With `--use-cuda` the buffers are GPU
//! memory (GPUDirect RDMA over verbs, staged over TCP); `--test h2d|d2h|d2d|p2p` measures
//! the GPU copy baselines instead (`copy.rs`).
//!
//! The pipeline: options (`cli`) -> plan -> the pair driver (`p2p_cli::launch`) -> one
//! size at a time (`bandwidth`, its timed loop in `stream`) -> the result rows.

mod bandwidth;
mod cli;
mod copy;
mod directions;
mod incast;
mod peak;
mod stream;

use clap::Parser;

use bandwidth::Bandwidth;
use cli::{plan, Cli};

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
