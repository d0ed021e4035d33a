//! The fabric's structure in a report: groups, leaves and spines (from a plan, discovery
//! or the latency matrix), the cabling checked against the plan or the fabric's own
//! regularity, the per-direction matrix of every rail, and the smallest set of parts that
//! explains its bad cells, above the node where the cells' pattern says so.
//! `docs/structure.md` is the user's reference.

pub mod cabling;
pub mod localise;
pub mod observe;
pub mod picture;
pub mod topology;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use results::discovery::Neighbor;
use results::fabric_plan::{switch_name, FabricPlan, Tier};
use results::TestResult;
use serde::Serialize;

use cabling::{Diff, DiffKind};
use localise::{Localisation, Part, Rules};
use observe::Observed;
use topology::{Facts, Found, Topology, NONE};
use verdict::input::Loaded;
use verdict::profile::MatrixSettings;

/// A part named as the cause of bad cells, with its evidence.
#[derive(Debug, Clone, Serialize)]
pub struct StructSuspect {
    /// `leaf`, `leaf_uplinks`, `spine_layer`, `rack`, `cable_swap`, `wrong_leaf`,
    /// `wrong_port`, `missing_link`, `extra_link`, `link_downgraded`, `node`, `node_tx`,
    /// `node_rx`, `nic`, `nic_tx`, `nic_rx`, `link`, `one_way`, `path`.
    pub kind: &'static str,
    pub name: String,
    pub what: &'static str,
    /// Bad directed links it explains, of all bad ones.
    pub explains: u32,
    pub bad_links: u32,
    /// Good links that contradict it.
    pub contradicted: u32,
    /// `agrees`, `disagrees` (discovery saw it and found its cabling as meant) or
    /// `unknown`.
    pub discovery: &'static str,
    pub worst_gbit_s: Option<f64>,
    pub median_gbit_s: Option<f64>,
    pub summary: String,
    /// Switches and nodes to mark in the picture.
    #[serde(skip)]
    pub marks: Vec<String>,
    /// Node pairs to measure again (`suspects.pairs`): the two ends of a pair part
    /// (`link`, `one_way`, `path`), every rail between them; none for the others.
    #[serde(skip)]
    pub retest: Vec<(String, String)>,
}

/// One group for the picture and the tables.
#[derive(Debug, Clone, Serialize)]
pub struct GroupInfo {
    pub name: String,
    pub nodes: Vec<String>,
    pub leaves: Vec<String>,
}

/// A per-direction matrix of one rail, ordered by group.
#[derive(Debug, Clone, Serialize)]
pub struct DirMatrix {
    pub rail: String,
    pub file: String,
    #[serde(skip)]
    pub svg: String,
    pub markdown: Option<String>,
}

/// Everything the report shows about the structure.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Structure {
    /// Where groups and leaves came from: `plan (...)`, `discovery (...)`, `latency
    /// classes`, or none.
    pub source: String,
    /// The rows judged (`write_bw tcp 1MiB`), and how their directions were known.
    pub rows: String,
    pub directions: usize,
    pub one_way: usize,
    pub nodes: usize,
    pub rails: Vec<String>,
    pub groups: Vec<GroupInfo>,
    pub spines: Vec<String>,
    /// Whether discovery (neighbours or the fabric) was in the inputs.
    pub discovered: bool,
    pub cabling: Vec<Diff>,
    /// NICs on their planned leaf whose port the wrong-port check could not compare (the
    /// switch sent an address as the port id), in words.
    pub ports_not_compared: Vec<String>,
    /// How many NICs' leaves and ports the cabling checks compared.
    pub compared: cabling::Compared,
    pub suspects: Vec<StructSuspect>,
    pub bad_links: u32,
    pub links: u64,
    #[serde(skip)]
    pub svg: String,
    pub matrices: Vec<DirMatrix>,
    pub notes: Vec<String>,
    /// Whether cells across the spines were judged against the plan's uplink rates (a
    /// flow through an uplink slower than the NIC), which the matrix's own localiser
    /// cannot do.
    pub judged_by_rates: bool,
    /// Whether its suspects replace the matrix's for the rows it judged (set by
    /// `cluster`: when it names more than nodes, NICs and links).
    pub replaces: bool,
}

/// Suspect kinds the matrix's own localiser names too.
pub const NODE_KINDS: &[&str] = &["node", "nic", "link"];

impl Structure {
    /// The suspects that count beside the matrix's: all of them when they replace the
    /// matrix's, else those the matrix cannot name (above the node, directions, paths,
    /// cabling).
    pub fn shown(&self) -> impl Iterator<Item = &StructSuspect> {
        self.suspects
            .iter()
            .filter(move |s| self.replaces || !NODE_KINDS.contains(&s.kind))
    }

    /// Count of cabling differences of one kind.
    pub fn cabling_count(&self, k: DiffKind) -> usize {
        self.cabling.iter().filter(|d| d.kind == k).count()
    }
}

/// The facts of the documents: nodes, NIC names, discovery, same-rail latencies, the
/// discovered fabric.
fn facts<'a>(
    docs: &[Loaded],
    plan: Option<&'a FabricPlan>,
) -> (Facts<'a>, Vec<results::discovery::FabricLink>) {
    let mut f = Facts {
        plan,
        ..Default::default()
    };
    let mut nodes = BTreeSet::new();
    let mut links = Vec::new();
    for d in docs {
        measured_pairs(d, &mut f, &mut nodes);
        if let Some(fd) = &d.doc.fabric {
            if fd.state == "found" && links.is_empty() {
                links = fd.links.clone();
            }
        }
    }
    // After every document's rows: a neighbour's NIC is named as the rows name it.
    neighbours(docs, &mut f, &mut nodes);
    host_links(&links, &mut f, &nodes);
    f.nodes = nodes.into_iter().collect();
    (f, links)
}

/// The host links of a discovered fabric (ibnetdiscover: a CA whose node description is
/// `HOST NIC`, as MLNX_OFED sets it, on a switch port) as each NIC's neighbour where no
/// neighbour record placed it: over ibsim the records name the HCA `ibsim0` while the
/// fabric's own output held `"g1n2 mlx5_0"[1] - leaf-r1-g1[3]`, and only its switch links
/// were read. A record and a host link that disagree are named.
fn host_links(links: &[results::discovery::FabricLink], f: &mut Facts, nodes: &BTreeSet<String>) {
    let planned: BTreeSet<String> = f
        .plan
        .map(|p| p.node_names().into_iter().collect())
        .unwrap_or_default();
    let known = |h: &str| nodes.contains(h) || planned.contains(h);
    for l in links {
        let ends = [
            ((&l.a_name, l.a_port), (&l.b_name, l.b_port)),
            ((&l.b_name, l.b_port), (&l.a_name, l.a_port)),
        ];
        for ((ca, _), (sw, sw_port)) in ends {
            let Some((host, nic)) = ca.split_once(' ') else {
                continue;
            };
            let nic = nic.trim();
            if !known(host) || nic.is_empty() || sw.contains(' ') || known(sw) {
                continue;
            }
            let here = Found {
                switch: switch_name(sw),
                port: Some(sw_port.to_string()),
                alias: None,
                width: l.width.clone(),
                speed: l.speed.clone(),
                source: "ibnetdiscover (host link)".into(),
            };
            let key = (host.to_string(), nic.to_string());
            if let Some(first) = place(&mut f.found, key, &here) {
                f.disagreements.push(format!(
                    "discovery disagrees on {host} {nic}: {} by its neighbour record ({}), {} by the fabric's host link; the record is used",
                    at(&first),
                    first.source,
                    at(&here)
                ));
            }
        }
    }
}

/// The nodes and NIC names a document's pair results used, and its same-rail latencies.
fn measured_pairs(d: &Loaded, f: &mut Facts, nodes: &mut BTreeSet<String>) {
    for r in &d.doc.results {
        let pair = match r {
            TestResult::Bandwidth(b) => &b.pair,
            TestResult::Latency(l) => &l.pair,
            TestResult::Collective(_) => continue,
        };
        for p in [&pair.initiator, &pair.responder] {
            nodes.insert(p.host.clone());
            if let Some(dev) = &p.device {
                f.nics
                    .entry(p.host.clone())
                    .or_default()
                    .insert(dev.clone());
            }
        }
        if let TestResult::Latency(l) = r {
            if l.pair.initiator.host != l.pair.responder.host
                && l.pair.initiator.device == l.pair.responder.device
            {
                f.latencies.push((
                    l.pair.initiator.host.clone(),
                    l.pair.responder.host.clone(),
                    l.latency_us.p50,
                ));
            }
        }
    }
}

/// Each NIC's neighbour as the documents found it, the first document's place kept and
/// any later one that disagrees named.
fn neighbours(docs: &[Loaded], f: &mut Facts, nodes: &mut BTreeSet<String>) {
    // Which document placed each NIC first, to name both when another disagrees.
    let mut placed: HashMap<(String, String), std::path::PathBuf> = HashMap::new();
    for d in docs {
        for h in &d.doc.hosts {
            for nb in h.neighbors.iter().filter(|nb| nb.state == "found") {
                let known = f.nics.get(&h.hostname);
                let nic = [&nb.device, &nb.interface]
                    .into_iter()
                    .flatten()
                    .find(|n| known.is_some_and(|k| k.contains(*n)))
                    .or(nb.device.as_ref())
                    .or(nb.interface.as_ref());
                let Some(nic) = nic else { continue };
                let Some(sw) = nb.system_name.as_deref().or(nb.chassis_id.as_deref()) else {
                    continue;
                };
                nodes.insert(h.hostname.clone());
                let (port, alias) = port_names(nb);
                let here = Found {
                    switch: switch_name(sw),
                    port,
                    alias,
                    width: nb.width.clone(),
                    speed: nb.speed.clone(),
                    source: nb.source.clone(),
                };
                let key = (h.hostname.clone(), nic.clone());
                // The first document to place a NIC is the one named beside a later one.
                let first_doc = placed
                    .entry(key.clone())
                    .or_insert_with(|| d.path.clone())
                    .clone();
                if let Some(first) = place(&mut f.found, key.clone(), &here) {
                    let said = disagreement(&key, &first, &here, &first_doc, d);
                    f.disagreements.push(said);
                }
            }
        }
    }
}

/// The switch port's names in a neighbour record: the port id where it names a port, and
/// LLDP's port description where it differs, as another name of the port. An LLDP port id
/// of subtype `mac` or `ip` is an address, no port's name (a SONiC whose alias setup
/// failed sends its MAC, with its port name `Ethernet124` as the description; Linux's
/// lldpd sends the MAC by default). InfiniBand's port numbers are the names; its
/// `port_descr` is the switch's node description, never a port's.
fn port_names(nb: &Neighbor) -> (Option<String>, Option<String>) {
    if nb.source != "lldp" {
        return (nb.port_id.clone(), None);
    }
    let names_a_port = !matches!(nb.port_id_type.as_deref(), Some("mac" | "ip"));
    let port = nb.port_id.clone().filter(|_| names_a_port);
    let alias = nb
        .port_descr
        .clone()
        .filter(|d| !d.is_empty() && Some(d) != port.as_ref());
    (port, alias)
}

/// Records `here` as the NIC's place unless one is known already; the known place when
/// it is another switch port (a disagreement to name), else nothing.
fn place(
    found: &mut HashMap<(String, String), Found>,
    key: (String, String),
    here: &Found,
) -> Option<Found> {
    match found.get(&key) {
        None => {
            found.insert(key, here.clone());
            None
        }
        Some(first) => {
            ((&first.switch, &first.port) != (&here.switch, &here.port)).then(|| first.clone())
        }
    }
}

/// A place in words: `leaf-r1-g1 port 3`, or the switch alone when no port is known.
fn at(f: &Found) -> String {
    match &f.port {
        Some(p) => format!("{} port {p}", f.switch),
        None => f.switch.clone(),
    }
}

/// Two documents' places for one NIC, in words (the first is kept).
fn disagreement(
    (node, nic): &(String, String),
    first: &Found,
    here: &Found,
    first_doc: &std::path::Path,
    d: &Loaded,
) -> String {
    format!(
        "discovery disagrees on {node} {nic}: {} in {}, {} in {}; the first is used \
         (was it recabled between the runs?)",
        at(first),
        first_doc.display(),
        at(here),
        d.path.display()
    )
}

/// The node pair of a pair part, as `--pattern file:` names hosts (a `host/rank` node of
/// `--include-local` sweeps is no host: none).
fn retest_pair(p: Part, t: &Topology) -> Option<(String, String)> {
    let (Part::Link(a, b, _) | Part::OneWay(a, b, _) | Part::Path(a, b, _)) = p else {
        return None;
    };
    let (a, b) = (&t.nodes[a as usize], &t.nodes[b as usize]);
    (!a.contains('/') && !b.contains('/')).then(|| (a.clone(), b.clone()))
}

/// A part in words: its kind, its name, what it is and what to check, and the switches
/// (or nodes) the fabric picture marks.
fn describe(p: Part, t: &Topology, diffs: &[Diff]) -> Description {
    match p {
        Part::Leaf(_)
        | Part::Uplinks(_)
        | Part::SpineLayer(_)
        | Part::Rack(_)
        | Part::Cabling(_) => describe_above(p, t, diffs),
        _ => describe_host(p, t),
    }
}

/// (kind, name, what it is, marked switches or nodes) of a part.
type Description = (&'static str, String, &'static str, Vec<String>);

/// A part above the node: a leaf, its uplinks, a rail's spine layer, a rack, a cabling fault.
fn describe_above(p: Part, t: &Topology, diffs: &[Diff]) -> Description {
    match p {
        Part::Leaf(l) => (
            "leaf",
            t.switch_name(l).into(),
            "the leaf switch (ASIC, power, configuration): its nodes are bad on its rail inside and across the group, fine on other rails",
            vec![t.switch_name(l).into()],
        ),
        Part::Uplinks(l) => (
            "leaf_uplinks",
            t.switch_name(l).into(),
            "the leaf's uplinks (optics, cables, spine ports, or too few links): inside the group fine, across groups degraded (all pairs: every uplink; some pairs, hashed by ECMP: one uplink or its spine port)",
            vec![format!("up:{}", t.switch_name(l))],
        ),
        Part::SpineLayer(r) => (
            "spine_layer",
            format!("spines of {}", t.rails.get(r as usize).map_or("?", |s| s.as_str())),
            if t.switches.iter().filter(|s| s.tier == Tier::Leaf && s.rail == r).count() == 2 {
                // Every cross-leaf pair of the rail touches both leaves: a bad uplink of
                // either and a bad spine port hash the same pairs onto the same slow path.
                "a spine, a spine port, or one or all uplinks of either leaf on this rail (with two leaves on a rail every cross-group pair touches both, and the hosts cannot tell them apart): cross-group pairs bad, some or all, no pair inside a leaf; check both leaves' uplinks and each spine's ports and counters"
            } else {
                "a spine or spine port on this rail: scattered cross-group pairs bad, no pair inside a leaf; check each spine's ports and counters"
            },
            vec![format!("spines:{r}")],
        ),
        Part::Rack(k) => (
            "rack",
            t.racks.get(k as usize).cloned().unwrap_or_default(),
            "the rack's shared part (fibre trunk, patch panel, power): its nodes bad on several rails, the leaves otherwise fine",
            vec![],
        ),
        Part::Cabling(c) => {
            let d = &diffs[c as usize];
            (d.kind.as_str(), d.item.clone(), d.what, d.switches.clone())
        }
        _ => describe_host(p, t),
    }
}

/// A node or a part of one: the node, its send or receive side, a NIC, one side of it,
/// a link, one direction, an ECMP path.
fn describe_host(p: Part, t: &Topology) -> Description {
    let node = |i: u32| t.nodes[i as usize].clone();
    let nic = |i: u32, r: u32| format!("{} {}", t.nodes[i as usize], t.nic_name(i, r));
    match p {
        Part::Node(i) => ("node", node(i), "the node: host, PCIe, or all of its NICs' cabling", vec![node(i)]),
        Part::NodeTx(i) => (
            "node_tx",
            node(i),
            "sends slowly to every peer on every rail, receives fine: the host's transmit path (PCIe, memory, NUMA, GPU)",
            vec![node(i)],
        ),
        Part::NodeRx(i) => (
            "node_rx",
            node(i),
            "receives slowly from every peer on every rail, sends fine: the host's receive path (PCIe, memory, NUMA, GPU)",
            vec![node(i)],
        ),
        Part::Nic(i, r) => ("nic", nic(i, r), "this NIC: port, optic, cable or leaf port", vec![node(i)]),
        Part::Tx(i, r) => (
            "nic_tx",
            nic(i, r),
            "sends slowly to every peer, receives fine: the NIC's transmit side, its optic's transmitter or the leaf port's receiver",
            vec![node(i)],
        ),
        Part::Rx(i, r) => (
            "nic_rx",
            nic(i, r),
            "receives slowly from every peer, sends fine: the NIC's receive side, its optic's receiver or the leaf port's transmitter",
            vec![node(i)],
        ),
        Part::Link(a, b, r) => (
            "link",
            format!("{} - {}", nic(a, r), nic(b, r)),
            "the path between these two ends, both directions",
            vec![],
        ),
        Part::OneWay(a, b, r) => (
            "one_way",
            format!("{} -> {}", nic(a, r), nic(b, r)),
            "one direction of one path (the other direction is fine)",
            vec![],
        ),
        Part::Path(a, b, r) => (
            "path",
            format!("{} - {}", nic(a, r), nic(b, r)),
            "an ECMP path fault, not a NIC: some flows of the pair slow, others fine; a spine or uplink on one of its paths",
            vec![],
        ),
        // `describe` sends the parts above the node to `describe_above`.
        _ => unreachable!("a part above the node reached describe_host"),
    }
}

/// Discovery's word on a part.
fn agreement(p: Part, t: &Topology, diffs: &[Diff], fabric: bool) -> &'static str {
    let names = |s: &str| {
        diffs.iter().any(|d| {
            d.switches.iter().any(|x| x == s)
                && matches!(d.kind, DiffKind::MissingLink | DiffKind::LinkDowngraded)
        })
    };
    match p {
        Part::Cabling(_) => "agrees",
        Part::Leaf(l) | Part::Uplinks(l) => {
            if names(t.switch_name(l)) {
                "agrees"
            } else if fabric {
                "disagrees"
            } else {
                "unknown"
            }
        }
        Part::SpineLayer(r) => {
            let leaves: Vec<&str> = t
                .switches
                .iter()
                .filter(|s| s.tier == Tier::Leaf && s.rail == r)
                .map(|s| s.name.as_str())
                .collect();
            if leaves.iter().any(|l| names(l)) {
                "agrees"
            } else if fabric {
                "disagrees"
            } else {
                "unknown"
            }
        }
        Part::Nic(i, r) | Part::Tx(i, r) | Part::Rx(i, r) => {
            hosts_word(nic_fault(diffs, i, Some(r)), seen(t, i, r))
        }
        Part::Node(i) | Part::NodeTx(i) | Part::NodeRx(i) => hosts_word(
            nic_fault(diffs, i, None),
            (0..t.rails_n() as u32).all(|r| seen(t, i, r)),
        ),
        Part::Link(a, b, r) | Part::OneWay(a, b, r) => hosts_word(
            nic_fault(diffs, a, Some(r)) || nic_fault(diffs, b, Some(r)),
            seen(t, a, r) && seen(t, b, r),
        ),
        _ => "unknown",
    }
}

/// Discovery's word on a part of the hosts: it agrees when a cabling check found a fault
/// on the part's NICs, disagrees when it saw every one of them cabled as meant, and is
/// unknown when it did not see them all.
fn hosts_word(fault: bool, seen: bool) -> &'static str {
    if fault {
        "agrees"
    } else if seen {
        "disagrees"
    } else {
        "unknown"
    }
}

/// Whether a cabling check found node `i`'s NIC of rail `r` (of any rail: `None`) swapped,
/// on a wrong leaf or on a wrong port.
fn nic_fault(diffs: &[Diff], i: u32, r: Option<u32>) -> bool {
    diffs.iter().any(|d| {
        d.node == i
            && matches!(
                d.kind,
                DiffKind::CableSwap | DiffKind::WrongLeaf | DiffKind::WrongPort
            )
            && r.is_none_or(|r| d.rails.contains(&r))
    })
}

/// Whether discovery found node `i`'s NIC of rail `r`.
fn seen(t: &Topology, i: u32, r: u32) -> bool {
    t.found[t.slot(i, r)].is_some()
}

/// Builds the structure view of `docs`; `None` when nothing can be said (no bandwidth
/// pair between two nodes, no plan, no discovery).
pub fn build(docs: &[Loaded], plan: Option<&FabricPlan>, s: &MatrixSettings) -> Option<Structure> {
    let (f, links) = facts(docs, plan);
    if f.nodes.is_empty() && plan.is_none() {
        return None;
    }
    let t = Topology::build(&f);
    let discovered = !f.found.is_empty() || !links.is_empty();
    // Nothing known above the node (no plan, no discovery, no latency classes): no
    // structure section, whether the rows were read whole or streamed.
    if !t.known && plan.is_none() && !discovered {
        return None;
    }
    let diffs = cabling::check(&t, plan, &links);
    let observed = observe::observe(docs, &t);
    let mut st = Structure {
        source: t.source.clone(),
        nodes: t.nodes.len(),
        rails: t.rails.clone(),
        discovered,
        notes: f.disagreements.clone(),
        ports_not_compared: cabling::ports_not_compared(&t, plan),
        compared: cabling::compared(&t, plan),
        ..Default::default()
    };
    let groups = group_infos(&t);
    st.spines = t
        .switches
        .iter()
        .filter(|x| x.tier != Tier::Leaf && !x.inferred)
        .map(|x| x.name.clone())
        .collect();
    st.groups = groups;
    let loc = observed.as_ref().map(|o| run(o, &t, s, &diffs));
    let mut suspects = Vec::new();
    let mut explained_diffs = BTreeSet::new();
    if let (Some(o), Some(loc)) = (&observed, &loc) {
        st.rows = o.label.clone();
        st.directions = o.directions;
        st.one_way = o.one_way;
        st.bad_links = loc.bad_cells;
        st.links = loc.cells;
        st.judged_by_rates = t.uplink_share.iter().any(|&x| x < 1.0);
        st.notes.extend(measurement_notes(o, &t));
        for p in &loc.picks {
            if let Part::Cabling(c) = p.part {
                explained_diffs.insert(c);
            }
            suspects.push(suspect_of(p, o, loc, &t, &diffs, !links.is_empty()));
        }
    }
    // Cabling differences no measurement showed are suspects on discovery alone.
    for (i, d) in diffs.iter().enumerate() {
        if explained_diffs.contains(&(i as u32)) {
            continue;
        }
        let touched = loc.as_ref().map_or(0, |l| l.bad_touching(d.node, &d.rails));
        suspects.push(discovery_only(d, touched, st.bad_links));
    }
    st.suspects = suspects;
    st.cabling = diffs;
    st.svg = picture::fabric_svg(&t, &st.suspects);
    if let (Some(o), Some(loc)) = (&observed, &loc) {
        st.matrices = picture::matrices(o, &t, loc);
        if o.n > picture::MATRIX_MAX {
            st.notes.push(format!(
                "per-direction matrices drawn for up to {} nodes; {} measured",
                picture::MATRIX_MAX,
                o.n
            ));
        }
    }
    Some(st)
}

/// What the reader should know about how the cells were judged: bidirectional rows left
/// out, cells across slower planned uplinks judged by the plan's rates.
fn measurement_notes(o: &Observed, t: &Topology) -> Vec<String> {
    let mut notes = Vec::new();
    if o.summed_skipped > 0 {
        notes.push(format!(
            "{} bidirectional row(s) without per-direction figures left out of the per-direction matrix (a summed figure cannot say which end is slow)",
            o.summed_skipped
        ));
    }
    let slow: Vec<String> = t
        .uplink_share
        .iter()
        .enumerate()
        .filter(|(_, &x)| x < 1.0)
        .map(|(i, x)| format!("{} {x:.3}", t.switch_name(i as u32)))
        .collect();
    if !slow.is_empty() {
        notes.push(format!(
            "cells across the spines are judged against the rail median times what one flow reaches through the slowest planned uplink of its leaves, as a share of the NIC's rate ({}{}); \"rail median\" in such a suspect's line is that product",
            slow.iter().take(8).cloned().collect::<Vec<_>>().join(", "),
            if slow.len() > 8 { format!(" and {} more", slow.len() - 8) } else { String::new() }
        ));
    }
    notes
}

/// A localised part as a suspect: in words, with its figures and the pair to retest.
fn suspect_of(
    p: &localise::Pick,
    o: &Observed,
    loc: &Localisation,
    t: &Topology,
    diffs: &[Diff],
    fabric: bool,
) -> StructSuspect {
    let (kind, name, what, marks) = describe(p.part, t, diffs);
    let retest = retest_pair(p.part, t).into_iter().collect();
    let discovery = agreement(p.part, t, diffs, fabric);
    let finite = |v: f64| v.is_finite().then_some(v);
    StructSuspect {
        kind,
        summary: format!(
            "{kind} {name}: explains {} of the {} bad links, contradicted by {} good ones, discovery {discovery} ({}{})",
            p.explains,
            loc.bad_cells,
            p.contradicted,
            o.label,
            finite(p.worst_gbit_s)
                .map(|w| format!("; worst {} Gb/s, rail median {} Gb/s", verdict::judge::format_value(w), verdict::judge::format_value(p.median_gbit_s)))
                .unwrap_or_default()
        ),
        name,
        what,
        explains: p.explains,
        bad_links: loc.bad_cells,
        contradicted: p.contradicted,
        discovery,
        worst_gbit_s: finite(p.worst_gbit_s),
        median_gbit_s: finite(p.median_gbit_s),
        marks,
        retest,
    }
}

/// A cabling difference the set cover did not choose: a suspect on discovery, with the bad
/// cells of its NICs (other parts explained them, or there were none).
fn discovery_only(d: &Diff, touched: u32, bad_links: u32) -> StructSuspect {
    StructSuspect {
        kind: d.kind.as_str(),
        name: d.item.clone(),
        what: d.what,
        explains: touched,
        bad_links,
        contradicted: 0,
        discovery: "agrees",
        worst_gbit_s: None,
        median_gbit_s: None,
        summary: format!(
            "{} {}: expected {}, found {} (against {}); explains {touched} of the {} bad links, discovery agrees",
            d.kind.as_str(),
            d.item,
            d.expected,
            d.found,
            d.against,
            bad_links
        ),
        marks: d.switches.clone(),
        retest: Vec::new(),
    }
}

/// The set cover with the profile's rules.
pub fn run(o: &Observed, t: &Topology, s: &MatrixSettings, diffs: &[Diff]) -> Localisation {
    let rules = Rules {
        bw_below_median: s.bw_below_median,
        suspect_share: s.suspect_share,
        high_share: s.suspect_share.max(0.9),
        min_links: s.min_links,
        cabling: diffs
            .iter()
            .enumerate()
            .filter(|(_, d)| {
                matches!(d.kind, DiffKind::CableSwap | DiffKind::WrongLeaf) && d.node != NONE
            })
            .map(|(i, d)| (i as u32, d.node, d.rails.clone()))
            .collect(),
    };
    localise::localise(o, t, &rules)
}

fn group_infos(t: &Topology) -> Vec<GroupInfo> {
    let mut g: BTreeMap<u32, GroupInfo> = BTreeMap::new();
    for (i, n) in t.nodes.iter().enumerate() {
        let gi = t.node_group[i];
        g.entry(gi)
            .or_insert_with(|| GroupInfo {
                name: if gi == NONE {
                    "(no group)".into()
                } else {
                    t.group_name(gi).into()
                },
                nodes: vec![],
                leaves: vec![],
            })
            .nodes
            .push(n.clone());
    }
    let mut leaves: HashMap<u32, BTreeSet<(u32, String)>> = HashMap::new();
    for s in t.switches.iter().filter(|s| s.tier == Tier::Leaf) {
        leaves
            .entry(s.group)
            .or_default()
            .insert((s.rail, s.name.clone()));
    }
    for (k, v) in g.iter_mut() {
        v.leaves = leaves
            .remove(k)
            .unwrap_or_default()
            .into_iter()
            .map(|x| x.1)
            .collect();
    }
    g.into_values().collect()
}

/// (kind, name) of every part the localisation and the cabling checks name, as
/// [`build`] lists them (for tests and the scale benchmark).
pub fn named(t: &Topology, diffs: &[Diff], loc: &Localisation) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let mut explained = BTreeSet::new();
    for p in &loc.picks {
        if let Part::Cabling(c) = p.part {
            explained.insert(c);
        }
        let (kind, name, _, _) = describe(p.part, t, diffs);
        out.insert((kind.to_string(), name));
    }
    for (i, d) in diffs.iter().enumerate() {
        if !explained.contains(&(i as u32)) {
            out.insert((d.kind.as_str().to_string(), d.item.clone()));
        }
    }
    out
}

/// Names of the suspects for the terminal (one line each).
pub fn summary_lines(st: &Structure) -> Vec<String> {
    st.suspects.iter().map(|s| s.summary.clone()).collect()
}
