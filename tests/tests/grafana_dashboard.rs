//! `deploy/grafana/fabcheck.json` against a real export: `aggregate export` of a
//! nightly result set, then every query of the dashboard (panels and template variables)
//! must name only metrics and labels the export holds, parse under `promtool`, and return
//! data from the export (evaluated by `promtool test rules`), with the template variables
//! set to "All" and to a real value each. Controls prove each check can fail.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

mod aggregate_common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use aggregate_common::*;
use integration::{run, text};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Metric name -> label name -> values, from the exposition text.
type Export = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// One sample of the exposition text: metric name, labels, value.
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: String,
}

fn parse_line(line: &str) -> Option<Sample> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let (name, labels) = match series.split_once('{') {
        Some((n, rest)) => (n, rest.strip_suffix('}')?),
        None => (series, ""),
    };
    let mut out = Vec::new();
    let mut rest = labels;
    while let Some((k, v)) = rest.split_once("=\"") {
        // Values in our export hold no escaped quote.
        let (val, tail) = v.split_once('"')?;
        out.push((k.trim_start_matches(',').to_string(), val.to_string()));
        rest = tail;
    }
    Some(Sample {
        name: name.to_string(),
        labels: out,
        value: value.to_string(),
    })
}

fn parse_export(text: &str) -> Export {
    let mut e = Export::new();
    for line in text.lines() {
        if let Some(Sample { name, labels, .. }) = parse_line(line) {
            let m = e.entry(name).or_default();
            for (k, v) in labels {
                m.entry(k).or_default().insert(v);
            }
        }
    }
    e
}

/// Metric and label names a PromQL query refers to.
#[derive(Debug, Default, PartialEq)]
struct Refs {
    metrics: BTreeSet<String>,
    labels: BTreeSet<String>,
}

/// Keywords followed by a parenthesised list of label names.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Every other keyword: never a metric name.
const KEYWORDS: &[&str] = &["bool", "and", "or", "unless", "offset", "inf", "nan"];

/// Aggregation operators: `max by (x) (...)` puts the label list before the parenthesis.
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];

fn refs(query: &str) -> Refs {
    // String literals hold values and regexes, never names.
    let mut q = String::new();
    let mut in_str = false;
    let mut prev = ' ';
    for c in query.chars() {
        if c == '"' && prev != '\\' {
            in_str = !in_str;
            q.push('"');
        } else if !in_str {
            q.push(c);
        }
        prev = c;
    }
    let b: Vec<char> = q.chars().collect();
    let mut r = Refs::default();
    let mut i = 0;
    let mut in_braces = false;
    let mut label_list_depth: Option<usize> = None;
    let mut depth = 0usize;
    let next_non_space = |mut j: usize| {
        while j < b.len() && b[j].is_whitespace() {
            j += 1;
        }
        j
    };
    while i < b.len() {
        let c = b[i];
        match c {
            '{' => in_braces = true,
            '}' => in_braces = false,
            '(' => depth += 1,
            ')' => {
                if label_list_depth == Some(depth) {
                    label_list_depth = None;
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '_' || b[i] == ':') {
                i += 1;
            }
            let word: String = b[start..i].iter().collect();
            // An exponent of a number (1e11) is not a name.
            if start > 0 && b[start - 1].is_ascii_digit() {
                continue;
            }
            let j = next_non_space(i);
            let next = b.get(j).copied().unwrap_or(' ');
            if in_braces || label_list_depth.is_some() {
                r.labels.insert(word);
            } else if LABEL_LISTS.contains(&word.as_str()) {
                if next == '(' {
                    label_list_depth = Some(depth + 1);
                }
            } else if KEYWORDS.contains(&word.as_str()) {
            } else if next != '(' && !AGGREGATIONS.contains(&word.as_str()) {
                r.metrics.insert(word);
            }
            continue;
        }
        i += 1;
    }
    r
}

/// Problems of one query against the export: unknown metrics, labels no referenced
/// metric carries.
fn problems(query: &str, export: &Export) -> Vec<String> {
    let r = refs(query);
    let mut out = Vec::new();
    let mut known_labels = BTreeSet::new();
    for m in &r.metrics {
        match export.get(m) {
            Some(labels) => known_labels.extend(labels.keys().cloned()),
            None => out.push(format!("metric {m} is not in the export")),
        }
    }
    if r.metrics.is_empty() {
        out.push("names no metric".into());
    }
    for l in &r.labels {
        if !known_labels.contains(l) {
            out.push(format!("label {l} is on none of {:?}", r.metrics));
        }
    }
    out
}

/// Every panel query of the dashboard (rows' nested panels included), with its panel.
fn panel_queries(dash: &Value) -> Vec<(String, String)> {
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for p in panels.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    out.push((
                        p["title"].as_str().unwrap_or("?").to_string(),
                        e.to_string(),
                    ));
                }
            }
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dash["panels"], &mut out);
    out
}

/// A template variable: its name, `label_values(metric{...}, label)`, its regex.
struct Var {
    name: String,
    metric_query: String,
    label: String,
    regex: String,
}

fn variables(dash: &Value) -> Vec<Var> {
    let mut out = Vec::new();
    for v in dash["templating"]["list"].as_array().unwrap() {
        if v["type"] == "datasource" {
            continue;
        }
        assert_eq!(v["type"], "query", "variable {} is not a query", v["name"]);
        let q = v["query"]["query"]
            .as_str()
            .or_else(|| v["query"].as_str())
            .unwrap();
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|s| s.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable {} is not label_values(...): {q}", v["name"]));
        let (metric_query, label) = inner.rsplit_once(',').unwrap();
        out.push(Var {
            name: v["name"].as_str().unwrap().to_string(),
            metric_query: metric_query.trim().to_string(),
            label: label.trim().to_string(),
            regex: v["regex"].as_str().unwrap_or("").to_string(),
        });
    }
    out
}

/// `query` with every `$var`, `${var}` and `${var:fmt}` replaced by `value(var)`.
fn substitute(query: &str, value: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = query;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, len) = if let Some(body) = after.strip_prefix('{') {
            let end = body.find('}').expect("closing brace");
            (body[..end].split(':').next().unwrap(), end + 2)
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        out.push_str(&value(name));
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

fn promtool_sh(cmd: &str, dir: &Path) -> Output {
    run(
        Command::new("sh").arg("-c").arg(cmd).current_dir(dir),
        Duration::from_secs(300),
    )
}

/// A promtool unit-test file: the export as input series, and for each query a test that
/// it returns at least one sample.
fn eval_file(rules: &str, export_text: &str, queries: &[String]) -> String {
    let mut s = format!("rule_files:\n  - {rules}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n");
    for line in export_text.lines() {
        if let Some(Sample {
            name,
            labels,
            value,
        }) = parse_line(line)
        {
            let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            let series = format!("{name}{{{}}}", l.join(","));
            s.push_str(&format!(
                "      - series: '{}'\n        values: '{}'\n",
                series.replace('\'', "''"),
                [value.as_str(); 12].join(" ")
            ));
        }
    }
    s.push_str("    promql_expr_test:\n");
    for q in queries {
        s.push_str(&format!(
            "      - expr: 'count({}) > bool 0'\n        eval_time: 10m\n        exp_samples:\n          - labels: '{{}}'\n            value: 1\n",
            q.replace('\'', "''")
        ));
    }
    s
}

#[test]
fn every_dashboard_query_parses_and_reads_what_the_export_writes() {
    require("promtool", "prometheus");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // One night of the nightly job, every tool: latency, bandwidth with counters,
    // collectives, quality records.
    let shape = synth::history::Shape {
        nights: 1,
        ..Default::default()
    };
    synth::history::write(&dir.join("history"), &shape).unwrap();
    let night = dir
        .join("history")
        .join(synth::history::night_dir(&shape, 0));
    let out = aggregate(
        dir,
        &[
            "export",
            night.join("results").to_str().unwrap(),
            "--profile",
            "roce-100g",
            "-o",
            "fabcheck.prom",
        ],
    );
    expect_code(&out, 0, "export");
    let mut export_text = fs::read_to_string(dir.join("fabcheck.prom")).unwrap();
    // The live panels read the agents' --metrics: a scrape of a node with a ConnectX port
    // (fabric-doctor's healthy capture: mlx5 ethtool -S names, ethtool 6.1), as the
    // agent's own exposition writes it, named as a node of the export so that $node
    // selects both.
    let node = parse_export(&export_text)["fabcheck_bandwidth_bytes_per_second"]["initiator"]
        .iter()
        .next()
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .to_string();
    let capture = repo().join("fabric-doctor/tests/captures/healthy");
    let live = agents::metrics::exposition(
        &node,
        &Default::default(),
        &agents::metrics::Node::Capture(capture),
    );
    for want in [
        "counter=\"rx_prio3_pause\"",
        "fabcheck_rdma_port_active{",
        "source=\"ethtool\"} 1",
    ] {
        assert!(
            live.contains(want),
            "{want} not in the capture's scrape:\n{live}"
        );
    }
    export_text.push_str(&live);
    let export = parse_export(&export_text);

    let dash: Value = serde_json::from_str(
        &fs::read_to_string(repo().join("deploy/grafana/fabcheck.json")).unwrap(),
    )
    .unwrap();
    // Shape: unique panel ids, every panel placed and on the dashboard's data source.
    let mut ids = BTreeSet::new();
    for p in dash["panels"].as_array().unwrap() {
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "duplicate id {}",
            p["id"]
        );
        assert!(
            p["gridPos"]["w"].as_u64().is_some(),
            "{} unplaced",
            p["title"]
        );
        if p["type"] != "row" {
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        }
    }
    let queries = panel_queries(&dash);
    assert!(queries.len() >= 10, "only {} queries", queries.len());
    let vars = variables(&dash);

    // Names: every metric and label a query or a variable uses is in the export.
    let mut bad = Vec::new();
    for (panel, q) in &queries {
        for p in problems(&substitute(q, &|_| ".*".into()), &export) {
            bad.push(format!("panel {panel}: {p}\n  {q}"));
        }
    }
    let mut concrete: BTreeMap<String, String> = BTreeMap::new();
    for v in &vars {
        let mq = substitute(&v.metric_query, &|_| ".*".into());
        for p in problems(&mq, &export) {
            bad.push(format!("variable {}: {p}", v.name));
        }
        let metric = refs(&mq).metrics.into_iter().next().unwrap_or_default();
        let Some(values) = export.get(&metric).and_then(|m| m.get(&v.label)) else {
            bad.push(format!(
                "variable {}: label {} not on {metric}",
                v.name, v.label
            ));
            continue;
        };
        let first = values.iter().next().cloned().unwrap_or_default();
        let value = match v.regex.as_str() {
            "" => first,
            "/^([^:]+)/" => first.split(':').next().unwrap().to_string(),
            other => panic!(
                "variable {}: this test does not know the regex {other}",
                v.name
            ),
        };
        concrete.insert(v.name.clone(), value);
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));

    // Parse and evaluate: with every variable "All" (.*), and with each set to a value the
    // export has.
    let all: Vec<String> = queries
        .iter()
        .map(|(_, q)| substitute(q, &|_| ".*".into()))
        .collect();
    let one: Vec<String> = queries
        .iter()
        .map(|(_, q)| {
            substitute(q, &|name| {
                concrete
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| panic!("unknown variable ${name} in {q}"))
            })
        })
        .collect();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, q) in all.iter().chain(&one).enumerate() {
        rules.push_str(&format!(
            "      - record: dashboard_query_{i}\n        expr: '{}'\n",
            q.replace('\'', "''")
        ));
    }
    fs::write(dir.join("queries.yml"), &rules).unwrap();
    let out = promtool_sh("promtool check rules queries.yml 2>&1", dir);
    assert!(
        out.status.success(),
        "a query does not parse:\n{}",
        text(&out).0
    );
    let evals: Vec<String> = all.iter().chain(&one).cloned().collect();
    fs::write(
        dir.join("eval.yml"),
        eval_file("queries.yml", &export_text, &evals),
    )
    .unwrap();
    if let Ok(keep) = std::env::var("FABCHECK_KEEP_DASHBOARD_TEST") {
        let _ = fs::remove_dir_all(&keep);
        aggregate_common::copy_tree(dir, Path::new(&keep));
    }
    let out = promtool_sh("promtool test rules eval.yml 2>&1", dir);
    assert!(
        out.status.success(),
        "a query returns nothing from the export:\n{}",
        text(&out).0
    );

    // Controls: a misspelt metric, a label no metric has, a query returning nothing.
    assert!(!problems("fabcheck_latency_second{percentile=\"p99\"}", &export).is_empty());
    assert!(!problems("fabcheck_latency_seconds{pair=\"a\"}", &export).is_empty());
    assert!(!problems("sum by (node) (fabcheck_latency_seconds)", &export).is_empty());
    assert!(problems("sum by (initiator) (fabcheck_latency_seconds)", &export).is_empty());
    fs::write(
        dir.join("control.yml"),
        eval_file(
            "queries.yml",
            &export_text,
            &["fabcheck_latency_seconds{percentile=\"p98\"}".to_string()],
        ),
    )
    .unwrap();
    let out = promtool_sh("promtool test rules control.yml 2>&1", dir);
    assert!(
        !out.status.success(),
        "an empty query passed the evaluation:\n{}",
        text(&out).0
    );
}

#[test]
fn names_are_read_out_of_promql() {
    let r = refs(
        "max without (side) (fabcheck_cpu_busy_cores{test=~\"a|b\", transport!=\"tcp\"}) / on (tool, size_bytes) group_left(x) (fabcheck_bandwidth_bytes_per_second{stat=\"avg\"} * 8 / 1e11) > bool 0",
    );
    assert_eq!(
        r.metrics,
        [
            "fabcheck_bandwidth_bytes_per_second",
            "fabcheck_cpu_busy_cores"
        ]
        .map(String::from)
        .into()
    );
    assert_eq!(
        r.labels,
        [
            "side",
            "size_bytes",
            "stat",
            "test",
            "tool",
            "transport",
            "x"
        ]
        .map(String::from)
        .into()
    );
    assert_eq!(
        substitute(
            "a{b=~\"$node(:x)?\", c=\"${size}\", d=\"${t:regex}\"}",
            &|n| format!("<{n}>")
        ),
        "a{b=~\"<node>(:x)?\", c=\"<size>\", d=\"<t>\"}"
    );
}
