//! Judging: every check of a profile against the loaded results. A check with no matching
//! data is MISSING, never PASS, and the overall verdict is PASS only when every check passes:
//! a fabric is not accepted on the strength of a test nobody ran.

use std::collections::BTreeMap;

use results::{LatencyHistogram, TestResult};
use serde::Serialize;

use crate::input::{LatKey, Loaded};
use crate::metric::{Metric, RowKind};
use crate::profile::{Bound, Check, Profile, Selector};
use crate::rows::{GroupKey, P2pRow, P2pRows, RowStats};
use crate::tables::Tables;
use results::quality::{Mark, Marks};

/// Outcome of one check. By default MISSING: a check that judged nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pass,
    Fail,
    #[default]
    Missing,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Missing => "MISSING",
        }
    }
}

/// One judged check, ready for templates. The default judged nothing: MISSING, no value.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Outcome {
    pub id: String,
    pub description: String,
    pub metric: String,
    pub unit: String,
    pub selector: String,
    /// `<= 5 us`.
    pub bound: String,
    pub bound_value: f64,
    pub status: Status,
    /// The deciding (worst) value; `None` when MISSING.
    pub measured: Option<f64>,
    /// Where the deciding value came from.
    pub worst_at: String,
    /// How many values were judged (merged groups or rows).
    pub observations: usize,
    /// What a reader must know to read the value right (e.g. busbw above the link rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// `measured` is only a lower bound (see [`AT_LEAST`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub at_least: bool,
}

impl Outcome {
    /// A profile check's outcome: its id, description, metric, unit, selector and bound
    /// as the profile says them, with what was judged (no warning, not a lower bound).
    pub fn of_check(
        check: &Check,
        status: Status,
        measured: Option<f64>,
        worst_at: String,
        observations: usize,
    ) -> Outcome {
        Outcome {
            id: check.id.clone(),
            description: check.description.clone(),
            metric: check.metric.name().to_string(),
            unit: check.unit.to_string(),
            selector: check.select.describe(),
            bound: format!(
                "{} {} {}",
                check.bound.symbol(),
                fmt_value(check.bound.value()),
                check.unit
            ),
            bound_value: check.bound.value(),
            status,
            measured,
            worst_at,
            observations,
            warning: None,
            at_least: false,
        }
    }
}

/// The verdict of a whole profile.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub profile: String,
    /// `PASS` or `FAIL`.
    pub overall: &'static str,
    pub passed: usize,
    pub failed: usize,
    pub missing: usize,
    pub checks: Vec<Outcome>,
}

impl Verdict {
    pub fn pass(&self) -> bool {
        self.overall == "PASS"
    }

    /// Counts the checks again and sets `overall` from them: PASS only when none failed
    /// and none is missing.
    pub fn recount(&mut self) {
        let count = |s: Status| self.checks.iter().filter(|c| c.status == s).count();
        (self.passed, self.failed, self.missing) = (
            count(Status::Pass),
            count(Status::Fail),
            count(Status::Missing),
        );
        self.overall = if self.failed == 0 && self.missing == 0 {
            "PASS"
        } else {
            "FAIL"
        };
    }
}

/// One judged value. Where it came from is formatted only for the deciding one: at 1024
/// ranks a check sees tens of thousands of rows.
struct Obs {
    value: f64,
    at: At,
    /// The value is only a lower bound: a counter behind it saturated or was cleared in
    /// the window (`PortCounters::at_least`).
    at_least: bool,
    /// The value is an estimate (see [`BER_BY_RATE`]).
    estimated: bool,
}

enum At {
    Text(String),
    /// Document index and result index.
    Row(usize, usize),
    /// Document index and index of a compact row of a streamed document.
    Compact(usize, usize),
}

fn matches(sel: &Selector, tool: &str, r: &TestResult) -> bool {
    if sel.tool.as_deref().is_some_and(|t| t != tool) {
        return false;
    }
    if sel.test.as_deref().is_some_and(|t| t != r.test()) {
        return false;
    }
    if !sel.size_ok(r.size_bytes()) {
        return false;
    }
    match r {
        TestResult::Latency(l) => {
            sel.collective.is_none()
                && sel.backend.is_none()
                && sel.bidirectional != Some(true)
                && sel.transport.as_deref().is_none_or(|t| t == l.transport)
                && memory_ok(sel, &l.transport, l.memory_class())
                && pair_ok(sel, &l.pair)
        }
        TestResult::Bandwidth(b) => {
            sel.collective.is_none()
                && sel.backend.is_none()
                && sel.transport.as_deref().is_none_or(|t| t == b.transport)
                && sel.bidirectional.is_none_or(|d| d == b.bidirectional)
                && memory_ok(sel, &b.transport, b.memory_class())
                && pair_ok(sel, &b.pair)
        }
        TestResult::Collective(c) => {
            sel.transport.is_none()
                && sel.memory.is_none()
                && sel.bidirectional.is_none()
                && sel.pair.is_none()
                && sel.collective.as_deref().is_none_or(|x| x == c.collective)
                && sel.backend.as_deref().is_none_or(|x| x == c.backend)
        }
    }
}

/// Whether `check` bounds each direction of a bidirectional row on its own: a row that
/// ran both ways sums them (perftest -b), and a bound is one-way unless the check says
/// `bidirectional = true`. A bidirectional row that recorded no directions is then not
/// judged at all: its sum says nothing of the slower direction.
fn one_way(check: &Check, bidirectional_row: bool) -> bool {
    bidirectional_row && check.select.bidirectional != Some(true) && check.metric.sums_directions()
}

/// Whether the selector takes the point-to-point rows of group `g` (all but `pair`, which
/// is per row): [`matches`] decided once per group. The one rule for every place that
/// selects groups: compact rows here, the matrix's per-pair bounds and its checks.
pub fn group_selected(sel: &Selector, g: &GroupKey) -> bool {
    sel.tool.as_deref().is_none_or(|t| t == g.tool)
        && sel.test.as_deref().is_none_or(|t| t == g.test)
        && sel.size_ok(g.size)
        && sel.collective.is_none()
        && sel.backend.is_none()
        && sel.transport.as_deref().is_none_or(|t| t == g.transport)
        && memory_ok(sel, &g.transport, &g.memory)
        && if g.latency {
            sel.bidirectional != Some(true)
        } else {
            sel.bidirectional.is_none_or(|d| d == g.bidirectional)
        }
}

/// [`matches`] for the compact rows of a streamed document: which of its groups the
/// selector takes (decided once per group, not per row of millions).
fn groups_matching(sel: &Selector, rows: &P2pRows) -> Vec<bool> {
    rows.groups.iter().map(|g| group_selected(sel, g)).collect()
}

/// Whether compact row `r` is selected, given its groups' [`groups_matching`].
fn matches_compact(sel: &Selector, groups: &[bool], rows: &P2pRows, r: &P2pRow) -> bool {
    groups[r.group as usize] && (sel.pair.is_none() || pair_ok(sel, &rows.pair(r)))
}

/// The `memory` selector: without it a check judges host-memory rows (what every check
/// meant before GPU buffers existed) and the GPU copy rows; `any` takes every row.
fn memory_ok(sel: &Selector, transport: &str, class: &str) -> bool {
    match sel.memory.as_deref() {
        Some("any") => true,
        Some(m) => m == class,
        None => class == "host" || transport == "cuda",
    }
}

fn pair_ok(sel: &Selector, p: &results::Pair) -> bool {
    match &sel.pair {
        None => true,
        Some(want) => {
            p.label().contains(want.as_str())
                || p.initiator.host == *want
                || p.responder.host == *want
        }
    }
}

pub fn fmt_value(v: f64) -> String {
    let trim = |s: String| s.trim_end_matches('0').trim_end_matches('.').to_string();
    if v == 0.0 || (v.abs() >= 0.01 && v.abs() < 1e6) {
        trim(format!("{v:.3}"))
    } else if v.abs() >= 1e-6 && v.abs() < 0.01 {
        // Small rates (0.0026 Mpps, a 0.004% loss) read as decimals with four
        // significant digits; a reader of a table should not decode `2.599e-3`.
        let decimals = (3 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
        trim(format!("{v:.decimals$}"))
    } else {
        format!("{v:.3e}")
    }
}

/// Formats a measured value for tables: three decimals, trailing zeros trimmed.
pub fn format_value(v: f64) -> String {
    fmt_value(v)
}

/// Judges one check.
pub fn judge_check(
    check: &Check,
    docs: &[Loaded],
    tables: &Tables,
    line_rate: Option<f64>,
) -> Outcome {
    let sel = &check.select;
    let mut obs: Vec<Obs> = match check.metric {
        // Latency percentiles over merged data.
        Metric::Latency(p) if !sel.each_pair => merged_latency(sel, p, docs, tables),
        // Points of a curve, not rows: busbw at N ranks over busbw at the base size.
        Metric::ScalingEfficiency => scaling_points(check, docs),
        _ => row_values(check, docs, line_rate),
    };
    if check.metric == Metric::Disturbed && !obs.is_empty() {
        // The count of disturbed results decides, shown at the first of them.
        let count = obs.iter().map(|o| o.value).sum::<f64>();
        let first = obs.iter().position(|o| o.value > 0.0).unwrap_or(0);
        let n = obs.len();
        let at = obs.swap_remove(first).at;
        obs = vec![Obs {
            value: count,
            at,
            at_least: false,
            estimated: false,
        }];
        let mut o = finish(check, docs, &obs);
        o.observations = n;
        return o;
    }
    let mut o = finish(check, docs, &obs);
    if check.metric == Metric::Efficiency {
        o.warning = nccl_above_link(sel, docs, line_rate);
    }
    o
}

/// Latency percentiles over merged data: the merged histograms of the tables when the
/// selector does not narrow below (tool, test, transport, size); otherwise the selected
/// rows' histograms merged here.
fn merged_latency(
    sel: &Selector,
    p: crate::metric::Percentile,
    docs: &[Loaded],
    tables: &Tables,
) -> Vec<Obs> {
    let mut obs: Vec<Obs> = Vec::new();
    if sel.pair.is_none() {
        for (k, h) in &tables.histograms {
            let probe = probe_latency(k);
            if h.is_empty() || !matches(sel, &k.tool, &probe) {
                continue;
            }
            obs.push(Obs {
                at_least: false,
                estimated: false,
                value: percentile(h, p),
                at: At::Text(format!("{} {} {}", k.test, k.transport, size_label(k.size))),
            });
        }
    } else {
        let mut groups: BTreeMap<LatKey, LatencyHistogram> = BTreeMap::new();
        for d in docs {
            for r in &d.doc.results {
                if let TestResult::Latency(l) = r {
                    if !matches(sel, &d.doc.tool, r) {
                        continue;
                    }
                    // Decoded once at load already, so this cannot fail here.
                    let _ = groups
                        .entry(LatKey::of(&d.doc, l))
                        .or_default()
                        .merge_encoded(&l.histogram);
                }
            }
        }
        // Streamed documents keep no per-row histogram: each selected row's own
        // percentile is judged instead (the worst row decides).
        for (di, d) in docs.iter().enumerate() {
            let Some(p2p) = d.p2p() else { continue };
            let groups = groups_matching(sel, p2p);
            for (ri, r) in p2p.rows.iter().enumerate() {
                if let RowStats::Latency(l) = &r.stats {
                    if matches_compact(sel, &groups, p2p, r) {
                        obs.push(Obs {
                            at_least: false,
                            estimated: false,
                            value: p.of(&l.us),
                            at: At::Compact(di, ri),
                        });
                    }
                }
            }
        }
        for (k, h) in groups {
            if !h.is_empty() {
                obs.push(Obs {
                    at_least: false,
                    estimated: false,
                    value: percentile(&h, p),
                    at: At::Text(format!("{} {} {}", k.test, k.transport, size_label(k.size))),
                });
            }
        }
    }
    obs
}

/// The scaling curves' points: busbw at N ranks over busbw at the base rank count.
fn scaling_points(check: &Check, docs: &[Loaded]) -> Vec<Obs> {
    let sel = &check.select;
    let mut obs: Vec<Obs> = Vec::new();
    let rows = docs.iter().flat_map(|d| {
        d.doc.results.iter().filter_map(move |r| match r {
            TestResult::Collective(c) if matches(sel, &d.doc.tool, r) => Some(c),
            _ => None,
        })
    });
    for curve in crate::scaling::curves(rows) {
        for (p, base, e) in curve.efficiencies(check.base_ranks) {
            let k = &curve.key;
            obs.push(Obs {
                at_least: false,
                estimated: false,
                value: e,
                at: At::Text(format!(
                    "{} {} {} {}: {} vs {}",
                    k.collective,
                    size_label(k.size_bytes),
                    k.datatype,
                    k.backend,
                    crate::scaling::describe(p),
                    crate::scaling::describe(base)
                )),
            });
        }
    }
    obs
}

/// Every selected row's value of the check's metric: the rows read whole, then the
/// compact rows of streamed documents.
fn row_values(check: &Check, docs: &[Loaded], line_rate: Option<f64>) -> Vec<Obs> {
    let mut obs: Vec<Obs> = Vec::new();
    for (di, d) in docs.iter().enumerate() {
        whole_rows(check, di, d, line_rate, &mut obs);
        compact_rows(check, di, d, &mut obs);
    }
    obs
}

/// The selected rows of one document read whole (`di`: its index), each one's value of
/// the check's metric (each direction of a bidirectional row for a one-way bound).
fn whole_rows(check: &Check, di: usize, d: &Loaded, line_rate: Option<f64>, obs: &mut Vec<Obs>) {
    let sel = &check.select;
    let kind = check.metric.rows();
    let marks = (kind == RowKind::Any).then(|| Marks::of(&d.doc));
    for (ri, r) in d.doc.results.iter().enumerate() {
        if !matches(sel, &d.doc.tool, r) {
            continue;
        }
        let value = match (kind, r) {
            (RowKind::Any, _) => match marks.as_ref().map(|m| m.mark(ri, r)) {
                Some(Mark::Disturbed) => Some(1.0),
                Some(Mark::Clean) => Some(0.0),
                _ => None,
            },
            (RowKind::Latency | RowKind::Counters, TestResult::Latency(l)) => {
                check.metric.of_latency_row(l)
            }
            (RowKind::Bandwidth | RowKind::Counters, TestResult::Bandwidth(b)) => {
                check.metric.of_bandwidth(b)
            }
            (RowKind::Collective, TestResult::Collective(c)) => {
                check.metric.of_collective(c, line_rate)
            }
            _ => None,
        };
        let values = match r {
            TestResult::Bandwidth(b) if one_way(check, b.bidirectional) => {
                check.metric.of_directions(b)
            }
            _ => value.into_iter().collect(),
        };
        for value in values.into_iter().filter(|v| v.is_finite()) {
            let counters = match r {
                TestResult::Latency(l) => l.counters.as_ref(),
                TestResult::Bandwidth(b) => b.counters.as_ref(),
                TestResult::Collective(_) => None,
            };
            let at_least = counters.is_some_and(|c| crate::metric::at_least(c, check.metric));
            let estimated = check.metric == Metric::PreFecBer
                && counters.is_some_and(|c| crate::metric::health(c).ber_by_rate());
            obs.push(Obs {
                at_least,
                estimated,
                value,
                at: At::Row(di, ri),
            });
        }
    }
}

/// The compact rows of one streamed document (`di`: its index) the check selects.
fn compact_rows(check: &Check, di: usize, d: &Loaded, obs: &mut Vec<Obs>) {
    let sel = &check.select;
    let kind = check.metric.rows();
    let Some(p2p) = d.p2p() else { return };
    if !matches!(
        kind,
        RowKind::Latency | RowKind::Bandwidth | RowKind::Counters | RowKind::Any
    ) {
        return;
    }
    let groups = groups_matching(sel, p2p);
    let row_marks = (kind == RowKind::Any).then(|| p2p.marks(&d.doc));
    for (ri, r) in p2p.rows.iter().enumerate() {
        let kind_ok = matches!(
            (kind, &r.stats),
            (RowKind::Latency, RowStats::Latency(_))
                | (RowKind::Bandwidth, RowStats::Bandwidth(_))
                | (RowKind::Counters | RowKind::Any, _)
        );
        if !kind_ok || !matches_compact(sel, &groups, p2p, r) {
            continue;
        }
        let values = match (&row_marks, &r.stats) {
            (Some(m), _) => match m.as_ref().map_or(Mark::Unknown, |m| m[ri]) {
                Mark::Disturbed => vec![1.0],
                Mark::Clean => vec![0.0],
                Mark::Unknown => vec![],
            },
            (None, RowStats::Bandwidth(b))
                if one_way(check, p2p.groups[r.group as usize].bidirectional) =>
            {
                b.of_directions(check.metric)
            }
            (None, _) => r.stats.metric(check.metric).into_iter().collect(),
        };
        for value in values.into_iter().filter(|v| v.is_finite()) {
            obs.push(Obs {
                at_least: r.stats.at_least(check.metric),
                estimated: r.stats.estimated(check.metric),
                value,
                at: At::Compact(di, ri),
            });
        }
    }
}

/// The outcome of a check from its observations: the worst one decides. A lower bound
/// ("at least") decides only where it is decisive: above a maximum it fails for sure, but
/// under one (or under a minimum) the true value is unknown, and the check is MISSING
/// there unless another value fails it for sure.
fn finish(check: &Check, docs: &[Loaded], obs: &[Obs]) -> Outcome {
    fn worst_of<'a>(bound: Bound, it: impl Iterator<Item = &'a Obs>) -> Option<&'a Obs> {
        it.reduce(|a, b| {
            let b_worse = match bound {
                Bound::Min(_) => b.value < a.value,
                Bound::Max(_) => b.value > a.value,
            };
            if b_worse {
                b
            } else {
                a
            }
        })
    }
    let undecided = |o: &Obs| {
        o.at_least
            && match check.bound {
                Bound::Max(_) => check.bound.holds(o.value),
                Bound::Min(_) => !check.bound.holds(o.value),
            }
    };
    let failed = worst_of(
        check.bound,
        obs.iter()
            .filter(|o| !undecided(o) && !check.bound.holds(o.value)),
    );
    let unknown = worst_of(check.bound, obs.iter().filter(|o| undecided(o)));
    let (worst, status) = match (failed, unknown) {
        (Some(f), _) => (Some(f), Status::Fail),
        (None, Some(u)) => (Some(u), Status::Missing),
        (None, None) => {
            let w = worst_of(check.bound, obs.iter());
            (
                w,
                if w.is_some() {
                    Status::Pass
                } else {
                    Status::Missing
                },
            )
        }
    };
    let worst_at = worst
        .map(|w| describe(&w.at, docs))
        .unwrap_or_else(|| crate::feed::next_step(check));
    Outcome {
        at_least: worst.is_some_and(|w| w.at_least),
        warning: worst.and_then(|w| {
            if w.at_least {
                Some(AT_LEAST.to_string())
            } else {
                w.estimated.then(|| BER_BY_RATE.to_string())
            }
        }),
        ..Outcome::of_check(check, status, worst.map(|w| w.value), worst_at, obs.len())
    }
}

/// Most ports a check over ports names; a count says the rest.
const PORTS_NAMED: usize = 40;

/// What a check over ports (the audit's, the inventory's) is about; every judged port must
/// show what the profile expects.
pub struct PortCheck<'a> {
    /// Already prefixed (`lossless-pfc`, `inventory-rate`).
    pub id: String,
    pub description: String,
    pub metric: &'a str,
    pub selector: &'a str,
    pub bound: String,
    /// What to do when no port could be judged (MISSING).
    pub none_judged: &'a str,
}

/// The outcome of a check over `judged` ports of which `misses` (one text per port: the
/// port and what it shows) are not as expected: MISSING with none judged, else FAIL naming
/// the first [`PORTS_NAMED`] misses, else PASS.
pub fn port_outcome(c: PortCheck<'_>, judged: usize, misses: Vec<String>) -> Outcome {
    let status = if judged == 0 {
        Status::Missing
    } else if misses.is_empty() {
        Status::Pass
    } else {
        Status::Fail
    };
    let worst_at = match status {
        Status::Missing => c.none_judged.to_string(),
        Status::Pass => format!("all {judged} port(s) as expected"),
        Status::Fail => {
            let mut s: Vec<String> = misses.iter().take(PORTS_NAMED).cloned().collect();
            if misses.len() > PORTS_NAMED {
                s.push(format!("and {} more", misses.len() - PORTS_NAMED));
            }
            s.join("; ")
        }
    };
    Outcome {
        id: c.id,
        description: c.description,
        metric: c.metric.into(),
        unit: "ports".into(),
        selector: c.selector.into(),
        bound: c.bound,
        bound_value: 0.0,
        status,
        measured: (judged > 0).then_some(misses.len() as f64),
        worst_at,
        observations: judged,
        warning: None,
        at_least: false,
    }
}

/// What a reader of an "at least" value must know, and the next step.
const AT_LEAST: &str = "at least: a port counter behind this value saturated (InfiniBand \
PortCounters error fields stop at 2^16-1, 2^8-1 or 2^4-1) or was cleared during the run, so \
only a lower bound is known; clear the port counters (perfquery -x -R) before the run and \
measure again";

/// What a reader of a pre-FEC BER over the port's rate must know.
const BER_BY_RATE: &str = "estimated: the driver counts FEC-corrected bits but not the bits \
received (mlx5 prints rx_bits_phy only where the firmware reports it), so the BER is over the \
port's rate x the row's time, as if the link received at line rate throughout; a link that \
idled part of the row has a higher BER than this";

/// NCCL's busbw above the link rate: inside a node NVLink carries the traffic, and on few
/// nodes tree or NVLS algorithms move less than the ring the bus factor assumes, so the
/// efficiency then says nothing about the network.
fn nccl_above_link(sel: &Selector, docs: &[Loaded], line_rate: Option<f64>) -> Option<String> {
    let over = docs
        .iter()
        .flat_map(|d| d.doc.results.iter().map(move |r| (d, r)))
        .filter_map(|(d, r)| match r {
            TestResult::Collective(c) if c.backend == "nccl" && matches(sel, &d.doc.tool, r) => {
                Metric::Efficiency
                    .of_collective(c, line_rate)
                    .filter(|e| *e > 100.0)
                    .map(|e| (e, c))
            }
            _ => None,
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    let (e, c) = over;
    Some(format!(
        "NCCL busbw exceeds the link rate ({}% at {} {}, {} ranks): NVLink or a tree/NVLS \
         algorithm carried the traffic, so this efficiency does not measure the network; \
         measure with NCCL_ALGO=Ring across nodes",
        fmt_value(e),
        c.collective,
        size_label(c.size_bytes),
        c.ranks
    ))
}

use crate::tables::size_label;

fn describe(at: &At, docs: &[Loaded]) -> String {
    match at {
        At::Text(s) => s.clone(),
        At::Row(di, ri) => {
            let d = &docs[*di];
            let r = &d.doc.results[*ri];
            let mut s = format!("{} {}", r.test(), size_label(r.size_bytes()));
            match r {
                TestResult::Latency(l) => s.push_str(&format!(", pair {}", l.pair.label())),
                TestResult::Bandwidth(b) => s.push_str(&format!(", pair {}", b.pair.label())),
                TestResult::Collective(c) => {
                    s.push_str(&format!(", {} ranks, {}", c.ranks, c.backend))
                }
            }
            format!("{s} ({})", d.path.display())
        }
        At::Compact(di, ri) => {
            let d = &docs[*di];
            let Some(p2p) = d.p2p() else {
                return String::new();
            };
            let r = &p2p.rows[*ri];
            let g = &p2p.groups[r.group as usize];
            format!(
                "{} {}, pair {} ({})",
                g.test,
                size_label(g.size),
                p2p.pair(r).label(),
                d.path.display()
            )
        }
    }
}

/// A stand-in latency row so merged groups go through the same selector as rows.
fn probe_latency(k: &LatKey) -> TestResult {
    // The key's transport label carries the memory class (`verbs+cuda`): give the probe row
    // the same memory so the selector sees what the merged rows were.
    let (transport, class) = results::split_transport_label(&k.transport);
    let side = |kind: &str| results::MemorySide {
        kind: kind.into(),
        ..Default::default()
    };
    let memory = match class {
        "host" => None,
        "cuda" => Some(results::MemoryUse {
            initiator: Some(side("cuda")),
            responder: Some(side("cuda")),
        }),
        _ => Some(results::MemoryUse {
            initiator: Some(side("cuda")),
            responder: Some(side("host")),
        }),
    };
    TestResult::Latency(results::LatencyResult {
        test: k.test.clone(),
        transport: transport.to_string(),
        size_bytes: k.size,
        complete: true,
        memory,
        ..Default::default()
    })
}

fn percentile(h: &LatencyHistogram, p: crate::metric::Percentile) -> f64 {
    match p.quantile() {
        Some(q) => h.value_at_quantile_ns(q) as f64 / 1000.0,
        None => p.of(&h.summary_us()),
    }
}

/// Judges every check of `profile`.
pub fn judge(profile: &Profile, docs: &[Loaded], tables: &Tables) -> Verdict {
    let checks: Vec<Outcome> = profile
        .checks
        .iter()
        .map(|c| judge_check(c, docs, tables, profile.line_rate_gbit_s))
        .collect();
    let mut v = Verdict {
        profile: profile.name.clone(),
        overall: "FAIL",
        passed: 0,
        failed: 0,
        missing: 0,
        checks,
    };
    v.recount();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::InputSet;

    fn loaded(doc: results::Document) -> Loaded {
        Loaded::from_text("mem.json", &serde_json::to_string(&doc).unwrap()).unwrap()
    }

    fn profile(body: &str) -> Profile {
        crate::profile::parse(&format!("name = \"t\"\n{body}"), "t.toml").unwrap()
    }

    fn run(p: &Profile, docs: &[Loaded]) -> Verdict {
        let t = crate::tables::build(&InputSet::of(docs.to_vec()), p.line_rate_gbit_s);
        judge(p, docs, &t)
    }

    /// A bidirectional row of `a <-> b` summing `dirs` (Gb/s each way), with the
    /// directions recorded when `recorded`.
    fn bidir_doc(dirs: [f64; 2], recorded: bool) -> results::Document {
        let mut doc = synth::bandwidth_doc("a", "b", &[1 << 20], dirs[0] + dirs[1], 2);
        for r in &mut doc.results {
            if let TestResult::Bandwidth(b) = r {
                b.bidirectional = true;
                b.bw_gbit_s.avg = dirs[0] + dirs[1];
                let ends = [b.pair.initiator.clone(), b.pair.responder.clone()];
                b.directions = if recorded {
                    (0..2)
                        .map(|i| results::DirectionFigures {
                            from: ends[i].clone(),
                            to: ends[1 - i].clone(),
                            bw_gbit_s: results::BandwidthSummary {
                                avg: dirs[i],
                                peak: dirs[i],
                                ..Default::default()
                            },
                            msg_rate_mpps: 1.0,
                        })
                        .collect()
                } else {
                    vec![]
                };
            }
        }
        doc
    }

    /// A pre-FEC BER whose driver counted no received bits is over the port's rate x the
    /// row's time: the check says it is an estimate; with the received bits it does not.
    #[test]
    fn a_ber_over_the_ports_rate_is_said_to_be_an_estimate() {
        let p = profile(
            "[[check]]\nid=\"ber\"\ndescription=\"d\"\nmetric=\"pre_fec_ber\"\nunit=\"BER\"\nmax=1e-8\n",
        );
        let with = |rx_bits: Option<i64>| {
            let mut doc = synth::bandwidth_doc("a", "b", &[1 << 20], 90.0, 2);
            for r in &mut doc.results {
                if let TestResult::Bandwidth(b) = r {
                    let mut side = results::PortCounters {
                        rate_gbit_s: Some(100.0),
                        ..Default::default()
                    };
                    side.driver_counters
                        .insert("rx_corrected_bits_phy".into(), 1000);
                    if let Some(bits) = rx_bits {
                        side.driver_counters.insert("rx_bits_phy".into(), bits);
                    }
                    b.counters = Some(results::CounterDeltas {
                        initiator: Some(side),
                        responder: None,
                    });
                }
            }
            run(&p, &[loaded(doc)]).checks.remove(0)
        };
        let estimated = with(None);
        assert_eq!(estimated.status, Status::Pass, "{estimated:?}");
        assert!(
            estimated
                .warning
                .as_deref()
                .is_some_and(|w| w.starts_with("estimated: ")),
            "{estimated:?}"
        );
        let counted = with(Some(1_000_000_000_000));
        assert_eq!(counted.status, Status::Pass, "{counted:?}");
        assert_eq!(counted.warning, None);
    }

    #[test]
    fn a_one_way_bound_holds_for_each_direction_of_a_bidirectional_row() {
        let bounds = "[[check]]\nid=\"one-way\"\ndescription=\"d\"\nmetric=\"bw_avg\"\nunit=\"Gb/s\"\nmin=94\n\
             [[check]]\nid=\"summed\"\ndescription=\"d\"\nmetric=\"bw_avg\"\nunit=\"Gb/s\"\nmin=94\nbidirectional=true\n";
        let p = profile(bounds);
        // 47 + 47 = 94: the sum passes a bound on the sum, each direction fails 94.
        let v = run(&p, &[loaded(bidir_doc([47.0, 47.0], true))]);
        assert_eq!(v.checks[0].status, Status::Fail, "{:?}", v.checks[0]);
        assert_eq!(v.checks[0].measured, Some(47.0));
        assert_eq!(v.checks[1].status, Status::Pass, "{:?}", v.checks[1]);
        // One direction at half rate fails, whatever the other does.
        let v = run(&p, &[loaded(bidir_doc([96.0, 48.0], true))]);
        assert_eq!(v.checks[0].status, Status::Fail);
        assert_eq!(v.checks[0].measured, Some(48.0));
        let v = run(&p, &[loaded(bidir_doc([96.0, 95.0], true))]);
        assert_eq!(v.checks[0].status, Status::Pass, "{:?}", v.checks[0]);
        // A sum whose directions were not recorded judges no direction.
        let v = run(&p, &[loaded(bidir_doc([96.0, 95.0], false))]);
        assert_eq!(v.checks[0].status, Status::Missing, "{:?}", v.checks[0]);
    }

    #[test]
    fn small_values_read_as_decimals() {
        assert_eq!(fmt_value(0.002599), "0.002599");
        assert_eq!(fmt_value(0.00004), "0.00004");
        assert_eq!(fmt_value(0.5), "0.5");
        assert_eq!(fmt_value(94.25), "94.25");
        assert_eq!(fmt_value(0.0), "0");
        assert_eq!(fmt_value(2.5e-9), "2.500e-9");
        assert_eq!(fmt_value(3.2e7), "3.200e7");
    }

    #[test]
    fn merged_percentile_passes_and_fails_on_the_bound() {
        // p99 of send_lat at 2 B: base 10 us, 1% tail up to 50 us.
        let docs = vec![loaded(synth::latency_doc(
            "a",
            "b",
            &[2, 64, 4096],
            10.0,
            1,
        ))];
        let check = |max: f64| {
            format!("[[check]]\nid=\"l\"\ndescription=\"d\"\nmetric=\"latency_p50\"\nunit=\"us\"\nmax={max}\ntest=\"send_lat\"\nmax_size=64\n")
        };
        let v = run(&profile(&check(20.0)), &docs);
        assert_eq!(v.checks[0].status, Status::Pass, "{:?}", v.checks[0]);
        assert_eq!(v.checks[0].observations, 2, "sizes 2 and 64 only");
        assert_eq!(v.overall, "PASS");
        let v = run(&profile(&check(5.0)), &docs);
        assert_eq!(v.checks[0].status, Status::Fail);
        assert_eq!(v.overall, "FAIL");
        let m = v.checks[0].measured.unwrap();
        assert!((10.0..11.2).contains(&m), "p50 {m}");
    }

    #[test]
    fn no_matching_data_is_missing_and_fails_the_verdict() {
        let docs = vec![loaded(synth::latency_doc("a", "b", &[2], 10.0, 1))];
        let p = profile(
            "[[check]]\nid=\"bw\"\ndescription=\"d\"\nmetric=\"bw_avg\"\nunit=\"Gb/s\"\nmin=1\n",
        );
        let v = run(&p, &docs);
        assert_eq!(v.checks[0].status, Status::Missing);
        assert_eq!(v.overall, "FAIL");
        assert_eq!(v.missing, 1);
    }

    #[test]
    fn worst_pair_decides_bandwidth() {
        let docs = vec![
            loaded(synth::bandwidth_doc("a", "b", &[1 << 20], 90.0, 1)),
            loaded(synth::bandwidth_doc("c", "d", &[1 << 20], 40.0, 2)),
        ];
        let p = profile("[[check]]\nid=\"bw\"\ndescription=\"d\"\nmetric=\"bw_avg\"\nunit=\"Gb/s\"\nmin=50\neach_pair=true\n");
        let v = run(&p, &docs);
        assert_eq!(v.checks[0].status, Status::Fail);
        assert!(
            v.checks[0].worst_at.contains("c <-> d"),
            "{}",
            v.checks[0].worst_at
        );
        let p = profile("[[check]]\nid=\"bw\"\ndescription=\"d\"\nmetric=\"bw_avg\"\nunit=\"Gb/s\"\nmin=50\npair=\"a\"\n");
        assert_eq!(run(&p, &docs).checks[0].status, Status::Pass);
    }

    #[test]
    fn a_profile_can_require_undisturbed_runs() {
        let p = profile(
            "[[check]]\nid=\"quiet\"\ndescription=\"d\"\nmetric=\"disturbed_results\"\nunit=\"results\"\nmax=0\n",
        );
        let quality = |load: f64| results::quality::HostQuality {
            hostname: "c".into(),
            cores: 4,
            load_avg_before: load,
            load_avg_after: load,
            duration_s: 1.0,
            ..Default::default()
        };
        let with = |load: Option<f64>| {
            let mut d = synth::bandwidth_doc("a", "b", &[65536], 90.0, 1);
            let mut other = synth::bandwidth_doc("c", "d", &[65536, 1 << 20], 90.0, 2);
            if let Some(l) = load {
                d.attach_quality(vec![]);
                other.attach_quality(vec![quality(l)]);
            }
            vec![loaded(d), loaded(other)]
        };
        // No quality record anywhere: nothing proves the runs were quiet.
        assert_eq!(run(&p, &with(None)).checks[0].status, Status::Missing);
        let v = run(&p, &with(Some(0.1)));
        assert_eq!(v.checks[0].status, Status::Pass, "{:?}", v.checks[0]);
        assert_eq!(v.checks[0].observations, 3);
        let v = run(&p, &with(Some(9.0)));
        let c = &v.checks[0];
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert_eq!(c.measured, Some(2.0), "both results of the busy host");
        assert!(c.worst_at.contains("c <-> d"), "{}", c.worst_at);
    }

    #[test]
    fn loss_and_collectives_are_judged() {
        let docs = vec![
            loaded(synth::bandwidth_doc("a", "b", &[65536], 90.0, 1)),
            loaded(synth::collective_doc(8, &[1 << 26], 11.9, 100.0, 3)),
        ];
        // synth counters: 10 lost of 1e6 sent = 0.001 %.
        let p = profile(
            "[[check]]\nid=\"loss\"\ndescription=\"d\"\nmetric=\"link_loss\"\nunit=\"%\"\nmax=0.01\n\
             [[check]]\nid=\"eff\"\ndescription=\"d\"\nmetric=\"efficiency\"\nunit=\"%\"\nmin=94\ncollective=\"all_reduce\"\n\
             [[check]]\nid=\"wrong\"\ndescription=\"d\"\nmetric=\"wrong_elements\"\nunit=\"elements\"\nmax=0\ncollective=\"all_reduce\"\n",
        );
        let v = run(&p, &docs);
        assert_eq!(v.checks[0].status, Status::Pass, "{:?}", v.checks[0]);
        assert!((v.checks[0].measured.unwrap() - 0.001).abs() < 1e-9);
        // 11.9 GB/s * 8 / 100 Gb/s = 95.2 % (minus the size ramp at 64 MiB: ~95.1 %).
        assert_eq!(v.checks[1].status, Status::Pass, "{:?}", v.checks[1]);
        assert_eq!(v.checks[2].status, Status::Pass);
        assert_eq!(v.overall, "PASS");
    }

    /// A value from a counter that saturated (or was cleared) is only "at least": it fails
    /// a maximum it exceeds, but under the maximum the check is MISSING, never PASS.
    #[test]
    fn a_saturated_counter_is_a_lower_bound() {
        let with = |discards: i64, at_least: bool| {
            let mut d = synth::bandwidth_doc("a", "b", &[65536], 90.0, 1);
            if let TestResult::Bandwidth(b) = &mut d.results[0] {
                let side = b.counters.as_mut().unwrap().initiator.as_mut().unwrap();
                side.counters.insert("port_xmit_discards".into(), discards);
                if at_least {
                    side.at_least.insert("port_xmit_discards".into());
                }
            }
            vec![loaded(d)]
        };
        let p = profile(
            "[[check]]\nid=\"discards\"\ndescription=\"d\"\nmetric=\"discards\"\nunit=\"packets\"\nmax=0\n\
             [[check]]\nid=\"loss\"\ndescription=\"d\"\nmetric=\"link_loss\"\nunit=\"%\"\nmax=1\n",
        );
        let exact = run(&p, &with(0, false));
        assert_eq!(
            exact.checks[0].status,
            Status::Pass,
            "{:?}",
            exact.checks[0]
        );
        assert!(!exact.checks[0].at_least && exact.checks[0].warning.is_none());
        // Stuck at the ceiling the whole run: 0 known, the truth unknown.
        let stuck = run(&p, &with(0, true));
        let c = &stuck.checks[0];
        assert_eq!(c.status, Status::Missing, "{c:?}");
        assert!(c.at_least && c.measured == Some(0.0));
        assert!(c.warning.as_deref().unwrap().contains("perfquery"), "{c:?}");
        // port_xmit_discards is a loss counter too: the loss figure is a floor as well.
        assert_eq!(
            stuck.checks[1].status,
            Status::Missing,
            "{:?}",
            stuck.checks[1]
        );
        assert_eq!(stuck.overall, "FAIL");
        // Already over the bound: at least 12 fails for sure.
        let over = run(&p, &with(12, true));
        assert_eq!(over.checks[0].status, Status::Fail);
        assert!(over.checks[0].at_least);
        // A sure failure elsewhere decides over an unknown.
        let mut docs = with(0, true);
        docs.extend(with(3, false));
        let both = run(&p, &docs);
        assert_eq!(both.checks[0].status, Status::Fail);
        assert_eq!(both.checks[0].measured, Some(3.0));
        assert!(!both.checks[0].at_least);
    }

    /// Scaling efficiency: busbw at each larger communicator over the base one, the
    /// worst deciding, a named base honoured, nothing to compare MISSING.
    #[test]
    fn scaling_efficiency_compares_communicator_sizes() {
        let doc = |ranks: u32, nodes: u32, busbw: f64| {
            let mut d = synth::collective_doc(ranks, &[1 << 26], busbw, 100.0, 3);
            for r in &mut d.results {
                if let TestResult::Collective(c) = r {
                    c.nodes = Some(nodes);
                    c.out_of_place.busbw_gbyte_s = busbw;
                }
            }
            loaded(d)
        };
        let docs = vec![
            doc(8, 1, 100.0),
            doc(16, 2, 40.0),
            doc(32, 4, 36.0),
            doc(64, 8, 32.0),
        ];
        let check = |extra: &str| {
            profile(&format!(
                "[[check]]\nid=\"s\"\ndescription=\"d\"\nmetric=\"scaling_efficiency\"\nunit=\"%\"\nmin=82\ncollective=\"all_reduce\"\nmin_size=\"64M\"\n{extra}"
            ))
        };
        // Base: 16 ranks, the smallest spanning two nodes; 64 ranks keep 80 %.
        let v = run(&check(""), &docs);
        let c = &v.checks[0];
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!((c.measured.unwrap() - 80.0).abs() < 1e-9);
        assert_eq!(c.observations, 2);
        assert!(
            c.worst_at
                .contains("64 ranks (8 nodes) vs 16 ranks (2 nodes)"),
            "{}",
            c.worst_at
        );
        // Against 32 ranks, 64 keep 88.9 %.
        let v = run(&check("base_ranks = 32\n"), &docs);
        assert_eq!(v.checks[0].status, Status::Pass);
        assert_eq!(v.checks[0].observations, 1);
        // One communicator size: nothing to compare.
        let v = run(&check(""), &docs[..1]);
        assert_eq!(v.checks[0].status, Status::Missing);
    }

    #[test]
    fn nccl_busbw_above_the_link_rate_warns() {
        // synth writes NCCL rows: 15 GB/s on a 100 Gb/s link is 120 %.
        let docs = vec![loaded(synth::collective_doc(8, &[1 << 26], 15.0, 100.0, 3))];
        let p = profile("[[check]]\nid=\"eff\"\ndescription=\"d\"\nmetric=\"efficiency\"\nunit=\"%\"\nmin=94\ncollective=\"all_reduce\"\n");
        let v = run(&p, &docs);
        let w = v.checks[0].warning.as_deref().expect("a warning");
        assert!(w.contains("NCCL_ALGO=Ring"), "{w}");
        let docs = vec![loaded(synth::collective_doc(8, &[1 << 26], 11.0, 100.0, 3))];
        assert!(run(&p, &docs).checks[0].warning.is_none());
    }

    /// Marks every point-to-point row of `doc` as measured with GPU memory on both sides
    /// (`class` "cuda") or on the initiator only ("mixed").
    fn on_gpu(mut doc: results::Document, class: &str) -> results::Document {
        let side = |kind: &str, path: &str| results::MemorySide {
            kind: kind.into(),
            path: path.into(),
            ..Default::default()
        };
        let m = results::MemoryUse {
            initiator: Some(side("cuda", "dmabuf")),
            responder: Some(if class == "cuda" {
                side("cuda", "peermem")
            } else {
                side("host", "host")
            }),
        };
        for r in &mut doc.results {
            match r {
                TestResult::Latency(l) => l.memory = Some(m.clone()),
                TestResult::Bandwidth(b) => b.memory = Some(m.clone()),
                TestResult::Collective(_) => {}
            }
        }
        doc
    }

    fn bw_check(extra: &str, min: f64) -> Profile {
        profile(&format!(
            "[[check]]\nid=\"bw\"\ndescription=\"d\"\nmetric=\"bw_avg\"\nunit=\"Gb/s\"\nmin={min}\neach_pair=true\n{extra}"
        ))
    }

    #[test]
    fn gpu_rows_are_judged_apart_from_host_rows() {
        let docs = vec![
            loaded(synth::bandwidth_doc("a", "b", &[1 << 20], 95.0, 1)),
            loaded(on_gpu(
                synth::bandwidth_doc("a", "b", &[1 << 20], 60.0, 2),
                "cuda",
            )),
        ];
        // Without `memory`, a check means host memory, as it always did.
        let v = run(&bw_check("", 90.0), &docs);
        assert_eq!(v.checks[0].status, Status::Pass, "{:?}", v.checks[0]);
        assert_eq!(v.checks[0].observations, 1);
        let v = run(&bw_check("memory=\"cuda\"", 90.0), &docs);
        assert_eq!(v.checks[0].status, Status::Fail);
        assert!((v.checks[0].measured.unwrap() - 60.0).abs() < 5.0);
        assert!(
            v.checks[0].selector.contains("cuda memory"),
            "{}",
            v.checks[0].selector
        );
        assert_eq!(
            run(&bw_check("memory=\"any\"", 90.0), &docs).checks[0].observations,
            2
        );
        assert_eq!(
            run(&bw_check("memory=\"mixed\"", 90.0), &docs).checks[0].status,
            Status::Missing
        );
        // The tables keep them apart too.
        let t = crate::tables::build(&InputSet::of(docs.clone()), None);
        let transports: Vec<&str> = t.bandwidth.iter().map(|r| r.transport.as_str()).collect();
        assert_eq!(transports, ["tcp", "tcp+cuda"], "synth rows are tcp");
    }

    #[test]
    fn merged_gpu_latency_is_its_own_group() {
        let docs = vec![
            loaded(synth::latency_doc("a", "b", &[2], 10.0, 1)),
            loaded(on_gpu(synth::latency_doc("a", "b", &[2], 50.0, 2), "cuda")),
            loaded(on_gpu(synth::latency_doc("c", "d", &[2], 90.0, 3), "mixed")),
        ];
        let lat = |extra: &str| {
            profile(&format!(
                "[[check]]\nid=\"l\"\ndescription=\"d\"\nmetric=\"latency_p50\"\nunit=\"us\"\nmax=20\ntest=\"send_lat\"\n{extra}"
            ))
        };
        let v = run(&lat(""), &docs);
        assert_eq!(v.checks[0].status, Status::Pass, "{:?}", v.checks[0]);
        assert_eq!(v.checks[0].observations, 1);
        let v = run(&lat("memory=\"cuda\""), &docs);
        assert_eq!(v.checks[0].status, Status::Fail);
        let m = v.checks[0].measured.unwrap();
        assert!((50.0..56.0).contains(&m), "p50 {m}: the GPU group alone");
        assert!(
            v.checks[0].worst_at.contains("tcp+cuda"),
            "{}",
            v.checks[0].worst_at
        );
        let v = run(&lat("memory=\"mixed\"\npair=\"c\""), &docs);
        assert!((90.0..100.0).contains(&v.checks[0].measured.unwrap()));
    }

    #[test]
    fn copy_bandwidth_and_direction_selectors() {
        let mut copy = synth::bandwidth_doc("a", "a", &[32 << 20], 400.0, 1);
        for r in &mut copy.results {
            if let TestResult::Bandwidth(b) = r {
                b.test = "h2d_bw".into();
                b.transport = "cuda".into();
            }
        }
        let mut bidir = on_gpu(synth::bandwidth_doc("a", "b", &[1 << 20], 700.0, 2), "cuda");
        for r in &mut bidir.results {
            if let TestResult::Bandwidth(b) = r {
                b.bidirectional = true;
            }
        }
        let uni = on_gpu(synth::bandwidth_doc("a", "b", &[1 << 20], 390.0, 3), "cuda");
        let docs = vec![loaded(copy), loaded(bidir), loaded(uni)];
        let p = profile(
            "[[check]]\nid=\"h2d\"\ndescription=\"d\"\nmetric=\"copy_bw\"\nunit=\"GB/s\"\nmin=45\ntest=\"h2d_bw\"\n\
             [[check]]\nid=\"any-copy\"\ndescription=\"d\"\nmetric=\"copy_bw\"\nunit=\"GB/s\"\nmin=1\nmemory=\"any\"\n\
             [[check]]\nid=\"uni\"\ndescription=\"d\"\nmetric=\"bw_avg\"\nunit=\"Gb/s\"\nmin=380\nmemory=\"cuda\"\nbidirectional=false\n\
             [[check]]\nid=\"bi\"\ndescription=\"d\"\nmetric=\"bw_avg\"\nunit=\"Gb/s\"\nmin=720\nmemory=\"cuda\"\nbidirectional=true\n",
        );
        let v = run(&p, &docs);
        // 400 Gb/s of copies = 50 GB/s.
        assert_eq!(v.checks[0].status, Status::Pass, "{:?}", v.checks[0]);
        assert!((v.checks[0].measured.unwrap() - 50.0).abs() < 3.0);
        // copy_bw reads copy rows only, whatever else is selected.
        assert_eq!(v.checks[1].observations, 1);
        assert_eq!(v.checks[2].status, Status::Pass, "{:?}", v.checks[2]);
        assert_eq!(
            v.checks[2].observations, 1,
            "the bidirectional row is not judged one-way"
        );
        assert_eq!(v.checks[3].status, Status::Fail, "700 < 720");
    }
}
