//! Helpers shared by the end-to-end tests: finding the workspace binaries, free ports,
//! running a child with a deadline so no test can hang.
//!
//! The binaries must be built first (`cargo build --workspace --bins`, which the README's
//! test command does): a test that cannot find one fails with that instruction.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// Path of a workspace binary built beside this test executable (same profile).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test>-<hash>  ->  target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binary lives in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not built: run `cargo build --workspace --bins` before `cargo test`",
        path.display()
    );
    path
}

/// A TCP port nobody listens on right now (bound then released).
///
/// Never the same port twice in one test process: the tests of a file run on parallel
/// threads, and the kernel may hand the port one of them just released to another (a
/// bench-lat client once reached another test's bench-bw server, which refused it).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("bind an ephemeral port");
        if GIVEN.lock().unwrap_or_else(|p| p.into_inner()).insert(port) {
            return port;
        }
    }
}

/// Waits for `child` at most `limit`; kills it and panics on overrun, so a hang becomes a
/// test failure instead of a stuck CI job.
pub fn wait_with_deadline(mut child: Child, limit: Duration, what: &str) -> Output {
    // Drain both pipes while waiting: a child that prints more than a pipe holds (64 KiB)
    // would otherwise block on write and never exit.
    let readers = (drain(child.stdout.take()), drain(child.stderr.take()));
    let start = Instant::now();
    loop {
        match child.try_wait().expect("try_wait") {
            Some(status) => return collect(readers, status),
            None if start.elapsed() > limit => {
                let _ = child.kill();
                let status = child.wait().expect("wait after kill");
                let out = collect(readers, status);
                panic!(
                    "{what} did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Output collected so far by a pipe-draining thread.
type Reader = Option<(
    std::thread::JoinHandle<()>,
    std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
)>;

fn drain(pipe: Option<impl Read + Send + 'static>) -> Reader {
    pipe.map(|mut p| {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&buf);
        let handle = std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = p.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        (handle, buf)
    })
}

/// Takes what the readers collected. Waits a little for the pipes to close, but not
/// forever: a killed launcher's children (mpirun's ranks) can hold them open.
fn collect(readers: (Reader, Reader), status: ExitStatus) -> Output {
    let take = |r: Reader| {
        r.map(|(h, buf)| {
            let until = Instant::now() + Duration::from_secs(5);
            while !h.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            let out = buf.lock().unwrap().clone();
            out
        })
        .unwrap_or_default()
    };
    Output {
        status,
        stdout: take(readers.0),
        stderr: take(readers.1),
    }
}

/// Spawns `cmd` with piped output.
pub fn spawn(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// Runs `cmd` to completion within `limit`.
pub fn run(cmd: &mut Command, limit: Duration) -> Output {
    let what = format!("{cmd:?}");
    wait_with_deadline(spawn(cmd), limit, &what)
}

/// Text of both output streams, for assertions and failure messages.
pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The MPI launcher: Open MPI's `mpirun` with what it needs to run as root and
/// oversubscribe this small machine; or, when `FABCHECK_MPIEXEC` names another launcher
/// (the test command sets it to MPICH's `mpiexec.mpich` for the binaries it builds
/// against MPICH), that one with the standard `-n N` (MPICH oversubscribes by default).
pub fn mpirun(np: u32) -> Command {
    match std::env::var_os("FABCHECK_MPIEXEC") {
        Some(launcher) => {
            let mut c = Command::new(launcher);
            c.arg("-n").arg(np.to_string());
            c
        }
        None => {
            let mut c = Command::new("mpirun");
            c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .env("OMPI_MCA_orte_tmpdir_base", session_base())
                .args(["--oversubscribe", "--bind-to", "none", "-np"])
                .arg(np.to_string());
            c
        }
    }
}

/// A directory of its own for one Open MPI launch's session files. Open MPI 4.1 makes
/// its session directory (`TMP/ompi.HOST.UID`) at each launch and removes it after; two
/// launches at once can race on it, and the loser fails in `orte_init` ("A call to mkdir
/// was unable to create the desired directory ... File exists", open-mpi/ompi#8510): it
/// failed a test of collective_mpi in a CI run here. The workaround its reporters use: a
/// base of its own per launch (`orte_tmpdir_base`).
/// The bases live under `TMP/fabcheck-ompi-PID/`; those of test processes that have
/// ended are removed at a process's first launch.
fn session_base() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = std::env::temp_dir();
    if n == 0 {
        remove_ended_bases(&tmp);
    }
    let dir = tmp.join(format!("fabcheck-ompi-{}/{n}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    dir
}

fn remove_ended_bases(tmp: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("fabcheck-ompi-")) else {
            continue;
        };
        if !std::path::Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// This machine's host name, as the tools record it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// True when the tests run as root (the simulated cluster needs network and UTS
/// namespaces; CI runs as root).
pub fn is_root() -> bool {
    nix_uid() == Some(0)
}

fn nix_uid() -> Option<u32> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find(|l| l.starts_with("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Waits (at most `limit`) until the JSON document at `path` exists, parses, and
/// satisfies `ready`: a run's checkpoint shows it is under way, whatever the machine's load
/// (no fixed sleep). Panics naming `what` when it never does.
pub fn wait_for_json(
    path: &std::path::Path,
    limit: Duration,
    what: &str,
    ready: impl Fn(&serde_json::Value) -> bool,
) {
    let t0 = Instant::now();
    loop {
        let ok = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|d| ready(&d));
        if ok {
            return;
        }
        assert!(
            t0.elapsed() < limit,
            "{what}: {} not ready within {limit:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Fails the test, naming the Debian package, when a reference tool the test needs is
/// missing (the test command installs them all; a silent skip would hide a lost check).
pub fn require(tool: &str, package: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{tool} is needed by this test: apt-get install -y {package}"
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn free_ports_are_never_handed_out_twice() {
        let ports: Vec<u16> = (0..500).map(|_| super::free_port()).collect();
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
    }
}
