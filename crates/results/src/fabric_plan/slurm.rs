//! Slurm's `topology.conf` as a plan: its switches and the hosts under each (groups only;
//! Slurm knows no rails or ports).

use std::collections::BTreeSet;

use super::*;
pub use crate::hostlist::expand_hostlist;

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
