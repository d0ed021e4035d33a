//! Tenants on the simulated leaf-spine fabric (tests/fabric/simfabric.sh --tenant: a bridge
//! per tenant VLAN on every leaf, a routing table per tenant VRF on leaves and spines):
//! `bench-lat --pattern isolation` under mpirun over every node, judged by the real
//! `aggregate report` with tests/fabric/simfabric-tenants.toml. Two tenants kept apart
//! pass; a route leaked between two nodes' VRFs on the spines is exactly that pair, both
//! ways, nothing else; a port put in the other tenant's VLAN is named as that NIC in the
//! wrong partition; a tenant's own report holds no trace of the other tenant in any file
//! of its bundle, while the provider's report does.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use integration::{bin, is_root, run, text};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(300);

/// 2 groups x 2 nodes x 1 rail x 2 spines; acme = g0n0, g1n0; globex = g0n1, g1n1.
const SHAPE: [&str; 12] = [
    "--groups",
    "2",
    "--nodes-per-group",
    "2",
    "--rails",
    "1",
    "--spines",
    "2",
    "--tenant",
    "acme:101:g0n0,g1n0",
    "--tenant",
    "globex:102:g0n1,g1n1",
];

fn skip() -> bool {
    if !is_root() {
        eprintln!("skipped: the simulated fabric needs root (namespaces, veth, tc, lldpd); CI runs as root");
        return true;
    }
    false
}

fn fabric_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fabric")
        .join(name)
}

/// The isolation sweep under the fabric with `faults`: bench-lat's exit code and stdout;
/// the document is DIR/iso.json, the intended plan (with its tenants) DIR/plan.toml.
fn sweep(faults: &[&str], dir: &Path) -> (i32, String) {
    let mut cmd = Command::new(fabric_file("simfabric.sh"));
    cmd.args(SHAPE)
        .args(faults)
        .arg("--plan-out")
        .arg(dir.join("plan.toml"))
        .arg("--")
        .arg(bin("bench-lat"))
        .args(["--pattern", "isolation", "--timeout", "2"])
        .arg("--plan")
        .arg(dir.join("plan.toml"))
        .arg("--json")
        .arg(dir.join("iso.json"));
    let out = run(&mut cmd, LIMIT);
    let (stdout, stderr) = text(&out);
    let code = out.status.code().unwrap_or(-1);
    assert!(
        dir.join("iso.json").exists(),
        "no document (exit {code}): {stdout}\n{stderr}"
    );
    (code, stdout)
}

/// `aggregate report` of DIR/iso.json into DIR/OUT (`extra`: --tenant NAME): exit code and
/// summary.json.
fn report(dir: &Path, out: &str, extra: &[&str]) -> (i32, Value) {
    let out_dir = dir.join(out);
    let o = run(
        Command::new(bin("aggregate"))
            .arg("report")
            .arg("--profile")
            .arg(fabric_file("simfabric-tenants.toml"))
            .arg("--plan")
            .arg(dir.join("plan.toml"))
            .args(extra)
            .arg("-o")
            .arg(&out_dir)
            .arg(dir.join("iso.json")),
        Duration::from_secs(120),
    );
    let (stdout, stderr) = text(&o);
    let code = o.status.code().unwrap_or(-1);
    assert!(code == 0 || code == 1, "aggregate: {stdout}\n{stderr}");
    let summary =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    (code, summary)
}

fn status(summary: &Value, id: &str) -> String {
    summary["verdict"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .map(|c| c["status"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no check {id}"))
}

/// (from, to) node pairs of a list of named pairs.
fn pairs(summary: &Value, list: &str) -> BTreeSet<(String, String)> {
    summary["matrix"]["isolation"][list]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["from"].as_str().unwrap().to_string(),
                b["to"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn set(v: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn two_tenants_kept_apart_pass() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = sweep(&[], dir.path());
    assert_eq!(code, 0, "{stdout}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("iso.json")).unwrap())
            .unwrap();
    let eps = doc["reach"]["endpoints"].as_array().unwrap();
    assert_eq!(eps.len(), 4);
    assert!(
        eps.iter().all(|e| e["interface"] == "rail0"),
        "every rank names its data interface: {eps:?}"
    );
    let (code, summary) = report(dir.path(), "report", &[]);
    assert_eq!(code, 0, "{summary}");
    assert_eq!(status(&summary, "isolation-breaches"), "PASS");
    assert_eq!(status(&summary, "isolation-reach"), "PASS");
    let iso = &summary["matrix"]["isolation"];
    assert_eq!(iso["inside_pairs"], 4);
    assert_eq!(iso["across_pairs"], 8);
}

#[test]
fn a_leaked_route_is_exactly_its_pair_and_a_tenant_report_shows_only_the_tenant() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = sweep(&["--leak-route", "g0n0,g1n1"], dir.path());
    assert_eq!(code, 1, "a breach is a failed check: {stdout}");
    assert!(stdout.contains("BREACH    g0n0 (acme"), "{stdout}");
    let (code, summary) = report(dir.path(), "report", &[]);
    assert_eq!(code, 1);
    assert_eq!(status(&summary, "isolation-breaches"), "FAIL");
    assert_eq!(status(&summary, "isolation-reach"), "PASS");
    assert_eq!(
        pairs(&summary, "breaches"),
        set(&[("g0n0", "g1n1"), ("g1n1", "g0n0")])
    );
    let path = summary["matrix"]["isolation"]["breaches"][0]["path"]
        .as_str()
        .unwrap();
    assert!(
        path.contains("leaf-r0-g0") && path.contains("spines") && path.contains("leaf-r0-g1"),
        "the path through the plan: {path}"
    );
    assert!(summary["matrix"]["isolation"]["misplaced"]
        .as_array()
        .unwrap()
        .is_empty());

    // The provider's bundle names globex; acme's names none of it anywhere.
    let globex = ["globex", "g0n1", "g1n1", "198.18.0.35", "198.18.1.35"];
    let provider = grep_bundle(&dir.path().join("report"), &globex);
    assert!(
        !provider.is_empty(),
        "the provider's report shows everything"
    );
    let (code, acme) = report(dir.path(), "acme", &["--tenant", "acme"]);
    assert_eq!(code, 1, "acme's nodes were reached from outside");
    assert_eq!(status(&acme, "isolation-breaches"), "FAIL");
    let hits = grep_bundle(&dir.path().join("acme"), &globex);
    assert!(hits.is_empty(), "acme's bundle names globex: {hits:?}");
    let seen = pairs(&acme, "breaches");
    assert!(
        seen.iter().all(|(a, b)| (a == "g0n0") != (b == "g0n0")
            && (a.starts_with("another-tenant") || b.starts_with("another-tenant"))),
        "the other end is anonymous: {seen:?}"
    );
    let o = run(
        Command::new(bin("aggregate"))
            .arg("report")
            .arg("--profile")
            .arg(fabric_file("simfabric-tenants.toml"))
            .arg("--plan")
            .arg(dir.path().join("plan.toml"))
            .args(["--tenant", "initech", "-o"])
            .arg(dir.path().join("nobody"))
            .arg(dir.path().join("iso.json")),
        Duration::from_secs(60),
    );
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no such tenant") && stderr.contains("acme, globex"),
        "{stderr}"
    );
}

/// Files of a bundle holding any of `needles`, with the needle.
fn grep_bundle(dir: &Path, needles: &[&str]) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let bytes = std::fs::read(&p).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            for n in needles {
                if text.contains(n) {
                    hits.push(format!("{}: {n}", p.display()));
                }
            }
        }
    }
    hits
}

#[test]
fn a_port_in_the_other_tenants_vlan_is_named() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = sweep(&["--leak-vlan", "g1n1:0:101"], dir.path());
    assert_eq!(code, 1, "{stdout}");
    let (_, summary) = report(dir.path(), "report", &[]);
    assert_eq!(status(&summary, "isolation-breaches"), "FAIL");
    assert_eq!(status(&summary, "isolation-reach"), "FAIL");
    let misplaced: Vec<&str> = summary["matrix"]["isolation"]["misplaced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(misplaced.len(), 1, "{misplaced:?}");
    assert!(
        misplaced[0].starts_with("g1n1 rail0")
            && misplaced[0].contains("member of tenant acme")
            && misplaced[0].contains("leaf-r0-g1"),
        "{misplaced:?}"
    );
    let unreached = pairs(&summary, "unreached");
    assert_eq!(unreached, set(&[("g0n1", "g1n1"), ("g1n1", "g0n1")]));
}
