//! The NCCL backend, whichever machine the tests run on: where there is an NVIDIA GPU it
//! runs the real path (every collective, checked, on up to two GPUs, GPU buffers and CUDA
//! event timing in the document) and fails if that path fails; where there is none, the
//! tool must say so with exit code 2, never a panic. No branch passes without asserting.
//! (scripts/gpu-check.sh goes further on a GPU machine: every datatype and reduction.)

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::path::Path;
use std::time::Duration;

use integration::{bin, mpirun, run, text};
use results::{Document, TestResult};

const LIMIT: Duration = Duration::from_secs(300);

/// GPUs the NVIDIA driver exposes (`/dev/nvidia0`, `/dev/nvidia1`, ...).
fn gpus() -> usize {
    std::fs::read_dir("/dev")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.strip_prefix("nvidia")
                        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn nccl_backend_runs_on_gpus_and_says_why_not_without_them() {
    match gpus() {
        0 => without_a_gpu(),
        n => on_gpus(n.min(2) as u32),
    }
}

/// `bench-collective all --backend nccl -c -b 8 ARGS` on `np` ranks.
fn nccl_run(np: u32, args: &[&str]) -> std::process::Output {
    let mut c = mpirun(np);
    c.arg(bin("bench-collective"))
        .args(["all", "--backend", "nccl", "-c", "-b", "8"])
        .args(args);
    run(&mut c, LIMIT)
}

fn without_a_gpu() {
    for np in [1, 2] {
        let out = nccl_run(np, &["-e", "64"]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "np {np}\n{stdout}\n{stderr}");
        // No driver: "no CUDA driver"; a driver without NCCL or without a device says
        // which.
        assert!(
            ["CUDA", "NCCL", "GPU"].iter().any(|w| stderr.contains(w)),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

fn on_gpus(np: u32) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("nccl.json");
    let out = nccl_run(
        np,
        &[
            "-e",
            "1M",
            "-f",
            "32",
            "-n",
            "10",
            "-w",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the NCCL backend must run on this GPU machine (if NCCL is missing, install \
         libnccl2 and libnccl-dev; scripts/gpu-check.sh shows the set-up)\n{stdout}\n{stderr}"
    );
    let doc = read(&json);
    assert_eq!(doc.clock.as_deref(), Some("cuda_event"));
    assert_eq!(doc.hosts.len(), np as usize);
    assert!(
        doc.hosts.iter().all(|h| !h.gpus.is_empty()),
        "GPUs recorded"
    );
    let rows: Vec<_> = doc
        .results
        .iter()
        .map(|r| match r {
            TestResult::Collective(c) => c,
            other => panic!("unexpected result {other:?}"),
        })
        .collect();
    let mut names: Vec<&str> = rows.iter().map(|r| r.collective.as_str()).collect();
    names.dedup();
    assert_eq!(names.len(), 10, "every collective ran: {names:?}");
    for r in rows {
        assert_eq!(r.backend, "nccl");
        for (mode, t) in [("out of place", &r.out_of_place), ("in place", &r.in_place)] {
            assert_eq!(t.wrong, 0, "{} {} bytes {mode}", r.collective, r.size_bytes);
            assert!(t.time_us > 0.0 && t.rank_time_us.is_some());
            // NCCL leaves only in-place SendRecv undefined (nccl-tests does not check it).
            let unchecked = r.collective == "sendrecv" && mode == "in place";
            assert_eq!(t.checked, !unchecked, "{} {mode}", r.collective);
        }
    }
}

fn read(path: &Path) -> Document {
    Document::from_json(&std::fs::read_to_string(path).expect("JSON written")).expect("valid")
}
