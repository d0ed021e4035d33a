//! Slurm's `topology.conf` as a plan: its switches and the hosts under each (groups only;
//! Slurm knows no rails or ports).

use std::collections::BTreeSet;

use super::*;

/// The most names one host list may expand to (a typo such as `node[1-10000000]` is an
/// error, not a hang).
const MAX_HOSTS: usize = 100_000;

/// Expands a Slurm host list (`tux[0-3,7],gpu[01-02]`), with up to two bracketed ranges
/// in a name as Slurm allows (`rack[0-63]_blade[0-41]`, quickstart_admin's own example).
pub fn expand_hostlist(s: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    for p in top_level_parts(s) {
        out.extend(expand_name(p)?);
        if out.len() > MAX_HOSTS {
            return Err(format!("{s}: more than {MAX_HOSTS} names"));
        }
    }
    Ok(out)
}

/// The comma-separated parts of a host list outside brackets, trimmed, blanks left out.
fn top_level_parts(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// One name with bracketed ranges: the first range, times every expansion of the rest.
fn expand_name(p: &str) -> std::result::Result<Vec<String>, String> {
    let Some(open) = p.find('[') else {
        if p.contains(']') {
            return Err(format!("{p}: unbalanced brackets"));
        }
        return Ok(vec![p.to_string()]);
    };
    let close = p[open..]
        .find(']')
        .map(|c| open + c)
        .ok_or_else(|| format!("{p}: unbalanced brackets"))?;
    let (prefix, body) = (&p[..open], &p[open + 1..close]);
    let rest = expand_name(&p[close + 1..]).map_err(|e| format!("{p}: {e}"))?;
    let mut out = Vec::new();
    for r in body.split(',') {
        let (lo, hi) = r.split_once('-').unwrap_or((r, r));
        let width = lo.len();
        let a: u64 = lo.parse().map_err(|_| format!("{p}: bad range {r}"))?;
        let b: u64 = hi.parse().map_err(|_| format!("{p}: bad range {r}"))?;
        if b < a || (b - a) as usize * rest.len() > MAX_HOSTS {
            return Err(format!("{p}: range {r} is empty or too large"));
        }
        for n in a..=b {
            for tail in &rest {
                out.push(format!("{prefix}{n:0width$}{tail}"));
            }
        }
    }
    Ok(out)
}

/// One line of a `topology.conf`.
enum Line {
    /// `SwitchName=S Nodes=LIST`: a leaf and the hosts under it.
    Leaf(String, Vec<String>),
    /// `SwitchName=S Switches=LIST`: a switch above others.
    Upper(String, Vec<String>),
    /// `BlockName=B Nodes=LIST` (topology/block, Slurm 23.11+): hosts that share a
    /// high-bandwidth domain; Slurm names no switch for it.
    Block(String, Vec<String>),
    /// `BlockSizes=...` and other lines that place nothing.
    Other,
}

/// A Slurm `topology.conf`. topology/tree: `SwitchName=S Nodes=LIST` makes a leaf whose
/// nodes form one group named after it; `SwitchName=S Switches=LIST` a spine (or core,
/// above spines) linked once to each. topology/block: `BlockName=B Nodes=LIST` makes a
/// group of nodes and no switch (`BlockSizes=` is the scheduler's, not the fabric's).
/// Slurm knows no NICs or ports: groups only. A node listed twice keeps its first place.
pub fn import_slurm(file: &str, text: &str) -> Result<FabricPlan> {
    let mut plan = FabricPlan {
        version: 1,
        ..Default::default()
    };
    let mut children: Vec<(String, Vec<String>)> = Vec::new();
    for (ln, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |e: String| PlanError(format!("{file} line {}: {e}", ln + 1));
        match read_line(line).map_err(bad)? {
            Line::Leaf(name, nodes) => {
                place_nodes(&mut plan, &name, nodes);
                plan.switch
                    .push(slurm_switch(name.clone(), Tier::Leaf, Some(name)));
            }
            Line::Upper(name, kids) => {
                plan.switch
                    .push(slurm_switch(name.clone(), Tier::Spine, None));
                children.push((name, kids));
            }
            Line::Block(name, nodes) => place_nodes(&mut plan, &name, nodes),
            Line::Other => {}
        }
    }
    link_uppers(&mut plan, &children);
    let mut seen = BTreeSet::new();
    plan.node.retain(|n| seen.insert(n.name.clone()));
    Ok(plan)
}

/// One non-blank line, its keys read case-insensitively as Slurm reads them.
fn read_line(line: &str) -> std::result::Result<Line, String> {
    let (mut switch, mut block, mut nodes, mut switches) = (None, None, None, None);
    let mut directive = false;
    for kv in line.split_whitespace() {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(format!(
                "{kv:?} is not KEY=VALUE (topology.conf lines are SwitchName=... Switches=... Nodes=..., or BlockName=... Nodes=...)"
            ));
        };
        match k.to_ascii_lowercase().as_str() {
            "switchname" => switch = Some(v.to_string()),
            "blockname" => block = Some(v.to_string()),
            "nodes" => nodes = Some(expand_hostlist(v)?),
            "switches" => switches = Some(expand_hostlist(v)?),
            "blocksizes" => directive = true,
            _ => {} // LinkSpeed and others: not needed here
        }
    }
    Ok(match (switch, block, nodes, switches) {
        (Some(s), None, Some(n), None) => Line::Leaf(s, n),
        (Some(s), None, None, Some(k)) => Line::Upper(s, k),
        (Some(s), None, None, None) => {
            return Err(format!("switch {s} has neither Nodes= nor Switches="))
        }
        (Some(s), None, ..) => return Err(format!("switch {s} has both Nodes= and Switches=")),
        (None, Some(b), Some(n), None) => Line::Block(b, n),
        (None, Some(b), _, _) => return Err(format!("block {b} needs Nodes= (and no Switches=)")),
        (None, None, ..) if directive => Line::Other,
        _ => {
            return Err("no SwitchName= or BlockName=; every line names a switch or a block".into())
        }
    })
}

fn slurm_switch(name: String, tier: Tier, group: Option<String>) -> PlanSwitch {
    PlanSwitch {
        name,
        tier,
        group,
        rail: None,
        rack: None,
        label: None,
    }
}

/// `nodes` as members of `group`.
fn place_nodes(plan: &mut FabricPlan, group: &str, nodes: Vec<String>) {
    plan.node.extend(nodes.into_iter().map(|name| PlanNode {
        name,
        group: Some(group.to_string()),
        rack: None,
    }));
}

/// Each switch above switches linked once to each child; a switch above switches that
/// are themselves above switches is a core.
fn link_uppers(plan: &mut FabricPlan, children: &[(String, Vec<String>)]) {
    let uppers: BTreeSet<&String> = children.iter().map(|c| &c.0).collect();
    for (parent, kids) in children {
        if kids.iter().any(|k| uppers.contains(k)) {
            if let Some(s) = plan.switch.iter_mut().find(|s| &s.name == parent) {
                s.tier = Tier::Core;
            }
        }
        for k in kids {
            plan.link.push(PlanLink {
                a: k.clone(),
                b: parent.clone(),
                count: 1,
                rate_gbit_s: None,
            });
        }
    }
}
