//! `smpquery pkeys` of ports whose tables a real OpenSM set from a partitions.conf on an
//! ibsim subnet (tests/corpus/real-outputs/smpquery-pkeys; SOURCES.md says how they were
//! made): what the parser reads, and what the tenants say of each table.

use std::path::PathBuf;

use probe::audit::pkeys::parse_smpquery;
use results::tenants::Tenants;

fn sample(name: &str) -> Vec<u16> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/real-outputs/smpquery-pkeys")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let t = parse_smpquery(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(t.capacity, Some(64), "{name}");
    t.keys()
}

/// The tenants as the contract has them: g1n1 belongs to globex.
fn tenants() -> Tenants {
    Tenants::parse(
        "tenants.toml",
        r#"version = 1
[[tenant]]
name = "acme"
nodes = ["g0n[0-1]", "g1n0"]
pkey = "0x0001"
[[tenant]]
name = "globex"
nodes = ["g0n[2-3]", "g1n[1-3]"]
pkey = "0x0002"
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_tenant_port_holds_the_default_limited_and_its_own_full() {
    let keys = sample("opensm-ibsim-hca-acme.txt");
    assert_eq!(keys, [0x7fff, 0x8001]);
    assert!(tenants().pkey_findings("g0n1", &keys).is_empty());
}

#[test]
fn a_node_in_the_wrong_partition_is_named() {
    let keys = sample("opensm-ibsim-hca-wrong-partition.txt");
    assert_eq!(keys, [0x7fff, 0x8001]);
    let f = tenants().pkey_findings("g1n1", &keys);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f[0].contains("does not hold its tenant globex's partition 0x8002 (full)"),
        "{f:?}"
    );
    assert!(
        f[1].contains("holds tenant acme's partition 0x8001 (full) (it is tenant globex's node)"),
        "{f:?}"
    );
}

#[test]
fn the_sm_port_is_a_full_member_of_the_default_partition() {
    let keys = sample("opensm-ibsim-hca-sm-port.txt");
    assert_eq!(keys, [0xffff, 0x8001]);
    let f = tenants().pkey_findings("g0n0", &keys);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].contains("default partition as a full member"), "{f:?}");
}
