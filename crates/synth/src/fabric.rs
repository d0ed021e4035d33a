//! Synthetic rail-optimised leaf-spine fabrics (development only): G groups of N nodes
//! with R rails (NIC r of every node of group g on leaf `leaf-r<r>-g<g>`, port
//! `swp<i+1>`), S spines linked once to every leaf, racks of nodes inside each group; the
//! plan of it, each NIC's LLDP neighbour, the fabric as ibnetdiscover would list it, and
//! the per-direction bandwidth of every same-rail pair, with faults of every kind the
//! structure localiser names placed at random from a seed. Names follow
//! tests/fabric/simfabric.sh. Small fabrics are written as documents (bidirectional rows
//! with per-direction figures); the 1024-node one stays a compact matrix (8.4 million
//! directed pairs) for the scale benchmark.

use results::discovery::{FabricDiscovery, FabricLink, Neighbor};
use results::fabric_plan::{FabricPlan, PlanLink, PlanNic, PlanNode, PlanSwitch, Tier};
use results::{
    BandwidthResult, BandwidthSummary, DirectionFigures, Document, FlowFigures, Pair, Peer,
    TestResult,
};

use crate::Rng;

/// The shape of the fabric.
#[derive(Debug, Clone)]
pub struct FabricSpec {
    pub groups: u32,
    pub nodes_per_group: u32,
    pub rails: u32,
    pub spines: u32,
    /// Nodes per rack (racks never span groups).
    pub rack_nodes: u32,
    pub base_gbit: f64,
    /// Spread of healthy values (fraction; keep it well inside the profile's bound).
    pub jitter: f64,
    pub seed: u64,
    /// Each uplink's rate over a NIC's, when the plan declares rates (`None`: it declares
    /// none). Below 1 the fabric is one where a flow across the spines cannot reach the
    /// NIC's rate: cells between planned groups come out at that share.
    pub uplink_share: Option<f64>,
    /// Mixed into the ECMP hash that puts a cross-group pair on a spine (0: the fixed
    /// pattern). A real fabric's hash takes the flows' ports, so which pairs a bad uplink
    /// catches changes from run to run; tests vary this to cover such patterns.
    pub ecmp_salt: u64,
    /// Cells measured over TCP: a direction's ACKs come back on a path of their own (the
    /// reverse 5-tuple hashes apart), and a cell is slow when its data or its ACKs cross
    /// the bad spine: about three cells in four under one bad uplink of two spines, as
    /// the simulated fabric shows. Off: one path a pair, both ways.
    pub tcp_acks: bool,
}

impl FabricSpec {
    pub fn new(groups: u32, nodes_per_group: u32, rails: u32, spines: u32) -> Self {
        FabricSpec {
            groups,
            nodes_per_group,
            rails,
            spines,
            rack_nodes: (nodes_per_group / 2).max(1),
            base_gbit: 100.0,
            jitter: 0.03,
            seed: 1,
            uplink_share: None,
            ecmp_salt: 0,
            tcp_acks: false,
        }
    }
    pub fn nodes(&self) -> u32 {
        self.groups * self.nodes_per_group
    }
    pub fn node(&self, i: u32) -> String {
        format!("g{}n{}", i / self.nodes_per_group, i % self.nodes_per_group)
    }
    pub fn group_of(&self, i: u32) -> u32 {
        i / self.nodes_per_group
    }
    pub fn leaf(&self, rail: u32, group: u32) -> String {
        format!("leaf-r{rail}-g{group}")
    }
    pub fn rack_of(&self, i: u32) -> u32 {
        let g = self.group_of(i);
        let per_group = self.nodes_per_group.div_ceil(self.rack_nodes);
        g * per_group + (i % self.nodes_per_group) / self.rack_nodes
    }
    pub fn rack_name(&self, k: u32) -> String {
        format!("rack{k:02}")
    }
}

/// A fault placed in the fabric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Every link of the leaf, inside and across its group.
    Leaf {
        rail: u32,
        group: u32,
    },
    /// The leaf's ports run at `share` of the NICs' rate (a rate limit, not a loss: a cell
    /// through it reaches the lesser of that and what the uplinks let it), so across
    /// uplinks slower than that the leaf cannot show.
    SlowLeaf {
        rail: u32,
        group: u32,
        share: f64,
    },
    /// The leaf's uplinks: its links across groups.
    Uplinks {
        rail: u32,
        group: u32,
    },
    /// One uplink of the leaf (to `spine`): the cross-group pairs touching the leaf that
    /// ECMP hashes onto that spine. With two groups it looks like a bad spine.
    Uplink {
        rail: u32,
        group: u32,
        spine: u32,
    },
    /// One spine's port(s) of a rail: the cross-group pairs ECMP hashes onto it.
    SpineLayer {
        rail: u32,
        spine: u32,
    },
    /// Every link of the rack's nodes, every rail.
    Rack {
        rack: u32,
    },
    Node {
        node: u32,
    },
    Nic {
        node: u32,
        rail: u32,
    },
    /// Sends slowly to every peer on one rail.
    Tx {
        node: u32,
        rail: u32,
    },
    /// Receives slowly from every peer on one rail.
    Rx {
        node: u32,
        rail: u32,
    },
    /// Both directions of one link.
    Link {
        a: u32,
        b: u32,
        rail: u32,
    },
    /// One direction only.
    OneWay {
        from: u32,
        to: u32,
        rail: u32,
    },
    /// ECMP: one of the pair's four flows on a bad path, both directions.
    Path {
        a: u32,
        b: u32,
        rail: u32,
    },
    /// The node's cables of two rails swapped (discovery shows it; both rails slow).
    CableSwap {
        node: u32,
        r1: u32,
        r2: u32,
    },
    /// The NIC plugged into another group's leaf (discovery only).
    WrongLeaf {
        node: u32,
        rail: u32,
        group: u32,
    },
    /// The NIC on an unplanned port of its leaf (discovery only).
    WrongPort {
        node: u32,
        rail: u32,
    },
    /// The leaf's link to a spine absent from the discovered fabric.
    MissingLink {
        rail: u32,
        group: u32,
        spine: u32,
    },
    /// The leaf's link to a spine trained at 1x.
    Downgraded {
        rail: u32,
        group: u32,
        spine: u32,
    },
}

impl Fault {
    /// (kind, name) the localiser should print for it.
    pub fn expected(&self, s: &FabricSpec) -> (String, String) {
        let nic = |n: u32, r: u32| format!("{} rail{r}", s.node(n));
        let (k, n) = match self {
            Fault::Leaf { rail, group } | Fault::SlowLeaf { rail, group, .. } => {
                ("leaf", s.leaf(*rail, *group))
            }
            // With two groups every cross-group pair touches both leaves of the rail: one
            // uplink or all of either leaf is the rail's cross-leaf part, the spine layer.
            Fault::Uplinks { rail, .. } | Fault::Uplink { rail, .. } if s.groups == 2 => {
                ("spine_layer", format!("spines of rail{rail}"))
            }
            Fault::Uplinks { rail, group } | Fault::Uplink { rail, group, .. } => {
                ("leaf_uplinks", s.leaf(*rail, *group))
            }
            Fault::SpineLayer { rail, .. } => ("spine_layer", format!("spines of rail{rail}")),
            Fault::Rack { rack } => ("rack", s.rack_name(*rack)),
            Fault::Node { node } => ("node", s.node(*node)),
            Fault::Nic { node, rail } => ("nic", nic(*node, *rail)),
            Fault::Tx { node, rail } => ("nic_tx", nic(*node, *rail)),
            Fault::Rx { node, rail } => ("nic_rx", nic(*node, *rail)),
            Fault::Link { a, b, rail } => (
                "link",
                format!("{} - {}", nic(*a.min(b), *rail), nic(*a.max(b), *rail)),
            ),
            Fault::OneWay { from, to, rail } => (
                "one_way",
                format!("{} -> {}", nic(*from, *rail), nic(*to, *rail)),
            ),
            Fault::Path { a, b, rail } => (
                "path",
                format!("{} - {}", nic(*a.min(b), *rail), nic(*a.max(b), *rail)),
            ),
            Fault::CableSwap { node, r1, r2 } => (
                "cable_swap",
                format!(
                    "{} rail{} and rail{}",
                    s.node(*node),
                    r1.min(r2),
                    r1.max(r2)
                ),
            ),
            Fault::WrongLeaf { node, rail, .. } => ("wrong_leaf", nic(*node, *rail)),
            Fault::WrongPort { node, rail } => ("wrong_port", nic(*node, *rail)),
            Fault::MissingLink { rail, group, spine } => {
                let (a, b) = (s.leaf(*rail, *group), format!("spine{spine}"));
                (
                    "missing_link",
                    format!("{} - {}", a.clone().min(b.clone()), a.max(b)),
                )
            }
            Fault::Downgraded { rail, group, spine } => (
                "link_downgraded",
                format!(
                    "{}[{}] - spine{spine}[{}]",
                    s.leaf(*rail, *group),
                    s.nodes_per_group + 1 + spine,
                    rail * s.groups + group + 1
                ),
            ),
        };
        (k.to_string(), n)
    }
}

/// `count` faults of mixed kinds at random places that do not hide each other: leaf,
/// uplink and spine faults on distinct rails; end faults on other rails; each node,
/// rack and leaf used once.
pub fn random_faults(s: &FabricSpec, count: usize, seed: u64) -> Vec<Fault> {
    let mut rng = Rng::new(seed ^ 0x5eed_f00d);
    let mut pick = |n: u32| (rng.next_u64() % n.max(1) as u64) as u32;
    let mut out = Vec::new();
    let rail_level = (s.rails / 2).max(1);
    let mut used_nodes = std::collections::BTreeSet::new();
    let mut used_groups = std::collections::BTreeSet::new();
    let mut rack_nodes = std::collections::BTreeSet::new();
    let kinds = 16;
    let mut k = (seed % kinds) as u32;
    let mut rail_next = 0;
    let mut tries = 0;
    while out.len() < count && tries < 10_000 {
        tries += 1;
        k = (k + 1) % kinds as u32;
        // End faults live on the rails above the rail-level ones.
        let end_rail = |p: u32| rail_level + p % (s.rails - rail_level).max(1);
        let free_node = |p: u32,
                         used: &std::collections::BTreeSet<u32>,
                         groups: &std::collections::BTreeSet<u32>| {
            let n = p % s.nodes();
            (!used.contains(&n) && !groups.contains(&s.group_of(n))).then_some(n)
        };
        let f = match k {
            0..=2 if rail_next < rail_level && s.rails > 1 => {
                let group = pick(s.groups);
                // A rack fault already slows every link of its nodes on every rail: where
                // the rack holds nodes of this group (a group of 16 is one rack), the
                // leaf's cells would all be bad already and nothing could tell it apart.
                if rack_nodes.iter().any(|&n| s.group_of(n) == group) {
                    continue;
                }
                let rail = rail_next;
                rail_next += 1;
                match k {
                    0 => Fault::Leaf { rail, group },
                    // With two groups the uplinks of either leaf carry the same pairs.
                    1 if s.groups < 3 => Fault::Leaf { rail, group },
                    1 => Fault::Uplinks { rail, group },
                    // Beside other faults, a few dozen pairs are too few to tell a bad
                    // spine's scatter from a few bad links.
                    _ if s.nodes() < 32 && s.groups >= 3 => Fault::Uplinks { rail, group },
                    _ if s.nodes() < 32 => Fault::Leaf { rail, group },
                    _ => Fault::SpineLayer {
                        rail,
                        spine: pick(s.spines),
                    },
                }
            }
            0..=2 => continue,
            3 => {
                let n = pick(s.nodes());
                let rack = s.rack_of(n);
                let members: Vec<u32> = (0..s.nodes()).filter(|&i| s.rack_of(i) == rack).collect();
                if members.iter().any(|m| used_nodes.contains(m))
                    || used_groups.contains(&s.group_of(n))
                {
                    continue;
                }
                used_nodes.extend(members.iter().copied());
                rack_nodes.extend(members);
                Fault::Rack { rack }
            }
            4..=11 => {
                let (p1, p2, p3) = (pick(u32::MAX), pick(u32::MAX), pick(u32::MAX));
                let Some(a) = free_node(p1, &used_nodes, &used_groups) else {
                    continue;
                };
                let rail = end_rail(p3);
                let two = matches!(k, 8..=10);
                let b = if two {
                    let Some(b) = free_node(p2, &used_nodes, &used_groups).filter(|&b| b != a)
                    else {
                        continue;
                    };
                    used_nodes.insert(b);
                    b
                } else {
                    0
                };
                used_nodes.insert(a);
                match k {
                    4 => Fault::Node { node: a },
                    5 => Fault::Nic { node: a, rail },
                    6 => Fault::Tx { node: a, rail },
                    7 => Fault::Rx { node: a, rail },
                    8 => Fault::Link { a, b, rail },
                    9 => Fault::OneWay {
                        from: a,
                        to: b,
                        rail,
                    },
                    10 => Fault::Path { a, b, rail },
                    _ => {
                        if s.rails - rail_level < 2 {
                            continue;
                        }
                        let r1 = rail;
                        let r2 = rail_level + (r1 - rail_level + 1) % (s.rails - rail_level);
                        Fault::CableSwap { node: a, r1, r2 }
                    }
                }
            }
            12 | 13 => {
                let Some(a) = free_node(pick(u32::MAX), &used_nodes, &used_groups) else {
                    continue;
                };
                used_nodes.insert(a);
                let rail = end_rail(pick(u32::MAX));
                if k == 12 && s.groups > 1 {
                    Fault::WrongLeaf {
                        node: a,
                        rail,
                        group: (s.group_of(a) + 1) % s.groups,
                    }
                } else {
                    Fault::WrongPort { node: a, rail }
                }
            }
            _ => {
                let (rail, group, spine) =
                    (end_rail(pick(u32::MAX)), pick(s.groups), pick(s.spines));
                if out.iter().any(|f| matches!(f, Fault::MissingLink { rail: r, group: g, .. } | Fault::Downgraded { rail: r, group: g, .. } if *r == rail && *g == group)) {
                    continue;
                }
                if k == 14 {
                    Fault::MissingLink { rail, group, spine }
                } else {
                    Fault::Downgraded { rail, group, spine }
                }
            }
        };
        if let Fault::Leaf { group, .. } | Fault::Uplinks { group, .. } = &f {
            used_groups.insert(*group);
        }
        out.push(f);
    }
    out
}

/// The native plan of the fabric (as meant: no fault).
pub fn plan(s: &FabricSpec) -> FabricPlan {
    let mut p = FabricPlan {
        version: 1,
        name: Some(format!(
            "synthetic {}x{}x{} rails, {} spines",
            s.groups, s.nodes_per_group, s.rails, s.spines
        )),
        ..Default::default()
    };
    for g in 0..s.groups {
        for r in 0..s.rails {
            p.switch.push(PlanSwitch {
                name: s.leaf(r, g),
                tier: Tier::Leaf,
                group: Some(format!("g{g}")),
                rail: Some(r),
                rack: None,
                label: None,
            });
            for k in 0..s.spines {
                p.link.push(PlanLink {
                    a: s.leaf(r, g),
                    b: format!("spine{k}"),
                    count: 1,
                    rate_gbit_s: s.uplink_share.map(|x| x * s.base_gbit),
                });
            }
        }
    }
    for k in 0..s.spines {
        p.switch.push(PlanSwitch {
            name: format!("spine{k}"),
            tier: Tier::Spine,
            group: None,
            rail: None,
            rack: None,
            label: None,
        });
    }
    for i in 0..s.nodes() {
        p.node.push(PlanNode {
            name: s.node(i),
            group: Some(format!("g{}", s.group_of(i))),
            rack: Some(s.rack_name(s.rack_of(i))),
        });
        for r in 0..s.rails {
            p.nic.push(PlanNic {
                node: s.node(i),
                nic: format!("rail{r}"),
                rail: r,
                switch: s.leaf(r, s.group_of(i)),
                port: Some(format!("swp{}", i % s.nodes_per_group + 1)),
                rate_gbit_s: s.uplink_share.map(|_| s.base_gbit),
            });
        }
    }
    p
}

/// Where NIC (node, rail) is plugged as built: leaf and port.
fn as_built(s: &FabricSpec, faults: &[Fault], i: u32, r: u32) -> (String, String) {
    let mut leaf = s.leaf(r, s.group_of(i));
    let mut port = format!("swp{}", i % s.nodes_per_group + 1);
    for f in faults {
        match *f {
            Fault::CableSwap { node, r1, r2 } if node == i && (r == r1 || r == r2) => {
                leaf = s.leaf(if r == r1 { r2 } else { r1 }, s.group_of(i));
            }
            Fault::WrongLeaf { node, rail, group } if node == i && rail == r => {
                leaf = s.leaf(r, group);
                port = format!("swp{}", s.nodes_per_group + 1 + i % s.nodes_per_group);
            }
            Fault::WrongPort { node, rail } if node == i && rail == r => {
                port = format!(
                    "swp{}",
                    s.nodes_per_group + 1 + s.spines + i % s.nodes_per_group
                );
            }
            _ => {}
        }
    }
    (leaf, port)
}

/// Each NIC's LLDP neighbour, as built.
pub fn neighbors(s: &FabricSpec, faults: &[Fault], i: u32) -> Vec<Neighbor> {
    (0..s.rails)
        .map(|r| {
            let (leaf, port) = as_built(s, faults, i, r);
            Neighbor {
                interface: Some(format!("rail{r}")),
                source: "lldp".into(),
                state: "found".into(),
                chassis_id: Some(format!("02:00:00:00:{:02x}:{:02x}", r, s.group_of(i))),
                system_name: Some(leaf),
                port_id: Some(port),
                ..Default::default()
            }
        })
        .collect()
}

/// The leaf-to-spine links as ibnetdiscover would list them, as built.
pub fn fabric(s: &FabricSpec, faults: &[Fault]) -> FabricDiscovery {
    let mut links = Vec::new();
    for g in 0..s.groups {
        for r in 0..s.rails {
            for k in 0..s.spines {
                if faults.iter().any(|f| {
                    *f == Fault::MissingLink {
                        rail: r,
                        group: g,
                        spine: k,
                    }
                }) {
                    continue;
                }
                let thin = faults.iter().any(|f| {
                    *f == Fault::Downgraded {
                        rail: r,
                        group: g,
                        spine: k,
                    }
                });
                links.push(FabricLink {
                    a_guid: format!("0x{:016x}", 0x100 + (r * s.groups + g) as u64),
                    a_name: s.leaf(r, g),
                    a_port: s.nodes_per_group + 1 + k,
                    b_guid: format!("0x{:016x}", 0x9000 + k as u64),
                    b_name: format!("spine{k}"),
                    b_port: r * s.groups + g + 1,
                    width: Some(if thin { "1x" } else { "4x" }.into()),
                    speed: Some("NDR".into()),
                });
            }
        }
    }
    FabricDiscovery {
        source: "ibnetdiscover".into(),
        host: s.node(0),
        state: "found".into(),
        why: None,
        links,
    }
}

/// The compact per-direction matrix: `values[rail][from * n + to]` (NaN on the diagonal)
/// and per-flow figures of the pairs with an ECMP fault.
#[derive(Debug, Clone)]
pub struct Compact {
    pub nodes: Vec<String>,
    pub values: Vec<Vec<f32>>,
    pub flows: Vec<((u32, u32, u32), Vec<f32>)>,
}

fn hash3(a: u32, b: u32, c: u32, salt: u64) -> u64 {
    let mut x = (a as u64) << 42 ^ (b as u64) << 21 ^ c as u64 ^ 0x9e37_79b9_7f4a_7c15 ^ salt;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x
}

/// Whether ECMP puts what `a` sends `b` on rail `r` across `spine` (its data, or with
/// `tcp_acks` its data or its ACKs).
fn on_spine(s: &FabricSpec, r: u32, a: u32, b: u32, spine: u32) -> bool {
    let pick = |x: u32, y: u32| (hash3(x, y, r, s.ecmp_salt) % s.spines as u64) as u32;
    if s.tcp_acks {
        pick(a, b) == spine || pick(b, a) == spine
    } else {
        pick(a.min(b), a.max(b)) == spine
    }
}

/// Bandwidth factor of (rail, from, to) under the faults, and the flows if a path fault.
fn factor(s: &FabricSpec, faults: &[Fault], r: u32, a: u32, b: u32) -> (f64, Option<Vec<f64>>) {
    let (ga, gb) = (s.group_of(a), s.group_of(b));
    let mut f = 1.0f64;
    let mut flows = None;
    for x in faults {
        let hit = match *x {
            Fault::Leaf { rail, group } => rail == r && (ga == group || gb == group),
            Fault::Uplinks { rail, group } => rail == r && ga != gb && (ga == group || gb == group),
            Fault::Uplink { rail, group, spine } => {
                rail == r && ga != gb && (ga == group || gb == group) && on_spine(s, r, a, b, spine)
            }
            Fault::SpineLayer { rail, spine } => {
                rail == r && ga != gb && on_spine(s, r, a, b, spine)
            }
            Fault::Rack { rack } => s.rack_of(a) == rack || s.rack_of(b) == rack,
            Fault::Node { node } => a == node || b == node,
            Fault::Nic { node, rail } => rail == r && (a == node || b == node),
            Fault::Tx { node, rail } => rail == r && a == node,
            Fault::Rx { node, rail } => rail == r && b == node,
            Fault::Link { a: x, b: y, rail } => rail == r && ((a, b) == (x, y) || (a, b) == (y, x)),
            Fault::OneWay { from, to, rail } => rail == r && (a, b) == (from, to),
            Fault::CableSwap { node, r1, r2 } => (r == r1 || r == r2) && (a == node || b == node),
            Fault::Path { a: x, b: y, rail } => {
                if rail == r && ((a, b) == (x, y) || (a, b) == (y, x)) {
                    flows = Some(vec![0.25, 0.25, 0.25, 0.05]);
                    f *= 0.8;
                }
                false
            }
            _ => false,
        };
        if hit {
            f *= 0.3;
        }
    }
    (f, flows)
}

/// The matrix of every same-rail directed pair.
pub fn compact(s: &FabricSpec, faults: &[Fault]) -> Compact {
    let n = s.nodes() as usize;
    let mut rng = Rng::new(s.seed);
    let mut values = Vec::with_capacity(s.rails as usize);
    let mut flows = Vec::new();
    for r in 0..s.rails {
        let mut v = vec![f32::NAN; n * n];
        for a in 0..n as u32 {
            for b in 0..n as u32 {
                if a == b {
                    continue;
                }
                let (mut f, fl) = factor(s, faults, r, a, b);
                if s.group_of(a) != s.group_of(b) {
                    f *= s.uplink_share.unwrap_or(1.0).min(1.0);
                }
                for x in faults {
                    if let Fault::SlowLeaf { rail, group, share } = *x {
                        if rail == r && (s.group_of(a) == group || s.group_of(b) == group) {
                            f = f.min(share);
                        }
                    }
                }
                let noise = 1.0 + s.jitter * (2.0 * rng.unit() - 1.0);
                let bw = s.base_gbit * f * noise;
                v[a as usize * n + b as usize] = bw as f32;
                if let Some(fl) = fl {
                    flows.push((
                        (r, a, b),
                        fl.iter()
                            .map(|x| (x * s.base_gbit * noise) as f32)
                            .collect(),
                    ));
                }
            }
        }
        values.push(v);
    }
    Compact {
        nodes: (0..n as u32).map(|i| s.node(i)).collect(),
        values,
        flows,
    }
}

/// One document: a bidirectional all-pairs `write_bw` sweep over TCP on every rail (one
/// row per pair and rail, each direction counted on its own), hosts with their LLDP
/// neighbours and the discovered fabric.
pub fn document(s: &FabricSpec, faults: &[Fault]) -> Document {
    let c = compact(s, faults);
    let n = s.nodes();
    let mut doc = crate::document("bench-bw", vec![], n * s.rails, vec![]);
    doc.hosts = (0..n)
        .map(|i| {
            let mut h = crate::host(&s.node(i), None);
            h.neighbors = neighbors(s, faults, i);
            h
        })
        .collect();
    doc.fabric = Some(fabric(s, faults));
    let peer = |i: u32, r: u32| Peer {
        rank: Some(i * s.rails + r),
        host: s.node(i),
        device: Some(format!("rail{r}")),
        port: None,
    };
    for r in 0..s.rails {
        for a in 0..n {
            for b in a + 1..n {
                let ab = c.values[r as usize][(a * n + b) as usize] as f64;
                let ba = c.values[r as usize][(b * n + a) as usize] as f64;
                let dir = |f: u32, t: u32, v: f64| DirectionFigures {
                    from: peer(f, r),
                    to: peer(t, r),
                    bw_gbit_s: BandwidthSummary {
                        avg: v,
                        peak: v * 1.02,
                        perftest_peak: None,
                    },
                    msg_rate_mpps: v / 8.0 / 1.048576 / 1000.0 * 1000.0,
                };
                let mut flows = Vec::new();
                for ((fr, f, t), fl) in &c.flows {
                    if *fr == r && ((*f, *t) == (a, b) || (*f, *t) == (b, a)) {
                        for (k, bw) in fl.iter().enumerate() {
                            flows.push(FlowFigures {
                                index: k as u32,
                                src_port: Some(49152 + k as u16),
                                from: Some(peer(*f, r)),
                                bw_gbit_s: *bw as f64,
                                ..Default::default()
                            });
                        }
                    }
                }
                doc.results.push(TestResult::Bandwidth(BandwidthResult {
                    test: "write_bw".into(),
                    transport: "tcp".into(),
                    size_bytes: 1 << 20,
                    iterations: 1000,
                    duration_s: 1.0,
                    bidirectional: true,
                    streams: if flows.is_empty() { 1 } else { 4 },
                    tx_depth: 1,
                    bw_gbit_s: BandwidthSummary {
                        avg: ab + ba,
                        peak: (ab + ba) * 1.02,
                        perftest_peak: None,
                    },
                    pair: Pair {
                        initiator: peer(a, r),
                        responder: peer(b, r),
                        round: None,
                    },
                    complete: true,
                    directions: vec![dir(a, b, ab), dir(b, a, ba)],
                    flows,
                    ..Default::default()
                }));
            }
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rack fault slows every link of its nodes on every rail; a leaf or uplink fault on
    /// a group holding those nodes would be hidden under it. At 16 nodes a group a rack is
    /// a whole group, and seed 29 put a leaf of group 2 under the rack of group 2 (the
    /// scale benchmark then "missed" a leaf no measurement could show).
    #[test]
    fn no_leaf_or_uplink_fault_hides_under_a_rack_fault() {
        let mut s = FabricSpec::new(8, 16, 8, 8);
        s.rack_nodes = 16;
        for seed in 1..=200 {
            let faults = random_faults(&s, 20, seed);
            let racks: Vec<u32> = faults
                .iter()
                .filter_map(|f| match f {
                    Fault::Rack { rack } => Some(*rack),
                    _ => None,
                })
                .collect();
            for f in &faults {
                if let Fault::Leaf { group, .. } | Fault::Uplinks { group, .. } = f {
                    let hidden = (0..s.nodes())
                        .any(|n| s.group_of(n) == *group && racks.contains(&s.rack_of(n)));
                    assert!(!hidden, "seed {seed}: {f:?} under a rack fault: {faults:?}");
                }
            }
        }
    }
}
