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
        let err = |item: String, msg: String| Err(PlanError(format!("{file}: {item}: {msg}")));
        if self.version != 1 {
            return err(
                "version".into(),
                format!(
                    "{} is not a plan version this tool reads (write version = 1)",
                    self.version
                ),
            );
        }
        let mut switches: HashMap<&str, &PlanSwitch> = HashMap::new();
        for (i, s) in self.switch.iter().enumerate() {
            if s.name.trim().is_empty() {
                return err(format!("switch[{i}]"), "empty name".into());
            }
            if switches.insert(&s.name, s).is_some() {
                return err(
                    format!("switch[{i}] {:?}", s.name),
                    "declared twice; each switch once".into(),
                );
            }
            if s.rail.is_some() && s.tier == Tier::Core {
                return err(
                    format!("switch {:?}", s.name),
                    "a core switch serves no single rail; drop `rail`".into(),
                );
            }
        }
        let mut nodes = BTreeSet::new();
        for (i, n) in self.node.iter().enumerate() {
            if n.name.trim().is_empty() {
                return err(format!("node[{i}]"), "empty name".into());
            }
            if !nodes.insert(n.name.as_str()) {
                return err(
                    format!("node {:?}", n.name),
                    "declared twice; give each node one [[node]] table".into(),
                );
            }
        }
        let mut nics: HashMap<(&str, &str), usize> = HashMap::new();
        let mut ports: HashMap<(&str, &str), usize> = HashMap::new();
        let mut rails: HashMap<(&str, u32), usize> = HashMap::new();
        for (i, n) in self.nic.iter().enumerate() {
            let item = format!("nic[{i}] ({} {})", n.node, n.nic);
            if n.node.trim().is_empty() || n.nic.trim().is_empty() {
                return err(item, "node and nic must both be named".into());
            }
            if let Some(j) = nics.insert((&n.node, &n.nic), i) {
                return err(
                    item,
                    format!("duplicate NIC: nic[{j}] is the same node and NIC; list each NIC once"),
                );
            }
            if let Some(j) = rails.insert((&n.node, n.rail), i) {
                return err(
                    item,
                    format!(
                        "rail {} of node {} is already nic[{j}] {}; a node has one NIC per rail",
                        n.rail, n.node, self.nic[j].nic
                    ),
                );
            }
            let Some(sw) = switches.get(n.switch.as_str()) else {
                return err(
                    item,
                    format!(
                        "unknown switch {:?}; add a [[switch]] table for it or fix the name",
                        n.switch
                    ),
                );
            };
            if sw.tier != Tier::Leaf {
                return err(
                    item,
                    format!(
                        "switch {} is a {} switch; NICs plug into leaves",
                        sw.name,
                        sw.tier.as_str()
                    ),
                );
            }
            if let Some(r) = sw.rail {
                if r != n.rail {
                    return err(
                        item,
                        format!(
                            "rail {} on leaf {} which serves rail {r}; fix the NIC's rail or its switch",
                            n.rail, sw.name
                        ),
                    );
                }
            }
            if let Some(p) = &n.port {
                if let Some(j) = ports.insert((&n.switch, p), i) {
                    return err(
                        item,
                        format!(
                            "port {p} of {} is already nic[{j}] ({} {}); one cable per port",
                            n.switch, self.nic[j].node, self.nic[j].nic
                        ),
                    );
                }
            }
        }
        for (i, l) in self.link.iter().enumerate() {
            let item = format!("link[{i}] ({} - {})", l.a, l.b);
            for end in [&l.a, &l.b] {
                if !switches.contains_key(end.as_str()) {
                    return err(
                        item,
                        format!(
                            "unknown switch {end:?}; add a [[switch]] table for it or fix the name"
                        ),
                    );
                }
            }
            if l.a == l.b {
                return err(item, "a link joins two different switches".into());
            }
            if l.count == 0 {
                return err(item, "count 0: leave the link out instead".into());
            }
            if let Some(e) = bad_rate(l.rate_gbit_s) {
                return err(item, e);
            }
        }
        for (i, n) in self.nic.iter().enumerate() {
            if let Some(e) = bad_rate(n.rate_gbit_s) {
                return err(format!("nic[{i}] ({} {})", n.node, n.nic), e);
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

// ----- Slurm topology.conf -------------------------------------------------------------

/// Expands a Slurm host list (`tux[0-3,7],gpu[01-02]`).
pub fn expand_hostlist(s: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    for p in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        let Some(open) = p.find('[') else {
            out.push(p.to_string());
            continue;
        };
        let close = p
            .rfind(']')
            .ok_or_else(|| format!("{p}: unbalanced brackets"))?;
        let (prefix, body, suffix) = (&p[..open], &p[open + 1..close], &p[close + 1..]);
        for r in body.split(',') {
            let (lo, hi) = r.split_once('-').unwrap_or((r, r));
            let width = lo.len();
            let a: u64 = lo.parse().map_err(|_| format!("{p}: bad range {r}"))?;
            let b: u64 = hi.parse().map_err(|_| format!("{p}: bad range {r}"))?;
            if b < a || b - a > 100_000 {
                return Err(format!("{p}: range {r} is empty or too large"));
            }
            for n in a..=b {
                out.push(format!("{prefix}{n:0width$}{suffix}"));
            }
        }
    }
    Ok(out)
}

/// A Slurm `topology.conf` (topology/tree): `SwitchName=S Nodes=LIST` makes a leaf whose
/// nodes form one group named after it; `SwitchName=S Switches=LIST` a spine (or core,
/// above spines) linked once to each. Slurm knows no NICs or ports: groups only.
pub fn import_slurm(file: &str, text: &str) -> Result<FabricPlan> {
    let mut plan = FabricPlan {
        version: 1,
        ..Default::default()
    };
    let mut children: Vec<(String, Vec<String>)> = Vec::new();
    for (ln, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut name = None;
        let mut nodes = None;
        let mut switches = None;
        for kv in line.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(PlanError(format!(
                    "{file} line {}: {kv:?} is not KEY=VALUE (topology.conf lines are SwitchName=... Switches=... Nodes=...)",
                    ln + 1
                )));
            };
            match k.to_ascii_lowercase().as_str() {
                "switchname" => name = Some(v.to_string()),
                "nodes" => nodes = Some(v.to_string()),
                "switches" => switches = Some(v.to_string()),
                _ => {} // LinkSpeed and others: not needed here
            }
        }
        let Some(name) = name else {
            return Err(PlanError(format!(
                "{file} line {}: no SwitchName=; every line names a switch",
                ln + 1
            )));
        };
        let bad = |e: String| PlanError(format!("{file} line {}: {e}", ln + 1));
        if let Some(list) = nodes {
            for n in expand_hostlist(&list).map_err(bad)? {
                plan.node.push(PlanNode {
                    name: n,
                    group: Some(name.clone()),
                    rack: None,
                });
            }
            plan.switch.push(PlanSwitch {
                name: name.clone(),
                tier: Tier::Leaf,
                group: Some(name),
                rail: None,
                rack: None,
            });
        } else if let Some(list) = switches {
            children.push((name.clone(), expand_hostlist(&list).map_err(bad)?));
            plan.switch.push(PlanSwitch {
                name,
                tier: Tier::Spine,
                group: None,
                rail: None,
                rack: None,
            });
        } else {
            return Err(bad(format!(
                "switch {name} has neither Nodes= nor Switches="
            )));
        }
    }
    // A switch above switches that are themselves above switches is a core.
    let uppers: BTreeSet<String> = children.iter().map(|c| c.0.clone()).collect();
    for (parent, kids) in &children {
        if kids.iter().any(|k| uppers.contains(k)) {
            if let Some(s) = plan.switch.iter_mut().find(|s| &s.name == parent) {
                s.tier = Tier::Core;
            }
        }
        for k in kids {
            plan.link.push(PlanLink {
                a: k.clone(),
                b: parent.clone(),
                count: 1,
                rate_gbit_s: None,
            });
        }
    }
    // A node listed under two leaves keeps the first.
    let mut seen = BTreeSet::new();
    plan.node.retain(|n| seen.insert(n.name.clone()));
    Ok(plan)
}

// ----- NetBox cable CSV ------------------------------------------------------------------

/// Column names accepted for each field of a NetBox cable CSV (compared lower-case with
/// `_` read as a blank): the cables list export ("Side A", "Termination A", ...), the
/// bulk-import format (`side_a_device`, `side_a_name`, ...), and common variants.
pub const NETBOX_COLUMNS: &[(&str, &[&str])] = &[
    (
        "a_device",
        &[
            "side a device",
            "side a",
            "device a",
            "a device",
            "termination a device",
        ],
    ),
    (
        "a_name",
        &[
            "side a name",
            "termination a",
            "interface a",
            "a name",
            "a interface",
            "termination a name",
        ],
    ),
    (
        "b_device",
        &[
            "side b device",
            "side b",
            "device b",
            "b device",
            "termination b device",
        ],
    ),
    (
        "b_name",
        &[
            "side b name",
            "termination b",
            "interface b",
            "b name",
            "b interface",
            "termination b name",
        ],
    ),
    (
        "a_role",
        &["side a role", "device a role", "a role", "role a"],
    ),
    (
        "b_role",
        &["side b role", "device b role", "b role", "role b"],
    ),
    ("a_rack", &["side a rack", "rack a", "a rack"]),
    ("b_rack", &["side b rack", "rack b", "b rack"]),
    ("status", &["status"]),
];

/// Splits one CSV record (RFC 4180 quotes).
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter().map(|s| s.trim().to_string()).collect()
}

/// Whether a device is a switch, from its role (when the CSV has one) or its name.
fn switch_tier(name: &str, role: Option<&str>) -> Option<Tier> {
    let probe = role.unwrap_or(name).to_ascii_lowercase();
    if probe.contains("core") || probe.contains("super") {
        Some(Tier::Core)
    } else if probe.contains("spine") {
        Some(Tier::Spine)
    } else if probe.contains("leaf")
        || probe.contains("switch")
        || probe.contains("tor")
        || (role.is_none() && (probe.starts_with("sw") || probe.contains("-sw")))
    {
        Some(Tier::Leaf)
    } else {
        None
    }
}

/// A NetBox cable CSV: each row one cable between two device interfaces. A device is a
/// switch by its role column when there is one (`leaf`, `spine`, `core`, `switch`), else
/// by its name (containing `leaf`, `spine`, `core`, `switch`, `tor`, or starting `sw`).
/// Host-to-leaf cables become NICs (rail: the host's NICs in natural name order), switch
/// cables links. Rows whose status is not `connected` (planned, decommissioning) count as
/// planned all the same; the status column is only read to skip `decommissioning`.
pub fn import_netbox(file: &str, text: &str) -> Result<FabricPlan> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Err(PlanError(format!(
            "{file}: empty CSV; export the cables list from NetBox"
        )));
    };
    let norm = |s: &str| {
        s.trim()
            .trim_start_matches('\u{feff}')
            .to_ascii_lowercase()
            .replace('_', " ")
    };
    let cols: Vec<String> = csv_fields(header).iter().map(|c| norm(c)).collect();
    let find = |field: &str| -> Option<usize> {
        let names = NETBOX_COLUMNS.iter().find(|(f, _)| *f == field)?.1;
        names.iter().find_map(|n| cols.iter().position(|c| c == n))
    };
    let need = |field: &str| {
        find(field).ok_or_else(|| {
            PlanError(format!(
                "{file}: no column for {field} (have: {}); accepted names: {}",
                cols.join(", "),
                NETBOX_COLUMNS
                    .iter()
                    .find(|(f, _)| *f == field)
                    .map(|x| x.1.join(" / "))
                    .unwrap_or_default()
            ))
        })
    };
    let (ad, an, bd, bn) = (
        need("a_device")?,
        need("a_name")?,
        need("b_device")?,
        need("b_name")?,
    );
    let (ar, br, ak, bk, st) = (
        find("a_role"),
        find("b_role"),
        find("a_rack"),
        find("b_rack"),
        find("status"),
    );
    let mut switches: BTreeMap<String, PlanSwitch> = BTreeMap::new();
    let mut host_nics: BTreeMap<String, Vec<(String, String, String)>> = BTreeMap::new();
    let mut links: BTreeMap<(String, String), u32> = BTreeMap::new();
    let mut racks: BTreeMap<String, String> = BTreeMap::new();
    for (ln, line) in lines {
        let f = csv_fields(line);
        let get = |i: usize| f.get(i).map(String::as_str).unwrap_or("");
        let opt = |i: Option<usize>| i.map(get).filter(|s| !s.is_empty());
        if opt(st).is_some_and(|s| s.to_ascii_lowercase().contains("decommission")) {
            continue;
        }
        let (a, ai, b, bi) = (get(ad), get(an), get(bd), get(bn));
        if a.is_empty() || b.is_empty() {
            return Err(PlanError(format!(
                "{file} line {}: a cable needs a device on both sides",
                ln + 1
            )));
        }
        for (dev, rack) in [(a, opt(ak)), (b, opt(bk))] {
            if let Some(r) = rack {
                racks.insert(dev.to_string(), r.to_string());
            }
        }
        let ta = switch_tier(a, opt(ar));
        let tb = switch_tier(b, opt(br));
        for (dev, t) in [(a, ta), (b, tb)] {
            if let Some(t) = t {
                let e = switches.entry(dev.to_string()).or_insert(PlanSwitch {
                    name: dev.to_string(),
                    tier: t,
                    group: None,
                    rail: None,
                    rack: None,
                });
                e.tier = e.tier.max(t);
            }
        }
        match (ta, tb) {
            (Some(_), Some(_)) => {
                let k = if a <= b {
                    (a.into(), b.into())
                } else {
                    (b.into(), a.into())
                };
                *links.entry(k).or_default() += 1;
            }
            (None, Some(_)) => {
                host_nics
                    .entry(a.into())
                    .or_default()
                    .push((ai.into(), b.into(), bi.into()))
            }
            (Some(_), None) => {
                host_nics
                    .entry(b.into())
                    .or_default()
                    .push((bi.into(), a.into(), ai.into()))
            }
            (None, None) => {
                return Err(PlanError(format!(
                "{file} line {}: neither {a:?} nor {b:?} looks like a switch; add a role column \
                     (Side A Role / Side B Role: leaf, spine) to the export",
                ln + 1
            )))
            }
        }
    }
    let mut plan = FabricPlan {
        version: 1,
        ..Default::default()
    };
    for (host, mut nics) in host_nics {
        nics.sort_by(|x, y| natural_cmp(&x.0, &y.0));
        for (rail, (nic, sw, port)) in nics.into_iter().enumerate() {
            plan.nic.push(PlanNic {
                node: host.clone(),
                nic,
                rail: rail as u32,
                switch: sw,
                port: Some(port).filter(|p| !p.is_empty()),
                rate_gbit_s: None,
            });
        }
        if let Some(r) = racks.get(&host) {
            plan.node.push(PlanNode {
                name: host.clone(),
                group: None,
                rack: Some(r.clone()),
            });
        }
    }
    for (name, mut s) in switches {
        s.rack = racks.get(&name).cloned();
        plan.switch.push(s);
    }
    plan.link = links
        .into_iter()
        .map(|((a, b), count)| PlanLink {
            a,
            b,
            count,
            rate_gbit_s: None,
        })
        .collect();
    Ok(plan)
}

// ----- ibnetdiscover -------------------------------------------------------------------

pub use crate::ibnet::{IbNode, IbPort};

/// Switch name from an NVIDIA node description (`MF0;NAME:MODEL/U1`), else the whole
/// description (as topograph's `pkg/ib/ib.go` reads it).
pub fn switch_name(desc: &str) -> String {
    if let Some((_, rest)) = desc.split_once(';') {
        if let Some((name, _)) = rest.split_once(':') {
            if !name.is_empty() && !name.contains(';') {
                return name.to_string();
            }
        }
    }
    desc.trim().to_string()
}

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
pub fn import_ibnetdiscover(file: &str, text: &str) -> Result<FabricPlan> {
    let nodes = parse_ibnetdiscover(file, text)?;
    let by_id: HashMap<&str, &IbNode> = nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let desc = |n: &IbNode| n.desc.clone().unwrap_or_else(|| n.id.clone());
    let sw_name = |n: &IbNode| switch_name(&desc(n));
    let mut plan = FabricPlan {
        version: 1,
        ..Default::default()
    };
    let mut host_nics: BTreeMap<String, Vec<(String, String, String)>> = BTreeMap::new();
    let mut leaves = BTreeSet::new();
    for n in nodes.iter().filter(|n| !n.switch) {
        let (host, nic) = ca_name(&desc(n), &n.id);
        for p in &n.ports {
            let Some(peer) = by_id.get(p.peer_id.as_str()) else {
                continue;
            };
            if !peer.switch {
                continue;
            }
            leaves.insert(peer.id.clone());
            let nic = if n.ports.len() > 1 {
                format!("{nic}/{}", p.port)
            } else {
                nic.clone()
            };
            host_nics.entry(host.clone()).or_default().push((
                nic,
                sw_name(peer),
                p.peer_port.to_string(),
            ));
        }
    }
    let mut link_counts: BTreeMap<(String, String), u32> = BTreeMap::new();
    let mut above: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for n in nodes.iter().filter(|n| n.switch) {
        for p in &n.ports {
            let Some(peer) = by_id.get(p.peer_id.as_str()).filter(|x| x.switch) else {
                continue;
            };
            if seen.contains(&(peer.id.clone(), p.peer_port))
                || !seen.insert((n.id.clone(), p.port))
            {
                continue;
            }
            let (a, b) = (sw_name(n), sw_name(peer));
            above.entry(a.clone()).or_default().insert(b.clone());
            above.entry(b.clone()).or_default().insert(a.clone());
            let k = if a <= b { (a, b) } else { (b, a) };
            *link_counts.entry(k).or_default() += 1;
        }
    }
    let leaf_names: BTreeSet<String> = nodes
        .iter()
        .filter(|n| leaves.contains(&n.id))
        .map(sw_name)
        .collect();
    for n in nodes.iter().filter(|n| n.switch) {
        let name = sw_name(n);
        let tier = if leaf_names.contains(&name) {
            Tier::Leaf
        } else if above
            .get(&name)
            .is_some_and(|peers| peers.iter().all(|p| !leaf_names.contains(p)))
        {
            Tier::Core
        } else {
            Tier::Spine
        };
        if plan.switch.iter().all(|s| s.name != name) {
            plan.switch.push(PlanSwitch {
                name,
                tier,
                group: None,
                rail: None,
                rack: None,
            });
        }
    }
    for (host, mut nics) in host_nics {
        nics.sort_by(|x, y| natural_cmp(&x.0, &y.0));
        for (rail, (nic, sw, port)) in nics.into_iter().enumerate() {
            plan.nic.push(PlanNic {
                node: host.clone(),
                nic,
                rail: rail as u32,
                switch: sw,
                port: Some(port),
                rate_gbit_s: None,
            });
        }
    }
    plan.link = link_counts
        .into_iter()
        .map(|((a, b), count)| PlanLink {
            a,
            b,
            count,
            rate_gbit_s: None,
        })
        .collect();
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NATIVE: &str = r#"
version = 1
name = "two groups"

[[switch]]
name = "leaf-r0-g0"
tier = "leaf"
group = "g0"
rail = 0
rack = "rack01"

[[switch]]
name = "spine0"
tier = "spine"

[[node]]
name = "g0n0"
group = "g0"
rack = "rack01"

[[nic]]
node = "g0n0"
nic = "rail0"
rail = 0
switch = "leaf-r0-g0"
port = "swp1"

[[link]]
a = "leaf-r0-g0"
b = "spine0"
count = 2
"#;

    #[test]
    fn native_plan_reads_every_table() {
        let p = parse("p.toml", NATIVE, Format::Native).unwrap();
        assert_eq!(p.name.as_deref(), Some("two groups"));
        assert_eq!(p.switch.len(), 2);
        assert_eq!(p.switch[0].rail, Some(0));
        assert_eq!(p.nic[0].port.as_deref(), Some("swp1"));
        assert_eq!(p.link[0].count, 2);
        assert_eq!(p.node_names(), ["g0n0"]);
        // The TOML it writes reads back the same.
        let again = parse("again.toml", &p.to_toml(), Format::Native).unwrap();
        assert_eq!(again.switch, p.switch);
        assert_eq!(again.nic, p.nic);
    }

    fn problem(text: &str) -> String {
        parse("p.toml", text, Format::Native).unwrap_err().0
    }

    #[test]
    fn bad_plans_name_the_item_and_the_next_step() {
        let e = problem(&NATIVE.replace("switch = \"leaf-r0-g0\"", "switch = \"leaf-x\""));
        assert!(
            e.contains("p.toml: nic[0] (g0n0 rail0): unknown switch \"leaf-x\""),
            "{e}"
        );
        assert!(e.contains("add a [[switch]]"), "{e}");
        let dup = format!(
            "{NATIVE}\n[[nic]]\nnode = \"g0n0\"\nnic = \"rail0\"\nrail = 1\nswitch = \"leaf-r0-g0\"\n"
        );
        assert!(problem(&dup).contains("duplicate NIC"), "{}", problem(&dup));
        let e = problem(&NATIVE.replace("tier = \"spine\"", "tier = \"top\""));
        assert!(e.contains("line") && e.contains("leaf, spine, core"), "{e}");
        let e = problem(&NATIVE.replace("version = 1", "version = 3"));
        assert!(e.contains("version = 1"), "{e}");
        let e = problem(&NATIVE.replace("rail = 0\nswitch", "rail = 1\nswitch"));
        assert!(e.contains("serves rail 0"), "{e}");
        let e = problem(&NATIVE.replace("b = \"spine0\"", "b = \"spine9\""));
        assert!(e.contains("link[0]") && e.contains("spine9"), "{e}");
        let e = problem(&NATIVE.replace("count = 2", "count = 0"));
        assert!(e.contains("count 0"), "{e}");
        let e = problem(&NATIVE.replace("count = 2", "count = 2\nrate_gbit_s = -400"));
        assert!(e.contains("link[0]") && e.contains("Gb/s"), "{e}");
        let e = problem(&NATIVE.replace("port = \"swp1\"", "port = \"swp1\"\nrate_gbit_s = nan"));
        assert!(e.contains("nic[0]") && e.contains("not a rate"), "{e}");
        let e = problem(&NATIVE.replace("port = \"swp1\"", "prot = \"swp1\""));
        assert!(
            e.contains("unknown field") && e.contains("docs/structure.md"),
            "{e}"
        );
    }

    #[test]
    fn rates_give_what_a_leaf_carries_across_the_spines() {
        let rated = NATIVE
            .replace("port = \"swp1\"", "port = \"swp1\"\nrate_gbit_s = 400")
            .replace("count = 2", "count = 2\nrate_gbit_s = 100.0");
        let p = parse("p.toml", &rated, Format::Native).unwrap();
        let c = p.leaf_capacity()["leaf-r0-g0"];
        assert_eq!((c.nics, c.nic_gbit_s, c.uplinks_gbit_s), (1, 400.0, 200.0));
        assert_eq!(c.oversubscription(), 2.0);
        assert_eq!(c.flows_at_line_rate(), 1);
        assert_eq!(c.flow_share(), 0.25);
        // The rates survive the TOML round trip.
        let again = parse("again.toml", &p.to_toml(), Format::Native).unwrap();
        assert_eq!(again.leaf_capacity(), p.leaf_capacity());
        // A leaf with a rate left out is unknown.
        assert!(parse("p.toml", NATIVE, Format::Native)
            .unwrap()
            .leaf_capacity()
            .is_empty());
    }

    #[test]
    fn hostlists_expand_like_slurm() {
        assert_eq!(
            expand_hostlist("tux[0-2,5],gpu[08-10],solo").unwrap(),
            ["tux0", "tux1", "tux2", "tux5", "gpu08", "gpu09", "gpu10", "solo"]
        );
        assert!(expand_hostlist("tux[3-1]").is_err());
    }

    #[test]
    fn format_is_told_by_extension_then_content() {
        let p = Path::new("x");
        assert_eq!(Format::detect(Path::new("a.toml"), ""), Format::Native);
        assert_eq!(Format::detect(Path::new("a.csv"), ""), Format::Netbox);
        assert_eq!(
            Format::detect(p, "# c\nSwitchName=s0 Nodes=a"),
            Format::Slurm
        );
        assert_eq!(Format::detect(p, "#\nvendid=0x0\n"), Format::Ibnetdiscover);
        assert_eq!(
            Format::detect(p, "Side A,Termination A,Side B,Termination B"),
            Format::Netbox
        );
        assert_eq!(Format::detect(p, "version = 1"), Format::Native);
    }

    #[test]
    fn switch_and_ca_names_follow_node_descriptions() {
        assert_eq!(
            switch_name("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"),
            "A09-P1-IBLEAF-04-04"
        );
        assert_eq!(switch_name("leaf-r0-g0"), "leaf-r0-g0");
        assert_eq!(
            ca_name("a08-p1-dgx-04-c01 mlx5_5", "H-1"),
            ("a08-p1-dgx-04-c01".into(), "mlx5_5".into())
        );
        assert_eq!(ca_name("lonely", "H-1"), ("lonely".into(), "H-1".into()));
    }
}
