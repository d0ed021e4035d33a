//! Property tests: random, truncated and mutated JSON and TOML must give errors, never
//! panics, and whatever parses must survive the whole pipeline (tables, judging, plots,
//! Prometheus export) without panicking either.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use proptest::prelude::*;
use reports::export::{ExportData, Exporter};
use reports::plots;
use serde_json::Value;
use verdict::error::Error;
use verdict::input::{parse_document, Loaded};
use verdict::{judge, profile, tables};

fn valid_docs() -> &'static [String] {
    static DOCS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    DOCS.get_or_init(|| {
        vec![
            serde_json::to_string(&synth::latency_doc("a", "b", &[2, 64], 3.0, 1)).unwrap(),
            serde_json::to_string(&synth::bandwidth_doc("a", "b", &[4096, 65536], 20.0, 2))
                .unwrap(),
            serde_json::to_string(&synth::collective_doc(4, &[1024, 1 << 20], 10.0, 100.0, 3))
                .unwrap(),
        ]
    })
}

/// Runs everything downstream of parsing on one document.
fn pipeline(text: &str) {
    let Ok(loaded) = Loaded::from_text("fuzz.json", text) else {
        return;
    };
    let set = verdict::input::InputSet::of(vec![loaded]);
    let docs = &set.docs;
    let p = profile::load("roce-100g").unwrap();
    let t = tables::build(&set, p.line_rate_gbit_s);
    let v = judge::judge(&p, docs, &t);
    let _ = plots::draw_all(&t, p.line_rate_gbit_s, None);
    let _ = reports::export::prometheus::Prometheus
        .serialize(&ExportData {
            docs,
            verdict: Some(&v),
            tenants: None,
        })
        .unwrap();
}

/// Replaces the value at a pseudo-random position of a JSON tree.
fn mutate(v: &mut Value, pick: &mut u64, replacement: &Value) -> bool {
    *pick = pick
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    match v {
        Value::Object(m) => {
            let n = m.len() as u64;
            if n == 0 {
                return false;
            }
            let i = (*pick >> 33) % n;
            let key = m.keys().nth(i as usize).unwrap().clone();
            let child = m.get_mut(&key).unwrap();
            if (*pick >> 20).is_multiple_of(3) || !mutate(child, pick, replacement) {
                *child = replacement.clone();
            }
            true
        }
        Value::Array(a) => {
            if a.is_empty() {
                return false;
            }
            let i = ((*pick >> 33) % a.len() as u64) as usize;
            if (*pick >> 20).is_multiple_of(3) || !mutate(&mut a[i], pick, replacement) {
                a[i] = replacement.clone();
            }
            true
        }
        _ => false,
    }
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e300f64..1e300).prop_map(Value::from),
        Just(Value::from(0.0)),
        Just(Value::from(-1.0)),
        ".{0,12}".prop_map(Value::from),
        Just(Value::Array(vec![])),
        Just(serde_json::json!({})),
    ]
}

proptest! {
    // The pipeline (tables, judging, SVG plots, export) is slow in debug builds: fewer
    // cases per run, and every run draws new ones.
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_are_an_error_not_a_panic(s in ".{0,400}") {
        pipeline(&s);
        prop_assert!(parse_document(&s).is_err());
    }

    #[test]
    fn every_truncation_is_an_error(which in 0usize..3, frac in 0.0f64..1.0) {
        let text = &valid_docs()[which];
        let mut cut = ((text.len() as f64) * frac) as usize;
        while !text.is_char_boundary(cut) { cut -= 1; }
        let r = parse_document(&text[..cut]);
        prop_assert!(r.is_err());
    }

    #[test]
    fn mutated_documents_never_panic(which in 0usize..3, seed in any::<u64>(), leaf in json_leaf()) {
        let mut v: Value = serde_json::from_str(&valid_docs()[which]).unwrap();
        let mut pick = seed;
        mutate(&mut v, &mut pick, &leaf);
        let text = v.to_string();
        pipeline(&text);
        if let Err(e) = parse_document(&text) {
            prop_assert!(!e.is_empty());
        }
    }

    #[test]
    fn random_toml_is_an_error_not_a_panic(s in ".{0,300}") {
        // A profile needs a name and a complete [[check]]: random text never is one, and
        // the error is a profile error that names the file.
        match profile::parse(&s, "fuzz.toml") {
            Err(Error::Profile(m)) => prop_assert!(m.starts_with("fuzz.toml: "), "{m}"),
            Err(other) => prop_assert!(false, "not a profile error: {other:?}"),
            Ok(p) => prop_assert!(false, "random text parsed as profile {:?}", p.name),
        }
    }

    #[test]
    fn truncated_and_mutated_profiles_never_panic(frac in 0.0f64..1.0, junk in "[a-z_=\\[\\]\"0-9. \n-]{0,40}") {
        let text = include_str!("../../../profiles/roce-100g.toml");
        let mut cut = ((text.len() as f64) * frac) as usize;
        while !text.is_char_boundary(cut) { cut -= 1; }
        let spliced = format!("{}{}{}", &text[..cut], junk, &text[cut..]);
        match profile::parse(&spliced, "fuzz.toml") {
            Ok(p) => prop_assert!(!p.checks.is_empty()),
            Err(e) => prop_assert!(e.to_string().contains("fuzz.toml")),
        }
        let _ = profile::parse(&text[..cut], "fuzz.toml");
    }
}
