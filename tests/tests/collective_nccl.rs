//! The NCCL backend where there is no GPU: a clear error and exit code 2, never a panic.
//! (On a GPU machine scripts/gpu-check.sh runs the real thing.)

use std::time::Duration;

use integration::{bin, mpirun, run, text};

fn cuda_present() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/local/cuda/lib64",
        "/usr/lib/wsl/lib",
    ]
    .iter()
    .any(|d| std::path::Path::new(d).join("libcuda.so.1").exists())
}

#[test]
fn nccl_backend_without_cuda_exits_2_with_a_message() {
    if cuda_present() {
        eprintln!("skipped: this machine has a CUDA driver; scripts/gpu-check.sh covers it");
        return;
    }
    for np in [1, 2] {
        let mut c = mpirun(np);
        c.arg(bin("bench-collective")).args([
            "all",
            "--backend",
            "nccl",
            "-b",
            "8",
            "-e",
            "64",
            "-c",
        ]);
        let out = run(&mut c, Duration::from_secs(120));
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "np {np}\n{stdout}\n{stderr}");
        assert!(stderr.contains("CUDA"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
