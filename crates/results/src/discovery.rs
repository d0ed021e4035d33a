//! What each port is plugged into, as the hosts see it: the neighbour behind every NIC
//! port (LLDP on Ethernet/RoCE, directed-route SMPs on InfiniBand), and, from one rank,
//! the switch-to-switch links of the whole fabric (`ibnetdiscover`).
//!
//! Every fact carries its source. A port without a neighbour is `state = "none"` (many
//! RoCE NICs never see LLDP: that is not a fault); a port whose neighbour could not be
//! asked (no lldpd, no permission, no umad device) is `state = "unknown"` with `why`.

use serde::{Deserialize, Serialize};

/// The neighbour one local port sees.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Neighbor {
    /// Kernel interface of the port (`eth2`, `ens1f0np0`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// RDMA device and port (`mlx5_0`, 1), when the port is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// `lldp` (lldpd's `lldpcli -f json0 show neighbors details`), `smp` (`smpquery -D
    /// nodeinfo|nodedesc 0,1`), or `plan` for facts a test wrote by hand.
    pub source: String,
    /// `found`, `none` (asked, nobody answered) or `unknown` (could not ask: see `why`).
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The switch: LLDP chassis id (often its MAC) or the InfiniBand node GUID (`0x...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chassis_id: Option<String>,
    /// The switch's name: LLDP system name, or the InfiniBand node description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_name: Option<String>,
    /// The switch port: LLDP port id (`ifname` or MAC), or the InfiniBand port number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_id: Option<String>,
    /// What kind of name the LLDP port id is, as lldpd calls the subtype: `ifname` (Cumulus,
    /// lldpd's `portidsubtype ifname`), `local` (SONiC's port alias, `Eth1/31`), `ifalias`,
    /// `mac` or `ip` (an address, which names no port), ...; absent for InfiniBand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_id_type: Option<String>,
    /// LLDP port description, where the switch sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_descr: Option<String>,
    /// Link width and speed as trained (`4X`, `NDR`; InfiniBand), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<String>,
}

/// One cable between two switch ports (or a switch and a host port), as discovered.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct FabricLink {
    pub a_guid: String,
    pub a_name: String,
    pub a_port: u32,
    pub b_guid: String,
    pub b_name: String,
    pub b_port: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<String>,
}

/// The whole fabric as one rank discovered it (InfiniBand: `ibnetdiscover`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FabricDiscovery {
    /// `ibnetdiscover`, or `plan` for a fabric written by hand.
    pub source: String,
    /// Host (and rank) that ran the discovery.
    pub host: String,
    /// `found` or `unknown` (see `why`).
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    #[serde(default)]
    pub links: Vec<FabricLink>,
}
