//! The cluster side of a report: the matrix of every sweep, its suspects and the retest
//! list, the checks a profile sets on them (`failed_pairs`, `matrix_coverage`,
//! `suspects`, and the `[inventory]` table), ready for templates and `summary.json`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::heatmap::{self, Shown};
use diagnosis::inventory;
use diagnosis::matrix::{self, Analysis, Coverage, Group};
use diagnosis::structure::Structure;
use diagnosis::suspects::{self, Flaky, Localised, Suspect};
use verdict::input::Loaded;
use verdict::judge::{Outcome, Status, Verdict};
use verdict::metric::Metric;
use verdict::profile::{MatrixSettings, Profile, Selector};

/// File name of the retest list in the report directory.
pub const RETEST_FILE: &str = "suspects.pairs";

/// Largest matrix also given as a Markdown table.
pub const MARKDOWN_MAX: usize = 16;

/// Most heatmaps in one report (the headline sizes first).
pub const HEATMAPS_MAX: usize = 48;

/// Failed pairs listed in a report; the count says the rest.
pub const FAILED_LISTED: usize = 200;

/// One rail of one group, summarised.
#[derive(Debug, Clone, Serialize)]
pub struct RailView {
    pub rail: String,
    pub nodes: usize,
    /// Links tried (measured or failed).
    pub links: usize,
    pub bad: usize,
    pub failed: usize,
    pub flaky: usize,
    pub median: Option<f64>,
    pub median_p99: Option<f64>,
    /// The matrix as a Markdown table, for small matrices.
    pub markdown: Option<String>,
    #[serde(skip)]
    pub matrix: usize,
}

/// One of the worst links of a group.
#[derive(Debug, Clone, Serialize)]
pub struct LinkView {
    pub ends: String,
    pub rail: String,
    /// Worst measurement (none: every try failed).
    pub value: Option<f64>,
    /// Worst measurement as a share of the rail's median, %.
    pub of_median_pct: Option<f64>,
    /// `failed`, `bad`, `flaky` or `ok`.
    pub state: &'static str,
    pub reasons: String,
    pub measurements: u32,
}

/// One test, transport and size of the sweeps.
#[derive(Debug, Clone, Serialize)]
pub struct GroupView {
    pub label: String,
    pub tool: String,
    pub test: String,
    pub transport: String,
    pub size_bytes: u64,
    pub bidirectional: bool,
    pub latency: bool,
    pub unit: &'static str,
    pub rails: Vec<RailView>,
    pub coverage: Option<Coverage>,
    pub worst: Vec<LinkView>,
}

/// A heatmap of the report: its file in the bundle and its SVG.
#[derive(Debug, Clone, Serialize)]
pub struct Heatmap {
    pub title: String,
    pub file: String,
    #[serde(skip)]
    pub svg: String,
}

/// Everything the report shows about the cluster.
#[derive(Debug, Clone, Serialize)]
pub struct Cluster {
    /// Any point-to-point pair between two nodes at all.
    pub present: bool,
    pub settings: MatrixSettings,
    pub nodes: usize,
    pub groups: Vec<GroupView>,
    pub suspects: Vec<Suspect>,
    pub flaky: Vec<Flaky>,
    pub failed_pairs: Vec<String>,
    pub failed_total: usize,
    /// `suspects.pairs` when there is something to retest.
    pub retest_file: Option<&'static str>,
    pub retest: Vec<String>,
    /// Names left out of the retest list: a pair list cannot hold them.
    pub retest_unwritable: Vec<String>,
    /// Inventory checks of the profile (also in the verdict).
    pub inventory_checks: Vec<String>,
    #[serde(skip)]
    pub heatmaps: Vec<Heatmap>,
    /// Heatmaps not drawn (beyond [`HEATMAPS_MAX`]).
    pub heatmaps_left_out: usize,
    /// What could not be built or judged (a ceiling reached).
    pub notes: Vec<String>,
    /// The fabric's structure: groups, cabling, per-direction matrix and the parts above
    /// the node (see `structure`); `None` without point-to-point rows, plan or discovery.
    pub structure: Option<Structure>,
    /// The isolation sweeps judged against the tenants; `None` without both.
    pub isolation: Option<diagnosis::isolation::Isolation>,
    #[serde(skip)]
    analysis: Analysis,
    #[serde(skip)]
    outcomes: Vec<(Option<usize>, Outcome)>,
}

fn opt(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// Whether a check's selector takes group `g` (matrix metrics select whole groups).
fn selects(sel: &Selector, g: &Group) -> bool {
    verdict::judge::group_selected(sel, &g.key)
}

/// Analyses the sweeps of `docs` for `profile`.
pub fn build(profile: &Profile, docs: &[Loaded]) -> Cluster {
    build_with(profile, docs, None, None)
}

/// Whether a matrix group is the one the structure judged (its rows, either direction
/// mode).
fn structure_group(st: Option<&Structure>, g: &Group) -> bool {
    st.is_some_and(|st| !st.rows.is_empty() && g.label().trim_end_matches(" bidir") == st.rows)
}

/// [`build`] with the fabric plan (`--plan`) and the tenants (`--tenants`, else the plan's).
pub fn build_with(
    profile: &Profile,
    docs: &[Loaded],
    plan: Option<&results::fabric_plan::FabricPlan>,
    tenants: Option<&results::tenants::Tenants>,
) -> Cluster {
    let a = matrix::analyse(docs, profile);
    let inv = inventory::collect(docs);
    let mut loc = suspects::localise(&a, &inv);
    let structure = diagnosis::structure::build(docs, plan, &profile.matrix);
    let replaces = structure_replaces(structure.as_ref());
    if replaces {
        defer_to_structure(&a, &mut loc, structure.as_ref());
    }
    let mut outcomes = Vec::new();
    for (i, c) in profile.checks.iter().enumerate() {
        if let Some(o) = judge_check(c, &a, &loc, structure.as_ref()) {
            outcomes.push((Some(i), o));
        }
    }
    let isolation = tenants.and_then(|t| diagnosis::isolation::view(docs, t, plan));
    outcomes.extend(
        table_checks(profile, docs, &a, &inv, tenants, isolation.as_ref())
            .into_iter()
            .map(|o| (None, o)),
    );
    let groups = views(&a);
    let (heatmaps, left_out) = draw(&a, &loc);
    let all_failures = a.distinct_failures(|_| true);
    let failed_total = all_failures.len();
    let failed_pairs: Vec<String> = all_failures
        .into_iter()
        .take(FAILED_LISTED)
        .map(|f| suspects::describe_failure(&a, f))
        .collect();
    Cluster {
        present: !a.matrices.is_empty(),
        settings: a.settings.clone(),
        nodes: matrix_nodes(&a),
        groups,
        failed_total,
        failed_pairs,
        retest_file: (!loc.retest.is_empty()).then_some(RETEST_FILE),
        retest: loc.retest.clone(),
        retest_unwritable: loc.retest_unwritable.clone(),
        inventory_checks: outcomes
            .iter()
            .filter(|(i, _)| i.is_none())
            .map(|(_, o)| o.id.clone())
            .collect(),
        suspects: loc.suspects,
        flaky: loc.flaky,
        heatmaps,
        heatmaps_left_out: left_out,
        notes: a.notes.clone(),
        isolation,
        structure: structure.map(|mut s| {
            s.replaces = replaces;
            s
        }),
        analysis: a,
        outcomes,
    }
}

/// Whether the structure's suspects replace the matrix's for the rows it judged. When the
/// structure's localiser finds more than nodes, NICs and links (a part above the node, a
/// transmitter, a receiver, one direction, an ECMP path) it names the parts for the rows
/// it judged, and the matrix's own suspects for those rows would name the same faults
/// again as many NICs; otherwise the matrix's suspects (with their counters, inventory
/// and retest list) stay and the structure adds only its cabling findings. Where the
/// plan's rates put uplinks slower than the NICs, only the structure judges cells across
/// the spines against what they can reach (the matrix compares them with the rail's
/// median and would name each as a slow link), so its suspects stand for those rows
/// whatever they are, none included.
fn structure_replaces(structure: Option<&Structure>) -> bool {
    structure.is_some_and(|s| {
        !s.rows.is_empty()
            && (s.judged_by_rates
                || s.suspects
                    .iter()
                    .any(|x| x.explains > 0 && !diagnosis::structure::NODE_KINDS.contains(&x.kind)))
    })
}

/// The matrix's suspects of the rows the structure judged give way to its parts.
fn defer_to_structure(a: &Analysis, loc: &mut Localised, st: Option<&Structure>) {
    // Failed pairs are no measurement the structure sees: their suspects stay.
    loc.suspects.retain(|s| {
        !s.findings
            .iter()
            .all(|f| structure_group(st, &a.groups[f.group_index as usize]) && f.failed_links == 0)
    });
    // The retest list follows: the kept suspects' pairs, then the structure's pair parts
    // (a one-way path confirmed or cleared by the retest, as a matrix suspect is); a
    // dropped suspect's partners are not measured again.
    let kept = loc
        .suspects
        .iter()
        .flat_map(|s| s.retest_pairs.iter().cloned());
    let parts = st
        .iter()
        .flat_map(|s| &s.suspects)
        .flat_map(|s| &s.retest)
        .map(|(x, y)| format!("{x} {y}"));
    let mut retest: Vec<String> = Vec::new();
    for line in kept.chain(parts) {
        if !retest.contains(&line) {
            retest.push(line);
        }
    }
    loc.retest = retest;
}

/// The outcomes of the profile's tables beside the checks: inventory, lossless, load
/// and isolation.
fn table_checks(
    profile: &Profile,
    docs: &[Loaded],
    a: &Analysis,
    inv: &inventory::Inventory,
    tenants: Option<&results::tenants::Tenants>,
    isolation: Option<&diagnosis::isolation::Isolation>,
) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    if let Some(spec) = &profile.inventory {
        // Counter deltas of the rows, per host and device, for "not rising".
        let mut rows: BTreeMap<(String, String), BTreeMap<String, verdict::rows::ErrorSum>> =
            BTreeMap::new();
        for (e, counters) in &a.errors {
            let (Some(d), node) = (e.dev, &a.nodes[e.node as usize]) else {
                continue;
            };
            let host = node.rsplit_once('/').map_or(node.as_str(), |x| x.0);
            let into = rows
                .entry((host.to_string(), a.devices[d as usize].clone()))
                .or_default();
            verdict::rows::ErrorSum::add_all(into, counters);
        }
        outcomes.extend(inventory::checks(spec, inv, &rows));
    }
    if let Some(spec) = &profile.lossless {
        outcomes.extend(diagnosis::audit::checks(spec, docs));
    }
    if let Some(spec) = &profile.load {
        outcomes.extend(diagnosis::load::checks(spec, docs));
    }
    if let Some(spec) = &profile.isolation {
        outcomes.extend(diagnosis::isolation::checks(spec, docs, tenants, isolation));
    }
    outcomes
}

/// The outcome of a matrix check (`None` for the other metrics).
fn judge_check(
    c: &verdict::profile::Check,
    a: &Analysis,
    loc: &Localised,
    st: Option<&Structure>,
) -> Option<Outcome> {
    let m = MatrixCheck {
        c,
        a,
        chosen: (0..a.groups.len() as u32)
            .filter(|&g| selects(&c.select, &a.groups[g as usize]))
            .collect(),
    };
    Some(match c.metric {
        Metric::FailedPairs => m.failed_pairs(),
        Metric::MatrixCoverage => m.coverage(),
        Metric::Suspects => m.suspects(loc, st),
        Metric::Cabling(kind) => m.cabling(st, kind),
        _ => return None,
    })
}

/// One matrix check being judged: the check, the sweeps' analysis, and the analysis
/// groups (test, transport, size) the check selects.
struct MatrixCheck<'a> {
    c: &'a verdict::profile::Check,
    a: &'a Analysis,
    chosen: Vec<u32>,
}

impl MatrixCheck<'_> {
    /// This check's outcome: its status, the value measured, where, over how many.
    fn outcome(&self, status: Status, measured: Option<f64>, at: String, n: usize) -> Outcome {
        Outcome::of_check(self.c, status, measured, at, n)
    }

    /// MISSING: nothing judged, and why.
    fn missing(&self, why: &str) -> Outcome {
        self.outcome(Status::Missing, None, why.into(), 0)
    }

    /// A count judged against the bound.
    fn counted(&self, v: f64, at: String, n: usize) -> Outcome {
        let status = if self.c.bound.holds(v) {
            Status::Pass
        } else {
            Status::Fail
        };
        self.outcome(status, Some(v), at, n)
    }

    fn no_sweep(&self) -> Outcome {
        self.missing("no point-to-point results between nodes match this check: run bench-bw or bench-lat with --pattern all-pairs")
    }

    /// Pairs that failed, over the links tried; MISSING when none was tried.
    fn failed_pairs(&self) -> Outcome {
        let a = self.a;
        if self.chosen.is_empty() {
            return self.no_sweep();
        }
        let fails = a.distinct_failures(|g| selects(&self.c.select, g));
        let links: usize = self
            .chosen
            .iter()
            .flat_map(|&g| &a.groups[g as usize].matrices)
            .map(|&m| {
                a.matrices[m as usize]
                    .cells
                    .iter()
                    .filter(|c| c.tried())
                    .count()
            })
            .sum();
        if links == 0 {
            // A sweep whose every planned link went untried proves nothing about pairs.
            return self.missing("the sweeps that match this check tried no link: run bench-bw or bench-lat with --pattern all-pairs on at least two nodes");
        }
        let at = if fails.is_empty() {
            format!("no pair failed ({links} link(s) tried)")
        } else {
            let mut s: Vec<String> = fails
                .iter()
                .take(5)
                .map(|f| suspects::describe_failure(a, f))
                .collect();
            if fails.len() > 5 {
                s.push(format!("and {} more", fails.len() - 5));
            }
            s.join("; ")
        };
        self.counted(fails.len() as f64, at, links)
    }

    /// The share of planned links measured or tried; links never measured are missing
    /// evidence, not a failure of the fabric: MISSING below the bound.
    fn coverage(&self) -> Outcome {
        let covs: Vec<&Coverage> = self
            .chosen
            .iter()
            .filter_map(|&g| self.a.coverage(g))
            .collect();
        if covs.is_empty() {
            return self.missing("no sweep (a document with `sweep`) matches this check: run bench-bw or bench-lat with --pattern all-pairs");
        }
        let sum =
            |f: fn(&Coverage) -> u64| covs.iter().map(|c| f(c)).fold(0u64, u64::saturating_add);
        let expected = sum(|c| c.expected);
        let covered = sum(|c| c.covered);
        let pct = if expected == 0 {
            100.0
        } else {
            covered as f64 / expected as f64 * 100.0
        };
        if self.c.bound.holds(pct) {
            let at = format!("{covered} of {expected} planned link(s) measured or tried");
            return self.outcome(Status::Pass, Some(pct), at, expected as usize);
        }
        let missing: Vec<&str> = covs
            .iter()
            .flat_map(|c| &c.missing)
            .take(10)
            .map(String::as_str)
            .collect();
        let mut at = format!(
            "{} of {expected} planned link(s) never measured: {}",
            expected.saturating_sub(covered),
            missing.join("; ")
        );
        let total = sum(|c| c.missing_total) as usize;
        if total > missing.len() {
            at.push_str(&format!("; and {} more", total - missing.len()));
        }
        self.outcome(Status::Missing, Some(pct), at, expected as usize)
    }

    /// The suspects the matrix (and the structure, for its groups) names in the chosen
    /// groups; MISSING where the sweeps could not clear them.
    fn suspects(&self, loc: &Localised, st: Option<&Structure>) -> Outcome {
        let (a, chosen) = (self.a, &self.chosen);
        if chosen.is_empty() {
            return self.no_sweep();
        }
        if let Some(why) = suspects_unjudged(&self.c.select, a, chosen) {
            return self.missing(&why);
        }
        let mut named: Vec<&str> = loc
            .suspects
            .iter()
            .filter(|s| s.findings.iter().any(|f| chosen.contains(&f.group_index)))
            .map(|s| s.summary.as_str())
            .collect();
        if chosen
            .iter()
            .any(|&g| structure_group(st, &a.groups[g as usize]))
        {
            named.extend(
                st.into_iter()
                    .flat_map(|s| &s.suspects)
                    .map(|s| s.summary.as_str()),
            );
        }
        let at = if named.is_empty() {
            let (lat, _) = swept(a, chosen);
            format!(
                "no suspect in {} test(s) and size(s){}",
                chosen.len(),
                if lat { "" } else { " (latency not swept)" }
            )
        } else {
            named[..named.len().min(10)].join("; ")
        };
        self.counted(named.len() as f64, at, chosen.len())
    }

    /// The cabling differences of one kind against the plan (or the fabric's regularity);
    /// MISSING without discovery; what could not be compared in its warning.
    fn cabling(&self, st: Option<&Structure>, kind: verdict::metric::DiffKind) -> Outcome {
        let Some(st) = st.filter(|s| s.discovered) else {
            return self.missing("no discovery in the inputs (HostInfo.neighbors or Document.fabric): run the sweep with neighbour discovery (LLDP, SMP, ibnetdiscover)");
        };
        let diffs: Vec<&diagnosis::structure::cabling::Diff> =
            st.cabling.iter().filter(|d| d.kind == kind).collect();
        let judged = match nics_compared(st, kind) {
            Some(0) => return self.missing(&nothing_compared(st, kind)),
            Some(n) => n,
            None => st.nodes,
        };
        let at = if diffs.is_empty() {
            match nics_compared(st, kind) {
                Some(n) => format!("none ({n} NIC(s) compared against {})", st.source),
                None => format!("none ({} node(s) against {})", st.nodes, st.source),
            }
        } else {
            diffs
                .iter()
                .take(10)
                .map(|d| format!("{}: expected {}, found {}", d.item, d.expected, d.found))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let mut o = self.counted(diffs.len() as f64, at, judged);
        o.warning = not_compared(st, kind);
        o
    }
}

/// How many NICs a check of NICs' own cables compared (`None` for the checks of switch
/// links, which count nodes).
fn nics_compared(
    st: &diagnosis::structure::Structure,
    kind: verdict::metric::DiffKind,
) -> Option<usize> {
    use verdict::metric::DiffKind;
    match kind {
        DiffKind::CableSwap | DiffKind::WrongLeaf => Some(st.compared.leaves),
        DiffKind::WrongPort => Some(st.compared.ports),
        _ => None,
    }
}

/// Why a check of NICs' cables compared none, and what would let it.
fn nothing_compared(
    st: &diagnosis::structure::Structure,
    kind: verdict::metric::DiffKind,
) -> String {
    use verdict::metric::DiffKind;
    let what = if kind == DiffKind::WrongPort {
        "no NIC's switch port was compared: discovery found no NIC on its expected leaf with a port to compare with the plan's (a plan without ports, under three rails, compares none)"
    } else {
        "no NIC's leaf was compared: discovery found no NIC whose leaf the plan (or the fabric's regularity) names"
    };
    match not_compared(st, kind) {
        Some(w) => format!("{what}; {w}"),
        None => what.to_string(),
    }
}

/// What a check of NICs' cables (`kind`: swaps, wrong leaves, wrong ports) could not
/// compare: the NICs discovery found under a name the plan does not have.
fn not_compared(
    st: &diagnosis::structure::Structure,
    kind: verdict::metric::DiffKind,
) -> Option<String> {
    use verdict::metric::DiffKind;
    // Only the checks of a NIC's own cable: switch links are compared without it.
    if !matches!(
        kind,
        DiffKind::CableSwap | DiffKind::WrongLeaf | DiffKind::WrongPort
    ) {
        return None;
    }
    let unmatched: Vec<&str> = st
        .cabling
        .iter()
        .filter(|d| d.kind == DiffKind::UnplannedNic)
        .map(|d| d.item.as_str())
        .collect();
    let mut said = Vec::new();
    if !unmatched.is_empty() {
        said.push(format!(
            "not compared: {} (discovered under a name no planned NIC has; see metric cabling_unplanned_nics)",
            unmatched.join(", ")
        ));
    }
    if kind == DiffKind::WrongPort && !st.ports_not_compared.is_empty() {
        said.push(format!(
            "ports not compared: {}",
            st.ports_not_compared.join(", ")
        ));
    }
    (!said.is_empty()).then(|| said.join("; "))
}

/// Why a suspects check over `chosen` groups judged too little to pass, if it did: no
/// link of them was measured, or (when the check names no test) only latency was swept.
/// Small-message latency barely moves on a link that trained at half its rate or drops a
/// share of its packets, so a latency-only sweep cannot clear a fabric of the faults
/// bandwidth shows; a bandwidth sweep sees a down-trained, lossy or congested link, and
/// its `at` says latency was not swept.
fn suspects_unjudged(sel: &Selector, a: &Analysis, chosen: &[u32]) -> Option<String> {
    let (lat, bw) = swept(a, chosen);
    match (lat, bw) {
        (false, false) => Some(
            "the sweeps that match this check measured no link: run bench-bw --pattern all-pairs on at least two nodes".into(),
        ),
        (true, false) if sel.test.is_none() => Some(
            "only latency was swept, and latency cannot see a link slow in bandwidth: add bench-bw --pattern all-pairs (or name the test in the check's select)".into(),
        ),
        _ => None,
    }
}

/// Whether any link of the `chosen` groups was measured in latency, and in bandwidth.
fn swept(a: &Analysis, chosen: &[u32]) -> (bool, bool) {
    let measured = |latency: bool| {
        chosen.iter().any(|&g| {
            let g = &a.groups[g as usize];
            g.key.latency == latency
                && g.matrices
                    .iter()
                    .any(|&m| a.matrices[m as usize].cells.iter().any(|c| c.measured()))
        })
    };
    (measured(true), measured(false))
}

/// Summaries of every group and rail, with the worst links.
fn views(a: &Analysis) -> Vec<GroupView> {
    a.groups
        .iter()
        .enumerate()
        .map(|(gi, g)| {
            let mut rails = Vec::new();
            let mut worst: Vec<(f64, LinkView)> = Vec::new();
            for &mi in &g.matrices {
                rails.push(rail_view(a, mi as usize));
                keep_worst(a, g, &a.matrices[mi as usize], &mut worst);
            }
            GroupView {
                label: g.label(),
                tool: g.key.tool.clone(),
                test: g.key.test.clone(),
                transport: g.key.transport.clone(),
                size_bytes: g.key.size,
                bidirectional: g.key.bidirectional,
                latency: g.key.latency,
                unit: g.unit(),
                rails,
                coverage: a.coverage(gi as u32).cloned(),
                worst: worst.into_iter().map(|w| w.1).collect(),
            }
        })
        // A group whose rows all joined a node to itself (a standalone pair on one host)
        // has no link to show.
        .filter(|v| !v.rails.is_empty())
        .collect()
}

/// One rail's matrix in figures: its links, bad, failed and flaky ones, its medians.
fn rail_view(a: &Analysis, mi: usize) -> RailView {
    let m = &a.matrices[mi];
    RailView {
        rail: a.rail_name(m),
        nodes: m.nodes.len(),
        links: m.cells.iter().filter(|c| c.tried()).count(),
        bad: m.cells.iter().filter(|c| c.is_bad()).count(),
        failed: m
            .cells
            .iter()
            .filter(|c| c.failed > 0 && !c.measured())
            .count(),
        flaky: m.cells.iter().filter(|c| c.is_flaky()).count(),
        median: opt(m.median),
        median_p99: opt(m.median_p99),
        markdown: (m.nodes.len() <= MARKDOWN_MAX).then(|| heatmap::markdown(a, mi, Shown::Primary)),
        matrix: mi,
    }
}

/// The rail's links merged into the group's worst list: failed first, then by share of
/// the median, worst first; a bounded list, so 4 million cells cost no sort.
fn keep_worst(a: &Analysis, g: &Group, m: &matrix::Matrix, worst: &mut Vec<(f64, LinkView)>) {
    let s = &a.settings;
    let keep = s.worst_links as usize;
    for (x, y, c) in m.each_cell() {
        if !c.tried() {
            continue;
        }
        let share = if !c.measured() {
            -1.0
        } else if m.median > 0.0 {
            if g.key.latency {
                m.median / c.worst as f64
            } else {
                c.worst as f64 / m.median
            }
        } else {
            1.0
        };
        if keep == 0 || (worst.len() >= keep && share >= worst.last().map_or(f64::MAX, |w| w.0)) {
            continue;
        }
        let (ea, eb) = a.ends(m, x, y);
        let view = LinkView {
            ends: format!("{} - {}", a.end_name(ea), a.end_name(eb)),
            rail: a.rail_name(m),
            value: c.measured().then_some(c.worst as f64),
            of_median_pct: (c.measured() && m.median > 0.0)
                .then(|| c.worst as f64 / m.median * 100.0),
            state: if !c.measured() {
                "failed"
            } else if c.is_flaky() {
                "flaky"
            } else if c.is_bad() {
                "bad"
            } else {
                "ok"
            },
            reasons: g.reasons(m, c, s).join("; "),
            measurements: u32::from(c.good) + u32::from(c.bad),
        };
        let at = worst.partition_point(|w| w.0 <= share);
        worst.insert(at, (share, view));
        worst.truncate(keep);
    }
}

/// Nodes that take part in some matrix (a standalone pair within one host is no node
/// pair and adds none).
fn matrix_nodes(a: &Analysis) -> usize {
    let mut seen = std::collections::HashSet::new();
    for m in &a.matrices {
        seen.extend(m.nodes.iter().copied());
    }
    seen.len()
}

/// Heatmaps: for each test, the headline size (largest bandwidth, smallest latency) and
/// every size with a suspect, every rail; p50 and p99 for latency.
fn draw(a: &Analysis, loc: &Localised) -> (Vec<Heatmap>, usize) {
    let mut headline: BTreeMap<(String, String, String, bool), u32> = BTreeMap::new();
    // Only sizes that have node pairs to draw (a standalone pair within one host has none).
    for (gi, g) in a
        .groups
        .iter()
        .enumerate()
        .filter(|(_, g)| !g.matrices.is_empty())
    {
        let k = &g.key;
        let fam = (
            k.tool.clone(),
            k.test.clone(),
            k.transport.clone(),
            k.bidirectional,
        );
        let e = headline.entry(fam).or_insert(gi as u32);
        let cur = &a.groups[*e as usize].key;
        if (k.latency && k.size < cur.size) || (!k.latency && k.size > cur.size) {
            *e = gi as u32;
        }
    }
    let mut chosen: BTreeSet<u32> = headline.into_values().collect();
    for s in &loc.suspects {
        chosen.extend(s.findings.iter().map(|f| f.group_index));
    }
    // Nodes to flag on the axes: suspects' nodes.
    let marks: Vec<u32> = {
        let names: BTreeSet<&str> = loc
            .suspects
            .iter()
            .filter(|s| matches!(s.kind, suspects::Kind::Node | suspects::Kind::Nic))
            .filter_map(|s| s.node.as_deref())
            .collect();
        (0..a.nodes.len() as u32)
            .filter(|&n| names.contains(a.nodes[n as usize].as_str()))
            .collect()
    };
    let mut out = Vec::new();
    let mut left = 0;
    for g in chosen {
        let grp = &a.groups[g as usize];
        for &mi in &grp.matrices {
            let m = &a.matrices[mi as usize];
            if m.nodes.len() < 2 {
                continue;
            }
            let shown: &[Shown] = if grp.key.latency {
                &[Shown::Primary, Shown::P99]
            } else {
                &[Shown::Primary]
            };
            for &sh in shown {
                if out.len() >= HEATMAPS_MAX {
                    left += 1;
                    continue;
                }
                let what = match (grp.key.latency, sh) {
                    (false, _) => "bandwidth",
                    (true, Shown::Primary) => "p50 latency",
                    (true, Shown::P99) => "p99 latency",
                };
                out.push(Heatmap {
                    title: format!("{}, rail {}: {what}", grp.label(), a.rail_name(m)),
                    file: format!("plots/matrix-{:02}.svg", out.len() + 1),
                    svg: heatmap::draw(a, mi as usize, sh, &marks),
                });
            }
        }
    }
    (out, left)
}

impl Cluster {
    /// Puts the matrix checks' outcomes in the verdict (replacing the placeholders the
    /// row judge left for them) and adds the inventory checks, then recounts.
    pub fn apply(&self, v: &mut Verdict) {
        for (i, o) in &self.outcomes {
            match i {
                Some(i) if *i < v.checks.len() => v.checks[*i] = o.clone(),
                _ => v.checks.push(o.clone()),
            }
        }
        v.recount();
    }

    /// `suspects.pairs`: the retest list in the format `--pattern file:PATH` reads.
    pub fn retest_text(&self, generated_at: &str) -> Option<String> {
        if self.retest.is_empty() {
            return None;
        }
        let mut s = format!(
            "# fabcheck retest list ({generated_at}): each suspect paired with known-good nodes.\n\
             # Run it over the same hosts as the sweep, e.g.\n\
             #   mpirun --hostfile hosts bench-bw --pattern file:{RETEST_FILE} --json retest.json ...\n\
             # then judge both together: aggregate report sweep.json retest.json ...\n"
        );
        for l in &self.retest {
            s.push_str(l);
            s.push('\n');
        }
        Some(s)
    }

    /// Lines for the terminal: one per suspect.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self.suspects.iter().map(|s| s.summary.clone()).collect();
        if let Some(st) = &self.structure {
            out.extend(st.shown().map(|s| s.summary.clone()));
        }
        out
    }

    /// The analysis behind the views (tests and tools).
    pub fn analysis(&self) -> &Analysis {
        &self.analysis
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use synth::sweep::{sweep_doc, Fault, SweepSpec};

    const PROFILE: &str = r#"
name = "t"
[[check]]
id = "bw"
description = "every pair"
metric = "bw_avg"
unit = "Gb/s"
min = 50.0
test = "write_bw"
each_pair = true
[[check]]
id = "failed"
description = "no failed pair"
metric = "failed_pairs"
unit = "pairs"
max = 0
[[check]]
id = "coverage"
description = "every pair measured"
metric = "matrix_coverage"
unit = "%"
min = 100
[[check]]
id = "suspects"
description = "no suspect"
metric = "suspects"
unit = "suspects"
max = 0
"#;

    fn verdict(docs: &[results::Document]) -> (Verdict, Cluster) {
        verdict_with(PROFILE, docs)
    }

    fn verdict_with(profile: &str, docs: &[results::Document]) -> (Verdict, Cluster) {
        let loaded: Vec<Loaded> = docs
            .iter()
            .map(|d| Loaded::from_text("s.json", &serde_json::to_string(d).unwrap()).unwrap())
            .collect();
        let p = verdict::profile::parse(profile, "t.toml").unwrap();
        let set = verdict::input::InputSet::of(loaded);
        let t = verdict::tables::build(&set, None);
        let mut v = verdict::judge::judge(&p, &set.docs, &t);
        let c = build(&p, &set.docs);
        c.apply(&mut v);
        (v, c)
    }

    fn status(v: &Verdict, id: &str) -> (Status, String) {
        let c = v.checks.iter().find(|c| c.id == id).unwrap();
        (c.status, c.worst_at.clone())
    }

    #[test]
    fn a_latency_only_sweep_leaves_the_suspects_check_missing() {
        // Latency cannot see a link at half its rate: "no suspect" is not judged.
        let (v, _) = verdict(&[sweep_doc(&SweepSpec::latency(4, 1))]);
        let (s, at) = status(&v, "suspects");
        assert_eq!(s, Status::Missing, "{at}");
        assert!(at.contains("only latency was swept"), "{at}");
        // Named in the check's select, latency alone is what the check asks for.
        let named = PROFILE.replace(
            "metric = \"suspects\"",
            "metric = \"suspects\"\ntest = \"send_lat\"",
        );
        let (v, _) = verdict_with(&named, &[sweep_doc(&SweepSpec::latency(4, 1))]);
        assert_eq!(status(&v, "suspects").0, Status::Pass);
        // A bandwidth sweep judges, and says latency was not swept.
        let (v, _) = verdict(&[sweep_doc(&SweepSpec::bandwidth(4, 1))]);
        let (s, at) = status(&v, "suspects");
        assert_eq!(s, Status::Pass);
        assert!(at.contains("(latency not swept)"), "{at}");
    }

    #[test]
    fn a_sweep_that_tried_no_link_judges_no_pair() {
        // A sweep whose one node measured only itself (client and server on one host):
        // rows exist, but no link between nodes was tried.
        let mut doc = synth::bandwidth_doc("h", "h", &[65536], 96.0, 3);
        for r in &mut doc.results {
            if let results::TestResult::Bandwidth(b) = r {
                b.test = "write_bw".into();
                b.transport = "verbs".into();
            }
        }
        let (v, _) = verdict(&[doc]);
        for id in ["failed", "suspects"] {
            let (s, at) = status(&v, id);
            assert_ne!(s, Status::Pass, "{id}: {at}");
        }
        assert_ne!(v.overall, "PASS");
    }

    #[test]
    fn a_healthy_complete_sweep_passes_every_matrix_check() {
        let (v, c) = verdict(&[sweep_doc(&SweepSpec::bandwidth(6, 2))]);
        assert_eq!(v.overall, "PASS", "{:?}", v.checks);
        assert_eq!(v.passed, 4);
        assert!(c.suspects.is_empty() && c.retest_text("now").is_none());
        assert_eq!(c.groups[0].coverage.as_ref().unwrap().expected, 30);
        assert_eq!(c.groups[0].rails.len(), 2);
        assert!(c.groups[0].rails[0].markdown.is_some());
        assert_eq!(c.heatmaps.len(), 2);
    }

    #[test]
    fn a_pair_bound_for_gpu_memory_or_both_directions_leaves_host_one_way_cells_alone() {
        // Per-pair bounds select groups by the judge's rule: a GPUDirect bound (memory
        // "cuda") or a bidirectional one does not judge host rows measured one way. Applied
        // to them, every cell of this healthy sweep was bad and every node a suspect.
        for extra in ["memory = \"cuda\"", "bidirectional = true"] {
            let profile = format!(
                "{PROFILE}[[check]]\nid = \"other\"\ndescription = \"out of reach\"\n\
                 metric = \"bw_avg\"\nunit = \"Gb/s\"\nmin = 1000000.0\n\
                 test = \"write_bw\"\n{extra}\neach_pair = true\n"
            );
            let (v, c) = verdict_with(&profile, &[sweep_doc(&SweepSpec::bandwidth(6, 1))]);
            assert!(c.suspects.is_empty(), "{extra}: {:?}", c.summary_lines());
            assert_eq!(status(&v, "suspects").0, Status::Pass, "{extra}");
            assert_eq!(status(&v, "bw").0, Status::Pass, "{extra}");
            assert_eq!(
                status(&v, "other").0,
                Status::Missing,
                "{extra}: no such rows"
            );
        }
    }

    #[test]
    fn a_standalone_pair_within_one_host_adds_no_node_and_no_empty_table() {
        // The demo's shape: a sweep of 4 nodes at 64 KiB beside standalone runs whose
        // client and server share one host, at a larger size.
        let sweep = sweep_doc(&SweepSpec::bandwidth(4, 1));
        let size = sweep.results[0].size_bytes();
        let mut host = synth::bandwidth_doc("h", "h", &[size * 16], 96.0, 3);
        for r in &mut host.results {
            if let results::TestResult::Bandwidth(b) = r {
                b.test = "write_bw".into();
                b.transport = "verbs".into();
            }
        }
        let (v, c) = verdict(&[sweep, host]);
        assert_eq!(v.overall, "PASS", "{:?}", v.checks);
        assert_eq!(
            c.nodes, 4,
            "the standalone host is not a node of the matrix"
        );
        assert!(
            c.groups.iter().all(|g| !g.rails.is_empty()),
            "no empty table"
        );
        assert_eq!(c.heatmaps.len(), 1, "the sweep's size is the one drawn");
    }

    #[test]
    fn a_sweep_cut_short_is_missing_coverage_naming_the_links() {
        let mut doc = sweep_doc(&SweepSpec::bandwidth(6, 1));
        doc.results.retain(|r| match r {
            results::TestResult::Bandwidth(b) => b.pair.round != Some(4),
            _ => true,
        });
        if let Some(s) = &mut doc.sweep {
            s.rounds_done = 4;
        }
        let (v, _) = verdict(&[doc]);
        let (st, at) = status(&v, "coverage");
        assert_eq!(st, Status::Missing);
        assert!(
            at.starts_with("3 of 15 planned link(s) never measured"),
            "{at}"
        );
        let cov = v.checks.iter().find(|c| c.id == "coverage").unwrap();
        assert_eq!(cov.measured, Some(80.0));
        assert_eq!(status(&v, "suspects").0, Status::Pass);
        // Without any sweep the matrix checks have no data.
        let (v, _) = verdict(&[synth::bandwidth_doc("a", "b", &[65536], 90.0, 1)]);
        assert_eq!(status(&v, "coverage").0, Status::Missing);
        assert_eq!(status(&v, "failed").0, Status::Pass);
    }

    #[test]
    fn failed_pairs_and_suspects_fail_their_checks_by_name() {
        let mut s = SweepSpec::bandwidth(8, 1);
        s.faults = vec![
            Fault::Failed {
                a: 2,
                b: 5,
                rail: 0,
            },
            Fault::Node {
                node: 6,
                factor: 0.5,
            },
        ];
        let (v, c) = verdict(&[sweep_doc(&s)]);
        let (st, at) = status(&v, "failed");
        assert_eq!(st, Status::Fail);
        assert!(
            at.contains("node0002:mlx5_0") && at.contains("node0005:mlx5_0"),
            "{at}"
        );
        assert_eq!(
            v.checks.iter().find(|c| c.id == "failed").unwrap().measured,
            Some(1.0)
        );
        let (st, at) = status(&v, "suspects");
        assert_eq!(st, Status::Fail);
        assert!(
            at.contains("node node0006") && at.contains("link node0002:mlx5_0 - node0005:mlx5_0"),
            "{at}"
        );
        assert_eq!(
            status(&v, "coverage").0,
            Status::Pass,
            "a failed pair was tried"
        );
        assert_eq!(v.overall, "FAIL");
        assert_eq!(c.failed_total, 1);
        let text = c.retest_text("now").unwrap();
        assert!(
            text.lines().any(|l| l == "node0002:mlx5_0 node0005:mlx5_0"),
            "{text}"
        );
        assert!(
            text.lines().filter(|l| l.starts_with("node0006 ")).count() == 2,
            "{text}"
        );
        assert_eq!(c.groups[0].worst[0].state, "failed");
    }
}
