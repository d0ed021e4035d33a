//! Shared helpers of the `aggregate` end-to-end tests.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use integration::{bin, run, text, wait_with_deadline};

/// Runs `aggregate ARGS` in `dir` with a generous deadline.
pub fn aggregate(dir: &Path, args: &[&str]) -> Output {
    run(
        Command::new(bin("aggregate")).current_dir(dir).args(args),
        Duration::from_secs(120),
    )
}

/// Exit code, panicking with both streams when the process died of a signal.
pub fn code(out: &Output) -> i32 {
    let (o, e) = text(out);
    out.status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal\nstdout:\n{o}\nstderr:\n{e}"))
}

/// Asserts the exit code, showing both streams when it differs.
pub fn expect_code(out: &Output, want: i32, what: &str) {
    let (o, e) = text(out);
    assert_eq!(
        out.status.code(),
        Some(want),
        "{what}: exit code\nstdout:\n{o}\nstderr:\n{e}"
    );
}

/// A synthetic result set of `ranks` ranks and `sizes` sizes written by the development
/// generator (`synth::scale_set`, marked synthetic) into `dir/name`.
pub fn synth_set(dir: &Path, name: &str, ranks: u32, sizes: u32) -> PathBuf {
    let out = dir.join(name);
    synth::write_scale_set(&out, ranks, &synth::power_of_two_sizes(sizes))
        .unwrap_or_else(|e| panic!("writing the synthetic set into {}: {e}", out.display()));
    out
}

/// A profile the synthetic set meets, covering latency, bandwidth, loss and collectives.
pub const PASSING_PROFILE: &str = r#"
name = "synthetic-pass"
description = "What the synthetic set of synth::scale_set meets"
line_rate_gbit_s = 100.0

[[check]]
id = "lat"
description = "small-message send latency"
metric = "latency_p99"
unit = "us"
max = 20.0
test = "send_lat"
max_size = 64

[[check]]
id = "bw"
description = "large-message write bandwidth"
metric = "bw_avg"
unit = "Gb/s"
min = 80.0
test = "write_bw"
min_size = "1M"
each_pair = true

[[check]]
id = "loss"
description = "link loss"
metric = "link_loss"
unit = "%"
max = 0.01

[[check]]
id = "allreduce"
description = "AllReduce bus bandwidth"
metric = "busbw"
unit = "GB/s"
min = 5.0
collective = "all_reduce"
min_size = "1M"
"#;

/// Writes `text` to `dir/name` and returns the path as a string.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Copies a directory tree.
pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_tree(&p, &to.join(e.file_name()));
        } else {
            fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// Every regular file under `dir`, relative, `/`-separated.
pub fn files_under(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, dir, &mut v);
    v.sort();
    v
}

/// Flips one bit of the byte in the middle of a file.
pub fn flip_middle_byte(path: &Path) {
    let mut b = fs::read(path).unwrap();
    assert!(!b.is_empty(), "{} is empty", path.display());
    let i = b.len() / 2;
    b[i] ^= 0x01;
    fs::write(path, b).unwrap();
}

/// Whether a tool is on PATH; tests that need it fail with how to install it.
#[allow(unused_imports)]
pub use integration::require;

/// Runs Chromium with its output going to files: a dumped DOM is larger than a pipe's
/// buffer, and a child blocked on a full pipe that nobody reads until it exits never exits.
pub fn chromium(args: &[&str], page: &Path) -> Output {
    let profile = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(args)
    .arg(format!("file://{}", page.display()));
    let (out_path, err_path) = (logs.path().join("out"), logs.path().join("err"));
    cmd.stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap());
    let child = cmd.spawn().expect("start chromium");
    let done = wait_with_deadline(child, Duration::from_secs(120), "chromium");
    Output {
        status: done.status,
        stdout: fs::read(&out_path).unwrap(),
        stderr: fs::read(&err_path).unwrap(),
    }
}

/// Console messages and uncaught exceptions from Chromium's log. Chromium logs every
/// console message as `INFO:CONSOLE` whatever its level, and the report runs no script, so
/// any console line at all is a problem.
pub fn console_errors(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| {
            l.contains(":CONSOLE")
                || l.contains("Uncaught")
                || l.contains("Failed to load resource")
                || l.contains("net::ERR_")
        })
        .map(str::to_string)
        .collect()
}

/// Virtual memory allowed to `aggregate` under [`limited`]: the scale target, 1 GiB.
pub const MEM_LIMIT_KIB: u64 = 1 << 20;

/// What a run under [`limited`] did.
pub struct Limited {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// Peak resident memory, KiB (GNU time).
    pub max_rss_kib: u64,
}

impl Limited {
    /// Both streams, for assertion messages.
    pub fn show(&self) -> String {
        format!(
            "exit {}, {} KiB peak\nstdout:\n{}\nstderr:\n{}",
            self.code, self.max_rss_kib, self.stdout, self.stderr
        )
    }
}

/// Runs `aggregate ARGS` in `dir` the way the hostile-input tests demand: under
/// `ulimit -v` ([`MEM_LIMIT_KIB`]), with a deadline (a hang fails the test), its peak
/// memory measured by GNU time. A death by signal (a panic that aborts, an allocation
/// refused, an out-of-memory kill) fails the test with both streams.
pub fn limited(dir: &Path, args: &[&str]) -> Limited {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let rss_file = dir.join(format!(
        ".rss-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let out = run(
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v {MEM_LIMIT_KIB} && exec /usr/bin/time -f %M -o \"$0\" \"$@\""
            ))
            .arg(&rss_file)
            .arg(bin("aggregate"))
            .args(args)
            .current_dir(dir)
            // One malloc arena per thread would reserve 64 MiB of address space each.
            .env("MALLOC_ARENA_MAX", "2"),
        Duration::from_secs(120),
    );
    let (stdout, stderr) = text(&out);
    let timing = fs::read_to_string(&rss_file).unwrap_or_default();
    let _ = fs::remove_file(&rss_file);
    let what = format!("aggregate {}", args.join(" "));
    assert!(
        !timing.contains("signal") && !stderr.contains("panicked"),
        "{what}: died\n{timing}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("{what}: killed by a signal\n{stdout}\n{stderr}"));
    let max_rss_kib = timing
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("{what}: no peak memory from GNU time: {timing:?}"));
    Limited {
        code,
        stdout,
        stderr,
        max_rss_kib,
    }
}

/// The real documents of the corpus (bench-lat, bench-bw, bench-collective over loopback).
pub fn corpus(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(sub)
}
