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

/// What a step's command ended with, and the launches before it that crashed.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempts {
    pub last: Ended,
    /// The launches that crashed before writing their document, in order, each with the
    /// file its log was kept in.
    pub crashed: Vec<(Ended, std::path::PathBuf)>,
}

/// How many times a step is launched at most when its launches crash before writing their
/// document.
pub const LAUNCHES: usize = 3;

/// Runs a measuring step as [`run`] does, and again, up to [`LAUNCHES`] in all, while its
/// launch crashed before writing its document. A launch can die under the measurement, not
/// of it: here Open MPI 4.1's TCP wire-up inside MPI_Init, under srun with Slurm's PMIx or
/// mpirun on a loaded host, segfaulted a rank in about one launch in four (a callback of
/// the TCP BTL called before it was set); with one relaunch, both launches of a step
/// crashed in one CI run of about five. Such a crash measured nothing, so nothing is hidden
/// by another launch; a step that crashes every time is a failed step like any other. Each
/// crashed launch's log is kept beside the step's (`.log.first`, `.log.second`), and each
/// relaunch is said.
pub fn run_step(
    argv: &[String],
    dir: &Path,
    log: &Path,
    document: &Path,
    deadline: Duration,
    stop: &AtomicBool,
) -> Result<Attempts> {
    let mut crashed = Vec::new();
    let mut spent = 0.0;
    loop {
        let left = deadline.saturating_sub(Duration::from_secs_f64(spent));
        let end = run(argv, dir, log, Some(document), left, stop)?;
        spent += end.seconds;
        let again = end.crashed
            && !stop.load(Ordering::SeqCst)
            && crashed.len() + 1 < LAUNCHES
            && !left.is_zero();
        if !again {
            return Ok(Attempts {
                last: Ended {
                    seconds: spent,
                    ..end
                },
                crashed,
            });
        }
        let kept = log.with_extension(KEPT[crashed.len()]);
        std::fs::rename(log, &kept)
            .with_context(|| format!("{}: cannot keep the crashed launch's log", log.display()))?;
        println!(
            "  crashed after {:.0}s ({}) before writing its document: launched again, {} of at \
             most {LAUNCHES} (log of the crashed launch: {})",
            end.seconds,
            end.how(),
            crashed.len() + 2,
            kept.display()
        );
        crashed.push((end, kept));
    }
}

/// The extensions a crashed launch's log is kept under, in order.
const KEPT: [&str; LAUNCHES - 1] = ["log.first", "log.second"];

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

    /// A launch that dies by a signal before its document is launched again, up to
    /// [`LAUNCHES`] in all; one that crashes every time is failed; an ordinary failure
    /// (exit 2) is not launched again.
    #[test]
    fn a_crashed_launch_is_launched_again_up_to_the_limit_and_only_then() {
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
        // Two launches die by SIGSEGV; the third writes the document.
        let a = step(
            "n=$(cat seen 2>/dev/null || echo 0); echo $((n + 1)) > seen; \
             if [ $n -ge 2 ]; then echo '{}' > doc.json; else kill -SEGV $$; fi",
        );
        assert_eq!(a.last.status, Status::Done);
        assert_eq!(a.crashed.len(), 2, "two relaunches");
        assert!(a
            .crashed
            .iter()
            .all(|(e, _)| e.crashed && e.status == Status::Failed));
        assert!(d.path().join("step.log.first").is_file());
        assert!(d.path().join("step.log.second").is_file());
        // A launcher's report of a rank killed by SIGSEGV (exit 139), every time: failed
        // after LAUNCHES launches, no more.
        std::fs::remove_file(&doc).unwrap();
        std::fs::write(d.path().join("count"), "").unwrap();
        let a = step("echo x >> count; echo rank 3 segfaulted; exit 139");
        assert_eq!(a.last.status, Status::Failed);
        assert_eq!(a.crashed.len(), LAUNCHES - 1);
        assert!(a.last.crashed);
        let launches = std::fs::read_to_string(d.path().join("count")).unwrap();
        assert_eq!(launches.lines().count(), LAUNCHES);
        // Exit 2 is the tool's own refusal: no relaunch.
        let a = step("exit 2");
        assert_eq!(a.last.status, Status::Failed);
        assert!(a.crashed.is_empty());
        // Killed by a signal after writing its document: measured, not relaunched.
        let a = step("echo '{}' > doc.json; kill -KILL $$");
        assert!(a.crashed.is_empty() && !a.last.crashed);
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
