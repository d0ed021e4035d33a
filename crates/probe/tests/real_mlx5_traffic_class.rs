//! MLNX_OFED / DOCA mlx5_ib's `/sys/class/infiniband/DEV/tc/PORT/traffic_class` as real
//! hosts print it (tests/corpus/real-outputs/mlx5-traffic-class; SOURCES.md names each
//! sample's origin): the class the kernel puts on every QP of the port.

use std::path::PathBuf;

use probe::audit::parse::nic_traffic_class;
use results::audit::NicTrafficClass;

fn sample(name: &str) -> NicTrafficClass {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/real-outputs/mlx5-traffic-class")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    nic_traffic_class(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn connectx7_global_class_236_is_dscp_59() {
    // 8 x ConnectX-7 400G RoCE v2 (fw 40.47.2682): trust dscp, DSCP 59 -> priority 5, PFC
    // on 5. The NCCL QPs asked nothing and rode DSCP 59 all the same.
    let t = sample("connectx7-400g-global-236.txt");
    assert_eq!(t.global, Some(236));
    assert_eq!(t.global.map(|g| g >> 2), Some(59));
    assert!(t.rules.is_empty());
}

#[test]
fn global_class_106_is_dscp_26_ecn_capable() {
    let t = sample("mlx5-global-106.txt");
    assert_eq!(t.global, Some(106));
    assert_eq!(t.global.map(|g| (g >> 2, g & 3)), Some((26, 2)));
}

#[test]
fn an_unset_class_is_an_empty_file_not_class_zero() {
    // The driver prints nothing while no class is written (tcd->val = -1): the QP's own
    // class stands; reading it as "Global tclass=0" would move the suite to DSCP 0.
    let t = sample("mlnx-ofed-unset.txt");
    assert_eq!(t, NicTrafficClass::default());
}

#[test]
fn a_class_that_is_not_a_byte_is_refused_with_the_line() {
    let e = nic_traffic_class("Global tclass=300\n").unwrap_err();
    assert!(e.contains("Global tclass=300"), "{e}");
}
