//! The agent's live view for Prometheus (`--serve --metrics ADDR:PORT`): HTTP `GET
//! /metrics` answers, in the text exposition format (version 0.0.4), what this node's ports
//! say right now and what the agent's last sweep measured.
//!
//! Between acceptance runs the fabric is still worth watching: a port that flaps, a PFC
//! storm (pause frames rising while nothing is measured), discards on the lossless
//! priority, CNPs, retransmissions, FEC corrections. Every figure is read at scrape time:
//!
//! - RDMA ports (`/sys/class/infiniband`): state, rate, and every counter the driver exposes
//!   (`counters/` and `hw_counters/`, read as the inventory reads them);
//! - kernel interfaces (`/sys/class/net`): operstate, speed, carrier changes (link flaps
//!   since boot) and the standard statistics;
//! - the driver's own counters (`ethtool -S IF` through `probe::ethtool`, with its deadline):
//!   per-priority pause frames and durations, discards, ECN marks, CNPs, FEC corrections,
//!   whatever the NIC names them (mlx5: `rx_prio3_pause`, `rx_discards_phy`,
//!   `np_cnp_sent`...). Only numeric lines; `ethtool` missing or refusing is a metric too
//!   (`fabcheck_node_source_up{source="ethtool"} 0`), never an error;
//! - the last sweep: each of this agent's measured pairs, its bandwidth or latency.
//!
//! The server is a plain thread: a scrape every few seconds is no load, and it never
//! touches the measuring thread. Each connection has a 2 s read and write deadline, one
//! request, then close; anything but `GET /metrics` gets 404 or 405.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Result};

use results::TestResult;

/// How long a scrape may take to send its request and read the answer.
const DEADLINE: Duration = Duration::from_secs(2);
/// Longest request head read (a scrape's is a few hundred bytes).
const MAX_REQUEST: usize = 8 * 1024;

/// What the agent measured in its last sweep, kept for scrapes.
#[derive(Debug, Default, Clone)]
pub struct LastSweep {
    /// Unix time the last round of the sweep was reported.
    pub finished_unix_s: Option<f64>,
    /// Every result of that sweep.
    pub results: Vec<TestResult>,
}

/// Shared between the agent's thread (which records) and the metrics thread.
pub type Shared = Arc<Mutex<LastSweep>>;

/// The node a scrape reads: this host, or a capture of one (`fabric-doctor --capture DIR`:
/// its `fs/` tree and the `ethtool -S` outputs under `cmd/`), which is how the dashboard's
/// live panels are checked against a real NIC's counters on a machine without that NIC.
#[derive(Debug, Clone)]
pub enum Node {
    /// This host, read as it is.
    Live,
    /// A capture directory read instead of a host.
    Capture(PathBuf),
}

impl Node {
    /// Where `/sys` lies for this node.
    fn root(&self) -> PathBuf {
        match self {
            Node::Live => PathBuf::from("/"),
            Node::Capture(dir) => dir.join("fs"),
        }
    }

    /// The driver's counters of `ifname` (`ethtool -S`), or why there are none.
    fn ethtool(&self, ifname: &str) -> Result<BTreeMap<String, i64>, String> {
        use probe::audit::Source;
        match self {
            Node::Live => probe::ethtool::stats(ifname),
            Node::Capture(dir) => {
                let out = probe::audit::Replay::open(dir)?.run(&["ethtool", "-S", ifname]);
                if out.ok() {
                    Ok(probe::ethtool::parse_stats(&out.stdout))
                } else {
                    Err(out.why())
                }
            }
        }
    }
}

/// Listens on `addr` and answers scrapes on a thread of its own, for as long as the process
/// lives.
pub fn serve(addr: SocketAddr, host: String, last: Shared, node: Node) -> Result<SocketAddr> {
    let listener = TcpListener::bind(addr).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow!("--metrics {addr}: the port is already in use: pick another")
        } else {
            anyhow!("--metrics {addr}: cannot listen: {e}")
        }
    })?;
    let bound = listener.local_addr()?;
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let (host, last, node) = (host.clone(), Arc::clone(&last), node.clone());
            std::thread::spawn(move || {
                let _ = answer(s, &host, &last, &node);
            });
        }
    });
    Ok(bound)
}

fn answer(mut s: TcpStream, host: &str, last: &Shared, node: &Node) -> std::io::Result<()> {
    s.set_read_timeout(Some(DEADLINE))?;
    s.set_write_timeout(Some(DEADLINE))?;
    let mut head = String::new();
    let mut r = BufReader::new(s.try_clone()?).take(MAX_REQUEST as u64);
    r.read_line(&mut head)?;
    // The rest of the head, up to the blank line (bounded by `take`).
    let mut line = String::new();
    while r.read_line(&mut line)? > 0 && line.trim_end() != "" {
        line.clear();
    }
    let mut parts = head.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, body) = match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => ("200 OK", exposition(host, last, node)),
        ("GET", _) => (
            "404 Not Found",
            "only /metrics is served here\n".to_string(),
        ),
        _ => ("405 Method Not Allowed", "use GET /metrics\n".to_string()),
    };
    write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    s.flush()
}

/// One metric family: its help, type, and samples (labels, value).
struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

impl Family {
    fn new(name: &'static str, kind: &'static str, help: &'static str) -> Self {
        Self {
            name,
            help,
            kind,
            samples: Vec::new(),
        }
    }
    fn add(&mut self, labels: Vec<(&'static str, String)>, v: f64) {
        self.samples.push((labels, v));
    }
    fn write(&self, out: &mut String) {
        if self.samples.is_empty() {
            return;
        }
        out.push_str(&format!(
            "# HELP {} {}\n# TYPE {} {}\n",
            self.name, self.help, self.name, self.kind
        ));
        for (labels, v) in &self.samples {
            let l: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", label_escape(v)))
                .collect();
            out.push_str(&format!(
                "{}{{{}}} {}\n",
                self.name,
                l.join(","),
                number(*v)
            ));
        }
    }
}

/// A label value as the exposition format wants it: backslash, quote and newline escaped.
fn label_escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else if v.is_nan() {
        "NaN".into()
    } else if v > 0.0 {
        "+Inf".into()
    } else {
        "-Inf".into()
    }
}

/// The families of one scrape, in the order they are written.
struct Exposition {
    up: Family,
    state: Family,
    rate: Family,
    rctr: Family,
    oper: Family,
    speed: Family,
    flaps: Family,
    stats: Family,
    drv: Family,
    sweep_t: Family,
    bw: Family,
    lat: Family,
}

/// The whole exposition of one scrape.
pub fn exposition(host: &str, last: &Shared, node: &Node) -> String {
    let root = node.root();
    let mut x = Exposition::new();
    x.rdma(host, root.as_path());
    x.netdevs(host, root.as_path(), node);
    x.last_sweep(host, last);
    let mut out = String::new();
    for f in [
        &x.up, &x.state, &x.rate, &x.rctr, &x.oper, &x.speed, &x.flaps, &x.stats, &x.drv,
        &x.sweep_t, &x.bw, &x.lat,
    ] {
        f.write(&mut out);
    }
    out
}

impl Exposition {
    fn new() -> Self {
        Exposition {
            up: Family::new(
                "fabcheck_node_source_up",
                "gauge",
                "1 when the source answered this scrape (sysfs_rdma, sysfs_net, ethtool), 0 when it is missing or refused.",
            ),
            state: Family::new(
                "fabcheck_rdma_port_active",
                "gauge",
                "1 when the RDMA port's state is ACTIVE.",
            ),
            rate: Family::new(
                "fabcheck_rdma_port_rate_bytes_per_second",
                "gauge",
                "The RDMA port's rate as trained.",
            ),
            rctr: Family::new(
                "fabcheck_rdma_port_stat_total",
                "counter",
                "An RDMA port counter as the driver exposes it (counters/ and hw_counters/).",
            ),
            oper: Family::new(
                "fabcheck_netdev_up",
                "gauge",
                "1 when the interface's operstate is up.",
            ),
            speed: Family::new(
                "fabcheck_netdev_speed_bytes_per_second",
                "gauge",
                "The interface's link speed.",
            ),
            flaps: Family::new(
                "fabcheck_netdev_carrier_changes_total",
                "counter",
                "Carrier changes since boot (two per link flap).",
            ),
            stats: Family::new(
                "fabcheck_netdev_statistic_total",
                "counter",
                "A kernel interface statistic (/sys/class/net/IF/statistics).",
            ),
            drv: Family::new(
                "fabcheck_netdev_driver_stat_total",
                "counter",
                "A driver counter from ethtool -S: per-priority pause, discards, ECN marks, CNPs, FEC corrections as the NIC names them.",
            ),
            sweep_t: Family::new(
                "fabcheck_agent_last_sweep_timestamp_seconds",
                "gauge",
                "Unix time the agent reported the last round of its last sweep.",
            ),
            bw: Family::new(
                "fabcheck_agent_pair_bandwidth_bytes_per_second",
                "gauge",
                "Average bandwidth of a pair this agent initiated in its last sweep.",
            ),
            lat: Family::new(
                "fabcheck_agent_pair_latency_p50_seconds",
                "gauge",
                "Median one-way latency of a pair this agent initiated in its last sweep.",
            ),
        }
    }

    /// Every RDMA port under `root`: its state, rate and counters.
    fn rdma(&mut self, host: &str, root: &Path) {
        let h = || ("host", host.to_string());
        let sys = root.join("sys/class");
        let rdma = probe::inventory::rdma_devices(&probe::inventory::SysRoot::under(root));
        self.up.add(
            vec![h(), ("source", "sysfs_rdma".into())],
            f64::from(u8::from(sys.join("infiniband").is_dir())),
        );
        for d in &rdma {
            for p in &d.ports {
                let l = || {
                    vec![
                        h(),
                        ("device", d.name.clone()),
                        ("port", p.port.to_string()),
                    ]
                };
                // No state file: unknown, so no sample (a 0 would raise a false port-down).
                if !p.state.is_empty() {
                    self.state
                        .add(l(), f64::from(u8::from(p.state.contains("ACTIVE"))));
                }
                if let Some(r) = p.rate_gbit_s {
                    self.rate.add(l(), r * 1e9 / 8.0);
                }
                let hw = probe::counters::read_dir(
                    &sys.join("infiniband")
                        .join(&d.name)
                        .join("ports")
                        .join(p.port.to_string())
                        .join("hw_counters"),
                );
                for (c, v) in p.counters.iter().chain(&hw) {
                    let mut labels = l();
                    labels.push(("counter", c.clone()));
                    self.rctr.add(labels, *v as f64);
                }
            }
        }
    }

    /// Every interface under `root`: up, speed, carrier changes, the kernel's statistics
    /// and the driver's (ethtool -S).
    fn netdevs(&mut self, host: &str, root: &Path, node: &Node) {
        let h = || ("host", host.to_string());
        let sys = root.join("sys/class");
        let nets = probe::sysfs::dir_names(sys.join("net"));
        self.up.add(
            vec![h(), ("source", "sysfs_net".into())],
            f64::from(u8::from(!nets.is_empty())),
        );
        let mut ethtool_ok = false;
        for ifname in &nets {
            let dir = sys.join("net").join(ifname);
            let l = || vec![h(), ("interface", ifname.clone())];
            let read = |f: &str| probe::sysfs::read_trim(dir.join(f));
            if let Some(s) = read("operstate") {
                self.oper.add(l(), f64::from(u8::from(s == "up")));
            }
            if let Some(v) = read("speed")
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| *v >= 0.0)
            {
                self.speed.add(l(), v * 1e6 / 8.0);
            }
            if let Some(v) = read("carrier_changes").and_then(|v| v.parse::<f64>().ok()) {
                self.flaps.add(l(), v);
            }
            for st in probe::sysfs::dir_names(dir.join("statistics")) {
                if let Some(v) = probe::sysfs::read_trim(dir.join("statistics").join(&st))
                    .and_then(|v| v.parse::<f64>().ok())
                {
                    let mut labels = l();
                    labels.push(("statistic", st));
                    self.stats.add(labels, v);
                }
            }
            if let Ok(counters) = node.ethtool(ifname) {
                ethtool_ok = true;
                for (c, v) in counters {
                    let mut labels = l();
                    labels.push(("counter", c));
                    self.drv.add(labels, v as f64);
                }
            }
        }
        self.up.add(
            vec![h(), ("source", "ethtool".into())],
            f64::from(u8::from(ethtool_ok)),
        );
    }

    /// The agent's last sweep: when it ended, and each pair it initiated.
    fn last_sweep(&mut self, host: &str, last: &Shared) {
        let Ok(l) = last.lock() else { return };
        if let Some(t) = l.finished_unix_s {
            self.sweep_t.add(vec![("host", host.to_string())], t);
        }
        for r in &l.results {
            match r {
                TestResult::Bandwidth(b) => self.bw.add(
                    pair_labels(host, &b.pair, &b.test, &b.transport, b.size_bytes),
                    b.bw_gbit_s.avg * 1e9 / 8.0,
                ),
                TestResult::Latency(x) => self.lat.add(
                    pair_labels(host, &x.pair, &x.test, &x.transport, x.size_bytes),
                    x.latency_us.p50 * 1e-6,
                ),
                TestResult::Collective(_) => {}
            }
        }
    }
}

fn pair_labels(
    host: &str,
    pair: &results::Pair,
    test: &str,
    transport: &str,
    size: u64,
) -> Vec<(&'static str, String)> {
    vec![
        ("host", host.to_string()),
        ("peer", pair.responder.host.clone()),
        ("device", pair.initiator.device.clone().unwrap_or_default()),
        ("test", test.to_string()),
        ("transport", transport.to_string()),
        ("size_bytes", size.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_for_the_exposition() {
        assert_eq!(label_escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn a_fixture_tree_exposes_ports_counters_and_flaps() {
        let t = tempfile::tempdir().unwrap();
        let port = t.path().join("fs/sys/class/infiniband/mlx5_0/ports/1");
        std::fs::create_dir_all(port.join("counters")).unwrap();
        std::fs::create_dir_all(port.join("hw_counters")).unwrap();
        std::fs::write(port.join("state"), "4: ACTIVE\n").unwrap();
        std::fs::write(port.join("rate"), "100 Gb/sec (4X EDR)\n").unwrap();
        std::fs::write(port.join("link_layer"), "Ethernet\n").unwrap();
        std::fs::write(port.join("counters/port_rcv_errors"), "3\n").unwrap();
        std::fs::write(port.join("hw_counters/np_cnp_sent"), "9\n").unwrap();
        let net = t.path().join("fs/sys/class/net/eth0");
        std::fs::create_dir_all(net.join("statistics")).unwrap();
        std::fs::write(net.join("operstate"), "up\n").unwrap();
        std::fs::write(net.join("carrier_changes"), "6\n").unwrap();
        std::fs::write(net.join("statistics/rx_dropped"), "2\n").unwrap();
        let last: Shared = Arc::default();
        let text = exposition("node\"1", &last, &Node::Capture(t.path().into()));
        for want in [
            "fabcheck_rdma_port_active{host=\"node\\\"1\",device=\"mlx5_0\",port=\"1\"} 1",
            "fabcheck_rdma_port_rate_bytes_per_second{host=\"node\\\"1\",device=\"mlx5_0\",port=\"1\"} 12500000000",
            "counter=\"port_rcv_errors\"} 3",
            "counter=\"np_cnp_sent\"} 9",
            "fabcheck_netdev_carrier_changes_total{host=\"node\\\"1\",interface=\"eth0\"} 6",
            "statistic=\"rx_dropped\"} 2",
            "source=\"ethtool\"} 0",
        ] {
            assert!(text.contains(want), "{want} missing from\n{text}");
        }
        assert!(!text.contains("fabcheck_agent_last_sweep"), "no sweep yet");
    }
}
