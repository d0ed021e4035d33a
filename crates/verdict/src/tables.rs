//! The merged result tables: one row per test, transport and size (latency, bandwidth) or
//! per collective, backend, ranks and size (rows with GPU buffers under the transport
//! `verbs+cuda`, `tcp+cuda`, ..., apart from host memory), across every rank, pair and file, the way
//! perftest and nccl-tests print them. Reports, plots, `compare` and `export` all read these.

use std::collections::BTreeMap;

use results::quality::{Mark, Marks};
use results::{LatencyHistogram, LatencySummary, TestResult};
use serde::Serialize;

use crate::input::{InputSet, LatKey, Loaded};
use crate::metric::Metric;
use crate::rows::{BwStats, RowStats};

/// How many of the rows merged into one table row were measured undisturbed, disturbed, or
/// without a quality record (`results::quality`).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Quality {
    pub clean: usize,
    pub disturbed: usize,
    pub unknown: usize,
    /// `ok` (every row clean), `disturbed` (any row disturbed), `unknown` (no row has a
    /// record), `partly unknown` (clean where known).
    pub mark: &'static str,
}

impl Quality {
    pub fn add(&mut self, m: Mark) {
        match m {
            Mark::Clean => self.clean += 1,
            Mark::Disturbed => self.disturbed += 1,
            Mark::Unknown => self.unknown += 1,
        }
        self.remark();
    }

    /// Adds another tally (rows gathered apart, as a streamed document's per group).
    pub fn merge(&mut self, o: Quality) {
        self.clean += o.clean;
        self.disturbed += o.disturbed;
        self.unknown += o.unknown;
        self.remark();
    }

    fn remark(&mut self) {
        self.mark = if self.disturbed > 0 {
            "disturbed"
        } else if self.clean == 0 {
            "unknown"
        } else if self.unknown > 0 {
            "partly unknown"
        } else {
            "ok"
        };
    }

    pub fn disturbed(&self) -> bool {
        self.disturbed > 0
    }
}

/// Latency for one (tool, test, transport, size), percentiles recomputed from the merged
/// histogram of every row.
#[derive(Debug, Clone, Serialize)]
pub struct LatRow {
    pub tool: String,
    pub test: String,
    pub transport: String,
    pub size_bytes: u64,
    pub size: String,
    /// Result rows merged (pairs x runs).
    pub rows: usize,
    pub samples: u64,
    pub us: LatencySummary,
    /// Spread of the per-row p50 (max - min), microseconds: how much pairs and runs differ.
    pub p50_spread_us: f64,
    pub quality: Quality,
    /// Per-row p50 and p99 values, for `compare`'s noise floor.
    #[serde(skip)]
    pub row_p50: Vec<f64>,
    #[serde(skip)]
    pub row_p99: Vec<f64>,
}

/// Bandwidth for one (tool, test, transport, size, direction) across rows.
#[derive(Debug, Clone, Serialize)]
pub struct BwRow {
    pub tool: String,
    pub test: String,
    pub transport: String,
    pub size_bytes: u64,
    pub size: String,
    pub bidirectional: bool,
    pub rows: usize,
    /// Mean over rows of each row's average, 10^9 bit/s.
    pub avg_gbit_s: f64,
    /// Worst row's average.
    pub min_avg_gbit_s: f64,
    /// Best interval of any row.
    pub peak_gbit_s: f64,
    pub msg_rate_mpps: f64,
    /// Worst row's interval fluctuation, %.
    pub fluctuation_pct: Option<f64>,
    /// Mean cores per 100 Gb/s, busier side.
    pub cpu_cores_per_100g: Option<f64>,
    /// Link loss over all rows with counters, %.
    pub link_loss_pct: Option<f64>,
    pub quality: Quality,
    #[serde(skip)]
    pub row_avg: Vec<f64>,
    /// Standard deviation of interval samples within rows (pooled), for the noise floor
    /// of a single run.
    #[serde(skip)]
    pub interval_stdev: f64,
}

/// One collective size (a row of the nccl-tests table), averaged over runs.
#[derive(Debug, Clone, Serialize)]
pub struct CollRow {
    pub collective: String,
    pub backend: String,
    pub ranks: u32,
    pub size_bytes: u64,
    pub size: String,
    pub count: u64,
    pub datatype: String,
    pub op: String,
    pub rows: usize,
    pub oop_time_us: f64,
    pub oop_algbw: f64,
    pub oop_busbw: f64,
    pub ip_time_us: f64,
    pub ip_busbw: f64,
    /// None when no row was checked.
    pub wrong: Option<u64>,
    pub efficiency_pct: Option<f64>,
    pub quality: Quality,
    #[serde(skip)]
    pub row_busbw: Vec<f64>,
    #[serde(skip)]
    pub row_time: Vec<f64>,
}

/// All merged tables.
#[derive(Debug, Default, Serialize)]
pub struct Tables {
    pub latency: Vec<LatRow>,
    pub bandwidth: Vec<BwRow>,
    pub collective: Vec<CollRow>,
    /// Merged histograms, keyed like `latency`, for distribution plots.
    #[serde(skip)]
    pub histograms: BTreeMap<LatKey, LatencyHistogram>,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The bandwidth rows of one key, summed as they come (no row kept but its average,
/// which `compare` needs): a sweep has millions.
#[derive(Default)]
struct BwAcc {
    avgs: Vec<f64>,
    peak: f64,
    msg_sum: f64,
    fluctuation: Option<f64>,
    cpu_sum: f64,
    cpu_n: usize,
    loss: Option<f64>,
    var_sum: f64,
    var_n: usize,
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

impl BwAcc {
    fn add(&mut self, s: &BwStats) {
        self.avgs.push(s.avg);
        self.peak = self.peak.max(s.peak);
        self.msg_sum += s.msg_rate;
        self.fluctuation = max_opt(self.fluctuation, s.fluctuation);
        if let Some(c) = s.cpu_per_100g {
            self.cpu_sum += c;
            self.cpu_n += 1;
        }
        self.loss = max_opt(self.loss, s.loss.map(|l| l.max(0.0)));
        if let Some(v) = s.interval_var {
            self.var_sum += v;
            self.var_n += 1;
        }
    }

    fn merge(&mut self, o: BwAcc) {
        self.avgs.extend(o.avgs);
        self.peak = self.peak.max(o.peak);
        self.msg_sum += o.msg_sum;
        self.fluctuation = max_opt(self.fluctuation, o.fluctuation);
        self.cpu_sum += o.cpu_sum;
        self.cpu_n += o.cpu_n;
        self.loss = max_opt(self.loss, o.loss);
        self.var_sum += o.var_sum;
        self.var_n += o.var_n;
    }
}

type BwKey = (String, String, String, u64, bool);
type CollKey = (String, String, u32, u64);
/// A latency group's rows: p50s, p99s and their quality.
type LatAcc = (Vec<f64>, Vec<f64>, Quality);

/// Every row of the documents gathered under its table's key.
#[derive(Default)]
struct Gathered<'a> {
    lat: BTreeMap<LatKey, LatAcc>,
    bw: BTreeMap<BwKey, (BwAcc, Quality)>,
    coll: BTreeMap<CollKey, (Vec<&'a results::CollectiveResult>, Quality)>,
}

impl<'a> Gathered<'a> {
    /// The rows of a document read whole.
    fn add_rows(&mut self, d: &'a Loaded) {
        let marks = Marks::of(&d.doc);
        for (i, r) in d.doc.results.iter().enumerate() {
            let mark = marks.mark(i, r);
            match r {
                TestResult::Latency(l) => {
                    let e = self.lat.entry(LatKey::of(&d.doc, l)).or_default();
                    e.0.push(l.latency_us.p50);
                    e.1.push(l.latency_us.p99);
                    e.2.add(mark);
                }
                TestResult::Bandwidth(b) => {
                    let e = self
                        .bw
                        .entry((
                            d.doc.tool.clone(),
                            b.test.clone(),
                            results::transport_label(&b.transport, b.memory.as_ref()),
                            b.size_bytes,
                            b.bidirectional,
                        ))
                        .or_default();
                    e.0.add(&BwStats::of(b));
                    e.1.add(mark);
                }
                TestResult::Collective(c) => {
                    let e = self
                        .coll
                        .entry((
                            c.collective.clone(),
                            c.backend.clone(),
                            c.ranks,
                            c.size_bytes,
                        ))
                        .or_default();
                    e.0.push(c);
                    e.1.add(mark);
                }
            }
        }
    }

    /// The rows of a streamed document, in their compact form: gathered per group first
    /// (a key built per row of millions costs seconds), then filed under the group's key.
    fn add_streamed(&mut self, d: &Loaded) {
        let Some(p) = d.p2p() else { return };
        let marks = p.marks(&d.doc);
        let mut lat: Vec<LatAcc> = vec![Default::default(); p.groups.len()];
        let mut bws: Vec<(BwAcc, Quality)> =
            (0..p.groups.len()).map(|_| Default::default()).collect();
        for (i, row) in p.rows.iter().enumerate() {
            let mark = marks.as_ref().map_or(Mark::Unknown, |m| m[i]);
            match &row.stats {
                RowStats::Latency(l) => {
                    let e = &mut lat[row.group as usize];
                    e.0.push(l.us.p50);
                    e.1.push(l.us.p99);
                    e.2.add(mark);
                }
                RowStats::Bandwidth(b) => {
                    let e = &mut bws[row.group as usize];
                    e.0.add(b);
                    e.1.add(mark);
                }
            }
        }
        for ((g, (p50, p99, q)), (b, bq)) in p.groups.iter().zip(lat).zip(bws) {
            if !p50.is_empty() {
                let key = LatKey {
                    tool: g.tool.clone(),
                    test: g.test.clone(),
                    transport: g.table_transport(),
                    size: g.size,
                };
                let e = self.lat.entry(key).or_default();
                e.0.extend(p50);
                e.1.extend(p99);
                e.2.merge(q);
            }
            if !b.avgs.is_empty() {
                let key = (
                    g.tool.clone(),
                    g.test.clone(),
                    g.table_transport(),
                    g.size,
                    g.bidirectional,
                );
                let e = self.bw.entry(key).or_default();
                e.0.merge(b);
                e.1.merge(bq);
            }
        }
    }
}

/// Builds every table from the loaded documents.
pub fn build(set: &InputSet, line_rate_gbit_s: Option<f64>) -> Tables {
    let mut g = Gathered::default();
    for d in &set.docs {
        g.add_rows(d);
    }
    for d in &set.docs {
        g.add_streamed(d);
    }
    // Latency: every row's histogram, merged per group across documents as they were read.
    let mut hists = set.latency.clone();
    let mut t = Tables::default();
    for (k, rows) in g.lat {
        let (h, merged) = hists.remove(&k).unwrap_or_default();
        t.latency.push(lat_row(&k, rows, &h, merged));
        t.histograms.insert(k, h);
    }
    t.bandwidth = g.bw.into_iter().map(|(k, v)| bw_row(k, v)).collect();
    t.collective = g
        .coll
        .into_iter()
        .map(|(k, (rows, q))| coll_row(k, &rows, q, line_rate_gbit_s))
        .collect();
    t
}

/// A latency table row: the merged histogram's summary beside the rows' p50s and p99s.
fn lat_row(k: &LatKey, (p50, p99, quality): LatAcc, h: &LatencyHistogram, merged: usize) -> LatRow {
    let spread =
        p50.iter().cloned().fold(f64::MIN, f64::max) - p50.iter().cloned().fold(f64::MAX, f64::min);
    LatRow {
        size: results::units::format_size(k.size),
        tool: k.tool.clone(),
        test: k.test.clone(),
        transport: k.transport.clone(),
        size_bytes: k.size,
        rows: merged.max(p50.len()),
        samples: h.len(),
        us: h.summary_us(),
        p50_spread_us: if spread.is_finite() { spread } else { 0.0 },
        quality,
        row_p50: p50,
        row_p99: p99,
    }
}

/// A bandwidth table row: the mean of the rows' averages, their minimum, the peak.
fn bw_row((tool, test, transport, size, bidir): BwKey, (acc, quality): (BwAcc, Quality)) -> BwRow {
    let n = acc.avgs.len();
    BwRow {
        size: results::units::format_size(size),
        tool,
        test,
        transport,
        size_bytes: size,
        bidirectional: bidir,
        rows: n,
        avg_gbit_s: mean(&acc.avgs),
        min_avg_gbit_s: acc.avgs.iter().cloned().fold(f64::MAX, f64::min),
        peak_gbit_s: acc.peak,
        msg_rate_mpps: if n == 0 { 0.0 } else { acc.msg_sum / n as f64 },
        fluctuation_pct: acc.fluctuation,
        cpu_cores_per_100g: (acc.cpu_n > 0).then(|| acc.cpu_sum / acc.cpu_n as f64),
        link_loss_pct: acc.loss,
        quality,
        row_avg: acc.avgs,
        interval_stdev: if acc.var_n == 0 {
            0.0
        } else {
            (acc.var_sum / acc.var_n as f64).sqrt()
        },
    }
}

/// A collective table row (nccl-tests' columns): means over the rows, wrong elements
/// summed where checked, the efficiency against the line rate.
fn coll_row(
    (collective, backend, ranks, size): CollKey,
    rows: &[&results::CollectiveResult],
    quality: Quality,
    line_rate_gbit_s: Option<f64>,
) -> CollRow {
    let f = |g: &dyn Fn(&results::CollectiveResult) -> f64| {
        mean(&rows.iter().map(|r| g(r)).collect::<Vec<_>>())
    };
    let checked: Vec<u64> = rows
        .iter()
        .flat_map(|r| [&r.out_of_place, &r.in_place])
        .filter(|t| t.checked)
        .map(|t| t.wrong)
        .collect();
    let eff: Vec<f64> = rows
        .iter()
        .filter_map(|r| Metric::Efficiency.of_collective(r, line_rate_gbit_s))
        .collect();
    let first = rows[0];
    CollRow {
        size: results::units::format_size(size),
        collective,
        backend,
        ranks,
        size_bytes: size,
        count: first.count,
        datatype: first.datatype.clone(),
        op: first.op.clone(),
        rows: rows.len(),
        oop_time_us: f(&|r| r.out_of_place.time_us),
        oop_algbw: f(&|r| r.out_of_place.algbw_gbyte_s),
        oop_busbw: f(&|r| r.out_of_place.busbw_gbyte_s),
        ip_time_us: f(&|r| r.in_place.time_us),
        ip_busbw: f(&|r| r.in_place.busbw_gbyte_s),
        wrong: (!checked.is_empty())
            .then(|| checked.iter().fold(0u64, |a, w| a.saturating_add(*w))),
        efficiency_pct: (!eff.is_empty()).then(|| mean(&eff)),
        quality,
        row_busbw: rows.iter().map(|r| r.out_of_place.busbw_gbyte_s).collect(),
        row_time: rows.iter().map(|r| r.out_of_place.time_us).collect(),
    }
}

/// A message size for people: `2 B`, `64KiB`, `8MiB`.
pub fn size_label(bytes: u64) -> String {
    let f = results::units::format_size(bytes);
    if f.ends_with(|c: char| c.is_ascii_digit()) {
        format!("{f} B")
    } else {
        format!("{f}iB")
    }
}
