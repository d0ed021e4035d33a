//! bench-collective over MPI, end to end: every collective at 2, 3 and 4 ranks with
//! `--check`, the table and the JSON read back and the busbw arithmetic recomputed from
//! sizes and times; bad input refused; corruption found; a dead or absent rank ends the
//! run instead of hanging; Ctrl-C leaves an incomplete document.
//!
//! No assertion depends on speed: the deadlines only turn a hang into a failure.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use integration::{bin, mpirun, run, text};
use results::{CollectiveResult, Document, LatencyHistogram, TestResult};

const LIMIT: Duration = Duration::from_secs(300);

const COLLECTIVES: [&str; 6] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
];

/// nccl-tests' bus-bandwidth factors, written out independently of the tool.
fn factor(name: &str, n: f64) -> f64 {
    match name {
        "all_reduce" => 2.0 * (n - 1.0) / n,
        "all_gather" | "reduce_scatter" | "alltoall" => (n - 1.0) / n,
        "broadcast" | "reduce" => 1.0,
        other => panic!("unknown collective {other}"),
    }
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
    let sizes = [8u64, 128, 2048, 32768];
    assert_eq!(rs.len(), COLLECTIVES.len() * sizes.len());
    let table = table_rows(&stdout);
    assert_eq!(table.len(), rs.len(), "one table row per result:\n{stdout}");
    for (r, t) in rs.iter().zip(&table) {
        assert_eq!(r.backend, "mpi");
        assert_eq!(r.ranks, np);
        assert_eq!(r.datatype, "float32");
        assert!(COLLECTIVES.contains(&r.collective.as_str()));
        let f = factor(&r.collective, f64::from(np));
        assert!(close(r.busbw_factor, f), "{} factor", r.collective);
        // The size column is the larger buffer, rounded down to whole blocks per rank.
        let nominal = sizes[rs
            .iter()
            .filter(|x| x.collective == r.collective)
            .position(|x| std::ptr::eq(*x, *r))
            .unwrap()];
        assert!(r.size_bytes <= nominal && r.size_bytes + 4 * u64::from(np) > nominal);
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
            let algbw = r.size_bytes as f64 / (timing.time_us * 1e-6) / 1e9;
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
            // The mean time is the mean of the per-iteration maxima the histogram holds.
            let hm = h.summary_us().mean;
            assert!(
                (hm - timing.time_us).abs() <= 0.01 * timing.time_us + 0.01,
                "{hm} vs {}",
                timing.time_us
            );
        }
    }
    assert_eq!(
        stdout.matches("# Out of bounds values : 0 OK").count(),
        COLLECTIVES.len(),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("# Avg bus bandwidth    : ").count(),
        COLLECTIVES.len()
    );
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
            if ["broadcast", "reduce"].contains(&r.collective.as_str()) {
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

#[test]
fn interrupt_writes_what_was_measured_marked_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    // A single rank (MPI singleton, no launcher) with a long sweep; SIGINT after the
    // first row is printed.
    let mut child = Command::new(bin("bench-collective"))
        .args([
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
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
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
    assert_eq!(out.status.code(), Some(130), "{stderr}\n{rest:?}");
    let doc = read_doc(&json);
    assert!(!doc.complete);
    assert!(doc.incomplete_reason.unwrap().contains("interrupted"));
    assert!(
        !doc.results.is_empty(),
        "what was measured before the stop is kept"
    );
}
