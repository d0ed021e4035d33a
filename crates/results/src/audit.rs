//! The lossless-configuration audit of one node (`HostInfo.audit`, and `fabric-doctor`):
//! what each RoCE/InfiniBand port is configured to do with congestion and loss (PFC, ETS,
//! the DSCP-to-priority table and so the trust mode, DCBX, buffers, ECN and DCQCN, the CNP
//! marking), whether this suite's own traffic lands on a lossless priority, the link's FEC
//! and optics, and the host settings RDMA depends on (locked memory, IOMMU, NCCL's
//! environment).
//!
//! RoCEv2 is lossless only by configuration: a priority without PFC drops under
//! congestion, a DSCP that maps to that priority sends the traffic there, a priority
//! without ECN never slows the sender down (DCQCN) and leaves PFC to pause whole links.
//! Every fact carries its source; a fact that could not be read is `unknown` with why
//! (tool missing, not supported by the driver, needs root), never a guess.
//!
//! [`findings`] turns one node's audit into findings with a fix; `aggregate` compares the
//! audits of all nodes (which node or port differs from the rest).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One fact and where it came from. `value` is `None` exactly when `unknown` says why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Fact<T> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<T>,
    /// The file or command the value was read from (`dcb -j pfc -s show dev eth2`,
    /// `/sys/class/net/eth2/ecn/roce_np/enable/3`), or `derived: ...`.
    pub source: String,
    /// Why the value is missing: the tool's own words where it gave some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

impl<T> Default for Fact<T> {
    fn default() -> Self {
        Fact {
            value: None,
            source: String::new(),
            unknown: Some("not read".into()),
        }
    }
}

impl<T> Fact<T> {
    pub fn known(source: impl Into<String>, value: T) -> Self {
        Fact {
            value: Some(value),
            source: source.into(),
            unknown: None,
        }
    }

    pub fn unknown(source: impl Into<String>, why: impl Into<String>) -> Self {
        Fact {
            value: None,
            source: source.into(),
            unknown: Some(why.into()),
        }
    }

    pub fn get(&self) -> Option<&T> {
        self.value.as_ref()
    }

    /// `value` formatted, or `unknown: why`.
    pub fn show(&self, f: impl Fn(&T) -> String) -> String {
        match (&self.value, &self.unknown) {
            (Some(v), _) => f(v),
            (None, Some(w)) => format!("unknown: {w}"),
            (None, None) => "unknown".into(),
        }
    }
}

/// The audit of one node.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeAudit {
    pub hostname: String,
    /// `iproute2-6.1.0` (from `dcb -V`): which JSON shapes the DCB facts came in.
    pub iproute2: Fact<String>,
    /// `6.1` (from `ethtool --version`): `-m` prints JSON only from 6.14.
    pub ethtool: Fact<String>,
    /// What this suite's traffic is set to (traffic class, service level, GID index).
    pub suite: SuiteTraffic,
    pub ports: Vec<PortAudit>,
    pub host: HostAudit,
    /// What is wrong or worth knowing, each with a fix (see [`findings`]).
    #[serde(default)]
    pub findings: Vec<Finding>,
}

/// The traffic class (IPv6 traffic class / IPv4 ToS byte: DSCP in the upper six bits, ECN
/// in the lower two) and service level the suite's verbs benchmarks send with, and the
/// GID index (`None`: the suite's automatic choice, the IPv4-mapped RoCE v2 GID).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SuiteTraffic {
    pub traffic_class: u8,
    pub service_level: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<u32>,
}

impl SuiteTraffic {
    /// DSCP = traffic class >> 2.
    pub fn dscp(&self) -> u8 {
        self.traffic_class >> 2
    }
}

/// One port: a netdev, and the RDMA device port on it where there is one.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PortAudit {
    /// The physical netdev whose DCB, FEC, counters and module are read.
    pub interface: String,
    /// The netdev the RDMA port's GID is on when it is not `interface` itself: a VLAN or
    /// a bond above it (`eth2.100`, `bond0`); RoCE is addressed there, but PFC, ETS, FEC,
    /// the driver's counters and the optics are the physical port's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_port: Option<u32>,
    /// `Ethernet` or `InfiniBand` (RDMA port's `link_layer`); `Ethernet` for a netdev
    /// without an RDMA device.
    pub link_layer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbit_s: Option<u64>,
    /// Carrier up/down transitions since boot (`/sys/class/net/IF/carrier_changes`): a
    /// link that came up once shows 1 or 2; more is a flapping link.
    pub carrier_changes: Fact<u64>,
    pub pfc: Fact<Pfc>,
    pub ets: Fact<Ets>,
    /// DSCP -> priority (the DCB APP table, selector DSCP).
    pub dscp_prio: Fact<BTreeMap<u8, u8>>,
    /// `dscp` or `pcp`: which header field picks the priority of received traffic.
    pub trust: Fact<String>,
    /// DCBX modes set (`host`, `lld_managed`, `cee`, `ieee`, `static`): without `host`
    /// the firmware negotiates with the switch and may override the host's settings.
    pub dcbx: Fact<Vec<String>>,
    pub buffer: Fact<Buffer>,
    pub ecn: Fact<Ecn>,
    /// DCQCN parameters by name (reaction point `rp_*`, notification point `np_*`).
    pub dcqcn: Fact<BTreeMap<String, i64>>,
    pub cnp: Fact<Cnp>,
    /// Where the suite's traffic lands on this port.
    pub traffic: Fact<TrafficPath>,
    pub fec: Fact<Fec>,
    /// Driver counters (`ethtool -S`) that tell of loss, pause, congestion and bit errors.
    pub driver_counters: Fact<BTreeMap<String, u64>>,
    pub module: Fact<Module>,
    /// The port's P_Key table, raw 16-bit keys in use in index order (bit 15: full
    /// membership), from `/sys/class/infiniband/DEV/ports/N/pkeys`; judged against the
    /// tenants. Absent in older documents.
    #[serde(default)]
    pub pkeys: Fact<Vec<u16>>,
    /// The traffic class the NIC driver itself puts on this port's RDMA traffic, over what
    /// the application asked (see [`NicTrafficClass`]). Absent in older documents.
    #[serde(default)]
    pub nic_tclass: Fact<NicTrafficClass>,
    /// Where a RoCE port sits among the tenants' segments as the host sets them (see
    /// [`Segment`]); judged against the tenants like the P_Key table. Absent in older
    /// documents.
    #[serde(default)]
    pub segment: Fact<Segment>,
}

/// A RoCE port's segment as the host sets it, read from the netdev RoCE is addressed on
/// (`ip -d -j link show dev NETDEV`, iproute2): the 802.1Q VLAN when that netdev is a VLAN
/// device (`linkinfo.info_kind` `vlan`, `info_data.id`), and the L3 VRF it is enslaved to
/// (`master`, `linkinfo.info_slave_kind` `vrf`, `info_slave_data.table`). An untagged port
/// whose VLAN the switch's access port sets, and a VRF kept only on the switches, are not
/// visible from the host: `None` there means "not set on the host", never "in no VLAN".
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Segment {
    /// The netdev read (the GID's: `eth2.101`, `bond0.200`, or the physical port).
    pub netdev: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vrf: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vrf_table: Option<u32>,
}

impl Segment {
    /// Whether the host shows anything of the port's segment to judge.
    pub fn is_set(&self) -> bool {
        self.vlan.is_some() || self.vrf.is_some()
    }
}

/// What the host sets as RoCE traffic class below the application.
///
/// MLNX_OFED / DOCA's mlx5_ib has `/sys/class/infiniband/DEV/tc/PORT/traffic_class`: once
/// written (`echo 106 > ...`), it reads `Global tclass=106` and the kernel puts that class
/// on every QP it moves to RTS, whatever the QP asked (perftest's `--tclass`, NCCL_IB_TC);
/// lines after it are per-destination rules; unset, the file is empty. The upstream kernel
/// has no such file. rdma_cm's per-port default ToS (configfs
/// `/sys/kernel/config/rdma_cm/DEV/ports/PORT/default_roce_tos`, set by `cma_roce_tos`)
/// is the class of rdma_cm connections that set none; this suite's verbs benchmarks and
/// NCCL do not connect through rdma_cm, so it is recorded, not used for the suite.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NicTrafficClass {
    /// `Global tclass=N`: the class every QP of the port gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global: Option<u8>,
    /// Per-destination rules printed after the global class, as the driver prints them:
    /// traffic to those peers may get another class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// rdma_cm's default ToS for the port, when its configfs directory exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_cm_default_tos: Option<u8>,
}

/// Where the DSCP of the suite's traffic on a port comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DscpSource {
    /// The class the suite asked for (`--tclass`), the NIC setting none of its own.
    Asked,
    /// The NIC's global traffic class, which replaces what the suite asked for.
    NicGlobal(u8),
}

impl PortAudit {
    /// `eth2 (mlx5_0/1)`, `eth2 via eth2.100 (mlx5_0/1)` or `eth2`.
    pub fn name(&self) -> String {
        let via = self
            .via
            .as_deref()
            .map(|v| format!(" via {v}"))
            .unwrap_or_default();
        match (&self.rdma_device, self.rdma_port) {
            (Some(d), Some(p)) => format!("{}{via} ({d}/{p})", self.interface),
            _ => self.interface.clone(),
        }
    }

    /// The DSCP the suite's traffic really carries on this port: the NIC's global traffic
    /// class where the driver sets one (it overrides every QP's own), else the suite's.
    pub fn suite_dscp(&self, suite: &SuiteTraffic) -> (u8, DscpSource) {
        match self.nic_tclass.get().and_then(|t| t.global) {
            Some(g) => (g >> 2, DscpSource::NicGlobal(g)),
            None => (suite.dscp(), DscpSource::Asked),
        }
    }

    /// How [`suite_dscp`](Self::suite_dscp)'s DSCP came about, for a message:
    /// `DSCP 26, traffic class 106` or `DSCP 59 from the NIC's global tclass 236`.
    pub fn suite_dscp_said(&self, suite: &SuiteTraffic) -> String {
        match self.suite_dscp(suite) {
            (d, DscpSource::Asked) => format!("DSCP {d}, traffic class {}", suite.traffic_class),
            (d, DscpSource::NicGlobal(g)) => format!(
                "DSCP {d} from the NIC's global tclass {g}, over the suite's traffic class {}",
                suite.traffic_class
            ),
        }
    }

    pub fn is_infiniband(&self) -> bool {
        self.link_layer.eq_ignore_ascii_case("infiniband")
    }

    /// The port of an RDMA device: what the suite's traffic (and a job's RDMA traffic)
    /// crosses. A netdev without one is audited and shown, never judged.
    pub fn carries_rdma(&self) -> bool {
        self.rdma_device.is_some()
    }
}

/// IEEE 802.1Qbb priority flow control of one port.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Pfc {
    /// Enabled per priority 0..7.
    pub enabled: Vec<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc_cap: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<u32>,
    /// Pause frames sent per priority (mlx5: `tx_prioN_pause`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<u64>,
    /// Pause frames received per priority (mlx5: `rx_prioN_pause`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indications: Vec<u64>,
}

impl Pfc {
    /// The priorities PFC is on, ascending.
    pub fn priorities(&self) -> Vec<u8> {
        (0..self.enabled.len() as u8)
            .filter(|&p| self.enabled[p as usize])
            .collect()
    }
}

/// IEEE 802.1Qaz enhanced transmission selection.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Ets {
    /// Traffic class of each priority 0..7.
    pub prio_tc: Vec<u8>,
    /// Bandwidth share of each traffic class, percent.
    pub tc_bw: Vec<u8>,
    /// Scheduler of each traffic class: `strict`, `ets`, `cbs`, `vendor`.
    pub tc_tsa: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub willing: Option<bool>,
}

/// Port receive buffers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Buffer {
    /// Buffer of each priority 0..7.
    pub prio_buffer: Vec<u8>,
    pub buffer_size_bytes: Vec<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_size_bytes: Option<u64>,
}

/// ECN per priority: the notification point (receiver: sends CNPs for CE-marked packets)
/// and the reaction point (sender: slows down on CNPs).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Ecn {
    pub np_enabled: Vec<bool>,
    pub rp_enabled: Vec<bool>,
}

/// How congestion notification packets are marked.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Cnp {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
}

/// The suite's traffic on one port.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TrafficPath {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<u32>,
    /// `RoCE v2`, `IB/RoCE v1` (`gid_attrs/types/N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_type: Option<String>,
    pub dscp: u8,
    /// Priority the DSCP maps to (trust dscp), or 0 (trust pcp on untagged traffic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc_on: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_on: Option<bool>,
}

/// Forward error correction (`ethtool --show-fec`, with statistics).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Fec {
    pub configured: Vec<String>,
    pub active: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected_blocks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncorrectable_blocks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected_bits: Option<u64>,
}

impl Fec {
    /// True when the active encoding corrects nothing (`Off`, `None`).
    pub fn is_off(&self) -> bool {
        !self.active.is_empty()
            && self
                .active
                .iter()
                .all(|a| a.eq_ignore_ascii_case("off") || a.eq_ignore_ascii_case("none"))
    }
}

/// The pluggable module (`ethtool -m`): identity, and per lane the optical power with the
/// module's own thresholds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Module {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
    /// Received optical power per lane, dBm.
    #[serde(default)]
    pub rx_power_dbm: Vec<f64>,
    #[serde(default)]
    pub tx_power_dbm: Vec<f64>,
    #[serde(default)]
    pub tx_bias_ma: Vec<f64>,
    /// The module's receive power thresholds, dBm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_power_thresholds: Option<Thresholds>,
    /// Channels the module reports but does not use (a 4-lane CMIS module prints 8; no
    /// bias, no light, no loss of signal): left out of the lists above.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_lanes: u32,
    /// The module's compliance codes as ethtool names them (SFF-8636 `Transceiver type`
    /// lines: `100G Ethernet: 100G Base-SR4 or 25GBase-SR`, `Extended: 100G Base-LR4 or
    /// 25GBase-LR`, and the Fibre Channel ones); CMIS modules print none. Absent in older
    /// documents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compliance: Vec<String>,
}

impl Module {
    /// Whether the module is a 100G one whose PHY runs without FEC: 100GBASE-LR4 and
    /// -ER4 (IEEE 802.3 clause 88: four 25G NRZ wavelengths, no FEC in the PMD). The
    /// other 100G kinds need RS-FEC (SR4 clause 95, CR4 clause 92, CWDM4 and PSM4 by
    /// their MSAs), and every PAM4 lane (50G and up, clause 119 and 134) needs
    /// RS(544,514).
    pub fn runs_without_fec_at_100g(&self) -> bool {
        self.compliance.iter().any(|c| {
            let c = c.to_ascii_lowercase();
            c.contains("100g base-lr4") || c.contains("100g base-er4")
        })
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A module's alarm and warning thresholds (the module's EEPROM, not our choice).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Thresholds {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_alarm: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_alarm: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_warning: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_warning: Option<f64>,
}

/// Host settings RDMA depends on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HostAudit {
    /// Locked-memory limit of this process (soft, bytes; `None` inside = unlimited), as
    /// `getrlimit(RLIMIT_MEMLOCK)` returns it (`/proc/self/limits`).
    pub memlock_bytes: Fact<Option<u64>>,
    /// `off`, `passthrough` (identity domains) or `translated` (DMA domains).
    pub iommu: Fact<String>,
    /// The kernel command line's IOMMU words (`iommu=pt`, `intel_iommu=on`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iommu_cmdline: Vec<String>,
    /// NCCL variables from the environment and from `/etc/nccl.conf` (or
    /// `$NCCL_CONF_FILE`), with where each came from.
    #[serde(default)]
    pub nccl: BTreeMap<String, NcclSetting>,
}

impl HostAudit {
    /// The NCCL settings in one line, `K=V K=V` in name order, `none` without any: how
    /// fabric-doctor's table shows them and how nodes are compared.
    pub fn nccl_line(&self) -> String {
        if self.nccl.is_empty() {
            return "none".into();
        }
        self.nccl
            .iter()
            .map(|(k, v)| format!("{k}={}", v.value))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NcclSetting {
    pub value: String,
    /// `env` or the file path.
    pub source: String,
}

/// One finding of the audit.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    /// `fail` (traffic will be lost or slowed), `warn` (likely wrong), `info`.
    pub severity: String,
    /// A stable name: `pfc-off`, `traffic-lossy`, `ecn-off`, ...
    pub code: String,
    /// The port's interface, when the finding is about one port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    pub message: String,
    /// What sites usually do about it.
    pub fix: String,
}

/// Number of 802.1p priorities.
pub const PRIORITIES: usize = 8;

fn list(v: &[u8]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The priority `dscp` lands on at a port, from its trust mode and DSCP table: with trust
/// `pcp` untagged RoCE traffic (no VLAN, so no PCP bits) lands on priority 0. With trust
/// `dscp`, a DSCP the APP table does not list is unknown: the NIC maps it by its
/// firmware's table, which the kernel does not show ([`unmapped_dscp`]).
pub fn priority_of(port: &PortAudit, dscp: u8) -> Option<u8> {
    match port.trust.get().map(String::as_str) {
        Some("dscp") => port.dscp_prio.get().and_then(|m| m.get(&dscp).copied()),
        Some(_) => Some(0),
        None => None,
    }
}

/// Whether `dscp` is missing from a port's DSCP APP table while the port trusts DSCP.
/// The table lists what the host set, not always what the NIC does: mlx5 lists all 64
/// DSCPs with the firmware's mapping when it starts in trust dscp, but a first `dcb app
/// add` from trust pcp switches to trust dscp and lists that one entry only, the other
/// DSCPs keeping the firmware's mapping (DSCP >> 3 from the factory: `mlnx_qos` prints
/// `prio:3 dscp:31,...,24`), and `dcb app del` sets its DSCP back to priority 0
/// (drivers/net/ethernet/mellanox/mlx5/core/en_dcbnl.c: ieee_setapp, ieee_delapp). So
/// where such a DSCP lands cannot be read from the host; it used to be taken as 0.
pub fn unmapped_dscp(port: &PortAudit, dscp: u8) -> bool {
    port.trust.get().map(String::as_str) == Some("dscp")
        && port.dscp_prio.get().is_some_and(|m| !m.contains_key(&dscp))
}

/// Where the suite's traffic (`dscp`) lands on `port`, as far as its facts tell.
pub fn traffic_path(port: &PortAudit, dscp: u8) -> (Option<u8>, Option<bool>, Option<bool>) {
    let prio = priority_of(port, dscp);
    let pfc = prio.and_then(|p| {
        port.pfc
            .get()
            .map(|f| f.enabled.get(p as usize).copied().unwrap_or(false))
    });
    let ecn = prio.and_then(|p| {
        port.ecn
            .get()
            .map(|e| e.np_enabled.get(p as usize).copied().unwrap_or(false))
    });
    (prio, pfc, ecn)
}

/// The findings of one node's audit. `lossless` is the set of priorities that must carry
/// PFC (a profile's or the `--lossless-priorities` option); without it the audit only
/// judges what is self-contradictory (the suite's traffic on a priority without PFC).
///
/// Only the ports that carry the suite's RDMA traffic (an RDMA device's port) are judged:
/// a management or storage netdev beside them is audited and shown, its lossless settings
/// are none of the fabric's business, and it gets one `info` finding saying so (it used
/// to fail `pfc-off` and `traffic-lossy` on every healthy node with such a port).
pub fn findings(a: &NodeAudit, lossless: Option<&[u8]>) -> Vec<Finding> {
    let mut out = Findings::default();
    for p in &a.ports {
        if !p.carries_rdma() {
            not_rdma_finding(&mut out, p);
            continue;
        }
        if !p.is_infiniband() {
            lossless_findings(&mut out, p, &a.suite, lossless);
        }
        module_findings(&mut out, p);
        link_findings(&mut out, p);
    }
    host_findings(&mut out, a, lossless);
    out.0
}

/// The findings of one audit, as they are added.
#[derive(Default)]
struct Findings(Vec<Finding>);

impl Findings {
    fn add(&mut self, sev: &str, code: &str, port: Option<&str>, message: String, fix: &str) {
        self.0.push(Finding {
            severity: sev.into(),
            code: code.into(),
            port: port.map(str::to_string),
            message,
            fix: fix.into(),
        })
    }
}

/// A netdev with no RDMA device: reported, not judged.
fn not_rdma_finding(out: &mut Findings, p: &PortAudit) {
    out.add(
        "info",
        "not-rdma",
        Some(p.interface.as_str()),
        format!(
            "{}: no RDMA device on this interface: it carries none of the suite's traffic, so its PFC, trust, ECN, FEC and optics are shown but not judged",
            p.name()
        ),
        "nothing, if it is a management or storage port; if RoCE should run here, load the RDMA driver (mlx5_ib, bnxt_re, irdma) and audit again",
    );
}

/// An Ethernet port's lossless configuration: PFC, trust, the suite's DSCP, ECN, FEC.
fn lossless_findings(
    out: &mut Findings,
    p: &PortAudit,
    suite: &SuiteTraffic,
    lossless: Option<&[u8]>,
) {
    let (dscp, _) = p.suite_dscp(suite);
    let name = p.interface.as_str();
    let port = Some(name);
    if let Some(pfc) = p.pfc.get() {
        let on = pfc.priorities();
        if on.is_empty() {
            out.add("fail", "pfc-off", port,
                format!("{}: PFC is off on every priority: RoCE traffic is dropped under congestion", p.name()),
                "enable PFC on the lossless priority (usually 3) on the host (`dcb pfc set dev IF prio-pfc 3:on`, or mlnx_qos --pfc 0,0,0,1,0,0,0,0) and on the switch ports");
        } else if let Some(want) = lossless {
            if on != want {
                out.add("fail", "pfc-priorities", port,
                    format!("{}: PFC on priorities {} but the lossless priorities are {}", p.name(), list(&on), list(want)),
                    "set PFC on exactly the lossless priorities, the same as the switch (`dcb pfc set dev IF prio-pfc ...`)");
            }
        }
    }
    if p.trust.get().map(String::as_str) == Some("pcp") {
        out.add("warn", "trust-pcp", port,
            format!("{}: trust mode pcp: untagged RoCE traffic (no VLAN) lands on priority 0 whatever its DSCP", p.name()),
            "set trust dscp and map the RoCE DSCP to the lossless priority (`dcb app add dev IF dscp-prio 26:3`, or mlnx_qos --trust dscp)");
    }
    if unmapped_dscp(p, dscp) {
        out.add("warn", "dscp-unmapped", port,
            format!("{}: the suite's traffic ({}) has no entry in the DSCP APP table: the NIC maps it by its firmware's table, which the host cannot read (mlx5 starts at DSCP >> 3, priority {}; an entry deleted with `dcb app del` leaves 0), so the priority it lands on is unknown", p.name(), p.suite_dscp_said(suite), dscp >> 3),
            "map the DSCP explicitly to the lossless priority (`dcb app add dev IF dscp-prio 26:3`), as the switch maps it");
    }
    let (prio, pfc_on, ecn_on) = traffic_path(p, dscp);
    if let (Some(pr), Some(false)) = (prio, pfc_on) {
        out.add("fail", "traffic-lossy", port,
            format!("{}: the suite's traffic ({}) lands on priority {pr}, which has no PFC", p.name(), p.suite_dscp_said(suite)),
            "send with the traffic class of the lossless priority (bench --tclass, NCCL_IB_TC = DSCP*4; 106 = DSCP 26 with ECN capable) or map that DSCP to the lossless priority");
    }
    if let (Some(pr), Some(true), Some(false)) = (prio, pfc_on, ecn_on) {
        out.add("fail", "ecn-off", port,
            format!("{}: ECN (notification point) is off on priority {pr}, the suite's lossless priority: no CNPs, DCQCN never slows senders, PFC pauses whole links instead", p.name()),
            "enable ECN on the RoCE priority for both the notification and the reaction point (/sys/class/net/IF/ecn/roce_np/enable/N and roce_rp/enable/N = 1; enabled by default on mlx5)");
    }
    if let (Some(e), Some(pr), Some(true)) = (p.ecn.get(), prio, pfc_on) {
        if e.np_enabled.get(pr as usize) == Some(&true)
            && e.rp_enabled.get(pr as usize) == Some(&false)
        {
            out.add("fail", "ecn-rp-off", port,
                format!("{}: ECN reaction point off on priority {pr}: CNPs received are ignored (rp_cnp_ignored rises)", p.name()),
                "echo 1 > /sys/class/net/IF/ecn/roce_rp/enable/N");
        }
    }
    if let Some(f) = p.fec.get() {
        if f.is_off() && needs_fec(p) {
            out.add("fail", "fec-off", port,
                format!("{}: FEC is off at {} Gb/s{}: 100G and faster Ethernet PHYs need RS-FEC (IEEE 802.3 clauses 91 and 119; PAM4 lanes run at a raw BER near 1e-5), all but 100GBASE-LR4 and -ER4", p.name(), p.speed_mbit_s.unwrap_or(0) / 1000, module_kind(p)),
                "set FEC to RS or auto on the host and the switch port (`ethtool --set-fec IF encoding rs`)");
        }
        if f.uncorrectable_blocks.is_some_and(|u| u > 0) {
            out.add(
                "warn",
                "fec-uncorrectable",
                port,
                format!(
                    "{}: {} FEC blocks could not be corrected since the driver loaded",
                    p.name(),
                    f.uncorrectable_blocks.unwrap_or(0)
                ),
                "reseat or replace the cable or module; compare with the switch port's counters",
            );
        }
    }
}

/// Whether the port's link needs FEC: at 100 Gb/s and above, except a 100G module whose
/// PHY runs without it (LR4, ER4). Where the module could not be read, a 100G link is
/// taken to need it, as every 100G kind but those two does (the message says the module
/// was not read).
fn needs_fec(p: &PortAudit) -> bool {
    match p.speed_mbit_s {
        Some(s) if s > 100_000 => true,
        Some(100_000) => !p.module.get().is_some_and(Module::runs_without_fec_at_100g),
        _ => false,
    }
}

/// ` (module 100G Ethernet: 100G Base-SR4 or 25GBase-SR)`, or what is known of it.
fn module_kind(p: &PortAudit) -> String {
    match p.module.get() {
        Some(m) => match m
            .compliance
            .iter()
            .find(|c| c.contains("Ethernet") || c.starts_with("Extended"))
        {
            Some(c) => format!(" (module {c})"),
            None => String::new(),
        },
        None => " (module not read)".into(),
    }
}

/// The port's module: each lane's receive power against the module's own thresholds.
fn module_findings(out: &mut Findings, p: &PortAudit) {
    let name = p.interface.as_str();
    let port = Some(name);
    if let Some(m) = p.module.get() {
        if let Some(t) = &m.rx_power_thresholds {
            for (lane, &rx) in m.rx_power_dbm.iter().enumerate() {
                let lane_name = format!("{}: lane {} rx power {rx:.2} dBm", p.name(), lane + 1);
                if t.low_alarm.is_some_and(|al| rx < al) {
                    out.add(
                        "fail",
                        "rx-power-alarm",
                        port,
                        format!(
                            "{lane_name} is below the module's low alarm {:.2} dBm",
                            t.low_alarm.unwrap_or(0.0)
                        ),
                        "clean the connectors (both ends), then replace the cable or module",
                    );
                } else if t.low_warning.is_some_and(|w| rx < w) {
                    out.add("warn", "rx-power-warning", port,
                        format!("{lane_name} is below the module's low warning {:.2} dBm", t.low_warning.unwrap_or(0.0)),
                        "clean the connectors (both ends); replace the cable or module if it stays low");
                } else if t.low_warning.is_some_and(|w| rx < w + 1.0) {
                    out.add(
                        "warn",
                        "rx-power-margin",
                        port,
                        format!(
                            "{lane_name} is within 1 dB of the module's low warning {:.2} dBm",
                            t.low_warning.unwrap_or(0.0)
                        ),
                        "clean the connectors; watch the lane over the next runs",
                    );
                }
            }
        }
    }
}

/// The link: carrier flaps, the suite's GID type.
fn link_findings(out: &mut Findings, p: &PortAudit) {
    let name = p.interface.as_str();
    let port = Some(name);
    if let Some(&c) = p.carrier_changes.get() {
        if c > 4 {
            out.add("warn", "link-flaps", port,
                format!("{}: carrier changed {c} times since boot (a link that came up once shows 1 or 2)", p.name()),
                "check the switch port's log, the cable and the module; a flapping link resets every QP on it");
        }
    }
    if let Some(t) = p.traffic.get() {
        if let Some(ty) = &t.gid_type {
            if !p.is_infiniband() && !ty.contains("v2") {
                out.add(
                    "fail",
                    "gid-not-rocev2",
                    port,
                    format!(
                        "{}: GID index {} is {ty}, not RoCE v2: not routable, no DSCP",
                        p.name(),
                        t.gid_index.unwrap_or(0)
                    ),
                    "use the IPv4-mapped RoCE v2 GID (show_gids; bench -x N, NCCL_IB_GID_INDEX)",
                );
            }
        }
    }
}

/// The host: locked memory, the IOMMU, NCCL's settings.
fn host_findings(out: &mut Findings, a: &NodeAudit, lossless: Option<&[u8]>) {
    if let Some(Some(lim)) = a.host.memlock_bytes.get() {
        out.add("warn", "memlock-limited", None,
            format!("locked-memory limit is {lim} bytes, not unlimited: memory registration of large buffers fails with ENOMEM (ibv_reg_mr)"),
            "set `* - memlock unlimited` in /etc/security/limits.conf, LimitMEMLOCK=infinity for slurmd/containers, and check inside mpirun (`ulimit -l`)");
    }
    if a.host.iommu.get().map(String::as_str) == Some("translated") {
        out.add("warn", "iommu-translated", None,
            "the IOMMU translates DMA (DMA domains): GPUDirect RDMA and NIC DMA pay for translation unless ATS is on".into(),
            "boot with iommu=pt (passthrough), or enable ATS on the NIC where the IOMMU must stay on");
    }
    for (code, sev, msg, fix) in nccl_lint(&a.host.nccl, a, lossless) {
        out.add(sev, code, None, msg, fix);
    }
}

/// One NCCL finding: code, severity, message, fix.
type Lint = (&'static str, &'static str, String, &'static str);

/// The NCCL settings' findings (the variables NVIDIA documents in NCCL's environment
/// guide; defaults from NCCL 2.2x).
fn nccl_lint(
    nccl: &BTreeMap<String, NcclSetting>,
    a: &NodeAudit,
    lossless: Option<&[u8]>,
) -> Vec<Lint> {
    let mut out = Vec::new();
    let get = |k: &str| nccl.get(k).map(|s| (s.value.trim(), s.source.as_str()));
    if let Some((v, src)) = get("NCCL_IB_DISABLE") {
        if v == "1" {
            out.push((
                "nccl-ib-disabled",
                "fail",
                format!(
                    "NCCL_IB_DISABLE=1 ({src}): NCCL falls back to TCP sockets without saying so"
                ),
                "remove NCCL_IB_DISABLE",
            ));
        }
    }
    if let Some((v, src)) = get("NCCL_IB_HCA") {
        out.extend(hca_lint(v, src, a));
    }
    if let Some((v, src)) = get("NCCL_IB_GID_INDEX") {
        out.extend(gid_index_lint(v, src, a));
    }
    if let Some((v, src)) = get("NCCL_IB_TC") {
        out.extend(tc_lint(v, src, a, lossless));
    }
    if let Some((v, src)) = get("NCCL_NET_GDR_LEVEL") {
        if v.eq_ignore_ascii_case("LOC") || v == "0" {
            out.push(("nccl-gdr-off", "warn",
                format!("NCCL_NET_GDR_LEVEL={v} ({src}): GPUDirect RDMA is off, every transfer goes through host memory"),
                "unset it, or set it to the GPU-NIC path type (PIX/PXB) of the node"));
        }
    }
    if let Some((v, src)) = get("NCCL_SOCKET_IFNAME") {
        out.extend(socket_ifname_lint(v, src));
    }
    for (k, min) in [("NCCL_IB_TIMEOUT", 18u32), ("NCCL_IB_RETRY_CNT", 7)] {
        if let Some((v, src)) = get(k) {
            if v.parse::<u32>().is_ok_and(|n| n < min) {
                out.push(("nccl-retry-lowered", "warn",
                    format!("{k}={v} ({src}) is lower than NCCL's default: one lost packet ends the job sooner"),
                    "unset it (NCCL_IB_TIMEOUT 20 ~ 4.3 s, NCCL_IB_RETRY_CNT 7)"));
            }
        }
    }
    out
}

/// `NCCL_IB_HCA` without `=` is a prefix: `mlx5_1` also matches `mlx5_10`..`mlx5_17`.
fn hca_lint(v: &str, src: &str, a: &NodeAudit) -> Vec<Lint> {
    let mut out = Vec::new();
    let exact = v.starts_with('=') || v.starts_with("^=");
    let body = v.trim_start_matches('^').trim_start_matches('=');
    let names: Vec<&str> = body
        .split(',')
        .map(|n| n.split(':').next().unwrap_or("").trim())
        .collect();
    let devices: Vec<&str> = a
        .ports
        .iter()
        .filter_map(|p| p.rdma_device.as_deref())
        .collect();
    if !exact {
        for n in &names {
            let more: Vec<&str> = devices
                .iter()
                .copied()
                .filter(|d| d != n && d.starts_with(n))
                .collect();
            let digit_end = n.chars().last().is_some_and(|c| c.is_ascii_digit());
            if !more.is_empty() || digit_end {
                out.push((
                    "nccl-hca-prefix",
                    "warn",
                    format!(
                        "NCCL_IB_HCA={v} ({src}): `{n}` is a prefix and also matches {}",
                        if more.is_empty() {
                            format!("{n}0..{n}9 where they exist")
                        } else {
                            more.join(", ")
                        }
                    ),
                    "write NCCL_IB_HCA with a leading `=` for exact names (=mlx5_0,mlx5_1)",
                ));
            }
        }
    }
    out
}

/// `NCCL_IB_GID_INDEX` pointing at a RoCE v1 GID of a port the suite uses.
fn gid_index_lint(v: &str, src: &str, a: &NodeAudit) -> Vec<Lint> {
    let mut out = Vec::new();
    if let Ok(idx) = v.parse::<u32>() {
        for p in a.ports.iter().filter(|p| !p.is_infiniband()) {
            if let Some(t) = p.traffic.get() {
                if t.gid_index == Some(idx) {
                    if let Some(ty) = &t.gid_type {
                        if !ty.contains("v2") {
                            out.push(("nccl-gid-index", "fail",
                                format!("NCCL_IB_GID_INDEX={idx} ({src}) is a {ty} GID on {}", p.name()),
                                "unset it (NCCL picks a RoCE v2 GID since 2.21) or point it at the RoCE v2 GID"));
                        }
                    }
                }
            }
        }
    }
    out
}

/// `NCCL_IB_TC` whose DSCP lands on a priority without PFC (or not a lossless one).
fn tc_lint(v: &str, src: &str, a: &NodeAudit, lossless: Option<&[u8]>) -> Vec<Lint> {
    let mut out = Vec::new();
    if let Ok(tc) = v.parse::<u8>() {
        let dscp = tc >> 2;
        // A port whose driver sets a global traffic class puts it on NCCL's QPs too.
        let own_class = |p: &&PortAudit| p.nic_tclass.get().and_then(|t| t.global).is_none();
        for p in a
            .ports
            .iter()
            .filter(|p| !p.is_infiniband())
            .filter(own_class)
        {
            let (prio, pfc, _) = traffic_path(p, dscp);
            let off = match (lossless, prio) {
                (Some(l), Some(pr)) => !l.contains(&pr),
                _ => pfc == Some(false),
            };
            if off {
                out.push(("nccl-tc-lossy", "fail",
                    format!("NCCL_IB_TC={tc} ({src}): DSCP {dscp} lands on priority {} on {}, not a lossless one", prio.map_or("?".into(), |p| p.to_string()), p.name()),
                    "set NCCL_IB_TC to the lossless DSCP times 4 (106 for DSCP 26, ECN capable)"));
                break;
            }
        }
    }
    out
}

/// `NCCL_SOCKET_IFNAME` naming a loopback or bridge, or a prefix of several interfaces.
fn socket_ifname_lint(v: &str, src: &str) -> Vec<Lint> {
    let mut out = Vec::new();
    let exact = v.starts_with('=') || v.starts_with("^=");
    for n in v.trim_start_matches('^').trim_start_matches('=').split(',') {
        let n = n.trim();
        if n.starts_with("lo") || n.starts_with("docker") || n.starts_with("virbr") {
            out.push(("nccl-socket-ifname", "warn",
                format!("NCCL_SOCKET_IFNAME={v} ({src}): `{n}` is a loopback or container bridge interface"),
                "name the cluster network's interface"));
        } else if !exact && n.chars().last().is_some_and(|c| c.is_ascii_digit()) {
            out.push((
                "nccl-socket-ifname",
                "warn",
                format!(
                    "NCCL_SOCKET_IFNAME={v} ({src}): `{n}` is a prefix and also matches {n}0..{n}9"
                ),
                "write it with a leading `=` for an exact name",
            ));
        }
    }
    out
}

/// Audits as `fabric-doctor` makes them of a healthy ConnectX RoCE port, for tests that
/// change one fact and look for its finding (here and in `aggregate`, through the
/// `fixtures` feature, which only dev-dependencies turn on).
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures {
    use super::*;

    /// `eth2` at 200 Gb/s, MTU 9000: PFC on `pfc_prio` only, DSCP trust with the suite's
    /// DSCP 26 on priority 3 (every other DSCP on DSCP/8), ECN on every priority, CNPs on
    /// DSCP 48 priority 6, RS-FEC. Facts come from source "t".
    pub fn roce_port(pfc_prio: u8) -> PortAudit {
        let mut map = BTreeMap::new();
        for d in 0..64u8 {
            map.insert(d, d >> 3);
        }
        map.insert(26, 3);
        PortAudit {
            interface: "eth2".into(),
            rdma_device: Some("mlx5_0".into()),
            rdma_port: Some(1),
            link_layer: "Ethernet".into(),
            speed_mbit_s: Some(200_000),
            mtu: Some(9000),
            pfc: Fact::known(
                "t",
                Pfc {
                    enabled: (0..8).map(|p| p == pfc_prio).collect(),
                    ..Default::default()
                },
            ),
            trust: Fact::known("t", "dscp".into()),
            dscp_prio: Fact::known("t", map),
            ecn: Fact::known(
                "t",
                Ecn {
                    np_enabled: vec![true; 8],
                    rp_enabled: vec![true; 8],
                },
            ),
            cnp: Fact::known(
                "t",
                Cnp {
                    dscp: Some(48),
                    priority: Some(6),
                },
            ),
            fec: Fact::known(
                "t",
                Fec {
                    active: vec!["RS".into()],
                    ..Default::default()
                },
            ),
            ..Default::default()
        }
    }

    /// Node `hostname` with these ports; the suite's traffic class 106 (DSCP 26).
    pub fn node(hostname: &str, ports: Vec<PortAudit>) -> NodeAudit {
        NodeAudit {
            hostname: hostname.into(),
            suite: SuiteTraffic {
                traffic_class: 106,
                ..Default::default()
            },
            ports,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port() -> PortAudit {
        fixtures::roce_port(3)
    }

    fn audit(p: PortAudit) -> NodeAudit {
        fixtures::node("", vec![p])
    }

    fn codes(a: &NodeAudit, l: Option<&[u8]>) -> Vec<String> {
        findings(a, l).into_iter().map(|f| f.code).collect()
    }

    fn with_nccl(vars: &[(&str, &str)]) -> NodeAudit {
        let mut a = audit(PortAudit {
            rdma_device: Some("mlx5_1".into()),
            ..port()
        });
        a.ports.push(PortAudit {
            interface: "eth10".into(),
            rdma_device: Some("mlx5_10".into()),
            ..port()
        });
        for (k, v) in vars {
            a.host.nccl.insert(
                k.to_string(),
                NcclSetting {
                    value: v.to_string(),
                    source: "env".into(),
                },
            );
        }
        a
    }

    #[test]
    fn nccl_settings_that_fall_back_or_match_too_much_are_named() {
        let lossless: Option<&[u8]> = Some(&[3]);
        assert!(codes(
            &with_nccl(&[("NCCL_IB_HCA", "=mlx5_1"), ("NCCL_IB_TC", "106")]),
            lossless
        )
        .is_empty());
        for (k, v, code) in [
            ("NCCL_IB_DISABLE", "1", "nccl-ib-disabled"),
            // `mlx5_1` also matches mlx5_10, present on this node.
            ("NCCL_IB_HCA", "mlx5_1", "nccl-hca-prefix"),
            // Traffic class 32 is DSCP 8, priority 1: no PFC there.
            ("NCCL_IB_TC", "32", "nccl-tc-lossy"),
            ("NCCL_NET_GDR_LEVEL", "LOC", "nccl-gdr-off"),
            ("NCCL_SOCKET_IFNAME", "lo", "nccl-socket-ifname"),
            ("NCCL_SOCKET_IFNAME", "eth0", "nccl-socket-ifname"),
            ("NCCL_IB_TIMEOUT", "10", "nccl-retry-lowered"),
        ] {
            assert_eq!(codes(&with_nccl(&[(k, v)]), lossless), [code], "{k}={v}");
        }
    }

    #[test]
    fn a_healthy_port_has_no_finding_and_each_fault_its_own() {
        assert!(codes(&audit(port()), Some(&[3])).is_empty());
        let mut p = port();
        p.pfc.value.as_mut().unwrap().enabled = vec![false; 8];
        assert_eq!(codes(&audit(p), Some(&[3])), ["pfc-off", "traffic-lossy"]);
        let mut p = port();
        p.pfc.value.as_mut().unwrap().enabled = (0..8).map(|x| x == 4).collect();
        assert_eq!(
            codes(&audit(p), Some(&[3])),
            ["pfc-priorities", "traffic-lossy"]
        );
        let mut p = port();
        p.trust = Fact::known("t", "pcp".into());
        assert_eq!(codes(&audit(p), None), ["trust-pcp", "traffic-lossy"]);
        let mut p = port();
        p.ecn.value.as_mut().unwrap().np_enabled[3] = false;
        assert_eq!(codes(&audit(p), None), ["ecn-off"]);
        let mut p = port();
        p.fec.value.as_mut().unwrap().active = vec!["Off".into()];
        assert_eq!(codes(&audit(p), None), ["fec-off"]);
    }

    /// FEC off at 100 Gb/s fails where the module's PHY needs FEC (SR4, CR4, CWDM4, a
    /// module not read) and not on 100GBASE-LR4 / -ER4, which run without it (clause
    /// 88); above 100 Gb/s (PAM4) it always fails, under it never. The compliance strings
    /// are ethtool's (qsfp.c), as the real SR4 samples of the corpus print them.
    #[test]
    fn fec_off_fails_only_where_the_link_mode_needs_fec() {
        let at = |speed: u64, compliance: Option<&str>| {
            let mut p = port();
            p.speed_mbit_s = Some(speed);
            p.fec.value.as_mut().unwrap().active = vec!["Off".into()];
            p.module = match compliance {
                Some(c) => Fact::known(
                    "t",
                    Module {
                        compliance: vec![c.into(), "FC: short distance (S)".into()],
                        ..Default::default()
                    },
                ),
                None => Fact::unknown("ethtool -m eth0", "Operation not supported"),
            };
            findings(&audit(p), None)
                .into_iter()
                .filter(|f| f.code == "fec-off")
                .map(|f| f.message)
                .collect::<Vec<_>>()
        };
        let sr4 = at(100_000, Some("100G Ethernet: 100G Base-SR4 or 25GBase-SR"));
        assert_eq!(sr4.len(), 1);
        assert!(
            sr4[0].contains("(module 100G Ethernet: 100G Base-SR4"),
            "{sr4:?}"
        );
        assert!(at(100_000, Some("Extended: 100G Base-LR4 or 25GBase-LR")).is_empty());
        assert!(at(100_000, Some("Extended: 100G Base-ER4 or 25GBase-ER")).is_empty());
        let unread = at(100_000, None);
        assert!(unread[0].contains("(module not read)"), "{unread:?}");
        // PAM4 lanes need RS(544,514) whatever the module; 25G may run without FEC.
        assert_eq!(
            at(400_000, Some("Extended: 100G Base-LR4 or 25GBase-LR")).len(),
            1
        );
        assert!(at(25_000, Some("Extended: 100G Base-LR4 or 25GBase-LR")).is_empty());
    }

    /// Trust dscp with an APP table that does not list the suite's DSCP (a first `dcb app
    /// add` of another DSCP lists that one only): where it lands is the firmware's, which
    /// the host cannot read. Unknown and said, never priority 0 (it read `traffic-lossy`,
    /// "lands on priority 0", on a port whose firmware maps DSCP 26 to 3).
    #[test]
    fn a_dscp_the_app_table_does_not_list_is_unknown_not_priority_0() {
        let mut p = port();
        p.dscp_prio = Fact::known("t", BTreeMap::from([(48, 6)]));
        assert_eq!(priority_of(&p, 26), None);
        assert!(unmapped_dscp(&p, 26));
        assert_eq!(codes(&audit(p.clone()), Some(&[3])), ["dscp-unmapped"]);
        // Listed, it is judged as before; trust pcp is priority 0 whatever the table.
        assert_eq!(priority_of(&p, 48), Some(6));
        p.trust = Fact::known("t", "pcp".into());
        assert_eq!(priority_of(&p, 26), Some(0));
        assert!(!unmapped_dscp(&p, 26));
    }

    #[test]
    fn unknown_facts_make_no_finding_and_show_why() {
        let p = PortAudit {
            interface: "eth0".into(),
            rdma_device: Some("mlx5_0".into()),
            rdma_port: Some(1),
            link_layer: "Ethernet".into(),
            pfc: Fact::unknown("dcb -j pfc show dev eth0", "Operation not supported"),
            ..Default::default()
        };
        assert!(codes(&audit(p.clone()), Some(&[3])).is_empty());
        assert_eq!(
            p.pfc.show(|_| String::new()),
            "unknown: Operation not supported"
        );
    }

    /// A management port (no RDMA device) with PFC off and trust pcp is shown, not judged:
    /// one `info`; the same settings on an RDMA device's port fail.
    #[test]
    fn only_ports_that_carry_rdma_are_judged() {
        let mut mgmt = port();
        mgmt.rdma_device = None;
        mgmt.rdma_port = None;
        mgmt.pfc.value.as_mut().unwrap().enabled = vec![false; 8];
        mgmt.trust = Fact::known("t", "pcp".into());
        let f = findings(&audit(mgmt.clone()), Some(&[3]));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            (f[0].severity.as_str(), f[0].code.as_str()),
            ("info", "not-rdma")
        );
        let mut roce = mgmt;
        roce.rdma_device = Some("mlx5_0".into());
        assert_eq!(
            codes(&audit(roce), Some(&[3])),
            ["pfc-off", "trust-pcp", "traffic-lossy"]
        );
    }
}
