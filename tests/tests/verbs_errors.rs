//! The verbs transport's start-up errors, where the verbs library can run them.
//!
//! On a host without an RDMA device, `--transport verbs` must fail at once with exit 2,
//! name the check that failed and point to `--transport tcp`. On a host with one (a real
//! NIC, or the Soft-RoCE VM) the same tests take the real path instead: an unknown device
//! is refused with the list of the ones that exist, and a short loopback ping-pong over the
//! first device with an ACTIVE port measures and writes its JSON (or, with no port
//! ACTIVE, the tool says which port is in which state). Everything else that needs a
//! device runs on Soft-RoCE: tests/softroce/run-all.sh.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::process::Command;
use std::time::Duration;

use integration::{bin, free_port, run, spawn, text, wait_with_deadline};

fn rdma_devices() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/class/infiniband")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn active_port1(dev: &str) -> bool {
    std::fs::read_to_string(format!("/sys/class/infiniband/{dev}/ports/1/state"))
        .is_ok_and(|s| s.contains("ACTIVE"))
}

#[test]
fn verbs_without_a_device_says_so_and_suggests_tcp() {
    let devices = rdma_devices();
    if !devices.is_empty() {
        with_a_device(&devices);
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

/// The real path on a host that has RDMA devices.
fn with_a_device(devices: &[String]) {
    let out = run(
        Command::new(bin("bench-lat")).args(["--transport", "verbs", "-d", "nosuch0"]),
        Duration::from_secs(30),
    );
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no RDMA device named nosuch0; found:"),
        "{err}"
    );
    assert!(err.contains(&devices[0]), "{err}");
    let Some(dev) = devices.iter().find(|d| active_port1(d)) else {
        let out = run(
            Command::new(bin("bench-lat")).args(["--transport", "verbs"]),
            Duration::from_secs(30),
        );
        let (_, err) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("port 1 ACTIVE"), "{err}");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lat.json");
    let port = free_port().to_string();
    let args = [
        "--transport",
        "verbs",
        "-d",
        dev,
        "-s",
        "64",
        "-n",
        "200",
        "-p",
        &port,
        "--timeout",
        "30",
    ];
    let server = spawn(Command::new(bin("bench-lat")).args(args));
    let out = run(
        Command::new(bin("bench-lat")).args(args).args([
            "--json",
            json.to_str().unwrap(),
            "127.0.0.1",
        ]),
        Duration::from_secs(90),
    );
    let s = wait_with_deadline(server, Duration::from_secs(60), "server");
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
    assert_eq!(s.status.code(), Some(0), "{:?}", text(&s));
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(d["options"]["transport"], "verbs");
    assert_eq!(d["results"][0]["transport"], "verbs");
    assert!(d["results"][0]["latency_us"]["p50"].as_f64().unwrap() > 0.0);
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

/// A device named with `-d`, where `auto` finds no RDMA device, is not measured over TCP
/// under the device's name: exit 2 at once, naming the device and how to measure TCP on
/// purpose. `-R` (rdma_cm) over TCP is refused the same way. (On a host with devices the
/// unknown name is refused by the verbs check instead, in the test above.)
#[test]
fn a_named_device_or_rdma_cm_never_falls_back_to_tcp() {
    if !rdma_devices().is_empty() {
        return;
    }
    for tool in ["bench-lat", "bench-bw"] {
        for (args, want) in [
            (
                &["-d", "mlx5_0", "127.0.0.1"][..],
                "-d mlx5_0 names an RDMA device",
            ),
            (
                &["-d", "auto", "127.0.0.1"][..],
                "-d auto names an RDMA device",
            ),
            (&["-d", "mlx5_0"][..], "-d mlx5_0 names an RDMA device"),
            (
                &["-R", "--transport", "tcp", "127.0.0.1"][..],
                "-R (rdma_cm) connects RDMA queue pairs",
            ),
        ] {
            let out = wait_with_deadline(
                spawn(Command::new(bin(tool)).args(args)),
                Duration::from_secs(20),
                tool,
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{tool} {args:?}: {err}");
            assert!(err.contains(want), "{tool} {args:?}: {err}");
            assert!(!err.contains("transport: tcp"), "{tool} {args:?}: {err}");
        }
    }
}
