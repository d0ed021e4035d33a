//! `deploy/nightly.sbatch` run for real, twice, in a private single-node Slurm cluster
//! (`tests/slurm/cluster.sh`): each night is `fabcheck accept` (rehearsed with --local on
//! the one node); the first night measures, passes and becomes the baseline;
//! the second is compared with it, passes, and takes its place, and trends both nights.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

mod aggregate_common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use aggregate_common::*;
use integration::{bin, run, text};

struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
    /// slurmctld's port (slurmd takes the next): free ones, so this cluster never meets
    /// another test's, or the same test's run from another checkout.
    port: String,
}

/// Two consecutive free TCP ports.
fn free_port_pair() -> u16 {
    loop {
        let p = integration::free_port();
        if p < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("slurm/cluster.sh")
}

impl Cluster {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port_pair().to_string();
        let out = run(
            Command::new(script())
                .env("SLURM_TEST_PORT", &port)
                .arg("start")
                .arg(dir.path()),
            Duration::from_secs(60),
        );
        let (o, e) = text(&out);
        assert!(out.status.success(), "Slurm did not start:\n{o}\n{e}");
        let conf = dir.path().join("slurm.conf");
        Self { dir, conf, port }
    }

    /// Submits the nightly script and waits for the job to end (polling `scontrol`, as
    /// `sbatch --wait` polls only at 2, 10, 42 s). Returns (exit code, log).
    fn night(&self, env: &str, log: &Path) -> (i32, String) {
        let out = run(
            Command::new("sbatch")
                .env("SLURM_CONF", &self.conf)
                .args([
                    "--parsable",
                    "--nodes=1",
                    "--ntasks-per-node=2",
                    "--time=15",
                ])
                .arg(format!("--output={}", log.display()))
                .arg(format!("--export={env}"))
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nightly.sbatch")),
            Duration::from_secs(60),
        );
        let (o, e) = text(&out);
        assert!(out.status.success(), "sbatch:\n{o}\n{e}");
        let id = o.trim().split(';').next().unwrap().to_string();
        let start = Instant::now();
        loop {
            let out = run(
                Command::new("scontrol")
                    .env("SLURM_CONF", &self.conf)
                    .args(["show", "job", &id]),
                Duration::from_secs(30),
            );
            let (info, _) = text(&out);
            let state = field(&info, "JobState=");
            if [
                "COMPLETED",
                "FAILED",
                "CANCELLED",
                "TIMEOUT",
                "NODE_FAIL",
                "OUT_OF_MEMORY",
            ]
            .contains(&state.as_str())
            {
                let code: i32 = field(&info, "ExitCode=")
                    .split(':')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                return (code, fs::read_to_string(log).unwrap_or_default());
            }
            assert!(
                start.elapsed() < Duration::from_secs(900),
                "job {id} still {state} after 15 minutes:\n{}",
                fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

fn field(info: &str, key: &str) -> String {
    info.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .unwrap_or("")
        .to_string()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .env("SLURM_TEST_PORT", &self.port)
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn nightly_sbatch_judges_signs_compares_and_keeps_history() {
    require("sbatch", "slurm-wlm");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let history = dir.join("history");
    let textfile = dir.join("textfile");
    fs::create_dir_all(&textfile).unwrap();
    expect_code(&aggregate(dir, &["keygen", "night.key"]), 0, "keygen");
    let bin_dir = bin("aggregate").parent().unwrap().to_path_buf();
    for b in ["fabcheck", "bench-lat", "bench-bw", "bench-collective"] {
        bin(b);
    }
    // The runner rehearses on the one node of this private cluster (--local 2, every rank
    // a node) against the loopback profile: sweeps, a checked AllReduce, the report.
    let env = format!(
        "ALL,FABCHECK_BIN={},FABCHECK_HISTORY={},PROFILE=loopback-demo-cluster,SIGNING_KEY={},\
         TEXTFILE_DIR={},TOLERANCE=1000,NICS_PER_NODE=1,LAUNCHER_ARGS=,ACCEPT_ARGS=--local 2,\
         OMPI_ALLOW_RUN_AS_ROOT=1,OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
        bin_dir.display(),
        history.display(),
        dir.join("night.key").display(),
        textfile.display()
    );
    let cluster = Cluster::start();

    let (code, log) = cluster.night(&env, &dir.join("night1.log"));
    assert_eq!(code, 0, "first night failed:\n{log}");
    assert!(log.contains("no last-good night yet"), "{log}");
    let first = fs::read_link(history.join("last-good")).expect("last-good after a passing night");
    let night1 = history.join(&first);
    assert!(night1.join("report/report.html").exists());
    assert!(night1.join("report/MANIFEST.sha256.sig").exists());
    // The runner's record: every step done, the collective among them.
    let record: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(night1.join("accept.json")).unwrap()).unwrap();
    let steps = record["steps"].as_array().unwrap();
    assert!(steps.iter().all(|s| s["status"] == "done"), "{record}");
    assert!(steps.iter().any(|s| s["command"]
        .as_str()
        .unwrap()
        .contains("bench-collective all_reduce")));
    assert_eq!(record["verdict_code"], 0);
    let prom = fs::read_to_string(textfile.join("fabcheck.prom")).unwrap();
    assert!(prom.contains("fabcheck_verdict_pass{profile=\"loopback-demo-cluster\"} 1"));

    let (code, log) = cluster.night(&env, &dir.join("night2.log"));
    let night2 = fs::read_dir(&history)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.ends_with(&first) && !p.is_symlink())
        .max()
        .expect("the second night's directory");
    let md = fs::read_to_string(night2.join("compare.md")).expect("compared with night 1");
    assert!(night2.join("compare.junit.xml").exists());
    let second = fs::read_link(history.join("last-good")).unwrap();
    // Loopback collectives on an oversubscribed debug build can swing 1000x between
    // nights, so either outcome can be real; what must hold is that the exit code, the
    // comparison and the baseline agree.
    if md.contains("# fabcheck regression check: OK") {
        assert_eq!(
            code, 0,
            "no regression, report passed, yet exit {code}:\n{log}"
        );
        assert_eq!(
            night2.file_name().unwrap(),
            second.as_os_str(),
            "last-good moves on"
        );
    } else {
        assert!(md.contains("**REGRESSED**"), "{md}");
        assert_eq!(code, 1, "a regression must exit 1:\n{log}");
        assert_eq!(
            first, second,
            "a regressed night must not become the baseline"
        );
    }
    let out = aggregate(
        dir,
        &[
            "verify",
            night2.join("report").to_str().unwrap(),
            "--key",
            "night.key.pub",
        ],
    );
    expect_code(&out, 0, "verify the second night's bundle");
    assert!(night1.exists(), "history kept");
    // The rolling trend over both nights, signed.
    let trend = fs::read_to_string(night2.join("trend.txt")).expect("trend.txt");
    assert!(
        trend.contains("verdict: ") && trend.contains("(2 night(s)"),
        "{trend}\n{log}"
    );
    let out = aggregate(
        dir,
        &[
            "verify",
            night2.join("trend").to_str().unwrap(),
            "--key",
            "night.key.pub",
        ],
    );
    expect_code(&out, 0, "verify the second night's trend bundle");
}
