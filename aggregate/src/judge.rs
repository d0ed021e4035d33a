//! Judging: every check of a profile against the loaded results. A check with no matching
//! data is MISSING, never PASS, and the overall verdict is PASS only when every check passes:
//! a fabric is not accepted on the strength of a test nobody ran.

use std::collections::BTreeMap;

use results::{LatencyHistogram, TestResult};
use serde::Serialize;

use crate::input::{LatKey, Loaded};
use crate::metric::{Metric, RowKind};
use crate::profile::{Bound, Check, Profile, Selector};
use crate::rows::{P2pRow, P2pRows, RowStats};
use crate::tables::Tables;

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pass,
    Fail,
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

/// One judged check, ready for templates.
#[derive(Debug, Clone, Serialize)]
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
}

/// One judged value. Where it came from is formatted only for the deciding one: at 1024
/// ranks a check sees tens of thousands of rows.
struct Obs {
    value: f64,
    at: At,
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
                && sel.transport.as_deref().is_none_or(|t| t == l.transport)
                && pair_ok(sel, &l.pair)
        }
        TestResult::Bandwidth(b) => {
            sel.collective.is_none()
                && sel.backend.is_none()
                && sel.transport.as_deref().is_none_or(|t| t == b.transport)
                && pair_ok(sel, &b.pair)
        }
        TestResult::Collective(c) => {
            sel.transport.is_none()
                && sel.pair.is_none()
                && sel.collective.as_deref().is_none_or(|x| x == c.collective)
                && sel.backend.as_deref().is_none_or(|x| x == c.backend)
        }
    }
}

/// [`matches`] for the compact rows of a streamed document: which of its groups the
/// selector takes (decided once per group, not per row of millions).
fn groups_matching(sel: &Selector, rows: &P2pRows) -> Vec<bool> {
    rows.groups
        .iter()
        .map(|g| {
            sel.tool.as_deref().is_none_or(|t| t == g.tool)
                && sel.test.as_deref().is_none_or(|t| t == g.test)
                && sel.size_ok(g.size)
                && sel.collective.is_none()
                && sel.backend.is_none()
                && sel.transport.as_deref().is_none_or(|t| t == g.transport)
        })
        .collect()
}

/// Whether compact row `r` is selected, given its groups' [`groups_matching`].
fn matches_compact(sel: &Selector, groups: &[bool], rows: &P2pRows, r: &P2pRow) -> bool {
    groups[r.group as usize] && (sel.pair.is_none() || pair_ok(sel, &rows.pair(r)))
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

fn fmt_value(v: f64) -> String {
    if v == 0.0 || (v.abs() >= 0.01 && v.abs() < 1e6) {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
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
    let mut obs: Vec<Obs> = Vec::new();
    let kind = check.metric.rows();
    match check.metric {
        // Latency percentiles over merged data: the merged histograms of the tables when
        // the selector does not narrow below (tool, test, transport, size); otherwise merge
        // the selected rows' histograms here.
        Metric::Latency(p) if !sel.each_pair => {
            if sel.pair.is_none() {
                for (k, h) in &tables.histograms {
                    let probe = probe_latency(k);
                    if h.is_empty() || !matches(sel, &k.tool, &probe) {
                        continue;
                    }
                    obs.push(Obs {
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
                                .entry(LatKey {
                                    tool: d.doc.tool.clone(),
                                    test: l.test.clone(),
                                    transport: l.transport.clone(),
                                    size: l.size_bytes,
                                })
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
                            value: percentile(&h, p),
                            at: At::Text(format!(
                                "{} {} {}",
                                k.test,
                                k.transport,
                                size_label(k.size)
                            )),
                        });
                    }
                }
            }
        }
        _ => {
            for (di, d) in docs.iter().enumerate() {
                for (ri, r) in d.doc.results.iter().enumerate() {
                    if !matches(sel, &d.doc.tool, r) {
                        continue;
                    }
                    let value = match (kind, r) {
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
                    if let Some(value) = value.filter(|v| v.is_finite()) {
                        obs.push(Obs {
                            value,
                            at: At::Row(di, ri),
                        });
                    }
                }
                let Some(p2p) = d.p2p() else { continue };
                if !matches!(
                    kind,
                    RowKind::Latency | RowKind::Bandwidth | RowKind::Counters
                ) {
                    continue;
                }
                let groups = groups_matching(sel, p2p);
                for (ri, r) in p2p.rows.iter().enumerate() {
                    let kind_ok = matches!(
                        (kind, &r.stats),
                        (RowKind::Latency, RowStats::Latency(_))
                            | (RowKind::Bandwidth, RowStats::Bandwidth(_))
                            | (RowKind::Counters, _)
                    );
                    if !kind_ok || !matches_compact(sel, &groups, p2p, r) {
                        continue;
                    }
                    if let Some(value) = r.stats.metric(check.metric).filter(|v| v.is_finite()) {
                        obs.push(Obs {
                            value,
                            at: At::Compact(di, ri),
                        });
                    }
                }
            }
        }
    }
    let worst = obs.iter().reduce(|a, b| {
        let b_worse = match check.bound {
            Bound::Min(_) => b.value < a.value,
            Bound::Max(_) => b.value > a.value,
        };
        if b_worse {
            b
        } else {
            a
        }
    });
    let status = match worst {
        None => Status::Missing,
        Some(w) if check.bound.holds(w.value) => Status::Pass,
        Some(_) => Status::Fail,
    };
    Outcome {
        id: check.id.clone(),
        description: check.description.clone(),
        metric: check.metric.name().to_string(),
        unit: check.unit.to_string(),
        selector: sel.describe(),
        bound: format!(
            "{} {} {}",
            check.bound.symbol(),
            fmt_value(check.bound.value()),
            check.unit
        ),
        bound_value: check.bound.value(),
        status,
        measured: worst.map(|w| w.value),
        worst_at: worst.map(|w| describe(&w.at, docs)).unwrap_or_else(|| {
            "no result matches this check's selector: run the test it names".to_string()
        }),
        observations: obs.len(),
    }
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
    TestResult::Latency(results::LatencyResult {
        test: k.test.clone(),
        transport: k.transport.clone(),
        size_bytes: k.size,
        iterations: 0,
        warmup_iterations: 0,
        duration_s: 0.0,
        latency_us: Default::default(),
        histogram: String::new(),
        pair: Default::default(),
        complete: true,
        counters: None,
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
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    let (passed, failed, missing) = (
        count(Status::Pass),
        count(Status::Fail),
        count(Status::Missing),
    );
    Verdict {
        profile: profile.name.clone(),
        overall: if failed == 0 && missing == 0 {
            "PASS"
        } else {
            "FAIL"
        },
        passed,
        failed,
        missing,
        checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(doc: results::Document) -> Loaded {
        Loaded::from_text("mem.json", &serde_json::to_string(&doc).unwrap()).unwrap()
    }

    fn profile(body: &str) -> Profile {
        crate::profile::parse(&format!("name = \"t\"\n{body}"), "t.toml").unwrap()
    }

    fn run(p: &Profile, docs: &[Loaded]) -> Verdict {
        let t = crate::tables::build(docs, p.line_rate_gbit_s);
        judge(p, docs, &t)
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
}
