//! bench-lat and bench-bw over TCP on loopback, standalone and under mpirun, read back
//! through the JSON field names of schema v1, plus the fault cases: no peer, garbage on the
//! port, a mismatched client, a peer killed mid-run, Ctrl-C, bad flags.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use integration::{bin, free_port, mpirun, run, spawn, text, wait_with_deadline};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

fn server(tool: &str, port: u16, extra: &[&str]) -> Child {
    let mut c = Command::new(bin(tool));
    c.args(["-p", &port.to_string(), "--timeout", "20"])
        .args(extra);
    spawn(&mut c)
}

fn client(tool: &str, port: u16, extra: &[&str]) -> Command {
    let mut c = Command::new(bin(tool));
    c.args(["127.0.0.1", "-p", &port.to_string(), "--timeout", "20"])
        .args(extra);
    c
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("valid JSON")
}

fn assert_ok(out: &std::process::Output, what: &str) {
    let (o, e) = text(out);
    assert!(
        out.status.success(),
        "{what} failed: {:?}\nstdout:\n{o}\nstderr:\n{e}",
        out.status
    );
}

/// Every top-level field the schema promises, with the right types.
fn assert_document(doc: &Value, tool: &str) {
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["tool"], tool);
    assert!(doc["tool_version"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(doc["git_commit"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(doc["command_line"][0].as_str().unwrap().ends_with(tool));
    for k in ["started_at", "finished_at"] {
        let t = doc[k].as_str().unwrap();
        assert!(
            t.len() >= 20 && t.contains('T') && t.ends_with('Z'),
            "{k} = {t}"
        );
    }
    assert!(doc["options"].is_object());
    let hosts = doc["hosts"].as_array().unwrap();
    assert!(hosts.len() >= 2);
    for h in hosts {
        assert!(h["hostname"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(h["kernel"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(h["cpu_model"].is_string());
        assert!(h["cores"].as_u64().unwrap() >= 1);
        assert!(h["numa_nodes"].as_u64().unwrap() >= 1);
        assert!(h["net_devices"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["name"] == "lo"));
    }
    assert!(doc["loop_overhead_ns"].as_f64().unwrap() > 0.0);
}

#[test]
fn standalone_latency_writes_every_schema_field() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lat.json");
    let port = free_port();
    let srv = server("bench-lat", port, &["-s", "64"]);
    let out = run(
        client("bench-lat", port, &["-s", "64", "-n", "300", "--json"]).arg(&json),
        LIMIT,
    );
    assert_ok(&out, "client");
    assert_ok(&wait_with_deadline(srv, LIMIT, "server"), "server");
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("#bytes #iterations    t_min[usec]"),
        "{stdout}"
    );
    assert!(stdout.contains("99.9% percentile[usec]"));

    let doc = read_json(&json);
    assert_document(&doc, "bench-lat");
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["launcher"], "standalone");
    let r = &doc["results"][0];
    assert_eq!(r["kind"], "latency");
    assert_eq!(r["test"], "send_lat");
    assert_eq!(r["transport"], "tcp");
    assert_eq!(r["size_bytes"], 64);
    assert_eq!(r["iterations"], 300);
    let l = &r["latency_us"];
    for k in [
        "min", "p50", "p90", "p99", "p999", "p9999", "max", "mean", "stdev",
    ] {
        assert!(l[k].as_f64().is_some(), "latency_us.{k} missing");
    }
    assert!(l["min"].as_f64().unwrap() > 0.0);
    assert!(l["min"].as_f64() <= l["p50"].as_f64() && l["p50"].as_f64() <= l["p99"].as_f64());
    assert!(l["p99"].as_f64() <= l["max"].as_f64());
    let h = results::LatencyHistogram::decode(r["histogram"].as_str().unwrap()).unwrap();
    assert_eq!(h.len(), 300, "histogram holds every timed iteration");
    // perftest's figures beside ours: the two largest samples dropped, and those are what
    // the table prints (t_max t_typical t_avg t_stdev 99% 99.9%).
    let p = &r["perftest_us"];
    let f = |v: &Value| v.as_f64().unwrap();
    assert!(f(&p["t_avg"]) <= f(&l["mean"]) * 1.001, "{p} vs {l}");
    assert!(f(&p["t_max"]) <= f(&l["max"]) && f(&p["t_max"]) >= f(&l["p99"]) * 0.999);
    let row = stdout
        .lines()
        .find(|line| line.split_whitespace().next() == Some("64"))
        .unwrap_or_else(|| panic!("no 64-byte row in:\n{stdout}"));
    let cols: Vec<f64> = row
        .split_whitespace()
        .take(9)
        .map(|c| c.parse().unwrap())
        .collect();
    for (i, k) in [
        (3, "t_max"),
        (4, "t_typical"),
        (5, "t_avg"),
        (6, "t_stdev"),
        (7, "p99"),
        (8, "p999"),
    ] {
        assert!(
            (cols[i] - f(&p[k])).abs() < 0.006,
            "column {i} ({k}) {} vs JSON {}: {row}",
            cols[i],
            p[k]
        );
    }
    assert!(r["pair"]["initiator"]["host"].is_string());
    assert!(r["pair"]["responder"]["host"].is_string());
}

/// The audit a document embeds judges the run's own traffic: the client's `--tclass` and
/// `--sl` (they were traffic class 0 whatever was asked, so `lossless-suite-dscp` judged
/// DSCP 0 on every node). The server sends with its own (perftest's habit: each side
/// takes -T); it was given none.
#[test]
fn the_embedded_audit_records_the_traffic_class_the_run_sends() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lat.json");
    let port = free_port();
    let srv = server("bench-lat", port, &["-s", "64"]);
    let out = run(
        client(
            "bench-lat",
            port,
            &[
                "-s", "64", "-n", "100", "--tclass", "106", "--sl", "3", "--json",
            ],
        )
        .arg(&json),
        LIMIT,
    );
    assert_ok(&out, "client");
    assert_ok(&wait_with_deadline(srv, LIMIT, "server"), "server");
    let doc = read_json(&json);
    let suite = |role: &str| {
        let h = doc["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["role"] == role);
        h.unwrap_or_else(|| panic!("no {role} in {doc}"))["audit"]["suite"].clone()
    };
    assert_eq!(suite("client")["traffic_class"], 106, "{doc}");
    assert_eq!(suite("client")["service_level"], 3, "{doc}");
    assert_eq!(suite("server")["traffic_class"], 0, "{doc}");
}

#[test]
fn standalone_bandwidth_unidirectional_bidirectional_and_streams() {
    for (extra, streams, bidi) in [
        (&[][..], 1, false),
        (&["-b"][..], 1, true),
        (&["-q", "3"][..], 3, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("bw.json");
        let port = free_port();
        let mut common = vec!["-s", "64K"];
        common.extend_from_slice(extra);
        let srv = server("bench-bw", port, &common);
        let mut args = common.clone();
        args.extend(["-n", "3000", "--interval-ms", "5", "--json"]);
        let out = run(client("bench-bw", port, &args).arg(&json), LIMIT);
        assert_ok(&out, "bench-bw client");
        assert_ok(
            &wait_with_deadline(srv, LIMIT, "bench-bw server"),
            "bench-bw server",
        );
        let (stdout, _) = text(&out);
        assert!(
            stdout.contains("BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"),
            "{stdout}"
        );

        let doc = read_json(&json);
        assert_document(&doc, "bench-bw");
        let r = &doc["results"][0];
        assert_eq!(r["kind"], "bandwidth");
        assert_eq!(r["test"], "send_bw");
        assert_eq!(r["size_bytes"], 65536);
        assert_eq!(r["streams"], streams);
        assert_eq!(r["bidirectional"], bidi);
        // -n counts per stream, as perftest counts it per QP; -b doubles it (both ways).
        let expected = 3000 * streams * if bidi { 2 } else { 1 };
        assert_eq!(r["iterations"], expected, "messages counted {extra:?}");
        let avg = r["bw_gbit_s"]["avg"].as_f64().unwrap();
        let peak = r["bw_gbit_s"]["peak"].as_f64().unwrap();
        assert!(avg > 0.0 && peak >= avg, "avg {avg} peak {peak}");
        // Average = bytes / time, recomputed from the document's own fields.
        let recomputed = expected as f64 * 65536.0 * 8.0 / r["duration_s"].as_f64().unwrap() / 1e9;
        assert!(
            (recomputed - avg).abs() / avg < 1e-6,
            "{recomputed} vs {avg}"
        );
        assert!(r["msg_rate_mpps"].as_f64().unwrap() > 0.0);
        assert!(!r["interval_gbit_s"].as_array().unwrap().is_empty());
        assert!(r["cpu"]["initiator_cores"].as_f64().unwrap() > 0.0);
        assert!(r["cpu"]["responder_cores"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn all_sizes_and_duration_mode() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("all.json");
    let port = free_port();
    let srv = server("bench-lat", port, &["-a"]);
    let out = run(
        client(
            "bench-lat",
            port,
            &["-a", "-n", "20", "--warmup", "2", "--json"],
        )
        .arg(&json),
        LIMIT,
    );
    assert_ok(&out, "client -a");
    assert_ok(&wait_with_deadline(srv, LIMIT, "server -a"), "server -a");
    let doc = read_json(&json);
    let sizes: Vec<u64> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["size_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes.len(), 23);
    assert_eq!((sizes[0], sizes[22]), (2, 8 << 20));
    // TCP opens its data connection for every size (a stream ends with its connection);
    // each row says so and how long it took.
    for r in doc["results"].as_array().unwrap() {
        assert_eq!(r["setup"]["connected"], true, "{}", r["setup"]);
        let s = r["setup"]["seconds"].as_f64().unwrap();
        assert!(s > 0.0 && s < 60.0, "setup seconds {s}");
    }

    let port = free_port();
    let srv = server("bench-bw", port, &["-s", "4K"]);
    let out = run(
        client("bench-bw", port, &["-s", "4K", "-D", "0.5", "--json"]).arg(&json),
        LIMIT,
    );
    assert_ok(&out, "client -D");
    assert_ok(&wait_with_deadline(srv, LIMIT, "server -D"), "server -D");
    let r = &read_json(&json)["results"][0];
    assert!(r["duration_s"].as_f64().unwrap() >= 0.5);
    assert!(r["iterations"].as_u64().unwrap() > 0);
    assert!(
        r["interval_gbit_s"].as_array().unwrap().len() >= 4,
        "100 ms samples over 0.5 s"
    );
}

#[test]
fn mpirun_pairs_ranks_and_rank0_writes_one_document() {
    for (np, tool, extra) in [
        (2u32, "bench-lat", &["-s", "128", "-n", "200"][..]),
        (4, "bench-bw", &["-s", "16K", "-n", "500"][..]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("mpi.json");
        let out = run(
            mpirun(np)
                .arg(bin(tool))
                .args(extra)
                .args(["--timeout", "30", "--json"])
                .arg(&json),
            LIMIT,
        );
        assert_ok(&out, &format!("mpirun -np {np} {tool}"));
        let doc = read_json(&json);
        assert_document(&doc, tool);
        assert_eq!(doc["launcher"], "mpi");
        assert_eq!(doc["ranks"], np);
        assert_eq!(doc["hosts"].as_array().unwrap().len(), np as usize);
        let mut pairs: Vec<(u64, u64)> = doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["pair"]["initiator"]["rank"].as_u64().unwrap(),
                    r["pair"]["responder"]["rank"].as_u64().unwrap(),
                )
            })
            .collect();
        pairs.sort();
        let expected: Vec<(u64, u64)> = (0..np as u64 / 2).map(|p| (2 * p, 2 * p + 1)).collect();
        assert_eq!(pairs, expected);
        let (stdout, _) = text(&out);
        assert_eq!(
            stdout.matches("#bytes").count(),
            1,
            "only rank 0 prints the header:\n{stdout}"
        );
    }
}

#[test]
fn mpirun_with_an_odd_rank_count_is_refused() {
    let out = run(
        mpirun(3)
            .arg(bin("bench-lat"))
            .args(["-n", "10", "--timeout", "10"]),
        LIMIT,
    );
    assert!(!out.status.success());
    let (_, stderr) = text(&out);
    assert!(stderr.contains("3 rank(s) cannot be paired"), "{stderr}");
}

#[test]
fn a_server_without_client_and_a_client_without_server_time_out() {
    let port = free_port();
    let out = run(
        Command::new(bin("bench-lat")).args(["-p", &port.to_string(), "--timeout", "1"]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).1.contains("no client connected within 1 s"),
        "{}",
        text(&out).1
    );

    let port = free_port().to_string();
    let out = run(
        Command::new(bin("bench-bw")).args(["127.0.0.1", "-p", &port, "--timeout", "1"]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).1.contains("no server answered"),
        "{}",
        text(&out).1
    );
}

#[test]
fn garbage_and_half_handshakes_do_not_stop_the_server() {
    let port = free_port();
    let srv = server("bench-lat", port, &[]);
    let addr = format!("127.0.0.1:{port}");
    let connect = || {
        for _ in 0..200 {
            if let Ok(s) = TcpStream::connect(&addr) {
                return s;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("server never listened on {addr}");
    };
    connect().write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    // A valid header announcing 16 bytes, then a hang-up after one.
    connect().write_all(b"FBCK\0\0\0\x10{").unwrap();
    let out = run(&mut client("bench-lat", port, &["-n", "50"]), LIMIT);
    assert_ok(&out, "honest client after garbage");
    let srv = wait_with_deadline(srv, LIMIT, "server");
    assert_ok(&srv, "server");
    let (_, stderr) = text(&srv);
    assert!(
        stderr.contains("not a fabcheck control message"),
        "{stderr}"
    );
    assert!(stderr.contains("closed the connection"), "{stderr}");
}

#[test]
fn a_mismatched_client_is_refused_and_the_server_stays_usable() {
    let port = free_port();
    let srv = server("bench-lat", port, &["-s", "64"]);
    let out = run(&mut client("bench-lat", port, &["-s", "128"]), LIMIT);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).1.contains("sizes: server [64] vs client [128]"),
        "{}",
        text(&out).1
    );
    let out = run(
        &mut client("bench-lat", port, &["-s", "64", "-n", "50"]),
        LIMIT,
    );
    assert_ok(&out, "matching client");
    assert_ok(&wait_with_deadline(srv, LIMIT, "server"), "server");
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits until the checkpoint at `path` holds at least one measured size: the run is then
/// mid-way, whatever the machine's load.
fn wait_until_measuring(path: &Path) {
    integration::wait_for_json(path, Duration::from_secs(90), "a measured size", |d| {
        d["results"].as_array().is_some_and(|r| !r.is_empty())
    });
}

#[test]
fn a_peer_killed_mid_run_ends_the_other_side_with_partial_results() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("partial.json");
    let port = free_port();
    let srv = server("bench-lat", port, &["-a"]);
    let cli = spawn(client("bench-lat", port, &["-a", "-n", "3000", "--json"]).arg(&json));
    wait_until_measuring(&json);
    signal(&srv, "-KILL");
    let _ = wait_with_deadline(srv, LIMIT, "killed server");
    let out = wait_with_deadline(cli, Duration::from_secs(60), "client after its server died");
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains("peer"),
        "the error names the peer: {stderr}"
    );
    let doc = read_json(&json);
    assert_eq!(doc["complete"], false);
    assert!(doc["incomplete_reason"]
        .as_str()
        .unwrap()
        .contains("failed at"));
    assert!(
        !doc["results"].as_array().unwrap().is_empty(),
        "sizes measured before the kill are kept"
    );

    // And the other way round: the server notices a dead client.
    let port = free_port();
    let srv = server("bench-bw", port, &["-a"]);
    let json = dir.path().join("killed-client.json");
    let cli = spawn(client("bench-bw", port, &["-a", "-n", "20000", "--json"]).arg(&json));
    wait_until_measuring(&json);
    signal(&cli, "-KILL");
    let _ = wait_with_deadline(cli, LIMIT, "killed client");
    let out = wait_with_deadline(srv, Duration::from_secs(60), "server after its client died");
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
}

#[test]
fn ctrl_c_writes_what_was_measured_marked_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("int.json");
    let port = free_port();
    let srv = server("bench-lat", port, &["-a"]);
    let cli = spawn(client("bench-lat", port, &["-a", "-n", "3000", "--json"]).arg(&json));
    wait_until_measuring(&json);
    signal(&cli, "-INT");
    let out = wait_with_deadline(cli, LIMIT, "interrupted client");
    assert_eq!(out.status.code(), Some(130), "{:?}", text(&out));
    let doc = read_json(&json);
    assert_eq!(doc["complete"], false);
    assert!(doc["incomplete_reason"]
        .as_str()
        .unwrap()
        .contains("interrupted"));
    let results = doc["results"].as_array().unwrap();
    assert!(!results.is_empty() && results.len() < 23);
    // The server learns the run ended early, prints the client's (incomplete) document and
    // exits as the client did.
    let srv = wait_with_deadline(srv, LIMIT, "server of an interrupted client");
    assert_eq!(srv.status.code(), Some(130), "{:?}", text(&srv));
}

#[test]
fn the_largest_message_is_bounded_and_a_run_of_it_stops_on_sigterm() {
    // Past 1 GiB: refused before anything is allocated.
    let out = run(Command::new(bin("bench-bw")).args(["-s", "4G"]), LIMIT);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).1.contains("largest message, 1G"),
        "{:?}",
        text(&out)
    );
    // At 1 GiB both sides stop soon after SIGTERM (2 x depth warm-up messages of it were
    // 256 GiB with no point to stop, and a run outlived SIGTERM by minutes).
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("big.json");
    let port = free_port();
    let srv = server("bench-bw", port, &["-s", "1G", "--transport", "tcp"]);
    let cli = spawn(
        client(
            "bench-bw",
            port,
            &["-s", "1G", "--transport", "tcp", "--json"],
        )
        .arg(&json),
    );
    std::thread::sleep(Duration::from_secs(4));
    let t = std::time::Instant::now();
    signal(&cli, "-TERM");
    signal(&srv, "-TERM");
    let c = wait_with_deadline(cli, LIMIT, "client of 1 GiB");
    let s = wait_with_deadline(srv, LIMIT, "server of 1 GiB");
    let took = t.elapsed();
    assert_eq!(c.status.code(), Some(130), "{:?}", text(&c));
    assert_eq!(s.status.code(), Some(130), "{:?}", text(&s));
    // A bound against a hang, not a speed claim: 0.5 s on an idle 2-core machine.
    assert!(took < Duration::from_secs(10), "stopping took {took:?}");
    assert_eq!(read_json(&json)["complete"], false);
}

#[test]
fn bad_input_is_refused_with_exit_code_2_before_any_measurement() {
    let cases: &[(&str, &[&str], &str)] = &[
        ("bench-lat", &["--bogus"], "--bogus"),
        ("bench-lat", &["-s", "0"], "at least 1 byte"),
        ("bench-lat", &["-s", "lots"], "not a size"),
        ("bench-bw", &["-q", "0"], "qps"),
        (
            "bench-lat",
            &["--test", "write", "--transport", "tcp"],
            "--transport verbs",
        ),
        (
            "bench-lat",
            &["127.0.0.1", "--json", "/nonexistent-dir/x.json"],
            "cannot write the JSON",
        ),
        ("bench-lat", &["-n", "10", "-D", "1"], "cannot be used with"),
        // perftest's -Q and -l: verbs only, a chain within the send queue, the
        // moderation dividing the chain.
        (
            "bench-bw",
            &["--transport", "tcp", "-Q", "10"],
            "over tcp there is none",
        ),
        (
            "bench-bw",
            &["--transport", "tcp", "-l", "256", "-t", "128"],
            "must fit in the send queue (-t 128)",
        ),
        (
            "bench-bw",
            &["--transport", "tcp", "-l", "8", "-Q", "3"],
            "multiple of the completion moderation",
        ),
        ("bench-bw", &["-Q", "0"], "cq-mod"),
    ];
    for (tool, args, needle) in cases {
        let out = run(Command::new(bin(tool)).args(*args), Duration::from_secs(30));
        assert_eq!(
            out.status.code(),
            Some(2),
            "{tool} {args:?}: {:?}",
            text(&out)
        );
        let (_, stderr) = text(&out);
        assert!(
            stderr.contains(needle),
            "{tool} {args:?}: expected '{needle}' in:\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn ctrl_c_on_mpirun_keeps_rank_0_results() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("mpi-int.json");
    let job = spawn(
        mpirun(2)
            .arg(bin("bench-lat"))
            .args(["-a", "-n", "3000", "--timeout", "30", "--json"])
            .arg(&json),
    );
    wait_until_measuring(&json);
    signal(&job, "-INT");
    let out = wait_with_deadline(job, LIMIT, "interrupted mpirun");
    assert!(!out.status.success());
    let doc = read_json(&json);
    assert_eq!(doc["complete"], false);
    let results = doc["results"].as_array().unwrap();
    assert!(
        !results.is_empty() && results.len() < 23,
        "{} results",
        results.len()
    );
}

/// The CPUs the kernel lets `pid`'s main thread run on (`Cpus_allowed_list`).
fn cpus_allowed(pid: u32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

#[test]
fn the_measuring_thread_is_placed_by_cpu_or_left_to_the_launcher_and_recorded() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let several = online.trim() != "0";
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("placed.json");
    let port = free_port();
    // The server on CPU 0 by --cpu; the client restricted to CPU 0 by taskset, the way a
    // launcher binds, which is left as it is.
    let srv = server("bench-lat", port, &["-s", "64", "--cpu", "0"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while cpus_allowed(srv.id()).as_deref() != Some("0") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        cpus_allowed(srv.id()).as_deref(),
        Some("0"),
        "the server's thread was not bound to CPU 0"
    );
    let inner = client("bench-lat", port, &["-s", "64", "-n", "200", "--json"]);
    let mut c = Command::new("taskset");
    c.args(["-c", "0"])
        .arg(inner.get_program())
        .args(inner.get_args())
        .arg(&json);
    let out = run(&mut c, LIMIT);
    assert_ok(&out, "client under taskset");
    assert_ok(&wait_with_deadline(srv, LIMIT, "server"), "server");
    let doc = read_json(&json);
    let by_role = |role: &str| {
        doc["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["role"] == role)
            .unwrap_or_else(|| panic!("no {role} in {}", doc["hosts"]))["placement"]
            .clone()
    };
    let s = by_role("server");
    assert_eq!(
        (s["cpus"].as_str(), s["source"].as_str()),
        (Some("0"), Some("cpu-option"))
    );
    let c = by_role("client");
    assert_eq!(c["cpus"], "0");
    // On a one-CPU host taskset restricts nothing, and loopback has no NUMA node.
    assert_eq!(
        c["source"],
        if several { "launcher" } else { "unbound" },
        "{c}"
    );

    for (args, needle) in [
        (
            &["--cpu", "4095"][..],
            "CPU 4095 is not online on this host",
        ),
        (&["--cpu", "two"][..], "not a CPU list"),
        (&["--cpu", "3-1"][..], "not a CPU list"),
    ] {
        let out = run(
            Command::new(bin("bench-lat"))
                .args(args)
                .args(["-p", &free_port().to_string()]),
            Duration::from_secs(30),
        );
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: expected '{needle}' in:\n{stderr}"
        );
    }
}
