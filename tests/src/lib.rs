//! Helpers shared by the end-to-end tests: finding the workspace binaries, free ports,
//! running a child with a deadline so no test can hang.
//!
//! The binaries must be built first (`cargo build --workspace --bins`, which the README's
//! test command does): a test that cannot find one fails with that instruction.

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
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// Waits for `child` at most `limit`; kills it and panics on overrun, so a hang becomes a
/// test failure instead of a stuck CI job.
pub fn wait_with_deadline(mut child: Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    loop {
        match child.try_wait().expect("try_wait") {
            Some(status) => return collect(child, status),
            None if start.elapsed() > limit => {
                let _ = child.kill();
                let status = child.wait().expect("wait after kill");
                let out = collect(child, status);
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

fn collect(mut child: Child, status: ExitStatus) -> Output {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_end(&mut stdout);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_end(&mut stderr);
    }
    Output {
        status,
        stdout,
        stderr,
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

/// mpirun with what OpenMPI needs to run as root and oversubscribe this small machine.
pub fn mpirun(np: u32) -> Command {
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "--bind-to", "none", "-np"])
        .arg(np.to_string());
    c
}
