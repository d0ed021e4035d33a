//! The measurement-quality probe: started by the measuring thread just before a run and
//! finished by the same thread just after, it records what else the host was doing
//! (load average, CPU steal, preemptions of the measuring thread) into the schema's
//! [`HostQuality`]. The thresholds and the judgement live with the schema
//! (`results::quality`) so that `aggregate` judges documents the same way anywhere.
//!
//! Plain reads of `/proc` and one `getrusage(RUSAGE_THREAD)` per probe: nothing runs
//! during the measurement, so the probe cannot disturb what it watches.
//!
//! A run calls [`Probe::start`] before its first timed loop, [`Probe::finish`] after its
//! last, brings every rank's [`HostQuality`] to the writer (`bootstrap::mpi::MpiJob::gather_quality` under MPI), and
//! the writer calls `Document::attach_quality(hosts)` once the results are in: that judges
//! the hosts and every result's port counters and adds a warning per threshold crossed.

use std::thread::ThreadId;
use std::time::Instant;

use nix::sys::resource::{getrusage, UsageWho};
pub use results::quality::{
    HostQuality, RunQuality, FOREIGN_MIN_BYTES, FOREIGN_MIN_PACKETS, FOREIGN_RATIO_MAX,
    INVOLUNTARY_MIN, INVOLUNTARY_PER_S_MAX, LOAD_SLACK, STEAL_PCT_MAX,
};
use results::HostInfo;

/// CPU time counters of `/proc/stat`'s first line, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct CpuTimes {
    steal: u64,
    total: u64,
}

/// Figures taken at the start of a run.
#[derive(Debug, Clone)]
pub struct Probe {
    started: Instant,
    thread: ThreadId,
    load: f64,
    cpu: Option<CpuTimes>,
    /// (voluntary, involuntary) context switches of the calling thread.
    switches: Option<(u64, u64)>,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The 1-minute load average: runnable and uninterruptible tasks, exponentially averaged.
fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// `cpu  user nice system idle iowait irq softirq steal guest guest_nice`: guest time is
/// already inside user time, so the total is the first eight fields.
fn parse_cpu_times(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    Some(CpuTimes {
        steal: *v.get(7).unwrap_or(&0),
        total: v.iter().sum(),
    })
}

/// Online CPUs of the host: the load average counts the whole host's tasks, whatever this
/// process's affinity allows it.
fn parse_cpu_count(stat: &str) -> u32 {
    stat.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count() as u32
}

fn thread_switches() -> Option<(u64, u64)> {
    let u = getrusage(UsageWho::RUSAGE_THREAD).ok()?;
    Some((
        u.voluntary_context_switches() as u64,
        u.involuntary_context_switches() as u64,
    ))
}

fn pct(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64 * 100.0)
}

impl Probe {
    /// Takes the "before" figures. Call it on the thread that will run the timed loops.
    pub fn start() -> Probe {
        Probe {
            started: Instant::now(),
            thread: std::thread::current().id(),
            load: read("/proc/loadavg")
                .as_deref()
                .and_then(parse_loadavg)
                .unwrap_or(0.0),
            cpu: read("/proc/stat").as_deref().and_then(parse_cpu_times),
            switches: thread_switches(),
        }
    }

    /// Takes the "after" figures and returns the host's record. `me` names the host (and
    /// rank) as the document does. Context switches are counted only when called on the
    /// thread that started the probe: they are that thread's own.
    pub fn finish(self, me: &HostInfo) -> HostQuality {
        let mut q = self.finish_as(&me.hostname, me.rank);
        if q.cores == 0 {
            q.cores = me.cores;
        }
        q
    }

    /// [`Probe::finish`] for a process that knows its host name and rank but holds no
    /// [`HostInfo`] (a rank of a sweep: the coordinator's member entry).
    pub fn finish_as(self, hostname: &str, rank: Option<u32>) -> HostQuality {
        let stat = read("/proc/stat").unwrap_or_default();
        let cpu = parse_cpu_times(&stat);
        let cores = parse_cpu_count(&stat);
        let same_thread = std::thread::current().id() == self.thread;
        let switches = thread_switches()
            .zip(self.switches)
            .filter(|_| same_thread)
            .map(|(after, before)| {
                (
                    after.0.saturating_sub(before.0),
                    after.1.saturating_sub(before.1),
                )
            });
        HostQuality {
            rank,
            hostname: hostname.to_string(),
            cores,
            load_avg_before: self.load,
            load_avg_after: read("/proc/loadavg")
                .as_deref()
                .and_then(parse_loadavg)
                .unwrap_or(0.0),
            cpu_steal_pct_before: self.cpu.and_then(|c| pct(c.steal, c.total)),
            cpu_steal_pct: cpu.zip(self.cpu).and_then(|(a, b)| {
                pct(
                    a.steal.saturating_sub(b.steal),
                    a.total.saturating_sub(b.total),
                )
            }),
            involuntary_context_switches: switches.map(|s| s.1),
            voluntary_context_switches: switches.map(|s| s.0),
            duration_s: self.started.elapsed().as_secs_f64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        assert_eq!(parse_loadavg("0.52 0.58 0.59 1/467 12345\n"), Some(0.52));
        assert_eq!(parse_loadavg(""), None);
        let stat = "cpu  100 0 50 800 10 0 0 40 7 0\ncpu0 50 0 25 400 5 0 0 20 0 0\n\
                    cpu1 50 0 25 400 5 0 0 20 0 0\nintr 1 2 3\nctxt 99\n";
        assert_eq!(
            parse_cpu_times(stat),
            Some(CpuTimes {
                steal: 40,
                total: 1000
            })
        );
        assert_eq!(parse_cpu_count(stat), 2);
        assert_eq!(parse_cpu_times("cpu  1 2\n"), None);
        assert_eq!(parse_cpu_times("cpu  1 x 3 4\n"), None);
    }

    #[test]
    fn a_probe_on_this_host_records_every_figure() {
        let me = crate::host::collect();
        let p = Probe::start();
        // Give the CPU away a few times: those are voluntary switches, not preemptions.
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let q = p.finish(&me);
        assert_eq!(q.hostname, me.hostname);
        assert!(q.cores >= 1);
        assert!(q.duration_s >= 0.015, "{q:?}");
        assert!(q.load_avg_before >= 0.0 && q.load_avg_after >= 0.0);
        assert!(q.cpu_steal_pct.is_some_and(|s| (0.0..=100.0).contains(&s)));
        assert!(q.voluntary_context_switches.unwrap() >= 3, "{q:?}");
        assert!(q.involuntary_context_switches.is_some());
    }

    #[test]
    fn switches_are_left_out_when_another_thread_finishes() {
        let me = crate::host::collect();
        let p = Probe::start();
        let q = std::thread::spawn(move || p.finish(&me)).join().unwrap();
        assert_eq!(q.involuntary_context_switches, None);
        assert_eq!(q.voluntary_context_switches, None);
    }
}
