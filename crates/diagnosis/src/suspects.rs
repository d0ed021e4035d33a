//! Localisation: from the judged matrix to the part to replace, with the evidence beside it.
//!
//! Per test, size and rail, each end (a node and the device it used) has links; a link is
//! bad when any of its measurements was (see [`crate::matrix`]). Then, in this order:
//!
//! - **rail**: when more than `rail_share` of a rail's nodes (and at least three) have
//!   mostly bad links on it, the rail itself is named (its switch, its configuration):
//!   naming each NIC would hide the common cause.
//! - **node** / **nic**: an end with at least `min_links` links of which `suspect_share`
//!   or more are bad is suspect. When every end of a node that has data is suspect, the
//!   node is named (the host, its PCIe, or with one rail its NIC, cable or switch port);
//!   otherwise each suspect end is named as a NIC (its port, optic, cable, switch port).
//! - **link**: a bad link whose ends are both otherwise fine (the cable or the path
//!   between them). With fewer than `min_links` links per node (two nodes) no end can be
//!   told from the other, so the link is named.
//!
//! A link bad in one run and good in another is flaky: it stays named, marked so, and so
//! does a suspect whose bad links passed on retest. A healthy matrix names nothing.
//!
//! The retest list pairs each suspect with known-good nodes of the same rail, in the
//! format `--pattern file:PATH` reads (`hostA hostB`, or `hostA:mlx5_0 hostB:mlx5_0`), so
//! that a second sweep tells which end is bad, as Google's cluster-health-scanner does.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::inventory::Inventory;
use crate::matrix::{Analysis, End, Failure, Group};

/// What kind of part a suspect is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Rail,
    Node,
    Nic,
    Link,
}

impl Kind {
    fn what(self) -> &'static str {
        match self {
            Kind::Rail => "the rail's switch or configuration",
            Kind::Node => "the node: its NIC, cable, switch port or host",
            Kind::Nic => "this NIC: its port, optic, cable or switch port",
            Kind::Link => "the link between these two ends: cable, optic or path",
        }
    }
}

/// Where a suspect was found: one test and size on one rail.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// `write_bw verbs 64KiB`.
    pub group: String,
    #[serde(skip)]
    pub group_index: u32,
    pub rail: String,
    pub bad_links: u32,
    pub links: u32,
    pub failed_links: u32,
    /// Worst value on its bad links, and the rail's median, in `unit`.
    pub worst: Option<f64>,
    pub median: Option<f64>,
    pub unit: String,
    /// The rules broken (the union over its bad links).
    pub reasons: Vec<String>,
}

/// What is known about a suspect besides its links.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Evidence {
    /// Error-counter deltas the result rows recorded on its ends, summed over every run
    /// (`mlx5_0:symbol_error`, ...).
    pub counter_deltas: BTreeMap<String, i64>,
    /// Non-zero error counters of its ports in the latest inventory (absolute values).
    pub inventory_counters: BTreeMap<String, i64>,
    /// How its ports differ from the other nodes' (rate, width, PCIe, firmware, MTU,
    /// state).
    pub inventory: Vec<String>,
    /// Its failed pairs with both sides' causes and port states (the first few).
    pub failures: Vec<String>,
    pub failures_total: usize,
}

/// A part named as the likely cause of bad links.
#[derive(Debug, Clone, Serialize)]
pub struct Suspect {
    pub kind: Kind,
    /// The node (node, nic), or the first end of a link.
    pub node: Option<String>,
    /// The device (nic), or the rail (rail).
    pub device: Option<String>,
    /// The two ends of a link (`node0003:mlx5_1`).
    pub ends: Vec<String>,
    /// What to look at.
    pub what: &'static str,
    /// Some of its bad links were also measured good (intermittent): not cleared.
    pub flaky: bool,
    /// `confirmed on retest`, `passed on retest (intermittent)`, `not retested`.
    pub retest: String,
    pub findings: Vec<Finding>,
    pub evidence: Evidence,
    /// One line for a terminal: `node node0003: 7 of 7 links bad (write_bw verbs 64KiB)`.
    pub summary: String,
    /// Its `suspects.pairs` lines (its ends with known-good partners), so a caller that
    /// drops the suspect drops its retest too.
    #[serde(skip)]
    pub retest_pairs: Vec<String>,
}

/// Flaky links listed; a count says the rest.
pub const FLAKY_LISTED: usize = 1000;

/// A link measured both bad and good.
#[derive(Debug, Clone, Serialize)]
pub struct Flaky {
    pub group: String,
    pub ends: [String; 2],
    pub bad: u32,
    pub good: u32,
    pub worst: Option<f64>,
    pub best: Option<f64>,
    pub unit: String,
}

/// The outcome of localisation.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Localised {
    pub suspects: Vec<Suspect>,
    pub flaky: Vec<Flaky>,
    /// `suspects.pairs` lines: each suspect with known-good partners.
    pub retest: Vec<String>,
    /// Names that cannot be written in a pair list (blanks, `#`, `,`, control
    /// characters), so their retest pairs were left out.
    pub retest_unwritable: Vec<String>,
}

/// Whether a node or `node:device` name can be one word of a pair list
/// (`--pattern file:`): no blank (it separates the two ends), no `#` (a comment), no `,`
/// (read as a blank), no control character (a line break would start another pair).
pub fn pair_word(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && c != '#' && c != ',')
}

#[derive(Default, Clone, Copy)]
struct EndStat {
    links: u32,
    bad: u32,
    failed: u32,
    flaky: u32,
    retest_good: u32,
    retest_bad: u32,
    /// Union of the rules its bad links broke, and the worst value among them.
    why: u32,
    worst: Option<f32>,
}

impl EndStat {
    /// Counts one link of this end.
    fn add(&mut self, c: &crate::matrix::Cell, g: &crate::matrix::Group) {
        self.links += 1;
        if !c.is_bad() {
            return;
        }
        self.bad += 1;
        self.failed += u32::from(c.failed > 0 && !c.measured());
        self.flaky += u32::from(c.is_flaky());
        self.retest_good += u32::from(c.retest_good);
        self.retest_bad += u32::from(c.retest_bad);
        self.why |= c.why;
        if c.worst.is_finite() && self.worst.is_none_or(|w| g.worse(c.worst as f64, w as f64)) {
            self.worst = Some(c.worst);
        }
    }

    fn merge(&mut self, o: &EndStat, g: &crate::matrix::Group) {
        self.links += o.links;
        self.bad += o.bad;
        self.failed += o.failed;
        self.flaky += o.flaky;
        self.retest_good += o.retest_good;
        self.retest_bad += o.retest_bad;
        self.why |= o.why;
        if let Some(w) = o.worst {
            if self.worst.is_none_or(|x| g.worse(w as f64, x as f64)) {
                self.worst = Some(w);
            }
        }
    }
}

/// A suspect being assembled, keyed by what it names.
#[derive(Default)]
struct Draft {
    findings: Vec<Finding>,
    ends: BTreeSet<End>,
    flaky: bool,
    retest_good: u32,
    retest_bad: u32,
    /// Matrix and node to pair with known-good partners.
    partners_from: Vec<(u32, End)>,
}

type Key = (Kind, Vec<End>, Option<u32>);

fn finite(v: f32) -> Option<f64> {
    v.is_finite().then_some(v as f64)
}

/// Names the suspects of an analysis, with evidence and the retest list: per group, the
/// ends whose links are mostly bad, the rails most of whose nodes are, the nodes or NICs,
/// then the bad links between ends that are otherwise fine.
pub fn localise(a: &Analysis, inv: &Inventory) -> Localised {
    let mut drafts: BTreeMap<Key, Draft> = BTreeMap::new();
    let mut flaky = Vec::new();
    for (gi, g) in a.groups.iter().enumerate() {
        let view = GroupView {
            a,
            g,
            gi: gi as u32,
            stats: end_stats(a, g, &mut flaky),
        };
        let mut named = view.suspect_ends();
        let rail_taken = view.draft_rails(&named, &mut drafts);
        named.retain(|e| !rail_taken.contains(e));
        view.draft_ends(&named, &rail_taken, &mut drafts);
        view.draft_links(&named, &rail_taken, &mut drafts);
    }
    finish(a, inv, drafts, flaky)
}

/// Per end of group `g`, its links: counted per matrix in arrays (4 million cells), then
/// folded. The flaky cells are listed on the way (up to `FLAKY_LISTED`).
fn end_stats(a: &Analysis, g: &Group, flaky: &mut Vec<Flaky>) -> HashMap<End, EndStat> {
    let mut stats: HashMap<End, EndStat> = HashMap::new();
    for &mi in &g.matrices {
        let m = &a.matrices[mi as usize];
        let mut lo_st = vec![EndStat::default(); m.nodes.len()];
        let mut hi_st = vec![EndStat::default(); m.nodes.len()];
        for (i, j, c) in m.each_cell_local() {
            if !c.tried() {
                continue;
            }
            lo_st[i].add(c, g);
            hi_st[j].add(c, g);
            if c.is_flaky() && flaky.len() < FLAKY_LISTED {
                let (lo, hi) = a.ends(m, m.nodes[i], m.nodes[j]);
                flaky.push(Flaky {
                    group: g.label(),
                    ends: [a.end_name(lo), a.end_name(hi)],
                    bad: u32::from(c.bad),
                    good: u32::from(c.good),
                    worst: finite(c.worst),
                    best: finite(c.best),
                    unit: g.unit().into(),
                });
            }
        }
        for (i, &node) in m.nodes.iter().enumerate() {
            for (st, dev) in [(&lo_st[i], m.dev_lo), (&hi_st[i], m.dev_hi)] {
                if st.links > 0 {
                    stats.entry(End { node, dev }).or_default().merge(st, g);
                }
            }
        }
    }
    stats
}

/// One group of the analysis (a test, transport and size) with its ends' counts.
struct GroupView<'a> {
    a: &'a Analysis,
    g: &'a Group,
    gi: u32,
    stats: HashMap<End, EndStat>,
}

impl GroupView<'_> {
    /// Ends with enough links, bad on `suspect_share` of them.
    fn suspect_ends(&self) -> BTreeSet<End> {
        let s = &self.a.settings;
        self.stats
            .iter()
            .filter(|(_, st)| {
                st.links >= s.min_links
                    && st.bad > 0
                    && st.bad as f64 >= s.suspect_share * st.links as f64
            })
            .map(|(e, _)| *e)
            .collect()
    }

    /// Rails whose nodes are mostly suspect (three at least, over `rail_share`): drafted
    /// as the rail; returns the ends it took.
    fn draft_rails(
        &self,
        named: &BTreeSet<End>,
        drafts: &mut BTreeMap<Key, Draft>,
    ) -> BTreeSet<End> {
        let (a, g) = (self.a, self.g);
        let mut rail_taken: BTreeSet<End> = BTreeSet::new();
        for &mi in &g.matrices {
            let m = &a.matrices[mi as usize];
            if m.dev_lo != m.dev_hi || m.dev_lo.is_none() {
                continue;
            }
            let on: Vec<End> = m
                .nodes
                .iter()
                .map(|&n| End {
                    node: n,
                    dev: m.dev_lo,
                })
                .filter(|e| named.contains(e))
                .collect();
            if on.len() < 3 || on.len() as f64 <= a.settings.rail_share * m.nodes.len() as f64 {
                continue;
            }
            let d = drafts.entry((Kind::Rail, vec![], m.dev_lo)).or_default();
            let bad: u32 = on.iter().map(|e| self.stats[e].bad).sum();
            d.findings.push(Finding {
                group: g.label(),
                group_index: self.gi,
                rail: a.rail_name(m),
                bad_links: bad / 2,
                links: m.cells.iter().filter(|c| c.tried()).count() as u32,
                failed_links: m
                    .cells
                    .iter()
                    .filter(|c| c.failed > 0 && !c.measured())
                    .count() as u32,
                worst: None,
                median: finite(m.median as f32),
                unit: g.unit().into(),
                reasons: vec![format!(
                    "{} of {} nodes have mostly bad links on this rail",
                    on.len(),
                    m.nodes.len()
                )],
            });
            rail_taken.extend(on);
        }
        rail_taken
    }

    /// Nodes whose every end with data is suspect (and on no suspect rail); else the
    /// suspect ends as NICs.
    fn draft_ends(
        &self,
        named: &BTreeSet<End>,
        rail_taken: &BTreeSet<End>,
        drafts: &mut BTreeMap<Key, Draft>,
    ) {
        // In the ends' order: a node's first end (its lowest rail) describes it.
        let mut by_node: BTreeMap<u32, Vec<End>> = BTreeMap::new();
        for e in self.stats.keys() {
            by_node.entry(e.node).or_default().push(*e);
        }
        by_node.values_mut().for_each(|ends| ends.sort());
        for (node, ends) in &by_node {
            let sus: Vec<End> = ends.iter().copied().filter(|e| named.contains(e)).collect();
            if sus.is_empty() {
                continue;
            }
            let whole = sus.len() == ends.len() && ends.iter().all(|e| !rail_taken.contains(e));
            let groups: Vec<(Key, Vec<End>)> = if whole {
                let node = End {
                    node: *node,
                    dev: None,
                };
                vec![((Kind::Node, vec![node], None), sus.clone())]
            } else {
                sus.iter()
                    .map(|e| ((Kind::Nic, vec![*e], None), vec![*e]))
                    .collect()
            };
            for (key, ends_of) in groups {
                let d = drafts.entry(key).or_default();
                d.findings.push(self.finding(&ends_of[0], &ends_of));
                for e in &ends_of {
                    self.add_end(d, e);
                }
            }
        }
    }

    /// End `e` into draft `d`: its counts, and its rail's matrix to find partners in.
    fn add_end(&self, d: &mut Draft, e: &End) {
        let st = self.stats[e];
        d.ends.insert(*e);
        d.flaky |= st.flaky > 0;
        d.retest_good += st.retest_good;
        d.retest_bad += st.retest_bad;
        if let Some(&mi) = self.g.matrices.iter().find(|&&mi| {
            let m = &self.a.matrices[mi as usize];
            m.dev_lo == e.dev && m.dev_hi == e.dev
        }) {
            d.partners_from.push((mi, *e));
        }
    }

    /// The finding of a node or NIC over `ends` (`e` the first): their links summed, the
    /// worst value, the rails, the median of the first end's rail and the reasons.
    fn finding(&self, e: &End, ends: &[End]) -> Finding {
        let (a, g) = (self.a, self.g);
        let mut f = Finding {
            group: g.label(),
            group_index: self.gi,
            rail: String::new(),
            bad_links: 0,
            links: 0,
            failed_links: 0,
            worst: None,
            median: None,
            unit: g.unit().into(),
            reasons: vec![],
        };
        let mut rails = BTreeSet::new();
        let mut w = 0;
        for x in ends {
            let st = self.stats.get(x).copied().unwrap_or_default();
            f.bad_links += st.bad;
            f.links += st.links;
            f.failed_links += st.failed;
            w |= st.why;
            if let Some(v) = st.worst {
                if f.worst.is_none_or(|o| g.worse(v as f64, o)) {
                    f.worst = Some(v as f64);
                }
            }
            rails.insert(
                x.dev
                    .map(|d| a.devices[d as usize].clone())
                    .unwrap_or_else(|| g.key.transport.clone()),
            );
        }
        f.rail = rails.into_iter().collect::<Vec<_>>().join(", ");
        if let Some(&mi) = g.matrices.iter().find(|&&mi| {
            let m = &a.matrices[mi as usize];
            m.dev_lo == e.dev || m.dev_hi == e.dev
        }) {
            let m = &a.matrices[mi as usize];
            f.median = finite(m.median as f32);
            let probe = crate::matrix::Cell {
                why: w,
                worst: f.worst.unwrap_or(f64::NAN) as f32,
                ..Default::default()
            };
            f.reasons = g.reasons(m, &probe, &a.settings);
        }
        f
    }

    /// Bad links between ends that are otherwise fine (neither named nor on a suspect
    /// rail), each drafted as the link.
    fn draft_links(
        &self,
        named: &BTreeSet<End>,
        rail_taken: &BTreeSet<End>,
        drafts: &mut BTreeMap<Key, Draft>,
    ) {
        let (a, g) = (self.a, self.g);
        let explained = |e: &End| named.contains(e) || rail_taken.contains(e);
        for &mi in &g.matrices {
            let m = &a.matrices[mi as usize];
            for (x, y, c) in m.each_cell() {
                if !c.is_bad() {
                    continue;
                }
                let (lo, hi) = a.ends(m, x, y);
                if explained(&lo) || explained(&hi) {
                    continue;
                }
                let d = drafts.entry((Kind::Link, vec![lo, hi], None)).or_default();
                d.findings.push(Finding {
                    group: g.label(),
                    group_index: self.gi,
                    rail: a.rail_name(m),
                    bad_links: 1,
                    links: 1,
                    failed_links: u32::from(c.failed > 0 && !c.measured()),
                    worst: finite(c.worst),
                    median: finite(m.median as f32),
                    unit: g.unit().into(),
                    reasons: g.reasons(m, c, &a.settings),
                });
                d.ends.insert(lo);
                d.ends.insert(hi);
                d.flaky |= c.is_flaky();
                d.retest_good += u32::from(c.retest_good);
                d.retest_bad += u32::from(c.retest_bad);
                d.partners_from.push((mi, lo));
                d.partners_from.push((mi, hi));
            }
        }
    }
}

/// Turns the drafts into suspects: names, evidence, summary and retest pairs each.
fn finish(
    a: &Analysis,
    inv: &Inventory,
    drafts: BTreeMap<Key, Draft>,
    flaky: Vec<Flaky>,
) -> Localised {
    let suspect_nodes: BTreeSet<u32> = drafts
        .iter()
        .filter(|(k, _)| matches!(k.0, Kind::Node | Kind::Nic | Kind::Link))
        .flat_map(|(_, d)| d.ends.iter().map(|e| e.node))
        .collect();
    let mut out = Localised {
        flaky,
        ..Default::default()
    };
    let mut pairs = RetestPairs {
        a,
        suspect_nodes,
        lines: Vec::new(),
        rotate: 0,
        cache: HashMap::new(),
    };
    let failures = a.distinct_failures(|_| true);
    for ((kind, key_ends, rail), d) in drafts {
        let (node, device, ends) = names_of(a, kind, &key_ends, rail);
        let label = match kind {
            Kind::Rail => format!("rail {}", device.clone().unwrap_or_default()),
            Kind::Node => format!("node {}", node.clone().unwrap_or_default()),
            Kind::Nic => format!("nic {}", ends.join("")),
            Kind::Link => format!("link {}", ends.join(" - ")),
        };
        out.suspects.push(Suspect {
            kind,
            node,
            device,
            ends,
            what: kind.what(),
            flaky: d.flaky,
            retest: retest_words(&d),
            summary: summary_of(label, &d),
            retest_pairs: pairs.add(kind, &key_ends, &d),
            evidence: evidence_of(a, inv, (kind, rail), &d, &failures),
            findings: d.findings,
        });
    }
    (out.retest, out.retest_unwritable) = pairs.finish();
    out
}

/// A suspect's node, device and ends in words.
fn names_of(
    a: &Analysis,
    kind: Kind,
    key_ends: &[End],
    rail: Option<u32>,
) -> (Option<String>, Option<String>, Vec<String>) {
    let node_of = |e: &End| a.nodes[e.node as usize].clone();
    match kind {
        Kind::Rail => (None, rail.map(|r| a.devices[r as usize].clone()), vec![]),
        Kind::Node => (Some(node_of(&key_ends[0])), None, vec![]),
        Kind::Nic => (
            Some(node_of(&key_ends[0])),
            key_ends[0].dev.map(|x| a.devices[x as usize].clone()),
            vec![a.end_name(key_ends[0])],
        ),
        Kind::Link => (
            Some(node_of(&key_ends[0])),
            None,
            key_ends.iter().map(|e| a.end_name(*e)).collect(),
        ),
    }
}

/// What the retests of a suspect's links said.
fn retest_words(d: &Draft) -> String {
    match (d.retest_bad, d.retest_good) {
        (0, 0) => "not retested".to_string(),
        (b, 0) => format!("confirmed on retest ({b} bad)"),
        (0, g) => format!("passed on retest ({g} good): intermittent, not cleared"),
        (b, g) => format!("retest mixed ({b} bad, {g} good): intermittent"),
    }
}

/// The one line of a suspect: its label and its worst finding.
fn summary_of(label: String, d: &Draft) -> String {
    let Some(f) = d.findings.iter().max_by_key(|f| (f.bad_links, f.links)) else {
        return label;
    };
    format!(
        "{label}: {} of {} link(s) bad in {}{}{}",
        f.bad_links,
        f.links,
        f.group,
        if f.reasons.is_empty() {
            String::new()
        } else {
            format!(" ({})", f.reasons.join("; "))
        },
        if d.flaky { "; flaky" } else { "" }
    )
}

/// A suspect's evidence: its ends' error counters and inventory differences, and the
/// failed pairs it takes part in.
fn evidence_of(
    a: &Analysis,
    inv: &Inventory,
    (kind, rail): (Kind, Option<u32>),
    d: &Draft,
    failures: &[&Failure],
) -> Evidence {
    let mut ev = Evidence::default();
    for e in &d.ends {
        if let Some(c) = a.errors.get(e) {
            for (k, v) in c.iter().filter(|(_, v)| v.delta != 0) {
                let dev = e.dev.map(|x| a.devices[x as usize].as_str()).unwrap_or("-");
                let e = ev.counter_deltas.entry(format!("{dev}:{k}")).or_default();
                *e = e.saturating_add(v.delta);
            }
        }
        let h = host_of(&a.nodes[e.node as usize], inv);
        let dev = e.dev.map(|x| a.devices[x as usize].as_str());
        ev.inventory_counters.extend(inv.error_counters(&h, dev));
        for diff in inv.differences(&h, dev) {
            if !ev.inventory.contains(&diff) {
                ev.inventory.push(diff);
            }
        }
    }
    let mine = |x: &End| {
        d.ends.contains(x) || (kind == Kind::Node && d.ends.iter().any(|e| e.node == x.node))
    };
    for &f in failures {
        let hit = match kind {
            Kind::Link => mine(&f.a) && mine(&f.b),
            Kind::Rail => rail.is_some() && (f.a.dev == rail || f.b.dev == rail),
            _ => mine(&f.a) || mine(&f.b),
        };
        if !hit {
            continue;
        }
        ev.failures_total += 1;
        if ev.failures.len() < 10 {
            ev.failures.push(describe_failure(a, f));
        }
    }
    ev
}

/// The retest list being built: each suspect end with known-good partners on the same
/// rail, partners taken in turn.
struct RetestPairs<'a> {
    a: &'a Analysis,
    suspect_nodes: BTreeSet<u32>,
    lines: Vec<(String, String)>,
    rotate: usize,
    cache: HashMap<u32, Vec<u32>>,
}

impl RetestPairs<'_> {
    /// A suspect's pairs (a link itself first), added to the list; returns those that
    /// can be written as pair-list lines.
    fn add(&mut self, kind: Kind, key_ends: &[End], d: &Draft) -> Vec<String> {
        let a = self.a;
        let first_line = self.lines.len();
        if kind != Kind::Rail {
            if kind == Kind::Link {
                self.lines
                    .push((retest_name(a, key_ends[0]), retest_name(a, key_ends[1])));
            }
            let mut done_nodes = BTreeSet::new();
            for (mi, e) in &d.partners_from {
                let whole = kind == Kind::Node;
                if whole && !done_nodes.insert(e.node) {
                    continue;
                }
                let m = &a.matrices[*mi as usize];
                let partners = good_partners(
                    a,
                    *mi,
                    e.node,
                    &self.suspect_nodes,
                    a.settings.retest_partners as usize,
                    &mut self.rotate,
                    &mut self.cache,
                );
                for p in partners {
                    let pe = End {
                        node: p,
                        dev: m.dev_lo,
                    };
                    self.lines.push(if whole {
                        (
                            a.nodes[e.node as usize].clone(),
                            a.nodes[p as usize].clone(),
                        )
                    } else {
                        (retest_name(a, *e), retest_name(a, pe))
                    });
                }
            }
        }
        self.lines[first_line..]
            .iter()
            .filter(|(a, b)| pair_word(a) && pair_word(b))
            .map(|(a, b)| format!("{a} {b}"))
            .collect()
    }

    /// The list without repeats, and the names that cannot be written in one.
    fn finish(self) -> (Vec<String>, Vec<String>) {
        let mut lines = self.lines;
        let mut seen = BTreeSet::new();
        let mut unwritable = BTreeSet::new();
        lines.retain(|(a, b)| {
            let ok = pair_word(a) && pair_word(b);
            if !ok {
                unwritable.extend([a, b].into_iter().filter(|w| !pair_word(w)).cloned());
            }
            ok && seen.insert(format!("{a} {b}"))
        });
        (
            lines.into_iter().map(|(a, b)| format!("{a} {b}")).collect(),
            unwritable.into_iter().collect(),
        )
    }
}

/// Host of a node name: itself, or the host of a `host/rank` node.
fn host_of(node: &str, inv: &Inventory) -> String {
    if inv.ports.iter().any(|p| p.host == node) {
        return node.to_string();
    }
    match node.rsplit_once('/') {
        Some((h, r)) if r.chars().all(|c| c.is_ascii_digit()) => h.to_string(),
        _ => node.to_string(),
    }
}

/// `node:device` as `--pattern file:` reads it, or the node alone without a device.
fn retest_name(a: &Analysis, e: End) -> String {
    a.end_name(e)
}

/// Up to `k` nodes of matrix `mi` other than `node` with no bad link there and no part
/// under suspicion, taken in turn so that suspects do not all queue on one partner.
fn good_partners(
    a: &Analysis,
    mi: u32,
    node: u32,
    suspects: &BTreeSet<u32>,
    k: usize,
    rotate: &mut usize,
    cache: &mut HashMap<u32, Vec<u32>>,
) -> Vec<u32> {
    let m = &a.matrices[mi as usize];
    // Bad links per node of the matrix, links to suspects left out (they say nothing
    // against the other end); counted once per matrix.
    let bad = cache.entry(mi).or_insert_with(|| {
        let mut bad = vec![0u32; m.nodes.len()];
        for (i, j, c) in m.each_cell_local() {
            if c.is_bad() && !suspects.contains(&m.nodes[i]) && !suspects.contains(&m.nodes[j]) {
                bad[i] += 1;
                bad[j] += 1;
            }
        }
        bad
    });
    let good: Vec<u32> = m
        .nodes
        .iter()
        .enumerate()
        .filter(|&(i, n)| {
            *n != node && !suspects.contains(n) && bad[i] == 0 && pair_word(&a.nodes[*n as usize])
        })
        .map(|(_, n)| *n)
        .collect();
    if good.is_empty() {
        return vec![];
    }
    let start = *rotate % good.len();
    *rotate += k;
    (0..k.min(good.len()))
        .map(|i| good[(start + i) % good.len()])
        .collect()
}

/// `round 3, write_bw verbs 64KiB: node0003:mlx5_1 (initiator): IBV_WC_RETRY_EXC_ERR;
/// port 4: ACTIVE | node0007:mlx5_1 (responder): timeout; port 1: DOWN`.
pub fn describe_failure(a: &Analysis, f: &crate::matrix::Failure) -> String {
    let r = &f.record;
    let g = &a.groups[a.matrices[f.matrix as usize].group as usize];
    let side = |e: End, role: &str, err: &Option<String>, st: &Option<String>| {
        format!(
            "{} ({role}): {}{}",
            a.end_name(e),
            err.as_deref().unwrap_or("no error reported"),
            st.as_deref()
                .map(|s| format!("; port {s}"))
                .unwrap_or_default()
        )
    };
    format!(
        "round {}, {}{}: {} | {}",
        r.round,
        g.label(),
        r.size_bytes
            .map(|s| format!(" (failed at {})", verdict::tables::size_label(s)))
            .unwrap_or_default(),
        side(
            f.a,
            "initiator",
            &r.initiator_error,
            &r.initiator_port_state
        ),
        side(
            f.b,
            "responder",
            &r.responder_error,
            &r.responder_port_state
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use synth::sweep::{sweep_doc, Fault, SweepSpec};
    use verdict::input::Loaded;

    const PROFILE: &str = r#"
name = "t"
[[check]]
id = "bw"
description = "every pair above 50 Gb/s"
metric = "bw_avg"
unit = "Gb/s"
min = 50.0
test = "write_bw"
each_pair = true
"#;

    fn run_docs(docs: &[results::Document]) -> (Analysis, Localised) {
        let loaded: Vec<Loaded> = docs
            .iter()
            .map(|d| Loaded::from_text("s.json", &serde_json::to_string(d).unwrap()).unwrap())
            .collect();
        let p = verdict::profile::parse(PROFILE, "t.toml").unwrap();
        let a = crate::matrix::analyse(&loaded, &p);
        let inv = crate::inventory::collect(&loaded);
        let l = localise(&a, &inv);
        (a, l)
    }

    fn run(spec: &SweepSpec) -> Localised {
        run_docs(&[sweep_doc(spec)]).1
    }

    fn names(l: &Localised) -> Vec<String> {
        l.suspects
            .iter()
            .map(|s| match s.kind {
                Kind::Node => format!("node {}", s.node.as_deref().unwrap()),
                Kind::Nic => format!("nic {}", s.ends[0]),
                Kind::Link => format!("link {}", s.ends.join(" ")),
                Kind::Rail => format!("rail {}", s.device.as_deref().unwrap()),
            })
            .collect()
    }

    #[test]
    fn a_healthy_matrix_names_nothing() {
        for (n, r) in [(2, 1), (3, 1), (6, 1), (9, 4)] {
            let l = run(&SweepSpec::bandwidth(n, r));
            assert!(l.suspects.is_empty(), "{n}x{r}: {:?}", names(&l));
            assert!(l.retest.is_empty() && l.flaky.is_empty());
        }
        let lat = run(&SweepSpec::latency(8, 2));
        assert!(lat.suspects.is_empty(), "{:?}", names(&lat));
    }

    /// A node bad on both rails is described by its first rail's matrix, every run: the
    /// ends once came in a hash map's order, and the report named either rail's median
    /// from one run to the next (95.82 or 95.974 Gb/s on a synthetic sweep).
    #[test]
    fn a_node_bad_on_every_rail_is_described_by_its_first_rail_every_time() {
        let mut s = SweepSpec::bandwidth(8, 2);
        s.faults = vec![Fault::Node {
            node: 3,
            factor: 0.5,
        }];
        let docs = [sweep_doc(&s)];
        let (a, l) = run_docs(&docs);
        let median_of = |dev: &str| {
            a.matrices
                .iter()
                .find(|m| {
                    m.dev_lo == m.dev_hi
                        && m.dev_lo.map(|d| &a.devices[d as usize][..]) == Some(dev)
                })
                .unwrap()
                .median
        };
        let (m0, m1) = (median_of("mlx5_0"), median_of("mlx5_1"));
        assert_ne!(
            m0, m1,
            "the rails' medians must differ for this test to tell"
        );
        assert_eq!(names(&l), ["node node0003"]);
        for _ in 0..20 {
            let (_, l) = run_docs(&docs);
            let f = &l.suspects[0].findings[0];
            assert_eq!(f.median, Some(m0 as f32 as f64), "{f:?}");
        }
    }

    #[test]
    fn one_bad_node_is_named_alone_with_partners_to_retest() {
        let mut s = SweepSpec::bandwidth(8, 1);
        s.faults = vec![Fault::Node {
            node: 3,
            factor: 0.5,
        }];
        let l = run(&s);
        assert_eq!(names(&l), ["node node0003"]);
        let f = &l.suspects[0].findings[0];
        assert_eq!((f.bad_links, f.links), (7, 7));
        assert!(
            f.reasons
                .iter()
                .any(|r| r.contains("under 90% of the rail median")),
            "{f:?}"
        );
        assert!(f.reasons.iter().any(|r| r.contains("check bw")), "{f:?}");
        assert_eq!(l.retest.len(), 2, "{:?}", l.retest);
        for line in &l.retest {
            let w: Vec<&str> = line.split(' ').collect();
            assert_eq!(w[0], "node0003", "{line}");
            assert_ne!(w[1], "node0003");
        }
        // Latency too: a slow node is high on every link.
        let mut s = SweepSpec::latency(6, 1);
        s.faults = vec![Fault::Node {
            node: 5,
            factor: 0.4,
        }];
        assert_eq!(names(&run(&s)), ["node node0005"]);
    }

    #[test]
    fn one_bad_link_is_named_as_the_link() {
        let mut s = SweepSpec::bandwidth(8, 2);
        s.faults = vec![Fault::Link {
            a: 2,
            b: 6,
            rail: Some(1),
            factor: 0.6,
        }];
        let l = run(&s);
        assert_eq!(names(&l), ["link node0002:mlx5_1 node0006:mlx5_1"]);
        assert_eq!(l.retest[0], "node0002:mlx5_1 node0006:mlx5_1");
        assert!(l.retest.len() >= 3, "{:?}", l.retest);
        // Two nodes cannot tell which end is bad: the link is named.
        let mut s = SweepSpec::bandwidth(2, 1);
        s.faults = vec![Fault::Node {
            node: 1,
            factor: 0.3,
        }];
        assert_eq!(names(&run(&s)), ["link node0000:mlx5_0 node0001:mlx5_0"]);
    }

    #[test]
    fn a_bad_nic_on_one_rail_is_named_as_the_nic_not_the_node() {
        let mut s = SweepSpec::bandwidth(8, 4);
        s.faults = vec![Fault::Nic {
            node: 5,
            rail: 2,
            factor: 0.5,
        }];
        let l = run(&s);
        assert_eq!(names(&l), ["nic node0005:mlx5_2"]);
        assert!(
            l.retest
                .iter()
                .all(|x| x.starts_with("node0005:mlx5_2 node") && x.ends_with(":mlx5_2")),
            "{:?}",
            l.retest
        );
        // The same fault on every rail is the node.
        s.faults = (0..4)
            .map(|rail| Fault::Nic {
                node: 5,
                rail,
                factor: 0.5,
            })
            .collect();
        assert_eq!(names(&run(&s)), ["node node0005"]);
    }

    #[test]
    fn failed_pairs_count_as_bad_with_both_causes_in_the_evidence() {
        let mut s = SweepSpec::bandwidth(6, 1);
        s.faults = (0..6)
            .filter(|&n| n != 4)
            .map(|n| Fault::Failed {
                a: 4,
                b: n,
                rail: 0,
            })
            .collect();
        let l = run(&s);
        assert_eq!(names(&l), ["node node0004"]);
        let ev = &l.suspects[0].evidence;
        assert_eq!(ev.failures_total, 5);
        assert!(
            ev.failures[0].contains("IBV_WC_RETRY_EXC_ERR")
                && ev.failures[0].contains("port 1: DOWN"),
            "{:?}",
            ev.failures
        );
    }

    #[test]
    fn a_failed_pair_counts_once_in_the_evidence_whatever_sizes_it_spans() {
        // Failed before its first size, a pair sits in the matrix of every size planned;
        // the suspect's evidence still names each failed pair once.
        let mut s = SweepSpec::bandwidth(6, 1);
        s.faults = (0..6)
            .filter(|&n| n != 4)
            .map(|n| Fault::Failed {
                a: 4,
                b: n,
                rail: 0,
            })
            .collect();
        let mut doc = sweep_doc(&s);
        doc.options
            .insert("sizes".into(), serde_json::json!([s.size, s.size * 2]));
        for r in &mut doc.failed_pairs {
            r.size_bytes = None;
        }
        let (a, l) = run_docs(&[doc]);
        assert_eq!(
            a.failures.len(),
            10,
            "each failed pair in both sizes' matrices"
        );
        assert_eq!(names(&l), ["node node0004"]);
        let ev = &l.suspects[0].evidence;
        assert_eq!(ev.failures_total, 5);
        let distinct: BTreeSet<&String> = ev.failures.iter().collect();
        assert_eq!(distinct.len(), ev.failures.len(), "{:?}", ev.failures);
    }

    #[test]
    fn a_link_bad_in_the_sweep_and_good_on_retest_is_flaky_not_cleared() {
        let mut first = SweepSpec::bandwidth(6, 1);
        first.faults = vec![Fault::Link {
            a: 1,
            b: 4,
            rail: None,
            factor: 0.5,
        }];
        let (_, l) = run_docs(&[sweep_doc(&first)]);
        assert_eq!(names(&l), ["link node0001:mlx5_0 node0004:mlx5_0"]);
        assert_eq!(l.suspects[0].retest, "not retested");
        // The retest runs exactly the lines written, and the link is fine this time.
        let pairs: Vec<(u32, u32)> = l
            .retest
            .iter()
            .map(|line| {
                let n: Vec<u32> = line
                    .split(' ')
                    .map(|w| w.trim_start_matches("node")[..4].parse().unwrap())
                    .collect();
                (n[0], n[1])
            })
            .collect();
        let retest = SweepSpec {
            pairs: Some(pairs),
            seed: 9,
            ..SweepSpec::bandwidth(6, 1)
        };
        let (_, both) = run_docs(&[sweep_doc(&first), sweep_doc(&retest)]);
        assert_eq!(names(&both), ["link node0001:mlx5_0 node0004:mlx5_0"]);
        let s = &both.suspects[0];
        assert!(s.flaky);
        assert!(s.retest.starts_with("passed on retest"), "{}", s.retest);
        assert_eq!(both.flaky.len(), 1);
        assert_eq!((both.flaky[0].bad, both.flaky[0].good), (1, 1));
        // Bad again on retest: confirmed.
        let again = SweepSpec {
            faults: first.faults.clone(),
            ..retest
        };
        let (_, c) = run_docs(&[sweep_doc(&first), sweep_doc(&again)]);
        assert!(
            c.suspects[0].retest.starts_with("confirmed"),
            "{}",
            c.suspects[0].retest
        );
        assert!(!c.suspects[0].flaky);
    }

    #[test]
    fn a_whole_rail_down_is_the_rail() {
        let mut s = SweepSpec::bandwidth(8, 2);
        s.faults = (0..8)
            .map(|node| Fault::Nic {
                node,
                rail: 1,
                factor: 0.3,
            })
            .collect();
        assert_eq!(names(&run(&s)), ["rail mlx5_1"]);
    }

    #[test]
    fn node_and_link_faults_together_are_each_named_once() {
        let mut s = SweepSpec::bandwidth(12, 1);
        s.faults = vec![
            Fault::Node {
                node: 7,
                factor: 0.5,
            },
            Fault::Link {
                a: 0,
                b: 10,
                rail: None,
                factor: 0.7,
            },
        ];
        let l = run(&s);
        assert_eq!(
            names(&l),
            ["node node0007", "link node0000:mlx5_0 node0010:mlx5_0"]
        );
    }
}
