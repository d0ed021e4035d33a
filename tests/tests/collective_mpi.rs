//! bench-collective over MPI, end to end: every collective at 2, 3 and 4 ranks with
//! `--check`, the table and the JSON read back and the busbw arithmetic recomputed from
//! sizes and times; nccl-tests' time and its `-a` modes; the scaling sweep; bad input
//! refused; corruption found; a dead or absent rank ends the run instead of hanging;
//! Ctrl-C leaves an incomplete document.
//!
//! No assertion depends on speed: the deadlines only turn a hang into a failure.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use integration::{bin, mpirun, run, text};
use results::{
    CollectiveResult, CollectiveTiming, Document, LatencyHistogram, RankTimes, TestResult,
};

const LIMIT: Duration = Duration::from_secs(300);

const COLLECTIVES: [&str; 10] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
    "scatter",
    "gather",
    "hypercube",
];

/// nccl-tests' bus-bandwidth factors, written out independently of the tool.
fn factor(name: &str, n: f64) -> f64 {
    match name {
        "all_reduce" => 2.0 * (n - 1.0) / n,
        "all_gather" | "reduce_scatter" | "alltoall" | "scatter" | "gather" => (n - 1.0) / n,
        "broadcast" | "reduce" | "sendrecv" | "hypercube" => 1.0,
        other => panic!("unknown collective {other}"),
    }
}

/// The bytes nccl-tests' algbw counts: the size column, except for hypercube, whose
/// algbw counts the n-1 blocks a rank receives.
fn alg_bytes(r: &CollectiveResult) -> f64 {
    let size = r.size_bytes as f64;
    if r.collective == "hypercube" {
        size * (f64::from(r.ranks) - 1.0) / f64::from(r.ranks)
    } else {
        size
    }
}

/// Collectives that run at `np` ranks (hypercube needs a power of two).
fn runnable(np: u32) -> Vec<&'static str> {
    COLLECTIVES
        .into_iter()
        .filter(|c| *c != "hypercube" || np.is_power_of_two())
        .collect()
}

/// nccl-tests' time (each rank's loop time / iterations, combined across ranks as `-a`
/// says) is `time_us`; the per-iteration view beside it (the slowest rank's time per
/// iteration) comes from a pass of its own, one sample per iteration.
fn assert_nccl_tests_time(t: &CollectiveTiming, want: fn(&RankTimes) -> f64, what: &str) {
    let rt = t.rank_time_us.expect("rank_time_us recorded");
    assert!(
        close(t.time_us, want(&rt)),
        "{what}: time {} vs {rt:?}",
        t.time_us
    );
    assert!(rt.min <= rt.avg && rt.avg <= rt.max, "{what}: {rt:?}");
    assert!(rt.min > 0.0, "{what}: {rt:?}");
    assert!(rt.rank0 >= rt.min && rt.rank0 <= rt.max, "{what}: {rt:?}");
    let h = LatencyHistogram::decode(&t.histogram).unwrap();
    assert!(h.summary_us().mean > 0.0 && t.latency_us.max >= t.latency_us.p50);
}

fn collective(np: u32, args: &[&str]) -> Command {
    let mut c = mpirun(np);
    c.arg(bin("bench-collective")).args(args);
    c
}

fn read_doc(path: &Path) -> Document {
    let text = std::fs::read_to_string(path).expect("JSON written");
    Document::from_json(&text).expect("valid document")
}

fn rows(doc: &Document) -> Vec<&CollectiveResult> {
    doc.results
        .iter()
        .map(|r| match r {
            TestResult::Collective(c) => c,
            other => panic!("unexpected result kind {other:?}"),
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

/// Table rows (non-comment lines with 13 fields) as whitespace-split fields.
fn table_rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .filter(|f| f.len() == 13)
        .collect()
}

fn assert_ok(out: &Output, what: &str) {
    let (so, se) = text(out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what} failed\nstdout:\n{so}\nstderr:\n{se}"
    );
}

/// Runs every collective with -c at `np` ranks and checks table, JSON and arithmetic.
fn every_collective_checks_out(np: u32) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let out = run(
        &mut collective(
            np,
            &[
                "all",
                "-b",
                "8",
                "-e",
                "64K",
                "-f",
                "16",
                "-n",
                "5",
                "-w",
                "1",
                "-c",
                "--json",
                json.to_str().unwrap(),
            ],
        ),
        LIMIT,
    );
    assert_ok(&out, &format!("np {np}"));
    let (stdout, _) = text(&out);
    let doc = read_doc(&json);
    assert!(doc.complete);
    assert_eq!(doc.tool, "bench-collective");
    assert_eq!(doc.ranks, np);
    assert_eq!(doc.hosts.len(), np as usize);
    // Every rank probed its host around the run, on its measuring thread; what crossed a
    // threshold is a warning (on this shared machine, usually the load).
    let q = doc.quality.as_ref().expect("measurement quality recorded");
    assert_eq!(q.hosts.len(), np as usize);
    for (r, h) in q.hosts.iter().enumerate() {
        assert_eq!(h.rank, Some(r as u32));
        assert!(
            h.involuntary_context_switches.is_some() && h.duration_s > 0.0,
            "{h:?}"
        );
        assert!(h.cores >= 1 && h.cpu_steal_pct.is_some(), "{h:?}");
    }
    assert_eq!(q.disturbed, !q.reasons.is_empty());
    for r in &q.reasons {
        assert!(
            doc.warnings
                .contains(&format!("measurement disturbed: {r}")),
            "{:?}",
            doc.warnings
        );
    }
    let rs = rows(&doc);
    let all_sizes = [8u64, 128, 2048, 32768];
    let colls = runnable(np);
    // A size below one 16-byte block per rank (nccl-tests' rounding; hypercube: one
    // 4-float block) makes no row (see
    // sizes_below_one_block_per_rank_are_skipped_and_the_rest_judged).
    let smallest = |c: &str| -> u64 {
        match c {
            "hypercube" => 16 * u64::from(np),
            "all_gather" | "gather" | "reduce_scatter" | "scatter" | "alltoall" => {
                16 * u64::from(np)
            }
            _ => 4,
        }
    };
    let sizes_of = |c: &str| -> Vec<u64> {
        all_sizes
            .iter()
            .copied()
            .filter(|&s| s >= smallest(c))
            .collect()
    };
    let expected: usize = colls.iter().map(|c| sizes_of(c).len()).sum();
    assert_eq!(
        rs.len(),
        expected,
        "{:?}",
        rs.iter()
            .map(|r| (&r.collective, r.size_bytes))
            .collect::<Vec<_>>()
    );
    let table = table_rows(&stdout);
    assert_eq!(table.len(), rs.len(), "one table row per result:\n{stdout}");
    for (r, t) in rs.iter().zip(&table) {
        assert_eq!(r.backend, "mpi");
        assert_eq!(r.ranks, np);
        assert_eq!(r.nodes, Some(1));
        assert_eq!(r.datatype, "float32");
        assert!(colls.contains(&r.collective.as_str()));
        let f = factor(&r.collective, f64::from(np));
        assert!(close(r.busbw_factor, f), "{} factor", r.collective);
        // The size column is the larger buffer, rounded down to whole 16-byte blocks per
        // rank, as nccl-tests rounds it.
        let nominal = sizes_of(&r.collective)[rs
            .iter()
            .filter(|x| x.collective == r.collective)
            .position(|x| std::ptr::eq(*x, *r))
            .unwrap()];
        let per_rank = [
            "all_gather",
            "gather",
            "reduce_scatter",
            "scatter",
            "alltoall",
        ];
        let slack = if r.collective == "hypercube" || per_rank.contains(&r.collective.as_str()) {
            16
        } else {
            4
        } * u64::from(np);
        assert!(r.size_bytes <= nominal && r.size_bytes + slack > nominal);
        assert_eq!(t[0], r.size_bytes.to_string());
        assert_eq!(t[1], r.count.to_string());
        assert_eq!(t[2], "float");
        assert_eq!(t[4], r.root.to_string());
        for (timing, cols) in [(&r.out_of_place, &t[5..9]), (&r.in_place, &t[9..13])] {
            assert!(timing.checked);
            assert_eq!(
                timing.wrong, 0,
                "{} {} bytes wrong",
                r.collective, r.size_bytes
            );
            assert_eq!(cols[3], "0");
            assert!(timing.time_us > 0.0);
            let algbw = alg_bytes(r) / (timing.time_us * 1e-6) / 1e9;
            assert!(
                close(timing.algbw_gbyte_s, algbw),
                "algbw {} vs {algbw}",
                timing.algbw_gbyte_s
            );
            assert!(close(timing.busbw_gbyte_s, algbw * f), "busbw");
            // The table shows the same figures, rounded.
            assert!((cols[1].parse::<f64>().unwrap() - timing.algbw_gbyte_s).abs() <= 0.0051);
            assert!((cols[2].parse::<f64>().unwrap() - timing.busbw_gbyte_s).abs() <= 0.0051);
            assert!(timing.slowest_rank < np);
            let h = LatencyHistogram::decode(&timing.histogram).unwrap();
            assert_eq!(h.len(), 5, "one sample per timed iteration");
            // Default -a 1: the mean over ranks.
            assert_nccl_tests_time(timing, |t| t.avg, &r.collective);
        }
    }
    assert_eq!(
        stdout.matches("# Out of bounds values : 0 OK").count(),
        colls.len(),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("# Avg bus bandwidth    : ").count(),
        colls.len()
    );
    if !np.is_power_of_two() {
        assert!(
            stdout.contains("# hypercube skipped on 3 ranks"),
            "`all` skips what cannot run, as nccl-tests:\n{stdout}"
        );
        assert!(doc.warnings.iter().any(|w| w.contains("hypercube skipped")));
    }
}

#[test]
fn two_ranks_every_collective() {
    every_collective_checks_out(2);
}

#[test]
fn three_ranks_every_collective() {
    every_collective_checks_out(3);
}

#[test]
fn four_ranks_oversubscribed_every_collective() {
    every_collective_checks_out(4);
}

#[test]
fn datatypes_and_reductions_check_out() {
    for (dt, op) in [
        ("int8", "sum"),
        ("int32", "prod"),
        ("float64", "min"),
        ("uint8", "max"),
        ("int64", "sum"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("c.json");
        let out = run(
            &mut collective(
                3,
                &[
                    "all",
                    "-b",
                    "8",
                    "-e",
                    "4K",
                    "-f",
                    "8",
                    "-n",
                    "2",
                    "-w",
                    "0",
                    "-d",
                    dt,
                    "-o",
                    op,
                    "-r",
                    "2",
                    "--json",
                    json.to_str().unwrap(),
                ],
            ),
            LIMIT,
        );
        assert_ok(&out, &format!("{dt} {op}"));
        for r in rows(&read_doc(&json)) {
            assert_eq!(r.datatype, dt);
            if ["all_reduce", "reduce_scatter", "reduce"].contains(&r.collective.as_str()) {
                assert_eq!(r.op, op);
            } else {
                assert_eq!(r.op, "none");
            }
            if ["broadcast", "reduce", "scatter", "gather"].contains(&r.collective.as_str()) {
                assert_eq!(r.root, 2);
            } else {
                assert_eq!(r.root, -1);
            }
            assert_eq!(
                r.out_of_place.wrong + r.in_place.wrong,
                0,
                "{dt} {op} {}",
                r.collective
            );
        }
    }
}

#[test]
fn check_finds_a_corrupted_element() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let out = run(
        collective(
            2,
            &[
                "all_reduce",
                "-b",
                "64",
                "-e",
                "64",
                "-n",
                "2",
                "-c",
                "--json",
                json.to_str().unwrap(),
            ],
        )
        .env("FABCHECK_COLLECTIVE_FAULT", "corrupt:1"),
        LIMIT,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "wrong data must fail the run\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("# Out of bounds values : 2 FAILED"),
        "{stdout}"
    );
    let r = rows(&read_doc(&json))[0].clone();
    assert_eq!(r.out_of_place.wrong, 1);
    assert_eq!(r.in_place.wrong, 1);
    assert!(stderr.contains("wrong element"), "{stderr}");
}

#[test]
fn bad_requests_exit_2_with_a_reason() {
    for (args, needle) in [
        (vec!["-d", "bfloat16"], "bfloat16"),
        (vec!["-d", "float16"], "float16"),
        (vec!["-o", "avg"], "avg"),
        (vec!["-b", "1M", "-e", "8"], "minbytes"),
        (vec!["gather_all"], "unknown collective"),
        (vec!["broadcast", "-r", "7"], "root"),
        (vec!["-d", "complex64"], "complex64"),
        (vec!["-b", "0"], "size"),
        (vec!["--json", "/nonexistent-dir/r.json"], "cannot write"),
    ] {
        let mut a = vec!["-n", "1"];
        if !args.contains(&"-b") {
            a.extend(["-b", "8", "-e", "8"]);
        }
        a.extend(args.iter());
        let out = run(&mut collective(2, &a), LIMIT);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}\n{stdout}\n{stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: no '{needle}' in\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // Named explicitly, a collective that cannot run on this job is an error (with `all`
    // it is skipped, as nccl-tests does).
    let out = run(
        &mut collective(3, &["hypercube", "-b", "8", "-e", "8", "-n", "1"]),
        LIMIT,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("power-of-two"), "{stderr}");
}

/// `-a 0|1|2|3` choose which of the ranks' loop times is the time column, as nccl-tests'.
#[test]
fn average_modes_pick_the_ranks_time_as_nccl_tests() {
    type Pick = fn(&RankTimes) -> f64;
    let modes: [(&str, Pick); 3] = [("0", |t| t.rank0), ("2", |t| t.min), ("3", |t| t.max)];
    for (mode, want) in modes {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("c.json");
        let out = run(
            &mut collective(
                3,
                &[
                    "all_reduce",
                    "-b",
                    "1K",
                    "-e",
                    "1K",
                    "-n",
                    "50",
                    "-a",
                    mode,
                    "--json",
                    json.to_str().unwrap(),
                ],
            ),
            LIMIT,
        );
        assert_ok(&out, &format!("-a {mode}"));
        let doc = read_doc(&json);
        let names = ["rank0", "avg", "min", "max"];
        assert_eq!(
            doc.options["average"],
            names[mode.parse::<usize>().unwrap()]
        );
        let r = rows(&doc)[0];
        for t in [&r.out_of_place, &r.in_place] {
            assert_nccl_tests_time(t, want, &format!("-a {mode}"));
        }
        // The table's time column is the same figure.
        let (stdout, _) = text(&out);
        let t = &table_rows(&stdout)[0];
        let shown: f64 = t[5].parse().unwrap();
        assert!(
            (shown - r.out_of_place.time_us).abs() <= 0.006 + 0.001 * shown,
            "{shown} vs {}",
            r.out_of_place.time_us
        );
    }
}

/// `--scaling` at 8 ranks on one host: communicators of 2, 4 and 8 ranks (lowest ranks
/// first) in one launch, each row carrying its communicator size and node count.
#[test]
fn scaling_sweep_in_one_launch() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("scaling.json");
    let out = run(
        &mut collective(
            8,
            &[
                "all_reduce",
                "hypercube",
                "--scaling",
                "-b",
                "128",
                "-e",
                "4K",
                "-f",
                "32",
                "-n",
                "3",
                "-w",
                "1",
                "--json",
                json.to_str().unwrap(),
            ],
        ),
        LIMIT,
    );
    assert_ok(&out, "--scaling");
    let doc = read_doc(&json);
    assert_eq!(doc.ranks, 8);
    assert_eq!(doc.options["scaling"], true);
    let got: Vec<(String, u32, Option<u32>, u64)> = rows(&doc)
        .iter()
        .map(|r| (r.collective.clone(), r.ranks, r.nodes, r.size_bytes))
        .collect();
    let mut want = Vec::new();
    for n in [2u32, 4, 8] {
        for c in ["all_reduce", "hypercube"] {
            for size in [128u64, 4096] {
                want.push((c.to_string(), n, Some(1), size));
            }
        }
    }
    assert_eq!(got, want);
    for r in rows(&doc) {
        assert!(close(
            r.busbw_factor,
            factor(&r.collective, f64::from(r.ranks))
        ));
        for t in [&r.out_of_place, &r.in_place] {
            assert_eq!(t.wrong, 0, "{} at {} ranks", r.collective, r.ranks);
            assert!(t.slowest_rank < r.ranks, "the team is the lowest ranks");
        }
    }
    let (stdout, _) = text(&out);
    for n in [2, 4, 8] {
        assert!(
            stdout.contains(&format!("# all_reduce: backend mpi, {n} ranks on 1 node")),
            "{stdout}"
        );
    }

    // aggregate judges the sweep: AllReduce busbw at 4 and 8 ranks over busbw at 2 (one
    // host: the smallest communicator is the base), the worst deciding, recomputed here.
    let mut worst = f64::INFINITY;
    for size in [128u64, 4096] {
        let bw = |n: u32| {
            rows(&doc)
                .iter()
                .find(|r| r.collective == "all_reduce" && r.ranks == n && r.size_bytes == size)
                .unwrap()
                .out_of_place
                .busbw_gbyte_s
        };
        for n in [4, 8] {
            worst = worst.min(bw(n) / bw(2) * 100.0);
        }
    }
    for (bound, verdict, code) in [("0.000001", "PASS", 0), ("1000000000", "FAIL", 1)] {
        let profile = dir.path().join(format!("scaling-{verdict}.toml"));
        std::fs::write(
            &profile,
            format!(
                "name = \"scaling\"\n[[check]]\nid = \"allreduce-scaling\"\n\
                 description = \"d\"\nmetric = \"scaling_efficiency\"\nunit = \"%\"\n\
                 min = {bound}\ncollective = \"all_reduce\"\n"
            ),
        )
        .unwrap();
        let report = dir.path().join(format!("report-{verdict}"));
        let out = run(
            Command::new(bin("aggregate"))
                .arg("report")
                .arg(&json)
                .arg("--profile")
                .arg(&profile)
                .arg("--out")
                .arg(&report),
            LIMIT,
        );
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(code), "{stdout}\n{stderr}");
        let line = stdout
            .lines()
            .find(|l| l.contains("allreduce-scaling"))
            .unwrap_or_else(|| panic!("a check line:\n{stdout}"));
        assert!(line.starts_with(verdict), "{line}");
        let measured: f64 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert!(
            (measured - worst).abs() <= 0.0005 * worst.abs() + 0.001,
            "{line}: recomputed {worst}"
        );
        let html = std::fs::read_to_string(report.join("report.html")).unwrap();
        assert!(
            html.contains("id=\"plot-scaling\""),
            "busbw against ranks is drawn"
        );
    }
}

#[test]
fn a_rank_that_stops_taking_part_ends_the_run_within_the_timeout() {
    let out = run(
        collective(
            3,
            &[
                "all_reduce",
                "-b",
                "8",
                "-e",
                "64",
                "-n",
                "3",
                "--timeout",
                "3",
            ],
        )
        .env("FABCHECK_COLLECTIVE_FAULT", "hang:1"),
        Duration::from_secs(120),
    );
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("timed out"),
        "the waiting ranks say why:\n{stderr}"
    );
}

#[test]
fn a_rank_that_dies_ends_the_run() {
    let out = run(
        collective(
            4,
            &["all", "-b", "8", "-e", "64", "-n", "3", "--timeout", "3"],
        )
        .env("FABCHECK_COLLECTIVE_FAULT", "die:2"),
        Duration::from_secs(120),
    );
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
}

/// A single rank (MPI singleton, no launcher) with a long sweep; SIGINT after the first
/// row is printed. Returns the exit code and the document.
fn interrupt_after_first_row(fault: Option<&str>) -> (Option<i32>, Document) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let mut cmd = Command::new(bin("bench-collective"));
    cmd.args([
        "all_reduce",
        "-b",
        "8",
        "-e",
        "1G",
        "-f",
        "2",
        "-n",
        "20000",
        "-w",
        "0",
    ])
    .arg("--json")
    .arg(&json)
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    if let Some(f) = fault {
        cmd.env("FABCHECK_COLLECTIVE_FAULT", f);
    }
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let started = std::time::Instant::now();
    loop {
        let line = lines.next().expect("a table row before the end").unwrap();
        if !line.starts_with('#') {
            break;
        }
        assert!(started.elapsed() < LIMIT, "no row printed");
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = integration::wait_with_deadline(child, LIMIT, "interrupted run");
    let (_, stderr) = text(&out);
    eprintln!("{stderr}\n{rest:?}");
    (out.status.code(), read_doc(&json))
}

#[test]
fn interrupt_writes_what_was_measured_marked_incomplete() {
    let (code, doc) = interrupt_after_first_row(None);
    assert_eq!(code, Some(130));
    assert!(!doc.complete);
    assert!(doc.incomplete_reason.unwrap().contains("interrupted"));
    assert!(
        !doc.results.is_empty(),
        "what was measured before the stop is kept"
    );
}

/// The suite's exit policy (base::exit): wrong data found before an interrupt is still
/// wrong data, and outranks the interrupt.
#[test]
fn wrong_data_outranks_an_interrupt() {
    let (code, doc) = interrupt_after_first_row(Some("corrupt:0"));
    assert_eq!(code, Some(1));
    assert!(!doc.complete);
    assert!(rows(&doc)[0].out_of_place.wrong > 0);
}

/// A size below one element (one aligned block) per rank makes no row: nccl-tests would
/// run an empty call, and a 0-byte row carries no bandwidth (aggregate refuses it). The
/// demo's `all -b 8` at 2 ranks met this with hypercube's 4-element blocks.
#[test]
fn sizes_below_one_block_per_rank_are_skipped_and_the_rest_judged() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tiny.json");
    let out = run(
        collective(
            2,
            &[
                "all", "-b", "8", "-e", "64", "-f", "2", "-n", "5", "-w", "1", "-c", "--json",
            ],
        )
        .arg(&json),
        LIMIT,
    );
    assert_ok(&out, "bench-collective all -b 8 at 2 ranks");
    let doc = read_doc(&json);
    assert!(rows(&doc).iter().all(|r| r.size_bytes > 0), "no 0-byte row");
    assert!(
        doc.warnings
            .iter()
            .any(|w| w.starts_with("hypercube: 2 size(s) up to 16 B skipped")),
        "{:?}",
        doc.warnings
    );
    assert!(rows(&doc)
        .iter()
        .any(|r| r.collective == "hypercube" && r.size_bytes == 32));
    let out = run(
        std::process::Command::new(bin("aggregate"))
            .arg("report")
            .arg(&json)
            .args(["--profile", "loopback-demo-mpi", "--out"])
            .arg(dir.path().join("report")),
        LIMIT,
    );
    let (o, e) = integration::text(&out);
    assert!(
        o.contains("PASS     allreduce-correct"),
        "aggregate reads it:\n{o}\n{e}"
    );
}
