//! fabric-doctor under a real mpirun: the first rank of every node audits it and rank 0
//! writes one document with one `hosts` entry per node; on this machine (three ranks, one
//! node) and in the simulated cluster (three nodes, each its own host name).

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use integration::{bin, hostname, is_root, mpirun, run, text};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);

fn document(json: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

fn hosts(doc: &Value) -> Vec<String> {
    doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            assert!(
                h["audit"]["ports"].is_array(),
                "an audit in every entry: {h}"
            );
            h["hostname"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn three_ranks_on_one_node_audit_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("doctor.json");
    let out = run(
        mpirun(3).arg(bin("fabric-doctor")).arg("--json").arg(&json),
        LIMIT,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let doc = document(&json);
    assert_eq!(doc["launcher"], "mpi");
    assert_eq!(doc["ranks"], 3);
    assert_eq!(hosts(&doc), [hostname()]);
    // One node: its whole table, once.
    assert_eq!(stdout.matches("fabric-doctor: ").count(), 1, "{stdout}");
    assert!(stdout.contains("memlock"), "{stdout}");
}

#[test]
fn every_node_of_the_simulated_cluster_is_in_the_one_document() {
    if !is_root() {
        eprintln!("skipped: the simulated cluster needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("doctor.json");
    // simcluster appends `--bind-addr ADDR` to the command; the shell drops it.
    let script = format!(
        "exec {} --json {}",
        bin("fabric-doctor").display(),
        json.display()
    );
    let out = run(
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster/simcluster.sh"))
            .args(["--nodes", "3", "--", "sh", "-c", &script]),
        LIMIT,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let doc = document(&json);
    assert_eq!(hosts(&doc), ["sim-node0", "sim-node1", "sim-node2"]);
    assert!(
        stdout.contains("3 node(s) audited by 3 rank(s)"),
        "{stdout}"
    );
    for n in ["sim-node0", "sim-node1", "sim-node2"] {
        assert!(stdout.lines().any(|l| l.starts_with(n)), "{n}: {stdout}");
    }
}

#[test]
fn a_capture_under_mpirun_is_refused_with_the_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        mpirun(2)
            .arg(bin("fabric-doctor"))
            .arg("--capture")
            .arg(dir.path().join("cap")),
        LIMIT,
    );
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("--launcher standalone"), "{stderr}");
}
