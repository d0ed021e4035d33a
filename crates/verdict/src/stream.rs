//! Reading a result document too large to hold: the all-pairs sweep of a large cluster
//! (1024 nodes x 8 rails is 4.2 million rows, about 4 GiB of JSON as the benchmarks write
//! it). Read whole, its bytes and its parsed rows would take several times that; streamed,
//! only the compact rows of [`crate::rows`] stay.
//!
//! The file is first copied into the report bundle and the copy is what gets read, hashed
//! and judged: the bytes signed are the bytes judged, without keeping them in memory, and
//! without a window in which the original could change between reading and copying.
//!
//! Fast path: the benchmarks write pretty-printed JSON, where every result row starts on
//! a line of its own (`    {` at the rows' indentation) and JSON forbids raw newlines
//! inside strings, so rows can be cut apart at line starts without tokenising, in blocks
//! that worker threads parse in parallel while the reader hashes the next block. The cut is
//! verified, never trusted: every row must parse as exactly one JSON object, the bytes
//! between rows must be a comma, and the document without its rows must parse as a
//! document whose `results` is empty. Anything else (another layout, compact JSON, a bad
//! row) goes to the slow path: one thread, serde over a buffered reader, rows parsed one
//! at a time as full `TestResult`s, with the same error messages as a document read whole.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::mpsc;

use memchr::memmem;
use results::{BandwidthSummary, CpuUse, Document, LatencySummary, TestResult};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::digest::hex;
use crate::groups::Hists;
use crate::input::{self, BadInput, LatencyGroups, Loaded};
use crate::metric::{HealthTally, LossTally};
use crate::rows::{BwStats, LatStats, P2pRow, P2pRows, RowStats, NO_ROUND};

/// A streamed document: everything but its rows, and the rows in compact form.
pub struct Streamed {
    /// The document with `results` empty.
    pub doc: Document,
    pub rows: P2pRows,
    /// Latency histograms merged per (tool, test, transport, size), as for documents read
    /// whole.
    pub latency: LatencyGroups,
    pub sha256: String,
    /// Read by the parallel path (false: the one-thread path).
    pub parallel: bool,
    /// Bytes of the document without its rows (what its other fields cost to parse).
    pub head_bytes: u64,
}

/// Why a document was not streamed.
#[derive(Debug)]
pub enum StreamError {
    /// The file is bad: this is the message, as a whole read would give it.
    Bad(String),
    /// The document holds rows that have no compact form (collectives): read it whole.
    NotStreamable(String),
}

/// Bytes read at a time; a block is cut at its last row start and handed to a worker.
const BLOCK: usize = 16 << 20;

/// Files at least this large are streamed by `aggregate report` (`--stream-above`).
pub const DEFAULT_ABOVE: u64 = 256 << 20;

/// Reads input file number `index` (`size` bytes) streamed, its bytes linked or copied
/// first into `copy_dir` as `.stream-NNNN.part` ([`Loaded::copied`]), the memory
/// its compact form takes charged to `budget`. `None` when it holds rows that have no
/// compact form: read it whole.
pub fn read(
    index: usize,
    path: &Path,
    limits: &input::Limits,
    budget: &input::Budget,
    copy_dir: Option<&Path>,
) -> Option<Result<Loaded, BadInput>> {
    let bad = |problem: String| Some(Err(BadInput::new(path, problem)));
    let size = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) => return bad(format!("cannot read: {e}")),
    };
    if let Some(d) = copy_dir {
        if let Err(e) = std::fs::create_dir_all(d) {
            return bad(format!("cannot create {}: {e}", d.display()));
        }
    }
    let copy = copy_dir.map(|d| d.join(format!(".stream-{index:04}.part")));
    let discard = || {
        if let Some(c) = &copy {
            let _ = std::fs::remove_file(c);
        }
    };
    match load(path, copy.as_deref(), limits.latency_groups) {
        Ok(s) => {
            // What stays in memory: the compact rows and the peers; the document's
            // other fields were charged by their size.
            let cost = (s.rows.rows.len() * std::mem::size_of::<crate::rows::P2pRow>()) as u64
                + (s.rows.peers.list.len() * 64) as u64
                + s.head_bytes;
            if budget.exceeded() || !budget.take(cost) {
                discard();
                return bad("not read: the decoded-memory ceiling is spent".into());
            }
            Some(Ok(Loaded {
                path: path.to_path_buf(),
                doc: s.doc,
                sha256: s.sha256,
                bytes: size,
                latency: s.latency,
                compact: Some(Box::new(input::Compact { rows: s.rows })),
                copied: copy,
            }))
        }
        Err(StreamError::NotStreamable(_)) => {
            discard();
            None
        }
        Err(StreamError::Bad(problem)) => {
            discard();
            bad(problem)
        }
    }
}

/// Streams `path`. With `copy`, the bundle gets the file there: a hard link when it is on
/// the same filesystem (free, and the link is what gets read), else a copy written as the
/// bytes are read. Either way the bytes hashed and parsed are the bytes in the bundle; a
/// file changed while it was read is refused, and one changed in place afterwards fails
/// `aggregate verify`.
pub fn load(path: &Path, copy: Option<&Path>, max_groups: usize) -> Result<Streamed, StreamError> {
    let bad = |what: &str, e: std::io::Error| StreamError::Bad(format!("{what}: {e}"));
    let linked = copy.filter(|dst| std::fs::hard_link(path, dst).is_ok());
    let (read_from, tee) = match linked {
        Some(dst) => (dst, None),
        None => (path, copy),
    };
    let stamp = |p: &Path| std::fs::metadata(p).map(|m| (m.len(), m.modified().ok()));
    let before = stamp(read_from).map_err(|e| bad("cannot read", e))?;
    let source = Source::open(read_from, tee).map_err(|e| bad("cannot read", e))?;
    let out = match fast(source, max_groups) {
        Ok(s) => Ok(s),
        Err(Fallback::NotStreamable(m)) => Err(StreamError::NotStreamable(m)),
        Err(Fallback::Io(e)) => Err(bad("cannot read", e)),
        Err(Fallback::Layout(why)) => {
            if std::env::var_os("AGGREGATE_TIMINGS").is_some() {
                eprintln!(
                    "aggregate: {}: not in the line layout ({why}): one thread",
                    path.display()
                );
            }
            // A copy made while reading may have stopped early: copy whole, then read it.
            let src = match tee {
                Some(dst) => {
                    std::fs::copy(path, dst).map_err(|e| {
                        bad(
                            &format!("cannot copy into the report ({})", dst.display()),
                            e,
                        )
                    })?;
                    dst
                }
                None => read_from,
            };
            slow(src, max_groups)
        }
    }?;
    if stamp(read_from).ok() != Some(before) {
        return Err(StreamError::Bad(
            "changed while it was being read: judge it again once the run that writes it has finished".into(),
        ));
    }
    Ok(out)
}

/// The file being read, the copy being written and the hash of the bytes, together.
struct Source {
    file: File,
    copy: Option<File>,
    hash: Sha256,
    /// Bytes read at a time ([`BLOCK`]; smaller in tests, to cut rows across blocks).
    block: usize,
}

impl Source {
    fn open(path: &Path, copy: Option<&Path>) -> std::io::Result<Source> {
        Ok(Source {
            file: File::open(path)?,
            copy: copy.map(File::create).transpose()?,
            hash: Sha256::new(),
            block: BLOCK,
        })
    }

    /// Appends up to [`BLOCK`] more bytes to `buf`, hashed and copied; false at the end.
    fn more(&mut self, buf: &mut Vec<u8>) -> std::io::Result<bool> {
        use std::io::Write;
        let start = buf.len();
        buf.reserve(self.block);
        let n = Read::by_ref(&mut self.file)
            .take(self.block as u64)
            .read_to_end(buf)?;
        self.hash.update(&buf[start..]);
        if let Some(c) = &mut self.copy {
            c.write_all(&buf[start..])?;
        }
        Ok(n > 0)
    }
}

enum Fallback {
    Io(std::io::Error),
    /// Not the line layout, or a row that does not parse: the slow path decides.
    Layout(String),
    NotStreamable(String),
}

impl From<std::io::Error> for Fallback {
    fn from(e: std::io::Error) -> Self {
        Fallback::Io(e)
    }
}

/// What one worker made of one block of rows.
struct Chunk {
    /// Whether the block's last row was followed by a comma (more rows follow).
    comma: bool,
    rows: P2pRows,
    latency: Hists,
}

/// The key every result row opens with (the row kind's tag, written first).
const KIND: &[u8] = b"\"kind\"";

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\r' | b'\t')
}

/// The `{` of a row whose `"kind"` key is at `k`: `{`, blanks, `"kind"`, blanks, `:`.
/// JSON strings cannot hold a raw `"`, so these bytes are structure, never text; whether
/// the object is a row is verified when it is parsed.
fn row_start(b: &[u8], k: usize) -> Option<usize> {
    let mut j = k + KIND.len();
    while j < b.len() && is_ws(b[j]) {
        j += 1;
    }
    if b.get(j) != Some(&b':') {
        return None;
    }
    let mut i = k;
    while i > 0 && is_ws(b[i - 1]) {
        i -= 1;
    }
    (i > 0 && b[i - 1] == b'{').then(|| i - 1)
}

/// The `[` of the top-level `"results"` array in `b`, if `b` reaches it.
fn results_open(b: &[u8]) -> Option<usize> {
    memmem::find_iter(b, b"\"results\"").find_map(|k| {
        let mut j = k + 9;
        while j < b.len() && is_ws(b[j]) {
            j += 1;
        }
        if b.get(j) != Some(&b':') {
            return None;
        }
        j += 1;
        while j < b.len() && is_ws(b[j]) {
            j += 1;
        }
        (b.get(j) == Some(&b'[')).then_some(j)
    })
}

/// Largest buffer without a row start, in blocks, before the fast path gives up (a row
/// that large, or rows that do not open with their kind).
const MAX_CARRY_BLOCKS: usize = 4;

/// A layout the fast path does not take, in words.
fn layout(m: &str) -> Fallback {
    Fallback::Layout(m.to_string())
}

/// The file being cut: what was read and not yet handed on, and whether it all was.
struct Cutter {
    src: Source,
    buf: Vec<u8>,
    eof: bool,
}

impl Cutter {
    fn more(&mut self) -> Result<(), Fallback> {
        self.eof = !self.src.more(&mut self.buf)?;
        Ok(())
    }

    /// The head: everything up to and including the `[` of `"results"`; and whether the
    /// array is empty. The buffer is left at the first row (or the `]`).
    fn head(&mut self) -> Result<(Vec<u8>, bool), Fallback> {
        let mut head: Vec<u8> = Vec::new();
        loop {
            if let Some(open) = results_open(&self.buf) {
                head.extend_from_slice(&self.buf[..=open]);
                self.buf.drain(..=open);
                break;
            }
            if self.eof {
                return Err(layout("no `\"results\": [`"));
            }
            // Keep a tail that may hold the start of the key.
            let keep = self.buf.len().saturating_sub(256);
            head.extend_from_slice(&self.buf[..keep]);
            self.buf.drain(..keep);
            self.more()?;
        }
        // The first row, or the end of an empty array.
        let first = loop {
            if let Some(i) = self.buf.iter().position(|c| !is_ws(*c)) {
                break i;
            }
            if self.eof {
                return Err(layout("the results array does not end"));
            }
            self.more()?;
        };
        let empty = self.buf[first] == b']';
        if !empty {
            while !self.eof && memmem::find(&self.buf[first..], KIND).is_none() {
                self.more()?;
            }
            let k = memmem::find(&self.buf[first..], KIND).map(|k| k + first);
            if k.and_then(|k| row_start(&self.buf, k)) != Some(first) {
                return Err(layout("the first row does not open with its kind"));
            }
        }
        self.buf.drain(..first);
        Ok((head, empty))
    }

    /// Hands on blocks of whole rows as they are read, each cut before the last row start
    /// in the buffer (every row before it is complete; blocks come back through `pool`
    /// for reuse). Returns the document after the last row.
    fn cut_rows(
        &mut self,
        send: &mut dyn FnMut(Vec<u8>) -> Result<(), Fallback>,
        pool: &mpsc::Receiver<Vec<u8>>,
    ) -> Result<Vec<u8>, Fallback> {
        loop {
            let buf = &mut self.buf;
            let cut = memmem::rfind_iter(buf, KIND)
                .filter_map(|k| row_start(buf, k))
                .next();
            if self.eof {
                // The last row ends where a JSON value starting there ends; the rest is
                // the document after the rows.
                let last = cut.ok_or_else(|| layout("no row at the end"))?;
                let mut it = serde_json::Deserializer::from_slice(&buf[last..])
                    .into_iter::<serde::de::IgnoredAny>();
                match it.next() {
                    Some(Ok(_)) => {}
                    _ => return Err(layout("the last row does not parse")),
                }
                let end = last + it.byte_offset();
                let tail = buf.split_off(end);
                if last > 0 {
                    let rest = buf.split_off(last);
                    send(std::mem::replace(buf, rest))?;
                }
                send(std::mem::take(buf))?;
                return Ok(tail);
            }
            match cut.filter(|&c| c > 0) {
                Some(cut) => {
                    let mut next = pool.try_recv().unwrap_or_default();
                    next.clear();
                    next.extend_from_slice(&buf[cut..]);
                    buf.truncate(cut);
                    send(std::mem::replace(buf, next))?;
                }
                None if buf.len() > MAX_CARRY_BLOCKS * self.src.block => {
                    return Err(layout("no row start in a large stretch"));
                }
                None => {}
            }
            self.more()?;
        }
    }
}

/// Each parsed block with its place in the file.
type Parsed = mpsc::Receiver<(usize, Result<Chunk, Fallback>)>;

/// The rows cut into blocks and parsed on every core as the file is read: how many
/// blocks, the document after the rows, and the parsed blocks as they came.
fn parse_in_parallel(
    c: &mut Cutter,
    empty: bool,
    max_groups: usize,
) -> Result<(usize, Vec<u8>, Parsed), Fallback> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .max(1);
    let (job_tx, job_rx) = mpsc::sync_channel::<(usize, Vec<u8>)>(workers * 2);
    let job_rx = std::sync::Mutex::new(job_rx);
    let (done_tx, done_rx) = mpsc::channel::<(usize, Result<Chunk, Fallback>)>();
    // Parsed blocks come back for reuse: fresh 16 MiB buffers cost page faults.
    let (pool_tx, pool_rx) = mpsc::channel::<Vec<u8>>();
    let outcome: Result<(usize, Vec<u8>), Fallback> = std::thread::scope(|scope| {
        // Owned here, so that every way out of this closure closes the queue and the
        // workers end before the scope waits for them.
        let job_tx = job_tx;
        for _ in 0..workers {
            let done_tx = done_tx.clone();
            let pool_tx = pool_tx.clone();
            let job_rx = &job_rx;
            scope.spawn(move || loop {
                let job = job_rx.lock().map(|rx| rx.recv());
                let Ok(Ok((seq, block))) = job else { break };
                let _ = done_tx.send((seq, parse_block(&block, max_groups)));
                let _ = pool_tx.send(block);
            });
        }
        drop(done_tx);
        drop(pool_tx);
        if empty {
            return Ok((0, std::mem::take(&mut c.buf)));
        }
        let mut seq = 0;
        let mut send = |block: Vec<u8>| -> Result<(), Fallback> {
            job_tx
                .send((seq, block))
                .map_err(|_| layout("a row parser stopped"))?;
            seq += 1;
            Ok(())
        };
        let tail = c.cut_rows(&mut send, &pool_rx)?;
        Ok((seq, tail))
    });
    let (blocks, tail) = outcome?;
    Ok((blocks, tail, done_rx))
}

/// The parsed blocks in the file's order; the first that did not parse says why.
fn in_order(blocks: usize, parsed: Parsed) -> Result<Vec<Chunk>, Fallback> {
    let mut chunks: Vec<Option<Chunk>> = (0..blocks).map(|_| None).collect();
    for (seq, chunk) in parsed.iter() {
        chunks[seq] = Some(chunk?);
    }
    chunks
        .into_iter()
        .map(|c| c.ok_or_else(|| layout("a block was not parsed")))
        .collect()
}

fn fast(src: Source, max_groups: usize) -> Result<Streamed, Fallback> {
    let mut c = Cutter {
        src,
        buf: Vec::new(),
        eof: false,
    };
    c.more()?;
    let (mut head, empty) = c.head()?;
    let (blocks, mut tail, parsed) = parse_in_parallel(&mut c, empty, max_groups)?;
    // The rest of the document after the rows.
    while !c.eof {
        c.eof = !c.src.more(&mut tail)?;
    }
    let chunks = in_order(blocks, parsed)?;
    // The document without its rows: `"results": [` + the `]` and the rest.
    let close = tail
        .iter()
        .position(|c| !is_ws(*c))
        .filter(|&i| tail[i] == b']')
        .ok_or_else(|| layout("no `]` after the last row"))?;
    head.extend_from_slice(&tail[close..]);
    let text = std::str::from_utf8(&head).map_err(|_| layout("not UTF-8"))?;
    let doc = input::parse_document(text).map_err(Fallback::Layout)?;
    if !doc.results.is_empty() {
        return Err(layout("rows outside the cut"));
    }
    let (rows, latency) = join_chunks(chunks, &doc.tool)?;
    Ok(Streamed {
        doc,
        rows,
        latency,
        sha256: hex(&c.src.hash.finalize()),
        parallel: true,
        head_bytes: head.len() as u64,
    })
}

/// The parsed blocks as one table of rows (and latency groups), each block but the last
/// ending with a comma.
fn join_chunks(chunks: Vec<Chunk>, tool: &str) -> Result<(P2pRows, LatencyGroups), Fallback> {
    let blocks = chunks.len();
    let mut rows = P2pRows::default();
    // One allocation for every row: growing by doubling copies and faults in hundreds of
    // MiB at 4 million rows.
    rows.rows
        .reserve_exact(chunks.iter().map(|c| c.rows.rows.len()).sum());
    let mut latency = LatencyGroups::new();
    for (k, chunk) in chunks.into_iter().enumerate() {
        // Every block but the last ends with a comma; the last row of all has none.
        if chunk.comma != (k + 1 < blocks) {
            return Err(layout("rows not separated by commas"));
        }
        rows.append(chunk.rows);
        chunk.latency.into_groups(tool, &mut latency);
    }
    for g in &mut rows.groups {
        g.tool = tool.to_string();
    }
    Ok((rows, latency))
}

/// Parses a block of whole rows: it starts at a row's `{` and ends after a row (and its
/// comma, unless it is the last row of all).
fn parse_block(block: &[u8], max_groups: usize) -> Result<Chunk, Fallback> {
    let mut chunk = Chunk {
        comma: false,
        rows: P2pRows::default(),
        latency: Hists::default(),
    };
    let starts: Vec<usize> = memmem::find_iter(block, KIND)
        .filter_map(|k| row_start(block, k))
        .collect();
    if starts.first() != Some(&0) {
        return Err(Fallback::Layout("a block does not start at a row".into()));
    }
    for (k, &s) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(block.len());
        let mut row = trim_end(&block[s..end]);
        let comma = row.last() == Some(&b',');
        if comma {
            row = &row[..row.len() - 1];
        } else if k + 1 < starts.len() {
            return Err(Fallback::Layout("rows not separated by a comma".into()));
        }
        chunk.comma = comma;
        let lean: LeanRow = serde_json::from_slice(row)
            .map_err(|e| Fallback::Layout(format!("a row does not parse: {e}")))?;
        add_row(&mut chunk, lean, max_groups)?;
    }
    Ok(chunk)
}

fn trim_end(b: &[u8]) -> &[u8] {
    let n = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    &b[..n]
}

/// The fields of a result row that the compact form keeps, plus the other fields of the
/// schema with their types, so a row accepted here is one a whole read accepts.
#[derive(Deserialize)]
struct LeanRow<'a> {
    kind: &'a str,
    test: &'a str,
    transport: &'a str,
    size_bytes: u64,
    iterations: u64,
    duration_s: f64,
    #[serde(default)]
    warmup_iterations: Option<u64>,
    #[serde(default)]
    bidirectional: Option<bool>,
    #[serde(default)]
    streams: Option<u32>,
    #[serde(default)]
    tx_depth: Option<u32>,
    #[serde(default)]
    latency_us: Option<LatencySummary>,
    #[serde(default, borrow)]
    histogram: Option<&'a str>,
    #[serde(default)]
    bw_gbit_s: Option<BandwidthSummary>,
    #[serde(default)]
    msg_rate_mpps: Option<f64>,
    #[serde(default)]
    directions: Vec<LeanDirection>,
    #[serde(default)]
    interval_s: Option<f64>,
    #[serde(default)]
    interval_gbit_s: Option<Vec<f64>>,
    #[serde(default)]
    cpu: Option<CpuUse>,
    #[serde(borrow)]
    pair: LeanPair<'a>,
    complete: bool,
    #[serde(default, borrow)]
    counters: Option<LeanDeltas<'a>>,
    #[serde(default)]
    check_wrong_bytes: Option<u64>,
    /// GPU or host buffers of the two ends (absent: host memory).
    #[serde(default)]
    memory: Option<results::MemoryUse>,
}

#[derive(Deserialize)]
struct LeanPeer<'a> {
    #[serde(default)]
    rank: Option<u32>,
    host: &'a str,
    #[serde(default, borrow)]
    device: Option<&'a str>,
    #[serde(default)]
    port: Option<u32>,
}

/// One direction of a bidirectional row: its figures only (the ends are the pair's).
#[derive(Deserialize)]
struct LeanDirection {
    bw_gbit_s: BandwidthSummary,
    msg_rate_mpps: f64,
}

#[derive(Deserialize)]
struct LeanPair<'a> {
    #[serde(borrow)]
    initiator: LeanPeer<'a>,
    #[serde(borrow)]
    responder: LeanPeer<'a>,
    #[serde(default)]
    round: Option<u32>,
}

#[derive(Deserialize)]
struct LeanDeltas<'a> {
    #[serde(default, borrow)]
    initiator: Option<LeanPort<'a>>,
    #[serde(default, borrow)]
    responder: Option<LeanPort<'a>>,
}

#[derive(Deserialize)]
struct LeanPort<'a> {
    #[serde(rename = "device")]
    _device: &'a str,
    #[serde(rename = "port")]
    _port: u32,
    #[serde(default, borrow)]
    counters: Counters<'a>,
    #[serde(default, borrow)]
    hw_counters: Counters<'a>,
    #[serde(default, borrow)]
    driver_counters: Counters<'a>,
    #[serde(default)]
    rate_gbit_s: Option<f64>,
    #[serde(default, borrow)]
    at_least: Vec<&'a str>,
}

/// A counter map as a list: no map is built per row.
#[derive(Default)]
struct Counters<'a>(Vec<(&'a str, i64)>);

impl<'de: 'a, 'a> Deserialize<'de> for Counters<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Counters<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of counter names to integers")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Self::Value, M::Error> {
                let mut v = Vec::new();
                while let Some((k, n)) = m.next_entry::<&'de str, i64>()? {
                    v.push((k, n));
                }
                Ok(Counters(v))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

fn missing(kind: &str, field: &str) -> Fallback {
    Fallback::Layout(format!("a {kind} row without {field}"))
}

fn add_row(chunk: &mut Chunk, r: LeanRow, max_groups: usize) -> Result<(), Fallback> {
    let p = &r.pair;
    let rows = &mut chunk.rows;
    let initiator = rows.peers.intern(
        p.initiator.rank,
        p.initiator.host,
        p.initiator.device,
        p.initiator.port,
    );
    let responder = rows.peers.intern(
        p.responder.rank,
        p.responder.host,
        p.responder.device,
        p.responder.port,
    );
    let (loss, health) = tally_counters(rows, &r, [initiator, responder]);
    let _ = (
        r.iterations,
        r.duration_s,
        r.check_wrong_bytes,
        r.interval_s,
    );
    let (latency, bidir, stats) = match r.kind {
        "latency" => {
            let us = latency_summary(chunk, &r, max_groups)?;
            (
                true,
                false,
                RowStats::Latency(LatStats { us, loss, health }),
            )
        }
        "bandwidth" => {
            let (bidir, stats) = bandwidth_stats(&r, loss, health)?;
            (false, bidir, RowStats::Bandwidth(stats))
        }
        "collective" => {
            return Err(Fallback::NotStreamable(
                "it holds collective rows, which are read whole".into(),
            ))
        }
        other => return Err(Fallback::Layout(format!("unknown row kind {other}"))),
    };
    let rows = &mut chunk.rows;
    let memory = r.memory.as_ref().map_or("host", results::MemoryUse::class);
    let group = rows.group(crate::rows::GroupRef {
        tool: "",
        test: r.test,
        transport: r.transport,
        size: r.size_bytes,
        bidirectional: bidir,
        latency,
        memory,
    });
    rows.rows.push(P2pRow {
        group,
        initiator,
        responder,
        round: p.round.unwrap_or(NO_ROUND),
        complete: r.complete,
        stats,
    });
    Ok(())
}

/// A row's counters: both ends' errors filed under their peers, the loss they show
/// (none without counters) and the ends' health.
fn tally_counters(rows: &mut P2pRows, r: &LeanRow, peers: [u32; 2]) -> (Option<f64>, HealthTally) {
    let mut loss = LossTally::default();
    let mut health = HealthTally::default();
    let Some(c) = &r.counters else {
        return (None, health);
    };
    for (i, (side, peer)) in [&c.initiator, &c.responder]
        .into_iter()
        .zip(peers)
        .enumerate()
    {
        let Some(side) = side else { continue };
        health.side(i, side.rate_gbit_s);
        for &(name, v) in side.counters.0.iter().chain(&side.hw_counters.0) {
            loss.add(name, v);
            health.add(name, v);
            rows.add_error(peer, name, v);
        }
        for &(name, v) in &side.driver_counters.0 {
            health.add(name, v);
        }
        for name in &side.at_least {
            health.at_least_of(name);
            rows.error_at_least(peer, name);
        }
    }
    (loss.pct(), health)
}

/// A latency row's summary; its histogram merged into the block's group.
fn latency_summary(
    chunk: &mut Chunk,
    r: &LeanRow,
    max_groups: usize,
) -> Result<LatencySummary, Fallback> {
    r.warmup_iterations
        .ok_or_else(|| missing("latency", "warmup_iterations"))?;
    let us = r
        .latency_us
        .ok_or_else(|| missing("latency", "latency_us"))?;
    let h = r.histogram.ok_or_else(|| missing("latency", "histogram"))?;
    let label = results::transport_label(r.transport, r.memory.as_ref());
    chunk
        .latency
        .merge(r.test, &label, r.size_bytes, h, max_groups)
        .map_err(Fallback::Layout)?;
    Ok(us)
}

/// A bandwidth row's figures (every field a whole read requires present), and whether
/// it ran both ways.
fn bandwidth_stats(
    r: &LeanRow,
    loss: Option<f64>,
    health: HealthTally,
) -> Result<(bool, BwStats), Fallback> {
    let bw = r
        .bw_gbit_s
        .ok_or_else(|| missing("bandwidth", "bw_gbit_s"))?;
    let cpu = r.cpu.as_ref().ok_or_else(|| missing("bandwidth", "cpu"))?;
    let intervals = r
        .interval_gbit_s
        .as_deref()
        .ok_or_else(|| missing("bandwidth", "interval_gbit_s"))?;
    let rate = r
        .msg_rate_mpps
        .ok_or_else(|| missing("bandwidth", "msg_rate_mpps"))?;
    let bidir = r
        .bidirectional
        .ok_or_else(|| missing("bandwidth", "bidirectional"))?;
    r.streams
        .zip(r.tx_depth)
        .zip(r.interval_s)
        .ok_or_else(|| missing("bandwidth", "streams, tx_depth or interval_s"))?;
    if r.size_bytes == 0 {
        return Err(Fallback::Layout("a bandwidth row of 0 bytes".into()));
    }
    let mut stats = BwStats::from_parts(
        r.transport,
        bw.avg,
        bw.peak,
        rate,
        intervals,
        cpu,
        loss,
        (health, r.duration_s),
    );
    stats.directions = crate::rows::DirStats::of(
        r.directions
            .iter()
            .map(|d| (d.bw_gbit_s.avg, d.bw_gbit_s.peak, d.msg_rate_mpps)),
    );
    Ok((bidir, stats))
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hash: Sha256,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

/// Everything the slow path gathers: the document's other fields, and the rows.
struct Gathered {
    head: serde_json::Map<String, serde_json::Value>,
    rows: P2pRows,
    problem: Option<String>,
    collective: bool,
    latency: Hists,
    max_groups: usize,
}

/// Deserializes the top-level object, diverting `results` row by row into [`Gathered`].
struct DocSeed<'g>(&'g mut Gathered);

impl<'de> DeserializeSeed<'de> for DocSeed<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DocSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a fabcheck result document (a JSON object)")
    }
    fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<(), M::Error> {
        while let Some(key) = m.next_key::<String>()? {
            if key == "results" {
                m.next_value_seed(RowsSeed(&mut *self.0))?;
                self.0
                    .head
                    .insert(key, serde_json::Value::Array(Vec::new()));
            } else {
                let v: serde_json::Value = m.next_value()?;
                self.0.head.insert(key, v);
            }
        }
        Ok(())
    }
}

struct RowsSeed<'g>(&'g mut Gathered);

impl<'de> DeserializeSeed<'de> for RowsSeed<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RowsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of result rows")
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut s: S) -> Result<(), S::Error> {
        let g = self.0;
        let mut i = 0usize;
        while let Some(row) = s.next_element::<serde_json::Value>()? {
            if g.problem.is_none() && !g.collective {
                gather_row(g, &row, i);
            }
            i += 1;
        }
        Ok(())
    }
}

/// One row of the slow path: parsed in full, exactly as a whole read parses it.
fn gather_row(g: &mut Gathered, row: &serde_json::Value, i: usize) {
    // Deserialized from the borrowed value: no copy of the row.
    let parsed = TestResult::deserialize(row);
    let r = match parsed {
        Ok(r) => r,
        Err(e) => {
            g.problem = Some(
                input::row_problem(row, &i.to_string())
                    .unwrap_or_else(|| format!("at JSON path `results[{i}]`: {e}")),
            );
            return;
        }
    };
    let (test, transport, size, hist) = match &r {
        TestResult::Latency(l) => (
            &l.test,
            results::transport_label(&l.transport, l.memory.as_ref()),
            l.size_bytes,
            Some(&l.histogram),
        ),
        TestResult::Bandwidth(b) => {
            if b.size_bytes == 0 {
                g.problem = Some(format!(
                    "at JSON path `results[{i}].size_bytes`: 0 bytes cannot carry a bandwidth"
                ));
                return;
            }
            (&b.test, b.transport.clone(), b.size_bytes, None)
        }
        TestResult::Collective(_) => {
            g.collective = true;
            return;
        }
    };
    if let Some(h) = hist {
        if let Err(e) = g.latency.merge(test, &transport, size, h, g.max_groups) {
            g.problem = Some(format!("at JSON path `results[{i}].histogram`: {e}"));
            return;
        }
    }
    g.rows.push_result("", &r);
}

fn slow(src: &Path, max_groups: usize) -> Result<Streamed, StreamError> {
    let bad = StreamError::Bad;
    let f = File::open(src).map_err(|e| bad(format!("cannot read: {e}")))?;
    let mut reader = Hashing {
        inner: BufReader::with_capacity(1 << 20, f),
        hash: Sha256::new(),
    };
    let mut g = Gathered {
        head: Default::default(),
        rows: P2pRows::default(),
        problem: None,
        collective: false,
        latency: Hists::default(),
        max_groups,
    };
    let parsed = {
        let mut de = serde_json::Deserializer::from_reader(&mut reader);
        DocSeed(&mut g).deserialize(&mut de).and_then(|_| de.end())
    };
    if let Err(e) = parsed {
        return Err(bad(if e.is_eof() {
            format!("truncated JSON ({e}); was the run interrupted while writing?")
        } else {
            format!("not valid JSON: {e}")
        }));
    }
    // The other fields, judged as a whole read judges a document (its `results` empty).
    let head = serde_json::Value::Object(std::mem::take(&mut g.head)).to_string();
    let doc = input::parse_document(&head).map_err(bad)?;
    if let Some(p) = g.problem {
        return Err(bad(p));
    }
    if g.collective {
        return Err(StreamError::NotStreamable(
            "it holds collective rows, which are read whole".into(),
        ));
    }
    let mut rows = g.rows;
    for grp in &mut rows.groups {
        grp.tool = doc.tool.clone();
    }
    let mut latency = LatencyGroups::new();
    g.latency.into_groups(&doc.tool, &mut latency);
    Ok(Streamed {
        doc,
        rows,
        latency,
        sha256: hex(&reader.hash.finalize()),
        parallel: false,
        head_bytes: head.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use synth::sweep::{sweep_doc, Fault, SweepSpec};

    fn write_pretty(dir: &Path, name: &str, doc: &Document) -> std::path::PathBuf {
        let p = dir.join(name);
        results::write::write_json_atomic(&p, doc).unwrap();
        p
    }

    /// Compares with a whole read of the same file (the numbers as JSON parsing gives
    /// them, not as the generator held them).
    fn same_rows(s: &Streamed, path: &Path) {
        let text = std::fs::read_to_string(path).unwrap();
        let doc = &input::parse_document(&text).unwrap();
        let want = P2pRows::from_document(doc);
        assert_eq!(s.rows.rows, want.rows);
        assert_eq!(s.rows.groups, want.groups);
        assert_eq!(s.rows.peers.list, want.peers.list);
        assert_eq!(s.rows.errors, want.errors);
        let mut head = doc.clone();
        head.results.clear();
        assert_eq!(
            serde_json::to_value(&s.doc).unwrap(),
            serde_json::to_value(&head).unwrap()
        );
    }

    #[test]
    fn the_parallel_path_reads_what_a_whole_read_reads_and_copies_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = SweepSpec::bandwidth(9, 2);
        spec.counters = true;
        spec.faults = vec![Fault::Failed {
            a: 1,
            b: 7,
            rail: 0,
        }];
        let doc = sweep_doc(&spec);
        let p = write_pretty(dir.path(), "bw.json", &doc);
        let copy = dir.path().join("copy.json");
        let s = load(&p, Some(&copy), 512).unwrap_or_else(|_| panic!("streams"));
        assert!(s.parallel);
        same_rows(&s, &p);
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(std::fs::read(&copy).unwrap(), bytes);
        assert_eq!(s.sha256, crate::digest::sha256_hex(&bytes));
        // Latency rows: histograms merged as a whole read merges them.
        let lat = sweep_doc(&SweepSpec::latency(5, 1));
        let p = write_pretty(dir.path(), "lat.json", &lat);
        let s = load(&p, None, 512).unwrap_or_else(|_| panic!("streams"));
        same_rows(&s, &p);
        let whole = Loaded::from_text("x", &std::fs::read_to_string(&p).unwrap()).unwrap();
        let merged = whole.latency;
        let key = merged.keys().next().unwrap().clone();
        assert_eq!(s.latency[&key].1, merged[&key].1);
        assert_eq!(s.latency[&key].0.len(), merged[&key].0.len());
        assert_eq!(
            s.latency[&key].0.value_at_quantile_ns(0.99),
            merged[&key].0.value_at_quantile_ns(0.99)
        );
        // A ceiling on latency groups holds while streaming too.
        assert!(
            matches!(load(&p, None, 0), Err(StreamError::Bad(m)) if m.contains("latency histogram groups"))
        );
    }

    #[test]
    fn driver_counters_give_the_same_health_figures_streamed_as_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = SweepSpec::bandwidth(5, 1);
        spec.counters = true;
        let mut doc = sweep_doc(&spec);
        for (i, r) in doc.results.iter_mut().enumerate() {
            if let results::TestResult::Bandwidth(b) = r {
                let side = b.counters.as_mut().unwrap().initiator.as_mut().unwrap();
                let d = &mut side.driver_counters;
                d.insert("rx_prio3_pause_duration".into(), 1000 * i as i64);
                d.insert("rx_prio3_discards".into(), (i % 2) as i64);
                d.insert("rx_pcs_symbol_err_phy".into(), 0);
                d.insert("rx_corrected_bits_phy".into(), 100 * i as i64);
                side.rate_gbit_s = Some(100.0);
                side.hw_counters.insert("np_cnp_sent".into(), 7);
                if i == 3 {
                    // A 16-bit PMA counter at its ceiling: discards known as "at least".
                    side.counters.insert("port_xmit_discards".into(), 0);
                    side.at_least.insert("port_xmit_discards".into());
                }
            }
        }
        let p = write_pretty(dir.path(), "bw.json", &doc);
        let s = load(&p, None, 512).unwrap_or_else(|_| panic!("streams"));
        // The rows (their stats, health included) equal a whole read's.
        same_rows(&s, &p);
        // The per-end error sums keep the bound too (the inventory's "not rising" reads it).
        assert!(s
            .rows
            .errors
            .values()
            .any(|m| m.get("port_xmit_discards").is_some_and(|e| e.at_least)));
        let discards: Vec<Option<f64>> = s
            .rows
            .rows
            .iter()
            .map(|r| r.stats.metric(crate::metric::Metric::Discards))
            .collect();
        assert!(
            discards.contains(&Some(1.0)) && discards.contains(&Some(0.0)),
            "{discards:?}"
        );
        // The lower bound travels with the streamed rows, for that one row and metric.
        let floors: Vec<bool> = s
            .rows
            .rows
            .iter()
            .map(|r| r.stats.at_least(crate::metric::Metric::Discards))
            .collect();
        assert_eq!(floors.iter().filter(|f| **f).count(), 1, "{floors:?}");
        assert!(!s
            .rows
            .rows
            .iter()
            .any(|r| r.stats.at_least(crate::metric::Metric::CnpRate)));
        let ber = s
            .rows
            .rows
            .iter()
            .filter_map(|r| r.stats.metric(crate::metric::Metric::PreFecBer))
            .fold(0.0, f64::max);
        assert!(
            ber > 0.0,
            "the rate travelled with the streamed rows: {ber}"
        );
    }

    #[test]
    fn rows_cut_across_many_small_blocks_are_read_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = SweepSpec::latency(7, 2);
        spec.counters = true;
        let doc = sweep_doc(&spec);
        for (name, text) in [
            ("pretty.json", serde_json::to_string_pretty(&doc).unwrap()),
            ("compact.json", serde_json::to_string(&doc).unwrap()),
        ] {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            // Blocks smaller than a row and of odd sizes: every cut lands somewhere new.
            for block in [997, 4096, 65536] {
                let mut src = Source::open(&p, None).unwrap();
                src.block = block;
                let s = match fast(src, 512) {
                    Ok(s) => s,
                    Err(Fallback::Layout(m)) => panic!("{name} in blocks of {block}: {m}"),
                    Err(_) => panic!("{name} in blocks of {block}"),
                };
                same_rows(&s, &p);
                assert_eq!(
                    s.sha256,
                    crate::digest::sha256_hex(&std::fs::read(&p).unwrap())
                );
            }
        }
    }

    #[test]
    fn compact_json_streams_too_and_other_key_orders_take_the_one_thread_path() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = SweepSpec::bandwidth(5, 1);
        spec.faults = vec![Fault::Failed {
            a: 0,
            b: 2,
            rail: 0,
        }];
        let doc = sweep_doc(&spec);
        let p = dir.path().join("compact.json");
        std::fs::write(&p, serde_json::to_string(&doc).unwrap()).unwrap();
        let s = load(&p, None, 512).unwrap_or_else(|_| panic!("streams"));
        assert!(s.parallel);
        same_rows(&s, &p);
        // Keys in alphabetical order (`kind` is no longer a row's first key): valid JSON,
        // read by the one-thread path with the same result.
        let sorted = serde_json::to_value(&doc).unwrap().to_string();
        assert!(!sorted.contains("{\"kind\""));
        std::fs::write(&p, &sorted).unwrap();
        let s = load(&p, None, 512).unwrap_or_else(|_| panic!("streams"));
        assert!(!s.parallel);
        same_rows(&s, &p);
        // No rows at all.
        let mut none = doc.clone();
        none.results.clear();
        std::fs::write(&p, serde_json::to_string_pretty(&none).unwrap()).unwrap();
        let s = load(&p, None, 512).unwrap_or_else(|_| panic!("streams"));
        assert!(s.parallel && s.rows.rows.is_empty());
        assert_eq!(s.doc.failed_pairs.len(), 1);
    }

    fn problem(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.json");
        std::fs::write(&p, text).unwrap();
        match load(&p, None, 512) {
            Err(StreamError::Bad(m)) => m,
            Err(StreamError::NotStreamable(m)) => panic!("not streamable: {m}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn bad_documents_get_the_messages_a_whole_read_gives() {
        let doc = sweep_doc(&SweepSpec::bandwidth(4, 1));
        let text = serde_json::to_string_pretty(&doc).unwrap();
        assert!(problem(&text[..text.len() * 2 / 3]).contains("truncated"));
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["results"][3]["bw_gbit_s"]["avg"] = "fast".into();
        let whole = input::parse_document(&v.to_string()).unwrap_err();
        let m = problem(&serde_json::to_string_pretty(&v).unwrap());
        assert_eq!(m, whole);
        assert!(m.contains("results[3].bw_gbit_s.avg"), "{m}");
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["schema_version"] = 9.into();
        assert!(problem(&serde_json::to_string_pretty(&v).unwrap()).contains("version 9"));
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["results"][0].as_object_mut().unwrap().remove("cpu");
        let m = problem(&serde_json::to_string_pretty(&v).unwrap());
        assert!(m.contains("results[0]") && m.contains("cpu"), "{m}");
    }

    #[test]
    fn collectives_are_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let doc = synth::collective_doc(4, &[1024], 10.0, 100.0, 1);
        let p = write_pretty(dir.path(), "c.json", &doc);
        assert!(matches!(
            load(&p, None, 512),
            Err(StreamError::NotStreamable(_))
        ));
        let limits = input::Limits::default();
        let set = input::load_reading(&[p], false, &limits, &|i, p, _, budget| {
            read(i, p, &limits, budget, None)
        })
        .unwrap();
        assert!(set.docs[0].compact.is_none());
        assert_eq!(set.docs[0].doc.results.len(), doc.results.len());
    }
}
