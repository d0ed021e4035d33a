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
    /// The tenants (docs/tenants.md): each pair's series gains initiator_tenant and
    /// responder_tenant labels. Default: the --plan's [[tenant]] tables, else none.
    #[arg(long)]
    tenants: Option<PathBuf>,
    /// A fabric plan whose [[tenant]] tables give the tenants (when no --tenants).
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Format of --plan: native (TOML), slurm (topology.conf), netbox (cable CSV),
    /// ibnetdiscover (default: from the file).
    #[arg(long)]
    plan_format: Option<String>,
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
            tenants,
            plan,
            plan_format,
            limits,
        } = self;
        let exporter = export::by_name(&format)?;
        let plan = reports::report::load_plan(plan.as_deref(), plan_format.as_deref())?;
        let tenants = reports::report::load_tenants(tenants.as_deref(), plan.as_ref())?;
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
            tenants: tenants.as_ref(),
        })?;
        for s in &set.skipped {
            eprintln!("aggregate: skipped {}", terminal(&s.to_string()));
        }
        write_out(&out, &bytes)?;
        Ok(exit::OK)
    }
}
