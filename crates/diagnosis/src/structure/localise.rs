//! Localisation above the node: the smallest set of parts that explains the bad directed
//! cells of the per-rail matrix, by greedy set cover (after 007, NetBouncer and
//! R-Pingmesh).
//!
//! A cell (rail r, a sends to b) is bad when its bandwidth is under `bw_below_median` of
//! rail r's median; a cell whose per-flow figures are bimodal (some flows slow, others at
//! the rail's rate) is a path fault: ECMP hashed those flows onto a bad path, so no end is
//! blamed for it. Every part a bad cell crosses is a candidate: the sender's transmitter,
//! the receiver's receiver, both NICs, both nodes (and their send or receive side over all
//! rails), both leaves, the leaves' uplinks when it leaves its leaf, the spine layer of
//! the rail, both racks, a cable swap or wrong leaf found by the cabling checks, the link
//! and the one direction of it. Repeatedly the candidate that explains the most bad cells
//! not yet explained, less the good cells that contradict it, is chosen, provided its
//! cells are bad often enough: `suspect_share` for a node, NIC, transmitter or receiver
//! (with enough peers to tell it from its peers), 90% for a part above the node (a leaf,
//! its uplinks, a rack: one part higher up is preferred over many below only when it adds
//! no contradiction). The spine layer of a rail explains scattered cells only: cross-leaf
//! blocks partly bad (ECMP sends a share of the pairs over the bad spine), intra-leaf
//! cells fine. When such scattered cells all touch one leaf of a rail with three or more
//! leaves, they are that leaf's uplinks (one bad uplink: ECMP hashed a share of the
//! leaf's pairs onto it); with two leaves a rail every cross-leaf cell touches both, so
//! one bad uplink, all the uplinks of either leaf and a bad spine are one part, the spine
//! layer, named saying so, whether some or all of the cross cells are bad. A NIC that
//! discovery found on another leaf is its cabling's fault: its cells are no evidence for
//! the uplinks, the spine blocks or its neighbours' own faults. A part is chosen once.
//! Noise within the profile's bounds makes no cell bad, so names nothing.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use serde::Serialize;

use super::observe::Observed;
use super::topology::{Topology, NONE};

/// What a suspect part is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    Leaf(u32),
    Uplinks(u32),
    SpineLayer(u32),
    Rack(u32),
    /// A cabling difference (index into the cabling list) that touches these cells.
    Cabling(u32),
    Node(u32),
    NodeTx(u32),
    NodeRx(u32),
    Nic(u32, u32),
    Tx(u32, u32),
    Rx(u32, u32),
    Link(u32, u32, u32),
    OneWay(u32, u32, u32),
    Path(u32, u32, u32),
}

impl Part {
    /// Above the node: must explain with no more than 10% contradiction.
    fn high(self) -> bool {
        matches!(
            self,
            Part::Leaf(_) | Part::Uplinks(_) | Part::Rack(_) | Part::Cabling(_)
        )
    }
    /// Order among equal scores: discovered cabling faults, then higher parts first.
    fn rank(self) -> u8 {
        match self {
            // A cabling fault discovery saw comes first among equals: it is evidence, not
            // only a pattern.
            Part::Cabling(_) => 0,
            Part::Leaf(_) => 1,
            Part::Uplinks(_) => 2,
            Part::SpineLayer(_) => 3,
            Part::Rack(_) => 4,
            Part::Node(_) => 5,
            Part::NodeTx(_) | Part::NodeRx(_) => 6,
            Part::Nic(..) => 7,
            Part::Tx(..) | Part::Rx(..) => 8,
            Part::Path(..) => 9,
            Part::Link(..) => 10,
            Part::OneWay(..) => 11,
        }
    }
}

/// One chosen part with its evidence.
#[derive(Debug, Clone, Serialize)]
pub struct Pick {
    #[serde(skip)]
    pub part: Part,
    /// Bad cells in its domain (all of them, also those another part explains too).
    pub explains: u32,
    /// Good cells in its domain (for the spine layer: good cells of cross-leaf blocks
    /// with no bad cell at all, which a bad spine would have reached).
    pub contradicted: u32,
    /// Worst bandwidth among its bad cells, and the rail median there.
    pub worst_gbit_s: f64,
    pub median_gbit_s: f64,
}

/// The localiser's inputs beside the matrix.
#[derive(Debug, Clone)]
pub struct Rules {
    pub bw_below_median: f64,
    pub suspect_share: f64,
    pub high_share: f64,
    pub min_links: u32,
    /// (cabling index, node, rails) of cable swaps and wrong leaves.
    pub cabling: Vec<(u32, u32, Vec<u32>)>,
}

/// The outcome: chosen parts, bad cells in all.
#[derive(Debug, Clone, Default)]
pub struct Localisation {
    pub picks: Vec<Pick>,
    pub bad_cells: u32,
    pub cells: u64,
    pub medians: Vec<f64>,
    /// Per rail x from x to: bad (the picture's matrices).
    pub bad: Vec<Vec<bool>>,
    /// Nodes a side of each rail's matrix.
    pub nodes: usize,
}

#[derive(Default, Clone, Copy)]
struct Count {
    tried: u32,
    bad: u32,
}

impl std::ops::Add for Count {
    type Output = Count;
    /// Both domains together (a NIC's sends and receives, a node's rails).
    fn add(self, o: Count) -> Count {
        Count {
            tried: self.tried + o.tried,
            bad: self.bad + o.bad,
        }
    }
}

impl Count {
    fn add(&mut self, bad: bool) {
        self.tried += 1;
        self.bad += u32::from(bad);
    }
}

fn median(v: Vec<f32>) -> f64 {
    quantile(v, 0.5)
}

fn quantile(mut v: Vec<f32>, q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let k = ((v.len() - 1) as f64 * q).round() as usize;
    v.select_nth_unstable_by(k, f32::total_cmp);
    v[k] as f64
}

/// Cross-leaf blocks (leaf pair) -> whether partly bad (a spine's scatter).
type Blocks = HashMap<(u32, u32), bool>;

struct BadCell {
    r: u32,
    a: u32,
    b: u32,
    path: bool,
}

/// Runs the set cover.
pub fn localise(o: &Observed, t: &Topology, rules: &Rules) -> Localisation {
    let n = o.n;
    let rails = o.rails;
    // What a cell can reach as a share of the NIC's rate: below 1 only across the spines
    // where the plan's rates put a slower uplink than the NIC on the way (one ECMP flow
    // takes one uplink). Cells are judged against the reference times that share.
    let expect = |r: usize, a: usize, b: usize| -> f32 {
        if t.uplink_share.is_empty() {
            return 1.0;
        }
        let (la, lb) = (t.leaf(a as u32, r as u32), t.leaf(b as u32, r as u32));
        if la == NONE || lb == NONE || la == lb {
            1.0
        } else {
            t.flow_share(la).min(t.flow_share(lb))
        }
    };
    // Each rail's cells as shares of what they can reach (the values themselves without
    // the plan's rates).
    let scaled: Vec<Vec<f32>> = (0..rails)
        .map(|r| {
            let row = &o.values[r];
            (0..n * n)
                .map(|i| row[i] / expect(r, i / n, i % n))
                .filter(|x| x.is_finite())
                .collect()
        })
        .collect();
    // The reference of a rail: its median, or the whole fabric's 75th percentile when
    // that is higher (a leaf fault, or a few faults together, can hold half of a small
    // fabric's cells; the rails of a rail-optimised fabric run at one rate).
    let all = quantile(scaled.iter().flatten().copied().collect(), 0.75);
    let medians: Vec<f64> = scaled.into_iter().map(|v| median(v).max(all)).collect();
    let nsw = t.switches.len();
    let nrack = t.racks.len();
    // A leaf whose ports are slowed shows across an uplink slower than its NICs only as
    // far as it is slower than that uplink's share: a cell held there anyway says nothing
    // against the leaf when it is no faster than the leaf's own bad cells inside (their
    // median, within the profile's tolerance). Per leaf, that median (NaN: fewer than two).
    // Without such uplinks a slow leaf slows every cell it carries, and nothing is spared.
    // Uplinks slower than the NICs somewhere in the plan: the two rules below apply.
    let slower_uplinks = t.uplink_share.iter().any(|&x| x < 1.0);
    let leaf_level: Vec<f32> = if slower_uplinks {
        let mut inside: Vec<Vec<f32>> = vec![Vec::new(); nsw];
        for (r, m) in medians.iter().enumerate() {
            let lim = (rules.bw_below_median * m) as f32;
            for a in 0..n {
                let la = t.leaf(a as u32, r as u32);
                if la == NONE {
                    continue;
                }
                for b in (0..n).filter(|&b| b != a && t.leaf(b as u32, r as u32) == la) {
                    let v = o.values[r][a * n + b];
                    if v < lim {
                        inside[la as usize].push(v);
                    }
                }
            }
        }
        inside
            .into_iter()
            .map(|v| {
                if v.len() >= 2 {
                    median(v) as f32
                } else {
                    f32::NAN
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let cabling_of: HashMap<(u32, u32), Vec<u32>> = {
        let mut m: HashMap<(u32, u32), Vec<u32>> = HashMap::default();
        for (c, node, rs) in &rules.cabling {
            for &r in rs {
                m.entry((*node, r)).or_default().push(*c);
            }
        }
        m
    };
    // A NIC discovery found on another leaf: its cells cross parts the plan did not put
    // on their way, so they are its cabling's doing, and no evidence about the NIC at the
    // other end.
    let moved = |i: usize, r: usize| cabling_of.contains_key(&(i as u32, r as u32));
    let tolerance = rules.bw_below_median as f32;
    let (mut tx, mut rx) = (
        vec![Count::default(); n * rails],
        vec![Count::default(); n * rails],
    );
    let mut leaf = vec![Count::default(); nsw];
    let mut up = vec![Count::default(); nsw];
    let mut rack = vec![Count::default(); nrack];
    let mut block: HashMap<(u32, u32), Count> = HashMap::default();
    let mut intra_rail = vec![Count::default(); rails];
    // Per NIC (node x rail): its cells inside its leaf, and what it sends and receives,
    // each without the cells whose other end is a moved NIC (the own-fault evidence).
    let mut intra_of = vec![Count::default(); n * rails];
    let (mut own_tx, mut own_rx) = (
        vec![Count::default(); n * rails],
        vec![Count::default(); n * rails],
    );
    let mut bad_list: Vec<BadCell> = Vec::new();
    let mut bad_grid = vec![vec![false; n * n]; rails];
    let mut cells = 0u64;
    // Per-flow bimodality: a slow flow beside one at the rail's rate.
    let bimodal = |r: usize, a: usize, b: usize| -> bool {
        let Some(f) = o.flows.get(&(r as u32, a as u32, b as u32)) else {
            return false;
        };
        let lim =
            (rules.bw_below_median * medians[r] / f.len().max(1) as f64) as f32 * expect(r, a, b);
        let slow = f.iter().filter(|&&x| x < lim).count();
        f.len() >= 2 && slow > 0 && slow < f.len()
    };
    for r in 0..rails {
        let lim = (rules.bw_below_median * medians[r]) as f32;
        let row = &o.values[r];
        for a in 0..n {
            let la = t.leaf(a as u32, r as u32);
            let ka = t.node_rack.get(a).copied().unwrap_or(NONE);
            for b in 0..n {
                let v = row[a * n + b];
                if v.is_nan() {
                    continue;
                }
                cells += 1;
                let bad = v < lim * expect(r, a, b);
                let path = bad && bimodal(r, a, b);
                if bad {
                    bad_grid[r][a * n + b] = true;
                    bad_list.push(BadCell {
                        r: r as u32,
                        a: a as u32,
                        b: b as u32,
                        path,
                    });
                }
                let evidence = !moved(a, r) && !moved(b, r);
                if !path {
                    tx[a * rails + r].add(bad);
                    rx[b * rails + r].add(bad);
                    if evidence {
                        own_tx[a * rails + r].add(bad);
                        own_rx[b * rails + r].add(bad);
                    }
                }
                let lb = t.leaf(b as u32, r as u32);
                let spared = |l: u32| {
                    !bad && la != lb
                        && expect(r, a, b) < 1.0
                        && leaf_level
                            .get(l as usize)
                            .is_some_and(|&level| v * tolerance <= level)
                };
                if la != NONE && !spared(la) {
                    leaf[la as usize].add(bad);
                }
                if lb != NONE && lb != la && !spared(lb) {
                    leaf[lb as usize].add(bad);
                }
                // A moved NIC's cells cross uplinks and make blocks the plan has not
                // (across rails), filling them with the move's own fault: the uplinks'
                // and the spine layer's domains hold the others.
                if la != NONE && lb != NONE && la != lb && evidence {
                    up[la as usize].add(bad);
                    up[lb as usize].add(bad);
                    block.entry((la, lb)).or_default().add(bad);
                } else if la != NONE && la == lb {
                    intra_rail[r].add(bad);
                    if evidence {
                        intra_of[a * rails + r].add(bad);
                        intra_of[b * rails + r].add(bad);
                    }
                }
                let kb = t.node_rack.get(b).copied().unwrap_or(NONE);
                if ka != NONE {
                    rack[ka as usize].add(bad);
                }
                if kb != NONE && kb != ka {
                    rack[kb as usize].add(bad);
                }
            }
        }
    }
    let nic = |i: u32, r: u32| {
        let s = i as usize * rails + r as usize;
        tx[s] + rx[s]
    };
    let sum_rails = |i: u32, f: &dyn Fn(u32, u32) -> Count| {
        (0..rails as u32).fold(Count::default(), |c, r| c + f(i, r))
    };
    // Domain size (tried) and bad total of each candidate.
    let tried_of = |p: Part| -> Count {
        match p {
            Part::Leaf(l) => leaf[l as usize],
            Part::Uplinks(l) => up[l as usize],
            Part::Rack(k) => rack[k as usize],
            Part::Tx(i, r) => tx[i as usize * rails + r as usize],
            Part::Rx(i, r) => rx[i as usize * rails + r as usize],
            Part::Nic(i, r) => nic(i, r),
            Part::NodeTx(i) => sum_rails(i, &|i, r| tx[i as usize * rails + r as usize]),
            Part::NodeRx(i) => sum_rails(i, &|i, r| rx[i as usize * rails + r as usize]),
            Part::Node(i) => sum_rails(i, &nic),
            Part::Cabling(c) => {
                let (_, node, rs) = rules
                    .cabling
                    .iter()
                    .find(|x| x.0 == c)
                    .cloned()
                    .unwrap_or_default();
                rs.iter()
                    .fold(Count::default(), |acc, &r| acc + nic(node, r))
            }
            Part::Link(a, b, r) => {
                let mut c = Count::default();
                for (x, y) in [(a, b), (b, a)] {
                    let v = o.get(r as usize, x as usize, y as usize);
                    if !v.is_nan() {
                        c.add(bad_grid[r as usize][x as usize * n + y as usize]);
                    }
                }
                c
            }
            Part::OneWay(..) | Part::Path(..) | Part::SpineLayer(_) => Count { tried: 1, bad: 1 },
        }
    };
    // Rails whose NICs (those where the plan put them) sit on exactly two leaves.
    let two_leaf_rails: Vec<bool> = (0..rails)
        .map(|r| {
            let leaves: HashSet<u32> = (0..n)
                .filter(|&i| !moved(i, r))
                .map(|i| t.leaf(i as u32, r as u32))
                .filter(|&l| l != NONE)
                .collect();
            leaves.len() == 2
        })
        .collect();
    let two_leaf_rail = |r: u32| two_leaf_rails.get(r as usize).copied().unwrap_or(false);
    let moved_cell =
        |c: &BadCell| moved(c.a as usize, c.r as usize) || moved(c.b as usize, c.r as usize);
    // The candidates of one bad cell (the spine layer is handled apart).
    let members = |c: &BadCell, out: &mut Vec<Part>| {
        out.clear();
        let (r, a, b) = (c.r, c.a, c.b);
        let (la, lb) = (t.leaf(a, r), t.leaf(b, r));
        if la != NONE {
            out.push(Part::Leaf(la));
        }
        if lb != NONE && lb != la {
            out.push(Part::Leaf(lb));
        }
        if la != NONE && lb != NONE && la != lb && !moved_cell(c) && !two_leaf_rail(r) {
            out.push(Part::Uplinks(la));
            out.push(Part::Uplinks(lb));
        }
        let (ka, kb) = (
            t.node_rack.get(a as usize).copied().unwrap_or(NONE),
            t.node_rack.get(b as usize).copied().unwrap_or(NONE),
        );
        if ka != NONE {
            out.push(Part::Rack(ka));
        }
        if kb != NONE && kb != ka {
            out.push(Part::Rack(kb));
        }
        if c.path {
            out.push(Part::Path(a.min(b), a.max(b), r));
            return;
        }
        for e in [(a, r), (b, r)] {
            if let Some(cs) = cabling_of.get(&e) {
                out.extend(cs.iter().map(|&c| Part::Cabling(c)));
            }
        }
        out.extend([
            Part::Node(a),
            Part::Node(b),
            Part::NodeTx(a),
            Part::NodeRx(b),
            Part::Nic(a, r),
            Part::Nic(b, r),
            Part::Tx(a, r),
            Part::Rx(b, r),
            Part::Link(a.min(b), a.max(b), r),
            Part::OneWay(a, b, r),
        ]);
    };
    // Whether a candidate's domain holds a bad cell (the same rule as `members`).
    let contains = |p: Part, c: &BadCell| -> bool {
        let (r, a, b) = (c.r, c.a, c.b);
        let (la, lb) = (t.leaf(a, r), t.leaf(b, r));
        let rk = |i: u32| t.node_rack.get(i as usize).copied().unwrap_or(NONE);
        let pair = (a.min(b), a.max(b));
        match p {
            Part::Leaf(l) => la == l || lb == l,
            Part::Uplinks(l) => {
                la != NONE && lb != NONE && la != lb && (la == l || lb == l) && !moved_cell(c)
            }
            Part::Rack(k) => rk(a) == k || rk(b) == k,
            Part::SpineLayer(_) => false,
            Part::Path(x, y, pr) => c.path && pr == r && pair == (x, y),
            _ if c.path => false,
            Part::Cabling(k) => [(a, r), (b, r)]
                .iter()
                .any(|e| cabling_of.get(e).is_some_and(|v| v.contains(&k))),
            Part::Node(i) => a == i || b == i,
            Part::NodeTx(i) => a == i,
            Part::NodeRx(i) => b == i,
            Part::Nic(i, pr) => pr == r && (a == i || b == i),
            Part::Tx(i, pr) => pr == r && a == i,
            Part::Rx(i, pr) => pr == r && b == i,
            Part::Link(x, y, pr) => pr == r && pair == (x, y),
            Part::OneWay(x, y, pr) => pr == r && (a, b) == (x, y),
        }
    };
    let mut gain: HashMap<Part, u32> = HashMap::default();
    let mut buf = Vec::with_capacity(24);
    for c in &bad_list {
        members(c, &mut buf);
        for &p in &buf {
            *gain.entry(p).or_default() += 1;
        }
    }
    let total: HashMap<Part, u32> = gain.clone();
    let mut covered = vec![false; bad_list.len()];
    let min_peers = rules.min_links.max(2);
    let acceptable = |p: Part, total_bad: u32| -> bool {
        let c = tried_of(p);
        let share = total_bad as f64 / c.tried.max(1) as f64;
        match p {
            Part::OneWay(..) | Part::Path(..) => true,
            Part::Link(..) => total_bad == c.tried,
            Part::Tx(..) | Part::Rx(..) => c.tried >= min_peers && share >= rules.suspect_share,
            Part::Nic(..) | Part::NodeTx(_) | Part::NodeRx(_) | Part::Node(_) => {
                c.tried >= 2 * min_peers && share >= rules.suspect_share
            }
            _ if p.high() => c.tried >= 2 && share >= rules.high_share,
            _ => false,
        }
    };
    let spines_n = t
        .switches
        .iter()
        .filter(|s| s.tier == results::fabric_plan::Tier::Spine)
        .count()
        .max(1);
    let mut picks = Vec::new();
    // A part is chosen once: what it explains is covered by that one pick.
    let mut picked: HashSet<Part> = HashSet::default();
    let in_spine_domain = |c: &BadCell, blocks_ok: &HashMap<(u32, u32), bool>| -> bool {
        let (la, lb) = (t.leaf(c.a, c.r), t.leaf(c.b, c.r));
        la != NONE && lb != NONE && la != lb && blocks_ok.get(&(la, lb)).copied().unwrap_or(false)
    };
    loop {
        // Spine layers: on each rail, cross-leaf blocks partly bad (not yet explained).
        let mut unexplained: HashMap<(u32, u32), u32> = HashMap::default();
        let mut intra_left = vec![0u32; rails];
        for (k, c) in bad_list.iter().enumerate() {
            if covered[k] {
                continue;
            }
            let (la, lb) = (t.leaf(c.a, c.r), t.leaf(c.b, c.r));
            if la != NONE && lb != NONE && la != lb {
                *unexplained.entry((la, lb)).or_default() += 1;
            } else if la != NONE {
                intra_left[c.r as usize] += 1;
            }
        }
        let mut spine_best: Option<(Part, u32, Blocks, u32)> = None;
        for r in 0..rails as u32 {
            if picked.contains(&Part::SpineLayer(r)) {
                continue;
            }
            let blocks: Vec<(&(u32, u32), &Count)> = block
                .iter()
                .filter(|((la, _), _)| {
                    t.switches[*la as usize].rail == r || t.leaf_rail_of(*la) == r
                })
                .collect();
            if blocks.len() < 2 {
                continue;
            }
            // ECMP scatters a bad spine's pairs over many nodes; one node's (or a few
            // nodes') links are that node's fault, not a spine's.
            let mut per_node: HashMap<u32, u32> = HashMap::default();
            let mut per_leaf: HashMap<u32, u32> = HashMap::default();
            let mut in_domain = 0u32;
            for (k, c) in bad_list.iter().enumerate() {
                if covered[k] || c.r != r {
                    continue;
                }
                let (la, lb) = (t.leaf(c.a, c.r), t.leaf(c.b, c.r));
                if la != NONE && lb != NONE && la != lb {
                    in_domain += 1;
                    *per_node.entry(c.a).or_default() += 1;
                    *per_node.entry(c.b).or_default() += 1;
                    *per_leaf.entry(la).or_default() += 1;
                    *per_leaf.entry(lb).or_default() += 1;
                }
            }
            // Nodes that are their own fault (bad on `suspect_share` of their own cells,
            // of those they send or of those they receive, and inside their leaf too: a
            // NIC's, transmitter's or receiver's fault slows those, a spine's does not) at
            // an end of half the cells or more leave no scatter to explain: two bad NICs
            // on one leaf of 16 look like one bad uplink of 8 otherwise. (A node that is
            // not its own fault can be the end of most ECMP-hashed pairs through a bad
            // uplink when a group has few nodes.)
            // A moved NIC is its cabling's fault; the others are judged on the cells
            // whose other end stayed where the plan put it (a cell with a moved NIC is
            // bad for the move's sake, inside the leaf too).
            let mostly_bad =
                |c: Count| c.tried > 0 && c.bad as f64 >= rules.suspect_share * c.tried as f64;
            let by_own: u32 = per_node
                .iter()
                .filter(|(&i, _)| {
                    let s = i as usize * rails + r as usize;
                    let (stx, srx, inside) = (own_tx[s], own_rx[s], intra_of[s]);
                    moved(i as usize, r as usize)
                        || ((mostly_bad(stx + srx) || mostly_bad(stx) || mostly_bad(srx))
                            && (inside.tried == 0 || inside.bad > 0))
                })
                .map(|(_, &v)| v)
                .sum();
            if by_own * 2 > in_domain {
                continue;
            }
            // With three or more leaves on the rail, scattered cells that (nearly) all
            // touch one leaf are that leaf's uplinks, partly bad: ECMP hashed a share of
            // its cross-group pairs onto the bad uplink. With two leaves every cross-leaf
            // cell touches both, and a bad uplink of either looks like a bad spine.
            let leaves_on_rail: std::collections::BTreeSet<u32> =
                blocks.iter().map(|((la, _), _)| *la).collect();
            let one_leaf = (leaves_on_rail.len() >= 3)
                .then(|| {
                    per_leaf
                        .iter()
                        .filter(|(l, &v)| {
                            v as f64 >= rules.high_share * in_domain as f64
                                && !picked.contains(&Part::Uplinks(**l))
                        })
                        .max_by_key(|(l, &v)| (v, std::cmp::Reverse(**l)))
                        .map(|(l, _)| *l)
                })
                .flatten();
            // With two leaves on the rail every cross-leaf cell touches both: one bad
            // uplink, all the uplinks of either leaf and a bad spine slow the same pairs,
            // some or all of them (over TCP a cell is slow when its data or its ACKs cross
            // a bad uplink: three cells in four with two spines, and a small block can come
            // out all bad; stop 46's CI run: 11 of 12, then 22 of 24). Every block with bad
            // cells is the rail's cross-leaf part, which no leaf's uplinks can be told from.
            let two_leaves = two_leaf_rail(r);
            let mut ok = HashMap::default();
            let mut partial = 0;
            let mut gain_r = 0;
            let mut clean_good = 0;
            let mut considered = 0;
            for (k, c) in &blocks {
                let touches = one_leaf.is_none_or(|l| k.0 == l || k.1 == l);
                if !touches {
                    continue;
                }
                considered += 1;
                let u = unexplained.get(k).copied().unwrap_or(0);
                let frac = u as f64 / c.tried.max(1) as f64;
                // Partly bad: some pairs of the block, not (nearly) all of them, which
                // is the leaf's or its uplinks' pattern. For one leaf's uplinks every
                // block through the leaf counts, whole or partly bad: with few nodes a
                // group, ECMP can hash all of a small block's pairs onto the bad uplink.
                let is_partial =
                    u > 0 && (one_leaf.is_some() || two_leaves || frac < rules.high_share);
                if is_partial {
                    partial += 1;
                    gain_r += u;
                }
                if c.bad == 0 {
                    clean_good += c.tried;
                }
                ok.insert(**k, is_partial);
            }
            let intra_ok =
                intra_left[r as usize] as f64 <= 0.1 * intra_rail[r as usize].tried.max(1) as f64;
            // One bad uplink of S hashes about 1/S of the leaf's cross-group pairs onto
            // itself: a few stray cells through the leaf (a path fault, a one-way link)
            // are not that, so a quarter of that share at least.
            let enough_for_an_uplink = || {
                let tried: u32 = blocks
                    .iter()
                    .filter(|(k, _)| one_leaf.is_some_and(|l| k.0 == l || k.1 == l))
                    .map(|(_, c)| c.tried)
                    .sum();
                gain_r as f64 >= 0.25 * tried as f64 / spines_n as f64
            };
            let pattern = if one_leaf.is_some() {
                enough_for_an_uplink()
            } else {
                partial * 2 >= considered
            };
            if pattern && intra_ok && gain_r > 0 && spine_best.as_ref().is_none_or(|b| gain_r > b.1)
            {
                let part = one_leaf.map_or(Part::SpineLayer(r), Part::Uplinks);
                spine_best = Some((part, gain_r, ok, clean_good));
            }
        }
        let mut best: Option<(Part, i64)> = None;
        for (&p, &g) in &gain {
            if g == 0 || picked.contains(&p) || !acceptable(p, total[&p]) {
                continue;
            }
            let c = tried_of(p);
            let score = g as i64 - (c.tried - total[&p].min(c.tried)) as i64;
            if best.is_none_or(|(bp, bs)| {
                score > bs || (score == bs && (p.rank(), p) < (bp.rank(), bp))
            }) {
                best = Some((p, score));
            }
        }
        let spine_pick = match (&spine_best, best) {
            (Some(s), Some((_, bs))) if s.1 as i64 > bs => Some(s),
            (Some(s), None) => Some(s),
            _ => None,
        };
        let (part, domain_ok): (Part, Option<Blocks>) = if let Some((p, _, ok, _)) = spine_pick {
            (*p, Some(ok.clone()))
        } else if let Some((p, _)) = best {
            (p, None)
        } else {
            break;
        };
        let mut explains = 0;
        let mut worst = f64::INFINITY;
        let mut med = f64::NAN;
        for (k, c) in bad_list.iter().enumerate() {
            let inside = match (&domain_ok, part) {
                (Some(ok), Part::SpineLayer(r)) => c.r == r && in_spine_domain(c, ok),
                (Some(ok), Part::Uplinks(_)) => contains(part, c) && in_spine_domain(c, ok),
                _ => contains(part, c),
            };
            if !inside {
                continue;
            }
            explains += 1;
            let v = o.get(c.r as usize, c.a as usize, c.b as usize) as f64;
            if v < worst {
                worst = v;
                med = medians[c.r as usize]
                    * f64::from(expect(c.r as usize, c.a as usize, c.b as usize));
            }
            if !covered[k] {
                covered[k] = true;
                members(c, &mut buf);
                for p in &buf {
                    if let Some(g) = gain.get_mut(p) {
                        *g = g.saturating_sub(1);
                    }
                }
            }
        }
        let contradicted = match (part, &domain_ok) {
            (_, Some(_)) => spine_best.map(|s| s.3).unwrap_or(0),
            (p, None) => {
                let c = tried_of(p);
                c.tried.saturating_sub(total[&p])
            }
        };
        picked.insert(part);
        picks.push(Pick {
            part,
            explains,
            contradicted,
            worst_gbit_s: worst,
            median_gbit_s: med,
        });
        if picks.len() > 10_000 {
            break;
        }
    }
    let mut loc = Localisation {
        picks,
        bad_cells: bad_list.len() as u32,
        cells,
        medians,
        bad: bad_grid,
        nodes: n,
    };
    // A misrouted NIC's links cross parts the plan did not put on their way: uplinks
    // slower than the NICs, or a part above the node the set cover found slow.
    let above = loc.picks.iter().any(|p| {
        matches!(
            p.part,
            Part::Leaf(_) | Part::Uplinks(_) | Part::SpineLayer(_)
        )
    });
    if slower_uplinks || above {
        loc.fold_into_cabling(&cabling_of);
    }
    loc.cabling_explains(&rules.cabling);
    loc
}

impl Localisation {
    /// The bad directed cells with an end at `node`'s NICs of `rails`: what a cabling
    /// fault of those NICs touches.
    pub fn bad_touching(&self, node: u32, rails: &[u32]) -> u32 {
        let (n, i) = (self.nodes, node as usize);
        if i >= n {
            return 0;
        }
        rails
            .iter()
            .filter_map(|&r| self.bad.get(r as usize))
            .map(|grid| {
                (0..n)
                    .filter(|&j| j != i)
                    .map(|j| u32::from(grid[i * n + j]) + u32::from(grid[j * n + i]))
                    .sum::<u32>()
            })
            .sum()
    }

    /// A NIC discovery found on another leaf (a swapped cable, a wrong leaf) carries its
    /// links over paths the plan did not mean: across the spines where they should stay
    /// inside the leaf, onto uplinks the sweep's rounds did not budget for them, through
    /// another rail's leaves and uplinks, where the per-rail blocks cannot lay them at a
    /// slow uplink's or spine's door. Where such paths can be slow (uplinks slower than
    /// the NICs, or a part above the node found slow), the slow links and directions that
    /// touch such a NIC are the cabling fault's doing, not parts of their own: each is
    /// folded into that cabling pick (made when the set cover did not choose it). Where
    /// every path keeps up with the NICs, a slow direction of a moved NIC is its own
    /// fault and stays named. A fault of the NIC itself under a fold is told apart once
    /// the cable is put back; the retest after that says.
    fn fold_into_cabling(&mut self, cabling_of: &HashMap<(u32, u32), Vec<u32>>) {
        let mut folded: Vec<(u32, Pick)> = Vec::new();
        self.picks.retain(|p| {
            let (Part::Link(a, b, r) | Part::OneWay(a, b, r) | Part::Path(a, b, r)) = p.part else {
                return true;
            };
            let Some(&k) = [(a, r), (b, r)]
                .iter()
                .find_map(|e| cabling_of.get(e).and_then(|v| v.first()))
            else {
                return true;
            };
            folded.push((k, p.clone()));
            false
        });
        for (k, p) in folded {
            let into = match self.picks.iter().position(|x| x.part == Part::Cabling(k)) {
                Some(i) => &mut self.picks[i],
                None => {
                    self.picks.push(Pick {
                        part: Part::Cabling(k),
                        explains: 0,
                        contradicted: 0,
                        worst_gbit_s: f64::INFINITY,
                        median_gbit_s: f64::NAN,
                    });
                    self.picks.last_mut().expect("just pushed")
                }
            };
            if p.worst_gbit_s < into.worst_gbit_s {
                into.worst_gbit_s = p.worst_gbit_s;
                into.median_gbit_s = p.median_gbit_s;
            }
        }
    }

    /// What a cabling pick explains: every bad cell of its NICs (as any pick counts all
    /// the bad cells of its domain, also those another part explains too).
    fn cabling_explains(&mut self, cabling: &[(u32, u32, Vec<u32>)]) {
        for i in 0..self.picks.len() {
            let Part::Cabling(k) = self.picks[i].part else {
                continue;
            };
            if let Some((_, node, rails)) = cabling.iter().find(|x| x.0 == k) {
                self.picks[i].explains = self.bad_touching(*node, rails);
            }
        }
    }
}

impl Topology {
    /// The rail a leaf serves (from its NICs when the plan did not say).
    pub fn leaf_rail_of(&self, l: u32) -> u32 {
        self.switches.get(l as usize).map_or(NONE, |s| s.rail)
    }
}
