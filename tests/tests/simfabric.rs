//! The simulated leaf-spine fabric (tests/fabric/simfabric.sh, 2 groups x 4 nodes x 2 rails x
//! 2 spines): a TCP all-pairs `bench-bw` sweep under it, every node and rail in the rows
//! (Peer.device = the rail interface), LLDP neighbours in the host facts that match the
//! plan --plan-out wrote, and faults that change what they should: swapped cables exchange
//! a node's two leaves in LLDP; a one-way fault slows one direction only. Each sweep is
//! then judged by the real `aggregate report --plan` with tests/fabric/simfabric.toml: a
//! clean fabric names nothing, a faulted one exactly the injected parts (a leaf, a one-way
//! path, a cable swap, a NIC on another group's leaf, a cable on the wrong port), and a
//! slow uplink beside a swap is the uplink (its leaf's with three groups) and the swap.
//! `fabcheck accept` drives a whole fabric (simfabric.sh --driver) with
//! tests/fabric/simfabric-accept.toml, under mpirun and under srun in a Slurm cluster of
//! the fabric's nodes (--slurm): a healthy fabric passes, a faulty one (a one-way fault, a
//! swap, a slow uplink: the rail's spines with two groups) fails naming exactly its faults.
//! Noisy neighbours across two tenants: named on shared uplinks, not on separate leaves.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use integration::{bin, is_root, run, text};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(400);

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fabric/simfabric.sh")
}

/// 2 groups x 4 nodes x 2 rails x 2 spines, node links at 200 Mbit/s, uplinks at their
/// default (each carries its whole leaf: nothing oversubscribed).
const TWO_GROUPS: [&str; 10] = [
    "--groups",
    "2",
    "--nodes-per-group",
    "4",
    "--rails",
    "2",
    "--spines",
    "2",
    "--rate",
    "200mbit",
];

/// Brings the fabric up with `faults`, runs an all-pairs TCP sweep, returns the document
/// (written to DIR/sweep.json) and writes the intended fabric's plan to DIR/plan.toml.
fn sweep(shape: &[&str], faults: &[&str], dir: &Path) -> Value {
    let json = dir.join("sweep.json");
    let mut cmd = Command::new(script());
    cmd.args(shape)
        .args(faults)
        .arg("--plan-out")
        .arg(dir.join("plan.toml"));
    cmd.arg("--")
        .arg(bin("bench-bw"))
        .args([
            "-s",
            "64K",
            "-D",
            "0.3",
            "--timeout",
            "30",
            "--pattern",
            "all-pairs",
        ])
        .arg("--plan")
        .arg(dir.join("plan.toml"))
        .arg("--json")
        .arg(&json);
    let out = run(&mut cmd, LIMIT);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

fn end(p: &Value) -> (String, String) {
    (
        p["host"].as_str().unwrap().to_string(),
        p["device"].as_str().unwrap_or("?").to_string(),
    )
}

/// A row's end: (host, rail interface).
type End = (String, String);

/// (initiator, responder) -> average Gbit/s of every bandwidth row.
fn rows(doc: &Value) -> BTreeMap<(End, End), f64> {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["pair"].is_object() && r["bw_gbit_s"].is_object())
        .map(|r| {
            (
                (end(&r["pair"]["initiator"]), end(&r["pair"]["responder"])),
                r["bw_gbit_s"]["avg"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// host -> interface -> (switch, port) from LLDP in the host facts.
fn lldp(doc: &Value) -> BTreeMap<String, BTreeMap<String, (String, String)>> {
    let mut out: BTreeMap<String, BTreeMap<String, (String, String)>> = BTreeMap::new();
    for h in doc["hosts"].as_array().unwrap() {
        for n in h["neighbors"].as_array().unwrap() {
            if n["source"] == "lldp" && n["state"] == "found" {
                out.entry(h["hostname"].as_str().unwrap().into())
                    .or_default()
                    .insert(
                        n["interface"].as_str().unwrap().into(),
                        (
                            n["system_name"].as_str().unwrap().into(),
                            n["port_id"].as_str().unwrap().into(),
                        ),
                    );
            }
        }
    }
    out
}

/// node -> nic -> (switch, port) from the plan's [[nic]] tables (TOML written by the script).
fn plan_nics(plan: &str) -> BTreeMap<String, BTreeMap<String, (String, String)>> {
    let mut out: BTreeMap<String, BTreeMap<String, (String, String)>> = BTreeMap::new();
    for block in plan.split("[[").filter(|b| b.starts_with("nic]]")) {
        let get = |k: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{k} = ")))
                .unwrap()
                .trim_matches('"')
                .to_string()
        };
        out.entry(get("node"))
            .or_default()
            .insert(get("nic"), (get("switch"), get("port")));
    }
    out
}

/// `aggregate report --plan DIR/plan.toml --profile tests/fabric/simfabric.toml` on
/// DIR/sweep.json: its exit code and the (kind, name) of every structure suspect.
fn judge(dir: &Path) -> (i32, BTreeSet<(String, String)>, String) {
    let out_dir = dir.join("report");
    let out = run(
        Command::new(bin("aggregate"))
            .arg("report")
            .arg("--profile")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("fabric/simfabric.toml"))
            .arg("--plan")
            .arg(dir.join("plan.toml"))
            .arg("-o")
            .arg(&out_dir)
            .arg(dir.join("sweep.json")),
        Duration::from_secs(120),
    );
    let (stdout, stderr) = text(&out);
    let code = out.status.code().unwrap_or(-1);
    assert!(code == 0 || code == 1, "aggregate: {stdout}\n{stderr}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    let named = summary["matrix"]["structure"]["suspects"]
        .as_array()
        .unwrap_or_else(|| panic!("no structure section: {stdout}"))
        .iter()
        .map(|s| {
            (
                s["kind"].as_str().unwrap().to_string(),
                s["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (code, named, stdout)
}

/// One fabric at a time: each test brings up a whole fabric and measures it, and two at
/// once on a 2-core machine slow each other's cells (cargo runs a file's tests in
/// parallel).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static FABRIC: std::sync::Mutex<()> = std::sync::Mutex::new(());
    FABRIC.lock().unwrap_or_else(|e| e.into_inner())
}

fn names(v: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    v.iter()
        .map(|(k, n)| (k.to_string(), n.to_string()))
        .collect()
}

fn skip() -> bool {
    if !is_root() {
        eprintln!("skipped: the simulated fabric needs root (namespaces, veth, tc, lldpd); CI runs as root");
        return true;
    }
    false
}

#[test]
fn clean_fabric_rows_rails_and_lldp_match_the_plan_and_nothing_is_named() {
    if skip() {
        return;
    }
    let _fabric = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    let doc = sweep(&TWO_GROUPS, &[], dir.path());
    let rows = rows(&doc);
    // Every node and rail is an end of some row.
    let ends: BTreeSet<(String, String)> = rows
        .keys()
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect();
    let mut want = BTreeSet::new();
    for g in 0..2 {
        for i in 0..4 {
            for r in 0..2 {
                want.insert((format!("g{g}n{i}"), format!("rail{r}")));
            }
        }
    }
    assert_eq!(ends, want);
    // LLDP in every host's facts agrees with the plan, NIC for NIC.
    let plan = plan_nics(&std::fs::read_to_string(&plan).unwrap());
    assert_eq!(plan.len(), 8);
    assert_eq!(lldp(&doc), plan);
    // The sweep read the plan: nodes in its order (group by group), every planned node in
    // the run, pairs by hop: per rail 2 x C(4,2) = 12 on one leaf, 4 x 4 = 16 across.
    let s = &doc["sweep"];
    let order: Vec<&str> = s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        ["g0n0", "g0n1", "g0n2", "g0n3", "g1n0", "g1n1", "g1n2", "g1n3"]
    );
    let p = &s["plan"];
    assert_eq!(p["missing"], serde_json::json!([]), "{p}");
    assert_eq!(p["unplanned"], serde_json::json!([]), "{p}");
    assert_eq!(
        (
            p["same_leaf_pairs"].as_u64(),
            p["cross_leaf_pairs"].as_u64()
        ),
        (Some(24), Some(32)),
        "{p}"
    );
    // The plan's rates say nothing is oversubscribed: rounds are the circle's.
    assert!(p.get("cross_leaf_cap").is_none(), "{p}");
    // aggregate against the plan: every check passes, nothing is named.
    let (code, named, report) = judge(dir.path());
    assert_eq!(named, BTreeSet::new(), "{report}");
    assert_eq!(code, 0, "{report}");
}

#[test]
fn faults_of_five_kinds_change_what_they_should_and_exactly_they_are_named() {
    if skip() {
        return;
    }
    let _fabric = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let doc = sweep(
        &TWO_GROUPS,
        &[
            "--swap-cables",
            "g1n2:0,1",
            "--slow-dir",
            "g0n3>g0n2:10mbit",
            "--slow-leaf",
            "leaf-r1-g0:20mbit",
            "--move-nic",
            "g1n1:0:0",
            "--wrong-port",
            "g0n1:0",
        ],
        dir.path(),
    );
    let seen = lldp(&doc);
    let n = &seen["g1n2"];
    assert_eq!(n["rail0"], ("leaf-r1-g1".to_string(), "swp3".to_string()));
    assert_eq!(n["rail1"], ("leaf-r0-g1".to_string(), "swp3".to_string()));
    assert_eq!(
        seen["g1n3"]["rail0"].0, "leaf-r0-g1",
        "other nodes unchanged"
    );
    // One direction only. A sweep is bidirectional, so each row's `bw_gbit_s` is the sum
    // of both directions; each direction's own figure (counted by its receiver) is in
    // `directions`. The fault passes small packets at the link rate, so the other
    // direction's acknowledgements do not queue behind the slowed data.
    let dirs = directions(&doc);
    let slow = dirs[&("g0n3".to_string(), "g0n2".to_string())];
    let fast = dirs[&("g0n2".to_string(), "g0n3".to_string())];
    assert!(
        slow < 0.015,
        "g0n3 -> g0n2 limited to 10 Mbit/s, measured {slow} Gbit/s"
    );
    assert!(
        fast > 0.05,
        "g0n2 -> g0n3 is not limited, measured {fast} Gbit/s against {slow} the other way"
    );
    // A direction that is not touched by the fault runs near the 200 Mbit/s node rate.
    let other = dirs[&("g0n2".to_string(), "g0n1".to_string())];
    assert!(other > 0.05, "g0n2 -> g0n1 measured {other} Gbit/s");
    // The moved NIC and the wrong port show in LLDP only.
    assert_eq!(seen["g1n1"]["rail0"].0, "leaf-r0-g0");
    assert_eq!(seen["g0n1"]["rail0"].0, "leaf-r0-g0");
    assert_ne!(seen["g0n1"]["rail0"].1, "swp2");
    // aggregate names exactly these parts. The slow leaf holds g0n3 -> g0n2 on rail 1,
    // so the one-way fault is named on rail 0 only.
    let (code, named, report) = judge(dir.path());
    assert_eq!(
        named,
        names(&[
            ("leaf", "leaf-r1-g0"),
            ("one_way", "g0n3 rail0 -> g0n2 rail0"),
            ("cable_swap", "g1n2 rail0 and rail1"),
            ("wrong_leaf", "g1n1 rail0"),
            ("wrong_port", "g0n1 rail0"),
        ]),
        "{report}"
    );
    assert_eq!(code, 1, "{report}");
}

/// One slow uplink: ECMP hashes some of the leaf's cross-group pairs onto it. With three
/// groups every slow pair touches that leaf, so its uplinks are named, not the spines
/// (with two, every cross-group pair touches both leaves of the rail and the spines of
/// the rail are named: the runner test below has that case). Beside it a swapped cable:
/// the swapped NICs' links cross the other rail's leaf and the slow uplink, where the
/// per-rail blocks cannot lay them at the uplink's door; they are the swap's, not links
/// or directions of their own (they were: a link and two one-way suspects beside the
/// swap, which "explained 0 of the bad links"). A slow direction elsewhere is still
/// named; its rail-1 cell crosses the slow uplink's leaf, and the uplinks explain it.
#[test]
fn a_slow_uplink_beside_a_swap_is_the_uplink_and_the_swap() {
    if skip() {
        return;
    }
    let _fabric = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    sweep(
        &[
            "--groups",
            "3",
            "--nodes-per-group",
            "3",
            "--rails",
            "2",
            "--spines",
            "2",
            "--rate",
            "200mbit",
        ],
        &[
            "--swap-cables",
            "g1n2:0,1",
            "--slow-uplink",
            "leaf-r1-g0:spine0:20mbit",
            "--slow-dir",
            "g0n1>g2n2:20mbit",
        ],
        dir.path(),
    );
    let (code, named, report) = judge(dir.path());
    assert_eq!(
        named,
        names(&[
            ("leaf_uplinks", "leaf-r1-g0"),
            ("one_way", "g0n1 rail0 -> g2n2 rail0"),
            ("cable_swap", "g1n2 rail0 and rail1"),
        ]),
        "{report}"
    );
    assert_eq!(code, 1, "{report}");
}

/// Uplinks at 100 Mbit/s under four NICs of 200 Mbit/s per leaf (4:1), declared in the
/// plan: the sweep holds each group to one pair across the spines per round (the uplinks
/// carry one NIC's rate), every cell across them is judged against the 0.5 of the NIC's
/// rate one flow reaches through one uplink, and so a clean fabric names nothing while a
/// one-way fault is still named exactly. Without the rates in the plan the same fabric
/// named the spine layer and a leaf's uplinks (stop 24's note).
#[test]
fn an_oversubscribed_fabric_is_swept_within_its_uplinks_and_judged_by_the_plans_rates() {
    if skip() {
        return;
    }
    let _fabric = one_at_a_time();
    let mut shape = TWO_GROUPS.to_vec();
    shape.extend(["--uplink-rate", "100mbit"]);
    for faults in [
        vec![],
        vec![
            "--slow-dir",
            "g1n3>g0n1:20mbit",
            "--swap-cables",
            "g0n2:0,1",
        ],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let doc = sweep(&shape, &faults, dir.path());
        let p = &doc["sweep"]["plan"];
        assert_eq!(
            p["cross_leaf_cap"],
            serde_json::json!({"g0": 1, "g1": 1}),
            "{p}"
        );
        assert_eq!(p["rounds_uncapped"].as_u64(), Some(7), "{p}");
        // The swapped NICs, as LLDP found them, held the rounds; a clean fabric has none.
        let held = if faults.is_empty() {
            serde_json::json!(null)
        } else {
            serde_json::json!({"g0n2 rail0": "leaf-r1-g0", "g0n2 rail1": "leaf-r0-g0"})
        };
        assert_eq!(p["held_as_built"], held, "{p}");
        // 16 pairs a rail across the spines, one a round: at least 16 rounds.
        let rounds = doc["sweep"]["rounds"].as_u64().unwrap();
        assert!(rounds >= 16, "{rounds} rounds");
        // No round loads a leaf with two pairs across the spines, counted on the leaves the
        // NICs are on (LLDP): with g0n2's cables swapped its pairs inside g0 cross too, and
        // one of its pairs crossing on both rails loads both of g0's leaves by itself.
        let lldp = lldp(&doc);
        let leaf = |e: &End| lldp[&e.0][&e.1].0.clone();
        let mut load: BTreeMap<(u64, String), BTreeSet<(End, End)>> = BTreeMap::new();
        for r in doc["results"].as_array().unwrap() {
            let (a, b) = (end(&r["pair"]["initiator"]), end(&r["pair"]["responder"]));
            let (la, lb) = (leaf(&a), leaf(&b));
            if la != lb {
                let round = r["pair"]["round"].as_u64().unwrap();
                for l in [la, lb] {
                    load.entry((round, l))
                        .or_default()
                        .insert((a.clone(), b.clone()));
                }
            }
        }
        for ((round, l), pairs) in &load {
            let hosts: BTreeSet<(&str, &str)> = pairs
                .iter()
                .map(|(a, b)| (a.0.as_str(), b.0.as_str()))
                .collect();
            assert_eq!(hosts.len(), 1, "round {round}: {l} carries {pairs:?}");
        }
        let (code, named, report) = judge(dir.path());
        if faults.is_empty() {
            assert_eq!(named, BTreeSet::new(), "{report}");
            assert_eq!(code, 0, "{report}");
        } else {
            // simfabric's --slow-dir shapes what A sends to B on every rail; the swapped
            // cables are named on LLDP, with whatever slow cells its NICs' pairs had.
            assert_eq!(
                named,
                names(&[
                    ("one_way", "g1n3 rail0 -> g0n1 rail0"),
                    ("one_way", "g1n3 rail1 -> g0n1 rail1"),
                    ("cable_swap", "g0n2 rail0 and rail1"),
                ]),
                "{report}"
            );
            assert_eq!(code, 1, "{report}");
        }
    }
}

/// (from host, to host) -> Gbit/s of that direction on rail 0, from every bidirectional
/// row's `directions`.
fn directions(doc: &Value) -> BTreeMap<(String, String), f64> {
    let mut out = BTreeMap::new();
    for r in doc["results"].as_array().unwrap() {
        if r["pair"]["initiator"]["device"] != "rail0" {
            continue;
        }
        for d in r["directions"].as_array().into_iter().flatten() {
            out.insert(
                (
                    d["from"]["host"].as_str().unwrap().to_string(),
                    d["to"]["host"].as_str().unwrap().to_string(),
                ),
                d["bw_gbit_s"]["avg"].as_f64().unwrap(),
            );
        }
    }
    out
}

/// Two groups of `nodes` nodes with one rail each, `spines` spines, 50 Mbit/s node links
/// and `uplink` for each leaf-to-spine link.
fn one_rail(nodes: u32, spines: u32, uplink: &str) -> Vec<String> {
    let (nodes, spines) = (nodes.to_string(), spines.to_string());
    [
        "--groups",
        "2",
        "--nodes-per-group",
        &nodes,
        "--rails",
        "1",
        "--spines",
        &spines,
        "--rate",
        "50mbit",
        "--uplink-rate",
        uplink,
    ]
    .map(String::from)
    .to_vec()
}

/// Runs `tool args --json DIR/NAME.json` across the simulated fabric `shape` (every node
/// one rank: one rail) and returns the document.
fn under_load(shape: &[String], tool: &str, args: &[&str], dir: &Path, name: &str) -> Value {
    let json = dir.join(format!("{name}.json"));
    let out = run(
        Command::new(script())
            .args(shape)
            .arg("--")
            .arg(bin(tool))
            .args(args)
            .arg("--json")
            .arg(&json),
        LIMIT,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// GPCNeT's method in the leaf-spine fabric, 2 groups x 4 nodes, 50 Mbit/s node links,
/// one spine, over TCP. With a 10 Mbit/s uplink (20:1) the canaries' ring (seed 1: g1n0 and
/// g0n3, across the spine) queues behind the congestors: the latency factor is in the
/// hundreds or thousands here and the bandwidth one above 4. With uplinks of twice the
/// leaf's rate the same split measures near 1 (what remains is the congestors' kernel work
/// on the two cores the fabric shares: 1.7-2.4 on the latency mean, 0.88-1.10 on bandwidth,
/// measured). One spine, because with two ECMP may hash the canaries' connections onto the
/// spine the congestors leave alone (one run in four measured 1.3 behind 20:1 uplinks); and
/// uplinks of twice the leaf, not exactly the leaf, because at 1:1 the congestors' bursts
/// queue at the uplink and the latency mean rises to 5-6 (a real effect, not this test's).
/// The seed gives both runs the same split.
#[test]
fn congestion_impact_follows_the_uplinks_oversubscription() {
    if skip() {
        return;
    }
    let _fabric = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let shape = |up| one_rail(4, 1, up);
    let args = ["--seed", "1", "--phase-seconds", "1", "--transport", "tcp"];
    let thin = under_load(
        &shape("10mbit"),
        "bench-congestion",
        &args,
        dir.path(),
        "thin",
    );
    let full = under_load(
        &shape("400mbit"),
        "bench-congestion",
        &args,
        dir.path(),
        "full",
    );
    let (thin, full) = (&thin["congestion"], &full["congestion"]);
    assert_eq!(thin["nodes"], full["nodes"], "the seed's split differs");
    assert_eq!(thin["ring"], full["ring"]);
    let ring: Vec<&str> = thin["ring"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(ring.len(), 2, "{ring:?}");
    assert_ne!(
        ring[0][..2],
        ring[1][..2],
        "the canaries' ring crosses the spines: {ring:?}"
    );
    let factor = |c: &Value, test: &str| {
        c["canary_tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["test"] == test)
            .unwrap()["impact_mean"]
            .as_f64()
            .unwrap()
    };
    let (lat_thin, bw_thin) = (
        factor(thin, "ring_latency_8b"),
        factor(thin, "ring_bandwidth_128kib"),
    );
    let (lat_full, bw_full) = (
        factor(full, "ring_latency_8b"),
        factor(full, "ring_bandwidth_128kib"),
    );
    eprintln!("impact (latency, bandwidth): 20:1 uplink {lat_thin:.3}, {bw_thin:.3}; 1:2 uplink {lat_full:.3}, {bw_full:.3}");
    assert!(lat_thin > 20.0 && bw_thin > 2.0, "{lat_thin} {bw_thin}");
    assert!(lat_full < 5.0 && bw_full < 1.4, "{lat_full} {bw_full}");
    // Loaded is not faster than isolated: factors under 1 (0.52-0.77 here) were an
    // isolated phase slowed by the idle congestors spinning in MPI and by unwarmed
    // connections.
    assert!(lat_full > 0.8 && bw_full > 0.8, "{lat_full} {bw_full}");
    assert!(lat_thin > 10.0 * lat_full, "{lat_thin} vs {lat_full}");
    // The congestors were measured while the canaries ran, and moved less through 10 Mbit/s.
    let moved = |c: &Value| -> f64 {
        c["congestor_throughput"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["gbit_s"].as_f64().unwrap())
            .sum()
    };
    assert!(
        moved(thin) > 0.0 && moved(thin) < moved(full),
        "{} {}",
        moved(thin),
        moved(full)
    );
}

/// Noisy neighbours (issue 32): tenant acme's canaries while tenant globex's nodes run the
/// congestors, each tenant on its own VLAN and VRF, judged by `aggregate report
/// --tenants` against `[isolation] neighbour_impact_max = 3` and acme's ETS share of 50 %
/// (bandwidth within 2). Sharing a 10 Mbit/s uplink (acme's g0n0 and g1n0 across the
/// spine; seed 3 puts each of globex's three congestor groups across it too), globex
/// crowds acme out: FAIL, named "globex on acme" (measured: latency x2054, bandwidth x5.0).
/// acme on one leaf (g0n0, g0n1), sharing nothing with globex but the machine's two cores,
/// keeps its share (measured: 1.03, 1.06, allreduce 0.71): the measured pair within the
/// bounds, the check MISSING because the other ordered pair (acme on globex) was not run,
/// as it says.
#[test]
fn a_noisy_neighbour_is_named_on_shared_uplinks_and_not_on_separate_leaves() {
    if skip() {
        return;
    }
    let _fabric = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.toml");
    std::fs::write(
        &profile,
        "name = \"neighbours\"\n[isolation]\nneighbour_impact_max = 3\n",
    )
    .unwrap();
    // The within-bound claim gets canary slots of 3 s, the FAIL claim 1 s: a stall of the
    // shared machine only makes a factor worse, and a slot of 1 s cannot absorb one (the
    // test command's two lanes once took most of the separate case's allreduce slot:
    // 23.6 x, 2982 us against 126 us; its ring canaries within).
    let cases = [
        ("shared", "g0n0,g1n0", "g0n1,g0n2,g0n3,g1n1,g1n2,g1n3", "1"),
        (
            "separate",
            "g0n0,g0n1",
            "g0n2,g0n3,g1n0,g1n1,g1n2,g1n3",
            "3",
        ),
    ];
    for (name, acme, globex, phase) in cases {
        let tenants = dir.path().join(format!("{name}.toml"));
        let list = |nodes: &str| {
            nodes
                .split(',')
                .map(|n| format!("\"{n}\""))
                .collect::<Vec<_>>()
                .join(", ")
        };
        std::fs::write(
            &tenants,
            format!(
                "version = 1\n[[tenant]]\nname = \"acme\"\nnodes = [{}]\nvlan = 101\nets_share_percent = 50\n[[tenant]]\nname = \"globex\"\nnodes = [{}]\nvlan = 102\n",
                list(acme),
                list(globex)
            ),
        )
        .unwrap();
        let mut shape = one_rail(4, 1, "10mbit");
        shape.extend([
            "--tenant".to_string(),
            format!("acme:101:{acme}"),
            "--tenant".to_string(),
            format!("globex:102:{globex}"),
        ]);
        let tenants_arg = tenants.to_str().unwrap();
        let doc = under_load(
            &shape,
            "bench-congestion",
            &[
                "--seed",
                "3",
                "--phase-seconds",
                phase,
                "--transport",
                "tcp",
                "--tenants",
                tenants_arg,
                "--canary-tenant",
                "acme",
                "--congestor-tenant",
                "globex",
            ],
            dir.path(),
            name,
        );
        let c = &doc["congestion"];
        assert_eq!(c["canary_tenant"], "acme");
        assert_eq!(c["congestor_tenant"], "globex");
        let mut canaries: Vec<&str> = c["canaries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        canaries.sort();
        assert_eq!(canaries.join(","), acme, "{c}");
        let out = dir.path().join(format!("{name}-report"));
        let o = run(
            Command::new(bin("aggregate"))
                .arg("report")
                .arg(dir.path().join(format!("{name}.json")))
                .arg("--tenants")
                .arg(&tenants)
                .arg("--profile")
                .arg(&profile)
                .arg("-o")
                .arg(&out),
            Duration::from_secs(120),
        );
        let (stdout, stderr) = text(&o);
        let summary: Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("summary.json"))
                .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}")),
        )
        .unwrap();
        let check = summary["verdict"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "isolation-neighbour-impact")
            .unwrap_or_else(|| panic!("{stdout}"))
            .clone();
        let worst = check["measured"].as_f64().unwrap();
        let at = check["worst_at"].as_str().unwrap();
        eprintln!("{name}: worst impact {worst:.3}; {at}");
        if name == "shared" {
            assert_eq!(check["status"], "FAIL", "{check}");
            assert!(at.starts_with("globex on acme: ring_latency_8b"), "{check}");
            assert!(at.contains("the ETS share's 2"), "{check}");
            assert_eq!(o.status.code(), Some(1), "{stdout}");
        } else {
            assert_eq!(check["status"], "MISSING", "{check}");
            assert!(worst <= 2.0, "{check}");
            assert!(at.contains("not measured: acme on globex"), "{check}");
        }
    }
}

/// An incast across one 10 Mbit/s spine (2 groups of 3 nodes, 50 Mbit/s node links, one
/// spine so every flow across shares it): the rounds whose two senders and victim all
/// cross (receiver g0n2 from g1n0 and g1n1 with victim g1n2 -> g0n0, and the mirror round)
/// slow the victim; the rounds with one sender across give that sender the uplink's share
/// (Jain's index shows it). With uplinks that carry the whole leaf, no round is unfair and
/// no victim slows.
#[test]
fn an_incast_shares_an_oversubscribed_spine_with_its_victim() {
    if skip() {
        return;
    }
    let _fabric = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let shape = |up| one_rail(3, 1, up);
    let args = ["--pattern", "incast:2", "--transport", "tcp", "-D", "1"];
    for (up, thin) in [("10mbit", true), ("150mbit", false)] {
        let doc = under_load(&shape(up), "bench-bw", &args, dir.path(), up);
        let mut shared = 0;
        let inc = &doc["congestion"]["incast"];
        let rounds = inc["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 6);
        for (r, round) in rounds.iter().enumerate() {
            let group = |name: &str| name[1..2].to_string();
            let senders: Vec<String> = round["senders"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect();
            let recv = round["receiver"].as_str().unwrap();
            let across = senders.iter().filter(|s| group(s) != group(recv)).count();
            let v = &round["victim"];
            let (vs, vr) = (
                v["sender"].as_str().unwrap(),
                v["receiver"].as_str().unwrap(),
            );
            let x = v["bandwidth_impact"].as_f64().unwrap();
            let jain = round["jain_fairness"].as_f64().unwrap();
            let shares = across == 2 && group(vs) == group(&senders[0]) && group(vr) == group(recv);
            if shares && thin {
                shared += 1;
            }
            eprintln!("{up} round {r}: {recv} <- {senders:?} ({across} across), jain {jain:.3}, victim {vs} -> {vr} x{x:.3}");
            match (thin, across) {
                (true, 1) => assert!(jain < 0.85, "round {r}: {round}"),
                (true, _) if shares => {
                    assert!(x > 1.5, "round {r}: the victim shares the spine: {v}")
                }
                (false, _) => {
                    assert!(jain > 0.85, "round {r}: {round}");
                    assert!(x < 1.3, "round {r}: {v}");
                }
                _ => {}
            }
        }
        // Rounds 2 and 5 put both senders and the victim across, the one way and the other.
        assert_eq!(shared, if thin { 2 } else { 0 }, "{inc}");
    }
}

/// How the runner reaches the simulated fabric's nodes.
#[derive(Clone, Copy)]
enum Launch {
    /// mpirun with the fabric's host file (one slot a rail) and rsh agent.
    Mpirun,
    /// srun inside an allocation of a private Slurm cluster whose nodes are the fabric's
    /// (simfabric.sh --slurm: a slurmd in each node's namespace).
    Srun,
    /// The tools' own coordinators over a `bench-bw --serve` and a `bench-lat --serve`
    /// agent per rail of every node (simfabric.sh --agents: data on the rail, control on
    /// the management network), no MPI.
    Agents,
}

/// `fabcheck accept` as the driver of a whole simulated fabric (simfabric.sh --driver):
/// its own mpirun jobs or srun steps reach every node's namespace, each tool through the
/// rank wrapper. Returns the exit code and everything it printed.
fn accept_over_the_fabric(
    launch: Launch,
    faults: &[&str],
    dir: &Path,
    extra: &str,
) -> (i32, String) {
    let line = accept_line(launch, dir, extra);
    drive(launch, faults, &dir.join("plan.toml"), &line)
}

/// The runner's command line for `launch`, its plan and output in `dir`.
fn accept_line(launch: Launch, dir: &Path, extra: &str) -> String {
    let (profile, hosts) = match launch {
        Launch::Mpirun => (
            accept_profile(),
            "--hosts \"$FABCHECK_SIM_HOSTFILE\" --nics-per-node 2 --wrap \"$FABCHECK_SIM_WRAP\"",
        ),
        Launch::Srun => (
            accept_profile(),
            "--nics-per-node 2 --wrap \"$FABCHECK_SIM_WRAP\"",
        ),
        Launch::Agents => (
            agents_profile(dir),
            "--agents \"$FABCHECK_SIM_BW_AGENTS\" --lat-agents \"$FABCHECK_SIM_LAT_AGENTS\"",
        ),
    };
    format!(
        "{} accept --profile {} {hosts} --plan {} --out {} {extra}",
        bin("fabcheck").display(),
        profile.display(),
        dir.join("plan.toml").display(),
        dir.join("run").display()
    )
}

/// The profile the runner is judged by on the simulated fabric.
fn accept_profile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fabric/simfabric-accept.toml")
}

/// simfabric-accept's checks that agents can feed (written into `dir`): all but the
/// AllReduce, which needs MPI (over agents it is not run, so it would stay MISSING).
fn agents_profile(dir: &Path) -> PathBuf {
    let profile = dir.join("agents.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"simfabric-agents\"\n\
             description = \"simfabric-accept without its AllReduce\"\n\
             extends = {:?}\n\
             keep = [\"send-lat-*\", \"send-bw-*\", \"sweep-*\", \"cabling-*\"]\n",
            accept_profile().display().to_string()
        ),
    )
    .unwrap();
    profile
}

/// Brings the two-group fabric up with `faults` (its plan written to `plan`) and runs the
/// shell `line` once as its driver. Returns the exit code and everything it printed.
fn drive(launch: Launch, faults: &[&str], plan: &Path, line: &str) -> (i32, String) {
    let mut cmd = Command::new(script());
    // The two-group shape at the default 1 Gb/s (the profile's bounds are for it).
    cmd.args(&TWO_GROUPS[..8])
        .args(faults)
        .arg("--plan-out")
        .arg(plan)
        .arg("--driver");
    match launch {
        Launch::Mpirun => {}
        Launch::Srun => {
            cmd.arg("--slurm");
        }
        Launch::Agents => {
            cmd.arg("--agents").arg(bin("bench-bw").parent().unwrap());
        }
    }
    let out = run(cmd.args(["--", "sh", "-c", line]), LIMIT);
    let (o, e) = text(&out);
    (out.status.code().unwrap_or(-1), format!("{o}{e}"))
}

/// The suspects a runner's log names (the part before the colon of each SUSPECT line).
fn suspects_named(log: &str) -> BTreeSet<String> {
    log.lines()
        .filter_map(|l| l.strip_prefix("SUSPECT  "))
        .map(|l| l.split(':').next().unwrap().to_string())
        .collect()
}

#[test]
fn the_runner_passes_the_healthy_fabric_and_names_exactly_the_faults_of_a_faulty_one() {
    if skip() {
        return;
    }
    let _fabric = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let healthy = dir.path().join("healthy");
    std::fs::create_dir_all(&healthy).unwrap();
    let (code, log) = accept_over_the_fabric(Launch::Mpirun, &[], &healthy, "");
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("verdict: PASS (8 passed, 0 failed, 0 missing"),
        "{log}"
    );
    assert!(!log.contains("SUSPECT"), "{log}");

    // A one-way fault (what g1n2 sends to g0n3, on both rails), g0n1's two cables swapped
    // and a slow uplink of rail 1 (leaf-r1-g1 to spine0, issue 35's three faults): the
    // each-pair bound fails on the slow direction, the cabling check on the swap, and the
    // suspects are exactly those: the uplink as the spines of rail 1 (with two groups every
    // cross-group pair of the rail touches both leaves: the suspect's text says either
    // leaf's uplink looks the same), which explains the one-way's rail-1 cell too (it
    // crosses the slow block), the one-way on rail 0, and the swap, which explains the
    // links its NICs carry through the other rail's leaf. The one-way pair is measured
    // again by the retest stage (a cable swap is discovery's fact: no measurement retests
    // it), and the report over both runs names all three again: confirmed.
    three_faults_named_and_retested(
        Launch::Mpirun,
        dir.path(),
        ["g1n2>g0n3", "g0n1:0,1", "leaf-r1-g1:spine0"],
        "--stages links",
        [
            "spine_layer spines of rail1",
            "one_way g1n2 rail0 -> g0n3 rail0",
            "cable_swap g0n1 rail0 and rail1",
        ],
    );
}

/// The same procedure as a Slurm cluster's job: the runner inside an allocation of every
/// node, its runs srun steps across the nodes' slurmds (PMIx, as Debian's Slurm and Open
/// MPI launch them), other faults in other places. Healthy: every check passes, the
/// AllReduce included (MPI across eight slurmds). Faulty: exactly the faults, retested.
#[test]
fn the_runner_under_srun_in_a_slurm_cluster_of_the_fabrics_nodes() {
    if skip() {
        return;
    }
    for t in ["slurmctld", "slurmd", "munged"] {
        if which(t).is_none() {
            panic!("{t} not found: the test command installs slurm-wlm and munge (scripts/lib/deps.sh)");
        }
    }
    let _fabric = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let healthy = dir.path().join("healthy");
    std::fs::create_dir_all(&healthy).unwrap();
    let (code, log) = accept_over_the_fabric(Launch::Srun, &[], &healthy, "");
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("under srun"), "{log}");
    assert!(
        log.contains("[collectives 1/1] srun --nodes=8 --ntasks-per-node=2"),
        "{log}"
    );
    assert!(
        log.contains("verdict: PASS (8 passed, 0 failed, 0 missing"),
        "{log}"
    );

    // Issue 35's three faults in other places: the slow uplink on rail 0 (leaf-r0-g0 to
    // spine1) takes in the one-way's rail-0 cell, which crosses the slow block.
    three_faults_named_and_retested(
        Launch::Srun,
        dir.path(),
        ["g0n1>g1n2", "g1n0:0,1", "leaf-r0-g0:spine1"],
        "--stages links",
        [
            "spine_layer spines of rail0",
            "one_way g0n1 rail1 -> g1n2 rail1",
            "cable_swap g1n0 rail0 and rail1",
        ],
    );
}

/// The same procedure over agents, before MPI or a scheduler exists: a `bench-bw` and a
/// `bench-lat` agent per rail of every node (data bound to the rail, control on the
/// management network the runner's coordinators reach them on), the checks agents can feed.
/// Healthy: every one passes. Faulty (issue 35's three faults in a third placement): exactly
/// those, retested. Before the agents named their rail over TCP (`rail0`, as an MPI rank
/// does), their rows had no NIC and this fabric's slow rail-1 uplink was named on rail 0,
/// the one-way not at all.
#[test]
fn the_runner_over_agents_on_the_fabrics_nodes() {
    if skip() {
        return;
    }
    let _fabric = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let healthy = dir.path().join("healthy");
    std::fs::create_dir_all(&healthy).unwrap();
    // Healthy, on one bring-up: the whole run, then the same run killed once its first
    // link sweep is done (SIGTERM to the runner) and resumed: the same verdict.
    let again = dir.path().join("again");
    std::fs::create_dir_all(&again).unwrap();
    let line = format!(
        "cp {plan} {again_plan}; {first}; {run} > {log} 2>&1 & p=$!; i=0; \
         until grep -q '\"status\": \"done\"' {state} 2>/dev/null || [ $i -ge 600 ]; do \
         sleep 0.2; i=$((i + 1)); done; kill -TERM $p; wait $p; echo \"stopped: exit $?\"; \
         {run} --resume",
        plan = healthy.join("plan.toml").display(),
        again_plan = again.join("plan.toml").display(),
        first = accept_line(Launch::Agents, &healthy, ""),
        run = accept_line(Launch::Agents, &again, ""),
        log = again.join("stopped.log").display(),
        state = again.join("run/accept.json").display(),
    );
    let (code, log) = drive(Launch::Agents, &[], &healthy.join("plan.toml"), &line);
    let stopped = std::fs::read_to_string(again.join("stopped.log")).unwrap_or_default();
    assert_eq!(code, 0, "{log}\nthe stopped run:\n{stopped}");
    assert!(log.contains("over agents, 2 NIC(s) a node"), "{log}");
    assert_eq!(
        log.matches("verdict: PASS (7 passed, 0 failed, 0 missing")
            .count(),
        2,
        "{log}"
    );
    assert!(!log.contains("SUSPECT"), "{log}");
    assert!(log.contains("stopped: exit 130"), "{log}\n{stopped}");
    assert!(log.contains("resuming: 1 step(s) kept"), "{log}");

    three_faults_named_and_retested(
        Launch::Agents,
        dir.path(),
        ["g0n2>g1n1", "g1n3:0,1", "leaf-r1-g0:spine1"],
        "",
        [
            "spine_layer spines of rail1",
            "one_way g0n2 rail0 -> g1n1 rail0",
            "cable_swap g1n3 rail0 and rail1",
        ],
    );
}

/// Issue 35's three faults (`[slow direction A>B, cables swapped NODE:0,1, slow uplink
/// LEAF:SPINE]`) on the fabric, the runner launched by `launch` in `dir/faulty`: it fails
/// the each-pair bound and the cabling, names exactly `want`, retests the one-way pair
/// (a swap is discovery's fact: no measurement retests it) next to known-good nodes, and
/// the report over both runs names all three again: confirmed.
fn three_faults_named_and_retested(
    launch: Launch,
    dir: &Path,
    [slow, swap, uplink]: [&str; 3],
    extra: &str,
    want: [&str; 3],
) {
    let faulty = dir.join("faulty");
    std::fs::create_dir_all(&faulty).unwrap();
    let faults = [
        "--slow-dir",
        slow,
        "--swap-cables",
        swap,
        "--slow-uplink",
        uplink,
    ];
    let (code, log) = accept_over_the_fabric(launch, &faults, &faulty, extra);
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("FAIL     send-bw-each-pair"), "{log}");
    assert!(log.contains("FAIL     cabling-swapped"), "{log}");
    let want: BTreeSet<String> = want.map(String::from).into();
    assert_eq!(suspects_named(&log), want, "{log}");
    assert!(
        log.contains("[retest] the suspects next to known-good nodes:")
            && log.contains("--pattern file:"),
        "{log}"
    );
    let pairs = std::fs::read_to_string(faulty.join("run/links-report/suspects.pairs")).unwrap();
    let pairs: Vec<&str> = pairs.lines().filter(|l| !l.starts_with('#')).collect();
    let (a, b) = slow.split_once('>').unwrap();
    assert_eq!(pairs, [format!("{a} {b}")], "{log}");
    assert!(
        log.contains("[retest] 3 of 3 suspect(s) confirmed next to known-good nodes"),
        "{log}"
    );
}

/// `fabcheck triage` on the simulated fabric: a good night of the whole fabric (its links),
/// then a job's four nodes (two in each group) triaged beside it. On the same healthy
/// fabric the network matches its baseline; with one of the job's links slowed in one
/// direction the network is at fault, and that direction on both rails is all it names.
/// The triage runs the profile's bandwidth, matrix and cabling checks only, and its
/// comparison with the night is held to a thousand percent: on two shared cores a latency
/// tail swings more than tenfold between runs minutes apart (CI, busy: the clean triage
/// named "send_lat tcp 32 B latency p99" regressed past 100%, and on 2026-12-07 "send_lat
/// tcp 8 B latency p99" past 1000%), so here the job's own links (the matrix: the same
/// nodes measured at once) carry the answer.
#[test]
fn triage_names_a_slowed_link_of_the_jobs_nodes_and_nothing_on_a_clean_fabric() {
    if skip() {
        return;
    }
    let _fabric = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = d.join("plan.toml");
    let profile = d.join("triage.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"simfabric-triage\"\n\
             description = \"simfabric-accept without its latency check\"\n\
             extends = {:?}\n\
             keep = [\"send-bw-*\", \"sweep-*\", \"cabling-*\"]\n",
            accept_profile().display().to_string()
        ),
    )
    .unwrap();
    let triage = |out: &str| {
        format!(
            "{} triage --profile {} --hosts {} --nics-per-node 2 --wrap \"$FABCHECK_SIM_WRAP\" \
             --plan {} --baseline {} --out {} --tolerance 1000",
            bin("fabcheck").display(),
            profile.display(),
            d.join("job.hosts").display(),
            plan.display(),
            d.join("night").display(),
            d.join(out).display()
        )
    };
    // The night and the clean triage on one healthy fabric; the job's host file is the
    // fabric's own lines for its nodes.
    let line = format!(
        "grep -E '^(g0n0|g0n2|g1n1|g1n3) ' \"$FABCHECK_SIM_HOSTFILE\" > {jobs}; \
         {fabcheck} accept --profile {profile} --hosts \"$FABCHECK_SIM_HOSTFILE\" \
         --nics-per-node 2 --wrap \"$FABCHECK_SIM_WRAP\" --plan {plan} --out {night} \
         --stages links --no-retest > {night_log} 2>&1; {triage}",
        jobs = d.join("job.hosts").display(),
        fabcheck = bin("fabcheck").display(),
        profile = accept_profile().display(),
        plan = plan.display(),
        night = d.join("night").display(),
        night_log = d.join("night.log").display(),
        triage = triage("clean"),
    );
    let (code, log) = drive(Launch::Mpirun, &[], &plan, &line);
    let night = std::fs::read_to_string(d.join("night.log")).unwrap_or_default();
    assert!(
        d.join("night/results/01-links-bench-bw.json").is_file(),
        "{night}"
    );
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("on 4 node(s)"), "{log}");
    assert!(
        log.contains("triage: the network matches its baseline"),
        "{log}"
    );

    let (code, log) = drive(
        Launch::Mpirun,
        &["--slow-dir", "g1n3>g0n2"],
        &plan,
        &triage("slow"),
    );
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("triage: the network is at fault:"), "{log}");
    let named: BTreeSet<String> = log
        .lines()
        .filter_map(|l| l.strip_prefix("  - "))
        .map(|l| l.split(':').next().unwrap().to_string())
        .collect();
    let want: BTreeSet<String> = [
        "one_way g1n3 rail0 -> g0n2 rail0",
        "one_way g1n3 rail1 -> g0n2 rail1",
    ]
    .map(String::from)
    .into();
    assert_eq!(named, want, "{log}");
}

/// Where a program is on PATH, if it is.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

#[test]
fn bad_command_lines_are_usage_errors() {
    for (args, needle) in [
        (&["--groups", "2", "--", "true"][..], "--nodes-per-group"),
        (
            &[
                "--groups",
                "1",
                "--nodes-per-group",
                "2",
                "--rails",
                "1",
                "--spines",
                "1",
                "--swap-cables",
                "g5n0:0,1",
                "--",
                "true",
            ][..],
            "not one of g0n0",
        ),
        (
            &[
                "--groups",
                "1",
                "--nodes-per-group",
                "2",
                "--rails",
                "1",
                "--spines",
                "1",
                "--rate",
                "fast",
                "--",
                "true",
            ][..],
            "not a tc rate",
        ),
        (
            &[
                "--groups",
                "1",
                "--nodes-per-group",
                "1",
                "--rails",
                "1",
                "--spines",
                "1",
                "--",
                "true",
            ][..],
            "at least 2 nodes",
        ),
    ] {
        let out = run(Command::new(script()).args(args), Duration::from_secs(30));
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
