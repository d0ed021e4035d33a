//! LLDP neighbours from lldpd: `lldpcli -f json0 show neighbors details`.
//!
//! A switch port sends an LLDP frame every few seconds with its chassis (id, usually the
//! switch's MAC, and system name) and its port (id, with switch OSes the interface name such
//! as `swp12`, and a description); lldpd on the host keeps the last one per interface. The
//! `json0` format is used because its shape does not change with the number of interfaces
//! or neighbours (every object is a list, every leaf a `{"value": ...}`), unlike `-f json`,
//! where one interface is an object and several an array. Shapes here are from lldpd 1.0.16
//! (Debian 12), captured in the simulated fabric (`fixtures/lldpd-1.0.16-*.json`).
//!
//! Interfaces lldpd runs on but where nothing was heard (`show interfaces`) are `none`: many
//! RoCE NICs never see LLDP (the switch does not send it, or the NIC firmware consumes it),
//! so that is not a fault by itself.

use serde::Deserialize;

use results::discovery::Neighbor;

#[derive(Deserialize)]
struct Top {
    #[serde(default)]
    lldp: Vec<Section>,
}

#[derive(Deserialize)]
struct Section {
    #[serde(default)]
    interface: Vec<Iface>,
}

#[derive(Deserialize)]
struct Iface {
    name: String,
    #[serde(default)]
    via: Option<String>,
    #[serde(default)]
    chassis: Vec<Chassis>,
    #[serde(default)]
    port: Vec<Port>,
}

#[derive(Deserialize)]
struct Chassis {
    #[serde(default)]
    id: Vec<Typed>,
    #[serde(default)]
    name: Vec<Value>,
}

#[derive(Deserialize)]
struct Port {
    #[serde(default)]
    id: Vec<Typed>,
    #[serde(default)]
    descr: Vec<Value>,
    #[serde(default, rename = "auto-negotiation")]
    autoneg: Vec<Autoneg>,
}

#[derive(Deserialize)]
struct Autoneg {
    #[serde(default)]
    current: Vec<Value>,
}

#[derive(Deserialize)]
struct Typed {
    /// The TLV's subtype as lldpd names it (`ifname`, `local`, `mac`, ...).
    #[serde(default, rename = "type")]
    kind: Option<String>,
    value: String,
}

#[derive(Deserialize)]
struct Value {
    value: String,
}

fn first(v: &[Value]) -> Option<String> {
    v.first().map(|x| x.value.clone())
}

/// The neighbours in `lldpcli -f json0 show neighbors details` output, one per interface
/// and neighbour heard by LLDP (CDP/EDP/... entries are left out: `via` must be `LLDP`).
pub fn parse_neighbors(json: &str) -> Result<Vec<Neighbor>, String> {
    let top: Top = serde_json::from_str(json)
        .map_err(|e| format!("lldpcli printed JSON this parser does not know ({e})"))?;
    let mut out = Vec::new();
    for iface in top.lldp.iter().flat_map(|s| s.interface.iter()) {
        if iface.via.as_deref().is_some_and(|v| v != "LLDP") {
            continue;
        }
        let chassis = iface.chassis.first();
        let port = iface.port.first();
        out.push(Neighbor {
            interface: Some(iface.name.clone()),
            source: "lldp".into(),
            state: "found".into(),
            chassis_id: chassis.and_then(|c| c.id.first()).map(|t| t.value.clone()),
            system_name: chassis.and_then(|c| first(&c.name)),
            port_id: port.and_then(|p| p.id.first()).map(|t| t.value.clone()),
            port_id_type: port.and_then(|p| p.id.first()).and_then(|t| t.kind.clone()),
            port_descr: port.and_then(|p| first(&p.descr)),
            // The MAU type the port reports (`10GbaseT - Four-pair ...`): its first word.
            speed: port
                .and_then(|p| p.autoneg.first())
                .and_then(|a| first(&a.current))
                .and_then(|m| m.split_whitespace().next().map(str::to_string)),
            ..Default::default()
        });
    }
    Ok(out)
}

/// The interfaces lldpd runs on (`lldpcli -f json0 show interfaces`).
pub fn parse_interfaces(json: &str) -> Result<Vec<String>, String> {
    let top: Top = serde_json::from_str(json)
        .map_err(|e| format!("lldpcli printed JSON this parser does not know ({e})"))?;
    Ok(top
        .lldp
        .iter()
        .flat_map(|s| s.interface.iter().map(|i| i.name.clone()))
        .collect())
}

/// Neighbours plus a `none` row for every lldpd interface nobody spoke on.
pub fn merge(mut found: Vec<Neighbor>, interfaces: &[String]) -> Vec<Neighbor> {
    for i in interfaces {
        if !found.iter().any(|n| n.interface.as_deref() == Some(i)) {
            found.push(Neighbor {
                interface: Some(i.clone()),
                source: "lldp".into(),
                state: "none".into(),
                why: Some("lldpd runs on this interface but heard no LLDP neighbour".into()),
                ..Default::default()
            });
        }
    }
    found.sort_by(|a, b| a.interface.cmp(&b.interface));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWAPPED: &str = include_str!("fixtures/lldpd-1.0.16-json0-neighbors-swapped.json");
    const NONE: &str = include_str!("fixtures/lldpd-1.0.16-json0-neighbors-none.json");
    const IFACES: &str = include_str!("fixtures/lldpd-1.0.16-json0-interfaces.json");

    #[test]
    fn json0_neighbours_of_a_node_with_swapped_cables() {
        // g0n1 of the simulated fabric with --swap-cables g0n1:0,1: rail0 lands on rail 1's
        // leaf and rail1 on rail 0's, both on the port reserved for n1 (swp2).
        let n = parse_neighbors(SWAPPED).unwrap();
        let brief: Vec<_> = n
            .iter()
            .map(|x| {
                (
                    x.interface.as_deref().unwrap(),
                    x.system_name.as_deref().unwrap(),
                    x.port_id.as_deref().unwrap(),
                    x.state.as_str(),
                )
            })
            .collect();
        assert_eq!(
            brief,
            [
                ("rail0", "leaf-r1-g0", "swp2", "found"),
                ("rail1", "leaf-r0-g0", "swp2", "found")
            ]
        );
        assert_eq!(n[0].chassis_id.as_deref(), Some("c6:d8:e4:a9:e0:33"));
        assert_eq!(n[0].port_descr.as_deref(), Some("swp2"));
        assert_eq!(n[0].speed.as_deref(), Some("10GbaseT"));
        assert!(n.iter().all(|x| x.source == "lldp"));
    }

    #[test]
    fn nothing_heard_is_none_per_interface_lldpd_runs_on() {
        let found = parse_neighbors(NONE).unwrap();
        assert!(found.is_empty());
        let ifaces = parse_interfaces(IFACES).unwrap();
        assert_eq!(ifaces, ["x0"]);
        let all = merge(found, &ifaces);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].state, "none");
        assert_eq!(all[0].interface.as_deref(), Some("x0"));
        // A heard interface gets no extra `none` row.
        let all = merge(parse_neighbors(SWAPPED).unwrap(), &["rail0".into()]);
        assert_eq!(all.len(), 2);
        assert!(all.iter().all(|n| n.state == "found"));
    }

    #[test]
    fn other_protocols_and_garbage() {
        let cdp =
            r#"{"lldp":[{"interface":[{"name":"eth0","via":"CDPv2","chassis":[],"port":[]}]}]}"#;
        assert!(parse_neighbors(cdp).unwrap().is_empty());
        let e = parse_neighbors("not json").unwrap_err();
        assert!(e.contains("does not know"), "{e}");
    }
}
