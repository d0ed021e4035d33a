//! The cluster matrix end to end: real sweeps under mpirun (`--pattern all-pairs
//! --include-local`, every rank a node) judged by `aggregate report`, the matrix rendered,
//! suspects named in a copy whose one node was degraded by hand, the retest list run by
//! the real `bench-bw --pattern file:` and judged together with the sweep, coverage and
//! failed pairs, inventory expectations against a hand-edited inventory, and a streamed
//! read judging exactly what a whole read judges.
//!
//! Loopback bandwidth on a shared 2-core machine varies by a factor of several between
//! pairs, so the profile here sets the median rule far below that noise
//! (`bw_below_median = 0.02`); the degraded node is a thousand times slower.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

mod aggregate_common;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use aggregate_common::*;
use integration::{bin, hostname, mpirun, run, text};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(240);

/// Matrix checks, a per-pair bound far below loopback, and the median rule below noise.
const PROFILE: &str = r#"
name = "matrix-e2e"
description = "The matrix checks on a loopback sweep"

[matrix]
bw_below_median = 0.02
latency_above_median = 50.0

[[check]]
id = "every-pair"
description = "Every pair moves something"
metric = "bw_avg"
unit = "Gb/s"
min = 0.001
test = "send_bw"
each_pair = true

[[check]]
id = "no-failed-pair"
description = "No pair failed"
metric = "failed_pairs"
unit = "pairs"
max = 0

[[check]]
id = "coverage"
description = "Every planned pair measured"
metric = "matrix_coverage"
unit = "%"
min = 100

[[check]]
id = "no-suspect"
description = "No suspect node, NIC or link"
metric = "suspects"
unit = "suspects"
max = 0
"#;

fn read(p: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(p).unwrap()).unwrap()
}

fn write_json(p: &Path, v: &Value) {
    fs::write(p, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// `bench-bw` over 6 ranks, every rank a node, all pairs: run once for every test here.
fn sweep() -> &'static Path {
    static SWEEP: OnceLock<PathBuf> = OnceLock::new();
    SWEEP.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let json = dir.join("sweep.json");
        let out = bench(6, "bench-bw", &["--pattern", "all-pairs"], &json);
        assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
        json
    })
}

fn bench(np: u32, tool: &str, args: &[&str], json: &Path) -> std::process::Output {
    run(
        mpirun(np)
            .arg(bin(tool))
            .args(["-s", if tool == "bench-bw" { "64K" } else { "8" }])
            .args(["-n", "300", "--include-local", "--timeout", "20"])
            .args(args)
            .arg("--json")
            .arg(json),
        LIMIT,
    )
}

fn report(dir: &Path, inputs: &[&Path], out: &str, extra: &[&str]) -> (i32, String, Value) {
    let profile = write(dir, "profile.toml", PROFILE);
    let mut args: Vec<String> = vec!["report".into()];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(["--profile".into(), profile, "--out".into(), out.into()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = aggregate(dir, &refs);
    let (stdout, stderr) = text(&o);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "aggregate report: {stdout}\n{stderr}"
    );
    let summary = read(&dir.join(out).join("summary.json"));
    (o.status.code().unwrap(), stdout, summary)
}

fn check<'a>(summary: &'a Value, id: &str) -> &'a Value {
    summary["verdict"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}: {summary}"))
}

/// The node name of rank `r` in an `--include-local` sweep.
fn node(r: u32) -> String {
    format!("{}/{r}", hostname())
}

/// Every bandwidth figure of the rows that have `rank` at one end, times `factor`.
fn degrade(doc: &mut Value, rank: u64, factor: f64) {
    for r in doc["results"].as_array_mut().unwrap() {
        let p = &r["pair"];
        if p["initiator"]["rank"] != rank && p["responder"]["rank"] != rank {
            continue;
        }
        for key in ["avg", "peak"] {
            let v = r["bw_gbit_s"][key].as_f64().unwrap();
            r["bw_gbit_s"][key] = (v * factor).into();
        }
        for s in r["interval_gbit_s"].as_array_mut().unwrap() {
            *s = (s.as_f64().unwrap() * factor).into();
        }
    }
}

#[test]
fn a_healthy_sweep_renders_its_matrix_and_names_no_suspect() {
    let dir = tempfile::tempdir().unwrap();
    let lat = dir.path().join("lat.json");
    let out = bench(5, "bench-lat", &["--pattern", "all-pairs"], &lat);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let (code, stdout, summary) = report(dir.path(), &[sweep(), &lat], "r", &[]);
    assert_eq!(code, 0, "{stdout}");
    assert!(!stdout.contains("SUSPECT"), "{stdout}");
    for id in ["coverage", "no-failed-pair", "no-suspect", "every-pair"] {
        assert_eq!(check(&summary, id)["status"], "PASS", "{id}: {summary}");
    }
    assert_eq!(check(&summary, "coverage")["measured"], 100.0);
    let m = &summary["matrix"];
    assert_eq!(m["suspects"].as_array().unwrap().len(), 0);
    let groups = m["groups"].as_array().unwrap();
    let bw = groups.iter().find(|g| g["test"] == "send_bw").unwrap();
    let lat = groups.iter().find(|g| g["test"] == "send_lat").unwrap();
    assert_eq!(bw["rails"][0]["nodes"], 6);
    assert_eq!(bw["rails"][0]["links"], 15);
    assert_eq!(bw["coverage"]["expected"], 15);
    assert_eq!(lat["rails"][0]["links"], 10);
    // The Markdown table of a small matrix names every node.
    let table = bw["rails"][0]["markdown"].as_str().unwrap();
    for r in 0..6 {
        assert!(table.contains(&node(r)), "{table}");
    }
    let r = dir.path().join("r");
    let html = fs::read_to_string(r.join("report.html")).unwrap();
    assert!(html.contains("id=\"matrix\"") && html.contains("id=\"no-suspect\""));
    // Heatmaps: bandwidth, and latency p50 and p99.
    assert_eq!(
        html.matches("<figure class=\"heatmap\">").count(),
        3,
        "{html}"
    );
    assert!(r.join("plots/matrix-03.svg").is_file());
    assert!(!r.join("suspects.pairs").exists());
    let md = fs::read_to_string(r.join("report.md")).unwrap();
    assert!(md.contains("## Cluster matrix and suspects") && md.contains("No suspect"));
}

#[test]
fn a_degraded_node_is_named_and_its_retest_runs_and_is_judged_with_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = read(sweep());
    degrade(&mut doc, 3, 0.001);
    let degraded = dir.path().join("degraded.json");
    write_json(&degraded, &doc);
    let (code, stdout, summary) = report(dir.path(), &[&degraded], "first", &[]);
    assert_eq!(code, 1, "{stdout}");
    let want = format!("SUSPECT  node {}: 5 of 5 link(s) bad", node(3));
    assert!(stdout.contains(&want), "{stdout}");
    assert_eq!(stdout.matches("SUSPECT").count(), 1, "{stdout}");
    let s = &summary["matrix"]["suspects"][0];
    assert_eq!(s["kind"], "node");
    assert_eq!(s["node"], node(3).as_str());
    assert_eq!(s["retest"], "not retested");
    assert_eq!(check(&summary, "no-suspect")["status"], "FAIL");
    assert_eq!(check(&summary, "coverage")["status"], "PASS");
    // The retest list: the suspect with known-good partners, in the file format.
    let pairs = dir.path().join("first/suspects.pairs");
    let text_pairs = fs::read_to_string(&pairs).unwrap();
    let lines: Vec<&str> = text_pairs
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert_eq!(lines.len(), 2, "{text_pairs}");
    for l in &lines {
        assert!(l.starts_with(&format!("{} ", node(3))), "{l}");
    }
    // The real retest: the file as bench-bw reads it, over the same ranks. On this
    // machine the node is healthy, so the link passes this time: flaky, not cleared.
    let retest = dir.path().join("retest.json");
    let arg = format!("file:{}", pairs.display());
    let out = bench(6, "bench-bw", &["--pattern", &arg], &retest);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let rdoc = read(&retest);
    assert_eq!(rdoc["sweep"]["pattern"], "file");
    assert_eq!(rdoc["results"].as_array().unwrap().len(), 2);
    let (code, stdout, summary) = report(dir.path(), &[&degraded, &retest], "both", &[]);
    assert_eq!(code, 1, "{stdout}");
    let s = &summary["matrix"]["suspects"][0];
    assert_eq!(s["node"], node(3).as_str());
    assert_eq!(s["flaky"], true, "{s}");
    assert!(
        s["retest"]
            .as_str()
            .unwrap()
            .starts_with("passed on retest"),
        "{s}"
    );
    assert_eq!(summary["matrix"]["flaky"].as_array().unwrap().len(), 2);
    assert!(stdout.contains("; flaky"), "{stdout}");
}

#[test]
fn a_cut_sweep_is_missing_coverage_and_a_failed_pair_fails_with_both_causes() {
    let dir = tempfile::tempdir().unwrap();
    // The last round never ran: its three pairs are missing, named, and MISSING is the
    // verdict of the coverage check (not FAIL: nothing was measured bad).
    let mut doc = read(sweep());
    let last = doc["sweep"]["rounds"].as_u64().unwrap() - 1;
    let rows = doc["results"].as_array_mut().unwrap();
    let before = rows.len();
    rows.retain(|r| r["pair"]["round"] != last);
    assert_eq!(before - rows.len(), 3);
    doc["sweep"]["rounds_done"] = last.into();
    let cut = dir.path().join("cut.json");
    write_json(&cut, &doc);
    let (code, _, summary) = report(dir.path(), &[&cut], "cut", &[]);
    assert_eq!(code, 1);
    let c = check(&summary, "coverage");
    assert_eq!(c["status"], "MISSING", "{c}");
    assert_eq!(c["measured"], 80.0);
    let at = c["worst_at"].as_str().unwrap();
    assert!(
        at.starts_with("3 of 15 planned link(s) never measured"),
        "{at}"
    );
    // A pair recorded failed instead of measured: tried, so covered; failed, by name.
    let mut doc = read(sweep());
    let rows = doc["results"].as_array_mut().unwrap();
    let gone = rows.remove(0);
    doc["failed_pairs"] = serde_json::json!([{
        "round": gone["pair"]["round"],
        "pair": gone["pair"],
        "size_bytes": 65536,
        "initiator_error": "work completion IBV_WC_RETRY_EXC_ERR",
        "responder_error": "timed out after 20 s waiting for the initiator",
        "initiator_port_state": "4: ACTIVE",
        "responder_port_state": "1: DOWN"
    }]);
    let failed = dir.path().join("failed.json");
    write_json(&failed, &doc);
    let (code, _, summary) = report(dir.path(), &[&failed], "failed", &[]);
    assert_eq!(code, 1);
    let c = check(&summary, "no-failed-pair");
    assert_eq!(c["status"], "FAIL", "{c}");
    let at = c["worst_at"].as_str().unwrap();
    for needle in [
        "IBV_WC_RETRY_EXC_ERR",
        "timed out",
        "port 1: DOWN",
        "port 4: ACTIVE",
    ] {
        assert!(at.contains(needle), "{needle}: {at}");
    }
    assert_eq!(check(&summary, "coverage")["status"], "PASS");
    let listed = summary["matrix"]["failed_pairs"][0].as_str().unwrap();
    assert!(listed.contains("(initiator)") && listed.contains("(responder)"));
}

/// One RDMA device as the inventory records it.
fn device(name: &str, width: u32, rate: f64, fw: &str, symbol_errors: i64) -> Value {
    serde_json::json!({
        "name": name,
        "fw_ver": fw,
        "ports": [{
            "port": 1,
            "state": "4: ACTIVE",
            "rate": format!("{rate} Gb/sec (4X EDR)"),
            "rate_gbit_s": rate,
            "link_layer": "Ethernet",
            "phys_state": "5: LinkUp",
            "active_mtu": 4096,
            "netdev_mtu": 9000,
            "counters": {"symbol_error": symbol_errors, "port_xmit_packets": 1000}
        }],
        "pci": {
            "address": "0000:3b:00.0",
            "current_speed": "16.0 GT/s PCIe",
            "current_speed_gt_s": 16.0,
            "current_width": width,
            "max_speed": "16.0 GT/s PCIe",
            "max_speed_gt_s": 16.0,
            "max_width": 16
        },
        "numa_node": 0
    })
}

#[test]
fn inventory_expectations_name_the_one_port_that_differs() {
    let dir = tempfile::tempdir().unwrap();
    // The real document's hosts, given four adapters: one at x8, one on other firmware,
    // one that trained at 50 Gb/s; a later run sees symbol errors rise on the fourth.
    let inventory = |symbol: i64| {
        serde_json::json!([
            device("mlx5_0", 16, 100.0, "22.39.1002", 0),
            device("mlx5_1", 8, 100.0, "22.39.1002", 0),
            device("mlx5_2", 16, 100.0, "22.36.1010", 0),
            device("mlx5_3", 16, 50.0, "22.39.1002", symbol),
        ])
    };
    let mut first = read(sweep());
    for h in first["hosts"].as_array_mut().unwrap() {
        h["rdma_devices"] = inventory(0);
    }
    let mut later = first.clone();
    later["started_at"] = "2099-01-01T00:00:00Z".into();
    for h in later["hosts"].as_array_mut().unwrap() {
        h["rdma_devices"] = inventory(7);
    }
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    write_json(&a, &first);
    write_json(&b, &later);
    let profile = format!(
        "{PROFILE}\n[inventory]\nport_state = \"ACTIVE\"\nphys_state = \"LinkUp\"\nrate_gbit_s = 100\npcie_width = 16\npcie_speed_gt_s = 16\nactive_mtu = 4096\nnetdev_mtu = 9000\nfirmware = \"same\"\nerror_counters_max_rise = 0\n"
    );
    let p = write(dir.path(), "inv.toml", &profile);
    let o = aggregate(
        dir.path(),
        &[
            "report",
            &a.display().to_string(),
            &b.display().to_string(),
            "--profile",
            &p,
            "--out",
            "r",
        ],
    );
    expect_code(&o, 1, "inventory checks fail");
    let summary = read(&dir.path().join("r/summary.json"));
    let host = hostname();
    let failing = |id: &str, port: &str, shows: &str| {
        let c = check(&summary, id);
        assert_eq!(c["status"], "FAIL", "{c}");
        assert_eq!(c["measured"], 1.0, "{c}");
        let at = c["worst_at"].as_str().unwrap();
        assert_eq!(at, format!("{host}:{port} port 1: {shows}"), "{id}");
    };
    failing("inventory-pcie-width", "mlx5_1", "x8 (max x16)");
    failing("inventory-firmware", "mlx5_2", "22.36.1010");
    failing("inventory-rate", "mlx5_3", "50 Gb/sec (4X EDR)");
    failing("inventory-error-counters", "mlx5_3", "symbol_error +7");
    for id in [
        "inventory-port-state",
        "inventory-phys-state",
        "inventory-pcie-speed",
        "inventory-active-mtu",
        "inventory-netdev-mtu",
    ] {
        assert_eq!(check(&summary, id)["status"], "PASS", "{id}");
    }
    // Without RDMA devices there is nothing to judge: MISSING, never PASS.
    let o = aggregate(
        dir.path(),
        &[
            "report",
            &sweep().display().to_string(),
            "--profile",
            &p,
            "--out",
            "tcp",
        ],
    );
    expect_code(&o, 1, "no inventory");
    let summary = read(&dir.path().join("tcp/summary.json"));
    assert_eq!(check(&summary, "inventory-rate")["status"], "MISSING");
}

#[test]
fn a_streamed_read_judges_what_a_whole_read_judges_and_the_bundle_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("sweep.json");
    fs::copy(sweep(), &input).unwrap();
    let key = dir.path().join("k");
    expect_code(
        &aggregate(dir.path(), &["keygen", &key.display().to_string()]),
        0,
        "keygen",
    );
    let sign = ["--sign", &key.display().to_string()].map(str::to_string);
    let sign: Vec<&str> = sign.iter().map(String::as_str).collect();
    let (_, _, whole) = report(dir.path(), &[&input], "whole", &sign);
    let mut streamed_args = sign.clone();
    streamed_args.extend(["--stream-above", "0"]);
    let (_, _, streamed) = report(dir.path(), &[&input], "streamed", &streamed_args);
    for key in ["verdict", "tables", "matrix", "inputs"] {
        assert_eq!(whole[key], streamed[key], "{key} differs");
    }
    let bundled = dir.path().join("streamed/inputs/0001-sweep.json");
    assert_eq!(fs::read(&bundled).unwrap(), fs::read(&input).unwrap());
    let verify = |d: &str| {
        aggregate(
            dir.path(),
            &["verify", d, "--key", &format!("{}.pub", key.display())],
        )
    };
    expect_code(&verify("streamed"), 0, "streamed bundle verifies");
    // A streamed input is linked into the bundle when it can be: changing the original in
    // place afterwards shows in the bundle, and verification says so.
    let mut bytes = fs::read(&input).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    fs::OpenOptions::new()
        .write(true)
        .open(&input)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
        .unwrap();
    let v = verify("streamed");
    expect_code(&v, 1, "in-place change detected");
    assert!(
        text(&v).0.contains("CHANGED: inputs/0001-sweep.json"),
        "{:?}",
        text(&v)
    );
    expect_code(&verify("whole"), 0, "the whole read's copy is its own");
}
