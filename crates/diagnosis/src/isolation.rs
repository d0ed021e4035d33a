//! Tenants kept apart, judged from the hosts: the isolation sweeps of the inputs
//! (`bench-lat --pattern isolation`) against the tenants (`aggregate --tenants`, else the
//! plan's `[[tenant]]` tables). Inside a tenant every attempt must reach its peer; across
//! tenants the fabric must deliver none. A breach is named with its pair and its path
//! through the plan (NIC, leaf, spines, leaf, NIC), the tenant-by-tenant picture shows
//! where reach went, and `[isolation]`'s checks count the pairs at fault.

use std::collections::BTreeMap;

use results::fabric_plan::FabricPlan;
use results::reach::{Block, PairFinding, ReachEndpoint};
use results::tenants::Tenants;
use serde::Serialize;
use verdict::input::Loaded;
use verdict::judge::{Outcome, Status};
use verdict::profile::IsolationSpec;

/// Pair findings listed in the report; more are counted.
const LISTED: usize = 200;

/// What the isolation sweeps of the inputs came to.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Isolation {
    /// Where the tenants came from (`tenants FILE`, `plan FILE`).
    pub tenants_source: String,
    /// Tenants in picture order.
    pub tenants: Vec<String>,
    /// One row per tenant: `delivered/pairs` toward each tenant of `tenants`.
    pub picture: Vec<PictureRow>,
    /// Cross-tenant pairs the fabric delivered, with their paths (first [`LISTED`]).
    pub breaches: Vec<Named>,
    pub breaches_total: usize,
    /// Same-tenant pairs that did not reach (first [`LISTED`]).
    pub unreached: Vec<Named>,
    pub unreached_total: usize,
    /// Ordered pairs judged inside and across tenants.
    pub inside_pairs: u64,
    pub across_pairs: u64,
    /// Pairs whose every attempt judged nothing (an attempt that could not be made).
    pub unjudged: u64,
    /// Nodes of the sweeps that belong to no tenant (not judged).
    pub untenanted: Vec<String>,
    /// The sweeps read (input paths) and their methods.
    pub sweeps: Vec<String>,
    /// NICs that behave as members of another tenant: they reach all of that tenant's
    /// nodes they tried and none of their own (a port in the wrong VLAN, VRF or partition).
    pub misplaced: Vec<String>,
}

/// One row of the tenant-by-tenant picture.
#[derive(Debug, Clone, Serialize)]
pub struct PictureRow {
    pub tenant: String,
    /// `delivered/pairs`, `-` where no pair was tried; `bad` when it breaks the promise.
    pub cells: Vec<(String, bool)>,
}

/// One pair at fault, as the report names it.
#[derive(Debug, Clone, Serialize)]
pub struct Named {
    pub from: String,
    pub from_tenant: String,
    pub to: String,
    pub to_tenant: String,
    /// NIC, leaf, spines, leaf, NIC by the plan (addresses without one).
    pub path: String,
    pub attempts: String,
}

/// The isolation sweeps of `docs` judged against `tenants`; `None` without a sweep.
pub fn view(docs: &[Loaded], tenants: &Tenants, plan: Option<&FabricPlan>) -> Option<Isolation> {
    let sweeps: Vec<(&Loaded, &results::reach::ReachRun)> = docs
        .iter()
        .filter_map(|d| d.doc.reach.as_ref().map(|r| (d, r)))
        .collect();
    if sweeps.is_empty() {
        return None;
    }
    let mut v = Isolation {
        tenants_source: tenants.source.clone(),
        ..Default::default()
    };
    let mut blocks: BTreeMap<(String, String), Block> = BTreeMap::new();
    let mut untenanted = std::collections::BTreeSet::new();
    for (d, run) in sweeps {
        let tenant_of = |n: &str| tenants.of_node(n).map(|t| t.name.as_str());
        v.misplaced.extend(misplaced(run, &tenant_of, plan));
        let j = run.judge(tenant_of);
        for (k, b) in j.blocks {
            let into = blocks.entry(k).or_default();
            into.pairs += b.pairs;
            into.delivered += b.delivered;
            into.reached += b.reached;
        }
        v.unjudged += j.unjudged;
        untenanted.extend(j.untenanted);
        v.breaches_total += j.breaches.len();
        v.unreached_total += j.unreached.len();
        let name = |f: &PairFinding| named(f, plan);
        v.breaches.extend(
            j.breaches
                .iter()
                .take(LISTED.saturating_sub(v.breaches.len()))
                .map(name),
        );
        v.unreached.extend(
            j.unreached
                .iter()
                .take(LISTED.saturating_sub(v.unreached.len()))
                .map(name),
        );
        v.sweeps.push(format!(
            "{} ({}; {} ms timeout, rails {})",
            verdict::escape::shorten(
                &d.path
                    .file_name()
                    .map_or(d.path.display().to_string(), |n| n
                        .to_string_lossy()
                        .into_owned()),
                256
            ),
            run.methods.join(" + "),
            run.timeout_ms,
            run.rail_mode
        ));
    }
    v.untenanted = untenanted.into_iter().collect();
    v.tenants = tenants.names().iter().map(|s| s.to_string()).collect();
    (v.inside_pairs, v.across_pairs) = results::reach::inside_and_across(&blocks);
    v.picture = picture(&v.tenants, &blocks);
    Some(v)
}

/// Per endpoint: pairs tried and delivered toward each tenant (both directions); an
/// endpoint that reached nothing of its own tenant and everything of one other is in that
/// other tenant's partition.
fn misplaced<'a>(
    run: &results::reach::ReachRun,
    tenant_of: &dyn Fn(&str) -> Option<&'a str>,
    plan: Option<&FabricPlan>,
) -> Vec<String> {
    let ranks: BTreeMap<u32, &ReachEndpoint> = run.endpoints.iter().map(|e| (e.rank, e)).collect();
    // (endpoint, peer) -> delivered by any judged attempt either way.
    let mut pairs: BTreeMap<(u32, u32), bool> = BTreeMap::new();
    for a in run.attempts.iter().filter(|a| a.outcome.judged()) {
        for key in [(a.from, a.to), (a.to, a.from)] {
            *pairs.entry(key).or_default() |= a.outcome.delivered();
        }
    }
    // endpoint -> tenant -> (tried, delivered)
    let mut seen: BTreeMap<u32, BTreeMap<&str, (u32, u32)>> = BTreeMap::new();
    for ((me, peer), delivered) in pairs {
        let Some(t) = ranks.get(&peer).and_then(|p| tenant_of(&p.node)) else {
            continue;
        };
        let c = seen.entry(me).or_default().entry(t).or_default();
        c.0 += 1;
        c.1 += u32::from(delivered);
    }
    let mut out = Vec::new();
    for (me, by_tenant) in seen {
        let Some(e) = ranks.get(&me) else { continue };
        let Some(own) = tenant_of(&e.node) else {
            continue;
        };
        let own_dead = by_tenant.get(own).is_some_and(|c| c.0 > 0 && c.1 == 0);
        let joined: Vec<&str> = by_tenant
            .iter()
            .filter(|(t, c)| **t != own && c.0 > 0 && c.1 == c.0)
            .map(|(t, _)| *t)
            .collect();
        if let [other] = joined.as_slice() {
            if own_dead {
                let on = plan
                    .and_then(|p| leaf(e, p))
                    .map(|l| format!(" (its port on {l})"))
                    .unwrap_or_default();
                out.push(format!(
                    "{}{on} behaves as a member of tenant {other}, not of its own tenant {own}: \
                     it reached every node of {other} it tried and none of {own}; its port's \
                     VLAN, VRF or partition is {other}'s",
                    end(e)
                ));
            }
        }
    }
    out
}

fn picture(tenants: &[String], blocks: &BTreeMap<(String, String), Block>) -> Vec<PictureRow> {
    tenants
        .iter()
        .map(|a| PictureRow {
            tenant: a.clone(),
            cells: tenants
                .iter()
                .map(|b| match blocks.get(&(a.clone(), b.clone())) {
                    None => ("-".to_string(), false),
                    Some(blk) => {
                        let bad = if a == b {
                            blk.reached < blk.pairs
                        } else {
                            blk.delivered > 0
                        };
                        (format!("{}/{}", blk.delivered, blk.pairs), bad)
                    }
                })
                .collect(),
        })
        .collect()
}

/// One end as the report names it: node, NIC and address.
fn end(e: &ReachEndpoint) -> String {
    let mut s = e.node.clone();
    if let Some(i) = &e.interface {
        s = format!("{s} {i}");
    }
    if !e.address.is_empty() {
        s = format!("{s} ({})", e.address);
    }
    s
}

/// The leaf the plan puts an end's NIC on.
fn leaf<'a>(e: &ReachEndpoint, plan: &'a FabricPlan) -> Option<&'a str> {
    let nic = e.interface.as_deref()?;
    plan.nic
        .iter()
        .find(|n| n.node == e.node && n.nic == nic)
        .map(|n| n.switch.as_str())
}

fn named(f: &PairFinding, plan: Option<&FabricPlan>) -> Named {
    let (a, b) = (end(&f.from), end(&f.to));
    let path = match plan.map(|p| (leaf(&f.from, p), leaf(&f.to, p))) {
        Some((Some(la), Some(lb))) if la == lb => format!("{a} -> {la} -> {b}"),
        Some((Some(la), Some(lb))) => format!("{a} -> {la} -> spines -> {lb} -> {b}"),
        _ => format!("{a} -> {b} (no plan places these NICs)"),
    };
    Named {
        from: f.from.node.clone(),
        from_tenant: f.from.tenant.clone().unwrap_or_default(),
        to: f.to.node.clone(),
        to_tenant: f.to.tenant.clone().unwrap_or_default(),
        path,
        attempts: f.attempts.join(", "),
    }
}

const BREACHES: &str = "Isolation between tenants: ordered pairs of ranks (a node and its rail) of two tenants that reached each other on the data fabric (any attempt delivered)";
const REACH: &str = "Reach inside each tenant: ordered pairs of ranks (a node and its rail) of one tenant with an attempt that did not reach its peer";
const NO_SWEEP: &str = "no isolation sweep in the inputs: run bench-lat --pattern isolation under mpirun across the tenants' nodes (docs/tenants.md)";
const NO_TENANTS: &str = "no tenants to judge the isolation sweep against: give aggregate --tenants FILE, or a --plan with [[tenant]] tables";

/// The checks of an `[isolation]` table; each key given is one check. `view` is
/// [`view`] of the same `docs` and `tenants` (the report shows it too: built once).
pub fn checks(
    spec: &IsolationSpec,
    docs: &[Loaded],
    tenants: Option<&Tenants>,
    view: Option<&Isolation>,
) -> Vec<Outcome> {
    let missing = if docs.iter().all(|d| d.doc.reach.is_none()) {
        NO_SWEEP
    } else {
        NO_TENANTS
    };
    let mut out = Vec::new();
    if let Some(max) = spec.breaches_max {
        out.push(match view {
            Some(v) if v.across_pairs > 0 => counted(
                "breaches",
                BREACHES,
                max,
                v.breaches_total,
                v.across_pairs,
                &v.breaches,
            ),
            Some(_) => missing_outcome("breaches", BREACHES, max, "the isolation sweeps tried no pair of two tenants: put nodes of at least two tenants in the sweep"),
            None => missing_outcome("breaches", BREACHES, max, missing),
        });
    }
    // A NIC in the wrong partition explains its pairs: it is named first.
    if let (Some(o), Some(v)) = (out.last_mut(), view) {
        if !v.misplaced.is_empty() && o.status == Status::Fail {
            o.worst_at = format!("{}; pairs: {}", v.misplaced.join("; "), o.worst_at);
        }
    }
    if let Some(max) = spec.unreached_max {
        out.push(match view {
            Some(v) if v.inside_pairs > 0 => counted(
                "reach",
                REACH,
                max,
                v.unreached_total,
                v.inside_pairs,
                &v.unreached,
            ),
            Some(_) => missing_outcome("reach", REACH, max, "the isolation sweeps tried no pair inside a tenant: put at least two nodes of a tenant in the sweep"),
            None => missing_outcome("reach", REACH, max, missing),
        });
    }
    if let Some(max) = spec.partition_findings_max {
        out.push(partitions(max, docs, tenants));
    }
    if let Some(max) = spec.neighbour_impact_max {
        out.push(crate::neighbours::check(max, docs, tenants));
    }
    out
}

const PARTITIONS: &str = "Partitions by tenant: InfiniBand ports whose P_Key table breaks their tenant's promise (its partition missing or with the wrong membership, another tenant's partition, the default partition as a full member), RoCE ports whose host puts them in another VLAN or VRF than their tenant's or in another tenant's";

/// Every InfiniBand port's P_Key table and every RoCE port's segment (the VLAN and VRF its
/// host sets) in the inputs' audits, once per host and port, judged against the tenants.
/// A RoCE port whose host sets neither (the switch's access port and VRFs do) is not
/// judged.
fn partitions(max: u64, docs: &[Loaded], tenants: Option<&Tenants>) -> Outcome {
    let o = judge_partitions(max, docs, tenants);
    Outcome {
        unit: "ports".into(),
        bound: format!("<= {max} ports"),
        ..o
    }
}

fn judge_partitions(max: u64, docs: &[Loaded], tenants: Option<&Tenants>) -> Outcome {
    let Some(t) = tenants else {
        return missing_outcome("partitions", PARTITIONS, max, NO_TENANTS);
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut named = Vec::new();
    for h in docs.iter().flat_map(|d| &d.doc.hosts) {
        let Some(audit) = &h.audit else { continue };
        for p in &audit.ports {
            let f = if p.is_infiniband() {
                let Some(keys) = &p.pkeys.value else { continue };
                t.pkey_findings(&h.hostname, keys)
            } else {
                let Some(seg) = p.segment.get().filter(|s| s.is_set()) else {
                    continue;
                };
                t.segment_findings(&h.hostname, seg)
            };
            if !seen.insert((h.hostname.clone(), p.name())) {
                continue;
            }
            if !f.is_empty() {
                named.push(format!("{} {}: {}", h.hostname, p.name(), f.join("; ")));
            }
        }
    }
    if seen.is_empty() {
        return missing_outcome(
            "partitions",
            PARTITIONS,
            max,
            "no InfiniBand port's P_Key table and no RoCE port whose host sets a VLAN or VRF in the inputs: run fabric-doctor on every node (or any sweep: each rank's audit reads /sys/class/infiniband/DEV/ports/N/pkeys and `ip -d -j link` of each RoCE port's netdev); a RoCE port untagged on the host has its VLAN on the switch, which the host cannot judge",
        );
    }
    let at = if named.is_empty() {
        format!("none of {} port(s)", seen.len())
    } else {
        let mut s: Vec<String> = named.iter().take(5).cloned().collect();
        if named.len() > 5 {
            s.push(format!("and {} more", named.len() - 5));
        }
        s.join("; ")
    };
    Outcome {
        status: if named.len() as u64 <= max {
            Status::Pass
        } else {
            Status::Fail
        },
        measured: Some(named.len() as f64),
        worst_at: at,
        observations: seen.len(),
        ..base("partitions", PARTITIONS, max)
    }
}

fn base(id: &str, description: &str, max: u64) -> Outcome {
    Outcome {
        id: format!("isolation-{id}"),
        description: description.into(),
        metric: format!("isolation_{id}"),
        unit: "pairs".into(),
        selector: "every pair of every isolation sweep".into(),
        bound: format!("<= {max} pairs"),
        bound_value: max as f64,
        ..Default::default()
    }
}

fn missing_outcome(id: &str, description: &str, max: u64, why: &str) -> Outcome {
    Outcome {
        worst_at: why.into(),
        ..base(id, description, max)
    }
}

fn counted(
    id: &str,
    description: &str,
    max: u64,
    found: usize,
    judged: u64,
    named: &[Named],
) -> Outcome {
    let at = if named.is_empty() {
        format!("none of {judged} pair(s)")
    } else {
        let mut s: Vec<String> = named
            .iter()
            .take(5)
            .map(|n| format!("{}: {}", n.path, n.attempts))
            .collect();
        if found > 5 {
            s.push(format!("and {} more", found - 5));
        }
        s.join("; ")
    };
    Outcome {
        status: if found as u64 <= max {
            Status::Pass
        } else {
            Status::Fail
        },
        measured: Some(found as f64),
        worst_at: at,
        observations: judged as usize,
        ..base(id, description, max)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use results::reach::{ReachAttempt, ReachOutcome, ReachRun};

    fn tenants() -> Tenants {
        Tenants::parse(
            "t.toml",
            "version = 1\n[[tenant]]\nname = \"a\"\nnodes = [\"n0\", \"n1\"]\n\
             [[tenant]]\nname = \"b\"\nnodes = [\"n2\"]\n",
        )
        .unwrap()
    }

    fn sweep(attempts: &[(u32, u32, ReachOutcome)]) -> Loaded {
        let mut doc = results::Document::new("bench-lat", "mpi", 3, "2026-12-05T00:00:00Z".into());
        doc.reach = Some(ReachRun {
            timeout_ms: 2000,
            methods: vec!["tcp".into()],
            rail_mode: "aligned".into(),
            endpoints: (0..3)
                .map(|r| ReachEndpoint {
                    rank: r,
                    node: format!("n{r}"),
                    address: format!("198.18.0.{}", 10 + r),
                    ..Default::default()
                })
                .collect(),
            attempts: attempts
                .iter()
                .map(|&(from, to, outcome)| ReachAttempt {
                    from,
                    to,
                    method: "tcp".into(),
                    outcome,
                    ms: 1.0,
                    detail: None,
                })
                .collect(),
            tenants_source: None,
        });
        Loaded::from_text("iso.json", &serde_json::to_string(&doc).unwrap()).unwrap()
    }

    /// The checks as the report runs them: the view built once, then the checks.
    fn judge(spec: &IsolationSpec, docs: &[Loaded], tenants: Option<&Tenants>) -> Vec<Outcome> {
        let v = tenants.and_then(|t| view(docs, t, None));
        checks(spec, docs, tenants, v.as_ref())
    }

    fn spec() -> IsolationSpec {
        IsolationSpec {
            breaches_max: Some(0),
            unreached_max: Some(0),
            partition_findings_max: None,
            neighbour_impact_max: None,
        }
    }

    #[test]
    fn nothing_to_judge_is_missing_and_says_why() {
        let t = tenants();
        let none: Vec<Loaded> = vec![];
        let o = judge(&spec(), &none, Some(&t));
        assert!(o.iter().all(|o| o.status == Status::Missing));
        assert!(o[0].worst_at.contains("bench-lat --pattern isolation"));
        let docs = vec![sweep(&[(0, 1, ReachOutcome::Reached)])];
        let o = judge(&spec(), &docs, None);
        assert!(o[0].worst_at.contains("--tenants"), "{}", o[0].worst_at);
        // Pairs inside a tenant only: the breach check judged nothing.
        let o = judge(&spec(), &docs, Some(&t));
        assert_eq!(o[0].status, Status::Missing, "{:?}", o[0]);
        assert_eq!(o[1].status, Status::Pass);
    }

    #[test]
    fn a_breach_fails_and_a_refused_connection_is_delivered() {
        use ReachOutcome::*;
        let t = tenants();
        let docs = vec![sweep(&[
            (0, 1, Reached),
            (1, 0, Reached),
            (0, 2, TimedOut),
            (2, 0, Unreachable),
            (1, 2, Refused),
            (2, 1, TimedOut),
        ])];
        let o = judge(&spec(), &docs, Some(&t));
        assert_eq!(o[0].status, Status::Fail);
        assert_eq!(o[0].measured, Some(1.0));
        assert!(
            o[0].worst_at.contains("n1 (198.18.0.11) -> n2"),
            "{}",
            o[0].worst_at
        );
        assert_eq!(o[1].status, Status::Pass);
        let v = view(&docs, &t, None).unwrap();
        assert_eq!(v.picture[0].cells[1], ("1/2".to_string(), true));
        assert_eq!(v.picture[0].cells[0], ("2/2".to_string(), false));
    }

    #[test]
    fn a_port_in_another_tenants_partition_fails_the_partition_check() {
        use results::audit::{Fact, NodeAudit, PortAudit};
        let t = Tenants::parse(
            "t.toml",
            "version = 1\n[[tenant]]\nname = \"a\"\nnodes = [\"n0\"]\npkey = \"0x0001\"\n\
             [[tenant]]\nname = \"b\"\nnodes = [\"n1\"]\npkey = \"0x0002\"\n",
        )
        .unwrap();
        let host = |name: &str, keys: Option<Vec<u16>>| results::HostInfo {
            hostname: name.into(),
            audit: Some(NodeAudit {
                ports: vec![PortAudit {
                    interface: "ib0".into(),
                    rdma_device: Some("mlx5_0".into()),
                    rdma_port: Some(1),
                    link_layer: "InfiniBand".into(),
                    pkeys: match keys {
                        Some(k) => Fact::known("/sys/class/infiniband/mlx5_0/ports/1/pkeys", k),
                        None => Fact::unknown("pkeys", "no such directory"),
                    },
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let doc = |hosts: Vec<results::HostInfo>| {
            let mut d =
                results::Document::new("fabric-doctor", "mpi", 2, "2026-12-05T00:00:00Z".into());
            d.hosts = hosts;
            Loaded::from_text("audit.json", &serde_json::to_string(&d).unwrap()).unwrap()
        };
        let spec = IsolationSpec {
            partition_findings_max: Some(0),
            ..Default::default()
        };
        let unknown = vec![doc(vec![host("n0", None)])];
        assert_eq!(judge(&spec, &unknown, Some(&t))[0].status, Status::Missing);
        let good = vec![doc(vec![
            host("n0", Some(vec![0x7fff, 0x8001])),
            host("n1", Some(vec![0x7fff, 0x8002])),
        ])];
        let o = &judge(&spec, &good, Some(&t))[0];
        assert_eq!((o.status, o.observations), (Status::Pass, 2), "{o:?}");
        let wrong = vec![doc(vec![
            host("n0", Some(vec![0x7fff, 0x8001])),
            host("n1", Some(vec![0x7fff, 0x8001])),
        ])];
        let o = &judge(&spec, &wrong, Some(&t))[0];
        assert_eq!(o.status, Status::Fail);
        assert!(
            o.worst_at
                .starts_with("n1 ib0 (mlx5_0/1): does not hold its tenant b's partition"),
            "{}",
            o.worst_at
        );
        assert_eq!(o.unit, "ports");
    }

    /// RoCE: a port whose host puts it in the other tenant's VLAN fails the partition
    /// check, named with its netdev; an untagged port (its VLAN is the switch's) is not
    /// judged, so a fabric of untagged ports leaves the check MISSING, never PASS.
    #[test]
    fn a_roce_port_in_another_tenants_vlan_fails_and_untagged_ports_are_not_judged() {
        use results::audit::{Fact, NodeAudit, PortAudit, Segment};
        let t = Tenants::parse(
            "t.toml",
            "version = 1\n[[tenant]]\nname = \"a\"\nnodes = [\"n0\"]\nvlan = 101\n\
             [[tenant]]\nname = \"b\"\nnodes = [\"n1\"]\nvlan = 102\n",
        )
        .unwrap();
        let host = |name: &str, vlan: Option<u16>| results::HostInfo {
            hostname: name.into(),
            audit: Some(NodeAudit {
                ports: vec![PortAudit {
                    interface: "eth2".into(),
                    via: vlan.map(|v| format!("eth2.{v}")),
                    rdma_device: Some("mlx5_0".into()),
                    rdma_port: Some(1),
                    link_layer: "Ethernet".into(),
                    segment: Fact::known(
                        "ip -d -j link show dev eth2",
                        Segment {
                            netdev: vlan.map_or("eth2".into(), |v| format!("eth2.{v}")),
                            vlan,
                            ..Default::default()
                        },
                    ),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let doc = |hosts: Vec<results::HostInfo>| {
            let mut d =
                results::Document::new("fabric-doctor", "mpi", 2, "2026-12-07T00:00:00Z".into());
            d.hosts = hosts;
            Loaded::from_text("audit.json", &serde_json::to_string(&d).unwrap()).unwrap()
        };
        let spec = IsolationSpec {
            partition_findings_max: Some(0),
            ..Default::default()
        };
        let untagged = vec![doc(vec![host("n0", None), host("n1", None)])];
        let o = &judge(&spec, &untagged, Some(&t))[0];
        assert_eq!(o.status, Status::Missing, "{o:?}");
        assert!(o.worst_at.contains("untagged on the host"), "{o:?}");
        let good = vec![doc(vec![host("n0", Some(101)), host("n1", Some(102))])];
        let o = &judge(&spec, &good, Some(&t))[0];
        assert_eq!((o.status, o.observations), (Status::Pass, 2), "{o:?}");
        let leak = vec![doc(vec![host("n0", Some(101)), host("n1", Some(101))])];
        let o = &judge(&spec, &leak, Some(&t))[0];
        assert_eq!(o.status, Status::Fail, "{o:?}");
        assert!(
            o.worst_at.starts_with(
                "n1 eth2 via eth2.101 (mlx5_0/1): eth2.101 is in VLAN 101, its tenant b's is VLAN 102"
            ),
            "{}",
            o.worst_at
        );
    }
}
