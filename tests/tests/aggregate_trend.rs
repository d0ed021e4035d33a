//! `aggregate trend` on nightly histories in the layout `deploy/nightly.sbatch` writes:
//! a history with a slow latency drift, one bad night and one disturbed night gets both
//! flagged (and the bad night is not mistaken for a drift), a flat history gets nothing;
//! `--since/--until` choose the window; the signed bundle verifies with stock
//! `ssh-keygen`; the HTML renders in headless Chromium with its plots.

mod aggregate_common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use aggregate_common::*;
use integration::{run, text};
use serde_json::Value;
use synth::history::{self as synth_history, Shape};

/// 32 GPUs (4 nodes), 14 nights: small enough for CI, long enough for a window.
fn shape() -> Shape {
    Shape {
        nights: 14,
        ..Shape::default()
    }
}

const PROFILE: &str = r#"
name = "nightly"
line_rate_gbit_s = 100.0

[[check]]
id = "write-bw"
description = "RDMA write bandwidth at 1 MiB, every pair"
metric = "bw_avg"
unit = "Gb/s"
min = 80.0
test = "write_bw"
min_size = "1M"
each_pair = true

[[check]]
id = "send-lat"
description = "small-message send latency p99"
metric = "latency_p99"
unit = "us"
max = 20.0
test = "send_lat"
max_size = 64
"#;

#[test]
fn a_drift_and_a_bad_night_are_flagged_and_a_flat_history_is_not() {
    require("ssh-keygen", "openssh-client");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let profile = write(dir, "nightly.toml", PROFILE);

    // Flat: noise only.
    synth_history::write(&dir.join("flat"), &shape()).unwrap();
    let out = aggregate(dir, &["trend", "flat", "-p", &profile, "-o", "flat-trend"]);
    let (o, e) = text(&out);
    expect_code(&out, 0, "trend of a flat history");
    assert!(
        o.contains("verdict: OK (14 night(s), 0 drift(s), 0 failed, 0 regressed"),
        "{o}\n{e}"
    );
    assert!(
        !o.contains("DRIFT") && !o.contains("REGRESSED") && !o.contains("FAILED"),
        "{o}"
    );
    let html = fs::read_to_string(dir.join("flat-trend/trend.html")).unwrap();
    assert!(html.contains("id=\"no-drift\""));

    // Latency drifting 0.8% a night (never 5% from one night to the next), bandwidth down
    // 30% on night 9 only, node0000 busy with another job on night 11, node0002's link 6%
    // slower from night 5 on (too little to move the fabric's figures).
    let bad = synth_history::night_dir(&shape(), 9);
    let busy = synth_history::night_dir(&shape(), 11);
    synth_history::write(
        &dir.join("history"),
        &Shape {
            latency_drift: 0.008,
            bad_nights: vec![9],
            busy_nights: vec![11],
            weak_node_from: Some(5),
            weak_node_drop: 0.06,
            ..shape()
        },
    )
    .unwrap();
    std::os::unix::fs::symlink(
        synth_history::night_dir(&shape(), 8),
        dir.join("history/last-good"),
    )
    .unwrap();
    expect_code(&aggregate(dir, &["keygen", "k"]), 0, "keygen");
    let out = aggregate(
        dir,
        &["trend", "history", "-p", &profile, "-o", "t", "--sign", "k"],
    );
    let (o, e) = text(&out);
    expect_code(&out, 1, "trend of a drifting history");
    let drift_lines: Vec<&str> = o.lines().filter(|l| l.starts_with("DRIFT")).collect();
    assert!(
        drift_lines
            .iter()
            .any(|l| l.contains("send_lat verbs 2 B latency p99")),
        "{o}\n{e}"
    );
    // The bad night is a bad night, not a drift: nothing but latency drifts.
    assert!(drift_lines.iter().all(|l| l.contains("latency")), "{o}");
    assert!(o.contains(&format!("FAILED     {bad}")), "{o}");
    assert!(
        o.lines()
            .any(|l| l.starts_with("REGRESSED") && l.contains(&bad)),
        "{o}"
    );
    assert_eq!(
        o.lines().filter(|l| l.starts_with("REGRESSED")).count(),
        1,
        "only the bad night regresses:\n{o}"
    );
    assert!(
        o.contains("14 night(s)") && o.contains("1 failed, 1 regressed, 1 disturbed"),
        "{o}"
    );

    let summary: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("t/summary.json")).unwrap()).unwrap();
    let nights = summary["nights"].as_array().unwrap();
    assert_eq!(nights.len(), 14, "last-good is a link, not a night");
    let night = |id: &str| nights.iter().find(|n| n["id"] == id).unwrap();
    assert_eq!(night(&bad)["verdict"], "FAIL");
    assert_eq!(night(&busy)["quality"], "disturbed");
    assert!(night(&busy)["marks"]
        .as_str()
        .unwrap()
        .contains("disturbed"));
    let p99 = summary["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == "send_lat verbs 2 B latency p99")
        .unwrap();
    let d = &p99["drifts"][0];
    assert!(d["change_pct"].as_f64().unwrap() > 5.0, "{d}");
    assert!(p99["bound"]["check"] == "send-lat", "{p99}");
    // The weakened link tops the pairs that got worse than the fabric, its nodes the nodes.
    let pair = &summary["changed_pairs"][0];
    assert_eq!(
        pair["what"], "node0002 <-> node0003",
        "{}",
        summary["changed_pairs"]
    );
    assert!(
        pair["metric"].as_str().unwrap().contains("bw avg"),
        "{pair}"
    );
    // Two pairs in all: the fabric's change is their mean, so the weak one is 3% beyond it.
    assert!(pair["beyond_fabric_pct"].as_f64().unwrap() > 2.0, "{pair}");
    let node = summary["changed_nodes"][0]["what"].as_str().unwrap();
    assert!(
        ["node0002", "node0003"].contains(&node),
        "{}",
        summary["changed_nodes"]
    );
    assert!(!summary["inputs"].as_array().unwrap().is_empty());
    assert!(summary["inputs"][0]["sha256"].as_str().unwrap().len() == 64);

    // Signed like an acceptance report: stock OpenSSH and coreutils verify it.
    let public = fs::read_to_string(dir.join("k.pub")).unwrap();
    fs::write(dir.join("t/allowed_signers"), format!("fabcheck {public}")).unwrap();
    let out = run(
        Command::new("sh")
            .arg("-c")
            .arg("ssh-keygen -Y verify -f allowed_signers -I fabcheck -n fabcheck-report -s MANIFEST.sha256.sig < MANIFEST.sha256 && sha256sum -c --quiet MANIFEST.sha256")
            .current_dir(dir.join("t")),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "verify: {:?}", text(&out));
    let out = aggregate(dir, &["verify", "t", "--key", "k.pub"]);
    expect_code(&out, 0, "aggregate verify of a trend bundle");

    // A window: the bad night's week only.
    let since = &synth_history::night_dir(&shape(), 7)[..10];
    let until = &synth_history::night_dir(&shape(), 10)[..10];
    let out = aggregate(
        dir,
        &[
            "trend", "history", "--since", since, "--until", until, "-o", "w",
        ],
    );
    let (o, _) = text(&out);
    expect_code(&out, 1, "a window holding the bad night");
    assert!(o.contains("4 night(s)"), "{o}");
    assert!(
        !o.contains("DRIFT"),
        "4 nights are too few for a drift: {o}"
    );
    let out = aggregate(
        dir,
        &["trend", "history", "--since", until, "--until", since],
    );
    expect_code(&out, 2, "--since after --until");
    assert!(text(&out).1.contains("after --until"));
    let out = aggregate(
        dir,
        &["trend", "history", "--since", "2030-01-01", "-o", "x"],
    );
    expect_code(&out, 2, "a window with no night");
    let out = aggregate(dir, &["trend", "nightly.toml"]);
    expect_code(&out, 2, "a file instead of a history");
    let out = aggregate(dir, &["trend", "history", "-o", "t"]);
    expect_code(&out, 2, "an existing trend bundle is not overwritten");
}

#[test]
fn the_trend_report_renders_in_chromium_with_its_plots() {
    require("chromium", "chromium");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    synth_history::write(
        &dir.join("h"),
        &Shape {
            nights: 10,
            latency_drift: 0.01,
            ..Shape::default()
        },
    )
    .unwrap();
    let out = aggregate(dir, &["trend", "h", "-o", "t"]);
    expect_code(&out, 1, "trend");
    let page = dir.join("t/trend.html");
    let html = fs::read_to_string(&page).unwrap();
    for needle in ["src=\"http", "href=\"http", "<link", "<script"] {
        assert!(!html.contains(needle), "trend.html contains {needle}");
    }
    let out = chromium(&["--dump-dom"], &page);
    let (dom, err) = text(&out);
    assert!(out.status.success(), "chromium: {err}");
    assert!(dom.contains("<div id=\"verdict\" class=\"verdict FLAGGED\">FLAGGED</div>"));
    assert!(dom.matches("<svg").count() >= 3, "fewer than 3 plots");
    assert!(dom.contains("id=\"plot-distribution\""));
    // The percentile axis of the distribution, as HdrHistogram users read it.
    let at = dom.find("id=\"plot-distribution\"").unwrap();
    for label in ["50%", "90%", "99%", "99.9%"] {
        assert!(dom[at..].contains(label), "distribution lacks {label}");
    }
    let errors = console_errors(&err);
    assert!(errors.is_empty(), "console errors:\n{}", errors.join("\n"));
    let md = fs::read_to_string(dir.join("t/trend.md")).unwrap();
    assert!(
        md.contains("## Slow drifts") && md.contains("(plots/01-"),
        "{md}"
    );
    assert!(Path::new(&dir.join("t/plots/distribution.svg")).is_file());
}
