//! Cabling checks: discovery (each NIC's neighbour, the fabric's switch links) against
//! the plan, or, without one, against the fabric's own regularity (every NIC of rail r of
//! a group on one leaf, each node on the same port number of every rail's leaf, every
//! leaf with the same uplinks, every link of a tier at the same width and speed).

use std::collections::{BTreeMap, BTreeSet};

use results::discovery::FabricLink;
use results::fabric_plan::{FabricPlan, Tier};
use serde::Serialize;

use super::topology::{Found, Topology, NONE};

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
    let has_plan_nics = plan.is_some_and(|p| !p.nic.is_empty());
    let mut out = Vec::new();
    for i in 0..t.nodes.len() {
        out.extend(node_cabling(t, i, has_plan_nics));
    }
    out.extend(unplanned_nics(t, plan));
    let (sw_links, mut host_links) = split_links(t, links);
    if !links.is_empty() {
        out.extend(link_counts(t, plan, links));
        downgraded(&sw_links, &mut out, "peers (switch links)");
    }
    // Host links as the NICs' neighbours saw them (when the fabric did not list them).
    if host_links.is_empty() {
        host_links = neighbour_links(t);
    }
    downgraded(&host_links, &mut out, "peers (host links)");
    out.sort_by(|a, b| (a.kind, &a.item).cmp(&(b.kind, &b.item)));
    out
}

/// A link as `downgraded` judges it: its name, width and speed.
type LinkLine = (String, Option<String>, Option<String>);

/// The leaf node `i`'s NIC of rail `r` should be on: planned, or (regularity) the leaf of
/// its rail in its node's group that most of the group's NICs of that rail use.
fn expected_leaf(t: &Topology, i: usize, r: usize, has_plan_nics: bool) -> u32 {
    let rails = t.rails_n();
    if has_plan_nics {
        return t.planned[i * rails + r].0;
    }
    let sw_rail = |s: u32| t.switches.get(s as usize).map_or(NONE, |x| x.rail);
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
}

/// One node's NICs: each on its leaf (else a swap with another NIC of the node, or a
/// wrong leaf), and on its port.
fn node_cabling(t: &Topology, i: usize, has_plan_nics: bool) -> Vec<Diff> {
    let rails = t.rails_n();
    let against = if has_plan_nics { "plan" } else { "regularity" };
    let mut out = Vec::new();
    let mut done = BTreeSet::new();
    for r in 0..rails {
        let Some(f) = &t.found[i * rails + r] else {
            continue;
        };
        let at = t.attach[i * rails + r];
        let want = expected_leaf(t, i, r, has_plan_nics);
        if want == NONE || done.contains(&r) {
            continue;
        }
        let against = format!("{against}; {}", f.source);
        if at != want {
            // A swap: another NIC of the node is on this one's leaf, and this one on its.
            let partner = (0..rails).find(|&r2| {
                r2 != r
                    && t.found[i * rails + r2].is_some()
                    && t.attach[i * rails + r2] == want
                    && expected_leaf(t, i, r2, has_plan_nics) == at
            });
            out.push(match partner {
                Some(r2) => {
                    done.insert(r2);
                    swap(t, i, (r, r2), (want, at), against)
                }
                None => wrong_leaf(t, i, r, (want, at), against),
            });
            continue;
        }
        out.extend(wrong_port(t, i, r, want, has_plan_nics, against));
    }
    out
}

/// Whether the switch named the port `want` by either of its names: the port id, or the
/// description (SONiC: the alias as the id, the SONiC name as the description; a plan
/// may use either). Exact: a description is free text, and only an equal one is taken.
fn names_port(f: &Found, want: &str) -> bool {
    f.port.as_deref() == Some(want) || f.alias.as_deref() == Some(want)
}

/// The port's other name, for a message: `described as "Ethernet0"`.
fn described(f: &Found) -> Option<String> {
    f.alias.as_ref().map(|a| format!("described as {a:?}"))
}

/// The NICs on their planned leaf whose port could not be compared with the plan's: the
/// switch sent an address as the port id (its MAC) and no description equal to the
/// planned port. `NODE NIC (SWITCH sent ...)`, for the wrong-port check to say it did
/// not judge them.
pub fn ports_not_compared(t: &Topology, plan: Option<&FabricPlan>) -> Vec<String> {
    if plan.is_none_or(|p| p.nic.is_empty()) {
        return Vec::new();
    }
    let rails = t.rails_n();
    let mut out = Vec::new();
    for i in 0..t.nodes.len() {
        for r in 0..rails {
            let s = i * rails + r;
            let (Some(f), (want, Some(w))) = (&t.found[s], &t.planned[s]) else {
                continue;
            };
            if f.port.is_none() && t.attach[s] == *want && !names_port(f, w) {
                out.push(format!(
                    "{} {} ({} sent an address as its port id{})",
                    t.nodes[i],
                    t.nic_name(i as u32, r as u32),
                    t.switch_name(*want),
                    described(f).map(|d| format!(", {d}")).unwrap_or_default()
                ));
            }
        }
    }
    out
}

/// Discovered NICs no planned NIC of their node is named like: each one difference, so a
/// discovery that matches nothing is said, not dropped (over ibsim the neighbour records
/// name the HCA as umad2sim presents it, `ibsim0`, where the plan says `mlx5_0`).
fn unplanned_nics(t: &Topology, plan: Option<&FabricPlan>) -> Vec<Diff> {
    let Some(p) = plan else {
        return Vec::new();
    };
    t.unmatched
        .iter()
        .map(|(i, nic, f)| {
            let node = &t.nodes[*i as usize];
            let mut names: Vec<&str> = p
                .nic
                .iter()
                .filter(|x| &x.node == node)
                .map(|x| x.nic.as_str())
                .collect();
            names.sort_by(|a, b| results::natural::natural_cmp(a, b));
            Diff {
                kind: DiffKind::UnplannedNic,
                item: format!("{node} {nic}"),
                expected: format!("a NIC the plan names on {node} ({})", names.join(", ")),
                found: format!(
                    "{nic} on {}{}",
                    f.switch,
                    f.port
                        .as_deref()
                        .map(|p| format!(" port {p}"))
                        .unwrap_or_default()
                ),
                against: format!("plan; {}", f.source),
                what: DiffKind::UnplannedNic.what(),
                node: *i,
                rails: Vec::new(),
                switches: vec![f.switch.clone()],
            }
        })
        .collect()
}

/// Node `i`'s NICs of rails `r` and `r2` on each other's leaves (`want`: r's, `at`: r2's).
fn swap(
    t: &Topology,
    i: usize,
    (r, r2): (usize, usize),
    (want, at): (u32, u32),
    against: String,
) -> Diff {
    let node = i as u32;
    Diff {
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
        against,
        what: DiffKind::CableSwap.what(),
        node,
        rails: vec![r as u32, r2 as u32],
        switches: vec![t.switch_name(at).into(), t.switch_name(want).into()],
    }
}

/// Node `i`'s NIC of rail `r` on leaf `at` instead of `want`, with no partner to swap with.
fn wrong_leaf(t: &Topology, i: usize, r: usize, (want, at): (u32, u32), against: String) -> Diff {
    let sw_rail = |s: u32| t.switches.get(s as usize).map_or(NONE, |x| x.rail);
    let sw_group = |s: u32| t.switches.get(s as usize).map_or(NONE, |x| x.group);
    let node = i as u32;
    let why = if sw_group(at) != NONE && sw_group(at) != sw_group(want) {
        format!("a leaf of {}", t.group_name(sw_group(at)))
    } else if sw_rail(at) != NONE && sw_rail(at) != r as u32 {
        format!("the leaf of rail {}", sw_rail(at))
    } else {
        "another switch".into()
    };
    Diff {
        kind: DiffKind::WrongLeaf,
        item: format!("{} {}", t.nodes[i], t.nic_name(node, r as u32)),
        expected: t.switch_name(want).into(),
        found: format!("{} ({why})", t.switch_name(at)),
        against,
        what: DiffKind::WrongLeaf.what(),
        node,
        rails: vec![r as u32],
        switches: vec![t.switch_name(at).into(), t.switch_name(want).into()],
    }
}

/// The port node `i`'s NIC of rail `r` should be on: the plan's, or (regularity, three
/// rails or more) the port this node uses on most of its other rails; `None` when
/// neither says.
fn expected_port(t: &Topology, i: usize, r: usize, has_plan_nics: bool) -> Option<String> {
    let rails = t.rails_n();
    if has_plan_nics {
        return t.planned[i * rails + r].1.clone();
    }
    if rails < 3 {
        return None;
    }
    let others: Vec<&str> = (0..rails)
        .filter(|&r2| r2 != r)
        .filter_map(|r2| t.found[i * rails + r2].as_ref()?.port.as_deref())
        .collect();
    mode(others.iter().copied())
        .filter(|m| others.iter().filter(|o| *o == m).count() >= 2)
        .map(String::from)
}

/// How many NICs' cables the checks compared: `leaves` (swap and wrong leaf: discovery
/// found the NIC and the plan or the fabric's regularity names its leaf) and `ports`
/// (wrong port: on that leaf, with a port to compare and a name of the port to compare it
/// with). A check that compared no NIC judged nothing: MISSING, not PASS.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Compared {
    pub leaves: usize,
    pub ports: usize,
}

/// Counts what `check` compared (the same rules, NIC by NIC).
pub fn compared(t: &Topology, plan: Option<&FabricPlan>) -> Compared {
    let has_plan_nics = plan.is_some_and(|p| !p.nic.is_empty());
    let rails = t.rails_n();
    let mut c = Compared::default();
    for i in 0..t.nodes.len() {
        for r in 0..rails {
            let Some(f) = &t.found[i * rails + r] else {
                continue;
            };
            let want = expected_leaf(t, i, r, has_plan_nics);
            if want == NONE {
                continue;
            }
            c.leaves += 1;
            let on_leaf = t.attach[i * rails + r] == want;
            let port = expected_port(t, i, r, has_plan_nics);
            if on_leaf && port.is_some_and(|w| f.port.is_some() || names_port(f, &w)) {
                c.ports += 1;
            }
        }
    }
    c
}

/// Right leaf, wrong port: against `expected_port`.
fn wrong_port(
    t: &Topology,
    i: usize,
    r: usize,
    want: u32,
    has_plan_nics: bool,
    against: String,
) -> Option<Diff> {
    let rails = t.rails_n();
    let f = t.found[i * rails + r].as_ref()?;
    let w = expected_port(t, i, r, has_plan_nics)?;
    if names_port(f, &w) {
        return None;
    }
    // A port id that names no port (an address) is not compared: `ports_not_compared`.
    let p = f.port.as_ref()?;
    let at = t.attach[i * rails + r];
    let alias = described(f).map(|d| format!(" ({d})")).unwrap_or_default();
    Some(Diff {
        kind: DiffKind::WrongPort,
        item: format!("{} {}", t.nodes[i], t.nic_name(i as u32, r as u32)),
        expected: format!("{} port {w}", t.switch_name(want)),
        found: format!("{} port {p}{alias}", t.switch_name(at)),
        against,
        what: DiffKind::WrongPort.what(),
        node: i as u32,
        rails: vec![r as u32],
        switches: vec![t.switch_name(at).into()],
    })
}

/// The discovered links, switch-to-switch apart from host links (a host port in a
/// discovered fabric carries the host's description, `node nic`).
fn split_links(t: &Topology, links: &[FabricLink]) -> (Vec<LinkLine>, Vec<LinkLine>) {
    let is_switch = |name: &str| !name.contains(' ') && !t.node_index.contains_key(name);
    let mut sw_links = Vec::new();
    let mut host_links = Vec::new();
    for l in links {
        let item = format!("{}[{}] - {}[{}]", l.a_name, l.a_port, l.b_name, l.b_port);
        if is_switch(&l.a_name) && is_switch(&l.b_name) {
            sw_links.push((item, l.width.clone(), l.speed.clone()));
        } else {
            host_links.push((item, l.width.clone(), l.speed.clone()));
        }
    }
    (sw_links, host_links)
}

/// Switch links: counts per switch pair, against the plan or the leaves' common count.
fn link_counts(t: &Topology, plan: Option<&FabricPlan>, links: &[FabricLink]) -> Vec<Diff> {
    let is_switch = |name: &str| !name.contains(' ') && !t.node_index.contains_key(name);
    let mut have: BTreeMap<(String, String), u32> = BTreeMap::new();
    for l in links
        .iter()
        .filter(|l| is_switch(&l.a_name) && is_switch(&l.b_name))
    {
        let k = if l.a_name <= l.b_name {
            (l.a_name.clone(), l.b_name.clone())
        } else {
            (l.b_name.clone(), l.a_name.clone())
        };
        *have.entry(k).or_default() += 1;
    }
    let planned = plan.filter(|p| !p.link.is_empty());
    let want = match planned {
        Some(p) => p.link_counts(),
        None => regular_link_counts(t, &have),
    };
    let against = if planned.is_some() {
        "plan"
    } else {
        "regularity"
    };
    let keys: BTreeSet<&(String, String)> = want.keys().chain(have.keys()).collect();
    let mut out = Vec::new();
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
    out
}

/// Regularity: each leaf has, to each upper switch, what most leaves have.
fn regular_link_counts(
    t: &Topology,
    have: &BTreeMap<(String, String), u32>,
) -> BTreeMap<(String, String), u32> {
    let uppers: BTreeSet<&String> = have
        .keys()
        .flat_map(|(a, b)| [a, b])
        .filter(|n| match t.switch_index.get(*n) {
            Some(&s) => t.switches[s as usize].tier != Tier::Leaf || !t.attach.contains(&s),
            None => true,
        })
        .collect();
    let leaves: BTreeSet<&String> = have
        .keys()
        .flat_map(|(a, b)| [a, b])
        .filter(|n| !uppers.contains(n))
        .collect();
    let key = |l: &String, u: &String| {
        if l <= u {
            (l.clone(), u.clone())
        } else {
            (u.clone(), l.clone())
        }
    };
    let mut w = BTreeMap::new();
    for u in &uppers {
        let mut m: BTreeMap<u32, usize> = BTreeMap::new();
        for l in &leaves {
            *m.entry(have.get(&key(l, u)).copied().unwrap_or(0))
                .or_default() += 1;
        }
        let modal = m.into_iter().max_by_key(|x| (x.1, x.0)).map_or(0, |x| x.0);
        if modal > 0 {
            for l in &leaves {
                w.insert(key(l, u), modal);
            }
        }
    }
    w
}

/// Host links as the NICs' neighbours saw them (width and speed where they say).
fn neighbour_links(t: &Topology) -> Vec<LinkLine> {
    let rails = t.rails_n();
    let mut host_links = Vec::new();
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
    host_links
}
