//! One tenant's share of the provider's documents, for the report a customer receives
//! (`aggregate report --tenant NAME`): only its own nodes' hosts, pairs, failures, sweep
//! nodes and isolation attempts. What a tenant must not learn about the others goes: their
//! host facts, the pairs between them, a run's whole-job results when other tenants' nodes
//! took part (a collective, a congestion run), the fabric's discovery. The isolation
//! attempts between the tenant's nodes and the others stay, with the other end made
//! anonymous (`another-tenant-N`, no address), so the tenant still sees that nothing of
//! theirs was reachable. Last, every string left (warnings, command lines, paths) is
//! scrubbed of the other nodes' names and the identifiers their host facts held (addresses,
//! GUIDs, MACs, GIDs, serials), each replaced by [`REDACTED`].

use std::collections::{BTreeMap, HashSet};

use results::tenants::Tenants;
use results::Document;
use serde_json::Value;

/// What replaces another tenant's name or identifier in a string.
pub const REDACTED: &str = "(another tenant)";
/// The tenant the other tenants' anonymous nodes are put in.
pub const OTHERS: &str = "other tenants";

/// The cut of every document for one tenant.
pub struct TenantView<'a> {
    pub name: String,
    tenants: &'a Tenants,
    /// Other nodes seen so far -> their anonymous name.
    anonymous: BTreeMap<String, String>,
}

impl<'a> TenantView<'a> {
    /// The view of tenant `name`, or a message naming the tenants there are.
    pub fn new(tenants: &'a Tenants, name: &str) -> Result<TenantView<'a>, String> {
        if tenants.get(name).is_none() {
            return Err(format!(
                "--tenant {name}: no such tenant in {} (tenants: {})",
                tenants.source,
                tenants.names().join(", ")
            ));
        }
        Ok(TenantView {
            name: name.to_string(),
            tenants,
            anonymous: BTreeMap::new(),
        })
    }

    fn own(&self, node: &str) -> bool {
        self.tenants
            .of_node(node)
            .is_some_and(|t| t.name == self.name)
    }

    /// The anonymous name of another node (stable within one report).
    fn anonymise(&mut self, node: &str) -> String {
        let n = self.anonymous.len() + 1;
        self.anonymous
            .entry(node.to_string())
            .or_insert_with(|| format!("another-tenant-{n}"))
            .clone()
    }

    /// The tenants a cut document is judged against: this tenant, and the other tenants'
    /// anonymous nodes as one (nodes of no tenant stay in none).
    pub fn tenants(&self) -> Result<Tenants, String> {
        let mut own = self
            .tenants
            .get(&self.name)
            .cloned()
            .ok_or_else(|| format!("tenant {} vanished", self.name))?;
        // Only the tenant's own isolation settings are shown to it.
        own.nics.clear();
        let mut list = vec![own];
        let others: Vec<String> = self
            .anonymous
            .iter()
            .filter(|(node, _)| self.tenants.of_node(node).is_some())
            .map(|(_, anon)| anon.clone())
            .collect();
        if !others.is_empty() {
            list.push(results::tenants::Tenant {
                name: OTHERS.into(),
                nodes: others,
                nics: vec![],
                pkey: None,
                membership: Default::default(),
                vlan: None,
                vrf: None,
                vni: None,
                traffic_class: None,
                ets_share_percent: None,
            });
        }
        Tenants::new(
            list,
            &format!("tenant {} of {}", self.name, self.tenants.source),
        )
        .map_err(|e| e.0)
    }

    /// `doc` cut to this tenant; `None` when nothing of it is the tenant's.
    pub fn restrict(&mut self, mut doc: Document) -> Option<Document> {
        let mut foreign = Foreign::default();
        for h in &doc.hosts {
            if !self.own(&h.hostname) {
                foreign.host(h);
            }
        }
        let mixed = !foreign.names.is_empty();
        let own_host = doc.hosts.iter().any(|h| self.own(&h.hostname));
        doc.hosts.retain(|h| self.own(&h.hostname));
        self.cut_results(&mut doc, mixed, &mut foreign);
        self.cut_sweep(&mut doc, &mut foreign);
        let own_reach = self.cut_reach(&mut doc, &mut foreign);
        if !own_host && !own_reach {
            return None;
        }
        doc.fabric = None;
        if mixed {
            doc.congestion = None;
        }
        foreign.scrub(doc)
    }

    /// Whether both ends of `p` are the tenant's; the other ends' names are noted.
    fn own_pair(&self, p: &results::Pair, foreign: &mut Foreign) -> bool {
        let mut own = true;
        for h in [&p.initiator.host, &p.responder.host] {
            if !self.own(h) {
                foreign.names.insert(h.clone());
                own = false;
            }
        }
        own
    }

    fn cut_results(&self, doc: &mut Document, mixed: bool, foreign: &mut Foreign) {
        use results::TestResult;
        doc.results.retain(|r| match r {
            TestResult::Latency(l) => self.own_pair(&l.pair, foreign),
            TestResult::Bandwidth(b) => self.own_pair(&b.pair, foreign),
            // A whole job's figure: the tenant's only when the job was.
            TestResult::Collective(_) => !mixed,
        });
        doc.failed_pairs.retain(|f| self.own_pair(&f.pair, foreign));
    }

    fn cut_sweep(&self, doc: &mut Document, foreign: &mut Foreign) {
        let Some(s) = &mut doc.sweep else { return };
        for n in s.nodes.iter().filter(|n| !self.own(n)) {
            foreign.names.insert(n.clone());
        }
        s.nodes.retain(|n| self.own(n));
        if let Some(p) = &mut s.plan {
            p.missing.retain(|n| self.own(n));
            p.unplanned.retain(|n| self.own(n));
            p.held_as_built
                .retain(|k, _| self.own(k.split_whitespace().next().unwrap_or("")));
        }
    }

    /// The attempts with one end of the tenant's, the other ends anonymous; whether the
    /// tenant had an endpoint.
    fn cut_reach(&mut self, doc: &mut Document, foreign: &mut Foreign) -> bool {
        let Some(run) = &mut doc.reach else {
            return false;
        };
        let own: HashSet<u32> = run
            .endpoints
            .iter()
            .filter(|e| self.own(&e.node))
            .map(|e| e.rank)
            .collect();
        run.attempts
            .retain(|a| own.contains(&a.from) || own.contains(&a.to));
        let tried: HashSet<u32> = run.attempts.iter().flat_map(|a| [a.from, a.to]).collect();
        let mut kept = Vec::new();
        for mut e in std::mem::take(&mut run.endpoints) {
            if own.contains(&e.rank) {
                e.tenant = Some(self.name.clone());
                kept.push(e);
                continue;
            }
            foreign.names.insert(e.node.clone());
            foreign.ids.insert(e.address.clone());
            if !tried.contains(&e.rank) {
                continue;
            }
            let theirs = self.tenants.of_node(&e.node).is_some();
            e.node = self.anonymise(&e.node);
            e.address = String::new();
            e.interface = None;
            e.port = 0;
            e.tenant = theirs.then(|| OTHERS.to_string());
            kept.push(e);
        }
        run.endpoints = kept;
        run.tenants_source = None;
        for a in &mut run.attempts {
            // An error text may quote the other end's address.
            if !own.contains(&a.to) {
                a.detail = None;
            }
        }
        !own.is_empty()
    }
}

/// Another tenant's names and identifiers found in a document.
#[derive(Default)]
struct Foreign {
    names: HashSet<String>,
    ids: HashSet<String>,
}

/// Keys of host facts whose values identify that host.
fn identifying(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "guid", "mac", "gid", "addr", "address", "serial", "uuid", "ip", "bus_id",
    ]
    .iter()
    .any(|w| k == *w || k.ends_with(&format!("_{w}")) || k.starts_with(&format!("{w}_")))
}

impl Foreign {
    fn host(&mut self, h: &results::HostInfo) {
        self.names.insert(h.hostname.clone());
        if let Ok(v) = serde_json::to_value(h) {
            collect_ids(&v, None, &mut self.ids);
        }
    }

    /// The document with every other tenant's name and identifier replaced.
    fn scrub(mut self, doc: Document) -> Option<Document> {
        self.names.retain(|n| !n.is_empty());
        self.ids.retain(|n| n.len() >= 4);
        let mut v = serde_json::to_value(&doc).ok()?;
        scrub_value(&mut v, &self);
        serde_json::from_value(v).ok()
    }

    fn is_foreign(&self, word: &str) -> bool {
        self.names.contains(word) || self.ids.contains(word)
    }
}

fn collect_ids(v: &Value, key: Option<&str>, out: &mut HashSet<String>) {
    match v {
        Value::String(s) if key.is_some_and(identifying) => {
            out.insert(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|x| collect_ids(x, key, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| collect_ids(x, Some(k), out)),
        _ => {}
    }
}

fn scrub_value(v: &mut Value, f: &Foreign) {
    match v {
        Value::String(s) => {
            if let Some(clean) = scrub_text(s, f) {
                *s = clean;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| scrub_value(x, f)),
        Value::Object(m) => m.values_mut().for_each(|x| scrub_value(x, f)),
        _ => {}
    }
}

/// `text` with each foreign word replaced (`None`: nothing to replace). A word is a run of
/// letters, digits and `_ - . : /`; it is foreign when it is, or its parts split at `:`
/// `/` `=` or its first `.` are, a foreign name or identifier (`g1n1`, `g1n1.cluster`,
/// `g1n1:3`, `198.18.0.10:5000`).
fn scrub_text(text: &str, f: &Foreign) -> Option<String> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || "_-.:/".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut rest = text;
    while !rest.is_empty() {
        let start = rest.find(is_word).unwrap_or(rest.len());
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest.find(|c: char| !is_word(c)).unwrap_or(rest.len());
        let word = &rest[..end];
        if word_is_foreign(word, f) {
            out.push_str(REDACTED);
            changed = true;
        } else {
            out.push_str(word);
        }
        rest = &rest[end..];
    }
    changed.then_some(out)
}

fn word_is_foreign(word: &str, f: &Foreign) -> bool {
    let trimmed = word.trim_matches(|c: char| ".:/-".contains(c));
    f.is_foreign(word)
        || f.is_foreign(trimmed)
        || trimmed.split([':', '/', '=']).any(|p| f.is_foreign(p))
        || trimmed
            .split_once('.')
            .is_some_and(|(head, _)| f.is_foreign(head))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn foreign() -> Foreign {
        Foreign {
            names: ["g1n1".to_string()].into(),
            ids: ["198.18.1.67".to_string(), "0x0002c90300000001".to_string()].into(),
        }
    }

    #[test]
    fn words_are_replaced_whole() {
        let f = foreign();
        assert_eq!(
            scrub_text("g0n0 <-> g1n1:3 failed", &f).unwrap(),
            "g0n0 <-> (another tenant) failed"
        );
        assert_eq!(
            scrub_text("peer 198.18.1.67:5000 and g1n1.cluster.local", &f).unwrap(),
            "peer (another tenant) and (another tenant)"
        );
        assert_eq!(scrub_text("g1n10 g0n1 node g1n1x", &f), None);
        assert_eq!(
            scrub_text("--hosts=g1n1,g0n0", &f).unwrap(),
            "--hosts=(another tenant),g0n0"
        );
    }

    #[test]
    fn host_identifiers_are_collected() {
        let v = serde_json::json!({"hostname": "g1n1", "net_devices": [{"name": "rail0", "mac": "aa:bb:cc:dd:ee:ff"}],
            "rdma_devices": [{"name": "mlx5_0", "node_guid": "0x0002c90300000001"}]});
        let mut ids = HashSet::new();
        collect_ids(&v, None, &mut ids);
        assert!(ids.contains("aa:bb:cc:dd:ee:ff"));
        assert!(ids.contains("0x0002c90300000001"));
        assert!(!ids.contains("mlx5_0"), "a device name is everyone's");
        assert!(!ids.contains("g1n1"));
    }
}
