//! The nightly path: bench-lat and bench-bw launched by `srun --mpi=pmix` inside a real
//! (private, single-node) Slurm cluster that `tests/slurm/cluster.sh` brings up.

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
fn srun_pairs_ranks_like_mpirun() {
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
}
