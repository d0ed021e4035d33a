//! `aggregate trend`: the nightly history as a signed trend: drifts, failed nights, the links that changed.

use super::*;
use reports::trend;

/// Trend report over a nightly history: each key figure over the nights beside the
/// baseline and the profile bound, slow drifts (a fitted slope over a window), failed
/// and regressed nights, the pairs and nodes that changed most. Exit 1 when anything
/// is flagged.
#[derive(Args)]
pub struct TrendArgs {
    /// History directories (one directory per night, as deploy/nightly.sbatch writes
    /// them) or night directories.
    #[arg(required = true)]
    history: Vec<PathBuf>,
    /// Delivery profile: its bounds are drawn and its verdict marks failed nights.
    #[arg(short, long)]
    profile: Option<String>,
    /// Delivery results to draw as the baseline (default: the first night of the history).
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// First night to include (2026-11-01, or RFC 3339).
    #[arg(long)]
    since: Option<String>,
    /// Last night to include (a bare date includes that whole day).
    #[arg(long)]
    until: Option<String>,
    /// Nights per drift window.
    #[arg(long, default_value_t = 28)]
    window: usize,
    /// Smallest drift reported: change over the window, % of its start level.
    #[arg(long, default_value_t = 5.0)]
    drift_pct: f64,
    /// Smallest Mann-Kendall |Z| of a drift (3: about 1 in 700 for pure noise).
    #[arg(long, default_value_t = 3.0)]
    drift_z: f64,
    /// Night-to-night regression: worse by more than this % of the last good night ...
    #[arg(long, default_value_t = 5.0)]
    tolerance: f64,
    /// ... and by more than this many standard deviations of its spread.
    #[arg(long, default_value_t = 3.0)]
    sigmas: f64,
    /// Output directory.
    #[arg(short, long, default_value = "trend")]
    out: PathBuf,
    /// Sign the bundle with this OpenSSH Ed25519 private key.
    #[arg(long, value_name = "KEY")]
    sign: Option<PathBuf>,
    /// Principal written to allowed_signers.
    #[arg(long, default_value = sign::DEFAULT_IDENTITY)]
    identity: String,
    /// Replace a trend report already in the output directory.
    #[arg(long)]
    force: bool,
    /// Directory whose trend.html / trend.md replace the built-in ones.
    #[arg(long)]
    templates: Option<PathBuf>,
    #[arg(long)]
    title: Option<String>,
    /// Leave unreadable or malformed result files out (they are named in the report).
    #[arg(long)]
    skip_bad: bool,
    /// Pairs and nodes listed as changed most.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Most figures plotted (flagged ones first).
    #[arg(long, default_value_t = 24)]
    max_plots: usize,
    /// Latency test whose distribution is overlaid over nights (default: the first).
    #[arg(long)]
    dist_test: Option<String>,
    /// ... at this size (default: its smallest).
    #[arg(long, requires = "dist_test", value_parser = parse_size)]
    dist_size: Option<u64>,
    /// Ceilings apply to each night (and to the baseline) on its own.
    #[command(flatten)]
    limits: LimitArgs,
}

impl TrendArgs {
    /// Reads the nights, writes (and signs) the trend, then says what changed.
    pub fn run(self) -> Result<u8> {
        let o = trend::run(&self.options())?;
        // Night names, figure names and check ids come from inputs: printed through
        // the terminal's escaping, one line each.
        for l in outcome_lines(&o) {
            println!("{}", terminal(&l.replace(['\n', '\r'], " ")));
        }
        Ok(o.exit_code())
    }

    /// The flags as the trend's options.
    fn options(self) -> trend::Options {
        let Self {
            history,
            profile,
            baseline,
            since,
            until,
            window,
            drift_pct,
            drift_z,
            tolerance,
            sigmas,
            out,
            sign,
            identity,
            force,
            templates,
            title,
            skip_bad,
            top,
            max_plots,
            dist_test,
            dist_size,
            limits,
        } = self;
        trend::Options {
            history,
            profile,
            baseline,
            since,
            until,
            rule: trend::drift::Rule {
                window,
                pct: drift_pct,
                z: drift_z,
                ..Default::default()
            },
            tolerance_pct: tolerance,
            sigmas,
            out,
            templates,
            sign,
            identity,
            force,
            title,
            skip_bad,
            top,
            max_plots,
            dist: dist_test.map(|t| (t, dist_size)),
            limits: limits.limits(),
        }
    }
}

/// Drifts, failed and newly regressed nights, where the trend is, its signature, the verdict.
fn outcome_lines(o: &trend::Outcome) -> Vec<String> {
    let t = &o.trend;
    let mut lines = Vec::new();
    for d in &t.drifts {
        lines.push(format!(
            "DRIFT      {:<40} {:+.1}% over {} nights to {} ({:+.2}%/week, Z {:.1}){}",
            d.series,
            d.change_pct,
            d.nights,
            d.window_to,
            d.pct_per_week,
            d.z,
            if d.disturbed_nights > 0 {
                format!(", {} disturbed night(s)", d.disturbed_nights)
            } else {
                String::new()
            }
        ));
    }
    for n in &t.nights {
        if n.verdict == Some("FAIL") {
            lines.push(format!(
                "FAILED     {:<40} {}",
                n.id,
                n.failed_checks.join(", ")
            ));
        }
        // A regression that lasts is printed the night it appears.
        if !n.new_regressions.is_empty() {
            let mut some: Vec<&str> = n
                .new_regressions
                .iter()
                .take(3)
                .map(String::as_str)
                .collect();
            if n.new_regressions.len() > 3 {
                some.push("...");
            }
            lines.push(format!(
                "REGRESSED  {:<40} {} figure(s) against {}{}: {}",
                n.id,
                n.new_regressions.len(),
                n.compared_with.as_deref().unwrap_or("?"),
                if n.disturbed {
                    " (disturbed night)"
                } else {
                    ""
                },
                some.join("; ")
            ));
        }
    }
    lines.push(format!("trend: {}", o.dir.join("trend.html").display()));
    if let Some(fp) = &o.fingerprint {
        lines.push(format!(
            "signed: {} by {fp}",
            o.dir.join(sign::SIGNATURE).display()
        ));
    }
    lines.push(format!(
        "verdict: {} ({} night(s), {} drift(s), {} failed, {} regressed, {} disturbed)",
        t.verdict,
        t.nights.len(),
        t.drifts.len(),
        t.failed_nights,
        t.regressed_nights,
        t.disturbed_nights
    ));
    lines
}
