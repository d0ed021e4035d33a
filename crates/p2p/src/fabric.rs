//! The fabric plan as a sweep uses it (`--plan FILE`, the file `aggregate --plan` reads):
//! nodes scheduled in the plan's order, group by group, so rounds and the matrix come out
//! the same whatever order mpirun or the hosts file gave; planned nodes missing from the
//! run and hosts the plan does not know named before the first round (on acceptance day a
//! node left out of the host list is otherwise found only when the report is read); each
//! scheduled pair labelled by hop: both NICs on one leaf (one switch) or across the spines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use results::fabric_plan::{self, FabricPlan};
use results::schema::SweepPlan;
use serde::{Deserialize, Serialize};

/// What the schedule needs of a plan, small enough to share with every rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FabricOrder {
    /// Where it came from (`native plan.toml`).
    pub source: String,
    /// Planned nodes, group by group (groups in order of first mention), each group's
    /// nodes in the plan's order.
    pub nodes: Vec<String>,
    /// `node nic` -> the leaf it is planned on.
    pub leaf: BTreeMap<String, String>,
    /// Leaves oversubscribed by the plan's declared rates, with the pairs across the
    /// spines their uplinks carry at once at line rate. A bandwidth sweep holds every round
    /// to it (the root clears it for latency, which loads no uplink).
    #[serde(default)]
    pub leaf_cap: BTreeMap<String, u32>,
    /// The same per group, for the messages and the document: its tightest leaf.
    #[serde(default)]
    pub cross_cap: BTreeMap<String, CrossCap>,
    /// `node nic` -> the planned leaf discovery found it on instead (set by the root from
    /// the ranks' LLDP or SMP neighbours): a pair is budgeted on the leaves its NICs are
    /// on, so a swapped cable does not load uplinks the round did not count.
    #[serde(default)]
    pub built: BTreeMap<String, String>,
}

/// Per node and rail, the index of the leaf its NIC is on (`None`: not placed).
pub type NicLeaves = Vec<Vec<Option<usize>>>;

/// How many pairs across the spines one group's uplinks carry at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossCap {
    /// Pairs at once (at least one).
    pub pairs: u32,
    /// The group's most oversubscribed leaf.
    pub leaf: String,
    /// Its ratio of node-port to uplink capacity (4 for 4:1).
    pub oversubscription: f64,
}

impl FabricOrder {
    /// The order, groups and uplink budgets of a fabric plan.
    pub fn from_plan(plan: &FabricPlan) -> FabricOrder {
        let group_of_switch = |s: &str| plan.switch(s).and_then(|x| x.group.clone());
        let mut group: BTreeMap<String, String> = BTreeMap::new();
        for n in &plan.node {
            if let Some(g) = &n.group {
                group.insert(n.name.clone(), g.clone());
            }
        }
        for n in &plan.nic {
            if let Some(g) = group_of_switch(&n.switch) {
                group.entry(n.node.clone()).or_insert(g);
            }
        }
        let names = plan.node_names();
        let mut groups: Vec<String> = Vec::new();
        for n in &names {
            if let Some(g) = group.get(n) {
                if !groups.contains(g) {
                    groups.push(g.clone());
                }
            }
        }
        let rank = |n: &String| {
            group
                .get(n)
                .and_then(|g| groups.iter().position(|x| x == g))
                .unwrap_or(usize::MAX)
        };
        let mut nodes = names.clone();
        nodes.sort_by_key(rank);
        // Each group is held to its tightest oversubscribed leaf. A pair across the
        // spines sends both ways at once, so each leaf it touches carries one flow up and
        // one down: the uplinks' capacity over a NIC's rate is the pairs at line rate.
        let mut cross_cap: BTreeMap<String, CrossCap> = BTreeMap::new();
        let mut leaf_cap: BTreeMap<String, u32> = BTreeMap::new();
        for (leaf, c) in plan.leaf_capacity() {
            if c.oversubscription() <= 1.0 + 1e-9 {
                continue;
            }
            leaf_cap.insert(leaf.clone(), c.flows_at_line_rate());
            let Some(g) = group_of_switch(&leaf) else {
                continue;
            };
            let cap = CrossCap {
                pairs: c.flows_at_line_rate(),
                leaf,
                oversubscription: c.oversubscription(),
            };
            match cross_cap.get(&g) {
                Some(old) if old.pairs <= cap.pairs => {}
                _ => {
                    cross_cap.insert(g, cap);
                }
            }
        }
        FabricOrder {
            source: plan.source.clone(),
            nodes,
            leaf: plan
                .nic
                .iter()
                .map(|n| (format!("{} {}", n.node, n.nic), n.switch.clone()))
                .collect(),
            leaf_cap,
            cross_cap,
            built: BTreeMap::new(),
        }
    }

    /// Stops holding rounds (latency sweeps load no uplink).
    pub fn uncapped(&mut self) {
        self.leaf_cap.clear();
        self.cross_cap.clear();
    }

    /// Takes the leaves discovery found (each rank's LLDP or SMP neighbours, on the root)
    /// where they are planned leaves other than the NIC's own; returns a line per NIC
    /// moved. Only the budget of the rounds uses them: hops are counted by the plan.
    pub fn as_built(&mut self, hosts: &[results::HostInfo]) -> Vec<String> {
        let leaves: BTreeSet<&String> = self.leaf.values().collect();
        let mut moved = BTreeMap::new();
        for h in hosts {
            for nb in h.neighbors.iter().filter(|n| n.state == "found") {
                let Some(sw) = nb.system_name.as_deref().or(nb.chassis_id.as_deref()) else {
                    continue;
                };
                let sw = fabric_plan::switch_name(sw);
                for nic in [&nb.device, &nb.interface].into_iter().flatten() {
                    let key = format!("{} {nic}", h.hostname);
                    match self.leaf.get(&key) {
                        Some(planned) if *planned != sw && leaves.contains(&sw) => {
                            moved.insert(key, (planned.clone(), sw.clone()));
                        }
                        _ => {}
                    }
                }
            }
        }
        moved
            .into_iter()
            .map(|(key, (planned, found))| {
                let line = format!("{key} is on {found} (planned {planned})");
                self.built.insert(key, found);
                line
            })
            .collect()
    }

    /// For the schedule, when some leaf is held: per node and rail the leaf its NIC is on
    /// (an index; `None` where the plan does not place it), and each leaf's pairs across
    /// the spines per round (`u32::MAX`: not held). `nic(node, rail)` names a NIC.
    pub fn caps_of(
        &self,
        nodes: &[String],
        rails: usize,
        nic: impl Fn(usize, usize) -> Option<String>,
    ) -> Option<(NicLeaves, Vec<u32>)> {
        if self.leaf_cap.is_empty() {
            return None;
        }
        let names: Vec<&String> = self
            .leaf
            .values()
            .chain(self.built.values())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let on = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (0..rails)
                    .map(|r| {
                        let key = format!("{} {}", host_of(n), nic(i, r)?);
                        let leaf = self.built.get(&key).or_else(|| self.leaf.get(&key))?;
                        names.binary_search(&leaf).ok()
                    })
                    .collect()
            })
            .collect();
        let caps = names
            .iter()
            .map(|l| self.leaf_cap.get(*l).copied().unwrap_or(u32::MAX))
            .collect();
        Some((on, caps))
    }

    /// Reads and validates a plan file (format detected), for the root.
    pub fn load(path: &Path) -> Result<FabricOrder, String> {
        fabric_plan::load(path, None)
            .map(|p| FabricOrder::from_plan(&p))
            .map_err(|e| e.to_string())
    }

    /// Puts `nodes` (a run's, host or `host/rank`) in the plan's order; nodes the plan
    /// does not name keep their order after the planned ones.
    pub fn order(&self, nodes: &mut [String]) {
        let at: BTreeMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        nodes.sort_by_key(|n| at.get(host_of(n)).copied().unwrap_or(usize::MAX));
    }

    /// The planned nodes with no rank in the run, and the run's hosts the plan does not
    /// name.
    pub fn check(&self, nodes: &[String]) -> (Vec<String>, Vec<String>) {
        let run: BTreeSet<&str> = nodes.iter().map(|n| host_of(n)).collect();
        let planned: BTreeSet<&str> = self.nodes.iter().map(String::as_str).collect();
        let missing = self
            .nodes
            .iter()
            .filter(|n| !run.contains(n.as_str()))
            .cloned()
            .collect();
        let unplanned = run
            .iter()
            .filter(|n| !planned.contains(*n))
            .map(|n| n.to_string())
            .collect();
        (missing, unplanned)
    }

    /// The leaf of one end (host and NIC as the rows name them), when the plan has it.
    pub fn leaf_of(&self, host: &str, nic: Option<&str>) -> Option<&str> {
        self.leaf
            .get(&format!("{host} {}", nic?))
            .map(String::as_str)
    }

    /// The plan section of the document: what was checked and the pairs by hop.
    pub fn record(&self, nodes: &[String], hops: impl Iterator<Item = Hop>) -> SweepPlan {
        let (missing, unplanned) = self.check(nodes);
        let mut p = SweepPlan {
            source: self.source.clone(),
            missing,
            unplanned,
            ..Default::default()
        };
        for h in hops {
            match h {
                Hop::SameLeaf => p.same_leaf_pairs += 1,
                Hop::AcrossSpines => p.cross_leaf_pairs += 1,
                Hop::Unknown => p.unknown_pairs += 1,
            }
        }
        p
    }
}

/// How many switches a pair crosses, by the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// Both NICs on one leaf: one switch.
    SameLeaf,
    /// Leaf, spine, leaf.
    AcrossSpines,
    /// An end the plan does not place (no NIC name, or not in the plan).
    Unknown,
}

impl Hop {
    /// Where a pair's path goes given its two ends' leaves (unknown when either is).
    pub fn of(a: Option<&str>, b: Option<&str>) -> Hop {
        match (a, b) {
            (Some(x), Some(y)) if x == y => Hop::SameLeaf,
            (Some(_), Some(_)) => Hop::AcrossSpines,
            _ => Hop::Unknown,
        }
    }
}

/// The host of a schedule node (`host`, or `host/rank` with --include-local).
fn host_of(node: &str) -> &str {
    node.split_once('/').map_or(node, |(h, _)| h)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = r#"
version = 1
[[switch]]
name = "leaf-b"
tier = "leaf"
group = "b"
[[switch]]
name = "leaf-a"
tier = "leaf"
group = "a"
[[switch]]
name = "spine0"
tier = "spine"
[[nic]]
node = "b1"
nic = "rail0"
rail = 0
switch = "leaf-b"
[[nic]]
node = "a1"
nic = "rail0"
rail = 0
switch = "leaf-a"
[[nic]]
node = "b0"
nic = "rail0"
rail = 0
switch = "leaf-b"
[[nic]]
node = "a0"
nic = "rail0"
rail = 0
switch = "leaf-a"
"#;

    fn order() -> FabricOrder {
        FabricOrder::from_plan(&fabric_plan::parse_native("p.toml", PLAN).unwrap())
    }

    #[test]
    fn nodes_go_group_by_group_in_the_plans_order() {
        let o = order();
        assert_eq!(o.nodes, ["b1", "b0", "a1", "a0"]);
        let mut run: Vec<String> = ["x9", "a0", "b0", "a1"].map(String::from).into();
        o.order(&mut run);
        assert_eq!(run, ["b0", "a1", "a0", "x9"]);
        let mut local: Vec<String> = ["a0/1", "b0/0"].map(String::from).into();
        o.order(&mut local);
        assert_eq!(local, ["b0/0", "a0/1"]);
    }

    #[test]
    fn oversubscribed_leaves_cap_their_group() {
        // PLAN with rates: NICs 200 Mb/s; leaf-a has two uplinks of 200 Mb/s for its two
        // NICs (not oversubscribed), leaf-b one of 100 Mb/s for two NICs (4:1).
        let rated =
            PLAN.replace(
                "switch = \"leaf-b\"",
                "switch = \"leaf-b\"\nrate_gbit_s = 0.2",
            )
            .replace(
                "switch = \"leaf-a\"",
                "switch = \"leaf-a\"\nrate_gbit_s = 0.2",
            ) + "[[link]]\na = \"leaf-a\"\nb = \"spine0\"\ncount = 2\nrate_gbit_s = 0.2\n"
                + "[[link]]\na = \"spine0\"\nb = \"leaf-b\"\nrate_gbit_s = 0.1\n";
        let o = FabricOrder::from_plan(&fabric_plan::parse_native("p.toml", &rated).unwrap());
        assert_eq!(o.cross_cap.len(), 1, "{:?}", o.cross_cap);
        let c = &o.cross_cap["b"];
        assert_eq!((c.pairs, c.leaf.as_str()), (1, "leaf-b"));
        assert!((c.oversubscription - 4.0).abs() < 1e-9);
        assert_eq!(o.leaf_cap, BTreeMap::from([("leaf-b".to_string(), 1)]));
        let nodes = ["a0".to_string(), "b1".into(), "x".into()];
        let rail0 = |_: usize, _: usize| Some("rail0".to_string());
        let (on, caps) = o.caps_of(&nodes, 1, rail0).unwrap();
        assert_eq!(on, [[Some(0)], [Some(1)], [None]]);
        assert_eq!(caps, [u32::MAX, 1]);
        // Discovery moving a0's NIC onto leaf-b: a0 is held by leaf-b.
        let mut moved = o.clone();
        let mut h = results::HostInfo {
            hostname: "a0".into(),
            ..Default::default()
        };
        h.neighbors.push(results::discovery::Neighbor {
            interface: Some("rail0".into()),
            source: "lldp".into(),
            state: "found".into(),
            system_name: Some("leaf-b".into()),
            ..Default::default()
        });
        assert_eq!(
            moved.as_built(&[h]),
            ["a0 rail0 is on leaf-b (planned leaf-a)"]
        );
        let (on, _) = moved.caps_of(&nodes, 1, rail0).unwrap();
        assert_eq!(on[0], [Some(1)]);
        // A rate left out (b1's, the first NIC) is unknown: leaf-b gets no cap by guess.
        let partial = rated.replacen("rate_gbit_s = 0.2\n", "", 1);
        let o = FabricOrder::from_plan(&fabric_plan::parse_native("p.toml", &partial).unwrap());
        assert!(o.cross_cap.is_empty(), "{:?}", o.cross_cap);
        assert!(order().caps_of(&["a0".into()], 1, rail0).is_none());
    }

    #[test]
    fn missing_and_unplanned_nodes_are_named() {
        let (missing, unplanned) = order().check(&["a0", "b0", "x9", "a1/3"].map(String::from));
        assert_eq!(missing, ["b1"]);
        assert_eq!(unplanned, ["x9"]);
    }

    #[test]
    fn pairs_are_counted_by_hop() {
        let o = order();
        let leaf = |h: &str| o.leaf_of(h, Some("rail0"));
        assert_eq!(Hop::of(leaf("a0"), leaf("a1")), Hop::SameLeaf);
        assert_eq!(Hop::of(leaf("a0"), leaf("b1")), Hop::AcrossSpines);
        assert_eq!(Hop::of(leaf("a0"), o.leaf_of("a1", None)), Hop::Unknown);
        let r = o.record(
            &["a0".into(), "a1".into()],
            [Hop::SameLeaf, Hop::AcrossSpines, Hop::AcrossSpines].into_iter(),
        );
        assert_eq!(
            (r.same_leaf_pairs, r.cross_leaf_pairs, r.unknown_pairs),
            (1, 2, 0)
        );
        assert_eq!(r.missing, ["b1", "b0"]);
    }
}
