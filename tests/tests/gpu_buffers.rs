//! GPU buffers (`--use-cuda`) and the GPU copy baselines end to end with the real binaries.
//!
//! Where there is no CUDA driver (CI, this development machine) every GPU request must end
//! at start-up with exit code 2 and a message that names the cause, never a panic, and the
//! option combinations that make no sense are refused the same way. Where there is a CUDA
//! driver the same tests run the real thing instead: the copy baselines and the staged TCP
//! path over loopback with `--check`, and their JSON. (GPUDirect RDMA itself needs an RDMA
//! NIC; scripts/gpu-check.sh and the Soft-RoCE suite cover what each machine allows.)

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use integration::{bin, free_port, run, spawn, text, wait_with_deadline};
use serde_json::Value;

fn cuda_present() -> bool {
    let mut dirs: Vec<String> = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/cuda/lib64",
        "/usr/lib/wsl/lib",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Ok(p) = std::env::var("LD_LIBRARY_PATH") {
        dirs.extend(p.split(':').map(str::to_string));
    }
    dirs.iter().any(|d| {
        Path::new(d).join("libcuda.so.1").exists() || Path::new(d).join("libcuda.so").exists()
    })
}

fn tool(name: &str, args: &[&str]) -> std::process::Output {
    run(Command::new(bin(name)).args(args), Duration::from_secs(120))
}

/// Exit 2, a message containing every `want`, no panic.
fn refused(out: &std::process::Output, want: &[&str], what: &str) {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(2), "{what}\n{stdout}\n{stderr}");
    for w in want {
        assert!(stderr.contains(w), "{what}: `{w}` missing from:\n{stderr}");
    }
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("json written")).expect("valid json")
}

#[test]
fn nonsense_combinations_are_refused_before_anything_runs() {
    refused(
        &tool("bench-lat", &["--test", "h2d"]),
        &["GPU copy baseline of bench-bw"],
        "bench-lat copy test",
    );
    refused(
        &tool("bench-bw", &["--test", "d2h", "127.0.0.1"]),
        &["leave out the HOST"],
        "copy test with a host",
    );
    refused(
        &tool("bench-bw", &["--test", "d2d", "-D", "1"]),
        &["-D is not supported"],
        "copy test in duration mode",
    );
    refused(
        &tool("bench-bw", &["--transport", "tcp", "--host-dmabuf"]),
        &["--host-dmabuf", "--transport verbs"],
        "host dma-buf over tcp",
    );
    refused(
        &tool(
            "bench-bw",
            &["--transport", "tcp", "--use-cuda", "0", "--host-dmabuf"],
        ),
        &["one or the other"],
        "host dma-buf with a GPU",
    );
    // A plain host-memory send cannot be checked; the message points to what can.
    refused(
        &tool("bench-bw", &["--transport", "tcp", "--check"]),
        &["--test write or --test read", "--use-cuda"],
        "check on host sends",
    );
    // clap: a GPU is a number or `auto`.
    let out = tool("bench-bw", &["--use-cuda", "first"]);
    refused(&out, &["is not a GPU number"], "bad --use-cuda");
    // perftest's spellings are accepted (they get as far as the CUDA check, or run).
    let out = tool("bench-lat", &["--transport", "tcp", "--use_cuda=zero"]);
    refused(
        &out,
        &["is not a GPU number"],
        "perftest spelling parses as --use-cuda",
    );
    let out = tool(
        "bench-bw",
        &["--use-cuda", "0", "--use-cuda-bus-id", "0000:18:00.0"],
    );
    refused(&out, &["cannot be used with"], "two GPU selectors");
}

#[test]
fn without_cuda_every_gpu_request_says_so() {
    if cuda_present() {
        eprintln!("this machine has a CUDA driver: the real paths run in the other tests");
        return;
    }
    let cases: &[(&str, &[&str])] = &[
        ("bench-bw", &["--transport", "tcp", "--use-cuda", "0"]),
        (
            "bench-bw",
            &[
                "--transport",
                "tcp",
                "--use-cuda",
                "auto",
                "--check",
                "127.0.0.1",
            ],
        ),
        ("bench-lat", &["--transport", "tcp", "--use_cuda=0"]),
        (
            "bench-lat",
            &["--transport", "tcp", "--use-cuda-bus-id", "0000:18:00.0"],
        ),
        ("bench-bw", &["--test", "h2d"]),
        ("bench-bw", &["--test", "d2h", "--use-cuda", "1"]),
        ("bench-bw", &["--test", "d2d", "-s", "1M"]),
        ("bench-bw", &["--test", "p2p"]),
    ];
    for (t, args) in cases {
        let out = tool(t, args);
        refused(
            &out,
            &["no CUDA driver", "libcuda"],
            &format!("{t} {args:?}"),
        );
    }
}

#[test]
fn write_latency_with_gpu_buffers_is_refused_as_perftest_does() {
    // Over verbs only; on a host without RDMA the device check comes first.
    let out = tool(
        "bench-lat",
        &["--transport", "verbs", "--test", "write", "--use-cuda", "0"],
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("write latency polls") || stderr.contains("no RDMA device"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn copy_baselines_run_where_there_is_a_gpu() {
    if !cuda_present() {
        eprintln!("no CUDA driver here: covered by without_cuda_every_gpu_request_says_so");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for test in ["h2d", "d2h", "d2d"] {
        let json = dir.path().join(format!("{test}.json"));
        let out = tool(
            "bench-bw",
            &[
                "--test",
                test,
                "-s",
                "4M",
                "-n",
                "20",
                "--json",
                json.to_str().unwrap(),
            ],
        );
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{test}\n{stdout}\n{stderr}");
        let d = read_json(&json);
        let r = &d["results"][0];
        assert_eq!(r["test"], format!("{test}_bw"));
        assert_eq!(r["transport"], "cuda");
        assert_eq!(r["iterations"], 20);
        assert!(r["bw_gbit_s"]["avg"].as_f64().unwrap() > 0.0);
        assert_eq!(r["memory"]["initiator"]["path"], "copy");
        let gpu_side = if test == "h2d" {
            "responder"
        } else {
            "initiator"
        };
        assert_eq!(r["memory"][gpu_side]["kind"], "cuda");
        assert!(r["memory"][gpu_side]["gpu"]["name"].as_str().unwrap().len() > 2);
    }
}

#[test]
fn staged_tcp_with_gpu_buffers_checks_clean_where_there_is_a_gpu() {
    if !cuda_present() {
        eprintln!("no CUDA driver here: the staging path is tested with host memory in fabric's unit tests");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("staged.json");
    let port = free_port().to_string();
    let common = [
        "--transport",
        "tcp",
        "--use-cuda",
        "0",
        "--check",
        "-s",
        "1M",
        "-n",
        "200",
        "-p",
        &port,
    ];
    // The client retries until the server listens (within --timeout).
    let server = spawn(Command::new(bin("bench-bw")).args(common));
    let mut c = Command::new(bin("bench-bw"));
    c.args(common)
        .args(["--json", json.to_str().unwrap(), "127.0.0.1"]);
    let out = run(&mut c, Duration::from_secs(120));
    let s = wait_with_deadline(server, Duration::from_secs(60), "server");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(s.status.code(), Some(0), "{:?}", text(&s));
    let d = read_json(&json);
    let r = &d["results"][0];
    assert_eq!(r["check_wrong_bytes"], 0);
    for side in ["initiator", "responder"] {
        assert_eq!(r["memory"][side]["kind"], "cuda", "{side}");
        assert_eq!(r["memory"][side]["path"], "staged", "{side}");
    }
    assert_eq!(d["options"]["use_cuda"], 0);
}
