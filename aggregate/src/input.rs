//! Reading result documents: every file named on the command line and every `*.json` file
//! under every directory named there, each checked against schema version 1.
//!
//! A document that cannot be read is reported with its file name and the JSON path of the
//! problem (`results[3].latency_us.p99`), because on acceptance day the file that breaks
//! the run is one of a thousand ranks' outputs and the engineer must find it fast.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::digest::sha256_hex;
use crate::error::{Error, Result};
use crate::rows::P2pRows;
use results::{Document, LatencyHistogram, TestResult, SCHEMA_VERSION};

/// A document that was read and passed every check, with where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The path as it was found (argument, or argument joined with the relative path).
    pub path: PathBuf,
    pub doc: Document,
    /// Latency histograms of this document merged per (tool, test, transport, size):
    /// decoded once here so the report never decodes a histogram twice.
    pub latency: LatencyGroups,
    /// SHA-256 of the file's bytes, for the signed manifest.
    pub sha256: String,
    /// The exact bytes that were parsed: the report bundle carries these, so the evidence
    /// signed is the evidence judged even if the file changes afterwards. Empty for a
    /// streamed document (see `copied`).
    pub raw: Vec<u8>,
    /// A document streamed because of its size (the `stream` module): its point-to-point
    /// rows in compact form (`doc.results` is then empty). `None` for documents read whole.
    pub p2p: Option<P2pRows>,
    /// Where a streamed document's bytes were copied before they were read (the report
    /// bundle's `inputs/`), so that the copy is the evidence judged.
    pub copied: Option<PathBuf>,
}

impl Loaded {
    /// Result rows in the file, streamed or not.
    pub fn row_count(&self) -> usize {
        self.doc.results.len() + self.p2p.as_ref().map_or(0, |p| p.rows.len())
    }
}

impl Loaded {
    /// Parses a document held in memory (tests, generators).
    pub fn from_text(path: &str, text: &str) -> Result<Loaded, String> {
        let (doc, latency) = parse_document(text)?;
        Ok(Loaded {
            path: path.into(),
            doc,
            latency,
            sha256: sha256_hex(text.as_bytes()),
            raw: text.as_bytes().to_vec(),
            p2p: None,
            copied: None,
        })
    }
}

/// Identifies the rows whose histograms merge: same tool, test, transport and size.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LatKey {
    pub tool: String,
    pub test: String,
    pub transport: String,
    pub size: u64,
}

/// Merged latency histograms, with the number of rows merged into each.
pub type LatencyGroups = BTreeMap<LatKey, (LatencyHistogram, usize)>;

/// A file that could not be used, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BadInput {
    pub path: String,
    pub problem: String,
}

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.problem)
    }
}

/// Everything read from the command line's inputs.
#[derive(Debug, Default)]
pub struct InputSet {
    pub docs: Vec<Loaded>,
    /// Files left out under `--skip-bad`.
    pub skipped: Vec<BadInput>,
}

/// Expands the arguments into the list of files to read: files as given, directories
/// walked recursively for `*.json` in name order so reports are reproducible.
pub fn expand(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for arg in args {
        let meta = fs::metadata(arg)
            .map_err(|e| Error::Input(format!("{}: cannot read: {e}", arg.display())))?;
        if meta.is_dir() {
            walk(arg, &mut files)?;
        } else {
            files.push(arg.clone());
        }
    }
    Ok(files)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| Error::Input(format!("{}: cannot list directory: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if is_report_bundle(&p) {
                // A report written into (a subdirectory of) its own input, as a demo
                // directory invites: its input copies would count twice and its
                // summary.json is not a result document.
                eprintln!(
                    "aggregate: note: {} is a report bundle, not results: skipped",
                    p.display()
                );
                continue;
            }
            walk(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
    Ok(())
}

/// True for a directory `aggregate report` wrote.
pub fn is_report_bundle(dir: &Path) -> bool {
    dir.join("summary.json").is_file() && dir.join("report.html").is_file()
}

/// Reads every input. Without `skip_bad` the first bad file stops the run; with it, bad
/// files are listed in [`InputSet::skipped`] and the rest is used.
pub fn load(args: &[PathBuf], skip_bad: bool) -> Result<InputSet> {
    load_with(args, skip_bad, |_, path| load_file(path))
}

/// [`load`] with another reader per file: `read(index, path)`, where `index` is the
/// file's place among the expanded inputs (the report streams its largest files).
pub fn load_with(
    args: &[PathBuf],
    skip_bad: bool,
    read: impl Fn(usize, &Path) -> Result<Loaded, BadInput> + Sync,
) -> Result<InputSet> {
    let files = expand(args)?;
    if files.is_empty() {
        return Err(Error::Input(format!(
            "no result files (*.json) found in {}",
            args.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let mut set = InputSet::default();
    for outcome in load_parallel(&files, &read) {
        match outcome {
            Ok(l) => set.docs.push(l),
            Err(bad) if skip_bad => set.skipped.push(bad),
            Err(bad) => {
                return Err(Error::Input(format!(
                    "{bad}\n(use --skip-bad to leave bad files out and name them in the report)"
                )))
            }
        }
    }
    if set.docs.is_empty() {
        return Err(Error::Input(
            "every input file was bad; nothing to judge".to_string(),
        ));
    }
    Ok(set)
}

/// Reads the files on every core: decoding histograms is most of the work at 1024 ranks.
/// Results come back in input order so reports do not depend on scheduling.
fn load_parallel(
    files: &[PathBuf],
    read: &(impl Fn(usize, &Path) -> Result<Loaded, BadInput> + Sync),
) -> Vec<Result<Loaded, BadInput>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<Loaded, BadInput>>>> =
        files.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = files.get(i) else { break };
                let outcome = read(i, path);
                *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
            });
        }
    });
    slots
        .into_iter()
        .zip(files)
        .map(|(slot, path)| {
            slot.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(|| {
                    Err(BadInput {
                        path: path.display().to_string(),
                        problem: "reader thread died".into(),
                    })
                })
        })
        .collect()
}

/// Reads and checks one file.
pub fn load_file(path: &Path) -> Result<Loaded, BadInput> {
    let bad = |problem: String| BadInput {
        path: path.display().to_string(),
        problem,
    };
    let bytes = fs::read(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| bad(format!("not UTF-8 text: {e}")))?;
    let (doc, latency) = parse_document(text).map_err(bad)?;
    let sha256 = sha256_hex(&bytes);
    Ok(Loaded {
        raw: bytes,
        path: path.to_path_buf(),
        latency,
        sha256,
        doc,
        p2p: None,
        copied: None,
    })
}

/// Parses one document and checks what serde cannot: the schema version and that every
/// histogram decodes, merging latency histograms per [`LatKey`] on the way. The error
/// names the JSON path of the problem.
pub fn parse_document(text: &str) -> Result<(Document, LatencyGroups), String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = serde_path_to_error::deserialize::<_, Document>(&mut de)
        .map_err(|e| (e.path().to_string(), e.into_inner()))
        .and_then(|d| de.end().map(|_| d).map_err(|e| (String::new(), e)));
    let doc = match parsed {
        Ok(doc) => doc,
        Err((path, inner)) => {
            // Say the most useful thing first: not JSON, not ours, another version, then
            // the exact field.
            return Err(match serde_json::from_str::<serde_json::Value>(text) {
                Err(e) if e.is_eof() => {
                    format!("truncated JSON ({e}); was the run interrupted while writing?")
                }
                Err(e) => format!("not valid JSON: {e}"),
                Ok(v) if !v.is_object() => {
                    "not a fabcheck result document: the top level is not a JSON object".to_string()
                }
                Ok(v) => match v.get("schema_version") {
                    None => "no schema_version field: not a fabcheck result document".to_string(),
                    Some(ver) if ver.as_u64() != Some(u64::from(SCHEMA_VERSION)) => {
                        version_message(ver)
                    }
                    Some(_) => match deeper_path(&v, &path) {
                        Some(msg) => msg,
                        None if path.is_empty() || path == "." => format!("{inner}"),
                        None => format!("at JSON path `{path}`: {inner}"),
                    },
                },
            });
        }
    };
    if doc.schema_version != SCHEMA_VERSION {
        return Err(version_message(&doc.schema_version.into()));
    }
    let mut groups = LatencyGroups::new();
    for (i, r) in doc.results.iter().enumerate() {
        if let TestResult::Latency(l) = r {
            if l.histogram.is_empty() {
                continue;
            }
            let key = LatKey {
                tool: doc.tool.clone(),
                test: l.test.clone(),
                transport: l.transport.clone(),
                size: l.size_bytes,
            };
            let slot = groups.entry(key).or_default();
            slot.0
                .merge_encoded(&l.histogram)
                .map_err(|e| format!("at JSON path `results[{i}].histogram`: {e}"))?;
            slot.1 += 1;
            continue;
        }
        let hists: Vec<(&str, &str)> = match r {
            TestResult::Latency(_) => vec![],
            TestResult::Bandwidth(_) => vec![],
            TestResult::Collective(c) => vec![
                ("out_of_place.histogram", &c.out_of_place.histogram),
                ("in_place.histogram", &c.in_place.histogram),
            ],
        };
        for (field, h) in hists {
            if h.is_empty() {
                continue;
            }
            LatencyHistogram::decode(h)
                .map_err(|e| format!("at JSON path `results[{i}].{field}`: {e}"))?;
        }
        if r.size_bytes() == 0 && !matches!(r, TestResult::Latency(_)) {
            return Err(format!(
                "at JSON path `results[{i}].size_bytes`: 0 bytes cannot carry a bandwidth"
            ));
        }
    }
    Ok((doc, groups))
}

/// serde reports errors inside an internally tagged enum (a result row) at the row, not
/// the field. Re-read that row as its own type to name the exact field.
fn deeper_path(v: &serde_json::Value, path: &str) -> Option<String> {
    let rest = path.strip_prefix("results[")?;
    let (idx, tail) = rest.split_once(']')?;
    if !tail.is_empty() {
        return None;
    }
    let row = v.get("results")?.get(idx.parse::<usize>().ok()?)?;
    row_problem(row, idx)
}

/// What is wrong with result row `idx` (a JSON value that does not deserialize), naming
/// the field: `at JSON path `results[3].latency_us.p99`: ...`.
pub(crate) fn row_problem(row: &serde_json::Value, idx: &str) -> Option<String> {
    let kind = row.get("kind").and_then(|k| k.as_str());
    fn sub<T: serde::de::DeserializeOwned>(row: &serde_json::Value) -> Option<(String, String)> {
        match serde_path_to_error::deserialize::<_, T>(row) {
            Ok(_) => None,
            Err(e) => Some((e.path().to_string(), e.into_inner().to_string())),
        }
    }
    let found = match kind {
        Some("latency") => sub::<results::LatencyResult>(row),
        Some("bandwidth") => sub::<results::BandwidthResult>(row),
        Some("collective") => sub::<results::CollectiveResult>(row),
        Some(other) => Some((
            "kind".to_string(),
            format!("unknown result kind `{other}` (known: latency, bandwidth, collective)"),
        )),
        None => Some(("kind".to_string(), "missing result kind".to_string())),
    }?;
    let (field, msg) = found;
    let field = if field == "." {
        String::new()
    } else {
        format!(".{field}")
    };
    Some(format!("at JSON path `results[{idx}]{field}`: {msg}"))
}

fn version_message(v: &serde_json::Value) -> String {
    format!(
        "at JSON path `schema_version`: version {v} is not supported (this aggregate reads \
         version {SCHEMA_VERSION}); use the fabcheck release that wrote it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_text() -> String {
        serde_json::to_string(&synth::latency_doc("h1", "h2", &[2, 64], 1.5, 1)).unwrap()
    }

    #[test]
    fn good_document_parses() {
        let (doc, groups) = parse_document(&sample_text()).unwrap();
        assert_eq!(doc.results.len(), 2);
        assert_eq!(groups.len(), 2);
        assert!(groups.values().all(|(h, n)| h.len() == 2000 && *n == 1));
    }

    #[test]
    fn truncated_document_says_truncated() {
        let t = sample_text();
        let e = parse_document(&t[..t.len() / 2]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn wrong_field_type_names_the_json_path() {
        let mut v: serde_json::Value = serde_json::from_str(&sample_text()).unwrap();
        v["results"][1]["latency_us"]["p99"] = "fast".into();
        let e = parse_document(&v.to_string()).unwrap_err();
        assert!(e.contains("results[1].latency_us.p99"), "{e}");
    }

    #[test]
    fn bad_histogram_names_the_json_path() {
        let mut v: serde_json::Value = serde_json::from_str(&sample_text()).unwrap();
        v["results"][0]["histogram"] = "AAAA".into();
        let e = parse_document(&v.to_string()).unwrap_err();
        assert!(e.contains("results[0].histogram"), "{e}");
    }

    #[test]
    fn foreign_and_future_documents_are_named_as_such() {
        let e = parse_document(r#"{"name":"x"}"#).unwrap_err();
        assert!(e.contains("no schema_version"), "{e}");
        let mut v: serde_json::Value = serde_json::from_str(&sample_text()).unwrap();
        v["schema_version"] = 7.into();
        let e = parse_document(&v.to_string()).unwrap_err();
        assert!(e.contains("version 7"), "{e}");
        let e = parse_document("[1,2,").unwrap_err();
        assert!(e.contains("truncated"), "{e}");
        let e = parse_document("{nope}").unwrap_err();
        assert!(e.contains("not valid JSON"), "{e}");
    }

    #[test]
    fn directories_are_walked_and_bad_files_skipped_on_request() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("rank1");
        fs::create_dir(&sub).unwrap();
        fs::write(dir.path().join("a.json"), sample_text()).unwrap();
        fs::write(sub.join("b.json"), sample_text()).unwrap();
        fs::write(sub.join("notes.txt"), "ignored").unwrap();
        fs::write(sub.join("broken.json"), "{\"schema_version\": 1,").unwrap();
        let old_report = dir.path().join("report");
        fs::create_dir_all(old_report.join("inputs")).unwrap();
        fs::write(old_report.join("report.html"), "<html>").unwrap();
        fs::write(old_report.join("summary.json"), "{}").unwrap();
        fs::write(old_report.join("inputs/0001-a.json"), sample_text()).unwrap();
        let err = load(&[dir.path().to_path_buf()], false).unwrap_err();
        assert!(err.to_string().contains("broken.json"), "{err}");
        let set = load(&[dir.path().to_path_buf()], true).unwrap();
        assert_eq!(set.docs.len(), 2);
        assert_eq!(set.skipped.len(), 1);
        assert!(set.skipped[0].path.ends_with("broken.json"));
    }
}
