//! Pictures of the structure: the fabric (spines above leaves, leaves by group, suspects
//! in red) and each rail's per-direction matrix ordered by group, so that a leaf, uplink
//! or spine fault shows as a block. Every name goes through `escape::svg_label`.

use std::fmt::Write;

use results::fabric_plan::Tier;

use super::localise::Localisation;
use super::observe::Observed;
use super::topology::{Topology, NONE};
use super::{DirMatrix, StructSuspect};
use verdict::escape::{markdown, svg_label};

/// Largest node count a per-direction matrix is drawn for.
pub const MATRIX_MAX: usize = 256;
/// Largest given as a Markdown table.
pub const MARKDOWN_MAX: usize = 16;
/// Leaves and spines drawn; more are counted.
const DRAWN_MAX: usize = 128;

fn marked(suspects: &[StructSuspect], name: &str) -> bool {
    suspects.iter().any(|s| s.marks.iter().any(|m| m == name))
}

/// Groups, leaves and spines, with suspects marked.
pub fn fabric_svg(t: &Topology, suspects: &[StructSuspect]) -> String {
    let leaves: Vec<usize> = {
        let mut v: Vec<usize> = (0..t.switches.len())
            .filter(|&i| t.switches[i].tier == Tier::Leaf)
            .collect();
        v.sort_by_key(|&i| (t.switches[i].group, t.switches[i].rail, i));
        v.truncate(DRAWN_MAX);
        v
    };
    let spines: Vec<usize> = (0..t.switches.len())
        .filter(|&i| t.switches[i].tier != Tier::Leaf && !t.switches[i].inferred)
        .take(DRAWN_MAX)
        .collect();
    let (bw, gap) = (110.0, 10.0);
    let width = ((leaves.len().max(spines.len()) as f64) * (bw + gap) + 40.0).max(400.0);
    let height = 300.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="10">"#
    );
    let x_of = |k: usize, n: usize| {
        20.0 + k as f64 * (bw + gap) + (width - 40.0 - n as f64 * (bw + gap)) / 2.0
    };
    let spine_rail_bad: Vec<bool> = (0..t.rails_n())
        .map(|r| marked(suspects, &format!("spines:{r}")))
        .collect();
    for (k, &l) in leaves.iter().enumerate() {
        let lx = x_of(k, leaves.len()) + bw / 2.0;
        let sw = &t.switches[l];
        let up_bad = marked(suspects, &format!("up:{}", sw.name))
            || (sw.rail != NONE
                && spine_rail_bad
                    .get(sw.rail as usize)
                    .copied()
                    .unwrap_or(false));
        for (j, _) in spines.iter().enumerate() {
            let sx = x_of(j, spines.len()) + bw / 2.0;
            let _ = write!(
                s,
                r#"<line x1="{lx}" y1="150" x2="{sx}" y2="60" stroke="{}" stroke-width="{}"/>"#,
                if up_bad { "#c00" } else { "#bbb" },
                if up_bad { 2 } else { 1 }
            );
        }
    }
    for (j, &sp) in spines.iter().enumerate() {
        let x = x_of(j, spines.len());
        let bad = marked(suspects, &t.switches[sp].name);
        let _ = write!(
            s,
            r##"<rect x="{x}" y="30" width="{bw}" height="30" fill="{}" stroke="#333"/><text x="{}" y="49" text-anchor="middle">{}</text>"##,
            if bad { "#f99" } else { "#def" },
            x + bw / 2.0,
            svg_label(&t.switches[sp].name)
        );
    }
    leaf_boxes(&mut s, t, suspects, &leaves, &x_of, bw);
    if t.switches.len() > 2 * DRAWN_MAX {
        let _ = write!(
            s,
            r#"<text x="20" y="280">{} switches; the first {DRAWN_MAX} leaves and spines drawn</text>"#,
            t.switches.len()
        );
    }
    let _ = write!(
        s,
        r#"<text x="20" y="18">{}</text>"#,
        svg_label("spines (top), leaves by group (below); red: suspect")
    );
    s.push_str("</svg>");
    s
}

/// Node order: by group, then name.
fn order(t: &Topology) -> Vec<usize> {
    let mut v: Vec<usize> = (0..t.nodes.len()).collect();
    v.sort_by(|&a, &b| (t.node_group[a], a).cmp(&(t.node_group[b], b)));
    v
}

/// Per rail: sender rows, receiver columns, ordered by group; bad cells red.
pub fn matrices(o: &Observed, t: &Topology, loc: &Localisation) -> Vec<DirMatrix> {
    if o.n > MATRIX_MAX || o.n == 0 {
        return vec![];
    }
    let ord = order(t);
    let mut out = Vec::new();
    for r in 0..o.rails {
        let med = loc.medians.get(r).copied().unwrap_or(f64::NAN);
        if !med.is_finite() {
            continue;
        }
        let s = direction_svg(o, t, loc, r, &ord, med);
        let rail = t.rails.get(r).cloned().unwrap_or_default();
        let md = (o.n <= MARKDOWN_MAX).then(|| direction_markdown(o, t, loc, r, &ord));
        out.push(DirMatrix {
            file: format!("plots/direction-{}.svg", verdict::escape::file_name(&rail)),
            rail,
            svg: s,
            markdown: md,
        });
    }
    out
}

/// One rail's per-direction matrix as SVG: senders down, receivers across, bad cells red
/// (darker the slower), group boundaries drawn.
fn direction_svg(
    o: &Observed,
    t: &Topology,
    loc: &Localisation,
    r: usize,
    ord: &[usize],
    med: f64,
) -> String {
    let cell = (600.0 / o.n as f64).clamp(3.0, 24.0);
    let lab = if o.n <= 32 { 90.0 } else { 10.0 };
    let size = lab + cell * o.n as f64 + 10.0;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" viewBox="0 0 {size} {size}" font-family="sans-serif" font-size="9">"#
    );
    for (yi, &a) in ord.iter().enumerate() {
        if o.n <= 32 {
            let _ = write!(
                s,
                r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
                lab - 4.0,
                lab + cell * (yi as f64 + 0.7),
                svg_label(&t.nodes[a])
            );
        }
        for (xi, &b) in ord.iter().enumerate() {
            let v = o.get(r, a, b);
            if v.is_nan() {
                continue;
            }
            let bad = loc.bad[r][a * o.n + b];
            let share = (v as f64 / med).clamp(0.0, 1.0);
            let fill = if bad {
                format!(
                    "rgb(220,{},{})",
                    (share * 120.0) as u8,
                    (share * 120.0) as u8
                )
            } else {
                let g = (160.0 + 60.0 * share) as u8;
                format!("rgb(120,{g},120)")
            };
            let _ = write!(
                s,
                r#"<rect x="{}" y="{}" width="{cell}" height="{cell}" fill="{fill}"/>"#,
                lab + cell * xi as f64,
                lab + cell * yi as f64
            );
        }
    }
    // Group boundaries.
    for (k, &a) in ord.iter().enumerate() {
        if k > 0 && t.node_group[a] != t.node_group[ord[k - 1]] {
            let p = lab + cell * k as f64;
            let end = lab + cell * o.n as f64;
            let _ = write!(
                s,
                r##"<line x1="{p}" y1="{lab}" x2="{p}" y2="{end}" stroke="#000"/><line x1="{lab}" y1="{p}" x2="{end}" y2="{p}" stroke="#000"/>"##
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// One rail's per-direction matrix as a Markdown table (bold: bad).
fn direction_markdown(
    o: &Observed,
    t: &Topology,
    loc: &Localisation,
    r: usize,
    ord: &[usize],
) -> String {
    let mut m = String::from("| sends \\ receives |");
    for &b in ord {
        let _ = write!(m, " {} |", markdown(&t.nodes[b]));
    }
    m.push_str("\n|---|");
    for _ in ord {
        m.push_str("---|");
    }
    for &a in ord {
        let _ = write!(m, "\n| {} |", markdown(&t.nodes[a]));
        for &b in ord {
            let v = o.get(r, a, b);
            if v.is_nan() {
                m.push_str(" - |");
            } else if loc.bad[r][a * o.n + b] {
                let _ = write!(m, " **{}** |", verdict::judge::format_value(v as f64));
            } else {
                let _ = write!(m, " {} |", verdict::judge::format_value(v as f64));
            }
        }
    }
    m
}

/// The leaves in a row, each with its node count (and suspects among them), each group
/// named under its first leaf.
fn leaf_boxes(
    s: &mut String,
    t: &Topology,
    suspects: &[StructSuspect],
    leaves: &[usize],
    x_of: &dyn Fn(usize, usize) -> f64,
    bw: f64,
) {
    let mut last_group = u32::MAX - 1;
    for (k, &l) in leaves.iter().enumerate() {
        let x = x_of(k, leaves.len());
        let sw = &t.switches[l];
        let bad = marked(suspects, &sw.name);
        let _ = write!(
            s,
            r##"<rect x="{x}" y="150" width="{bw}" height="30" fill="{}" stroke="#333"/><text x="{}" y="169" text-anchor="middle">{}</text>"##,
            if bad { "#f99" } else { "#efe" },
            x + bw / 2.0,
            svg_label(&sw.name)
        );
        let nodes_here: Vec<usize> = (0..t.nodes.len())
            .filter(|&i| (0..t.rails_n()).any(|r| t.attach[i * t.rails_n() + r] == l as u32))
            .collect();
        let bad_nodes = nodes_here
            .iter()
            .filter(|&&i| marked(suspects, &t.nodes[i]))
            .count();
        let _ = write!(
            s,
            r##"<text x="{}" y="195" text-anchor="middle" fill="{}">{} node(s){}</text>"##,
            x + bw / 2.0,
            if bad_nodes > 0 { "#c00" } else { "#333" },
            nodes_here.len(),
            if bad_nodes > 0 {
                format!(", {bad_nodes} suspect")
            } else {
                String::new()
            }
        );
        if sw.group != last_group {
            last_group = sw.group;
            let name = if sw.group == NONE {
                "no group".to_string()
            } else {
                t.group_name(sw.group).to_string()
            };
            let _ = write!(
                s,
                r##"<text x="{x}" y="225" fill="#333" font-weight="bold">{}</text>"##,
                svg_label(&name)
            );
        }
    }
}
