//! `synth`: writes synthetic result sets for the scale benchmark, the end-to-end tests and
//! demos of the report (development only; every document says it is synthetic).
//!
//! ```text
//! synth scale OUT [--ranks 1024] [--sizes 26]   # the 1024-GPU acceptance shape
//! synth sweep OUT.json [--nodes 1024] [--rails 8] [--bad-node N] [--compact]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "synth",
    about = "Synthetic fabcheck result sets for tests and benchmarks (development only; marked synthetic)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// A result set shaped like a RANKS-GPU acceptance: send/write/read latency and
    /// bandwidth over every neighbour pair, histograms included, and every collective.
    Scale {
        /// Output directory.
        out: PathBuf,
        /// Ranks (GPUs), even; 8 to a node.
        #[arg(long, default_value_t = 1024)]
        ranks: u32,
        /// Number of message sizes, powers of two from 2 B.
        #[arg(long, default_value_t = 26)]
        sizes: u32,
    },
    /// One all-pairs sweep document, as `bench-bw`/`bench-lat --pattern all-pairs` writes
    /// it over NODES nodes with RAILS rails (the matrix's scale benchmark), written row
    /// by row.
    Sweep {
        /// Output file.
        out: PathBuf,
        #[arg(long, default_value_t = 1024)]
        nodes: u32,
        #[arg(long, default_value_t = 8)]
        rails: u32,
        /// `write_bw`, `send_lat`, ... (`_lat` writes a bench-lat document).
        #[arg(long, default_value = "write_bw")]
        test: String,
        /// `verbs` (devices mlx5_R) or `tcp` (one rail, no device).
        #[arg(long, default_value = "verbs")]
        transport: String,
        #[arg(long, default_value = "64K", value_parser = results::units::parse_size)]
        size: u64,
        /// Counter deltas in every row.
        #[arg(long)]
        counters: bool,
        /// A node whose every link runs at half speed.
        #[arg(long)]
        bad_node: Option<u32>,
        /// Compact JSON (no whitespace) instead of the benchmarks' pretty layout.
        #[arg(long)]
        compact: bool,
    },
}

fn main() -> ExitCode {
    match Cli::parse().cmd {
        Cmd::Sweep {
            out,
            nodes,
            rails,
            test,
            transport,
            size,
            counters,
            bad_node,
            compact,
        } => {
            if nodes < 2 || rails == 0 {
                eprintln!("synth: --nodes must be at least 2 and --rails at least 1");
                return ExitCode::from(2);
            }
            let mut spec = if test.ends_with("_lat") {
                synth::sweep::SweepSpec::latency(nodes, rails)
            } else {
                synth::sweep::SweepSpec::bandwidth(nodes, rails)
            };
            spec.test = test;
            spec.transport = transport;
            spec.size = size;
            spec.counters = counters;
            if let Some(node) = bad_node {
                spec.faults
                    .push(synth::sweep::Fault::Node { node, factor: 0.5 });
            }
            match synth::sweep::write_sweep_as(&spec, &out, compact) {
                Ok(rows) => {
                    println!("wrote {rows} synthetic rows to {}", out.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("synth: {}: {e}", out.display());
                    ExitCode::from(2)
                }
            }
        }
        Cmd::Scale { out, ranks, sizes } => {
            if ranks < 2 || ranks % 2 != 0 || sizes == 0 || sizes > 40 {
                eprintln!("synth: --ranks must be even and >= 2, --sizes between 1 and 40");
                return ExitCode::from(2);
            }
            let list = synth::power_of_two_sizes(sizes);
            match synth::write_scale_set(&out, ranks, &list) {
                Ok(files) => {
                    println!(
                        "wrote {} synthetic documents to {}",
                        files.len(),
                        out.display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("synth: {}: {e}", out.display());
                    ExitCode::from(2)
                }
            }
        }
    }
}
