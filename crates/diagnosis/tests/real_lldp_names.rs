//! LLDP names as real switches send them, against a cabling plan (tests/corpus/real-outputs/
//! lldp/, SOURCES.md says where each was published): SONiC sends its port alias as the port
//! id and the SONiC name or the operator's description as the port description; a SONiC
//! whose alias setup failed sends its MAC as the port id; switches and hosts with a domain
//! send their FQDN, in any case, as the system name. Each must match the plan where it
//! names the planned port or switch, and a port id that is an address must not be judged
//! a wrong port.
//!
//! The fabric is synth's 2 groups x 4 nodes x 2 rails; the records of one NIC (or every
//! switch's name) are replaced by the real ones.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::path::PathBuf;

use diagnosis::structure::{self, Structure};
use results::fabric_plan::FabricPlan;
use results::Document;
use synth::fabric::{self, FabricSpec};
use verdict::input::Loaded;
use verdict::metric::DiffKind;
use verdict::profile::MatrixSettings;

fn sample(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/real-outputs/lldp")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The neighbour's fields in `lldpctl`'s text output, as SONiC's `show lldp neighbors`
/// prints it: system name, port id subtype and value, port description.
struct Heard {
    system_name: String,
    port_id_type: String,
    port_id: String,
    port_descr: String,
}

fn heard(text: &str) -> Heard {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {key} in the sample"))
    };
    let (kind, id) = field("PortID:")
        .split_once(' ')
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .unwrap();
    Heard {
        system_name: field("SysName:"),
        port_id_type: kind,
        port_id: id,
        port_descr: field("PortDescr:"),
    }
}

fn spec() -> FabricSpec {
    FabricSpec::new(2, 4, 2, 2)
}

/// Node 0's rail-0 NIC heard `h`, on a switch the plan calls `h.system_name`, at the port
/// the plan calls `planned_port`.
fn one_nic(h: &Heard, planned_port: &str) -> Structure {
    let s = spec();
    let mut plan = fabric::plan(&s);
    let mut doc = fabric::document(&s, &[]);
    let leaf = s.leaf(0, 0);
    rename_switch(&mut plan, &mut doc, &leaf, &h.system_name, &h.system_name);
    let nic = plan
        .nic
        .iter_mut()
        .find(|n| n.node == s.node(0) && n.rail == 0)
        .unwrap();
    nic.port = Some(planned_port.into());
    let nb = doc.hosts[0]
        .neighbors
        .iter_mut()
        .find(|n| n.interface.as_deref() == Some("rail0"))
        .unwrap();
    nb.port_id = Some(h.port_id.clone());
    nb.port_id_type = Some(h.port_id_type.clone());
    nb.port_descr = Some(h.port_descr.clone());
    build(&doc, &plan)
}

/// The switch `from` renamed: `planned` in the plan, `heard` in the neighbour records.
/// The synthetic ibnetdiscover links are left out: an Ethernet fabric has none.
fn rename_switch(
    plan: &mut FabricPlan,
    doc: &mut Document,
    from: &str,
    planned: &str,
    heard: &str,
) {
    for sw in plan.switch.iter_mut().filter(|x| x.name == from) {
        sw.name = planned.into();
    }
    for l in plan.link.iter_mut().filter(|l| l.a == from) {
        l.a = planned.into();
    }
    for n in plan.nic.iter_mut().filter(|n| n.switch == from) {
        n.switch = planned.into();
    }
    for h in &mut doc.hosts {
        for nb in h.neighbors.iter_mut() {
            if nb.system_name.as_deref() == Some(from) {
                nb.system_name = Some(heard.into());
            }
        }
    }
    doc.fabric = None;
}

fn build(doc: &Document, plan: &FabricPlan) -> Structure {
    let loaded = Loaded::from_text("fabric.json", &serde_json::to_string(doc).unwrap()).unwrap();
    structure::build(&[loaded], Some(plan), &MatrixSettings::default()).unwrap()
}

fn kinds(st: &Structure) -> Vec<(DiffKind, String, String)> {
    st.cabling
        .iter()
        .map(|d| (d.kind, d.item.clone(), d.found.clone()))
        .collect()
}

#[test]
fn sonic_alias_as_port_id_matches_a_plan_by_either_name() {
    let h = heard(&sample("lldpctl-sonic-alias-portid.txt"));
    assert_eq!(
        (
            h.port_id_type.as_str(),
            h.port_id.as_str(),
            h.port_descr.as_str()
        ),
        ("local", "Eth1/1", "Ethernet0")
    );
    // A plan (NetBox, a cabling sheet) may name the port by its SONiC name or its alias.
    for planned in ["Ethernet0", "Eth1/1"] {
        let st = one_nic(&h, planned);
        assert!(st.cabling.is_empty(), "planned {planned}: {:?}", kinds(&st));
        assert!(st.ports_not_compared.is_empty());
    }
    // Another port is still a wrong port, named with both of the switch's names.
    let st = one_nic(&h, "Ethernet4");
    let d = kinds(&st);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].0, DiffKind::WrongPort);
    assert_eq!(d[0].2, "sonic port Eth1/1 (described as \"Ethernet0\")");
}

#[test]
fn a_described_sonic_port_matches_by_its_alias_only() {
    let h = heard(&sample("lldpctl-sonic-local-portid-described.txt"));
    assert_eq!(
        (h.port_id.as_str(), h.port_descr.as_str()),
        ("Ethernet30/1", "ARISTA02T1:Ethernet1")
    );
    assert!(one_nic(&h, "Ethernet30/1").cabling.is_empty());
    let d = kinds(&one_nic(&h, "Ethernet31/1"));
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].0, DiffKind::WrongPort);
}

#[test]
fn a_mac_as_port_id_is_no_wrong_port_but_is_said_not_compared() {
    let h = heard(&sample("lldpctl-sonic-mac-portid.txt"));
    assert_eq!(
        (h.port_id_type.as_str(), h.port_descr.as_str()),
        ("mac", "Ethernet124")
    );
    // The description names the planned port: compared, and right.
    let st = one_nic(&h, "Ethernet124");
    assert!(st.cabling.is_empty(), "{:?}", kinds(&st));
    assert!(st.ports_not_compared.is_empty());
    // It does not: no wrong port on a MAC, and the NIC is named as not compared.
    let st = one_nic(&h, "Ethernet120");
    assert!(st.cabling.is_empty(), "{:?}", kinds(&st));
    assert_eq!(st.ports_not_compared.len(), 1);
    let said = &st.ports_not_compared[0];
    assert!(
        said.starts_with("g0n0 rail0 (igk-4-dut sent an address as its port id"),
        "{said}"
    );
    assert!(said.contains("\"Ethernet124\""), "{said}");
}

/// The neighbour device ids of the EOS sample: FQDNs, one in capitals.
fn fqdn_names() -> Vec<String> {
    sample("eos-show-lldp-neighbors-fqdn.txt")
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|n| n.ends_with(".domain"))
        .map(String::from)
        .collect()
}

#[test]
fn fqdn_system_names_match_the_plans_short_names() {
    let names = fqdn_names();
    assert_eq!(
        names[..4],
        [
            "HOST1.domain",
            "host2.domain",
            "host3.domain",
            "host4.domain"
        ]
    );
    let s = spec();
    let mut plan = fabric::plan(&s);
    let mut doc = fabric::document(&s, &[]);
    // The four leaves are called host1-4 in the plan (a cabling sheet's short names) and
    // send the sample's FQDNs.
    let leaves = [(0, 0), (1, 0), (0, 1), (1, 1)].map(|(r, g)| s.leaf(r, g));
    for (leaf, fqdn) in leaves.iter().zip(&names) {
        let short = fqdn.split('.').next().unwrap().to_lowercase();
        rename_switch(&mut plan, &mut doc, leaf, &short, fqdn);
    }
    let st = build(&doc, &plan);
    assert!(st.cabling.is_empty(), "{:?}", kinds(&st));
    // A name that means two planned switches is not guessed: with `host1` and `Host1`
    // both planned, `HOST1.domain` is neither, and its NIC is on no planned leaf.
    let mut plan2 = plan.clone();
    let mut twin = plan2
        .switch
        .iter()
        .find(|x| x.name == "host1")
        .unwrap()
        .clone();
    twin.name = "Host1".into();
    plan2.switch.push(twin);
    let st = build(&doc, &plan2);
    assert!(
        st.cabling.iter().any(|d| d.kind == DiffKind::WrongLeaf),
        "{:?}",
        kinds(&st)
    );
}
