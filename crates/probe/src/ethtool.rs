//! The driver's own counters: `ethtool -S IF`.
//!
//! What the RDMA port counters do not say, the Ethernet driver does: per-priority pause
//! frames sent and received and their duration (PFC at work, or a storm), discards on a
//! lossless priority, ECN-marked packets and CNPs, FEC corrected bits, each under the
//! driver's own name (mlx5: `rx_prio3_pause`, `rx_prio3_pause_duration`,
//! `rx_discards_phy`, `rx_corrected_bits_phy`, `np_cnp_sent`...). ethtool 6.1 (Debian 12)
//! prints them as text only (`--json` covers `--show-fec`, not `-S`), so this reads the
//! text: a `NIC statistics:` heading, then one `name: value` per line.
//!
//! `ethtool` is a process: each read costs a few milliseconds, so it is read around a
//! measurement, never inside one, and every call has a deadline.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `ethtool -S` may take before it is given up.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// The numeric `name: value` lines of `ethtool -S` output (ethtool 5.x-6.x text; the
/// per-queue blocks of newer drivers are indented the same way). Lines whose value is not
/// a number, and the heading, are skipped.
pub fn parse_stats(text: &str) -> BTreeMap<String, i64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            let k = k.trim();
            let v = v.trim();
            let v = v
                .parse::<i64>()
                .ok()
                .or_else(|| v.parse::<u64>().ok().map(|u| u as i64))?;
            (!k.is_empty() && !k.contains(' ')).then(|| (k.to_string(), v))
        })
        .collect()
}

/// `ethtool -S IF`'s counters; `Err` says why there are none (ethtool missing, the
/// interface has no statistics, as virtual ones often do, or no answer in time).
pub fn stats(ifname: &str) -> Result<BTreeMap<String, i64>, String> {
    let mut child = Command::new("ethtool")
        .args(["-S", ifname])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run ethtool ({e}): install the ethtool package"))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if start.elapsed() > DEADLINE => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "ethtool -S {ifname} did not answer in {} s",
                    DEADLINE.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("ethtool -S {ifname}: {e}")),
        }
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    if !status.success() {
        return Err(format!("ethtool -S {ifname}: {}", err.trim()));
    }
    Ok(parse_stats(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_text_parses_to_counters() {
        // mlx5 as ethtool 6.1 prints it (abridged), with a heading and a non-numeric line.
        let text = "NIC statistics:\n     rx_packets: 1024\n     rx_prio3_pause: 17\n     \
                    rx_prio3_pause_duration: 3400\n     np_cnp_sent: 5\n     \
                    rx_discards_phy: 0\n     link_state: up\n";
        let c = parse_stats(text);
        assert_eq!(c.len(), 5, "{c:?}");
        assert_eq!(c["rx_prio3_pause"], 17);
        assert_eq!(c["np_cnp_sent"], 5);
        assert!(!c.contains_key("link_state"));
        assert!(parse_stats("no stats available\n").is_empty());
    }

    #[test]
    fn a_missing_interface_is_a_reason_not_a_panic() {
        let e = stats("fabcheck-no-such-if0").unwrap_err();
        assert!(
            e.contains("fabcheck-no-such-if0") || e.contains("ethtool"),
            "{e}"
        );
    }
}
