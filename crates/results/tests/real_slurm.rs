//! The Slurm importer on Slurm's own `topology.conf` files (SchedMD/slurm: the
//! testsuite's tree and block topologies and the man page's block example; the host list
//! forms of the administrator's quick start guide). tests/corpus/real-outputs/SOURCES.md
//! names each file's origin.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use results::fabric_plan::{self, expand_hostlist, Format, Tier};

fn conf(name: &str) -> fabric_plan::FabricPlan {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/real-outputs/slurm")
        .join(name);
    fabric_plan::load(&path, Some(Format::Slurm)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn tiers(plan: &fabric_plan::FabricPlan) -> BTreeMap<Tier, usize> {
    plan.switch.iter().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.tier).or_default() += 1;
        m
    })
}

#[test]
fn four_level_tree_of_ten_thousand_nodes() {
    // root -> im[0-1] -> grp[10-35] -> leaf[100-599] -> peta[10000-19999], 20 a leaf.
    let plan = conf("tree-4-level-10000-nodes.conf");
    assert_eq!(plan.node.len(), 10_000);
    assert_eq!(
        tiers(&plan),
        BTreeMap::from([(Tier::Leaf, 500), (Tier::Spine, 26), (Tier::Core, 3)])
    );
    let group = |n: &str| {
        plan.node
            .iter()
            .find(|x| x.name == n)
            .unwrap()
            .group
            .clone()
    };
    assert_eq!(group("peta10000").as_deref(), Some("leaf100"));
    assert_eq!(group("peta19999").as_deref(), Some("leaf599"));
    assert_eq!(plan.link.len(), 500 + 26 + 2);
    assert_eq!(plan.switch("grp10").unwrap().tier, Tier::Spine);
    assert_eq!(plan.switch("im1").unwrap().tier, Tier::Core);
}

#[test]
fn trunks_without_a_common_root_and_a_lone_leaf() {
    let plan = conf("tree-disconnected-trunks.conf");
    assert_eq!(plan.node.len(), 40);
    assert_eq!(
        tiers(&plan),
        BTreeMap::from([(Tier::Leaf, 5), (Tier::Spine, 2)])
    );
    // leafC hangs from nothing: a leaf with no uplink, not an error.
    assert!(plan.link.iter().all(|l| l.a != "leafC" && l.b != "leafC"));
}

#[test]
fn block_topology_is_groups_of_nodes_and_no_switch() {
    // topology/block (Slurm 23.11+): was refused ("no SwitchName=") before.
    let plan = conf("block-8x4.conf");
    assert!(plan.switch.is_empty(), "{:?}", plan.switch);
    let groups: BTreeMap<String, usize> = plan.node.iter().fold(BTreeMap::new(), |mut m, n| {
        *m.entry(n.group.clone().unwrap()).or_default() += 1;
        m
    });
    assert_eq!(groups.len(), 8);
    assert!(groups.values().all(|&n| n == 4), "{groups:?}");
    let plan = conf("block-manpage-example.conf");
    let g: BTreeSet<_> = plan.node.iter().filter_map(|n| n.group.clone()).collect();
    assert_eq!(g.len(), 4);
    assert_eq!(plan.node.len(), 128);
    assert_eq!(plan.node[127].name, "node128");
}

#[test]
fn host_lists_of_the_quick_start_guide() {
    // "linux[0-64,128]", "lx[15,18,32-33]" and, with two ranges, "rack[0-63]_blade[0-41]".
    assert_eq!(expand_hostlist("linux[0-64,128]").unwrap().len(), 66);
    assert_eq!(
        expand_hostlist("lx[15,18,32-33]").unwrap(),
        ["lx15", "lx18", "lx32", "lx33"]
    );
    let blades = expand_hostlist("rack[0-63]_blade[0-41]").unwrap();
    assert_eq!(blades.len(), 64 * 42);
    assert_eq!(blades[0], "rack0_blade0");
    assert_eq!(blades[1], "rack0_blade1");
    assert_eq!(blades[blades.len() - 1], "rack63_blade41");
    // Width from the low bound, as Slurm pads: gpu[01-02] -> gpu01, gpu02.
    assert_eq!(
        expand_hostlist("gpu[01-02],cpu9").unwrap(),
        ["gpu01", "gpu02", "cpu9"]
    );
    assert!(expand_hostlist("rack[0-1]_blade[0-").is_err());
    assert!(expand_hostlist("n[0-9999999]").is_err());
}
