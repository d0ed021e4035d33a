//! `synth`: writes synthetic result sets for the scale benchmark, the end-to-end tests and
//! demos of the report (development only; every document says it is synthetic).
//!
//! ```text
//! synth scale OUT [--ranks 1024] [--sizes 26]   # the 1024-GPU acceptance shape
//! synth history OUT [--nights 365] [--ranks 1024] # a nightly history (deploy/nightly.sbatch layout)
//! synth sweep OUT.json [--nodes 1024] [--rails 8] [--bad-node N] [--compact]   # one all-pairs sweep
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
    /// A nightly history in the layout deploy/nightly.sbatch writes (one directory per
    /// night), with what a trend report must find built in: a slow latency drift, bad
    /// nights, a busy night, a node whose links weaken.
    History {
        /// Output directory (the history).
        out: PathBuf,
        #[arg(long, default_value_t = 365)]
        nights: u32,
        /// Ranks (GPUs), 8 to a node; the cross-node pass runs one task per node.
        #[arg(long, default_value_t = 1024)]
        ranks: u32,
        /// First night, YYYY-MM-DD.
        #[arg(long, default_value = "2026-01-01")]
        start: String,
        /// Latency sizes: powers of two from 2 B (bench-lat -a: 23, up to 8 MiB).
        #[arg(long, default_value_t = 23)]
        lat_sizes: u32,
        /// Collective sizes: powers of two from 8 B (-b 8 -e 256M: 26).
        #[arg(long, default_value_t = 26)]
        coll_sizes: u32,
        /// Latency growth per night from --drift-from on, % (0.3: about 2% a week).
        #[arg(long, default_value_t = 0.0)]
        drift_pct: f64,
        #[arg(long, default_value_t = 0)]
        drift_from: u32,
        /// Nights (0-based) on which the fabric's bandwidth drops 30%.
        #[arg(long, value_delimiter = ',')]
        bad_nights: Vec<u32>,
        /// Nights on which node0000 is busy with another job.
        #[arg(long, value_delimiter = ',')]
        busy_nights: Vec<u32>,
        /// From this night on, node0002's links lose 15% of their bandwidth.
        #[arg(long)]
        weak_node_from: Option<u32>,
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
        Cmd::History {
            out,
            nights,
            ranks,
            start,
            lat_sizes,
            coll_sizes,
            drift_pct,
            drift_from,
            bad_nights,
            busy_nights,
            weak_node_from,
        } => {
            if ranks < 16 || ranks % 8 != 0 || lat_sizes == 0 || coll_sizes == 0 {
                eprintln!(
                    "synth: --ranks must be a multiple of 8 and >= 16 (two nodes), sizes >= 1"
                );
                return ExitCode::from(2);
            }
            if synth::history::parse_date(&start).is_none() {
                eprintln!("synth: --start {start}: give YYYY-MM-DD");
                return ExitCode::from(2);
            }
            let shape = synth::history::Shape {
                nights,
                ranks,
                start,
                lat_sizes: synth::power_of_two_sizes(lat_sizes),
                coll_sizes: (3..3 + coll_sizes.min(40)).map(|i| 1u64 << i).collect(),
                latency_drift: drift_pct / 100.0,
                drift_from,
                bad_nights,
                busy_nights,
                weak_node_from,
                weak_node_drop: 0.15,
                ..Default::default()
            };
            match synth::history::write(&out, &shape) {
                Ok(n) => {
                    println!("wrote {} synthetic nights to {}", n.len(), out.display());
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
