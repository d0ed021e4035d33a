//! What the nights add up to: every key figure as a series with its drifts, bound and
//! marked nights; the nights' marks; the pairs and nodes that changed most.

use std::collections::BTreeMap;

use super::drift;
use super::nights::{pct, NightData};
use super::series::{self, PairKey};
use super::{
    BadInput, BoundOut, Change, DriftOut, InputRef, NightRow, Options, RuleOut, SeriesOut, Trend,
};
use crate::compare::Point;
use verdict::profile::Profile;

/// One figure night after night: its description (the first night's point) and its value
/// and disturbance on each night read so far.
struct Track {
    meta: Point,
    values: Vec<Option<f64>>,
    disturbed: Vec<bool>,
}

/// (night, value) of the first and of the last night that measured a pair figure.
type Span = ((usize, f64), (usize, f64));

/// What the trend keeps of the nights read so far, folded in one night at a time so that
/// a night's documents and figures are dropped once it is read: a year of a 1024-GPU
/// cluster is gigabytes of documents, and this is a few megabytes.
#[derive(Default)]
pub(super) struct Accumulator {
    pub rows: Vec<NightRow>,
    tracks: BTreeMap<String, Track>,
    spans: BTreeMap<PairKey, Span>,
}

impl Accumulator {
    pub fn add(&mut self, nd: NightData) {
        let i = self.rows.len();
        for (key, p) in nd.points {
            let t = self.tracks.entry(key).or_insert_with(|| Track {
                meta: p.clone(),
                values: Vec::new(),
                disturbed: Vec::new(),
            });
            t.values.resize(i, None);
            t.disturbed.resize(i, false);
            t.values.push(Some(p.value).filter(|v| v.is_finite()));
            t.disturbed.push(p.disturbed);
        }
        for (k, v) in nd.pairs {
            self.spans
                .entry(k)
                .and_modify(|e| e.1 = (i, v))
                .or_insert(((i, v), (i, v)));
        }
        self.rows.push(nd.row);
    }
}

/// The nights as every series sees them: ids and days in order, and their rows.
struct Nights<'a> {
    ids: Vec<&'a str>,
    days: Vec<f64>,
    rows: &'a [NightRow],
}

/// Builds every series, finds drifts, marks nights, ranks pairs and nodes.
pub(super) fn assemble(
    opts: &Options,
    profile: Option<&Profile>,
    acc: Accumulator,
    baseline: &BTreeMap<String, Point>,
    baseline_source: String,
    inputs: Vec<InputRef>,
    skipped: Vec<BadInput>,
) -> Trend {
    let at = Nights {
        ids: acc.rows.iter().map(|r| r.id.as_str()).collect(),
        days: acc.rows.iter().map(|r| r.day).collect(),
        rows: &acc.rows,
    };
    let all_series: Vec<SeriesOut> = acc
        .tracks
        .into_iter()
        .map(|(key, t)| series_out(key, t, &at, opts, profile, baseline))
        .collect();
    let (changed_pairs, changed_nodes) = changes(&acc.spans, &acc.rows, opts.top);
    let mut rows = acc.rows;
    for r in &mut rows {
        r.marks = marks(r);
    }
    let mut drifts: Vec<DriftOut> = all_series
        .iter()
        .flat_map(|s| s.drifts.iter().cloned())
        .collect();
    drifts.sort_by(|a, b| b.change_pct.abs().total_cmp(&a.change_pct.abs()));
    let failed_nights = rows.iter().filter(|r| r.failed()).count();
    let regressed_nights = rows.iter().filter(|r| !r.regressed.is_empty()).count();
    Trend {
        verdict: if drifts.is_empty() && failed_nights == 0 && regressed_nights == 0 {
            "OK"
        } else {
            "FLAGGED"
        },
        since: opts.since.clone(),
        until: opts.until.clone(),
        disturbed_nights: rows.iter().filter(|r| r.disturbed).count(),
        nights: rows,
        baseline: baseline_source,
        profile: profile.map(|p| format!("{} ({})", p.name, p.source)),
        rule: RuleOut {
            window: opts.rule.window,
            min_nights: opts.rule.min_nights,
            drift_pct: opts.rule.pct,
            drift_z: opts.rule.z,
            tolerance_pct: opts.tolerance_pct,
            sigmas: opts.sigmas,
        },
        drifts,
        failed_nights,
        regressed_nights,
        series: all_series,
        changed_pairs,
        changed_nodes,
        skipped,
        inputs,
    }
}

/// A night's marks in words: failed, regressions (how many new), disturbed, no results.
fn marks(r: &NightRow) -> String {
    let mut m = Vec::new();
    if r.failed() {
        m.push("FAIL".to_string());
    }
    if !r.regressed.is_empty() {
        let new = r.new_regressions.len();
        m.push(if new == r.regressed.len() {
            format!("{new} regression(s)")
        } else {
            format!("{} regression(s), {new} new", r.regressed.len())
        });
    }
    if r.disturbed {
        m.push("disturbed".into());
    }
    if r.files == 0 {
        m.push("no results".into());
    }
    m.join(", ")
}

/// One figure's series: its values on every night, its drifts, the nights over the
/// profile's bound and those that regressed, against the baseline.
fn series_out(
    key: String,
    mut t: Track,
    at: &Nights,
    opts: &Options,
    profile: Option<&Profile>,
    baseline: &BTreeMap<String, Point>,
) -> SeriesOut {
    let n = at.ids.len();
    t.values.resize(n, None);
    t.disturbed.resize(n, false);
    let (meta, values, disturbed) = (&t.meta, t.values, t.disturbed);
    let present: Vec<usize> = (0..n).filter(|i| values[*i].is_some()).collect();
    let drifts = drifts_of(&key, meta, &values, &disturbed, &present, at, opts);
    let bound = series::bound_for(profile, meta).map(|(b, id)| BoundOut {
        symbol: b.symbol(),
        value: b.value(),
        check: id,
    });
    let over_bound_nights: Vec<String> = match &bound {
        Some(b) => (0..n)
            .filter(|i| {
                values[*i].is_some_and(|v| match b.symbol {
                    ">=" => v < b.value,
                    _ => v > b.value,
                })
            })
            .map(|i| at.ids[i].to_string())
            .collect(),
        None => Vec::new(),
    };
    let regressed_nights: Vec<String> = at
        .rows
        .iter()
        .filter(|r| r.regressed.contains(&key))
        .map(|r| r.id.clone())
        .collect();
    let first = present.first().and_then(|i| values[*i]);
    let last = present.last().and_then(|i| values[*i]);
    let base = baseline.get(&key).map(|p| p.value);
    SeriesOut {
        group: meta.group,
        unit: meta.unit,
        higher_is_better: meta.higher_is_better,
        metric: meta.metric,
        flagged: !drifts.is_empty()
            || !over_bound_nights.is_empty()
            || !regressed_nights.is_empty(),
        change_pct: first.zip(last).and_then(|(a, b)| pct(a, b)),
        vs_baseline_pct: base.zip(last).and_then(|(a, b)| pct(a, b)),
        baseline: base,
        first,
        last,
        values,
        bound,
        drifts,
        regressed_nights,
        over_bound_nights,
        disturbed_nights: (0..n)
            .filter(|i| disturbed[*i])
            .map(|i| at.ids[i].to_string())
            .collect(),
        disturbed,
        facts: meta.facts.clone(),
        key,
    }
}

/// A series' drifts: the slopes the rule finds over the nights that measured it.
fn drifts_of(
    key: &str,
    meta: &Point,
    values: &[Option<f64>],
    disturbed: &[bool],
    present: &[usize],
    at: &Nights,
    opts: &Options,
) -> Vec<DriftOut> {
    let xs: Vec<f64> = present.iter().map(|i| at.days[*i]).collect();
    let ys: Vec<f64> = present.iter().map(|i| values[*i].unwrap_or(0.0)).collect();
    drift::scan(&xs, &ys, meta.higher_is_better, &opts.rule)
        .into_iter()
        .map(|e| {
            let (wf, wt) = (present[e.strongest_from], present[e.strongest_to]);
            let level = e.fit.start_level.abs().max(f64::MIN_POSITIVE);
            DriftOut {
                series: key.to_string(),
                unit: meta.unit,
                from: at.ids[present[e.from]].to_string(),
                to: at.ids[present[e.to]].to_string(),
                flagged_on: at.ids[present[e.first_end]].to_string(),
                window_from: at.ids[wf].to_string(),
                window_to: at.ids[wt].to_string(),
                nights: e.fit.nights,
                slope_per_week: e.fit.slope_per_day * 7.0,
                pct_per_week: e.fit.slope_per_day * 7.0 / level * 100.0,
                change_pct: e.fit.change_pct,
                z: e.fit.z,
                disturbed_nights: (wf..=wt).filter(|i| disturbed[*i]).count(),
                fit: (
                    at.days[wf],
                    at.days[wt],
                    e.fit.start_level,
                    e.fit.slope_per_day,
                ),
            }
        })
        .collect()
}

/// Pairs and nodes ranked by how much worse they got between the first and the last
/// night that measured them.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Pairs and nodes ranked by how much worse they got, between the first and the last
/// night that measured them, than the fabric as a whole: each pair figure's change less
/// the median change of the same figure over every pair. A drift of the whole fabric
/// moves every pair alike (the series and drifts show it); what is listed here is the
/// link or node that got worse on its own. With two pairs the fabric's change is their
/// mean; with one, the change itself ranks.
fn changes(
    spans: &BTreeMap<PairKey, Span>,
    nights: &[NightRow],
    top: usize,
) -> (Vec<Change>, Vec<Change>) {
    let mut pairs: Vec<(Change, &PairKey)> = Vec::new();
    for (k, &((fi, fv), (li, lv))) in spans {
        if fi == li {
            continue;
        }
        let Some(change) = pct(fv, lv) else { continue };
        let worse = if k.higher_is_better { -change } else { change };
        pairs.push((
            Change {
                what: format!("{} <-> {}", k.initiator, k.responder),
                metric: k.metric.clone(),
                first_night: nights[fi].id.clone(),
                first: fv,
                last_night: nights[li].id.clone(),
                last: lv,
                change_pct: change,
                worse_pct: worse,
                beyond_fabric_pct: worse,
                figures: 1,
            },
            k,
        ));
    }
    let fabric = fabric_change(pairs.iter().map(|(c, _)| c));
    let mut by_node: BTreeMap<String, NodeFigures> = BTreeMap::new();
    for (c, k) in &mut pairs {
        c.beyond_fabric_pct = c.worse_pct - fabric.get(&c.metric).copied().unwrap_or(0.0);
        for node in [&k.initiator, &k.responder] {
            by_node
                .entry(node.clone())
                .or_default()
                .entry(c.metric.clone())
                .or_default()
                .push((c.beyond_fabric_pct, c.what.clone()));
        }
    }
    let mut pairs: Vec<Change> = pairs.into_iter().map(|(c, _)| c).collect();
    pairs.sort_by(|a, b| b.beyond_fabric_pct.total_cmp(&a.beyond_fabric_pct));
    pairs.truncate(top);
    let mut nodes = node_changes(by_node, nights);
    nodes.sort_by(|a, b| b.beyond_fabric_pct.total_cmp(&a.beyond_fabric_pct));
    nodes.truncate(top);
    (pairs, nodes)
}

/// The fabric's change of each figure: the median over its pairs (robust to the few bad
/// ones), or with two pairs their mean; none with one pair.
fn fabric_change<'c>(pairs: impl Iterator<Item = &'c Change>) -> BTreeMap<String, f64> {
    let mut by_metric: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for c in pairs {
        by_metric
            .entry(c.metric.clone())
            .or_default()
            .push(c.worse_pct);
    }
    by_metric
        .into_iter()
        .filter(|(_, v)| v.len() >= 2)
        .map(|(m, mut v)| {
            let f = if v.len() >= 3 {
                median(&mut v)
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            };
            (m, f)
        })
        .collect()
}

/// Per node and figure, the excess of each of its pairs over the fabric's change.
type NodeFigures = BTreeMap<String, Vec<(f64, String)>>;

/// A node is as bad as the median of its pairs for its worst figure: one bad pair is a
/// link, all of a node's pairs worse at the same figure is the node.
fn node_changes(by_node: BTreeMap<String, NodeFigures>, nights: &[NightRow]) -> Vec<Change> {
    by_node
        .into_iter()
        .filter_map(|(node, figures)| {
            let count = figures.values().map(Vec::len).sum();
            figures
                .into_iter()
                .map(|(metric, mut v)| {
                    v.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let median = v[v.len() / 2].0;
                    let pairs: Vec<String> = v.into_iter().map(|x| x.1).collect();
                    (median, format!("{metric} ({})", pairs.join(", ")))
                })
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(score, worst)| Change {
                    what: node,
                    metric: worst,
                    first_night: nights.first().map(|n| n.id.clone()).unwrap_or_default(),
                    first: 0.0,
                    last_night: nights.last().map(|n| n.id.clone()).unwrap_or_default(),
                    last: 0.0,
                    change_pct: score,
                    worse_pct: score,
                    beyond_fabric_pct: score,
                    figures: count,
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(a: &str, b: &str, metric: &str, hib: bool) -> PairKey {
        PairKey {
            initiator: a.into(),
            responder: b.into(),
            metric: metric.into(),
            higher_is_better: hib,
        }
    }

    fn night(id: &str) -> NightRow {
        NightRow {
            id: id.into(),
            date: String::new(),
            day: 0.0,
            verdict: None,
            failed_checks: vec![],
            compared_with: None,
            regressed: vec![],
            new_regressions: vec![],
            disturbed: false,
            quality: "ok",
            quality_reasons: vec![],
            files: 1,
            skipped: 0,
            marks: String::new(),
        }
    }

    #[test]
    fn a_link_worse_than_the_fabric_ranks_above_a_fabric_wide_drift() {
        let mut spans = BTreeMap::new();
        // Every pair's latency 10% up (the fabric drifts); one pair's bandwidth 15% down.
        for (i, (a, b)) in [("n0", "n1"), ("n2", "n3"), ("n4", "n5"), ("n6", "n7")]
            .iter()
            .enumerate()
        {
            spans.insert(key(a, b, "send_lat p99", false), ((0, 2.0), (9, 2.2)));
            let bw = if i == 1 { 80.0 } else { 94.0 };
            spans.insert(key(a, b, "write_bw bw avg", true), ((0, 94.0), (9, bw)));
        }
        let nights: Vec<NightRow> = (0..10).map(|i| night(&format!("n{i}"))).collect();
        let (pairs, nodes) = changes(&spans, &nights, 3);
        assert_eq!(pairs[0].what, "n2 <-> n3");
        assert!(
            (pairs[0].beyond_fabric_pct - 14.89).abs() < 0.1,
            "{:?}",
            pairs[0]
        );
        assert!((pairs[1].beyond_fabric_pct).abs() < 1e-9, "{:?}", pairs[1]);
        assert!(
            (pairs[1].worse_pct - 10.0).abs() < 1e-9,
            "the drift is still its change"
        );
        assert!(["n2", "n3"].contains(&nodes[0].what.as_str()), "{nodes:?}");
        assert!(nodes[0].metric.starts_with("write_bw bw avg"), "{nodes:?}");
    }
}
