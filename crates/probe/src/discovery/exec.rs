//! Running a discovery tool with a deadline: a tool that hangs (lldpcli waiting on a wedged
//! daemon, smpquery retrying a MAD that never returns) must not hold up a benchmark.

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// What the tool printed, or why it could not be asked (the text goes into `Neighbor.why`).
pub fn run(program: &str, args: &[String], timeout: Duration) -> Result<String, String> {
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{program} not found"));
        }
        Err(e) => return Err(format!("cannot start {program}: {e}")),
    };
    // Drain both pipes on their own threads so a chatty tool cannot block on a full pipe.
    let drain = |mut r: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let err = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{program} did not answer within {:.0} s",
                    timeout.as_secs_f64()
                ));
            }
            Ok(None) => thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("waiting for {program}: {e}")),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if status.success() {
        Ok(stdout)
    } else {
        let last = stderr
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("no message");
        Err(format!("{program} failed ({status}): {last}"))
    }
}

/// `run` with an optional command prefix (the test hook `FABCHECK_IB_WRAP`, e.g.
/// `ibsim-run`): `prefix... program args...`.
pub fn run_wrapped(
    wrap: &[String],
    program: &str,
    args: &[String],
    timeout: Duration,
) -> Result<String, String> {
    match wrap.split_first() {
        None => run(program, args, timeout),
        Some((first, rest)) => {
            let mut all: Vec<String> = rest.to_vec();
            all.push(program.to_string());
            all.extend(args.iter().cloned());
            run(first, &all, timeout).map_err(|e| format!("{e} (through {})", wrap.join(" ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn output_failure_absence_and_hang_are_told_apart() {
        let t = Duration::from_secs(5);
        assert_eq!(run("sh", &s(&["-c", "echo hi"]), t).unwrap(), "hi\n");
        let e = run("sh", &s(&["-c", "echo first >&2; echo bad >&2; exit 3"]), t).unwrap_err();
        assert!(e.contains("exit status: 3") && e.contains("bad"), "{e}");
        let e = run("no-such-tool-fabcheck", &[], t).unwrap_err();
        assert_eq!(e, "no-such-tool-fabcheck not found");
        let begun = Instant::now();
        let e = run("sleep", &s(&["30"]), Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("did not answer"), "{e}");
        assert!(begun.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_wrap_prefix_runs_the_tool_through_it() {
        let t = Duration::from_secs(5);
        let got = run_wrapped(&s(&["env", "X=1"]), "sh", &s(&["-c", "echo $X"]), t).unwrap();
        assert_eq!(got, "1\n");
        let e = run_wrapped(&s(&["env"]), "no-such-tool-fabcheck", &[], t).unwrap_err();
        assert!(e.contains("through env"), "{e}");
    }
}
