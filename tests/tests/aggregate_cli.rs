//! `aggregate` from the command line: exit codes, input and profile errors that name the
//! file and the JSON path or TOML key, --skip-bad, MISSING checks, compare, and the
//! Prometheus export checked by the real `promtool`.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

mod aggregate_common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use aggregate_common::*;
use integration::{run, text};
use serde_json::Value;

/// Parses XML with a real parser (Python's), failing the test on malformed output.
fn assert_well_formed_xml(path: &Path) {
    require("python3", "python3");
    let out = run(
        Command::new("python3").args([
            "-c",
            "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])",
            path.to_str().unwrap(),
        ]),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{} is not well-formed XML: {}",
        path.display(),
        text(&out).1
    );
}

#[test]
fn passing_failing_and_missing_verdicts_set_the_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    synth_set(dir, "data", 8, 26);
    let pass = write(dir, "pass.toml", PASSING_PROFILE);
    let out = aggregate(dir, &["report", "data", "-p", &pass, "-o", "r1"]);
    expect_code(&out, 0, "passing profile");
    assert!(text(&out).0.contains("verdict: PASS"));
    assert_well_formed_xml(&dir.join("r1/report.junit.xml"));
    let junit = fs::read_to_string(dir.join("r1/report.junit.xml")).unwrap();
    assert_eq!(
        junit.matches("<testcase ").count(),
        4,
        "one test case per check"
    );
    assert!(!junit.contains("<failure"));
    // Each percentile curve is one size's histogram: the caption counts a curve's samples,
    // not the sum over the sizes drawn.
    let html = fs::read_to_string(dir.join("r1/report.html")).unwrap();
    let caption = html
        .split("Latency by percentile, ")
        .nth(1)
        .map(|c| &c[..c.find('<').unwrap_or(c.len()).min(80)])
        .expect("a percentile plot");
    assert!(
        caption.contains("samples at each") || caption.contains("samples a"),
        "{caption}"
    );

    // A bound the data misses: FAIL, exit 1, the JUnit case fails.
    let fail = write(
        dir,
        "fail.toml",
        &PASSING_PROFILE.replace("max = 20.0", "max = 0.5"),
    );
    let out = aggregate(dir, &["report", "data", "-p", &fail, "-o", "r2"]);
    expect_code(&out, 1, "failing profile");
    let (o, _) = text(&out);
    assert!(o.contains("FAIL") && o.contains("verdict: FAIL"), "{o}");
    let junit = fs::read_to_string(dir.join("r2/report.junit.xml")).unwrap();
    assert_eq!(junit.matches("<failure type=\"FAIL\"").count(), 1);

    // A check nothing measured: MISSING, never PASS.
    let missing = write(
        dir,
        "missing.toml",
        &PASSING_PROFILE.replace(
            "test = \"send_lat\"",
            "test = \"send_lat\"\ntransport = \"tcp\"",
        ),
    );
    let out = aggregate(dir, &["report", "data", "-p", &missing, "-o", "r3"]);
    expect_code(&out, 1, "profile with a check nothing measured");
    let (o, _) = text(&out);
    assert!(o.contains("MISSING") && o.contains("1 missing"), "{o}");
    let md = fs::read_to_string(dir.join("r3/report.md")).unwrap();
    assert!(md.contains("**Verdict: FAIL**") && md.contains("**MISSING**"));
    assert_well_formed_xml(&dir.join("r3/report.junit.xml"));
    // The terminal line names the run that would feed it, not "no data".
    let line = o.lines().find(|l| l.starts_with("MISSING")).unwrap();
    assert!(
        line.contains("bench-lat --pattern all-pairs --test send"),
        "{line}"
    );
    // The banner of a FAIL with nothing failed says so, in its own colour; a real
    // failure keeps the red one.
    let html = fs::read_to_string(dir.join("r3/report.html")).unwrap();
    assert!(
        html.contains("class=\"verdict FAIL unjudged\">FAIL <small>nothing failed; 1 check(s) not judged</small>"),
        "{}",
        &html[html.find("id=\"verdict\"").unwrap()..][..200]
    );
    let failed = fs::read_to_string(dir.join("r2/report.html")).unwrap();
    assert!(failed.contains("class=\"verdict FAIL\">FAIL</div>"));

    // The distribution plot of a chosen test and size; an absent one is a usage error.
    let out = aggregate(
        dir,
        &[
            "report",
            "data",
            "-p",
            &pass,
            "-o",
            "r4",
            "--dist-test",
            "write_lat",
            "--dist-size",
            "4K",
        ],
    );
    expect_code(&out, 0, "--dist-test/--dist-size");
    let html = fs::read_to_string(dir.join("r4/report.html")).unwrap();
    assert!(html.contains("Latency distribution of write_lat verbs 4KiB on the percentile scale"));
    let out = aggregate(
        dir,
        &[
            "report",
            "data",
            "-p",
            &pass,
            "-o",
            "r5",
            "--dist-test",
            "write_lat",
            "--dist-size",
            "3",
        ],
    );
    expect_code(&out, 2, "distribution of a size never measured");
    assert!(text(&out).1.contains("no latency histogram"));

    // An existing report is not overwritten by accident.
    let out = aggregate(dir, &["report", "data", "-p", &pass, "-o", "r1"]);
    expect_code(&out, 2, "report into an existing report directory");
    let out = aggregate(dir, &["report", "data", "-p", &pass, "-o", "r1", "--force"]);
    expect_code(&out, 0, "--force");
}

/// A counter that saturated during the run gives only a lower bound: every format says
/// "at least", and under the bound the check is MISSING (exit 1), not PASS.
#[test]
fn a_saturated_counter_reads_at_least_in_every_format() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::create_dir(dir.join("data")).unwrap();
    let mut doc = synth::bandwidth_doc("node-a", "node-b", &[65536], 90.0, 1);
    if let results::TestResult::Bandwidth(b) = &mut doc.results[0] {
        let side = b.counters.as_mut().unwrap().initiator.as_mut().unwrap();
        side.counters.insert("port_xmit_discards".into(), 0);
        side.at_least.insert("port_xmit_discards".into());
    }
    write(
        dir,
        "data/bw.json",
        &serde_json::to_string_pretty(&doc).unwrap(),
    );
    let profile = write(
        dir,
        "p.toml",
        "name = \"floor\"\ndescription = \"d\"\n[[check]]\nid = \"discards\"\n\
         description = \"no discards\"\nmetric = \"discards\"\nunit = \"packets\"\nmax = 0\n",
    );
    let out = aggregate(dir, &["report", "data", "-p", &profile, "-o", "r"]);
    expect_code(&out, 1, "a check known only as a lower bound");
    assert!(text(&out).0.contains("MISSING"), "{}", text(&out).0);
    let md = fs::read_to_string(dir.join("r/report.md")).unwrap();
    assert!(md.contains("at least 0 packets"), "{md}");
    assert!(md.contains("perfquery -x -R"), "{md}");
    let html = fs::read_to_string(dir.join("r/report.html")).unwrap();
    assert!(html.contains("&ge;&nbsp;0 packets"));
    assert_well_formed_xml(&dir.join("r/report.junit.xml"));
    let junit = fs::read_to_string(dir.join("r/report.junit.xml")).unwrap();
    assert!(
        junit.contains("discards known only as at least 0 packets"),
        "{junit}"
    );
}

#[test]
fn bad_inputs_name_the_file_and_json_path_and_skip_bad_reports_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let data = synth_set(dir, "data", 4, 8);
    let pass = write(dir, "pass.toml", PASSING_PROFILE);
    let good = fs::read_to_string(data.join("bench-lat-send_lat.json")).unwrap();

    // Truncated (a run killed while writing).
    fs::write(data.join("zz-truncated.json"), &good[..good.len() / 3]).unwrap();
    let out = aggregate(dir, &["report", "data", "-p", &pass, "-o", "r"]);
    expect_code(&out, 2, "truncated input");
    let (_, e) = text(&out);
    assert!(
        e.contains("zz-truncated.json") && e.contains("truncated"),
        "{e}"
    );
    assert!(e.contains("--skip-bad"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    fs::remove_file(data.join("zz-truncated.json")).unwrap();

    // A wrong field type deep inside: the JSON path is named.
    let mut v: Value = serde_json::from_str(&good).unwrap();
    v["results"][3]["latency_us"]["p99"] = Value::from("fast");
    fs::write(data.join("zz-wrongtype.json"), v.to_string()).unwrap();
    let out = aggregate(dir, &["report", "data", "-p", &pass, "-o", "r"]);
    expect_code(&out, 2, "wrong field type");
    let (_, e) = text(&out);
    assert!(
        e.contains("zz-wrongtype.json") && e.contains("results[3].latency_us.p99"),
        "{e}"
    );

    // A foreign JSON file and a future schema version.
    fs::write(data.join("zz-foreign.json"), "{\"name\": \"not ours\"}").unwrap();
    let mut v: Value = serde_json::from_str(&good).unwrap();
    v["schema_version"] = Value::from(2);
    fs::write(data.join("zz-future.json"), v.to_string()).unwrap();

    // --skip-bad goes on, says so on stderr-free success and in the report.
    let out = aggregate(
        dir,
        &["report", "data", "-p", &pass, "-o", "r", "--skip-bad"],
    );
    assert!(code(&out) <= 1, "skip-bad run: {:?}", text(&out));
    let md = fs::read_to_string(dir.join("r/report.md")).unwrap();
    assert!(md.contains("3 input file(s) were left out"), "{md}");
    for f in ["zz-wrongtype.json", "zz-foreign.json", "zz-future.json"] {
        assert!(md.contains(f), "{f} not named in the report");
    }
    assert!(md.contains("schema_version"));
    let html = fs::read_to_string(dir.join("r/report.html")).unwrap();
    assert!(html.contains("id=\"skipped\""));

    // No input at all.
    fs::create_dir(dir.join("empty")).unwrap();
    let out = aggregate(dir, &["report", "empty", "-p", &pass, "-o", "r4"]);
    expect_code(&out, 2, "empty input directory");
    assert!(text(&out).1.contains("no result files"));
}

#[test]
fn bad_profiles_name_the_file_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    synth_set(dir, "data", 4, 4);
    for (name, text_, expect) in [
        (
            "unit.toml",
            PASSING_PROFILE.replace("unit = \"us\"", "unit = \"ms\""),
            "check[0].unit",
        ),
        (
            "metric.toml",
            PASSING_PROFILE.replace("latency_p99", "latency_p98"),
            "check[0].metric",
        ),
        (
            "typo.toml",
            PASSING_PROFILE.replace("min_size = \"1M\"", "min_sise = \"1M\""),
            "min_sise",
        ),
        (
            "syntax.toml",
            PASSING_PROFILE.replace("max = 20.0", "max = "),
            "line",
        ),
        (
            "bound.toml",
            PASSING_PROFILE.replace("min = 80.0", "min = 80.0\nmax = 90.0"),
            "check[1]",
        ),
    ] {
        let p = write(dir, name, &text_);
        let out = aggregate(dir, &["report", "data", "-p", &p, "-o", "r"]);
        expect_code(&out, 2, name);
        let (_, e) = text(&out);
        assert!(e.contains(name) && e.contains(expect), "{name}: {e}");
        assert!(
            !dir.join("r/report.html").exists(),
            "{name}: report written anyway"
        );
    }
    let out = aggregate(dir, &["report", "data", "-p", "no-such-profile", "-o", "r"]);
    expect_code(&out, 2, "unknown profile");
    assert!(text(&out).1.contains("roce-100g"), "known profiles listed");
    let out = aggregate(dir, &["report", "data"]);
    expect_code(&out, 2, "usage error");
}

/// Scales every bandwidth figure of a document by `factor`.
fn degrade(path: &Path, factor: f64) {
    let mut v: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    for r in v["results"].as_array_mut().unwrap() {
        let scale = |x: &mut Value| *x = Value::from(x.as_f64().unwrap() * factor);
        scale(&mut r["bw_gbit_s"]["avg"]);
        scale(&mut r["bw_gbit_s"]["peak"]);
        for s in r["interval_gbit_s"].as_array_mut().unwrap() {
            scale(s);
        }
    }
    fs::write(path, v.to_string()).unwrap();
}

#[test]
fn compare_flags_a_real_drop_and_not_the_same_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let base = synth_set(dir, "base", 8, 26);
    let same = dir.join("same");
    copy_tree(&base, &same);
    let out = aggregate(dir, &["compare", "base", "same"]);
    expect_code(&out, 0, "compare a run with itself");
    assert!(text(&out).0.contains("OK: 0 regression(s)"));

    let worse = dir.join("worse");
    copy_tree(&base, &worse);
    degrade(&worse.join("bench-bw-write_bw.json"), 0.8);
    let out = aggregate(dir, &["compare", "base", "worse"]);
    expect_code(&out, 1, "compare with a 20% write_bw drop");
    let (o, _) = text(&out);
    assert!(
        o.contains("write_bw verbs 8MiB bw avg") && o.contains("REGRESSED"),
        "{o}"
    );
    assert!(
        !o.contains("send_bw verbs 8MiB bw avg  ")
            || !o
                .lines()
                .any(|l| l.starts_with("send_bw") && l.contains("REGRESSED"))
    );

    // Markdown and JUnit outputs.
    let out = aggregate(
        dir,
        &[
            "compare", "base", "worse", "--format", "markdown", "-o", "cmp.md",
        ],
    );
    expect_code(&out, 1, "markdown compare");
    let md = fs::read_to_string(dir.join("cmp.md")).unwrap();
    assert!(md.contains("# fabcheck regression check: REGRESSION") && md.contains("**REGRESSED**"));
    let out = aggregate(
        dir,
        &[
            "compare", "base", "worse", "--format", "junit", "-o", "cmp.xml",
        ],
    );
    expect_code(&out, 1, "junit compare");
    assert_well_formed_xml(&dir.join("cmp.xml"));
    let junit = fs::read_to_string(dir.join("cmp.xml")).unwrap();
    assert!(
        junit.matches("<failure type=\"REGRESSION\"").count() >= 20,
        "26 write_bw sizes dropped"
    );

    // A tolerance above the drop silences it.
    let out = aggregate(dir, &["compare", "base", "worse", "--tolerance", "30"]);
    expect_code(&out, 0, "compare with a 30% tolerance");
}

#[test]
fn prometheus_export_passes_promtool() {
    require("promtool", "prometheus");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    synth_set(dir, "data", 8, 6);
    let out = aggregate(
        dir,
        &[
            "export",
            "--format",
            "prometheus",
            "data",
            "--profile",
            "roce-100g",
            "-o",
            "fabcheck.prom",
        ],
    );
    expect_code(&out, 0, "export");
    let prom = fs::read_to_string(dir.join("fabcheck.prom")).unwrap();
    for name in [
        "fabcheck_latency_seconds{",
        "fabcheck_bandwidth_bytes_per_second{",
        "fabcheck_link_loss_ratio{",
        "fabcheck_collective_bus_bandwidth_bytes_per_second{",
        "fabcheck_check_state{",
        "fabcheck_verdict_pass{profile=\"roce-100g\"}",
    ] {
        assert!(prom.contains(name), "{name} missing");
    }
    assert!(prom.contains("initiator=\"node0000:0\",responder=\"node0000:1\""));
    assert!(prom.contains("size_bytes=\"64\""));
    let out = run(
        Command::new("sh")
            .arg("-c")
            .arg("promtool check metrics < fabcheck.prom")
            .current_dir(dir),
        Duration::from_secs(60),
    );
    let (o, e) = text(&out);
    assert!(out.status.success(), "promtool check metrics:\n{o}{e}");
    assert!(
        o.trim().is_empty() && e.trim().is_empty(),
        "promtool lint findings:\n{o}{e}"
    );

    // The control: promtool does reject a broken file, so the check above means something.
    fs::write(
        dir.join("bad.prom"),
        "fabcheck_x{a=\"1\"} 1\nfabcheck_x{a=\"1\"} 2\nnot a metric line\n",
    )
    .unwrap();
    let out = run(
        Command::new("sh")
            .arg("-c")
            .arg("promtool check metrics < bad.prom")
            .current_dir(dir),
        Duration::from_secs(60),
    );
    assert!(!out.status.success(), "promtool accepted a broken file");
}

#[test]
fn templates_can_be_overridden_and_broken_ones_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    synth_set(dir, "data", 4, 4);
    fs::create_dir(dir.join("tpl")).unwrap();
    fs::write(
        dir.join("tpl/report.md"),
        "CUSTOM {{ verdict.overall }} {{ verdict.checks | length }}\n",
    )
    .unwrap();
    let out = aggregate(
        dir,
        &[
            "report",
            "data",
            "-p",
            "loopback-demo",
            "-o",
            "r",
            "--templates",
            "tpl",
        ],
    );
    expect_code(&out, 1, "loopback-demo on verbs data: MISSING");
    assert_eq!(
        fs::read_to_string(dir.join("r/report.md")).unwrap(),
        "CUSTOM FAIL 3\n"
    );
    // The other templates stay the built-in ones.
    assert!(fs::read_to_string(dir.join("r/report.html"))
        .unwrap()
        .contains("id=\"verdict\""));

    fs::write(
        dir.join("tpl/report.md"),
        "{{ verdict.overall | no_such_filter }}",
    )
    .unwrap();
    let out = aggregate(
        dir,
        &[
            "report",
            "data",
            "-p",
            "loopback-demo",
            "-o",
            "r2",
            "--templates",
            "tpl",
        ],
    );
    expect_code(&out, 2, "broken template");
    let (_, e) = text(&out);
    assert!(
        e.contains("tpl/report.md") && e.contains("no_such_filter"),
        "{e}"
    );
}

#[test]
fn markup_in_result_documents_is_escaped_in_the_html() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let data = synth_set(dir, "data", 2, 4);
    let path = data.join("bench-lat-send_lat.json");
    let mut v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    v["command_line"] = serde_json::json!(["bench-lat", "<script>alert(1)</script>"]);
    v["hosts"][0]["hostname"] = Value::from("<img src=x onerror=alert(2)>");
    for r in v["results"].as_array_mut().unwrap() {
        r["transport"] = Value::from("<b>verbs</b>");
    }
    fs::write(&path, v.to_string()).unwrap();
    let out = aggregate(dir, &["report", "data", "-p", "roce-100g", "-o", "r"]);
    assert!(code(&out) <= 1, "{:?}", text(&out));
    let html = fs::read_to_string(dir.join("r/report.html")).unwrap();
    assert!(!html.contains("<script"), "script tag reached the HTML");
    assert!(!html.contains("<img"), "img tag reached the HTML");
    assert!(
        !html.contains("<b>verbs</b>"),
        "markup in a label reached the HTML"
    );
    assert!(html.contains("&lt;script&gt;"), "escaped text expected");
    let junit = fs::read_to_string(dir.join("r/report.junit.xml")).unwrap();
    assert!(!junit.contains("<b>"));
}

/// The binary that signs customer reports carries no test-data generator: the hidden
/// `synth` subcommand is gone and the generator's marker text is not in the executable.
#[test]
fn the_product_binary_has_no_test_data_generator() {
    let dir = tempfile::tempdir().unwrap();
    let out = aggregate(dir.path(), &["synth", "data", "--ranks", "4"]);
    expect_code(&out, 2, "aggregate synth");
    assert!(!dir.path().join("data").exists());
    let exe = std::fs::read(integration::bin("aggregate")).unwrap();
    assert!(
        !String::from_utf8_lossy(&exe).contains(synth::SYNTH_WARNING),
        "the aggregate executable contains the synthetic-data generator"
    );
}
