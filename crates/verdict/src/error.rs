//! The one error type of `aggregate`, and the one place its exit codes are decided.
//!
//! Every variant carries the whole message a user reads: the thing (a file, a flag, a
//! profile key), the cause and, where there is one, the next step. The variant says which
//! kind of problem it is, so callers and tests can tell a bad input from a bad profile
//! without matching on text.

use std::process::ExitCode;

/// Exit codes of every `aggregate` command (README, "Exit codes").
pub mod exit {
    /// Every check passed, no regression, the signature verified.
    pub const OK: u8 = 0;
    /// Measured, but a check failed, a metric regressed or a verification failed.
    pub const FAILED: u8 = 1;
    /// Usage, input or environment error: nothing was judged.
    pub const ERROR: u8 = 2;
}

/// A problem that stops an `aggregate` command before it can give a verdict.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A result file or directory that cannot be used (unreadable, malformed, too big).
    #[error("{0}")]
    Input(String),
    /// A delivery profile that cannot be read or does not validate.
    #[error("{0}")]
    Profile(String),
    /// A report template that cannot be read, parsed or rendered.
    #[error("{0}")]
    Template(String),
    /// A signing key, public key or signature that cannot be read, made or written.
    #[error("{0}")]
    Signing(String),
    /// An output file or directory that cannot be prepared or written.
    #[error("{0}")]
    Output(String),
    /// A command-line value that makes no sense (a flag, a format name).
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// The process exit code for this error. Every error is exit 2 today ("usage or
    /// environment": nothing was judged); a verdict's 0/1 never comes from here.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Input(_)
            | Error::Profile(_)
            | Error::Template(_)
            | Error::Signing(_)
            | Error::Output(_)
            | Error::Usage(_) => exit::ERROR,
        }
    }

    /// The same error with `prefix: ` before its message (`baseline: ...`).
    pub fn context(self, prefix: &str) -> Error {
        let wrap = |m: String| format!("{prefix}: {m}");
        match self {
            Error::Input(m) => Error::Input(wrap(m)),
            Error::Profile(m) => Error::Profile(wrap(m)),
            Error::Template(m) => Error::Template(wrap(m)),
            Error::Signing(m) => Error::Signing(wrap(m)),
            Error::Output(m) => Error::Output(wrap(m)),
            Error::Usage(m) => Error::Usage(wrap(m)),
        }
    }
}

impl From<&Error> for ExitCode {
    fn from(e: &Error) -> ExitCode {
        ExitCode::from(e.exit_code())
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_keeps_the_kind_and_prefixes_the_message() {
        let e = Error::Input("a.json: truncated JSON".into()).context("baseline");
        assert!(matches!(e, Error::Input(_)));
        assert_eq!(e.to_string(), "baseline: a.json: truncated JSON");
        assert_eq!(e.exit_code(), exit::ERROR);
        assert_eq!(Error::Usage("x".into()).exit_code(), 2);
    }
}
