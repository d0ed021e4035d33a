//! `aggregate`: results -> verdict -> signed report; regressions; metric export.
//! Exit codes: 0 pass, 1 a check failed or a metric regressed (or verification failed),
//! 2 usage or input error.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use verdict::escape::terminal;

#[derive(Parser)]
#[command(
    name = "aggregate",
    version,
    about = "Judge fabcheck results against a delivery profile; signed reports, regressions, metric export",
    long_about = "Reads the JSON of every benchmark, rank and run, judges it against a delivery \
                  profile, and writes a report a customer can read and verify (HTML with plots, \
                  Markdown, JUnit, SSH signature). Exit codes: 0 pass, 1 fail or regression, \
                  2 usage or input error."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// One variant a subcommand; its arguments, their help and `run` live in `cmd/`.
#[derive(Subcommand)]
enum Cmd {
    Report(cmd::report::ReportArgs),
    Keygen(cmd::keygen::KeygenArgs),
    Verify(cmd::verify::VerifyArgs),
    Compare(cmd::compare::CompareArgs),
    Trend(cmd::trend::TrendArgs),
    Export(cmd::export::ExportArgs),
    Profile(cmd::profile::ProfileArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let done = match cli.cmd {
        Cmd::Report(args) => args.run(),
        Cmd::Keygen(args) => args.run(),
        Cmd::Verify(args) => args.run(),
        Cmd::Compare(args) => args.run(),
        Cmd::Trend(args) => args.run(),
        Cmd::Export(args) => args.run(),
        Cmd::Profile(args) => args.run(),
    };
    match done {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("aggregate: {}", terminal(&e.to_string()));
            ExitCode::from(&e)
        }
    }
}
