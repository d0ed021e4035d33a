//! Expert-parallel dispatch and combine end to end: `bench-collective ep_dispatch
//! ep_combine` under `mpirun -np 8 --oversubscribe` with `-c` at every routing (and the
//! rail-aligned two-stage variant), 8 ranks standing for 2 nodes of 4. The byte counts in
//! the JSON are recomputed here from the seed by an implementation of the router written
//! from its specification (docs/load.md), not by calling the tool's; a corrupted byte
//! must be found by the check.
//!
//! No assertion depends on speed.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::time::Duration;

use integration::{bin, mpirun, run, text};
use results::{CollectiveResult, Document, TestResult};

const LIMIT: Duration = Duration::from_secs(300);
const RANKS: usize = 8;
const PER_NODE: usize = 4;
const EXPERTS: usize = 32;
const TOPK: usize = 4;
const HIDDEN: u64 = 256;
const SEED: u64 = 42;

/// The router, from the specification: SplitMix64 per rank, weights by routing, node
/// limit first, then top-k distinct experts by inverse CDF with rejection.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / 9_007_199_254_740_992.0
    }
}

fn rank_of_expert(e: usize) -> usize {
    e / (EXPERTS / RANKS)
}

/// Token t of `rank`: its experts, in the order drawn.
fn routing(kind: &str, rank: usize, tokens: usize) -> Vec<Vec<usize>> {
    let nodes = RANKS / PER_NODE;
    let w: Vec<f64> = (0..EXPERTS)
        .map(|e| {
            if let Some(s) = kind.strip_prefix("zipf:") {
                ((e + 1) as f64).powf(-s.parse::<f64>().unwrap())
            } else if let Some(r) = kind.strip_prefix("hot:") {
                if rank_of_expert(e) == 0 {
                    r.parse().unwrap()
                } else {
                    1.0
                }
            } else {
                1.0
            }
        })
        .collect();
    let limit: Option<usize> = kind
        .strip_prefix("node:")
        .map(|g| g.parse().unwrap())
        .filter(|&g| g < nodes);
    let mut rng = Rng(SEED ^ (rank as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut all = Vec::new();
    for _ in 0..tokens {
        let mut allowed: Vec<usize> = (0..EXPERTS).collect();
        if let Some(g) = limit {
            let mut picked = Vec::new();
            while picked.len() < g {
                let n = (rng.next() % nodes as u64) as usize;
                if !picked.contains(&n) {
                    picked.push(n);
                }
            }
            allowed.retain(|e| picked.contains(&(e / (EXPERTS / nodes))));
        }
        let total: f64 = allowed.iter().map(|&e| w[e]).sum();
        let mut sel = Vec::new();
        while sel.len() < TOPK {
            let x = rng.unit() * total;
            let mut acc = 0.0;
            let mut pick = allowed[allowed.len() - 1];
            for &e in &allowed {
                acc += w[e];
                if acc > x {
                    pick = e;
                    break;
                }
            }
            if !sel.contains(&pick) {
                sel.push(pick);
            }
        }
        all.push(sel);
    }
    all
}

/// What the JSON must say: copies (token, destination rank), off-node copies, DeepEP's
/// (token, destination node) copies, the busiest receiver.
#[derive(Debug, PartialEq)]
struct Expected {
    copies: u64,
    off_node: u64,
    node_copies: u64,
    received_max: u64,
}

fn expected(kind: &str, tokens: usize) -> Expected {
    let mut e = Expected {
        copies: 0,
        off_node: 0,
        node_copies: 0,
        received_max: 0,
    };
    let mut received = [0u64; RANKS];
    for src in 0..RANKS {
        for sel in routing(kind, src, tokens) {
            let mut ranks: Vec<usize> = sel.iter().map(|&x| rank_of_expert(x)).collect();
            ranks.sort();
            ranks.dedup();
            let mut nodes: Vec<usize> = ranks.iter().map(|r| r / PER_NODE).collect();
            nodes.dedup();
            e.copies += ranks.len() as u64;
            e.off_node += ranks
                .iter()
                .filter(|&&r| r / PER_NODE != src / PER_NODE)
                .count() as u64;
            e.node_copies += nodes.len() as u64;
            for r in ranks {
                received[r] += 1;
            }
        }
    }
    e.received_max = *received.iter().max().unwrap();
    e
}

fn ep_rows(doc: &Document) -> Vec<&CollectiveResult> {
    doc.results
        .iter()
        .filter_map(|r| match r {
            TestResult::Collective(c) if c.ep.is_some() => Some(c),
            _ => None,
        })
        .collect()
}

fn launch(
    routing: &str,
    variant: &str,
    extra: &[(&str, &str)],
) -> (std::process::Output, Option<Document>) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ep.json");
    let mut c = mpirun(RANKS as u32);
    for (k, v) in extra {
        c.env(k, v);
    }
    c.arg(bin("bench-collective")).args([
        "ep_dispatch",
        "ep_combine",
        "-b",
        "16",
        "-e",
        "32",
        "-n",
        "3",
        "-w",
        "1",
        "-c",
        "--routing",
        routing,
        "--seed",
        &SEED.to_string(),
        "--topk",
        &TOPK.to_string(),
        "--experts",
        &EXPERTS.to_string(),
        "--hidden",
        &HIDDEN.to_string(),
        "--ranks-per-node",
        &PER_NODE.to_string(),
        "--ep-variant",
        variant,
        "--json",
    ]);
    c.arg(&json);
    let out = run(&mut c, LIMIT);
    let doc = std::fs::read_to_string(&json)
        .ok()
        .map(|t| Document::from_json(&t).expect("valid document"));
    (out, doc)
}

fn checks_out(routing: &str, variant: &str) {
    let (out, doc) = launch(routing, variant, &[]);
    let (so, se) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{routing} {variant}\n{so}\n{se}"
    );
    let doc = doc.expect("JSON written");
    let rows = ep_rows(&doc);
    assert_eq!(rows.len(), 4, "two collectives at two sizes: {rows:?}");
    for r in rows {
        let ep = r.ep.as_ref().unwrap();
        let tokens = ep.tokens_per_rank as usize;
        assert_eq!(r.count, ep.tokens_per_rank);
        let want = expected(routing, tokens);
        let row_bytes: u64 = match r.collective.as_str() {
            "ep_dispatch" => HIDDEN + HIDDEN / 128 * 4,
            "ep_combine" => 2 * HIDDEN,
            other => panic!("unexpected {other}"),
        };
        let what = format!("{routing} {variant} {} at {tokens} tokens", r.collective);
        assert!(r.out_of_place.checked, "{what}: checked");
        assert_eq!(r.out_of_place.wrong, 0, "{what}: wrong elements");
        assert_eq!(ep.bytes_per_copy, row_bytes, "{what}");
        assert_eq!(ep.copies, want.copies, "{what}: copies");
        assert_eq!(
            ep.network_bytes,
            want.off_node * row_bytes,
            "{what}: network bytes"
        );
        assert_eq!(
            ep.deepep_bytes,
            want.node_copies * row_bytes,
            "{what}: DeepEP bytes"
        );
        assert_eq!(ep.received_max_copies, want.received_max, "{what}");
        let mean = want.copies as f64 / RANKS as f64;
        assert!(
            (ep.imbalance - want.received_max as f64 / mean).abs() < 1e-9,
            "{what}"
        );
        assert_eq!(ep.routing, routing);
        assert_eq!(ep.variant, variant.replace('-', "_"));
        assert!(ep.step_p50_us > 0.0 && ep.step_p50_us <= ep.step_p99_us);
        assert!(ep.step_p99_us <= ep.step_max_us && ep.notify_p50_us > 0.0);
    }
    // The table shows both collectives with zero wrong elements.
    let table: Vec<&str> = so
        .lines()
        .filter(|l| l.trim_start().starts_with("ep_"))
        .collect();
    assert_eq!(table.len(), 4, "{so}");
    assert!(
        table
            .iter()
            .all(|l| l.split_whitespace().last() == Some("0")),
        "{so}"
    );
}

#[test]
fn uniform_dispatch_and_combine_check_out() {
    checks_out("uniform", "flat");
}

#[test]
fn node_limited_routing_checks_out_in_both_variants() {
    checks_out("node:1", "flat");
    checks_out("node:1", "two-stage");
}

#[test]
fn skewed_routings_check_out() {
    checks_out("zipf:1.2", "flat");
    checks_out("hot:4", "two-stage");
}

#[test]
fn the_skew_shows_in_the_imbalance() {
    // Independent of the tool: the hot rank receives more than the mean.
    let hot = expected("hot:4", 64);
    let uni = expected("uniform", 64);
    assert!(
        hot.received_max as f64 / (hot.copies as f64 / 8.0) > 1.3,
        "{hot:?}"
    );
    assert!(
        (uni.received_max as f64 / (uni.copies as f64 / 8.0)) < 1.3,
        "{uni:?}"
    );
    // node:1 keeps every token on one node: DeepEP counts one node copy per token.
    assert_eq!(expected("node:1", 64).node_copies, 64 * 8);
}

#[test]
fn a_corrupted_byte_is_found() {
    for variant in ["flat", "two-stage"] {
        let (out, doc) = launch(
            "uniform",
            variant,
            &[("FABCHECK_COLLECTIVE_FAULT", "corrupt:3")],
        );
        let (so, se) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{variant}\n{so}\n{se}");
        let doc = doc.expect("JSON written");
        for r in ep_rows(&doc) {
            assert!(
                r.out_of_place.wrong > 0,
                "{variant} {}: {r:?}",
                r.collective
            );
        }
    }
}

#[test]
fn impossible_routing_is_refused() {
    let mut c = mpirun(RANKS as u32);
    c.arg(bin("bench-collective")).args([
        "ep_dispatch",
        "--experts",
        "12",
        "--hidden",
        "256",
        "-b",
        "4",
        "-e",
        "4",
    ]);
    let out = run(&mut c, LIMIT);
    let (so, se) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{so}\n{se}");
    assert!(se.contains("--experts 12"), "{se}");
    let mut c = mpirun(2);
    c.arg(bin("bench-collective"))
        .args(["ep_dispatch", "all_reduce"]);
    let out = run(&mut c, LIMIT);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("launch of their own"));
}

/// A largest size whose buffers cannot fit in the host's memory is refused before any
/// size runs (`-e 64K` at the default hidden under `mpirun -np 8` was OOM-killed), once per
/// host, with the largest size that fits. 2^30 tokens at 2 ranks is 93 TB per rank: no
/// machine has it, so the refusal is certain wherever the test runs.
#[test]
fn sizes_beyond_the_hosts_memory_are_refused_before_anything_runs() {
    let mut c = mpirun(2);
    c.arg(bin("bench-collective"))
        .args(["ep_dispatch", "-b", "1", "-e", "1G"]);
    let out = run(&mut c, LIMIT);
    let (so, se) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{so}\n{se}");
    assert!(
        se.contains("needs at least 93321.0 GB of host memory per rank"),
        "{se}"
    );
    assert!(se.contains("The largest size that fits is"), "{se}");
    assert_eq!(se.matches("error:").count(), 1, "once per host: {se}");
    assert!(!so.contains("ep_dispatch  "), "no size ran: {so}");
}

/// The NCCL path (one group of ncclSend/ncclRecv per call, GPU memory) is real code now,
/// not a refusal: without a GPU it says what is missing (CUDA, NCCL or a GPU) with exit
/// code 2 and no panic, and the two-stage variant, whose regrouping is host code, is
/// refused under NCCL with the way out. On a GPU host `scripts/gpu-check.sh` runs it,
/// checked.
#[test]
fn the_nccl_path_says_why_it_cannot_run_here() {
    let nccl = |extra: &[&str]| {
        let mut c = mpirun(2);
        c.arg(bin("bench-collective"))
            .args(["ep_dispatch", "ep_combine", "--backend", "nccl", "-c"])
            .args([
                "--hidden",
                "256",
                "--experts",
                "8",
                "--topk",
                "2",
                "-b",
                "8",
                "-e",
                "8",
            ])
            .args(extra);
        let out = run(&mut c, LIMIT);
        let (so, se) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{extra:?}\n{so}\n{se}");
        assert!(!se.contains("panicked"), "{se}");
        assert!(!se.contains("not written yet"), "{se}");
        se
    };
    let has_gpu = std::path::Path::new("/dev/nvidia0").exists();
    if !has_gpu {
        let se = nccl(&[]);
        assert!(
            ["CUDA", "NCCL", "GPU"].iter().any(|w| se.contains(w)),
            "{se}"
        );
    }
    let se = nccl(&["--ep-variant", "two-stage", "--ranks-per-node", "1"]);
    assert!(se.contains("--ep-variant flat with --backend nccl"), "{se}");
}
