//! The HTML report opened in a real browser (headless Chromium): it renders, shows the
//! verdict first, carries its plots inline, fetches nothing and logs no console error.

mod aggregate_common;

use std::fs;

use aggregate_common::*;
use integration::text;

#[test]
fn console_error_detection_works() {
    // The control: a page that logs an error must be caught, or the real check proves nothing.
    require("chromium", "chromium");
    let tmp = tempfile::tempdir().unwrap();
    for (name, script) in [
        ("logs.html", "console.error('boom');"),
        ("throws.html", "undefinedFunction();"),
    ] {
        let page = tmp.path().join(name);
        fs::write(
            &page,
            format!("<!DOCTYPE html><html><body><script>{script}</script></body></html>"),
        )
        .unwrap();
        let out = chromium(&["--dump-dom"], &page);
        let (_, err) = text(&out);
        assert!(
            !console_errors(&err).is_empty(),
            "the console-error check saw nothing on {name}:\n{err}"
        );
    }
}

#[test]
fn html_report_renders_in_chromium_with_verdict_plots_and_no_console_errors() {
    require("chromium", "chromium");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    synth_set(dir, "data", 8, 26);
    let profile = write(dir, "pass.toml", PASSING_PROFILE);
    let out = aggregate(dir, &["report", "data", "-p", &profile, "-o", "bundle"]);
    expect_code(&out, 0, "report");
    let page = dir.join("bundle/report.html");
    let html = fs::read_to_string(&page).unwrap();

    // Self-contained: nothing to fetch.
    for needle in [
        "src=\"http",
        "href=\"http",
        "url(http",
        "@import",
        "<link",
        "<script",
    ] {
        assert!(!html.contains(needle), "report.html contains {needle}");
    }
    // The verdict comes before the checks, the checks before the plots and environment.
    let pos = |s: &str| html.find(s).unwrap_or_else(|| panic!("{s} missing"));
    assert!(pos("id=\"verdict\"") < pos("id=\"checks\""));
    assert!(pos("id=\"checks\"") < pos("id=\"plots\""));
    assert!(pos("id=\"plots\"") < pos("id=\"environment\""));
    assert!(pos("id=\"environment\"") < pos("id=\"tables\""));

    let out = chromium(&["--dump-dom"], &page);
    let (dom, err) = text(&out);
    assert!(out.status.success(), "chromium --dump-dom failed:\n{err}");
    assert!(
        dom.contains("<div id=\"verdict\" class=\"verdict PASS\">PASS</div>"),
        "verdict not in the rendered DOM"
    );
    for id in [
        "plot-latency",
        "plot-bandwidth",
        "plot-collective",
        "plot-distribution",
    ] {
        let at = dom
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("{id} missing"));
        assert!(
            dom[at..].trim_start_matches(|c| c != '>').contains("<svg"),
            "{id} has no svg"
        );
    }
    assert!(
        dom.matches("<svg").count() >= 4,
        "fewer than 4 inline SVG plots"
    );
    assert!(
        dom.contains("line rate 100 Gb/s"),
        "bandwidth plot lacks the line rate"
    );
    let errors = console_errors(&err);
    assert!(errors.is_empty(), "console errors:\n{}", errors.join("\n"));

    let shot = dir.join("shot.png");
    let out = chromium(
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,2000",
            "--hide-scrollbars",
        ],
        &page,
    );
    let (_, err) = text(&out);
    assert!(out.status.success(), "screenshot failed:\n{err}");
    let png = fs::read(&shot).expect("screenshot written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    // A blank 1280x2000 page compresses to a few KB; text, tables and plots do not.
    assert!(
        png.len() > 60_000,
        "screenshot looks empty ({} bytes)",
        png.len()
    );
    if let Ok(keep) = std::env::var("FABCHECK_KEEP_SCREENSHOT") {
        fs::copy(&shot, keep).unwrap();
    }
}

#[test]
fn matrix_heatmaps_and_suspects_render_in_chromium() {
    require("chromium", "chromium");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // 200 nodes: beyond the vector limit, so the heatmap is one pixel per pair.
    let out = integration::run(
        std::process::Command::new(integration::bin("synth"))
            .current_dir(dir)
            .args(["sweep", "sweep.json", "--nodes", "200", "--rails", "1"])
            .args(["--bad-node", "17"]),
        std::time::Duration::from_secs(120),
    );
    assert!(out.status.success(), "synth sweep: {:?}", text(&out));
    let profile = write(
        dir,
        "m.toml",
        "name = \"m\"\n[[check]]\nid = \"no-suspect\"\ndescription = \"no suspect\"\n\
         metric = \"suspects\"\nunit = \"suspects\"\nmax = 0\n",
    );
    let out = aggregate(
        dir,
        &["report", "sweep.json", "-p", &profile, "-o", "bundle"],
    );
    expect_code(&out, 1, "report names the suspect");
    assert!(
        text(&out).0.contains("SUSPECT  node node0017"),
        "{:?}",
        text(&out)
    );
    let page = dir.join("bundle/report.html");
    let out = chromium(&["--dump-dom"], &page);
    let (dom, err) = text(&out);
    assert!(out.status.success(), "chromium --dump-dom failed:\n{err}");
    let at = dom.find("id=\"matrix\"").expect("matrix section rendered");
    let section = &dom[at..];
    assert!(section.contains("<td><strong>node</strong> <code>node0017</code>"));
    assert!(section.contains("<figure class=\"heatmap\"><svg"));
    assert!(section.contains("<image") && section.contains("data:image/png;base64,"));
    assert!(section.contains("suspect node0017"), "axis marks");
    let errors = console_errors(&err);
    assert!(errors.is_empty(), "console errors:\n{}", errors.join("\n"));
    // The heatmap file alone, as an SVG document: Chromium refuses malformed XML.
    let svg = dir.join("bundle/plots/matrix-01.svg");
    let out = chromium(&["--dump-dom"], &svg);
    let (dom, _) = text(&out);
    assert!(out.status.success());
    assert!(
        !dom.contains("This page contains the following errors"),
        "{dom}"
    );
}
