//! Where the audit reads from: the live machine, the live machine while saving everything
//! read into a capture directory (`--capture DIR`, a support bundle), or such a directory
//! (`--from DIR`). The audit code sees only [`Source`], so a capture replays to the same
//! audit as the machine it was taken on.
//!
//! Capture layout (documented for hand-written captures in docs/lossless.md):
//! - `fs/<absolute path>`: every file read, byte for byte (`fs/sys/class/net/eth2/mtu`);
//!   a directory listed is a directory there, with its sub-directories.
//! - `read-errors.json`: `{"/path": "why"}` for files and directories that exist but could
//!   not be read (permission, `Operation not supported`); a path absent from both reads as
//!   "No such file or directory".
//! - `cmd/<argv joined by _>.out`, `.err`, `.rc`: stdout, stderr and the exit status of
//!   each command run (`cmd/dcb_-j_pfc_-s_show_dev_eth2.out`); `.rc` holds the number, or
//!   `error: why` when the command could not be started (not installed) or timed out. A
//!   command without `.rc` was not captured.
//! - `env`: `KEY=VALUE` lines of the NCCL variables of the process environment.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

/// What one command printed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Output {
    /// Exit status; `None` when it could not run (see `error`).
    pub code: Option<i32>,
    /// What it printed on standard output (at most 16 MiB, as UTF-8 with replacements).
    pub stdout: String,
    /// What it printed on standard error (likewise).
    pub stderr: String,
    /// Why the command did not run: not installed, timed out, not captured.
    pub error: Option<String>,
}

impl Output {
    /// It ran and exited 0.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// Why this command gave nothing usable, in the tool's own words where it said any.
    pub fn why(&self) -> String {
        if let Some(e) = &self.error {
            return e.clone();
        }
        let first = |s: &str| {
            s.lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_string)
        };
        first(&self.stderr)
            .or_else(|| first(&self.stdout))
            .unwrap_or_else(|| format!("exit status {}", self.code.unwrap_or(-1)))
    }
}

/// Files, directories, commands and environment the audit reads.
pub trait Source {
    /// A file's text, or why not.
    fn read(&self, path: &str) -> Result<String, String>;
    /// A directory's entries, sorted, or why not.
    fn list(&self, path: &str) -> Result<Vec<String>, String>;
    /// Runs `argv` (with `LC_ALL=C`), bounded in time.
    fn run(&self, argv: &[&str]) -> Output;
    /// The `NCCL_*` variables of the environment.
    fn env(&self) -> Vec<(String, String)>;
}

/// Longest a single command may take (`ethtool -m` reads the module over I2C).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// The live machine, optionally saving what it reads into a capture directory.
#[derive(Debug)]
pub struct Live {
    capture: Option<PathBuf>,
    deadline: Option<Instant>,
    errors: Mutex<BTreeMap<String, String>>,
    capture_error: Mutex<Option<String>>,
}

impl Live {
    /// This host's files and commands, read as they are (no capture).
    pub fn new() -> Self {
        Live {
            capture: None,
            deadline: None,
            errors: Mutex::new(BTreeMap::new()),
            capture_error: Mutex::new(None),
        }
    }

    /// Saves every file and command output into `dir` (created; must be empty or absent).
    pub fn capturing(dir: &Path) -> Result<Self, String> {
        if dir.exists()
            && std::fs::read_dir(dir)
                .map_err(|e| format!("{}: {e}", dir.display()))?
                .next()
                .is_some()
        {
            return Err(format!(
                "capture directory {} is not empty: name a new directory",
                dir.display()
            ));
        }
        std::fs::create_dir_all(dir.join("fs"))
            .and_then(|_| std::fs::create_dir_all(dir.join("cmd")))
            .map_err(|e| format!("cannot create capture directory {}: {e}", dir.display()))?;
        let mut l = Live::new();
        l.capture = Some(dir.to_path_buf());
        Ok(l)
    }

    /// Stops running commands once `budget` has passed (they then read as unknown).
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.deadline = Some(Instant::now() + budget);
        self
    }

    /// Writes what a capture needs besides the files (the read errors); the first error
    /// met while capturing, if any.
    pub fn finish(&self) -> Result<(), String> {
        if let Some(e) = self
            .capture_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            return Err(e);
        }
        if let Some(dir) = &self.capture {
            let errors = self.errors.lock().unwrap_or_else(PoisonError::into_inner);
            let text = serde_json::to_string_pretty(&*errors).unwrap_or_default();
            results::write::write_atomic(&dir.join("read-errors.json"), text.as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", dir.display()))?;
        }
        Ok(())
    }

    fn save(&self, rel: &Path, bytes: &[u8]) {
        let Some(dir) = &self.capture else { return };
        let path = dir.join(rel);
        let r = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(&path, bytes));
        if let Err(e) = r {
            self.capture_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert_with(|| format!("cannot write {}: {e}", path.display()));
        }
    }

    fn note_error(&self, path: &str, e: &std::io::Error) -> String {
        let why = e.to_string();
        if e.kind() != std::io::ErrorKind::NotFound && self.capture.is_some() {
            self.errors
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(path.to_string(), why.clone());
        }
        why
    }
}

impl Default for Live {
    fn default() -> Self {
        Live::new()
    }
}

fn fs_rel(path: &str) -> PathBuf {
    Path::new("fs").join(path.trim_start_matches('/'))
}

/// `cmd/dcb_-j_pfc_-s_show_dev_eth2`.
pub fn command_stem(argv: &[&str]) -> String {
    let joined = argv.join("_");
    let safe: String = joined
        .chars()
        .map(|c| if c == '/' || c == '\0' { '%' } else { c })
        .collect();
    format!("cmd/{safe}")
}

impl Source for Live {
    fn read(&self, path: &str) -> Result<String, String> {
        match std::fs::read(path) {
            Ok(bytes) => {
                self.save(&fs_rel(path), &bytes);
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            }
            Err(e) => Err(self.note_error(path, &e)),
        }
    }

    fn list(&self, path: &str) -> Result<Vec<String>, String> {
        let rd = std::fs::read_dir(path).map_err(|e| self.note_error(path, &e))?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        if let Some(dir) = &self.capture {
            let base = dir.join(fs_rel(path));
            let _ = std::fs::create_dir_all(&base);
            for n in &names {
                if Path::new(path).join(n).is_dir() {
                    let _ = std::fs::create_dir_all(base.join(n));
                }
            }
        }
        Ok(names)
    }

    fn run(&self, argv: &[&str]) -> Output {
        let timeout = match self.deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    // Not saved: a capture holds what the machine said, not our budget.
                    return Output {
                        error: Some("the audit's time budget was spent before this command".into()),
                        ..Default::default()
                    };
                }
                left.min(COMMAND_TIMEOUT)
            }
            None => COMMAND_TIMEOUT,
        };
        let out = run_bounded(argv, timeout);
        if self.capture.is_some() {
            let stem = command_stem(argv);
            self.save(Path::new(&format!("{stem}.out")), out.stdout.as_bytes());
            self.save(Path::new(&format!("{stem}.err")), out.stderr.as_bytes());
            let rc = match (&out.code, &out.error) {
                (Some(c), _) => c.to_string(),
                (None, Some(e)) => format!("error: {e}"),
                (None, None) => "error: killed".into(),
            };
            self.save(
                Path::new(&format!("{stem}.rc")),
                format!("{rc}\n").as_bytes(),
            );
        }
        out
    }

    fn env(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| k.starts_with("NCCL_"))
            .collect();
        v.sort();
        if self.capture.is_some() {
            let text: String = v.iter().map(|(k, val)| format!("{k}={val}\n")).collect();
            self.save(Path::new("env"), text.as_bytes());
        }
        v
    }
}

/// Runs a command with a deadline, reading both pipes on their own threads so a chatty
/// tool cannot block on a full pipe; kills it at the deadline.
fn run_bounded(argv: &[&str], timeout: Duration) -> Output {
    let Some((prog, args)) = argv.split_first() else {
        return failed("empty command".into());
    };
    let mut child = match Command::new(prog)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return failed(format!("{prog} is not installed (not found in PATH)"))
        }
        Err(e) => return failed(format!("cannot run {prog}: {e}")),
    };
    let out_t = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err_t = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let status = wait_until(&mut child, timeout, argv);
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    match status {
        Ok(s) => Output {
            code: s.code(),
            error: s
                .code()
                .is_none()
                .then(|| format!("{prog} was killed by a signal")),
            stdout,
            stderr,
        },
        Err(e) => Output {
            code: None,
            stdout,
            stderr,
            error: Some(e),
        },
    }
}

/// A command that did not run, and why.
fn failed(error: String) -> Output {
    Output {
        error: Some(error),
        ..Default::default()
    }
}

/// Reads a pipe to its end (at most 16 MiB) on a thread of its own.
fn drain(r: Option<Box<dyn Read + Send>>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(r) = r {
            let _ = r.take(16 << 20).read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Waits for the child until `timeout`, then kills it: its exit status, or why none.
fn wait_until(
    child: &mut std::process::Child,
    timeout: Duration,
    argv: &[&str],
) -> Result<std::process::ExitStatus, String> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Ok(s),
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} did not answer within {} s",
                    argv.join(" "),
                    timeout.as_secs_f64()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("waiting for {}: {e}", argv[0])),
        }
    }
}

/// A capture directory, read back.
pub struct Replay {
    dir: PathBuf,
    errors: BTreeMap<String, String>,
}

impl Replay {
    /// A capture directory (`fs/`, `cmd/`) to read instead of a host; an error when `dir`
    /// holds neither.
    pub fn open(dir: &Path) -> Result<Self, String> {
        if !dir.join("fs").is_dir() && !dir.join("cmd").is_dir() {
            return Err(format!(
                "{} is not a capture (no fs/ or cmd/ directory): make one with fabric-doctor --capture DIR",
                dir.display()
            ));
        }
        let errors = match std::fs::read_to_string(dir.join("read-errors.json")) {
            Ok(t) => serde_json::from_str(&t).map_err(|e| {
                format!(
                    "{}: not a map of path to reason: {e}",
                    dir.join("read-errors.json").display()
                )
            })?,
            Err(_) => BTreeMap::new(),
        };
        Ok(Replay {
            dir: dir.to_path_buf(),
            errors,
        })
    }
}

const NOT_FOUND: &str = "No such file or directory (os error 2)";

impl Source for Replay {
    fn read(&self, path: &str) -> Result<String, String> {
        if let Some(e) = self.errors.get(path) {
            return Err(e.clone());
        }
        let p = self.dir.join(fs_rel(path));
        if p.is_dir() {
            return Err("Is a directory (os error 21)".into());
        }
        std::fs::read(&p)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .map_err(|_| NOT_FOUND.into())
    }

    fn list(&self, path: &str) -> Result<Vec<String>, String> {
        if let Some(e) = self.errors.get(path) {
            return Err(e.clone());
        }
        let rd =
            std::fs::read_dir(self.dir.join(fs_rel(path))).map_err(|_| NOT_FOUND.to_string())?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    fn run(&self, argv: &[&str]) -> Output {
        let stem = self.dir.join(command_stem(argv));
        // Bytes as the command printed them, decoded as the live run decodes them: one
        // stray byte (a module's vendor field, a driver's name) costs a replacement
        // character, not the whole output.
        let get = |ext: &str| {
            std::fs::read(stem.with_extension_str(ext))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
        };
        let Ok(rc) = get("rc") else {
            return Output {
                error: Some(format!("`{}` is not in the capture", argv.join(" "))),
                ..Default::default()
            };
        };
        let rc = rc.trim();
        let (code, error) = match rc.parse::<i32>() {
            Ok(c) => (Some(c), None),
            Err(_) => (
                None,
                Some(rc.strip_prefix("error:").unwrap_or(rc).trim().to_string()),
            ),
        };
        Output {
            code,
            stdout: get("out").unwrap_or_default(),
            stderr: get("err").unwrap_or_default(),
            error,
        }
    }

    fn env(&self) -> Vec<(String, String)> {
        let text = std::fs::read_to_string(self.dir.join("env")).unwrap_or_default();
        let mut v: Vec<(String, String)> = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .filter(|(k, _)| k.starts_with("NCCL_"))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        v.sort();
        v
    }
}

/// `a/b.c` + `rc` -> `a/b.c.rc` (file names hold dots of their own: `dev_eth2.100`).
trait WithExtensionStr {
    fn with_extension_str(&self, ext: &str) -> PathBuf;
}

impl WithExtensionStr for PathBuf {
    fn with_extension_str(&self, ext: &str) -> PathBuf {
        let mut s = self.clone().into_os_string();
        s.push(".");
        s.push(ext);
        PathBuf::from(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_replays_files_errors_and_commands() {
        let tmp = tempfile::tempdir().unwrap();
        let cap = tmp.path().join("cap");
        let live = Live::capturing(&cap).unwrap();
        let host = live.read("/proc/sys/kernel/hostname").unwrap();
        let missing = live.read("/no/such/file").unwrap_err();
        let echo = live.run(&["sh", "-c", "echo out; echo err >&2; exit 3"]);
        let absent = live.run(&["no-such-tool-fabcheck", "-V"]);
        let net = live.list("/sys/class/net").unwrap();
        live.finish().unwrap();
        assert_eq!(echo.code, Some(3));
        assert!(absent.error.as_deref().unwrap().contains("not installed"));
        let r = Replay::open(&cap).unwrap();
        assert_eq!(r.read("/proc/sys/kernel/hostname").unwrap(), host);
        assert_eq!(r.read("/no/such/file").unwrap_err(), missing);
        assert_eq!(r.run(&["sh", "-c", "echo out; echo err >&2; exit 3"]), echo);
        assert_eq!(r.run(&["no-such-tool-fabcheck", "-V"]), absent);
        assert_eq!(r.list("/sys/class/net").unwrap(), net);
        assert!(r
            .run(&["never", "run"])
            .error
            .unwrap()
            .contains("not in the capture"));
        // A second capture into the same directory is refused, not mixed.
        assert!(Live::capturing(&cap).unwrap_err().contains("not empty"));
    }

    #[test]
    fn a_captured_output_with_a_stray_byte_is_read_not_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let cap = tmp.path().join("cap");
        let live = Live::capturing(&cap).unwrap();
        let argv = [
            "sh",
            "-c",
            "printf 'Vendor name : ACME\\377\\nVendor PN : X1\\n'",
        ];
        let out = live.run(&argv);
        live.finish().unwrap();
        assert!(out.stdout.contains("Vendor PN : X1"), "{out:?}");
        let replayed = Replay::open(&cap).unwrap().run(&argv);
        assert_eq!(replayed.stdout, out.stdout);
        assert!(replayed.stdout.contains('\u{fffd}'));
    }

    #[test]
    fn a_slow_command_is_killed_at_its_deadline() {
        let out = run_bounded(&["sleep", "10"], Duration::from_millis(200));
        assert!(out.error.unwrap().contains("did not answer"));
    }
}
