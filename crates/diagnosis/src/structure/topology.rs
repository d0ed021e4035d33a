//! The fabric as the localiser sees it: nodes, rails, switches with tier, group and rack,
//! and the leaf each NIC is on (as built where discovery saw it, else as planned), built
//! from a plan, from discovery (each NIC's neighbour), or inferred from the latency
//! matrix (one-switch pairs are faster than three-switch ones).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use results::fabric_plan::{FabricPlan, Tier};
use results::natural::natural_cmp;

/// Index meaning "not known".
pub const NONE: u32 = u32::MAX;

/// One switch.
#[derive(Debug, Clone)]
pub struct Switch {
    pub name: String,
    pub tier: Tier,
    pub group: u32,
    pub rail: u32,
    pub rack: u32,
    /// Not in any plan or discovery: made up for a group and rail seen in the latencies.
    pub inferred: bool,
}

/// What discovery says one NIC is plugged into.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    pub switch: String,
    /// The switch port's name: LLDP's port id where it names a port, the InfiniBand port
    /// number; none where the id is an address (lldpd's `mac`, `ip`), which names no port.
    pub port: Option<String>,
    /// Another name the switch gives the port: LLDP's port description, where it differs
    /// from the id. SONiC sends its port alias as the id (`Eth1/31`, subtype `local`) and
    /// the SONiC name (`Ethernet0`) or the operator's description here; a switch that
    /// sends its MAC as the port id (a SONiC fallback, most Linux hosts) names the port
    /// only here.
    pub alias: Option<String>,
    pub width: Option<String>,
    pub speed: Option<String>,
    pub source: String,
}

/// The input of [`Topology::build`].
#[derive(Debug, Default)]
pub struct Facts<'a> {
    /// Nodes measured (host names).
    pub nodes: Vec<String>,
    /// NIC names the rows used, per node.
    pub nics: BTreeMap<String, BTreeSet<String>>,
    pub plan: Option<&'a FabricPlan>,
    /// (node, NIC) -> what discovery found.
    pub found: HashMap<(String, String), Found>,
    /// Same-rail pair latencies (node a, node b, p50 us), for inference.
    pub latencies: Vec<(String, String, f64)>,
    /// Documents that place one NIC on different switch ports, in words; the first
    /// document's place is the one used.
    pub disagreements: Vec<String>,
}

/// The fabric's structure.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    /// Where groups and leaves came from, in words.
    pub source: String,
    pub nodes: Vec<String>,
    pub node_index: HashMap<String, u32>,
    /// NIC name per rail (the first node's, for display: `rail0`, `mlx5_0`).
    pub rails: Vec<String>,
    pub switches: Vec<Switch>,
    pub switch_index: HashMap<String, u32>,
    pub groups: Vec<String>,
    pub racks: Vec<String>,
    pub node_group: Vec<u32>,
    pub node_rack: Vec<u32>,
    /// Per node x rail: the leaf the NIC is on (as built when discovered), or NONE.
    pub attach: Vec<u32>,
    /// Per node x rail: the planned leaf and port (NONE / None without a plan).
    pub planned: Vec<(u32, Option<String>)>,
    /// Per node x rail: what discovery found.
    pub found: Vec<Option<Found>>,
    /// Per node x rail: the NIC's name on that node.
    pub nic_names: Vec<Option<String>>,
    /// (node, NIC name) -> rail.
    pub rail_of: HashMap<(u32, String), u32>,
    /// Per switch: what one flow leaving it across the spines reaches, as a share of its
    /// NICs' rate (the slowest uplink over the NIC's rate, at most 1), where the plan gives
    /// both rates; empty without them.
    pub uplink_share: Vec<f32>,
    /// Whether the rails' leaves serve one rail each and groups are known (localisation
    /// above the node is possible).
    pub has_leaves: bool,
    /// Whether anything told the groups (a plan, discovery or latency classes); without
    /// it the structure knows nothing the node matrix does not.
    pub known: bool,
    /// Discovered NICs of a node the plan lists NICs for, under a name none of them has
    /// (`ibsim0` where the plan says `mlx5_0`, `mlx5_1`): not attached to any rail, so
    /// nothing was compared for them; [`super::cabling`] reports each.
    pub unmatched: Vec<(u32, String, Found)>,
}

/// The plan's NICs as (node, NIC) pairs, and the nodes that have any (both empty without
/// a plan): what discovery is held against.
fn planned_nics<'a>(f: &Facts<'a>) -> (BTreeSet<&'a str>, BTreeSet<(&'a str, &'a str)>) {
    let pairs: BTreeSet<(&str, &str)> = f
        .plan
        .map(|p| {
            p.nic
                .iter()
                .map(|x| (x.node.as_str(), x.nic.as_str()))
                .collect()
        })
        .unwrap_or_default();
    (pairs.iter().map(|(n, _)| *n).collect(), pairs)
}

impl Topology {
    pub fn rails_n(&self) -> usize {
        self.rails.len().max(1)
    }
    pub fn slot(&self, node: u32, rail: u32) -> usize {
        node as usize * self.rails_n() + rail as usize
    }
    pub fn leaf(&self, node: u32, rail: u32) -> u32 {
        self.attach
            .get(self.slot(node, rail))
            .copied()
            .unwrap_or(NONE)
    }
    pub fn switch_name(&self, s: u32) -> &str {
        self.switches
            .get(s as usize)
            .map_or("?", |s| s.name.as_str())
    }
    pub fn group_name(&self, g: u32) -> &str {
        self.groups.get(g as usize).map_or("?", |s| s.as_str())
    }
    pub fn nic_name(&self, node: u32, rail: u32) -> String {
        self.nic_names
            .get(self.slot(node, rail))
            .cloned()
            .flatten()
            .unwrap_or_else(|| self.rails.get(rail as usize).cloned().unwrap_or_default())
    }

    /// The known switch a discovered name means: the same name; else, only where it
    /// means exactly one switch, the same host name without its domain (Arista EOS sends
    /// `dc1-spine1.example.com` as its system name once a domain is set, while plans and
    /// cabling sheets say `dc1-spine1`), or the same name in another case (host names are
    /// case-insensitive).
    fn planned_switch(&self, name: &str) -> Option<u32> {
        if let Some(&i) = self.switch_index.get(name) {
            return Some(i);
        }
        let short = name.split('.').next().unwrap_or(name);
        let unique = |same: &dyn Fn(&str) -> bool| {
            let mut it = self
                .switches
                .iter()
                .enumerate()
                .filter(|(_, s)| !s.inferred && same(&s.name));
            match (it.next(), it.next()) {
                (Some((i, _)), None) => Some(i as u32),
                _ => None,
            }
        };
        (short != name)
            .then(|| unique(&|s| s == short))
            .flatten()
            .or_else(|| unique(&|s| s.eq_ignore_ascii_case(name)))
            .or_else(|| unique(&|s| s.eq_ignore_ascii_case(short)))
    }

    fn intern_switch(&mut self, name: &str, tier: Tier, inferred: bool) -> u32 {
        if let Some(&i) = self.switch_index.get(name) {
            return i;
        }
        let i = self.switches.len() as u32;
        self.switches.push(Switch {
            name: name.to_string(),
            tier,
            group: NONE,
            rail: NONE,
            rack: NONE,
            inferred,
        });
        self.switch_index.insert(name.to_string(), i);
        i
    }

    fn intern(list: &mut Vec<String>, name: &str) -> u32 {
        match list.iter().position(|g| g == name) {
            Some(i) => i as u32,
            None => {
                list.push(name.to_string());
                (list.len() - 1) as u32
            }
        }
    }

    /// Builds the structure from what is known, best source first: a plan with NICs, then
    /// discovery, then a plan with groups only, then the latency matrix.
    pub fn build(f: &Facts) -> Topology {
        let mut t = Topology::default();
        let mut names: Vec<String> = f.nodes.clone();
        if let Some(p) = f.plan {
            names.extend(p.node_names());
        }
        names.sort_by(|a, b| natural_cmp(a, b));
        names.dedup();
        for (i, n) in names.iter().enumerate() {
            t.node_index.insert(n.clone(), i as u32);
        }
        t.nodes = names;
        let n = t.nodes.len();
        let rails_n = t.assign_rails(f);
        t.node_group = vec![NONE; n];
        t.node_rack = vec![NONE; n];

        let mut sources = Vec::new();
        // The plan: switches, groups, racks, planned attachments.
        let plan_has_nics = f.plan.is_some_and(|p| !p.nic.is_empty());
        if let Some(p) = f.plan {
            sources.push(format!("plan ({})", p.source));
            t.apply_plan(p, rails_n);
        }
        // Discovery: as built.
        let discovered = t.apply_discovery(f, rails_n);
        if discovered > 0 {
            let srcs: BTreeSet<&str> = f.found.values().map(|x| x.source.as_str()).collect();
            sources.push(format!(
                "discovery ({discovered} NIC neighbour(s), {})",
                srcs.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        // Leaves' rails and groups where the plan did not give them: the majority rail of
        // their NICs; groups from leaves that share nodes.
        let leaves: Vec<u32> = (0..t.switches.len() as u32)
            .filter(|&s| t.switches[s as usize].tier == Tier::Leaf)
            .collect();
        t.leaf_rails(&leaves, rails_n);
        let need_groups = leaves.iter().any(|&l| t.switches[l as usize].group == NONE)
            && (plan_has_nics || discovered > 0);
        if need_groups {
            t.infer_leaf_groups(&leaves);
        }
        t.node_groups(rails_n);
        // Groups only (Slurm), or nothing: leaves per group and rail, from the plan's
        // groups or the latency classes.
        t.inferred_leaves(f, rails_n, &mut sources);
        t.has_leaves = t.attach.iter().any(|&a| a != NONE);
        t.known = !sources.is_empty();
        t.source = if sources.is_empty() {
            "none: no plan, no discovery, no latency classes; suspects stop at nodes, NICs and links".into()
        } else {
            sources.join("; ")
        };
        if let Some(p) = f.plan {
            t.uplink_shares(p);
        }
        t
    }

    /// Rails: the plan's rail numbers; else each node's NICs in natural order. Sizes the
    /// per-NIC tables and names each rail for the NIC most nodes use on it. The rail count.
    fn assign_rails(&mut self, f: &Facts) -> usize {
        let n = self.nodes.len();
        let mut rail_of: HashMap<(u32, String), u32> = HashMap::new();
        let mut rails_n = 0u32;
        if let Some(p) = f.plan {
            for nic in &p.nic {
                let id = self.node_index[&nic.node];
                rail_of.insert((id, nic.nic.clone()), nic.rail);
                rails_n = rails_n.max(nic.rail + 1);
            }
        }
        let mut per_node: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
        for (node, nics) in &f.nics {
            if let Some(&id) = self.node_index.get(node) {
                per_node.entry(id).or_default().extend(nics.iter().cloned());
            }
        }
        let (planned_nodes, _) = planned_nics(f);
        for (node, nic) in f.found.keys() {
            // A node with planned NICs has those rails; a discovered name outside them is
            // no new rail (apply_discovery reports it).
            let planned_here = planned_nodes.contains(node.as_str());
            if let (Some(&id), false) = (self.node_index.get(node), planned_here) {
                per_node.entry(id).or_default().insert(nic.clone());
            }
        }
        for (id, nics) in &per_node {
            let mut list: Vec<&String> = nics
                .iter()
                .filter(|x| !rail_of.contains_key(&(*id, (*x).clone())))
                .collect();
            list.sort_by(|a, b| natural_cmp(a, b));
            let taken: BTreeSet<u32> = rail_of
                .iter()
                .filter(|((nid, _), _)| nid == id)
                .map(|(_, &r)| r)
                .collect();
            let mut free = (0..).filter(|r| !taken.contains(r));
            for nic in list {
                let r = free.next().unwrap_or(0);
                rail_of.insert((*id, nic.clone()), r);
                rails_n = rails_n.max(r + 1);
            }
        }
        let rails_n = rails_n.max(1) as usize;
        self.rails = (0..rails_n).map(|r| format!("rail {r}")).collect();
        self.attach = vec![NONE; n * rails_n];
        self.planned = vec![(NONE, None); n * rails_n];
        self.found = vec![None; n * rails_n];
        self.nic_names = vec![None; n * rails_n];
        for ((id, nic), &r) in &rail_of {
            let s = *id as usize * rails_n + r as usize;
            self.nic_names[s] = Some(nic.clone());
        }
        // Rail display name: the NIC name most nodes use on it.
        for r in 0..rails_n {
            let mut count: BTreeMap<&str, usize> = BTreeMap::new();
            for i in 0..n {
                if let Some(x) = &self.nic_names[i * rails_n + r] {
                    *count.entry(x.as_str()).or_default() += 1;
                }
            }
            if let Some((name, _)) = count.into_iter().max_by_key(|x| x.1) {
                self.rails[r] = name.to_string();
            }
        }
        self.rail_of = rail_of;
        rails_n
    }

    /// The plan's switches (tier, group, rail, rack), planned attachments, nodes' groups
    /// and racks.
    fn apply_plan(&mut self, p: &FabricPlan, rails_n: usize) {
        for s in &p.switch {
            let i = self.intern_switch(&s.name, s.tier, false);
            let g = s
                .group
                .as_deref()
                .map(|g| Self::intern(&mut self.groups, g))
                .unwrap_or(NONE);
            let rk = s
                .rack
                .as_deref()
                .map(|r| Self::intern(&mut self.racks, r))
                .unwrap_or(NONE);
            let sw = &mut self.switches[i as usize];
            sw.group = g;
            sw.rail = s.rail.unwrap_or(NONE);
            sw.rack = rk;
        }
        for nic in &p.nic {
            let id = self.node_index[&nic.node];
            let s = id as usize * rails_n + nic.rail as usize;
            self.planned[s] = (self.switch_index[&nic.switch], nic.port.clone());
            self.attach[s] = self.planned[s].0;
        }
        for node in &p.node {
            let id = self.node_index[&node.name];
            if let Some(g) = &node.group {
                self.node_group[id as usize] = Self::intern(&mut self.groups, g);
            }
            if let Some(r) = &node.rack {
                self.node_rack[id as usize] = Self::intern(&mut self.racks, r);
            }
        }
    }

    /// Discovery's neighbours: each NIC attached where it was found. How many were. A
    /// NIC of a node with planned NICs that is not one of them is kept in `unmatched`.
    fn apply_discovery(&mut self, f: &Facts, rails_n: usize) -> usize {
        let mut discovered = 0;
        let (planned_nodes, planned) = planned_nics(f);
        for ((node, nic), fd) in &f.found {
            let Some(&id) = self.node_index.get(node) else {
                continue;
            };
            if planned_nodes.contains(node.as_str())
                && !planned.contains(&(node.as_str(), nic.as_str()))
            {
                self.unmatched.push((id, nic.clone(), fd.clone()));
                continue;
            }
            let Some(&r) = self.rail_of.get(&(id, nic.clone())) else {
                continue;
            };
            let sw = match self.planned_switch(&fd.switch) {
                Some(sw) => sw,
                None => self.intern_switch(&fd.switch, Tier::Leaf, false),
            };
            let s = id as usize * rails_n + r as usize;
            self.attach[s] = sw;
            self.found[s] = Some(fd.clone());
            discovered += 1;
        }
        self.unmatched.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        discovered
    }

    /// A leaf's rail where the plan did not give it: the majority rail of its NICs.
    fn leaf_rails(&mut self, leaves: &[u32], rails_n: usize) {
        for &l in leaves {
            if self.switches[l as usize].rail != NONE {
                continue;
            }
            let mut votes: BTreeMap<u32, usize> = BTreeMap::new();
            for (s, &a) in self.attach.iter().enumerate() {
                if a == l {
                    *votes.entry((s % rails_n) as u32).or_default() += 1;
                }
            }
            if let Some((r, _)) = votes
                .into_iter()
                .max_by_key(|x| (x.1, std::cmp::Reverse(x.0)))
            {
                self.switches[l as usize].rail = r;
            }
        }
    }

    /// Nodes' groups: the majority group of their NICs' leaves.
    fn node_groups(&mut self, rails_n: usize) {
        let n = self.nodes.len();
        for i in 0..n {
            if self.node_group[i] != NONE {
                continue;
            }
            let mut votes: BTreeMap<u32, usize> = BTreeMap::new();
            for r in 0..rails_n {
                let a = self.attach[i * rails_n + r];
                if a != NONE && self.switches[a as usize].group != NONE {
                    *votes.entry(self.switches[a as usize].group).or_default() += 1;
                }
            }
            if let Some((g, _)) = votes
                .into_iter()
                .max_by_key(|x| (x.1, std::cmp::Reverse(x.0)))
            {
                self.node_group[i] = g;
            }
        }
    }

    /// Without any attachment: groups from the latency classes when none is known, and a
    /// leaf inferred per group and rail.
    fn inferred_leaves(&mut self, f: &Facts, rails_n: usize, sources: &mut Vec<String>) {
        let n = self.nodes.len();
        if self.attach.iter().all(|&a| a == NONE) {
            if self.node_group.iter().all(|&g| g == NONE)
                && self.infer_groups_from_latency(&f.latencies)
            {
                sources.push("latency classes (one-switch pairs are faster)".into());
            }
            if self.node_group.iter().any(|&g| g != NONE) {
                for i in 0..n {
                    let g = self.node_group[i];
                    if g == NONE {
                        continue;
                    }
                    for r in 0..rails_n {
                        let name = format!(
                            "{}/{} (inferred leaf)",
                            self.groups[g as usize], self.rails[r]
                        );
                        let sw = self.intern_switch(&name, Tier::Leaf, true);
                        self.switches[sw as usize].group = g;
                        self.switches[sw as usize].rail = r as u32;
                        self.attach[i * rails_n + r] = sw;
                    }
                }
            }
        }
    }

    /// What one flow leaving each leaf across the spines reaches, by the plan's rates.
    fn uplink_shares(&mut self, p: &FabricPlan) {
        for (leaf, c) in p.leaf_capacity() {
            if let Some(&i) = self.switch_index.get(&leaf) {
                if self.uplink_share.is_empty() {
                    self.uplink_share = vec![1.0; self.switches.len()];
                }
                self.uplink_share[i as usize] = c.flow_share() as f32;
            }
        }
    }

    /// What one flow leaving leaf `s` across the spines reaches, as a share of the NIC's
    /// rate, by the plan's rates (1 without them).
    pub fn flow_share(&self, s: u32) -> f32 {
        self.uplink_share.get(s as usize).copied().unwrap_or(1.0)
    }

    /// Leaves that share at least half of the smaller one's nodes (and two) are one group.
    fn infer_leaf_groups(&mut self, leaves: &[u32]) {
        let rails_n = self.rails_n();
        let mut members: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
        for (s, &a) in self.attach.iter().enumerate() {
            if a != NONE {
                members.entry(a).or_default().insert((s / rails_n) as u32);
            }
        }
        let mut parent: HashMap<u32, u32> = leaves.iter().map(|&l| (l, l)).collect();
        fn root(p: &mut HashMap<u32, u32>, x: u32) -> u32 {
            let mut r = x;
            while p[&r] != r {
                r = p[&r];
            }
            p.insert(x, r);
            r
        }
        let ls: Vec<u32> = members.keys().copied().collect();
        for (ia, &a) in ls.iter().enumerate() {
            for &b in &ls[ia + 1..] {
                let (ma, mb) = (&members[&a], &members[&b]);
                let shared = ma.intersection(mb).count();
                if shared >= 2 && shared * 2 >= ma.len().min(mb.len()) {
                    let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                    if ra != rb {
                        parent.insert(ra.max(rb), ra.min(rb));
                    }
                }
            }
        }
        let mut names: BTreeMap<u32, u32> = BTreeMap::new();
        for &l in leaves {
            if self.switches[l as usize].group != NONE {
                continue;
            }
            let r = root(&mut parent, l);
            let g = *names.entry(r).or_insert_with(|| {
                let name = format!("group of {}", self.switches[r as usize].name);
                Self::intern(&mut self.groups, &name)
            });
            self.switches[l as usize].group = g;
        }
    }

    /// Same-rail pairs split into a fast and a slow class at the widest gap of their p50
    /// latencies (at least 20% apart); pairs of the fast class join their nodes into one
    /// group. False when there is no such gap.
    fn infer_groups_from_latency(&mut self, lat: &[(String, String, f64)]) -> bool {
        let mut v: Vec<f64> = lat
            .iter()
            .map(|x| x.2)
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect();
        if v.len() < 3 {
            return false;
        }
        v.sort_by(f64::total_cmp);
        let (mut best, mut at) = (1.0, 0.0);
        for w in v.windows(2) {
            let ratio = w[1] / w[0];
            if ratio > best {
                best = ratio;
                at = (w[0] * w[1]).sqrt();
            }
        }
        if best < 1.2 {
            return false;
        }
        let n = self.nodes.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn root(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        for (a, b, l) in lat {
            if *l < at {
                if let (Some(&x), Some(&y)) = (self.node_index.get(a), self.node_index.get(b)) {
                    let (rx, ry) = (root(&mut parent, x as usize), root(&mut parent, y as usize));
                    parent[rx.max(ry)] = rx.min(ry);
                }
            }
        }
        let mut named: BTreeMap<usize, u32> = BTreeMap::new();
        for i in 0..n {
            let r = root(&mut parent, i);
            let g = *named.entry(r).or_insert_with(|| {
                let name = format!("group of {}", self.nodes[r]);
                Self::intern(&mut self.groups, &name)
            });
            self.node_group[i] = g;
        }
        true
    }
}
