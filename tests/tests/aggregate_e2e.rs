//! The whole local acceptance with real parts: bench-lat and bench-bw measure over TCP
//! loopback, `aggregate` judges their JSON against the shipped `loopback-demo` profile,
//! signs the report, and stock OpenSSH verifies it. Histograms of two runs are merged and
//! the percentiles recomputed from the merge.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

mod aggregate_common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use aggregate_common::*;
use integration::{bin, free_port, mpirun, run, spawn, text, wait_with_deadline};
use results::LatencyHistogram;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);

/// One standalone measurement: server and client of `tool` on 127.0.0.1.
fn measure(tool: &str, args: &[&str], json: &Path) -> Output {
    let port = free_port().to_string();
    let server = spawn(
        Command::new(bin(tool))
            .args(["-p", &port, "--timeout", "60", "--transport", "tcp"])
            .args(args),
    );
    let client = run(
        Command::new(bin(tool))
            .args([
                "127.0.0.1",
                "-p",
                &port,
                "--timeout",
                "60",
                "--transport",
                "tcp",
            ])
            .args(args)
            .arg("--json")
            .arg(json),
        LIMIT,
    );
    let srv = wait_with_deadline(server, LIMIT, tool);
    let (o, e) = text(&client);
    assert!(client.status.success(), "{tool} client failed:\n{o}\n{e}");
    assert!(
        srv.status.success(),
        "{tool} server failed: {:?}",
        text(&srv)
    );
    client
}

#[test]
fn loopback_acceptance_with_the_real_benchmarks_passes_signed_and_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let runs = dir.join("runs");
    fs::create_dir_all(runs.join("night1")).unwrap();
    fs::create_dir_all(runs.join("night2")).unwrap();

    // Two latency runs (merged by aggregate), bandwidth at two sizes.
    for night in ["night1", "night2"] {
        measure(
            "bench-lat",
            &["-s", "2", "-n", "2000"],
            &runs.join(night).join("lat-2.json"),
        );
        measure(
            "bench-lat",
            &["-s", "64", "-n", "2000"],
            &runs.join(night).join("lat-64.json"),
        );
    }
    measure(
        "bench-bw",
        &["-s", "64K", "-n", "20000"],
        &runs.join("night1/bw-64K.json"),
    );
    measure(
        "bench-bw",
        &["-s", "1M", "-n", "2000"],
        &runs.join("night1/bw-1M.json"),
    );

    expect_code(&aggregate(dir, &["keygen", "demo.key"]), 0, "keygen");
    let out = aggregate(
        dir,
        &[
            "report",
            "runs",
            "--profile",
            "loopback-demo",
            "--out",
            "report",
            "--sign",
            "demo.key",
        ],
    );
    let (o, e) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "loopback-demo must pass on a real loopback run\nstdout:\n{o}\nstderr:\n{e}"
    );
    assert!(
        o.contains("verdict: PASS (3 passed, 0 failed, 0 missing"),
        "{o}"
    );
    assert!(o.contains("report: report/report.html"), "{o}");
    let report = dir.join("report");

    // Merged across the two runs: the table's p99 is the p99 of the merged histograms,
    // recomputed here independently from the input files.
    let summary: Value =
        serde_json::from_str(&fs::read_to_string(report.join("summary.json")).unwrap()).unwrap();
    let row = summary["tables"]["latency"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["test"] == "send_lat" && r["size_bytes"] == 2)
        .expect("send_lat 2 B row");
    assert_eq!(row["rows"], 2, "two runs merged");
    let mut merged = LatencyHistogram::new();
    for night in ["night1", "night2"] {
        let doc: Value =
            serde_json::from_str(&fs::read_to_string(runs.join(night).join("lat-2.json")).unwrap())
                .unwrap();
        for r in doc["results"].as_array().unwrap() {
            merged.merge(&LatencyHistogram::decode(r["histogram"].as_str().unwrap()).unwrap());
        }
    }
    assert_eq!(row["samples"].as_u64().unwrap(), merged.len());
    let p99 = merged.summary_us().p99;
    assert!(
        (row["us"]["p99"].as_f64().unwrap() - p99).abs() < 1e-9,
        "p99 {} vs recomputed {p99}",
        row["us"]["p99"]
    );

    // The environment comes from the real documents.
    let html = fs::read_to_string(report.join("report.html")).unwrap();
    assert!(html.contains("bench-lat ") && html.contains("bench-bw "));
    assert!(html.contains("--json"), "command lines listed");
    assert!(html.contains(&hostname()), "host listed");

    // Stock OpenSSH accepts the signature with the key the demo made, through the very
    // command the report prints, given a signers file outside the bundle; the command
    // never names the bundle's own allowed_signers (anyone re-signing writes a matching one).
    let public = fs::read_to_string(dir.join("demo.key.pub")).unwrap();
    let signers = dir.join("published.allowed_signers");
    fs::write(&signers, format!("fabcheck {public}")).unwrap();
    let md = fs::read_to_string(report.join("report.md")).unwrap();
    let printed = md
        .lines()
        .find(|l| l.starts_with("ssh-keygen -Y verify"))
        .expect("the report prints the verify command");
    assert!(printed.contains("\"$SIGNERS\""), "{printed}");
    assert!(!printed.contains("allowed_signers"), "{printed}");
    let verify = run(
        Command::new("sh")
            .arg("-c")
            .arg(printed.replace("sha256sum -c ", "sha256sum -c --quiet "))
            .env("SIGNERS", &signers)
            .current_dir(&report),
        LIMIT,
    );
    let (o, e) = text(&verify);
    assert!(
        verify.status.success(),
        "OpenSSH verification failed:\n{o}{e}"
    );
    let manifest = fs::read_to_string(report.join("MANIFEST.sha256")).unwrap();
    assert_eq!(
        manifest.lines().filter(|l| l.contains("  inputs/")).count(),
        6,
        "every input file is in the signed manifest"
    );

    // The same inputs, compared with themselves: no regression; exported: promtool-clean.
    let out = aggregate(dir, &["compare", "runs/night1", "runs/night1"]);
    expect_code(&out, 0, "compare a night with itself");
    let out = aggregate(
        dir,
        &["export", "runs", "-p", "loopback-demo", "-o", "m.prom"],
    );
    expect_code(&out, 0, "export");
    let prom = fs::read_to_string(dir.join("m.prom")).unwrap();
    assert!(prom.contains("fabcheck_verdict_pass{profile=\"loopback-demo\"} 1"));
    assert!(prom.contains("transport=\"tcp\""));
    if Command::new("promtool").arg("--version").output().is_ok() {
        let out = run(
            Command::new("sh")
                .arg("-c")
                .arg("promtool check metrics < m.prom")
                .current_dir(dir),
            LIMIT,
        );
        assert!(out.status.success(), "promtool: {:?}", text(&out));
    }
}

#[test]
fn collectives_under_mpirun_are_judged_and_plotted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let runs = dir.join("runs");
    fs::create_dir_all(&runs).unwrap();
    measure(
        "bench-lat",
        &["-s", "2", "-n", "1000"],
        &runs.join("lat.json"),
    );
    measure(
        "bench-bw",
        &["-s", "64K", "-n", "10000"],
        &runs.join("bw.json"),
    );
    let out = run(
        mpirun(2)
            .arg(bin("bench-collective"))
            .args([
                "all_reduce",
                "all_gather",
                "-b",
                "1K",
                "-e",
                "64K",
                "-f",
                "4",
            ])
            .args(["-n", "5", "-w", "1", "-c", "--json"])
            .arg(runs.join("coll.json")),
        LIMIT,
    );
    let (o, e) = text(&out);
    assert!(out.status.success(), "mpirun bench-collective:\n{o}\n{e}");

    let out = aggregate(
        dir,
        &[
            "report",
            "runs",
            "--profile",
            "loopback-demo-mpi",
            "--out",
            "report",
        ],
    );
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(0), "stdout:\n{o}\nstderr:\n{e}");
    assert!(
        o.contains("PASS     allreduce-correct            0 elements"),
        "{o}"
    );
    let summary: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("report/summary.json")).unwrap())
            .unwrap();
    let coll = summary["tables"]["collective"].as_array().unwrap();
    assert_eq!(
        coll.len(),
        2 * 4,
        "two collectives, four sizes (1K 4K 16K 64K)"
    );
    assert!(coll.iter().all(|r| r["ranks"] == 2 && r["wrong"] == 0));
    let html = fs::read_to_string(dir.join("report/report.html")).unwrap();
    assert!(
        html.contains("id=\"plot-collective\""),
        "collective busbw plot"
    );
    assert!(
        html.contains("all_gather mpi n=2"),
        "plot legend names the collective"
    );

    // Without the collective run the same profile is not a pass: MISSING is never PASS.
    fs::remove_file(runs.join("coll.json")).unwrap();
    let out = aggregate(
        dir,
        &[
            "report",
            "runs",
            "--profile",
            "loopback-demo-mpi",
            "--out",
            "report",
            "--force",
        ],
    );
    expect_code(&out, 1, "loopback-demo-mpi without bench-collective");
    assert!(text(&out).0.contains("MISSING  allreduce-correct"));
}

fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}
