//! InfiniBand discovery against ibsim (Debian `ibsim-utils`: the real infiniband-diags
//! tools answered by a simulated fabric). Each fabric of tests/fabric/ibsim/ is served by
//! its own ibsim; a standalone `bench-lat` pair runs with each side as one simulated HCA
//! (`FABCHECK_IB_WRAP=ibsim-run`, `SIM_HOST=<node description>`), and its document must
//! record each side's neighbour (switch, port, width) from directed-route SMPs and, with
//! `FABCHECK_IBNETDISCOVER=1`, every cable of the fabric with its width. Then the cabling
//! checks: each faulty fabric's document judged by the real `aggregate report` against the
//! healthy fabric's `ibnetdiscover` output as the plan names its fault.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

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
        // Unique per Sim: two tests may serve the same file at once.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sock = format!(
            "fabcheck-{}-{k}-{}",
            std::process::id(),
            file.replace('.', "-")
        );
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
                .env("SIM_HOST", "g0n0 ibsim0")
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

/// The HCA of `host` as the fabric files describe it (rdma-ndd's `%h %d`).
fn hca(host: &str) -> String {
    format!("{host} ibsim0")
}

/// `cmd` under a UTS namespace of its own whose host name is `host` (root only), so the
/// document names the host as the fabric does; without root, as it is.
fn as_host(cmd: Command, host: &str) -> Command {
    if !integration::is_root() {
        return cmd;
    }
    let mut c = Command::new("unshare");
    c.args(["--uts", "sh", "-c", "hostname \"$0\" && exec \"$@\"", host])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c
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
            .env("SIM_HOST", hca(host))
            .env("FABCHECK_DISCOVERY", "ib");
    };
    let mut s = Command::new(bin("bench-lat"));
    s.args(["-p", &port, "--timeout", "20", "-n", "50"]);
    env(&mut s, server);
    let srv = as_host(s, server)
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
    let out = run(&mut as_host(c, client), LIMIT);
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
        all.contains(&"g0n1 ibsim0[1]-leaf-g0[2] 4XSDR".to_string()),
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
        all.contains(&"g0n1 ibsim0[1]-leaf-g1[2] 4XSDR".to_string()),
        "{all:#?}"
    );
    assert!(
        all.contains(&"g1n1 ibsim0[1]-leaf-g0[2] 4XSDR".to_string()),
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

/// The healthy fabric's `ibnetdiscover` output, as a site keeps it (the golden "as built"
/// fabric), written to `dir`.
fn golden(dir: &Path) -> PathBuf {
    let sim = Sim::start("fabric.net");
    let out = run(
        Command::new("ibsim-run")
            .arg("ibnetdiscover")
            .env("IBSIM_SOCKNAME", &sim.sock)
            .env("SIM_HOST", hca("g0n0")),
        LIMIT,
    );
    assert!(out.status.success(), "ibnetdiscover: {:?}", text(&out));
    let path = dir.join("as-built.ibnetdiscover");
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

/// (kind, name) of every structure suspect `aggregate report --plan GOLDEN` names for the
/// document `doc`.
fn judged(doc: &Value, plan: &Path, dir: &Path) -> std::collections::BTreeSet<(String, String)> {
    let json = dir.join("pair.json");
    std::fs::write(&json, doc.to_string()).unwrap();
    let out_dir = dir.join("report");
    let out = run(
        Command::new(bin("aggregate"))
            .arg("report")
            .arg(&json)
            .arg("--plan")
            .arg(plan)
            .args(["--plan-format", "ibnetdiscover", "--force", "--profile"])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("fabric/simfabric.toml"))
            .arg("--out")
            .arg(&out_dir),
        LIMIT,
    );
    let (o, e) = text(&out);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "aggregate: {o}\n{e}"
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    summary["matrix"]["structure"]["suspects"]
        .as_array()
        .unwrap_or_else(|| panic!("no structure section: {o}"))
        .iter()
        .map(|s| {
            let f = |k: &str| s[k].as_str().unwrap().to_string();
            (f("kind"), f("name"))
        })
        .collect()
}

/// The cabling checks on what InfiniBand discovery found: each faulty fabric's pair,
/// judged against the healthy fabric's ibnetdiscover output as the plan, names exactly its
/// fault: two cables swapped between hosts (each HCA on the other's leaf and port), an
/// uplink missing, an uplink trained at 1X. The healthy fabric names nothing.
#[test]
fn faulty_fabrics_are_judged_against_the_healthy_one() {
    if !ready() {
        return;
    }
    if !integration::is_root() {
        eprintln!("skipped: naming each side's host as the fabric does needs unshare --uts (root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = golden(dir.path());
    let name = |k: &str, n: &str| (k.to_string(), n.to_string());
    for (file, client, server, want) in [
        ("fabric.net", "g0n1", "g1n2", vec![]),
        (
            "swapped-cable.net",
            "g0n1",
            "g1n1",
            vec![
                name("wrong_leaf", "g0n1 ibsim0"),
                name("wrong_leaf", "g1n1 ibsim0"),
            ],
        ),
        (
            "missing-uplink.net",
            "g1n0",
            "g0n0",
            vec![name("missing_link", "leaf-g1 - spine1")],
        ),
        (
            "narrow-uplink.net",
            "g0n0",
            "g1n3",
            vec![name("link_downgraded", "leaf-g0[10] - spine1[1]")],
        ),
    ] {
        let sim = Sim::start(file);
        let doc = pair(&sim, client, server);
        let got = judged(&doc, &plan, dir.path());
        assert_eq!(got, want.into_iter().collect(), "{file}");
    }
}
