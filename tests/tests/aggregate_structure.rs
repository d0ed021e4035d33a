//! `aggregate report --plan` on documents made with the synthetic leaf-spine fabric
//! (`synth::fabric`): the binary names the injected parts above the node with their
//! evidence, shows the fabric picture, the per-direction matrix and the cabling table,
//! and judges the cabling checks of a profile; a bad plan is a usage error.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

mod aggregate_common;

use std::fs;
use std::path::Path;

use aggregate_common::*;
use integration::text;
use serde_json::Value;
use synth::fabric::{self, FabricSpec, Fault};

const PROFILE: &str = r#"
name = "structure"
[[check]]
id = "no-suspect"
description = "no part named"
metric = "suspects"
unit = "suspects"
max = 0
test = "write_bw"
[[check]]
id = "no-swap"
description = "no swapped cables"
metric = "cabling_swapped"
unit = "cables"
max = 0
[[check]]
id = "no-missing-uplink"
description = "every planned switch link present"
metric = "cabling_missing_links"
unit = "links"
max = 0
"#;

fn setup(dir: &Path, spec: &FabricSpec, faults: &[Fault]) {
    let doc = fabric::document(spec, faults);
    fs::write(dir.join("sweep.json"), serde_json::to_vec(&doc).unwrap()).unwrap();
    fs::write(dir.join("plan.toml"), fabric::plan(spec).to_toml()).unwrap();
    fs::write(dir.join("p.toml"), PROFILE).unwrap();
}

/// `aggregate report sweep.json --profile p.toml --plan plan.toml --out r` in `dir`.
fn report(dir: &Path) -> std::process::Output {
    aggregate(
        dir,
        &[
            "report",
            "sweep.json",
            "--profile",
            "p.toml",
            "--plan",
            "plan.toml",
            "--out",
            "r",
        ],
    )
}

fn check<'a>(summary: &'a Value, id: &str) -> &'a Value {
    summary["verdict"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}"))
}

#[test]
fn a_slow_leaf_and_a_swapped_pair_are_named_with_evidence_and_drawn() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = FabricSpec::new(2, 4, 2, 2);
    let faults = [
        Fault::Leaf { rail: 0, group: 1 },
        Fault::CableSwap {
            node: 1,
            r1: 0,
            r2: 1,
        },
    ];
    setup(dir, &spec, &faults);
    let out = report(dir);
    expect_code(&out, 1, "faults fail the profile");
    let (stdout, _) = text(&out);
    let suspects: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("SUSPECT"))
        .collect();
    assert_eq!(suspects.len(), 2, "{stdout}");
    assert!(
        suspects
            .iter()
            .any(|l| l.contains("leaf leaf-r0-g1: explains")
                && l.contains("contradicted by 0 good ones")),
        "{stdout}"
    );
    assert!(
        suspects.iter().any(
            |l| l.contains("cable_swap g0n1 rail0 and rail1") && l.contains("discovery agrees")
        ),
        "{stdout}"
    );
    let summary: Value =
        serde_json::from_slice(&fs::read(dir.join("r/summary.json")).unwrap()).unwrap();
    let st = &summary["matrix"]["structure"];
    assert!(
        st["source"]
            .as_str()
            .unwrap()
            .starts_with("plan (native plan.toml)"),
        "{}",
        st["source"]
    );
    assert_eq!(
        st["directions"],
        2 * 28 * 2,
        "both directions of every pair and rail"
    );
    assert_eq!(check(&summary, "no-swap")["status"], "FAIL");
    assert_eq!(check(&summary, "no-swap")["measured"], 1.0);
    assert_eq!(check(&summary, "no-missing-uplink")["status"], "PASS");
    assert_eq!(check(&summary, "no-suspect")["measured"], 2.0);
    let html = fs::read_to_string(dir.join("r/report.html")).unwrap();
    assert!(
        html.contains(r#"<section id="structure">"#) && html.contains("<svg"),
        "no picture"
    );
    assert!(
        html.contains("rail0 on leaf-r1-g0, rail1 on leaf-r0-g0"),
        "the cabling table shows expected and found"
    );
    assert!(dir.join("r/plots/fabric.svg").exists());
    assert!(dir.join("r/plots/direction-rail0.svg").exists());
    let md = fs::read_to_string(dir.join("r/report.md")).unwrap();
    assert!(
        md.contains("## Fabric structure") && md.contains("| sends \\ receives |"),
        "{md}"
    );
}

#[test]
fn one_way_faults_are_told_by_direction_both_ways() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = FabricSpec::new(2, 4, 2, 2);
    for (from, to) in [(5, 2), (2, 5)] {
        setup(dir, &spec, &[Fault::OneWay { from, to, rail: 1 }]);
        let out = aggregate(
            dir,
            &[
                "report",
                "sweep.json",
                "--profile",
                "p.toml",
                "--plan",
                "plan.toml",
                "--out",
                "r",
                "--force",
            ],
        );
        expect_code(&out, 1, "one way fails");
        let (stdout, _) = text(&out);
        let want = format!(
            "one_way {} rail1 -> {} rail1: explains 1 of the 1 bad links",
            spec.node(from),
            spec.node(to)
        );
        assert!(stdout.contains(&want), "{want}\n{stdout}");
        // The one-way pair is measured again by the runner's retest: its two hosts (every
        // rail between them) in the list `--pattern file:` reads, and nothing else.
        let pairs = fs::read_to_string(dir.join("r/suspects.pairs")).unwrap();
        let lines: Vec<&str> = pairs.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            [format!("{} {}", spec.node(from), spec.node(to))],
            "{pairs}"
        );
    }
}

#[test]
fn a_clean_fabric_passes_and_names_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    setup(dir, &FabricSpec::new(2, 4, 2, 2), &[]);
    let out = report(dir);
    expect_code(&out, 0, "clean fabric passes");
    let (stdout, _) = text(&out);
    assert!(!stdout.contains("SUSPECT"), "{stdout}");
}

#[test]
fn a_bad_plan_is_a_usage_error_naming_the_item() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    setup(dir, &FabricSpec::new(2, 4, 2, 2), &[]);
    let plan = fs::read_to_string(dir.join("plan.toml")).unwrap();
    fs::write(
        dir.join("bad.toml"),
        plan.replacen("switch = \"leaf-r0-g0\"", "switch = \"leaf-nowhere\"", 1),
    )
    .unwrap();
    let out = aggregate(
        dir,
        &[
            "report",
            "sweep.json",
            "--profile",
            "p.toml",
            "--plan",
            "bad.toml",
            "--out",
            "r",
        ],
    );
    expect_code(&out, 2, "bad plan");
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains("unknown switch \"leaf-nowhere\"") && stderr.contains("bad.toml"),
        "{stderr}"
    );
    let out = aggregate(
        dir,
        &[
            "report",
            "sweep.json",
            "--profile",
            "p.toml",
            "--plan",
            "plan.toml",
            "--plan-format",
            "yaml",
            "--out",
            "r",
        ],
    );
    expect_code(&out, 2, "bad format");
    assert!(!dir.join("r").exists(), "nothing written on a usage error");
}

/// A plan that names a node's NICs otherwise than discovery does (issue 37 item 13): the
/// report says which discovered NICs match no planned one (metric cabling_unplanned_nics),
/// and the other cabling checks warn that those NICs were not compared, so a swap there
/// is never passed unseen without a word.
#[test]
fn discovered_nics_the_plan_does_not_name_are_said_beside_the_cabling_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = FabricSpec::new(2, 4, 2, 2);
    setup(dir, &spec, &[]);
    let node = spec.node(1);
    let mut plan = fabric::plan(&spec);
    for nic in plan.nic.iter_mut().filter(|n| n.node == node) {
        nic.nic = format!("mlx5_{}", nic.rail);
    }
    let renamed = plan.to_toml();
    fs::write(dir.join("plan.toml"), renamed).unwrap();
    let profile = format!(
        "{PROFILE}[[check]]\nid = \"no-unplanned-nic\"\ndescription = \"every discovered NIC planned\"\nmetric = \"cabling_unplanned_nics\"\nunit = \"NICs\"\nmax = 0\n"
    );
    fs::write(dir.join("p.toml"), profile).unwrap();
    let out = report(dir);
    expect_code(&out, 1, "an unplanned NIC fails its check");
    let summary: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("r/summary.json")).unwrap()).unwrap();
    let unplanned = check(&summary, "no-unplanned-nic");
    assert_eq!(unplanned["status"], "FAIL", "{unplanned}");
    assert_eq!(unplanned["measured"], 2.0, "{unplanned}");
    let swap = check(&summary, "no-swap");
    let warning = swap["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains(&format!("not compared: {node} rail0, {node} rail1")),
        "{swap}"
    );
}

/// A cabling check of NICs that compared none judged nothing: MISSING with the reason,
/// never PASS. Every NIC under a name the plan does not have leaves no leaf to compare
/// (the swap check), and a plan without ports on a fabric of two rails leaves no port to
/// compare (the wrong-port check); with the plan's names and ports both are judged and
/// pass, counting the NICs compared.
#[test]
fn a_cabling_check_that_compared_no_nic_is_missing_not_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = FabricSpec::new(2, 4, 2, 2);
    setup(dir, &spec, &[]);
    let profile = format!(
        "{PROFILE}[[check]]\nid = \"no-wrong-port\"\ndescription = \"every NIC on its port\"\nmetric = \"cabling_wrong_port\"\nunit = \"cables\"\nmax = 0\n"
    );
    fs::write(dir.join("p.toml"), profile).unwrap();
    let judged = |plan: results::fabric_plan::FabricPlan| {
        fs::write(dir.join("plan.toml"), plan.to_toml()).unwrap();
        let out = report(dir);
        let summary: Value =
            serde_json::from_str(&fs::read_to_string(dir.join("r/summary.json")).unwrap())
                .unwrap_or_else(|e| panic!("{e}: {}", text(&out).1));
        let _ = fs::remove_dir_all(dir.join("r"));
        ["no-swap", "no-wrong-port"].map(|id| check(&summary, id).clone())
    };
    let nics = spec.groups * spec.nodes_per_group * spec.rails;

    let [swap, port] = judged(fabric::plan(&spec));
    for c in [&swap, &port] {
        assert_eq!(c["status"], "PASS", "{c}");
        assert!(
            c["worst_at"]
                .as_str()
                .unwrap()
                .contains(&format!("none ({nics} NIC(s) compared against plan")),
            "{c}"
        );
    }

    let mut renamed = fabric::plan(&spec);
    for nic in &mut renamed.nic {
        nic.nic = format!("mlx5_{}", nic.rail);
    }
    let [swap, port] = judged(renamed);
    for c in [&swap, &port] {
        assert_eq!(c["status"], "MISSING", "{c}");
    }
    let why = swap["worst_at"].as_str().unwrap();
    assert!(why.contains("no NIC's leaf was compared"), "{swap}");
    assert!(why.contains("not compared: "), "{swap}");

    let mut portless = fabric::plan(&spec);
    for nic in &mut portless.nic {
        nic.port = None;
    }
    let [swap, port] = judged(portless);
    assert_eq!(swap["status"], "PASS", "{swap}");
    assert_eq!(port["status"], "MISSING", "{port}");
    assert!(
        port["worst_at"]
            .as_str()
            .unwrap()
            .contains("no NIC's switch port was compared"),
        "{port}"
    );
}
