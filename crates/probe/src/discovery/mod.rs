//! Who each port of this host is plugged into, with the source of every fact (issue 18,
//! discovery): on Ethernet/RoCE ports the LLDP neighbour lldpd heard ([`lldp`]), on
//! InfiniBand ports the neighbour answering directed-route SMPs ([`smp`]), and, when asked,
//! the whole InfiniBand fabric from one rank ([`ibnet`], `ibnetdiscover`).
//!
//! Every tool call has a deadline (`FABCHECK_DISCOVERY_TIMEOUT_S`, default 3 s) and all
//! of a host's calls share a budget (10 s), so discovery never holds a benchmark up for
//! long. A tool that is missing, a socket that is absent, no permission, no umad device:
//! the port (or the host, when no port could be listed) is recorded as `unknown` with
//! `why`; a port asked but silent is `none`.
//!
//! Settings (environment, read once per collection):
//! - `FABCHECK_DISCOVERY`: `all` (default), `lldp`, `ib`, or `off` to record nothing.
//! - `FABCHECK_LLDPD_SOCKET`: lldpd's control socket (`lldpcli -u`); default lldpd's own.
//! - `FABCHECK_IBNETDISCOVER=1`: the root rank also runs `ibnetdiscover` (whole fabric,
//!   `Document.fabric`; deadline `FABCHECK_IBNETDISCOVER_TIMEOUT_S`, default 60 s).
//! - Test hook `FABCHECK_IB_WRAP`: a command prefix for the InfiniBand tools, split on
//!   blanks. `FABCHECK_IB_WRAP=ibsim-run` with `SIM_HOST=<node>` (and `IBSIM_SOCKNAME`)
//!   runs the real infiniband-diags against an ibsim fabric as that node sees it; with a
//!   wrap set, InfiniBand ports are asked even when this host's /sys shows none.
//!
//! Self-contained (std, serde, results): the lead moves it into the `probe` crate.

pub mod exec;
pub mod ibnet;
pub mod lldp;
pub mod netif;
pub mod smp;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use results::discovery::{FabricDiscovery, Neighbor};

pub use netif::interface_of;

/// What to ask and how long to wait.
#[derive(Debug, Clone)]
pub struct Options {
    /// Ask lldpd (`lldpcli show neighbors`) who each Ethernet port is plugged into.
    pub lldp: bool,
    /// Ask the InfiniBand subnet (`ibstat`, SMP queries) who each IB port is plugged into.
    pub ib: bool,
    /// `lldpcli -u SOCKET`; `None`: lldpd's default socket.
    pub lldp_socket: Option<PathBuf>,
    /// Command prefix for the InfiniBand tools (test hook; empty in production).
    pub ib_wrap: Vec<String>,
    /// Deadline of each tool call.
    pub timeout: Duration,
    /// Deadline of all of a host's calls together.
    pub budget: Duration,
    /// Run `ibnetdiscover` (root rank), with this deadline.
    pub fabric: Option<Duration>,
    /// Where `/sys` is (tests point it at a fixture tree).
    pub sys: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            lldp: true,
            ib: true,
            lldp_socket: None,
            ib_wrap: Vec::new(),
            timeout: Duration::from_secs(3),
            budget: Duration::from_secs(10),
            fabric: None,
            sys: PathBuf::from("/sys"),
        }
    }
}

fn seconds(var: &str, default: u64) -> Result<Duration, String> {
    match std::env::var(var) {
        Err(_) => Ok(Duration::from_secs(default)),
        Ok(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| *s > 0.0 && *s <= 3600.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("{var}={v} is not a number of seconds in (0, 3600]")),
    }
}

impl Options {
    /// The settings of the environment (see the module documentation).
    pub fn from_env() -> Result<Self, String> {
        let mut o = Options::default();
        match std::env::var("FABCHECK_DISCOVERY").as_deref() {
            Err(_) | Ok("") | Ok("all") | Ok("on") => {}
            Ok("off") | Ok("0") | Ok("no") => (o.lldp, o.ib) = (false, false),
            Ok("lldp") => o.ib = false,
            Ok("ib") => o.lldp = false,
            Ok(v) => {
                return Err(format!(
                    "FABCHECK_DISCOVERY={v} is not one of all, lldp, ib, off"
                ))
            }
        }
        o.lldp_socket = std::env::var_os("FABCHECK_LLDPD_SOCKET")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        o.ib_wrap = std::env::var("FABCHECK_IB_WRAP")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect();
        o.timeout = seconds("FABCHECK_DISCOVERY_TIMEOUT_S", 3)?;
        if std::env::var("FABCHECK_IBNETDISCOVER").is_ok_and(|v| v == "1" || v == "yes") {
            o.fabric = Some(seconds("FABCHECK_IBNETDISCOVER_TIMEOUT_S", 60)?);
        }
        Ok(o)
    }
}

fn unknown(source: &str, why: String) -> Neighbor {
    Neighbor {
        source: source.into(),
        state: "unknown".into(),
        why: Some(why),
        ..Default::default()
    }
}

/// The host's neighbours as the environment asks (what `host::collect` records); a bad
/// setting is recorded as one `unknown` row saying so.
pub fn neighbors_from_env() -> Vec<Neighbor> {
    match Options::from_env() {
        Ok(o) => neighbors(&o),
        Err(why) => vec![unknown("lldp", why)],
    }
}

/// Every port's neighbour: LLDP rows (by interface) then SMP rows (by CA and port).
pub fn neighbors(o: &Options) -> Vec<Neighbor> {
    let start = Instant::now();
    let mut out = Vec::new();
    if o.lldp {
        out.extend(lldp_neighbors(o));
    }
    if o.ib && (!o.ib_wrap.is_empty() || has_ib_port(&o.sys)) {
        out.extend(ib_neighbors(o, start));
    }
    out
}

fn lldp_neighbors(o: &Options) -> Vec<Neighbor> {
    let ask = |what: &[&str]| {
        let mut args: Vec<String> = Vec::new();
        if let Some(s) = &o.lldp_socket {
            args.push("-u".into());
            args.push(s.display().to_string());
        }
        args.push("-f".into());
        args.push("json0".into());
        args.extend(what.iter().map(|s| s.to_string()));
        exec::run("lldpcli", &args, o.timeout)
    };
    let socket = o
        .lldp_socket
        .as_ref()
        .map_or("lldpd's default socket".to_string(), |s| {
            s.display().to_string()
        });
    let found = match ask(&["show", "neighbors", "details"]).and_then(|j| lldp::parse_neighbors(&j))
    {
        Ok(f) => f,
        Err(why) => return vec![unknown("lldp", format!("{why} (asking lldpd at {socket})"))],
    };
    let interfaces = ask(&["show", "interfaces"])
        .and_then(|j| lldp::parse_interfaces(&j))
        .unwrap_or_default();
    let mut all = lldp::merge(found, &interfaces);
    for n in &mut all {
        n.device = n
            .interface
            .as_deref()
            .and_then(|i| rdma_device_of(&o.sys, i));
    }
    all
}

/// The RDMA device behind a network interface (RoCE), from sysfs.
fn rdma_device_of(sys: &Path, interface: &str) -> Option<String> {
    let dir = sys
        .join("class/net")
        .join(interface)
        .join("device/infiniband");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names.into_iter().next()
}

/// Whether sysfs shows an InfiniBand (not RoCE) port on this host.
fn has_ib_port(sys: &Path) -> bool {
    let Ok(devs) = std::fs::read_dir(sys.join("class/infiniband")) else {
        return false;
    };
    devs.filter_map(|d| d.ok()).any(|d| {
        std::fs::read_dir(d.path().join("ports"))
            .into_iter()
            .flatten()
            .filter_map(|p| p.ok())
            .any(|p| {
                std::fs::read_to_string(p.path().join("link_layer"))
                    .is_ok_and(|l| l.trim() == "InfiniBand")
            })
    })
}

fn ib_neighbors(o: &Options, start: Instant) -> Vec<Neighbor> {
    let call = |tool: &str, args: &[String]| -> Result<String, String> {
        if start.elapsed() >= o.budget {
            return Err(format!(
                "the discovery time budget ({:.0} s) was spent before this port",
                o.budget.as_secs_f64()
            ));
        }
        exec::run_wrapped(&o.ib_wrap, tool, args, o.timeout)
    };
    let ports = match call("ibstat", &[]) {
        Ok(text) => smp::parse_ibstat(&text),
        Err(why) => return vec![unknown("smp", format!("cannot list the CA ports: {why}"))],
    };
    let mut out = Vec::new();
    for p in ports.iter().filter(|p| p.is_infiniband()) {
        let base = Neighbor {
            device: Some(p.ca.clone()),
            port: Some(p.port),
            source: "smp".into(),
            ..Default::default()
        };
        if p.physical_state != "LinkUp" {
            out.push(Neighbor {
                state: "none".into(),
                why: Some(format!("port physical state {}", p.physical_state)),
                ..base
            });
            continue;
        }
        let smp = |attr: &str, extra: &[&str]| {
            let mut args: Vec<String> = ["-C", &p.ca, "-P", &p.port.to_string(), "-D", attr, "0,1"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.extend(extra.iter().map(|s| s.to_string()));
            call("smpquery", &args)
        };
        let asked = smp("nodeinfo", &[]).and_then(|info| {
            let desc = smp("nodedesc", &[])?;
            let mut n = smp::neighbor(p, &info, &desc, None)?;
            // The link's trained width and speed, read at the neighbour's end of it.
            if let Some(far) = n.port_id.clone() {
                if let Ok(pi) = smp("portinfo", &[&far]) {
                    n = smp::neighbor(p, &info, &desc, Some(&pi))?;
                }
            }
            Ok(n)
        });
        out.push(asked.unwrap_or_else(|why| Neighbor {
            state: "unknown".into(),
            why: Some(why),
            ..base
        }));
    }
    out
}

/// The whole fabric as this host sees it (`ibnetdiscover`), when asked for in `o`.
pub fn fabric(o: &Options, host: &str) -> Option<FabricDiscovery> {
    let limit = o.fabric?;
    let mut d = FabricDiscovery {
        source: "ibnetdiscover".into(),
        host: host.into(),
        ..Default::default()
    };
    match exec::run_wrapped(&o.ib_wrap, "ibnetdiscover", &[], limit).and_then(|t| ibnet::parse(&t))
    {
        Ok(links) => {
            d.state = "found".into();
            d.links = links;
        }
        Err(why) => {
            d.state = "unknown".into();
            d.why = Some(why);
        }
    }
    Some(d)
}

/// `fabric` with the environment's settings (root rank of a sweep).
pub fn fabric_from_env(host: &str) -> Option<FabricDiscovery> {
    match Options::from_env() {
        Ok(o) => fabric(&o, host),
        Err(why) => Some(FabricDiscovery {
            source: "ibnetdiscover".into(),
            host: host.into(),
            state: "unknown".into(),
            why: Some(why),
            links: Vec::new(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_tool_dir(tools: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, body) in tools {
            let p = d.path().join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        d
    }

    #[test]
    fn a_missing_lldpd_socket_is_unknown_with_why() {
        let o = Options {
            ib: false,
            lldp_socket: Some("/nonexistent/fabcheck-lldpd.sock".into()),
            timeout: Duration::from_secs(5),
            ..Default::default()
        };
        let n = neighbors(&o);
        assert_eq!(n.len(), 1, "{n:?}");
        assert_eq!(
            (n[0].source.as_str(), n[0].state.as_str()),
            ("lldp", "unknown")
        );
        let why = n[0].why.as_deref().unwrap();
        // lldpcli installed: it fails to connect; not installed: "not found". Either way
        // the socket is named.
        assert!(why.contains("/nonexistent/fabcheck-lldpd.sock"), "{why}");
    }

    #[test]
    fn ib_tools_through_the_wrap_hook_and_their_failures() {
        // The wrap runs the tools from a directory of stand-in scripts that print the
        // captured ibsim answers (the real tools run under ibsim in tests/tests/ibsim_discovery.rs).
        let fx = concat!(env!("CARGO_MANIFEST_DIR"), "/src/discovery/fixtures");
        let d = fake_tool_dir(&[
            ("ibstat", &format!("cat {fx}/ibstat-44.txt")),
            (
                "smpquery",
                &format!(
                    "case \"$6\" in nodeinfo) cat {fx}/smpquery-44-nodeinfo.txt;; \
                     nodedesc) cat {fx}/smpquery-44-nodedesc.txt;; \
                     portinfo) [ \"$8\" = 2 ] && cat {fx}/smpquery-44-portinfo.txt;; esac"
                ),
            ),
        ]);
        let o = Options {
            lldp: false,
            ib_wrap: vec![
                "env".into(),
                format!("PATH={}:/usr/bin:/bin", d.path().display()),
            ],
            ..Default::default()
        };
        let n = neighbors(&o);
        assert_eq!(n.len(), 1, "{n:?}");
        assert_eq!(n[0].state, "found");
        assert_eq!(n[0].system_name.as_deref(), Some("leaf-g0"));
        assert_eq!(n[0].width.as_deref(), Some("4X"));

        // No umad device: ibstat fails -> one unknown row saying why.
        let d = fake_tool_dir(&[("ibstat", "echo 'ibwarn: no umad device' >&2; exit 1")]);
        let o = Options {
            lldp: false,
            ib_wrap: vec![
                "env".into(),
                format!("PATH={}:/usr/bin:/bin", d.path().display()),
            ],
            ..Default::default()
        };
        let n = neighbors(&o);
        assert_eq!(n[0].state, "unknown");
        assert!(
            n[0].why.as_deref().unwrap().contains("no umad device"),
            "{n:?}"
        );

        // A port that is down is `none`; smpquery failing is `unknown` for that port.
        let d = fake_tool_dir(&[
            (
                "ibstat",
                "printf \"CA 'mlx5_0'\\n\\tPort 1:\\n\\t\\tPhysical state: Polling\\n\\t\\tLink layer: InfiniBand\\nCA 'mlx5_1'\\n\\tPort 1:\\n\\t\\tPhysical state: LinkUp\\n\\t\\tLink layer: InfiniBand\\n\"",
            ),
            ("smpquery", "echo 'smpquery: iberror: failed: Permission denied' >&2; exit 255"),
        ]);
        let o = Options {
            lldp: false,
            ib_wrap: vec![
                "env".into(),
                format!("PATH={}:/usr/bin:/bin", d.path().display()),
            ],
            ..Default::default()
        };
        let n = neighbors(&o);
        assert_eq!(n.len(), 2, "{n:?}");
        assert_eq!(
            (n[0].device.as_deref(), n[0].state.as_str()),
            (Some("mlx5_0"), "none")
        );
        assert_eq!(
            (n[1].device.as_deref(), n[1].state.as_str()),
            (Some("mlx5_1"), "unknown")
        );
        assert!(
            n[1].why.as_deref().unwrap().contains("Permission denied"),
            "{n:?}"
        );
    }

    #[test]
    fn no_ib_ports_and_no_wrap_asks_nothing() {
        let sys = tempfile::tempdir().unwrap();
        let o = Options {
            lldp: false,
            sys: sys.path().into(),
            ..Default::default()
        };
        assert!(neighbors(&o).is_empty());
        // A RoCE port is not InfiniBand either.
        let port = sys.path().join("class/infiniband/mlx5_0/ports/1");
        std::fs::create_dir_all(&port).unwrap();
        std::fs::write(port.join("link_layer"), "Ethernet\n").unwrap();
        assert!(!has_ib_port(sys.path()));
        std::fs::write(port.join("link_layer"), "InfiniBand\n").unwrap();
        assert!(has_ib_port(sys.path()));
    }

    #[test]
    fn fabric_only_when_asked() {
        assert!(fabric(&Options::default(), "h").is_none());
        let d = fake_tool_dir(&[("ibnetdiscover", "exit 3")]);
        let o = Options {
            fabric: Some(Duration::from_secs(5)),
            ib_wrap: vec![
                "env".into(),
                format!("PATH={}:/usr/bin:/bin", d.path().display()),
            ],
            ..Default::default()
        };
        let f = fabric(&o, "h").unwrap();
        assert_eq!(f.state, "unknown");
        let why = f.why.unwrap();
        assert!(
            why.contains("exit status: 3") && why.contains("through env"),
            "{why}"
        );
    }
}
