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

/// Runs the set cover: the reference of each rail, the cells counted per candidate, then
/// the candidates chosen one by one; misrouted NICs' links folded into their cabling.
pub fn localise(o: &Observed, t: &Topology, rules: &Rules) -> Localisation {
    let f = Fabric::new(o, t, rules);
    let leaf_level = leaf_levels(&f);
    let tally = Tally::count(&f, &leaf_level);
    let picks = Cover::new(&f, &tally).run();
    let mut loc = Localisation {
        picks,
        bad_cells: tally.bad_list.len() as u32,
        cells: tally.cells,
        medians: f.medians.clone(),
        bad: tally.bad_grid,
        nodes: o.n,
    };
    // A misrouted NIC's links cross parts the plan did not put on their way: uplinks
    // slower than the NICs, or a part above the node the set cover found slow.
    let above = loc.picks.iter().any(|p| {
        matches!(
            p.part,
            Part::Leaf(_) | Part::Uplinks(_) | Part::SpineLayer(_)
        )
    });
    if slower_uplinks(t) || above {
        loc.fold_into_cabling(&f.cabling_of);
    }
    loc.cabling_explains(&rules.cabling);
    loc
}

/// Uplinks slower than the NICs somewhere in the plan.
fn slower_uplinks(t: &Topology) -> bool {
    t.uplink_share.iter().any(|&x| x < 1.0)
}

/// What a cell can reach as a share of the NIC's rate: below 1 only across the spines
/// where the plan's rates put a slower uplink than the NIC on the way (one ECMP flow
/// takes one uplink). Cells are judged against the reference times that share.
fn expected_share(t: &Topology, r: usize, a: usize, b: usize) -> f32 {
    if t.uplink_share.is_empty() {
        return 1.0;
    }
    let (la, lb) = (t.leaf(a as u32, r as u32), t.leaf(b as u32, r as u32));
    if la == NONE || lb == NONE || la == lb {
        1.0
    } else {
        t.flow_share(la).min(t.flow_share(lb))
    }
}

/// The reference of each rail: its median, or the whole fabric's 75th percentile when
/// that is higher (a leaf fault, or a few faults together, can hold half of a small
/// fabric's cells; the rails of a rail-optimised fabric run at one rate). Cells count as
/// shares of what they can reach (the values themselves without the plan's rates).
fn reference_medians(o: &Observed, t: &Topology) -> Vec<f64> {
    let n = o.n;
    let scaled: Vec<Vec<f32>> = (0..o.rails)
        .map(|r| {
            let row = &o.values[r];
            (0..n * n)
                .map(|i| row[i] / expected_share(t, r, i / n, i % n))
                .filter(|x| x.is_finite())
                .collect()
        })
        .collect();
    let all = quantile(scaled.iter().flatten().copied().collect(), 0.75);
    scaled.into_iter().map(|v| median(v).max(all)).collect()
}

/// Per leaf, the median of its own bad cells inside it (NaN: fewer than two); empty
/// where no uplink is slower than the NICs. A leaf whose ports are slowed shows across an
/// uplink slower than its NICs only as far as it is slower than that uplink's share: a
/// cell held there anyway says nothing against the leaf when it is no faster than the
/// leaf's own bad cells inside (within the profile's tolerance). Without such uplinks a
/// slow leaf slows every cell it carries, and nothing is spared.
fn leaf_levels(f: &Fabric) -> Vec<f32> {
    let (o, t) = (f.o, f.t);
    if !slower_uplinks(t) {
        return Vec::new();
    }
    let n = o.n;
    let mut inside: Vec<Vec<f32>> = vec![Vec::new(); t.switches.len()];
    for (r, m) in f.medians.iter().enumerate() {
        let lim = (f.rules.bw_below_median * m) as f32;
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
}

/// What every step reads: the observations, the plan, the profile's rules, each rail's
/// reference, and where discovery found NICs off the plan.
struct Fabric<'a> {
    o: &'a Observed,
    t: &'a Topology,
    rules: &'a Rules,
    medians: Vec<f64>,
    /// (node, rail) -> the cabling differences of that NIC.
    cabling_of: HashMap<(u32, u32), Vec<u32>>,
    /// Rails whose NICs (those where the plan put them) sit on exactly two leaves.
    two_leaf_rails: Vec<bool>,
}

impl<'a> Fabric<'a> {
    fn new(o: &'a Observed, t: &'a Topology, rules: &'a Rules) -> Self {
        let mut cabling_of: HashMap<(u32, u32), Vec<u32>> = HashMap::default();
        for (c, node, rs) in &rules.cabling {
            for &r in rs {
                cabling_of.entry((*node, r)).or_default().push(*c);
            }
        }
        let mut f = Fabric {
            o,
            t,
            rules,
            medians: reference_medians(o, t),
            cabling_of,
            two_leaf_rails: Vec::new(),
        };
        f.two_leaf_rails = (0..o.rails)
            .map(|r| {
                let leaves: HashSet<u32> = (0..o.n)
                    .filter(|&i| !f.moved(i, r))
                    .map(|i| t.leaf(i as u32, r as u32))
                    .filter(|&l| l != NONE)
                    .collect();
                leaves.len() == 2
            })
            .collect();
        f
    }

    fn expect(&self, r: usize, a: usize, b: usize) -> f32 {
        expected_share(self.t, r, a, b)
    }

    /// A NIC discovery found on another leaf: its cells cross parts the plan did not put
    /// on their way, so they are its cabling's doing, and no evidence about the NIC at the
    /// other end.
    fn moved(&self, i: usize, r: usize) -> bool {
        self.cabling_of.contains_key(&(i as u32, r as u32))
    }

    fn moved_cell(&self, c: &BadCell) -> bool {
        self.moved(c.a as usize, c.r as usize) || self.moved(c.b as usize, c.r as usize)
    }

    fn two_leaf_rail(&self, r: u32) -> bool {
        self.two_leaf_rails
            .get(r as usize)
            .copied()
            .unwrap_or(false)
    }

    fn rack(&self, i: u32) -> u32 {
        self.t.node_rack.get(i as usize).copied().unwrap_or(NONE)
    }

    /// Per-flow bimodality: a slow flow beside one at the rail's rate.
    fn bimodal(&self, r: usize, a: usize, b: usize) -> bool {
        let Some(f) = self.o.flows.get(&(r as u32, a as u32, b as u32)) else {
            return false;
        };
        let lim = (self.rules.bw_below_median * self.medians[r] / f.len().max(1) as f64) as f32
            * self.expect(r, a, b);
        let slow = f.iter().filter(|&&x| x < lim).count();
        f.len() >= 2 && slow > 0 && slow < f.len()
    }

    /// The candidates of one bad cell (the spine layer is handled apart).
    fn members(&self, c: &BadCell, out: &mut Vec<Part>) {
        out.clear();
        let (r, a, b) = (c.r, c.a, c.b);
        let (la, lb) = (self.t.leaf(a, r), self.t.leaf(b, r));
        if la != NONE {
            out.push(Part::Leaf(la));
        }
        if lb != NONE && lb != la {
            out.push(Part::Leaf(lb));
        }
        if la != NONE && lb != NONE && la != lb && !self.moved_cell(c) && !self.two_leaf_rail(r) {
            out.push(Part::Uplinks(la));
            out.push(Part::Uplinks(lb));
        }
        let (ka, kb) = (self.rack(a), self.rack(b));
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
            if let Some(cs) = self.cabling_of.get(&e) {
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
    }

    /// Whether a candidate's domain holds a bad cell (the same rule as `members`).
    fn contains(&self, p: Part, c: &BadCell) -> bool {
        let (r, a, b) = (c.r, c.a, c.b);
        let (la, lb) = (self.t.leaf(a, r), self.t.leaf(b, r));
        let pair = (a.min(b), a.max(b));
        match p {
            Part::Leaf(l) => la == l || lb == l,
            Part::Uplinks(l) => {
                la != NONE && lb != NONE && la != lb && (la == l || lb == l) && !self.moved_cell(c)
            }
            Part::Rack(k) => self.rack(a) == k || self.rack(b) == k,
            Part::SpineLayer(_) => false,
            Part::Path(x, y, pr) => c.path && pr == r && pair == (x, y),
            _ if c.path => false,
            Part::Cabling(k) => [(a, r), (b, r)]
                .iter()
                .any(|e| self.cabling_of.get(e).is_some_and(|v| v.contains(&k))),
            Part::Node(i) => a == i || b == i,
            Part::NodeTx(i) => a == i,
            Part::NodeRx(i) => b == i,
            Part::Nic(i, pr) => pr == r && (a == i || b == i),
            Part::Tx(i, pr) => pr == r && a == i,
            Part::Rx(i, pr) => pr == r && b == i,
            Part::Link(x, y, pr) => pr == r && pair == (x, y),
            Part::OneWay(x, y, pr) => pr == r && (a, b) == (x, y),
        }
    }

    /// A bad cell across two leaves whose block a spine pick took as partly bad.
    fn in_spine_domain(&self, c: &BadCell, blocks_ok: &Blocks) -> bool {
        let (la, lb) = (self.t.leaf(c.a, c.r), self.t.leaf(c.b, c.r));
        la != NONE && lb != NONE && la != lb && blocks_ok.get(&(la, lb)).copied().unwrap_or(false)
    }
}

/// Every cell judged and counted in the domains of the candidates it belongs to.
struct Tally {
    /// Per NIC (node x rail): what it sends and receives.
    tx: Vec<Count>,
    rx: Vec<Count>,
    /// Per NIC: its cells inside its leaf, and what it sends and receives, each without
    /// the cells whose other end is a moved NIC (the own-fault evidence).
    intra_of: Vec<Count>,
    own_tx: Vec<Count>,
    own_rx: Vec<Count>,
    leaf: Vec<Count>,
    up: Vec<Count>,
    rack: Vec<Count>,
    block: HashMap<(u32, u32), Count>,
    intra_rail: Vec<Count>,
    bad_list: Vec<BadCell>,
    bad_grid: Vec<Vec<bool>>,
    cells: u64,
}

impl Tally {
    fn count(f: &Fabric, leaf_level: &[f32]) -> Tally {
        let (n, rails) = (f.o.n, f.o.rails);
        let nics = vec![Count::default(); n * rails];
        let mut tally = Tally {
            tx: nics.clone(),
            rx: nics.clone(),
            intra_of: nics.clone(),
            own_tx: nics.clone(),
            own_rx: nics,
            leaf: vec![Count::default(); f.t.switches.len()],
            up: vec![Count::default(); f.t.switches.len()],
            rack: vec![Count::default(); f.t.racks.len()],
            block: HashMap::default(),
            intra_rail: vec![Count::default(); rails],
            bad_list: Vec::new(),
            bad_grid: vec![vec![false; n * n]; rails],
            cells: 0,
        };
        for r in 0..rails {
            let lim = (f.rules.bw_below_median * f.medians[r]) as f32;
            for a in 0..n {
                for b in 0..n {
                    let v = f.o.values[r][a * n + b];
                    if v.is_nan() {
                        continue;
                    }
                    tally.cells += 1;
                    let bad = v < lim * f.expect(r, a, b);
                    let path = bad && f.bimodal(r, a, b);
                    if bad {
                        tally.bad_grid[r][a * n + b] = true;
                        tally.bad_list.push(BadCell {
                            r: r as u32,
                            a: a as u32,
                            b: b as u32,
                            path,
                        });
                    }
                    tally.record(f, leaf_level, (r, a, b), v, bad, path);
                }
            }
        }
        tally
    }

    /// One measured cell into the domains it belongs to.
    fn record(
        &mut self,
        f: &Fabric,
        leaf_level: &[f32],
        (r, a, b): (usize, usize, usize),
        v: f32,
        bad: bool,
        path: bool,
    ) {
        let rails = f.o.rails;
        let t = f.t;
        let evidence = !f.moved(a, r) && !f.moved(b, r);
        if !path {
            self.tx[a * rails + r].add(bad);
            self.rx[b * rails + r].add(bad);
            if evidence {
                self.own_tx[a * rails + r].add(bad);
                self.own_rx[b * rails + r].add(bad);
            }
        }
        let (la, lb) = (t.leaf(a as u32, r as u32), t.leaf(b as u32, r as u32));
        let tolerance = f.rules.bw_below_median as f32;
        let spared = |l: u32| {
            !bad && la != lb
                && f.expect(r, a, b) < 1.0
                && leaf_level
                    .get(l as usize)
                    .is_some_and(|&level| v * tolerance <= level)
        };
        if la != NONE && !spared(la) {
            self.leaf[la as usize].add(bad);
        }
        if lb != NONE && lb != la && !spared(lb) {
            self.leaf[lb as usize].add(bad);
        }
        // A moved NIC's cells cross uplinks and make blocks the plan has not (across
        // rails), filling them with the move's own fault: the uplinks' and the spine
        // layer's domains hold the others.
        if la != NONE && lb != NONE && la != lb && evidence {
            self.up[la as usize].add(bad);
            self.up[lb as usize].add(bad);
            self.block.entry((la, lb)).or_default().add(bad);
        } else if la != NONE && la == lb {
            self.intra_rail[r].add(bad);
            if evidence {
                self.intra_of[a * rails + r].add(bad);
                self.intra_of[b * rails + r].add(bad);
            }
        }
        let (ka, kb) = (f.rack(a as u32), f.rack(b as u32));
        if ka != NONE {
            self.rack[ka as usize].add(bad);
        }
        if kb != NONE && kb != ka {
            self.rack[kb as usize].add(bad);
        }
    }

    fn nic(&self, rails: usize, i: u32, r: u32) -> Count {
        let s = i as usize * rails + r as usize;
        self.tx[s] + self.rx[s]
    }

    /// Domain size (tried) and bad total of each candidate.
    fn tried_of(&self, f: &Fabric, p: Part) -> Count {
        let rails = f.o.rails;
        let slot = |i: u32, r: u32| i as usize * rails + r as usize;
        let sum_rails = |each: &dyn Fn(u32) -> Count| {
            (0..rails as u32).fold(Count::default(), |c, r| c + each(r))
        };
        match p {
            Part::Leaf(l) => self.leaf[l as usize],
            Part::Uplinks(l) => self.up[l as usize],
            Part::Rack(k) => self.rack[k as usize],
            Part::Tx(i, r) => self.tx[slot(i, r)],
            Part::Rx(i, r) => self.rx[slot(i, r)],
            Part::Nic(i, r) => self.nic(rails, i, r),
            Part::NodeTx(i) => sum_rails(&|r| self.tx[slot(i, r)]),
            Part::NodeRx(i) => sum_rails(&|r| self.rx[slot(i, r)]),
            Part::Node(i) => sum_rails(&|r| self.nic(rails, i, r)),
            Part::Cabling(c) => {
                let (_, node, rs) = f
                    .rules
                    .cabling
                    .iter()
                    .find(|x| x.0 == c)
                    .cloned()
                    .unwrap_or_default();
                rs.iter()
                    .fold(Count::default(), |acc, &r| acc + self.nic(rails, node, r))
            }
            Part::Link(a, b, r) => {
                let mut c = Count::default();
                for (x, y) in [(a, b), (b, a)] {
                    let v = f.o.get(r as usize, x as usize, y as usize);
                    if !v.is_nan() {
                        c.add(self.bad_grid[r as usize][x as usize * f.o.n + y as usize]);
                    }
                }
                c
            }
            Part::OneWay(..) | Part::Path(..) | Part::SpineLayer(_) => Count { tried: 1, bad: 1 },
        }
    }
}

/// A rail's spine layer (or one leaf's uplinks) as the set cover's next pick: the bad
/// cells it would explain, the blocks taken as partly bad, and the good cells of blocks
/// with no bad cell (what a bad spine would have reached: its contradiction).
struct SpineCandidate {
    part: Part,
    gain: u32,
    blocks: Blocks,
    clean_good: u32,
}

/// The bad cross-leaf cells of one rail not yet explained, per node and per leaf.
#[derive(Default)]
struct Scatter {
    per_node: HashMap<u32, u32>,
    per_leaf: HashMap<u32, u32>,
    in_domain: u32,
}

/// The greedy set cover's state: each candidate's bad cells not yet explained (`gain`)
/// and in all (`total`), the cells explained, and the picks so far.
struct Cover<'a> {
    f: &'a Fabric<'a>,
    tally: &'a Tally,
    gain: HashMap<Part, u32>,
    total: HashMap<Part, u32>,
    covered: Vec<bool>,
    /// A part is chosen once: what it explains is covered by that one pick.
    picked: HashSet<Part>,
    picks: Vec<Pick>,
    spines_n: usize,
}

impl<'a> Cover<'a> {
    fn new(f: &'a Fabric<'a>, tally: &'a Tally) -> Self {
        let mut gain: HashMap<Part, u32> = HashMap::default();
        let mut buf = Vec::with_capacity(24);
        for c in &tally.bad_list {
            f.members(c, &mut buf);
            for &p in &buf {
                *gain.entry(p).or_default() += 1;
            }
        }
        let spines_n =
            f.t.switches
                .iter()
                .filter(|s| s.tier == results::fabric_plan::Tier::Spine)
                .count()
                .max(1);
        Cover {
            f,
            tally,
            total: gain.clone(),
            gain,
            covered: vec![false; tally.bad_list.len()],
            picked: HashSet::default(),
            picks: Vec::new(),
            spines_n,
        }
    }

    /// Picks until nothing acceptable explains a bad cell left.
    fn run(mut self) -> Vec<Pick> {
        while let Some((part, blocks, contradicted)) = self.next() {
            let mut pick = self.take(part, blocks.as_ref());
            pick.contradicted = contradicted;
            self.picked.insert(part);
            self.picks.push(pick);
            if self.picks.len() > 10_000 {
                break;
            }
        }
        self.picks
    }

    /// The next part: the spine layer (or a leaf's uplinks) when its scatter explains more
    /// than the best other candidate's score, else that candidate; with the blocks of a
    /// spine pick and the good cells that contradict the part.
    fn next(&self) -> Option<(Part, Option<Blocks>, u32)> {
        let spine = self.best_spine();
        let best = self.best_part();
        match (spine, best) {
            (Some(s), Some((_, bs))) if s.gain as i64 > bs => {
                Some((s.part, Some(s.blocks), s.clean_good))
            }
            (Some(s), None) => Some((s.part, Some(s.blocks), s.clean_good)),
            (_, Some((p, _))) => {
                let c = self.tally.tried_of(self.f, p);
                Some((p, None, c.tried.saturating_sub(self.total[&p])))
            }
            (None, None) => None,
        }
    }

    /// Whether a candidate's cells are bad often enough for it: any one-way or path; a
    /// link bad both ways; a transmitter or receiver with enough peers (a NIC or node
    /// twice that) on `suspect_share` of its cells; a part above the node on `high_share`.
    fn acceptable(&self, p: Part, total_bad: u32) -> bool {
        let rules = self.f.rules;
        let min_peers = rules.min_links.max(2);
        let c = self.tally.tried_of(self.f, p);
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
    }

    /// The acceptable candidate with the best score (bad cells it would explain, less
    /// the good cells of its domain); ties to the higher part, then the lower index.
    fn best_part(&self) -> Option<(Part, i64)> {
        let mut best: Option<(Part, i64)> = None;
        for (&p, &g) in &self.gain {
            if g == 0 || self.picked.contains(&p) || !self.acceptable(p, self.total[&p]) {
                continue;
            }
            let c = self.tally.tried_of(self.f, p);
            let score = g as i64 - (c.tried - self.total[&p].min(c.tried)) as i64;
            if best.is_none_or(|(bp, bs)| {
                score > bs || (score == bs && (p.rank(), p) < (bp.rank(), bp))
            }) {
                best = Some((p, score));
            }
        }
        best
    }

    /// The rail whose cross-leaf scatter explains the most bad cells not yet explained
    /// (the first rail among equals).
    fn best_spine(&self) -> Option<SpineCandidate> {
        let (unexplained, intra_left) = self.unexplained();
        let mut best: Option<SpineCandidate> = None;
        for r in 0..self.f.o.rails as u32 {
            if self.picked.contains(&Part::SpineLayer(r)) {
                continue;
            }
            if let Some(s) = self.spine_candidate(r, &unexplained, &intra_left) {
                if best.as_ref().is_none_or(|b| s.gain > b.gain) {
                    best = Some(s);
                }
            }
        }
        best
    }

    /// Bad cells not yet explained: per cross-leaf block, and per rail inside a leaf.
    fn unexplained(&self) -> (HashMap<(u32, u32), u32>, Vec<u32>) {
        let t = self.f.t;
        let mut blocks: HashMap<(u32, u32), u32> = HashMap::default();
        let mut intra_left = vec![0u32; self.f.o.rails];
        for (k, c) in self.tally.bad_list.iter().enumerate() {
            if self.covered[k] {
                continue;
            }
            let (la, lb) = (t.leaf(c.a, c.r), t.leaf(c.b, c.r));
            if la != NONE && lb != NONE && la != lb {
                *blocks.entry((la, lb)).or_default() += 1;
            } else if la != NONE {
                intra_left[c.r as usize] += 1;
            }
        }
        (blocks, intra_left)
    }

    /// Rail `r`'s spine layer, or one of its leaves' uplinks, when the bad cross-leaf
    /// cells not yet explained scatter the way a bad spine or uplink scatters them.
    fn spine_candidate(
        &self,
        r: u32,
        unexplained: &HashMap<(u32, u32), u32>,
        intra_left: &[u32],
    ) -> Option<SpineCandidate> {
        let t = self.f.t;
        let blocks: Vec<(&(u32, u32), &Count)> = self
            .tally
            .block
            .iter()
            .filter(|((la, _), _)| t.switches[*la as usize].rail == r || t.leaf_rail_of(*la) == r)
            .collect();
        if blocks.len() < 2 {
            return None;
        }
        let scatter = self.scatter(r);
        if self.own_faults(r, &scatter) * 2 > scatter.in_domain {
            return None;
        }
        let one_leaf = self.one_leaf(&blocks, &scatter);
        // With two leaves on the rail every cross-leaf cell touches both: one bad
        // uplink, all the uplinks of either leaf and a bad spine slow the same pairs,
        // some or all of them (over TCP a cell is slow when its data or its ACKs cross
        // a bad uplink: three cells in four with two spines, and a small block can come
        // out all bad; stop 46's CI run: 11 of 12, then 22 of 24). Every block with bad
        // cells is the rail's cross-leaf part, which no leaf's uplinks can be told from.
        let two_leaves = self.f.two_leaf_rail(r);
        let mut ok = HashMap::default();
        let (mut partial, mut gain, mut clean_good, mut considered) = (0, 0, 0, 0);
        for (k, c) in &blocks {
            let touches = one_leaf.is_none_or(|l| k.0 == l || k.1 == l);
            if !touches {
                continue;
            }
            considered += 1;
            let u = unexplained.get(k).copied().unwrap_or(0);
            let frac = u as f64 / c.tried.max(1) as f64;
            // Partly bad: some pairs of the block, not (nearly) all of them, which is the
            // leaf's or its uplinks' pattern. For one leaf's uplinks every block through
            // the leaf counts, whole or partly bad: with few nodes a group, ECMP can hash
            // all of a small block's pairs onto the bad uplink.
            let is_partial =
                u > 0 && (one_leaf.is_some() || two_leaves || frac < self.f.rules.high_share);
            if is_partial {
                partial += 1;
                gain += u;
            }
            if c.bad == 0 {
                clean_good += c.tried;
            }
            ok.insert(**k, is_partial);
        }
        let intra_ok = intra_left[r as usize] as f64
            <= 0.1 * self.tally.intra_rail[r as usize].tried.max(1) as f64;
        let pattern = match one_leaf {
            Some(l) => self.enough_for_an_uplink(&blocks, l, gain),
            None => partial * 2 >= considered,
        };
        (pattern && intra_ok && gain > 0).then(|| SpineCandidate {
            part: one_leaf.map_or(Part::SpineLayer(r), Part::Uplinks),
            gain,
            blocks: ok,
            clean_good,
        })
    }

    /// ECMP scatters a bad spine's pairs over many nodes: the bad cross-leaf cells of
    /// rail `r` not yet explained, counted per end node and per end leaf.
    fn scatter(&self, r: u32) -> Scatter {
        let t = self.f.t;
        let mut s = Scatter::default();
        for (k, c) in self.tally.bad_list.iter().enumerate() {
            if self.covered[k] || c.r != r {
                continue;
            }
            let (la, lb) = (t.leaf(c.a, c.r), t.leaf(c.b, c.r));
            if la != NONE && lb != NONE && la != lb {
                s.in_domain += 1;
                *s.per_node.entry(c.a).or_default() += 1;
                *s.per_node.entry(c.b).or_default() += 1;
                *s.per_leaf.entry(la).or_default() += 1;
                *s.per_leaf.entry(lb).or_default() += 1;
            }
        }
        s
    }

    /// The scattered cells' ends that are their own fault. One node's (or a few nodes')
    /// links are that node's fault, not a spine's: bad on `suspect_share` of their own
    /// cells, of those they send or of those they receive, and inside their leaf too (a
    /// NIC's, transmitter's or receiver's fault slows those, a spine's does not). At an
    /// end of half the cells or more they leave no scatter to explain: two bad NICs on one
    /// leaf of 16 look like one bad uplink of 8 otherwise. (A node that is not its own
    /// fault can be the end of most ECMP-hashed pairs through a bad uplink when a group
    /// has few nodes.) A moved NIC is its cabling's fault; the others are judged on the
    /// cells whose other end stayed where the plan put it (a cell with a moved NIC is bad
    /// for the move's sake, inside the leaf too).
    fn own_faults(&self, r: u32, scatter: &Scatter) -> u32 {
        let (rails, tally) = (self.f.o.rails, self.tally);
        let suspect_share = self.f.rules.suspect_share;
        let mostly_bad = |c: Count| c.tried > 0 && c.bad as f64 >= suspect_share * c.tried as f64;
        scatter
            .per_node
            .iter()
            .filter(|(&i, _)| {
                let s = i as usize * rails + r as usize;
                let (stx, srx, inside) = (tally.own_tx[s], tally.own_rx[s], tally.intra_of[s]);
                self.f.moved(i as usize, r as usize)
                    || ((mostly_bad(stx + srx) || mostly_bad(stx) || mostly_bad(srx))
                        && (inside.tried == 0 || inside.bad > 0))
            })
            .map(|(_, &v)| v)
            .sum()
    }

    /// With three or more leaves on the rail, scattered cells that (nearly) all touch one
    /// leaf are that leaf's uplinks, partly bad: ECMP hashed a share of its cross-group
    /// pairs onto the bad uplink. With two leaves every cross-leaf cell touches both, and
    /// a bad uplink of either looks like a bad spine.
    fn one_leaf(&self, blocks: &[(&(u32, u32), &Count)], scatter: &Scatter) -> Option<u32> {
        let leaves_on_rail: std::collections::BTreeSet<u32> =
            blocks.iter().map(|((la, _), _)| *la).collect();
        if leaves_on_rail.len() < 3 {
            return None;
        }
        scatter
            .per_leaf
            .iter()
            .filter(|(l, &v)| {
                v as f64 >= self.f.rules.high_share * scatter.in_domain as f64
                    && !self.picked.contains(&Part::Uplinks(**l))
            })
            .max_by_key(|(l, &v)| (v, std::cmp::Reverse(**l)))
            .map(|(l, _)| *l)
    }

    /// One bad uplink of S hashes about 1/S of the leaf's cross-group pairs onto itself:
    /// a few stray cells through the leaf (a path fault, a one-way link) are not that, so
    /// a quarter of that share at least.
    fn enough_for_an_uplink(&self, blocks: &[(&(u32, u32), &Count)], leaf: u32, gain: u32) -> bool {
        let tried: u32 = blocks
            .iter()
            .filter(|(k, _)| k.0 == leaf || k.1 == leaf)
            .map(|(_, c)| c.tried)
            .sum();
        gain as f64 >= 0.25 * tried as f64 / self.spines_n as f64
    }

    /// Chooses `part`: every bad cell of its domain (of a spine pick, in the blocks it
    /// took) counts for it, those not yet explained are covered, and the other
    /// candidates lose them.
    fn take(&mut self, part: Part, blocks: Option<&Blocks>) -> Pick {
        let f = self.f;
        let mut buf = Vec::with_capacity(24);
        let mut pick = Pick {
            part,
            explains: 0,
            contradicted: 0,
            worst_gbit_s: f64::INFINITY,
            median_gbit_s: f64::NAN,
        };
        for (k, c) in self.tally.bad_list.iter().enumerate() {
            let inside = match (blocks, part) {
                (Some(ok), Part::SpineLayer(r)) => c.r == r && f.in_spine_domain(c, ok),
                (Some(ok), Part::Uplinks(_)) => f.contains(part, c) && f.in_spine_domain(c, ok),
                _ => f.contains(part, c),
            };
            if !inside {
                continue;
            }
            pick.explains += 1;
            let v = f.o.get(c.r as usize, c.a as usize, c.b as usize) as f64;
            if v < pick.worst_gbit_s {
                pick.worst_gbit_s = v;
                pick.median_gbit_s = f.medians[c.r as usize]
                    * f64::from(f.expect(c.r as usize, c.a as usize, c.b as usize));
            }
            if !self.covered[k] {
                self.covered[k] = true;
                f.members(c, &mut buf);
                for p in &buf {
                    if let Some(g) = self.gain.get_mut(p) {
                        *g = g.saturating_sub(1);
                    }
                }
            }
        }
        pick
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structure::topology::Switch;
    use results::fabric_plan::Tier;

    /// One rail, nodes 0-1 on leaf 0 and 2-3 on leaf 1, one flow across reaching
    /// `shares` of the NIC's rate from each leaf (empty: the plan gave no rates).
    fn two_leaves(shares: Vec<f32>) -> Topology {
        let leaf = |i: u32| Switch {
            name: format!("leaf{i}"),
            tier: Tier::Leaf,
            group: i,
            rail: 0,
            rack: NONE,
            inferred: false,
        };
        Topology {
            rails: vec!["rail0".into()],
            switches: vec![leaf(0), leaf(1)],
            attach: vec![0, 0, 1, 1],
            uplink_share: shares,
            ..Default::default()
        }
    }

    fn rules() -> Rules {
        Rules {
            bw_below_median: 0.5,
            suspect_share: 0.5,
            high_share: 0.9,
            min_links: 2,
            cabling: Vec::new(),
        }
    }

    /// Every off-diagonal cell of `rails` rails over 4 nodes at `v(rail, from, to)`.
    fn observed(rails: usize, v: impl Fn(usize, usize, usize) -> f32) -> Observed {
        let mut o = Observed::new(4, rails);
        for r in 0..rails {
            for a in 0..4 {
                for b in (0..4).filter(|&b| b != a) {
                    o.values[r][a * 4 + b] = v(r, a, b);
                }
            }
        }
        o
    }

    #[test]
    fn a_cell_across_slower_uplinks_expects_the_slower_leafs_share() {
        let t = two_leaves(vec![0.5, 0.25]);
        assert_eq!(expected_share(&t, 0, 0, 1), 1.0, "inside a leaf");
        assert_eq!(expected_share(&t, 0, 0, 2), 0.25);
        assert_eq!(expected_share(&t, 0, 3, 1), 0.25);
        assert_eq!(expected_share(&two_leaves(Vec::new()), 0, 0, 2), 1.0);
    }

    #[test]
    fn a_rail_mostly_slow_is_judged_against_the_fabrics_75th_percentile() {
        let t = Topology::default();
        // Rail 1: 8 of its 12 cells at a tenth (node 0's and node 1's).
        let o = observed(2, |r, a, b| {
            if r == 1 && (a < 2 || b < 2) {
                1.0
            } else {
                10.0
            }
        });
        let slow = o.values[1].iter().filter(|&&v| v == 1.0).count();
        assert_eq!(slow, 10, "the setup");
        assert_eq!(
            median(
                o.values[1]
                    .iter()
                    .copied()
                    .filter(|v| !v.is_nan())
                    .collect()
            ),
            1.0
        );
        assert_eq!(reference_medians(&o, &t), vec![10.0, 10.0]);
        // A healthy fabric: each rail its own median.
        let o = observed(2, |r, _, _| if r == 0 { 10.0 } else { 9.0 });
        assert_eq!(reference_medians(&o, &t), vec![10.0, 10.0]);
        let o = observed(2, |r, _, _| if r == 0 { 9.0 } else { 10.0 });
        assert_eq!(reference_medians(&o, &t), vec![10.0, 10.0]);
    }

    #[test]
    fn a_leaf_level_is_the_median_of_its_own_bad_cells_inside_it() {
        // Leaf 0's pair at 1 and 2 (bad: under half of 10), leaf 1's pair at 10.
        let o = observed(1, |_, a, b| match (a, b) {
            (0, 1) => 1.0,
            (1, 0) => 3.0,
            _ => 10.0,
        });
        let rules = rules();
        let t = two_leaves(vec![0.5, 0.5]);
        let f = Fabric::new(&o, &t, &rules);
        let levels = leaf_levels(&f);
        assert_eq!(levels[0], 3.0, "{levels:?}");
        assert!(levels[1].is_nan(), "no bad cell inside leaf 1: {levels:?}");
        // Uplinks as fast as the NICs: nothing is spared, no level.
        let t = two_leaves(vec![1.0, 1.0]);
        assert!(leaf_levels(&Fabric::new(&o, &t, &rules)).is_empty());
    }
}
