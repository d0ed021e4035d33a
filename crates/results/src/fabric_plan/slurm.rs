//! Slurm's `topology.conf` as a plan: its switches and the hosts under each (groups only;
//! Slurm knows no rails or ports).

use std::collections::BTreeSet;

use super::*;

/// Expands a Slurm host list (`tux[0-3,7],gpu[01-02]`).
pub fn expand_hostlist(s: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
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
    for p in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        let Some(open) = p.find('[') else {
            out.push(p.to_string());
            continue;
        };
        let close = p
            .rfind(']')
            .ok_or_else(|| format!("{p}: unbalanced brackets"))?;
        let (prefix, body, suffix) = (&p[..open], &p[open + 1..close], &p[close + 1..]);
        for r in body.split(',') {
            let (lo, hi) = r.split_once('-').unwrap_or((r, r));
            let width = lo.len();
            let a: u64 = lo.parse().map_err(|_| format!("{p}: bad range {r}"))?;
            let b: u64 = hi.parse().map_err(|_| format!("{p}: bad range {r}"))?;
            if b < a || b - a > 100_000 {
                return Err(format!("{p}: range {r} is empty or too large"));
            }
            for n in a..=b {
                out.push(format!("{prefix}{n:0width$}{suffix}"));
            }
        }
    }
    Ok(out)
}

/// A Slurm `topology.conf` (topology/tree): `SwitchName=S Nodes=LIST` makes a leaf whose
/// nodes form one group named after it; `SwitchName=S Switches=LIST` a spine (or core,
/// above spines) linked once to each. Slurm knows no NICs or ports: groups only.
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
        let mut name = None;
        let mut nodes = None;
        let mut switches = None;
        for kv in line.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(PlanError(format!(
                    "{file} line {}: {kv:?} is not KEY=VALUE (topology.conf lines are SwitchName=... Switches=... Nodes=...)",
                    ln + 1
                )));
            };
            match k.to_ascii_lowercase().as_str() {
                "switchname" => name = Some(v.to_string()),
                "nodes" => nodes = Some(v.to_string()),
                "switches" => switches = Some(v.to_string()),
                _ => {} // LinkSpeed and others: not needed here
            }
        }
        let Some(name) = name else {
            return Err(PlanError(format!(
                "{file} line {}: no SwitchName=; every line names a switch",
                ln + 1
            )));
        };
        let bad = |e: String| PlanError(format!("{file} line {}: {e}", ln + 1));
        if let Some(list) = nodes {
            for n in expand_hostlist(&list).map_err(bad)? {
                plan.node.push(PlanNode {
                    name: n,
                    group: Some(name.clone()),
                    rack: None,
                });
            }
            plan.switch.push(PlanSwitch {
                name: name.clone(),
                tier: Tier::Leaf,
                group: Some(name),
                rail: None,
                rack: None,
            });
        } else if let Some(list) = switches {
            children.push((name.clone(), expand_hostlist(&list).map_err(bad)?));
            plan.switch.push(PlanSwitch {
                name,
                tier: Tier::Spine,
                group: None,
                rail: None,
                rack: None,
            });
        } else {
            return Err(bad(format!(
                "switch {name} has neither Nodes= nor Switches="
            )));
        }
    }
    // A switch above switches that are themselves above switches is a core.
    let uppers: BTreeSet<String> = children.iter().map(|c| c.0.clone()).collect();
    for (parent, kids) in &children {
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
    // A node listed under two leaves keeps the first.
    let mut seen = BTreeSet::new();
    plan.node.retain(|n| seen.insert(n.name.clone()));
    Ok(plan)
}
