//! The matrix as a picture: one heatmap per test, size, rail and metric, inline SVG.
//!
//! Up to [`VECTOR_MAX`] nodes every cell is a rectangle (runs of one colour merged), with
//! every node named on the axes and a tooltip on every cell that is not healthy. Beyond,
//! a cell per node pair is a pixel: the matrix is a PNG (indexed colour, a few hundred KB
//! at 1024 nodes) inside the SVG, scaled without smoothing, with ticks every few dozen
//! nodes and the suspects marked on both axes. A bad node is a cross, a bad link a dot,
//! a bad rail a red picture.
//!
//! Colours say how a cell compares with its rail's median (bandwidth over median, or median
//! over latency): greens for healthy, oranges to dark red for bad (by the profile's rule
//! or bound), violet for a link both bad and good (flaky), black for a pair that failed,
//! grey where nothing was measured.

use std::fmt::Write;

use base64::Engine;

use diagnosis::matrix::{Analysis, Cell, Group, Matrix};

/// Largest matrix drawn as vector cells.
pub const VECTOR_MAX: usize = 128;

/// Which value of a cell a heatmap shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// Bandwidth average (bandwidth groups) or p50 latency (latency groups).
    Primary,
    /// p99 latency.
    P99,
}

/// The palette, index = colour class.
const PALETTE: [(u8, u8, u8); 12] = [
    (0xea, 0xee, 0xf2), // 0 not measured
    (0xd0, 0xd7, 0xde), // 1 diagonal
    (0x1b, 0x1f, 0x24), // 2 failed
    (0x82, 0x50, 0xdf), // 3 flaky
    (0x0f, 0x53, 0x23), // 4 better than median by 2% or more
    (0x2d, 0xa4, 0x4e), // 5 within 2% of the median
    (0x8c, 0xd0, 0x8c), // 6 within 5%
    (0xd9, 0xef, 0x8b), // 7 healthy, further
    (0xfd, 0xae, 0x61), // 8 bad, mildly
    (0xf4, 0x6d, 0x43), // 9 bad, under 3/4 of the rule
    (0xd7, 0x30, 0x27), // 10 bad, under 1/2
    (0x80, 0x00, 0x26), // 11 bad, under 1/4
];

const LEGEND: [(usize, &str); 11] = [
    (4, ">= +2% of median"),
    (5, "within 2%"),
    (6, "within 5%"),
    (7, "healthy, further"),
    (8, "bad"),
    (9, "bad, < 3/4 of median"),
    (10, "bad, < 1/2 of median"),
    (11, "bad, < 1/4 of median"),
    (3, "flaky (bad and good)"),
    (2, "failed"),
    (0, "not measured"),
];

fn hex(i: usize) -> String {
    let (r, g, b) = PALETTE[i];
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// Text from the documents (node and device names) in the SVG: the report's one markup
/// escaping layer.
pub fn esc(s: &str) -> String {
    verdict::escape::markup(s)
}

/// The value shown and the rail's reference for it.
fn value(c: &Cell, m: &Matrix, shown: Shown) -> (f32, f64) {
    match shown {
        Shown::Primary => (c.worst, m.median),
        Shown::P99 => (c.worst_p99, m.median_p99),
    }
}

/// Colour class of a cell: how it compares with the median (bandwidth over median, or
/// median over latency). `rule` is the healthy share of the median (0.9 for bandwidth,
/// 1/1.5 for latency): on the p99 map only a cell under it counts as bad.
fn class(c: &Cell, m: &Matrix, g: &Group, shown: Shown, rule: f64) -> usize {
    if !c.tried() {
        return 0;
    }
    if !c.measured() {
        return 2;
    }
    if c.is_flaky() {
        return 3;
    }
    let (v, med) = value(c, m, shown);
    let good = if !(v.is_finite() && med > 0.0) {
        1.0
    } else if g.key.latency {
        med / v as f64
    } else {
        v as f64 / med
    };
    // Only the shown metric grades the colour; a cell bad by another metric (a bound on
    // p99 shown on the p50 map) is marked bad all the same.
    let bad = c.is_bad() && (shown == Shown::Primary || good < rule);
    if bad {
        return match good {
            x if x >= 0.75 => 8,
            x if x >= 0.5 => 9,
            x if x >= 0.25 => 10,
            _ => 11,
        };
    }
    match good {
        x if x >= 1.02 => 4,
        x if x >= 0.98 => 5,
        x if x >= 0.95 => 6,
        _ => 7,
    }
}

fn rule(g: &Group, a: &Analysis, shown: Shown) -> f64 {
    let s = &a.settings;
    match (g.key.latency, shown) {
        (false, _) => s.bw_below_median,
        (true, Shown::Primary) => 1.0 / s.latency_above_median,
        (true, Shown::P99) => 1.0 / s.latency_p99_above_median.unwrap_or(s.latency_above_median),
    }
}

/// Class of the (row i, column j) position of the full square (both triangles drawn for
/// one rail; one triangle for a cross-rail matrix).
fn at(m: &Matrix, g: &Group, shown: Shown, rule: f64, i: usize, j: usize) -> usize {
    if i == j {
        return 1;
    }
    if m.dev_lo != m.dev_hi && i > j {
        return 0;
    }
    let (a, b) = (m.nodes[i], m.nodes[j]);
    m.cell(a, b).map_or(0, |c| class(c, m, g, shown, rule))
}

/// Where a heatmap's parts go: the square of `side` pixels at (`x0`, `y0`), each cell
/// `cell` wide, every `label_every`th node named, the whole `w` x `h`.
struct Layout {
    n: usize,
    /// Drawn as rectangles (small matrices), else as one raster image.
    vector: bool,
    side: f64,
    cell: f64,
    label_every: usize,
    x0: f64,
    y0: f64,
    w: f64,
    h: f64,
}

impl Layout {
    fn of(a: &Analysis, m: &Matrix, g: &Group) -> Layout {
        let n = m.nodes.len();
        let vector = n <= VECTOR_MAX;
        let side = if vector {
            (n * ((720 / n.max(1)).clamp(4, 48))) as f64
        } else {
            (n.min(1024)) as f64
        };
        let cell = side / n.max(1) as f64;
        let label_every = if vector && cell >= 9.0 {
            1
        } else {
            (n / 16).max(1)
        };
        let name_w = a
            .nodes
            .iter()
            .map(|s| s.chars().count())
            .max()
            .unwrap_or(4)
            .min(24) as f64
            * 6.5
            + 8.0;
        let (x0, y0) = (name_w, name_w + 34.0);
        let legend_h = 20.0 * LEGEND.len() as f64 + 30.0;
        let title_w = (g.label().len() + a.rail_name(m).len() + 60) as f64 * 7.5;
        Layout {
            n,
            vector,
            side,
            cell,
            label_every,
            x0,
            y0,
            w: (x0 + side + 200.0).max(title_w),
            h: (y0 + side + 20.0).max(y0 + legend_h),
        }
    }
}

/// One heatmap being drawn: its matrix, group, what it shows and the rule it colours by.
struct Heatmap<'a> {
    a: &'a Analysis,
    m: &'a Matrix,
    g: &'a Group,
    shown: Shown,
    rule: f64,
    l: Layout,
}

/// Draws the heatmap of matrix `mi`. `marks` are nodes to flag on the axes (suspects).
pub fn draw(a: &Analysis, mi: usize, shown: Shown, marks: &[u32]) -> String {
    let m = &a.matrices[mi];
    let g = &a.groups[m.group as usize];
    let hm = Heatmap {
        a,
        m,
        g,
        shown,
        rule: rule(g, a, shown),
        l: Layout::of(a, m, g),
    };
    let mut s = String::new();
    hm.header(&mut s);
    hm.axis_labels(&mut s);
    if hm.l.vector {
        hm.cells(&mut s);
        hm.tooltips(&mut s);
    } else {
        let png = raster(m, g, shown, hm.rule);
        let Layout { x0, y0, side, .. } = hm.l;
        let _ = write!(
            s,
            r#"<image x="{x0:.1}" y="{y0:.1}" width="{side:.0}" height="{side:.0}" preserveAspectRatio="none" style="image-rendering:pixelated" href="data:image/png;base64,{}"/>"#,
            base64::engine::general_purpose::STANDARD.encode(png)
        );
    }
    hm.suspects(&mut s, marks);
    hm.legend(&mut s);
    s.push_str("</svg>");
    s
}

impl Heatmap<'_> {
    /// The SVG element and its title line: the group, rail, what is shown and the median.
    fn header(&self, s: &mut String) {
        let (a, m, g, l) = (self.a, self.m, self.g, &self.l);
        let what = match (g.key.latency, self.shown) {
            (false, _) => "bandwidth (Gb/s)",
            (true, Shown::Primary) => "p50 latency (us)",
            (true, Shown::P99) => "p99 latency (us)",
        };
        let (_, med) = value(&Cell::default(), m, self.shown);
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" font-family="sans-serif" font-size="11" role="img" aria-label="{title}">"#,
            w = l.w,
            h = l.h,
            title = esc(&format!("{} rail {} {what}", g.label(), a.rail_name(m)))
        );
        let _ = write!(
            s,
            r#"<text x="4" y="16" font-size="13" font-weight="bold">{} &#8212; rail {} &#8212; {what}, rail median {}</text>"#,
            esc(&g.label()),
            esc(&a.rail_name(m)),
            if med.is_finite() {
                verdict::judge::format_value(med)
            } else {
                "n/a".into()
            }
        );
    }

    /// The nodes' names down the left and along the top.
    fn axis_labels(&self, s: &mut String) {
        let l = &self.l;
        for (i, &node) in self.m.nodes.iter().enumerate() {
            if i % l.label_every != 0 {
                continue;
            }
            let name = esc(&self.a.nodes[node as usize]);
            let c = l.x0 + (i as f64 + 0.5) * l.cell;
            let yy = l.y0 + (i as f64 + 0.5) * l.cell + 3.5;
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{yy:.1}" text-anchor="end">{name}</text><text transform="translate({c:.1},{:.1}) rotate(-90)" x="0" y="3.5">{name}</text>"#,
                l.x0 - 4.0,
                l.y0 - 4.0
            );
        }
    }

    /// The cells as rectangles, runs of one class in a row drawn as one.
    fn cells(&self, s: &mut String) {
        let (l, n) = (&self.l, self.l.n);
        for i in 0..n {
            let mut j = 0;
            while j < n {
                let k = at(self.m, self.g, self.shown, self.rule, i, j);
                let mut e = j + 1;
                while e < n && at(self.m, self.g, self.shown, self.rule, i, e) == k {
                    e += 1;
                }
                if k != 0 {
                    let _ = write!(
                        s,
                        r#"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{}"/>"#,
                        l.x0 + j as f64 * l.cell,
                        l.y0 + i as f64 * l.cell,
                        (e - j) as f64 * l.cell,
                        l.cell,
                        hex(k)
                    );
                }
                j = e;
            }
        }
    }

    /// Tooltips on the cells that are not healthy (one triangle): the ends, the value and
    /// the rules it broke.
    fn tooltips(&self, s: &mut String) {
        let (a, m, g, l) = (self.a, self.m, self.g, &self.l);
        let cell = l.cell;
        for i in 0..l.n {
            for j in i + 1..l.n {
                let (na, nb) = (m.nodes[i], m.nodes[j]);
                let Some(c) = m.cell(na, nb) else { continue };
                if !c.is_bad() {
                    continue;
                }
                let (ea, eb) = a.ends(m, na, nb);
                let (v, _) = value(c, m, self.shown);
                let shown = if v.is_finite() {
                    format!("{} {}", verdict::judge::format_value(v as f64), g.unit())
                } else {
                    "no measurement".into()
                };
                let why = g.reasons(m, c, &a.settings);
                let why = if why.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", why.join("; "))
                };
                let text = format!("{} - {}: {shown}{why}", a.end_name(ea), a.end_name(eb));
                for (y, x) in [(i, j), (j, i)] {
                    if m.dev_lo != m.dev_hi && y > x {
                        continue;
                    }
                    let _ = write!(
                        s,
                        r##"<rect x="{:.2}" y="{:.2}" width="{cell:.2}" height="{cell:.2}" fill="none" stroke="#1b1f24" stroke-width="0.6"><title>{}</title></rect>"##,
                        l.x0 + x as f64 * cell,
                        l.y0 + y as f64 * cell,
                        esc(&text)
                    );
                }
            }
        }
    }

    /// Suspects flagged on both axes, and the square's frame.
    fn suspects(&self, s: &mut String, marks: &[u32]) {
        let Layout {
            x0, y0, side, cell, ..
        } = self.l;
        for &node in marks {
            let Some(i) = self.m.nodes.iter().position(|&x| x == node) else {
                continue;
            };
            let c = (i as f64 + 0.5) * cell;
            let name = esc(&self.a.nodes[node as usize]);
            let _ = write!(
                s,
                r##"<path d="M{:.1} {:.1} l-6 -4 v8 z" fill="#cf222e"><title>suspect {name}</title></path><path d="M{:.1} {:.1} l-4 -6 h8 z" fill="#cf222e"><title>suspect {name}</title></path>"##,
                x0 + side + 7.0,
                y0 + c,
                x0 + c,
                y0 + side + 7.0
            );
        }
        let _ = write!(
            s,
            r##"<rect x="{x0:.1}" y="{y0:.1}" width="{side:.1}" height="{side:.1}" fill="none" stroke="#57606a" stroke-width="0.8"/>"##
        );
    }

    /// The classes' colours and names, right of the square.
    fn legend(&self, s: &mut String) {
        let lx = self.l.x0 + self.l.side + 20.0;
        for (k, (class, text)) in LEGEND.iter().enumerate() {
            let ly = self.l.y0 + 20.0 * k as f64;
            let _ = write!(
                s,
                r##"<rect x="{lx:.1}" y="{ly:.1}" width="14" height="14" fill="{}" stroke="#8c959f" stroke-width="0.5"/><text x="{:.1}" y="{:.1}">{text}</text>"##,
                hex(*class),
                lx + 20.0,
                ly + 11.0,
                text = esc(text)
            );
        }
    }
}

/// The matrix as an indexed-colour PNG, one pixel per node pair.
fn raster(m: &Matrix, g: &Group, shown: Shown, r: f64) -> Vec<u8> {
    let n = m.nodes.len();
    let mut pixels = vec![0u8; n * n];
    for i in 0..n {
        for j in 0..n {
            pixels[i * n + j] = at(m, g, shown, r, i, j) as u8;
        }
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, n as u32, n as u32);
        enc.set_color(png::ColorType::Indexed);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_palette(
            PALETTE
                .iter()
                .flat_map(|&(r, g, b)| [r, g, b])
                .collect::<Vec<u8>>(),
        );
        enc.set_compression(png::Compression::Fast);
        // Encoding into a Vec cannot fail for a valid size; an empty image says so.
        if let Ok(mut w) = enc.write_header() {
            let _ = w.write_image_data(&pixels);
        }
    }
    out
}

/// A Markdown table of the matrix (small matrices only): values, bad ones in bold,
/// `FAIL` for failed pairs, `.` where nothing was measured.
pub fn markdown(a: &Analysis, mi: usize, shown: Shown) -> String {
    let m = &a.matrices[mi];
    let g = &a.groups[m.group as usize];
    let md = verdict::escape::markdown;
    let mut s = String::from("| |");
    for &n in &m.nodes {
        let _ = write!(s, " {} |", md(&a.nodes[n as usize]));
    }
    s.push_str("\n|---|");
    for _ in &m.nodes {
        s.push_str("---:|");
    }
    s.push('\n');
    for (i, &na) in m.nodes.iter().enumerate() {
        let _ = write!(s, "| **{}** |", md(&a.nodes[na as usize]));
        for (j, &nb) in m.nodes.iter().enumerate() {
            let text = if i == j || (m.dev_lo != m.dev_hi && i > j) {
                "-".to_string()
            } else {
                match m.cell(na, nb) {
                    Some(c) if !c.tried() => ".".into(),
                    Some(c) if !c.measured() => "FAIL".into(),
                    Some(c) => {
                        let (v, _) = value(c, m, shown);
                        let t = verdict::judge::format_value(v as f64);
                        match (c.is_flaky(), c.is_bad()) {
                            (true, _) => format!("*{t}* (flaky)"),
                            (false, true) => format!("**{t}**"),
                            _ => t,
                        }
                    }
                    None => ".".into(),
                }
            };
            let _ = write!(s, " {text} |");
        }
        s.push('\n');
    }
    let _ = g;
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use synth::sweep::{sweep_doc, Fault, SweepSpec};
    use verdict::input::Loaded;

    fn analysis(spec: &SweepSpec) -> Analysis {
        let doc = sweep_doc(spec);
        let l = Loaded::from_text("s.json", &serde_json::to_string(&doc).unwrap()).unwrap();
        let p = verdict::profile::parse(
            "name=\"t\"\n[[check]]\nid=\"x\"\ndescription=\"d\"\nmetric=\"bw_avg\"\nunit=\"Gb/s\"\nmin=1\n",
            "t",
        )
        .unwrap();
        diagnosis::matrix::analyse(&[l], &p)
    }

    #[test]
    fn small_matrices_are_vector_cells_with_tooltips_on_bad_ones() {
        let mut s = SweepSpec::bandwidth(6, 1);
        s.faults = vec![Fault::Link {
            a: 1,
            b: 3,
            rail: None,
            factor: 0.5,
        }];
        let a = analysis(&s);
        let svg = draw(&a, 0, Shown::Primary, &[]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(!svg.contains("<image"));
        assert_eq!(
            svg.matches("<title>").count(),
            2,
            "one bad link, both triangles"
        );
        assert!(svg.contains("node0001:mlx5_0 - node0003:mlx5_0"));
        assert!(
            svg.contains(&hex(9)) || svg.contains(&hex(8)),
            "a bad colour"
        );
        let md = markdown(&a, 0, Shown::Primary);
        assert_eq!(md.lines().count(), 8);
        assert_eq!(
            md.matches("**").count(),
            2 * 6 + 2 * 2,
            "row names and two bad cells"
        );
    }

    #[test]
    fn large_matrices_are_one_pixel_per_pair() {
        let mut s = SweepSpec::bandwidth(200, 1);
        s.faults = vec![Fault::Node {
            node: 17,
            factor: 0.5,
        }];
        let a = analysis(&s);
        let svg = draw(&a, 0, Shown::Primary, &[17]);
        assert!(svg.contains("<image") && svg.contains("data:image/png;base64,"));
        assert!(svg.contains("suspect node0017"));
        assert!(svg.len() < 200_000, "{} bytes", svg.len());
        let b64 = svg
            .split("base64,")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let dec = png::Decoder::new(std::io::Cursor::new(png));
        let mut r = dec.read_info().unwrap();
        let mut buf = vec![0; r.output_buffer_size()];
        let info = r.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (200, 200));
        // Row 17 is bad (but its diagonal), row 18 healthy but its cell with 17.
        let row = |i: usize| &buf[i * 200..(i + 1) * 200];
        assert!(row(17)
            .iter()
            .enumerate()
            .all(|(j, &k)| if j == 17 { k == 1 } else { k >= 8 }));
        assert_eq!(row(18).iter().filter(|&&k| k >= 8).count(), 1);
    }

    /// Every `<` opens a tag: text with a raw `<` or `&` would make the SVG file invalid
    /// (browsers refuse to show it), even where the HTML parser would forgive it.
    fn well_formed(svg: &str) {
        for (i, _) in svg.match_indices('<') {
            let next = svg[i + 1..].chars().next().unwrap();
            assert!(
                next.is_ascii_alphabetic() || next == '/',
                "raw < at {i}: {}",
                &svg[i..i + 40]
            );
        }
        for (i, _) in svg.match_indices('&') {
            let rest = &svg[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&#"]
                    .iter()
                    .any(|e| rest.starts_with(e)),
                "raw & at {i}"
            );
        }
    }

    #[test]
    fn every_heatmap_is_well_formed_xml() {
        let mut s = SweepSpec::latency(5, 1);
        s.faults = vec![Fault::Node {
            node: 2,
            factor: 0.3,
        }];
        let a = analysis(&s);
        for shown in [Shown::Primary, Shown::P99] {
            well_formed(&draw(&a, 0, shown, &[2]));
        }
        well_formed(&draw(
            &analysis(&SweepSpec::bandwidth(150, 1)),
            0,
            Shown::Primary,
            &[],
        ));
    }

    #[test]
    fn names_from_documents_are_escaped() {
        assert_eq!(esc("<a&\"b'>"), "&lt;a&amp;&quot;b&#x27;&gt;");
    }
}
