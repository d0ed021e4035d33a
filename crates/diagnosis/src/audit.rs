//! The lossless-configuration audits of all nodes compared (`HostInfo.audit`, written by
//! every benchmark rank and by `fabric-doctor --json`): which node or port differs from
//! the rest (PFC set, trust, DSCP map, CNP DSCP, DCQCN parameters, FEC mode, MTU,
//! firmware), and the absolute checks where a right answer exists (PFC on exactly the
//! profile's lossless priorities, the suite's DSCP on one of them, ECN on there too,
//! every lane's receive power above its module's low warning). The profile's
//! `[lossless]` table asks for them; each is a check that names every port that differs.

use std::collections::{BTreeMap, BTreeSet};

use results::audit::{NodeAudit, PortAudit};

use verdict::input::Loaded;
use verdict::judge::{port_outcome, Outcome, PortCheck};
use verdict::profile::LosslessSpec;

/// The facets compared across nodes (one list, the profile's: an unknown name is refused
/// when the profile is read).
pub use verdict::profile::LOSSLESS_FACETS as FACETS;

/// The audited ports of every node: the latest audit of each host name (ranks on one
/// node audit the same node).
pub fn ports(docs: &[Loaded]) -> Vec<(String, PortAudit, NodeAudit)> {
    let mut by_host: BTreeMap<String, NodeAudit> = BTreeMap::new();
    for d in docs {
        for h in &d.doc.hosts {
            if let Some(a) = &h.audit {
                let name = if a.hostname.is_empty() {
                    h.hostname.clone()
                } else {
                    a.hostname.clone()
                };
                by_host.insert(name, a.clone());
            }
        }
    }
    let mut out = Vec::new();
    for (host, a) in by_host {
        for p in &a.ports {
            out.push((host.clone(), p.clone(), a.clone()));
        }
    }
    out
}

/// One facet of a port as text, for comparison (`None`: unknown there).
fn facet(p: &PortAudit, f: &str) -> Option<String> {
    match f {
        "pfc" => p.pfc.get().map(|v| format!("PFC on {:?}", v.priorities())),
        "trust" => p.trust.get().map(|t| format!("trust {t}")),
        "dscp_map" => p.dscp_prio.get().map(|m| {
            let nz: Vec<String> = m
                .iter()
                .filter(|(_, &v)| v != 0)
                .map(|(d, v)| format!("{d}:{v}"))
                .collect();
            format!(
                "DSCP->prio {}",
                if nz.is_empty() {
                    "all 0".into()
                } else {
                    nz.join(" ")
                }
            )
        }),
        "cnp_dscp" => p
            .cnp
            .get()
            .and_then(|c| c.dscp)
            .map(|d| format!("CNP DSCP {d}")),
        "dcqcn" => p.dcqcn.get().filter(|m| !m.is_empty()).map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        }),
        "fec" => p.fec.get().map(|f| format!("FEC {}", f.active.join(","))),
        "mtu" => p.mtu.map(|m| format!("MTU {m}")),
        "firmware" => p.firmware.clone().map(|f| format!("firmware {f}")),
        _ => None,
    }
}

/// The NCCL settings of every node with a port that carries RDMA, once a node: every
/// `NCCL_*` variable the audit read (environment and nccl.conf) as `K=V`, `none` when
/// there is none. A node whose NCCL_IB_HCA, GID index or traffic class differs from the
/// others runs its jobs' traffic on other NICs, GIDs or priorities than theirs.
fn nccl_values(eth: &[&(String, PortAudit, NodeAudit)]) -> Vec<(String, String)> {
    let mut by_node: BTreeMap<&str, String> = BTreeMap::new();
    for (h, _, a) in eth {
        by_node
            .entry(h.as_str())
            .or_insert_with(|| a.host.nccl_line());
    }
    by_node
        .into_iter()
        .map(|(h, v)| (h.to_string(), v))
        .collect()
}

/// A port's value and the majority's, cut to what differs when both are `key=value`
/// lists (DCQCN's nine parameters side by side hid the one that differs): the keys whose
/// values differ, and keys one side lacks (`key absent`). Other values are shown whole.
fn differing(v: &str, most: &str) -> (String, String) {
    let pairs = |s: &str| -> Option<BTreeMap<String, String>> {
        s.split_whitespace()
            .map(|w| {
                w.split_once('=')
                    .map(|(k, x)| (k.to_string(), x.to_string()))
            })
            .collect()
    };
    let (Some(a), Some(b)) = (pairs(v), pairs(most)) else {
        return (v.to_string(), most.to_string());
    };
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let side = |m: &BTreeMap<String, String>, k: &str| match m.get(k) {
        Some(x) => format!("{k}={x}"),
        None => format!("{k} absent"),
    };
    let diff: Vec<&String> = keys
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .collect();
    if diff.is_empty() {
        return (v.to_string(), most.to_string());
    }
    let show = |m: &BTreeMap<String, String>| {
        diff.iter()
            .map(|k| side(m, k))
            .collect::<Vec<_>>()
            .join(" ")
    };
    (show(&a), show(&b))
}

fn outcome(
    id: &str,
    description: String,
    bound: String,
    judged: usize,
    misses: Vec<String>,
) -> Outcome {
    let check = PortCheck {
        id: format!("lossless-{id}"),
        description,
        metric: "audit",
        selector: "every audited Ethernet port of every node",
        bound,
        none_judged: "no audit says this: run fabric-doctor --json on every node, or benchmarks with the audit on (FABCHECK_AUDIT not 0)",
    };
    port_outcome(check, judged, misses)
}

/// The checks of a `[lossless]` table, in a fixed order.
pub fn checks(spec: &LosslessSpec, docs: &[Loaded]) -> Vec<Outcome> {
    // Only the ports that carry RDMA are judged (a management port beside them is not
    // the fabric's; results::audit::findings says the same per node).
    let all: Vec<(String, PortAudit, NodeAudit)> = ports(docs)
        .into_iter()
        .filter(|(_, p, _)| p.carries_rdma())
        .collect();
    let eth: Vec<&(String, PortAudit, NodeAudit)> =
        all.iter().filter(|(_, p, _)| !p.is_infiniband()).collect();
    let mut out = same_facets(spec, &eth);
    out.extend(priority_checks(spec, &eth));
    if spec.rx_power_above_warning {
        out.push(rx_power_check(&all));
    }
    if let Some(db) = spec.rx_power_outlier_db {
        out.push(rx_power_outlier_check(db, &all));
    }
    out
}

/// `host:interface`, as every check names a port.
fn port_name(h: &str, p: &PortAudit) -> String {
    format!("{h}:{}", p.interface)
}

/// `lossless-same-FACET`: every Ethernet port shows the majority's value of each facet.
fn same_facets(spec: &LosslessSpec, eth: &[&(String, PortAudit, NodeAudit)]) -> Vec<Outcome> {
    let mut out = Vec::new();
    let same: Vec<String> = spec
        .same
        .clone()
        .unwrap_or_else(|| FACETS.iter().map(|s| s.to_string()).collect());
    for f in &same {
        let values: Vec<(String, String)> = if f == "nccl" {
            nccl_values(eth)
        } else {
            eth.iter()
                .filter_map(|(h, p, _)| facet(p, f).map(|v| (port_name(h, p), v)))
                .collect()
        };
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, v) in &values {
            *counts.entry(v.as_str()).or_default() += 1;
        }
        let most = counts
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(v, _)| v.to_string());
        let misses: Vec<String> = values
            .iter()
            .filter(|(_, v)| Some(v) != most.as_ref())
            .map(|(n, v)| {
                let m = most.as_deref().unwrap_or("?");
                let (v, m) = differing(v, m);
                format!("{n}: {v} (most: {m})")
            })
            .collect();
        // One port agrees with itself: "the same on every port" is judged only when at
        // least two ports say it.
        let compared = if values.len() < 2 { 0 } else { values.len() };
        let mut o = outcome(
            &format!("same-{}", f.replace('_', "-")),
            format!("Every node's ports show the same {f}"),
            "same on every port".into(),
            compared,
            misses,
        );
        if let [(only, _)] = values.as_slice() {
            o.worst_at = format!(
                "only {only} says its {f}: a comparison needs at least two ports (run fabric-doctor --json on every node)"
            );
        }
        out.push(o);
    }
    out
}

/// `lossless-pfc-priorities`, `lossless-suite-dscp`, `lossless-ecn`: PFC on exactly the
/// lossless priorities, the suite's DSCP on one of them, ECN on each.
fn priority_checks(spec: &LosslessSpec, eth: &[&(String, PortAudit, NodeAudit)]) -> Vec<Outcome> {
    let Some(want) = spec.lossless_priorities.as_deref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut judged = 0;
    let mut misses = Vec::new();
    let mut dscp_judged = 0;
    let mut dscp_misses = Vec::new();
    let mut ecn_judged = 0;
    let mut ecn_misses = Vec::new();
    for (h, p, a) in eth {
        if let Some(pfc) = p.pfc.get() {
            judged += 1;
            let on = pfc.priorities();
            if on != want {
                misses.push(format!("{}: PFC on {on:?}", port_name(h, p)));
            }
        }
        // The NIC's global class where its driver sets one: it overrides the suite's.
        let (dscp, _) = p.suite_dscp(&a.suite);
        if let Some(pr) = results::audit::priority_of(p, dscp) {
            dscp_judged += 1;
            if !want.contains(&pr) {
                dscp_misses.push(format!(
                    "{}: {} -> priority {pr}",
                    port_name(h, p),
                    p.suite_dscp_said(&a.suite)
                ));
            }
        }
        if let Some(e) = p.ecn.get() {
            ecn_judged += 1;
            ecn_misses.extend(
                want.iter()
                    .filter_map(|&x| ecn_off(e, x))
                    .map(|why| format!("{}: {why}", port_name(h, p))),
            );
        }
    }
    out.push(outcome(
        "pfc-priorities",
        format!("PFC on exactly priorities {want:?} on every port"),
        format!("= {want:?}"),
        judged,
        misses,
    ));
    if spec.suite_dscp_lossless {
        out.push(outcome(
            "suite-dscp",
            "The suite's DSCP lands on a lossless priority on every port".into(),
            format!("priority in {want:?}"),
            dscp_judged,
            dscp_misses,
        ));
    }
    if spec.ecn_on_lossless {
        out.push(outcome(
            "ecn",
            "ECN (notification and reaction point) on every lossless priority".into(),
            format!("on {want:?}"),
            ecn_judged,
            ecn_misses,
        ));
    }
    out
}

/// What of ECN is off on priority `x`, saying which point: the notification point (the
/// receiver sends no CNP), the reaction point (the sender ignores the CNPs it gets), or
/// both. `None` when both are on.
fn ecn_off(e: &results::audit::Ecn, x: u8) -> Option<String> {
    let on = |v: &[bool]| v.get(x as usize) == Some(&true);
    match (on(&e.np_enabled), on(&e.rp_enabled)) {
        (true, true) => None,
        (false, false) => Some(format!("ECN off on priority {x} (both points)")),
        (false, true) => Some(format!(
            "ECN off on priority {x} (notification point only: this port sends no CNP, so its senders are never slowed)"
        )),
        (true, false) => Some(format!(
            "ECN off on priority {x} (reaction point only: CNPs received are ignored, so this port never slows down)"
        )),
    }
}

/// `lossless-rx-power`: every lane at or above its module's low warning.
fn rx_power_check(all: &[(String, PortAudit, NodeAudit)]) -> Outcome {
    let mut judged = 0;
    let mut misses = Vec::new();
    for (h, p, _) in all {
        let Some(m) = p.module.get() else { continue };
        let Some(w) = m.rx_power_thresholds.as_ref().and_then(|t| t.low_warning) else {
            continue;
        };
        judged += 1;
        for (i, rx) in m.rx_power_dbm.iter().enumerate() {
            if *rx < w {
                misses.push(format!(
                    "{} lane {}: {rx:.2} dBm < low warning {w:.2} dBm",
                    port_name(h, p),
                    i + 1
                ));
            }
        }
    }
    outcome(
        "rx-power",
        "Every lane's receive power at or above its module's low warning".into(),
        ">= module low warning".into(),
        judged,
        misses,
    )
}

/// `lossless-rx-power-outlier`: no lane more than `db` dB under the cluster's median.
fn rx_power_outlier_check(db: f64, all: &[(String, PortAudit, NodeAudit)]) -> Outcome {
    let lanes: Vec<(String, usize, f64)> = all
        .iter()
        .filter_map(|(h, p, _)| p.module.get().map(|m| (port_name(h, p), m)))
        .flat_map(|(n, m)| {
            m.rx_power_dbm
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_finite())
                .map(move |(i, v)| (n.clone(), i + 1, *v))
        })
        .collect();
    let judged = lanes
        .iter()
        .map(|l| &l.0)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    // A true median (the mean of the middle two for an even count): the upper middle
    // made the same weak lane pass or fail by which channel it sat on.
    let mut values: Vec<f64> = lanes.iter().map(|l| l.2).collect();
    let median = verdict::metric::median(&mut values).unwrap_or_default();
    let misses = lanes
        .iter()
        .filter(|(_, _, v)| *v < median - db)
        .map(|(n, i, v)| {
            format!(
                "{n} lane {i}: {v:.2} dBm, {:.2} dB under the cluster's median {median:.2} dBm",
                median - v
            )
        })
        .collect();
    outcome(
        "rx-power-outlier",
        format!("No lane's receive power more than {db} dB under the median of every audited lane"),
        format!(">= median - {db} dB"),
        judged,
        misses,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::audit::{fixtures, Fact};
    use verdict::judge::Status;

    /// A node of the example port with its PFC priority and CNP DSCP, and FEC that no
    /// audit could read.
    fn node(name: &str, pfc_prio: u8, cnp_dscp: u8) -> results::HostInfo {
        let mut p = fixtures::roce_port(pfc_prio);
        p.cnp.value.as_mut().unwrap().dscp = Some(cnp_dscp);
        p.fec = Fact::unknown("ethtool --show-fec eth2", "Operation not supported");
        results::HostInfo {
            hostname: name.into(),
            audit: Some(fixtures::node(name, vec![p])),
            ..Default::default()
        }
    }

    #[test]
    fn the_two_nodes_that_differ_are_named_with_what_differs() {
        let mut doc =
            results::Document::new("fabric-doctor", "mpi", 6, "2026-01-01T00:00:00Z".into());
        for i in 0..6 {
            let pfc = if i == 2 { 4 } else { 3 };
            let cnp = if i == 4 { 46 } else { 48 };
            doc.hosts.push(node(&format!("node{i:02}"), pfc, cnp));
        }
        let l = Loaded::from_text("a.json", &serde_json::to_string(&doc).unwrap()).unwrap();
        let spec = LosslessSpec {
            lossless_priorities: Some(vec![3]),
            suite_dscp_lossless: true,
            ecn_on_lossless: true,
            ..Default::default()
        };
        let out = checks(&spec, &[l]);
        let by = |id: &str| out.iter().find(|o| o.id == id).unwrap();
        assert_eq!(by("lossless-same-pfc").status, Status::Fail);
        assert_eq!(
            by("lossless-same-pfc").worst_at,
            "node02:eth2: PFC on [4] (most: PFC on [3])"
        );
        assert_eq!(
            by("lossless-same-cnp-dscp").worst_at,
            "node04:eth2: CNP DSCP 46 (most: CNP DSCP 48)"
        );
        assert_eq!(
            by("lossless-pfc-priorities").worst_at,
            "node02:eth2: PFC on [4]"
        );
        for id in [
            "lossless-same-trust",
            "lossless-same-dscp-map",
            "lossless-same-mtu",
            "lossless-suite-dscp",
            "lossless-ecn",
        ] {
            assert_eq!(by(id).status, Status::Pass, "{id}");
        }
        // Facets no audit knows are MISSING, not passed.
        assert_eq!(by("lossless-same-fec").status, Status::Missing);
    }

    #[test]
    fn the_suite_dscp_is_the_class_the_nic_really_sets() {
        // Every benchmark's embedded audit asks traffic class 0; five nodes' NICs set the
        // global class 106 (MLNX_OFED tc/1/traffic_class), which the kernel puts on every
        // QP: DSCP 26, priority 3, lossless. One node's NIC sets none: its traffic rides
        // DSCP 0, priority 0, and it alone is named (before, all six were).
        let mut doc = results::Document::new("bench-bw", "mpi", 6, "2026-01-01T00:00:00Z".into());
        for i in 0..6 {
            let mut h = node(&format!("node{i:02}"), 3, 48);
            let a = h.audit.as_mut().unwrap();
            a.suite.traffic_class = 0;
            if i != 5 {
                a.ports[0].nic_tclass = Fact::known(
                    "/sys/class/infiniband/mlx5_0/tc/1/traffic_class",
                    results::audit::NicTrafficClass {
                        global: Some(106),
                        ..Default::default()
                    },
                );
            }
            doc.hosts.push(h);
        }
        let l = Loaded::from_text("a.json", &serde_json::to_string(&doc).unwrap()).unwrap();
        let spec = LosslessSpec {
            lossless_priorities: Some(vec![3]),
            suite_dscp_lossless: true,
            ..Default::default()
        };
        let out = checks(&spec, &[l]);
        let dscp = out.iter().find(|o| o.id == "lossless-suite-dscp").unwrap();
        assert_eq!(dscp.status, Status::Fail);
        assert_eq!(
            dscp.worst_at,
            "node05:eth2: DSCP 0, traffic class 0 -> priority 0"
        );
        assert_eq!(dscp.measured, Some(1.0), "one port named of six judged");
        assert_eq!(dscp.observations, 6);
    }

    #[test]
    fn the_outlier_median_is_a_true_median() {
        // Eight 4-lane modules: 15 lanes at -1.0 dBm, 16 at 0.0 and one at -3.4, so the
        // median of the 32 is -0.5 (the mean of the middle two; the upper middle read 0.0
        // and failed the lane at 3.4 dB under). 2.9 dB under the true one: within 3 dB.
        let mut doc =
            results::Document::new("fabric-doctor", "mpi", 8, "2026-01-01T00:00:00Z".into());
        for i in 0..8 {
            let mut h = node(&format!("node{i:02}"), 3, 48);
            let lanes = match i {
                0..=2 => vec![-1.0, -1.0, -1.0, -1.0],
                3 => vec![-1.0, -1.0, -1.0, 0.0],
                7 => vec![0.0, 0.0, -3.4, 0.0],
                _ => vec![0.0; 4],
            };
            let port = &mut h.audit.as_mut().unwrap().ports[0];
            port.module = Fact::known(
                "ethtool -m eth2",
                results::audit::Module {
                    rx_power_dbm: lanes,
                    ..Default::default()
                },
            );
            doc.hosts.push(h);
        }
        let l = Loaded::from_text("a.json", &serde_json::to_string(&doc).unwrap()).unwrap();
        let spec = LosslessSpec {
            rx_power_outlier_db: Some(3.0),
            ..Default::default()
        };
        let out = checks(&spec, &[l]);
        let o = out
            .iter()
            .find(|o| o.id == "lossless-rx-power-outlier")
            .unwrap();
        assert_eq!(o.status, Status::Pass, "{}", o.worst_at);
    }

    #[test]
    fn a_dcqcn_difference_names_the_parameter_that_differs() {
        let most = "min_time_between_cnps=4 rpg_ai_rate=5 rpg_time_reset=300";
        let (v, m) = differing(
            "min_time_between_cnps=4 rpg_ai_rate=5 rpg_time_reset=600",
            most,
        );
        assert_eq!(
            (v.as_str(), m.as_str()),
            ("rpg_time_reset=600", "rpg_time_reset=300")
        );
        let (v, m) = differing("min_time_between_cnps=4 rpg_ai_rate=5", most);
        assert_eq!(
            (v.as_str(), m.as_str()),
            ("rpg_time_reset absent", "rpg_time_reset=300")
        );
        // Not key=value lists: whole.
        assert_eq!(
            differing("MTU 4200", "MTU 9000"),
            ("MTU 4200".into(), "MTU 9000".into())
        );
    }

    /// NCCL settings are compared across nodes, once a node, naming only the variable
    /// that differs.
    #[test]
    fn a_node_with_other_nccl_settings_is_named_with_the_variable() {
        let mut doc =
            results::Document::new("fabric-doctor", "mpi", 4, "2026-01-01T00:00:00Z".into());
        for i in 0..4 {
            let mut h = node(&format!("node{i:02}"), 3, 48);
            let a = h.audit.as_mut().unwrap();
            a.ports.push(a.ports[0].clone());
            a.ports[1].interface = "eth3".into();
            let set = |v: &str| results::audit::NcclSetting {
                value: v.into(),
                source: "/etc/nccl.conf".into(),
            };
            a.host.nccl.insert("NCCL_IB_GID_INDEX".into(), set("3"));
            let hca = if i == 1 { "mlx5_1" } else { "=mlx5_0,mlx5_1" };
            a.host.nccl.insert("NCCL_IB_HCA".into(), set(hca));
            doc.hosts.push(h);
        }
        let l = Loaded::from_text("a.json", &serde_json::to_string(&doc).unwrap()).unwrap();
        let spec = LosslessSpec {
            same: Some(vec!["nccl".into()]),
            ..Default::default()
        };
        let out = checks(&spec, &[l]);
        let o = out.iter().find(|o| o.id == "lossless-same-nccl").unwrap();
        assert_eq!(o.status, Status::Fail);
        assert_eq!(
            o.worst_at,
            "node01: NCCL_IB_HCA=mlx5_1 (most: NCCL_IB_HCA==mlx5_0,mlx5_1)"
        );
        let text = format!("{o:?}");
        assert_eq!(
            text.matches("node01").count(),
            1,
            "once a node, not a port: {text}"
        );
    }

    /// Which point of ECN is off is said: the reaction point alone, the notification
    /// point alone, or both.
    #[test]
    fn lossless_ecn_says_which_point_is_off() {
        let mut doc =
            results::Document::new("fabric-doctor", "mpi", 3, "2026-01-01T00:00:00Z".into());
        for (i, (np, rp)) in [(true, false), (false, true), (false, false)]
            .iter()
            .enumerate()
        {
            let mut h = node(&format!("node{i:02}"), 3, 48);
            let a = h.audit.as_mut().unwrap();
            let e = a.ports[0].ecn.value.as_mut().unwrap();
            e.np_enabled[3] = *np;
            e.rp_enabled[3] = *rp;
            doc.hosts.push(h);
        }
        let l = Loaded::from_text("a.json", &serde_json::to_string(&doc).unwrap()).unwrap();
        let spec = LosslessSpec {
            lossless_priorities: Some(vec![3]),
            ecn_on_lossless: true,
            ..Default::default()
        };
        let out = checks(&spec, &[l]);
        let ecn = out.iter().find(|o| o.id == "lossless-ecn").unwrap();
        assert_eq!(ecn.status, Status::Fail);
        let text = format!("{ecn:?}");
        assert!(
            text.contains("node00:eth2: ECN off on priority 3 (reaction point only"),
            "{text}"
        );
        assert!(
            text.contains("node01:eth2: ECN off on priority 3 (notification point only"),
            "{text}"
        );
        assert!(
            text.contains("node02:eth2: ECN off on priority 3 (both points)"),
            "{text}"
        );
    }

    #[test]
    fn one_port_is_no_comparison() {
        let mut doc =
            results::Document::new("fabric-doctor", "mpi", 1, "2026-01-01T00:00:00Z".into());
        doc.hosts.push(node("node00", 3, 48));
        let l = Loaded::from_text("a.json", &serde_json::to_string(&doc).unwrap()).unwrap();
        let out = checks(&LosslessSpec::default(), &[l]);
        let mtu = out.iter().find(|o| o.id == "lossless-same-mtu").unwrap();
        assert_eq!(mtu.status, Status::Missing, "{}", mtu.worst_at);
        assert!(
            mtu.worst_at.contains("only node00:eth2"),
            "{}",
            mtu.worst_at
        );
        assert_eq!(mtu.measured, None);
    }
}
