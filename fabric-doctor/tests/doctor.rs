//! fabric-doctor for real: on this machine (real dcb/ethtool answers, unknowns with why),
//! capture then replay (same audit), and each scenario capture's findings.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::path::{Path, PathBuf};
use std::process::Command;

fn doctor(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fabric-doctor"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn audit_of(json: &Path) -> serde_json::Value {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    doc["hosts"][0]["audit"].clone()
}

fn captures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/captures")
}

#[test]
fn this_machine_is_audited_with_unknowns_explained_and_exit_0() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("a.json");
    let (rc, out, err) = doctor(&["--json", json.to_str().unwrap()]);
    assert_eq!(rc, 0, "{out}\n{err}");
    assert!(out.contains("fabric-doctor: "), "{out}");
    assert!(out.contains("memlock"), "{out}");
    let a = audit_of(&json);
    assert!(a["hostname"].as_str().is_some_and(|h| !h.is_empty()));
    // Every port fact is either a value or says why not.
    for p in a["ports"].as_array().unwrap() {
        for k in ["pfc", "ets", "trust", "ecn", "fec", "module"] {
            let f = &p[k];
            assert!(
                f.get("value").is_some() || f["unknown"].as_str().is_some_and(|w| !w.is_empty()),
                "{k}: {f}"
            );
        }
    }
}

#[test]
fn a_capture_replays_to_the_same_audit() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("cap");
    let (a_json, b_json) = (tmp.path().join("a.json"), tmp.path().join("b.json"));
    let (rc, _, err) = doctor(&[
        "--capture",
        cap.to_str().unwrap(),
        "--json",
        a_json.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(cap.join("cmd/dcb_-V.rc").is_file());
    assert!(cap.join("fs/proc/self/limits").is_file());
    let (rc, _, err) = doctor(&[
        "--from",
        cap.to_str().unwrap(),
        "--json",
        b_json.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(audit_of(&a_json), audit_of(&b_json));
    // Not a capture: a clear message, exit 2.
    let (rc, _, err) = doctor(&["--from", tmp.path().join("nothing").to_str().unwrap()]);
    assert_eq!(rc, 2);
    assert!(err.contains("not a capture"), "{err}");
}

fn findings(scenario: &str) -> (Vec<String>, serde_json::Value) {
    findings_at(scenario, "106")
}

/// [`findings`] with the suite sending traffic class `tclass`.
fn findings_at(scenario: &str, tclass: &str) -> (Vec<String>, serde_json::Value) {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("a.json");
    let dir = captures().join(scenario);
    let (rc, out, err) = doctor(&[
        "--from",
        dir.to_str().unwrap(),
        "--tclass",
        tclass,
        "--lossless-priorities",
        "3",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{out}{err}");
    let a = audit_of(&json);
    let codes = a["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect();
    (codes, a)
}

#[test]
fn each_scenario_capture_has_its_findings() {
    let expect: &[(&str, &[&str])] = &[
        ("healthy", &[]),
        ("pfc-off", &["pfc-off", "traffic-lossy"]),
        ("pfc-wrong-priority", &["pfc-priorities", "traffic-lossy"]),
        ("trust-pcp", &["trust-pcp", "traffic-lossy"]),
        ("ecn-off", &["ecn-off"]),
        ("fec-off", &["fec-off"]),
        ("rx-power-low", &["rx-power-margin"]),
        ("cnp-dscp", &[]),
        ("no-dcb", &[]),
        ("not-dcb-capable", &[]),
        ("infiniband", &[]),
        ("ipoib", &[]),
        ("ethtool-6.14", &[]),
        ("tenant-vlan", &[]),
        // A management port beside the RoCE NIC, PFC off, trust pcp, FEC off at 25G:
        // shown, not judged (it used to fail pfc-off and traffic-lossy).
        ("management-port", &["not-rdma"]),
        ("global-tclass", &[]),
        // RoCE on bond0.200 over eth2 and eth3: both PFs judged, eth3's PFC off named.
        ("vlan-on-bond", &["pfc-off", "traffic-lossy"]),
    ];
    for (s, want) in expect {
        let (codes, _) = findings(s);
        assert_eq!(&codes, want, "{s}");
    }
    let (_, a) = findings("healthy");
    let p = &a["ports"][0];
    assert_eq!(p["interface"], "eth2");
    assert_eq!(p["traffic"]["value"]["gid_index"], 3);
    assert_eq!(p["traffic"]["value"]["priority"], 3);
    assert_eq!(p["cnp"]["value"]["dscp"], 48);
    assert_eq!(p["trust"]["value"], "dscp");
    let (_, a) = findings("cnp-dscp");
    assert_eq!(a["ports"][0]["cnp"]["value"]["dscp"], 46);
    let (_, a) = findings("no-dcb");
    assert!(a["ports"][0]["pfc"]["unknown"]
        .as_str()
        .unwrap()
        .contains("dcb tool is missing"));
    let (_, a) = findings("not-dcb-capable");
    assert!(a["ports"][0]["pfc"]["unknown"]
        .as_str()
        .unwrap()
        .contains("Operation not supported"));
    let (_, a) = findings("management-port");
    let mgmt = &a["ports"][1];
    assert_eq!(mgmt["interface"], "eno1");
    assert_eq!(
        mgmt["pfc"]["value"]["enabled"],
        serde_json::json!(vec![false; 8])
    );
    assert_eq!(a["findings"][0]["severity"], "info");
    assert_eq!(a["findings"][0]["port"], "eno1");
    let (_, a) = findings("infiniband");
    assert_eq!(a["ports"][0]["link_layer"], "InfiniBand");
    assert!(a["ports"][0]["pfc"]["unknown"]
        .as_str()
        .unwrap()
        .contains("InfiniBand"));
    // IPoIB has no module EEPROM and no FEC: unknown, saying where to read them (ethtool's
    // "Operation not supported" alone said nothing of why); its statistics are read.
    let (_, a) = findings("ipoib");
    let p = &a["ports"][0];
    assert_eq!(p["interface"], "ib0");
    for fact in ["module", "fec"] {
        let why = p[fact]["unknown"].as_str().unwrap_or_default();
        assert!(
            why.contains("IPoIB") && why.contains("mlxlink -d mlx5_0"),
            "{fact}: {p}"
        );
    }
    assert!(p["driver_counters"]["value"].is_object(), "{p}");
    // ethtool 6.14: the module's thresholds from the text (-10.90 dBm), not the JSON's
    // two decimals of mW (0.08 mW, -10.97 dBm).
    let (_, a) = findings("ethtool-6.14");
    let m = &a["ports"][0]["module"];
    assert_eq!(m["source"], "ethtool -m eth2", "{m}");
    assert_eq!(
        m["value"]["rx_power_thresholds"]["low_warning"], -10.9,
        "{m}"
    );
    // RoCE on a tenant's VLAN in its VRF: the segment of the GID's netdev.
    let (_, a) = findings("tenant-vlan");
    let seg = &a["ports"][0]["segment"]["value"];
    assert_eq!(seg["netdev"], "eth2.101", "{seg}");
    assert_eq!(seg["vlan"], 101, "{seg}");
    assert_eq!(seg["vrf"], "vrf-acme", "{seg}");
    assert_eq!(seg["vrf_table"], 101, "{seg}");
}

/// The class the NIC sets is the class the traffic carries (issue 37 item 7). Every
/// benchmark's embedded audit asks traffic class 0: on a NIC that sets none, that is DSCP 0,
/// priority 0, lossy; on one whose MLNX_OFED driver sets the global class 106, the kernel
/// gives every QP DSCP 26, priority 3, lossless (it used to fail traffic-lossy there too).
#[test]
fn the_nics_global_traffic_class_is_the_one_judged() {
    let (codes, _) = findings_at("healthy", "0");
    assert_eq!(codes, ["traffic-lossy"]);
    let (codes, a) = findings_at("global-tclass", "0");
    assert_eq!(codes, Vec::<String>::new(), "{a}");
    let p = &a["ports"][0];
    assert_eq!(p["nic_tclass"]["value"]["global"], 106);
    assert_eq!(p["nic_tclass"]["value"]["rdma_cm_default_tos"], 106);
    assert_eq!(p["traffic"]["value"]["dscp"], 26);
    assert_eq!(p["traffic"]["value"]["priority"], 3);
    // The upstream driver has no tc directory: known, no class of its own.
    let (_, a) = findings_at("healthy", "0");
    let t = &a["ports"][0]["nic_tclass"];
    assert!(t["value"]["global"].is_null(), "{t}");
    assert!(t["source"].as_str().unwrap().contains("absent"), "{t}");
}

/// RoCE on a VLAN over a bond (issue 37 item 6): the GID's netdev (bond0.200) has no DCB,
/// FEC, counters or module; those are the physical ports' below it, and each is judged
/// (before, bond0.200 read unknown everywhere and the PFs were "no RDMA device").
#[test]
fn roce_on_a_vlan_over_a_bond_is_judged_on_its_physical_ports() {
    let (codes, a) = findings("vlan-on-bond");
    assert_eq!(codes, ["pfc-off", "traffic-lossy"], "{a}");
    let ports = a["ports"].as_array().unwrap();
    let names: Vec<(&str, &str, &str)> = ports
        .iter()
        .map(|p| {
            (
                p["interface"].as_str().unwrap(),
                p["via"].as_str().unwrap_or(""),
                p["rdma_device"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("eth2", "bond0.200", "mlx5_0"),
            ("eth3", "bond0.200", "mlx5_0")
        ],
        "{a}"
    );
    assert_eq!(ports[0]["pfc"]["value"]["enabled"][3], true);
    assert!(ports[1]["pfc"]["value"]["enabled"]
        .as_array()
        .unwrap()
        .iter()
        .all(|v| v == false));
    assert!(a["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["port"] == "eth3"));
    assert!(ports[0]["fec"]["value"].is_object() && ports[1]["module"]["value"].is_object());
}
