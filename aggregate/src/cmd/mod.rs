//! The subcommands of `aggregate`, one module each: its arguments (clap) and `run`, which
//! turns them into the library's options and calls it. What they share: the input
//! ceilings, sizes, writing a result, the profile flag's help. A subcommand named like
//! the library module it drives (`report`, `compare`, `trend`, `export`, `profile`)
//! imports that module by name.

pub(crate) use std::path::PathBuf;

pub(crate) use clap::{Args, Subcommand, ValueEnum};
pub(crate) use reports::{cluster, explain, sign, templates};
pub(crate) use verdict::error::{exit, Error, Result};
pub(crate) use verdict::escape::terminal;
pub(crate) use verdict::{input, judge, tables};

pub mod compare;
pub mod export;
pub mod keygen;
pub mod profile;
pub mod report;
pub mod trend;
pub mod verify;

/// Ceilings on what a command reads (README, Limits).
#[derive(Args)]
pub struct LimitArgs {
    /// Largest input file, and largest total of all input files, read (64M, 1G, ...).
    /// The decoded documents may take up to twice this in memory.
    #[arg(long, value_name = "SIZE", value_parser = parse_size,
          default_value = "256M")]
    max_input_bytes: u64,
}

impl LimitArgs {
    pub fn limits(&self) -> input::Limits {
        input::Limits {
            input_bytes: self.max_input_bytes,
            ..input::Limits::default()
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum CompareFormat {
    Text,
    Markdown,
    Junit,
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    results::units::parse_size(s)
}

pub fn write_out(out: &Option<PathBuf>, bytes: &[u8]) -> Result<()> {
    match out {
        Some(p) => results::write::write_atomic(p, bytes)
            .map_err(|e| Error::Output(format!("{}: cannot write: {e}", p.display()))),
        None => {
            use std::io::Write;
            std::io::stdout()
                .write_all(bytes)
                .map_err(|e| Error::Output(format!("standard output: {e}")))
        }
    }
}

/// `--profile`'s help, naming every shipped profile from the one list of them.
pub fn profile_help() -> String {
    let names: Vec<&str> = verdict::profile::BUILTIN.iter().map(|(n, _)| *n).collect();
    format!(
        "Delivery profile: a TOML file, or a shipped one by name ({})",
        names.join(", ")
    )
}
