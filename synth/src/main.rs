//! `synth`: writes synthetic result sets for the scale benchmark, the end-to-end tests and
//! demos of the report (development only; every document says it is synthetic).
//!
//! ```text
//! synth scale OUT [--ranks 1024] [--sizes 26]   # the 1024-GPU acceptance shape
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
}

fn main() -> ExitCode {
    match Cli::parse().cmd {
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
