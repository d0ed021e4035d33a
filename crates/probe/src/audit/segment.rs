//! A RoCE port's segment as the host sets it, from iproute2's JSON (`ip -d -j link show dev
//! NETDEV`, ip/iplink.c and ip/iplink_vlan.c, ip/iplink_vrf.c): an array of one object per
//! link with `ifname`, `link` (the lower of a VLAN), `master` (a bridge, a bond or a VRF it
//! is enslaved to) and `linkinfo` (`-d`): `info_kind` and `info_data` of the link itself
//! (`vlan`: `{"protocol":"802.1Q","id":101,...}`), `info_slave_kind` and `info_slave_data`
//! of its place under `master` (`vrf`: `{"table":101}`). The judgment against the tenants
//! is `results::tenants::Tenants::segment_findings`.

use results::audit::Segment;
use serde::Deserialize;

#[derive(Deserialize)]
struct Link {
    ifname: String,
    #[serde(default)]
    master: Option<String>,
    #[serde(default)]
    linkinfo: Option<LinkInfo>,
}

#[derive(Deserialize, Default)]
struct LinkInfo {
    #[serde(default)]
    info_kind: Option<String>,
    #[serde(default)]
    info_data: Option<serde_json::Value>,
    #[serde(default)]
    info_slave_kind: Option<String>,
    #[serde(default)]
    info_slave_data: Option<serde_json::Value>,
}

/// The segment of `netdev` from `ip -d -j link show dev NETDEV`.
pub fn ip_link(json: &str, netdev: &str) -> Result<Segment, String> {
    let links: Vec<Link> =
        serde_json::from_str(json).map_err(|e| format!("not iproute2's link JSON: {e}"))?;
    let l = links
        .into_iter()
        .find(|l| l.ifname == netdev)
        .ok_or_else(|| format!("ip printed no link named {netdev}"))?;
    let info = l.linkinfo.unwrap_or_default();
    let vlan = match info.info_kind.as_deref() {
        Some("vlan") => Some(
            info.info_data
                .as_ref()
                .and_then(|d| d.get("id"))
                .and_then(|v| v.as_u64())
                .and_then(|v| u16::try_from(v).ok())
                .ok_or_else(|| format!("{netdev} is a VLAN without an id in its info_data"))?,
        ),
        _ => None,
    };
    let in_vrf = info.info_slave_kind.as_deref() == Some("vrf");
    Ok(Segment {
        netdev: netdev.to_string(),
        vlan,
        vrf: l.master.filter(|_| in_vrf),
        vrf_table: info
            .info_slave_data
            .filter(|_| in_vrf)
            .and_then(|d| d.get("table").and_then(|t| t.as_u64()))
            .and_then(|t| u32::try_from(t).ok()),
    })
}
