//! Building a [`Document`] the same way in every tool: provenance (tool version, git
//! commit, command line, start and end stamps) and completeness are filled here, so a tool
//! only adds its hosts, options and results.

use serde_json::Map;

use crate::provenance;
use crate::{Document, SCHEMA_VERSION};

impl Document {
    /// A document for `tool` started at `started_at` (RFC 3339), with provenance filled and
    /// nothing measured yet. `finished_at` is stamped now; call [`Document::finish`] when
    /// the run ends.
    pub fn new(tool: &str, launcher: &str, ranks: u32, started_at: String) -> Self {
        Document {
            schema_version: SCHEMA_VERSION,
            tool: tool.into(),
            tool_version: provenance::TOOL_VERSION.into(),
            git_commit: provenance::GIT_COMMIT.into(),
            command_line: provenance::command_line(),
            started_at,
            finished_at: provenance::now_rfc3339(),
            complete: true,
            incomplete_reason: None,
            launcher: launcher.into(),
            ranks,
            loop_overhead_ns: None,
            clock: None,
            hosts: Vec::new(),
            options: Map::new(),
            results: Vec::new(),
            warnings: Vec::new(),
            quality: None,
            sweep: None,
            failed_pairs: Vec::new(),
            fabric: None,
            congestion: None,
            reach: None,
        }
    }

    /// Stamps `finished_at` and marks the document incomplete when the run `stopped` early
    /// (the reason in words).
    pub fn finish(&mut self, stopped: Option<String>) {
        self.finished_at = provenance::now_rfc3339();
        self.complete = stopped.is_none();
        self.incomplete_reason = stopped;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_fills_provenance_and_finish_marks_incomplete() {
        let mut d = Document::new("bench-x", "mpi", 4, "2026-01-01T00:00:00Z".into());
        assert_eq!(d.schema_version, SCHEMA_VERSION);
        assert_eq!(d.tool, "bench-x");
        assert!(d.complete);
        d.finish(Some("interrupted".into()));
        assert!(!d.complete);
        assert_eq!(d.incomplete_reason.as_deref(), Some("interrupted"));
    }
}
