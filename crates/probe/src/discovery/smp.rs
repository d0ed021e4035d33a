//! The InfiniBand neighbour of each local port, asked with directed-route SMPs.
//!
//! A directed-route SMP walks the path of port numbers it is given, whatever the routing
//! tables say: `0,1` is "out of our port 1, to whatever is on the other end". So
//! `smpquery -C CA -P PORT -D nodeinfo 0,1` answers with the neighbour's node GUID, type and
//! the number of ITS port the cable lands on (`LocalPort`), `nodedesc 0,1` with its node
//! description (the switch name; NVIDIA switches say `MF0;<name>:<model>/U1`), and
//! `portinfo 0,1 <that port>` with the link's active width and speed. Local CA ports come
//! from `ibstat` (infiniband-diags reads them through libibumad, which ibsim's preload
//! library also answers, so the same code runs against a simulated fabric). Output shapes
//! are from infiniband-diags 44 (Debian 12), captured under ibsim (`fixtures/*-44-*`).

use results::discovery::Neighbor;

/// One port of a local channel adapter, as `ibstat` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaPort {
    /// The channel adapter (`mlx5_0`).
    pub ca: String,
    /// Its port, from 1.
    pub port: u32,
    /// `LinkUp`, `Polling`, `Disabled`, ... as ibstat prints it.
    pub physical_state: String,
    /// `InfiniBand` or `Ethernet`.
    pub link_layer: String,
}

impl CaPort {
    /// InfiniBand, not RoCE (whose neighbours LLDP tells).
    pub fn is_infiniband(&self) -> bool {
        matches!(self.link_layer.as_str(), "InfiniBand" | "IB")
    }
}

/// Every CA port in `ibstat` output (`CA 'mlx5_0'` blocks with `Port N:` sections).
pub fn parse_ibstat(text: &str) -> Vec<CaPort> {
    let mut out: Vec<CaPort> = Vec::new();
    let mut ca: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("CA '").and_then(|r| r.strip_suffix('\'')) {
            ca = Some(name.to_string());
        } else if let Some(n) = t
            .strip_prefix("Port ")
            .and_then(|r| r.strip_suffix(':'))
            .and_then(|n| n.parse().ok())
        {
            if let Some(ca) = &ca {
                out.push(CaPort {
                    ca: ca.clone(),
                    port: n,
                    physical_state: String::new(),
                    link_layer: String::new(),
                });
            }
        } else if let (Some(p), Some((k, v))) = (out.last_mut(), t.split_once(':')) {
            match k.trim() {
                "Physical state" => p.physical_state = v.trim().to_string(),
                "Link layer" => p.link_layer = v.trim().to_string(),
                _ => {}
            }
        }
    }
    out
}

/// `Key:.........value` lines of smpquery into (key, value).
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim_start_matches('.').trim())
    })
}

/// The switch name in a node description: NVIDIA's `MF0;<name>:<model>/U1` gives `<name>`
/// (as NVIDIA/topograph reads it), anything else is taken whole.
pub fn switch_name(desc: &str) -> String {
    if let Some(rest) = desc.strip_prefix("MF0;") {
        if let Some((name, _)) = rest.split_once(':') {
            return name.to_string();
        }
    }
    desc.to_string()
}

/// InfiniBand's name for a lane rate as smpquery prints it: `2.5 Gbps` is SDR, ... The
/// extended speeds (FDR and up) are in `LinkSpeedExtActive` when it is set.
pub fn speed_name(base: Option<&str>, ext: Option<&str>) -> Option<String> {
    let by_rate = |s: &str| -> Option<&'static str> {
        let g: f64 = s.split_whitespace().next()?.parse().ok()?;
        let table = [
            (2.5, "SDR"),
            (5.0, "DDR"),
            (10.0, "QDR"),
            (14.0625, "FDR"),
            (25.78125, "EDR"),
            (53.125, "HDR"),
            (106.25, "NDR"),
            (212.5, "XDR"),
        ];
        table
            .iter()
            .find(|(r, _)| (r - g).abs() < 0.01)
            .map(|(_, n)| *n)
    };
    ext.and_then(by_rate)
        .or_else(|| base.and_then(by_rate))
        .map(str::to_string)
        .or_else(|| base.map(str::to_string))
}

/// The neighbour from the three answers (`nodeinfo`, `nodedesc`, `portinfo` at the far
/// port; the last is optional: without it width and speed stay empty).
pub fn neighbor(
    port: &CaPort,
    nodeinfo: &str,
    nodedesc: &str,
    portinfo: Option<&str>,
) -> Result<Neighbor, String> {
    let guid = field(nodeinfo, "Guid")
        .ok_or("smpquery nodeinfo printed no Guid line (not infiniband-diags output?)")?;
    let far_port = field(nodeinfo, "LocalPort").ok_or("smpquery nodeinfo printed no LocalPort")?;
    let desc = field(nodedesc, "Node Description").unwrap_or("");
    let width = portinfo.and_then(|p| field(p, "LinkWidthActive").map(str::to_string));
    let speed = portinfo.and_then(|p| {
        speed_name(
            field(p, "LinkSpeedActive"),
            field(p, "LinkSpeedExtActive").filter(|e| e.contains("Gbps")),
        )
    });
    Ok(Neighbor {
        device: Some(port.ca.clone()),
        port: Some(port.port),
        source: "smp".into(),
        state: "found".into(),
        chassis_id: Some(super::ibnet::normalize_guid(guid).unwrap_or_else(|| guid.to_string())),
        system_name: (!desc.is_empty()).then(|| switch_name(desc)),
        port_id: Some(far_port.to_string()),
        port_descr: (!desc.is_empty()).then(|| desc.to_string()),
        width,
        speed,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODEINFO: &str = include_str!("fixtures/smpquery-44-nodeinfo.txt");
    const NODEDESC: &str = include_str!("fixtures/smpquery-44-nodedesc.txt");
    const PORTINFO: &str = include_str!("fixtures/smpquery-44-portinfo.txt");
    const IBSTAT: &str = include_str!("fixtures/ibstat-44.txt");

    #[test]
    fn ibstat_lists_ca_ports_with_state_and_link_layer() {
        let p = parse_ibstat(IBSTAT);
        assert_eq!(
            p,
            [CaPort {
                ca: "ibsim0".into(),
                port: 1,
                physical_state: "LinkUp".into(),
                link_layer: "IB".into()
            }]
        );
        assert!(p[0].is_infiniband());
        let roce = "CA 'mlx5_0'\n\tPort 1:\n\t\tPhysical state: LinkUp\n\t\tLink layer: Ethernet\n";
        assert!(!parse_ibstat(roce)[0].is_infiniband());
    }

    #[test]
    fn the_neighbour_of_g0n1_under_ibsim() {
        // Captured as SIM_HOST=g0n1 on tests/fabric/ibsim/narrow-uplink.net: g0n1 is on
        // leaf-g0 port 2.
        let p = &parse_ibstat(IBSTAT)[0];
        let n = neighbor(p, NODEINFO, NODEDESC, Some(PORTINFO)).unwrap();
        assert_eq!(n.device.as_deref(), Some("ibsim0"));
        assert_eq!(n.port, Some(1));
        assert_eq!(n.chassis_id.as_deref(), Some("0x0000000000200000"));
        assert_eq!(n.system_name.as_deref(), Some("leaf-g0"));
        assert_eq!(n.port_id.as_deref(), Some("2"));
        assert_eq!(n.width.as_deref(), Some("4X"));
        assert_eq!(n.speed.as_deref(), Some("SDR"));
        assert_eq!((n.source.as_str(), n.state.as_str()), ("smp", "found"));
        let e = neighbor(p, "garbage", NODEDESC, None).unwrap_err();
        assert!(e.contains("Guid"), "{e}");
    }

    #[test]
    fn nvidia_switch_descriptions_and_speed_names() {
        assert_eq!(
            switch_name("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"),
            "A09-P1-IBLEAF-04-04"
        );
        assert_eq!(switch_name("leaf-g0"), "leaf-g0");
        assert_eq!(
            speed_name(Some("10.0 Gbps"), Some("106.25 Gbps")).as_deref(),
            Some("NDR")
        );
        assert_eq!(speed_name(Some("5.0 Gbps"), None).as_deref(), Some("DDR"));
        assert_eq!(speed_name(Some("7 Gbps"), None).as_deref(), Some("7 Gbps"));
    }
}
