//! `aggregate`: results -> verdict -> signed report; regressions; metric export.
//! Exit codes: 0 pass, 1 a check failed or a metric regressed (or verification failed),
//! 2 usage or input error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use reports::{cluster, compare, explain, export, report, sign, templates, trend};
use verdict::error::{exit, Error, Result};
use verdict::escape::terminal;
use verdict::{input, judge, profile, tables};

#[derive(Parser)]
#[command(
    name = "aggregate",
    version,
    about = "Judge fabcheck results against a delivery profile; signed reports, regressions, metric export",
    long_about = "Reads the JSON of every benchmark, rank and run, judges it against a delivery \
                  profile, and writes a report a customer can read and verify (HTML with plots, \
                  Markdown, JUnit, SSH signature). Exit codes: 0 pass, 1 fail or regression, \
                  2 usage or input error."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Judge results against a delivery profile and write the report bundle.
    Report {
        /// Result files and directories (searched recursively for *.json).
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(short, long, help = profile_help())]
        profile: String,
        /// Report directory.
        #[arg(short, long, default_value = "report")]
        out: PathBuf,
        /// Directory whose report.html / report.md / report.junit.xml replace the built-in ones.
        #[arg(long)]
        templates: Option<PathBuf>,
        /// Sign the bundle with this OpenSSH Ed25519 private key (`aggregate keygen`).
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
        /// Principal written to allowed_signers (the `-I` of `ssh-keygen -Y verify`).
        #[arg(long, default_value = sign::DEFAULT_IDENTITY)]
        identity: String,
        /// Leave unreadable or malformed input files out (they are named in the report).
        #[arg(long)]
        skip_bad: bool,
        /// Replace a report already in the output directory.
        #[arg(long)]
        force: bool,
        /// Report title.
        #[arg(long)]
        title: Option<String>,
        /// Test whose latency distributions are plotted on the percentile scale (default:
        /// the first latency test, at up to five sizes).
        #[arg(long)]
        dist_test: Option<String>,
        /// Message size of a plotted distribution (64, 4K, ...); repeat to overlay several.
        #[arg(long, requires = "dist_test", value_parser = parse_size)]
        dist_size: Vec<u64>,
        /// Stream input files of at least this size instead of reading them whole
        /// (bounded memory for large sweeps; they still count against --max-input-bytes).
        #[arg(long, hide = true, default_value = "256M", value_parser = parse_size)]
        stream_above: u64,
        /// The fabric plan: which NIC belongs on which leaf port, groups, tiers, racks,
        /// switch links (docs/structure.md). Without it, groups come from discovery or
        /// the latency matrix.
        #[arg(long, value_name = "FILE")]
        plan: Option<PathBuf>,
        /// Format of --plan: native (TOML), slurm (topology.conf), netbox (cable CSV),
        /// ibnetdiscover (its output, the as-built fabric taken as golden). Default: by
        /// extension, then content.
        #[arg(long, value_name = "FORMAT")]
        plan_format: Option<String>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Write a new Ed25519 signing key pair (KEY, mode 0600, and KEY.pub).
    Keygen {
        /// Private key path; KEY.pub is written beside it. Never overwritten.
        key: PathBuf,
        /// Comment stored in the key.
        #[arg(long, default_value = "fabcheck report signing key")]
        comment: String,
    },
    /// Check a signed report: the signature of its manifest and every file hash.
    Verify {
        /// Report directory.
        dir: PathBuf,
        /// The signer's public key (KEY.pub). Without it, the key in the bundle's
        /// allowed_signers is used and its fingerprint printed: compare it with the one the
        /// signer published, or anyone could have re-signed the bundle.
        #[arg(long)]
        key: Option<PathBuf>,
    },
    /// Compare a run with a baseline; exit 1 on any regression beyond noise.
    Compare {
        /// Baseline result file or directory (several nights in one directory widen the
        /// noise floor honestly).
        baseline: PathBuf,
        /// Current result file or directory.
        current: PathBuf,
        /// A change must exceed this percentage of the baseline to count.
        #[arg(long, default_value_t = 5.0)]
        tolerance: f64,
        /// ... and this many standard deviations of the baseline's own spread.
        #[arg(long, default_value_t = 3.0)]
        sigmas: f64,
        #[arg(long, value_enum, default_value_t = CompareFormat::Text)]
        format: CompareFormat,
        /// Write here instead of standard output.
        #[arg(short, long)]
        out: Option<PathBuf>,
        /// Leave malformed input files out.
        #[arg(long)]
        skip_bad: bool,
        /// Directory whose compare.md / compare.junit.xml replace the built-in ones.
        #[arg(long)]
        templates: Option<PathBuf>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Trend report over a nightly history: each key figure over the nights beside the
    /// baseline and the profile bound, slow drifts (a fitted slope over a window), failed
    /// and regressed nights, the pairs and nodes that changed most. Exit 1 when anything
    /// is flagged.
    Trend {
        /// History directories (one directory per night, as examples/nightly.sbatch writes
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
    },
    /// Export metrics (Prometheus node_exporter textfile format).
    Export {
        /// Result files and directories.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(long, default_value = "prometheus")]
        format: String,
        /// Also export the verdict of this delivery profile.
        #[arg(short, long)]
        profile: Option<String>,
        /// Write here (atomically) instead of standard output, e.g.
        /// /var/lib/node_exporter/textfile/fabcheck.prom.
        #[arg(short, long)]
        out: Option<PathBuf>,
        #[arg(long)]
        skip_bad: bool,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Delivery profiles: the shipped ones, and what a profile needs run to be judged.
    Profile {
        #[command(subcommand)]
        cmd: ProfileCmd,
    },
}

#[derive(Subcommand)]
enum ProfileCmd {
    /// List the shipped profiles.
    List,
    /// Every check of a profile with the run of the suite that feeds it, by stage, and
    /// the distinct runs once each: what an acceptance run must do for every check to be
    /// judged.
    Explain {
        /// A TOML file, or a shipped profile by name.
        profile: String,
    },
}

/// Ceilings on what a command reads (README, Limits).
#[derive(Args)]
struct LimitArgs {
    /// Largest input file, and largest total of all input files, read (64M, 1G, ...).
    /// The decoded documents may take up to twice this in memory.
    #[arg(long, value_name = "SIZE", value_parser = parse_size,
          default_value = "256M")]
    max_input_bytes: u64,
}

impl LimitArgs {
    fn limits(&self) -> input::Limits {
        input::Limits {
            input_bytes: self.max_input_bytes,
            ..input::Limits::default()
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum CompareFormat {
    Text,
    Markdown,
    Junit,
}

fn parse_size(s: &str) -> Result<u64, String> {
    results::units::parse_size(s)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.cmd) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("aggregate: {}", terminal(&e.to_string()));
            ExitCode::from(&e)
        }
    }
}

fn write_out(out: &Option<PathBuf>, bytes: &[u8]) -> Result<()> {
    match out {
        Some(p) => results::write::write_atomic(p, bytes)
            .map_err(|e| Error::Output(format!("{}: cannot write: {e}", p.display()))),
        None => {
            use std::io::Write;
            std::io::stdout()
                .write_all(bytes)
                .map_err(|e| Error::Output(format!("standard output: {e}")))
        }
    }
}

fn run(cmd: Cmd) -> Result<u8> {
    match cmd {
        Cmd::Report {
            inputs,
            profile,
            out,
            templates,
            sign,
            identity,
            skip_bad,
            force,
            title,
            dist_test,
            dist_size,
            stream_above,
            plan,
            plan_format,
            limits,
        } => {
            let opts = report::Options {
                plan,
                plan_format,
                inputs,
                profile,
                out,
                templates,
                sign,
                identity,
                skip_bad,
                force,
                title,
                dist: dist_test.map(|t| (t, dist_size)),
                limits: limits.limits(),
                stream_above,
            };
            let o = report::run(&opts)?;
            let v = &o.verdict;
            for c in &v.checks {
                let measured = c
                    .measured
                    .map(|m| format!("{} {}", judge::format_value(m), c.unit))
                    // Nothing judged: say what would feed the check.
                    .unwrap_or_else(|| c.worst_at.clone());
                println!(
                    "{}",
                    terminal(&format!(
                        "{:<8} {:<28} {measured} (bound {})",
                        c.status.as_str(),
                        c.id,
                        c.bound
                    ))
                );
                if let Some(w) = &c.warning {
                    println!("{:<8} {:<28} {w}", "WARNING", c.id);
                }
            }
            for line in &o.suspects {
                println!("{}", terminal(&format!("SUSPECT  {line}")));
            }
            if let Some((path, n)) = &o.retest {
                println!(
                    "{}",
                    terminal(&format!(
                        "retest: {} ({n} pair(s)): run them with --pattern file:{} over the \
                         same hosts, then report both runs together",
                        path.display(),
                        path.display()
                    ))
                );
            }
            println!("report: {}", o.dir.join("report.html").display());
            if let Some(fp) = &o.fingerprint {
                println!(
                    "signed: {} by {fp}; the customer verifies it in {} with {}=an \
                     allowed_signers file holding the key you publish (line: `{} ssh-ed25519 \
                     AAAA...`; the bundle's own {} only shows the bundle agrees with itself): {}",
                    o.dir.join(sign::SIGNATURE).display(),
                    o.dir.display(),
                    sign::SIGNERS_VAR,
                    opts.identity,
                    sign::ALLOWED_SIGNERS,
                    sign::verify_command(&opts.identity)
                );
            }
            println!(
                "verdict: {} ({} passed, {} failed, {} missing of {} checks; profile {})",
                v.overall,
                v.passed,
                v.failed,
                v.missing,
                v.checks.len(),
                terminal(&v.profile)
            );
            Ok(if v.pass() { exit::OK } else { exit::FAILED })
        }
        Cmd::Keygen { key, comment } => {
            let fp = sign::keygen(&key, &comment)?;
            println!(
                "private key: {} (mode 0600; keep it offline)",
                key.display()
            );
            println!("public key:  {}.pub", key.display());
            println!("fingerprint: {fp} (publish this so customers can check signatures)");
            Ok(exit::OK)
        }
        Cmd::Verify { dir, key } => {
            let public = key.as_deref().map(sign::read_public).transpose()?;
            let rep = sign::verify_bundle(&dir, public.as_ref())?;
            if public.is_none() {
                println!(
                    "key: {} from the bundle's {}; trust it only if it matches the signer's published fingerprint",
                    rep.fingerprint,
                    sign::ALLOWED_SIGNERS
                );
            } else {
                println!("key: {}", rep.fingerprint);
            }
            println!(
                "signature: {}",
                if rep.signature_ok { "good" } else { "BAD" }
            );
            for p in &rep.problems {
                println!("problem: {}", terminal(p));
            }
            for f in &rep.bad_files {
                println!("CHANGED: {}", terminal(f));
            }
            for f in &rep.unlisted {
                println!("not covered by the signature: {}", terminal(f));
            }
            if rep.ok() {
                println!("verified: {} files match the signed manifest", rep.files_ok);
                Ok(exit::OK)
            } else {
                println!("verification FAILED");
                Ok(exit::FAILED)
            }
        }
        Cmd::Compare {
            baseline,
            current,
            tolerance,
            sigmas,
            format,
            out,
            skip_bad,
            templates,
            limits,
        } => {
            let tpl = templates::Templates::load(templates.as_deref())?;
            let cmp = compare::run(&compare::Options {
                baseline: vec![baseline],
                current: vec![current],
                tolerance_pct: tolerance,
                sigmas,
                skip_bad,
                limits: limits.limits(),
            })?;
            let text = match format {
                CompareFormat::Text => terminal(&compare::text(&cmp)),
                CompareFormat::Markdown => tpl.render("compare.md", &cmp)?,
                CompareFormat::Junit => tpl.render("compare.junit.xml", &cmp)?,
            };
            write_out(&out, text.as_bytes())?;
            if out.is_some() {
                eprintln!(
                    "{}: {} regression(s) in {} metrics",
                    cmp.verdict,
                    cmp.regressions,
                    cmp.rows.len()
                );
            }
            Ok(if cmp.regressions > 0 {
                exit::FAILED
            } else {
                exit::OK
            })
        }
        Cmd::Trend {
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
        } => {
            let opts = trend::Options {
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
            };
            let o = trend::run(&opts)?;
            let t = &o.trend;
            // Night names, figure names and check ids come from inputs: printed through
            // the terminal's escaping, one line each.
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
            for l in lines {
                println!("{}", terminal(&l.replace(['\n', '\r'], " ")));
            }
            Ok(o.exit_code())
        }
        Cmd::Export {
            inputs,
            format,
            profile,
            out,
            skip_bad,
            limits,
        } => {
            let exporter = export::by_name(&format)?;
            let profile = profile.as_deref().map(profile::load).transpose()?;
            let set = input::load_with(&inputs, skip_bad, &limits.limits())?;
            let verdict = profile.as_ref().map(|p| {
                let t = tables::build(&set, p.line_rate_gbit_s);
                let mut v = judge::judge(p, &set.docs, &t);
                cluster::build(p, &set.docs).apply(&mut v);
                v
            });
            let bytes = exporter.serialize(&export::ExportData {
                docs: &set.docs,
                verdict: verdict.as_ref(),
            })?;
            for s in &set.skipped {
                eprintln!("aggregate: skipped {}", terminal(&s.to_string()));
            }
            write_out(&out, &bytes)?;
            Ok(exit::OK)
        }
        Cmd::Profile { cmd } => {
            match cmd {
                ProfileCmd::List => {
                    for (name, _) in profile::BUILTIN {
                        let p = profile::load(name)?;
                        println!("{name:<24} {}", terminal(&p.description));
                    }
                }
                ProfileCmd::Explain { profile } => {
                    print!("{}", terminal(&explain::explain(&profile::load(&profile)?)));
                }
            }
            Ok(exit::OK)
        }
    }
}

/// `--profile`'s help, naming every shipped profile from the one list of them.
fn profile_help() -> String {
    let names: Vec<&str> = profile::BUILTIN.iter().map(|(n, _)| *n).collect();
    format!(
        "Delivery profile: a TOML file, or a shipped one by name ({})",
        names.join(", ")
    )
}
