//! The plan importer and the discovery reader on `ibnetdiscover` outputs of real NVIDIA
//! fabrics (tests/corpus/real-outputs/SOURCES.md says where each was published):
//!
//! - `ufm-lab-mixed-fdr-edr-hdr.txt`: a UFM lab fabric, a Quantum MQM8700 (HDR) and an
//!   SX6036 (FDR) with `MF0;NAME:MODEL/U1` descriptions, the MQM8700's SHARP Aggregation
//!   Node on its port 41, two loop-back cables on the SX6036, hosts with two to four HCAs.
//! - `selene-compute.txt.gz`: the compute fabric of NVIDIA's Selene (DGX A100 SuperPOD),
//!   666 Quantum switches in three tiers, 8 compute rails per DGX, an Aggregation Node on
//!   every switch.
//!
//! A factory-default description (every unmanaged Quantum switch reads `Quantum Mellanox
//! Technologies`, as `ibswitches` printed on a real cluster: SOURCES.md) is put into the
//! lab file's switch headers and peer lines: the format is the real one, the fault is the
//! one the field meets.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::PathBuf;

use results::fabric_plan::{self, Format, Tier};

fn corpus(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/real-outputs/ibnetdiscover")
        .join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if name.ends_with(".gz") {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .expect("the sample is gzip of UTF-8 text");
        text
    } else {
        String::from_utf8(bytes).expect("the sample is UTF-8 text")
    }
}

const LAB: &str = "ufm-lab-mixed-fdr-edr-hdr.txt";

#[test]
fn lab_fabric_switches_are_named_by_their_mf0_names_in_plan_and_discovery_alike() {
    let text = corpus(LAB);
    let plan = fabric_plan::parse("lab", &text, Format::Ibnetdiscover).unwrap();
    let names: BTreeSet<&str> = plan.switch.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["r-ufm-sw226", "r-ufm-sw95"]));
    // Both carry hosts: both leaves.
    assert!(
        plan.switch.iter().all(|s| s.tier == Tier::Leaf),
        "{:?}",
        plan.switch
    );
    // The one inter-switch cable (sw95[3] - sw226[1]); the SX6036's loop-back cables
    // (25-26, 28-29) are not links between switches.
    assert_eq!(plan.link.len(), 1, "{:?}", plan.link);
    assert_eq!(plan.link[0].count, 1);
    let pair = BTreeSet::from([plan.link[0].a.as_str(), plan.link[0].b.as_str()]);
    assert_eq!(pair, BTreeSet::from(["r-ufm-sw226", "r-ufm-sw95"]));
    // Discovery names the same cable with the same names: the plan and what is found
    // compare without a MissingLink/ExtraLink pair per cable.
    let found = results::ibnet::links(&text).unwrap();
    let between: Vec<_> = found
        .iter()
        .filter(|l| names.contains(l.a_name.as_str()) && names.contains(l.b_name.as_str()))
        .filter(|l| l.a_name != l.b_name)
        .collect();
    assert_eq!(between.len(), 1, "{found:#?}");
    assert_eq!(
        (between[0].width.as_deref(), between[0].speed.as_deref()),
        (Some("4X"), Some("FDR"))
    );
}

#[test]
fn lab_fabric_aggregation_node_is_neither_a_host_nor_a_cable() {
    let text = corpus(LAB);
    let plan = fabric_plan::parse("lab", &text, Format::Ibnetdiscover).unwrap();
    let hosts: BTreeSet<&str> = plan.nic.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(
        hosts,
        BTreeSet::from([
            "r-dcs96",
            "r-dmz-ufm128",
            "r-dmz-ufm131",
            "r-dmz-ufm134",
            "r-dmz-ufm137"
        ])
    );
    // r-dcs96's four HCAs: two on the MQM8700 (EDR), two on the SX6036, rails by name.
    let dcs: Vec<(&str, u32, &str, Option<&str>)> = plan
        .nic
        .iter()
        .filter(|n| n.node == "r-dcs96")
        .map(|n| (n.nic.as_str(), n.rail, n.switch.as_str(), n.port.as_deref()))
        .collect();
    assert_eq!(
        dcs,
        vec![
            ("HCA-1", 0, "r-ufm-sw95", Some("23")),
            ("HCA-2", 1, "r-ufm-sw95", Some("24")),
            ("HCA-3", 2, "r-ufm-sw226", Some("19")),
            ("HCA-4", 3, "r-ufm-sw226", Some("20")),
        ]
    );
    let found = results::ibnet::links(&text).unwrap();
    assert!(
        found
            .iter()
            .all(|l| !l.a_name.contains("Aggregation") && !l.b_name.contains("Aggregation")),
        "{found:#?}"
    );
    // 12 host cables and the inter-switch cable; the loop-backs are cables too (a switch
    // port cabled to its own switch is what discovery saw).
    assert_eq!(found.len(), 12 + 1 + 2, "{found:#?}");
}

#[test]
fn factory_default_names_do_not_merge_switches() {
    // Both switches unmanaged: the same factory description on both, in their headers and
    // in every peer line that names them.
    let text = corpus(LAB)
        .replace("MF0;r-ufm-sw95:MQM8700/U1", "Quantum Mellanox Technologies")
        .replace("MF0;r-ufm-sw226:SX6036/U1", "Quantum Mellanox Technologies");
    let plan = fabric_plan::parse("lab", &text, Format::Ibnetdiscover).unwrap();
    let names: BTreeSet<&str> = plan.switch.iter().map(|s| s.name.as_str()).collect();
    // Each switch is its GUID (ibnetdiscover's own id for it), the description a label.
    assert_eq!(
        names,
        BTreeSet::from(["S-0002c903007b78b0", "S-b8599f0300fc6de4"])
    );
    assert!(plan
        .switch
        .iter()
        .all(|s| s.label.as_deref() == Some("Quantum Mellanox Technologies")));
    assert_eq!(plan.link.len(), 1, "{:?}", plan.link);
    assert_ne!(
        plan.link[0].a, plan.link[0].b,
        "a self-link: the switches merged"
    );
    let found = results::ibnet::links(&text).unwrap();
    let between = found
        .iter()
        .filter(|l| names.contains(l.a_name.as_str()) && names.contains(l.b_name.as_str()))
        .filter(|l| l.a_name != l.b_name)
        .count();
    assert_eq!(between, 1, "{found:#?}");
}

#[test]
fn selene_imports_as_three_tiers_of_eight_rails() {
    let text = corpus("selene-compute.txt.gz");
    let plan = fabric_plan::parse("selene", &text, Format::Ibnetdiscover).unwrap();
    let tiers: BTreeMap<Tier, usize> = plan.switch.iter().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.tier).or_default() += 1;
        m
    });
    assert_eq!(plan.switch.len(), 666);
    // The LG leaves (200) and the management MLG leaves (4; MLG01-05 carried no host
    // that day and hangs below the core through MSPINE4-01) ; CSPINE (320) and MSPINE (2)
    // are spines; CCORE (140) reach only spines.
    assert_eq!(tiers.get(&Tier::Leaf), Some(&204), "{tiers:?}");
    assert_eq!(tiers.get(&Tier::Spine), Some(&322), "{tiers:?}");
    assert_eq!(tiers.get(&Tier::Core), Some(&140), "{tiers:?}");
    for s in &plan.switch {
        let want = if s.name.starts_with("CCORE") {
            Tier::Core
        } else if s.name.contains("SPINE") {
            Tier::Spine
        } else {
            Tier::Leaf
        };
        assert_eq!(s.tier, want, "{}", s.name);
    }
    // No Aggregation Node among the hosts; a DGX A100 has 8 compute NICs, one per rail.
    assert!(plan.nic.iter().all(|n| !n.node.contains("Aggregation")));
    let mut per_host: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for n in &plan.nic {
        per_host
            .entry(n.node.as_str())
            .or_default()
            .push(n.nic.as_str());
    }
    let eight = per_host.values().filter(|nics| nics.len() == 8).count();
    assert!(
        eight >= 440,
        "{eight} hosts with 8 NICs of {}",
        per_host.len()
    );
    let rails: BTreeSet<u32> = plan.nic.iter().map(|n| n.rail).collect();
    assert_eq!(rails, (0..8).collect::<BTreeSet<u32>>());
    // Discovery: every inter-switch cable named as the plan names its ends.
    let found = results::ibnet::links(&text).unwrap();
    let switches: BTreeSet<&str> = plan.switch.iter().map(|s| s.name.as_str()).collect();
    let sw_cables = found
        .iter()
        .filter(|l| switches.contains(l.a_name.as_str()) && switches.contains(l.b_name.as_str()))
        .count() as u32;
    assert_eq!(sw_cables, plan.link.iter().map(|l| l.count).sum::<u32>());
}
