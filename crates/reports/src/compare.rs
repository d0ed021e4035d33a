//! `aggregate compare BASELINE CURRENT`: what changed since the last good run.
//!
//! A change is a regression only when it is worse than the baseline by more than the
//! tolerance (a fraction of the baseline value) AND by more than `sigmas` standard
//! deviations of the baseline's own spread: across pairs, ranks and runs of the baseline
//! (a baseline directory may hold several nights), and for bandwidth also across the
//! interval samples within a run. A fabric that was noisy yesterday must not page anyone
//! for the same noise tonight; a fabric that was steady must page for a small real drop.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use verdict::error::{Error, Result};
use verdict::input;
use verdict::tables::{self, Tables};

/// Options of `aggregate compare`.
#[derive(Debug, Clone)]
pub struct Options {
    pub baseline: Vec<PathBuf>,
    pub current: Vec<PathBuf>,
    /// Percent of the baseline value a change must exceed.
    pub tolerance_pct: f64,
    /// Standard deviations of the baseline spread a change must exceed.
    pub sigmas: f64,
    pub skip_bad: bool,
    /// Ceilings on what is read, for each side.
    pub limits: input::Limits,
}

/// One compared metric.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `latency`, `bandwidth`, `collective`.
    pub group: &'static str,
    /// `send_lat tcp 64 B p99`.
    pub key: String,
    pub unit: &'static str,
    pub higher_is_better: bool,
    pub baseline: f64,
    pub current: f64,
    pub change_pct: f64,
    /// Smallest change, in the metric's unit, that counts (tolerance or spread).
    pub threshold: f64,
    /// `regressed`, `improved`, `unchanged`.
    pub verdict: &'static str,
    /// Which side was measured on a disturbed host or link (`results::quality`):
    /// `current`, `baseline`, `both`, or empty. A regression on a disturbed current run
    /// may be the disturbance, not the fabric: re-run on a quiet machine before acting.
    pub disturbed: &'static str,
}

/// The whole comparison.
#[derive(Debug, Serialize)]
pub struct Comparison {
    /// `REGRESSION` or `OK`.
    pub verdict: &'static str,
    pub baseline: Vec<String>,
    pub current: Vec<String>,
    pub tolerance_pct: f64,
    pub sigmas: f64,
    pub rows: Vec<Row>,
    pub regressions: usize,
    /// Regressions whose current run was disturbed.
    pub disturbed_regressions: usize,
    pub improvements: usize,
    pub unchanged: usize,
    pub only_baseline: Vec<String>,
    pub only_current: Vec<String>,
}

/// One comparable figure of a merged result set.
#[derive(Debug, Clone)]
pub struct Point {
    /// `latency`, `bandwidth`, `collective`.
    pub group: &'static str,
    pub unit: &'static str,
    pub higher_is_better: bool,
    pub value: f64,
    /// Baseline-side noise: standard deviation of the values the merged figure stands on.
    pub stdev: f64,
    /// Some row behind the figure was measured on a disturbed host or link.
    pub disturbed: bool,
    /// The profile metric the figure is (`latency_p99`, `bw_avg` ...), for bounds.
    pub metric: &'static str,
    /// Which rows it stands on, for matching profile selectors.
    pub facts: Facts,
}

/// The selector-relevant facts of a merged figure.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub tool: Option<String>,
    pub test: String,
    pub transport: Option<String>,
    pub collective: bool,
    pub backend: Option<String>,
    pub size: u64,
}

impl Facts {
    /// A point-to-point figure of `tool`'s `test` over `transport` at `size`.
    pub fn point_to_point(tool: &str, test: &str, transport: &str, size: u64) -> Facts {
        Facts {
            tool: Some(tool.into()),
            test: test.into(),
            transport: Some(transport.into()),
            size,
            ..Facts::default()
        }
    }

    /// A collective figure (all from bench-collective) of `collective` over `backend`.
    pub fn collective(collective: &str, backend: &str, size: u64) -> Facts {
        Facts {
            tool: Some("bench-collective".into()),
            test: collective.into(),
            collective: true,
            backend: Some(backend.into()),
            size,
            ..Facts::default()
        }
    }

    /// True when `sel` selects the rows behind this figure as a whole (a selector naming
    /// one pair never does).
    pub fn selected_by(&self, sel: &verdict::profile::Selector) -> bool {
        let is = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        let kind_ok = if self.collective {
            sel.transport.is_none()
                && is(&sel.collective, &self.test)
                && is(&sel.backend, self.backend.as_deref().unwrap_or(""))
        } else {
            sel.collective.is_none()
                && sel.backend.is_none()
                && is(&sel.transport, self.transport.as_deref().unwrap_or(""))
        };
        sel.pair.is_none()
            && kind_ok
            && is(&sel.tool, self.tool.as_deref().unwrap_or(""))
            && is(&sel.test, &self.test)
            && sel.size_ok(self.size)
    }
}

fn stdev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// Every comparable figure of a result set, by a stable key (`send_lat tcp 64 B latency
/// p99`): what `compare` compares and `trend` follows night after night.
pub fn points(t: &Tables) -> BTreeMap<String, Point> {
    let mut m = BTreeMap::new();
    latency_points(t, &mut m);
    bandwidth_points(t, &mut m);
    collective_points(t, &mut m);
    m
}

/// Each latency row's p50 and p99.
fn latency_points(t: &Tables, m: &mut BTreeMap<String, Point>) {
    let size = tables::size_label;
    for r in &t.latency {
        if r.samples == 0 {
            continue;
        }
        let facts = Facts::point_to_point(&r.tool, &r.test, &r.transport, r.size_bytes);
        for (name, metric, v, rows) in [
            ("p50", "latency_p50", r.us.p50, &r.row_p50),
            ("p99", "latency_p99", r.us.p99, &r.row_p99),
        ] {
            m.insert(
                format!(
                    "{} {} {} latency {name}",
                    r.test,
                    r.transport,
                    size(r.size_bytes)
                ),
                Point {
                    group: "latency",
                    unit: "us",
                    higher_is_better: false,
                    value: v,
                    stdev: stdev(rows),
                    disturbed: r.quality.disturbed(),
                    metric,
                    facts: facts.clone(),
                },
            );
        }
    }
}

/// Each bandwidth row's average, and its CPU per 100 Gb/s where measured.
fn bandwidth_points(t: &Tables, m: &mut BTreeMap<String, Point>) {
    let size = tables::size_label;
    for r in &t.bandwidth {
        let dir = if r.bidirectional { " bidir" } else { "" };
        let facts = Facts::point_to_point(&r.tool, &r.test, &r.transport, r.size_bytes);
        let base = format!("{} {}{dir} {}", r.test, r.transport, size(r.size_bytes));
        m.insert(
            format!("{base} bw avg"),
            Point {
                group: "bandwidth",
                unit: "Gb/s",
                higher_is_better: true,
                value: r.avg_gbit_s,
                stdev: stdev(&r.row_avg).max(r.interval_stdev),
                disturbed: r.quality.disturbed(),
                metric: "bw_avg",
                facts: facts.clone(),
            },
        );
        if let Some(c) = r.cpu_cores_per_100g {
            m.insert(
                format!("{base} cpu per 100G"),
                Point {
                    group: "bandwidth",
                    unit: "cores",
                    higher_is_better: false,
                    value: c,
                    stdev: 0.0,
                    disturbed: r.quality.disturbed(),
                    metric: "cpu_cores_per_100g",
                    facts,
                },
            );
        }
    }
}

/// Each collective row's bus bandwidth and time.
fn collective_points(t: &Tables, m: &mut BTreeMap<String, Point>) {
    let size = tables::size_label;
    for r in &t.collective {
        let base = format!(
            "{} {} n={} {}",
            r.collective,
            r.backend,
            r.ranks,
            size(r.size_bytes)
        );
        let facts = Facts::collective(&r.collective, &r.backend, r.size_bytes);
        m.insert(
            format!("{base} busbw"),
            Point {
                group: "collective",
                unit: "GB/s",
                higher_is_better: true,
                value: r.oop_busbw,
                stdev: stdev(&r.row_busbw),
                disturbed: r.quality.disturbed(),
                metric: "busbw",
                facts: facts.clone(),
            },
        );
        m.insert(
            format!("{base} time"),
            Point {
                group: "collective",
                unit: "us",
                higher_is_better: false,
                value: r.oop_time_us,
                stdev: stdev(&r.row_time),
                disturbed: r.quality.disturbed(),
                metric: "collective_time",
                facts,
            },
        );
    }
}

/// Compares two merged result sets.
pub fn compare_tables(base: &Tables, cur: &Tables, tolerance_pct: f64, sigmas: f64) -> Comparison {
    compare_points(&points(base), &points(cur), tolerance_pct, sigmas)
}

/// Compares the figures of two result sets (see [`points`]).
pub fn compare_points(
    b: &BTreeMap<String, Point>,
    c: &BTreeMap<String, Point>,
    tolerance_pct: f64,
    sigmas: f64,
) -> Comparison {
    let mut rows = Vec::new();
    for (k, bp) in b {
        let Some(cp) = c.get(k) else { continue };
        let delta = cp.value - bp.value;
        let change_pct = if bp.value != 0.0 {
            delta / bp.value.abs() * 100.0
        } else {
            0.0
        };
        let threshold = (tolerance_pct / 100.0 * bp.value.abs()).max(sigmas * bp.stdev);
        let worse = if bp.higher_is_better {
            delta < 0.0
        } else {
            delta > 0.0
        };
        let verdict = if delta.abs() <= threshold {
            "unchanged"
        } else if worse {
            "regressed"
        } else {
            "improved"
        };
        rows.push(Row {
            group: bp.group,
            key: k.clone(),
            unit: bp.unit,
            higher_is_better: bp.higher_is_better,
            baseline: bp.value,
            current: cp.value,
            change_pct,
            threshold,
            verdict,
            disturbed: match (bp.disturbed, cp.disturbed) {
                (true, true) => "both",
                (false, true) => "current",
                (true, false) => "baseline",
                (false, false) => "",
            },
        });
    }
    let count = |v: &str| rows.iter().filter(|r| r.verdict == v).count();
    let regressions = count("regressed");
    let disturbed_regressions = rows
        .iter()
        .filter(|r| r.verdict == "regressed" && matches!(r.disturbed, "current" | "both"))
        .count();
    Comparison {
        verdict: if regressions > 0 { "REGRESSION" } else { "OK" },
        baseline: vec![],
        current: vec![],
        tolerance_pct,
        sigmas,
        regressions,
        disturbed_regressions,
        improvements: count("improved"),
        unchanged: count("unchanged"),
        only_baseline: b.keys().filter(|k| !c.contains_key(*k)).cloned().collect(),
        only_current: c.keys().filter(|k| !b.contains_key(*k)).cloned().collect(),
        rows,
    }
}

/// Runs `aggregate compare`.
pub fn run(opts: &Options) -> Result<Comparison> {
    if !(opts.tolerance_pct.is_finite() && opts.tolerance_pct >= 0.0) {
        return Err(Error::Usage(format!(
            "--tolerance {}: give a percentage >= 0",
            opts.tolerance_pct
        )));
    }
    if !(opts.sigmas.is_finite() && opts.sigmas >= 0.0) {
        return Err(Error::Usage(format!(
            "--sigmas {}: give a number >= 0",
            opts.sigmas
        )));
    }
    let b = input::load_with(&opts.baseline, opts.skip_bad, &opts.limits)
        .map_err(|e| e.context("baseline"))?;
    let c = input::load_with(&opts.current, opts.skip_bad, &opts.limits)
        .map_err(|e| e.context("current"))?;
    let bt = tables::build(&b, None);
    let ct = tables::build(&c, None);
    let mut cmp = compare_tables(&bt, &ct, opts.tolerance_pct, opts.sigmas);
    if cmp.rows.is_empty() {
        return Err(Error::Input(
            "baseline and current have no metric in common (different tests or sizes?)".into(),
        ));
    }
    cmp.baseline = opts
        .baseline
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    cmp.current = opts
        .current
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    Ok(cmp)
}

/// The verdict of a row in words, with the side that was disturbed.
pub fn verdict_words(r: &Row) -> String {
    let v = if r.verdict == "regressed" {
        "REGRESSED"
    } else {
        r.verdict
    };
    match r.disturbed {
        "" => v.to_string(),
        "current" | "both" if r.verdict == "regressed" => format!("{v} (on a disturbed run)"),
        side => format!("{v} (disturbed: {side})"),
    }
}

/// Plain-text table for a terminal.
pub fn text(cmp: &Comparison) -> String {
    let mut s = String::new();
    let w = cmp
        .rows
        .iter()
        .map(|r| r.key.len())
        .max()
        .unwrap_or(6)
        .max(6);
    s.push_str(&format!(
        "{:<w$}  {:>12}  {:>12}  {:>9}  {:>11}  verdict\n",
        "metric", "baseline", "current", "change", "noise floor"
    ));
    let f = verdict::judge::format_value;
    for r in &cmp.rows {
        s.push_str(&format!(
            "{:<w$}  {:>12}  {:>12}  {:>8}%  {:>11}  {}\n",
            r.key,
            format!("{} {}", f(r.baseline), r.unit),
            format!("{} {}", f(r.current), r.unit),
            f(r.change_pct),
            f(r.threshold),
            verdict_words(r)
        ));
    }
    s.push_str(&format!(
        "{}: {} regression(s), {} improvement(s), {} unchanged; tolerance {}% and {} sigma of the baseline spread\n",
        cmp.verdict,
        cmp.regressions,
        cmp.improvements,
        cmp.unchanged,
        f(cmp.tolerance_pct),
        f(cmp.sigmas)
    ));
    if cmp.disturbed_regressions > 0 {
        s.push_str(&format!(
            "{} of the regressions fall on a disturbed run (load, CPU steal, preemptions or other \
             traffic over the thresholds): re-run on a quiet machine before blaming the fabric\n",
            cmp.disturbed_regressions
        ));
    }
    if !cmp.only_baseline.is_empty() {
        s.push_str(&format!(
            "not measured now (only in the baseline): {}\n",
            cmp.only_baseline.len()
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables_of(docs: Vec<results::Document>) -> Tables {
        let loaded: Vec<_> = docs
            .into_iter()
            .map(|d| {
                verdict::input::Loaded::from_text("x", &serde_json::to_string(&d).unwrap()).unwrap()
            })
            .collect();
        tables::build(&verdict::input::InputSet::of(loaded), None)
    }

    #[test]
    fn a_real_drop_is_a_regression_and_noise_is_not() {
        let sizes = [65536u64];
        let base = tables_of(vec![synth::bandwidth_doc("a", "b", &sizes, 90.0, 1)]);
        let same = tables_of(vec![synth::bandwidth_doc("a", "b", &sizes, 89.5, 2)]);
        let drop = tables_of(vec![synth::bandwidth_doc("a", "b", &sizes, 70.0, 3)]);
        let cmp = compare_tables(&base, &same, 2.0, 3.0);
        assert_eq!(cmp.regressions, 0, "{:?}", cmp.rows);
        let cmp = compare_tables(&base, &drop, 2.0, 3.0);
        let bw = cmp.rows.iter().find(|r| r.key.ends_with("bw avg")).unwrap();
        assert_eq!(bw.verdict, "regressed", "{:?}", cmp.rows);
        assert_eq!(cmp.verdict, "REGRESSION");
        // The same drop against a baseline whose pairs already spread that far is noise.
        let noisy = tables_of(vec![
            synth::bandwidth_doc("a", "b", &sizes, 90.0, 1),
            synth::bandwidth_doc("c", "d", &sizes, 60.0, 4),
            synth::bandwidth_doc("e", "f", &sizes, 100.0, 5),
        ]);
        let cmp = compare_tables(&noisy, &drop, 2.0, 3.0);
        let bw = cmp.rows.iter().find(|r| r.key.ends_with("bw avg")).unwrap();
        assert_eq!(bw.verdict, "unchanged", "{:?}", cmp.rows);
    }

    #[test]
    fn a_regression_on_a_disturbed_run_says_so() {
        let sizes = [65536u64];
        let busy = results::quality::HostQuality {
            hostname: "a".into(),
            cores: 2,
            load_avg_before: 6.0,
            load_avg_after: 6.0,
            duration_s: 1.0,
            ..Default::default()
        };
        let base = tables_of(vec![synth::bandwidth_doc("a", "b", &sizes, 90.0, 1)]);
        let mut drop = synth::bandwidth_doc("a", "b", &sizes, 70.0, 3);
        let cmp = compare_tables(&base, &tables_of(vec![drop.clone()]), 2.0, 3.0);
        // Bandwidth, and CPU per 100 Gb/s with it.
        assert_eq!((cmp.regressions, cmp.disturbed_regressions), (2, 0));
        drop.attach_quality(vec![busy]);
        let cmp = compare_tables(&base, &tables_of(vec![drop]), 2.0, 3.0);
        assert_eq!((cmp.regressions, cmp.disturbed_regressions), (2, 2));
        let bw = cmp.rows.iter().find(|r| r.key.ends_with("bw avg")).unwrap();
        assert_eq!(bw.disturbed, "current");
        let t = text(&cmp);
        assert!(t.contains("REGRESSED (on a disturbed run)"), "{t}");
        assert!(t.contains("re-run on a quiet machine"), "{t}");
    }

    #[test]
    fn latency_growth_is_a_regression() {
        let base = tables_of(vec![synth::latency_doc("a", "b", &[2], 10.0, 1)]);
        let slow = tables_of(vec![synth::latency_doc("a", "b", &[2], 20.0, 1)]);
        let cmp = compare_tables(&base, &slow, 5.0, 3.0);
        assert!(cmp.regressions >= 1);
        let cmp = compare_tables(&slow, &base, 5.0, 3.0);
        assert_eq!(cmp.regressions, 0);
        assert!(cmp.improvements >= 1);
    }
}
