//! Reading result documents: every file named on the command line and every `*.json` file
//! under every directory named there, each checked against schema version 1.
//!
//! A document that cannot be read is reported with its file name and the JSON path of the
//! problem (`results[3].latency_us.p99`), because on acceptance day the file that breaks
//! the run is one of a thousand ranks' outputs and the engineer must find it fast.
//!
//! Inputs come from every node of a cluster, and a broken or hostile node must not be able
//! to exhaust the machine that judges them. What is read is bounded ([`Limits`], README
//! "Limits"): the bytes of each file and of all files together, the memory their decoded
//! form may take (estimated by an allocation-free pass before the real parse), the number
//! of latency histogram groups, and the work of every histogram decode (a latency row's
//! decoded once into its group, `groups::Hists`; a collective's checked by
//! `results::LatencyHistogram::validate_encoded`). Only regular files are read.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::digest::sha256_hex;
use crate::error::{Error, Result};
use crate::groups::{Gathered, Hists};
pub use crate::groups::{LatKey, LatencyGroups};
use crate::rows::P2pRows;
use results::{Document, LatencyHistogram, TestResult, SCHEMA_VERSION};

/// Ceilings on what one command reads. README "Limits" documents them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest input file, and largest total of all input files of one command
    /// (`--max-input-bytes`).
    pub input_bytes: u64,
    /// Most distinct (tool, test, transport, size) latency groups of one command: each
    /// merged histogram holds a counts array of about 270 KB.
    pub latency_groups: usize,
    /// Most rows of the merged tables (latency, bandwidth and collective groups together):
    /// each is rendered in four formats.
    pub table_rows: usize,
    /// Most input files of one command.
    pub files: usize,
}

/// Default of `--max-input-bytes`: 256 MiB, about three times the 1024-GPU result set of
/// the scale benchmark (94 MiB).
pub const DEFAULT_INPUT_BYTES: u64 = 256 << 20;
/// Default ceiling on latency groups: a full perftest `-a` sweep (23 sizes) of three tests
/// over two transports is 138.
pub const DEFAULT_LATENCY_GROUPS: usize = 512;
/// Default ceiling on table rows: six collectives at 26 sizes at eight scales (8 to 1024
/// GPUs) are 1,248 rows.
pub const DEFAULT_TABLE_ROWS: usize = 8192;
/// Default ceiling on input files: one per rank and tool of an 8,192-GPU run.
pub const DEFAULT_FILES: usize = 65_536;
pub use results::limits::{decoded_estimate, MAX_STRING_BYTES};
/// Longest name that groups rows (tool, test, transport, collective, backend, host of a
/// pair): names become table rows, plot series and metric labels.
pub const MAX_NAME_BYTES: usize = 256;
/// The decoded form of the inputs may take at most `input_bytes` times this factor
/// (9/4) of memory, estimated before parsing ([`decoded_estimate`]): 576 MiB at the
/// default, which the 1024-GPU scale set (estimated 529 MiB, 140 MiB in fact) fits.
pub const DECODED_FACTOR: (u64, u64) = (9, 4);

impl Default for Limits {
    fn default() -> Self {
        Limits {
            input_bytes: DEFAULT_INPUT_BYTES,
            latency_groups: DEFAULT_LATENCY_GROUPS,
            table_rows: DEFAULT_TABLE_ROWS,
            files: DEFAULT_FILES,
        }
    }
}

impl Limits {
    /// Most memory the decoded documents of one command may take.
    pub fn decoded_bytes(&self) -> u64 {
        self.input_bytes.saturating_mul(DECODED_FACTOR.0) / DECODED_FACTOR.1
    }
}

/// A document that was read and passed every check, with where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The path as it was found (argument, or argument joined with the relative path).
    pub path: PathBuf,
    pub doc: Document,
    /// SHA-256 of the file's bytes, for the signed manifest; a copy of the file is made
    /// only if it still has this digest, so the evidence signed is the evidence judged.
    pub sha256: String,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// Its latency histograms, merged per group as it was read (each encoding decoded
    /// once). [`load`] and [`InputSet::of`] move them into the set's groups, so a loaded
    /// set's documents hold none.
    pub latency: LatencyGroups,
    /// A document streamed because of its size (the `stream` module): what it keeps
    /// instead of its rows (`doc.results` is then empty). `None` for documents read whole.
    pub compact: Option<Box<Compact>>,
    /// Where its bytes already are in the report bundle (a streamed input's link or copy,
    /// or the copy a whole read wrote once the bytes had parsed): the bytes hashed and
    /// judged. `None` outside a report.
    pub copied: Option<PathBuf>,
}

/// What a streamed document keeps instead of its result rows.
#[derive(Debug, Clone)]
pub struct Compact {
    /// Its point-to-point rows in compact form.
    pub rows: P2pRows,
}

impl Loaded {
    /// Parses a document held in memory (tests, generators).
    pub fn from_text(path: &str, text: &str) -> Result<Loaded, String> {
        let (doc, latency) = parse_merging(text, DEFAULT_LATENCY_GROUPS)?;
        Ok(Loaded {
            path: path.into(),
            doc,
            sha256: sha256_hex(text.as_bytes()),
            bytes: text.len() as u64,
            latency,
            compact: None,
            copied: None,
        })
    }

    /// The compact rows of a streamed document.
    pub fn p2p(&self) -> Option<&P2pRows> {
        self.compact.as_ref().map(|c| &c.rows)
    }

    /// Result rows in the file, streamed or not.
    pub fn row_count(&self) -> usize {
        self.doc.results.len() + self.p2p().map_or(0, |p| p.rows.len())
    }

    /// The file's bytes as they were judged: read again and checked against
    /// [`sha256`](Self::sha256), so a file changed since cannot slip into a bundle.
    pub fn read_judged_bytes(&self) -> Result<Vec<u8>> {
        let bytes = read_bounded(&self.path, self.bytes)
            .map_err(|e| Error::Input(format!("{}: {e}", self.path.display())))?;
        if sha256_hex(&bytes) != self.sha256 {
            return Err(Error::Input(format!(
                "{}: changed while aggregate was running (its SHA-256 is not the one of the \
                 bytes judged); run again once the file is final",
                self.path.display()
            )));
        }
        Ok(bytes)
    }
}

/// A file that could not be used, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BadInput {
    pub path: String,
    pub problem: String,
}

impl BadInput {
    /// `problem` with `path`, shortened for display (a serde message may quote a whole
    /// hostile string).
    pub fn new(path: &Path, problem: String) -> BadInput {
        BadInput {
            path: crate::escape::shorten(&path.display().to_string(), 1024),
            problem: crate::escape::shorten(&problem, 1024),
        }
    }
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
    /// Every document's latency histograms, merged per group.
    pub latency: LatencyGroups,
}

impl InputSet {
    /// The set of documents made in memory (tests, generators): their groups gathered.
    pub fn of(mut docs: Vec<Loaded>) -> InputSet {
        let mut gathered = Gathered::default();
        for d in &mut docs {
            gathered.add(std::mem::take(&mut d.latency), usize::MAX);
        }
        InputSet {
            docs,
            skipped: Vec::new(),
            latency: gathered.into_groups(),
        }
    }
}

/// Expands the arguments into the list of files to read: files as given, directories
/// walked recursively for `*.json` in name order so reports are reproducible. A directory
/// reached twice (through a symbolic link) is walked once.
pub fn expand(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut seen = HashSet::new();
    for arg in args {
        let meta = fs::metadata(arg)
            .map_err(|e| Error::Input(format!("{}: cannot read: {e}", arg.display())))?;
        if meta.is_dir() {
            walk(arg, &mut files, &mut seen)?;
        } else {
            files.push(arg.clone());
        }
    }
    Ok(files)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>, seen: &mut HashSet<PathBuf>) -> Result<()> {
    if let Ok(real) = fs::canonicalize(dir) {
        if !seen.insert(real) {
            return Ok(());
        }
    }
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
                    crate::escape::terminal(&p.display().to_string())
                );
                continue;
            }
            walk(&p, out, seen)?;
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

/// Reads every input with the default [`Limits`]. Without `skip_bad` the first bad file
/// stops the run; with it, bad files are listed in [`InputSet::skipped`] and the rest is
/// used.
pub fn load(args: &[PathBuf], skip_bad: bool) -> Result<InputSet> {
    load_with(args, skip_bad, &Limits::default())
}

/// [`load`] within `limits`.
pub fn load_with(args: &[PathBuf], skip_bad: bool, limits: &Limits) -> Result<InputSet> {
    load_reading(args, skip_bad, limits, &|_, _, _, _| None)
}

/// Reads one input file another way (the report streams its largest): given the file's
/// index among the inputs, its path and size and the decoded-memory budget, the outcome,
/// or `None` to read it whole.
pub type Reader<'a> =
    dyn Fn(usize, &Path, u64, &Budget) -> Option<std::result::Result<Loaded, BadInput>> + Sync + 'a;

/// [`load_with`], each file offered to `read` first.
pub fn load_reading(
    args: &[PathBuf],
    skip_bad: bool,
    limits: &Limits,
    read: &Reader,
) -> Result<InputSet> {
    let files = files_within(args, limits)?;
    let (sized, early_bad) = sized_within(files, limits)?;
    let mut set = InputSet::default();
    let budget = Budget::new(limits.decoded_bytes());
    let gathered = Mutex::new(Gathered::default());
    let outcomes = load_parallel(&sized, &budget, limits.latency_groups, &gathered, read);
    if budget.exceeded() {
        return Err(Error::Input(format!(
            "the inputs would take more than {} of memory decoded (estimated before parsing; \
             the ceiling is 9/4 x --max-input-bytes): they hold far more values \
             than result documents of their size do; pass --max-input-bytes to allow more",
            human(limits.decoded_bytes())
        )));
    }
    let mut bad = early_bad;
    for outcome in outcomes {
        match outcome {
            Ok(l) => set.docs.push(l),
            Err(b) => bad.push(b),
        }
    }
    if let Some(first) = bad.first() {
        if !skip_bad {
            return Err(Error::Input(format!(
                "{first}\n(use --skip-bad to leave bad files out and name them in the report)"
            )));
        }
    }
    set.skipped = bad;
    if set.docs.is_empty() {
        return Err(Error::Input(
            "every input file was bad; nothing to judge".to_string(),
        ));
    }
    let gathered = gathered.into_inner().unwrap_or_else(|p| p.into_inner());
    check_groups(&set.docs, gathered.distinct(), limits)?;
    set.latency = gathered.into_groups();
    Ok(set)
}

/// The result files the arguments name (directories expanded), within the file ceiling.
fn files_within(args: &[PathBuf], limits: &Limits) -> Result<Vec<PathBuf>> {
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
    if files.len() > limits.files {
        return Err(Error::Input(format!(
            "{} input files, over the ceiling of {} per run; aggregate them in parts",
            files.len(),
            limits.files
        )));
    }
    Ok(files)
}

/// Input files with their sizes in bytes.
type Sized = Vec<(PathBuf, u64)>;

/// Sizes first: a file over the ceiling is bad on its own (returned apart); all of them
/// together over it stop the run before anything is read.
fn sized_within(files: Vec<PathBuf>, limits: &Limits) -> Result<(Sized, Vec<BadInput>)> {
    let mut sized = Vec::new();
    let mut total = 0u64;
    let mut bad = Vec::new();
    for path in files {
        match regular_file_size(&path, limits) {
            Ok(n) => {
                total = total.saturating_add(n);
                sized.push((path, n));
            }
            Err(problem) => bad.push(BadInput::new(&path, problem)),
        }
    }
    if total > limits.input_bytes {
        return Err(Error::Input(format!(
            "the inputs total {} ({total} bytes) in {} files, over the ceiling of {} per run; \
             pass --max-input-bytes to read more (memory grows with it: README, Limits)",
            human(total),
            sized.len(),
            human(limits.input_bytes)
        )));
    }
    Ok((sized, bad))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counts the groups the tables will have, before any is built (`histograms`: the
/// distinct latency groups the documents hold).
fn check_groups(docs: &[Loaded], histograms: usize, limits: &Limits) -> Result<()> {
    let mut rows = BTreeSet::new();
    for d in docs {
        for (i, r) in d.doc.results.iter().enumerate() {
            check_names(d, i, r)?;
            let (kind, a, b, c) = match r {
                TestResult::Latency(l) => (0, &l.test, &l.transport, 0),
                TestResult::Bandwidth(b) => (1, &b.test, &b.transport, u64::from(b.bidirectional)),
                TestResult::Collective(c) => (2, &c.collective, &c.backend, u64::from(c.ranks)),
            };
            rows.insert((kind, &d.doc.tool, a, b, c, r.size_bytes()));
        }
        // A streamed document's groups and ends, as the rows above.
        let Some(compact) = &d.compact else { continue };
        let p = &compact.rows;
        let names = p
            .groups
            .iter()
            .flat_map(|g| [("test", &g.test), ("transport", &g.transport)])
            .chain(p.peers.list.iter().map(|e| ("pair host", &e.host)));
        for (field, name) in names {
            if name.len() > MAX_NAME_BYTES {
                return Err(Error::Input(format!(
                    "{}: a {field} of {} bytes; names that group results are at most \
                     {MAX_NAME_BYTES} bytes",
                    d.path.display(),
                    name.len()
                )));
            }
        }
        for g in &p.groups {
            let kind = if g.latency { 0 } else { 1 };
            rows.insert((
                kind,
                &d.doc.tool,
                &g.test,
                &g.transport,
                u64::from(g.bidirectional),
                g.size,
            ));
        }
    }
    if histograms > limits.latency_groups {
        return Err(Error::Input(format!(
            "the inputs hold {} distinct latency histogram groups (tool, test, transport, \
             size), over the ceiling of {}: each merged histogram takes about 270 KB; are \
             the sizes or test names corrupt?",
            histograms, limits.latency_groups
        )));
    }
    if rows.len() > limits.table_rows {
        return Err(Error::Input(format!(
            "the inputs would make {} table rows (distinct test, transport and size), over \
             the ceiling of {}; are the sizes or test names corrupt?",
            rows.len(),
            limits.table_rows
        )));
    }
    Ok(())
}

/// The names that group result `i` of a document (and its tool) within the name ceiling.
fn check_names(d: &Loaded, i: usize, r: &TestResult) -> Result<()> {
    let names: [(&str, &str); 4] = match r {
        TestResult::Latency(l) => [
            ("test", &l.test),
            ("transport", &l.transport),
            ("pair.initiator.host", &l.pair.initiator.host),
            ("pair.responder.host", &l.pair.responder.host),
        ],
        TestResult::Bandwidth(b) => [
            ("test", &b.test),
            ("transport", &b.transport),
            ("pair.initiator.host", &b.pair.initiator.host),
            ("pair.responder.host", &b.pair.responder.host),
        ],
        TestResult::Collective(c) => [
            ("collective", &c.collective),
            ("backend", &c.backend),
            ("datatype", &c.datatype),
            ("op", &c.op),
        ],
    };
    let tool = [("tool", d.doc.tool.as_str())];
    for (field, name) in names.iter().chain(&tool) {
        if name.len() > MAX_NAME_BYTES {
            let at = if *field == "tool" {
                "tool".to_string()
            } else {
                format!("results[{i}].{field}")
            };
            return Err(Error::Input(format!(
                "{}: at JSON path `{at}`: a name of {} bytes; names that group \
                 results are at most {MAX_NAME_BYTES} bytes",
                d.path.display(),
                name.len()
            )));
        }
    }
    Ok(())
}

/// `256 MiB`, `1.5 GiB`, `900 B`: a size for messages.
pub fn human(bytes: u64) -> String {
    match bytes {
        b if b < 1 << 10 => format!("{b} B"),
        b if b.is_multiple_of(1 << 10) && b < 1 << 20 => format!("{} KiB", b >> 10),
        b if b < 1 << 30 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
    }
    .replace(".0 ", " ")
}

/// The size of a regular file within the per-file ceiling, or why it cannot be read.
fn regular_file_size(path: &Path, limits: &Limits) -> Result<u64, String> {
    let meta = fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err(
            "not a regular file (a FIFO, socket or device is never a result document)".into(),
        );
    }
    if meta.len() > limits.input_bytes {
        return Err(format!(
            "{} ({} bytes), over the per-file ceiling of {}; pass --max-input-bytes to read it",
            human(meta.len()),
            meta.len(),
            human(limits.input_bytes)
        ));
    }
    Ok(meta.len())
}

/// Reads at most `expected` bytes of `path`; a file that grew or shrank since its size was
/// taken is an error, never a longer read.
fn read_bounded(path: &Path, expected: u64) -> Result<Vec<u8>, String> {
    let f = fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut bytes = Vec::with_capacity(expected as usize);
    f.take(expected.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 != expected {
        return Err(format!(
            "changed size while being read ({expected} bytes, then {}{}); is a run still \
             writing it?",
            bytes.len(),
            if bytes.len() as u64 > expected {
                "+"
            } else {
                ""
            }
        ));
    }
    Ok(bytes)
}

/// The decoded-memory budget shared by the reader threads.
pub struct Budget {
    limit: u64,
    used: AtomicU64,
    exceeded: AtomicBool,
}

impl Budget {
    pub fn new(limit: u64) -> Self {
        Budget {
            limit,
            used: AtomicU64::new(0),
            exceeded: AtomicBool::new(false),
        }
    }
    /// Takes `n` bytes of the budget; false (and the run fails) when it is spent.
    pub fn take(&self, n: u64) -> bool {
        let before = self.used.fetch_add(n, Ordering::Relaxed);
        if before.saturating_add(n) > self.limit {
            self.exceeded.store(true, Ordering::Relaxed);
            return false;
        }
        true
    }
    pub fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::Relaxed)
    }
}

/// Reads the files on every core: decoding histograms is most of the work at 1024 ranks.
/// Results come back in input order so reports do not depend on scheduling.
/// Each document's latency groups go into `gathered` as soon as it is read, so no more
/// than one document's groups per thread are held apart.
fn load_parallel(
    files: &[(PathBuf, u64)],
    budget: &Budget,
    max_groups: usize,
    gathered: &Mutex<Gathered>,
    read: &Reader,
) -> Vec<Result<Loaded, BadInput>> {
    let indexed: Vec<(usize, &PathBuf, u64)> = files
        .iter()
        .enumerate()
        .map(|(i, (p, n))| (i, p, *n))
        .collect();
    crate::parallel::map_in_order(&indexed, |(i, path, size)| {
        let loaded = read(*i, path, *size, budget)
            .unwrap_or_else(|| load_file_within(path, *size, budget, max_groups));
        loaded.map(|mut l| {
            lock(gathered).add(std::mem::take(&mut l.latency), max_groups);
            l
        })
    })
}

/// Reads and checks one file within the default [`Limits`].
pub fn load_file(path: &Path) -> Result<Loaded, BadInput> {
    let limits = Limits::default();
    let bad = |problem: String| BadInput::new(path, problem);
    let size = regular_file_size(path, &limits).map_err(bad)?;
    load_file_within(
        path,
        size,
        &Budget::new(limits.decoded_bytes()),
        limits.latency_groups,
    )
}

fn load_file_within(
    path: &Path,
    size: u64,
    budget: &Budget,
    max_groups: usize,
) -> Result<Loaded, BadInput> {
    read_whole(path, size, budget, max_groups).map(|(l, _)| l)
}

/// Reads input file number `index` (`size` bytes) whole, as [`load`] does, and once it
/// has parsed writes the very bytes that were hashed and parsed into `copy_dir` as
/// `.whole-NNNN.part` ([`Loaded::copied`]): the report's copy of its evidence, made
/// without reading or hashing the file a second time.
pub fn read_whole_copying(
    index: usize,
    path: &Path,
    size: u64,
    budget: &Budget,
    max_groups: usize,
    copy_dir: &Path,
) -> Result<Loaded, BadInput> {
    let (mut loaded, bytes) = read_whole(path, size, budget, max_groups)?;
    let copy = copy_dir.join(format!(".whole-{index:04}.part"));
    fs::create_dir_all(copy_dir)
        .and_then(|_| fs::write(&copy, &bytes))
        .map_err(|e| {
            let _ = fs::remove_file(&copy);
            BadInput::new(
                path,
                format!("cannot copy into {}: {e}", copy_dir.display()),
            )
        })?;
    loaded.copied = Some(copy);
    Ok(loaded)
}

/// One file read whole and checked, with its bytes.
fn read_whole(
    path: &Path,
    size: u64,
    budget: &Budget,
    max_groups: usize,
) -> Result<(Loaded, Vec<u8>), BadInput> {
    let bad = |problem: String| BadInput::new(path, problem);
    let bytes = read_bounded(path, size).map_err(bad)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| bad(format!("not UTF-8 text: {e}")))?;
    if text.starts_with('\u{feff}') {
        return Err(bad(
            "starts with a byte-order mark: not a fabcheck result document (they are plain \
             UTF-8 JSON)"
                .into(),
        ));
    }
    // What parsing would cost in memory, known before anything is built; a string longer
    // than any field holds is refused here. Text that is not JSON gets a figure too: the
    // real parse below says where and why it is not.
    let estimate = decoded_estimate(text).map_err(|e| bad(e.to_string()))?;
    if budget.exceeded() || !budget.take(estimate) {
        return Err(bad("not read: the decoded-memory ceiling is spent".into()));
    }
    // Charged whether or not it then parses, so whether a run is over the ceiling does
    // not depend on which reader thread got there first.
    let (doc, latency) = parse_merging(text, max_groups).map_err(bad)?;
    let loaded = Loaded {
        path: path.to_path_buf(),
        sha256: sha256_hex(&bytes),
        bytes: size,
        doc,
        latency,
        compact: None,
        copied: None,
    };
    Ok((loaded, bytes))
}

/// Parses one document and checks what serde cannot: the schema version and that every
/// histogram decodes within its bounds. The error names the JSON path of the problem.
pub fn parse_document(text: &str) -> Result<Document, String> {
    parse_merging(text, DEFAULT_LATENCY_GROUPS).map(|(doc, _)| doc)
}

/// [`parse_document`], with every latency row's histogram merged into its group as it is
/// checked (decoded once: the tables take the groups, not the rows), at most `max_groups`.
pub fn parse_merging(text: &str, max_groups: usize) -> Result<(Document, LatencyGroups), String> {
    // The plain parse first: tracking the JSON path of every value (serde_path_to_error)
    // cost a fifth of the parse at 1024 ranks, and only a refused document needs it. The
    // same deserializer refuses the same documents, so a refused one is parsed again with
    // the path tracked, for the message.
    let doc = match serde_json::from_str::<Document>(text) {
        Ok(doc) => doc,
        Err(_) => {
            let mut de = serde_json::Deserializer::from_str(text);
            let parsed = serde_path_to_error::deserialize::<_, Document>(&mut de)
                .map_err(|e| (e.path().to_string(), e.into_inner()))
                .and_then(|d| de.end().map(|_| d).map_err(|e| (String::new(), e)));
            match parsed {
                Ok(doc) => doc,
                Err((path, inner)) => return Err(diagnose(text, &path, &inner)),
            }
        }
    };
    if doc.schema_version != SCHEMA_VERSION {
        return Err(version_message(&doc.schema_version.into()));
    }
    let mut groups = Hists::default();
    for (i, r) in doc.results.iter().enumerate() {
        let at =
            |field: &str, e: &dyn fmt::Display| format!("at JSON path `results[{i}].{field}`: {e}");
        match r {
            TestResult::Latency(l) => {
                let transport = results::transport_label(&l.transport, l.memory.as_ref());
                groups
                    .merge(&l.test, &transport, l.size_bytes, &l.histogram, max_groups)
                    .map_err(|e| at("histogram", &e))?;
            }
            TestResult::Bandwidth(_) => {}
            TestResult::Collective(c) => {
                for (field, h) in [
                    ("out_of_place.histogram", &c.out_of_place.histogram),
                    ("in_place.histogram", &c.in_place.histogram),
                ] {
                    if !h.is_empty() {
                        LatencyHistogram::validate_encoded(h).map_err(|e| at(field, &e))?;
                    }
                }
            }
        }
        if r.size_bytes() == 0 && !matches!(r, TestResult::Latency(_)) {
            return Err(at("size_bytes", &"0 bytes cannot carry a bandwidth"));
        }
    }
    let mut latency = LatencyGroups::new();
    groups.into_groups(&doc.tool, &mut latency);
    Ok((doc, latency))
}

/// Says the most useful thing first about a document serde refused: not JSON, not ours,
/// another version, then the exact field. Each question is answered by a pass that keeps
/// almost nothing (the one result row in question at most), so a refused document costs
/// no more memory than an accepted one.
fn diagnose(text: &str, path: &str, inner: &serde_json::Error) -> String {
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return if e.is_eof() {
            format!("truncated JSON ({e}); was the run interrupted while writing?")
        } else {
            format!("not valid JSON: {e}")
        };
    }
    if !text.trim_start().starts_with('{') {
        return "not a fabcheck result document: the top level is not a JSON object".to_string();
    }
    /// The version alone; every other field is skipped unread.
    #[derive(serde::Deserialize)]
    struct Probe {
        schema_version: Option<serde_json::Value>,
    }
    match serde_json::from_str::<Probe>(text) {
        Ok(Probe {
            schema_version: None,
        }) => return "no schema_version field: not a fabcheck result document".to_string(),
        Ok(Probe {
            schema_version: Some(v),
        }) if v.as_u64() != Some(u64::from(SCHEMA_VERSION)) => return version_message(&v),
        _ => {}
    }
    match deeper_path(text, path) {
        Some(msg) => msg,
        None if path.is_empty() || path == "." => format!("{inner}"),
        None => format!("at JSON path `{path}`: {inner}"),
    }
}

/// Row `index` of the top-level `results` array of `text`, every other value skipped.
fn result_row(text: &str, index: usize) -> Option<serde_json::Value> {
    use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
    struct Top(usize);
    struct Rows(usize);
    impl<'de> Visitor<'de> for Top {
        type Value = Option<serde_json::Value>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a result document")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut row = None;
            while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                if k == "results" && row.is_none() {
                    row = m.next_value_seed(Rows(self.0))?;
                } else {
                    m.next_value::<IgnoredAny>()?;
                }
            }
            Ok(row)
        }
    }
    impl<'de> DeserializeSeed<'de> for Rows {
        type Value = Option<serde_json::Value>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }
    }
    impl<'de> Visitor<'de> for Rows {
        type Value = Option<serde_json::Value>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of results")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut row = None;
            let mut i = 0;
            loop {
                if i == self.0 {
                    match seq.next_element::<serde_json::Value>()? {
                        Some(v) => row = Some(v),
                        None => break,
                    }
                } else if seq.next_element::<IgnoredAny>()?.is_none() {
                    break;
                }
                i += 1;
            }
            Ok(row)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    serde::Deserializer::deserialize_map(&mut de, Top(index)).ok()?
}

/// A result row read buffered (its `kind` not the first key, see `results::TestResult`)
/// reports an error at the row, not the field. Re-read that row as its own type to name
/// the exact field.
fn deeper_path(text: &str, path: &str) -> Option<String> {
    let rest = path.strip_prefix("results[")?;
    let (idx, tail) = rest.split_once(']')?;
    if !tail.is_empty() {
        return None;
    }
    let row = result_row(text, idx.parse::<usize>().ok()?)?;
    row_problem(&row, idx)
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
        Some(other) => Some(("kind".to_string(), TestResult::unknown_kind(other))),
        None => Some(("kind".to_string(), TestResult::MISSING_KIND.to_string())),
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
        let doc = parse_document(&sample_text()).unwrap();
        assert_eq!(doc.results.len(), 2);
        for r in &doc.results {
            let TestResult::Latency(l) = r else { panic!() };
            assert_eq!(
                LatencyHistogram::validate_encoded(&l.histogram).unwrap(),
                2000
            );
        }
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

    #[test]
    fn histograms_are_gathered_per_group_once_and_no_document_keeps_its_own() {
        let dir = tempfile::tempdir().unwrap();
        // Two documents of the same groups (sizes 2 and 64), one of another (4096).
        let a = synth::latency_doc("h1", "h2", &[2, 64], 1.5, 1);
        let b = synth::latency_doc("h3", "h4", &[2, 64], 3.0, 2);
        let c = synth::latency_doc("h5", "h6", &[4096], 2.0, 3);
        for (name, d) in [("a.json", &a), ("b.json", &b), ("c.json", &c)] {
            fs::write(dir.path().join(name), serde_json::to_string(d).unwrap()).unwrap();
        }
        let set = load(&[dir.path().to_path_buf()], false).unwrap();
        assert!(set.docs.iter().all(|d| d.latency.is_empty()));
        assert_eq!(set.latency.len(), 3, "{:?}", set.latency.keys());
        // Each group is the merge of its rows' histograms, decoded here independently.
        for (k, (h, n)) in &set.latency {
            let mut want = LatencyHistogram::new();
            let mut rows = 0;
            for d in [&a, &b, &c] {
                for r in &d.results {
                    if let TestResult::Latency(l) = r {
                        if LatKey::of(d, l) == *k {
                            want.merge_encoded(&l.histogram).unwrap();
                            rows += 1;
                        }
                    }
                }
            }
            assert_eq!(*n, rows, "{k:?}");
            assert_eq!(h.len(), want.len(), "{k:?}");
            assert_eq!(h.buckets(), want.buckets(), "{k:?}");
        }
        // The ceiling counts the groups of every document, past it too.
        let limits = Limits {
            latency_groups: 2,
            ..Limits::default()
        };
        let e = load_with(&[dir.path().to_path_buf()], false, &limits).unwrap_err();
        assert!(
            e.to_string()
                .contains("3 distinct latency histogram groups"),
            "{e}"
        );
    }

    #[test]
    fn a_whole_read_for_a_report_copies_the_bytes_it_parsed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.json");
        let text = sample_text();
        fs::write(&good, &text).unwrap();
        let bad = dir.path().join("bad.json");
        fs::write(&bad, &text[..text.len() / 2]).unwrap();
        let copies = dir.path().join("bundle/inputs");
        let budget = Budget::new(1 << 30);
        let size = text.len() as u64;
        let l = read_whole_copying(3, &good, size, &budget, 512, &copies).unwrap();
        let copy = l.copied.clone().unwrap();
        assert!(copy.ends_with(".whole-0003.part"));
        assert_eq!(fs::read(&copy).unwrap(), text.as_bytes());
        assert_eq!(l.sha256, sha256_hex(text.as_bytes()));
        let e = read_whole_copying(4, &bad, size / 2, &budget, 512, &copies).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let left: Vec<_> = fs::read_dir(&copies).unwrap().collect();
        assert_eq!(left.len(), 1, "a refused document leaves no copy");
    }
}
