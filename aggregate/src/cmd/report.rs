//! `aggregate report`: the acceptance report: judge the results against a profile, write and sign the bundle.

use super::*;
use reports::report;

/// Judge results against a delivery profile and write the report bundle.
#[derive(Args)]
pub struct ReportArgs {
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
    /// The tenants (docs/tenants.md): the isolation sweeps are judged against them
    /// (`[isolation]`). Default: the plan's [[tenant]] tables.
    #[arg(long, value_name = "FILE")]
    tenants: Option<PathBuf>,
    /// Judge and sign only this tenant's nodes, pairs and findings: its report holds no
    /// name, address, GUID or file of another tenant (the inputs in its bundle are the
    /// cut documents). Needs the tenants (--tenants or the plan's).
    #[arg(long, value_name = "NAME")]
    tenant: Option<String>,
    #[command(flatten)]
    limits: LimitArgs,
}

impl ReportArgs {
    /// Judges, writes (and signs) the bundle, then says the verdict on the terminal.
    pub fn run(self) -> Result<u8> {
        let opts = self.options();
        let o = report::run(&opts)?;
        print_outcome(&o, &opts.identity);
        Ok(if o.verdict.pass() {
            exit::OK
        } else {
            exit::FAILED
        })
    }

    /// The flags as the report's options.
    fn options(self) -> report::Options {
        let Self {
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
            tenants,
            tenant,
            limits,
        } = self;
        report::Options {
            plan,
            plan_format,
            tenants,
            tenant,
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
        }
    }
}

/// Every check's line, warnings, suspects, the retest list, where the report is, the
/// signature with how the customer verifies it, and the verdict.
fn print_outcome(o: &report::Outcome, identity: &str) {
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
            identity,
            sign::ALLOWED_SIGNERS,
            sign::verify_command(identity)
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
}
