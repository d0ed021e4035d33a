//! Which GPU a rank takes comes from its node-local rank, and that comes from MPI
//! (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` refined by host name, as nccl-tests
//! computes it by host), not from launcher variables. Without a GPU the NCCL backend
//! stops at the missing driver, and every rank's error names its local rank, its node's
//! rank count and its host: the real code path up to the device choice (the choice itself
//! is `transport::cuda::device::pick`, unit-tested). With simulated hosts (each rank in a UTS
//! namespace of its own with a host name per pair of ranks, under one real mpirun) the
//! local ranks restart at 0 on every host.

use std::time::Duration;

use integration::{bin, hostname, is_root, mpirun, run, text};

const LIMIT: Duration = Duration::from_secs(180);

fn has_gpu() -> bool {
    std::path::Path::new("/dev/nvidia0").exists()
}

/// `bench-collective all_reduce --backend nccl` on `np` ranks, each started through
/// `wrap` (a shell prefix) when given.
fn nccl_ranks(np: u32, wrap: Option<&str>) -> (Option<i32>, String) {
    let mut c = mpirun(np);
    if let Some(w) = wrap {
        c.args(["sh", "-c", w, "sh"]);
    }
    c.arg(bin("bench-collective"))
        .args(["all_reduce", "--backend", "nccl", "-b", "8", "-e", "8"]);
    let out = run(&mut c, LIMIT);
    let (stdout, stderr) = text(&out);
    (out.status.code(), format!("{stdout}\n{stderr}"))
}

#[test]
fn every_rank_names_its_local_rank_from_mpi() {
    if has_gpu() {
        eprintln!("skipped: this machine has a GPU, where the run goes past the device choice");
        return;
    }
    let (code, out) = nccl_ranks(3, None);
    assert_eq!(code, Some(2), "{out}");
    let host = hostname();
    for r in 0..3 {
        // Ranks write stderr at once, so lines can interleave: match each rank's own text
        // (the local rank and host identify it).
        let want = format!("error: local rank {r} of 3 on host {host}");
        assert!(out.contains(&want), "no {want:?} in\n{out}");
    }
    assert!(!out.contains("panicked"), "{out}");
}

#[test]
fn local_ranks_restart_on_every_simulated_host() {
    if has_gpu() {
        eprintln!("skipped: this machine has a GPU, where the run goes past the device choice");
        return;
    }
    if !is_root() {
        eprintln!("SKIPPED (needs root for UTS namespaces): local ranks across simulated hosts");
        return;
    }
    // Ranks 0,1 on host simhost0, ranks 2,3 on simhost1: each rank becomes its host in
    // a UTS namespace of its own, then execs the tool.
    let wrap = r#"r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
exec unshare --uts sh -c 'hostname "simhost$1"; shift; exec "$@"' sh $((r / 2)) "$@""#;
    let (code, out) = nccl_ranks(4, Some(wrap));
    assert_eq!(code, Some(2), "{out}");
    for r in 0..4 {
        let want = format!("error: local rank {} of 2 on host simhost{}", r % 2, r / 2);
        assert!(out.contains(&want), "no {want:?} in\n{out}");
    }
}
