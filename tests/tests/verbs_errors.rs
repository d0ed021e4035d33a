//! The verbs transport's errors that need no RDMA device: on a host without one,
//! `--transport verbs` must fail at once with exit 2, name the check that failed and point
//! to `--transport tcp`. (Everything that needs a device runs on Soft-RoCE:
//! tests/softroce/run-all.sh.)

use std::process::Command;
use std::time::Duration;

use integration::{bin, spawn, wait_with_deadline};

fn rdma_present() -> bool {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

#[test]
fn verbs_without_a_device_says_so_and_suggests_tcp() {
    if rdma_present() {
        eprintln!("this host has RDMA devices: the no-device case is covered elsewhere");
        return;
    }
    for tool in ["bench-lat", "bench-bw"] {
        let out = wait_with_deadline(
            spawn(Command::new(bin(tool)).args(["--transport", "verbs", "--test", "write"])),
            Duration::from_secs(30),
            tool,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{tool}: {err}");
        assert!(err.contains("no RDMA device"), "{tool}: {err}");
        assert!(err.contains("--transport tcp"), "{tool}: {err}");
        assert!(!err.contains("panicked"), "{tool}: {err}");
    }
}

#[test]
fn check_is_refused_for_send() {
    let out = wait_with_deadline(
        spawn(Command::new(bin("bench-bw")).args(["--transport", "tcp", "--check"])),
        Duration::from_secs(30),
        "bench-bw --check",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--test write or --test read"), "{err}");
}
