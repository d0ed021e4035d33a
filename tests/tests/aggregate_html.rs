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
