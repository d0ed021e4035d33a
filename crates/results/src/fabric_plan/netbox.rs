//! A NetBox cable CSV as a plan: each row one cable between two device interfaces.

use std::collections::BTreeMap;

use super::*;

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
    let cols = Columns::read(file, header)?;
    let mut cables = Cables::default();
    for (ln, line) in lines {
        let where_ = format!("{file} line {}", ln + 1);
        cables.add(&cols, &csv_fields(line), &where_)?;
    }
    Ok(cables.into_plan())
}

/// Where each field sits in the CSV's records.
struct Columns {
    a_device: usize,
    a_name: usize,
    b_device: usize,
    b_name: usize,
    a_role: Option<usize>,
    b_role: Option<usize>,
    a_rack: Option<usize>,
    b_rack: Option<usize>,
    status: Option<usize>,
}

impl Columns {
    /// The header's columns by [`NETBOX_COLUMNS`]; the four device and interface columns
    /// are required.
    fn read(file: &str, header: &str) -> Result<Columns> {
        let norm = |s: &str| {
            s.trim()
                .trim_start_matches('\u{feff}')
                .to_ascii_lowercase()
                .replace('_', " ")
        };
        let cols: Vec<String> = csv_fields(header).iter().map(|c| norm(c)).collect();
        let names = |field: &str| {
            NETBOX_COLUMNS
                .iter()
                .find(|(f, _)| *f == field)
                .map(|x| x.1)
        };
        let find = |field: &str| -> Option<usize> {
            names(field)?
                .iter()
                .find_map(|n| cols.iter().position(|c| c == n))
        };
        let need = |field: &str| {
            find(field).ok_or_else(|| {
                PlanError(format!(
                    "{file}: no column for {field} (have: {}); accepted names: {}",
                    cols.join(", "),
                    names(field).map(|n| n.join(" / ")).unwrap_or_default()
                ))
            })
        };
        Ok(Columns {
            a_device: need("a_device")?,
            a_name: need("a_name")?,
            b_device: need("b_device")?,
            b_name: need("b_name")?,
            a_role: find("a_role"),
            b_role: find("b_role"),
            a_rack: find("a_rack"),
            b_rack: find("b_rack"),
            status: find("status"),
        })
    }
}

/// What the cables say so far: switches with their tiers, each host's NICs, the links
/// between switches counted, and racks.
#[derive(Default)]
struct Cables {
    switches: BTreeMap<String, PlanSwitch>,
    host_nics: HostNics,
    links: BTreeMap<(String, String), u32>,
    racks: BTreeMap<String, String>,
}

impl Cables {
    /// One record: a decommissioned cable is skipped; a host cable becomes a NIC, a
    /// switch cable a link; a cable between two non-switches is an error that says how
    /// to tell them apart.
    fn add(&mut self, c: &Columns, f: &[String], at: &str) -> Result<()> {
        let get = |i: usize| f.get(i).map(String::as_str).unwrap_or("");
        let opt = |i: Option<usize>| i.map(get).filter(|s| !s.is_empty());
        if opt(c.status).is_some_and(|s| s.to_ascii_lowercase().contains("decommission")) {
            return Ok(());
        }
        let (a, ai, b, bi) = (
            get(c.a_device),
            get(c.a_name),
            get(c.b_device),
            get(c.b_name),
        );
        if a.is_empty() || b.is_empty() {
            return Err(PlanError(format!(
                "{at}: a cable needs a device on both sides"
            )));
        }
        for (dev, rack) in [(a, opt(c.a_rack)), (b, opt(c.b_rack))] {
            if let Some(r) = rack {
                self.racks.insert(dev.to_string(), r.to_string());
            }
        }
        let ta = switch_tier(a, opt(c.a_role));
        let tb = switch_tier(b, opt(c.b_role));
        for (dev, t) in [(a, ta), (b, tb)] {
            if let Some(t) = t {
                let e = self.switches.entry(dev.to_string()).or_insert(PlanSwitch {
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
        let nic = |host: &str, nic: &str, sw: &str, port: &str| {
            (
                host.to_string(),
                (nic.to_string(), sw.to_string(), port.to_string()),
            )
        };
        let (host, cable) = match (ta, tb) {
            (Some(_), Some(_)) => {
                let k = if a <= b { (a, b) } else { (b, a) };
                *self.links.entry((k.0.into(), k.1.into())).or_default() += 1;
                return Ok(());
            }
            (None, Some(_)) => nic(a, ai, b, bi),
            (Some(_), None) => nic(b, bi, a, ai),
            (None, None) => {
                return Err(PlanError(format!(
                    "{at}: neither {a:?} nor {b:?} looks like a switch; add a role column \
                     (Side A Role / Side B Role: leaf, spine) to the export"
                )))
            }
        };
        self.host_nics.entry(host).or_default().push(cable);
        Ok(())
    }

    /// The plan: NICs on rails by name, hosts with a rack as nodes, switches with racks.
    fn into_plan(self) -> FabricPlan {
        let mut plan = FabricPlan {
            version: 1,
            ..Default::default()
        };
        for host in self.host_nics.keys() {
            if let Some(r) = self.racks.get(host) {
                plan.node.push(PlanNode {
                    name: host.clone(),
                    group: None,
                    rack: Some(r.clone()),
                });
            }
        }
        plan.nic = railed(self.host_nics);
        for (name, mut s) in self.switches {
            s.rack = self.racks.get(&name).cloned();
            plan.switch.push(s);
        }
        plan.link = counted_links(self.links);
        plan
    }
}
