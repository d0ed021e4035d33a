//! `fabric-doctor`: audits this node's lossless configuration (day zero, before anything
//! is measured) and prints it as a table; `--json FILE` writes it as a document,
//! `--capture DIR` saves every file and command output read (a support bundle) and
//! `--from DIR` audits such a bundle instead of the machine. Under mpirun or srun the
//! first rank of every node audits it and rank 0 writes them all into one document
//! (`--json`) and prints a line per node. See docs/lossless.md.
//!
//! The pipeline: options (`cli`) -> the audit (`probe::audit`, here or on every node by
//! `mpi`) -> the table (`table`) and the document (`document`).

mod cli;
mod document;
#[cfg(feature = "mpi")]
mod mpi;
#[cfg(not(feature = "mpi"))]
#[path = "no_mpi.rs"]
mod mpi;
mod table;

use std::path::Path;
use std::process::ExitCode;

use base::launcher::{resolve_launcher, Launcher};
use clap::Parser;
use probe::audit::{self, Live, Options, Replay};
use results::audit::NodeAudit;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let opts = match cli.options() {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    if resolve_launcher(cli.launcher) == Launcher::Mpi {
        if cli.from.is_some() || cli.capture.is_some() {
            return fail(
                "--from and --capture audit one node; run them without mpirun or srun (or \
                 with --launcher standalone)",
            );
        }
        return mpi::run(&cli, &opts);
    }
    let a = match (&cli.from, &cli.capture) {
        (Some(dir), _) => replayed(dir, &opts),
        (None, Some(dir)) => captured(dir, &opts),
        (None, None) => Ok(audit::audit(&Live::new(), &opts)),
    };
    match a {
        Ok(a) => {
            print!("{}", table::table(&a));
            document::write_json(cli.json.as_deref(), "standalone", 1, vec![a])
        }
        Err(e) => fail(&e),
    }
}

/// The audit of a capture directory (`--from`).
fn replayed(dir: &Path, opts: &Options) -> Result<NodeAudit, String> {
    let r = Replay::open(dir).map_err(|e| e.to_string())?;
    Ok(audit::audit(&r, opts))
}

/// The audit of this machine, every file and command output saved into `dir`.
fn captured(dir: &Path, opts: &Options) -> Result<NodeAudit, String> {
    let live = Live::capturing(dir).map_err(|e| e.to_string())?;
    let a = audit::audit(&live, opts);
    live.finish().map_err(|e| e.to_string())?;
    eprintln!("fabric-doctor: capture written to {}", dir.display());
    Ok(a)
}

fn fail(message: &str) -> ExitCode {
    eprintln!("fabric-doctor: {message}");
    ExitCode::from(2)
}
