//! `aggregate compare`: a run against a baseline: regressions beyond the baseline's own noise.

use super::*;
use reports::compare;

/// Compare a run with a baseline; exit 1 on any regression beyond noise.
#[derive(Args)]
pub struct CompareArgs {
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
}

impl CompareArgs {
    pub fn run(self) -> Result<u8> {
        let Self {
            baseline,
            current,
            tolerance,
            sigmas,
            format,
            out,
            skip_bad,
            templates,
            limits,
        } = self;
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
}
