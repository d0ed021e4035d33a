//! `aggregate export`: metrics for Prometheus (node_exporter textfile).

use super::*;
use reports::export;
use verdict::profile;

/// Export metrics (Prometheus node_exporter textfile format).
#[derive(Args)]
pub struct ExportArgs {
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
}

impl ExportArgs {
    pub fn run(self) -> Result<u8> {
        let Self {
            inputs,
            format,
            profile,
            out,
            skip_bad,
            limits,
        } = self;
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
}
