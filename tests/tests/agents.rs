//! Sweeps without MPI: real agents (`bench-bw --serve`) on loopback driven by a real
//! coordinator (`bench-bw --hosts FILE`), and the faults of a control plane: an agent
//! killed mid-sweep, an agent that never answers, a wrong secret, agents of different
//! options, garbage on an agent's port, the coordinator interrupted.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::collections::BTreeSet;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use integration::{bin, free_port, run, spawn, text, wait_for_json, wait_with_deadline};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);
const SECRET: &str = "test-secret-3f9a";

/// Agents that are killed when the test ends, however it ends.
struct Agents {
    children: Vec<Child>,
    ports: Vec<u16>,
    dir: tempfile::TempDir,
}

impl Drop for Agents {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Agents {
    fn start(tool: &str, n: usize, extra: &[&[&str]]) -> Agents {
        let dir = tempfile::tempdir().unwrap();
        let mut children = Vec::new();
        let mut ports = Vec::new();
        for i in 0..n {
            let port = free_port();
            let log = std::fs::File::create(dir.path().join(format!("agent{i}.log"))).unwrap();
            let mut c = Command::new(bin(tool));
            c.args(["--serve", "-p", &port.to_string(), "--timeout", "10"])
                .args(extra.get(i).copied().unwrap_or(&[]))
                .env("FABCHECK_SECRET", SECRET)
                .stdout(log.try_clone().unwrap())
                .stderr(log);
            children.push(c.spawn().expect("spawn agent"));
            ports.push(port);
        }
        let a = Agents {
            children,
            ports,
            dir,
        };
        for p in &a.ports {
            wait_listening(*p);
        }
        a
    }

    fn hosts(&self, extra: &[String]) -> PathBuf {
        let path = self.dir.path().join("hosts");
        let mut f = std::fs::File::create(&path).unwrap();
        writeln!(f, "# agents of the test").unwrap();
        for p in &self.ports {
            writeln!(f, "127.0.0.1:{p}").unwrap();
        }
        for e in extra {
            writeln!(f, "{e}").unwrap();
        }
        path
    }

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("agent{i}.log"))).unwrap_or_default()
    }
}

fn wait_listening(port: u16) {
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "agent on {port} never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn coordinator(tool: &str, hosts: &Path, args: &[&str], json: &Path) -> Command {
    let mut c = Command::new(bin(tool));
    c.arg("--hosts")
        .arg(hosts)
        .args(["--include-local", "--timeout", "10"])
        .args(args)
        .arg("--json")
        .arg(json)
        .env("FABCHECK_SECRET", SECRET);
    c
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Unordered rank pairs measured, asserting each is measured once and rounds are disjoint.
fn measured(doc: &Value) -> BTreeSet<(u64, u64)> {
    let mut met = BTreeSet::new();
    let mut busy = std::collections::HashMap::<u64, BTreeSet<u64>>::new();
    for r in doc["results"].as_array().unwrap() {
        let p = &r["pair"];
        let (a, b) = (
            p["initiator"]["rank"].as_u64().unwrap(),
            p["responder"]["rank"].as_u64().unwrap(),
        );
        let round = p["round"].as_u64().unwrap();
        assert!(
            busy.entry(round).or_default().insert(a),
            "rank {a} twice in round {round}"
        );
        assert!(
            busy.entry(round).or_default().insert(b),
            "rank {b} twice in round {round}"
        );
        assert!(met.insert((a.min(b), a.max(b))), "pair {a}-{b} twice");
    }
    met
}

#[test]
fn eight_agents_swept_all_pairs_and_judged_like_an_mpi_sweep() {
    let agents = Agents::start("bench-bw", 8, &[]);
    let hosts = agents.hosts(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("agents.json");
    let out = run(
        &mut coordinator(
            "bench-bw",
            &hosts,
            &["-s", "16K", "-n", "300", "--pattern", "all-pairs"],
            &json,
        ),
        LIMIT,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let doc = read(&json);
    assert_eq!(doc["launcher"], "agents");
    assert_eq!(doc["ranks"], 8);
    assert_eq!(doc["sweep"]["rounds"], 7);
    assert_eq!(doc["hosts"].as_array().unwrap().len(), 8);
    assert_eq!(measured(&doc).len(), 28, "every pair of 8 agents once");
    let text_doc = std::fs::read_to_string(&json).unwrap();
    assert!(
        !text_doc.contains(SECRET),
        "the secret must never reach the document"
    );
    assert!(!stderr.contains(SECRET) && !stdout.contains(SECRET));

    // The same pattern under mpirun, and both judged by aggregate together.
    let mpi_json = dir.path().join("mpi.json");
    let out = run(
        integration::mpirun(8)
            .arg(bin("bench-bw"))
            .args([
                "-s",
                "16K",
                "-n",
                "300",
                "--pattern",
                "all-pairs",
                "--include-local",
                "--timeout",
                "20",
                "--json",
            ])
            .arg(&mpi_json),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let mpi = read(&mpi_json);
    assert_eq!(mpi["sweep"]["planned_pairs"], doc["sweep"]["planned_pairs"]);
    let profile = dir.path().join("p.toml");
    std::fs::write(
        &profile,
        "name = \"agents-test\"\ndescription = \"bandwidth measured\"\n[[check]]\nid = \"bw\"\ndescription = \"some bandwidth on every pair\"\nmetric = \"bw_avg\"\nunit = \"Gb/s\"\nmin = 0.001\ntest = \"send_bw\"\neach_pair = true\n",
    )
    .unwrap();
    let report = dir.path().join("report");
    let out = run(
        Command::new(bin("aggregate"))
            .arg("report")
            .arg(&json)
            .arg(&mpi_json)
            .arg("--profile")
            .arg(&profile)
            .arg("--out")
            .arg(&report),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.contains("PASS"), "{md}");
}

#[test]
fn agents_that_die_or_never_answer_are_named_and_the_sweep_goes_on() {
    let mut agents = Agents::start("bench-lat", 5, &[]);
    // A listener that accepts and never says a word: an agent hung at start.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_name = format!("127.0.0.1:{}", silent.local_addr().unwrap().port());
    let hosts = agents.hosts(std::slice::from_ref(&silent_name));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("faults.json");
    let job = spawn(&mut coordinator(
        "bench-lat",
        &hosts,
        &["-s", "8", "-D", "0.6", "--pattern", "all-pairs"],
        &json,
    ));
    // Kill agent 2 once the sweep is under way (after the first round's checkpoint).
    wait_for_json(
        &json,
        Duration::from_secs(60),
        "the first round's checkpoint",
        |_| true,
    );
    agents.children[2].kill().unwrap();
    let out = wait_with_deadline(job, LIMIT, "coordinator with faults");
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "pairs failed: exit 1\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains(&silent_name),
        "the silent agent is named: {stderr}"
    );
    assert!(
        stderr.contains("dropped out"),
        "the killed agent is named: {stderr}"
    );
    let doc = read(&json);
    assert_eq!(doc["complete"], true, "the sweep finished its rounds");
    let failed = doc["failed_pairs"].as_array().unwrap();
    let ranks_in_failures: BTreeSet<u64> = failed
        .iter()
        .flat_map(|f| {
            [
                f["pair"]["initiator"]["rank"].as_u64().unwrap(),
                f["pair"]["responder"]["rank"].as_u64().unwrap(),
            ]
        })
        .collect();
    assert!(
        ranks_in_failures.contains(&5),
        "the silent agent's pairs failed: {failed:?}"
    );
    assert!(
        ranks_in_failures.contains(&2),
        "the killed agent's pairs failed: {failed:?}"
    );
    // The silent agent meets each of the 5 others once: all failed; the pairs among the
    // four healthy agents were all measured.
    let met = measured(&doc);
    for (a, b) in [(0, 1), (0, 3), (0, 4), (1, 3), (1, 4), (3, 4)] {
        assert!(met.contains(&(a, b)), "{a}-{b} measured: {met:?}");
    }
    drop(silent);
}

#[test]
fn a_wrong_secret_and_mismatched_agents_are_refused_before_measuring() {
    let agents = Agents::start("bench-bw", 3, &[&[], &[], &["-m", "1024"]]);
    let hosts = agents.hosts(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("x.json");
    // Wrong secret: refused by every agent, and each agent logs it.
    let out = run(
        coordinator("bench-bw", &hosts, &["-n", "10"], &json).env("FABCHECK_SECRET", "not-it"),
        LIMIT,
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("shared secret"), "{stderr}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        agents.log(0).contains("authentication failed"),
        "{}",
        agents.log(0)
    );
    assert!(!json.exists(), "nothing measured");
    // No secret at all: a usage error that says how to give one.
    let out = run(
        coordinator("bench-bw", &hosts, &["-n", "10"], &json).env_remove("FABCHECK_SECRET"),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("--secret-file"), "{:?}", text(&out));
    // Agents started with different options: named, refused.
    let out = run(
        &mut coordinator("bench-bw", &hosts, &["-n", "10"], &json),
        LIMIT,
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("mtu: 1024 on 127.0.0.1:"), "{stderr}");
    // A bench-lat coordinator meets bench-bw agents: refused with the way out.
    let out = run(
        &mut coordinator("bench-lat", &hosts, &["-n", "10"], &json),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).1.contains("start `bench-lat --serve` agents"),
        "{:?}",
        text(&out)
    );
}

#[test]
fn agents_survive_garbage_and_an_interrupted_coordinator() {
    let agents = Agents::start("bench-bw", 4, &[]);
    let hosts = agents.hosts(&[]);
    // Garbage on an agent's port, and a half-open connection that says nothing.
    let mut g = std::net::TcpStream::connect(("127.0.0.1", agents.ports[0])).unwrap();
    g.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let _quiet = std::net::TcpStream::connect(("127.0.0.1", agents.ports[1])).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A long sweep, interrupted with SIGINT after its first round.
    let json = dir.path().join("int.json");
    let job = spawn(&mut coordinator(
        "bench-bw",
        &hosts,
        &["-s", "16K", "-D", "1", "--pattern", "all-pairs"],
        &json,
    ));
    wait_for_json(
        &json,
        Duration::from_secs(60),
        "the first round's checkpoint",
        |_| true,
    );
    let _ = Command::new("kill")
        .args(["-INT", &job.id().to_string()])
        .status();
    let out = wait_with_deadline(job, LIMIT, "interrupted coordinator");
    assert_eq!(out.status.code(), Some(130), "{:?}", text(&out));
    let doc = read(&json);
    assert_eq!(doc["complete"], false);
    assert!(!doc["results"].as_array().unwrap().is_empty());
    // The same agents take the next sweep at once.
    let json2 = dir.path().join("next.json");
    let out = run(
        &mut coordinator(
            "bench-bw",
            &hosts,
            &["-s", "4K", "-n", "200", "--pattern", "ring"],
            &json2,
        ),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(measured(&read(&json2)).len(), 4);
    assert!(
        agents.log(0).contains("ignored a connection"),
        "{}",
        agents.log(0)
    );
}

/// A coordinator that finds the agents in another's sweep asks again until its
/// `--timeout` (a runner's step stopped and resumed at once meets agents still finishing
/// their pair: on the simulated fabric the resumed latency sweep was refused at once),
/// says so once per agent, and runs when they are free; still busy at its timeout, it
/// names every agent and what holds it (exit 2).
#[test]
fn a_coordinator_waits_for_agents_busy_with_another_until_its_timeout() {
    let agents = Agents::start("bench-bw", 2, &[]);
    let hosts = agents.hosts(&[]);
    let dir = tempfile::tempdir().unwrap();
    // Starts a 3-second sweep and returns once agent 1 has taken it (its `n`-th coordinator).
    let first = |name: &str, n: usize| {
        let job = spawn(&mut coordinator(
            "bench-bw",
            &hosts,
            &["-s", "16K", "-D", "3"],
            &dir.path().join(name),
        ));
        let t0 = Instant::now();
        while agents.log(1).matches("authenticated").count() < n {
            assert!(t0.elapsed() < Duration::from_secs(30), "{}", agents.log(1));
            std::thread::sleep(Duration::from_millis(20));
        }
        job
    };
    let busy = first("first.json", 1);
    let out = run(
        &mut coordinator(
            "bench-bw",
            &hosts,
            &["-s", "4K", "-n", "100"],
            &dir.path().join("second.json"),
        ),
        LIMIT,
    );
    let (_, e) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{e}");
    assert_eq!(
        e.matches("busy: taking part in a sweep run by").count(),
        2,
        "{e}"
    );
    let doc = read(&dir.path().join("second.json"));
    assert_eq!(doc["results"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(
        wait_with_deadline(busy, LIMIT, "first").status.code(),
        Some(0)
    );

    let busy = first("third.json", 3);
    // The helper's --timeout is 10 s; this coordinator waits one.
    let fourth = dir.path().join("fourth.json");
    let out = run(
        Command::new(bin("bench-bw"))
            .arg("--hosts")
            .arg(&hosts)
            .args([
                "--include-local",
                "--timeout",
                "1",
                "-s",
                "4K",
                "-n",
                "100",
                "--json",
            ])
            .arg(&fourth)
            .env("FABCHECK_SECRET", SECRET),
        LIMIT,
    );
    let (_, e) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert_eq!(
        e.matches("(still after 1 s: wait for that sweep or stop it)")
            .count(),
        2,
        "{e}"
    );
    assert!(!fourth.exists());
    assert_eq!(
        wait_with_deadline(busy, LIMIT, "third").status.code(),
        Some(0)
    );
}

/// One HTTP request to an agent's metrics port: (status line, body).
fn scrape(port: u16, request: &str) -> (String, String) {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let (head, body) = all.split_once("\r\n\r\n").expect("an HTTP answer");
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

#[test]
fn agents_answer_prometheus_scrapes_with_live_counters_and_the_last_sweep() {
    let m: Vec<u16> = (0..2).map(|_| free_port()).collect();
    let flags: Vec<Vec<String>> = m
        .iter()
        .map(|p| vec!["--metrics".to_string(), format!("127.0.0.1:{p}")])
        .collect();
    let flags: Vec<Vec<&str>> = flags
        .iter()
        .map(|f| f.iter().map(String::as_str).collect())
        .collect();
    let extra: Vec<&[&str]> = flags.iter().map(Vec::as_slice).collect();
    let agents = Agents::start("bench-bw", 2, &extra);
    for p in &m {
        wait_listening(*p);
    }
    let get = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    let (status, before) = scrape(m[0], get);
    assert_eq!(status, "HTTP/1.1 200 OK", "{before}");
    // Loopback is always there: its state, statistics and flaps come from sysfs.
    assert!(before.contains("fabcheck_netdev_up{host="), "{before}");
    assert!(
        before.contains("interface=\"lo\",statistic=\"rx_bytes\""),
        "{before}"
    );
    assert!(before.contains("fabcheck_node_source_up{"), "{before}");
    assert!(
        !before.contains("fabcheck_agent_pair_bandwidth_bytes_per_second"),
        "no sweep yet"
    );
    // Anything but GET /metrics is refused with the right status.
    assert!(scrape(m[0], "GET / HTTP/1.1\r\n\r\n").0.contains("404"));
    assert!(scrape(m[0], "POST /metrics HTTP/1.1\r\n\r\n")
        .0
        .contains("405"));

    let hosts = agents.hosts(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sweep.json");
    let out = run(
        &mut coordinator("bench-bw", &hosts, &["-s", "16K", "-n", "200"], &json),
        LIMIT,
    );
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
    // The initiator of the one pair reports its figure; whichever agent it was.
    let after: Vec<String> = m.iter().map(|p| scrape(*p, get).1).collect();
    let with_pair: Vec<&String> = after
        .iter()
        .filter(|t| t.contains("fabcheck_agent_pair_bandwidth_bytes_per_second{"))
        .collect();
    assert_eq!(with_pair.len(), 1, "one initiator: {after:?}");
    assert!(
        with_pair[0].contains("size_bytes=\"16384\""),
        "{}",
        with_pair[0]
    );
    assert!(after
        .iter()
        .all(|t| t.contains("fabcheck_agent_last_sweep_timestamp_seconds{")));

    // The exposition passes the real promtool, and promtool does reject a broken one.
    {
        integration::require("promtool", "prometheus");
        let f = dir.path().join("agent.prom");
        for (text_, ok) in [
            (with_pair[0].clone(), true),
            ("fabcheck_x{a=\"1\" 2\n".to_string(), false),
        ] {
            std::fs::write(&f, &text_).unwrap();
            let out = run(
                Command::new("sh")
                    .arg("-c")
                    .arg(format!("promtool check metrics < {}", f.display())),
                Duration::from_secs(60),
            );
            let (o, e) = text(&out);
            assert_eq!(out.status.success(), ok, "promtool on {text_}:\n{o}{e}");
            if ok {
                assert!(o.trim().is_empty() && e.trim().is_empty(), "lint: {o}{e}");
            }
        }
    }
}

/// The incast over agents (`bench-bw --pattern incast --hosts`): five agents, each a rank
/// that runs the rounds as an MPI rank would, the coordinator relaying their barriers and
/// exchanges and writing the document (`launcher: agents`): every rank the receiver once,
/// the next two its senders, a victim beside each round, the same agents' sweep service
/// untouched afterwards (a sweep runs on them next). An agent missing from the start is
/// named and nothing runs; one killed in the middle ends the run for all, named, with no
/// hang.
#[test]
fn an_incast_runs_over_agents_and_a_lost_agent_ends_it_named() {
    let agents = Agents::start("bench-bw", 5, &[]);
    let hosts = agents.hosts(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("incast.json");
    let out = run(
        &mut coordinator(
            "bench-bw",
            &hosts,
            &["--pattern", "incast:2", "--transport", "tcp", "-D", "0.5"],
            &json,
        ),
        LIMIT,
    );
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
    let doc = read(&json);
    assert_eq!(doc["launcher"], "agents");
    assert_eq!(doc["ranks"], 5);
    let inc = &doc["congestion"]["incast"];
    assert_eq!(inc["transport"], "tcp");
    let rounds = inc["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 5);
    let rank = |name: &Value| {
        name.as_str()
            .unwrap()
            .rsplit('#')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    for (r, round) in rounds.iter().enumerate() {
        let r = r as u64;
        assert_eq!(rank(&round["receiver"]), r, "{round}");
        let senders: Vec<u64> = round["senders"]
            .as_array()
            .unwrap()
            .iter()
            .map(rank)
            .collect();
        assert_eq!(senders, [(r + 1) % 5, (r + 2) % 5], "{round}");
        assert!(
            round["sender_gbit_s"]
                .as_array()
                .unwrap()
                .iter()
                .all(|x| x.as_f64().unwrap() > 0.0),
            "{round}"
        );
        let v = &round["victim"];
        assert_eq!(
            (rank(&v["sender"]), rank(&v["receiver"])),
            ((r + 3) % 5, (r + 4) % 5),
            "{v}"
        );
    }
    // The agents serve sweeps as before.
    let sweep = dir.path().join("sweep.json");
    let out = run(
        &mut coordinator(
            "bench-bw",
            &hosts,
            &["--pattern", "all-pairs", "-s", "4096", "-n", "20"],
            &sweep,
        ),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));

    // An agent that never answers: named, nothing measured.
    let dead = format!("127.0.0.1:{}", integration::free_port());
    let with_dead = agents.hosts(std::slice::from_ref(&dead));
    let out = run(
        &mut coordinator(
            "bench-bw",
            &with_dead,
            &["--pattern", "incast", "-D", "0.5"],
            &json,
        ),
        LIMIT,
    );
    let (_, e) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&dead) && e.contains("every rank of an incast"),
        "{e}"
    );

    // An agent killed in the middle: the run ends for every agent, named, well within the
    // timeouts, and the coordinator's exit code says it failed.
    let mut agents = agents;
    let hosts = agents.hosts(&[]);
    let c = coordinator(
        "bench-bw",
        &hosts,
        &["--pattern", "incast:2", "--transport", "tcp", "-D", "1"],
        &json,
    );
    let e = killed_mid_run(&mut agents, 3, c);
    assert!(
        e.contains("127.0.0.1:") && e.contains("incast ended early"),
        "{e}"
    );
    // The four left were stopped, not stuck: they run the next sweep.
    let four = dir.path().join("four");
    let lines: Vec<String> = agents
        .ports
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .map(|(_, p)| format!("127.0.0.1:{p}"))
        .collect();
    std::fs::write(&four, lines.join("\n")).unwrap();
    let out = run(
        &mut coordinator(
            "bench-bw",
            &four,
            &["--pattern", "all-pairs", "-s", "4096", "-n", "20"],
            &sweep,
        ),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
}

/// The roles of a congestion document: (node, role, group) in node order.
fn congestion_roles(doc: &Value) -> Vec<(String, String, Option<u64>)> {
    doc["congestion"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["node"].as_str().unwrap().to_string(),
                n["role"].as_str().unwrap().to_string(),
                n["group"].as_u64(),
            )
        })
        .collect()
}

/// bench-congestion over `bench-bw --serve` agents, without MPI: every agent is a rank,
/// the seed gives the same split as under mpirun with as many ranks (the nodes have the
/// same names), the ring latency and bandwidth are measured isolated and loaded while
/// every congestor group moves bytes, and the allreduce canary, MPI's, is listed as not
/// run, with why, instead of a row. Agents of another tool are refused with the ones to
/// start; an agent killed in the middle ends the run, named, with no hang.
#[test]
fn a_congestion_run_goes_over_the_agents_and_splits_as_under_mpi() {
    let agents = Agents::start("bench-bw", 6, &[]);
    let hosts = agents.hosts(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("congestion.json");
    let args = [
        "--seed",
        "11",
        "--phase-seconds",
        "0.3",
        "--transport",
        "tcp",
    ];
    let out = run(
        &mut coordinator("bench-congestion", &hosts, &args, &json),
        LIMIT,
    );
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
    assert!(
        o.contains("impact avg") && o.contains("allreduce_8b: not run"),
        "{o}"
    );
    let doc = read(&json);
    assert_eq!(doc["tool"], "bench-congestion");
    assert_eq!(doc["launcher"], "agents");
    assert_eq!(doc["ranks"], 6);
    let c = &doc["congestion"];
    assert_eq!(c["seed"], 11);
    assert_eq!(c["transport"], "tcp");
    let tests: Vec<&str> = c["canary_tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["test"].as_str().unwrap())
        .collect();
    assert_eq!(tests, ["ring_latency_8b", "ring_bandwidth_128kib"]);
    for t in c["canary_tests"].as_array().unwrap() {
        for phase in ["isolated", "loaded"] {
            assert!(t[phase]["mean"].as_f64().unwrap() > 0.0, "{t}");
        }
    }
    let skipped = c["skipped_tests"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{c}");
    assert_eq!(skipped[0]["test"], "allreduce_8b");
    assert!(
        skipped[0]["why"].as_str().unwrap().contains("MPI"),
        "{skipped:?}"
    );
    let groups = c["congestor_throughput"].as_array().unwrap();
    assert!(!groups.is_empty(), "{c}");
    for g in groups {
        assert!(g["bytes"].as_u64().unwrap() > 0, "{g}");
    }

    // The report says who launched it and which canary did not run, and why.
    let report = dir.path().join("report");
    let r = run(
        Command::new(bin("aggregate"))
            .args(["report", "--profile", "roce-100g", "--out"])
            .arg(&report)
            .arg(&json),
        LIMIT,
    );
    assert!(matches!(r.status.code(), Some(0 | 1)), "{:?}", text(&r));
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(
        md.contains("launched by agents") && md.contains("Canary allreduce_8b: not run"),
        "{md}"
    );

    // The same seed under mpirun over as many ranks: the same roles for the same nodes.
    let mpi_json = dir.path().join("mpi.json");
    let out = run(
        integration::mpirun(6)
            .arg(bin("bench-congestion"))
            .args([
                "--include-local",
                "--bind-addr",
                "127.0.0.1",
                "--timeout",
                "10",
            ])
            .args(args)
            .arg("--json")
            .arg(&mpi_json),
        LIMIT,
    );
    assert!(out.status.success(), "{:?}", text(&out));
    let mpi = read(&mpi_json);
    assert_eq!(congestion_roles(&mpi), congestion_roles(&doc));
    assert_eq!(mpi["congestion"]["ring"], doc["congestion"]["ring"]);
    assert_eq!(
        mpi["congestion"]["canary_tests"].as_array().unwrap().len(),
        3
    );

    // bench-lat agents cannot stream: refused, naming the agents to start.
    let lat = Agents::start("bench-lat", 4, &[]);
    let out = run(
        &mut coordinator("bench-congestion", &lat.hosts(&[]), &args, &json),
        LIMIT,
    );
    let (_, e) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("start `bench-bw --serve` agents"), "{e}");

    // An agent killed in the middle: the run ends for every agent, named, and the
    // coordinator says it failed.
    let mut agents = agents;
    let c = coordinator(
        "bench-congestion",
        &hosts,
        &["--phase-seconds", "2", "--transport", "tcp"],
        &json,
    );
    let e = killed_mid_run(&mut agents, 2, c);
    assert!(
        e.contains("127.0.0.1:") && e.contains("congestion run ended early"),
        "{e}"
    );
}

/// Starts the coordinator `c`, kills agent `victim` 3 s into its run, and returns the
/// coordinator's standard error once it has ended, asserting that it said it failed (exit
/// 2) well within the timeouts: the run ends for every agent, with no hang.
fn killed_mid_run(agents: &mut Agents, victim: usize, mut c: Command) -> String {
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let _ = agents.children[victim].kill();
    let started = Instant::now();
    let out = wait_with_deadline(child, LIMIT, "coordinator");
    let (_, e) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "{:?}",
        started.elapsed()
    );
    e
}

/// The acceptance runner over agents (no MPI): the link stage's sweeps go to the
/// `bench-bw` and `bench-lat` agents through their coordinators, the collectives are
/// recorded as not run and their check MISSING with why, and the verdict says so (exit 1).
/// Three agents of each tool on this host: each counted as a node (a rehearsal).
#[test]
fn the_acceptance_runner_drives_the_agents_and_says_what_it_could_not_run() {
    let bw = Agents::start("bench-bw", 3, &[]);
    let lat = Agents::start("bench-lat", 3, &[]);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let mut c = Command::new(bin("fabcheck"));
    c.args(["accept", "--profile", "loopback-demo-cluster", "--agents"])
        .arg(bw.hosts(&[]))
        .arg("--lat-agents")
        .arg(lat.hosts(&[]))
        .arg("--out")
        .arg(&dir)
        .env("FABCHECK_SECRET", SECRET)
        .env_remove("SLURM_JOB_NUM_NODES")
        .env_remove("SLURM_NNODES");
    let res = run(&mut c, Duration::from_secs(300));
    let (so, se) = text(&res);
    assert_eq!(res.status.code(), Some(1), "{so}\n{se}");
    assert!(
        so.contains("3 agent(s) on this host, each counted as a node"),
        "{so}"
    );
    assert!(
        so.contains("bench-bw --pattern all-pairs") && so.contains("--hosts "),
        "{so}"
    );
    assert!(
        so.contains("[collectives 1/1] not run: not over agents: the collectives need MPI"),
        "{so}"
    );
    for id in [
        "sweep-coverage",
        "sweep-no-failed-pair",
        "send-bw-large",
        "send-lat-small-p50",
    ] {
        assert!(
            so.lines().any(|l| l.starts_with("PASS") && l.contains(id)),
            "{id}\n{so}"
        );
    }
    assert!(
        so.lines()
            .any(|l| l.starts_with("MISSING") && l.contains("allreduce-correct")),
        "{so}"
    );
    assert!(
        so.contains("verdict: FAIL (6 passed, 0 failed, 1 missing"),
        "{so}"
    );
    for doc in ["01-links-bench-bw.json", "02-links-bench-lat.json"] {
        let d = read(&dir.join("results").join(doc));
        assert_eq!(d["launcher"], "agents", "{doc}");
    }
    let state = read(&dir.join("accept.json"));
    let skipped = state["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "collectives")
        .unwrap();
    assert_eq!(skipped["status"], "skipped");
    assert!(skipped["note"].as_str().unwrap().contains("need MPI"));
}
