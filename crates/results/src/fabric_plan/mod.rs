//! The fabric plan: the intended cabling of a leaf-spine fabric, in a small native TOML
//! format (`docs/structure.md`), plus importers for what sites already keep: a Slurm
//! `topology.conf` (groups only), a NetBox cable CSV and an `ibnetdiscover` output (the
//! "as built" fabric taken as the golden one). Both `aggregate` and the sweeps read it.
//!
//! In a rail-optimised fabric NIC r of every node of a group (scalable unit) sits on rail
//! r's leaf of that group, and the leaves go up to spines: a same-rail pair inside a group
//! crosses one switch, any other pair three. The plan says where each NIC should be
//! plugged (switch and port) so that discovery (LLDP, SMPs, `ibnetdiscover`) can be
//! compared with it, and which switches form a group, a tier and a rack, so that bad
//! measurements can be blamed on the part they share.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::natural::natural_cmp;

/// Largest plan file read (a 10,000-node plan is about 2 MiB).
pub const MAX_PLAN_BYTES: u64 = 64 << 20;

/// The tier of a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Leaf,
    Spine,
    Core,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Leaf => "leaf",
            Tier::Spine => "spine",
            Tier::Core => "core",
        }
    }
}

/// One switch of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSwitch {
    pub name: String,
    pub tier: Tier,
    /// Scalable unit / group (leaves); optional for spines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The rail a leaf serves (rail-optimised fabrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// What the switch calls itself when that is not its name: a factory-default node
    /// description shared by many switches (`Quantum Mellanox Technologies`), the switch
    /// then named by its GUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// A node's group and rack when no NIC implies them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanNode {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
}

/// Where one NIC should be plugged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanNic {
    pub node: String,
    /// As the host names it: RDMA device (`mlx5_0`) or interface (`rail0`).
    pub nic: String,
    pub rail: u32,
    pub switch: String,
    /// The switch port as LLDP/SMP report it (`swp1`, `17`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// The NIC's line rate in Gb/s (400 for NDR or 400GbE). With the uplinks' rates it
    /// says what a flow across the spines can reach and how many cross at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_gbit_s: Option<f64>,
}

/// Switch-to-switch cabling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanLink {
    pub a: String,
    pub b: String,
    /// Parallel links (the uplink count).
    #[serde(default = "one")]
    pub count: u32,
    /// The rate of each of the `count` links, Gb/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_gbit_s: Option<f64>,
}

fn one() -> u32 {
    1
}

/// `Some(message)` when a declared rate is not a positive number of Gb/s.
fn bad_rate(rate: Option<f64>) -> Option<String> {
    rate.filter(|r| !(r.is_finite() && *r > 0.0)).map(|r| {
        format!("rate_gbit_s {r} is not a rate; give the line rate in Gb/s (400, 100, 0.2)")
    })
}

/// What one leaf carries by the plan's declared rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeafCapacity {
    /// NICs planned on the leaf.
    pub nics: u32,
    /// The slowest of their rates, Gb/s.
    pub nic_gbit_s: f64,
    /// All its links toward the spines together, and the slowest one, Gb/s.
    pub uplinks_gbit_s: f64,
    pub slowest_uplink_gbit_s: f64,
}

impl LeafCapacity {
    /// What the NICs can send across the spines over what the uplinks carry: 4 for a
    /// 4:1 leaf; 1 or less is not oversubscribed.
    pub fn oversubscription(&self) -> f64 {
        f64::from(self.nics) * self.nic_gbit_s / self.uplinks_gbit_s
    }

    /// Flows across the spines the uplinks carry at once at the NICs' rate, on average
    /// (at least one).
    pub fn flows_at_line_rate(&self) -> u32 {
        ((self.uplinks_gbit_s / self.nic_gbit_s + 1e-9).floor() as u32).max(1)
    }

    /// What one flow leaving the leaf reaches, as a share of the NIC's rate: ECMP puts a
    /// flow on one uplink, so an uplink slower than the NIC is its ceiling.
    pub fn flow_share(&self) -> f64 {
        (self.slowest_uplink_gbit_s / self.nic_gbit_s).min(1.0)
    }
}

/// A whole plan (the native format's document).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricPlan {
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub switch: Vec<PlanSwitch>,
    #[serde(default)]
    pub node: Vec<PlanNode>,
    #[serde(default)]
    pub nic: Vec<PlanNic>,
    #[serde(default)]
    pub link: Vec<PlanLink>,
    /// Who rents which nodes, with which partition (`crate::tenants`); empty on a fabric
    /// with one user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenant: Vec<crate::tenants::Tenant>,
    /// Where it came from (`native FILE`, `slurm topology.conf FILE`, ...); not in the file.
    #[serde(skip)]
    pub source: String,
}

/// The formats a plan is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Native,
    Slurm,
    Netbox,
    Ibnetdiscover,
}

impl Format {
    pub const NAMES: &'static [&'static str] = &["native", "slurm", "netbox", "ibnetdiscover"];

    pub fn parse(s: &str) -> Option<Format> {
        Some(match s {
            "native" | "toml" => Format::Native,
            "slurm" => Format::Slurm,
            "netbox" | "csv" => Format::Netbox,
            "ibnetdiscover" => Format::Ibnetdiscover,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Native => "native",
            Format::Slurm => "slurm",
            Format::Netbox => "netbox",
            Format::Ibnetdiscover => "ibnetdiscover",
        }
    }

    /// The format of `text` read from `path`: by extension (`.toml`, `.csv`, `.conf`),
    /// else by content.
    pub fn detect(path: &Path, text: &str) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => return Format::Native,
            Some("csv") => return Format::Netbox,
            _ => {}
        }
        let mut lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        match lines.next() {
            Some(l) if l.to_ascii_lowercase().starts_with("switchname=") => Format::Slurm,
            Some(l)
                if l.starts_with("vendid=") || l.starts_with("Switch") || l.starts_with("Ca") =>
            {
                Format::Ibnetdiscover
            }
            Some(l) if l.contains(',') && !l.contains('=') => Format::Netbox,
            _ => Format::Native,
        }
    }
}

/// A plan that cannot be used: the message names the file, the item and the next step.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

type Result<T> = std::result::Result<T, PlanError>;

/// A step of validation: the item at fault and what is wrong with it.
type Step<T> = std::result::Result<T, (String, String)>;

/// Reads a plan file in `format` (detected when `None`) and validates it.
pub fn load(path: &Path, format: Option<Format>) -> Result<FabricPlan> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| {
        PlanError(format!(
            "{shown}: cannot read the plan: {e} (give --plan an existing file)"
        ))
    })?;
    if meta.len() > MAX_PLAN_BYTES {
        return Err(PlanError(format!(
            "{shown}: {} bytes is larger than a plan can be ({MAX_PLAN_BYTES}); is it the right file?",
            meta.len()
        )));
    }
    let bytes = std::fs::read(path)
        .map_err(|e| PlanError(format!("{shown}: cannot read the plan: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        PlanError(format!(
            "{shown}: not UTF-8 text; a plan is TOML, a topology.conf, a CSV or ibnetdiscover output"
        ))
    })?;
    let format = format.unwrap_or_else(|| Format::detect(path, &text));
    parse(&shown, &text, format)
}

/// Parses and validates `text` (named `file` in messages) in `format`.
pub fn parse(file: &str, text: &str, format: Format) -> Result<FabricPlan> {
    let mut plan = match format {
        Format::Native => parse_native(file, text)?,
        Format::Slurm => import_slurm(file, text)?,
        Format::Netbox => import_netbox(file, text)?,
        Format::Ibnetdiscover => import_ibnetdiscover(file, text)?,
    };
    plan.source = format!("{} {file}", format.name());
    plan.validate(file)?;
    Ok(plan)
}

/// The native TOML format.
pub fn parse_native(file: &str, text: &str) -> Result<FabricPlan> {
    toml::from_str::<FabricPlan>(text).map_err(|e| {
        let msg = e.message().to_string();
        let at = e
            .span()
            .map(|s| {
                let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                format!(" (line {line})")
            })
            .unwrap_or_default();
        let hint = if msg.contains("unknown variant") {
            "; tier is one of leaf, spine, core"
        } else if msg.contains("unknown field") {
            "; see docs/structure.md for the keys of each table"
        } else {
            ""
        };
        PlanError(format!("{file}{at}: {msg}{hint}"))
    })
}

impl FabricPlan {
    /// Checks the plan's own consistency; the first problem found is returned.
    pub fn validate(&self, file: &str) -> Result<()> {
        let at = |(item, msg): (String, String)| PlanError(format!("{file}: {item}: {msg}"));
        self.check_version().map_err(at)?;
        let switches = self.check_switches().map_err(at)?;
        self.check_nodes().map_err(at)?;
        self.check_nics(&switches).map_err(at)?;
        self.check_links(&switches).map_err(at)?;
        self.check_tenants(file).map_err(|e| PlanError(e.0))
    }

    /// The plan's tenants, expanded and checked (empty when it has none).
    pub fn tenants(
        &self,
    ) -> std::result::Result<crate::tenants::Tenants, crate::tenants::TenantsError> {
        crate::tenants::Tenants::new(self.tenant.clone(), &format!("plan {}", self.source))
    }

    /// Tenants whose lists hold, on nodes and NICs the plan has.
    fn check_tenants(&self, file: &str) -> std::result::Result<(), crate::tenants::TenantsError> {
        if self.tenant.is_empty() {
            return Ok(());
        }
        let tenants = crate::tenants::Tenants::new(self.tenant.clone(), file)?;
        let nodes: BTreeSet<&str> = self
            .node
            .iter()
            .map(|n| n.name.as_str())
            .chain(self.nic.iter().map(|n| n.node.as_str()))
            .collect();
        for t in &tenants.tenants {
            for n in &t.nodes {
                if !nodes.contains(n.as_str()) {
                    return Err(crate::tenants::TenantsError(format!(
                        "{file}: tenant {:?}: node {n} is not a node of the plan; add it as a \
                         [[node]] or correct the name",
                        t.name
                    )));
                }
            }
            for nic in &t.nics {
                if !self
                    .nic
                    .iter()
                    .any(|p| &p.nic == nic && t.nodes.contains(&p.node))
                {
                    return Err(crate::tenants::TenantsError(format!(
                        "{file}: tenant {:?}: no node of the tenant has a NIC {nic} in the plan",
                        t.name
                    )));
                }
            }
        }
        Ok(())
    }

    fn check_version(&self) -> Step<()> {
        if self.version != 1 {
            return Err((
                "version".into(),
                format!(
                    "{} is not a plan version this tool reads (write version = 1)",
                    self.version
                ),
            ));
        }
        Ok(())
    }

    /// Switches named, each once, a core on no rail; by name.
    fn check_switches(&self) -> Step<HashMap<&str, &PlanSwitch>> {
        let mut switches: HashMap<&str, &PlanSwitch> = HashMap::new();
        for (i, s) in self.switch.iter().enumerate() {
            if s.name.trim().is_empty() {
                return Err((format!("switch[{i}]"), "empty name".into()));
            }
            if switches.insert(&s.name, s).is_some() {
                return Err((
                    format!("switch[{i}] {:?}", s.name),
                    "declared twice; each switch once".into(),
                ));
            }
            if s.rail.is_some() && s.tier == Tier::Core {
                return Err((
                    format!("switch {:?}", s.name),
                    "a core switch serves no single rail; drop `rail`".into(),
                ));
            }
        }
        Ok(switches)
    }

    /// Nodes named, each once.
    fn check_nodes(&self) -> Step<()> {
        let mut nodes = BTreeSet::new();
        for (i, n) in self.node.iter().enumerate() {
            if n.name.trim().is_empty() {
                return Err((format!("node[{i}]"), "empty name".into()));
            }
            if !nodes.insert(n.name.as_str()) {
                return Err((
                    format!("node {:?}", n.name),
                    "declared twice; give each node one [[node]] table".into(),
                ));
            }
        }
        Ok(())
    }

    /// NICs named, each once, one per rail of a node, on a known leaf of their rail, one
    /// cable per port, rates positive.
    fn check_nics(&self, switches: &HashMap<&str, &PlanSwitch>) -> Step<()> {
        let mut nics: HashMap<(&str, &str), usize> = HashMap::new();
        let mut ports: HashMap<(&str, &str), usize> = HashMap::new();
        let mut rails: HashMap<(&str, u32), usize> = HashMap::new();
        for (i, n) in self.nic.iter().enumerate() {
            let item = format!("nic[{i}] ({} {})", n.node, n.nic);
            if n.node.trim().is_empty() || n.nic.trim().is_empty() {
                return Err((item, "node and nic must both be named".into()));
            }
            if let Some(j) = nics.insert((&n.node, &n.nic), i) {
                return Err((
                    item,
                    format!("duplicate NIC: nic[{j}] is the same node and NIC; list each NIC once"),
                ));
            }
            if let Some(j) = rails.insert((&n.node, n.rail), i) {
                return Err((
                    item,
                    format!(
                        "rail {} of node {} is already nic[{j}] {}; a node has one NIC per rail",
                        n.rail, n.node, self.nic[j].nic
                    ),
                ));
            }
            let Some(sw) = switches.get(n.switch.as_str()) else {
                return Err((
                    item,
                    format!(
                        "unknown switch {:?}; add a [[switch]] table for it or fix the name",
                        n.switch
                    ),
                ));
            };
            if sw.tier != Tier::Leaf {
                return Err((
                    item,
                    format!(
                        "switch {} is a {} switch; NICs plug into leaves",
                        sw.name,
                        sw.tier.as_str()
                    ),
                ));
            }
            if let Some(r) = sw.rail {
                if r != n.rail {
                    return Err((
                        item,
                        format!(
                            "rail {} on leaf {} which serves rail {r}; fix the NIC's rail or its switch",
                            n.rail, sw.name
                        ),
                    ));
                }
            }
            if let Some(p) = &n.port {
                if let Some(j) = ports.insert((&n.switch, p), i) {
                    return Err((
                        item,
                        format!(
                            "port {p} of {} is already nic[{j}] ({} {}); one cable per port",
                            n.switch, self.nic[j].node, self.nic[j].nic
                        ),
                    ));
                }
            }
        }
        for (i, n) in self.nic.iter().enumerate() {
            if let Some(e) = bad_rate(n.rate_gbit_s) {
                return Err((format!("nic[{i}] ({} {})", n.node, n.nic), e));
            }
        }
        Ok(())
    }

    /// Links between two different known switches, a count of at least one, rates
    /// positive.
    fn check_links(&self, switches: &HashMap<&str, &PlanSwitch>) -> Step<()> {
        for (i, l) in self.link.iter().enumerate() {
            let item = format!("link[{i}] ({} - {})", l.a, l.b);
            for end in [&l.a, &l.b] {
                if !switches.contains_key(end.as_str()) {
                    return Err((
                        item,
                        format!(
                            "unknown switch {end:?}; add a [[switch]] table for it or fix the name"
                        ),
                    ));
                }
            }
            if l.a == l.b {
                return Err((item, "a link joins two different switches".into()));
            }
            if l.count == 0 {
                return Err((item, "count 0: leave the link out instead".into()));
            }
            if let Some(e) = bad_rate(l.rate_gbit_s) {
                return Err((item, e));
            }
        }
        Ok(())
    }

    /// What each leaf's NICs and uplinks carry by the declared rates: only leaves whose
    /// every NIC and every link toward a spine or core switch has a rate, and that have an
    /// uplink (a rate left out is unknown, never guessed).
    pub fn leaf_capacity(&self) -> BTreeMap<String, LeafCapacity> {
        let tier: HashMap<&str, Tier> = self
            .switch
            .iter()
            .map(|s| (s.name.as_str(), s.tier))
            .collect();
        let mut out: BTreeMap<String, Option<LeafCapacity>> = BTreeMap::new();
        for n in &self.nic {
            let c = out.entry(n.switch.clone()).or_insert(Some(LeafCapacity {
                nics: 0,
                nic_gbit_s: f64::INFINITY,
                uplinks_gbit_s: 0.0,
                slowest_uplink_gbit_s: f64::INFINITY,
            }));
            *c = c.zip(n.rate_gbit_s).map(|(mut c, r)| {
                c.nics += 1;
                c.nic_gbit_s = c.nic_gbit_s.min(r);
                c
            });
        }
        for l in &self.link {
            for (leaf, other) in [(&l.a, &l.b), (&l.b, &l.a)] {
                if tier.get(other.as_str()).is_none_or(|t| *t == Tier::Leaf) {
                    continue;
                }
                if let Some(c) = out.get_mut(leaf.as_str()) {
                    *c = c.zip(l.rate_gbit_s).map(|(mut c, r)| {
                        c.uplinks_gbit_s += r * f64::from(l.count);
                        c.slowest_uplink_gbit_s = c.slowest_uplink_gbit_s.min(r);
                        c
                    });
                }
            }
        }
        out.into_iter()
            .filter_map(|(k, c)| Some((k, c.filter(|c| c.uplinks_gbit_s > 0.0)?)))
            .collect()
    }

    /// Switch by name.
    pub fn switch(&self, name: &str) -> Option<&PlanSwitch> {
        self.switch.iter().find(|s| s.name == name)
    }

    /// Every node the plan names (NICs and `[[node]]` tables), in order of first mention.
    pub fn node_names(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for n in self
            .nic
            .iter()
            .map(|n| &n.node)
            .chain(self.node.iter().map(|n| &n.name))
        {
            if seen.insert(n.clone()) {
                out.push(n.clone());
            }
        }
        out
    }

    /// Switch-to-switch link counts keyed by the two names in order.
    pub fn link_counts(&self) -> BTreeMap<(String, String), u32> {
        let mut m = BTreeMap::new();
        for l in &self.link {
            let k = if l.a <= l.b {
                (l.a.clone(), l.b.clone())
            } else {
                (l.b.clone(), l.a.clone())
            };
            *m.entry(k).or_default() += l.count;
        }
        m
    }

    /// The native TOML text of this plan.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}

/// Cables counted per (switch, switch) pair as the plan's links (no rate: importers read
/// none).
fn counted_links(counts: BTreeMap<(String, String), u32>) -> Vec<PlanLink> {
    counts
        .into_iter()
        .map(|((a, b), count)| PlanLink {
            a,
            b,
            count,
            rate_gbit_s: None,
        })
        .collect()
}

/// Each host's NICs as cabled: (NIC, switch name, switch port), by host.
type HostNics = BTreeMap<String, Vec<(String, String, String)>>;

/// Each host's NICs on rails 0.. in natural name order (the importers know no rail: a
/// host's NICs by name is how rail-optimised fabrics are cabled); an empty port is none.
fn railed(hosts: HostNics) -> Vec<PlanNic> {
    let mut out = Vec::new();
    for (host, mut nics) in hosts {
        nics.sort_by(|x, y| natural_cmp(&x.0, &y.0));
        for (rail, (nic, sw, port)) in nics.into_iter().enumerate() {
            out.push(PlanNic {
                node: host.clone(),
                nic,
                rail: rail as u32,
                switch: sw,
                port: Some(port).filter(|p| !p.is_empty()),
                rate_gbit_s: None,
            });
        }
    }
    out
}

mod ibnetdiscover;
mod netbox;
mod slurm;
#[cfg(test)]
mod tests;

pub use ibnetdiscover::{
    ca_name, import_ibnetdiscover, parse_ibnetdiscover, switch_name, IbNode, IbPort,
};
pub use netbox::{import_netbox, NETBOX_COLUMNS};
pub use slurm::{expand_hostlist, import_slurm};
