//! Inline SVG plots drawn with plotters: the report must open offline, so nothing is
//! fetched and every figure is part of the page.

use std::collections::BTreeMap;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use results::units::format_size;

use crate::input::LatKey;
use crate::tables::Tables;

const W: u32 = 760;
const H: u32 = 380;

/// The report's figures; `None` where there is no data for one.
#[derive(Debug, Default, serde::Serialize)]
pub struct Plots {
    pub latency: Option<String>,
    pub bandwidth: Option<String>,
    pub collective: Option<String>,
    pub distribution: Option<String>,
    /// What the distribution shows (`send_lat tcp 2 B`).
    pub distribution_of: Option<String>,
}

/// A series: label and (x, y) points.
type Series = (String, Vec<(f64, f64)>);

/// Labels reach the SVG through the one escaping layer of plot text.
use crate::escape::svg_label as clean;

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
    crate::judge::format_value(*y)
}

fn bounds(series: &[Series]) -> Option<(f64, f64, f64, f64)> {
    let pts = series.iter().flat_map(|s| s.1.iter());
    let mut b: Option<(f64, f64, f64, f64)> = None;
    for &(x, y) in pts {
        if !plottable(&(x, y)) {
            continue;
        }
        b = Some(match b {
            None => (x, x, y, y),
            Some((a, bx, c, d)) => (a.min(x), bx.max(x), c.min(y), d.max(y)),
        });
    }
    b
}

/// Draws series on log-x axes; y log or linear. `hline` adds a labelled horizontal line.
fn chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    log_y: bool,
    hline: Option<(f64, &str)>,
    x_is_size: bool,
) -> Option<String> {
    let series: Vec<Series> = series
        .iter()
        .map(|(l, pts)| (l.clone(), pts.iter().copied().filter(plottable).collect()))
        .collect();
    let series = &series[..];
    let hline = hline.filter(|(v, _)| v.is_finite() && v.abs() <= PLOT_MAX);
    let (x0, x1, mut y0, mut y1) = bounds(series)?;
    if let Some((v, _)) = hline {
        y1 = y1.max(v);
    }
    let (x0, x1) = (x0.max(1e-9), x1.max(x0 * 2.0).max(1e-9));
    if log_y {
        y0 = (y0 * 0.8).max(1e-6);
        y1 = (y1 * 1.25).max(y0 * 10.0);
    } else {
        y0 = 0.0;
        y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    }
    let mut svg = String::new();
    let result = {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        // Sizes are powers of two: ticks at powers of two read as 64K, 1M, not 65536.
        // Other x axes (latency) go logarithmic only when they span a wide range, or a
        // narrow one would get no tick label at all.
        let log_x = x_is_size || x1 / x0 > 30.0;
        let base = if x_is_size { 2.0 } else { 10.0 };
        match (log_x, log_y) {
            (true, true) => draw(
                &root,
                (title, x_desc, y_desc, series, hline, x_is_size),
                (x0..x1).log_scale().base(base),
                (y0..y1).log_scale(),
            ),
            (true, false) => draw(
                &root,
                (title, x_desc, y_desc, series, hline, x_is_size),
                (x0..x1).log_scale().base(base),
                y0..y1,
            ),
            (false, true) => draw(
                &root,
                (title, x_desc, y_desc, series, hline, x_is_size),
                x0..x1,
                (y0..y1).log_scale(),
            ),
            (false, false) => draw(
                &root,
                (title, x_desc, y_desc, series, hline, x_is_size),
                x0..x1,
                y0..y1,
            ),
        }
    };
    result.ok().map(|_| svg)
}

/// What a chart shows: title, axis descriptions, series, an optional horizontal line
/// (label), and whether x is a message size.
type ChartSpec<'s> = (
    &'s str,
    &'s str,
    &'s str,
    &'s [Series],
    Option<(f64, &'s str)>,
    bool,
);

fn draw<'a, X, Y>(
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    spec: ChartSpec,
    x: X,
    y: Y,
) -> Result<(), Box<dyn std::error::Error + 'a>>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let (title, x_desc, y_desc, series, hline, x_is_size) = spec;
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(root)
        .caption(clean(title), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)?;
    let x_fmt: &dyn Fn(&f64) -> String = if x_is_size { &size_label } else { &num_label };
    c.configure_mesh()
        .x_desc(clean(x_desc))
        .y_desc(clean(y_desc))
        .x_label_formatter(x_fmt)
        .y_label_formatter(&num_label)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        c.draw_series(LineSeries::new(pts.iter().cloned(), color.stroke_width(2)))?
            .label(clean(label))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        c.draw_series(PointSeries::of_element(
            pts.iter().cloned(),
            3,
            color.filled(),
            &|p, s, st| Circle::new(p, s, st),
        ))?;
    }
    if let Some((v, label)) = hline {
        let (xa, xb) = (c.x_range().start, c.x_range().end);
        c.draw_series(LineSeries::new(vec![(xa, v), (xb, v)], RED.stroke_width(1)))?
            .label(clean(label))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED));
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Draws every figure of the report.
pub fn draw_all(t: &Tables, line_rate: Option<f64>, dist: Option<(&str, u64)>) -> Plots {
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
    let lat: Vec<Series> = lat.into_iter().collect();
    let mut bw: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in &t.bandwidth {
        let dir = if r.bidirectional { " bidir" } else { "" };
        bw.entry(format!("{} {}{dir}", r.test, r.transport))
            .or_default()
            .push((r.size_bytes as f64, r.avg_gbit_s));
    }
    let bw: Vec<Series> = bw.into_iter().collect();
    let mut coll: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in &t.collective {
        coll.entry(format!("{} {} n={}", r.collective, r.backend, r.ranks))
            .or_default()
            .push((r.size_bytes as f64, r.oop_busbw));
    }
    let coll: Vec<Series> = coll.into_iter().collect();

    let line_label = line_rate.map(|l| format!("line rate {} Gb/s", num_label(&l)));
    let mut plots = Plots {
        latency: chart(
            "One-way latency, p50 and p99, merged over all pairs",
            "message size (bytes)",
            "latency (us)",
            &lat,
            true,
            None,
            true,
        ),
        bandwidth: chart(
            "Bandwidth (average over pairs)",
            "message size (bytes)",
            "Gb/s",
            &bw,
            false,
            line_rate.zip(line_label.as_deref()),
            true,
        ),
        collective: chart(
            "Collective bus bandwidth (out-of-place)",
            "size per rank (bytes)",
            "busbw (GB/s)",
            &coll,
            false,
            None,
            true,
        ),
        ..Plots::default()
    };
    if let Some((key, h)) = pick_distribution(t, dist) {
        // Cumulative share of samples at or below each latency: the shape of the tail.
        let total = h.len().max(1) as f64;
        let mut acc = 0u64;
        let buckets = h.buckets();
        let step = (buckets.len() / 400).max(1);
        let mut pts = Vec::new();
        for (i, (v, n)) in buckets.iter().enumerate() {
            acc = acc.saturating_add(*n);
            if i % step == 0 || i + 1 == buckets.len() {
                pts.push((*v as f64 / 1000.0, acc as f64 / total * 100.0));
            }
        }
        let what = format!(
            "{} {} {}",
            key.test,
            key.transport,
            crate::tables::size_label(key.size)
        );
        plots.distribution = chart(
            &format!("Latency distribution, {what}, {} samples", h.len()),
            "latency (us)",
            "% of samples at or below",
            &[(what.clone(), pts)],
            false,
            None,
            false,
        );
        plots.distribution_of = Some(what);
    }
    plots
}

/// The histogram to draw: the requested test and size, else the smallest size of the
/// first latency test.
fn pick_distribution<'a>(
    t: &'a Tables,
    want: Option<(&str, u64)>,
) -> Option<(&'a LatKey, &'a results::LatencyHistogram)> {
    let mut it = t.histograms.iter().filter(|(_, h)| !h.is_empty());
    match want {
        Some((test, size)) => it.find(|(k, _)| k.test == test && k.size == size),
        None => it.next(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plot_is_svg_when_data_exists() {
        let docs: Vec<_> = [
            synth::latency_doc("a", "b", &[2, 64, 4096], 5.0, 1),
            synth::bandwidth_doc("a", "b", &[4096, 65536], 20.0, 2),
            synth::collective_doc(4, &[1024, 1 << 20], 10.0, 100.0, 3),
        ]
        .into_iter()
        .map(|d| crate::input::Loaded::from_text("x", &serde_json::to_string(&d).unwrap()).unwrap())
        .collect();
        let t = crate::tables::build(&docs, Some(100.0));
        let p = draw_all(&t, Some(100.0), None);
        for svg in [&p.latency, &p.bandwidth, &p.collective, &p.distribution] {
            let svg = svg.as_ref().expect("plot drawn");
            assert!(svg.starts_with("<svg") && svg.contains("</svg>"));
        }
        assert!(p.bandwidth.unwrap().contains("line rate 100 Gb/s"));
        assert!(draw_all(&crate::tables::Tables::default(), None, None)
            .latency
            .is_none());
    }
}
