//! InfiniBand discovery against ibsim (Debian `ibsim-utils`: the real infiniband-diags
//! tools answered by a simulated fabric). Each fabric of tests/fabric/ibsim/ is served by
//! its own ibsim; a standalone `bench-lat` pair runs with each side as one simulated HCA
//! (`FABCHECK_IB_WRAP=ibsim-run`, `SIM_HOST=<node>`), and its document must record each
//! side's neighbour (switch, port, width) from directed-route SMPs and, with
//! `FABCHECK_IBNETDISCOVER=1`, every cable of the fabric with its width.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use integration::{bin, free_port, run, text, wait_with_deadline};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);

fn fabric(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fabric/ibsim")
        .join(name)
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One ibsim serving `file` on its own socket name; killed on drop.
struct Sim {
    child: Child,
    sock: String,
}

impl Sim {
    fn start(file: &str) -> Sim {
        let sock = format!("fabcheck-{}-{}", std::process::id(), file.replace('.', "-"));
        let child = Command::new("ibsim")
            .args(["-s", "-n"])
            .arg(fabric(file))
            .env("IBSIM_SOCKNAME", &sock)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ibsim");
        let sim = Sim { child, sock };
        // Ready when a query through it answers (every wait bounded).
        let begun = Instant::now();
        loop {
            let ok = Command::new("timeout")
                .args(["5", "ibsim-run", "smpquery", "-D", "nodedesc", "0"])
                .env("IBSIM_SOCKNAME", &sim.sock)
                .env("SIM_HOST", "g0n0")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return sim;
            }
            assert!(
                begun.elapsed() < Duration::from_secs(20),
                "ibsim on {file} did not come up"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A latency pair with the client as `client` and the server as `server` of the fabric;
/// the client's document.
fn pair(sim: &Sim, client: &str, server: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lat.json");
    let port = free_port().to_string();
    let env = |c: &mut Command, host: &str| {
        c.env("FABCHECK_IB_WRAP", "ibsim-run")
            .env("IBSIM_SOCKNAME", &sim.sock)
            .env("SIM_HOST", host)
            .env("FABCHECK_DISCOVERY", "ib");
    };
    let mut s = Command::new(bin("bench-lat"));
    s.args(["-p", &port, "--timeout", "20", "-n", "50"]);
    env(&mut s, server);
    let srv = s
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut c = Command::new(bin("bench-lat"));
    c.args([
        "127.0.0.1",
        "-p",
        &port,
        "--timeout",
        "20",
        "-n",
        "50",
        "--json",
    ])
    .arg(&json);
    env(&mut c, client);
    c.env("FABCHECK_IBNETDISCOVER", "1");
    let out = run(&mut c, LIMIT);
    let (o, e) = text(&out);
    assert!(out.status.success(), "client: {o}\n{e}");
    let s = wait_with_deadline(srv, LIMIT, "server");
    assert!(s.status.success(), "server: {:?}", text(&s));
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// (switch, switch port, width) of each host's SMP neighbour, in host order (client, server).
fn neighbours(doc: &Value) -> Vec<(String, String, String)> {
    doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let n: Vec<&Value> = h["neighbors"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|n| n["source"] == "smp")
                .collect();
            assert_eq!(n.len(), 1, "one simulated port per host: {h}");
            assert_eq!(n[0]["state"], "found", "{}", n[0]);
            assert_eq!(n[0]["device"], "ibsim0");
            let s = |k: &str| n[0][k].as_str().unwrap_or("?").to_string();
            (s("system_name"), s("port_id"), s("width"))
        })
        .collect()
}

/// Every cable as `a[port]-b[port] WIDTH` with the ends in name order.
fn links(doc: &Value) -> Vec<String> {
    let f = &doc["fabric"];
    assert_eq!(f["source"], "ibnetdiscover");
    assert_eq!(f["state"], "found", "{f}");
    let mut v: Vec<String> = f["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let mut ends = [
                format!("{}[{}]", l["a_name"].as_str().unwrap(), l["a_port"]),
                format!("{}[{}]", l["b_name"].as_str().unwrap(), l["b_port"]),
            ];
            ends.sort();
            format!(
                "{}-{} {}{}",
                ends[0],
                ends[1],
                l["width"].as_str().unwrap(),
                l["speed"].as_str().unwrap()
            )
        })
        .collect();
    v.sort();
    v
}

fn ready() -> bool {
    if !(have("ibsim") && have("ibsim-run") && have("smpquery") && have("ibnetdiscover")) {
        eprintln!("skipped: needs ibsim-utils and infiniband-diags (scripts/lib/deps.sh)");
        return false;
    }
    true
}

fn uplinks(all: &[String], leaf: &str) -> Vec<String> {
    all.iter()
        .filter(|l| l.contains(leaf) && l.contains("spine"))
        .cloned()
        .collect()
}

#[test]
fn healthy_fabric_each_host_on_its_leaf_port_and_every_cable_at_4x() {
    if !ready() {
        return;
    }
    let sim = Sim::start("fabric.net");
    let doc = pair(&sim, "g0n1", "g1n2");
    let s = |a: &str, b: &str| (a.to_string(), b.to_string(), "4X".to_string());
    assert_eq!(neighbours(&doc), [s("leaf-g0", "2"), s("leaf-g1", "3")]);
    let all = links(&doc);
    assert_eq!(all.len(), 12, "{all:#?}");
    assert!(all.iter().all(|l| l.ends_with("4XSDR")), "{all:#?}");
    assert!(
        all.contains(&"g0n1[1]-leaf-g0[2] 4XSDR".to_string()),
        "{all:#?}"
    );
    assert_eq!(uplinks(&all, "leaf-g0").len(), 2);
    assert_eq!(uplinks(&all, "leaf-g1").len(), 2);
}

#[test]
fn swapped_cable_puts_each_host_on_the_others_leaf() {
    if !ready() {
        return;
    }
    let sim = Sim::start("swapped-cable.net");
    let doc = pair(&sim, "g0n1", "g1n1");
    let s = |a: &str, b: &str| (a.to_string(), b.to_string(), "4X".to_string());
    assert_eq!(neighbours(&doc), [s("leaf-g1", "2"), s("leaf-g0", "2")]);
    let all = links(&doc);
    assert!(
        all.contains(&"g0n1[1]-leaf-g1[2] 4XSDR".to_string()),
        "{all:#?}"
    );
    assert!(
        all.contains(&"g1n1[1]-leaf-g0[2] 4XSDR".to_string()),
        "{all:#?}"
    );
}

#[test]
fn missing_uplink_is_absent_from_the_discovered_fabric() {
    if !ready() {
        return;
    }
    let sim = Sim::start("missing-uplink.net");
    let doc = pair(&sim, "g1n0", "g0n0");
    let all = links(&doc);
    assert_eq!(all.len(), 11, "{all:#?}");
    assert_eq!(uplinks(&all, "leaf-g1"), ["leaf-g1[9]-spine0[2] 4XSDR"]);
    assert_eq!(uplinks(&all, "leaf-g0").len(), 2);
}

#[test]
fn narrow_uplink_trains_at_1x_and_hosts_are_unaffected() {
    if !ready() {
        return;
    }
    let sim = Sim::start("narrow-uplink.net");
    let doc = pair(&sim, "g0n0", "g1n3");
    let s = |a: &str, b: &str| (a.to_string(), b.to_string(), "4X".to_string());
    assert_eq!(neighbours(&doc), [s("leaf-g0", "1"), s("leaf-g1", "4")]);
    let all = links(&doc);
    let narrow: Vec<&String> = all.iter().filter(|l| !l.ends_with("4XSDR")).collect();
    assert_eq!(narrow, ["leaf-g0[10]-spine1[1] 1XSDR"], "{all:#?}");
}
