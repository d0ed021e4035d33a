//! `deploy/prometheus/alerts.yml` under the real `promtool`: the rules parse, their unit
//! tests (`tests/prometheus/alerts_test.yml`) pass, and the unit tests can fail: for every
//! alert, a copy of the rules where it never fires and one where it fires on every
//! fabcheck series must each make `promtool test rules` fail. So each alert has a series
//! that must fire it and one that must not.

mod aggregate_common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use aggregate_common::require;
use integration::{run, text};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn promtool(args: &[&str], dir: &Path) -> Output {
    run(
        Command::new("promtool").args(args).current_dir(dir),
        Duration::from_secs(120),
    )
}

/// Alert names, in file order.
fn alerts(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(|n| n.trim().to_string())
        .collect()
}

/// The rules with the `expr` of `alert` replaced by `expr` (block scalars included).
fn mutate(rules: &str, alert: &str, expr: &str) -> String {
    let mut out = Vec::new();
    let mut in_alert = false;
    let mut skip_indent: Option<usize> = None;
    let mut replaced = false;
    for line in rules.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(i) = skip_indent {
            if line.trim().is_empty() || indent > i {
                continue;
            }
            skip_indent = None;
        }
        if let Some(name) = line.trim().strip_prefix("- alert:") {
            in_alert = name.trim() == alert;
        }
        if in_alert && !replaced && line.trim_start().starts_with("expr:") {
            out.push(format!("{}expr: '{}'", " ".repeat(indent), expr));
            if line.trim_end().ends_with('|') {
                skip_indent = Some(indent);
            }
            replaced = true;
            continue;
        }
        out.push(line.to_string());
    }
    assert!(replaced, "no expr found for {alert}");
    out.join("\n") + "\n"
}

#[test]
fn alert_rules_parse_and_their_unit_tests_pass_and_can_fail() {
    require("promtool", "prometheus");
    let rules_path = repo().join("deploy/prometheus/alerts.yml");
    let tests_dir = repo().join("tests/prometheus");
    let out = promtool(
        &["check", "rules", rules_path.to_str().unwrap()],
        &tests_dir,
    );
    let (o, e) = text(&out);
    assert!(out.status.success(), "promtool check rules:\n{o}{e}");

    let out = promtool(&["test", "rules", "alerts_test.yml"], &tests_dir);
    let (o, e) = text(&out);
    assert!(out.status.success(), "promtool test rules:\n{o}{e}");

    // Mutants: the unit tests must notice an alert that never fires and one that fires on
    // everything.
    let rules = fs::read_to_string(&rules_path).unwrap();
    let names = alerts(&rules);
    for want in [
        "FabcheckVerdictFailing",
        "FabcheckCheckFailing",
        "FabcheckLinkLossHigh",
        "FabcheckBandwidthLow",
        "FabcheckBusbwLow",
        "FabcheckLatencyP99High",
        "FabcheckResultsStale",
        "FabcheckResultsMissing",
        "FabcheckRunDisturbed",
        "FabcheckPortDown",
        "FabcheckLinkFlapping",
        "FabcheckPauseStorm",
        "FabcheckLosslessDiscards",
        "FabcheckPreFecBerHigh",
        "FabcheckErrorCounterSaturated",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} is not in alerts.yml"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let test_text = fs::read_to_string(tests_dir.join("alerts_test.yml")).unwrap();
    // Every mutant with its own copy of the unit tests, all run by one promtool (it starts
    // slowly): each file must fail, naming the alert.
    let mut files = Vec::new();
    for (i, name) in names.iter().enumerate() {
        for (j, expr) in [
            "vector(1) == 2",
            // The metric name kept as a label: alerts drop __name__, and series of two
            // metrics with the same labels would collide.
            "label_replace({__name__=~\"fabcheck_.+\"}, \"metric\", \"$1\", \"__name__\", \"(.+)\") or vector(1)",
        ]
        .iter()
        .enumerate()
        {
            let rules_file = format!("mutant-{i}-{j}.yml");
            fs::write(dir.join(&rules_file), mutate(&rules, name, expr)).unwrap();
            let test_file = format!("test-{i}-{j}.yml");
            fs::write(
                dir.join(&test_file),
                test_text.replace("../../deploy/prometheus/alerts.yml", &rules_file),
            )
            .unwrap();
            files.push((test_file, name.clone(), *expr));
        }
    }
    // promtool names the file on standard output and the failure on standard error:
    // one stream keeps them in order.
    let names_of_files: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    let out = run(
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "promtool test rules {} 2>&1",
                names_of_files.join(" ")
            ))
            .current_dir(dir),
        Duration::from_secs(300),
    );
    let (all, _) = text(&out);
    assert!(!out.status.success(), "every mutant passed?\n{all}");
    for (file, name, expr) in &files {
        let at = all
            .find(&format!("Unit Testing:  {file}"))
            .unwrap_or_else(|| panic!("promtool did not test {file}:\n{all}"));
        let rest = &all[at + 1..];
        let section = &rest[..rest.find("Unit Testing:").map_or(rest.len(), |e| e)];
        assert!(
            section.contains("FAILED") && section.contains(&format!("alertname: {name},")),
            "{name} rewritten to `{expr}`: the unit tests did not catch it\n{section}"
        );
    }
}

#[test]
fn mutate_replaces_block_and_plain_exprs() {
    let rules = "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: |\n          x\n            > 1\n        for: 5m\n      - alert: B\n        expr: y > 2\n";
    let m = mutate(rules, "A", "vector(0)");
    assert!(m.contains("expr: 'vector(0)'\n        for: 5m"), "{m}");
    assert!(m.contains("expr: y > 2"));
    assert!(!m.contains("> 1"));
    let m = mutate(rules, "B", "z");
    assert!(m.contains("expr: 'z'") && m.contains("x\n"), "{m}");
}
