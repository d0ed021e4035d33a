//! The plan importers on files in the real tools' formats:
//! - `fixtures/structure/ibnetdiscover-2x2x2x2.out`: the output of `ibnetdiscover`
//!   (infiniband-diags 44.0, Debian 12) run through `ibsim-run` against ibsim 0.10's
//!   simulation of `fixtures/structure/ibsim-2x2x2x2.net` (2 groups x 2 nodes x 2 rails x 2
//!   spines, with g1n1's two cables swapped, leaf-r1-g1's uplink to spine1 missing and
//!   leaf-r0-g1's uplink to spine0 trained at 1x): `ibsim -s ibsim-2x2x2x2.net &` then
//!   `ibsim-run ibnetdiscover`.
//! - `topology.conf`: Slurm's topology/tree syntax (topology.conf(5), Slurm 22.05).
//! - `netbox-cables.csv`: NetBox's cables list export (Device A, Termination A, Device B,
//!   Termination B, Status, Rack A, Rack B columns; a quoted label with an escaped quote).

use std::path::Path;

use results::fabric_plan::{self, Format, Tier};

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/structure")
        .join(name)
}

#[test]
fn ibnetdiscover_output_is_the_as_built_plan() {
    let path = fixture("ibnetdiscover-2x2x2x2.out");
    let plan = fabric_plan::load(&path, None).unwrap();
    assert!(plan.source.starts_with("ibnetdiscover "), "{}", plan.source);
    let tier = |n: &str| plan.switch(n).map(|s| s.tier);
    for leaf in ["leaf-r0-g0", "leaf-r1-g0", "leaf-r0-g1", "leaf-r1-g1"] {
        assert_eq!(tier(leaf), Some(Tier::Leaf), "{leaf}");
    }
    assert_eq!(tier("spine0"), Some(Tier::Spine));
    assert_eq!(tier("spine1"), Some(Tier::Spine));
    assert_eq!(plan.nic.len(), 8);
    // As built: g1n1's rail0 NIC sits on the rail-1 leaf, port 2 (the swap is in the file).
    let n = plan
        .nic
        .iter()
        .find(|n| n.node == "g1n1" && n.nic == "rail0")
        .unwrap();
    assert_eq!(
        (n.switch.as_str(), n.port.as_deref(), n.rail),
        ("leaf-r1-g1", Some("2"), 0)
    );
    let links = plan.link_counts();
    assert_eq!(links.len(), 7, "{links:?}: 8 uplinks planned, one missing");
    assert!(!links.contains_key(&("leaf-r1-g1".into(), "spine1".into())));

    // The same text as Document.fabric records it: every cable once, with its width.
    let text = std::fs::read_to_string(&path).unwrap();
    let nodes = fabric_plan::parse_ibnetdiscover("x", &text).unwrap();
    assert_eq!(nodes.iter().filter(|n| n.switch).count(), 6);
    // Discovery's reading of the same text (results::ibnet, the one reader of it).
    let all = results::ibnet::links(&text).unwrap();
    assert_eq!(all.len(), 7 + 8, "7 uplinks and 8 host cables");
    let thin: Vec<_> = all
        .iter()
        .filter(|l| l.width.as_deref() == Some("1X"))
        .collect();
    assert_eq!(thin.len(), 1);
    let mut ends = [thin[0].a_name.as_str(), thin[0].b_name.as_str()];
    ends.sort();
    assert_eq!(ends, ["leaf-r0-g1", "spine0"]);
    assert!(all.iter().all(|l| l.speed.as_deref() == Some("SDR")));
}

#[test]
fn slurm_topology_conf_gives_groups_only() {
    let plan = fabric_plan::load(&fixture("topology.conf"), None).unwrap();
    assert!(plan.source.starts_with("slurm "));
    assert!(plan.nic.is_empty());
    let groups: Vec<(&str, Option<&str>)> = plan
        .node
        .iter()
        .map(|n| (n.name.as_str(), n.group.as_deref()))
        .collect();
    assert_eq!(
        groups,
        [
            ("g0n0", Some("leaf-g0")),
            ("g0n1", Some("leaf-g0")),
            ("g1n0", Some("leaf-g1")),
            ("g1n1", Some("leaf-g1"))
        ]
    );
    assert_eq!(plan.switch("spine0").unwrap().tier, Tier::Spine);
    assert_eq!(plan.link.len(), 2);
    let e =
        fabric_plan::parse("t.conf", "SwitchName=s0 Nodes=a[3-1]\n", Format::Slurm).unwrap_err();
    assert!(
        e.0.contains("t.conf line 1") && e.0.contains("empty"),
        "{}",
        e.0
    );
    let e = fabric_plan::parse("t.conf", "SwitchName=s0\n", Format::Slurm).unwrap_err();
    assert!(e.0.contains("neither Nodes= nor Switches="), "{}", e.0);
}

#[test]
fn netbox_cable_csv_gives_nics_ports_racks_and_links() {
    let plan = fabric_plan::load(&fixture("netbox-cables.csv"), None).unwrap();
    assert!(plan.source.starts_with("netbox "));
    assert_eq!(plan.nic.len(), 4);
    let n = plan
        .nic
        .iter()
        .find(|n| n.node == "g0n1" && n.nic == "rail0")
        .unwrap();
    assert_eq!(
        (n.rail, n.switch.as_str(), n.port.as_deref()),
        (0, "leaf-r0-g0", Some("swp2"))
    );
    assert_eq!(plan.switch("spine0").unwrap().tier, Tier::Spine);
    assert_eq!(
        plan.switch("spine0").unwrap().rack.as_deref(),
        Some("rack09")
    );
    assert_eq!(plan.node[0].rack.as_deref(), Some("rack01"));
    // The decommissioned cable is left out: one uplink from each leaf.
    assert_eq!(plan.link.iter().map(|l| l.count).sum::<u32>(), 2);
    let e = fabric_plan::parse("c.csv", "Foo,Bar\n1,2\n", Format::Netbox).unwrap_err();
    assert!(
        e.0.contains("no column for a_device") && e.0.contains("side a device"),
        "{}",
        e.0
    );
    let e = fabric_plan::parse(
        "c.csv",
        "Side A,Termination A,Side B,Termination B\nhost1,eth0,host2,eth0\n",
        Format::Netbox,
    )
    .unwrap_err();
    assert!(e.0.contains("role column"), "{}", e.0);
}

#[test]
fn ibnetdiscover_errors_name_the_line() {
    let e = fabric_plan::parse("x.out", "Switch 8 nothing quoted\n", Format::Ibnetdiscover)
        .unwrap_err();
    assert!(e.0.contains("x.out line 1"), "{}", e.0);
    let e = fabric_plan::parse("x.out", "# only a comment\n", Format::Ibnetdiscover).unwrap_err();
    assert!(e.0.contains("no Switch or Ca block"), "{}", e.0);
    let e = fabric_plan::load(Path::new("/nonexistent/plan.toml"), None).unwrap_err();
    assert!(e.0.contains("cannot read the plan"), "{}", e.0);
}

/// The example plans shipped in `examples/plans/` (docs/acceptance.md points users at
/// them) read as the plans they say they are.
#[test]
fn the_example_plans_read_as_what_they_describe() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/plans");
    let reference = fabric_plan::load(&examples.join("reference-16x8.toml"), None).unwrap();
    let tier =
        |p: &fabric_plan::FabricPlan, t: Tier| p.switch.iter().filter(|s| s.tier == t).count();
    assert_eq!(reference.nic.len(), 16 * 8);
    assert_eq!(tier(&reference, Tier::Leaf), 16);
    assert_eq!(tier(&reference, Tier::Spine), 4);
    // Rail-optimised: every NIC on its rail's leaf of its group.
    for n in &reference.nic {
        assert_eq!(n.nic, format!("mlx5_{}", n.rail), "{n:?}");
        assert!(n.switch.starts_with(&format!("leaf-r{}-", n.rail)), "{n:?}");
    }
    // 8 downlinks and 2 x 4 uplinks of 400 Gb/s a leaf: 1:1.
    let links = reference.link_counts();
    assert_eq!(links.len(), 16 * 4);
    assert!(links.values().all(|&c| c == 2));
    let sim = fabric_plan::load(&examples.join("simfabric-2x4x2.toml"), None).unwrap();
    assert_eq!(sim.nic.len(), 2 * 4 * 2);
    assert_eq!(tier(&sim, Tier::Leaf), 4);
    assert_eq!(tier(&sim, Tier::Spine), 2);
    assert!(sim.nic.iter().any(|n| n.node == "g1n3" && n.nic == "rail1"));
}
