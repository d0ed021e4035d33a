//! Writing documents so that a reader never sees half a file: write a temporary file in the
//! same directory, flush it to disk, rename it over the target (atomic on POSIX filesystems).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Fails early, before any measurement, when `path` cannot be written: a long run must not
/// end in "cannot write". Creates nothing that stays behind.
pub fn check_writable(path: &Path) -> io::Result<()> {
    let tmp = temp_path(path);
    File::create(&tmp)?;
    fs::remove_file(&tmp)
}

/// Serialises `value` as pretty JSON into `path` atomically.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Documents with more result rows than this are written compact: a 1024-node sweep has
/// millions of rows, and indentation alone would make it 1.6 times as large to write and
/// to read. Smaller ones stay pretty, for eyes and diffs.
pub const COMPACT_ABOVE_ROWS: usize = 10_000;

/// Serialises a result document into `path` atomically: pretty, or compact when it holds
/// more than [`COMPACT_ABOVE_ROWS`] results.
pub fn write_document_atomic(path: &Path, doc: &crate::Document) -> io::Result<()> {
    if doc.results.len() <= COMPACT_ABOVE_ROWS {
        return write_json_atomic(path, doc);
    }
    let mut bytes = serde_json::to_vec(doc).map_err(io::Error::other)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Writes `bytes` into `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = format!(".{name}.{}.tmp", std::process::id());
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(tmp),
        _ => PathBuf::from(tmp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        write_json_atomic(&path, &serde_json::json!({"a": 1})).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"a\": 1"));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        check_writable(&path).unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn unwritable_target_is_reported_before_the_run() {
        assert!(check_writable(Path::new("/nonexistent-dir/r.json")).is_err());
    }

    #[test]
    fn big_documents_are_written_compact_and_read_back_alike() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.json");
        let mut doc = crate::Document::new("bench-bw", "mpi", 2, "2026-01-01T00:00:00Z".into());
        write_document_atomic(&path, &doc).unwrap();
        assert!(
            fs::read_to_string(&path)
                .unwrap()
                .contains("\n  \"schema_version\""),
            "pretty"
        );
        let row: crate::TestResult = serde_json::from_value(serde_json::json!({
            "kind": "bandwidth", "test": "send_bw", "transport": "tcp", "size_bytes": 64,
            "iterations": 1, "duration_s": 1.0, "bidirectional": false, "streams": 1,
            "tx_depth": 1, "bw_gbit_s": {"avg": 1.0, "peak": 1.0}, "msg_rate_mpps": 1.0,
            "interval_s": 0.1, "interval_gbit_s": [], "cpu": {"initiator_cores": 0.0,
            "responder_cores": 0.0}, "pair": {"initiator": {"host": "a"}, "responder": {"host": "b"}},
            "complete": true
        }))
        .unwrap();
        doc.results = vec![row; COMPACT_ABOVE_ROWS + 1];
        write_document_atomic(&path, &doc).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1, "compact: one line");
        let back = crate::Document::from_json(&text).unwrap();
        assert_eq!(back.results.len(), COMPACT_ABOVE_ROWS + 1);
    }
}
