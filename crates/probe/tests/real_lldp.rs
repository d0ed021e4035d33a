//! `lldpcli -f json0 show neighbors details` as real switches printed it (Cumulus Linux VX
//! 3.7.9's `net show lldp json`, lldpd's json0; tests/corpus/real-outputs/lldp, SOURCES.md
//! says where it was published): what the parser reads from every record.

use std::path::PathBuf;

use probe::discovery::lldp::parse_neighbors;
use results::discovery::Neighbor;

fn sample(name: &str) -> Vec<Neighbor> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/real-outputs/lldp")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_neighbors(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Interface, neighbour's name, its port id, the id's subtype, the description, speed.
fn facts(n: &Neighbor) -> [String; 6] {
    [
        &n.interface,
        &n.system_name,
        &n.port_id,
        &n.port_id_type,
        &n.port_descr,
        &n.speed,
    ]
    .map(|x| x.clone().unwrap_or_else(|| "-".into()))
}

#[test]
fn a_spine_hears_each_leaf_on_its_first_port() {
    let n = sample("json0-cumulus-vx-spine01.json");
    let got: Vec<[String; 6]> = n.iter().map(facts).collect();
    let want: Vec<[String; 6]> = [
        ("swp1", "leaf01"),
        ("swp2", "leaf02"),
        ("swp3", "leaf03"),
        ("swp4", "leaf04"),
        ("swp5", "exit02"),
        ("swp6", "exit01"),
    ]
    .into_iter()
    .map(|(i, s)| [i, s, "swp1", "ifname", "swp1", "1000BaseTFD"].map(String::from))
    .collect();
    assert_eq!(got, want);
    assert!(n.iter().all(|x| x.state == "found" && x.source == "lldp"));
    // The chassis id is the switch's MAC.
    assert_eq!(n[0].chassis_id.as_deref(), Some("52:54:00:16:5f:76"));
}

#[test]
fn a_leaf_hears_its_spines_and_its_peer() {
    let n = sample("json0-cumulus-vx-leaf01.json");
    let got: Vec<[String; 4]> = n
        .iter()
        .map(|x| {
            let [i, s, p, t, ..] = facts(x);
            [i, s, p, t]
        })
        .collect();
    let want: Vec<[String; 4]> = [
        ["swp1", "spine01", "swp1", "ifname"],
        ["swp2", "spine02", "swp1", "ifname"],
        ["swp3", "leaf02", "swp3", "ifname"],
        ["swp4", "leaf02", "swp4", "ifname"],
    ]
    .into_iter()
    .map(|a| a.map(String::from))
    .collect();
    assert_eq!(got, want);
}
