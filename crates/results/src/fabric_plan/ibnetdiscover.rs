//! An `ibnetdiscover` output as the plan: the fabric as built, taken as the golden one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::*;

use crate::ibnet::{is_aggregation_node, switch_names};
pub use crate::ibnet::{switch_name, IbNode, IbPort};

/// `g0n0 rail0` / `a08-p1-dgx-04-c01 mlx5_5` / `hostname HCA-1`: host and NIC of a CA's
/// node description (the NIC is the last word; a one-word description is the host alone,
/// its NIC named after the node id).
pub fn ca_name(desc: &str, id: &str) -> (String, String) {
    match desc.trim().rsplit_once(' ') {
        Some((h, n)) if !h.trim().is_empty() => (h.trim().to_string(), n.to_string()),
        _ => (desc.trim().to_string(), id.to_string()),
    }
}

/// The node blocks of `ibnetdiscover` text output (read by [`crate::ibnet`]); the error
/// names the file and line.
pub fn parse_ibnetdiscover(file: &str, text: &str) -> Result<Vec<IbNode>> {
    let nodes = crate::ibnet::parse_nodes(text).map_err(|e| PlanError(format!("{file} {e}")))?;
    if nodes.is_empty() {
        return Err(PlanError(format!(
            "{file}: no Switch or Ca block; is this the output of ibnetdiscover (not -p, not --cache)?"
        )));
    }
    Ok(nodes)
}

/// An `ibnetdiscover` output as the plan ("as built" taken as golden): switches with CAs
/// are leaves, the others spines (core above spines); each CA port a NIC (rail: the host's
/// NICs in natural name order), port = the leaf's port number; switch links counted.
/// Switches are named by [`switch_names`] (their own name, or their GUID id when the
/// description names none alone); Aggregation Nodes are no hosts and make no leaf; a
/// switch port cabled to the same switch (a loop-back) is no link between switches.
pub fn import_ibnetdiscover(file: &str, text: &str) -> Result<FabricPlan> {
    let nodes = parse_ibnetdiscover(file, text)?;
    let fabric = Fabric::new(&nodes);
    let (host_nics, leaves) = fabric.host_nics();
    let (link_counts, neighbours) = fabric.switch_links();
    let mut plan = FabricPlan {
        version: 1,
        ..Default::default()
    };
    plan.switch = fabric.switches(&leaves, &neighbours);
    plan.nic = railed(host_nics);
    plan.link = counted_links(link_counts);
    Ok(plan)
}

/// The nodes of one output, by id, and the name of each switch.
struct Fabric<'a> {
    nodes: &'a [IbNode],
    by_id: HashMap<&'a str, &'a IbNode>,
    names: BTreeMap<String, String>,
}

impl<'a> Fabric<'a> {
    fn new(nodes: &'a [IbNode]) -> Self {
        Fabric {
            nodes,
            by_id: nodes.iter().map(|n| (n.id.as_str(), n)).collect(),
            names: switch_names(nodes),
        }
    }

    fn name(&self, n: &IbNode) -> String {
        self.names
            .get(&n.id)
            .cloned()
            .unwrap_or_else(|| n.id.clone())
    }

    fn desc(n: &IbNode) -> String {
        n.desc.clone().unwrap_or_else(|| n.id.clone())
    }

    fn switch_peer(&self, p: &IbPort) -> Option<&'a IbNode> {
        self.by_id
            .get(p.peer_id.as_str())
            .copied()
            .filter(|x| x.switch)
    }

    /// Every host's NICs and the switches they hang from (the leaves, by id). A CA with
    /// several ports is one NIC per port (`HCA-1/2`).
    fn host_nics(&self) -> (HostNics, BTreeSet<String>) {
        let mut hosts = HostNics::new();
        let mut leaves = BTreeSet::new();
        let cas = self.nodes.iter().filter(|n| !n.switch);
        for n in cas.filter(|n| !is_aggregation_node(&Self::desc(n))) {
            let (host, nic) = ca_name(&Self::desc(n), &n.id);
            for p in &n.ports {
                let Some(peer) = self.switch_peer(p) else {
                    continue;
                };
                leaves.insert(peer.id.clone());
                let nic = if n.ports.len() > 1 {
                    format!("{nic}/{}", p.port)
                } else {
                    nic.clone()
                };
                hosts.entry(host.clone()).or_default().push((
                    nic,
                    self.name(peer),
                    p.peer_port.to_string(),
                ));
            }
        }
        (hosts, leaves)
    }

    /// Cables between two switches, counted per (name, name) pair, each once; and each
    /// switch's neighbours by name.
    #[allow(clippy::type_complexity)]
    fn switch_links(
        &self,
    ) -> (
        BTreeMap<(String, String), u32>,
        BTreeMap<String, BTreeSet<String>>,
    ) {
        let mut counts: BTreeMap<(String, String), u32> = BTreeMap::new();
        let mut neighbours: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for n in self.nodes.iter().filter(|n| n.switch) {
            for p in &n.ports {
                let Some(peer) = self.switch_peer(p) else {
                    continue;
                };
                if peer.id == n.id
                    || seen.contains(&(peer.id.clone(), p.peer_port))
                    || !seen.insert((n.id.clone(), p.port))
                {
                    continue;
                }
                let (a, b) = (self.name(n), self.name(peer));
                neighbours.entry(a.clone()).or_default().insert(b.clone());
                neighbours.entry(b.clone()).or_default().insert(a.clone());
                let k = if a <= b { (a, b) } else { (b, a) };
                *counts.entry(k).or_default() += 1;
            }
        }
        (counts, neighbours)
    }

    /// Every switch with its tier, by its distance in cables from the nearest switch that
    /// carries hosts: 0 a leaf, 1 a spine, 2 a core. A pod hanging below the core whose
    /// leaves carry no host yet (Selene's management pod on the day of its capture) reads
    /// downward from the core: 3 a spine, 4 a leaf, and so on. A switch that reaches no
    /// leaf at all is a spine.
    fn switches(
        &self,
        leaves: &BTreeSet<String>,
        neighbours: &BTreeMap<String, BTreeSet<String>>,
    ) -> Vec<PlanSwitch> {
        let leaf_names: BTreeSet<String> = self
            .nodes
            .iter()
            .filter(|n| leaves.contains(&n.id))
            .map(|n| self.name(n))
            .collect();
        let level = levels(&leaf_names, neighbours);
        let mut out: Vec<PlanSwitch> = Vec::new();
        for n in self.nodes.iter().filter(|n| n.switch) {
            let name = self.name(n);
            let tier = match level.get(&name) {
                Some(0) => Tier::Leaf,
                Some(2) => Tier::Core,
                Some(k) if *k > 2 && k % 2 == 0 => Tier::Leaf,
                _ => Tier::Spine,
            };
            let label = n.desc.as_deref().map(str::trim).filter(|d| *d != name);
            let label = label.filter(|_| name == n.id).map(str::to_string);
            if out.iter().all(|s| s.name != name) {
                out.push(PlanSwitch {
                    name,
                    tier,
                    group: None,
                    rail: None,
                    rack: None,
                    label,
                });
            }
        }
        out
    }
}

/// Each switch's distance in cables from the nearest of `leaves` (breadth first).
fn levels(
    leaves: &BTreeSet<String>,
    neighbours: &BTreeMap<String, BTreeSet<String>>,
) -> BTreeMap<String, u32> {
    let mut level: BTreeMap<String, u32> = leaves.iter().map(|l| (l.clone(), 0)).collect();
    let mut frontier: Vec<String> = leaves.iter().cloned().collect();
    let mut k = 0;
    while !frontier.is_empty() {
        k += 1;
        let mut next = Vec::new();
        for n in &frontier {
            for p in neighbours.get(n).into_iter().flatten() {
                if !level.contains_key(p) {
                    level.insert(p.clone(), k);
                    next.push(p.clone());
                }
            }
        }
        frontier = next;
    }
    level
}
