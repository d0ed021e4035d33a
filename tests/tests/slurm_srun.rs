//! The nightly path: bench-lat, bench-bw and bench-congestion launched by `srun
//! --mpi=pmix` inside a real (private, single-node) Slurm cluster that
//! `tests/slurm/cluster.sh` brings up.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use integration::{bin, run, text};
use serde_json::Value;

/// Brings the cluster up for one test and always takes it down again.
struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("slurm/cluster.sh")
}

impl Cluster {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = run(
            Command::new(script()).arg("start").arg(dir.path()),
            Duration::from_secs(60),
        );
        let (o, e) = text(&out);
        assert!(out.status.success(), "Slurm did not start:\n{o}\n{e}");
        let conf = dir.path().join("slurm.conf");
        Self { dir, conf }
    }

    fn srun(&self, ntasks: u32) -> Command {
        let mut c = Command::new("srun");
        c.env("SLURM_CONF", &self.conf)
            .args(["--mpi=pmix", "--time=2", "-n"])
            .arg(ntasks.to_string());
        c
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn srun_runs_pairs_and_a_congestion_run_like_mpirun() {
    let cluster = Cluster::start();
    for (n, tool, extra) in [
        (2u32, "bench-lat", &["-s", "256", "-n", "200"][..]),
        (4, "bench-bw", &["-s", "64K", "-n", "300"][..]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("srun.json");
        let out = run(
            cluster
                .srun(n)
                .arg(bin(tool))
                .args(extra)
                .args(["--timeout", "30", "--json"])
                .arg(&json),
            Duration::from_secs(120),
        );
        let (o, e) = text(&out);
        assert!(out.status.success(), "srun -n {n} {tool}:\n{o}\n{e}");
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(doc["launcher"], "mpi");
        assert_eq!(doc["ranks"], n);
        assert_eq!(doc["results"].as_array().unwrap().len(), n as usize / 2);
        assert_eq!(doc["complete"], true);
    }

    // GPCNeT's method under srun: every rank a node, the split recorded, and the three
    // canary tests (the allreduce is MPI's, here PMIx-launched) isolated and loaded.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("congestion.json");
    let out = run(
        cluster
            .srun(8)
            .arg(bin("bench-congestion"))
            .args([
                "--include-local",
                "--bind-addr",
                "127.0.0.1",
                "--transport",
                "tcp",
            ])
            .args([
                "--phase-seconds",
                "0.3",
                "--seed",
                "5",
                "--timeout",
                "30",
                "--json",
            ])
            .arg(&json),
        Duration::from_secs(120),
    );
    let (o, e) = text(&out);
    assert!(
        out.status.success(),
        "srun -n 8 bench-congestion:\n{o}\n{e}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["launcher"], "mpi");
    assert_eq!(doc["ranks"], 8);
    let c = &doc["congestion"];
    assert_eq!(c["seed"], 5);
    assert_eq!(c["nodes"].as_array().unwrap().len(), 8);
    let tests = c["canary_tests"].as_array().unwrap();
    assert_eq!(tests.len(), 3, "{c}");
    for t in tests {
        for phase in ["isolated", "loaded"] {
            assert!(t[phase]["samples"].as_u64().unwrap() > 0, "{t}");
        }
    }
    assert!(c.get("skipped_tests").is_none(), "{c}");
}
