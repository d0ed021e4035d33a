//! `ethtool -m` of real modules (tests/corpus/real-outputs/ethtool-m; SOURCES.md names
//! each sample's origin): what the parser reads from each, lane by lane.

use std::path::PathBuf;

use probe::audit::parse::ethtool_module_text;

fn sample(name: &str) -> results::audit::Module {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/real-outputs/ethtool-m")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    ethtool_module_text(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn cmis_400g_xdr4_has_four_lanes_not_eight() {
    // Arista QDD-400G-XDR4 (CMIS 4.0): ethtool prints 8 channels, lanes 5-8 at 0.000 mA
    // and 0.0000 mW / -inf dBm with no loss of signal. Read as lanes they were four
    // rx-power-alarm FAILs on a healthy link.
    let m = sample("cmis-qsfpdd-400g-xdr4-arista.txt");
    assert_eq!(m.part_number.as_deref(), Some("QDD-400G-XDR4"));
    assert_eq!(m.rx_power_dbm, [3.52, 2.70, 2.65, 2.60]);
    assert_eq!(m.tx_power_dbm, [2.03, 2.17, 2.13, 1.58]);
    assert_eq!(m.tx_bias_ma, [83.806, 81.878, 72.900, 110.100]);
    assert_eq!(m.idle_lanes, 4);
    assert_eq!(m.temperature_c, Some(70.49));
    let t = m.rx_power_thresholds.unwrap();
    assert_eq!((t.low_alarm, t.low_warning), (Some(-8.90), Some(-6.90)));
    assert_eq!((t.high_alarm, t.high_warning), (Some(5.50), Some(4.50)));
    // No lane left is under the module's own low warning.
    assert!(m.rx_power_dbm.iter().all(|rx| *rx >= -6.90));
}

#[test]
fn sff8636_qsfp28_thresholds_never_overwrite_a_lane() {
    // Mellanox MMA1B00-C100D on a Cumulus switch: four lit lanes. The `Laser output power
    // high alarm threshold` line (5.40 dBm) used to overwrite lane 1's TX power (1.44).
    let m = sample("sff8636-qsfp28-100g-sr4-mellanox-mma1b00.txt");
    assert_eq!(m.identifier.as_deref(), Some("0x11 (QSFP28)"));
    // Its compliance codes, one `Transceiver type` line each: a 100G SR4, which needs
    // RS-FEC (clause 95), so FEC off at 100 Gb/s fails on it.
    assert_eq!(m.compliance, ["100G Ethernet: 100G Base-SR4 or 25GBase-SR"]);
    assert!(!m.runs_without_fec_at_100g());
    assert_eq!(m.rx_power_dbm, [-0.12, -0.09, 0.55, 0.55]);
    assert_eq!(m.tx_power_dbm, [1.44, 1.20, 1.26, 1.27]);
    assert_eq!(m.tx_bias_ma, [6.75; 4]);
    assert_eq!(m.idle_lanes, 0);
    let t = m.rx_power_thresholds.unwrap();
    assert_eq!((t.low_alarm, t.low_warning), (Some(-13.31), Some(-10.30)));
    let m = sample("sff8636-qsfp28-100g-lta8531.txt");
    assert_eq!(m.rx_power_dbm, [-0.11, 0.17, -0.11, 0.08]);
    assert_eq!(
        m.compliance,
        [
            "100G Ethernet: 100G Base-SR4 or 25GBase-SR",
            "FC: short distance (S)",
            "FC: Shortwave laser w/o OFC (SN)",
            "FC: Multimode, 50um (OM3)",
        ]
    );
    assert_eq!(m.idle_lanes, 0);
}

#[test]
fn a_dark_module_keeps_every_lane() {
    // Finisar FTL410QE2C with no bias and no light on any lane: dark, not idle. Its
    // lanes stay, to be judged (its thresholds read 0 mW: -inf, which judges nothing).
    let m = sample("sff8636-qsfp-40g-sr4-finisar-dark.txt");
    assert_eq!(m.rx_power_dbm.len(), 4);
    assert!(m.rx_power_dbm.iter().all(|r| r.is_infinite()));
    assert_eq!(m.idle_lanes, 0);
}
