//! Where a document came from: tool version, git commit, wall-clock stamps.

use std::time::SystemTime;

/// Version of the fabcheck suite that produced a document.
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Git commit of the build (`unknown` outside git).
pub const GIT_COMMIT: &str = env!("FABCHECK_GIT_COMMIT");

/// `tool_version` of documents that were generated, not measured (test data, the scale
/// benchmark): `aggregate` marks every report built from one.
pub const SYNTHETIC_TOOL_VERSION: &str = "synthetic";

/// Current wall-clock time in RFC 3339 with microseconds, UTC.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(SystemTime::now()).to_string()
}

/// The exact command line, as the shell handed it over.
pub fn command_line() -> Vec<String> {
    std::env::args().collect()
}
