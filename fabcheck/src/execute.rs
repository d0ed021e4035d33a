//! Running the steps: each an ordinary command of the suite in its own process group, its
//! output in a log beside its document, bounded by a deadline (the stage's budget, or the
//! time model's projection with a margin), stopped within a second on SIGINT/SIGTERM; the
//! state rewritten after every step; then the retest of suspects and the report.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::state::Status;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ended {
    pub status: Status,
    pub exit_code: Option<i32>,
    pub seconds: f64,
    /// It died by a signal (the launcher itself, or a rank: launchers report a rank killed
    /// by signal N as exit 128 + N) without writing its document.
    pub crashed: bool,
}

impl Ended {
    /// How it ended, for messages: `exit N`, or `killed by a signal` when it had no code.
    pub fn how(&self) -> String {
        self.exit_code
            .map_or("killed by a signal".to_string(), |c| format!("exit {c}"))
    }
}

/// What a step's command ended with, and, when its first launch crashed, that first end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attempts {
    pub last: Ended,
    pub crashed_first: Option<Ended>,
}

/// Runs a measuring step as [`run`] does, and once more when its first launch crashed
/// before writing its document. A launch can die under the measurement, not of it: here
/// Open MPI 4.1's TCP wire-up inside MPI_Init, under srun with Slurm's PMIx on a loaded
/// host, segfaulted one rank in about four runs (a callback of the TCP BTL called before
/// it was set). Such a crash measured nothing, so nothing is hidden by a second launch;
/// a rank that fails the same way twice is a failed step like any other. The first
/// launch's log is kept beside the step's (`.log.first`), and the relaunch is said.
pub fn run_step(
    argv: &[String],
    dir: &Path,
    log: &Path,
    document: &Path,
    deadline: Duration,
    stop: &AtomicBool,
) -> Result<Attempts> {
    let first = run(argv, dir, log, Some(document), deadline, stop)?;
    if !first.crashed || stop.load(Ordering::SeqCst) {
        return Ok(Attempts {
            last: first,
            crashed_first: None,
        });
    }
    let kept = log.with_extension("log.first");
    std::fs::rename(log, &kept)
        .with_context(|| format!("{}: cannot keep the crashed launch's log", log.display()))?;
    println!(
        "  crashed after {:.0}s ({}) before writing its document: launched once more (log of the \
         first launch: {})",
        first.seconds,
        first.how(),
        kept.display()
    );
    let left = deadline.saturating_sub(Duration::from_secs_f64(first.seconds));
    let last = run(argv, dir, log, Some(document), left, stop)?;
    Ok(Attempts {
        last: Ended {
            seconds: first.seconds + last.seconds,
            ..last
        },
        crashed_first: Some(first),
    })
}

/// SIGINT and SIGTERM, seen by the step loop.
pub fn interrupt_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    ctrlc::set_handler(move || f.store(true, Ordering::SeqCst))
        .context("cannot install the SIGINT/SIGTERM handler")?;
    Ok(flag)
}

/// Runs `argv` in `dir`, output to `log`, until it ends, `deadline` passes or `stop` is set.
/// Exit 0 and 1 (measured, a check failed) with `document` written are done.
pub fn run(
    argv: &[String],
    dir: &Path,
    log: &Path,
    document: Option<&Path>,
    deadline: Duration,
    stop: &AtomicBool,
) -> Result<Ended> {
    let out = File::create(log).with_context(|| format!("{}: cannot create", log.display()))?;
    let err = out.try_clone()?;
    let started = Instant::now();
    let mut child = match Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Its own process group: the launcher and every rank it started are stopped together.
        .process_group(0)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            std::fs::write(log, format!("cannot start {}: {e}\n", argv[0]))?;
            return Ok(Ended {
                status: Status::Failed,
                exit_code: None,
                seconds: 0.0,
                crashed: false,
            });
        }
    };
    loop {
        if let Some(st) = child.try_wait()? {
            let code = st.code();
            let documented = document.is_none_or(|d| d.is_file());
            let status = match code {
                Some(0 | 1) if documented => Status::Done,
                _ => Status::Failed,
            };
            return Ok(Ended {
                status,
                exit_code: code,
                seconds: started.elapsed().as_secs_f64(),
                crashed: status == Status::Failed && !documented && code.is_none_or(|c| c > 128),
            });
        }
        let why = if stop.load(Ordering::SeqCst) {
            Some(Status::Interrupted)
        } else if started.elapsed() > deadline {
            Some(Status::TimedOut)
        } else {
            None
        };
        if let Some(status) = why {
            end_group(&mut child);
            return Ok(Ended {
                status,
                exit_code: None,
                seconds: started.elapsed().as_secs_f64(),
                crashed: false,
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM to the child's process group, SIGKILL after half a second if any is left.
fn end_group(child: &mut Child) {
    let group = Pid::from_raw(child.id() as i32);
    let _ = killpg(group, Signal::SIGTERM);
    let until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Ranks the launcher left behind share the group.
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.wait();
}

/// The last `n` lines of a log, to show why a step failed.
pub fn tail(log: &Path, n: usize) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), s.into()]
    }

    #[test]
    fn a_command_past_its_deadline_is_stopped_with_its_children() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("x.log");
        let pid = d.path().join("child.pid");
        let stop = AtomicBool::new(false);
        let t = Instant::now();
        let e = run(
            &argv(&format!("sleep 60 & echo $! > {}; wait", pid.display())),
            d.path(),
            &log,
            None,
            Duration::from_millis(300),
            &stop,
        )
        .unwrap();
        assert_eq!(e.status, Status::TimedOut);
        assert!(t.elapsed() < Duration::from_secs(5));
        // The grandchild went with the group.
        let child: i32 = std::fs::read_to_string(&pid)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let alive = nix::sys::signal::kill(Pid::from_raw(child), None).is_ok()
            && !std::fs::read_to_string(format!("/proc/{child}/stat"))
                .unwrap_or_default()
                .contains(") Z ");
        assert!(!alive, "the sleep survived");
    }

    /// A launch that dies by a signal before its document is launched once more; one that
    /// crashes twice is failed; an ordinary failure (exit 2) is not launched again.
    #[test]
    fn a_crashed_launch_is_launched_once_more_and_only_then() {
        let d = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(false);
        let doc = d.path().join("doc.json");
        let log = d.path().join("step.log");
        let step = |script: &str| {
            run_step(
                &argv(script),
                d.path(),
                &log,
                &doc,
                Duration::from_secs(20),
                &stop,
            )
            .unwrap()
        };
        // First launch: SIGSEGV; second: the document.
        let a =
            step("if [ -f seen ]; then echo '{}' > doc.json; else touch seen; kill -SEGV $$; fi");
        assert_eq!(a.last.status, Status::Done);
        let first = a.crashed_first.expect("a relaunch");
        assert!(first.crashed && first.status == Status::Failed);
        assert!(d.path().join("step.log.first").is_file());
        // A launcher's report of a rank killed by SIGSEGV (exit 139), twice: failed.
        std::fs::remove_file(&doc).unwrap();
        let a = step("echo rank 3 segfaulted; exit 139");
        assert_eq!(a.last.status, Status::Failed);
        assert!(a.crashed_first.is_some() && a.last.crashed);
        // Exit 2 is the tool's own refusal: no relaunch.
        let a = step("exit 2");
        assert_eq!(a.last.status, Status::Failed);
        assert!(a.crashed_first.is_none());
        // Killed by a signal after writing its document: measured, not relaunched.
        let a = step("echo '{}' > doc.json; kill -KILL $$");
        assert!(a.crashed_first.is_none() && !a.last.crashed);
    }

    #[test]
    fn exit_codes_and_documents_decide_done() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("x.log");
        let doc = d.path().join("doc.json");
        let stop = AtomicBool::new(false);
        let long = Duration::from_secs(30);
        let e = run(
            &argv("echo measured; exit 1"),
            d.path(),
            &log,
            Some(&doc),
            long,
            &stop,
        )
        .unwrap();
        assert_eq!(e.status, Status::Failed, "no document: not done");
        std::fs::write(&doc, "{}").unwrap();
        let e = run(&argv("exit 1"), d.path(), &log, Some(&doc), long, &stop).unwrap();
        assert_eq!((e.status, e.exit_code), (Status::Done, Some(1)));
        let e = run(&argv("exit 2"), d.path(), &log, Some(&doc), long, &stop).unwrap();
        assert_eq!(e.status, Status::Failed);
        let stop = AtomicBool::new(true);
        let e = run(&argv("sleep 30"), d.path(), &log, None, long, &stop).unwrap();
        assert_eq!(e.status, Status::Interrupted);
        assert!(e.seconds < 2.0);
    }
}
