//! The lossless-configuration audit of this node ([`results::audit::NodeAudit`]): per
//! port PFC, ETS, the DSCP table and trust mode, DCBX, buffers (iproute2's `dcb`), ECN and
//! DCQCN (MLNX_OFED sysfs or upstream debugfs), where the suite's traffic lands, FEC,
//! driver counters and the module's optics (`ethtool`), and the host's locked-memory
//! limit, IOMMU mode and NCCL settings.
//!
//! Self-contained (std, serde, results): everything is read through a [`Source`], live or
//! from a capture directory, so `fabric-doctor --from DIR` audits a support bundle exactly
//! as the machine it came from.

mod module_eeprom;
pub mod parse;
pub mod pkeys;
pub mod segment;
pub mod source;

use std::collections::BTreeMap;
use std::time::Duration;

use results::audit::{
    findings, priority_of, Cnp, Ecn, Fact, HostAudit, NcclSetting, NicTrafficClass, NodeAudit,
    PortAudit, SuiteTraffic, TrafficPath, PRIORITIES,
};

pub use source::{Live, Output, Replay, Source};

/// What the audit is asked to look at.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The traffic the suite sends (traffic class, service level, GID index).
    pub suite: SuiteTraffic,
    /// Only these interfaces or RDMA devices (empty: every RDMA port's netdev, and every
    /// other netdev backed by a device).
    pub only: Vec<String>,
    /// Priorities that must carry PFC, for the findings (empty: not judged).
    pub lossless: Vec<u8>,
    /// Keep every driver counter (`ethtool -S`), not only those that tell of loss.
    pub all_counters: bool,
}

/// Environment variable that turns the audit in benchmark documents off (`0`).
pub const AUDIT_ENV: &str = "FABCHECK_AUDIT";

/// The traffic this process measures with, for the audit its documents embed.
static SUITE_TRAFFIC: std::sync::OnceLock<SuiteTraffic> = std::sync::OnceLock::new();

/// Says once, before the first document, which traffic class, service level and GID index
/// this process's measurements send with (a benchmark's `--tclass`, `--sl`, `--gid-index`),
/// so that the audit it embeds judges where that traffic lands. Unset: class 0, SL 0, the
/// automatic GID. A second call is ignored (the first document already carries the first).
pub fn set_suite_traffic(suite: SuiteTraffic) {
    let _ = SUITE_TRAFFIC.set(suite);
}

/// The audit for a benchmark document: live, within `budget` (commands stop being run
/// once it is spent and read as unknown), `None` when `FABCHECK_AUDIT=0`.
pub fn collect_bounded(budget: Duration) -> Option<NodeAudit> {
    if std::env::var(AUDIT_ENV).is_ok_and(|v| v == "0" || v.eq_ignore_ascii_case("off")) {
        return None;
    }
    let live = Live::new().with_budget(budget);
    let opts = Options {
        suite: SUITE_TRAFFIC.get().cloned().unwrap_or_default(),
        ..Default::default()
    };
    Some(audit(&live, &opts))
}

fn trim(s: &str) -> String {
    s.trim().to_string()
}

/// Audits the node `src` describes.
pub fn audit(src: &dyn Source, opts: &Options) -> NodeAudit {
    let hostname = src
        .read("/proc/sys/kernel/hostname")
        .map(|s| trim(&s))
        .unwrap_or_else(|_| "localhost".into());
    let dcb_v = src.run(&["dcb", "-V"]);
    let iproute2 = match (dcb_v.ok(), parse::dcb_version(&dcb_v.stdout)) {
        (true, Some(v)) => Fact::known("dcb -V", v),
        _ => Fact::unknown("dcb -V", dcb_v.why()),
    };
    let eth_v = src.run(&["ethtool", "--version"]);
    let ethtool = match (eth_v.ok(), parse::ethtool_version(&eth_v.stdout)) {
        (true, Some(v)) => Fact::known("ethtool --version", v),
        _ => Fact::unknown("ethtool --version", eth_v.why()),
    };
    let mut ports = discover(src, opts);
    for p in &mut ports {
        audit_port(
            src,
            opts,
            p,
            iproute2.get().is_some(),
            ethtool.get().map(String::as_str),
        );
    }
    let mut a = NodeAudit {
        hostname,
        iproute2,
        ethtool,
        suite: opts.suite.clone(),
        ports,
        host: host(src),
        findings: Vec::new(),
    };
    let lossless = (!opts.lossless.is_empty()).then_some(opts.lossless.as_slice());
    a.findings = findings(&a, lossless);
    a
}

/// The ports to audit: every RDMA port (with its netdev on RoCE), then every other netdev
/// backed by a device (`/sys/class/net/IF/device`), so a RoCE NIC whose RDMA driver is not
/// loaded, and this machine's virtio NIC, are audited too.
fn discover(src: &dyn Source, opts: &Options) -> Vec<PortAudit> {
    let mut out = Vec::new();
    let ib = "/sys/class/infiniband";
    for dev in src.list(ib).unwrap_or_default() {
        let d = format!("{ib}/{dev}");
        let fw = src.read(&format!("{d}/fw_ver")).ok().map(|s| trim(&s));
        let pci = src.read(&format!("{d}/device/uevent")).ok().and_then(|u| {
            u.lines()
                .find_map(|l| l.strip_prefix("PCI_SLOT_NAME="))
                .map(str::to_string)
        });
        let ib_netdevs = src.list(&format!("{d}/device/net")).unwrap_or_default();
        for port in src.list(&format!("{d}/ports")).unwrap_or_default() {
            let Ok(n) = port.parse::<u32>() else { continue };
            let pd = format!("{d}/ports/{n}");
            let link_layer = src
                .read(&format!("{pd}/link_layer"))
                .map(|s| trim(&s))
                .unwrap_or_else(|_| "Ethernet".into());
            let gid = gid_index(src, &pd, opts.suite.gid_index);
            let netdev = port_netdev(src, &pd, gid.as_ref().map(|(i, _)| *i), &ib_netdevs);
            let mut p = PortAudit {
                interface: netdev.clone().unwrap_or_else(|| format!("{dev}/{n}")),
                rdma_device: Some(dev.clone()),
                rdma_port: Some(n),
                link_layer,
                pci: pci.clone(),
                firmware: fw.clone(),
                pkeys: pkey_table(src, &format!("{pd}/pkeys")),
                nic_tclass: nic_tclass(src, &d, &dev, n),
                ..Default::default()
            };
            p.traffic = match gid {
                Some((i, ty)) => Fact::known(
                    format!("{pd}/gid_attrs/types/{i}"),
                    TrafficPath {
                        gid_index: Some(i),
                        gid_type: ty,
                        dscp: opts.suite.dscp(),
                        ..Default::default()
                    },
                ),
                None => Fact::unknown(
                    format!("{pd}/gid_attrs/types"),
                    "no RoCE v2 GID with an IPv4 address on this port (and no --gid-index)",
                ),
            };
            out.extend(on_physical_ports(src, p, netdev.as_deref()));
        }
    }
    let net = "/sys/class/net";
    for name in src.list(net).unwrap_or_default() {
        if out.iter().any(|p| p.interface == name) {
            continue;
        }
        if src.read(&format!("{net}/{name}/device/uevent")).is_err() {
            continue; // virtual: lo, bridges, veth, ifb
        }
        out.push(PortAudit {
            interface: name,
            link_layer: "Ethernet".into(),
            traffic: Fact::unknown("/sys/class/infiniband", "no RDMA device on this interface"),
            ..Default::default()
        });
    }
    if !opts.only.is_empty() {
        out.retain(|p| {
            opts.only.contains(&p.interface)
                || p.via.as_ref().is_some_and(|v| opts.only.contains(v))
                || p.rdma_device
                    .as_ref()
                    .is_some_and(|d| opts.only.contains(d))
        });
    }
    out
}

/// The netdev a RoCE port carries its traffic on: the one of the GID the suite uses, else
/// of GID 0, else the device's first netdev (`/sys/class/infiniband/DEV/device/net`).
fn port_netdev(
    src: &dyn Source,
    pd: &str,
    gid: Option<u32>,
    ib_netdevs: &[String],
) -> Option<String> {
    let ndev = |i: u32| {
        src.read(&format!("{pd}/gid_attrs/ndevs/{i}"))
            .ok()
            .map(|s| trim(&s))
            .filter(|s| !s.is_empty())
    };
    gid.and_then(ndev)
        .or_else(|| ndev(0))
        .or_else(|| ib_netdevs.first().cloned())
}

/// The port as audited on its physical netdevs: a GID on a VLAN (`eth2.100`) or a bond
/// (`bond0`, or a VLAN on one) carries RoCE there, but PFC, ETS, trust, FEC, the driver's
/// counters and the module are the physical ports' below it, which the kernel links as
/// `/sys/class/net/UPPER/lower_LOWER` (Documentation/ABI/testing/sysfs-class-net). One
/// audit per physical port, each saying the netdev it carries RoCE for; a netdev with no
/// lower (the PF itself) is audited as it is.
fn on_physical_ports(src: &dyn Source, p: PortAudit, netdev: Option<&str>) -> Vec<PortAudit> {
    let Some(upper) = netdev else {
        return vec![p];
    };
    let lowers = physical_lowers(src, upper, 0);
    if lowers.is_empty() {
        return vec![p];
    }
    lowers
        .into_iter()
        .map(|lower| PortAudit {
            interface: lower,
            via: Some(upper.to_string()),
            ..p.clone()
        })
        .collect()
}

/// The netdevs at the bottom of `name`'s `lower_*` links (none when it has no lower),
/// in name order; a chain deeper than four (VLAN on bond on ...) is not followed further.
fn physical_lowers(src: &dyn Source, name: &str, depth: usize) -> Vec<String> {
    let mut lowers: Vec<String> = src
        .list(&format!("/sys/class/net/{name}"))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| e.strip_prefix("lower_").map(str::to_string))
        .collect();
    lowers.sort();
    if depth >= 4 {
        return lowers;
    }
    lowers
        .into_iter()
        .flat_map(|l| {
            let below = physical_lowers(src, &l, depth + 1);
            if below.is_empty() {
                vec![l]
            } else {
                below
            }
        })
        .collect()
}

/// The GID index the suite uses on a port and its type: the one asked for, else the
/// first RoCE v2 GID with an IPv4-mapped address (what the verbs benchmarks pick), else
/// the first RoCE v2 one, else index 0 on InfiniBand.
fn gid_index(src: &dyn Source, pd: &str, asked: Option<u32>) -> Option<(u32, Option<String>)> {
    let ty = |i: u32| {
        src.read(&format!("{pd}/gid_attrs/types/{i}"))
            .ok()
            .map(|s| trim(&s))
            .filter(|s| !s.is_empty())
    };
    if let Some(i) = asked {
        return Some((i, ty(i)));
    }
    let mut first_v2 = None;
    for i in 0..16u32 {
        let Ok(gid) = src.read(&format!("{pd}/gids/{i}")) else {
            break;
        };
        let gid = trim(&gid);
        if gid.chars().all(|c| c == '0' || c == ':') {
            continue;
        }
        match ty(i) {
            Some(t) if t.contains("v2") => {
                if gid.starts_with("0000:0000:0000:0000:0000:ffff:") {
                    return Some((i, Some(t)));
                }
                first_v2.get_or_insert((i, Some(t)));
            }
            None if i == 0 => {
                // InfiniBand ports have no GID types.
                first_v2.get_or_insert((0, None));
            }
            _ => {}
        }
    }
    first_v2
}

fn read_u64(src: &dyn Source, path: &str) -> Fact<u64> {
    match src.read(path) {
        Ok(s) => match s.trim().parse() {
            Ok(v) => Fact::known(path, v),
            Err(_) => Fact::unknown(path, format!("`{}` is not a number", s.trim())),
        },
        Err(e) => Fact::unknown(path, e),
    }
}

/// Runs a `dcb -j` query and parses it, or says why not.
fn dcb<T>(
    src: &dyn Source,
    have_dcb: bool,
    args: &[&str],
    iface: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Fact<T> {
    let mut argv = vec!["dcb", "-j"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["show", "dev", iface]);
    let label = argv.join(" ");
    if !have_dcb {
        return Fact::unknown(
            label,
            "iproute2's dcb tool is missing (iproute2 older than 5.11, or not installed)",
        );
    }
    let out = src.run(&argv);
    if !out.ok() {
        return Fact::unknown(label, out.why());
    }
    match parse(&out.stdout) {
        Ok(v) => Fact::known(label, v),
        Err(e) => Fact::unknown(label, e),
    }
}

/// The traffic class the driver puts on the port's QPs (MLNX_OFED's `tc/PORT/traffic_class`)
/// and rdma_cm's default ToS for the port (configfs), see [`results::audit::NicTrafficClass`].
/// Neither file on the upstream kernel: known, empty (the class is what the QP asks).
fn nic_tclass(src: &dyn Source, dev_dir: &str, dev: &str, port: u32) -> Fact<NicTrafficClass> {
    let tc = format!("{dev_dir}/tc/{port}/traffic_class");
    let (source, mut facts) = match src.read(&tc) {
        Ok(text) => match parse::nic_traffic_class(&text) {
            Ok(t) => (tc, t),
            Err(e) => return Fact::unknown(tc, e),
        },
        // No tc directory: the upstream driver, which has no class of its own.
        Err(_) if src.list(&format!("{dev_dir}/tc")).is_err() => (
            format!("{tc} absent (a driver without a global class)"),
            NicTrafficClass::default(),
        ),
        Err(e) => return Fact::unknown(tc, e),
    };
    let cm = format!("/sys/kernel/config/rdma_cm/{dev}/ports/{port}/default_roce_tos");
    facts.rdma_cm_default_tos = src.read(&cm).ok().and_then(|t| t.trim().parse().ok());
    Fact::known(source, facts)
}

/// A port's P_Key table from its slot files (through the source: live or a capture).
fn pkey_table(src: &dyn Source, dir: &str) -> Fact<Vec<u16>> {
    let names = match src.list(dir) {
        Ok(n) => n,
        Err(e) => return Fact::unknown(dir, e),
    };
    let mut slots = Vec::new();
    for name in names {
        let Ok(index) = name.parse::<u16>() else {
            continue;
        };
        match src.read(&format!("{dir}/{name}")) {
            Ok(text) => slots.push((index, text)),
            Err(e) => return Fact::unknown(format!("{dir}/{name}"), e),
        }
    }
    match pkeys::from_slots(&slots) {
        Ok(t) => Fact::known(dir, t.keys()),
        Err(e) => Fact::unknown(dir, e),
    }
}

fn audit_port(
    src: &dyn Source,
    opts: &Options,
    p: &mut PortAudit,
    have_dcb: bool,
    ethtool: Option<&str>,
) {
    let net = format!("/sys/class/net/{}", p.interface);
    let has_netdev = src.read(&format!("{net}/mtu")).is_ok();
    netdev_facts(src, p, &net, has_netdev);
    if p.is_infiniband() || !has_netdev {
        let why = if p.is_infiniband() {
            "InfiniBand port: no PFC/DSCP/ECN on the host (the subnet manager sets SL to VL and credits; the link is lossless by design)"
        } else {
            "no netdev on this port"
        };
        no_dcb(p, why);
    } else {
        dcb_facts(src, p, &net, have_dcb);
        ecn(src, p, &net);
    }
    p.segment = segment_of(src, p);
    suite_path(p, &opts.suite);
    let why = match (has_netdev, ethtool) {
        (false, _) => "no netdev on this port",
        (true, None) => "ethtool is not installed (Debian/Ubuntu: apt-get install ethtool)",
        (true, Some(version)) => {
            ethtool_facts(src, opts, p, version);
            return ipoib_says_nothing_of_the_link(p);
        }
    };
    p.fec = Fact::unknown("ethtool", why);
    p.driver_counters = Fact::unknown("ethtool", why);
    p.module = Fact::unknown("ethtool", why);
}

/// Why an InfiniBand port's module and FEC read unknown, and where to read them. The
/// port's netdev is IPoIB, an upper device of the HCA: mlx5's IPoIB ethtool operations
/// have neither the module EEPROM nor FEC (ethtool says "Operation not supported"), and
/// the link's FEC mode and optics belong to the HCA port. Known facts are kept (a driver
/// that answers is believed).
fn ipoib_says_nothing_of_the_link(p: &mut PortAudit) {
    if !p.is_infiniband() {
        return;
    }
    let dev = p.rdma_device.clone().unwrap_or_else(|| "DEV".into());
    if p.module.get().is_none() {
        p.module = Fact::unknown(
            p.module.source.clone(),
            format!("InfiniBand port: its netdev {} is IPoIB, which has no module EEPROM; read the optics with `mlxlink -d {dev} -m` (NVIDIA MFT) or on the switch side", p.interface),
        );
    }
    if p.fec.get().is_none() {
        p.fec = Fact::unknown(
            p.fec.source.clone(),
            format!("InfiniBand port: its netdev {} is IPoIB, which has no FEC; the HCA port's FEC and pre-FEC BER are in `mlxlink -d {dev} -c` (NVIDIA MFT); its symbol errors in the PMA counters (perfquery)", p.interface),
        );
    }
}

/// A RoCE port's segment (VLAN, VRF) from the netdev its GID is on (`ip -d -j link`).
fn segment_of(src: &dyn Source, p: &PortAudit) -> Fact<results::audit::Segment> {
    if p.is_infiniband() {
        return Fact::unknown(
            "link_layer",
            "InfiniBand port: its partition is its P_Key table (pkeys)",
        );
    }
    if p.rdma_device.is_none() {
        return Fact::unknown("rdma", "no RDMA device on this netdev: it carries no RoCE");
    }
    let netdev = p.via.as_deref().unwrap_or(&p.interface);
    let argv = ["ip", "-d", "-j", "link", "show", "dev", netdev];
    let out = src.run(&argv);
    if !out.ok() {
        return Fact::unknown(argv.join(" "), out.why());
    }
    match segment::ip_link(&out.stdout, netdev) {
        Ok(seg) => Fact::known(argv.join(" "), seg),
        Err(e) => Fact::unknown(argv.join(" "), e),
    }
}

/// MTU, speed and carrier changes of the port's netdev.
fn netdev_facts(src: &dyn Source, p: &mut PortAudit, net: &str, has_netdev: bool) {
    if !has_netdev {
        p.carrier_changes = Fact::unknown(net, "no netdev on this port");
        return;
    }
    p.mtu = read_u64(src, &format!("{net}/mtu")).value.map(|v| v as u32);
    p.speed_mbit_s = src
        .read(&format!("{net}/speed"))
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|&v| v > 0)
        .map(|v| v as u64);
    p.carrier_changes = read_u64(src, &format!("{net}/carrier_changes"));
}

/// Every DCB, ECN and CNP fact unknown for one reason (an InfiniBand port, no netdev).
fn no_dcb(p: &mut PortAudit, why: &str) {
    p.pfc = Fact::unknown("link_layer", why);
    p.ets = Fact::unknown("link_layer", why);
    p.dscp_prio = Fact::unknown("link_layer", why);
    p.trust = Fact::unknown("link_layer", why);
    p.dcbx = Fact::unknown("link_layer", why);
    p.buffer = Fact::unknown("link_layer", why);
    p.ecn = Fact::unknown("link_layer", why);
    p.dcqcn = Fact::unknown("link_layer", why);
    p.cnp = Fact::unknown("link_layer", why);
}

/// PFC, ETS, the DSCP map, DCBX and buffers from `dcb`, and the trust mode.
fn dcb_facts(src: &dyn Source, p: &mut PortAudit, net: &str, have_dcb: bool) {
    let i = p.interface.as_str();
    p.pfc = dcb(src, have_dcb, &["pfc", "-s"], i, parse::dcb_pfc);
    p.ets = dcb(src, have_dcb, &["ets"], i, parse::dcb_ets);
    p.dscp_prio = dcb(src, have_dcb, &["app"], i, parse::dcb_app_dscp);
    p.dcbx = dcb(src, have_dcb, &["dcbx"], i, parse::dcb_dcbx);
    p.buffer = dcb(src, have_dcb, &["buffer"], i, parse::dcb_buffer);
    // The vendor stack (MLNX_OFED) says the trust mode itself; upstream switches to
    // DSCP trust with the first DSCP entry of the APP table (mlx5 en_dcbnl.c).
    let qos_trust = format!("{net}/qos/trust");
    p.trust = match src.read(&qos_trust) {
        Ok(t) if !t.trim().is_empty() => Fact::known(&qos_trust, trim(&t)),
        _ => match p.dscp_prio.get() {
            Some(m) => Fact::known(
                format!("derived: {} DSCP entries in the APP table", m.len()),
                if m.is_empty() { "pcp" } else { "dscp" }.to_string(),
            ),
            None => Fact::unknown(
                p.dscp_prio.source.clone(),
                p.dscp_prio.unknown.clone().unwrap_or_default(),
            ),
        },
    };
}

/// Where the suite's traffic lands: its DSCP (the NIC's own class where it sets one), the
/// priority that DSCP maps to, and whether PFC and ECN are on there.
fn suite_path(p: &mut PortAudit, suite: &SuiteTraffic) {
    let (dscp, _) = p.suite_dscp(suite);
    let path = (!p.is_infiniband()).then(|| results::audit::traffic_path(p, dscp));
    if let Some(t) = p.traffic.value.as_mut() {
        t.dscp = dscp;
        if let Some((prio, pfc, ecn)) = path {
            t.priority = prio;
            t.pfc_on = pfc;
            t.ecn_on = ecn;
        }
    }
}

/// FEC, driver counters and the module, from ethtool (`version` picks `-m`'s form).
fn ethtool_facts(src: &dyn Source, opts: &Options, p: &mut PortAudit, version: &str) {
    let i = p.interface.clone();
    let argv = ["ethtool", "--json", "-I", "--show-fec", i.as_str()];
    let out = src.run(&argv);
    p.fec = if !out.ok() {
        Fact::unknown(argv.join(" "), out.why())
    } else {
        match parse::ethtool_fec(&out.stdout) {
            Ok(f) => Fact::known(argv.join(" "), f),
            Err(e) => Fact::unknown(argv.join(" "), e),
        }
    };
    let argv = ["ethtool", "-S", i.as_str()];
    let out = src.run(&argv);
    p.driver_counters = if out.ok() {
        // The one reader of `ethtool -S` text (also behind every measurement's counters).
        let mut c: BTreeMap<String, u64> = crate::ethtool::parse_stats(&out.stdout)
            .into_iter()
            .filter_map(|(k, v)| Some((k, u64::try_from(v).ok()?)))
            .collect();
        if !opts.all_counters {
            c.retain(|k, _| parse::relevant_counter(k));
        }
        Fact::known(argv.join(" "), c)
    } else {
        Fact::unknown(argv.join(" "), out.why())
    };
    p.module = module(src, &i, version);
}

/// The module's EEPROM: `ethtool -m` text, whatever the version. ethtool 6.14's `--json -m`
/// prints the power thresholds in mW with two decimals (about 1-2 dB off near an LR
/// module's thresholds, and -inf under 0.005 mW) where the text prints four decimals of
/// mW and the dBm: the text is the more exact. Only where the text reads as nothing is the
/// JSON asked (6.14 and later).
fn module(src: &dyn Source, i: &str, version: &str) -> Fact<results::audit::Module> {
    let text = ["ethtool", "-m", i];
    let out = src.run(&text);
    if !out.ok() {
        let mut why = out.why();
        if why.contains("Operation not permitted") {
            why.push_str(" (reading the module EEPROM needs root)");
        }
        return Fact::unknown(text.join(" "), why);
    }
    let e = match parse::ethtool_module_text(&out.stdout) {
        Ok(m) => return Fact::known(text.join(" "), m),
        Err(e) => e,
    };
    if !parse::module_json_since(version) {
        return Fact::unknown(text.join(" "), e);
    }
    let json = ["ethtool", "--json", "-m", i];
    let out = src.run(&json);
    match parse::ethtool_module_json(&out.stdout) {
        Ok(m) if out.ok() => Fact::known(json.join(" "), m),
        Ok(_) => Fact::unknown(json.join(" "), out.why()),
        Err(je) => Fact::unknown(text.join(" "), format!("{e}; {}: {je}", json.join(" "))),
    }
}

/// ECN per priority and DCQCN parameters: MLNX_OFED's `/sys/class/net/IF/ecn/roce_{np,rp}/`
/// (world-readable on a PF: `enable/N` and one file per parameter, each `"%d\n"`), else
/// the upstream kernel's `/sys/kernel/debug/mlx5/<PCI>/cc_params/*` (debugfs, root).
fn ecn(src: &dyn Source, p: &mut PortAudit, net: &str) {
    let ecn_dir = format!("{net}/ecn");
    let read_bits = |role: &str| -> Option<Vec<bool>> {
        let v: Vec<bool> = (0..PRIORITIES)
            .map(|n| {
                src.read(&format!("{ecn_dir}/{role}/enable/{n}"))
                    .ok()
                    .and_then(|s| s.trim().parse::<u8>().ok())
                    .map(|b| b == 1)
            })
            .collect::<Option<Vec<bool>>>()?;
        Some(v)
    };
    let params = match (read_bits("roce_np"), read_bits("roce_rp")) {
        (Some(np), Some(rp)) => {
            p.ecn = Fact::known(
                format!("{ecn_dir}/roce_{{np,rp}}/enable/0..7"),
                Ecn {
                    np_enabled: np,
                    rp_enabled: rp,
                },
            );
            let params = sysfs_dcqcn(src, &ecn_dir);
            p.dcqcn = Fact::known(format!("{ecn_dir}/roce_{{np,rp}}/*"), params.clone());
            params
        }
        _ => {
            p.ecn = Fact::unknown(
                format!("{ecn_dir}/roce_np/enable"),
                match src.list(&ecn_dir) {
                    Err(_) => "no per-priority ECN in sysfs (MLNX_OFED's /sys/class/net/IF/ecn; upstream mlx5 has none: ECN is on by default there)".to_string(),
                    Ok(_) => "the firmware query failed (empty read): not the same as disabled".to_string(),
                },
            );
            debugfs_dcqcn(src, p, &ecn_dir)
        }
    };
    p.cnp = cnp(p, &params);
}

/// A number file's value, if it reads as one.
fn number(src: &dyn Source, path: &str) -> Option<i64> {
    src.read(path)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
}

/// MLNX_OFED's DCQCN parameters: every file of `roce_rp/` and `roce_np/` but `enable`,
/// named `rp_FILE` and `np_FILE`.
fn sysfs_dcqcn(src: &dyn Source, ecn_dir: &str) -> BTreeMap<String, i64> {
    let mut params = BTreeMap::new();
    for role in ["roce_rp", "roce_np"] {
        for f in src.list(&format!("{ecn_dir}/{role}")).unwrap_or_default() {
            if f == "enable" {
                continue;
            }
            if let Some(v) = number(src, &format!("{ecn_dir}/{role}/{f}")) {
                let short = role.trim_start_matches("roce_");
                params.insert(format!("{short}_{f}"), v);
            }
        }
    }
    params
}

/// The upstream kernel's DCQCN parameters in debugfs (`p.dcqcn`, known or why not), and
/// their values.
fn debugfs_dcqcn(src: &dyn Source, p: &mut PortAudit, ecn_dir: &str) -> BTreeMap<String, i64> {
    let mut params = BTreeMap::new();
    let cc = p
        .pci
        .as_ref()
        .map(|pci| format!("/sys/kernel/debug/mlx5/{pci}/cc_params"));
    match cc.as_ref().map(|d| (d, src.list(d))) {
        Some((d, Ok(files))) => {
            for f in files {
                if let Some(v) = number(src, &format!("{d}/{f}")) {
                    params.insert(f, v);
                }
            }
            p.dcqcn = Fact::known(format!("{d}/*"), params.clone());
        }
        Some((d, Err(e))) => {
            let why = if e.contains("denied") || e.contains("not permitted") {
                format!("{e} (debugfs needs root)")
            } else {
                format!("{e} (debugfs not mounted, or not an mlx5 device)")
            };
            p.dcqcn = Fact::unknown(d.clone(), why);
        }
        None => {
            p.dcqcn = Fact::unknown(
                format!("{ecn_dir}/roce_rp"),
                "no DCQCN parameters: neither MLNX_OFED sysfs nor an mlx5 RDMA device with debugfs",
            )
        }
    }
    params
}

/// The CNPs the port sends: their DSCP and priority from the DCQCN parameters (the
/// priority from the DSCP's mapping where no parameter names it).
fn cnp(p: &PortAudit, params: &BTreeMap<String, i64>) -> Fact<Cnp> {
    let dscp = params.get("np_cnp_dscp").copied();
    let prio = params
        .get("np_cnp_802p_prio")
        .or_else(|| params.get("np_cnp_prio"))
        .copied();
    if dscp.is_some() || prio.is_some() {
        Fact::known(
            p.dcqcn.source.clone(),
            Cnp {
                dscp: dscp.map(|d| d as u8),
                priority: prio
                    .map(|x| x as u8)
                    .or_else(|| dscp.and_then(|d| priority_of(p, d as u8))),
            },
        )
    } else {
        Fact::unknown(
            p.dcqcn.source.clone(),
            p.dcqcn
                .unknown
                .clone()
                .unwrap_or_else(|| "no cnp_dscp among the DCQCN parameters".into()),
        )
    }
}

/// Locked memory, IOMMU, NCCL settings.
fn host(src: &dyn Source) -> HostAudit {
    let memlock_bytes = match src.read("/proc/self/limits") {
        Ok(t) => match parse::memlock(&t) {
            Ok(v) => Fact::known("/proc/self/limits (getrlimit RLIMIT_MEMLOCK)", v),
            Err(e) => Fact::unknown("/proc/self/limits", e),
        },
        Err(e) => Fact::unknown("/proc/self/limits", e),
    };
    let cmdline = src.read("/proc/cmdline").unwrap_or_default();
    let iommu_cmdline: Vec<String> = cmdline
        .split_whitespace()
        .filter(|w| {
            w.starts_with("iommu=") || w.starts_with("intel_iommu=") || w.starts_with("amd_iommu=")
        })
        .map(str::to_string)
        .collect();
    let iommu = match src.list("/sys/class/iommu") {
        Ok(units) if units.is_empty() => Fact::known("/sys/class/iommu (empty)", "off".to_string()),
        Ok(_) => {
            let groups = src.list("/sys/kernel/iommu_groups").unwrap_or_default();
            let types: Vec<String> = groups
                .iter()
                .take(64)
                .filter_map(|g| src.read(&format!("/sys/kernel/iommu_groups/{g}/type")).ok())
                .map(|s| trim(&s))
                .collect();
            if types.is_empty() {
                Fact::unknown(
                    "/sys/kernel/iommu_groups/*/type",
                    "IOMMU present but no group types readable",
                )
            } else if types.iter().all(|t| t == "identity") {
                Fact::known("/sys/kernel/iommu_groups/*/type", "passthrough".to_string())
            } else {
                Fact::known("/sys/kernel/iommu_groups/*/type", "translated".to_string())
            }
        }
        Err(e) if e.contains("No such file") => {
            Fact::known("/sys/class/iommu (absent)", "off".to_string())
        }
        Err(e) => Fact::unknown("/sys/class/iommu", e),
    };
    let mut nccl = BTreeMap::new();
    let env = src.env();
    let conf_path = env
        .iter()
        .find(|(k, _)| k == "NCCL_CONF_FILE")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "/etc/nccl.conf".into());
    if let Ok(text) = src.read(&conf_path) {
        for (k, v) in parse::nccl_conf(&text) {
            nccl.insert(
                k,
                NcclSetting {
                    value: v,
                    source: conf_path.clone(),
                },
            );
        }
    }
    // The environment wins over the file, as in NCCL.
    for (k, v) in env {
        nccl.insert(
            k,
            NcclSetting {
                value: v,
                source: "env".into(),
            },
        );
    }
    HostAudit {
        memlock_bytes,
        iommu,
        iommu_cmdline,
        nccl,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_audits_without_error_and_says_why_facts_are_missing() {
        let a = audit(&Live::new(), &Options::default());
        assert!(!a.hostname.is_empty());
        assert!(a.host.memlock_bytes.get().is_some() || a.host.memlock_bytes.unknown.is_some());
        for p in &a.ports {
            for w in [&p.pfc.unknown, &p.fec.unknown].into_iter().flatten() {
                assert!(!w.is_empty());
            }
        }
    }

    #[test]
    fn capture_then_replay_gives_the_same_audit() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let live = Live::capturing(&dir).unwrap();
        let a = audit(&live, &Options::default());
        live.finish().unwrap();
        let b = audit(&Replay::open(&dir).unwrap(), &Options::default());
        assert_eq!(a, b);
    }
}
