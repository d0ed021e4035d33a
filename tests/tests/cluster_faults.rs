//! Fault injection in the simulated cluster (tests/cluster/simcluster.sh: six "nodes" under
//! a real mpirun, each its own host and address, traffic shaped per link and per node): one
//! link and one node degraded, an all-pairs sweep, and `aggregate` must name exactly that
//! link and that node; then the retest it writes is run with the link healed and judged
//! with the first sweep: the node confirmed, the link flaky (not cleared).

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use integration::{bin, is_root, run, text};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(300);

fn here(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// An all-pairs bandwidth sweep (or a `file:` retest) of the simulated cluster.
fn sweep(faults: &[&str], pattern: &str, json: &Path) {
    let out = run(
        Command::new(here("cluster/simcluster.sh"))
            .args(["--nodes", "6"])
            .args(faults)
            .arg("--")
            .arg(bin("bench-bw"))
            .args([
                "-s",
                "64K",
                "-D",
                "0.4",
                "-t",
                "16",
                "--timeout",
                "30",
                "--pattern",
                pattern,
                "--json",
            ])
            .arg(json),
        LIMIT,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "sweep {pattern}:\n{stdout}\n{stderr}"
    );
}

fn report(inputs: &[&Path], out: &Path) -> (Value, String) {
    let o = run(
        Command::new(bin("aggregate"))
            .arg("report")
            .args(inputs)
            .arg("--profile")
            .arg(here("cluster/simcluster.toml"))
            .arg("--out")
            .arg(out),
        LIMIT,
    );
    let (stdout, stderr) = text(&o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "suspects fail the check:\n{stdout}\n{stderr}"
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    (summary, stdout)
}

/// (kind, name) of every suspect: a node by its name, a link by its two ends.
fn suspects(summary: &Value) -> BTreeSet<(String, String)> {
    summary["matrix"]["suspects"]
        .as_array()
        .expect("matrix.suspects")
        .iter()
        .map(|s| {
            let kind = s["kind"].as_str().unwrap().to_string();
            let name = if kind == "link" {
                let mut ends: Vec<&str> = s["ends"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e.as_str().unwrap())
                    .collect();
                ends.sort();
                ends.join(" - ")
            } else {
                s["node"].as_str().unwrap().to_string()
            };
            (kind, name)
        })
        .collect()
}

#[test]
fn one_slow_link_and_one_slow_node_are_named_and_nothing_else() {
    if !is_root() {
        eprintln!("skipped: the simulated cluster needs root (network and UTS namespaces); CI runs as root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("sweep.json");
    sweep(
        &["--slow-link", "0-3", "--slow-node", "4"],
        "all-pairs",
        &first,
    );
    let r1 = dir.path().join("r1");
    let (summary, stdout) = report(&[&first], &r1);
    let want = BTreeSet::from([
        ("link".to_string(), "sim-node0 - sim-node3".to_string()),
        ("node".to_string(), "sim-node4".to_string()),
    ]);
    assert_eq!(suspects(&summary), want, "{stdout}");
    assert_eq!(stdout.matches("SUSPECT").count(), 2, "{stdout}");

    // The retest: the suspects beside known-good nodes, with the link healed and the node
    // still slow; judged with the first sweep.
    let pairs = r1.join("suspects.pairs");
    let list = std::fs::read_to_string(&pairs).expect("suspects.pairs written");
    assert!(
        list.contains("sim-node4") && list.contains("sim-node0"),
        "{list}"
    );
    let retest = dir.path().join("retest.json");
    sweep(
        &["--slow-node", "4"],
        &format!("file:{}", pairs.display()),
        &retest,
    );
    let (summary, stdout) = report(&[&first, &retest], &dir.path().join("r2"));
    let by_kind = |kind: &str| {
        summary["matrix"]["suspects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} suspect: {stdout}"))
    };
    let node = by_kind("node");
    assert!(
        node["retest"].as_str().unwrap().starts_with("confirmed"),
        "{node}"
    );
    let link = by_kind("link");
    assert_eq!(
        link["flaky"], true,
        "a link that passes on retest is flaky, not cleared: {link}"
    );
    assert_eq!(suspects(&summary), want, "{stdout}");
}
