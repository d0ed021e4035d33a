//! `ip -d -j link` of real netdevs (tests/corpus/real-outputs/ip-link; SOURCES.md there):
//! the segment a RoCE port's host sets, read from the netdev its GID is on.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::path::PathBuf;

use probe::audit::segment::ip_link;

fn sample(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/real-outputs/ip-link")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_vlan_in_a_vrf_a_bare_vlan_and_a_physical_port() {
    let s = ip_link(&sample("vlan101-in-vrf.json"), "sr0.101").unwrap();
    assert_eq!(s.netdev, "sr0.101");
    assert_eq!(s.vlan, Some(101));
    assert_eq!(s.vrf.as_deref(), Some("vrf-acme"));
    assert_eq!(s.vrf_table, Some(101));
    let s = ip_link(&sample("vlan102.json"), "sr0.102").unwrap();
    assert_eq!(
        (s.vlan, s.vrf.as_deref(), s.vrf_table),
        (Some(102), None, None)
    );
    // The physical (here dummy) netdev: untagged on the host, in no VRF.
    let s = ip_link(&sample("physical-dummy.json"), "sr0").unwrap();
    assert!(!s.is_set(), "{s:?}");
    // The VRF device itself is not a port in a VRF.
    let s = ip_link(&sample("vrf.json"), "vrf-acme").unwrap();
    assert!(!s.is_set(), "{s:?}");
    // A name the output does not hold, and garbage, are errors that say so.
    let e = ip_link(&sample("vlan102.json"), "sr0.101").unwrap_err();
    assert!(e.contains("no link named sr0.101"), "{e}");
    assert!(ip_link("not json", "sr0").unwrap_err().contains("iproute2"));
}

/// The kernel puts a RoCE v2 GID on each VLAN upper's address (rxe0's GID 4 is
/// 10.101.0.1 on sr0.101): that GID's netdev is the one whose segment the audit reads.
#[test]
fn rocev2_gids_sit_on_the_vlan_uppers() {
    let gids = sample("rxe0-gids.txt");
    let on_vlan: Vec<&str> = gids
        .lines()
        .filter(|l| l.contains("ffff:0a65:0001"))
        .collect();
    assert_eq!(on_vlan.len(), 1, "{gids}");
    assert!(on_vlan[0].ends_with("RoCE v2 sr0.101"), "{gids}");
}
