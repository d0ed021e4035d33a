//! Both directions of every pair, and every flow of a pair (docs/directions.md): a TCP
//! all-pairs sweep under a real mpirun measures each pair both ways at once and names each
//! direction by its sender; `--one-way` keeps today's single direction; a multi-stream pair
//! records one flow per stream with distinct (or chosen, `--src-port`) source ports; and in
//! the simulated cluster (tests/cluster/simcluster.sh) a link shaped in ONE direction shows
//! that direction slow and the other not, in both orientations.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use integration::{bin, is_root, mpirun, run, text};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(240);

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ok(out: &std::process::Output, what: &str) {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(0), "{what}:\n{stdout}\n{stderr}");
}

fn results(doc: &Value) -> &Vec<Value> {
    doc["results"].as_array().expect("results")
}

fn rank(peer: &Value) -> u64 {
    peer["rank"].as_u64().expect("rank")
}

#[test]
fn an_all_pairs_sweep_measures_both_directions_of_every_pair_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ap.json");
    let out = run(
        mpirun(4)
            .arg(bin("bench-bw"))
            .args(["--transport", "tcp", "-s", "64K", "-D", "0.2", "-t", "16"])
            .args([
                "--pattern",
                "all-pairs",
                "--include-local",
                "--timeout",
                "20",
            ])
            .arg("--json")
            .arg(&json),
        LIMIT,
    );
    ok(&out, "all-pairs sweep");
    let doc = read(&json);
    let rows = results(&doc);
    assert_eq!(rows.len(), 6, "4 ranks: 6 pairs");
    for r in rows {
        assert_eq!(r["bidirectional"], true, "{r}");
        let d = r["directions"].as_array().expect("directions");
        assert_eq!(d.len(), 2, "{r}");
        let (i, s) = (rank(&r["pair"]["initiator"]), rank(&r["pair"]["responder"]));
        assert_eq!((rank(&d[0]["from"]), rank(&d[0]["to"])), (i, s), "{r}");
        assert_eq!((rank(&d[1]["from"]), rank(&d[1]["to"])), (s, i), "{r}");
        let each: Vec<f64> = d
            .iter()
            .map(|x| x["bw_gbit_s"]["avg"].as_f64().unwrap())
            .collect();
        assert!(each.iter().all(|&v| v > 0.0), "{r}");
        // The summed figure stays perftest's -b (its own clock: no comparison asserted).
        assert!(r["bw_gbit_s"]["avg"].as_f64().unwrap() > 0.0, "{r}");
    }

    let one = dir.path().join("one.json");
    let out = run(
        mpirun(4)
            .arg(bin("bench-bw"))
            .args(["--transport", "tcp", "-s", "64K", "-D", "0.2", "-t", "16"])
            .args(["--pattern", "all-pairs", "--include-local", "--one-way"])
            .args(["--timeout", "20", "--json"])
            .arg(&one),
        LIMIT,
    );
    ok(&out, "one-way sweep");
    let doc = read(&one);
    assert_eq!(results(&doc).len(), 6);
    for r in results(&doc) {
        assert_eq!(r["bidirectional"], false, "{r}");
        assert!(r.get("directions").is_none(), "one-way rows: {r}");
    }
}

#[test]
fn a_multi_stream_pair_records_one_flow_per_stream_with_its_source_port() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("q.json");
    let out = run(
        mpirun(2)
            .arg(bin("bench-bw"))
            .args(["--transport", "tcp", "-s", "64K", "-D", "0.2", "-q", "3"])
            .args(["--timeout", "20", "--json"])
            .arg(&json),
        LIMIT,
    );
    ok(&out, "3 streams");
    let doc = read(&json);
    let r = &results(&doc)[0];
    assert_eq!(r["bidirectional"], false, "a pairs run stays one-way: {r}");
    let flows = r["flows"].as_array().expect("flows");
    assert_eq!(flows.len(), 3, "{r}");
    let mut ports: Vec<u64> = flows
        .iter()
        .map(|f| f["src_port"].as_u64().unwrap())
        .collect();
    assert!(ports.iter().all(|&p| p > 0), "{r}");
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), 3, "distinct source ports: {r}");
    let idx: Vec<u64> = flows.iter().map(|f| f["index"].as_u64().unwrap()).collect();
    assert_eq!(idx, [0, 1, 2]);
    assert!(flows.iter().all(|f| f["bw_gbit_s"].as_f64().unwrap() > 0.0));

    // Chosen ports, both directions: three flows from the initiator on base+i, three from
    // the responder (its listener's port).
    let base = integration::free_port().clamp(1024, 60000);
    let json = dir.path().join("qp.json");
    let out = run(
        mpirun(2)
            .arg(bin("bench-bw"))
            .args([
                "--transport",
                "tcp",
                "-s",
                "64K",
                "-D",
                "0.2",
                "-q",
                "3",
                "-b",
            ])
            .args(["--src-port", &base.to_string(), "--timeout", "20", "--json"])
            .arg(&json),
        LIMIT,
    );
    ok(&out, "3 streams from chosen ports");
    let doc = read(&json);
    let r = &results(&doc)[0];
    let flows = r["flows"].as_array().expect("flows");
    assert_eq!(flows.len(), 6, "{r}");
    let initiator = &r["pair"]["initiator"];
    let mine: Vec<u64> = flows
        .iter()
        .filter(|f| f["from"] == *initiator)
        .map(|f| f["src_port"].as_u64().unwrap())
        .collect();
    let b = u64::from(base);
    assert_eq!(mine, [b, b + 1, b + 2], "{r}");
}

/// The simulated cluster's all-pairs sweep with one direction shaped; returns the
/// (sender, receiver) -> Gb/s of the pair of nodes 1 and 2.
fn one_way_fault(dir: &Path, fault: &str) -> [(String, String, f64); 2] {
    let json = dir.join(format!("{}.json", fault.replace('>', "-")));
    let out = run(
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster/simcluster.sh"))
            .args(["--nodes", "3", "--slow-dir", fault, "--"])
            .arg(bin("bench-bw"))
            .args(["-s", "64K", "-D", "0.4", "-t", "16", "--timeout", "30"])
            .args(["--pattern", "all-pairs", "--json"])
            .arg(&json),
        LIMIT,
    );
    ok(&out, fault);
    let doc = read(&json);
    let host = |p: &Value| p["host"].as_str().unwrap().to_string();
    let row = results(&doc)
        .iter()
        .find(|r| {
            let mut h = [host(&r["pair"]["initiator"]), host(&r["pair"]["responder"])];
            h.sort();
            h == ["sim-node1", "sim-node2"]
        })
        .expect("the pair sim-node1 - sim-node2 measured");
    let d = row["directions"].as_array().expect("directions");
    assert_eq!(d.len(), 2, "{row}");
    let f = |x: &Value| {
        (
            host(&x["from"]),
            host(&x["to"]),
            x["bw_gbit_s"]["avg"].as_f64().unwrap(),
        )
    };
    [f(&d[0]), f(&d[1])]
}

#[test]
fn one_slow_direction_shows_in_that_direction_only_both_orientations() {
    if !is_root() {
        eprintln!("skipped: the simulated cluster needs root (network and UTS namespaces); CI runs as root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (fault, slow_from, slow_to) in [
        ("1>2", "sim-node1", "sim-node2"),
        ("2>1", "sim-node2", "sim-node1"),
    ] {
        let d = one_way_fault(dir.path(), fault);
        let slow = d
            .iter()
            .find(|(a, b, _)| a == slow_from && b == slow_to)
            .unwrap_or_else(|| panic!("{fault}: no direction {slow_from} -> {slow_to}: {d:?}"));
        let other = d
            .iter()
            .find(|(a, b, _)| a == slow_to && b == slow_from)
            .unwrap_or_else(|| panic!("{fault}: no direction {slow_to} -> {slow_from}: {d:?}"));
        // 50 Mbit/s shaped against 1 Gbit/s healthy: the shaped direction is far below the
        // other, whichever end initiated.
        assert!(
            slow.2 < 0.1 && other.2 > 4.0 * slow.2,
            "{fault}: shaped {slow:?}, other {other:?}"
        );
    }
}
