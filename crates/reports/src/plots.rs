//! Inline SVG plots drawn with plotters: the report must open offline, so nothing is
//! fetched and every figure is part of the page. One drawing routine ([`render`]) serves
//! every figure: the acceptance report's size sweeps and latency distribution, and the
//! trend report's nights.

use std::collections::BTreeMap;

use plotters::coord::ranged1d::{
    AsRangedCoord, DefaultFormatting, KeyPointHint, Ranged, ValueFormatter,
};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use results::units::format_size;
use results::LatencyHistogram;

use verdict::input::LatKey;
use verdict::tables::Tables;

const W: u32 = 760;
const H: u32 = 380;

/// The report's figures; `None` where there is no data for one.
#[derive(Debug, Default, serde::Serialize)]
pub struct Plots {
    pub latency: Option<String>,
    pub bandwidth: Option<String>,
    pub collective: Option<String>,
    /// Collective busbw against communicator size (a scaling sweep).
    pub scaling: Option<String>,
    pub distribution: Option<String>,
    /// What the distribution shows (`send_lat tcp 2 B`, or `send_lat tcp` when several
    /// sizes are overlaid).
    pub distribution_of: Option<String>,
}

/// A series: label and (x, y) points.
pub type Series = (String, Vec<(f64, f64)>);

/// What the x axis holds, which decides its scale and its labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Message sizes in bytes: log base 2, labelled 64K, 1M.
    Size,
    /// A plain quantity: logarithmic when it spans more than a factor 30.
    Value,
    /// `log10(1 / (1 - p))` of a percentile p: labelled 50%, 90%, 99%, 99.9% ...
    Percentile,
    /// Days since the Unix epoch: labelled with the date.
    Date,
}

/// Marker shapes for points drawn without a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Dot,
    Cross,
    Ring,
}

/// Points drawn without a line, to single some out (failed nights, disturbed runs).
#[derive(Debug, Clone)]
pub struct Marks {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub color: RGBColor,
    pub shape: Shape,
}

/// Everything one figure shows.
#[derive(Debug, Clone)]
pub struct Figure {
    pub title: String,
    pub x_desc: String,
    pub y_desc: String,
    pub x: XAxis,
    pub log_y: bool,
    /// A linear y axis starts at 0 (sizes, bandwidths); `false` fits it to the data, so a
    /// few percent of change over the nights is visible.
    pub y_from_zero: bool,
    /// Lines with their points, each in its own colour.
    pub lines: Vec<Series>,
    /// Labelled horizontal lines (a line rate, a baseline, a bound) in the given colours.
    pub hlines: Vec<(f64, String, RGBColor)>,
    /// Thin lines without points (a fitted slope), in the given colours.
    pub guides: Vec<(Series, RGBColor)>,
    pub marks: Vec<Marks>,
}

impl Figure {
    pub fn new(title: &str, x_desc: &str, y_desc: &str, x: XAxis) -> Figure {
        Figure {
            title: title.into(),
            x_desc: x_desc.into(),
            y_desc: y_desc.into(),
            x,
            log_y: false,
            y_from_zero: true,
            lines: vec![],
            hlines: vec![],
            guides: vec![],
            marks: vec![],
        }
    }
}

/// Labels reach the SVG through the one escaping layer of plot text.
use verdict::escape::svg_label as clean;

/// Largest magnitude plotted (10^15 us, Gb/s or GB/s is no measurement): a point beyond it
/// is left out, so a corrupt value cannot stretch an axis to infinity (plotters would
/// never finish placing its ticks).
const PLOT_MAX: f64 = 1e15;

/// Whether a point can be drawn.
fn plottable(&(x, y): &(f64, f64)) -> bool {
    x.is_finite() && y.is_finite() && x.abs() <= PLOT_MAX && y.abs() <= PLOT_MAX
}

fn size_label(x: &f64) -> String {
    format_size(x.round().max(0.0) as u64)
}

fn num_label(y: &f64) -> String {
    verdict::judge::format_value(*y)
}

/// `50%`, `99.9%`: the percentile p for x = log10(1 / (1 - p)).
pub fn percentile_label(x: &f64) -> String {
    let p = (1.0 - 10f64.powf(-*x)) * 100.0;
    let digits = (x.round() as i64 - 2).clamp(0, 6) as usize;
    let s = format!("{p:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}%")
}

/// `2026-11-29` for a day count since the Unix epoch.
pub fn date_label(days: &f64) -> String {
    let secs = (days * 86400.0).round().max(0.0) as u64;
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    humantime::format_rfc3339_seconds(t).to_string()[..10].to_string()
}

/// The x of percentile `p` (0..1) on the percentile scale.
pub fn percentile_x(p: f64) -> f64 {
    (1.0 / (1.0 - p)).log10()
}

fn bounds(f: &Figure) -> Option<(f64, f64, f64, f64)> {
    let pts = f
        .lines
        .iter()
        .flat_map(|s| s.1.iter())
        .chain(f.marks.iter().flat_map(|m| m.points.iter()))
        .chain(f.guides.iter().flat_map(|g| g.0 .1.iter()));
    let mut b: Option<(f64, f64, f64, f64)> = None;
    for &(x, y) in pts {
        if !plottable(&(x, y)) || (f.log_y && y <= 0.0) {
            continue;
        }
        b = Some(match b {
            None => (x, x, y, y),
            Some((a, bx, c, d)) => (a.min(x), bx.max(x), c.min(y), d.max(y)),
        });
    }
    let (x0, x1, mut y0, mut y1) = b?;
    for (v, _, _) in &f.hlines {
        if v.is_finite() && (!f.log_y || *v > 0.0) {
            y0 = y0.min(*v);
            y1 = y1.max(*v);
        }
    }
    Some((x0, x1, y0, y1))
}

/// Draws a figure; `None` when it has no finite point.
pub fn render(f: &Figure) -> Option<String> {
    let f = &plottable_only(f);
    let axes = Axes::of(f)?;
    let Axes {
        x0,
        x1,
        y0,
        y1,
        log_x,
        log_y,
    } = axes;
    let mut svg = String::new();
    let result = {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        let base = if f.x == XAxis::Size { 2.0 } else { 10.0 };
        if f.x == XAxis::Percentile {
            // Ticks exactly at the percentiles HdrHistogram users read: 50%, 90%, 99%, ...
            let mut ticks = vec![percentile_x(0.5)];
            ticks.extend((1..=7).map(f64::from).filter(|t| *t <= x1 + 1e-9));
            let x = Ticked {
                inner: (x0..x1).into(),
                ticks,
            };
            if log_y {
                draw(&root, f, x, (y0..y1).log_scale())
            } else {
                draw(&root, f, x, y0..y1)
            }
        } else {
            match (log_x, log_y) {
                (true, true) => draw(
                    &root,
                    f,
                    (x0..x1).log_scale().base(base),
                    (y0..y1).log_scale(),
                ),
                (true, false) => draw(&root, f, (x0..x1).log_scale().base(base), y0..y1),
                (false, true) => draw(&root, f, x0..x1, (y0..y1).log_scale()),
                (false, false) => draw(&root, f, x0..x1, y0..y1),
            }
        }
    };
    result.ok().map(|_| svg)
}

/// The figure without the points no measurement can have (infinite, or beyond PLOT_MAX).
fn plottable_only(f: &Figure) -> Figure {
    let keep = |pts: &[(f64, f64)]| pts.iter().copied().filter(plottable).collect::<Vec<_>>();
    Figure {
        lines: f.lines.iter().map(|(l, p)| (l.clone(), keep(p))).collect(),
        guides: f
            .guides
            .iter()
            .map(|((l, p), c)| ((l.clone(), keep(p)), *c))
            .collect(),
        marks: f
            .marks
            .iter()
            .map(|m| Marks {
                points: keep(&m.points),
                ..m.clone()
            })
            .collect(),
        hlines: f
            .hlines
            .iter()
            .filter(|(v, _, _)| v.is_finite() && v.abs() <= PLOT_MAX)
            .cloned()
            .collect(),
        ..f.clone()
    }
}

/// The ranges and scales a figure is drawn on.
struct Axes {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    log_x: bool,
    log_y: bool,
}

impl Axes {
    /// From the figure's points: logarithmic where they span enough, padded, sizes and
    /// percentiles on their own axes. `None` when no point is finite.
    fn of(f: &Figure) -> Option<Axes> {
        let (mut x0, mut x1, mut y0, mut y1) = bounds(f)?;
        // A logarithmic y over less than a factor 20 would show one tick label or none.
        let log_y = f.log_y && y0 > 0.0 && y1 / y0 > 20.0;
        let log_x = match f.x {
            XAxis::Size => true,
            XAxis::Value => x0 > 0.0 && x1 / x0 > 30.0,
            XAxis::Percentile | XAxis::Date => false,
        };
        if log_x {
            x0 = x0.max(1e-9);
            x1 = x1.max(x0 * 2.0);
        } else if x1 <= x0 {
            x0 -= 1.0;
            x1 += 1.0;
        }
        if f.x == XAxis::Percentile {
            x0 = 0.0;
            x1 = x1.max(1.0);
        }
        if log_y {
            y0 = (y0 * 0.8).max(1e-6);
            y1 = (y1 * 1.25).max(y0 * 10.0);
        } else if y0 >= 0.0 && f.y_from_zero {
            y0 = 0.0;
            y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
        } else {
            let pad = (y1 - y0).abs().max(1e-9) * 0.1;
            y0 -= pad;
            y1 += pad;
        }
        Some(Axes {
            x0,
            x1,
            y0,
            y1,
            log_x,
            log_y,
        })
    }
}

/// A linear axis with the ticks given, not the ones plotters would choose.
struct Ticked {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

fn draw<'a, X, Y>(
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    f: &Figure,
    x: X,
    y: Y,
) -> Result<(), Box<dyn std::error::Error + 'a>>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(root)
        .caption(clean(&f.title), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)?;
    c.configure_mesh()
        .x_desc(clean(&f.x_desc))
        .y_desc(clean(&f.y_desc))
        .x_labels(if f.x == XAxis::Date { 6 } else { 10 })
        .x_label_formatter(&x_label(f.x))
        .y_label_formatter(&num_label)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (i, (label, pts)) in f.lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        c.draw_series(LineSeries::new(pts.iter().cloned(), color.stroke_width(2)))?
            .label(clean(label))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        if pts.len() <= 400 {
            c.draw_series(PointSeries::of_element(
                pts.iter().cloned(),
                2,
                color.filled(),
                &|p, s, st| Circle::new(p, s, st),
            ))?;
        }
    }
    let (xa, xb) = (c.x_range().start, c.x_range().end);
    for (v, label, color) in &f.hlines {
        let color = *color;
        c.draw_series(LineSeries::new(
            vec![(xa, *v), (xb, *v)],
            color.stroke_width(1),
        ))?
        .label(clean(label))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
    }
    for ((label, pts), color) in &f.guides {
        let color = *color;
        c.draw_series(LineSeries::new(pts.iter().cloned(), color.stroke_width(3)))?
            .label(clean(label))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
            });
    }
    for m in &f.marks {
        draw_marks(&mut c, m)?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// How the x axis labels its values.
fn x_label(x: XAxis) -> fn(&f64) -> String {
    match x {
        XAxis::Size => size_label,
        XAxis::Value => num_label,
        XAxis::Percentile => percentile_label,
        XAxis::Date => date_label,
    }
}

/// One set of marks, in its shape, with its legend entry.
fn draw_marks<'a, CT>(
    c: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    m: &Marks,
) -> Result<(), Box<dyn std::error::Error + 'a>>
where
    CT: CoordTranslate<From = (f64, f64)>,
{
    let color = m.color;
    let style = color.stroke_width(2);
    match m.shape {
        Shape::Dot => c.draw_series(
            m.points
                .iter()
                .map(|p| Circle::new(*p, 5, color.filled()).into_dyn()),
        )?,
        Shape::Ring => c.draw_series(
            m.points
                .iter()
                .map(|p| Circle::new(*p, 8, style).into_dyn()),
        )?,
        Shape::Cross => {
            c.draw_series(m.points.iter().map(|p| Cross::new(*p, 6, style).into_dyn()))?
        }
    }
    .label(clean(&m.label))
    .legend(move |(x, y)| Circle::new((x + 9, y), 4, color.filled()));
    Ok(())
}

/// A latency distribution on the percentile scale HdrHistogram users read: x is
/// `log10(1 / (1 - p))`, so 90%, 99%, 99.9% and 99.99% are evenly spaced and the tail
/// is drawn as wide as the body. Points go up to the last percentile the sample count
/// resolves (1 - 1/n), at about 40 points per decade plus the labelled percentiles.
pub fn percentile_curve(h: &LatencyHistogram) -> Vec<(f64, f64)> {
    let n = h.len();
    if n == 0 {
        return Vec::new();
    }
    let top = (n as f64).log10().max(percentile_x(0.5));
    let steps = (top * 40.0).ceil() as usize;
    let mut xs: Vec<f64> = (0..=steps).map(|i| top * i as f64 / steps as f64).collect();
    xs.extend(
        [0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999]
            .iter()
            .map(|p| percentile_x(*p))
            .filter(|x| *x <= top),
    );
    xs.sort_by(f64::total_cmp);
    xs.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    xs.into_iter()
        .map(|x| {
            let q = (1.0 - 10f64.powf(-x)).clamp(0.0, 1.0);
            (x, h.value_at_quantile_ns(q) as f64 / 1000.0)
        })
        .collect()
}

/// A distribution figure of several curves (sizes or nights) overlaid.
pub fn distribution_figure(title: &str, curves: Vec<Series>) -> Option<String> {
    let mut f = Figure::new(title, "percentile", "latency (us)", XAxis::Percentile);
    // Tails span decades: a log y keeps the body readable beside them.
    f.log_y = true;
    f.lines = curves;
    render(&f)
}

/// Draws every figure of the report. `dist` names the latency test (and optionally the
/// sizes) whose distributions are overlaid; by default the first latency test, at up to
/// five sizes spread over its range.
pub fn draw_all(t: &Tables, line_rate: Option<f64>, dist: Option<(&str, &[u64])>) -> Plots {
    let mut lat: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in &t.latency {
        if r.samples == 0 {
            continue;
        }
        let base = format!("{} {}", r.test, r.transport);
        lat.entry(format!("{base} p50"))
            .or_default()
            .push((r.size_bytes.max(1) as f64, r.us.p50));
        lat.entry(format!("{base} p99"))
            .or_default()
            .push((r.size_bytes.max(1) as f64, r.us.p99));
    }
    let mut bw: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in &t.bandwidth {
        let dir = if r.bidirectional { " bidir" } else { "" };
        bw.entry(format!("{} {}{dir}", r.test, r.transport))
            .or_default()
            .push((r.size_bytes as f64, r.avg_gbit_s));
    }
    let mut coll: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in &t.collective {
        coll.entry(format!("{} {} n={}", r.collective, r.backend, r.ranks))
            .or_default()
            .push((r.size_bytes as f64, r.oop_busbw));
    }
    let size_fig = |title: &str, x: &str, y: &str, lines: BTreeMap<String, Vec<(f64, f64)>>| {
        let mut f = Figure::new(title, x, y, XAxis::Size);
        f.lines = lines.into_iter().collect();
        f
    };
    let mut latency = size_fig(
        "One-way latency, p50 and p99, merged over all pairs",
        "message size (bytes)",
        "latency (us)",
        lat,
    );
    latency.log_y = true;
    let mut bandwidth = size_fig(
        "Bandwidth (average over pairs)",
        "message size (bytes)",
        "Gb/s",
        bw,
    );
    if let Some(l) = line_rate {
        bandwidth.hlines.push((
            l,
            format!("line rate {} Gb/s", num_label(&l)),
            RGBColor(207, 34, 46),
        ));
    }
    let collective = size_fig(
        "Collective bus bandwidth (out-of-place)",
        "size per rank (bytes)",
        "busbw (GB/s)",
        coll,
    );
    let mut scaling = Figure::new(
        "Collective bus bandwidth against communicator size (out-of-place)",
        "ranks",
        "busbw (GB/s)",
        XAxis::Value,
    );
    scaling.lines = scaling_series(t);
    let mut plots = Plots {
        latency: render(&latency),
        bandwidth: render(&bandwidth),
        collective: render(&collective),
        scaling: render(&scaling),
        ..Plots::default()
    };
    let picked = pick_distribution(t, dist);
    if let Some((figure, of)) = distribution(&picked) {
        plots.distribution = figure;
        plots.distribution_of = Some(of);
    }
    plots
}

/// The percentile plot of the picked latency histograms (one curve a size) and what it
/// shows (`test transport SIZE` or `at SIZE, SIZE`); none when nothing was picked.
fn distribution(picked: &[(&LatKey, &LatencyHistogram)]) -> Option<(Option<String>, String)> {
    let (first, _) = picked.first()?;
    let what = format!("{} {}", first.test, first.transport);
    let curves: Vec<Series> = picked
        .iter()
        .map(|(k, h)| (verdict::tables::size_label(k.size), percentile_curve(h)))
        .collect();
    let counts: Vec<u64> = picked.iter().map(|(_, h)| h.len()).collect();
    let (lo, hi) = (
        counts.iter().copied().min().unwrap_or(0),
        counts.iter().copied().max().unwrap_or(0),
    );
    // Each curve is its own size's histogram: say what one curve holds, not the sum.
    let samples = match (picked.len(), lo == hi) {
        (1, _) => format!("{lo} samples"),
        (_, true) => format!("{lo} samples at each size"),
        _ => format!("{lo} to {hi} samples a size"),
    };
    let of = if picked.len() == 1 {
        format!("{what} {}", verdict::tables::size_label(first.size))
    } else {
        format!(
            "{what} at {}",
            picked
                .iter()
                .map(|(k, _)| verdict::tables::size_label(k.size))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let figure = distribution_figure(&format!("Latency by percentile, {what}, {samples}"), curves);
    Some((figure, of))
}

/// One line per collective and backend that was measured at two or more communicator
/// sizes: busbw against ranks at the largest message size measured at every one of them.
/// A fabric that scales keeps the line flat (busbw is normalised by the algorithm).
fn scaling_series(t: &Tables) -> Vec<Series> {
    // (collective, backend) -> size -> (ranks, busbw) points.
    type BySize = BTreeMap<u64, Vec<(f64, f64)>>;
    let mut by: BTreeMap<(String, String), BySize> = BTreeMap::new();
    for r in &t.collective {
        by.entry((r.collective.clone(), r.backend.clone()))
            .or_default()
            .entry(r.size_bytes)
            .or_default()
            .push((f64::from(r.ranks), r.oop_busbw));
    }
    by.into_iter()
        .filter_map(|((coll, backend), sizes)| {
            let (size, mut pts) = sizes.into_iter().rev().find(|(_, p)| p.len() >= 2)?;
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Some((format!("{coll} {backend} {}", format_size(size)), pts))
        })
        .collect()
}

/// The histograms to overlay: the requested test (and sizes), else the first latency test;
/// without sizes, up to five spread over the test's sizes (smallest and largest included).
pub fn pick_distribution<'a>(
    t: &'a Tables,
    want: Option<(&str, &[u64])>,
) -> Vec<(&'a LatKey, &'a LatencyHistogram)> {
    let all: Vec<(&LatKey, &LatencyHistogram)> =
        t.histograms.iter().filter(|(_, h)| !h.is_empty()).collect();
    let Some(first) = all.first() else {
        return Vec::new();
    };
    let (test, transport) = match want {
        Some((test, _)) => match all.iter().find(|(k, _)| k.test == test) {
            Some((k, _)) => (k.test.clone(), k.transport.clone()),
            None => return Vec::new(),
        },
        None => (first.0.test.clone(), first.0.transport.clone()),
    };
    let of_test: Vec<_> = all
        .into_iter()
        .filter(|(k, _)| k.test == test && k.transport == transport)
        .collect();
    match want {
        Some((_, sizes)) if !sizes.is_empty() => of_test
            .into_iter()
            .filter(|(k, _)| sizes.contains(&k.size))
            .collect(),
        _ => spread(of_test, 5),
    }
}

/// Up to `n` items spread evenly over `items`, first and last included.
pub fn spread<T>(items: Vec<T>, n: usize) -> Vec<T> {
    if items.len() <= n || n < 2 {
        return items.into_iter().take(n.max(1)).collect();
    }
    let last = items.len() - 1;
    let picks: Vec<usize> = (0..n).map(|i| i * last / (n - 1)).collect();
    items
        .into_iter()
        .enumerate()
        .filter(|(i, _)| picks.contains(i))
        .map(|(_, v)| v)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use verdict::input::InputSet;

    #[test]
    fn a_scaling_sweep_draws_busbw_against_ranks() {
        let docs: Vec<_> = [2, 4, 8]
            .into_iter()
            .map(|n| {
                let d = synth::collective_doc(n, &[1024, 1 << 20], 10.0, 100.0, 3);
                verdict::input::Loaded::from_text("x", &serde_json::to_string(&d).unwrap()).unwrap()
            })
            .collect();
        let t = verdict::tables::build(&InputSet::of(docs.clone()), None);
        let s = scaling_series(&t);
        assert!(!s.is_empty());
        for (label, pts) in &s {
            assert!(label.contains("1M"), "the largest size: {label}");
            let ranks: Vec<f64> = pts.iter().map(|p| p.0).collect();
            assert_eq!(ranks, [2.0, 4.0, 8.0]);
        }
        let svg = draw_all(&t, None, None).scaling.expect("drawn");
        assert!(svg.starts_with("<svg") && svg.contains("ranks"));
        // One communicator size: no curve.
        let one = verdict::tables::build(&InputSet::of(docs[..1].to_vec()), None);
        assert!(scaling_series(&one).is_empty());
        assert!(draw_all(&one, None, None).scaling.is_none());
    }

    #[test]
    fn every_plot_is_svg_when_data_exists() {
        let docs: Vec<_> = [
            synth::latency_doc("a", "b", &[2, 64, 4096], 5.0, 1),
            synth::bandwidth_doc("a", "b", &[4096, 65536], 20.0, 2),
            synth::collective_doc(4, &[1024, 1 << 20], 10.0, 100.0, 3),
        ]
        .into_iter()
        .map(|d| {
            verdict::input::Loaded::from_text("x", &serde_json::to_string(&d).unwrap()).unwrap()
        })
        .collect();
        let t = verdict::tables::build(&InputSet::of(docs), Some(100.0));
        let p = draw_all(&t, Some(100.0), None);
        for svg in [&p.latency, &p.bandwidth, &p.collective, &p.distribution] {
            let svg = svg.as_ref().expect("plot drawn");
            assert!(svg.starts_with("<svg") && svg.contains("</svg>"));
        }
        assert!(p.bandwidth.unwrap().contains("line rate 100 Gb/s"));
        // Three sizes overlaid on the percentile scale, labelled as HdrHistogram users read it.
        let dist = p.distribution.unwrap();
        for label in ["50%", "90%", "99%", "99.9%", "2 B", "64 B", "4KiB"] {
            assert!(
                dist.contains(&format!("\n{label}\n")),
                "no {label} in the plot"
            );
        }
        assert_eq!(
            p.distribution_of.as_deref(),
            Some("send_lat tcp at 2 B, 64 B, 4KiB")
        );
        assert!(draw_all(&verdict::tables::Tables::default(), None, None)
            .latency
            .is_none());
    }

    #[test]
    fn the_percentile_scale_spaces_the_nines_evenly() {
        assert!((percentile_x(0.9) - 1.0).abs() < 1e-12);
        assert!((percentile_x(0.999) - 3.0).abs() < 1e-9);
        assert_eq!(percentile_label(&percentile_x(0.5)), "50%");
        assert_eq!(percentile_label(&1.0), "90%");
        assert_eq!(percentile_label(&2.0), "99%");
        assert_eq!(percentile_label(&4.0), "99.99%");
        let mut h = LatencyHistogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let c = percentile_curve(&h);
        // Up to 99.99% (1 - 1/n) and no further: n samples resolve nothing beyond.
        assert!((c.last().unwrap().0 - 4.0).abs() < 1e-9, "{:?}", c.last());
        let at = |x: f64| c.iter().find(|p| (p.0 - x).abs() < 1e-9).unwrap().1;
        assert!((at(percentile_x(0.5)) - 5000.0).abs() / 5000.0 < 0.01);
        assert!((at(2.0) - 9900.0).abs() / 9900.0 < 0.01);
        assert!(c.windows(2).all(|w| w[0].1 <= w[1].1), "monotone");
    }

    #[test]
    fn spread_keeps_both_ends() {
        assert_eq!(spread((0..10).collect(), 5), vec![0, 2, 4, 6, 9]);
        assert_eq!(spread(vec![1, 2], 5), vec![1, 2]);
        assert_eq!(date_label(&20000.0), "2024-10-04");
    }
}
