//! One hostile corpus through every output format (issue 13): every string of the real
//! documents (host names, devices, command lines, warnings, test and transport names,
//! versions, timestamps), the input file names, the profile (name, description, check ids
//! and descriptions) and the report title are set to markup, Markdown syntax, control
//! characters and template syntax; then every output is read back by a real parser: the
//! HTML by Python's HTML parser, the Markdown rendered by `cmark-gfm` (GitHub's renderer,
//! raw HTML allowed so injected tags would show) and read the same way, JUnit and SVG by an
//! XML parser, the Prometheus export by `promtool` and a label parser. Each string must
//! appear whole, as text, and nothing may appear that the template did not write.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

mod aggregate_common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use aggregate_common::*;
use integration::{run, text};
use serde_json::Value;

/// The hostile corpus: what a compromised node or a careless script could put in a name.
const HOSTILE: &[&str] = &[
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "\"><svg onload=alert(3)>",
    "' onmouseover='alert(4)",
    "| injected | cell |",
    "# heading",
    "## sub heading",
    "[link](javascript:alert(5))",
    "![image](http://evil.example/x.png)",
    "`code` ``double``",
    "```",
    "*emphasis* _under_ ~~struck~~",
    "<!-- comment -->",
    "&lt;b&gt; &amp; &#x3C;",
    "line one\nline two\n# heading after a break",
    "cr\r\n| row | injected |",
    "]]><![CDATA[x",
    "ctl\u{1}\u{1b}[31mred",
    "quote\" back\\slash",
    "{{ 7 * 7 }} {% raw %}",
    "$x^2$ math",
    "http://evil.example/path",
    "www.evil.example",
    "- list item",
    "1. ordered",
    "> quoted",
    "---",
    "    indented code",
    "\\",
    "<a href=\"http://evil.example\">click</a>",
    "<style>body{display:none}</style>",
    "snow \u{2603} and tab\there",
    "<iframe src=//evil.example>",
    "node-01.example.com",
];

/// Every string of `v` but the tag and the histograms set to `to`.
fn poison(v: &mut Value, to: &str, key: &str) {
    match v {
        Value::String(s) if key != "kind" && key != "histogram" => *s = to.to_string(),
        Value::Array(a) => a.iter_mut().for_each(|x| poison(x, to, key)),
        Value::Object(m) => m.iter_mut().for_each(|(k, x)| poison(x, to, k)),
        _ => {}
    }
}

/// One directory of documents whose strings are each of `strings`, named after them.
fn documents(dir: &Path, strings: &[&str]) {
    fs::create_dir_all(dir).unwrap();
    for (i, h) in strings.iter().enumerate() {
        for tool in ["bench-lat", "bench-bw", "bench-collective"] {
            let text = fs::read_to_string(corpus("real").join(format!("{tool}.json"))).unwrap();
            let mut doc: Value = serde_json::from_str(&text).unwrap();
            doc["results"].as_array_mut().unwrap().truncate(2);
            poison(&mut doc, h, "");
            doc["complete"] = false.into();
            doc["incomplete_reason"] = (*h).into();
            doc["warnings"] = Value::from(vec![*h]);
            // The file name carries the string too, as far as a file name can.
            let name: String = h.replace(['/', '\0'], "_").chars().take(60).collect();
            fs::write(
                dir.join(format!("{i:02}-{tool}-{name}.json")),
                doc.to_string(),
            )
            .unwrap();
        }
    }
}

/// A profile whose texts and ids are the strings; each check selects that string's test.
fn profile(path: &Path, strings: &[&str]) {
    let q = |s: &str| serde_json::to_string(s).unwrap();
    let mut t = format!(
        "name = {}\ndescription = {}\nline_rate_gbit_s = 100.0\n",
        q(strings[0]),
        q(&strings.join(" / "))
    );
    for h in strings {
        t.push_str(&format!(
            "\n[[check]]\nid = {}\ndescription = {}\nmetric = \"latency_p99\"\nunit = \"us\"\nmax = 1e9\ntest = {}\n",
            q(&format!("id {h}")),
            q(h),
            q(h)
        ));
    }
    fs::write(path, t).unwrap();
}

fn check(mode: &str, file: &Path, strings: &[&str], dir: &Path) -> String {
    let list = dir.join(format!("strings-{}.json", strings.len()));
    fs::write(&list, serde_json::to_string(strings).unwrap()).unwrap();
    let out = run(
        Command::new("python3")
            .arg(corpus("check-rendered.py"))
            .args([mode, file.to_str().unwrap(), list.to_str().unwrap()]),
        Duration::from_secs(120),
    );
    let (o, e) = text(&out);
    assert!(
        out.status.success(),
        "{} ({mode}) lets input through as markup or loses it:\n{o}{e}",
        file.display()
    );
    e
}

/// Markdown rendered the way GitHub does (tables, autolinks, strikethrough), raw HTML
/// kept so that any that got through shows up as elements.
fn render_markdown(md: &Path) -> std::path::PathBuf {
    let out = run(
        Command::new("cmark-gfm")
            .args([
                "--unsafe",
                "-e",
                "table",
                "-e",
                "autolink",
                "-e",
                "strikethrough",
            ])
            .arg(md),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{out:?}");
    let html = md.with_extension("md.html");
    fs::write(&html, &out.stdout).unwrap();
    html
}

/// Label values of a Prometheus text file, unescaped.
fn label_values(prom: &str) -> Vec<String> {
    let mut vals = Vec::new();
    for line in prom.lines().filter(|l| !l.starts_with('#')) {
        let Some(open) = line.find('{') else { continue };
        let mut chars = line[open + 1..].chars();
        let mut in_value = false;
        let mut cur = String::new();
        while let Some(c) = chars.next() {
            match (in_value, c) {
                (false, '"') => in_value = true,
                (false, '}') => break,
                (false, _) => {}
                (true, '\\') => match chars.next() {
                    Some('n') => cur.push('\n'),
                    Some(x) => cur.push(x),
                    None => break,
                },
                (true, '"') => {
                    vals.push(std::mem::take(&mut cur));
                    in_value = false;
                }
                (true, x) => cur.push(x),
            }
        }
    }
    vals
}

#[test]
fn hostile_strings_stay_text_in_every_format() {
    require("cmark-gfm", "cmark-gfm");
    require("python3", "python3");
    require("promtool", "prometheus");
    require("time", "time");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    documents(&d.join("hostile"), HOSTILE);
    documents(&d.join("benign"), &["benign"]);
    profile(&d.join("hostile.toml"), HOSTILE);
    profile(&d.join("benign.toml"), &["benign"]);
    expect_code(&aggregate(d, &["keygen", "key"]), 0, "keygen");

    let report = |data: &str, prof: &str, title: &str| {
        let r = limited(
            d,
            &[
                "report",
                data,
                "--profile",
                prof,
                "--title",
                title,
                "--out",
                &format!("report-{data}"),
                "--sign",
                "key",
            ],
        );
        assert!(r.code == 0 || r.code == 1, "{}", r.show());
        assert!(
            !r.stdout.contains('\u{1b}'),
            "escape sequence on the terminal"
        );
        d.join(format!("report-{data}"))
    };
    let hostile = report("hostile", "hostile.toml", HOSTILE[1]);
    let benign = report("benign", "benign.toml", "benign");

    // HTML and Markdown: every string whole, as text; no element from an input, and no
    // heading more than the template writes.
    check("html", &hostile.join("report.html"), HOSTILE, d);
    let headings = |e: &str| -> u64 {
        let v: Value = serde_json::from_str(e.lines().last().unwrap()).unwrap();
        v["headings"].as_u64().unwrap()
    };
    let md_h = headings(&check(
        "html",
        &render_markdown(&hostile.join("report.md")),
        HOSTILE,
        d,
    ));
    let md_b = headings(&check(
        "html",
        &render_markdown(&benign.join("report.md")),
        &["benign"],
        d,
    ));
    assert_eq!(md_h, md_b, "headings from an input in report.md");
    // JUnit: well-formed, JUnit elements only; the profile's texts and the ids whole.
    let ids: Vec<String> = HOSTILE.iter().map(|h| format!("id {h}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    check("xml", &hostile.join("report.junit.xml"), &ids, d);
    check("xml", &hostile.join("report.junit.xml"), HOSTILE, d);
    for e in fs::read_dir(hostile.join("plots")).unwrap() {
        check("svg", &e.unwrap().path(), &[], d);
    }
    // File names of the input copies: plain characters only, and sha256sum agrees.
    for e in fs::read_dir(hostile.join("inputs")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
            "{name:?}"
        );
    }
    let out = run(
        Command::new("sha256sum")
            .args(["-c", "--quiet", "MANIFEST.sha256"])
            .current_dir(&hostile),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{out:?}");

    // Prometheus: promtool accepts it, and every string comes back as a label value.
    let r = limited(
        d,
        &[
            "export",
            "hostile",
            "--profile",
            "hostile.toml",
            "-o",
            "h.prom",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.show());
    let out = run(
        Command::new("sh")
            .arg("-c")
            .arg("promtool check metrics < h.prom")
            .current_dir(d),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "promtool: {out:?}");
    let values = label_values(&fs::read_to_string(d.join("h.prom")).unwrap());
    for h in HOSTILE {
        let want: String = h
            .chars()
            .map(|c| {
                if c.is_control() && c != '\n' {
                    '\u{fffd}'
                } else {
                    c
                }
            })
            .collect();
        assert!(values.contains(&want), "label value {want:?} missing");
    }

    // compare: Markdown and JUnit read back the same way; text has no escape sequence.
    for (format, file) in [("markdown", "c.md"), ("junit", "c.xml"), ("text", "c.txt")] {
        let r = limited(
            d,
            &[
                "compare", "hostile", "hostile", "--format", format, "-o", file,
            ],
        );
        assert!(r.code == 0 || r.code == 1, "{}", r.show());
    }
    let tests: Vec<&str> = HOSTILE.to_vec();
    check("html", &render_markdown(&d.join("c.md")), &tests, d);
    check("xml", &d.join("c.xml"), &tests, d);
    assert!(!fs::read_to_string(d.join("c.txt"))
        .unwrap()
        .contains('\u{1b}'));
}
