//! Tenants of one shared fabric: which nodes (and which of their NICs) belong to whom, and
//! the isolation each is promised. The plan holds them as `[[tenant]]` tables; a site
//! without a plan gives the same tables in a small tenants file (`version = 1` and the
//! tables, `docs/tenants.md`). The sweeps read them to know which pairs must reach and
//! which must not, the audit to know which partition a port should hold, and `aggregate`
//! to judge both and to cut a tenant's own report out of the provider's.
//!
//! Isolation is the fabric's, not the host's: on InfiniBand a partition (P_Key: bit 15 the
//! membership, full or limited, bits 0-14 the key; two limited members cannot talk), on
//! RoCE an 802.1Q VLAN on the leaves, an L3 VRF per tenant, or a VXLAN VNI. A tenant also
//! has the traffic class its traffic rides and the ETS share of the shared links it is
//! promised, which bounds what a neighbour may take from it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::hostlist::expand_hostlist;

/// Largest tenants file read.
pub const MAX_TENANTS_BYTES: u64 = 4 << 20;

/// The default partition's key (without the membership bit): every port holds it, limited
/// at most for a tenant's node.
pub const DEFAULT_PKEY: u16 = 0x7fff;

/// A port's membership in a partition: bit 15 of the P_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Membership {
    /// Talks to full and limited members.
    #[default]
    Full,
    /// Talks to full members only.
    Limited,
}

impl Membership {
    pub fn of_pkey(raw: u16) -> Membership {
        if raw & 0x8000 != 0 {
            Membership::Full
        } else {
            Membership::Limited
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Membership::Full => "full",
            Membership::Limited => "limited",
        }
    }
}

/// One tenant and its promised isolation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tenant {
    pub name: String,
    /// Its nodes, as host names or Slurm hostlists (`gpu[001-016]`).
    pub nodes: Vec<String>,
    /// Its NICs on those nodes (`mlx5_0`, `rail0`); empty: all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<String>,
    /// InfiniBand partition key, 15 bits (`"0x8001"` or `"0x0001"`: the membership bit is
    /// `membership`'s, not the key's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pkey: Option<String>,
    #[serde(default)]
    pub membership: Membership,
    /// RoCE: the 802.1Q VLAN its ports sit in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// RoCE: the L3 VRF its routes live in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vrf: Option<String>,
    /// RoCE over an overlay: the VXLAN network identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vni: Option<u32>,
    /// The traffic class (priority) its RDMA traffic rides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_class: Option<u8>,
    /// The share of each shared link its class is promised (ETS), percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ets_share_percent: Option<f64>,
}

impl Tenant {
    /// The 15-bit key of `pkey`, when given and valid.
    pub fn pkey_value(&self) -> Option<u16> {
        self.pkey.as_deref().and_then(|p| parse_pkey(p).ok())
    }

    /// Whether `nic` of one of its nodes carries this tenant.
    pub fn has_nic(&self, nic: &str) -> bool {
        self.nics.is_empty() || self.nics.iter().any(|n| n == nic)
    }
}

/// A 16-bit P_Key as written (`0x8001`, `8001`), or why not.
pub fn parse_pkey(text: &str) -> std::result::Result<u16, String> {
    let hex = text
        .trim()
        .strip_prefix("0x")
        .or_else(|| text.trim().strip_prefix("0X"))
        .unwrap_or(text.trim());
    u16::from_str_radix(hex, 16).map_err(|_| format!("P_Key {text:?} is not a 16-bit hex value"))
}

/// The tenants file: `version = 1` and its `[[tenant]]` tables.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantsFile {
    version: u32,
    #[serde(default)]
    tenant: Vec<Tenant>,
}

/// Tenants whose lists were expanded and checked: every node in one tenant at most.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tenants {
    pub tenants: Vec<Tenant>,
    /// Node -> index in `tenants`.
    by_node: HashMap<String, usize>,
    /// Where they came from (`tenants FILE`, `plan FILE`).
    pub source: String,
}

/// Tenants that cannot be used: the message names the file, the tenant and the next step.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct TenantsError(pub String);

impl Tenants {
    /// Expands and checks `tenants` read from `source`.
    pub fn new(mut tenants: Vec<Tenant>, source: &str) -> Result<Tenants, TenantsError> {
        let at = |t: &str, msg: String| TenantsError(format!("{source}: tenant {t:?}: {msg}"));
        let mut by_node = HashMap::new();
        // Names in declaration order: index i is tenants[i]'s.
        let mut names: Vec<String> = Vec::new();
        for (i, t) in tenants.iter_mut().enumerate() {
            if t.name.trim().is_empty() {
                return Err(TenantsError(format!(
                    "{source}: tenant[{i}] has an empty name"
                )));
            }
            if names.contains(&t.name) {
                return Err(at(&t.name, "declared twice; each tenant once".into()));
            }
            names.push(t.name.clone());
            t.nodes = expand_nodes(&t.nodes).map_err(|m| at(&t.name, m))?;
            if t.nodes.is_empty() {
                return Err(at(
                    &t.name,
                    "no nodes; list its hosts in nodes = [...]".into(),
                ));
            }
            check_isolation(t).map_err(|m| at(&t.name, m))?;
            for n in &t.nodes {
                if let Some(j) = by_node.insert(n.clone(), i) {
                    if j != i {
                        return Err(at(
                            &t.name,
                            format!(
                                "node {n} is also in tenant {:?}; a node belongs to one tenant",
                                names[j]
                            ),
                        ));
                    }
                }
            }
        }
        check_distinct(&tenants).map_err(|m| TenantsError(format!("{source}: {m}")))?;
        Ok(Tenants {
            tenants,
            by_node,
            source: source.to_string(),
        })
    }

    /// Reads a tenants file (`version = 1` and `[[tenant]]` tables).
    pub fn load(path: &Path) -> Result<Tenants, TenantsError> {
        let shown = path.display().to_string();
        let text = read_small(path, MAX_TENANTS_BYTES).map_err(|e| {
            TenantsError(format!(
                "{shown}: cannot read the tenants file: {e} (give --tenants an existing file)"
            ))
        })?;
        Tenants::parse(&shown, &text)
    }

    /// Parses a tenants file's text (`file` names it in messages).
    pub fn parse(file: &str, text: &str) -> Result<Tenants, TenantsError> {
        let doc: TenantsFile = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|s| {
                    let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                    format!(" (line {line})")
                })
                .unwrap_or_default();
            TenantsError(format!(
                "{file}{at}: {}; see docs/tenants.md for the keys of a [[tenant]]",
                e.message()
            ))
        })?;
        if doc.version != 1 {
            return Err(TenantsError(format!(
                "{file}: version {} is not a tenants version this tool reads (write version = 1)",
                doc.version
            )));
        }
        if doc.tenant.is_empty() {
            return Err(TenantsError(format!(
                "{file}: no [[tenant]] table; a tenants file names at least one tenant"
            )));
        }
        Tenants::new(doc.tenant, &format!("tenants {file}"))
    }

    pub fn is_empty(&self) -> bool {
        self.tenants.is_empty()
    }

    /// The tenant of `node`, if any.
    pub fn of_node(&self, node: &str) -> Option<&Tenant> {
        self.by_node.get(node).map(|&i| &self.tenants[i])
    }

    /// The tenant `name`.
    pub fn get(&self, name: &str) -> Option<&Tenant> {
        self.tenants.iter().find(|t| t.name == name)
    }

    pub fn names(&self) -> Vec<&str> {
        self.tenants.iter().map(|t| t.name.as_str()).collect()
    }

    /// What is wrong with the P_Key table (`keys`, raw 16-bit values in use) of a port of
    /// `node`, by the tenants: its tenant's partition missing or with the wrong
    /// membership, another tenant's partition present, the default partition as a full
    /// member on a tenant's port. Empty: the table is as the tenants promise.
    pub fn pkey_findings(&self, node: &str, keys: &[u16]) -> Vec<String> {
        let mut out = Vec::new();
        let own = self.of_node(node);
        let shown = |raw: u16| format!("{raw:#06x} ({})", Membership::of_pkey(raw).as_str());
        if let Some(t) = own {
            if let Some(k) = t.pkey_value() {
                let want = match t.membership {
                    Membership::Full => k | 0x8000,
                    Membership::Limited => k,
                };
                match keys.iter().find(|&&raw| raw & 0x7fff == k) {
                    None => out.push(format!(
                        "does not hold its tenant {}'s partition {}",
                        t.name,
                        shown(want)
                    )),
                    Some(&raw) if raw != want => out.push(format!(
                        "holds its tenant {}'s partition as {}, promised {}",
                        t.name,
                        shown(raw),
                        t.membership.as_str()
                    )),
                    Some(_) => {}
                }
            }
            if t.pkey.is_some() && keys.contains(&(DEFAULT_PKEY | 0x8000)) {
                out.push(format!(
                    "holds the default partition as a full member (0xffff): it can talk to every \
                     port of the default partition; tenant {}'s ports should be limited (0x7fff) \
                     at most",
                    t.name
                ));
            }
        }
        for other in self
            .tenants
            .iter()
            .filter(|o| own.is_none_or(|t| t.name != o.name))
        {
            let Some(k) = other.pkey_value() else {
                continue;
            };
            if let Some(&raw) = keys.iter().find(|&&raw| raw & 0x7fff == k) {
                out.push(format!(
                    "holds tenant {}'s partition {}{}",
                    other.name,
                    shown(raw),
                    own.map(|t| format!(" (it is tenant {}'s node)", t.name))
                        .unwrap_or_else(|| " (it is in no tenant)".into())
                ));
            }
        }
        out
    }

    /// What is wrong with a RoCE port's segment as its host sets it (`seg`, on `node`):
    /// in another VLAN or VRF than its tenant's, or in another tenant's. A VLAN or VRF the
    /// host does not set (an untagged port whose VLAN the switch's access port sets, a VRF
    /// kept on the switches) says nothing and is not a finding.
    pub fn segment_findings(&self, node: &str, seg: &crate::audit::Segment) -> Vec<String> {
        let mut out = Vec::new();
        let own = self.of_node(node);
        if let Some(t) = own {
            if let (Some(want), Some(have)) = (t.vlan, seg.vlan) {
                if want != have {
                    out.push(format!(
                        "{} is in VLAN {have}, its tenant {}'s is VLAN {want}",
                        seg.netdev, t.name
                    ));
                }
            }
            if let (Some(want), Some(have)) = (&t.vrf, &seg.vrf) {
                if want != have {
                    out.push(format!(
                        "{} is in VRF {have}, its tenant {}'s is VRF {want}",
                        seg.netdev, t.name
                    ));
                }
            }
        }
        let whose = || {
            own.map(|t| format!(" (it is tenant {}'s node)", t.name))
                .unwrap_or_else(|| " (it is in no tenant)".into())
        };
        for other in self
            .tenants
            .iter()
            .filter(|o| own.is_none_or(|t| t.name != o.name))
        {
            if other.vlan.is_some() && other.vlan == seg.vlan {
                out.push(format!(
                    "{} is in tenant {}'s VLAN {}{}",
                    seg.netdev,
                    other.name,
                    other.vlan.unwrap_or_default(),
                    whose()
                ));
            }
            if other.vrf.is_some() && other.vrf == seg.vrf {
                out.push(format!(
                    "{} is in tenant {}'s VRF {}{}",
                    seg.netdev,
                    other.name,
                    other.vrf.as_deref().unwrap_or_default(),
                    whose()
                ));
            }
        }
        out
    }

    /// Whether traffic between the two nodes is meant to flow: same tenant, both known.
    /// `None` when either node belongs to no tenant (nothing is promised for it).
    pub fn same_tenant(&self, a: &str, b: &str) -> Option<bool> {
        Some(self.by_node.get(a)? == self.by_node.get(b)?)
    }
}

/// A small text file, refused past `limit` bytes.
fn read_small(path: &Path, limit: u64) -> std::io::Result<String> {
    let len = std::fs::metadata(path)?.len();
    if len > limit {
        return Err(std::io::Error::other(format!(
            "{len} bytes is more than such a file can be ({limit}); is it the right file?"
        )));
    }
    std::fs::read_to_string(path)
}

/// Host names and Slurm hostlists, expanded.
fn expand_nodes(nodes: &[String]) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    for n in nodes {
        let names = expand_hostlist(n).map_err(|e| format!("nodes entry {n:?}: {e}"))?;
        out.extend(names.into_iter().filter(|n| !n.is_empty()));
    }
    Ok(out)
}

/// One tenant's isolation settings each in range.
fn check_isolation(t: &Tenant) -> std::result::Result<(), String> {
    if let Some(p) = &t.pkey {
        let raw = parse_pkey(p)?;
        let key = raw & 0x7fff;
        if key == 0 || key == DEFAULT_PKEY {
            return Err(format!(
                "pkey {p} is {} partition; give the tenant a key of its own (0x0001..0x7ffe)",
                if key == 0 {
                    "the invalid"
                } else {
                    "the default"
                }
            ));
        }
        if raw & 0x8000 != 0 && t.membership == Membership::Limited {
            return Err(format!(
                "pkey {p} has the full-membership bit set but membership = \"limited\"; write the \
                 15-bit key ({:#06x}) and say the membership in membership",
                key
            ));
        }
    }
    if let Some(v) = t.vlan {
        if !(1..=4094).contains(&v) {
            return Err(format!("vlan {v} is not an 802.1Q VLAN id (1..4094)"));
        }
    }
    if let Some(v) = t.vni {
        if !(1..=0xff_ffff).contains(&v) {
            return Err(format!(
                "vni {v} is not a VXLAN network identifier (1..16777215)"
            ));
        }
    }
    if let Some(tc) = t.traffic_class {
        if tc > 7 {
            return Err(format!("traffic_class {tc} is not a priority (0..7)"));
        }
    }
    if let Some(s) = t.ets_share_percent {
        if !(s.is_finite() && s > 0.0 && s <= 100.0) {
            return Err(format!(
                "ets_share_percent {s} is not a share (0 < share <= 100)"
            ));
        }
    }
    Ok(())
}

/// No two tenants share a partition, a VLAN, a VRF or a VNI: sharing one is no isolation.
fn check_distinct(tenants: &[Tenant]) -> std::result::Result<(), String> {
    let mut seen: BTreeMap<(String, String), &str> = BTreeMap::new();
    let mut ets = 0.0;
    for t in tenants {
        let keys = [
            t.pkey_value().map(|k| ("pkey", format!("{k:#06x}"))),
            t.vlan.map(|v| ("vlan", v.to_string())),
            t.vrf.clone().map(|v| ("vrf", v)),
            t.vni.map(|v| ("vni", v.to_string())),
        ];
        for (kind, value) in keys.into_iter().flatten() {
            if let Some(other) = seen.insert((kind.to_string(), value.clone()), &t.name) {
                return Err(format!(
                    "tenants {other:?} and {:?} share {kind} {value}: tenants on one partition \
                     are not isolated; give each its own",
                    t.name
                ));
            }
        }
        ets += t.ets_share_percent.unwrap_or(0.0);
    }
    if ets > 100.0 + 1e-9 {
        return Err(format!(
            "the tenants' ets_share_percent add up to {ets}%: more than a link has"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = r#"
version = 1
[[tenant]]
name = "acme"
nodes = ["g0n[0-1]", "g1n0"]
pkey = "0x0001"
vlan = 101
traffic_class = 3
ets_share_percent = 50

[[tenant]]
name = "globex"
nodes = ["g0n[2-3]"]
pkey = "0x0002"
membership = "limited"
vlan = 102
"#;

    #[test]
    fn reads_two_tenants_and_expands_hostlists() {
        let t = Tenants::parse("t.toml", TWO).unwrap();
        assert_eq!(t.names(), ["acme", "globex"]);
        assert_eq!(t.of_node("g1n0").unwrap().name, "acme");
        assert_eq!(t.of_node("g0n3").unwrap().name, "globex");
        assert!(t.of_node("g9n9").is_none());
        assert_eq!(t.same_tenant("g0n0", "g1n0"), Some(true));
        assert_eq!(t.same_tenant("g0n0", "g0n2"), Some(false));
        assert_eq!(t.same_tenant("g0n0", "g9n9"), None);
        assert_eq!(t.get("globex").unwrap().membership, Membership::Limited);
        assert_eq!(t.get("acme").unwrap().pkey_value(), Some(1));
    }

    #[test]
    fn a_node_in_two_tenants_is_refused() {
        let text = TWO.replace("g0n[2-3]", "g0n[1-3]");
        let e = Tenants::parse("t.toml", &text).unwrap_err().0;
        assert!(e.contains("node g0n1 is also in tenant \"acme\""), "{e}");
    }

    #[test]
    fn a_shared_partition_is_refused() {
        let e = Tenants::parse("t.toml", &TWO.replace("vlan = 102", "vlan = 101"))
            .unwrap_err()
            .0;
        assert!(e.contains("share vlan 101"), "{e}");
        let e = Tenants::parse("t.toml", &TWO.replace("0x0002", "0x8001"))
            .unwrap_err()
            .0;
        assert!(e.contains("full-membership bit"), "{e}");
        let e = Tenants::parse("t.toml", &TWO.replace("0x0002", "0x0001"))
            .unwrap_err()
            .0;
        assert!(e.contains("share pkey 0x0001"), "{e}");
    }

    #[test]
    fn the_default_partition_and_bad_ranges_are_refused() {
        for (from, to, want) in [
            ("0x0002", "0x7fff", "the default partition"),
            ("vlan = 102", "vlan = 4095", "not an 802.1Q VLAN"),
            ("traffic_class = 3", "traffic_class = 8", "not a priority"),
            (
                "ets_share_percent = 50",
                "ets_share_percent = 0",
                "not a share",
            ),
            ("version = 1", "version = 2", "version 2"),
            ("name = \"globex\"", "name = \"acme\"", "declared twice"),
            ("membership", "member", "unknown field"),
        ] {
            let e = Tenants::parse("t.toml", &TWO.replace(from, to))
                .unwrap_err()
                .0;
            assert!(e.contains(want), "{from} -> {to}: {e}");
        }
    }

    /// A RoCE port in its tenant's VLAN passes; in another VLAN or VRF than its tenant's,
    /// or in another tenant's, it is named; an untagged port (the switch sets its VLAN)
    /// says nothing.
    #[test]
    fn a_roce_ports_vlan_and_vrf_are_judged_against_the_tenants() {
        let text = TWO.replace("vlan = 101\n", "vlan = 101\nvrf = \"acme\"\n");
        let t = Tenants::parse("t.toml", &text).unwrap();
        let seg = |vlan: Option<u16>, vrf: Option<&str>| crate::audit::Segment {
            netdev: "eth2.101".into(),
            vlan,
            vrf: vrf.map(String::from),
            vrf_table: None,
        };
        assert!(t
            .segment_findings("g0n0", &seg(Some(101), Some("acme")))
            .is_empty());
        assert!(t.segment_findings("g0n0", &seg(None, None)).is_empty());
        let f = t.segment_findings("g0n0", &seg(Some(102), None));
        assert_eq!(
            f,
            [
                "eth2.101 is in VLAN 102, its tenant acme's is VLAN 101",
                "eth2.101 is in tenant globex's VLAN 102 (it is tenant acme's node)"
            ]
        );
        let f = t.segment_findings("g0n2", &seg(None, Some("acme")));
        assert_eq!(
            f,
            ["eth2.101 is in tenant acme's VRF acme (it is tenant globex's node)"]
        );
        let f = t.segment_findings("g9n9", &seg(Some(101), None));
        assert_eq!(
            f,
            ["eth2.101 is in tenant acme's VLAN 101 (it is in no tenant)"]
        );
    }

    #[test]
    fn membership_is_bit_15() {
        assert_eq!(Membership::of_pkey(0x8001), Membership::Full);
        assert_eq!(Membership::of_pkey(0x0001), Membership::Limited);
        assert_eq!(parse_pkey("0xffff"), Ok(0xffff));
        assert!(parse_pkey("0x1ffff").is_err());
    }
}
