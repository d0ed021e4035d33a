//! A NetBox cable CSV as a plan: each row one cable between two device interfaces.

use std::collections::BTreeMap;

use super::*;
use crate::natural::natural_cmp;

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

/// Whether a device is a switch, from its role (when the CSV has one) or its name, read
/// as words (letters only, lower case: `MSPINE4-01` is `mspine`, `storage01` is `storage`):
/// a word ending in `core` or starting `super` is a core, one ending in `spine` a spine,
/// one ending in `leaf`, or `tor`, `switch` (and, by name, `sw`) a leaf. Words, not
/// substrings: `storage01` holds `tor` and `selene-swift-01` starts with `sw`, and
/// neither is a switch.
pub(crate) fn switch_tier(name: &str, role: Option<&str>) -> Option<Tier> {
    let probe = role.unwrap_or(name).to_ascii_lowercase();
    let words: Vec<&str> = probe
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .collect();
    let any = |f: &dyn Fn(&str) -> bool| words.iter().any(|w| f(w));
    if any(&|w| w.ends_with("core") || w.starts_with("super")) {
        Some(Tier::Core)
    } else if any(&|w| w.ends_with("spine")) {
        Some(Tier::Spine)
    } else if any(&|w| {
        w.ends_with("leaf") || w == "tor" || w == "switch" || (role.is_none() && w == "sw")
    }) {
        Some(Tier::Leaf)
    } else {
        None
    }
}

/// A NetBox cable CSV: each row one cable between two device interfaces. A device is a
/// switch by its role column when there is one, else by its name ([`switch_tier`]: words
/// such as `leaf`, `spine`, `core`, `switch`, `tor`, `sw`).
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
                    label: None,
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
    plan.link = counted_links(links);
    Ok(plan)
}
