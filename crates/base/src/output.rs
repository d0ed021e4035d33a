//! What every tool does with its result document: check before measuring that it can be
//! written, write it atomically at the end, and name itself in messages.

use std::path::Path;

use anyhow::{Context, Result};
use results::Document;

/// This program's name as invoked (`bench-lat`, `bench-collective`), for message prefixes.
pub fn tool_name() -> String {
    std::env::args()
        .next()
        .map(|a| {
            Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(a)
        })
        .unwrap_or_else(|| "fabcheck".into())
}

/// Fails before any measurement when the JSON file cannot be written (hyperfine's rule: a
/// long run must never end in "cannot write").
pub fn check_writable(path: Option<&Path>) -> Result<()> {
    if let Some(path) = path {
        results::write::check_writable(path)
            .with_context(|| format!("cannot write the JSON result file {}", path.display()))?;
    }
    Ok(())
}

/// Writes `doc` atomically to `path` (when given) and says so on stderr, then notes the
/// loop overhead so every run shows the floor under its figures.
pub fn write_document(path: Option<&Path>, doc: &Document) -> Result<()> {
    if let Some(path) = path {
        results::write::write_document_atomic(path, doc)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "wrote {}{}",
            path.display(),
            if doc.complete {
                ""
            } else {
                " (incomplete: what was measured before the stop)"
            }
        );
    }
    if let Some(ns) = doc.loop_overhead_ns {
        eprintln!(
            "# loop overhead {ns:.1} ns per iteration ({} clock)",
            doc.clock.as_deref().unwrap_or("?")
        );
    }
    Ok(())
}

/// Writes `line` and a newline to standard error in one `write` call. Standard error is
/// unbuffered, and `eprintln!` writes each formatted piece on its own: with many ranks
/// under one mpirun their messages then interleave mid-line (a CI run read "rank 3: error:
/// bench-collective: rank local rank 1 ..."). One write of a line under the pipe's atomic
/// size (4 KiB) reaches the launcher whole.
pub fn error_line(line: &str) {
    use std::io::Write;
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
