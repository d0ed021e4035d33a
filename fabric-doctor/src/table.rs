//! The audit as a table a person reads on day zero: one block per port (its link, its
//! lossless configuration, its optics), then the host, then the findings.

use results::audit::{NodeAudit, PortAudit};

/// `  key              value` lines.
fn line(s: &mut String, k: &str, v: String) {
    s.push_str(&format!("  {k:<16} {v}\n"));
}

/// Priorities set in a per-priority list: `on 3` or `off on every priority`.
fn prios(v: &[bool]) -> String {
    let on: Vec<String> = (0..v.len())
        .filter(|&i| v[i])
        .map(|i| i.to_string())
        .collect();
    if on.is_empty() {
        "off on every priority".into()
    } else {
        format!("on {}", on.join(","))
    }
}

/// The whole table.
pub fn table(a: &NodeAudit) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "fabric-doctor: {}  ({}, ethtool {})\n",
        a.hostname,
        a.iproute2.show(|v| v.clone()),
        a.ethtool.show(|v| v.clone())
    ));
    s.push_str(&format!(
        "suite traffic: tclass {} (DSCP {}), SL {}\n",
        a.suite.traffic_class,
        a.suite.dscp(),
        a.suite.service_level
    ));
    if a.ports.is_empty() {
        s.push_str("no RDMA port and no device-backed network interface found\n");
    }
    for p in &a.ports {
        port(&mut s, p);
    }
    host(&mut s, a);
    findings(&mut s, a);
    s
}

/// One port: its name line and carrier, its lossless settings, its link and optics.
fn port(s: &mut String, p: &PortAudit) {
    let s = &mut *s;
    s.push_str(&format!(
        "\nport {}  {}  mtu {}  speed {}  fw {}\n",
        p.name(),
        p.link_layer,
        p.mtu.map_or("?".into(), |m| m.to_string()),
        p.speed_mbit_s
            .map_or("?".into(), |v| format!("{} Gb/s", v / 1000)),
        p.firmware.as_deref().unwrap_or("?")
    ));
    line(
        s,
        "carrier changes",
        p.carrier_changes.show(|v| v.to_string()),
    );
    if let Some(seg) = p.segment.get() {
        line(s, "segment", segment(seg));
    }
    lossless(s, p);
    link(s, p);
}

/// `bond0.200: VLAN 200, VRF acme (table 101)`; what the host leaves to the switch said so.
fn segment(seg: &results::audit::Segment) -> String {
    let vlan = seg
        .vlan
        .map_or("untagged on the host".into(), |v| format!("VLAN {v}"));
    let vrf = match (&seg.vrf, seg.vrf_table) {
        (Some(v), Some(t)) => format!("VRF {v} (table {t})"),
        (Some(v), None) => format!("VRF {v}"),
        _ => "no VRF on the host".into(),
    };
    format!("{}: {vlan}, {vrf}", seg.netdev)
}

/// PFC, ETS, trust, DSCP map, DCBX, buffers, ECN, DCQCN, CNP and the suite's own traffic.
fn lossless(s: &mut String, p: &PortAudit) {
    line(s, "PFC", p.pfc.show(|v| prios(&v.enabled)));
    line(
        s,
        "ETS prio->tc",
        p.ets
            .show(|v| format!("{:?} tsa {:?} bw {:?}", v.prio_tc, v.tc_tsa, v.tc_bw)),
    );
    line(s, "trust", p.trust.show(|v| v.clone()));
    line(
        s,
        "DSCP->prio",
        p.dscp_prio.show(|m| {
            let nonzero: Vec<String> = m
                .iter()
                .filter(|(_, &pr)| pr != 0)
                .map(|(d, pr)| format!("{d}:{pr}"))
                .collect();
            format!(
                "{} entries; non-zero {}",
                m.len(),
                if nonzero.is_empty() {
                    "none".into()
                } else {
                    nonzero.join(" ")
                }
            )
        }),
    );
    line(s, "DCBX", p.dcbx.show(|v| v.join(",")));
    line(
        s,
        "buffers",
        p.buffer.show(|v| {
            format!(
                "prio->buffer {:?} sizes {:?}",
                v.prio_buffer, v.buffer_size_bytes
            )
        }),
    );
    line(
        s,
        "ECN np / rp",
        p.ecn
            .show(|e| format!("np {} / rp {}", prios(&e.np_enabled), prios(&e.rp_enabled))),
    );
    line(
        s,
        "DCQCN",
        p.dcqcn.show(|m| format!("{} parameters", m.len())),
    );
    line(
        s,
        "CNP",
        p.cnp.show(|c| {
            format!(
                "DSCP {} priority {}",
                c.dscp.map_or("?".into(), |d| d.to_string()),
                c.priority.map_or("?".into(), |d| d.to_string())
            )
        }),
    );
    line(s, "NIC tclass", p.nic_tclass.show(nic_tclass));
    line(
        s,
        "suite traffic",
        p.traffic.show(|t| {
            format!(
                "GID {} {} -> priority {} PFC {} ECN {}",
                t.gid_index.map_or("?".into(), |g| g.to_string()),
                t.gid_type.as_deref().unwrap_or("?"),
                t.priority.map_or("?".into(), |v| v.to_string()),
                t.pfc_on.map_or("?", |b| if b { "on" } else { "off" }),
                t.ecn_on.map_or("?", |b| if b { "on" } else { "off" })
            )
        }),
    );
}

/// FEC, driver counters and the module's optics.
fn link(s: &mut String, p: &PortAudit) {
    line(
        s,
        "FEC",
        p.fec.show(|f| {
            format!(
                "active {} (configured {})",
                f.active.join(","),
                f.configured.join(",")
            )
        }),
    );
    line(
        s,
        "driver counters",
        p.driver_counters.show(|c| format!("{} read", c.len())),
    );
    line(
        s,
        "module",
        p.module.show(|m| {
            format!(
                "{} rx {:?} dBm (low warning {})",
                m.part_number.as_deref().unwrap_or("?"),
                m.rx_power_dbm,
                m.rx_power_thresholds
                    .as_ref()
                    .and_then(|t| t.low_warning)
                    .map_or("?".into(), |v| format!("{v} dBm"))
            )
        }),
    );
}

/// memlock, IOMMU and the NCCL settings.
fn host(s: &mut String, a: &NodeAudit) {
    s.push_str("\nhost\n");
    line(
        s,
        "memlock",
        a.host
            .memlock_bytes
            .show(|v| v.map_or("unlimited".into(), |b| format!("{b} bytes"))),
    );
    line(s, "IOMMU", a.host.iommu.show(|v| v.clone()));
    line(s, "NCCL settings", a.host.nccl_line());
}

/// Every finding with its fix.
fn findings(s: &mut String, a: &NodeAudit) {
    s.push_str(&format!("\nfindings: {}\n", a.findings.len()));
    for f in &a.findings {
        s.push_str(&format!(
            "  {:<4} {:<18} {}\n       fix: {}\n",
            f.severity.to_uppercase(),
            f.code,
            f.message,
            f.fix
        ));
    }
}

/// What the driver sets below the application: `global 236 (DSCP 59, over every QP's own)`,
/// `none (the QP's own class)`, with the rules and rdma_cm's default ToS where present.
fn nic_tclass(t: &results::audit::NicTrafficClass) -> String {
    let mut out = match t.global {
        Some(g) => format!("global {g} (DSCP {}, over every QP's own)", g >> 2),
        None => "none (each QP's own class)".to_string(),
    };
    if !t.rules.is_empty() {
        out.push_str(&format!("; {} per-destination rule(s)", t.rules.len()));
    }
    if let Some(tos) = t.rdma_cm_default_tos {
        out.push_str(&format!("; rdma_cm default ToS {tos}"));
    }
    out
}
