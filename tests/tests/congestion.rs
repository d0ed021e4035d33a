//! bench-congestion under mpirun on loopback (8 ranks, every rank a node): the seed
//! repeats the split, another seed changes it, the roles and node lists are in the JSON,
//! and the impact factors are finite and are the ratios of the recorded figures.
//!
//! No assertion depends on speed: the deadline only turns a hang into a failure.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::time::Duration;

use integration::{bin, mpirun, run, text};
use results::congestion::CongestionRun;
use results::Document;

const LIMIT: Duration = Duration::from_secs(300);

fn congestion(seed: u64, dir: &std::path::Path) -> CongestionRun {
    let (doc, _) = on_loopback(8, &["--seed", &seed.to_string()], dir, &format!("c{seed}"));
    doc.congestion.expect("a congestion block")
}

/// bench-congestion under `mpirun -np NP` on loopback (every rank a node, 0.3 s phases),
/// `args` added; the document (DIR/NAME.json, checked to be bench-congestion's) and the
/// standard output.
fn on_loopback(np: u32, args: &[&str], dir: &std::path::Path, name: &str) -> (Document, String) {
    let json = dir.join(format!("{name}.json"));
    let out = run(
        mpirun(np)
            .arg(bin("bench-congestion"))
            .args([
                "--include-local",
                "--bind-addr",
                "127.0.0.1",
                "--phase-seconds",
                "0.3",
            ])
            .args(args)
            .arg("--json")
            .arg(&json),
        LIMIT,
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("impact avg"), "{stdout}");
    let doc: Document = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc.tool, "bench-congestion");
    (doc, stdout)
}

fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

fn roles(c: &CongestionRun) -> Vec<(String, String, Option<u32>)> {
    c.nodes
        .iter()
        .map(|n| (n.node.clone(), n.role.clone(), n.group))
        .collect()
}

#[test]
fn the_seed_repeats_the_split_and_the_factors_are_the_recorded_ratios() {
    let dir = tempfile::tempdir().unwrap();
    let a = congestion(11, dir.path());
    let b = congestion(11, dir.path());
    assert_eq!(roles(&a), roles(&b));
    assert_eq!(a.ring, b.ring);
    assert_eq!(a.congestor_groups, b.congestor_groups);
    // 8 nodes, 20 %: 2 canaries, 6 congestors in 3 groups; every node once.
    assert_eq!(a.nodes.len(), 8);
    assert_eq!(a.canaries.len(), 2);
    let canaries: Vec<_> = a.nodes.iter().filter(|n| n.role == "canary").collect();
    assert_eq!(canaries.len(), 2);
    for n in &a.nodes {
        let in_group = a.congestor_groups.iter().any(|g| g.nodes.contains(&n.node));
        assert_eq!(n.role == "congestor", in_group, "{n:?}");
        assert_eq!(n.role == "canary", a.canaries.contains(&n.node), "{n:?}");
    }
    // Some seed among a few gives another split of the 8 nodes (of 28 canary pairs).
    let other = (12..16).any(|s| roles(&congestion(s, dir.path())) != roles(&a));
    assert!(other, "every seed gave the same split");

    for t in &a.canary_tests {
        assert!(t.isolated.samples > 0 && t.loaded.samples > 0, "{t:?}");
        for f in [t.impact_mean, t.impact_p99, t.isolated.mean, t.loaded.mean] {
            assert!(f.is_finite() && f > 0.0, "{t:?}");
        }
        let (m, p) = if t.unit == "gbit_s" {
            assert!(t.impact_p999.is_none(), "{t:?}");
            (
                t.isolated.mean / t.loaded.mean,
                t.isolated.p99 / t.loaded.p99,
            )
        } else {
            assert!(t.isolated.p999.unwrap() >= t.isolated.p99, "{t:?}");
            let p999 = t.loaded.p999.unwrap() / t.isolated.p999.unwrap();
            assert!(same(t.impact_p999.unwrap(), p999), "{t:?}");
            (
                t.loaded.mean / t.isolated.mean,
                t.loaded.p99 / t.isolated.p99,
            )
        };
        // Equal up to JSON's last-digit rounding (serde_json parses to within an ulp).
        assert!(same(t.impact_mean, m), "{} vs {m}: {t:?}", t.impact_mean);
        assert!(same(t.impact_p99, p), "{} vs {p}: {t:?}", t.impact_p99);
        // The figures are those of the histograms carried beside them.
        let h = results::LatencyHistogram::decode(&t.loaded.histogram).unwrap();
        assert_eq!(h.len(), t.loaded.samples);
    }
    assert_eq!(a.congestor_throughput.len(), a.congestor_groups.len());
    assert!(a
        .congestor_throughput
        .iter()
        .all(|c| c.bytes > 0 && c.gbit_s > 0.0));

    // aggregate judges the run against roce-100g's [load]: the worst mean factor is the
    // one it reports, and the one-machine rehearsal (--include-local) is warned. The file
    // holds the second run of seed 11 (`b`).
    let out_dir = dir.path().join("report");
    let r = run(
        std::process::Command::new(bin("aggregate"))
            .args(["report", "--profile", "roce-100g", "--out"])
            .arg(&out_dir)
            .arg(dir.path().join("c11.json")),
        LIMIT,
    );
    assert!(matches!(r.status.code(), Some(0 | 1)), "{:?}", text(&r));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    let c = summary["verdict"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "load-impact-mean")
        .expect("the [load] checks of roce-100g")
        .clone();
    let worst = b
        .canary_tests
        .iter()
        .map(|t| t.impact_mean)
        .fold(0.0, f64::max);
    assert!(
        same(c["measured"].as_f64().unwrap(), worst),
        "{c} vs {worst}"
    );
    assert_eq!(
        c["status"],
        if worst <= 1.5 { "PASS" } else { "FAIL" },
        "{c}"
    );
    assert!(
        c["warning"].as_str().unwrap().contains("--include-local"),
        "{c}"
    );
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("### Congestion impact: seed 11"), "{md}");
    assert_eq!(md.matches("| ring_latency_8b | us |").count(), 1, "{md}");
}

/// Runs `tool args --json FILE` in the simulated cluster (`cluster` its options); the
/// document and the standard output, or `None` (said) where the cluster cannot run.
fn in_simcluster(
    dir: &std::path::Path,
    cluster: &[&str],
    tool: &str,
    args: &[&str],
) -> Option<(Document, String, std::path::PathBuf)> {
    if !integration::is_root() {
        eprintln!("SKIPPED: the simulated cluster needs root (ip netns, unshare --uts)");
        return None;
    }
    let json = dir.join(format!("{tool}.json"));
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster/simcluster.sh");
    let out = run(
        std::process::Command::new(script)
            .args(cluster)
            .arg("--")
            .arg(bin(tool))
            .args(args)
            .arg("--json")
            .arg(&json),
        LIMIT,
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let doc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    Some((doc, stdout, json))
}

/// The simulated cluster with every node its own leaf and one small spine class that all
/// traffic shares: the canaries' isolated ring bandwidth stays under the spine's rate (the
/// shaping bounds it), and the congestors' bytes queued in the same class raise the
/// canaries' ring latency (factor above 1.2; it is in the hundreds here). The contrast
/// with a large spine is not asserted: on a 2-core machine the congestors' CPU load alone
/// raises the factors when the spine does not throttle them (docs/congestion.md).
#[test]
fn a_small_shared_spine_raises_the_canaries_latency() {
    let dir = tempfile::tempdir().unwrap();
    let Some((doc, _, _)) = in_simcluster(
        dir.path(),
        &["--nodes", "8", "--groups", "8", "--cross-rate", "20mbit"],
        "bench-congestion",
        &["--seed", "5", "--phase-seconds", "1"],
    ) else {
        return;
    };
    let c = doc.congestion.unwrap();
    // Hosts, not ranks: the simulated nodes have names of their own.
    assert!(
        c.nodes.iter().all(|n| n.node.starts_with("sim-node")),
        "{:?}",
        c.nodes
    );
    let test = |name: &str| c.canary_tests.iter().find(|t| t.test == name).unwrap();
    let bw = test("ring_bandwidth_128kib");
    assert!(
        bw.isolated.mean < 0.020,
        "ring bandwidth above the 20 Mbit/s spine: {bw:?}"
    );
    let lat = test("ring_latency_8b");
    assert!(
        lat.impact_mean > 1.2,
        "no latency impact behind a 20 Mbit/s spine: {lat:?}"
    );
}

/// `bench-bw --pattern incast` in the simulated cluster with node 1 limited to 50 Mbit/s
/// in and out (the others 1 Gbit/s): as a receiver its aggregate is under 0.1 Gbit/s; as
/// a sender it is the slowest of its round, and the round's Jain index (recomputed from
/// the per-sender figures in the JSON) shows the unfairness. (`bench-congestion --mode
/// incast` runs the same rounds: the victim test below.)
#[test]
fn incast_fairness_and_aggregate_follow_the_shaping() {
    let dir = tempfile::tempdir().unwrap();
    let Some((doc, _, _)) = in_simcluster(
        dir.path(),
        &["--nodes", "4", "--slow-node", "1:50mbit"],
        "bench-bw",
        &["--pattern", "incast", "--transport", "tcp", "-D", "1"],
    ) else {
        return;
    };
    assert_eq!(doc.tool, "bench-bw");
    assert_eq!(doc.options["pattern"], "incast");
    let inc = doc.congestion.unwrap().incast.expect("incast rounds");
    assert_eq!(inc.senders_per_round, 3);
    assert_eq!(inc.rounds.len(), 4);
    // 3 senders and a receiver leave no two nodes of 4 for a victim flow: said, not faked.
    assert!(
        inc.no_victim
            .as_deref()
            .is_some_and(|w| w.contains("no victim")),
        "{inc:?}"
    );
    assert!(inc.rounds.iter().all(|r| r.victim.is_none()), "{inc:?}");
    assert!(
        doc.warnings.iter().any(|w| w.contains("no victim")),
        "{:?}",
        doc.warnings
    );
    let slow_sends = inc
        .rounds
        .iter()
        .filter(|r| r.senders.iter().any(|s| s.starts_with("sim-node1#")))
        .count();
    assert_eq!(
        slow_sends, 3,
        "node 1 sends in every round but its own: {inc:?}"
    );
    for r in &inc.rounds {
        assert_eq!(r.senders.len(), 3, "{r:?}");
        assert!(!r.senders.contains(&r.receiver), "{r:?}");
        assert!(
            same(r.jain_fairness, results::congestion::jain(&r.sender_gbit_s)),
            "{r:?}"
        );
        assert!(
            same(r.aggregate_gbit_s, r.sender_gbit_s.iter().sum()),
            "{r:?}"
        );
        if r.receiver.starts_with("sim-node1#") {
            assert!(r.aggregate_gbit_s < 0.1, "slow receiver: {r:?}");
            continue;
        }
        let slow = r.senders.iter().position(|s| s.starts_with("sim-node1#"));
        if let Some(i) = slow {
            let min = r.sender_gbit_s.iter().cloned().fold(f64::MAX, f64::min);
            assert_eq!(r.sender_gbit_s[i], min, "{r:?}");
            assert!(r.sender_gbit_s[i] < 0.1, "{r:?}");
            assert!(r.jain_fairness < 0.9, "{r:?}");
        }
    }
}

/// The node index of `sim-node<k>#<rank>`.
fn node_of(name: &str) -> u32 {
    name.strip_prefix("sim-node")
        .and_then(|s| s.split('#').next())
        .and_then(|k| k.parse().ok())
        .unwrap_or_else(|| panic!("not a simulated node name: {name}"))
}

/// Incast with a victim in the simulated cluster split into two leaves (nodes 0-2 and
/// 3-5) whose cross traffic shares one 50 Mbit/s class (an oversubscribed spine), links
/// inside a leaf at 1 Gbit/s. With `incast:2` round r has receiver r, senders r+1, r+2
/// and the victim r+3 -> r+4 (mod 6), so the rounds differ only in what they share:
/// - rounds 2 and 5: both senders and the victim cross the spine: the victim loses
///   bandwidth and its latency tail grows, and the whole round stays under the class;
/// - rounds 1 and 4: one sender crosses, one does not: the crossing one is the slowest
///   and the fairness index shows it;
/// - rounds 0 and 3: nothing shared with the victim: its impact stays below the
///   crossing rounds'.
#[test]
fn incast_victim_shows_sharing_only_where_the_spine_is_shared() {
    let dir = tempfile::tempdir().unwrap();
    let Some((doc, stdout, json)) = in_simcluster(
        dir.path(),
        &["--nodes", "6", "--groups", "2", "--cross-rate", "50mbit"],
        "bench-congestion",
        &["--mode", "incast:2", "--phase-seconds", "1"],
    ) else {
        return;
    };
    assert!(stdout.contains("victim"), "{stdout}");
    let inc = doc.congestion.unwrap().incast.expect("incast rounds");
    assert_eq!(inc.senders_per_round, 2);
    assert_eq!(inc.rounds.len(), 6);
    assert!(inc.no_victim.is_none(), "{inc:?}");
    let leaf = |name: &str| node_of(name) / 3;
    let mut impact = Vec::new();
    for (r, round) in inc.rounds.iter().enumerate() {
        let r = r as u32;
        assert_eq!(node_of(&round.receiver), r, "{round:?}");
        let senders: Vec<u32> = round.senders.iter().map(|s| node_of(s)).collect();
        assert_eq!(senders, vec![(r + 1) % 6, (r + 2) % 6], "{round:?}");
        let v = round.victim.as_ref().expect("a victim flow in every round");
        assert_eq!(
            (node_of(&v.sender), node_of(&v.receiver)),
            ((r + 3) % 6, (r + 4) % 6),
            "{v:?}"
        );
        for f in [&v.alone, &v.loaded] {
            assert!(f.latency.samples > 0 && f.bandwidth.samples > 0, "{v:?}");
            assert!(f.latency.p50.is_some() && f.latency.p999.is_some(), "{v:?}");
        }
        assert!(
            same(
                v.bandwidth_impact,
                v.alone.bandwidth.mean / v.loaded.bandwidth.mean
            ),
            "{v:?}"
        );
        assert!(
            same(
                v.latency_impact_p99,
                v.loaded.latency.p99 / v.alone.latency.p99
            ),
            "{v:?}"
        );
        let crossing = senders
            .iter()
            .filter(|&&s| leaf(&format!("sim-node{s}")) != r / 3);
        let victim_crosses = leaf(&v.sender) != leaf(&v.receiver);
        match crossing.count() {
            2 => {
                assert!(victim_crosses, "{round:?}");
                assert!(v.bandwidth_impact > 1.5, "victim shares the spine: {v:?}");
                assert!(v.latency_impact_p99 > 2.0, "victim shares the spine: {v:?}");
                assert!(round.aggregate_gbit_s < 0.1, "{round:?}");
            }
            1 => {
                let far = senders.iter().position(|&s| s / 3 != r / 3).unwrap();
                let near = 1 - far;
                assert!(round.sender_gbit_s[far] < 0.1, "{round:?}");
                assert!(
                    round.sender_gbit_s[far] < round.sender_gbit_s[near],
                    "{round:?}"
                );
                assert!(round.jain_fairness < 0.8, "{round:?}");
            }
            _ => assert!(!victim_crosses, "{round:?}"),
        }
        impact.push((victim_crosses, v.bandwidth_impact));
    }
    let shared = impact
        .iter()
        .filter(|x| x.0)
        .map(|x| x.1)
        .fold(f64::MAX, f64::min);
    let apart = impact
        .iter()
        .filter(|x| !x.0)
        .map(|x| x.1)
        .fold(0.0, f64::max);
    assert!(
        apart < shared,
        "a victim that shares nothing suffered as much as one behind the spine: {impact:?}"
    );
    judged_by_aggregate(dir.path(), &json, shared);
}

/// The same document judged by `aggregate report`: roce-100g's `[load]` fails the victim
/// behind the spine and the unfair rounds, naming them; the same figures under loose
/// bounds pass, so the verdict follows the bound, not the presence of a run. The report
/// shows the incast table.
fn judged_by_aggregate(dir: &std::path::Path, json: &std::path::Path, worst_victim: f64) {
    let report = |profile: &str, out: &str| -> serde_json::Value {
        let out = dir.join(out);
        let r = run(
            std::process::Command::new(bin("aggregate"))
                .args(["report", "--profile", profile, "--out"])
                .arg(&out)
                .arg(json),
            LIMIT,
        );
        // A failed verdict exits 1; anything else is an error.
        assert!(matches!(r.status.code(), Some(0 | 1)), "{:?}", text(&r));
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("## Under load"), "{md}");
        assert!(md.contains("### Incast: 2 sender(s) per round"), "{md}");
        let section = &md[md.find("## Under load").unwrap()..md.find("## Plots").unwrap()];
        let rows = section
            .lines()
            .filter(|l| l.starts_with("| sim-node"))
            .count();
        assert_eq!(rows, 6, "a row per round: {section}");
        // Markdown escapes do not work inside a code span: no escaped text in one.
        assert!(
            !section.contains("`\\"),
            "an escape inside a code span: {section}"
        );
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("<section id=\"load\">"));
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
    };
    let check = |v: &serde_json::Value, id: &str| -> serde_json::Value {
        v["verdict"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no check {id}: {v}"))
            .clone()
    };
    let strict = report("roce-100g", "strict");
    let vb = check(&strict, "load-victim-bandwidth");
    assert_eq!(vb["status"], "FAIL", "{vb}");
    assert!(vb["measured"].as_f64().unwrap() >= worst_victim, "{vb}");
    let at = vb["worst_at"].as_str().unwrap();
    assert!(
        at.contains("beside the incast to sim-node2#2")
            || at.contains("beside the incast to sim-node5#5"),
        "{vb}"
    );
    let fair = check(&strict, "load-incast-fairness");
    assert_eq!(fair["status"], "FAIL", "{fair}");
    assert!(fair["measured"].as_f64().unwrap() < 0.8, "{fair}");
    // No canary run among the inputs: said, not passed.
    assert_eq!(check(&strict, "load-impact-mean")["status"], "MISSING");

    let loose = dir.join("loose.toml");
    std::fs::write(
        &loose,
        "name = \"loose\"\n[[check]]\nid = \"any\"\ndescription = \"x\"\nmetric = \"bw_avg\"\n\
         unit = \"Gb/s\"\nmin = 0\n[load]\nvictim_bandwidth_impact_max = 1e6\n\
         victim_latency_impact_max = 1e9\nincast_fairness_min = 0.01\n",
    )
    .unwrap();
    let loose = report(loose.to_str().unwrap(), "loose");
    for id in [
        "load-victim-bandwidth",
        "load-victim-latency",
        "load-incast-fairness",
    ] {
        assert_eq!(check(&loose, id)["status"], "PASS", "{id}: {loose}");
    }
    assert_eq!(
        check(&loose, "load-victim-bandwidth")["measured"],
        vb["measured"],
        "the same figure under either bound"
    );
}

/// `bench-bw --pattern incast` refuses what it cannot do, with exit code 2 and the way
/// out: no launcher, verbs without a device, a read (data flows into the receiver), both
/// directions, a bad N; `bench-lat` has no incast.
#[test]
fn bench_bw_incast_refuses_what_it_cannot_do() {
    for (args, says) in [
        (&["--pattern", "incast"][..], "needs mpirun or srun"),
        (&["--pattern", "incast:0"][..], "whole number >= 1"),
    ] {
        let out = run(
            std::process::Command::new(bin("bench-bw")).args(args),
            LIMIT,
        );
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    for (args, says) in [
        // This machine has no RDMA device (CI's neither): verbs says so, and the way out.
        (&["--transport", "verbs"][..], "--transport tcp"),
        (&["--test", "read"][..], "--test send or --test write"),
        (&["-b"][..], "drop -b"),
    ] {
        let out = run(
            mpirun(2)
                .arg(bin("bench-bw"))
                .args(["--pattern", "incast", "--bind-addr", "127.0.0.1"])
                .args(args),
            LIMIT,
        );
        let (_, stderr) = text(&out);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let out = run(
        mpirun(2)
            .arg(bin("bench-lat"))
            .args(["--pattern", "incast", "--bind-addr", "127.0.0.1"]),
        LIMIT,
    );
    let (_, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("bench-lat has no incast"), "{stderr}");
}

/// GPCNeT's four congestor patterns, given to four groups of ten nodes: two-sided
/// all-to-all and incast, the put incast and the get broadcast. Over TCP a get is the root
/// streaming to each reader that connected (counted by the readers), a put a stream into
/// the root; each group moved bytes, and the document says TCP has no one-sided
/// operation. bench-congestion over verbs without a device is refused with the way out.
#[test]
fn four_congestor_groups_run_the_four_patterns() {
    let dir = tempfile::tempdir().unwrap();
    let (doc, stdout) = on_loopback(10, &["--transport", "tcp"], dir.path(), "four");
    let c = doc.congestion.expect("a congestion block");
    let patterns: Vec<&str> = c
        .congestor_groups
        .iter()
        .map(|g| g.pattern.as_str())
        .collect();
    assert_eq!(patterns, ["alltoall", "incast", "put_incast", "get_bcast"]);
    assert_eq!(c.transport.as_deref(), Some("tcp"));
    for t in &c.congestor_throughput {
        assert!(t.bytes > 0 && t.gbit_s > 0.0, "{t:?}");
        assert_eq!(t.op.as_deref(), Some("send"), "{t:?}");
        assert_eq!(t.counted_at.as_deref(), Some("receiver"), "{t:?}");
    }
    assert!(
        doc.warnings.iter().any(|w| w.contains("no one-sided")),
        "{:?}",
        doc.warnings
    );
    assert!(
        stdout.contains("(get_bcast, 4096 B send messages)"),
        "{stdout}"
    );

    let out = run(
        mpirun(4)
            .arg(bin("bench-congestion"))
            .args(["--include-local", "--transport", "verbs"]),
        LIMIT,
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no RDMA device"), "{stderr}");
    assert!(stderr.contains("--transport tcp"), "{stderr}");
}

/// Bad input ends with exit code 2 and a message naming the problem: too few nodes for a
/// split, an unknown mode.
#[test]
fn too_few_nodes_and_an_unknown_mode_are_refused() {
    let out = run(
        mpirun(3).arg(bin("bench-congestion")).args([
            "--include-local",
            "--bind-addr",
            "127.0.0.1",
        ]),
        LIMIT,
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("too few"), "{stderr}");
    let out = run(
        std::process::Command::new(bin("bench-congestion")).args(["--mode", "bogus"]),
        LIMIT,
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--mode bogus"), "{stderr}");
}

/// A noisy-neighbour run's tenants are checked before anything starts (exit 2, the problem
/// and the next step named): no tenants to read, an unknown tenant, one tenant as both
/// sides, with the incast mode, one of the two names alone (clap); and a node of neither
/// tenant in the run is refused by the split on every rank.
#[test]
fn a_noisy_neighbour_run_refuses_bad_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let tenants = dir.path().join("t.toml");
    std::fs::write(
        &tenants,
        "version = 1\n[[tenant]]\nname = \"acme\"\nnodes = [\"a1\", \"a2\"]\n[[tenant]]\nname = \"globex\"\nnodes = [\"g1\", \"g2\"]\n",
    )
    .unwrap();
    let t = tenants.to_str().unwrap();
    let pair = ["--canary-tenant", "acme", "--congestor-tenant", "globex"];
    for (args, said) in [
        (pair.to_vec(), "need the tenants: give --tenants FILE"),
        (
            vec![
                "--tenants",
                t,
                "--canary-tenant",
                "acme",
                "--congestor-tenant",
                "initech",
            ],
            "no tenant \"initech\"",
        ),
        (
            vec![
                "--tenants",
                t,
                "--canary-tenant",
                "acme",
                "--congestor-tenant",
                "acme",
            ],
            "both name \"acme\"",
        ),
        (
            [&["--tenants", t, "--mode", "incast"][..], &pair[..]].concat(),
            "not with --mode incast",
        ),
        (
            vec!["--tenants", t, "--canary-tenant", "acme"],
            "--congestor-tenant",
        ),
    ] {
        let out = run(
            std::process::Command::new(bin("bench-congestion")).args(&args),
            LIMIT,
        );
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
    // Four ranks on this host, whose name is neither tenant's: the split names the node and
    // the tenants.
    let out = run(
        mpirun(4)
            .arg(bin("bench-congestion"))
            .args(["--bind-addr", "127.0.0.1", "--tenants", t])
            .args(pair),
        LIMIT,
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is in neither tenant \"acme\" nor \"globex\""),
        "{stderr}"
    );
}
