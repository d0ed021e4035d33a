//! `fabcheck accept`, the acceptance runner, end to end with the real binaries: the plan a
//! contract profile needs at 1024 nodes, a rehearsal on this host that passes, one that a
//! bound it cannot meet fails, and a run stopped by SIGTERM mid-stage that `--resume`
//! finishes with the same verdict, keeping what was measured.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use integration::{bin, spawn, text, wait_with_deadline};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(300);

fn fabcheck(args: &[&str]) -> Command {
    subcommand("accept", args)
}

fn subcommand(sub: &str, args: &[&str]) -> Command {
    let mut c = Command::new(bin("fabcheck"));
    c.arg(sub)
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("SLURM_JOB_NUM_NODES")
        .env_remove("SLURM_NNODES")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// The loopback profile's link stage rehearsed on three ranks into `out`.
fn rehearse_links(out: &Path, what: &str) -> std::process::Output {
    let out = out.to_str().unwrap();
    wait_with_deadline(
        spawn(&mut fabcheck(&[
            "--profile",
            "loopback-demo-cluster",
            "--local",
            "3",
            "--stages",
            "links",
            "--out",
            out,
        ])),
        LIMIT,
        what,
    )
}

/// One rehearsal at a time: each runs every rank of its own on the same two cores, and
/// two at once would make each other's latency tails the figures judged.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static RUNS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    RUNS.lock().unwrap_or_else(|e| e.into_inner())
}

fn state(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("accept.json")).unwrap()).unwrap()
}

fn statuses(out: &Path) -> Vec<String> {
    state(out)["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_contract_profile_plans_a_run_for_every_check_and_the_link_stage_fits_30_minutes() {
    let out = wait_with_deadline(
        spawn(&mut fabcheck(&[
            "--profile",
            "roce-100g",
            "--dry-run",
            "--nodes",
            "1024",
            "--nics-per-node",
            "8",
            "--out",
            "/nonexistent/never-written",
        ])),
        LIMIT,
        "dry run",
    );
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{o}{e}");
    assert!(!Path::new("/nonexistent/never-written").exists());
    // Every check of the shipped contract is fed by a planned run.
    let profile = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles/roce-100g.toml"),
    )
    .unwrap();
    let ids: Vec<&str> = profile
        .lines()
        .filter_map(|l| l.strip_prefix("id = \""))
        .map(|l| l.trim_end_matches('"'))
        .collect();
    assert!(ids.len() >= 15, "{ids:?}");
    for id in ids {
        assert!(
            o.lines()
                .any(|l| l.contains("feeds") && l.split([' ', ',']).any(|w| w == id)),
            "no run feeds {id}:\n{o}"
        );
    }
    for table in ["lossless-*", "inventory-*", "load-impact-*"] {
        assert!(o.contains(table), "{table}:\n{o}");
    }
    // "stage links (projected 24m 10s)": within the field's 30 minutes.
    let links = o.lines().find(|l| l.starts_with("stage links")).unwrap();
    let minutes: u64 = links
        .split("projected ")
        .nth(1)
        .and_then(|r| r.split('m').next())
        .and_then(|m| m.trim().parse().ok())
        .unwrap_or_else(|| panic!("{links}"));
    assert!((10..30).contains(&minutes), "{links}");
    assert!(o.contains("-np 8192") && o.contains("-d auto"), "{o}");
}

#[test]
fn a_rehearsal_passes_and_an_unmet_bound_fails() {
    let _runs = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = rehearse_links(&out, "rehearsal");
    let (o, e) = text(&run);
    // The collective was not run (--stages links): its check is MISSING and names the run.
    assert_eq!(run.status.code(), Some(1), "{o}{e}");
    assert!(o.contains("PASS     sweep-no-suspect"), "{o}");
    assert!(o.contains("PASS     send-lat-small-p99"), "{o}");
    let missing = o
        .lines()
        .find(|l| l.starts_with("MISSING  allreduce-correct"))
        .unwrap_or_else(|| panic!("{o}"));
    assert!(missing.contains("bench-collective all_reduce"), "{missing}");
    assert_eq!(statuses(&out), ["done", "done"]);
    assert!(out.join("report/report.html").is_file());

    // All stages: PASS, exit 0.
    let all = dir.path().join("all");
    let run = wait_with_deadline(
        spawn(&mut fabcheck(&[
            "--profile",
            "loopback-demo-cluster",
            "--local",
            "3",
            "--out",
            all.to_str().unwrap(),
        ])),
        LIMIT,
        "rehearsal",
    );
    let (o, e) = text(&run);
    assert_eq!(run.status.code(), Some(0), "{o}{e}");
    assert!(
        o.contains("verdict: PASS (7 passed, 0 failed, 0 missing"),
        "{o}"
    );

    // A bound loopback cannot meet: measured, judged, FAIL, exit 1.
    let strict = dir.path().join("strict.toml");
    let text_ = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles/loopback-demo-cluster.toml"),
    )
    .unwrap()
    .replace("min = 1.0", "min = 100000.0");
    std::fs::write(&strict, text_).unwrap();
    let run = wait_with_deadline(
        spawn(&mut fabcheck(&[
            "--profile",
            strict.to_str().unwrap(),
            "--local",
            "3",
            "--stages",
            "links",
            "--out",
            dir.path().join("strict").to_str().unwrap(),
        ])),
        LIMIT,
        "strict",
    );
    let (o, e) = text(&run);
    assert_eq!(run.status.code(), Some(1), "{o}{e}");
    assert!(o.contains("FAIL     send-bw-large"), "{o}");
}

#[test]
fn a_run_stopped_mid_stage_resumes_with_what_it_measured() {
    let _runs = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let args = [
        "--profile",
        "loopback-demo-cluster",
        "--local",
        "3",
        "--out",
        out.to_str().unwrap(),
    ];
    let child = spawn(&mut fabcheck(&args));
    // Wait until both link sweeps are done and the collective runs, then stop it.
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < LIMIT, "the links never finished");
        if out.join("accept.json").exists() {
            let st = statuses(&out);
            if st.len() >= 2 && st[0] == "done" && st[1] == "done" {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let pid = child.id() as i32;
    let stopped = Instant::now();
    nix_kill(pid);
    let ended = wait_with_deadline(child, Duration::from_secs(30), "stopped run");
    let (o, e) = text(&ended);
    assert_eq!(ended.status.code(), Some(130), "{o}{e}");
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "stopping took {:?}",
        stopped.elapsed()
    );
    assert!(e.contains("--resume"), "{e}");
    let st = statuses(&out);
    assert_eq!(st[..2], ["done", "done"]);
    assert_ne!(st[2], "done");
    let sweep = out.join("results/01-links-bench-bw.json");
    let before = std::fs::read(&sweep).unwrap();

    // The same command again refuses to overwrite; with --resume it finishes.
    let again = wait_with_deadline(spawn(&mut fabcheck(&args)), LIMIT, "again");
    assert_eq!(again.status.code(), Some(2), "{:?}", text(&again));
    let mut resumed_args = args.to_vec();
    resumed_args.push("--resume");
    let resumed = wait_with_deadline(spawn(&mut fabcheck(&resumed_args)), LIMIT, "resume");
    let (o, e) = text(&resumed);
    assert_eq!(resumed.status.code(), Some(0), "{o}{e}");
    assert!(o.contains("resuming: 2 step(s) kept"), "{o}");
    assert!(o.contains("verdict: PASS"), "{o}");
    assert_eq!(
        std::fs::read(&sweep).unwrap(),
        before,
        "the kept sweep was not rerun"
    );
    assert_eq!(statuses(&out), ["done", "done", "done"]);
}

fn nix_kill(pid: i32) {
    let ok = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

/// Multiplies every bandwidth figure of the documents under `dir` by `factor`.
fn scale_bandwidth(dir: &Path, factor: f64) {
    fn walk(v: &mut Value, factor: f64, inside: bool) {
        match v {
            Value::Number(n) if inside => {
                *v = serde_json::json!(n.as_f64().unwrap() * factor);
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, factor, inside)),
            Value::Object(o) => {
                for (k, x) in o.iter_mut() {
                    let bw = inside || k == "bw_gbit_s" || k == "interval_gbit_s";
                    walk(x, factor, bw);
                }
            }
            _ => {}
        }
    }
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            walk(&mut v, factor, false);
            std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
        }
    }
}

#[test]
fn triage_answers_whether_the_network_matches_its_good_night() {
    let _runs = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let night = dir.path().join("night");
    let base = rehearse_links(&night, "the good night");
    assert!(
        night.join("results/01-links-bench-bw.json").is_file(),
        "{:?}",
        text(&base)
    );
    let triage = |baseline: &Path, out: &str, extra: &[&str]| {
        let out_dir = dir.path().join(out);
        let mut args = vec![
            "--profile",
            "loopback-demo-cluster",
            "--local",
            "3",
            "--baseline",
            baseline.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ];
        args.extend(extra);
        wait_with_deadline(spawn(&mut subcommand("triage", &args)), LIMIT, out)
    };
    // Beside the same cluster's night, loopback's noise aside: it matches. (A loopback
    // p99 on two busy cores swings more than tenfold between runs minutes apart.)
    let same = triage(&night, "same", &["--tolerance", "10000"]);
    let (o, e) = text(&same);
    assert_eq!(same.status.code(), Some(0), "{o}{e}");
    assert!(
        o.contains("triage: the network matches its baseline"),
        "{o}"
    );
    // Beside a night a hundred times faster: the bandwidth regressed, named. (Loopback
    // pairs differ so much that three standard deviations of the baseline's spread hide
    // even a hundredfold drop: the tolerance alone decides here.)
    let fast = dir.path().join("fast");
    std::fs::create_dir_all(fast.join("results")).unwrap();
    for e in std::fs::read_dir(night.join("results")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, fast.join("results").join(p.file_name().unwrap())).unwrap();
    }
    scale_bandwidth(&fast.join("results"), 100.0);
    let slow = triage(&fast, "slow", &["--sigmas", "0"]);
    let (o, e) = text(&slow);
    assert_eq!(slow.status.code(), Some(1), "{o}{e}");
    assert!(o.contains("triage: the network is at fault:"), "{o}");
    assert!(
        o.lines()
            .any(|l| l.contains("regressed against the baseline: send_bw")),
        "{o}"
    );
}
