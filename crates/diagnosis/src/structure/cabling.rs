//! Cabling checks: discovery (each NIC's neighbour, the fabric's switch links) against
//! the plan, or, without one, against the fabric's own regularity (every NIC of rail r of
//! a group on one leaf, each node on the same port number of every rail's leaf, every
//! leaf with the same uplinks, every link of a tier at the same width and speed).

use std::collections::{BTreeMap, BTreeSet};

use results::discovery::FabricLink;
use results::fabric_plan::{FabricPlan, Tier};
use serde::Serialize;

use super::topology::{Topology, NONE};

pub use verdict::metric::DiffKind;

/// One difference between the fabric as built and as meant.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    pub kind: DiffKind,
    /// `g0n1 rail0, rail1` / `leaf-r1-g1 - spine1`.
    pub item: String,
    pub expected: String,
    pub found: String,
    /// `plan` or `regularity` (what it was compared with) and the discovery source.
    pub against: String,
    pub what: &'static str,
    #[serde(skip)]
    pub node: u32,
    #[serde(skip)]
    pub rails: Vec<u32>,
    #[serde(skip)]
    pub switches: Vec<String>,
}

fn width_rank(w: &str) -> Option<u32> {
    w.trim_end_matches(['x', 'X']).parse().ok()
}

fn speed_rank(s: &str) -> Option<usize> {
    const ORDER: &[&str] = &[
        "SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR",
    ];
    ORDER
        .iter()
        .position(|o| o.eq_ignore_ascii_case(s))
        .or_else(|| {
            s.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse::<usize>()
                .ok()
                .map(|v| 100 + v)
        })
}

fn mode<'a>(v: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut m: BTreeMap<&str, usize> = BTreeMap::new();
    for x in v {
        *m.entry(x).or_default() += 1;
    }
    m.into_iter().max_by_key(|x| x.1).map(|x| x.0)
}

/// Width and speed below the modal ones of the same kind of link.
fn downgraded(
    items: &[(String, Option<String>, Option<String>)],
    out: &mut Vec<Diff>,
    against: &str,
) {
    let mw = mode(items.iter().filter_map(|x| x.1.as_deref()));
    let ms = mode(items.iter().filter_map(|x| x.2.as_deref()));
    for (item, w, s) in items {
        let lw = matches!((w.as_deref().and_then(width_rank), mw.and_then(width_rank)), (Some(a), Some(b)) if a < b);
        let ls = matches!((s.as_deref().and_then(speed_rank), ms.and_then(speed_rank)), (Some(a), Some(b)) if a < b);
        if lw || ls {
            out.push(Diff {
                kind: DiffKind::LinkDowngraded,
                item: item.clone(),
                expected: format!("{} {} (as its peers)", mw.unwrap_or("?"), ms.unwrap_or("?")),
                found: format!(
                    "{} {}",
                    w.as_deref().unwrap_or("?"),
                    s.as_deref().unwrap_or("?")
                ),
                against: against.into(),
                what: DiffKind::LinkDowngraded.what(),
                node: NONE,
                rails: vec![],
                switches: item.split(" - ").map(String::from).collect(),
            });
        }
    }
}

/// Runs every cabling check. `links`: the discovered fabric (switch-to-switch and host
/// links), empty when nothing discovered it.
pub fn check(t: &Topology, plan: Option<&FabricPlan>, links: &[FabricLink]) -> Vec<Diff> {
    let mut out = Vec::new();
    let rails = t.rails_n();
    let has_plan_nics = plan.is_some_and(|p| !p.nic.is_empty());
    let against = if has_plan_nics { "plan" } else { "regularity" };
    let sw_rail = |s: u32| t.switches.get(s as usize).map_or(NONE, |x| x.rail);
    let sw_group = |s: u32| t.switches.get(s as usize).map_or(NONE, |x| x.group);
    for i in 0..t.nodes.len() {
        let node = i as u32;
        let mut done = BTreeSet::new();
        // The leaf each NIC should be on: planned, or (regularity) the leaf of its rail in
        // its node's group that most of the group's NICs of that rail use.
        let expected = |r: usize| -> u32 {
            if has_plan_nics {
                return t.planned[i * rails + r].0;
            }
            let g = t.node_group[i];
            let mut votes: BTreeMap<u32, usize> = BTreeMap::new();
            for j in 0..t.nodes.len() {
                if t.node_group[j] == g && t.found[j * rails + r].is_some() {
                    let a = t.attach[j * rails + r];
                    if sw_rail(a) == r as u32 {
                        *votes.entry(a).or_default() += 1;
                    }
                }
            }
            votes.into_iter().max_by_key(|x| x.1).map_or(NONE, |x| x.0)
        };
        for r in 0..rails {
            let Some(f) = &t.found[i * rails + r] else {
                continue;
            };
            let at = t.attach[i * rails + r];
            let want = expected(r);
            if want == NONE || done.contains(&r) {
                continue;
            }
            if at != want {
                // A swap: another NIC of the node is on this one's leaf, and this one on its.
                let partner = (0..rails).find(|&r2| {
                    r2 != r
                        && t.found[i * rails + r2].is_some()
                        && t.attach[i * rails + r2] == want
                        && expected(r2) == at
                });
                if let Some(r2) = partner {
                    done.insert(r2);
                    out.push(Diff {
                        kind: DiffKind::CableSwap,
                        item: format!(
                            "{} {} and {}",
                            t.nodes[i],
                            t.nic_name(node, r as u32),
                            t.nic_name(node, r2 as u32)
                        ),
                        expected: format!(
                            "{} on {}, {} on {}",
                            t.nic_name(node, r as u32),
                            t.switch_name(want),
                            t.nic_name(node, r2 as u32),
                            t.switch_name(at)
                        ),
                        found: format!(
                            "{} on {}, {} on {}",
                            t.nic_name(node, r as u32),
                            t.switch_name(at),
                            t.nic_name(node, r2 as u32),
                            t.switch_name(want)
                        ),
                        against: format!("{against}; {}", f.source),
                        what: DiffKind::CableSwap.what(),
                        node,
                        rails: vec![r as u32, r2 as u32],
                        switches: vec![t.switch_name(at).into(), t.switch_name(want).into()],
                    });
                } else {
                    let why = if sw_group(at) != NONE && sw_group(at) != sw_group(want) {
                        format!("a leaf of {}", t.group_name(sw_group(at)))
                    } else if sw_rail(at) != NONE && sw_rail(at) != r as u32 {
                        format!("the leaf of rail {}", sw_rail(at))
                    } else {
                        "another switch".into()
                    };
                    out.push(Diff {
                        kind: DiffKind::WrongLeaf,
                        item: format!("{} {}", t.nodes[i], t.nic_name(node, r as u32)),
                        expected: t.switch_name(want).into(),
                        found: format!("{} ({why})", t.switch_name(at)),
                        against: format!("{against}; {}", f.source),
                        what: DiffKind::WrongLeaf.what(),
                        node,
                        rails: vec![r as u32],
                        switches: vec![t.switch_name(at).into(), t.switch_name(want).into()],
                    });
                }
                continue;
            }
            // Right leaf: the port.
            let want_port: Option<String> = if has_plan_nics {
                t.planned[i * rails + r].1.clone()
            } else if rails >= 3 {
                // Regularity: the port this node uses on most of its other rails.
                let others: Vec<&str> = (0..rails)
                    .filter(|&r2| r2 != r)
                    .filter_map(|r2| t.found[i * rails + r2].as_ref()?.port.as_deref())
                    .collect();
                mode(others.iter().copied())
                    .filter(|m| others.iter().filter(|o| *o == m).count() >= 2)
                    .map(String::from)
            } else {
                None
            };
            if let (Some(w), Some(p)) = (&want_port, &f.port) {
                if w != p {
                    out.push(Diff {
                        kind: DiffKind::WrongPort,
                        item: format!("{} {}", t.nodes[i], t.nic_name(node, r as u32)),
                        expected: format!("{} port {w}", t.switch_name(want)),
                        found: format!("{} port {p}", t.switch_name(at)),
                        against: format!("{against}; {}", f.source),
                        what: DiffKind::WrongPort.what(),
                        node,
                        rails: vec![r as u32],
                        switches: vec![t.switch_name(at).into()],
                    });
                }
            }
        }
    }
    // Switch links: counts per switch pair, against the plan or the leaves' common count.
    // Host ports in a discovered fabric carry the host's description (`node nic`).
    let is_switch = |name: &str| !name.contains(' ') && !t.node_index.contains_key(name);
    let mut have: BTreeMap<(String, String), u32> = BTreeMap::new();
    let mut sw_links = Vec::new();
    let mut host_links = Vec::new();
    for l in links {
        let k = if l.a_name <= l.b_name {
            (l.a_name.clone(), l.b_name.clone())
        } else {
            (l.b_name.clone(), l.a_name.clone())
        };
        let item = format!("{}[{}] - {}[{}]", l.a_name, l.a_port, l.b_name, l.b_port);
        if is_switch(&l.a_name) && is_switch(&l.b_name) {
            *have.entry(k).or_default() += 1;
            sw_links.push((item, l.width.clone(), l.speed.clone()));
        } else {
            host_links.push((item, l.width.clone(), l.speed.clone()));
        }
    }
    if !links.is_empty() {
        let want: BTreeMap<(String, String), u32> = match plan.filter(|p| !p.link.is_empty()) {
            Some(p) => p.link_counts(),
            None => {
                // Regularity: each leaf has, to each upper switch, what most leaves have.
                let uppers: BTreeSet<&String> = have
                    .keys()
                    .flat_map(|(a, b)| [a, b])
                    .filter(|n| match t.switch_index.get(*n) {
                        Some(&s) => {
                            t.switches[s as usize].tier != Tier::Leaf || !t.attach.contains(&s)
                        }
                        None => true,
                    })
                    .collect();
                let leaves: BTreeSet<&String> = have
                    .keys()
                    .flat_map(|(a, b)| [a, b])
                    .filter(|n| !uppers.contains(n))
                    .collect();
                let mut w = BTreeMap::new();
                for u in &uppers {
                    let counts: Vec<u32> = leaves
                        .iter()
                        .map(|l| {
                            let k = if l <= u {
                                ((*l).clone(), (*u).clone())
                            } else {
                                ((*u).clone(), (*l).clone())
                            };
                            have.get(&k).copied().unwrap_or(0)
                        })
                        .collect();
                    let mut m: BTreeMap<u32, usize> = BTreeMap::new();
                    for c in &counts {
                        *m.entry(*c).or_default() += 1;
                    }
                    let modal = m.into_iter().max_by_key(|x| (x.1, x.0)).map_or(0, |x| x.0);
                    for l in &leaves {
                        let k = if *l <= *u {
                            ((*l).clone(), (*u).clone())
                        } else {
                            ((*u).clone(), (*l).clone())
                        };
                        if modal > 0 {
                            w.insert(k, modal);
                        }
                    }
                }
                w
            }
        };
        let against = if plan.is_some_and(|p| !p.link.is_empty()) {
            "plan"
        } else {
            "regularity"
        };
        let keys: BTreeSet<&(String, String)> = want.keys().chain(have.keys()).collect();
        for k in keys {
            let (w, h) = (
                want.get(k).copied().unwrap_or(0),
                have.get(k).copied().unwrap_or(0),
            );
            if w == h {
                continue;
            }
            let kind = if h < w {
                DiffKind::MissingLink
            } else {
                DiffKind::ExtraLink
            };
            out.push(Diff {
                kind,
                item: format!("{} - {}", k.0, k.1),
                expected: format!("{w} link(s)"),
                found: format!("{h} link(s)"),
                against: format!("{against}; ibnetdiscover"),
                what: kind.what(),
                node: NONE,
                rails: vec![],
                switches: vec![k.0.clone(), k.1.clone()],
            });
        }
        downgraded(&sw_links, &mut out, "peers (switch links)");
    }
    // Host links as the NICs' neighbours saw them (when the fabric did not list them).
    if host_links.is_empty() {
        for i in 0..t.nodes.len() {
            for r in 0..rails {
                if let Some(f) = &t.found[i * rails + r] {
                    if f.width.is_some() || f.speed.is_some() {
                        host_links.push((
                            format!(
                                "{} {} - {}",
                                t.nodes[i],
                                t.nic_name(i as u32, r as u32),
                                f.switch
                            ),
                            f.width.clone(),
                            f.speed.clone(),
                        ));
                    }
                }
            }
        }
    }
    downgraded(&host_links, &mut out, "peers (host links)");
    out.sort_by(|a, b| (a.kind, &a.item).cmp(&(b.kind, &b.item)));
    out
}
