//! The trend's figures: which series are drawn, and each one against the nights with its
//! baseline, bound, fitted drift and marked nights; the latency distribution by night.

use std::collections::BTreeMap;

use plotters::style::RGBColor;

use super::nights::Curve;
use super::{DistOut, NightRow, SeriesOut};
use crate::plots::{self, Figure, Marks, Shape, XAxis};
use verdict::judge;

/// Series to plot: drifting ones (largest change first), then those over their bound or
/// regressed, then one headline per test (smallest latency size, largest other size).
pub(super) fn plot_order(series: &[SeriesOut]) -> Vec<&SeriesOut> {
    let mut out: Vec<&SeriesOut> = Vec::new();
    let mut drifting: Vec<&SeriesOut> = series.iter().filter(|s| !s.drifts.is_empty()).collect();
    drifting.sort_by(|a, b| {
        let m = |s: &SeriesOut| {
            s.drifts
                .iter()
                .map(|d| d.change_pct.abs())
                .fold(0.0, f64::max)
        };
        m(b).total_cmp(&m(a))
    });
    out.extend(drifting);
    out.extend(series.iter().filter(|s| s.drifts.is_empty() && s.flagged));
    let mut headline: BTreeMap<(String, &str), &SeriesOut> = BTreeMap::new();
    for s in series.iter().filter(|s| !s.flagged) {
        if matches!(s.metric, "latency_p50" | "collective_time") {
            continue;
        }
        let k = (
            format!(
                "{} {} {}",
                s.facts.test,
                s.facts.transport.as_deref().unwrap_or(""),
                s.facts.backend.as_deref().unwrap_or("")
            ),
            s.metric,
        );
        let better = |cur: &SeriesOut| {
            if s.metric.starts_with("latency") {
                s.facts.size < cur.facts.size
            } else {
                s.facts.size > cur.facts.size
            }
        };
        match headline.get(&k) {
            Some(cur) if !better(cur) => {}
            _ => {
                headline.insert(k, s);
            }
        }
    }
    out.extend(headline.into_values());
    out
}

pub(super) fn slug(key: &str) -> String {
    let mut s: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    s.trim_matches('-').chars().take(60).collect()
}

pub(super) fn caption(s: &SeriesOut) -> String {
    let mut c = format!("{} ({}), one point per night", s.key, s.unit);
    if let Some(b) = s.baseline {
        c.push_str(&format!("; baseline {}", judge::format_value(b)));
    }
    if let Some(b) = &s.bound {
        c.push_str(&format!(
            "; bound {} {} (check {})",
            b.symbol,
            judge::format_value(b.value),
            b.check
        ));
    }
    for d in &s.drifts {
        c.push_str(&format!(
            "; DRIFT {:+.1}% over {} nights to {} ({:+.2}%/week, Z {:.1})",
            d.change_pct, d.nights, d.window_to, d.pct_per_week, d.z
        ));
    }
    if !s.regressed_nights.is_empty() {
        let r = &s.regressed_nights;
        c.push_str(&match r.len() {
            1..=3 => format!("; regressed on {}", r.join(", ")),
            n => format!("; regressed on {n} nights, {} .. {}", r[0], r[n - 1]),
        });
    }
    c
}

const BASELINE: RGBColor = RGBColor(87, 96, 106);
const BOUND: RGBColor = RGBColor(207, 34, 46);
const FIT: RGBColor = RGBColor(191, 135, 0);
const FAILED: RGBColor = RGBColor(207, 34, 46);
const REGRESSED: RGBColor = RGBColor(188, 76, 0);
const DISTURBED: RGBColor = RGBColor(140, 149, 159);

/// One series against the nights: baseline, bound, fitted drift, marked nights.
pub(super) fn series_figure(s: &SeriesOut, nights: &[NightRow]) -> Option<String> {
    let pts: Vec<(f64, f64)> = s
        .values
        .iter()
        .zip(nights)
        .filter_map(|(v, n)| v.map(|v| (n.day, v)))
        .collect();
    let mut f = Figure::new(
        &s.key,
        "night",
        &format!("{} ({})", s.metric, s.unit),
        XAxis::Date,
    );
    f.y_from_zero = false;
    f.lines.push((s.key.clone(), pts));
    if let Some(b) = s.baseline {
        f.hlines
            .push((b, format!("baseline {}", judge::format_value(b)), BASELINE));
    }
    if let Some(b) = &s.bound {
        f.hlines.push((
            b.value,
            // Plot labels keep to characters that are never markup: words, not `<=`.
            format!(
                "bound: {} {}",
                if b.symbol == ">=" {
                    "at least"
                } else {
                    "at most"
                },
                judge::format_value(b.value)
            ),
            BOUND,
        ));
    }
    for d in &s.drifts {
        let (x0, x1, level, slope) = d.fit;
        f.guides.push((
            (
                format!("drift {:+.1}%", d.change_pct),
                vec![(x0, level), (x1, level + slope * (x1 - x0))],
            ),
            FIT,
        ));
    }
    let at = |pred: &dyn Fn(usize, &NightRow) -> bool| -> Vec<(f64, f64)> {
        nights
            .iter()
            .enumerate()
            .filter(|(i, n)| pred(*i, n))
            .filter_map(|(i, n)| s.values[i].map(|v| (n.day, v)))
            .collect()
    };
    let mark = |label: &str, points, color, shape| Marks {
        label: label.into(),
        points,
        color,
        shape,
    };
    f.marks = [
        mark("failed night", at(&|_, n| n.failed()), FAILED, Shape::Dot),
        mark(
            "regressed",
            at(&|_, n| s.regressed_nights.contains(&n.id)),
            REGRESSED,
            Shape::Cross,
        ),
        mark(
            "disturbed run",
            at(&|i, _| s.disturbed[i]),
            DISTURBED,
            Shape::Ring,
        ),
    ]
    .into_iter()
    .filter(|m| !m.points.is_empty())
    .collect();
    plots::render(&f)
}

/// The latency distribution of one test and size, several nights overlaid: the first,
/// the last, the one with the worst p99, and others spread between (five at most).
pub(super) fn dist_figure(
    d: &(String, Option<u64>),
    nights: &[NightRow],
    curves: Vec<Curve>,
) -> Option<DistOut> {
    if curves.is_empty() {
        return None;
    }
    let worst = curves
        .iter()
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .map(|c| c.0);
    let idx: Vec<usize> = curves.iter().map(|c| c.0).collect();
    let mut pick: Vec<usize> = plots::spread(idx, 4);
    pick.extend(worst);
    pick.sort_unstable();
    pick.dedup();
    let chosen: Vec<(String, Vec<(f64, f64)>)> = curves
        .into_iter()
        .filter(|c| pick.contains(&c.0))
        .map(|(i, c, _)| (nights[i].date[..10].to_string(), c))
        .collect();
    let of = match d.1 {
        Some(s) => format!("{} {}", d.0, verdict::tables::size_label(s)),
        None => d.0.clone(),
    };
    let names = chosen.iter().map(|c| c.0.clone()).collect();
    let svg =
        plots::distribution_figure(&format!("Latency by percentile, {of}, by night"), chosen)?;
    Some(DistOut {
        of,
        nights: names,
        svg,
    })
}
