//! The lossless-configuration audits end to end: the real `fabric-doctor` replays the
//! scenario captures (ConnectX-class ports in dcb -j / ethtool --json / ethtool -m / mlx5
//! sysfs formats of iproute2 6.1 and ethtool 6.1, fabric-doctor/tests/captures/make.sh),
//! one node each, and the real `aggregate report` judges them with roce-100g's
//! `[lossless]` table. Each scenario's fault must be named by the check made for it and
//! only there; the healthy nodes alone pass every check that has something to judge.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::path::{Path, PathBuf};
use std::time::Duration;

use integration::{bin, run, text};

const LIMIT: Duration = Duration::from_secs(120);

fn captures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fabric-doctor/tests/captures")
}

/// `fabric-doctor --from` each scenario into `dir`; returns the documents written.
fn audit(dir: &Path, scenarios: &[&str]) -> Vec<PathBuf> {
    scenarios
        .iter()
        .map(|s| {
            let json = dir.join(format!("{s}.json"));
            let out = run(
                std::process::Command::new(bin("fabric-doctor"))
                    .arg("--from")
                    .arg(captures().join(s))
                    // The suite's traffic as a RoCE site sends it: DSCP 26 with ECT(0).
                    .args(["--tclass", "106", "--lossless-priorities", "3"])
                    .arg("--json")
                    .arg(&json),
                LIMIT,
            );
            // A finding is exit 1; anything else is an error.
            assert!(
                matches!(out.status.code(), Some(0 | 1)),
                "{s}: {:?}",
                text(&out)
            );
            json
        })
        .collect()
}

/// Runs an `aggregate report` command (a verdict: exit 0 or 1) and reads its summary.
fn report_summary(cmd: &mut std::process::Command, out_dir: &Path) -> serde_json::Value {
    let out = run(cmd, LIMIT);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{:?}", text(&out));
    serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap()).unwrap()
}

/// The `lossless-*` checks of a roce-100g report over `docs`: id -> (status, worst_at).
fn lossless(dir: &Path, name: &str, docs: &[PathBuf]) -> Vec<(String, String, String)> {
    let out_dir = dir.join(name);
    let summary = report_summary(
        std::process::Command::new(bin("aggregate"))
            .args(["report", "--profile", "roce-100g", "--out"])
            .arg(&out_dir)
            .args(docs),
        &out_dir,
    );
    summary["verdict"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"].as_str().unwrap().starts_with("lossless-"))
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["worst_at"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn each_scenario_is_named_by_its_own_check_and_healthy_nodes_pass() {
    let dir = tempfile::tempdir().unwrap();
    // node01 healthy; node02 PFC off; node03 PFC on priority 4; node04 trust pcp with no
    // DSCP map; node05 ECN off on priority 3; node06 CNP DSCP 46; node07 FEC off;
    // node08 one lane's receive power at -10.5 dBm, 10 dB under the others (its module's
    // low warning is -10.9).
    let scenarios = [
        "healthy",
        "pfc-off",
        "pfc-wrong-priority",
        "trust-pcp",
        "ecn-off",
        "cnp-dscp",
        "fec-off",
        "rx-power-low",
    ];
    let docs = audit(dir.path(), &scenarios);
    let all = lossless(dir.path(), "all", &docs);
    let check = |id: &str| {
        all.iter()
            .find(|c| c.0 == id)
            .unwrap_or_else(|| panic!("no {id} in {all:?}"))
    };
    // Which nodes each check must name; it must name no other node.
    let expect: &[(&str, &[&str])] = &[
        ("lossless-pfc-priorities", &["node02", "node03"]),
        ("lossless-same-pfc", &["node02", "node03"]),
        ("lossless-same-trust", &["node04"]),
        ("lossless-same-dscp-map", &["node04"]),
        ("lossless-suite-dscp", &["node04"]),
        // The CNP DSCP is one of the DCQCN parameters mlx5 exposes (np_cnp_dscp) too.
        ("lossless-same-dcqcn", &["node06"]),
        ("lossless-ecn", &["node05"]),
        ("lossless-same-cnp-dscp", &["node06"]),
        ("lossless-same-fec", &["node07"]),
        ("lossless-rx-power-outlier", &["node08"]),
    ];
    for (id, named) in expect {
        let (_, status, at) = check(id);
        assert_eq!(status, "FAIL", "{id}: {at}");
        for n in 1..=8 {
            let node = format!("node{n:02}");
            assert_eq!(
                at.contains(&format!("{node}:")),
                named.contains(&node.as_str()),
                "{id} on {node}: {at}"
            );
        }
    }

    // node08's weak lane is 0.4 dB above its module's own low warning: not under it. MTU
    // and firmware are the same everywhere.
    for id in [
        "lossless-rx-power",
        "lossless-same-mtu",
        "lossless-same-firmware",
    ] {
        assert_eq!(check(id).1, "PASS", "{id}: {all:?}");
    }

    // The healthy node alone: every lossless check that has a port to judge passes, and
    // "the same on every port" has nothing to compare one port with: MISSING, not PASS.
    let healthy = lossless(dir.path(), "healthy", &docs[..1]);
    assert!(!healthy.is_empty());
    for (id, status, at) in &healthy {
        if id.starts_with("lossless-same-") {
            assert!(
                status == "MISSING" && at.contains("a comparison needs at least two ports"),
                "{id} on the healthy node alone: {status} {at}"
            );
        } else {
            assert!(status == "PASS", "{id} on the healthy node: {status} {at}");
        }
    }
}

/// The RoCE side of the partition check (issue 32 item 3): `fabric-doctor --from` a node
/// whose RoCE sits on eth2.101 in vrf-acme (the real `ip -d -j link` of a VLAN in a VRF),
/// judged by `aggregate report --tenants` with `[isolation] partition_findings_max = 0`:
/// in tenant acme (VLAN 101, VRF vrf-acme) it passes; given to globex (VLAN 102) it fails,
/// the port and both differences named; an untagged node alone leaves the check MISSING.
#[test]
fn a_roce_port_in_another_tenants_vlan_and_vrf_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let docs = audit(dir, &["tenant-vlan", "healthy"]);
    std::fs::write(
        dir.join("p.toml"),
        "name = \"partitions\"\n[isolation]\npartition_findings_max = 0\n",
    )
    .unwrap();
    let judged = |tenants: &str, docs: &[PathBuf]| {
        let t = dir.join("tenants.toml");
        std::fs::write(&t, tenants).unwrap();
        let out_dir = dir.join("r");
        let _ = std::fs::remove_dir_all(&out_dir);
        let summary = report_summary(
            std::process::Command::new(bin("aggregate"))
                .arg("report")
                .arg("--profile")
                .arg(dir.join("p.toml"))
                .arg("--tenants")
                .arg(&t)
                .arg("--out")
                .arg(&out_dir)
                .args(docs),
            &out_dir,
        );
        summary["verdict"]["checks"][0].clone()
    };
    let two = |acme: &str, globex: &str| {
        format!(
            "version = 1\n[[tenant]]\nname = \"acme\"\nnodes = [\"{acme}\"]\nvlan = 101\nvrf = \"vrf-acme\"\n\
             [[tenant]]\nname = \"globex\"\nnodes = [\"{globex}\"]\nvlan = 102\nvrf = \"vrf-globex\"\n"
        )
    };
    let c = judged(&two("node17", "node01"), &docs);
    assert_eq!(c["status"], "PASS", "{c}");
    assert_eq!(c["observations"], 1, "{c}");
    let c = judged(&two("node01", "node17"), &docs);
    assert_eq!(c["status"], "FAIL", "{c}");
    let at = c["worst_at"].as_str().unwrap();
    assert!(
        at.starts_with("node17 eth2 via eth2.101 (mlx5_0/1): eth2.101 is in VLAN 101, its tenant globex's is VLAN 102"),
        "{c}"
    );
    assert!(at.contains("is in tenant acme's VRF vrf-acme"), "{c}");
    let c = judged(&two("node01", "node17"), &docs[1..]);
    assert_eq!(c["status"], "MISSING", "{c}");
}
