//! Sweeps under mpirun: every pattern's schedule read back from the real document (every
//! pair exactly once, the pairs of a round disjoint), a pair that cannot be measured
//! recorded as failed while the sweep goes on, a rank killed mid-sweep leaving the rounds
//! finished before it, and the simulated cluster (tests/cluster/simcluster.sh) whose
//! links and nodes are shaped one by one.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use integration::{bin, is_root, mpirun, run, spawn, text, wait_for_json, wait_with_deadline};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(240);

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// (round, initiator rank, responder rank) of every result row.
fn rows(doc: &Value) -> Vec<(u64, u64, u64)> {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let p = &r["pair"];
            (
                p["round"].as_u64().unwrap_or(0),
                p["initiator"]["rank"].as_u64().unwrap(),
                p["responder"]["rank"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Asserts the rounds are disjoint and returns the unordered pairs met.
fn disjoint_rounds(rows: &[(u64, u64, u64)]) -> BTreeSet<(u64, u64)> {
    let mut by_round: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let mut met = BTreeSet::new();
    for &(round, a, b) in rows {
        let busy = by_round.entry(round).or_default();
        assert!(
            busy.insert(a),
            "round {round}: rank {a} in two pairs: {rows:?}"
        );
        assert!(
            busy.insert(b),
            "round {round}: rank {b} in two pairs: {rows:?}"
        );
        assert!(
            met.insert((a.min(b), a.max(b))),
            "pair {a}-{b} measured twice: {rows:?}"
        );
    }
    met
}

fn sweep(np: u32, tool: &str, args: &[&str], json: &Path) -> std::process::Output {
    run(
        mpirun(np)
            .arg(bin(tool))
            .args(args)
            .args(["--timeout", "20", "--json"])
            .arg(json),
        LIMIT,
    )
}

#[test]
fn all_pairs_meets_every_pair_once_in_disjoint_rounds_at_odd_and_even_counts() {
    for np in [3u32, 4, 5, 6] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("ap.json");
        let out = sweep(
            np,
            "bench-lat",
            &[
                "-s",
                "8",
                "-n",
                "100",
                "--pattern",
                "all-pairs",
                "--include-local",
            ],
            &json,
        );
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "np {np}:\n{stdout}\n{stderr}");
        let doc = read(&json);
        let n = u64::from(np);
        let met = disjoint_rounds(&rows(&doc));
        let all: BTreeSet<(u64, u64)> = (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .collect();
        assert_eq!(met, all, "np {np}");
        let s = &doc["sweep"];
        assert_eq!(s["pattern"], "all-pairs");
        let rounds = if np % 2 == 0 { n - 1 } else { n };
        assert_eq!(s["rounds"], rounds, "np {np}: circle method round count");
        assert_eq!(s["rounds_done"], rounds);
        assert_eq!(s["planned_pairs"], n * (n - 1) / 2);
        assert_eq!(s["nodes"].as_array().unwrap().len(), np as usize);
        assert_eq!(doc["complete"], true);
        assert!(stderr.contains("sweep done"), "{stderr}");
        assert!(stdout.matches("#bytes").count() == 1, "{stdout}");
    }
}

#[test]
fn ring_random_and_file_patterns_schedule_what_they_say() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ring.json");
    let out = sweep(
        5,
        "bench-bw",
        &[
            "-s",
            "4K",
            "-n",
            "200",
            "--pattern",
            "ring",
            "--include-local",
        ],
        &json,
    );
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let met = disjoint_rounds(&rows(&read(&json)));
    let want: BTreeSet<(u64, u64)> = (0..5u64)
        .map(|i| (i.min((i + 1) % 5), i.max((i + 1) % 5)))
        .collect();
    assert_eq!(met, want);

    // random: the seed is recorded and the same seed gives the same pairs.
    let mut seen = Vec::new();
    for i in 0..2 {
        let json = dir.path().join(format!("rnd{i}.json"));
        let out = sweep(
            4,
            "bench-lat",
            &[
                "-s",
                "8",
                "-n",
                "50",
                "--pattern",
                "random:3:1234",
                "--include-local",
            ],
            &json,
        );
        assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
        let doc = read(&json);
        assert_eq!(doc["sweep"]["seed"], 1234);
        assert_eq!(doc["sweep"]["rounds"], 3);
        let mut r = rows(&doc);
        r.sort();
        for round in 0..3 {
            let in_round: Vec<_> = r.iter().filter(|x| x.0 == round).collect();
            assert_eq!(in_round.len(), 2, "a perfect matching of 4 nodes: {r:?}");
        }
        seen.push(r);
    }
    assert_eq!(seen[0], seen[1]);

    // file: the listed node pairs, packed into disjoint rounds. Nodes are host/rank here.
    let host = integration::hostname();
    let list = dir.path().join("retest.pairs");
    std::fs::write(
        &list,
        format!("# suspects\n{host}/0 {host}/3\n{host}/0 {host}/1\n{host}/2 {host}/3\n"),
    )
    .unwrap();
    let json = dir.path().join("file.json");
    let pattern = format!("file:{}", list.display());
    let out = sweep(
        4,
        "bench-lat",
        &[
            "-s",
            "8",
            "-n",
            "50",
            "--pattern",
            &pattern,
            "--include-local",
        ],
        &json,
    );
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let doc = read(&json);
    let met = disjoint_rounds(&rows(&doc));
    assert_eq!(met, BTreeSet::from([(0, 3), (0, 1), (2, 3)]));
    assert_eq!(doc["sweep"]["rounds"], 2);

    // A list naming a node that is not in the run is refused before measuring.
    std::fs::write(&list, format!("{host}/0 nosuchhost\n")).unwrap();
    let out = sweep(
        2,
        "bench-lat",
        &["-n", "10", "--pattern", &pattern, "--include-local"],
        &json,
    );
    assert_eq!(out.status.code(), Some(2));
    let (_, stderr) = text(&out);
    assert!(stderr.contains("no node named 'nosuchhost'"), "{stderr}");
}

#[test]
fn patterns_need_nodes_and_a_launcher() {
    // One host without --include-local: no node pairs to measure.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("x.json");
    let out = sweep(
        4,
        "bench-lat",
        &["-n", "10", "--pattern", "all-pairs"],
        &json,
    );
    assert_eq!(out.status.code(), Some(2));
    let (_, stderr) = text(&out);
    assert!(stderr.contains("--include-local"), "{stderr}");
    // Standalone has one pair: a pattern is refused with the way to run it.
    let out = run(
        Command::new(bin("bench-lat")).args(["127.0.0.1", "--pattern", "ring", "--timeout", "2"]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("mpirun"), "{:?}", text(&out));
    // Bad pattern and device lists are usage errors.
    for (args, needle) in [
        (&["--pattern", "mesh"][..], "unknown pattern"),
        (&["--pattern", "random:0"][..], "ROUNDS"),
        (&["--rails", "some"][..], "--rails"),
        (&["-d", "mlx5_0,,mlx5_1"][..], "empty name"),
    ] {
        let out = run(Command::new(bin("bench-bw")).args(args), LIMIT);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out).1.contains(needle), "{args:?}: {:?}", text(&out));
    }
}

/// The simulated cluster (root only: network and UTS namespaces).
fn simcluster(faults: &[&str], tool: &str, args: &[&str], json: &Path) -> std::process::Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster/simcluster.sh");
    run(
        Command::new(script)
            .args(faults)
            .arg("--")
            .arg(bin(tool))
            .args(args)
            .arg("--json")
            .arg(json),
        LIMIT,
    )
}

#[test]
fn a_pair_that_cannot_talk_is_recorded_failed_and_the_sweep_goes_on() {
    if !is_root() {
        eprintln!("skipped: needs root for the simulated cluster (CI runs as root)");
        return;
    }
    // A link throttled to 8 bit/s passes nothing in time: that pair misses its timeout.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("dead-link.json");
    let out = simcluster(
        &["--nodes", "4", "--slow-link", "1-2:8bit"],
        "bench-lat",
        &[
            "-s",
            "8",
            "-n",
            "200",
            "--pattern",
            "all-pairs",
            "--timeout",
            "3",
        ],
        &json,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "pairs failed: exit 1\n{stdout}\n{stderr}"
    );
    let doc = read(&json);
    let failed = doc["failed_pairs"].as_array().expect("failed_pairs");
    assert_eq!(failed.len(), 1, "{failed:?}");
    let f = &failed[0];
    let hosts: BTreeSet<&str> = [
        f["pair"]["initiator"]["host"].as_str().unwrap(),
        f["pair"]["responder"]["host"].as_str().unwrap(),
    ]
    .into();
    assert_eq!(hosts, BTreeSet::from(["sim-node1", "sim-node2"]));
    assert!(
        f["initiator_error"].is_string() || f["responder_error"].is_string(),
        "{f}"
    );
    // Every other pair was measured: 6 node pairs, one failed.
    let met = disjoint_rounds(&rows(&doc));
    assert_eq!(met.len(), 5, "{met:?}");
    assert_eq!(doc["sweep"]["rounds_done"], 3);
    assert!(stderr.contains("FAILED round"), "{stderr}");
}

#[test]
fn a_rank_killed_mid_sweep_leaves_the_rounds_finished_before() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("killed.json");
    let job = spawn(
        mpirun(6)
            .arg(bin("bench-bw"))
            .args([
                "-s",
                "4K",
                "-D",
                "0.7",
                "--pattern",
                "all-pairs",
                "--include-local",
                "--timeout",
                "20",
                "--json",
            ])
            .arg(&json),
    );
    // Five rounds of about 0.8 s: once the checkpoint shows a finished round, kill the
    // whole job outright (no chance to write a final document).
    wait_for_json(
        &json,
        Duration::from_secs(60),
        "the sweep's first round",
        |d| d["sweep"]["rounds_done"].as_u64().unwrap_or(0) >= 1,
    );
    let _ = Command::new("pkill")
        .args(["-KILL", "-f", "bench-bw -s 4K -D 0.7"])
        .status();
    let out = wait_with_deadline(job, LIMIT, "killed sweep");
    assert!(!out.status.success());
    let doc = read(&json);
    assert_eq!(doc["complete"], false, "a checkpoint is marked incomplete");
    let done = doc["sweep"]["rounds_done"].as_u64().unwrap();
    assert!((1..5).contains(&done), "rounds_done {done}");
    let met = disjoint_rounds(&rows(&doc));
    assert!(met.len() as u64 >= 2 * done, "{met:?}");
}

/// `--plan`: the sweep names the planned nodes that have no rank in the run (before the
/// first round and in the document's warnings), counts the pairs by hop, and refuses a
/// plan it cannot read with the file named (exit 2, before any round).
#[test]
fn a_plan_names_its_nodes_missing_from_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "version = 1\n[[switch]]\nname = \"leaf0\"\ntier = \"leaf\"\ngroup = \"g0\"\n\
             [[node]]\nname = \"ghost7\"\ngroup = \"g0\"\n[[node]]\nname = \"{host}\"\ngroup = \"g0\"\n"
        ),
    )
    .unwrap();
    let json = dir.path().join("plan.json");
    let plan_arg = plan.to_str().unwrap();
    let plan_sweep = |np: u32, json: &Path| {
        sweep(
            np,
            "bench-lat",
            &[
                "-s",
                "8",
                "-n",
                "50",
                "--pattern",
                "all-pairs",
                "--include-local",
                "--plan",
                plan_arg,
            ],
            json,
        )
    };
    let out = plan_sweep(3, &json);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("1 planned node(s) have no rank in this run") && stderr.contains("ghost7"),
        "{stderr}"
    );
    let doc = read(&json);
    let p = &doc["sweep"]["plan"];
    assert_eq!(p["missing"], serde_json::json!(["ghost7"]), "{p}");
    assert_eq!(p["unplanned"], serde_json::json!([]), "{p}");
    // No NIC of this host is in the plan: every pair is unplaced, none guessed.
    assert_eq!(p["unknown_pairs"], 3, "{p}");
    assert_eq!(p["same_leaf_pairs"], 0, "{p}");
    assert!(
        doc["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("ghost7")),
        "{}",
        doc["warnings"]
    );
    // A plan that is not one: exit 2, the file and the problem named, no document.
    std::fs::write(&plan, "version = 1\n[[switch]]\nname = 3\n").unwrap();
    let bad = dir.path().join("bad.json");
    let out = plan_sweep(2, &bad);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--plan:") && stderr.contains("plan.toml"),
        "{stderr}"
    );
    assert!(!bad.exists());
}
