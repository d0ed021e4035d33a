//! The node-by-node matrix of a sweep: for every test, transport and size (a group) and
//! every rail (the device pair of the ends; TCP is one rail), a cell per node pair holding
//! what every run measured on that link, each measurement judged good or bad.
//!
//! A measurement is bad when it fails a per-pair bound of the profile (every `each_pair`
//! check whose selector takes the row) or when it is an outlier against its own rail:
//! bandwidth under `bw_below_median` of the rail's median, p50 latency over
//! `latency_above_median` times it (and p99, when set). A failed pair is bad. The median
//! is taken over cells, each counted at its best measurement, so one run's bad moment or a
//! retest's extra measurements of suspect links do not move the reference.
//!
//! A cell measured bad in one run and good in another (a sweep and its retest) is flaky;
//! it stays on the list of bad links, marked so. Localisation from these cells is in
//! the `suspects` module; drawing in `heatmap`.
//!
//! Scale: 1024 nodes x 8 rails at one size is 4.2 million cells. A cell is 28 bytes;
//! each matrix is a dense upper triangle over its nodes; per row only its cell index is
//! kept between the passes.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use results::natural::natural_cmp;
use results::FailedPair;
use serde::Serialize;

use verdict::input::Loaded;
use verdict::metric::{Metric, RowKind};
use verdict::profile::{Bound, MatrixSettings, Profile};
use verdict::rows::{GroupKey, P2pRows, RowStats};

/// Bit of [`Cell::why`]: below (bandwidth) or above (latency) the rail's median rule.
pub const WHY_MEDIAN: u32 = 1;
/// Bit of [`Cell::why`]: p99 latency above its median rule.
pub const WHY_P99_MEDIAN: u32 = 2;
/// Bit of [`Cell::why`]: the pair could not be measured.
pub const WHY_FAILED: u32 = 4;
/// First bit of [`Cell::why`] for the group's per-pair bounds (bit `8 << i`: bound i).
const WHY_BOUND0: u32 = 8;

/// What every run measured on one link.
#[derive(Debug, Clone, Copy)]
pub struct Cell {
    /// Best and worst of the rail's metric (bandwidth average, or p50 latency) over the
    /// measurements; NaN when none measured.
    pub best: f32,
    pub worst: f32,
    /// Best and worst p99 latency (latency groups).
    pub best_p99: f32,
    pub worst_p99: f32,
    pub good: u16,
    /// Bad measurements, failures included.
    pub bad: u16,
    pub failed: u16,
    /// Of `good` and `bad`, those from a retest (`--pattern file:`).
    pub retest_good: u16,
    pub retest_bad: u16,
    /// Which rules the bad measurements broke (`WHY_*` bits).
    pub why: u32,
}

impl Default for Cell {
    fn default() -> Self {
        Cell {
            best: f32::NAN,
            worst: f32::NAN,
            best_p99: f32::NAN,
            worst_p99: f32::NAN,
            good: 0,
            bad: 0,
            failed: 0,
            retest_good: 0,
            retest_bad: 0,
            why: 0,
        }
    }
}

impl Cell {
    pub fn tried(&self) -> bool {
        self.good + self.bad > 0
    }
    pub fn is_bad(&self) -> bool {
        self.bad > 0
    }
    pub fn is_flaky(&self) -> bool {
        self.bad > 0 && self.good > 0
    }
    /// Measured at least once (failures are not measurements).
    pub fn measured(&self) -> bool {
        self.best.is_finite()
    }
}

/// One group x rail: a triangle of cells over the nodes seen on it.
#[derive(Debug, Clone)]
pub struct Matrix {
    pub group: u32,
    /// Device of the lower-named and of the higher-named node of each cell (`None`: no
    /// device, TCP).
    pub dev_lo: Option<u32>,
    pub dev_hi: Option<u32>,
    /// Global node ids, ascending (names in natural order).
    pub nodes: Vec<u32>,
    /// Global node id -> index in `nodes`, `u32::MAX` when absent.
    local: Vec<u32>,
    pub cells: Vec<Cell>,
    /// False when the matrix was too large to build ([`MAX_CELLS`]): no cells.
    pub built: bool,
    /// Median over cells of each cell's best value; NaN without measurements.
    pub median: f64,
    pub median_p99: f64,
}

/// Most cells of all matrices together (28 bytes each: about 900 MiB): 8192 nodes on one
/// rail, or 2896 on eight. The 1024-node, 8-rail matrix of the scale benchmark is 4.2
/// million. A matrix beyond is not built, and the report says so.
pub const MAX_CELLS: usize = 1 << 25;
/// Most matrices (test, size and rail pairs) of one report, and per test and size: 64
/// rails crossed with `--rails all` are 4096; a document naming more devices is not a
/// fabric.
pub const MAX_MATRICES: usize = 4096;
pub const MAX_MATRICES_PER_GROUP: usize = 4096;
/// Most rails a sweep may declare (ranks of one node taking part).
pub const MAX_RAILS: u32 = 64;

/// Index of cell (i, j), i < j, in the upper triangle of an n x n matrix.
fn tri(n: usize, i: usize, j: usize) -> usize {
    debug_assert!(i < j && j < n);
    i * (2 * n - i - 1) / 2 + (j - i - 1)
}

impl Matrix {
    /// Index of the cell of nodes (global ids) `a` and `b`.
    pub fn cell_index(&self, a: u32, b: u32) -> Option<usize> {
        if !self.built {
            return None;
        }
        let la = *self.local.get(a as usize)?;
        let lb = *self.local.get(b as usize)?;
        if la == u32::MAX || lb == u32::MAX || la == lb {
            return None;
        }
        let (i, j) = (la.min(lb) as usize, la.max(lb) as usize);
        Some(tri(self.nodes.len(), i, j))
    }

    pub fn cell(&self, a: u32, b: u32) -> Option<&Cell> {
        self.cell_index(a, b).map(|i| &self.cells[i])
    }

    /// Every cell with its two nodes' indices in `nodes` (lower first).
    pub fn each_cell_local(&self) -> impl Iterator<Item = (usize, usize, &Cell)> + '_ {
        let n = if self.built { self.nodes.len() } else { 0 };
        (0..n).flat_map(move |i| (i + 1..n).map(move |j| (i, j, &self.cells[tri(n, i, j)])))
    }

    /// Every cell with its two nodes (global ids, lower first).
    pub fn each_cell(&self) -> impl Iterator<Item = (u32, u32, &Cell)> + '_ {
        let n = if self.built { self.nodes.len() } else { 0 };
        (0..n).flat_map(move |i| {
            (i + 1..n).map(move |j| (self.nodes[i], self.nodes[j], &self.cells[tri(n, i, j)]))
        })
    }
}

/// A per-pair bound of the profile that applies to a group.
#[derive(Debug, Clone)]
pub struct PairBound {
    pub check: String,
    pub metric: Metric,
    pub bound: Bound,
    pub unit: &'static str,
}

/// One test, transport and size, over every rail.
#[derive(Debug, Clone)]
pub struct Group {
    pub key: GroupKey,
    pub matrices: Vec<u32>,
    pub bounds: Vec<PairBound>,
}

impl Group {
    /// The metric the matrix shows: bandwidth average or p50 latency.
    pub fn metric(&self) -> Metric {
        if self.key.latency {
            Metric::Latency(verdict::metric::Percentile::P50)
        } else {
            Metric::BwAvg
        }
    }

    pub fn unit(&self) -> &'static str {
        if self.key.latency {
            "us"
        } else {
            "Gb/s"
        }
    }

    /// `write_bw verbs 64KiB`.
    pub fn label(&self) -> String {
        let k = &self.key;
        format!(
            "{} {} {}{}",
            k.test,
            k.transport,
            verdict::tables::size_label(k.size),
            if k.bidirectional { " bidir" } else { "" }
        )
    }

    /// Whether `v` is worse than `than` for this group's metric.
    pub fn worse(&self, v: f64, than: f64) -> bool {
        if self.key.latency {
            v > than
        } else {
            v < than
        }
    }

    /// The rules a bad cell broke, in words.
    pub fn reasons(&self, m: &Matrix, c: &Cell, s: &MatrixSettings) -> Vec<String> {
        let mut out = Vec::new();
        let f = verdict::judge::format_value;
        if c.why & WHY_FAILED != 0 {
            out.push(format!("failed {} time(s)", c.failed));
        }
        if c.why & WHY_MEDIAN != 0 {
            out.push(if self.key.latency {
                format!(
                    "p50 {} us over {}x the rail median {} us",
                    f(c.worst as f64),
                    f(s.latency_above_median),
                    f(m.median)
                )
            } else {
                format!(
                    "{} Gb/s under {}% of the rail median {} Gb/s",
                    f(c.worst as f64),
                    f(s.bw_below_median * 100.0),
                    f(m.median)
                )
            });
        }
        if c.why & WHY_P99_MEDIAN != 0 {
            out.push(format!(
                "p99 {} us over {}x the rail median {} us",
                f(c.worst_p99 as f64),
                f(s.latency_p99_above_median.unwrap_or(0.0)),
                f(m.median_p99)
            ));
        }
        for (i, b) in self.bounds.iter().enumerate() {
            if i < 24 && c.why & (WHY_BOUND0 << i) != 0 {
                out.push(format!(
                    "{} {} {} {} (check {})",
                    b.metric.name(),
                    if matches!(b.bound, Bound::Min(_)) {
                        "under"
                    } else {
                        "over"
                    },
                    f(b.bound.value()),
                    b.unit,
                    b.check
                ));
            }
        }
        out
    }
}

/// An end of a link: a node and the device it used (`None`: TCP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct End {
    pub node: u32,
    pub dev: Option<u32>,
}

/// A failed pair as recorded, placed in its matrix.
#[derive(Debug, Clone)]
pub struct Failure {
    pub matrix: u32,
    pub a: End,
    pub b: End,
    pub doc: usize,
    /// Position in the document's `failed_pairs` (one record can fail several sizes).
    pub index: usize,
    pub record: FailedPair,
}

/// A sweep document's plan, for coverage.
#[derive(Debug, Clone)]
pub struct Plan {
    pub doc: usize,
    pub pattern: String,
    pub groups: Vec<u32>,
    /// Node ids of `sweep.nodes`.
    pub nodes: Vec<u32>,
    /// Per node (same order), its device on each rail (local rank order).
    pub rails: Vec<Vec<Option<u32>>>,
    pub rail_mode: String,
    pub planned_pairs: u64,
    pub rounds: u32,
    pub rounds_done: u32,
    /// Distinct rank pairs measured or failed, per group.
    pub done_pairs: BTreeMap<u32, u64>,
}

/// Everything measured, placed in matrices and judged.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    pub nodes: Vec<String>,
    pub devices: Vec<String>,
    pub groups: Vec<Group>,
    pub matrices: Vec<Matrix>,
    pub failures: Vec<Failure>,
    pub plans: Vec<Plan>,
    /// Error-counter deltas summed per end over every row (evidence).
    pub errors: BTreeMap<End, BTreeMap<String, verdict::rows::ErrorSum>>,
    pub settings: MatrixSettings,
    /// What could not be built or judged, for the report (a ceiling reached).
    pub notes: Vec<String>,
    /// Per group, see [`Analysis::coverage`].
    coverage: Vec<Option<Coverage>>,
}

/// Node name of one end: its host, or `host/rank` when the sweep counted ranks as nodes.
fn node_name(host: &str, rank: Option<u32>, include_local: bool) -> Cow<'_, str> {
    match (include_local, rank) {
        (true, Some(r)) => Cow::Owned(format!("{host}/{r}")),
        _ => Cow::Borrowed(host),
    }
}

struct Interner {
    list: Vec<String>,
    map: HashMap<String, u32>,
}

impl Interner {
    fn new() -> Self {
        Interner {
            list: vec![],
            map: HashMap::new(),
        }
    }
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.map.get(s) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push(s.to_string());
        self.map.insert(s.to_string(), i);
        i
    }
}

/// Whether a check bounds each pair on its own and applies to `key`.
fn pair_bound(profile: &Profile, key: &GroupKey) -> Vec<PairBound> {
    profile
        .checks
        .iter()
        .filter(|c| {
            let s = &c.select;
            s.each_pair
                && s.pair.is_none()
                && verdict::judge::group_selected(s, key)
                && match c.metric.rows() {
                    RowKind::Latency => key.latency,
                    RowKind::Bandwidth => !key.latency,
                    RowKind::Counters => true,
                    _ => false,
                }
        })
        .map(|c| PairBound {
            check: c.id.clone(),
            metric: c.metric,
            bound: c.bound,
            unit: c.unit,
        })
        .collect()
}

/// The groups a document's failed pairs belong to: its test and transport at every size
/// from the one that failed (all sizes when it failed before the first).
/// `rows` gives the buffers' memory class of the document's measured rows, so that a
/// failed pair lands in the matrix of its GPU or host sweep (host when none was measured).
fn failure_keys(l: &Loaded, fp: &FailedPair, rows: &P2pRows) -> Vec<GroupKey> {
    let o = &l.doc.options;
    let text = |k: &str| o.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let latency = l.doc.tool == "bench-lat";
    let Some(test) = text("test").map(|t| {
        // Documents name the test `send` or `send_bw`; rows always carry the suffix.
        if t.ends_with("_bw") || t.ends_with("_lat") {
            t
        } else {
            format!("{t}{}", if latency { "_lat" } else { "_bw" })
        }
    }) else {
        return vec![];
    };
    let transport = text("transport").unwrap_or_else(|| "tcp".into());
    let bidirectional = !latency
        && o.get("bidirectional")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
    let mut sizes: Vec<u64> = o
        .get("sizes")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|s| s.as_u64()).collect())
        .unwrap_or_default();
    if sizes.is_empty() {
        sizes.extend(fp.size_bytes);
    }
    let memory = rows
        .groups
        .iter()
        .find(|g| g.test == test && g.transport == transport)
        .map_or_else(|| "host".to_string(), |g| g.memory.clone());
    sizes
        .into_iter()
        .filter(|s| fp.size_bytes.is_none_or(|f| *s >= f))
        .map(|size| GroupKey {
            tool: l.doc.tool.clone(),
            test: test.clone(),
            transport: transport.clone(),
            size,
            bidirectional,
            latency,
            memory: memory.clone(),
        })
        .collect()
}

/// Device of the lower and of the higher node of a matrix, and the matrix.
type RailKey = (Option<u32>, Option<u32>, u32);

struct Builder<'a> {
    profile: &'a Profile,
    nodes: Interner,
    devices: Interner,
    groups: Vec<Group>,
    group_ids: HashMap<GroupKey, u32>,
    /// Per group, its matrices by (device of the lower, of the higher node): a handful,
    /// scanned (a hash per row shows at 4 million rows).
    matrix_ids: Vec<Vec<RailKey>>,
    /// Per matrix, the nodes seen on it (global ids), before the cells exist.
    members: Vec<Vec<bool>>,
    keys: Vec<(u32, Option<u32>, Option<u32>)>,
    /// Links left unplaced past [`MAX_MATRICES`].
    over_matrices: bool,
}

impl Builder<'_> {
    fn group(&mut self, key: &GroupKey) -> u32 {
        if let Some(&g) = self.group_ids.get(key) {
            return g;
        }
        let g = self.groups.len() as u32;
        self.groups.push(Group {
            key: key.clone(),
            matrices: vec![],
            bounds: pair_bound(self.profile, key),
        });
        self.group_ids.insert(key.clone(), g);
        self.matrix_ids.push(Vec::new());
        g
    }

    /// The matrix of a link in group `g` (ends ordered by node name), registering its
    /// nodes; `u32::MAX` past [`MAX_MATRICES`] (the link is not placed).
    fn matrix(&mut self, g: u32, a: End, b: End) -> u32 {
        let (lo, hi) = if a.node <= b.node { (a, b) } else { (b, a) };
        let found = self.matrix_ids[g as usize]
            .iter()
            .find(|k| k.0 == lo.dev && k.1 == hi.dev)
            .map(|k| k.2);
        let m = match found {
            Some(m) => m,
            None if self.keys.len() >= MAX_MATRICES
                || self.matrix_ids[g as usize].len() >= MAX_MATRICES_PER_GROUP =>
            {
                self.over_matrices = true;
                return u32::MAX;
            }
            None => {
                let m = self.keys.len() as u32;
                self.keys.push((g, lo.dev, hi.dev));
                self.members.push(Vec::new());
                self.matrix_ids[g as usize].push((lo.dev, hi.dev, m));
                self.groups[g as usize].matrices.push(m);
                m
            }
        };
        self.member(m, a.node);
        self.member(m, b.node);
        m
    }

    fn member(&mut self, m: u32, node: u32) {
        let v = &mut self.members[m as usize];
        if v.len() <= node as usize {
            v.resize(node as usize + 1, false);
        }
        v[node as usize] = true;
    }
}

/// Per document: the compact rows, and for each peer its end.
struct DocRows<'a> {
    rows: Cow<'a, P2pRows>,
    ends: Vec<End>,
    groups: Vec<u32>,
    retest: bool,
}

/// Places every row and failed pair of `docs` in its matrix and judges each.
pub fn analyse(docs: &[Loaded], profile: &Profile) -> Analysis {
    let mut b = Builder {
        profile,
        nodes: Interner::new(),
        devices: Interner::new(),
        groups: vec![],
        group_ids: HashMap::new(),
        matrix_ids: Vec::new(),
        members: vec![],
        keys: vec![],
        over_matrices: false,
    };
    let mut per_doc = name_nodes(docs, &mut b);
    let (row_matrix, failures) = place_rows(docs, &mut per_doc, &mut b);
    let mut plans = sweep_plans(docs, &per_doc, &failures, &mut b);
    let mut notes = Vec::new();
    if b.over_matrices {
        notes.push(format!(
            "more than {MAX_MATRICES} matrices (tests, sizes and device pairs): the links of the rest are not placed"
        ));
    }
    let mut matrices = empty_matrices(&b, &mut notes);
    let row_cell = fill_cells(&per_doc, &row_matrix, &mut matrices);
    judge_cells(
        &per_doc,
        &row_matrix,
        &row_cell,
        &failures,
        &b.groups,
        &mut matrices,
        &profile.matrix,
    );
    count_done_pairs(&mut plans, &per_doc, &failures, &matrices);
    let errors = end_errors(&per_doc);
    let mut a = Analysis {
        nodes: b.nodes.list,
        devices: b.devices.list,
        groups: b.groups,
        matrices,
        failures,
        plans,
        errors,
        settings: profile.matrix.clone(),
        notes,
        coverage: vec![],
    };
    a.coverage = (0..a.groups.len() as u32)
        .map(|g| a.compute_coverage(g))
        .collect();
    a
}

/// Node names first, so that ids follow natural name order: every document's peers,
/// failed pairs' ends and swept nodes, interned in that order. Each document's rows.
fn name_nodes<'a>(docs: &'a [Loaded], b: &mut Builder) -> Vec<DocRows<'a>> {
    let mut names: Vec<String> = Vec::new();
    let mut per_doc: Vec<DocRows> = Vec::new();
    for d in docs {
        let rows = match d.p2p() {
            Some(p) => Cow::Borrowed(p),
            None => Cow::Owned(P2pRows::from_document(&d.doc)),
        };
        let local = d.doc.sweep.as_ref().is_some_and(|s| s.include_local);
        for p in &rows.peers.list {
            names.push(node_name(&p.host, p.rank, local).into_owned());
        }
        for fp in &d.doc.failed_pairs {
            for p in [&fp.pair.initiator, &fp.pair.responder] {
                names.push(node_name(&p.host, p.rank, local).into_owned());
            }
        }
        if let Some(s) = &d.doc.sweep {
            names.extend(s.nodes.iter().cloned());
        }
        per_doc.push(DocRows {
            rows,
            ends: vec![],
            groups: vec![],
            retest: d.doc.sweep.as_ref().is_some_and(|s| s.pattern == "file"),
        });
    }
    names.sort_by(|a, b| natural_cmp(a, b));
    names.dedup();
    for n in &names {
        b.nodes.id(n);
    }
    drop(names);
    per_doc
}

/// A peer's end: its node (by name) and its device.
fn end_of(b: &mut Builder, p: &results::Peer, local: bool) -> End {
    End {
        node: b.nodes.id(&node_name(&p.host, p.rank, local)),
        dev: p.device.as_deref().map(|d| b.devices.id(d)),
    }
}

/// Pass 1: ends, groups, matrices and their members; each row's matrix (`u32::MAX`: a
/// node with itself), and each failed pair in the matrices of its groups.
fn place_rows(
    docs: &[Loaded],
    per_doc: &mut [DocRows],
    b: &mut Builder,
) -> (Vec<Vec<u32>>, Vec<Failure>) {
    let mut row_matrix: Vec<Vec<u32>> = Vec::with_capacity(docs.len());
    let mut failures: Vec<Failure> = Vec::new();
    for (di, (d, dr)) in docs.iter().zip(per_doc.iter_mut()).enumerate() {
        let local = d.doc.sweep.as_ref().is_some_and(|s| s.include_local);
        dr.ends = dr
            .rows
            .peers
            .list
            .iter()
            .map(|p| end_of(b, p, local))
            .collect();
        dr.groups = dr.rows.groups.iter().map(|k| b.group(k)).collect();
        let mut mids = Vec::with_capacity(dr.rows.rows.len());
        for r in &dr.rows.rows {
            let (a, e) = (dr.ends[r.initiator as usize], dr.ends[r.responder as usize]);
            let g = dr.groups[r.group as usize];
            mids.push(if a.node == e.node {
                u32::MAX
            } else {
                b.matrix(g, a, e)
            });
        }
        row_matrix.push(mids);
        for (index, fp) in d.doc.failed_pairs.iter().enumerate() {
            let a = end_of(b, &fp.pair.initiator, local);
            let e = end_of(b, &fp.pair.responder, local);
            if a.node == e.node {
                continue;
            }
            for key in failure_keys(d, fp, &dr.rows) {
                let g = b.group(&key);
                let m = b.matrix(g, a, e);
                if m == u32::MAX {
                    continue;
                }
                failures.push(Failure {
                    matrix: m,
                    a,
                    b: e,
                    doc: di,
                    index,
                    record: fp.clone(),
                });
            }
        }
    }
    (row_matrix, failures)
}

/// Sweep plans: every node of a sweep belongs on every matrix of the groups it ran.
fn sweep_plans(
    docs: &[Loaded],
    per_doc: &[DocRows],
    failures: &[Failure],
    b: &mut Builder,
) -> Vec<Plan> {
    let mut plans = Vec::new();
    for (di, (d, dr)) in docs.iter().zip(per_doc).enumerate() {
        let Some(s) = &d.doc.sweep else { continue };
        let mut groups: Vec<u32> = dr.groups.clone();
        for f in failures.iter().filter(|f| f.doc == di) {
            groups.push(b.keys[f.matrix as usize].0);
        }
        groups.sort_unstable();
        groups.dedup();
        let nodes: Vec<u32> = s.nodes.iter().map(|n| b.nodes.id(n)).collect();
        let rails: Vec<Vec<Option<u32>>> = s
            .nodes
            .iter()
            .map(|n| {
                let mut on: Vec<(u32, Option<u32>)> = d
                    .doc
                    .hosts
                    .iter()
                    .filter(|h| node_name(&h.hostname, h.rank, s.include_local) == n.as_str())
                    .map(|h| {
                        (
                            h.local_rank.or(h.rank).unwrap_or(0),
                            h.device.as_deref().map(|x| b.devices.id(x)),
                        )
                    })
                    .collect();
                on.sort_by_key(|x| x.0);
                on.dedup_by_key(|x| x.0);
                let mut devs: Vec<Option<u32>> = on.into_iter().map(|x| x.1).collect();
                if s.include_local {
                    devs.truncate(1);
                }
                devs.resize(s.rails.clamp(1, MAX_RAILS) as usize, None);
                devs
            })
            .collect();
        for &g in &groups {
            let ms = b.groups[g as usize].matrices.clone();
            for m in ms {
                for &n in &nodes {
                    b.member(m, n);
                }
            }
        }
        plans.push(Plan {
            doc: di,
            pattern: s.pattern.clone(),
            groups,
            nodes,
            rails,
            rail_mode: s.rail_mode.clone(),
            planned_pairs: s.planned_pairs,
            rounds: s.rounds,
            rounds_done: s.rounds_done,
            done_pairs: BTreeMap::new(),
        });
    }
    plans
}

/// Pass 2, the matrices: every group and device pair's, its cells allocated within
/// [`MAX_CELLS`] (a matrix over the ceiling is not built, said in `notes`).
fn empty_matrices(b: &Builder, notes: &mut Vec<String>) -> Vec<Matrix> {
    let mut budget = MAX_CELLS;
    let mut matrices: Vec<Matrix> = Vec::with_capacity(b.keys.len());
    for (&(g, lo, hi), members) in b.keys.iter().zip(&b.members) {
        let nodes: Vec<u32> = members
            .iter()
            .enumerate()
            .filter(|(_, &m)| m)
            .map(|(i, _)| i as u32)
            .collect();
        let mut local = vec![u32::MAX; members.len()];
        for (i, &n) in nodes.iter().enumerate() {
            local[n as usize] = i as u32;
        }
        let n = nodes.len();
        let want = n * n.saturating_sub(1) / 2;
        let built = want <= budget;
        if built {
            budget -= want;
        } else {
            notes.push(format!(
                "the matrix of {} over {n} nodes is not built: {want} cells, over the ceiling of {MAX_CELLS} for a report",
                b.groups[g as usize].label()
            ));
        }
        matrices.push(Matrix {
            group: g,
            dev_lo: lo,
            dev_hi: hi,
            nodes,
            local,
            cells: if built {
                vec![Cell::default(); want]
            } else {
                Vec::new()
            },
            built,
            median: f64::NAN,
            median_p99: f64::NAN,
        });
    }
    matrices
}

/// Pass 2, the cells: each row's best and worst figures in its cell; each row's cell
/// (`u32::MAX`: none); every matrix's medians.
fn fill_cells(
    per_doc: &[DocRows],
    row_matrix: &[Vec<u32>],
    matrices: &mut [Matrix],
) -> Vec<Vec<u32>> {
    let mut row_cell: Vec<Vec<u32>> = Vec::with_capacity(per_doc.len());
    for (dr, mids) in per_doc.iter().zip(row_matrix) {
        let mut cells = Vec::with_capacity(mids.len());
        for (r, &m) in dr.rows.rows.iter().zip(mids) {
            if m == u32::MAX {
                cells.push(u32::MAX);
                continue;
            }
            let mx = &mut matrices[m as usize];
            let (a, e) = (dr.ends[r.initiator as usize], dr.ends[r.responder as usize]);
            // Registered in pass 1; none when the matrix was too large to build.
            let Some(ci) = mx.cell_index(a.node, e.node) else {
                cells.push(u32::MAX);
                continue;
            };
            cells.push(ci as u32);
            let c = &mut mx.cells[ci];
            let (v, p99) = primary(&r.stats);
            let better_hi = !matches!(r.stats, RowStats::Latency(_));
            c.best = pick(c.best, v as f32, better_hi);
            c.worst = pick(c.worst, v as f32, !better_hi);
            if let Some(p) = p99 {
                c.best_p99 = pick(c.best_p99, p as f32, false);
                c.worst_p99 = pick(c.worst_p99, p as f32, true);
            }
        }
        row_cell.push(cells);
    }
    for m in matrices.iter_mut() {
        m.median = median(m.cells.iter().map(|c| c.best));
        m.median_p99 = median(m.cells.iter().map(|c| c.best_p99));
    }
    row_cell
}

/// Pass 3: judge every measurement (and every failed pair) into its cell.
fn judge_cells(
    per_doc: &[DocRows],
    row_matrix: &[Vec<u32>],
    row_cell: &[Vec<u32>],
    failures: &[Failure],
    groups: &[Group],
    matrices: &mut [Matrix],
    s: &MatrixSettings,
) {
    for ((dr, mids), cells) in per_doc.iter().zip(row_matrix).zip(row_cell) {
        for ((r, &m), &ci) in dr.rows.rows.iter().zip(mids).zip(cells) {
            if m == u32::MAX || ci == u32::MAX {
                continue;
            }
            let mx = &mut matrices[m as usize];
            let why = judge_row(&groups[mx.group as usize], mx, &r.stats, s);
            let c = &mut mx.cells[ci as usize];
            if why == 0 {
                c.good = c.good.saturating_add(1);
                if dr.retest {
                    c.retest_good = c.retest_good.saturating_add(1);
                }
            } else {
                c.bad = c.bad.saturating_add(1);
                c.why |= why;
                if dr.retest {
                    c.retest_bad = c.retest_bad.saturating_add(1);
                }
            }
        }
    }
    for f in failures {
        let mx = &mut matrices[f.matrix as usize];
        let Some(ci) = mx.cell_index(f.a.node, f.b.node) else {
            continue;
        };
        let c = &mut mx.cells[ci];
        c.bad = c.bad.saturating_add(1);
        c.failed = c.failed.saturating_add(1);
        c.why |= WHY_FAILED;
        if per_doc[f.doc].retest {
            c.retest_bad = c.retest_bad.saturating_add(1);
        }
    }
}

/// Rank pairs each plan got done, per group (coverage of patterns that cannot be
/// enumerated here).
fn count_done_pairs(
    plans: &mut [Plan],
    per_doc: &[DocRows],
    failures: &[Failure],
    matrices: &[Matrix],
) {
    for p in plans.iter_mut().filter(|p| p.pattern != "all-pairs") {
        let dr = &per_doc[p.doc];
        let mut seen: HashMap<u32, std::collections::HashSet<(u32, u32)>> = HashMap::new();
        for r in &dr.rows.rows {
            let pa = &dr.rows.peers.list[r.initiator as usize];
            let pb = &dr.rows.peers.list[r.responder as usize];
            if let (Some(x), Some(y)) = (pa.rank, pb.rank) {
                seen.entry(dr.groups[r.group as usize])
                    .or_default()
                    .insert((x.min(y), x.max(y)));
            }
        }
        for f in failures.iter().filter(|f| f.doc == p.doc) {
            let pr = &f.record.pair;
            if let (Some(x), Some(y)) = (pr.initiator.rank, pr.responder.rank) {
                seen.entry(matrices[f.matrix as usize].group)
                    .or_default()
                    .insert((x.min(y), x.max(y)));
            }
        }
        p.done_pairs = seen.into_iter().map(|(g, s)| (g, s.len() as u64)).collect();
    }
}

/// Error counters per end, summed over the documents.
fn end_errors(per_doc: &[DocRows]) -> BTreeMap<End, BTreeMap<String, verdict::rows::ErrorSum>> {
    let mut errors: BTreeMap<End, BTreeMap<String, verdict::rows::ErrorSum>> = BTreeMap::new();
    for dr in per_doc {
        for (peer, counters) in &dr.rows.errors {
            verdict::rows::ErrorSum::add_all(
                errors.entry(dr.ends[*peer as usize]).or_default(),
                counters,
            );
        }
    }
    errors
}

/// The matrix metric of a row, and its p99 for latency rows.
fn primary(s: &RowStats) -> (f64, Option<f64>) {
    match s {
        RowStats::Latency(l) => (l.us.p50, Some(l.us.p99)),
        RowStats::Bandwidth(b) => (b.avg, None),
    }
}

/// The higher (or lower) of two values, ignoring NaN.
fn pick(old: f32, new: f32, higher: bool) -> f32 {
    if old.is_nan() || (higher && new > old) || (!higher && new < old) {
        new
    } else {
        old
    }
}

/// Median of the finite values (mean of the middle two for an even count).
fn median(values: impl Iterator<Item = f32>) -> f64 {
    let mut v: Vec<f32> = values.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    let mid = v.len() / 2;
    let (_, &mut hi, _) = v.select_nth_unstable_by(mid, |a, b| a.total_cmp(b));
    if v.len() % 2 == 1 {
        return hi as f64;
    }
    let lo = v[..mid].iter().cloned().fold(f32::MIN, f32::max);
    (lo as f64 + hi as f64) / 2.0
}

/// Which rules one measurement breaks (`WHY_*` bits; 0: good).
fn judge_row(g: &Group, m: &Matrix, s: &RowStats, set: &MatrixSettings) -> u32 {
    let mut why = 0;
    match s {
        RowStats::Bandwidth(b) => {
            if m.median > 0.0 && b.avg < set.bw_below_median * m.median {
                why |= WHY_MEDIAN;
            }
        }
        RowStats::Latency(l) => {
            if m.median > 0.0 && l.us.p50 > set.latency_above_median * m.median {
                why |= WHY_MEDIAN;
            }
            if let Some(r) = set.latency_p99_above_median {
                if m.median_p99 > 0.0 && l.us.p99 > r * m.median_p99 {
                    why |= WHY_P99_MEDIAN;
                }
            }
        }
    }
    for (i, pb) in g.bounds.iter().enumerate().take(24) {
        if let Some(v) = s.metric(pb.metric) {
            if v.is_finite() && !pb.bound.holds(v) {
                why |= WHY_BOUND0 << i;
            }
        }
    }
    why
}

/// How much of what the sweeps planned was measured (or tried and failed), per group.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Coverage {
    pub expected: u64,
    pub covered: u64,
    /// Up to [`MISSING_LISTED`] links never measured nor tried (`node0003:mlx5_1 -
    /// node0007:mlx5_1`), and sweeps whose pattern cannot be enumerated that did not
    /// finish.
    pub missing: Vec<String>,
    pub missing_total: u64,
}

/// Missing links named in a report; the count says the rest.
pub const MISSING_LISTED: usize = 50;

impl Coverage {
    /// A sweep whose pattern cannot be enumerated here (not all-pairs): the pairs it
    /// planned against those of group `g` it got done, and its rounds when it did not finish.
    fn count_rounds(&mut self, p: &Plan, g: u32) {
        let done = p.done_pairs.get(&g).copied().unwrap_or(0);
        self.expected = self.expected.saturating_add(p.planned_pairs);
        self.covered = self.covered.saturating_add(done.min(p.planned_pairs));
        if done < p.planned_pairs {
            let gap = p.planned_pairs - done;
            self.missing_total = self.missing_total.saturating_add(gap);
            self.missing.push(format!(
                "{gap} of {} planned pairs of the `{}` sweep (rounds {} of {})",
                p.planned_pairs, p.pattern, p.rounds_done, p.rounds
            ));
        }
    }
}

impl Analysis {
    /// One failure per recorded failed pair of the groups `keep` takes: a record that
    /// failed before its last size sits in the matrix of every size from there on.
    pub fn distinct_failures(&self, keep: impl Fn(&Group) -> bool) -> Vec<&Failure> {
        let mut seen = BTreeSet::new();
        self.failures
            .iter()
            .filter(|f| keep(&self.groups[self.matrices[f.matrix as usize].group as usize]))
            .filter(|f| seen.insert((f.doc, f.index)))
            .collect()
    }

    /// Name of an end: `node0003:mlx5_1`, or the node alone without a device.
    pub fn end_name(&self, e: End) -> String {
        match e.dev {
            Some(d) => format!(
                "{}:{}",
                self.nodes[e.node as usize], self.devices[d as usize]
            ),
            None => self.nodes[e.node as usize].clone(),
        }
    }

    /// The rail of a matrix: `mlx5_0`, `mlx5_0~mlx5_1` (lower node's device first), or the
    /// transport without devices.
    pub fn rail_name(&self, m: &Matrix) -> String {
        let d = |x: Option<u32>| x.map(|i| self.devices[i as usize].clone());
        match (d(m.dev_lo), d(m.dev_hi)) {
            (Some(a), Some(b)) if a == b => a,
            (Some(a), Some(b)) => format!("{a}~{b}"),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => self.groups[m.group as usize].key.transport.clone(),
        }
    }

    /// The two ends of a cell of `m` (global node ids, `a` < `b`).
    pub fn ends(&self, m: &Matrix, a: u32, b: u32) -> (End, End) {
        (
            End {
                node: a.min(b),
                dev: m.dev_lo,
            },
            End {
                node: a.max(b),
                dev: m.dev_hi,
            },
        )
    }

    /// Coverage of group `g` over every sweep that ran it (`None`: no sweep did).
    pub fn coverage(&self, g: u32) -> Option<&Coverage> {
        self.coverage.get(g as usize).and_then(Option::as_ref)
    }

    /// An all-pairs plan's links, each looked up in its matrix: tried (covered) or missing.
    /// With several all-pairs sweeps of one group (`overlap`) a link counts once.
    fn count_all_pairs(
        &self,
        p: &Plan,
        lookup: &HashMap<(Option<u32>, Option<u32>), &Matrix>,
        overlap: bool,
        seen_pairs: &mut std::collections::HashSet<(End, End)>,
        cov: &mut Coverage,
    ) {
        let n = p.nodes.len();
        for i in 0..n {
            for j in i + 1..n {
                let (ri, rj) = (&p.rails[i], &p.rails[j]);
                let combos: Vec<(Option<u32>, Option<u32>)> = if p.rail_mode == "all" {
                    ri.iter()
                        .flat_map(|&x| rj.iter().map(move |&y| (x, y)))
                        .collect()
                } else {
                    ri.iter().zip(rj.iter()).map(|(&x, &y)| (x, y)).collect()
                };
                for (di, dj) in combos {
                    let a = End {
                        node: p.nodes[i],
                        dev: di,
                    };
                    let b = End {
                        node: p.nodes[j],
                        dev: dj,
                    };
                    let (lo, hi) = if a.node <= b.node { (a, b) } else { (b, a) };
                    if overlap && !seen_pairs.insert((lo, hi)) {
                        continue;
                    }
                    cov.expected += 1;
                    let tried = lookup
                        .get(&(lo.dev, hi.dev))
                        .and_then(|m| m.cell(lo.node, hi.node))
                        .is_some_and(|c| c.tried());
                    if tried {
                        cov.covered += 1;
                    } else {
                        cov.missing_total += 1;
                        if cov.missing.len() < MISSING_LISTED {
                            cov.missing.push(format!(
                                "{} - {}",
                                self.end_name(lo),
                                self.end_name(hi)
                            ));
                        }
                    }
                }
            }
        }
    }

    fn compute_coverage(&self, g: u32) -> Option<Coverage> {
        let plans: Vec<&Plan> = self
            .plans
            .iter()
            .filter(|p| p.groups.contains(&g))
            .collect();
        if plans.is_empty() {
            return None;
        }
        // Not judged when a matrix of the group could not be built, or the plan is larger
        // than any matrix may be.
        if self.groups[g as usize]
            .matrices
            .iter()
            .any(|&m| !self.matrices[m as usize].built)
        {
            return None;
        }
        let work: usize = plans
            .iter()
            .filter(|p| p.pattern == "all-pairs")
            .map(|p| {
                let n = p.nodes.len();
                let r = p.rails.first().map_or(1, |r| r.len());
                (n * n.saturating_sub(1) / 2).saturating_mul(r * r)
            })
            .fold(0usize, usize::saturating_add);
        if work > MAX_CELLS.saturating_mul(64) {
            return None;
        }
        // Links of several all-pairs sweeps of one group are counted once.
        let overlap = plans.iter().filter(|p| p.pattern == "all-pairs").count() > 1;
        let mut cov = Coverage::default();
        let lookup: HashMap<(Option<u32>, Option<u32>), &Matrix> = self.groups[g as usize]
            .matrices
            .iter()
            .map(|&m| {
                let mx = &self.matrices[m as usize];
                ((mx.dev_lo, mx.dev_hi), mx)
            })
            .collect();
        let mut seen_pairs: std::collections::HashSet<(End, End)> = Default::default();
        for p in plans {
            if p.pattern != "all-pairs" {
                cov.count_rounds(p, g);
            } else {
                self.count_all_pairs(p, &lookup, overlap, &mut seen_pairs, &mut cov);
            }
        }
        Some(cov)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_reads_numbers_as_numbers() {
        let mut v = vec!["node10", "node9", "node1", "a", "node09", "vm/12", "vm/3"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            ["a", "node1", "node09", "node9", "node10", "vm/3", "vm/12"]
        );
    }

    #[test]
    fn triangle_indices_are_dense_and_distinct() {
        let n = 7;
        let mut seen = vec![false; n * (n - 1) / 2];
        for i in 0..n {
            for j in i + 1..n {
                let k = tri(n, i, j);
                assert!(!seen[k]);
                seen[k] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn a_sweep_that_declares_too_much_is_noted_not_built() {
        let mut doc = synth::sweep::sweep_doc(&synth::sweep::SweepSpec::bandwidth(3, 1));
        let s = doc.sweep.as_mut().unwrap();
        s.nodes = (0..9000).map(|i| format!("n{i}")).collect();
        s.rails = u32::MAX;
        s.planned_pairs = u64::MAX;
        let l = Loaded::from_text("s.json", &serde_json::to_string(&doc).unwrap()).unwrap();
        let p = verdict::profile::parse(
            "name=\"t\"\n[[check]]\nid=\"x\"\ndescription=\"d\"\nmetric=\"suspects\"\nunit=\"suspects\"\nmax=0\n",
            "t",
        )
        .unwrap();
        let t = std::time::Instant::now();
        let a = analyse(&[l], &p);
        assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
        assert!(!a.matrices[0].built);
        assert!(a.notes[0].contains("not built"), "{:?}", a.notes);
        assert!(a.coverage(0).is_none());
        assert_eq!(a.matrices[0].each_cell().count(), 0);
    }

    #[test]
    fn median_of_cells_ignores_empty_ones() {
        assert_eq!(median([3.0, f32::NAN, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0].into_iter()), 2.5);
        assert!(median([f32::NAN].into_iter()).is_nan());
    }
}
