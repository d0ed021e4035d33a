//! `fabcheck triage`: is a slow job the network's fault? A short run on exactly the job's
//! nodes (their audits, their links both ways, the retest of any suspect) judged against
//! the same cluster's last good night, answering "the network is at fault: <parts>" or
//! "the network matches its baseline" with the evidence.
//!
//! Two kinds of evidence, as R-Pingmesh separates a slow host from a slow network: the
//! matrix of the job's own links names the parts that stand out among them (a node, a
//! NIC, a link, a leaf: compared with their peers measured at the same time, so a host
//! busy with the customer's leftovers shows as a node, not as the fabric), and `aggregate
//! compare` sets the job's figures beside the baseline's, beyond the baseline's own noise.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::accept::{self, Options};
use crate::execute;

/// What triage needs beyond an acceptance run's options.
#[derive(Debug, Clone)]
pub struct Triage {
    pub run: Options,
    /// A good night's directory (its `results/`) or a results directory.
    pub baseline: PathBuf,
    /// `aggregate compare`'s bounds: percent of the baseline, and its standard deviations.
    pub tolerance_pct: f64,
    pub sigmas: f64,
}

/// Runs the triage; exit 0 when the network matches its baseline, 1 when it is at fault,
/// 2 when the triage could not run.
pub fn run(t: &Triage) -> Result<i32> {
    let baseline = baseline_results(&t.baseline)?;
    let outcome = accept::execute(&t.run)?;
    if outcome.code == 130 {
        return Ok(130);
    }
    let compare_md = t.run.out.join("compare.md");
    let (host, regressed) = compare(t, &baseline, &compare_md)?;
    let mut parts: Vec<String> = outcome.suspects.clone();
    parts.extend(
        regressed
            .iter()
            .map(|r| format!("regressed against the baseline: {r}")),
    );
    parts.extend(
        outcome
            .not_done
            .iter()
            .map(|s| format!("{s} did not complete")),
    );
    println!();
    for h in &host {
        println!("host side (not the network): regressed against the baseline: {h}");
    }
    if parts.is_empty() {
        println!(
            "triage: the network matches its baseline ({} on the job's nodes: no suspect, no \
             regression beyond the baseline's noise; compare: {})",
            outcome.steps_done,
            compare_md.display()
        );
        return Ok(0);
    }
    println!("triage: the network is at fault:");
    for p in &parts {
        println!("  - {p}");
    }
    println!(
        "evidence: {} (the job's links), {}",
        t.run.out.join("report/report.html").display(),
        compare_md.display()
    );
    Ok(1)
}

/// `aggregate compare` of the job's results against the baseline's, written to
/// `compare_md`: the metrics it marks regressed, the host's apart from the network's. CPU
/// per 100 Gb/s is the hosts' own cost of moving the bytes: a regression there is the
/// host's (a busy node, a governor), said beside the network's answer, not in it. An error
/// when the comparison could not run and marked nothing of the network's.
fn compare(t: &Triage, baseline: &Path, compare_md: &Path) -> Result<(Vec<String>, Vec<String>)> {
    let argv = vec![
        t.run.settings.bin.join("aggregate").display().to_string(),
        "compare".into(),
        baseline.display().to_string(),
        "results".into(),
        "--skip-bad".into(),
        "--tolerance".into(),
        t.tolerance_pct.to_string(),
        "--sigmas".into(),
        t.sigmas.to_string(),
        "--format".into(),
        "markdown".into(),
        "-o".into(),
        compare_md.display().to_string(),
    ];
    let stop = std::sync::atomic::AtomicBool::new(false);
    let ended = execute::run(
        &argv,
        &t.run.out,
        &t.run.out.join("compare.log"),
        Some(compare_md),
        Duration::from_secs(600),
        &stop,
    )?;
    let (host, regressed): (Vec<String>, Vec<String>) =
        regressed_rows(&std::fs::read_to_string(compare_md).unwrap_or_default())
            .into_iter()
            .partition(|r| r.contains("cpu per 100G"));
    if ended.exit_code.is_none_or(|c| c >= 2) && regressed.is_empty() {
        bail!(
            "aggregate compare could not run ({}): see {}",
            ended
                .exit_code
                .map_or("no exit code".into(), |c| format!("exit {c}")),
            t.run.out.join("compare.log").display()
        );
    }
    Ok((host, regressed))
}

/// The baseline's result documents: `DIR/results` of a night, or `DIR` itself.
fn baseline_results(dir: &Path) -> Result<PathBuf> {
    let results = dir.join("results");
    let p = if results.is_dir() {
        results
    } else {
        dir.to_path_buf()
    };
    if !p.is_dir() {
        bail!(
            "--baseline {}: no such directory (give a good night's directory, e.g. \
             $FABCHECK_HISTORY/last-good)",
            dir.display()
        );
    }
    std::path::absolute(&p).context("resolving --baseline")
}

/// The metrics `aggregate compare`'s Markdown marks **REGRESSED**, by their key.
fn regressed_rows(md: &str) -> Vec<String> {
    md.lines()
        .filter(|l| l.contains("**REGRESSED**"))
        .filter_map(|l| l.split('|').nth(1).map(|k| k.trim().to_string()))
        .collect()
}

/// The hosts of a Slurm job, through `scontrol` (the job's NodeList, expanded).
pub fn job_hosts(job: &str) -> Result<Vec<String>> {
    let out = Command::new("scontrol")
        .args(["show", "job", job])
        .output()
        .context("cannot run scontrol: give the job's nodes with --hosts instead")?;
    if !out.status.success() {
        bail!(
            "scontrol show job {job}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let list = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("NodeList="))
        .filter(|l| !l.is_empty() && *l != "(null)")
        .with_context(|| format!("job {job} has no nodes (not started yet?)"))?;
    let out = Command::new("scontrol")
        .args(["show", "hostnames", list])
        .output()
        .context("cannot run scontrol show hostnames")?;
    let hosts: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    if hosts.len() < 2 {
        bail!(
            "job {job} ran on {} node(s): triage measures links between nodes",
            hosts.len()
        );
    }
    Ok(hosts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regressed_rows_are_read_from_the_comparison() {
        let md = "# fabcheck regression check: REGRESSED\n\n| metric | a | b | c | d | verdict |\n\
                  |---|---|---|---|---|---|\n\
                  | send_bw tcp 64K avg | 9 Gb/s | 4 Gb/s | -55% | 8 Gb/s | **REGRESSED** |\n\
                  | send_lat tcp 8 B p50 | 10 us | 10 us | 0% | 12 us | ok |\n";
        assert_eq!(regressed_rows(md), ["send_bw tcp 64K avg"]);
        assert!(regressed_rows("# fabcheck regression check: OK\n").is_empty());
    }
}
