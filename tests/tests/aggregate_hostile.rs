//! `aggregate` against hostile and broken inputs, run as the real binary under a memory
//! limit and a deadline (issue 13): the corpus in tests/corpus/hostile (deflate bombs,
//! huge counts, overflowing sums, duplicate keys, bad encodings, deep nesting; see
//! tests/corpus/make-hostile.py), a truncation at every offset of a real document, every
//! field of the real documents set to every wrong JSON type, files that are not files,
//! inputs over each ceiling, and signed bundles broken in every way `verify` can meet.
//! Each case must end in exit 2 with a message naming the file, or in a correct report;
//! never a panic, a hang or an out-of-memory death. Peak memory is measured for each run.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

mod aggregate_common;

use std::fs;
use std::path::{Path, PathBuf};

use aggregate_common::*;
use serde_json::Value;

/// Peak resident memory allowed for a run over small inputs (the binary alone takes
/// about 15 MiB; before the limits, one 545 KB bomb took 484 MiB).
const SMALL_RSS_KIB: u64 = 128 << 10;

/// Corpus files that are valid documents with absurd values: a report must come out.
const ACCEPTED: &[&str] = &[
    "dup-map-keys.json",
    "hist-many-2e40.json",
    "num-bandwidth-extremes.json",
    "num-bandwidth-zeros.json",
    "num-collective-overflow.json",
    "num-collective-zeros.json",
    "num-latency-summary-extremes.json",
    "num-u64-max.json",
];

fn real(name: &str) -> PathBuf {
    corpus("real").join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A report that came out whole: every file of the bundle present and readable.
fn assert_report(out: &Path, r: &Limited, what: &str) {
    assert!(
        r.code == 0 || r.code == 1,
        "{what}: not a verdict\n{}",
        r.show()
    );
    assert!(r.stdout.contains("verdict: "), "{what}\n{}", r.show());
    for f in [
        "report.html",
        "report.md",
        "report.junit.xml",
        "summary.json",
    ] {
        assert!(out.join(f).is_file(), "{what}: no {f}\n{}", r.show());
    }
    let summary: Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap())
            .unwrap_or_else(|e| panic!("{what}: summary.json: {e}"));
    assert!(summary["verdict"]["overall"].is_string(), "{what}");
}

/// Exit 2, the message naming the file, memory small.
fn assert_refused(r: &Limited, file: &str, what: &str) {
    assert_eq!(r.code, 2, "{what}: must be refused\n{}", r.show());
    assert!(
        r.stderr.starts_with("aggregate: ") && r.stderr.contains(file),
        "{what}: the message must name {file}\n{}",
        r.show()
    );
}

#[test]
fn every_corpus_file_is_refused_or_reported_within_memory() {
    require("time", "time");
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = {
        let mut v: Vec<PathBuf> = fs::read_dir(corpus("hostile"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        v.sort();
        v
    };
    assert!(files.len() >= 40, "corpus missing: {files:?}");
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        let out = dir.path().join(format!("report-{name}"));
        let report = limited(
            dir.path(),
            &["report", s(f), "--profile", "roce-100g", "--out", s(&out)],
        );
        let export = limited(dir.path(), &["export", s(f), "--profile", "roce-100g"]);
        let compare = limited(dir.path(), &["compare", s(&real("bench-lat.json")), s(f)]);
        for (cmd, r) in [
            ("report", &report),
            ("export", &export),
            ("compare", &compare),
        ] {
            assert!(
                r.max_rss_kib < SMALL_RSS_KIB,
                "{cmd} {name}: {} KiB peak\n{}",
                r.max_rss_kib,
                r.show()
            );
        }
        if ACCEPTED.contains(&name) {
            assert_report(&out, &report, name);
            assert_eq!(export.code, 0, "export {name}\n{}", export.show());
            assert!(export.stdout.contains("fabcheck_"), "{}", export.show());
            assert!([0, 1, 2].contains(&compare.code), "{}", compare.show());
        } else {
            assert_refused(&report, name, &format!("report {name}"));
            assert_refused(&export, name, &format!("export {name}"));
            assert_refused(&compare, name, &format!("compare {name}"));
        }
        // Histogram bombs and bad blobs are named by their JSON path.
        if name.starts_with("hist-") && !ACCEPTED.contains(&name) {
            assert!(
                report.stderr.contains(".histogram`"),
                "{name}: no JSON path\n{}",
                report.show()
            );
        }
    }
}

#[test]
fn a_truncation_at_every_offset_is_refused_and_named() {
    require("time", "time");
    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(real("bench-lat.json")).unwrap();
    let whole = text.trim_end().len();
    let cuts = dir.path().join("cuts");
    fs::create_dir(&cuts).unwrap();
    fs::write(cuts.join("whole.json"), &text).unwrap();
    let mut n = 0;
    for cut in 0..whole {
        if text.is_char_boundary(cut) {
            fs::write(cuts.join(format!("cut-{cut:06}.json")), &text[..cut]).unwrap();
            n += 1;
        }
    }
    // All at once with --skip-bad: every truncation named as skipped, the whole one judged.
    let out = dir.path().join("report");
    let r = limited(
        dir.path(),
        &[
            "report",
            s(&cuts),
            "--skip-bad",
            "--profile",
            "loopback-demo",
            "--out",
            s(&out),
        ],
    );
    assert_report(&out, &r, "truncations");
    let summary: Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let skipped = summary["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), n, "every truncation is skipped");
    assert_eq!(summary["inputs"].as_array().unwrap().len(), 1);
    for sk in skipped {
        let p = sk["problem"].as_str().unwrap();
        assert!(
            p.contains("truncated JSON") || p.contains("not valid JSON"),
            "{sk}"
        );
    }
    for args in [
        vec!["export", s(&cuts), "--skip-bad"],
        vec!["compare", s(&cuts), s(&cuts), "--skip-bad"],
    ] {
        let r = limited(dir.path(), &args);
        assert!(r.code == 0 || r.code == 1, "{args:?}\n{}", r.show());
    }
    // One at a time without --skip-bad, at a spread of offsets: exit 2 naming the file.
    for cut in (0..whole).step_by(whole / 12 + 1) {
        let f = cuts.join(format!("cut-{cut:06}.json"));
        if !f.exists() {
            continue;
        }
        let r = limited(
            dir.path(),
            &["report", s(&f), "--profile", "loopback-demo", "--out", "x"],
        );
        assert_refused(&r, &format!("cut-{cut:06}.json"), "truncation");
    }
}

/// Every JSON pointer of `v` with the value there.
fn pointers(v: &Value, at: String, out: &mut Vec<(String, Value)>) {
    out.push((at.clone(), v.clone()));
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                pointers(x, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pointers(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// A value of every JSON type but the one of `v`.
fn wrong_types(v: &Value) -> Vec<Value> {
    let all = [
        Value::Null,
        Value::Bool(true),
        Value::from(-1),
        Value::from(1.5),
        Value::from("<b>x</b>"),
        Value::Array(vec![]),
        serde_json::json!({}),
    ];
    let kind = |x: &Value| match x {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        Value::Array(_) => 4,
        Value::Object(_) => 5,
    };
    all.into_iter().filter(|w| kind(w) != kind(v)).collect()
}

#[test]
fn every_field_set_to_every_wrong_type_is_refused_with_its_path_or_judged() {
    require("time", "time");
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    fs::create_dir(&docs).unwrap();
    let mut total = 0;
    for name in ["bench-lat.json", "bench-bw.json", "bench-collective.json"] {
        let mut doc: Value =
            serde_json::from_str(&fs::read_to_string(real(name)).unwrap()).unwrap();
        // Two rows are enough to cover every field of a row.
        if let Some(rows) = doc["results"].as_array_mut() {
            rows.truncate(2);
        }
        fs::write(docs.join(format!("good-{name}")), doc.to_string()).unwrap();
        let mut all = Vec::new();
        pointers(&doc, String::new(), &mut all);
        for (ptr, v) in all.iter().filter(|(p, _)| !p.is_empty()) {
            for w in wrong_types(v) {
                let mut m = doc.clone();
                *m.pointer_mut(ptr).unwrap() = w;
                total += 1;
                fs::write(docs.join(format!("m{total:05}.json")), m.to_string()).unwrap();
            }
        }
    }
    assert!(total > 1000, "{total} mutations");
    let out = dir.path().join("report");
    let r = limited(
        dir.path(),
        &[
            "report",
            s(&docs),
            "--skip-bad",
            "--profile",
            "roce-100g",
            "--out",
            s(&out),
        ],
    );
    assert!(r.max_rss_kib < SMALL_RSS_KIB * 2, "{}", r.show());
    assert_report(&out, &r, "mutations");
    let summary: Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let skipped = summary["skipped"].as_array().unwrap();
    let judged = summary["inputs"].as_array().unwrap().len();
    assert_eq!(skipped.len() + judged, total + 3);
    assert!(skipped.len() > total / 2, "most mutations are refused");
    for sk in skipped {
        let p = sk["problem"].as_str().unwrap();
        assert!(
            p.contains("at JSON path `")
                || p.contains("schema_version")
                || p.contains("not a fabcheck result document"),
            "a refusal must say where: {sk}"
        );
    }
    let r = limited(dir.path(), &["export", s(&docs), "--skip-bad"]);
    assert_eq!(r.code, 0, "{}", r.show());
}

/// A document with `n` latency rows of distinct sizes.
fn many_sizes(n: u64) -> String {
    let mut doc: Value =
        serde_json::from_str(&fs::read_to_string(real("bench-lat.json")).unwrap()).unwrap();
    let row = doc["results"][0].clone();
    doc["results"] = (1..=n)
        .map(|size| {
            let mut r = row.clone();
            r["size_bytes"] = size.into();
            r
        })
        .collect();
    doc.to_string()
}

#[test]
fn files_that_are_not_files_and_inputs_over_each_ceiling_are_refused() {
    require("time", "time");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let report = |args: &[&str]| {
        let mut a = vec!["report"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--profile", "roce-100g", "--out", "out", "--force"]);
        limited(d, &a)
    };
    // A FIFO named like a result: refused at once, never opened (it would block).
    let fifos = d.join("fifos");
    fs::create_dir(&fifos).unwrap();
    let fifo = fifos.join("rank0.json");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(st.success());
    let r = report(&[s(&fifos)]);
    assert_refused(&r, "rank0.json", "fifo");
    assert!(r.stderr.contains("not a regular file"), "{}", r.show());
    let r = report(&["/dev/zero"]);
    assert_refused(&r, "/dev/zero", "/dev/zero");
    // A directory that links to itself is walked once.
    let looped = d.join("looped");
    fs::create_dir(&looped).unwrap();
    fs::copy(real("bench-lat.json"), looped.join("lat.json")).unwrap();
    std::os::unix::fs::symlink(&looped, looped.join("again")).unwrap();
    let r = report(&[s(&looped)]);
    assert!(r.code == 0 || r.code == 1, "{}", r.show());
    // 300 MiB (sparse) over the per-file ceiling: refused by its size, never read.
    let big = d.join("big.json");
    fs::File::create(&big).unwrap().set_len(300 << 20).unwrap();
    let r = report(&[s(&big)]);
    assert_refused(&r, "big.json", "big file");
    assert!(r.stderr.contains("--max-input-bytes"), "{}", r.show());
    assert!(r.max_rss_kib < SMALL_RSS_KIB, "{}", r.show());
    // Three files of 40 KiB under a 100 KiB ceiling: each fits, together they do not.
    let three = d.join("three");
    fs::create_dir(&three).unwrap();
    let padded = |name: &str| {
        let mut doc: Value =
            serde_json::from_str(&fs::read_to_string(real("bench-lat.json")).unwrap()).unwrap();
        doc["warnings"] = Value::from(vec!["p".repeat(40 << 10)]);
        fs::write(three.join(name), doc.to_string()).unwrap();
    };
    for n in ["a.json", "b.json", "c.json"] {
        padded(n);
    }
    let r = report(&[s(&three), "--max-input-bytes", "100K"]);
    assert_eq!(r.code, 2, "{}", r.show());
    assert!(r.stderr.contains("inputs total"), "{}", r.show());
    let r = report(&[s(&three), "--max-input-bytes", "1M"]);
    assert!(r.code == 0 || r.code == 1, "{}", r.show());
    // Within the byte ceiling but made of tiny values: over the decoded-memory ceiling.
    let tiny = d.join("tiny.json");
    let mut doc: Value =
        serde_json::from_str(&fs::read_to_string(real("bench-lat.json")).unwrap()).unwrap();
    doc["options"]["z"] = Value::from(vec![0u8; 400_000]);
    fs::write(&tiny, doc.to_string()).unwrap();
    let r = report(&[s(&tiny), "--max-input-bytes", "1M"]);
    assert_eq!(r.code, 2, "{}", r.show());
    assert!(r.stderr.contains("decoded"), "{}", r.show());
    // More latency histogram groups than the ceiling (512).
    let groups = d.join("groups.json");
    fs::write(&groups, many_sizes(600)).unwrap();
    let r = report(&[s(&groups)]);
    assert_eq!(r.code, 2, "{}", r.show());
    assert!(
        r.stderr.contains("latency histogram groups"),
        "{}",
        r.show()
    );
    fs::write(&groups, many_sizes(100)).unwrap();
    let r = report(&[s(&groups)]);
    assert!(r.code == 0 || r.code == 1, "{}", r.show());
    // A grouping name of 300 bytes, and a 2 MiB string.
    let mut doc: Value =
        serde_json::from_str(&fs::read_to_string(real("bench-lat.json")).unwrap()).unwrap();
    doc["results"][0]["test"] = Value::from("t".repeat(300));
    let long = d.join("long-name.json");
    fs::write(&long, doc.to_string()).unwrap();
    let r = report(&[s(&long)]);
    assert_refused(&r, "long-name.json", "long name");
    assert!(r.stderr.contains("results[0].test"), "{}", r.show());
    doc["results"][0]["test"] = Value::from("send_lat");
    doc["warnings"] = Value::from(vec!["w".repeat(2 << 20)]);
    let huge = d.join("huge-string.json");
    fs::write(&huge, doc.to_string()).unwrap();
    let r = report(&[s(&huge)]);
    assert_refused(&r, "huge-string.json", "huge string");
}

/// A signed bundle of the real documents, copied to `name` under `dir`.
fn signed_bundle(dir: &Path, name: &str) -> PathBuf {
    let master = dir.join("master");
    if !master.exists() {
        let out = aggregate(dir, &["keygen", "k"]);
        expect_code(&out, 0, "keygen");
        let out = aggregate(
            dir,
            &[
                "report",
                s(&corpus("real")),
                "--profile",
                "loopback-demo",
                "--out",
                "master",
                "--sign",
                "k",
            ],
        );
        assert!(code(&out) < 2, "{out:?}");
    }
    let b = dir.join(name);
    copy_tree(&master, &b);
    b
}

/// The first input copy listed in a bundle's manifest.
fn first_input(bundle: &Path) -> String {
    fs::read_to_string(bundle.join("MANIFEST.sha256"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once("  ").map(|x| x.1.to_string()))
        .find(|p| p.starts_with("inputs/"))
        .expect("an input copy in the manifest")
}

#[test]
fn verify_meets_broken_bundles_without_hanging_or_ballooning() {
    require("time", "time");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let verify = |b: &Path| limited(d, &["verify", s(b), "--key", "k.pub"]);

    let good = signed_bundle(d, "good");
    let r = verify(&good);
    assert_eq!(r.code, 0, "{}", r.show());

    // A listed input replaced by a link to /dev/zero, another by a FIFO.
    let b = signed_bundle(d, "devzero");
    let f = b.join(first_input(&b));
    fs::remove_file(&f).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &f).unwrap();
    let r = verify(&b);
    assert_eq!(r.code, 1, "{}", r.show());
    assert!(r.stdout.contains("not a regular file"), "{}", r.show());
    let b = signed_bundle(d, "fifo");
    let f = b.join(first_input(&b));
    fs::remove_file(&f).unwrap();
    assert!(std::process::Command::new("mkfifo")
        .arg(&f)
        .status()
        .unwrap()
        .success());
    let r = verify(&b);
    assert_eq!(r.code, 1, "{}", r.show());

    // A 64 MiB input (sparse): hashed as a stream, never held in memory.
    let b = signed_bundle(d, "big");
    let f = b.join(first_input(&b));
    fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let r = verify(&b);
    assert_eq!(r.code, 1, "{}", r.show());
    assert!(r.stdout.contains("content changed"), "{}", r.show());
    assert!(r.max_rss_kib < 48 << 10, "{}", r.show());

    // A manifest of 65 MiB, a manifest listing one file 100,000 times, a manifest that
    // leaves the directory, a manifest that is not text.
    let b = signed_bundle(d, "hugemanifest");
    fs::File::create(b.join("MANIFEST.sha256"))
        .unwrap()
        .set_len(65 << 20)
        .unwrap();
    let r = verify(&b);
    assert_eq!(r.code, 2, "{}", r.show());
    assert!(r.max_rss_kib < SMALL_RSS_KIB, "{}", r.show());
    let b = signed_bundle(d, "dups");
    let line = fs::read_to_string(b.join("MANIFEST.sha256"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    fs::write(
        b.join("MANIFEST.sha256"),
        format!("{line}\n").repeat(100_000),
    )
    .unwrap();
    let r = verify(&b);
    assert_eq!(r.code, 1, "{}", r.show());
    assert!(r.stdout.contains("listed twice"), "{}", r.show());
    let b = signed_bundle(d, "escape");
    fs::write(
        b.join("MANIFEST.sha256"),
        format!(
            "{}  ../../../../etc/passwd\n\u{1b}]0;x\u{7}\n",
            "0".repeat(64)
        ),
    )
    .unwrap();
    let r = verify(&b);
    assert_eq!(r.code, 1, "{}", r.show());
    assert!(
        r.stdout.contains("leaves the report directory"),
        "{}",
        r.show()
    );
    assert!(
        !r.stdout.contains('\u{1b}'),
        "escape sequences reach the terminal"
    );
    let b = signed_bundle(d, "binary");
    fs::write(b.join("MANIFEST.sha256"), [0xff, 0xfe, 0, 1, 2, b'\n']).unwrap();
    let r = verify(&b);
    assert_eq!(r.code, 1, "{}", r.show());

    // Signature and allowed_signers: garbage, and too large to be one.
    let b = signed_bundle(d, "badsig");
    fs::write(
        b.join("MANIFEST.sha256.sig"),
        "-----BEGIN SSH SIGNATURE-----\nAAAA\n",
    )
    .unwrap();
    let r = verify(&b);
    assert_eq!(r.code, 1, "{}", r.show());
    fs::File::create(b.join("MANIFEST.sha256.sig"))
        .unwrap()
        .set_len(2 << 20)
        .unwrap();
    let r = verify(&b);
    assert_eq!(r.code, 2, "{}", r.show());
    let b = signed_bundle(d, "badsigners");
    fs::write(b.join("allowed_signers"), "fabcheck not-a-key <script>\n").unwrap();
    let r = limited(d, &["verify", s(&b)]);
    assert_eq!(r.code, 2, "{}", r.show());

    // A directory link that loops: listed once as an entry, never walked.
    let b = signed_bundle(d, "loop");
    std::os::unix::fs::symlink("..", b.join("plots").join("up")).unwrap();
    let r = verify(&b);
    assert_eq!(r.code, 0, "{}", r.show());
    assert!(
        r.stdout.contains("not covered by the signature: plots/up"),
        "{}",
        r.show()
    );
}
